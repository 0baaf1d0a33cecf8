/* launcher_slurm.c: the Slurm launcher -- the one file of dtctld that knows Slurm.
 *
 * An allocation is one Slurm batch job submitted through libslurm
 * (slurm_submit_batch_job).  Its batch script is a loop that runs one
 * `srun --ntasks-per-node=1 dtagent ...` step per attempt, so Slurm places
 * one agent per node; the controller, not Slurm, owns restarts (requeue=0).
 * A job with spare nodes gets nodes + spares with no-kill semantics, and
 * after a failure its next attempt runs as a new step of the same
 * allocation (in-allocation restart, issue 7): cancel with KEEP_ALLOC ends
 * the step without wedging the allocation (a dead node is first removed
 * from it: shrink_alloc, end_steps), submit with reuse checks that the
 * allocation still has enough live nodes and its batch host, and the batch
 * script learns what to run from POST /v1/alloc/next (allocapi.c).
 * Otherwise -- or when that check fails -- the allocation ends and the
 * attempt gets a new Slurm job, excluding the nodes found dead.
 * Attempts are watched with slurm_load_job / slurm_get_job_steps (a step is
 * named dt-<job>-a<attempt>) and ended with slurm_kill_job.  Tested facts
 * behind the choices here: shared/notes/slurm-testbed.md.
 *
 * The handle of an attempt is the Slurm job id in decimal ("1234") for the
 * attempt that created the allocation, "1234:<attempt>" for later steps.
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
#include <fcntl.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

    /* Steps of attempts inside allocations (in-allocation restart). */
    struct step_track *tracks;
};

/* What the launcher remembers of one attempt's step: poll must tell "not
 * started yet" from "ended" while the allocation lives on, and an attempt
 * ended with KEEP_ALLOC is over for the controller before its step is. */
struct step_track {
    struct step_track *next;
    uint32_t jobid;
    int attempt;
    bool seen;                  /* its step was seen running */
    bool kept;                  /* cancelled with LAUNCHER_CANCEL_KEEP_ALLOC */
    double used;                /* mono time of the last use (garbage collection) */
};

/* Seconds a slurmd gets to accept a TCP connection before its node counts
 * as dead (see node_probe).  Blocks the controller at most this long, once
 * per failure. */
static const int probe_timeout_ms = 300;

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
    if (errno || end == val || strchr (val, '-'))   /* strtoull takes "-3" */
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

