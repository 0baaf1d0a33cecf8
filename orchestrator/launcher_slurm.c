/* launcher_slurm.c: the Slurm launcher -- the one file of dtctld that knows Slurm.
 *
 * Each attempt is one Slurm batch job submitted through libslurm
 * (slurm_submit_batch_job).  Its batch script is a loop that runs one
 * `srun --ntasks-per-node=1 dtagent ...` step per attempt, so Slurm places
 * one agent per node; the controller, not Slurm, owns restarts (requeue=0).
 * Attempts are watched with slurm_load_job and ended with slurm_kill_job.
 * Tested facts behind the choices here: shared/notes/slurm-testbed.md.
 *
 * The handle of an attempt is the Slurm job id in decimal ("1234").
 *
 * What the controller can rely on:
 *   submit  -1 errno EINVAL: Slurm refused the job for good (bad partition,
 *           more nodes than the partition has, ...); err says Slurm's reason
 *           ("Slurm cannot run this job: PartitionConfig (5 nodes requested,
 *           partition debug has 3)") -- meant for a 400 answer.
 *           -1 errno EAGAIN: slurmctld unreachable; nothing was queued; try
 *           again later rather than failing the attempt.
 *   poll    -1 errno EAGAIN while slurmctld is unreachable (backing off: no
 *           RPC before the next deadline, so it returns at once); keep the
 *           attempt as it is.  RUNNING until Slurm's COMPLETING flag clears.
 *   cancel  idempotent; -1 EAGAIN while slurmctld is unreachable.
 *
 * Slurm configuration: SLURM_CONF in dtctld's environment, else
 * /etc/slurm/slurm.conf.  Checked at create time: libslurm calls fatal() --
 * exit(1) of the whole daemon -- when it finds no configuration.
 *
 * dtctld.conf keys read here (all optional; man/dtctld.conf.5.in):
 *   SlurmAccount=NAME, SlurmQos=NAME, SlurmPartition=NAME (partition of
 *                         specs that name none)
 *   SlurmWarnSeconds=N    USR1 to the batch shell N s before the time limit
 *                         (Slurm's --signal=B:USR1@N); 0 disables; default
 *                         60.  Slurm checks limits about every 30 s, so the
 *                         signal comes up to 30 s late: keep N above 30.
 *                         The batch script forwards it to the agents.
 *   SlurmExtraArgs=ARGS   a subset of sbatch options (libslurm takes no
 *                         command line): --exclusive (the default: whole
 *                         nodes per job), --oversubscribe, --gres=,
 *                         --constraint=/-C, --mem=, --cpus-per-task=/-c,
 *                         --reservation=, --qos=/-q, --account=/-A,
 *                         --partition=/-p.  Anything else is refused.
 */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/errprintf.h"
#include "common/log.h"
#include "common/conf.h"
#include "orchestrator/launcher.h"

/* Exported by libslurm.so.38 but not declared in the 22.05 slurm.h. */
extern char *slurm_job_reason_string (enum job_state_reason inx);

static const int64_t default_warn_time_s = 60;

/* Backoff while slurmctld is unreachable (a restart takes a few seconds):
 * no RPC is tried before the next deadline, so a dead slurmctld does not
 * stall the single-threaded controller on every poll. */
static const double backoff_min_s = 0.5;
static const double backoff_max_s = 10.0;

/* Grace before the job is given up as "launch_failed": pending reasons that
 * no amount of waiting fixes.  Checked once right after submission, so the
 * job is refused at submission with Slurm's reason. */
static const enum job_state_reason hopeless_reasons[] = {
    WAIT_PART_NODE_LIMIT,       /* more nodes than the partition has */
    WAIT_PART_TIME_LIMIT,       /* longer than the partition allows */
    WAIT_PART_CONFIG,           /* requested partition configuration unavailable */
    FAIL_BAD_CONSTRAINTS,       /* constraints cannot be satisfied */
    WAIT_PART_DOWN,
    WAIT_PART_INACTIVE,
    FAIL_ACCOUNT,
    FAIL_QOS,
};

struct slurm_launcher {
    char *conf_path;
    char *controller_url;
    char *dtagent_path;
    char *state_dir;
    int64_t warn_time_s;
    /* from SlurmAccount, SlurmQos, SlurmPartition, SlurmExtraArgs */
    char *account;
    char *qos;
    char *partition;
    char *gres;                 /* tres_per_node: "gres:gpu:8,..." */
    char *features;
    char *reservation;
    uint64_t mem_mb;            /* 0: not set */
    uint16_t cpus_per_task;     /* 0: not set */
    bool exclusive;

