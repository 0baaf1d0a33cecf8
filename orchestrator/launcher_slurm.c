/* launcher_slurm.c: the Slurm launcher -- the one file of dtctld that knows Slurm.
 *
 * An allocation is one Slurm batch job submitted through libslurm
 * (slurm_submit_batch_job).  Its batch script is a loop that runs one
 * `srun --ntasks-per-node=1 dtagent ...` step per attempt, so Slurm places
 * one agent per node; the controller, not Slurm, owns restarts (requeue=0).
 * Every allocation runs that loop, so that after a rank's exit on a
 * healthy node the next attempt runs in place, as a new step on the same
 * nodes.  A job with spare nodes gets nodes + spares with no-kill
 * semantics, and after a node failure too its next attempt runs as a new
 * step of the same allocation (in-allocation restart); a job without
 * spares keeps Slurm's kill-on-node-fail, since it cannot go on in an
 * allocation with a dead node: Slurm ending it at NODE_FAIL is the
 * quickest way to the new Slurm job.  Cancel with KEEP_ALLOC ends
 * the step without wedging the allocation (a dead node is first removed
 * from it: shrink_alloc, end_steps), submit with reuse checks that the
 * allocation still has enough live nodes and its batch host, and the batch
 * script learns what to run from POST /v1/alloc/next (allocapi.c).
 * Otherwise -- or when that check fails -- the allocation ends and the
 * attempt gets a new Slurm job, excluding the nodes found dead.
 * Attempts are watched with slurm_load_job / slurm_get_job_steps (a step is
 * named dt-<job>-a<attempt>) and ended with slurm_kill_job.  Tested facts
 * behind the choices here were found on the testbed of scripts/slurm-testbed.
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
#include "orchestrator/slurm_int.h"

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
    WAIT_PART_NODE_LIMIT, /* more nodes than the partition has */
    WAIT_PART_TIME_LIMIT, /* longer than the partition allows */
    WAIT_PART_CONFIG,     /* requested partition configuration unavailable */
    FAIL_BAD_CONSTRAINTS, /* constraints cannot be satisfied */
    WAIT_PART_DOWN,       WAIT_PART_INACTIVE, FAIL_ACCOUNT, FAIL_QOS,
};

double mono_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A communication error: slurmctld down, restarting, or too slow. */
bool is_comm_error (int e)
{
    return (e >= SLURM_COMMUNICATIONS_CONNECTION_ERROR &&
            e <= SLURM_COMMUNICATIONS_MISSING_SOCKET_ERROR) ||
           (e >= SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR &&
            e <= SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR) ||
           e == SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT ||
           e == SLURM_PROTOCOL_AUTHENTICATION_ERROR || e == ESLURM_IN_STANDBY_MODE ||
           e == ECONNREFUSED || e == ETIMEDOUT || e == ECONNRESET || e == EHOSTUNREACH ||
           e == ENETUNREACH || e == EAGAIN;
}

/* Called before every RPC: -1 (EAGAIN) while backing off. */
int ctld_gate (struct slurm_launcher *sl, dt_error_t *err)
{
    double now;

    if (!sl->down)
        return 0;
    now = mono_now ();
    if (now >= sl->next_try)
        return 0;
    return errnoprintf (err, EAGAIN, "slurmctld unreachable for %.0fs, next try in %.1fs",
                        now - sl->down_since, sl->next_try - now);
}