/* The batch script: the loop of the allocation.  It runs one srun step
 * per attempt, named dt-<job>-a<attempt> (poll finds an attempt's step by
 * that name), and asks the controller what next (POST /v1/alloc/next,
 * orchestrator/allocapi.c) four times a second: run the next attempt as a
 * new step (in-allocation restart, issue 7: its token, node count and the
 * nodes to avoid), wait, or exit.  It never kills a step itself: a step
 * spanning a dead node must end through Slurm (see end_steps), and a new
 * step is exclusive, so Slurm starts it only once the old one is gone.
 * The allocation's token is the first attempt's; the controller accepts it
 * on that route only, and only for this allocation.
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
        "# dtctl allocation runner (job %" PRId64 ", first attempt %d): one srun step per\n"
        "# attempt, as dtctld directs (POST /v1/alloc/next).\n"
        "url=%s\n"
        "agent=%s\n"
        "alloc_token=$DT_TOKEN\n"
        "nodes=%d\n"
        "step_exclude=\n"
        "srun_pid=\n"
        "log () { echo \"dtctl: $(date +%%T.%%3N) $*\"; }\n"
        "fwd () { [ -n \"$srun_pid\" ] && kill -\"$1\" \"$srun_pid\" 2>/dev/null; }\n"
        "trap 'log \"SIGUSR1 (time limit warning)\"; fwd USR1' USR1\n"
        "trap 'fwd TERM' TERM\n"
        "log \"Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, batch host $(hostname)\"\n"
        "start_step () {\n"
        "    srun --ntasks-per-node=1 --kill-on-bad-exit=0 -N\"$nodes\" -n\"$nodes\" \\\n"
        "        -J \"dt-$DT_JOB-a$DT_ATTEMPT\" ${step_exclude:+--exclude=\"$step_exclude\"} %s%s \\\n"
        "        /bin/sh -c 'exec \"$0\" --controller \"$1\" --node \"$SLURMD_NODENAME\" --node-order \"$SLURM_NODEID\"' \\\n"
        "        \"$agent\" \"$url\" &\n"
        "    srun_pid=$!\n"
        "    log \"attempt $DT_ATTEMPT: step on $nodes nodes${step_exclude:+, excluding $step_exclude}\"\n"
        "}\n"
        "# The step's exclusions: the controller's list plus the nodes Slurm\n"
        "# reports dead, both only where they are in the allocation.\n"
        "step_excludes () {\n"
        "    local alloc bad x out=\n"
        "    alloc=$(scontrol show hostnames \"$(squeue -h -j \"$SLURM_JOB_ID\" -o %%N)\" 2>/dev/null)\n"
        "    bad=$(sinfo -h -N -t down,no_respond,fail,drain -o %%N 2>/dev/null)\n"
        "    for x in $(echo \"$1\" | tr ',' ' ') $bad; do\n"
        "        echo \"$alloc\" | grep -qx -- \"$x\" || continue\n"
        "        case \",$out,\" in *\",$x,\"*) ;; *) out=${out:+$out,}$x ;; esac\n"
        "    done\n"
        "    echo \"$out\"\n"
        "}\n"
        "ask () {\n"
        "    curl -sf --max-time 5 -X POST -H \"Authorization: Bearer $alloc_token\" \\\n"
        "        -H 'Content-Type: application/json' \\\n"
        "        -d \"{\\\"slurm_job_id\\\": $SLURM_JOB_ID, \\\"attempt\\\": $DT_ATTEMPT, \\\"step_running\\\": $1}\" \\\n"
        "        \"$url/v1/alloc/next?format=sh\"\n"
        "}\n"
        "rc=0\n"
        "unreachable=0\n"
        "answered=0\n"
        "start_step\n"
        "while :; do\n"
        "    running=false\n"
        "    if [ -n \"$srun_pid\" ]; then\n"
        "        if kill -0 \"$srun_pid\" 2>/dev/null; then running=true\n"
        "        else wait \"$srun_pid\"; rc=$?; srun_pid=; log \"step of attempt $DT_ATTEMPT ended rc=$rc\"; fi\n"
        "    fi\n"
        "    action=; a_attempt=; a_token=; a_nodes=; a_exclude=\n"
        "    if ans=$(ask $running); then\n"
        "        unreachable=0; answered=1\n"
        "        while IFS='=' read -r k v; do\n"
        "            case $k in\n"
        "                action) action=$v ;; attempt) a_attempt=$v ;; token) a_token=$v ;;\n"
        "                nodes) a_nodes=$v ;; exclude) a_exclude=$v ;;\n"
        "            esac\n"
        "        done <<< \"$ans\"\n"
        "    else\n"
        "        unreachable=$((unreachable + 1))\n"
        "        # The controller gone for ~10 minutes and no step left: give up.\n"
        "        if ! $running && [ $unreachable -gt 2400 ]; then log \"controller unreachable, exiting\"; break; fi\n"
        "        # No controller ever answered (the launcher driven on its own):\n"
        "        # a plain batch job, which ends with its step.\n"
        "        if ! $running && [ $answered -eq 0 ] && [ $unreachable -gt 8 ]; then\n"
        "            log \"no controller answered: ending with the step's status $rc\"; break; fi\n"
        "    fi\n"
        "    case $action in\n"
        "        run)\n"
        "            export DT_TOKEN=$a_token DT_ATTEMPT=$a_attempt\n"
        "            nodes=$a_nodes\n"
        "            step_exclude=$(step_excludes \"$a_exclude\")\n"
        "            start_step ;;\n"
        "        exit)\n"
        "            log \"controller: exit\"; break ;;\n"
        "    esac\n"
        "    sleep 0.25\n"
        "done\n"
        "if [ -n \"$srun_pid\" ] && kill -0 \"$srun_pid\" 2>/dev/null; then fwd TERM; fi\n"
        "exit $rc\n",
        req->job_id, req->attempt, url, agent, total,
        out ? "--open-mode=append --output=" : "", out ? out : "") < 0)
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

/* --- handles, steps and node health (in-allocation restart, issue 7) ------ */

/* "J" (the attempt that created allocation J; *attempt = 0: the one in the
 * Slurm job's name) or "J:N" (attempt N, a later step of J). */
static int parse_handle (const char *handle, uint32_t *jobid, int *attempt, dt_error_t *err)
{
    char *end;
    unsigned long v;
    long a = 0;

    errno = 0;
    v = handle ? strtoul (handle, &end, 10) : 0;
    if (handle && !errno && end != handle && *end == ':') {
        char *e2;
        a = strtol (end + 1, &e2, 10);
        if (errno || e2 == end + 1 || *e2 != '\0' || a < 1 || a > 1000000)
            end = (char *) handle;      /* reject below */
        else
            end = e2;
    }
    if (!handle || errno || end == handle || *end != '\0' || v == 0 || v > UINT32_MAX)
        return errnoprintf (err, EINVAL, "slurm launcher: bad handle '%s' (want a Slurm job id, "
                            "optionally ':attempt')", handle ? handle : "(null)");
    *jobid = (uint32_t) v;
    if (attempt)
        *attempt = (int) a;
    return 0;
}

/* "dt-<job>-a<attempt>" (job and step names) -> job, attempt; -1 otherwise. */
static int parse_step_name (const char *name, long long *job, int *attempt)
{
    long long j;
    int a, n = 0;

    if (!name || sscanf (name, "dt-%lld-a%d%n", &j, &a, &n) != 2 || name[n] != '\0')
        return -1;
    *job = j;
    *attempt = a;
    return 0;
}