    /* slurmctld reachability */
    bool down;                  /* last RPC failed with a communication error */
    double down_since;          /* monotonic seconds */
    double next_try;            /* no RPC before this */
    double backoff;
};

static double mono_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A communication error: slurmctld down, restarting, or too slow. */
static bool is_comm_error (int e)
{
    return (e >= SLURM_COMMUNICATIONS_CONNECTION_ERROR
                && e <= SLURM_COMMUNICATIONS_MISSING_SOCKET_ERROR)
        || (e >= SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR
                && e <= SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR)
        || e == SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
        || e == SLURM_PROTOCOL_AUTHENTICATION_ERROR
        || e == ESLURM_IN_STANDBY_MODE
        || e == ECONNREFUSED || e == ETIMEDOUT || e == ECONNRESET
        || e == EHOSTUNREACH || e == ENETUNREACH || e == EAGAIN;
}

/* Called before every RPC: -1 (EAGAIN) while backing off. */
static int ctld_gate (struct slurm_launcher *sl, dt_error_t *err)
{
    double now;

    if (!sl->down)
        return 0;
    now = mono_now ();
    if (now >= sl->next_try)
        return 0;
    return errnoprintf (err, EAGAIN,
                        "slurmctld unreachable for %.0fs, next try in %.1fs",
                        now - sl->down_since, sl->next_try - now);
}

/* Record the outcome of an RPC for the backoff: e == 0 means it answered. */
static void ctld_result (struct slurm_launcher *sl, int e)
{
    double now = mono_now ();

    if (e == 0 || !is_comm_error (e)) {
        if (sl->down)
            dt_log (LOG_NOTICE, "slurm: slurmctld reachable again after %.1fs",
                    now - sl->down_since);
        sl->down = false;
        sl->backoff = 0;
        return;
    }
    if (!sl->down) {
        sl->down = true;
        sl->down_since = now;
        sl->backoff = backoff_min_s;
        dt_log (LOG_WARNING, "slurm: slurmctld unreachable (%s); retrying with backoff",
                slurm_strerror (e));
    }
    else {
        sl->backoff *= 2;
        if (sl->backoff > backoff_max_s)
            sl->backoff = backoff_max_s;
        dt_log (LOG_INFO, "slurm: slurmctld still unreachable after %.0fs (%s)",
                now - sl->down_since, slurm_strerror (e));
    }
    sl->next_try = now + sl->backoff;
}

/* Quote 's' for a POSIX shell (single quotes).  Returns new string. */
static char *shell_quote (const char *s)
{
    size_t n = 3;
    const char *p;
    char *out, *q;

    for (p = s; *p; p++)
        n += (*p == '\'') ? 4 : 1;
    if (!(out = malloc (n)))
        return NULL;
    q = out;
    *q++ = '\'';
    for (p = s; *p; p++) {
        if (*p == '\'') {
            memcpy (q, "'\\''", 4);
            q += 4;
        }
        else
            *q++ = *p;
    }
    *q++ = '\'';
    *q = '\0';
    return out;
}

/* Replace every "%n" in 'path' by 'with'.  Returns new string. */
static char *subst_node (const char *path, const char *with)
{
    size_t n = strlen (path) * (strlen (with) + 1) + 1;
    char *out = malloc (n), *q = out;
    const char *p;

    if (!out)
        return NULL;
    for (p = path; *p; p++) {
        if (p[0] == '%' && p[1] == 'n') {
            q = stpcpy (q, with);
            p++;
        }
        else
            *q++ = *p;
    }
    *q = '\0';
    return out;
}

static void slurm_launcher_destroy (void *ctx)
{
    struct slurm_launcher *sl = ctx;
    int saved = errno;

    if (sl) {
        free (sl->conf_path);
        free (sl->controller_url);
        free (sl->dtagent_path);
        free (sl->state_dir);
        free (sl->account);
        free (sl->qos);
        free (sl->partition);
        free (sl->gres);
        free (sl->features);
        free (sl->reservation);
        free (sl);
    }
    errno = saved;
}

/* Replace *dst by a copy of 'val'.  -1 on ENOMEM. */
static int set_str (char **dst, const char *val)
{
    char *c = strdup (val);

    if (!c)
        return -1;
    free (*dst);
    *dst = c;
    return 0;
}

