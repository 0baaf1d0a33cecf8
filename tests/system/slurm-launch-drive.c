/* slurm-launch-drive.c: drive orchestrator/launcher_slurm.c from the shell,
 * without the controller, against a real Slurm (the testbed).  Used by
 * t0201-slurm-launcher.t.
 *
 *   slurm-launch-drive [CONF_TEXT] submit AGENT URL NODES [SPARES [EXCLUDE [TIME_S
 * [WORKDIR [OUTPUT]]]]] prints the handle slurm-launch-drive [CONF_TEXT] poll HANDLE
 *       prints "state=.. cause=.. exit=.. jobid=.. nodes=.. batch_host=.. detail=.."
 *   slurm-launch-drive [CONF_TEXT] wait HANDLE pending|running|ended SECS
 *       polls every 50 ms until the state is reached; prints as poll
 *   slurm-launch-drive [CONF_TEXT] cancel HANDLE
 *
 * CONF_TEXT is dtctld.conf text given as "--conf=Key=Value;Key=Value".
 * EXCLUDE is comma-separated or "-".  Exit 0 ok, 1 error (message on stderr).
 */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/conf.h"
#include "orchestrator/launcher.h"

static const char *const known_keys[] = { "SlurmAccount",     "SlurmQos",
                                          "SlurmPartition",   "SlurmExtraArgs",
                                          "SlurmWarnSeconds", NULL };

static const char *state_str (enum launcher_state s)
{
    return s == LAUNCHER_PENDING   ? "pending"
           : s == LAUNCHER_RUNNING ? "running"
                                   : "ended";
}

static void print_status (const struct launcher_status *st)
{
    printf ("state=%s cause=%s exit=%d jobid=%lld nodes=%s batch_host=%s detail=%s\n",
            state_str (st->state), st->cause[0] ? st->cause : "-", st->exit_code,
            (long long)st->sched_id, st->nodelist[0] ? st->nodelist : "-",
            st->batch_host[0] ? st->batch_host : "-", st->detail);
}

int main (int argc, char **argv)
{
    const struct launcher_ops *ops = &launcher_slurm_ops;
    char conftext[1024] = "";
    dt_error_t err;
    dt_conf_t *conf;
    void *ctx;
    int a = 1, rc = 1;

    dt_log_init ("slurm-launch-drive", DT_LOG_STDERR, LOG_INFO);
    if (a < argc && strncmp (argv[a], "--conf=", 7) == 0) {
        snprintf (conftext, sizeof (conftext), "%s", argv[a] + 7);
        for (char *p = conftext; *p; p++)
            if (*p == ';')
                *p = '\n';
        a++;
    }
    if (a >= argc)
        log_msg_exit ("usage: see the comment at the top of slurm-launch-drive.c");
    if (!(conf = dt_conf_parse ("conf", conftext, known_keys, &err)))
        log_msg_exit ("%s", err.text);

    char *cwd = getcwd (NULL, 0);
    struct launcher_conf lc = {
        .controller_url = "http://10.77.0.1:1",
        .dtagent_path = "/bin/true",
        .state_dir = cwd,
        .conf = conf,
    };
    const char *cmd = argv[a++];
    if (strcmp (cmd, "submit") == 0) {
        if (argc - a < 3)
            log_msg_exit (
              "submit AGENT URL NODES [SPARES [EXCLUDE [TIME_S [WORKDIR [OUTPUT]]]]]");
        lc.dtagent_path = argv[a];
        lc.controller_url = argv[a + 1];
    }
    if (!(ctx = ops->create (&lc, &err)))
        log_msg_exit ("%s", err.text);

    if (strcmp (cmd, "submit") == 0) {
        char *excl[64] = { NULL };
        char exbuf[1024] = "";
        const char *envv[] = { "DT_TEST_VAR=hello world", NULL };
        int ne = 0;
        if (argc - a > 4 && strcmp (argv[a + 4], "-") != 0) {
            snprintf (exbuf, sizeof (exbuf), "%s", argv[a + 4]);
            for (char *t = strtok (exbuf, ","); t && ne < 63; t = strtok (NULL, ","))
                excl[ne++] = t;
        }
        struct launcher_req req = {
            .job_id = 7,
            .attempt = 1,
            .job_name = "drive",
            .token = "0123456789abcdef",
            .uid = getuid (),
            .gid = getgid (),
            .nodes = atoi (argv[a + 2]),
            .spare_nodes = argc - a > 3 ? atoi (argv[a + 3]) : 0,
            .ranks_per_node = 1,
            .time_limit_s = argc - a > 5 ? atoll (argv[a + 5]) : 0,
            .exclude = (const char *const *)excl,
            .workdir = argc - a > 6 ? argv[a + 6] : cwd,
            .output = argc - a > 7 ? argv[a + 7] : NULL,
            .env = envv,
        };
        char handle[LAUNCHER_HANDLE_MAX];
        if (ops->submit (ctx, &req, handle, &err) < 0)
            fprintf (stderr, "submit: %s\n", err.text);
        else {
            printf ("%s\n", handle);
            rc = 0;
        }
    }
    else if (strcmp (cmd, "poll") == 0 && a < argc) {
        struct launcher_status st;
        if (ops->poll (ctx, argv[a], &st, &err) < 0)
            fprintf (stderr, "poll: %s\n", err.text);
        else {
            print_status (&st);
            rc = 0;
        }
    }
    else if (strcmp (cmd, "wait") == 0 && argc - a >= 3) {
        struct launcher_status st;
        const char *want = argv[a + 1];
        double secs = atof (argv[a + 2]), waited = 0;
        memset (&st, 0, sizeof (st));
        while (waited <= secs) {
            if (ops->poll (ctx, argv[a], &st, &err) < 0)
                fprintf (stderr, "poll: %s\n", err.text);
            else if (strcmp (state_str (st.state), want) == 0) {
                rc = 0;
                break;
            }
            usleep (50000);
            waited += 0.05;
        }
        print_status (&st);
        if (rc)
            fprintf (stderr, "wait: not %s after %.1fs\n", want, secs);
    }
    else if (strcmp (cmd, "cancel") == 0 && a < argc) {
        if (ops->cancel (ctx, argv[a], 0, &err) < 0)
            fprintf (stderr, "cancel: %s\n", err.text);
        else
            rc = 0;
    }
    else
        fprintf (stderr, "unknown command or missing arguments: %s\n", cmd);
    ops->destroy (ctx);
    dt_conf_destroy (conf);
    free (cwd);
    return rc;
}