static struct step_track *track_get (struct slurm_launcher *sl, uint32_t jobid, int attempt,
                                     bool create)
{
    struct step_track *t, **pp;
    double now = mono_now ();

    /* Forget what has not been asked about for a day (ended long ago). */
    for (pp = &sl->tracks; (t = *pp);) {
        if (now - t->used > 86400) {
            *pp = t->next;
            free (t);
            continue;
        }
        pp = &t->next;
    }
    for (t = sl->tracks; t; t = t->next)
        if (t->jobid == jobid && t->attempt == attempt)
            break;
    if (!t && create && (t = calloc (1, sizeof (*t)))) {
        t->jobid = jobid;
        t->attempt = attempt;
        t->next = sl->tracks;
        sl->tracks = t;
    }
    if (t)
        t->used = now;
    return t;
}

static void track_drop_job (struct slurm_launcher *sl, uint32_t jobid)
{
    struct step_track *t, **pp;
    for (pp = &sl->tracks; (t = *pp);) {
        if (t->jobid == jobid) {
            *pp = t->next;
            free (t);
            continue;
        }
        pp = &t->next;
    }
}

/* The steps of allocation 'jobid' (new; free with
 * slurm_free_job_step_info_response_msg), or NULL with err. */
static job_step_info_response_msg_t *load_steps (struct slurm_launcher *sl, uint32_t jobid,
                                                 dt_error_t *err)
{
    job_step_info_response_msg_t *resp = NULL;

    if (slurm_get_job_steps ((time_t) 0, jobid, NO_VAL, &resp, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO, "slurm_get_job_steps %u: %s",
                     jobid, slurm_strerror (e));
        return NULL;
    }
    ctld_result (sl, 0);
    return resp;
}

/* The running step of attempt 'attempt' of dtctl job 'job' (borrowed from
 * resp), or NULL.  *later: a step of a later attempt exists. */
static job_step_info_t *find_step (job_step_info_response_msg_t *resp, long long job,
                                   int attempt, bool *later)
{
    job_step_info_t *found = NULL;

    *later = false;
    for (uint32_t i = 0; resp && i < resp->job_step_count; i++) {
        job_step_info_t *s = &resp->job_steps[i];
        long long j;
        int a;
        if (s->step_id.step_id >= SLURM_MAX_NORMAL_STEP_ID
            || parse_step_name (s->name, &j, &a) < 0 || j != job)
            continue;
        if (a == attempt)
            found = s;
        else if (a > attempt)
            *later = true;
    }
    return found;
}

/* Names of a hostlist expression, as a NULL-terminated array (new; free
 * with free_names), or NULL (ENOMEM / bad list). */
static char **expand_hostlist (const char *expr, int *count)
{
    hostlist_t hl;
    char **v = NULL, *h;
    int n = 0, cap = 0;

    *count = 0;
    if (!expr || !*expr)
        return calloc (1, sizeof (char *));
    if (!(hl = slurm_hostlist_create (expr)))
        return NULL;
    while ((h = slurm_hostlist_shift (hl))) {
        if (n + 2 > cap) {
            char **nv = realloc (v, (cap = cap * 2 + 8) * sizeof (*v));
            if (!nv) {
                free (h);
                break;
            }
            v = nv;
        }
        v[n++] = strdup (h);
        v[n] = NULL;
        free (h);
    }
    slurm_hostlist_destroy (hl);
    if (!v)
        v = calloc (1, sizeof (char *));
    *count = n;
    return v;
}

static void free_names (char **v)
{
    if (v) {
        for (char **p = v; *p; p++)
            free (*p);
        free (v);
    }
}

static bool name_in (const char *name, const char *const *list)
{
    for (int i = 0; list && list[i]; i++)
        if (!strcmp (list[i], name))
            return true;
    return false;
}

/* Comma-joined names (new string). */
static char *join_names (char *const *v, int n)
{
    size_t len = 1;
    char *s;

    for (int i = 0; i < n; i++)
        len += strlen (v[i]) + 1;
    if (!(s = calloc (1, len)))
        return NULL;
    for (int i = 0; i < n; i++) {
        if (i)
            strcat (s, ",");
        strcat (s, v[i]);
    }
    return s;
}

/* Which of names[0..n) are dead: Slurm says DOWN / NOT_RESPONDING / FAIL,
 * or their slurmd does not accept a TCP connection within
 * probe_timeout_ms.  The probe is what makes the fast path safe: the
 * controller detects a lost node (missing heartbeats) seconds before Slurm
 * does, and a step spanning a dead node must not be killed before that
 * node has left the allocation (shared/notes/slurm-testbed.md: it would
 * wedge the allocation).  A crashed machine refuses (its kernel answers)
 * or stays silent; both count as dead.  dead[i] set; -1 on ENOMEM. */