/* "--gres=gpu:8,nic:1" -> "gres:gpu:8,gres:nic:1" (as sbatch does). */
static int set_gres (struct slurm_launcher *sl, const char *val)
{
    char *copy = strdup (val), *tok, *save = NULL;
    char *out = calloc (1, strlen (val) * 2 + 16);
    int rc = -1;

    if (!copy || !out)
        goto done;
    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        if (*out)
            strcat (out, ",");
        if (strncmp (tok, "gres:", 5) != 0)
            strcat (out, "gres:");
        strcat (out, tok);
    }
    free (sl->gres);
    sl->gres = out;
    out = NULL;
    rc = 0;
done:
    free (copy);
    free (out);
    return rc;
}

/* Memory as sbatch reads it: number with optional K/M/G/T suffix (default M). */
static int parse_mem_mb (const char *val, uint64_t *mb)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull (val, &end, 10);
    if (errno || end == val)
        return -1;
    switch (*end) {
        case '\0': break;
        case 'M': case 'm': end++; break;
        case 'K': case 'k': v = (v + 1023) / 1024; end++; break;
        case 'G': case 'g': v *= 1024; end++; break;
        case 'T': case 't': v *= 1024 * 1024; end++; break;
        default: return -1;
    }
    if (*end != '\0' || v == 0)
        return -1;
    *mb = v;
    return 0;
}

/* SlurmExtraArgs: the sbatch options that mean something for our jobs. */
static int parse_extra_args (struct slurm_launcher *sl, const char *args, dt_error_t *err)
{
    char *copy, *save = NULL, *tok;
    int rc = -1;

    if (!(copy = strdup (args)))
        return errnoprintf (err, ENOMEM, "out of memory");
    for (tok = strtok_r (copy, " \t", &save); tok; tok = strtok_r (NULL, " \t", &save)) {
        char opt[64];
        const char *val = NULL, *eq = strchr (tok, '=');
        size_t olen = eq ? (size_t) (eq - tok) : strlen (tok);

        if (olen >= sizeof (opt))
            olen = sizeof (opt) - 1;
        memcpy (opt, tok, olen);
        opt[olen] = '\0';
        if (strcmp (opt, "--exclusive") == 0) {
            sl->exclusive = true;
            continue;
        }
        if (strcmp (opt, "--oversubscribe") == 0 || strcmp (opt, "-s") == 0) {
            sl->exclusive = false;
            continue;
        }
        /* Options with a value: "--opt=V", "--opt V", "-X V". */
        if (eq)
            val = eq + 1;
        else if (!(val = strtok_r (NULL, " \t", &save))) {
            errnoprintf (err, EINVAL, "SlurmExtraArgs: %s needs a value", opt);
            goto done;
        }
        int e = 0;
        if (strcmp (opt, "--gres") == 0)
            e = set_gres (sl, val);
        else if (strcmp (opt, "--constraint") == 0 || strcmp (opt, "-C") == 0)
            e = set_str (&sl->features, val);
        else if (strcmp (opt, "--reservation") == 0)
            e = set_str (&sl->reservation, val);
        else if (strcmp (opt, "--qos") == 0 || strcmp (opt, "-q") == 0)
            e = set_str (&sl->qos, val);
        else if (strcmp (opt, "--account") == 0 || strcmp (opt, "-A") == 0)
            e = set_str (&sl->account, val);
        else if (strcmp (opt, "--partition") == 0 || strcmp (opt, "-p") == 0)
            e = set_str (&sl->partition, val);
        else if (strcmp (opt, "--mem") == 0) {
            if (parse_mem_mb (val, &sl->mem_mb) < 0) {
                errnoprintf (err, EINVAL, "SlurmExtraArgs: --mem: bad size '%.40s'", val);
                goto done;
            }
        }
        else if (strcmp (opt, "--cpus-per-task") == 0 || strcmp (opt, "-c") == 0) {
            char *end;
            long v = strtol (val, &end, 10);
            if (*end || v < 1 || v > 65535) {
                errnoprintf (err, EINVAL, "SlurmExtraArgs: %s: bad count '%.40s'", opt, val);
                goto done;
            }
            sl->cpus_per_task = (uint16_t) v;
        }
        else {
            errnoprintf (err, EINVAL, "SlurmExtraArgs: unsupported option '%.40s' "
                         "(supported: --exclusive --oversubscribe --gres --constraint "
                         "--mem --cpus-per-task --reservation --qos --account --partition)", opt);
            goto done;
        }
        if (e < 0) {
            errnoprintf (err, ENOMEM, "out of memory");
            goto done;
        }
    }
    rc = 0;
done:
    free (copy);
    return rc;
}