/* Record the outcome of an RPC for the backoff: e == 0 means it answered. */
void ctld_result (struct slurm_launcher *sl, int e)
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
    if (errno || end == val || strchr (val, '-')) /* strtoull takes "-3" */
        return -1;
    switch (*end) {
    case '\0': break;
    case 'M':
    case 'm': end++; break;
    case 'K':
    case 'k':
        v = (v + 1023) / 1024;
        end++;
        break;
    case 'G':
    case 'g':
        v *= 1024;
        end++;
        break;
    case 'T':
    case 't':
        v *= 1024 * 1024;
        end++;
        break;
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
        size_t olen = eq ? (size_t)(eq - tok) : strlen (tok);

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
                errnoprintf (err, EINVAL, "SlurmExtraArgs: %s: bad count '%.40s'", opt,
                             val);
                goto done;
            }
            sl->cpus_per_task = (uint16_t)v;
        }
        else {
            errnoprintf (
              err, EINVAL,
              "SlurmExtraArgs: unsupported option '%.40s' "
              "(supported: --exclusive --oversubscribe --gres --constraint "
              "--mem --cpus-per-task --reservation --qos --account --partition)",
              opt);
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
        errnoprintf (err, EINVAL,
                     "slurm launcher: controller URL and dtagent path are required");
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
                     "(set SLURM_CONF in dtctld's environment)",
                     path);
        goto error;
    }
    if (!(sl->conf_path = strdup (path)) ||
        !(sl->controller_url = strdup (conf->controller_url)) ||
        !(sl->dtagent_path = strdup (conf->dtagent_path)) ||
        !(sl->state_dir = strdup (conf->state_dir ? conf->state_dir : "/tmp"))) {
        errnoprintf (err, ENOMEM, "slurm launcher: out of memory");
        goto error;
    }
    if (dt_conf_get_int (conf->conf, "SlurmWarnSeconds", default_warn_time_s, 0, 65535,
                         &sl->warn_time_s, err) < 0)
        goto error;
    sl->exclusive = true;
    if ((v = dt_conf_get (conf->conf, "SlurmAccount", NULL)) && *v &&
        set_str (&sl->account, v) < 0)
        goto nomem;
    if ((v = dt_conf_get (conf->conf, "SlurmQos", NULL)) && *v &&
        set_str (&sl->qos, v) < 0)
        goto nomem;
    if ((v = dt_conf_get (conf->conf, "SlurmPartition", NULL)) && *v &&
        set_str (&sl->partition, v) < 0)
        goto nomem;
    if ((v = dt_conf_get (conf->conf, "SlurmExtraArgs", NULL)) &&
        parse_extra_args (sl, v, err) < 0)
        goto error;
    /* Every libslurm client honours SLURM_CONF; srun inside the jobs gets
     * slurmd's own path from slurmstepd. */
    setenv ("SLURM_CONF", sl->conf_path, 1);
    slurm_init (sl->conf_path);
    dt_log (LOG_INFO,
            "slurm: launcher ready (SLURM_CONF=%s, built against Slurm %d.%02d)",
            sl->conf_path, (int)SLURM_VERSION_MAJOR (SLURM_VERSION_NUMBER),
            (int)SLURM_VERSION_MINOR (SLURM_VERSION_NUMBER));
    return sl;
nomem:
    errnoprintf (err, ENOMEM, "slurm launcher: out of memory");
error:
    slurm_launcher_destroy (sl);
    return NULL;
}

bool reason_hopeless (uint32_t reason)
{
    for (size_t i = 0; i < sizeof (hopeless_reasons) / sizeof (hopeless_reasons[0]); i++)
        if (reason == hopeless_reasons[i])
            return true;
    return false;
}

/* ", partition P has N nodes" for an error text, or "" if unknown. */
void partition_size (const char *name, char *buf, size_t len)
{
    partition_info_msg_t *pm = NULL;

    if (!name || slurm_load_partitions ((time_t)0, &pm, SHOW_ALL) != SLURM_SUCCESS)
        return;
    for (uint32_t i = 0; i < pm->record_count; i++) {
        if (pm->partition_array[i].name &&
            strcmp (pm->partition_array[i].name, name) == 0) {
            snprintf (buf, len, ", partition %s has %u", name,
                      pm->partition_array[i].total_nodes);
            break;
        }
    }
    slurm_free_partition_info_msg (pm);
}

/* The job description's scheduling options: dtctld.conf's Slurm keys, the
 * request's partition, time limit, exclusions, working directory and
 * user; batch_out: the batch shell's output file. */