static int nodes_dead (struct slurm_launcher *sl, char *const *names, int n, bool *dead)
{
    node_info_msg_t *ni = NULL;
    int *fd;
    struct pollfd *pfd;
    int rc = 0;

    if (!(fd = calloc (n ? n : 1, sizeof (*fd))) || !(pfd = calloc (n ? n : 1, sizeof (*pfd)))) {
        free (fd);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        dead[i] = false;
        fd[i] = -1;
    }
    if (slurm_load_node ((time_t) 0, &ni, SHOW_ALL) != SLURM_SUCCESS) {
        ctld_result (sl, slurm_get_errno ());
        ni = NULL;          /* probe by name only */
    }
    for (int i = 0; i < n; i++) {
        const char *addr = names[i];
        uint16_t port = 6818;
        for (uint32_t k = 0; ni && k < ni->record_count; k++) {
            node_info_t *nd = &ni->node_array[k];
            if (!nd->name || strcmp (nd->name, names[i]))
                continue;
            uint32_t base = nd->node_state & NODE_STATE_BASE;
            if (base == NODE_STATE_DOWN || (nd->node_state & (NODE_STATE_NO_RESPOND
                                                               | NODE_STATE_FAIL)))
                dead[i] = true;
            if (nd->node_addr && *nd->node_addr)
                addr = nd->node_addr;
            if (nd->port)
                port = nd->port;
        }
        if (dead[i])
            continue;
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
        struct addrinfo *ai = NULL;
        char ps[8];
        snprintf (ps, sizeof (ps), "%u", port);
        if (getaddrinfo (addr, ps, &hints, &ai) != 0 || !ai) {
            dead[i] = true;
            continue;
        }
        fd[i] = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd[i] >= 0 && connect (fd[i], ai->ai_addr, ai->ai_addrlen) < 0
            && errno != EINPROGRESS) {
            close (fd[i]);
            fd[i] = -1;
        }
        if (fd[i] < 0)
            dead[i] = true;
        freeaddrinfo (ai);
    }
    /* Wait for every pending connect together. */
    double deadline = mono_now () + probe_timeout_ms / 1000.0;
    for (;;) {
        int m = 0, left;
        for (int i = 0; i < n; i++)
            if (fd[i] >= 0) {
                pfd[m].fd = fd[i];
                pfd[m].events = POLLOUT;
                pfd[m].revents = 0;
                m++;
            }
        left = (int) ((deadline - mono_now ()) * 1000);
        if (m == 0 || left <= 0)
            break;
        if (poll (pfd, m, left) <= 0)
            continue;
        for (int j = 0; j < m; j++) {
            if (!pfd[j].revents)
                continue;
            for (int i = 0; i < n; i++) {
                if (fd[i] != pfd[j].fd)
                    continue;
                int soerr = 0;
                socklen_t sl_ = sizeof (soerr);
                if (getsockopt (fd[i], SOL_SOCKET, SO_ERROR, &soerr, &sl_) < 0 || soerr)
                    dead[i] = true;
                close (fd[i]);
                fd[i] = -1;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0) {           /* no answer in time */
            dead[i] = true;
            close (fd[i]);
        }
    slurm_free_node_info_msg (ni);
    free (fd);
    free (pfd);
    return rc;
}

/* Remove 'gone' from allocation 'jobid' (scontrol update JobId=J
 * NodeList=<keep>).  Slurm then kills the steps on the removed nodes and
 * lets the allocation live on.  Only the first resize of a job works
 * without slurmdbd (the notes: later ones time out, blocking for seconds),
 * so it is not tried when the job was resized already. */
static int shrink_alloc (struct slurm_launcher *sl, slurm_job_info_t *j, char *const *keep,
                         int nkeep, dt_error_t *err)
{
    job_desc_msg_t u;
    char *list;
    int rc = 0;

    if (j->resize_time != 0)
        return errnoprintf (err, EBUSY, "Slurm job %u was resized already (one resize per job)",
                            j->job_id);
    if (!(list = join_names (keep, nkeep)))
        return errnoprintf (err, ENOMEM, "out of memory");
    slurm_init_job_desc_msg (&u);
    u.job_id = j->job_id;
    u.req_nodes = list;
    if (slurm_update_job (&u) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        rc = errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO, "shrinking Slurm job %u to %s: %s",
                          j->job_id, list, slurm_strerror (e));
    }
    else {
        ctld_result (sl, 0);
        dt_log (LOG_NOTICE, "slurm: allocation %u shrunk to %s (failed nodes left it)",
                j->job_id, list);
    }
    free (list);
    return rc;
}