static void *slurm_launcher_create (const struct launcher_conf *conf, dt_error_t *err)
{
    struct slurm_launcher *sl;
    const char *path, *v;
    struct stat sb;

    if (!conf->controller_url || !conf->dtagent_path) {
        errnoprintf (err, EINVAL, "slurm launcher: controller URL and dtagent path are required");
        return NULL;
    }
    if (!(sl = calloc (1, sizeof (*sl)))) {
        errnoprintf (err, errno, "slurm launcher: out of memory");
        return NULL;
    }
    /* The configuration must exist before the first libslurm call: without
     * one libslurm tries DNS SRV records and then calls fatal(). */
    path = getenv ("SLURM_CONF");
    if (!path || !*path)
        path = "/etc/slurm/slurm.conf";
    errno = 0;
    if (stat (path, &sb) < 0 || !S_ISREG (sb.st_mode) || access (path, R_OK) < 0) {
        errnoprintf (err, errno ? errno : EINVAL,
                     "slurm launcher: no Slurm configuration at %s "
                     "(set SLURM_CONF in dtctld's environment)", path);
        goto error;
    }
    if (!(sl->conf_path = strdup (path))
        || !(sl->controller_url = strdup (conf->controller_url))
        || !(sl->dtagent_path = strdup (conf->dtagent_path))
        || !(sl->state_dir = strdup (conf->state_dir ? conf->state_dir : "/tmp"))) {
        errnoprintf (err, ENOMEM, "slurm launcher: out of memory");
        goto error;
    }
    if (dt_conf_get_int (conf->conf, "SlurmWarnSeconds", default_warn_time_s,
                         0, 65535, &sl->warn_time_s, err) < 0)
        goto error;
    sl->exclusive = true;
    if ((v = dt_conf_get (conf->conf, "SlurmAccount", NULL)) && *v && set_str (&sl->account, v) < 0)
        goto nomem;
    if ((v = dt_conf_get (conf->conf, "SlurmQos", NULL)) && *v && set_str (&sl->qos, v) < 0)
        goto nomem;
    if ((v = dt_conf_get (conf->conf, "SlurmPartition", NULL)) && *v && set_str (&sl->partition, v) < 0)
        goto nomem;
    if ((v = dt_conf_get (conf->conf, "SlurmExtraArgs", NULL)) && parse_extra_args (sl, v, err) < 0)
        goto error;
    /* Every libslurm client honours SLURM_CONF; srun inside the jobs gets
     * slurmd's own path from slurmstepd. */
    setenv ("SLURM_CONF", sl->conf_path, 1);
    slurm_init (sl->conf_path);
    dt_log (LOG_INFO, "slurm: launcher ready (SLURM_CONF=%s, built against Slurm %d.%02d)",
            sl->conf_path, (int) SLURM_VERSION_MAJOR (SLURM_VERSION_NUMBER),
            (int) SLURM_VERSION_MINOR (SLURM_VERSION_NUMBER));
    return sl;
nomem:
    errnoprintf (err, ENOMEM, "slurm launcher: out of memory");
error:
    slurm_launcher_destroy (sl);
    return NULL;
}

/* The batch script: one srun step per attempt.  The loop is where the
 * in-allocation restart of issue 7 goes (the controller will direct the
 * next step); today each batch job runs exactly one step.
 *
 * SIGUSR1 (time-limit warning, sent to the batch shell only) is forwarded
 * to srun, which forwards it to every agent.  SIGTERM (scancel) is
 * forwarded too, so the agents stop their trainers. */