static void desc_options (struct slurm_launcher *sl, const struct launcher_req *req,
                          char *exc, char *batch_out, job_desc_msg_t *d)
{
    if (sl->exclusive)
        d->shared = JOB_SHARED_NONE;
    if (req->partition && *req->partition)
        d->partition = (char *)req->partition;
    else if (sl->partition)
        d->partition = sl->partition;
    if (sl->account)
        d->account = sl->account;
    if (sl->qos)
        d->qos = sl->qos;
    if (sl->gres)
        d->tres_per_node = sl->gres;
    if (sl->features)
        d->features = sl->features;
    if (sl->reservation)
        d->reservation = sl->reservation;
    if (sl->mem_mb)
        d->pn_min_memory = sl->mem_mb;
    if (sl->cpus_per_task)
        d->cpus_per_task = sl->cpus_per_task;
    if (req->time_limit_s > 0) {
        d->time_limit = (uint32_t)((req->time_limit_s + 59) / 60);
        /* Warn before the end: batch shell only (Slurm's --signal=B:USR1@N). */
        if (sl->warn_time_s > 0) {
            d->warn_signal = SIGUSR1;
            d->warn_time = (uint16_t)sl->warn_time_s;
            d->warn_flags = KILL_JOB_BATCH;
        }
    }
    if (exc)
        d->exc_nodes = exc;
    /* slurmstepd enters work_dir and opens std_out as the job's user: the
     * job's workdir, else the user's own directory (never the StateDir,
     * which is root's alone). */
    d->work_dir = (char *)(req->workdir && *req->workdir     ? req->workdir
                           : req->user_dir && *req->user_dir ? req->user_dir
                                                             : "/tmp");
    d->std_out = batch_out;
    d->open_mode = OPEN_MODE_APPEND;
    d->user_id = req->uid;
    d->group_id = req->gid;
    /* The controller owns restarts: never requeue.  With spares, a failed
     * node leaves the allocation instead of ending it (in-allocation
     * restart).  Without, the allocation ends with a failed node (no
     * attempt could run in it), but a rank's exit leaves it live: the
     * next attempt runs in place in it (restart_keep_alloc). */
    d->requeue = 0;
    d->kill_on_node_fail = req->spare_nodes > 0 ? 0 : 1;
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
    else if (asprintf (&out_path, "%s/dt-%" PRId64 "-a%d-%%n.out",
                       req->user_dir && *req->user_dir ? req->user_dir
                       : req->workdir && *req->workdir ? req->workdir
                                                       : "/tmp",
                       req->job_id, req->attempt) < 0)
        out_path = NULL;
    if (!out_path || !(batch_out = subst_node (out_path, "batch")) ||
        !(step_out = subst_node (out_path, "%N"))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto done;
    }
    if (!(script =
            make_script (sl, req, strcmp (batch_out, step_out) ? step_out : NULL)) ||
        !(env = make_env (sl, req, &envc))) {
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
    d.comment = (char *)(req->job_name ? req->job_name : "");
    d.script = script;
    d.environment = env;
    d.env_size = (uint32_t)envc;
    d.min_nodes = d.max_nodes = (uint32_t)total;
    d.num_tasks = (uint32_t)total;
    d.ntasks_per_node = 1;
    desc_options (sl, req, exc, batch_out, &d);

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
            req->job_id, req->attempt, resp->job_id, total, exc ? ", excluding " : "",
            exc ? exc : "");
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

static int slurm_launcher_cancel (void *ctx, const char *handle, int flags,
                                  dt_error_t *err)
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
    dt_log (LOG_INFO, "slurm: cancelled %s of Slurm job %u", kflags ? "the steps" : "all",
            jobid);
    return 0;
}

/* Submission-time refusal: a job asking for more nodes than its partition
 * has (or for a partition that does not exist) could only pend forever,
 * since Slurm's default EnforcePartLimits=NO accepts it. */