/* Load job 'jobid' (new msg in *msg; its record in *j), or -1 with err. */
static int load_job (struct slurm_launcher *sl, uint32_t jobid, job_info_msg_t **msg,
                     slurm_job_info_t **j, dt_error_t *err)
{
    *msg = NULL;
    if (slurm_load_job (msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        return errnoprintf (err, is_comm_error (e) ? EAGAIN : (e == ESLURM_INVALID_JOB_ID
                                                                ? ENOENT : EIO),
                            "slurm_load_job %u: %s", jobid, slurm_strerror (e));
    }
    ctld_result (sl, 0);
    if ((*msg)->record_count < 1) {
        slurm_free_job_info_msg (*msg);
        *msg = NULL;
        return errnoprintf (err, ENOENT, "Slurm job %u not found", jobid);
    }
    *j = &(*msg)->job_array[0];
    return 0;
}

static bool job_live (const slurm_job_info_t *j)
{
    return (j->job_state & JOB_STATE_BASE) == JOB_RUNNING && !(j->job_state & JOB_COMPLETING);
}

/* End the step of attempt 'attempt' in allocation j (and any older step of
 * the same dtctl job) without wedging the allocation: a step whose nodes all
 * live is killed at once; a dead node is first removed from the allocation
 * (first resize only); otherwise the step is left for Slurm, which kills it
 * when it sets the node DOWN (the "DOWN path", ~9 s on the testbed).
 * Returns the number of steps left running. */
static int end_steps (struct slurm_launcher *sl, slurm_job_info_t *j, long long job,
                      int upto_attempt)
{
    job_step_info_response_msg_t *resp;
    dt_error_t err;
    int left = 0;

    if (!(resp = load_steps (sl, j->job_id, &err))) {
        dt_log (LOG_WARNING, "slurm: %s", err.text);
        return 1;
    }
    for (uint32_t i = 0; i < resp->job_step_count; i++) {
        job_step_info_t *s = &resp->job_steps[i];
        long long sj;
        int sa, n = 0, nalloc = 0, nkeep = 0;
        char **names = NULL, **alloc = NULL, **keep = NULL;
        bool *dead = NULL, any_dead = false, can_kill = true;

        if (s->step_id.step_id >= SLURM_MAX_NORMAL_STEP_ID
            || parse_step_name (s->name, &sj, &sa) < 0 || sj != job || sa > upto_attempt)
            continue;
        if (!(names = expand_hostlist (s->nodes, &n)) || !(dead = calloc (n + 1, 1))
            || nodes_dead (sl, names, n, dead) < 0)
            goto next;
        for (int k = 0; k < n; k++)
            any_dead |= dead[k];
        if (any_dead) {
            /* Keep every allocated node except the dead ones. */
            bool *adead = NULL;
            can_kill = false;
            if ((alloc = expand_hostlist (j->nodes, &nalloc))
                && (adead = calloc (nalloc + 1, 1)) && (keep = calloc (nalloc + 1, sizeof (char *)))
                && nodes_dead (sl, alloc, nalloc, adead) == 0) {
                for (int k = 0; k < nalloc; k++)
                    if (!adead[k])
                        keep[nkeep++] = alloc[k];
                if (nkeep > 0 && j->batch_host && name_in (j->batch_host, (const char *const *) keep)
                    && shrink_alloc (sl, j, keep, nkeep, &err) == 0)
                    can_kill = true;
                else if (nkeep > 0)
                    dt_log (LOG_NOTICE, "slurm: step %u.%u spans a dead node; not killing it "
                            "(%s): Slurm ends it when it sets the node DOWN",
                            j->job_id, s->step_id.step_id,
                            j->resize_time ? "allocation resized already" : err.text);
            }
            free (adead);
        }
        if (can_kill) {
            /* What scancel does for a step with SIGKILL: terminate, which
             * also completes the step record (a plain signal did not
             * after a resize). */
            if (slurm_terminate_job_step (j->job_id, s->step_id.step_id) != SLURM_SUCCESS) {
                int e = slurm_get_errno ();
                ctld_result (sl, e);
                if (e != 0 && e != ESLURM_ALREADY_DONE && e != ESLURM_INVALID_JOB_ID)
                    dt_log (LOG_WARNING, "slurm: killing step %u.%u: %s", j->job_id,
                            s->step_id.step_id, slurm_strerror (e));
            }
            else
                dt_log (LOG_INFO, "slurm: killed step %u.%u (%s)", j->job_id,
                        s->step_id.step_id, s->name);
        }
        else
            left++;
next:
        free (keep);        /* borrowed names of alloc */
        free_names (alloc);
        free_names (names);
        free (dead);
    }
    slurm_free_job_step_info_response_msg (resp);
    return left;
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

/* submit with reuse: run the attempt as the next step of the allocation
 * of req->reuse.  0: done (handle "J:N"); 1: not reusable -- that
 * allocation has been ended and the caller submits a new one; -1 with err
 * on a transient error. */
static int submit_reuse (struct slurm_launcher *sl, const struct launcher_req *req,
                         char handle[LAUNCHER_HANDLE_MAX], char **dead_out, dt_error_t *err)
{
    job_info_msg_t *msg = NULL;
    slurm_job_info_t *j;
    uint32_t jobid;
    long long job;
    int first, n = 0, usable = 0, want = req->nodes, rc = 1;
    char **names = NULL, why[160] = "";
    bool *dead = NULL;

    if (parse_handle (req->reuse, &jobid, NULL, err) < 0)
        return 1;
    if (load_job (sl, jobid, &msg, &j, err) < 0) {
        if (errno == EAGAIN)
            return -1;
        snprintf (why, sizeof (why), "%s", err->text);
        goto fallback;
    }
    if (!job_live (j) || parse_step_name (j->name, &job, &first) < 0 || job != req->job_id) {
        snprintf (why, sizeof (why), "Slurm job %u is no longer running", jobid);
        goto fallback;
    }
    if (!(names = expand_hostlist (j->nodes, &n)) || !(dead = calloc (n + 1, 1))
        || nodes_dead (sl, names, n, dead) < 0) {
        snprintf (why, sizeof (why), "out of memory");
        goto fallback;
    }
    for (int i = 0; i < n; i++) {
        if (j->batch_host && !strcmp (names[i], j->batch_host) && dead[i]) {
            snprintf (why, sizeof (why), "its batch host %s is lost", j->batch_host);
            goto fallback;
        }
        if (!dead[i] && !name_in (names[i], req->exclude))
            usable++;
    }
    if (usable < want) {
        snprintf (why, sizeof (why), "%d healthy nodes left in it, %d needed", usable, want);
        goto fallback;
    }
    /* The previous attempts' steps: gone already when the controller
     * waited for poll to say ENDED; a step left on a dead node ends at
     * DOWN, and Slurm starts the new (exclusive) step only after that. */
    end_steps (sl, j, job, req->attempt - 1);
    snprintf (handle, LAUNCHER_HANDLE_MAX, "%u:%d", jobid, req->attempt);
    struct step_track *t = track_get (sl, jobid, req->attempt, true);
    if (t)
        t->seen = t->kept = false;
    dt_log (LOG_NOTICE, "slurm: job %" PRId64 " attempt %d runs in allocation %u "
            "(in-allocation restart, %d of %d nodes usable)", req->job_id, req->attempt,
            jobid, usable, n);
    rc = 0;
    goto done;
fallback:
    /* End the kept allocation: no process of it may survive into the next
     * Slurm job. */
    dt_log (LOG_NOTICE, "slurm: job %" PRId64 " attempt %d: not reusing allocation %u (%s): "
            "ending it, submitting a new Slurm job", req->job_id, req->attempt, jobid, why);
    if (slurm_kill_job (jobid, SIGKILL, 0) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        if (is_comm_error (e)) {
            rc = errnoprintf (err, EAGAIN, "slurm_kill_job %u: %s", jobid, slurm_strerror (e));
            goto done;
        }
    }
    track_drop_job (sl, jobid);
    /* The new job must not land on the nodes found dead here either:
     * Slurm may not know yet. */
    if (dead && names) {
        char **d = calloc (n + 1, sizeof (char *));
        int nd = 0;
        for (int i = 0; d && i < n; i++)
            if (dead[i])
                d[nd++] = names[i];
        if (nd)
            *dead_out = join_names (d, nd);
        free (d);
    }
    rc = 1;
done:
    free_names (names);
    free (dead);
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
    char **env = NULL, *dead_exc = NULL;
    int envc = 0, total, rc = -1;

    total = req->nodes + req->spare_nodes;
    if (req->nodes < 1 || req->spare_nodes < 0 || total > 100000)
        return errnoprintf (err, EINVAL, "nodes: must be >= 1 (got %d, spares %d)",
                            req->nodes, req->spare_nodes);
    if (ctld_gate (sl, err) < 0)
        return -1;
    if (req->reuse && *req->reuse) {
        int r = submit_reuse (sl, req, handle, &dead_exc, err);
        if (r <= 0)
            return r;
    }

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
    if (dead_exc) {
        char *both = NULL;
        if (asprintf (&both, "%s%s%s", exc ? exc : "", exc ? "," : "", dead_exc) > 0) {
            free (exc);
            exc = both;
        }
    }
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
    free (dead_exc);
    free_env (env);
    return rc;
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

/* A job that ended while one of its nodes was dead stays COMPLETING
 * until Slurm sets that node DOWN (~9 s on the testbed), although nothing
 * of it runs any more.  While COMPLETING, Slurm lists only the nodes that
 * have not finished yet: when every one of them is dead (nodes_dead), the
 * live nodes have killed their processes and the next attempt need not
 * wait for Slurm's node timeout. */
static bool completing_only_dead (struct slurm_launcher *sl, slurm_job_info_t *j)
{
    char **names;
    bool *dead, all = false;
    int n = 0;

    if (!(names = expand_hostlist (j->nodes, &n)) || n == 0) {
        free_names (names);
        return false;
    }
    if ((dead = calloc (n + 1, 1)) && nodes_dead (sl, names, n, dead) == 0) {
        all = true;
        for (int i = 0; i < n; i++)
            all &= dead[i];
    }
    free (dead);
    free_names (names);
    return all;
}

/* Poll of one attempt's step while its allocation runs: 1 when that
 * step is over (st filled: ENDED), 0 when the attempt still counts as
 * running (its step runs, or has not been started yet). */
static int step_poll (struct slurm_launcher *sl, slurm_job_info_t *j, uint32_t jobid,
                      int attempt, struct launcher_status *st)
{
    job_step_info_response_msg_t *resp;
    struct step_track *t;
    long long job;
    int first;
    bool later = false;
    dt_error_t err;

    if (parse_step_name (j->name, &job, &first) < 0)
        return 0;                   /* not ours: job-level state only */
    if (attempt == 0)
        attempt = first;
    t = track_get (sl, jobid, attempt, false);
    if (!(resp = load_steps (sl, jobid, &err)))
        return 0;                   /* cannot tell: job-level state */
    job_step_info_t *s = find_step (resp, job, attempt, &later);
    if (s && !(t && t->kept)) {
        if ((t = track_get (sl, jobid, attempt, true)))
            t->seen = true;
        slurm_free_job_step_info_response_msg (resp);
        return 0;
    }
    slurm_free_job_step_info_response_msg (resp);
    if (s || !(later || (t && (t->seen || t->kept))))
        return 0;                   /* kept but still running / not started yet */
    st->state = LAUNCHER_ENDED;
    st->end_time_ms = 0;
    if (t && t->kept) {
        snprintf (st->cause, sizeof (st->cause), "cancelled");
        snprintf (st->detail, sizeof (st->detail), "step of attempt %d in Slurm job %u ended; "
                  "allocation kept", attempt, jobid);
    }
    else {
        snprintf (st->cause, sizeof (st->cause), "failed");
        snprintf (st->detail, sizeof (st->detail), "step of attempt %d in Slurm job %u ended "
                  "while the allocation lives on", attempt, jobid);
    }
    return 1;
}

static int slurm_launcher_poll (void *ctx, const char *handle, struct launcher_status *st,
                                dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    job_info_msg_t *msg = NULL;
    slurm_job_info_t *j;
    uint32_t jobid, base;
    bool completing;
    int attempt;

    memset (st, 0, sizeof (*st));
    st->exit_code = -1;
    if (parse_handle (handle, &jobid, &attempt, err) < 0)
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
    else if ((base == JOB_RUNNING || base == JOB_SUSPENDED) && !completing
             && step_poll (sl, j, jobid, attempt, st) == 1) {
        ;   /* the attempt's step ended; the allocation lives on */
    }
    else if (completing && base != JOB_RUNNING && base != JOB_SUSPENDED
             && completing_only_dead (sl, j)) {
        st->state = LAUNCHER_ENDED;
        st->end_time_ms = j->end_time > 0 ? (int64_t) j->end_time * 1000 : 0;
        track_drop_job (sl, jobid);
        st->exit_code = exit_code_of (j->exit_code);
        snprintf (st->cause, sizeof (st->cause), "%s", cause_of (base, st->exit_code));
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u %s; only dead nodes (%.64s) "
                  "still hold it in COMPLETING", jobid, state_name (base), st->nodelist);
        st->nodelist[0] = '\0';    /* those are not the attempt's nodes */
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
        st->end_time_ms = j->end_time > 0 ? (int64_t) j->end_time * 1000 : 0;
        track_drop_job (sl, jobid);
        st->exit_code = exit_code_of (j->exit_code);
        snprintf (st->cause, sizeof (st->cause), "%s", cause_of (base, st->exit_code));
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u %s reason %s exit %d",
                  jobid, state_name (base), slurm_job_reason_string (j->state_reason),
                  st->exit_code);
    }
    slurm_free_job_info_msg (msg);
    return 0;
}

/* cancel with KEEP_ALLOC: the attempt is over for the controller; its
 * step is ended now where that is safe (end_steps), and poll reports the
 * attempt ENDED once Slurm no longer lists the step.  A lost batch host
 * loses the batch script's loop: then the whole allocation ends. */
static int cancel_keep (struct slurm_launcher *sl, uint32_t jobid, int attempt, dt_error_t *err)
{
    job_info_msg_t *msg;
    slurm_job_info_t *j;
    struct step_track *t;
    long long job;
    int first;

    if (load_job (sl, jobid, &msg, &j, err) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!job_live (j) || parse_step_name (j->name, &job, &first) < 0) {
        slurm_free_job_info_msg (msg);
        return 0;
    }
    if (attempt == 0)
        attempt = first;
    if ((t = track_get (sl, jobid, attempt, true)))
        t->kept = true;
    if (j->batch_host) {
        char *bh = j->batch_host;
        bool dead = false;
        if (nodes_dead (sl, &bh, 1, &dead) == 0 && dead) {
            dt_log (LOG_NOTICE, "slurm: batch host %s of Slurm job %u is lost: ending the "
                    "allocation", j->batch_host, jobid);
            slurm_free_job_info_msg (msg);
            if (slurm_kill_job (jobid, SIGKILL, 0) != SLURM_SUCCESS) {
                int e = slurm_get_errno ();
                ctld_result (sl, e);
                if (e != ESLURM_ALREADY_DONE && e != ESLURM_INVALID_JOB_ID)
                    return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                                        "slurm_kill_job %u: %s", jobid, slurm_strerror (e));
            }
            return 0;
        }
    }
    int left = end_steps (sl, j, job, attempt);
    dt_log (LOG_INFO, "slurm: attempt %d of Slurm job %u ended, allocation kept%s", attempt,
            jobid, left ? " (its step ends when Slurm sets the dead node DOWN)" : "");
    slurm_free_job_info_msg (msg);
    return 0;
}