static char *make_script (struct slurm_launcher *sl, const struct launcher_req *req,
                          const char *step_out)
{
    char *agent = shell_quote (sl->dtagent_path);
    char *url = shell_quote (sl->controller_url);
    char *out = step_out ? shell_quote (step_out) : NULL;
    char *script = NULL;
    int total = req->nodes + req->spare_nodes;

    if (!agent || !url || (step_out && !out))
        goto done;
    if (asprintf (&script,
        "#!/bin/bash\n"
        "# dtctl attempt runner (job %" PRId64 ", attempt %d): one srun step per attempt.\n"
        "srun_pid=\n"
        "fwd () { [ -n \"$srun_pid\" ] && kill -\"$1\" \"$srun_pid\" 2>/dev/null; }\n"
        "trap 'echo \"dtctl: SIGUSR1 (time limit warning) at $(date +%%T)\"; fwd USR1' USR1\n"
        "trap 'fwd TERM' TERM\n"
        "echo \"dtctl: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, batch host $(hostname)\"\n"
        "nodes=%d\n"
        "step_exclude=\n"
        "run_step () {\n"
        "    srun --ntasks-per-node=1 --kill-on-bad-exit=0 -N\"$nodes\" -n\"$nodes\" \\\n"
        "        ${step_exclude:+--exclude=\"$step_exclude\"} %s%s \\\n"
        "        /bin/sh -c 'exec \"$0\" --controller \"$1\" --node \"$SLURMD_NODENAME\" --node-order \"$SLURM_NODEID\"' \\\n"
        "        %s %s &\n"
        "    srun_pid=$!\n"
        "    # wait returns early (status > 128) when a trapped signal arrives.\n"
        "    while :; do\n"
        "        wait \"$srun_pid\"; rc=$?\n"
        "        kill -0 \"$srun_pid\" 2>/dev/null || break\n"
        "    done\n"
        "    srun_pid=\n"
        "}\n"
        "# next_step: the controller directs in-allocation restarts (issue 7):\n"
        "# set DT_TOKEN, DT_ATTEMPT, nodes and step_exclude for the next attempt\n"
        "# and return 0, or return 1 to end the job.  Not wired yet.\n"
        "next_step () { return 1; }\n"
        "while :; do\n"
        "    run_step\n"
        "    echo \"dtctl: step of attempt $DT_ATTEMPT ended rc=$rc at $(date +%%T)\"\n"
        "    next_step || break\n"
        "done\n"
        "exit $rc\n",
        req->job_id, req->attempt, total,
        out ? "--open-mode=append --output=" : "", out ? out : "",
        agent, url) < 0)
        script = NULL;
done:
    free (agent);
    free (url);
    free (out);
    return script;
}

/* Environment of the batch job (and, through srun, of every agent). */
static char **make_env (struct slurm_launcher *sl, const struct launcher_req *req, int *count)
{
    size_t n = 0, cap = 8, i;
    char **env;
    const char *path = getenv ("PATH");

    if (req->env)
        while (req->env[n])
            n++;
    cap += n;
    if (!(env = calloc (cap + 1, sizeof (*env))))
        return NULL;
    i = 0;
    if (asprintf (&env[i++], "DT_TOKEN=%s", req->token ? req->token : "") < 0
        || asprintf (&env[i++], "DT_CONTROLLER=%s", sl->controller_url) < 0
        || asprintf (&env[i++], "DT_JOB=%" PRId64, req->job_id) < 0
        || asprintf (&env[i++], "DT_ATTEMPT=%d", req->attempt) < 0
        || asprintf (&env[i++], "PATH=%s", path ? path : "/usr/local/bin:/usr/bin:/bin") < 0
        || asprintf (&env[i++], "SLURM_CONF=%s", sl->conf_path) < 0)
        goto error;
    for (n = 0; req->env && req->env[n]; n++)
        if (!(env[i++] = strdup (req->env[n])))
            goto error;
    *count = (int) i;
    return env;
error:
    for (i = 0; i < cap; i++)
        free (env[i]);
    free (env);
    return NULL;
}

static void free_env (char **env)
{
    if (env) {
        for (char **p = env; *p; p++)
            free (*p);
        free (env);
    }
}

/* Comma-joined exclude list, or NULL when empty.  New string. */
static char *join_exclude (const char *const *exclude)
{
    size_t len = 1;
    char *s;

    if (!exclude || !exclude[0])
        return NULL;
    for (int i = 0; exclude[i]; i++)
        len += strlen (exclude[i]) + 1;
    if (!(s = calloc (1, len)))
        return NULL;
    for (int i = 0; exclude[i]; i++) {
        if (i)
            strcat (s, ",");
        strcat (s, exclude[i]);
    }
    return s;
}

static bool reason_hopeless (uint32_t reason)
{
    for (size_t i = 0; i < sizeof (hopeless_reasons) / sizeof (hopeless_reasons[0]); i++)
        if (reason == hopeless_reasons[i])
            return true;
    return false;
}