static int slurm_launcher_check (void *ctx, const char *partition, int nodes,
                                 dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    partition_info_msg_t *pm = NULL;
    int rc = 0, found = 0;

    if (ctld_gate (sl, err) < 0)
        return -1;
    if (!partition || !*partition)
        partition = sl->partition;
    if (slurm_load_partitions ((time_t)0, &pm, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                            "loading partitions: %s", slurm_strerror (e));
    }
    ctld_result (sl, 0);
    for (uint32_t i = 0; i < pm->record_count && !found; i++) {
        partition_info_t *p = &pm->partition_array[i];
        if (partition ? !(p->name && !strcmp (p->name, partition))
                      : !(p->flags & PART_FLAG_DEFAULT))
            continue;
        found = 1;
        if (nodes > 0 && (uint32_t)nodes > p->total_nodes)
            rc = errnoprintf (err, EINVAL,
                              "Slurm cannot run this job: PartitionConfig "
                              "(%d nodes requested, partition %s has %u)",
                              nodes, p->name ? p->name : "?", p->total_nodes);
    }
    if (!found)
        rc = errnoprintf (err, EINVAL,
                          "Slurm cannot run this job: InvalidPartition "
                          "(no partition %s)",
                          partition ? partition : "marked Default");
    slurm_free_partition_info_msg (pm);
    return rc;
}

/* How many nodes of the partition a new attempt could get: those Slurm
 * does not report DOWN, DRAIN, FAIL or NOT_RESPONDING, less 'exclude'. */
static int slurm_launcher_capacity (void *ctx, const char *partition,
                                    const char *const *exclude, int *nodes,
                                    dt_error_t *err)
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
    if (slurm_load_partitions ((time_t)0, &pm, SHOW_ALL) != SLURM_SUCCESS ||
        slurm_load_node ((time_t)0, &ni, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                     "loading partitions and nodes: %s", slurm_strerror (e));
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
            if (base != NODE_STATE_DOWN && base != NODE_STATE_UNKNOWN &&
                !(nd->node_state &
                  (NODE_STATE_DRAIN | NODE_STATE_FAIL | NODE_STATE_NO_RESPOND)))
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

/* The attempt's nodes: the nodelist poll saw, else the allocation's as
 * slurmctld has it now (an agent may register before the first poll). */
static int slurm_launcher_node_member (void *ctx, const char *handle,
                                       const char *nodelist, const char *node)
{
    struct slurm_launcher *sl = ctx;
    job_info_msg_t *msg = NULL;
    hostlist_t hl;
    uint32_t jobid;
    dt_error_t err;
    char *list = NULL;
    int rc;

    if (nodelist && *nodelist)
        list = strdup (nodelist);
    else {
        if (parse_handle (handle, &jobid, NULL, &err) < 0 || ctld_gate (sl, &err) < 0)
            return -1;
        if (slurm_load_job (&msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS) {
            ctld_result (sl, slurm_get_errno ());
            return -1;
        }
        ctld_result (sl, 0);
        if (msg->record_count >= 1 && msg->job_array[0].nodes)
            list = strdup (msg->job_array[0].nodes);
        slurm_free_job_info_msg (msg);
    }
    if (!list || !*list || !(hl = slurm_hostlist_create (list))) {
        free (list);
        return -1;
    }
    rc = slurm_hostlist_find (hl, node) >= 0 ? 1 : 0;
    slurm_hostlist_destroy (hl);
    free (list);
    return rc;
}

/* Poll, then say in launcher-neutral terms what Slurm itself ended
 * (launcher.h, end_kind): the job manager knows no Slurm cause words. */
static int slurm_launcher_poll (void *ctx, const char *handle, struct launcher_status *st,
                                dt_error_t *err)
{
    if (slurm_poll_job (ctx, handle, st, err) < 0)
        return -1;
    if (st->state == LAUNCHER_ENDED) {
        if (!strcmp (st->cause, "slurm_node_fail"))
            st->end_kind = LAUNCHER_END_NODE_FAIL;
        else if (!strcmp (st->cause, "time_limit") || !strcmp (st->cause, "preempted"))
            st->end_kind = LAUNCHER_END_LIMIT;
    }
    return 0;
}

static int slurm_launcher_drop_node (void *ctx, const char *handle, const char *node,
                                     dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    uint32_t jobid;

    if (parse_handle (handle, &jobid, NULL, err) < 0 || ctld_gate (sl, err) < 0)
        return -1;
    return drop_node_alloc (sl, jobid, node, err);
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
    .node_member = slurm_launcher_node_member,
    .node_member_strict = true,
    .drop_node = slurm_launcher_drop_node,
};