static int slurm_launcher_cancel (void *ctx, const char *handle, int flags, dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    uint32_t jobid;
    int attempt;

    if (parse_handle (handle, &jobid, &attempt, err) < 0)
        return -1;
    if (ctld_gate (sl, err) < 0)
        return -1;
    if (flags & LAUNCHER_CANCEL_KEEP_ALLOC)
        return cancel_keep (sl, jobid, attempt, err);
    /* First SIGKILL to the batch shell and its children (KILL_JOB_BATCH):
     * otherwise its srun, told the job is ending, waits KillWait + 2 s for
     * a step on a dead node before it exits, and the batch host holds the
     * job in COMPLETING meanwhile (measured on the testbed: the live nodes
     * are free 2.7 s after the cancel instead of 4.8 s).  The attempt
     * failed already, so no grace is owed to anything in it.  Then SIGKILL
     * through slurmctld: each slurmd sends SIGTERM, then SIGKILL after
     * KillWait, and proctrack/cgroup catches every process. */
    uint16_t kflags = 0;
    if (slurm_kill_job (jobid, SIGKILL, KILL_JOB_BATCH) != SLURM_SUCCESS)
        dt_log (LOG_DEBUG, "slurm: SIGKILL to the batch shell of job %u: %s", jobid,
                slurm_strerror (slurm_get_errno ()));
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

/* Submission-time refusal: a job asking for more nodes than its partition
 * has (or for a partition that does not exist) could only pend forever,
 * since Slurm's default EnforcePartLimits=NO accepts it. */
static int slurm_launcher_check (void *ctx, const char *partition, int nodes, dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    partition_info_msg_t *pm = NULL;
    int rc = 0, found = 0;

    if (ctld_gate (sl, err) < 0)
        return -1;
    if (!partition || !*partition)
        partition = sl->partition;
    if (slurm_load_partitions ((time_t) 0, &pm, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO, "loading partitions: %s",
                            slurm_strerror (e));
    }
    ctld_result (sl, 0);
    for (uint32_t i = 0; i < pm->record_count && !found; i++) {
        partition_info_t *p = &pm->partition_array[i];
        if (partition ? !(p->name && !strcmp (p->name, partition))
                      : !(p->flags & PART_FLAG_DEFAULT))
            continue;
        found = 1;
        if (nodes > 0 && (uint32_t)nodes > p->total_nodes)
            rc = errnoprintf (err, EINVAL, "Slurm cannot run this job: PartitionConfig "
                              "(%d nodes requested, partition %s has %u)", nodes,
                              p->name ? p->name : "?", p->total_nodes);
    }
    if (!found)
        rc = errnoprintf (err, EINVAL, "Slurm cannot run this job: InvalidPartition "
                          "(no partition %s)", partition ? partition : "marked Default");
    slurm_free_partition_info_msg (pm);
    return rc;
}

/* How many nodes of the partition a new attempt could get: those Slurm
 * does not report DOWN, DRAIN, FAIL or NOT_RESPONDING, less 'exclude'. */
static int slurm_launcher_capacity (void *ctx, const char *partition,
                                    const char *const *exclude, int *nodes, dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    partition_info_msg_t *pm = NULL;
    node_info_msg_t *ni = NULL;
    char **names = NULL;
    const char *expr = NULL;
    int n = 0, count = 0, rc = -1;

    if (ctld_gate (sl, err) < 0)
        return -1;
    if (!partition || !*partition)
        partition = sl->partition;
    if (slurm_load_partitions ((time_t) 0, &pm, SHOW_ALL) != SLURM_SUCCESS
        || slurm_load_node ((time_t) 0, &ni, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO, "loading partitions and nodes: %s",
                     slurm_strerror (e));
        goto done;
    }
    ctld_result (sl, 0);
    for (uint32_t i = 0; i < pm->record_count; i++) {
        partition_info_t *p = &pm->partition_array[i];
        if (partition ? (p->name && !strcmp (p->name, partition))
                      : (p->flags & PART_FLAG_DEFAULT) != 0) {
            expr = p->nodes;
            break;
        }
    }
    if (!expr) {
        errnoprintf (err, ENOENT, "no partition %s", partition ? partition : "(default)");
        goto done;
    }
    if (!(names = expand_hostlist (expr, &n))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (name_in (names[i], exclude))
            continue;
        for (uint32_t k = 0; k < ni->record_count; k++) {
            node_info_t *nd = &ni->node_array[k];
            if (!nd->name || strcmp (nd->name, names[i]))
                continue;
            uint32_t base = nd->node_state & NODE_STATE_BASE;
            if (base != NODE_STATE_DOWN && base != NODE_STATE_UNKNOWN
                && !(nd->node_state & (NODE_STATE_DRAIN | NODE_STATE_FAIL
                                       | NODE_STATE_NO_RESPOND)))
                count++;
        }
    }
    *nodes = count;
    rc = 0;
done:
    free_names (names);
    slurm_free_partition_info_msg (pm);
    slurm_free_node_info_msg (ni);
    return rc;
}

const struct launcher_ops launcher_slurm_ops = {
    .name = "slurm",
    .create = slurm_launcher_create,
    .destroy = slurm_launcher_destroy,
    .submit = slurm_launcher_submit,
    .poll = slurm_launcher_poll,
    .cancel = slurm_launcher_cancel,
    .capacity = slurm_launcher_capacity,
    .check = slurm_launcher_check,
};