/* ", partition P has N nodes" for an error text, or "" if unknown. */
static void partition_size (const char *name, char *buf, size_t len)
{
    partition_info_msg_t *pm = NULL;

    if (!name || slurm_load_partitions ((time_t) 0, &pm, SHOW_ALL) != SLURM_SUCCESS)
        return;
    for (uint32_t i = 0; i < pm->record_count; i++) {
        if (pm->partition_array[i].name && strcmp (pm->partition_array[i].name, name) == 0) {
            snprintf (buf, len, ", partition %s has %u", name,
                      pm->partition_array[i].total_nodes);
            break;
        }
    }
    slurm_free_partition_info_msg (pm);
}

/* Right after submission: a job that Slurm accepted but can never start
 * (more nodes than the partition has, with EnforcePartLimits=NO, Slurm's
 * default) is cancelled and refused, with Slurm's reason. */
static int check_startable (struct slurm_launcher *sl, uint32_t jobid, dt_error_t *err)
{
    job_info_msg_t *msg = NULL;
    int rc = 0;

    if (slurm_load_job (&msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS || msg->record_count < 1)
        goto done;      /* cannot tell: let poll find out */
    slurm_job_info_t *j = &msg->job_array[0];
    if ((j->job_state & JOB_STATE_BASE) == JOB_PENDING && reason_hopeless (j->state_reason)) {
        char part[96] = "";
        partition_size (j->partition, part, sizeof (part));
        rc = errnoprintf (err, EINVAL, "Slurm cannot run this job: %s%s%s (%u nodes requested%s)",
                          slurm_job_reason_string (j->state_reason),
                          j->state_desc ? ": " : "", j->state_desc ? j->state_desc : "",
                          j->num_nodes, part);
        if (slurm_kill_job (jobid, SIGKILL, 0) != SLURM_SUCCESS)
            dt_log (LOG_WARNING, "slurm: cannot cancel refused job %u: %s",
                    jobid, slurm_strerror (slurm_get_errno ()));
    }
done:
    slurm_free_job_info_msg (msg);
    return rc;
}

static int slurm_launcher_submit (void *ctx, const struct launcher_req *req,
                                  char handle[LAUNCHER_HANDLE_MAX], dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    job_desc_msg_t d;
    submit_response_msg_t *resp = NULL;
    char name[64], *script = NULL, *exc = NULL, *batch_out = NULL, *step_out = NULL;
    char *out_path = NULL;
    char **env = NULL;
    int envc = 0, total, rc = -1;

    total = req->nodes + req->spare_nodes;
    if (req->nodes < 1 || req->spare_nodes < 0 || total > 100000)
        return errnoprintf (err, EINVAL, "nodes: must be >= 1 (got %d, spares %d)",
                            req->nodes, req->spare_nodes);
    if (ctld_gate (sl, err) < 0)
        return -1;

    /* Output: the batch shell's own lines go to "<output with %n=batch>",
     * each agent's to "<output with %n=its node>" (srun's %N). */
    if (req->output && *req->output)
        out_path = strdup (req->output);
    else if (asprintf (&out_path, "%s/dt-%" PRId64 "-a%d-%%n.out", sl->state_dir,
                       req->job_id, req->attempt) < 0)
        out_path = NULL;
    if (!out_path
        || !(batch_out = subst_node (out_path, "batch"))
        || !(step_out = subst_node (out_path, "%N"))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto done;
    }
    if (!(script = make_script (sl, req, strcmp (batch_out, step_out) ? step_out : NULL))
        || !(env = make_env (sl, req, &envc))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto done;
    }
    exc = join_exclude (req->exclude);
    snprintf (name, sizeof (name), "dt-%" PRId64 "-a%d", req->job_id, req->attempt);

    slurm_init_job_desc_msg (&d);
    d.name = name;
    d.comment = (char *) (req->job_name ? req->job_name : "");
    d.script = script;
    d.environment = env;
    d.env_size = (uint32_t) envc;
    d.min_nodes = d.max_nodes = (uint32_t) total;
    d.num_tasks = (uint32_t) total;
    d.ntasks_per_node = 1;
    if (sl->exclusive)
        d.shared = JOB_SHARED_NONE;
    if (req->partition && *req->partition)
        d.partition = (char *) req->partition;
    else if (sl->partition)
        d.partition = sl->partition;
    if (sl->account)
        d.account = sl->account;
    if (sl->qos)
        d.qos = sl->qos;
    if (sl->gres)
        d.tres_per_node = sl->gres;
    if (sl->features)
        d.features = sl->features;
    if (sl->reservation)
        d.reservation = sl->reservation;
    if (sl->mem_mb)
        d.pn_min_memory = sl->mem_mb;
    if (sl->cpus_per_task)
        d.cpus_per_task = sl->cpus_per_task;
    if (req->time_limit_s > 0) {
        d.time_limit = (uint32_t) ((req->time_limit_s + 59) / 60);
        /* Warn before the end: batch shell only (Slurm's --signal=B:USR1@N). */
        if (sl->warn_time_s > 0) {
            d.warn_signal = SIGUSR1;
            d.warn_time = (uint16_t) sl->warn_time_s;
            d.warn_flags = KILL_JOB_BATCH;
        }
    }
    if (exc)
        d.exc_nodes = exc;
    d.work_dir = (char *) (req->workdir && *req->workdir ? req->workdir : sl->state_dir);
    d.std_out = batch_out;
    d.open_mode = OPEN_MODE_APPEND;
    d.user_id = req->uid;
    d.group_id = req->gid;
    /* The controller owns restarts: never requeue.  With spares, a failed
     * node leaves the allocation instead of ending it (in-allocation
     * restart, issue 7). */
    d.requeue = 0;
    d.kill_on_node_fail = req->spare_nodes > 0 ? 0 : 1;

    if (slurm_submit_batch_job (&d, &resp) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        errnoprintf (err, is_comm_error (e) ? EAGAIN : EINVAL,
                     "Slurm refused the job: %s", slurm_strerror (e));
        goto done;
    }
    ctld_result (sl, 0);
    if (check_startable (sl, resp->job_id, err) < 0)
        goto done;
    snprintf (handle, LAUNCHER_HANDLE_MAX, "%u", resp->job_id);
    dt_log (LOG_INFO, "slurm: job %" PRId64 " attempt %d is Slurm job %u (%d nodes%s%s)",
            req->job_id, req->attempt, resp->job_id, total,
            exc ? ", excluding " : "", exc ? exc : "");
    rc = 0;
done:
    if (resp)
        slurm_free_submit_response_response_msg (resp);
    free (script);
    free (exc);
    free (batch_out);
    free (step_out);
    free (out_path);
    free_env (env);
    return rc;
}

static int parse_handle (const char *handle, uint32_t *jobid, dt_error_t *err)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = handle ? strtoul (handle, &end, 10) : 0;
    if (!handle || errno || end == handle || *end != '\0' || v == 0 || v > UINT32_MAX)
        return errnoprintf (err, EINVAL, "slurm launcher: bad handle '%s' (want a Slurm job id)",
                            handle ? handle : "(null)");
    *jobid = (uint32_t) v;
    return 0;
}

/* Slurm's exit status word -> a shell-style code. */
static int exit_code_of (uint32_t status)
{
    if (WIFEXITED (status))
        return WEXITSTATUS (status);
    if (WIFSIGNALED (status))
        return 128 + WTERMSIG (status);
    return -1;
}

/* The cause word of a finished Slurm job state. */
static const char *cause_of (uint32_t base, int exit_code)
{
    switch (base) {
        case JOB_COMPLETE:
            return exit_code == 0 ? "completed" : "failed";
        case JOB_CANCELLED:
            return "cancelled";
        case JOB_NODE_FAIL:
            return "slurm_node_fail";
        case JOB_TIMEOUT:
        case JOB_DEADLINE:
            return "time_limit";
        case JOB_PREEMPTED:
            return "preempted";
        case JOB_BOOT_FAIL:
            return "launch_failed";
        case JOB_FAILED:
        case JOB_OOM:
        default:
            return "failed";
    }
}

static const char *state_name (uint32_t base)
{
    switch (base) {
        case JOB_PENDING:   return "PENDING";
        case JOB_RUNNING:   return "RUNNING";
        case JOB_SUSPENDED: return "SUSPENDED";
        case JOB_COMPLETE:  return "COMPLETED";
        case JOB_CANCELLED: return "CANCELLED";
        case JOB_FAILED:    return "FAILED";
        case JOB_TIMEOUT:   return "TIMEOUT";
        case JOB_NODE_FAIL: return "NODE_FAIL";
        case JOB_PREEMPTED: return "PREEMPTED";
        case JOB_BOOT_FAIL: return "BOOT_FAIL";
        case JOB_DEADLINE:  return "DEADLINE";
        case JOB_OOM:       return "OUT_OF_MEMORY";
        default:            return "UNKNOWN";
    }
}

static int slurm_launcher_poll (void *ctx, const char *handle, struct launcher_status *st,
                                dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    job_info_msg_t *msg = NULL;
    slurm_job_info_t *j;
    uint32_t jobid, base;
    bool completing;

    memset (st, 0, sizeof (*st));
    st->exit_code = -1;
    if (parse_handle (handle, &jobid, err) < 0)
        return -1;
    st->slurm_job_id = jobid;
    if (ctld_gate (sl, err) < 0)
        return -1;
    if (slurm_load_job (&msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        if (e == ESLURM_INVALID_JOB_ID) {
            /* Purged after MinJobAge, or never existed (state lost). */
            st->state = LAUNCHER_ENDED;
            snprintf (st->cause, sizeof (st->cause), "lost");
            snprintf (st->detail, sizeof (st->detail),
                      "Slurm no longer knows job %u", jobid);
            return 0;
        }
        return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                            "slurm_load_job %u: %s", jobid, slurm_strerror (e));
    }
    ctld_result (sl, 0);
    if (msg->record_count < 1) {
        slurm_free_job_info_msg (msg);
        st->state = LAUNCHER_ENDED;
        snprintf (st->cause, sizeof (st->cause), "lost");
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u not found", jobid);
        return 0;
    }
    j = &msg->job_array[0];
    base = j->job_state & JOB_STATE_BASE;
    completing = (j->job_state & JOB_COMPLETING) != 0;
    if (j->nodes)
        snprintf (st->nodelist, sizeof (st->nodelist), "%s", j->nodes);
    if (j->batch_host)
        snprintf (st->batch_host, sizeof (st->batch_host), "%s", j->batch_host);

    if (base == JOB_PENDING) {
        st->state = LAUNCHER_PENDING;
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u PENDING (%s)",
                  jobid, slurm_job_reason_string (j->state_reason));
    }
    else if (base == JOB_RUNNING || base == JOB_SUSPENDED || completing) {
        /* A job is over only when COMPLETING has cleared: until then some
         * of its processes may still run. */
        st->state = LAUNCHER_RUNNING;
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u %s%s",
                  jobid, state_name (base), completing ? "+COMPLETING" : "");
    }
    else {
        st->state = LAUNCHER_ENDED;
        st->exit_code = exit_code_of (j->exit_code);
        snprintf (st->cause, sizeof (st->cause), "%s", cause_of (base, st->exit_code));
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u %s reason %s exit %d",
                  jobid, state_name (base), slurm_job_reason_string (j->state_reason),
                  st->exit_code);
    }
    slurm_free_job_info_msg (msg);
    return 0;
}

static int slurm_launcher_cancel (void *ctx, const char *handle, int flags, dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    uint32_t jobid;

    if (parse_handle (handle, &jobid, err) < 0)
        return -1;
    if (ctld_gate (sl, err) < 0)
        return -1;
    /* SIGKILL through slurmctld: each slurmd sends SIGTERM, then SIGKILL
     * after KillWait, and proctrack/cgroup catches every process.  With
     * KEEP_ALLOC only the steps die; the batch script's loop then decides
     * (today it ends the job; issue 7 starts the next step there). */
    uint16_t kflags = (flags & LAUNCHER_CANCEL_KEEP_ALLOC) ? KILL_STEPS_ONLY : 0;
    if (slurm_kill_job (jobid, SIGKILL, kflags) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        if (e == ESLURM_ALREADY_DONE || e == ESLURM_INVALID_JOB_ID)
            return 0;
        return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                            "slurm_kill_job %u: %s", jobid, slurm_strerror (e));
    }
    ctld_result (sl, 0);
    dt_log (LOG_INFO, "slurm: cancelled %s of Slurm job %u",
            kflags ? "the steps" : "all", jobid);
    return 0;
}

const struct launcher_ops launcher_slurm_ops = {
    .name = "slurm",
    .create = slurm_launcher_create,
    .destroy = slurm_launcher_destroy,
    .submit = slurm_launcher_submit,
    .poll = slurm_launcher_poll,
    .cancel = slurm_launcher_cancel,
};
