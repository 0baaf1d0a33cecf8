/* jobs.c: the job manager: state machines, attempts, restarts, checkpoints. */
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "orchestrator/auth.h"
#include "orchestrator/ctld.h"
#include "orchestrator/fsm.h"
#include "orchestrator/ftpolicy.h"
#include "orchestrator/jobs.h"
#include "orchestrator/provenance.h"
#include "orchestrator/report.h"
#include "orchestrator/sha256.h"
#include "orchestrator/spec.h"
#include "orchestrator/userdir.h"

/* snprintf for paths: truncation is an error (ENAMETOOLONG), not a
 * silently different file. */
static int pathf (char *buf, size_t len, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static int pathf (char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start (ap, fmt);
    n = vsnprintf (buf, len, fmt, ap);
    va_end (ap);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* Live state is written to SQLite at most this often (batched). */
static const int64_t flush_interval_ms = 1000;
/* Launchers are polled this often per live attempt. */
static const int64_t poll_interval_ms = 1000;
static const int64_t ending_poll_ms = 250;
/* An ending attempt whose processes do not go away: cancel again after
 * this, and give up waiting (recording it) after ending_giveup_ms. */
static const int64_t ending_cancel_ms = 10000;
static const int64_t ending_giveup_ms = 120000;
/* Restart backoff: first restart after restart_backoff_ms, doubling, capped. */
static const int64_t restart_backoff_ms = 500;
static const int64_t restart_backoff_max_ms = 30000;
/* Step metrics kept per job (the stride doubles beyond it). */
static const int64_t metrics_cap = 1000;
/* hang_timeout_ms = 0 (auto): the controller's watchdog is the detector
 * (ftpolicy: max(HangTimeoutFloor, 10 x p99 step time)); the agents get
 * this multiple of the floor as a backstop for when the controller is
 * unreachable, since they cannot learn the step times. */
static const int64_t hang_agent_backstop = 4;
/* The no-progress guard: this many consecutive attempts failing before
 * passing their resume step fail the job with cause "no_progress". */
static const int no_progress_limit = 3;
/* How long an ending attempt waits for a survivor's just-in-time shard
 * set before its processes are cancelled: writing the whole state once
 * takes well under a second for the models dttrain trains here; the wait
 * ends sooner when a set is committed or every surviving rank exited. */
static const int64_t jit_wait_ms = 5000;


struct jobs {
    struct ctld *ctx;
    struct job *list;
    int64_t next_flush_ms;
    int flush_stream;           /* where the next bounded flush starts (tx_flush) */
    uint64_t restarts;
    uint64_t ckpts;
    /* Deafness: the controller cannot hear heartbeats while its own loop is
     * held up (an fsync under checkpoint traffic, a slow libslurm call).
     * After such a stall every agent looks silent; node loss counts
     * silence from heard_since_ms at the earliest, so the controller's own
     * stall never blames a healthy node. */
    int64_t tick_end_ms;
    int64_t heard_since_ms;
};

/* A pause of the event loop longer than this is a stall (see above). */
static const int64_t stall_ms = 1000;

static void attempt_destroy (struct attempt *att);
static int attempt_launch (struct jobs *jobs, struct attempt *att);

/* --- small helpers -------------------------------------------------------- */

static json_int_t spec_int (const struct job *job, const char *sec, const char *key)
{
    json_t *o = sec ? json_object_get (job->row.spec, sec) : job->row.spec;
    return json_integer_value (json_object_get (o, key));
}

static const char *spec_str (const struct job *job, const char *sec, const char *key)
{
    json_t *o = sec ? json_object_get (job->row.spec, sec) : job->row.spec;
    return json_string_value (json_object_get (o, key));
}

static double spec_real (const struct job *job, const char *sec, const char *key)
{
    json_t *o = sec ? json_object_get (job->row.spec, sec) : job->row.spec;
    return json_number_value (json_object_get (o, key));
}

/* mkdir -p */
static int mkdir_p (const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (pathf (buf, sizeof (buf), "%s", path) < 0)
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir (buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static void job_ckpt_dir (const struct job *job, char *buf, size_t len)
{
    snprintf (buf, len, "%s/%lld", spec_str (job, "checkpoint", "dir"),
              (long long)job->row.id);
}

static int workers (const struct attempt *att)
{
    return att->row.num_nodes;
}

static uint32_t node_hash (const char *s)
{
    uint32_t h = 2166136261u;           /* FNV-1a */
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* (Re)build the node -> agent index of 'att' for its current agents[]. */
static int agent_hash_build (struct attempt *att)
{
    int cap = 16;
    while (cap < 2 * att->nagents)
        cap *= 2;
    if (cap != att->agent_hash_cap) {
        int *h = realloc (att->agent_hash, cap * sizeof (*h));
        if (!h)
            return -1;
        att->agent_hash = h;
        att->agent_hash_cap = cap;
    }
    memset (att->agent_hash, 0, cap * sizeof (*att->agent_hash));
    for (int i = 0; i < att->nagents; i++) {
        uint32_t k = node_hash (att->agents[i].node) & (cap - 1);
        while (att->agent_hash[k])
            k = (k + 1) & (cap - 1);
        att->agent_hash[k] = i + 1;
    }
    att->agent_hash_n = att->nagents;
    return 0;
}

static struct agent *agent_hash_get (struct attempt *att, const char *node)
{
    int cap = att->agent_hash_cap;
    for (uint32_t k = node_hash (node) & (cap - 1); att->agent_hash[k]; k = (k + 1) & (cap - 1)) {
        struct agent *ag = &att->agents[att->agent_hash[k] - 1];
        if (!strcmp (ag->node, node))
            return ag;
    }
    return NULL;
}

/* agents[] grows by appending (registration, reload: the new ones are
 * added to the index) and is sorted once, when all registered (which sets
 * agent_hash_n to -1: rebuild); a shrink rebuilds too. */
struct agent *jobs_agent_find (struct attempt *att, const char *node)
{
    if (!att->agent_hash || att->agent_hash_n < 0 || att->agent_hash_n > att->nagents
        || 2 * att->nagents > att->agent_hash_cap) {
        if (agent_hash_build (att) < 0) {
            for (int i = 0; i < att->nagents; i++)  /* out of memory: scan */
                if (!strcmp (att->agents[i].node, node))
                    return &att->agents[i];
            return NULL;
        }
    }
    for (int cap = att->agent_hash_cap; att->agent_hash_n < att->nagents; att->agent_hash_n++) {
        uint32_t k = node_hash (att->agents[att->agent_hash_n].node) & (cap - 1);
        while (att->agent_hash[k])
            k = (k + 1) & (cap - 1);
        att->agent_hash[k] = att->agent_hash_n + 1;
    }
    return agent_hash_get (att, node);
}

static inline struct agent *agent_find (struct attempt *att, const char *node)
{
    return jobs_agent_find (att, node);
}

/* --- transactions ----------------------------------------------------------- */

/* Scalar state saved before a transition, restored if the transaction fails,
 * so memory never runs ahead of the database. */
struct snap {
    struct store_job_row j;
    struct store_attempt_row a;
    enum attempt_state end_state;
};

static void snap_take (struct snap *s, struct job *job, struct attempt *att)
{
    s->j = job->row;
    if (att) {
        s->a = att->row;
        s->end_state = att->end_state;
    }
}

/* Restore the scalars; the json_t pointers of the live rows are kept. */
static void snap_restore (struct snap *s, struct job *job, struct attempt *att)
{
    json_t *spec = job->row.spec, *exc = job->row.exclude, *fail = job->row.failure,
           *res = job->row.result;
    job->row = s->j;
    job->row.spec = spec;
    job->row.exclude = exc;
    job->row.failure = fail;
    job->row.result = res;
    if (att) {
        json_t *ae = att->row.exclude, *ev = att->row.evidence, *pv = att->row.provenance;
        att->row = s->a;
        att->row.exclude = ae;
        att->row.evidence = ev;
        att->row.provenance = pv;
        att->end_state = s->end_state;
    }
}

static int job_set_state (struct jobs *jobs, struct job *job, enum job_state to,
                          const char *reason, dt_error_t *err)
{
    enum job_state from = job->row.state;
    int64_t now = dt_real_ms ();

    if (!fsm_job_ok (from, to))
        return errnoprintf (err, EBUSY, "job %lld is %s: cannot become %s",
                            (long long)job->row.id, fsm_job_state_name (from),
                            fsm_job_state_name (to));
    job->row.state = to;
    snprintf (job->row.reason, sizeof (job->row.reason), "%s", reason ? reason : "");
    if (to == JOB_RUNNING && job->row.start_time == 0)
        job->row.start_time = now;
    if (fsm_job_terminal (to))
        job->row.end_time = now;
    if (to == JOB_PENDING)
        job->row.end_time = 0;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0)
        return -1;
    json_t *data = json_pack ("{s:s s:s}", "from", fsm_job_state_name (from), "to",
                              fsm_job_state_name (to));
    char detail[128];
    snprintf (detail, sizeof (detail), "job %s -> %s%s%s", fsm_job_state_name (from),
              fsm_job_state_name (to), reason ? ": " : "", reason ? reason : "");
    int rc = store_event (jobs->ctx->store, now, job->row.id, job->row.attempts, "job_state",
                          NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}

static int att_set_state (struct jobs *jobs, struct attempt *att, enum attempt_state to,
                          dt_error_t *err)
{
    enum attempt_state from = att->row.state;
    int64_t now = dt_real_ms ();

    if (!fsm_attempt_ok (from, to))
        return errnoprintf (err, EBUSY, "attempt %lld.%d is %s: cannot become %s",
                            (long long)att->row.job_id, att->row.attempt,
                            fsm_attempt_state_name (from), fsm_attempt_state_name (to));
    att->row.state = to;
    if (to == ATT_RUNNING)
        att->row.start_time = now;
    if (to == ATT_STARTING)
        att->deadline_ms = now + jobs->ctx->cfg->rendezvous_timeout_ms;
    if (to == ATT_ENDING)
        att->ending_since_ms = now;
    if (fsm_attempt_terminal (to))
        att->row.end_time = now;
    if (store_attempt_update (jobs->ctx->store, &att->row, err) < 0)
        return -1;
    json_t *data = json_pack ("{s:s s:s s:s?}", "from", fsm_attempt_state_name (from), "to",
                              fsm_attempt_state_name (to), "cause",
                              att->row.cause[0] ? att->row.cause : NULL);
    char detail[128];
    snprintf (detail, sizeof (detail), "attempt %d %s -> %s", att->row.attempt,
              fsm_attempt_state_name (from), fsm_attempt_state_name (to));
    int rc = store_event (jobs->ctx->store, now, att->row.job_id, att->row.attempt,
                          "attempt_state", NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}

/* Begin; run; commit or roll back (restoring memory).  'fn' does the work. */
typedef int (*tx_f) (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                     dt_error_t *err);

static int transact (struct jobs *jobs, struct job *job, struct attempt *att, tx_f fn,
                     void *arg, dt_error_t *err)
{
    struct snap s;
    int saved;

    snap_take (&s, job, att);
    if (store_begin (jobs->ctx->store, err) < 0)
        return -1;
    if (fn (jobs, job, att, arg, err) < 0 || store_commit (jobs->ctx->store, err) < 0) {
        saved = errno;
        store_rollback (jobs->ctx->store);
        snap_restore (&s, job, att);
        errno = saved;
        return -1;
    }
    return 0;
}

/* --- construction ---------------------------------------------------------- */

static void job_destroy (struct job *job)
{
    if (job) {
        attempt_destroy (job->att);
        store_job_row_clear (&job->row);
        free (job);
    }
}

static void attempt_destroy (struct attempt *att)
{
    if (att) {
        for (int i = 0; i < att->nagents; i++)
            json_decref (att->agents[i].hostinfo);
        free (att->agents);
        free (att->agent_hash);
        free (att->ranks);
        if (att->jit)
            for (int r = 0; r < att->row.world_size; r++)
                free (att->jit[r].shards);
        free (att->jit);
        while (att->kv) {
            struct kv *n = att->kv->next;
            free (att->kv->key);
            free (att->kv->value);
            free (att->kv);
            att->kv = n;
        }
        store_attempt_row_clear (&att->row);
        free (att);
    }
}

/* A new attempt object for 'job' (not yet stored). */
static struct attempt *attempt_alloc (struct jobs *jobs, struct job *job, int number,
                                      bool from_scratch, dt_error_t *err)
{
    struct attempt *att;

    if (!(att = calloc (1, sizeof (*att)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    store_attempt_row_init (&att->row);
    att->job = job;
    att->row.job_id = job->row.id;
    att->row.attempt = number;
    att->row.state = ATT_SUBMITTED;
    snprintf (att->row.launcher, sizeof (att->row.launcher), "%s", jobs->ctx->lops->name);
    att->row.num_nodes = job->next_nodes > 0 ? job->next_nodes : spec_int (job, NULL, "nodes");
    att->row.spare_nodes = spec_int (job, NULL, "spare_nodes");
    att->row.ranks_per_node = spec_int (job, NULL, "ranks_per_node");
    att->row.world_size = att->row.num_nodes * att->row.ranks_per_node;
    att->row.exclude = json_deep_copy (job->row.exclude);
    att->stop_rank = -1;
    /* Suspect nodes (node health, issue 7) are kept out of every new
     * attempt until an admin clears them. */
    {
        json_t *sus = store_nodes_suspect (jobs->ctx->store, err);
        size_t i, j;
        json_t *v, *w;
        if (!sus)
            goto error;
        json_array_foreach (sus, i, v) {
            bool have = false;
            json_array_foreach (att->row.exclude, j, w)
                if (json_equal (v, w))
                    have = true;
            if (!have)
                json_array_append (att->row.exclude, v);
        }
        json_decref (sus);
    }
    att->row.submit_time = dt_real_ms ();
    if (auth_token_new (att->row.token, err) < 0)
        goto error;
    if (!(att->ranks = calloc (att->row.world_size, sizeof (*att->ranks)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    for (int r = 0; r < att->row.world_size; r++) {
        att->ranks[r].step = -1;
        att->ranks[r].loss = NAN;
        att->ranks[r].samples = -1;
        att->ranks[r].compute_ms = att->ranks[r].comm_ms = att->ranks[r].score = NAN;
        att->ranks[r].median = NAN;
        att->ranks[r].exit_code = att->ranks[r].signal = -1;
    }
    if (!from_scratch && job->row.id > 0) {
        int64_t step;
        char dir[1024], sha[65];
        int rc = store_ckpt_latest (jobs->ctx->store, job->row.id, &step, dir, sizeof (dir),
                                    sha, sizeof (sha), err);
        if (rc < 0)
            goto error;
        if (rc == 1) {
            att->row.resume_step = step;
            snprintf (att->row.resume_dir, sizeof (att->row.resume_dir), "%s", dir);
            snprintf (att->row.resume_sha256, sizeof (att->row.resume_sha256), "%s", sha);
            /* Which kind of checkpoint (issue 7): its manifest says. */
            char mpath[PATH_MAX];
            json_t *man = NULL;
            if (pathf (mpath, sizeof (mpath), "%s/manifest.json", dir) == 0)
                man = json_load_file (mpath, 0, NULL);
            const char *kind = json_string_value (json_object_get (man, "kind"));
            snprintf (att->resume_source, sizeof (att->resume_source), "%s",
                      kind && !strcmp (kind, "jit") ? "jit" : "committed");
            json_decref (man);
        }
    }
    if (!att->resume_source[0])
        snprintf (att->resume_source, sizeof (att->resume_source), "none");
    /* What reproduces this attempt (issue 10; provenance.c). */
    att->row.provenance = provenance_attempt_new (job, att, jobs->ctx->lops->name);
    return att;
error:
    attempt_destroy (att);
    return NULL;
}

static int tx_insert_attempt (struct jobs *jobs, struct job *job, struct attempt *att,
                              dt_error_t *err)
{
    char detail[160];

    if (store_attempt_insert (jobs->ctx->store, &att->row, err) < 0)
        return -1;
    if (att->row.resume_step >= 0)
        snprintf (detail, sizeof (detail), "attempt %d submitted, resuming from step %lld",
                  att->row.attempt, (long long)att->row.resume_step);
    else
        snprintf (detail, sizeof (detail), "attempt %d submitted, from scratch",
                  att->row.attempt);
    /* resume_source (issue 7): "jit" when the checkpoint resumed from is a
     * just-in-time one (its manifest's kind), "committed" for a regular
     * committed checkpoint, "none" from scratch. */
    json_t *data = json_pack ("{s:I s:I s:s s:O}", "resume_step",
                              (json_int_t)att->row.resume_step, "world_size",
                              (json_int_t)att->row.world_size, "resume_source",
                              att->row.resume_step >= 0 && att->resume_source[0]
                                  ? att->resume_source
                                  : att->row.resume_step >= 0 ? "committed" : "none",
                              "exclude", att->row.exclude);
    int rc = store_event (jobs->ctx->store, att->row.submit_time, job->row.id,
                          att->row.attempt, "attempt_submitted", NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}

/* --- failure, success, end --------------------------------------------------- */

static int64_t backoff_ms (const struct job *job)
{
    return ft_backoff_ms (job->row.restarts, restart_backoff_ms, restart_backoff_max_ms);
}

/* Ends that were asked for (a final checkpoint was taken): they restart
 * without counting against the no-progress guard. */
static bool cause_planned (const char *cause)
{
    return !strcmp (cause, "time_limit") || !strcmp (cause, "preempted")
           || !strcmp (cause, "straggler_excluded");
}

static void json_set_add (json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (!strcmp (json_string_value (v), name))
            return;
    json_array_append_new (arr, json_string (name));
}

/* Healthy nodes the launcher could give the next attempt (-1 unknown). */
static int nodes_available (struct jobs *jobs, struct job *job)
{
    struct ctld *ctx = jobs->ctx;
    dt_error_t err;
    const char **exclude = NULL;
    json_t *sus, *v;
    size_t i, n;
    int avail = -1;

    if (!ctx->lops->capacity)
        return -1;
    if (!(sus = store_nodes_suspect (ctx->store, &err)))
        return -1;
    json_array_foreach (job->row.exclude, i, v)
        json_set_add (sus, json_string_value (v));
    n = json_array_size (sus);
    if ((exclude = calloc (n + 1, sizeof (*exclude)))) {
        json_array_foreach (sus, i, v)
            exclude[i] = json_string_value (v);
        if (ctx->lops->capacity (ctx->launcher, spec_str (job, NULL, "partition"), exclude,
                                 &avail, &err) < 0) {
            dt_log (LOG_WARNING, "job %lld: launcher capacity: %s", (long long)job->row.id,
                    err.text);
            avail = -1;
        }
    }
    free (exclude);
    json_decref (sus);
    return avail;
}

/* The job's side of an attempt failure (inside the transaction). */
static int job_after_failure (struct jobs *jobs, struct job *job, struct attempt *att,
                              dt_error_t *err)
{
    const char *cause = att->row.cause;
    int64_t maxr = spec_int (job, "restart", "max_restarts");

    if (fsm_job_terminal (job->row.state))
        return 0;                           /* cancelled meanwhile */

    /* Exclusions: the failed node (restart.exclude_failed_nodes; every
     * launcher honours them, the local one by picking other names), and
     * always an excluded straggler's node. */
    if (att->row.cause_node[0]
        && (!strcmp (cause, "straggler_excluded")
            || (json_is_true (json_object_get (json_object_get (job->row.spec, "restart"),
                                               "exclude_failed_nodes"))
                && !cause_planned (cause))))
        json_set_add (job->row.exclude, att->row.cause_node);

    /* The restart decision (ftpolicy.c). */
    bool progressed = ft_attempt_progressed (att->row.resume_step, att->max_step,
                                             att->committed_any);
    job->no_progress_streak = cause_planned (cause)
                                  ? 0 : ft_no_progress_streak (job->no_progress_streak,
                                                               progressed);
    struct ft_restart_in in = {
        .restarts = job->row.restarts,
        .max_restarts = maxr,
        .no_progress_streak = job->no_progress_streak,
        .no_progress_limit = no_progress_limit,
        .nodes = spec_int (job, NULL, "nodes"),
        .min_nodes = spec_int (job, "restart", "min_nodes"),
        .available = nodes_available (jobs, job),
    };
    int next_nodes = 0;
    enum ft_verdict v = ft_restart_decide (&in, &next_nodes);

    json_decref (job->row.failure);
    char tbuf[40];
    job->row.failure = json_pack ("{s:s s:s? s:o? s:s s:s s:i s:O? s:s s:b s:i s:i s:i}",
                                  "cause", cause, "node",
                                  att->row.cause_node[0] ? att->row.cause_node : NULL,
                                  "rank", att->row.cause_rank >= 0
                                      ? json_integer (att->row.cause_rank) : NULL,
                                  "time", dt_format_time (att->row.fail_time, tbuf,
                                                          sizeof (tbuf)),
                                  "detail", att->row.detail, "attempt", att->row.attempt,
                                  "evidence", att->row.evidence,
                                  "verdict", ft_verdict_name (v),
                                  "progressed", progressed,
                                  "no_progress_streak", job->no_progress_streak,
                                  "next_nodes", next_nodes,
                                  "available_nodes", in.available);
    if (v == FT_RESTART) {
        job->next_nodes = next_nodes;
        if (next_nodes < in.nodes) {
            char d[160];
            snprintf (d, sizeof (d), "only %d healthy nodes: the next attempt runs on %d of %d "
                      "nodes (min_nodes %d), same global batch", in.available, next_nodes,
                      in.nodes, in.min_nodes);
            if (store_event (jobs->ctx->store, dt_real_ms (), job->row.id, att->row.attempt,
                             "shrink", NULL, -1, d, NULL, err) < 0)
                return -1;
        }
        /* A new attempt that failed before running: still restarting. */
        if (job->row.state == JOB_RESTARTING) {
            snprintf (job->row.reason, sizeof (job->row.reason), "%s", cause);
            return store_job_update (jobs->ctx->store, &job->row, err);
        }
        return job_set_state (jobs, job, JOB_RESTARTING, cause, err);
    }
    char why[32];
    snprintf (why, sizeof (why), "%s", v == FT_GIVE_UP_RESTARTS ? cause : ft_verdict_name (v));
    json_object_set_new (job->row.failure, "cause", json_string (why));
    json_object_set_new (job->row.failure, "attempt_cause", json_string (cause));
    return job_set_state (jobs, job, JOB_FAILED, why, err);
}

struct fail_arg {
    const char *cause, *node, *detail;
    int rank;
    json_t *evidence;
    int64_t first_seen;         /* 0: now */
};

static int tx_fail (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                    dt_error_t *err)
{
    struct fail_arg *f = arg;
    int64_t now = dt_real_ms ();

    if (f->first_seen > 0 && f->first_seen < now)
        now = f->first_seen;
    snprintf (att->row.cause, sizeof (att->row.cause), "%s", f->cause);
    snprintf (att->row.cause_node, sizeof (att->row.cause_node), "%s", f->node ? f->node : "");
    snprintf (att->row.detail, sizeof (att->row.detail), "%s", f->detail ? f->detail : "");
    att->row.cause_rank = f->rank;
    att->row.fail_time = now;
    json_decref (att->row.evidence);
    att->row.evidence = json_incref (f->evidence);
    att->end_state = ATT_FAILED;
    /* Nothing started yet: nothing to end. */
    if (att->row.handle[0] == '\0' && att->row.state == ATT_SUBMITTED) {
        if (att_set_state (jobs, att, ATT_FAILED, err) < 0)
            return -1;
    } else if (att_set_state (jobs, att, ATT_ENDING, err) < 0)
        return -1;
    if (store_event (jobs->ctx->store, now, job->row.id, att->row.attempt, f->cause, f->node,
                     f->rank, f->detail, f->evidence, err) < 0)
        return -1;
    if (f->node && *f->node) {
        struct ctld_config *cfg = jobs->ctx->cfg;
        bool suspect = false;
        if (store_node_failure (jobs->ctx->store, f->node, now, job->row.id, att->row.attempt,
                                f->cause, f->detail, err) < 0
            || store_node_health_check (jobs->ctx->store, f->node, now, cfg->suspect_window_ms,
                                        cfg->suspect_jobs, &suspect, err) < 0)
            return -1;
        if (suspect) {
            char d[160];
            snprintf (d, sizeof (d), "node %s is suspect: failures in %lld jobs within %lld s; "
                      "excluded from new attempts until cleared", f->node,
                      (long long)cfg->suspect_jobs, (long long)(cfg->suspect_window_ms / 1000));
            if (store_event (jobs->ctx->store, now, job->row.id, att->row.attempt,
                             "node_suspect", f->node, -1, d, NULL, err) < 0)
                return -1;
            dt_log (LOG_WARNING, "%s", d);
        }
    }
    return job_after_failure (jobs, job, att, err);
}

static void attempt_fail_at (struct jobs *jobs, struct attempt *att, const char *cause,
                             const char *node, int rank, const char *detail, json_t *evidence,
                             int64_t first_seen);
static bool jit_may_help (struct attempt *att, const char *cause);
static void jit_window_close (struct jobs *jobs, struct attempt *att, const char *why);
static void attempt_cancel (struct jobs *jobs, struct attempt *att);

void jobs_attempt_fail (struct jobs *jobs, struct attempt *att, const char *cause,
                        const char *node, int rank, const char *detail, json_t *evidence)
{
    attempt_fail_at (jobs, att, cause, node, rank, detail, evidence, 0);
}

/* The failure, first seen at 'first_seen' (epoch ms; 0: now), e.g. the end
 * time Slurm gives for a NODE_FAIL that the controller learns later. */
static void attempt_fail_at (struct jobs *jobs, struct attempt *att, const char *cause,
                             const char *node, int rank, const char *detail, json_t *evidence,
                             int64_t first_seen)
{
    struct fail_arg f = { cause, node, detail, rank, evidence, first_seen };
    dt_error_t err;

    if (att->row.state == ATT_ENDING || fsm_attempt_terminal (att->row.state)) {
        dt_log (LOG_DEBUG, "job %lld attempt %d: %s ignored (already %s)",
                (long long)att->row.job_id, att->row.attempt, cause,
                fsm_attempt_state_name (att->row.state));
        json_decref (evidence);
        return;
    }
    dt_log (LOG_NOTICE, "job %lld attempt %d failed: %s%s%s rank %d: %s",
            (long long)att->row.job_id, att->row.attempt, cause, node ? " node " : "",
            node ? node : "", rank, detail ? detail : "");
    if (transact (jobs, att->job, att, tx_fail, &f, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: recording failure %s: %s", (long long)att->row.job_id,
                cause, err.text);
        json_decref (evidence);
        return;
    }
    json_decref (evidence);
    if (att->row.state == ATT_ENDING && att->row.handle[0]) {
        /* Surviving data-parallel ranks may still save the whole state
         * (just-in-time checkpoint, issue 7): let them, for a bounded
         * time, before their processes are cancelled. */
        if (att->jit_step > 0 || jit_may_help (att, cause)) {
            att->jit_open = true;
            att->jit_opened_ms = dt_real_ms ();
            att->jit_until_ms = att->jit_opened_ms + jit_wait_ms;
            if (att->jit_step == 0)
                return;
            jit_window_close (jobs, att, "committed before the failure was recorded");
        }
        attempt_cancel (jobs, att);
    }
    if (fsm_attempt_terminal (att->row.state))
        att->job->restart_at_ms = dt_real_ms () + backoff_ms (att->job);
}

/* End the processes of an ending attempt (the launcher's cancel). */
static void attempt_cancel (struct jobs *jobs, struct attempt *att)
{
    const char *cause = att->row.cause;
    dt_error_t err;
    if (att->cancel_sent || !att->row.handle[0])
        return;
    /* A job with spares that will restart keeps its allocation: the
     * next attempt runs in it as a new step (launcher.h, "reuse"). */
    int flags = 0;
    if (spec_int (att->job, NULL, "spare_nodes") > 0
        && att->job->row.state == JOB_RESTARTING
        && strcmp (cause, "time_limit") && strcmp (cause, "preempted")) {
        flags = LAUNCHER_CANCEL_KEEP_ALLOC;
        snprintf (att->job->reuse_handle, sizeof (att->job->reuse_handle), "%s",
                  att->row.handle);
    }
    if (jobs->ctx->lops->cancel (jobs->ctx->launcher, att->row.handle, flags, &err) < 0)
        dt_log (LOG_ERR, "job %lld: cancel %s: %s", (long long)att->row.job_id,
                att->row.handle, err.text);
    att->cancel_sent = true;
}

static int tx_succeed (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                       dt_error_t *err)
{
    att->end_state = ATT_SUCCEEDED;
    att->row.exit_code = 0;
    if (att_set_state (jobs, att, ATT_ENDING, err) < 0)
        return -1;
    return job_set_state (jobs, job, JOB_COMPLETED, "completed", err);
}

/* The attempt's processes are gone: its final state. */
static int tx_finish (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                      dt_error_t *err)
{
    const struct launcher_status *st = arg;
    if (st) {
        /* One failure, recorded once: when the launcher saw the end of a
         * failed attempt earlier than the controller first saw its failure
         * (e.g. slurmctld's NODE_FAIL time before the heartbeat timeout),
         * keep the earliest first-seen time and add the launcher's word. */
        if (att->end_state == ATT_FAILED && st->end_time_ms > 0 && att->row.fail_time > 0
            && st->end_time_ms < att->row.fail_time
            && (!strcmp (st->cause, "slurm_node_fail") || !strcmp (st->cause, "time_limit")
                || !strcmp (st->cause, "preempted"))) {
            char tbuf[40];
            if (!att->row.evidence)
                att->row.evidence = json_object ();
            json_object_set_new (att->row.evidence, "launcher_cause", json_string (st->cause));
            json_object_set_new (att->row.evidence, "launcher_detail", json_string (st->detail));
            json_object_set_new (att->row.evidence, "controller_first_seen",
                                 json_string (dt_format_time (att->row.fail_time, tbuf,
                                                              sizeof (tbuf))));
            att->row.fail_time = st->end_time_ms;
        }
        if (att->row.exit_code < 0)
            att->row.exit_code = st->exit_code;
        if (st->nodelist[0])
            snprintf (att->row.nodelist, sizeof (att->row.nodelist), "%s", st->nodelist);
    }
    return att_set_state (jobs, att, att->end_state, err);
}

static void attempt_finish (struct jobs *jobs, struct attempt *att,
                            const struct launcher_status *st)
{
    dt_error_t err;
    if (transact (jobs, att->job, att, tx_finish, (void *)st, &err) < 0) {
        dt_log (LOG_ERR, "job %lld attempt %d: finishing: %s", (long long)att->row.job_id,
                att->row.attempt, err.text);
        return;
    }
    dt_log (LOG_INFO, "job %lld attempt %d %s", (long long)att->row.job_id, att->row.attempt,
            fsm_attempt_state_name (att->row.state));
    if (att->job->row.state == JOB_RESTARTING)
        att->job->restart_at_ms = dt_real_ms () + backoff_ms (att->job);
}

static bool all_workers_done (const struct attempt *att)
{
    int done = 0;
    for (int i = 0; i < att->nagents; i++)
        if (!att->agents[i].spare && att->agents[i].done)
            done++;
    return done >= workers (att);
}

static void attempt_succeed (struct jobs *jobs, struct attempt *att)
{
    dt_error_t err;
    if (att->row.state != ATT_RUNNING)
        return;
    /* Every worker exited 0 after a planned stop (time-limit warning,
     * preemption, straggler exclusion): unless the trainer says it simply
     * finished, this is the end of the attempt, not of the job. */
    if (att->stopping) {
        json_t *stopped = json_object_get (att->job->row.result, "stopped");
        if (!att->job->row.result || json_is_true (stopped)) {
            char detail[256];
            snprintf (detail, sizeof (detail), "%s (the ranks took a final checkpoint%s)",
                      att->stop_detail[0] ? att->stop_detail : att->stop_cause,
                      att->committed_any ? "" : "; none was committed");
            jobs_attempt_fail (jobs, att, att->stop_cause, att->stop_node[0] ? att->stop_node
                               : NULL, att->stop_rank, detail,
                               json_pack ("{s:I s:b}", "stop_step", (json_int_t)att->stop_step,
                                          "final_checkpoint_committed", att->committed_any));
            return;
        }
    }
    if (transact (jobs, att->job, att, tx_succeed, NULL, &err) < 0)
        dt_log (LOG_ERR, "job %lld: completing: %s", (long long)att->row.job_id, err.text);
    else
        dt_log (LOG_NOTICE, "job %lld completed (attempt %d)", (long long)att->row.job_id,
                att->row.attempt);
}

/* --- launching ------------------------------------------------------------- */

static int tx_launched (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                        dt_error_t *err)
{
    char detail[160];
    if (store_attempt_update (jobs->ctx->store, &att->row, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail), "launched by %s as %s", att->row.launcher,
              att->row.handle);
    return store_event (jobs->ctx->store, dt_real_ms (), job->row.id, att->row.attempt,
                        "attempt_launched", NULL, -1, detail, NULL, err);
}

static int attempt_launch (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    struct ctld *ctx = jobs->ctx;
    struct launcher_req req = { 0 };
    char handle[LAUNCHER_HANDLE_MAX] = "";
    char output[PATH_MAX], logdir[PATH_MAX];
    const char **env = NULL, **exclude = NULL;
    dt_error_t err;
    size_t i, n;
    const char *k;
    json_t *v;
    int rc = -1;

    /* Output goes to the user's own directory: Slurm opens it as the user. */
    if (userdir_get (ctx->cfg->user_dir, job->row.uid, job->row.gid, logdir, sizeof (logdir),
                     &err) < 0) {
        dt_log (LOG_ERR, "job %lld attempt %d: %s", (long long)job->row.id, att->row.attempt,
                err.text);
        jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1, err.text, NULL);
        goto done;
    }
    pathf (output, sizeof (output), "%s/job-%lld.%d.%%n.log", logdir,
              (long long)job->row.id, att->row.attempt);

    /* The job's checkpoint directory: the controller writes the manifests
     * there, so it must reach it anyway (shared file system under Slurm). */
    char cdir[PATH_MAX];
    job_ckpt_dir (job, cdir, sizeof (cdir));
    if (mkdir_p (cdir, 0755) < 0)
        dt_log_errno (LOG_WARNING, "job %lld: mkdir %s", (long long)job->row.id, cdir);
    else if (geteuid () == 0 && job->row.uid != 0 && chown (cdir, job->row.uid, job->row.gid) < 0)
        dt_log_errno (LOG_WARNING, "job %lld: chown %s", (long long)job->row.id, cdir);

    json_t *jenv = json_object_get (job->row.spec, "env");
    n = json_object_size (jenv);
    if (!(env = calloc (n + 1, sizeof (*env))))
        goto fail;
    i = 0;
    json_object_foreach (jenv, k, v) {
        char *kv;
        if (asprintf (&kv, "%s=%s", k, json_string_value (v)) < 0)
            goto fail;
        env[i++] = kv;
    }
    n = json_array_size (att->row.exclude);
    if (!(exclude = calloc (n + 1, sizeof (*exclude))))
        goto fail;
    json_array_foreach (att->row.exclude, i, v)
        exclude[i] = json_string_value (v);

    req.job_id = job->row.id;
    req.attempt = att->row.attempt;
    req.job_name = job->row.name;
    req.token = att->row.token;
    req.uid = job->row.uid;
    req.gid = job->row.gid;
    req.nodes = att->row.num_nodes;
    req.spare_nodes = att->row.spare_nodes;
    req.ranks_per_node = att->row.ranks_per_node;
    req.partition = spec_str (job, NULL, "partition");
    req.time_limit_s = spec_int (job, NULL, "time_limit");
    req.exclude = exclude;
    req.workdir = spec_str (job, NULL, "workdir");
    req.output = output;
    req.user_dir = logdir;
    req.env = env;
    req.reuse = job->reuse_handle[0] ? job->reuse_handle : NULL;

    if (ctx->lops->submit (ctx->launcher, &req, handle, &err) < 0) {
        dt_log (LOG_ERR, "job %lld attempt %d: launch failed: %s", (long long)job->row.id,
                att->row.attempt, err.text);
        jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1, err.text, NULL);
        goto done;
    }
    snprintf (att->row.handle, sizeof (att->row.handle), "%s", handle);
    if (job->reuse_handle[0])
        dt_log (LOG_INFO, "job %lld attempt %d: %s allocation %s", (long long)job->row.id,
                att->row.attempt, strcmp (handle, job->reuse_handle) ? "reuse asked of" : "kept",
                job->reuse_handle);
    job->reuse_handle[0] = '\0';          /* the launcher owns it now */
    if (transact (jobs, job, att, tx_launched, NULL, &err) < 0)
        dt_log (LOG_ERR, "job %lld: recording launch: %s", (long long)job->row.id, err.text);
    dt_log (LOG_INFO, "job %lld attempt %d launched (%s)", (long long)job->row.id,
            att->row.attempt, handle);
    att->next_poll_ms = dt_real_ms () + 200;
    rc = 0;
    goto done;
fail:
    dt_log (LOG_ERR, "job %lld: launch: out of memory", (long long)job->row.id);
done:
    if (env)
        for (i = 0; env[i]; i++)
            free ((char *)env[i]);
    free (env);
    free (exclude);
    return rc;
}

/* --- submit, cancel, resubmit, checkpoint -------------------------------------- */

struct submit_arg {
    struct attempt *att;
};

static int tx_submit (struct jobs *jobs, struct job *job, struct attempt *unused, void *arg,
                      dt_error_t *err)
{
    struct submit_arg *a = arg;
    char detail[160];

    if (store_job_insert (jobs->ctx->store, &job->row, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail), "job '%.64s' submitted by %.63s", job->row.name,
              job->row.user);
    if (store_event (jobs->ctx->store, job->row.submit_time, job->row.id, 0, "job_submitted",
                     NULL, -1, detail, job->row.spec, err) < 0)
        return -1;
    if (!(a->att = attempt_alloc (jobs, job, 1, true, err)))
        return -1;
    job->row.attempts = 1;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0
        || tx_insert_attempt (jobs, job, a->att, err) < 0) {
        attempt_destroy (a->att);
        a->att = NULL;
        return -1;
    }
    return 0;
}

int jobs_submit (struct jobs *jobs, const json_t *spec_in, uid_t uid, gid_t gid, int64_t *id,
                 int *status, dt_error_t *err)
{
    struct ctld_config *cfg = jobs->ctx->cfg;
    struct spec_defaults d = {
        .checkpoint_root = cfg->checkpoint_root,
        .heartbeat_interval_ms = cfg->heartbeat_interval_ms,
        .node_timeout_ms = cfg->node_timeout_ms,
        .hang_timeout_ms = cfg->hang_timeout_ms,
    };
    struct job *job;
    struct submit_arg a = { NULL };
    json_t *spec;

    if (!(spec = spec_validate (spec_in, &d, err))) {
        *status = errno == ENOMEM ? 500 : 400;
        return -1;
    }
    /* A job the launcher can never run is refused here, before anything is
     * stored; a launcher that cannot tell right now accepts it. */
    if (jobs->ctx->lops->check) {
        dt_error_t cerr;
        json_t *sp = json_object_get (spec, "partition");
        int want = (int)(json_integer_value (json_object_get (spec, "nodes"))
                         + json_integer_value (json_object_get (spec, "spare_nodes")));
        if (jobs->ctx->lops->check (jobs->ctx->launcher, json_is_string (sp)
                                    ? json_string_value (sp) : NULL, want, &cerr) < 0) {
            if (errno == EINVAL) {
                json_decref (spec);
                *status = 400;
                return errprintf (err, "%s", cerr.text);
            }
            dt_log (LOG_WARNING, "submit: launcher check: %s (accepting the job)", cerr.text);
        }
    }
    if (!(job = calloc (1, sizeof (*job)))) {
        json_decref (spec);
        *status = 500;
        return errnoprintf (err, ENOMEM, "out of memory");
    }
    store_job_row_init (&job->row);
    job->row.spec = spec;
    job->row.exclude = json_array ();
    snprintf (job->row.name, sizeof (job->row.name), "%s",
              json_string_value (json_object_get (spec, "name")));
    job->row.uid = uid;
    job->row.gid = gid;
    auth_user_name (uid, job->row.user, sizeof (job->row.user));
    job->row.state = JOB_PENDING;
    job->row.submit_time = dt_real_ms ();
    job->last_metric_step = -1;

    if (transact (jobs, job, NULL, tx_submit, &a, err) < 0) {
        job_destroy (job);
        *status = 500;
        return -1;
    }
    job->att = a.att;
    job->next = jobs->list;
    jobs->list = job;
    *id = job->row.id;
    dt_log (LOG_NOTICE, "job %lld '%s' submitted by %s (%d x %d ranks)", (long long)*id,
            job->row.name, job->row.user, job->att->row.num_nodes,
            job->att->row.ranks_per_node);
    /* Committed: the launch may fail, but the job exists (and says why). */
    attempt_launch (jobs, job->att);
    return 0;
}

struct job *jobs_find (struct jobs *jobs, int64_t id)
{
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->row.id == id)
            return j;
    return NULL;
}

/* Owner or admin; otherwise 403.  Unknown job: 404. */
static struct job *job_for_change (struct jobs *jobs, int64_t id, uid_t uid, int *status,
                                   dt_error_t *err)
{
    struct job *job = jobs_find (jobs, id);
    struct store_job_row row;

    if (!job) {
        if (store_job_load (jobs->ctx->store, id, &row, err) < 0) {
            *status = errno == ENOENT ? 404 : 500;
            return NULL;
        }
        uid_t owner = row.uid;
        store_job_row_clear (&row);
        if (owner != uid && !config_is_admin (jobs->ctx->cfg, uid)) {
            *status = 403;
            errnoprintf (err, EPERM, "job %lld belongs to another user", (long long)id);
            return NULL;
        }
        return NULL;                        /* exists, not live: caller decides */
    }
    if (job->row.uid != uid && !config_is_admin (jobs->ctx->cfg, uid)) {
        *status = 403;
        errnoprintf (err, EPERM, "job %lld belongs to another user", (long long)id);
        return NULL;
    }
    return job;
}

static int tx_cancel (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                      dt_error_t *err)
{
    const char *reason = arg;
    if (job_set_state (jobs, job, JOB_CANCELLED, "cancelled", err) < 0)
        return -1;
    if (att && !fsm_attempt_terminal (att->row.state) && att->row.state != ATT_ENDING) {
        snprintf (att->row.cause, sizeof (att->row.cause), "cancelled");
        snprintf (att->row.detail, sizeof (att->row.detail), "%s", reason ? reason : "");
        att->row.fail_time = dt_real_ms ();
        att->end_state = ATT_CANCELLED;
        if (att->row.handle[0] == '\0' && att->row.state == ATT_SUBMITTED)
            return att_set_state (jobs, att, ATT_CANCELLED, err);
        return att_set_state (jobs, att, ATT_ENDING, err);
    }
    return 0;
}

int jobs_cancel (struct jobs *jobs, int64_t id, uid_t uid, const char *reason, int *status,
                 dt_error_t *err)
{
    struct job *job;

    *status = 409;
    if (!(job = job_for_change (jobs, id, uid, status, err))) {
        if (*status == 409)
            errnoprintf (err, EBUSY, "job %lld has ended: cannot be cancelled", (long long)id);
        return -1;
    }
    if (!fsm_job_ok (job->row.state, JOB_CANCELLED)) {
        *status = 409;
        return errnoprintf (err, EBUSY, "job %lld is %s: cannot be cancelled", (long long)id,
                            fsm_job_state_name (job->row.state));
    }
    if (transact (jobs, job, job->att, tx_cancel, (void *)reason, err) < 0) {
        *status = errno == EBUSY ? 409 : 500;
        return -1;
    }
    dt_log (LOG_NOTICE, "job %lld cancelled by uid %ld", (long long)id, (long)uid);
    if (job->reuse_handle[0]) {
        /* An allocation kept for an in-allocation restart that will not come. */
        dt_error_t e3;
        if (jobs->ctx->lops->cancel (jobs->ctx->launcher, job->reuse_handle, 0, &e3) < 0)
            dt_log (LOG_ERR, "job %lld: cancel %s: %s", (long long)id, job->reuse_handle,
                    e3.text);
        job->reuse_handle[0] = '\0';
    }
    if (job->att && job->att->row.state == ATT_ENDING && job->att->row.handle[0]) {
        dt_error_t e2;
        if (jobs->ctx->lops->cancel (jobs->ctx->launcher, job->att->row.handle, 0, &e2) < 0)
            dt_log (LOG_ERR, "job %lld: cancel %s: %s", (long long)id, job->att->row.handle,
                    e2.text);
        job->att->cancel_sent = true;
    }
    return 0;
}

struct resubmit_arg {
    const json_t *exclude;
    bool from_scratch;
    struct attempt *att;
};

static int tx_resubmit (struct jobs *jobs, struct job *job, struct attempt *old, void *arg,
                        dt_error_t *err)
{
    struct resubmit_arg *a = arg;
    size_t i;
    json_t *v;

    json_array_foreach (a->exclude, i, v) {
        bool have = false;
        size_t j;
        json_t *w;
        json_array_foreach (job->row.exclude, j, w)
            if (json_equal (v, w))
                have = true;
        if (!have)
            json_array_append (job->row.exclude, v);
    }
    job->row.restarts = 0;
    if (job_set_state (jobs, job, JOB_PENDING, "resubmitted", err) < 0)
        return -1;
    if (!(a->att = attempt_alloc (jobs, job, job->row.attempts + 1, a->from_scratch, err)))
        return -1;
    job->row.attempts++;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0
        || tx_insert_attempt (jobs, job, a->att, err) < 0) {
        attempt_destroy (a->att);
        a->att = NULL;
        return -1;
    }
    return 0;
}

int jobs_resubmit (struct jobs *jobs, int64_t id, uid_t uid, const json_t *exclude,
                   bool from_scratch, int *status, dt_error_t *err)
{
    struct job *job;
    struct resubmit_arg a = { exclude, from_scratch, NULL };
    json_t *saved_exclude;

    *status = 500;
    if (!(job = job_for_change (jobs, id, uid, status, err))) {
        struct store_job_row row;
        if (*status != 500 || errno == ENOMEM)
            return -1;
        /* An ended job that is no longer in memory: bring it back. */
        if (store_job_load (jobs->ctx->store, id, &row, err) < 0) {
            *status = errno == ENOENT ? 404 : 500;
            return -1;
        }
        if (!(job = calloc (1, sizeof (*job)))) {
            store_job_row_clear (&row);
            return errnoprintf (err, ENOMEM, "out of memory");
        }
        job->row = row;
        job->last_metric_step = -1;
        job->next = jobs->list;
        jobs->list = job;
    }
    if (!fsm_job_ok (job->row.state, JOB_PENDING)) {
        *status = 409;
        return errnoprintf (err, EBUSY, "job %lld is %s: only a failed or cancelled job can "
                            "be resubmitted", (long long)id, fsm_job_state_name (job->row.state));
    }
    if (job->att && !fsm_attempt_terminal (job->att->row.state)) {
        *status = 409;
        return errnoprintf (err, EBUSY, "job %lld: attempt %d is still %s; try again shortly",
                            (long long)id, job->att->row.attempt,
                            fsm_attempt_state_name (job->att->row.state));
    }
    saved_exclude = json_deep_copy (job->row.exclude);
    if (transact (jobs, job, NULL, tx_resubmit, &a, err) < 0) {
        json_decref (job->row.exclude);
        job->row.exclude = saved_exclude;
        *status = errno == EBUSY ? 409 : 500;
        return -1;
    }
    json_decref (saved_exclude);
    attempt_destroy (job->att);
    job->att = a.att;
    dt_log (LOG_NOTICE, "job %lld resubmitted by uid %ld (attempt %d)", (long long)id,
            (long)uid, job->att->row.attempt);
    attempt_launch (jobs, job->att);
    return 0;
}

/* Steps the fastest rank makes in two heartbeat intervals, at least 2:
 * far enough ahead that every rank gets the command before reaching it. */
static int64_t ckpt_lookahead (struct attempt *att)
{
    struct job *job = att->job;
    int64_t hb = spec_int (job, "heartbeat", "interval_ms");
    double steps_per_ms = 0;
    if (att->row.start_time > 0 && att->max_step > 0) {
        int64_t dt = dt_real_ms () - att->row.start_time;
        int64_t ds = att->max_step - (att->row.resume_step > 0 ? att->row.resume_step : 0);
        if (dt > 0 && ds > 0)
            steps_per_ms = (double)ds / dt;
    }
    int64_t la = (int64_t)ceil (steps_per_ms * 2 * hb) + 1;
    return la < 2 ? 2 : la;
}

int jobs_checkpoint (struct jobs *jobs, int64_t id, uid_t uid, int64_t *step, int *status,
                     dt_error_t *err)
{
    struct job *job;
    struct attempt *att;
    dt_error_t e2;

    *status = 409;
    if (!(job = job_for_change (jobs, id, uid, status, err))) {
        if (*status == 409)
            errnoprintf (err, EBUSY, "job %lld is not running", (long long)id);
        return -1;
    }
    att = job->att;
    if (!att || att->row.state != ATT_RUNNING || job->row.state != JOB_RUNNING) {
        *status = 409;
        return errnoprintf (err, EBUSY, "job %lld is %s: a checkpoint needs a running attempt",
                            (long long)id, fsm_job_state_name (job->row.state));
    }
    int64_t s = (att->max_step > 0 ? att->max_step : 0) + ckpt_lookahead (att);
    if (att->ckpt_cmd_step == 0 || s < att->ckpt_cmd_step)
        att->ckpt_cmd_step = s;
    *step = att->ckpt_cmd_step;
    char detail[96];
    snprintf (detail, sizeof (detail), "checkpoint requested at step %lld", (long long)*step);
    if (jobs_note (jobs, att, "checkpoint_requested", NULL, -1, detail, NULL, &e2) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)id, e2.text);
    return 0;
}

/* --- agent-driven transitions -------------------------------------------------- */

static int agent_cmp (const void *a, const void *b)
{
    const struct agent *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return strcmp (x->node, y->node);
}

struct reg_arg {
    struct agent *ag;
    bool first;
};

static int tx_registered (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                          dt_error_t *err)
{
    struct reg_arg *r = arg;
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    int expected = att->row.num_nodes + att->row.spare_nodes;

    if (att->row.state == ATT_SUBMITTED && att_set_state (jobs, att, ATT_STARTING, err) < 0)
        return -1;
    if (r->first) {
        char detail[128];
        struct agent *ag = r->ag;
        snprintf (detail, sizeof (detail), "agent on %s registered (%d of %d)", ag->node,
                  att->nagents, expected);
        if (store_attempt_node_put (st, job->row.id, att->row.attempt, ag->node, ag->order, -1,
                                    false, ag->addr, ag->port, ag->pid, "registered",
                                    ag->register_time, 0, ag->hostinfo, err) < 0
            || store_node_seen (st, ag->node, ag->addr, ag->hostinfo, now, job->row.id,
                                att->row.attempt, err) < 0
            || store_event (st, now, job->row.id, att->row.attempt, "agent_registered",
                            ag->node, -1, detail, NULL, err) < 0)
            return -1;
    }
    if (att->nagents < expected || att->row.state != ATT_STARTING)
        return 0;

    /* Everyone is here: node ranks in Slurm node order. */
    qsort (att->agents, att->nagents, sizeof (*att->agents), agent_cmp);
    att->agent_hash_n = -1;             /* the node index is stale */
    int rpn = att->row.ranks_per_node;
    for (int i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        ag->spare = i >= att->row.num_nodes;
        ag->node_rank = ag->spare ? -1 : i;
        ag->last_hb_ms = now;
        if (!ag->spare) {
            for (int l = 0; l < rpn; l++) {
                struct rank *rk = &att->ranks[i * rpn + l];
                snprintf (rk->node, sizeof (rk->node), "%s", ag->node);
                rk->local_rank = l;
                snprintf (rk->state, sizeof (rk->state), "starting");
                rk->updated = now;
                rk->dirty = true;
            }
        }
        if (store_attempt_node_put (st, job->row.id, att->row.attempt, ag->node, ag->order,
                                    ag->node_rank, ag->spare, ag->addr, ag->port, ag->pid,
                                    "registered", ag->register_time, now, ag->hostinfo,
                                    err) < 0)
            return -1;
    }
    snprintf (att->row.master_addr, sizeof (att->row.master_addr), "%s", att->agents[0].addr);
    att->row.master_port = att->agents[0].port;
    {
        char list[256] = "";
        size_t off = 0;
        for (int i = 0; i < att->nagents && off < sizeof (list); i++)
            off += snprintf (list + off, sizeof (list) - off, "%s%s", i ? "," : "",
                             att->agents[i].node);
        if (!att->row.nodelist[0])
            snprintf (att->row.nodelist, sizeof (att->row.nodelist), "%s", list);
    }
    provenance_set_machine (att);       /* stored by att_set_state */
    if (att_set_state (jobs, att, ATT_RUNNING, err) < 0)
        return -1;
    if (job->row.state != JOB_RUNNING && job_set_state (jobs, job, JOB_RUNNING, NULL, err) < 0)
        return -1;
    return 0;
}

int jobs_agent_registered (struct jobs *jobs, struct attempt *att, struct agent *ag,
                           bool first, dt_error_t *err)
{
    struct reg_arg r = { ag, first };
    char node[64];
    snprintf (node, sizeof (node), "%s", ag->node);   /* qsort may move ag */
    if (transact (jobs, att->job, att, tx_registered, &r, err) < 0)
        return -1;
    if (att->row.state == ATT_RUNNING && first && att->nagents
        == att->row.num_nodes + att->row.spare_nodes)
        dt_log (LOG_INFO, "job %lld attempt %d running on %s (master %s:%d)",
                (long long)att->row.job_id, att->row.attempt, att->row.nodelist,
                att->row.master_addr, att->row.master_port);
    (void)node;
    return 0;
}

struct done_arg {
    struct agent *ag;
    int exit_code;
};

static int tx_done (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                    dt_error_t *err)
{
    struct done_arg *d = arg;
    struct agent *ag = d->ag;
    char detail[96];
    int64_t now = dt_real_ms ();

    snprintf (detail, sizeof (detail), "agent on %s done (exit %d)", ag->node, d->exit_code);
    if (store_attempt_node_put (jobs->ctx->store, job->row.id, att->row.attempt, ag->node,
                                ag->order, ag->node_rank, ag->spare, ag->addr, ag->port,
                                ag->pid, "done", ag->register_time, ag->last_hb_ms,
                                ag->hostinfo, err) < 0)
        return -1;
    return store_event (jobs->ctx->store, now, job->row.id, att->row.attempt, "agent_done",
                        ag->node, -1, detail, NULL, err);
}

int jobs_agent_done (struct jobs *jobs, struct attempt *att, struct agent *ag, int exit_code,
                     dt_error_t *err)
{
    struct done_arg d = { ag, exit_code };
    if (ag->done)
        return 0;
    ag->done = true;
    if (transact (jobs, att->job, att, tx_done, &d, err) < 0) {
        ag->done = false;
        return -1;
    }
    if (exit_code != 0) {
        char detail[96];
        snprintf (detail, sizeof (detail), "agent on %s done with exit code %d", ag->node,
                  exit_code);
        jobs_attempt_fail (jobs, att, "trainer_exit", ag->node, -1, detail,
                           json_pack ("{s:i}", "exit_code", exit_code));
        return 0;
    }
    if (all_workers_done (att))
        attempt_succeed (jobs, att);
    return 0;
}

struct note_arg {
    const char *kind, *node, *detail;
    int rank;
    const json_t *data;
};

static int tx_note (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                    dt_error_t *err)
{
    struct note_arg *n = arg;
    return store_event (jobs->ctx->store, dt_real_ms (), job->row.id,
                        att ? att->row.attempt : 0, n->kind, n->node, n->rank, n->detail,
                        n->data, err);
}

int jobs_note (struct jobs *jobs, struct attempt *att, const char *kind, const char *node,
               int rank, const char *detail, const json_t *data, dt_error_t *err)
{
    struct note_arg n = { kind, node, detail, rank, data };
    return transact (jobs, att->job, att, tx_note, &n, err);
}

static int tx_result (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                      dt_error_t *err)
{
    struct note_arg *n = arg;
    json_decref (job->row.result);
    job->row.result = json_deep_copy (n->data);
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0)
        return -1;
    return tx_note (jobs, job, att, arg, err);
}

int jobs_result (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                 const json_t *result, dt_error_t *err)
{
    struct note_arg n = { "result", node, "trainer reported its result", rank, result };
    json_t *old = json_incref (att->job->row.result);
    if (transact (jobs, att->job, att, tx_result, &n, err) < 0) {
        json_decref (att->job->row.result);
        att->job->row.result = old;
        return -1;
    }
    json_decref (old);
    return 0;
}

/* --- checkpoints ------------------------------------------------------------- */

/* Write 'text' to dir/name atomically: temp file, fsync, rename, fsync dir. */
static int write_atomic (const char *dir, const char *name, const char *text,
                         dt_error_t *err)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    int fd, dfd;
    size_t len = strlen (text), off = 0;

    pathf (tmp, sizeof (tmp), "%s/.%s.tmp", dir, name);
    pathf (path, sizeof (path), "%s/%s", dir, name);
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return errnoprintf (err, errno, "%s: %s", tmp, strerror (errno));
    while (off < len) {
        ssize_t n = write (fd, text + off, len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        off += n;
    }
    if (fsync (fd) < 0 || close (fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (rename (tmp, path) < 0)
        goto error;
    if ((dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync (dfd);
        close (dfd);
    }
    return 0;
error: {
        int e = errno;
        if (fd >= 0)
            close (fd);
        unlink (tmp);
        return errnoprintf (err, e, "%s: %s", path, strerror (e));
    }
}

/* Remove a deleted checkpoint's files (only the ones we know of). */
static void ckpt_remove_files (struct jobs *jobs, struct job *job, int64_t step)
{
    char dir[PATH_MAX], path[PATH_MAX];
    dt_error_t err;
    json_t *shards = store_ckpt_shards_json (jobs->ctx->store, job->row.id, step, &err);
    size_t i;
    json_t *s;

    json_array_foreach (shards, i, s) {
        const char *p = json_string_value (json_object_get (s, "path"));
        if (p && unlink (p) < 0 && errno != ENOENT)
            dt_log_errno (LOG_WARNING, "unlink %s", p);
    }
    json_decref (shards);
    job_ckpt_dir (job, dir, sizeof (dir));
    pathf (path, sizeof (path), "%s/step-%lld/manifest.json", dir, (long long)step);
    unlink (path);
    pathf (path, sizeof (path), "%s/step-%lld", dir, (long long)step);
    rmdir (path);
}

/* Phase two of a commit, inside the caller's transaction, once every shard
 * of 'step' is in checkpoint_shards: the manifest first (atomically, into
 * sdir), then the commit in SQLite; a crash in between leaves a manifest of
 * an uncommitted checkpoint, which is never resumed.  'kind': "regular"
 * (each rank wrote its shard) or "jit" (one survivor wrote them all after
 * a failure, issue 7); 'extra' (borrowed, may be NULL) goes into the
 * manifest and the event.  *deleted (new array, caller frees): the steps
 * retention removed (their files are the caller's, after the commit). */
static int ckpt_commit_tx (struct jobs *jobs, struct job *job, struct attempt *att,
                           int64_t step, const char *sdir, const char *kind,
                           const json_t *extra, int64_t **deleted, int *ndeleted,
                           dt_error_t *err)
{
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    int nshards, rc;
    int64_t bytes;
    char detail[160];

    if (store_ckpt_shards (st, job->row.id, step, &nshards, &bytes, err) < 0)
        return -1;
    json_t *shards = store_ckpt_shards_json (st, job->row.id, step, err);
    if (!shards)
        return -1;
    json_t *m = json_pack ("{s:i s:I s:I s:i s:i s:I s:s s:o s:s s:s}", "format", 1, "job",
                           (json_int_t)job->row.id, "step", (json_int_t)step, "attempt",
                           att->row.attempt, "world_size", att->row.world_size, "bytes",
                           (json_int_t)bytes, "time", "", "shards", shards, "dtctl",
                           PACKAGE_VERSION, "kind", kind);
    if (!m)
        return errnoprintf (err, ENOMEM, "out of memory");
    if (extra)
        json_object_set (m, "jit", (json_t *)extra);
    /* Who wrote it, how to reproduce it (issue 10). */
    if (att->row.provenance)
        json_object_set (m, "provenance", att->row.provenance);
    char tbuf[40];
    json_object_set_new (m, "time", json_string (dt_format_time (now, tbuf, sizeof (tbuf))));
    char *text = json_dumps (m, JSON_INDENT (1) | JSON_SORT_KEYS);
    json_decref (m);
    if (!text)
        return errnoprintf (err, ENOMEM, "out of memory");
    char sha[65];
    sha256_hex (text, strlen (text), sha);
    mkdir (sdir, 0755);
    rc = write_atomic (sdir, "manifest.json", text, err);
    free (text);
    if (rc < 0)
        return -1;
    if (store_ckpt_set_state (st, job->row.id, step, "committed", sha, now, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail), "%scheckpoint of step %lld committed (%d shards, %lld "
              "bytes)", strcmp (kind, "jit") ? "" : "just-in-time ", (long long)step, nshards,
              (long long)bytes);
    json_t *data = json_pack ("{s:I s:s s:s s:s}", "step", (json_int_t)step, "dir", sdir,
                              "manifest_sha256", sha, "kind", kind);
    if (data && extra)
        json_object_set (data, "jit", (json_t *)extra);
    rc = store_event (st, now, job->row.id, att->row.attempt, "checkpoint_committed", NULL,
                      -1, detail, data, err);
    json_decref (data);
    if (rc < 0)
        return -1;

    /* Retention: keep the newest 'keep' committed checkpoints. */
    if (store_ckpt_beyond_keep (st, job->row.id, spec_int (job, "checkpoint", "keep"),
                                deleted, ndeleted, err) < 0)
        return -1;
    for (int i = 0; i < *ndeleted; i++)
        if (store_ckpt_set_state (st, job->row.id, (*deleted)[i], "deleted", NULL, 0, err) < 0)
            return -1;
    return 0;
}

struct shard_arg {
    const char *node, *path, *crc32c;
    int rank;
    int64_t step, bytes;
    bool committed;
    int64_t *deleted;
    int ndeleted;
};

static int tx_shard (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                     dt_error_t *err)
{
    struct shard_arg *a = arg;
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    char state[32] = "", cdir[PATH_MAX], sdir[PATH_MAX], detail[160];
    int nshards;
    int64_t bytes;

    job_ckpt_dir (job, cdir, sizeof (cdir));
    pathf (sdir, sizeof (sdir), "%s/step-%lld", cdir, (long long)a->step);
    if (store_ckpt_state (st, job->row.id, a->step, state, sizeof (state), err) < 0
        && errno != ENOENT)
        return -1;
    if (!strcmp (state, "committed"))
        return 0;                           /* a late duplicate */
    if (store_ckpt_put_pending (st, job->row.id, a->step, att->row.attempt, sdir,
                                att->row.world_size, now, err) < 0
        || store_shard_put (st, job->row.id, a->step, a->rank, att->row.attempt, a->node,
                            a->path, a->bytes, a->crc32c, now, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail), "rank %d wrote its shard of step %lld (%lld bytes)",
              a->rank, (long long)a->step, (long long)a->bytes);
    json_t *data = json_pack ("{s:I s:s s:I s:s}", "step", (json_int_t)a->step, "path",
                              a->path, "bytes", (json_int_t)a->bytes, "crc32c", a->crc32c);
    int rc = store_event (st, now, job->row.id, att->row.attempt, "shard", a->node, a->rank,
                          detail, data, err);
    json_decref (data);
    if (rc < 0 || store_ckpt_shards (st, job->row.id, a->step, &nshards, &bytes, err) < 0)
        return -1;
    if (nshards < att->row.world_size)
        return 0;

    /* Every shard of step S is durable: phase two. */
    if (ckpt_commit_tx (jobs, job, att, a->step, sdir, "regular", NULL, &a->deleted,
                        &a->ndeleted, err) < 0)
        return -1;
    a->committed = true;
    return 0;
}

int jobs_shard (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                int64_t step, const char *path, int64_t bytes, const char *crc32c,
                dt_error_t *err)
{
    struct shard_arg a = { node, path, crc32c, rank, step, bytes, false, NULL, 0 };

    if (rank < 0 || rank >= att->row.world_size)
        return errnoprintf (err, EINVAL, "rank: %d is outside the world (size %d)", rank,
                            att->row.world_size);
    if (transact (jobs, att->job, att, tx_shard, &a, err) < 0) {
        free (a.deleted);
        return -1;
    }
    if (a.committed) {
        att->committed_any = true;
        jobs->ckpts++;
        dt_log (LOG_INFO, "job %lld: checkpoint of step %lld committed",
                (long long)att->row.job_id, (long long)step);
        if (att->ckpt_cmd_step == step)
            att->ckpt_cmd_step = 0;
        for (int i = 0; i < a.ndeleted; i++)
            ckpt_remove_files (jobs, att->job, a.deleted[i]);
    }
    free (a.deleted);
    return 0;
}

/* --- just-in-time checkpoints (issue 7) ---------------------------------------- */

/* Remove the plain files of 'dir' and the directory (one level: a
 * checkpoint step directory holds only shards, temporaries and a manifest). */
static void rm_dir_files (const char *dir)
{
    DIR *d = opendir (dir);
    struct dirent *e;
    char p[PATH_MAX];
    if (!d)
        return;
    while ((e = readdir (d)))
        if (strcmp (e->d_name, ".") && strcmp (e->d_name, "..")
            && pathf (p, sizeof (p), "%s/%s", dir, e->d_name) == 0)
            unlink (p);
    closedir (d);
    rmdir (dir);
}

bool jobs_jit_window (const struct attempt *att)
{
    return att->jit_open && att->row.state == ATT_ENDING;
}

bool jobs_jit_reporter (const struct attempt *att, int rank)
{
    return att->jit && rank >= 0 && rank < att->row.world_size && att->jit[rank].step > 0;
}

struct jit_arg {
    int rank;                   /* the reporting rank */
    int64_t step;
    const char *node, *sdir;
    int64_t *deleted;
    int ndeleted;
};

static int tx_jit_commit (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                          dt_error_t *err)
{
    struct jit_arg *a = arg;
    struct jit_set *js = &att->jit[a->rank];
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    char path[PATH_MAX];

    if (store_ckpt_put_pending (st, job->row.id, a->step, att->row.attempt, a->sdir,
                                att->row.world_size, now, err) < 0)
        return -1;
    for (int k = 0; k < att->row.world_size; k++) {
        if (pathf (path, sizeof (path), "%s/rank-%d.ckpt", a->sdir, k) < 0)
            return errnoprintf (err, ENAMETOOLONG, "checkpoint path too long");
        if (store_shard_put (st, job->row.id, a->step, k, att->row.attempt, js->node, path,
                             js->shards[k].bytes, js->shards[k].crc32c, now, err) < 0)
            return -1;
    }
    json_t *extra = json_pack ("{s:i s:s s:I}", "written_by_rank", a->rank, "node", js->node,
                               "attempt", (json_int_t)att->row.attempt);
    int rc = ckpt_commit_tx (jobs, job, att, a->step, a->sdir, "jit", extra, &a->deleted,
                             &a->ndeleted, err);
    json_decref (extra);
    return rc;
}

/* Every shard of the set of 'rank' is in: move its directory into place as
 * step-<S> and commit it. */
static int jit_commit (struct jobs *jobs, struct attempt *att, int rank, dt_error_t *err)
{
    struct job *job = att->job;
    struct jit_set *js = &att->jit[rank];
    char cdir[PATH_MAX], jdir[PATH_MAX], sdir[PATH_MAX], old[PATH_MAX], state[32] = "";
    struct jit_arg a = { rank, js->step, js->node, sdir, NULL, 0 };

    job_ckpt_dir (job, cdir, sizeof (cdir));
    if (pathf (jdir, sizeof (jdir), "%s/jit-%lld-r%d", cdir, (long long)js->step, rank) < 0
        || pathf (sdir, sizeof (sdir), "%s/step-%lld", cdir, (long long)js->step) < 0
        || pathf (old, sizeof (old), "%s/.partial-step-%lld-a%d", cdir, (long long)js->step,
                  att->row.attempt) < 0)
        return errnoprintf (err, ENAMETOOLONG, "checkpoint path too long");
    if (store_ckpt_state (jobs->ctx->store, job->row.id, js->step, state, sizeof (state), err)
        < 0 && errno != ENOENT)
        return -1;
    if (!strcmp (state, "committed"))
        return 0;               /* the ranks committed that step themselves */
    /* A partial regular checkpoint of the same step (its writers died or
     * were waited for): its shards hold the same state; set it aside. */
    if (access (sdir, F_OK) == 0) {
        rm_dir_files (old);
        if (rename (sdir, old) < 0)
            return errnoprintf (err, errno, "rename %s: %s", sdir, strerror (errno));
    }
    if (rename (jdir, sdir) < 0)
        return errnoprintf (err, errno, "rename %s to %s: %s", jdir, sdir, strerror (errno));
    int dfd = open (cdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync (dfd);
        close (dfd);
    }
    rm_dir_files (old);
    if (transact (jobs, job, att, tx_jit_commit, &a, err) < 0) {
        free (a.deleted);
        return -1;
    }
    att->jit_step = js->step;
    att->committed_any = true;
    jobs->ckpts++;
    dt_log (LOG_NOTICE, "job %lld: just-in-time checkpoint of step %lld committed (written by "
            "rank %d on %s)", (long long)att->row.job_id, (long long)js->step, rank, js->node);
    for (int i = 0; i < a.ndeleted; i++)
        ckpt_remove_files (jobs, job, a.deleted[i]);
    free (a.deleted);
    return 0;
}

int jobs_shard_jit (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                    int shard_rank, int64_t step, const char *path, int64_t bytes,
                    const char *crc32c, dt_error_t *err)
{
    int W = att->row.world_size;
    char cdir[PATH_MAX], want[PATH_MAX], dir[1024], sha[65];
    int64_t latest = -1;

    if (rank < 0 || rank >= W)
        return errnoprintf (err, EINVAL, "rank: %d is outside the world (size %d)", rank, W);
    if (shard_rank < 0 || shard_rank >= W)
        return errnoprintf (err, EINVAL, "shard_rank: %d is outside the world (size %d)",
                            shard_rank, W);
    /* The controller moves this directory: it must be exactly where a
     * just-in-time set of this rank goes, inside the job's checkpoint dir. */
    job_ckpt_dir (att->job, cdir, sizeof (cdir));
    if (pathf (want, sizeof (want), "%s/jit-%lld-r%d/rank-%d.ckpt", cdir, (long long)step,
               rank, shard_rank) < 0 || strcmp (path, want))
        return errnoprintf (err, EINVAL, "path: a just-in-time shard of rank %d must be %s",
                            rank, want);
    if (!att->jit && !(att->jit = calloc (W, sizeof (*att->jit))))
        return errnoprintf (err, ENOMEM, "out of memory");
    struct jit_set *js = &att->jit[rank];
    if (!js->shards && !(js->shards = calloc (W, sizeof (*js->shards))))
        return errnoprintf (err, ENOMEM, "out of memory");
    if (js->step != step) {
        memset (js->shards, 0, W * sizeof (*js->shards));
        js->step = step;
        js->nhave = 0;
    }
    snprintf (js->node, sizeof (js->node), "%s", node);
    if (!js->shards[shard_rank].got)
        js->nhave++;
    js->shards[shard_rank].got = true;
    js->shards[shard_rank].bytes = bytes;
    snprintf (js->shards[shard_rank].crc32c, sizeof (js->shards[shard_rank].crc32c), "%s",
              crc32c);
    if (js->nhave < W)
        return 0;

    /* A complete set: the first of a step newer than every committed
     * checkpoint wins; the others are identical or older, and removed. */
    int rc = store_ckpt_latest (jobs->ctx->store, att->row.job_id, &latest, dir, sizeof (dir),
                                sha, sizeof (sha), err);
    if (rc < 0)
        return -1;
    char jdir[PATH_MAX], detail[192];
    pathf (jdir, sizeof (jdir), "%s/jit-%lld-r%d", cdir, (long long)step, rank);
    if (att->jit_step > 0 || (rc == 1 && step <= latest)) {
        snprintf (detail, sizeof (detail), "just-in-time checkpoint of step %lld by rank %d "
                  "not needed (%s %lld)", (long long)step, rank,
                  att->jit_step > 0 ? "just-in-time checkpoint committed at step"
                  : "a committed checkpoint has step", (long long)(att->jit_step > 0
                                                                  ? att->jit_step : latest));
        rm_dir_files (jdir);
        return jobs_note (jobs, att, "jit_checkpoint_unused", node, rank, detail, NULL, err);
    }
    return jit_commit (jobs, att, rank, err);
}

/* The end of the window: record what it gave (the caller cancels). */
static void jit_window_close (struct jobs *jobs, struct attempt *att, const char *why)
{
    dt_error_t err;
    char detail[256];
    if (!att->jit_open)
        return;
    att->jit_open = false;
    int64_t waited = dt_real_ms () - att->jit_opened_ms;
    if (att->jit_step > 0)
        snprintf (detail, sizeof (detail), "just-in-time checkpoint of step %lld committed; "
                  "the next attempt resumes from it (waited %lld ms)", (long long)att->jit_step,
                  (long long)waited);
    else
        snprintf (detail, sizeof (detail), "no just-in-time checkpoint (%s, waited %lld ms): "
                  "the next attempt resumes from the last committed checkpoint", why,
                  (long long)waited);
    json_t *data = json_pack ("{s:s s:I s:I s:s}", "resume_source",
                              att->jit_step > 0 ? "jit" : "committed", "jit_step",
                              (json_int_t)att->jit_step, "waited_ms", (json_int_t)waited,
                              "why", why);
    if (jobs_note (jobs, att, "jit_window", NULL, -1, detail, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    json_decref (data);
    dt_log (LOG_INFO, "job %lld attempt %d: %s", (long long)att->row.job_id, att->row.attempt,
            detail);
}

/* A surviving rank (one that may write a just-in-time checkpoint) is still
 * running: it has libdtclient, is not on the failed node, and its agent
 * is not silent. */
static bool jit_survivors_running (struct attempt *att, int64_t now)
{
    int64_t hb = spec_int (att->job, "heartbeat", "interval_ms");
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        if (!rk->seen || !rk->client || strcmp (rk->state, "running")
            || (att->row.cause_node[0] && !strcmp (rk->node, att->row.cause_node)))
            continue;
        struct agent *ag = agent_find (att, rk->node);
        if (ag && !ag->done && now - ag->last_hb_ms <= 3 * hb + 1000)
            return true;
    }
    return false;
}

/* After a failure: may survivors still save the state?  Only when the job
 * checkpoints, will restart, and some libdtclient rank still runs. */
static bool jit_may_help (struct attempt *att, const char *cause)
{
    return att->row.world_size > 1 && spec_str (att->job, "checkpoint", "dir")
           && att->job->row.state == JOB_RESTARTING
           && (!strcmp (cause, "trainer_exit") || !strcmp (cause, "node_lost")
               || !strcmp (cause, "node_failure")
               /* a named hung rank is killed (jobs_commands_text): its
                * peers, blocked on it, then lose a peer like any other */
               || (!strcmp (cause, "hang") && att->row.cause_rank >= 0))
           && jit_survivors_running (att, dt_real_ms ());
}

void jobs_survivor_exit (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                         int exit_code)
{
    dt_error_t err;
    char detail[192];
    snprintf (detail, sizeof (detail), "rank %d on %s exited with code %d after writing a "
              "just-in-time checkpoint: it lost a peer", rank, node, exit_code);
    json_t *data = json_pack ("{s:i s:b s:I}", "exit_code", exit_code, "survivor", 1,
                              "last_step", (json_int_t)att->ranks[rank].step);
    if (jobs_note (jobs, att, "rank_exit", node, rank, detail, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    json_decref (data);
    if (att->row.state == ATT_RUNNING && att->survivor_exit_ms == 0)
        att->survivor_exit_ms = dt_real_ms ();
}

void jobs_rank_last_step (struct jobs *jobs, struct attempt *att, int rank, int64_t step)
{
    if (rank < 0 || rank >= att->row.world_size || step < 0)
        return;
    struct rank *rk = &att->ranks[rank];
    if (step > rk->step) {
        rk->step = step;
        rk->dirty = true;
    }
    if (step > att->max_step)
        att->max_step = step;
    report_rank_exit (jobs->ctx->report, att);
}

/* --- progress, stragglers, commands ------------------------------------------ */

/* The median of a rank's window (the upper one, as ft_median), cached
 * until the window changes: a selection, not a sort. */
static double rank_median (struct rank *rk)
{
    if (rk->median_stale) {
        double v[STRAGGLER_RING];
        int n = rk->nring, k = n / 2, lo = 0, hi = n - 1;
        memcpy (v, rk->ring, n * sizeof (*v));
        while (lo < hi) {                       /* Hoare's selection */
            double piv = v[(lo + hi) / 2];
            int i = lo, j = hi;
            while (i <= j) {
                while (v[i] < piv)
                    i++;
                while (v[j] > piv)
                    j--;
                if (i <= j) {
                    double t = v[i];
                    v[i++] = v[j];
                    v[j--] = t;
                }
            }
            if (k <= j)
                hi = j;
            else if (k >= i)
                lo = i;
            else
                break;
        }
        rk->median = n > 0 ? v[k] : NAN;
        rk->median_stale = false;
    }
    return rk->median;
}

/* Ask every rank to checkpoint at a step a little ahead of the fastest one
 * and stop there; the attempt then ends with 'cause' (attempt_succeed). */
static void attempt_stop (struct jobs *jobs, struct attempt *att, const char *cause,
                          const char *node, int rank, const char *detail)
{
    dt_error_t err;
    if (att->stopping || att->row.state != ATT_RUNNING)
        return;
    att->stopping = true;
    snprintf (att->stop_cause, sizeof (att->stop_cause), "%s", cause);
    snprintf (att->stop_node, sizeof (att->stop_node), "%s", node ? node : "");
    att->stop_rank = rank;
    snprintf (att->stop_detail, sizeof (att->stop_detail), "%s", detail);
    att->stop_step = att->max_step >= 0 ? att->max_step + ckpt_lookahead (att) : 0;
    char d[320];
    snprintf (d, sizeof (d), "%s: stopping with a checkpoint at step %lld", detail,
              (long long)att->stop_step);
    json_t *data = json_pack ("{s:s s:I}", "cause", cause, "stop_step",
                              (json_int_t)att->stop_step);
    if (jobs_note (jobs, att, "stop_requested", node, rank, d, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    json_decref (data);
    dt_log (LOG_NOTICE, "job %lld attempt %d: %s", (long long)att->row.job_id, att->row.attempt, d);
}

static int64_t attempt_hang_timeout (struct jobs *jobs, struct attempt *att, bool busy,
                                     double *p99)
{
    struct ft_hang_params hp = ft_hang_defaults;
    hp.floor_ms = jobs->ctx->cfg->hang_floor_ms;
    *p99 = ft_percentile (att->steptime, att->nsteptime, 99.0);
    return ft_hang_timeout_ms (&hp, spec_int (att->job, "heartbeat", "hang_timeout_ms"), *p99,
                               att->nsteptime, busy);
}

static int straggler_window (struct job *job)
{
    int window = spec_int (job, "straggler", "window_steps");
    return window > STRAGGLER_RING ? STRAGGLER_RING : window < 1 ? 1 : window;
}

void jobs_rank_heartbeat (struct jobs *jobs, struct attempt *att, int rank, int64_t now)
{
    struct rank *rk = &att->ranks[rank];
    (void)jobs;
    if (!rk->seen)
        return;
    /* Hang watchdog bookkeeping: when the step (or busy) last changed,
     * and a step-time sample for the automatic timeout. */
    if (rk->progress_ms == 0 || rk->step != rk->progress_step) {
        if (rk->progress_ms && rk->step > rk->progress_step && !isnan (rk->compute_ms)) {
            att->steptime[att->steptime_pos] = rk->compute_ms
                                               + (isnan (rk->comm_ms) ? 0 : rk->comm_ms);
            att->steptime_pos = (att->steptime_pos + 1) % STEPTIME_RING;
            if (att->nsteptime < STEPTIME_RING)
                att->nsteptime++;
        }
        rk->progress_ms = now;
        rk->progress_step = rk->step;
    }
    if (rk->step > att->max_step)
        att->max_step = rk->step;
    /* A straggler sample: this step's compute time. */
    if (!isnan (rk->compute_ms) && rk->step > rk->ring_step) {
        int window = straggler_window (att->job);
        if (rk->ring_pos >= window)
            rk->ring_pos = 0;
        rk->ring[rk->ring_pos] = rk->compute_ms;
        rk->ring_pos = (rk->ring_pos + 1) % window;
        if (rk->nring < window)
            rk->nring++;
        rk->ring_step = rk->step;
        rk->median_stale = true;
    }
}

/* How often the attempt-wide pass may run: small attempts after every
 * heartbeat (as before issue 9), large ones about world_size / 200 ms
 * apart (at most about 200,000 rank visits a second), and at least twice
 * a heartbeat interval. */
static int64_t progress_gap_ms (struct attempt *att)
{
    int64_t gap = att->row.world_size / 200;
    int64_t hb = spec_int (att->job, "heartbeat", "interval_ms");
    if (gap < 0)
        gap = 0;
    if (hb > 0 && gap > hb / 2)
        gap = hb / 2;
    return gap;
}

void jobs_heartbeat_done (struct jobs *jobs, struct attempt *att)
{
    att->progress_dirty = true;
    if (att->row.state == ATT_RUNNING
        && dt_mono_ms () - att->progress_last_ms >= progress_gap_ms (att))
        jobs_progress (jobs, att);
}

void jobs_progress (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    int64_t now = dt_real_ms ();
    int window = straggler_window (job);
    double threshold = spec_real (job, "straggler", "threshold");
    int64_t sum_samples = 0, min_step = -1;
    double comp = 0, comm = 0;
    int ncomp = 0;

    att->progress_dirty = false;
    att->progress_last_ms = dt_mono_ms ();
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        if (!rk->seen)
            continue;
        if (rk->step > att->max_step)
            att->max_step = rk->step;
        if (min_step < 0 || rk->step < min_step)
            min_step = rk->step;
        if (rk->samples > 0)
            sum_samples += rk->samples;
        if (!isnan (rk->compute_ms)) {
            comp += rk->compute_ms;
            ncomp++;
            if (!isnan (rk->comm_ms))
                comm += rk->comm_ms;
        }
    }
    report_progress (jobs->ctx->report, att);       /* goodput accounting */
    /* Straggler score: fastest median / own median, over a full window. */
    double fastest = NAN;
    for (int r = 0; r < att->row.world_size; r++) {
        double m = rank_median (&att->ranks[r]);
        if (!isnan (m) && m > 0 && (isnan (fastest) || m < fastest))
            fastest = m;
    }
    int flagged_rank = -1;
    for (int r = 0; r < att->row.world_size && !isnan (fastest); r++) {
        struct rank *rk = &att->ranks[r];
        double m = rank_median (rk);
        double score = ft_straggler_score (fastest, m);
        if (isnan (score))
            continue;
        rk->score = score;
        if (ft_straggler_flag (rk->score, rk->nring, window, threshold) && !rk->flagged) {
            char detail[128];
            dt_error_t err;
            rk->flagged = true;
            snprintf (detail, sizeof (detail), "rank %d is a straggler: score %.2f < %.2f", r,
                      rk->score, threshold);
            json_t *data = json_pack ("{s:f s:f s:f s:i s:s}", "score", rk->score,
                                      "median_compute_ms", m, "fastest_median_compute_ms",
                                      fastest, "window_steps", window, "action",
                                      spec_str (job, "straggler", "action"));
            if (jobs_note (jobs, att, "straggler", rk->node, r, detail, data, &err) < 0)
                dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
            json_decref (data);
            if (flagged_rank < 0)
                flagged_rank = r;
        }
    }
    /* straggler.action exclude: checkpoint now, restart without its node
     * (only when another node is left to run on). */
    const char *action = spec_str (job, "straggler", "action");
    if (flagged_rank >= 0 && action && !strcmp (action, "exclude") && !att->stopping
        && att->row.num_nodes > 1) {
        char detail[160];
        snprintf (detail, sizeof (detail), "straggler rank %d on %s excluded (score %.2f)",
                  flagged_rank, att->ranks[flagged_rank].node, att->ranks[flagged_rank].score);
        attempt_stop (jobs, att, "straggler_excluded", att->ranks[flagged_rank].node,
                      flagged_rank, detail);
    }

    /* The first step past the resume point: when the restart paid off
     * (the timelines of issue 7 and the goodput report use it). */
    if (!att->first_step_noted && att->max_step > (att->row.resume_step > 0
                                                   ? att->row.resume_step : 0)) {
        char detail[128];
        dt_error_t err;
        att->first_step_noted = true;
        snprintf (detail, sizeof (detail), "first step past the resume point: %lld (resumed "
                  "from %lld)", (long long)att->max_step, (long long)att->row.resume_step);
        json_t *data = json_pack ("{s:I s:I}", "step", (json_int_t)att->max_step,
                                  "resume_step", (json_int_t)att->row.resume_step);
        if (jobs_note (jobs, att, "first_step", NULL, -1, detail, data, &err) < 0)
            dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
        json_decref (data);
    }

    /* Job-level progress: rank 0's view, throughput over >= 1 s. */
    if (att->ranks[0].seen && att->ranks[0].step >= 0) {
        job->row.last_step = att->ranks[0].step;
        job->row.last_loss = att->ranks[0].loss;
        job->dirty = true;
    }
    /* Throughput in samples/s.  A rank's "samples" is what it processed in
     * its last step (agent-api.md), so one step of the job is their sum
     * over the ranks, and the rate is the steps every rank finished since
     * the last measurement times that, over the time between them. */
    if (min_step >= 0) {
        if (att->tp_time_ms == 0 || min_step < att->tp_step) {
            att->tp_time_ms = now;
            att->tp_step = min_step;
        } else if (now - att->tp_time_ms >= 1000) {
            if (sum_samples > 0)
                job->row.throughput = (double)(min_step - att->tp_step) * (double)sum_samples
                                      * 1000.0 / (double)(now - att->tp_time_ms);
            att->tp_time_ms = now;
            att->tp_step = min_step;
            job->dirty = true;
        }
    }

    /* Step metric: the first step seen in each stride bucket, as rank 0
     * reported it: its loss is of its own step, which may be one ahead of
     * the slowest rank's (min_step), and a loss filed under the wrong step
     * would not match an uninterrupted run's curve. */
    int64_t mstep = att->ranks[0].seen ? att->ranks[0].step : -1;
    if (mstep >= 0 && job->row.metrics_stride > 0
        && (job->last_metric_step < 0
            || mstep / job->row.metrics_stride
                   > job->last_metric_step / job->row.metrics_stride)) {
        dt_error_t err;
        if (store_metric_put (jobs->ctx->store, job->row.id, mstep, att->row.attempt, now,
                              att->ranks[0].loss, job->row.throughput,
                              ncomp ? comp / ncomp : NAN, ncomp ? comm / ncomp : NAN,
                              &err) < 0)
            dt_log (LOG_ERR, "job %lld: metrics: %s", (long long)job->row.id, err.text);
        else {
            job->last_metric_step = mstep;
            if (++job->metrics_rows > metrics_cap) {
                job->row.metrics_stride *= 2;
                job->dirty = true;
                if (store_metrics_thin (jobs->ctx->store, job->row.id, job->row.metrics_stride,
                                        &err) < 0
                    || store_metrics_count (jobs->ctx->store, job->row.id,
                                            &job->metrics_rows, &err) < 0)
                    dt_log (LOG_ERR, "job %lld: metrics: %s", (long long)job->row.id,
                            err.text);
            }
        }
    }

    /* Periodic checkpoints: the next multiple of every_steps ahead of the
     * fastest rank; abandoned if every rank passed it without a commit. */
    int64_t every = spec_int (job, "checkpoint", "every_steps");
    if (att->ckpt_cmd_step > 0 && min_step > att->ckpt_cmd_step) {
        char detail[96];
        dt_error_t err;
        snprintf (detail, sizeof (detail), "checkpoint of step %lld abandoned: all ranks "
                  "passed it", (long long)att->ckpt_cmd_step);
        jobs_note (jobs, att, "checkpoint_abandoned", NULL, -1, detail, NULL, &err);
        att->ckpt_cmd_step = 0;
    }
    if (every > 0 && att->ckpt_cmd_step == 0 && att->max_step >= 0) {
        int64_t target = att->max_step + ckpt_lookahead (att);
        att->ckpt_cmd_step = (target + every - 1) / every * every;
    }
}

size_t jobs_commands_text (struct jobs *jobs, struct attempt *att, char *buf, size_t len)
{
    int n;
    (void)jobs;
    if (att->row.state == ATT_ENDING && att->jit_open && !strcmp (att->row.cause, "hang")
        && att->row.cause_rank >= 0)
        /* The just-in-time window after a hang: the hung rank goes, so its
         * peers' collective fails and they save the state (issue 7). */
        n = snprintf (buf, len, "[{\"kind\":\"kill\",\"rank\":%d}]", att->row.cause_rank);
    else if (att->row.state == ATT_ENDING)
        n = snprintf (buf, len, "[]");  /* the just-in-time window: nothing new to do */
    /* A stop includes its checkpoint: nothing else is asked alongside. */
    else if (att->stopping)
        n = snprintf (buf, len, "[{\"kind\":\"stop\",\"step\":%lld}]",
                      (long long)att->stop_step);
    else if (att->ckpt_cmd_step > 0)
        n = snprintf (buf, len, "[{\"kind\":\"checkpoint\",\"step\":%lld}]",
                      (long long)att->ckpt_cmd_step);
    else
        n = snprintf (buf, len, "[]");
    return n < 0 ? 0 : (size_t)n;
}

/* --- restarts ------------------------------------------------------------------ */

struct restart_arg {
    struct attempt *att;
};

static int tx_restart (struct jobs *jobs, struct job *job, struct attempt *old, void *arg,
                       dt_error_t *err)
{
    struct restart_arg *a = arg;
    if (!(a->att = attempt_alloc (jobs, job, job->row.attempts + 1, false, err)))
        return -1;
    job->row.attempts++;
    job->row.restarts++;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0
        || tx_insert_attempt (jobs, job, a->att, err) < 0) {
        attempt_destroy (a->att);
        a->att = NULL;
        return -1;
    }
    return 0;
}

/* Partial checkpoints (pending: not every shard arrived) of ended attempts
 * are never resumed from; remove them.  Called between attempts, when no
 * attempt of the job can add a shard any more. */
static void ckpt_clean_partial (struct jobs *jobs, struct job *job)
{
    store_t *st = jobs->ctx->store;
    dt_error_t err;
    int64_t *steps = NULL;
    int n = 0;

    if (store_ckpt_list (st, job->row.id, "pending", &steps, &n, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: partial checkpoints: %s", (long long)job->row.id, err.text);
        return;
    }
    for (int i = 0; i < n; i++) {
        char detail[128];
        snprintf (detail, sizeof (detail), "partial checkpoint of step %lld removed",
                  (long long)steps[i]);
        if (store_begin (st, &err) < 0)
            break;
        if (store_ckpt_set_state (st, job->row.id, steps[i], "deleted", NULL, 0, &err) < 0
            || store_event (st, dt_real_ms (), job->row.id, job->row.attempts,
                            "checkpoint_partial_removed", NULL, -1, detail, NULL, &err) < 0
            || store_commit (st, &err) < 0) {
            store_rollback (st);
            dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
            break;
        }
        ckpt_remove_files (jobs, job, steps[i]);
    }
    free (steps);

    /* Just-in-time sets that were not committed (incomplete, or a second
     * survivor's copy): jit-<S>-r<R> directories of the job. */
    char cdir[PATH_MAX], p[PATH_MAX];
    DIR *d;
    struct dirent *e;
    job_ckpt_dir (job, cdir, sizeof (cdir));
    if ((d = opendir (cdir))) {
        while ((e = readdir (d)))
            if (!strncmp (e->d_name, "jit-", 4)
                && pathf (p, sizeof (p), "%s/%s", cdir, e->d_name) == 0)
                rm_dir_files (p);
        closedir (d);
    }
}

static void job_restart (struct jobs *jobs, struct job *job)
{
    struct restart_arg a = { NULL };
    dt_error_t err;

    ckpt_clean_partial (jobs, job);
    if (transact (jobs, job, NULL, tx_restart, &a, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: restart: %s", (long long)job->row.id, err.text);
        job->restart_at_ms = dt_real_ms () + restart_backoff_max_ms;
        return;
    }
    attempt_destroy (job->att);
    job->att = a.att;
    jobs->restarts++;
    dt_log (LOG_NOTICE, "job %lld restart %d: attempt %d%s", (long long)job->row.id,
            job->row.restarts, job->att->row.attempt,
            job->att->row.resume_step >= 0 ? " from a checkpoint" : " from scratch");
    attempt_launch (jobs, job->att);
}

/* --- the tick ------------------------------------------------------------------ */

static const char *cause_of_launcher_end (const struct launcher_status *st)
{
    if (!strcmp (st->cause, "completed") || !strcmp (st->cause, "failed"))
        return "agent_exit";
    if (!strcmp (st->cause, "lost"))
        return "agent_lost";
    return st->cause[0] ? st->cause : "agent_exit";
}

/* The controller-side hang watchdog (issue 7): a rank whose step has not
 * changed for longer than the hang timeout (automatic: ftpolicy; a longer
 * allowance while it reports busy).  In synchronous data parallelism every
 * rank stops when one does, and the steps alone do not tell the frozen rank
 * from its peers blocked in a collective (a frozen rank may even be one
 * step ahead: it finished a collective whose last message to a peer it
 * never sent).  The agents say more: whether a rank is blocked in a
 * collective ("waiting", from libdtclient) and whether its process is
 * stopped.  So the blame goes, in this order, to a stopped rank, to a rank
 * not waiting on its peers, and only then to a waiting one (after twice
 * the timeout: the collective itself hangs).  When more than one rank of
 * the chosen kind stalled, the failure names no node (a wrong blame would
 * exclude a healthy node) and the evidence lists the candidates. */
enum { waiting_multiple = 2 };  /* the agents' ranks_waiting_multiple */
enum { candidates_max = 16 };   /* ranks listed in the evidence of an unattributed hang */

static int hang_class (const struct rank *rk)
{
    return rk->stopped ? 0 : !rk->waiting ? 1 : 2;
}

static const char *const hang_class_name[] = { "stopped", "not waiting on its peers",
                                               "blocked in a collective" };

static void attempt_watchdog (struct jobs *jobs, struct attempt *att, int64_t now)
{
    struct rank *worst = NULL;
    int wr = -1, wcls = 0, over = 0;
    int64_t timeout = 0;
    double p99 = NAN;

    if (att->stopping)
        return;                 /* a planned stop has its own grace (the agents') */
    /* The two timeouts (busy or not) once, not per rank (a sort each). */
    int64_t t_idle = attempt_hang_timeout (jobs, att, false, &p99);
    int64_t t_busy = attempt_hang_timeout (jobs, att, true, &p99);
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        if (!rk->seen || !rk->client || rk->progress_ms == 0 || strcmp (rk->state, "running"))
            continue;
        int cls = hang_class (rk);
        int64_t t = rk->busy ? t_busy : t_idle;
        if (cls == 2)
            t *= waiting_multiple;
        if (now - rk->progress_ms <= t)
            continue;
        over++;
        if (!worst || cls < wcls
            || (cls == wcls
                && (rk->step < worst->step
                    || (rk->step == worst->step && rk->progress_ms < worst->progress_ms)))) {
            worst = rk;
            wr = r;
            wcls = cls;
            timeout = t;
        }
    }
    if (!worst)
        return;
    /* Ranks of the same kind stalled for over half the timeout stopped with
     * the same event: which of them hangs is not known. */
    int stalled = 0;
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        if (rk->seen && rk->client && rk->progress_ms && !strcmp (rk->state, "running")
            && hang_class (rk) == wcls && now - rk->progress_ms > timeout / 2)
            stalled++;
    }
    int ties = stalled > 1 ? stalled - 1 : 0;
    char detail[320], tbuf[40];
    snprintf (detail, sizeof (detail), "rank %d on %s made no step progress for %lld ms "
              "(last step %lld; %s hang timeout %lld ms%s); it is %s", wr, worst->node,
              (long long)(now - worst->progress_ms), (long long)worst->step,
              spec_int (att->job, "heartbeat", "hang_timeout_ms") > 0 ? "fixed" : "automatic",
              (long long)timeout, worst->busy ? ", busy allowance" : "",
              hang_class_name[wcls]);
    json_t *ev = json_pack ("{s:I s:I s:I s:b s:b s:b s:i s:i s:s s:s}", "idle_ms",
                            (json_int_t)(now - worst->progress_ms), "timeout_ms",
                            (json_int_t)timeout, "last_step", (json_int_t)worst->step, "busy",
                            worst->busy, "waiting", worst->waiting, "stopped", worst->stopped,
                            "ranks_over_timeout", over, "tied_ranks", ties,
                            "last_progress", dt_format_time (worst->progress_ms, tbuf,
                                                             sizeof (tbuf)),
                            "detected_by", "controller");
    json_object_set_new (ev, "p99_step_ms", isnan (p99) ? json_null () : json_real (p99));
    json_object_set_new (ev, "step_samples", json_integer (att->nsteptime));
    if (ties) {
        /* The first few: a stalled 80,000-rank job would otherwise put
         * megabytes into every view of the job. */
        json_t *cand = json_array ();
        for (int r = 0; r < att->row.world_size && json_array_size (cand) < candidates_max; r++)
            if (att->ranks[r].seen && att->ranks[r].progress_ms
                && hang_class (&att->ranks[r]) == wcls
                && now - att->ranks[r].progress_ms > timeout / 2)
                json_array_append_new (cand, json_pack ("{s:i s:s}", "rank", r, "node",
                                                        att->ranks[r].node));
        json_object_set_new (ev, "candidates", cand);
        json_object_set_new (ev, "candidates_total", json_integer (ties + 1));
        snprintf (detail, sizeof (detail), "%d ranks made no step progress for %lld ms, the "
                  "lowest at step %lld (%s hang timeout %lld ms), all %s: which one hangs "
                  "is not known", ties + 1, (long long)(now - worst->progress_ms),
                  (long long)worst->step,
                  spec_int (att->job, "heartbeat", "hang_timeout_ms") > 0 ? "fixed" : "automatic",
                  (long long)timeout, hang_class_name[wcls]);
    }
    jobs_attempt_fail (jobs, att, "hang", ties ? NULL : worst->node, ties ? -1 : wr, detail, ev);
}

static void attempt_tick (struct jobs *jobs, struct attempt *att, int64_t now)
{
    struct ctld *ctx = jobs->ctx;
    dt_error_t err;

    if (att->row.state == ATT_SUBMITTED && att->row.handle[0] == '\0') {
        attempt_launch (jobs, att);         /* e.g. not launched before a crash */
        return;
    }
    if (now >= att->next_poll_ms && att->row.handle[0]) {
        struct launcher_status st;
        /* An ending attempt is polled faster: the next one waits on it. */
        att->next_poll_ms = now + (att->row.state == ATT_ENDING ? ending_poll_ms
                                   : poll_interval_ms);
        memset (&st, 0, sizeof (st));
        if (ctx->lops->poll (ctx->launcher, att->row.handle, &st, &err) < 0)
            dt_log (LOG_WARNING, "job %lld: poll %s: %s", (long long)att->row.job_id,
                    att->row.handle, err.text);
        else {
            if (st.slurm_job_id)
                att->row.slurm_job_id = st.slurm_job_id;
            if (st.batch_host[0])
                snprintf (att->row.batch_host, sizeof (att->row.batch_host), "%s",
                          st.batch_host);
            if (st.state == LAUNCHER_RUNNING && att->row.state == ATT_SUBMITTED) {
                struct reg_arg r = { NULL, false };
                if (transact (jobs, att->job, att, tx_registered, &r, &err) < 0)
                    dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
            } else if (st.state == LAUNCHER_ENDED) {
                if (att->row.state == ATT_RUNNING && all_workers_done (att))
                    attempt_succeed (jobs, att);
                else if (att->row.state != ATT_ENDING) {
                    char detail[256];
                    const char *cause = cause_of_launcher_end (&st);
                    struct agent *silent = NULL;
                    snprintf (detail, sizeof (detail), "agents ended before the attempt did: "
                              "%s", st.detail[0] ? st.detail : st.cause);
                    /* Slurm NODE_FAIL names no node: blame the agent that
                     * has been silent longest (over two intervals), the
                     * one heartbeats would declare lost a little later. */
                    if (!strcmp (cause, "slurm_node_fail")) {
                        int64_t hb = spec_int (att->job, "heartbeat", "interval_ms");
                        for (int i = 0; i < att->nagents; i++) {
                            struct agent *ag = &att->agents[i];
                            if (!ag->done && now - ag->last_hb_ms > 2 * hb
                                && (!silent || ag->last_hb_ms < silent->last_hb_ms))
                                silent = ag;
                        }
                    } else {
                        /* Agents that ended without a word about their
                         * ranks (no exit reported, not done) vanished with
                         * their node: when exactly one did, it is the
                         * failure. */
                        int nv = 0;
                        struct agent *v = NULL;
                        for (int i = 0; i < att->nagents; i++) {
                            struct agent *ag = &att->agents[i];
                            bool running = false;
                            for (int r = 0; r < att->row.world_size && !ag->done && !ag->spare; r++)
                                if (att->ranks[r].seen && !strcmp (att->ranks[r].node, ag->node)
                                    && !strcmp (att->ranks[r].state, "running"))
                                    running = true;
                            if (running) {
                                nv++;
                                v = ag;
                            }
                        }
                        if (nv == 1) {
                            silent = v;
                            snprintf (detail, sizeof (detail), "the agent on %.63s ended "
                                      "without reporting its ranks (%.120s)", v->node,
                                      st.detail[0] ? st.detail : st.cause);
                        }
                    }
                    json_t *ev = json_pack ("{s:s s:i}", "launcher_cause", st.cause,
                                            "exit_code", st.exit_code);
                    if (silent)
                        json_object_set_new (ev, "heartbeat_gap_ms",
                                             json_integer (now - silent->last_hb_ms));
                    attempt_fail_at (jobs, att, cause, silent ? silent->node : NULL, -1,
                                     detail, ev, st.end_time_ms);
                }
                if (att->row.state == ATT_ENDING) {
                    jit_window_close (jobs, att, "every process of the attempt ended");
                    attempt_finish (jobs, att, &st);
                }
                return;
            }
        }
    }
    switch (att->row.state) {
    case ATT_STARTING:
        if (now > att->deadline_ms) {
            char detail[128];
            snprintf (detail, sizeof (detail), "%d of %d agents registered within %lld ms",
                      att->nagents, att->row.num_nodes + att->row.spare_nodes,
                      (long long)ctx->cfg->rendezvous_timeout_ms);
            jobs_attempt_fail (jobs, att, "rendezvous_timeout", NULL, -1, detail, NULL);
        }
        break;
    case ATT_RUNNING: {
        int64_t timeout = spec_int (att->job, "heartbeat", "node_timeout_ms");
        /* Heartbeats deferred the attempt-wide pass (a large attempt). */
        if (att->progress_dirty
            && dt_mono_ms () - att->progress_last_ms >= progress_gap_ms (att)) {
            jobs_progress (jobs, att);
            if (att->row.state != ATT_RUNNING)
                break;
        }
        /* Node loss: the agent silent longest, counting silence from the
         * end of the controller's own last stall at the earliest.  Once a
         * surviving rank reported that it lost a peer, 2.5 heartbeat
         * intervals of silence suffice: the silence is corroborated, and a
         * peer whose agent still speaks reports its rank's exit instead.
         * With the tick (100 ms) on top, the loss is then declared within
         * issue 7's bound of 3 intervals after the node died (3 intervals
         * of silence measured 3.2 with 250 ms heartbeats). */
        int64_t hb = spec_int (att->job, "heartbeat", "interval_ms");
        int64_t limit = timeout;
        if (att->survivor_exit_ms && hb > 0 && 5 * hb / 2 < timeout)
            limit = 5 * hb / 2;
        struct agent *lost = NULL;
        for (int i = 0; i < att->nagents; i++) {
            struct agent *ag = &att->agents[i];
            int64_t since = ag->last_hb_ms > jobs->heard_since_ms ? ag->last_hb_ms
                            : jobs->heard_since_ms;
            if (!ag->done && now - since > limit
                && (!lost || ag->last_hb_ms < lost->last_hb_ms))
                lost = ag;
        }
        if (lost) {
            struct agent *ag = lost;
            char detail[256];
            if (limit < timeout)
                snprintf (detail, sizeof (detail), "no heartbeat from %s for %lld ms (over 2.5 "
                          "intervals) after a surviving rank reported losing a peer",
                          ag->node, (long long)(now - ag->last_hb_ms));
            else
                snprintf (detail, sizeof (detail), "no heartbeat from %s for %lld ms (timeout "
                          "%lld ms)", ag->node, (long long)(now - ag->last_hb_ms),
                          (long long)timeout);
            char tbuf[40];
            jobs_attempt_fail (jobs, att, "node_lost", ag->node, -1, detail,
                               json_pack ("{s:I s:I s:s s:b}", "heartbeat_gap_ms",
                                          (json_int_t)(now - ag->last_hb_ms), "timeout_ms",
                                          (json_int_t)limit, "last_heartbeat",
                                          dt_format_time (ag->last_hb_ms, tbuf,
                                                          sizeof (tbuf)),
                                          "peer_loss_reported", att->survivor_exit_ms != 0));
            return;
        }
        /* A rank exited after a just-in-time checkpoint: it lost a peer.
         * The peer's own failure (its exit, its node's silence) names the
         * cause; if none shows up within the node timeout, fail anyway,
         * blaming no node. */
        if (att->survivor_exit_ms && now - att->survivor_exit_ms > timeout + 1000) {
            char detail[192];
            snprintf (detail, sizeof (detail), "ranks exited after losing a peer (just-in-time "
                      "checkpoint of step %lld), and no failure of the peer was seen within "
                      "%lld ms", (long long)att->jit_step, (long long)(timeout + 1000));
            jobs_attempt_fail (jobs, att, "trainer_exit", NULL, -1, detail,
                               json_pack ("{s:I s:b}", "jit_step", (json_int_t)att->jit_step,
                                          "peer_lost", 1));
            return;
        }
        /* The watchdog visits every rank: a large attempt's as often as its
         * attempt-wide pass may run (hang timeouts are seconds). */
        if (dt_mono_ms () - att->watchdog_last_ms >= progress_gap_ms (att)) {
            att->watchdog_last_ms = dt_mono_ms ();
            attempt_watchdog (jobs, att, now);
        }
        break;
    }
    case ATT_ENDING:
        /* The just-in-time window: done when a set is committed, when no
         * surviving rank runs any more, or at its deadline. */
        if (att->jit_open) {
            const char *why = NULL;
            if (att->jit_step > 0)
                why = "committed";
            else if (!jit_survivors_running (att, now))
                why = "the surviving ranks exited without one (zero1, --no-jit, or nothing "
                      "newer than the last checkpoint)";
            else if (now >= att->jit_until_ms)
                why = "none arrived in time";
            if (!why)
                break;
            jit_window_close (jobs, att, why);
            attempt_cancel (jobs, att);
        }
        if (!att->cancel_sent && now - att->ending_since_ms > ending_cancel_ms) {
            if (ctx->lops->cancel (ctx->launcher, att->row.handle, 0, &err) < 0)
                dt_log (LOG_ERR, "job %lld: cancel: %s", (long long)att->row.job_id, err.text);
            att->cancel_sent = true;
        }
        if (now - att->ending_since_ms > ending_giveup_ms) {
            dt_log (LOG_WARNING, "job %lld attempt %d: launcher still reports processes "
                    "after %lld ms; recording the end anyway", (long long)att->row.job_id,
                    att->row.attempt, (long long)ending_giveup_ms);
            attempt_finish (jobs, att, NULL);
        }
        break;
    default:
        break;
    }
}

/* Rows written by one flush: a huge attempt's ranks and nodes change
 * every heartbeat (80,000 rows a second for 10,000 nodes of 8 ranks);
 * writing them all at once would stall the main loop for a fraction of a
 * second.  A flush writes this many at most, resuming at a cursor per
 * attempt, and the rest follow at the next ticks (issue 9).  Small
 * attempts are written completely by every flush, as before.  250 rows
 * take about 1.5 ms here; 1,000 took 5 ms of every 100 ms tick at 80,000
 * rank-heartbeats/s, and every request arriving meanwhile waited (status
 * p99 13-19 ms, against 8 with 250).  The rows are the durable copy of
 * live state the API reads from memory; at that scale each is rewritten
 * about every 35 s (a restarted dtctld learns the rest from the next
 * heartbeats). */
static const int flush_rows_max = 250;

struct flush_arg {
    int budget;                 /* rows left; < 0 unlimited */
    bool more;                  /* dirty rows left for a later flush */
};

/* The rank rows (stream 2i) or node rows (stream 2i+1) of the i-th job's
 * attempt, scanned from that attempt's cursor while budget lasts. */
static int flush_stream (store_t *st, struct job *job, bool nodes, struct flush_arg *fa,
                         dt_error_t *err)
{
    struct attempt *att = job->att;
    int n = nodes ? att->nagents : att->row.world_size, k;
    for (k = 0; k < n && fa->budget != 0; k++) {
        if (nodes) {
            struct agent *ag = &att->agents[(att->flush_agent_pos + k) % n];
            if (!ag->dirty)
                continue;
            if (store_attempt_node_put (st, job->row.id, att->row.attempt, ag->node,
                                        ag->order, ag->node_rank, ag->spare, ag->addr,
                                        ag->port, ag->pid, ag->done ? "done" : "registered",
                                        ag->register_time, ag->last_hb_ms, ag->hostinfo,
                                        err) < 0)
                return -1;
        } else {
            int r = (att->flush_rank_pos + k) % n;
            struct rank *rk = &att->ranks[r];
            if (!rk->dirty)
                continue;
            struct store_rank_row row = {
                .rank = r, .node = rk->node, .local_rank = rk->local_rank, .pid = rk->pid,
                .state = rk->state[0] ? rk->state : "unknown", .client = rk->client,
                .step = rk->step, .loss = rk->loss, .compute_ms = rk->compute_ms,
                .comm_ms = rk->comm_ms, .straggler_score = rk->score,
                .samples = rk->samples, .exit_code = rk->exit_code, .signal = rk->signal,
                .updated = rk->updated,
            };
            if (store_rank_put (st, job->row.id, att->row.attempt, &row, err) < 0)
                return -1;
        }
        if (fa->budget > 0)
            fa->budget--;
    }
    if (nodes)
        att->flush_agent_scan = k;
    else
        att->flush_rank_scan = k;
    if (k < n)
        fa->more = true;
    return 0;
}

static int tx_flush (struct jobs *jobs, struct job *unused, struct attempt *u2, void *arg,
                     dt_error_t *err)
{
    struct flush_arg *fa = arg;
    store_t *st = jobs->ctx->store;
    int nstreams = 0;
    for (struct job *job = jobs->list; job; job = job->next) {
        if (job->dirty && store_job_update (st, &job->row, err) < 0)
            return -1;
        if (job->att)
            job->att->flush_rank_scan = job->att->flush_agent_scan = 0;
        nstreams += 2;
    }
    /* Round robin over the streams: a huge attempt that always has more
     * dirty rows than the budget must not starve the other jobs' rows, nor
     * its own node rows.  The next flush starts after the stream that used
     * the budget up (that stream resumes at its own cursor in its turn). */
    int start = nstreams ? jobs->flush_stream % nstreams : 0;
    for (int i = 0; i < nstreams && fa->budget != 0; i++) {
        int sidx = (start + i) % nstreams;
        struct job *job = jobs->list;
        for (int j = 0; j < sidx / 2; j++)
            job = job->next;
        if (!job->att)
            continue;
        if (flush_stream (st, job, sidx % 2, fa, err) < 0)
            return -1;
        if (fa->budget == 0)
            jobs->flush_stream = sidx + 1;
    }
    /* Streams the budget did not reach have rows left too. */
    if (fa->budget == 0)
        fa->more = true;
    return 0;
}

/* One flush of at most 'budget' rank and node rows (< 0: all); true when
 * dirty rows are left. */
static bool jobs_flush_some (struct jobs *jobs, int budget)
{
    dt_error_t err;
    store_t *st = jobs->ctx->store;
    struct flush_arg fa = { budget, false };

    if (store_begin (st, &err) < 0 || tx_flush (jobs, NULL, NULL, &fa, &err) < 0
        || store_commit (st, &err) < 0) {
        store_rollback (st);
        dt_log (LOG_ERR, "flush: %s", err.text);
        return false;
    }
    for (struct job *job = jobs->list; job; job = job->next) {
        struct attempt *att = job->att;
        job->dirty = false;
        if (!att)
            continue;
        int n = att->row.world_size;
        for (int k = 0; k < att->flush_rank_scan; k++)
            att->ranks[(att->flush_rank_pos + k) % n].dirty = false;
        if (n > 0)
            att->flush_rank_pos = (att->flush_rank_pos + att->flush_rank_scan) % n;
        n = att->nagents;
        for (int k = 0; k < att->flush_agent_scan; k++)
            att->agents[(att->flush_agent_pos + k) % n].dirty = false;
        if (n > 0)
            att->flush_agent_pos = (att->flush_agent_pos + att->flush_agent_scan) % n;
        att->flush_rank_scan = att->flush_agent_scan = 0;
    }
    return fa.more;
}

void jobs_flush (struct jobs *jobs)
{
    jobs_flush_some (jobs, -1);
}

/* The controller could not listen from 'from' to 'to': when that is a
 * stall, node silence counts from 'to' (see struct jobs). */
static void note_stall (struct jobs *jobs, int64_t from, int64_t to)
{
    if (to - from <= stall_ms)
        return;
    dt_log (LOG_WARNING, "the controller was unresponsive for %lld ms: node timeouts count "
            "from now", (long long)(to - from));
    jobs->heard_since_ms = to;
}

void jobs_tick (struct jobs *jobs)
{
    int64_t now = dt_real_ms ();
    struct job **pp = &jobs->list;

    /* The loop was held up since the last tick (see struct jobs). */
    if (jobs->tick_end_ms)
        note_stall (jobs, jobs->tick_end_ms, now);
    while (*pp) {
        struct job *job = *pp;
        struct attempt *att = job->att;
        if (att && !fsm_attempt_terminal (att->row.state))
            attempt_tick (jobs, att, now);
        if (job->row.state == JOB_RESTARTING && (!job->att
                                                 || fsm_attempt_terminal (job->att->row.state))
            && now >= job->restart_at_ms)
            job_restart (jobs, job);
        /* Ended and nothing left running: forget it (the store has it). */
        if (fsm_job_terminal (job->row.state)
            && (!job->att || fsm_attempt_terminal (job->att->row.state)) && !job->dirty) {
            *pp = job->next;
            job_destroy (job);
            continue;
        }
        pp = &job->next;
    }
    if (now >= jobs->next_flush_ms) {
        bool more = jobs_flush_some (jobs, flush_rows_max);
        /* Rows left over: go on at the next tick. */
        jobs->next_flush_ms = now + (more ? 0 : flush_interval_ms);
    }
    /* ... or held up by this tick itself (a slow poll, an fsync). */
    jobs->tick_end_ms = dt_real_ms ();
    note_stall (jobs, now, jobs->tick_end_ms);
}

/* --- lookups and views -------------------------------------------------------- */

struct attempt *jobs_attempt_by_token (struct jobs *jobs, const char *token)
{
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att && !strcmp (j->att->row.token, token))
            return j->att;
    return NULL;
}

void jobs_overlay (struct jobs *jobs, json_t *o)
{
    int64_t id = json_integer_value (json_object_get (o, "id"));
    struct job *job = jobs_find (jobs, id);
    json_t *strag = json_array ();

    if (job) {
        if (job->row.last_step >= 0)
            json_object_set_new (o, "step", json_integer (job->row.last_step));
        if (!isnan (job->row.last_loss))
            json_object_set_new (o, "loss", json_real (job->row.last_loss));
        if (!isnan (job->row.throughput))
            json_object_set_new (o, "throughput", json_real (job->row.throughput));
        if (job->att) {
            for (int r = 0; r < job->att->row.world_size; r++) {
                struct rank *rk = &job->att->ranks[r];
                if (rk->flagged)
                    json_array_append_new (strag, json_pack ("{s:i s:s s:f}", "rank", r, "node",
                                                             rk->node, "score", rk->score));
            }
        }
    }
    json_object_set_new (o, "stragglers", strag);
}

json_t *jobs_ranks_json (struct jobs *jobs, int64_t id)
{
    struct job *job = jobs_find (jobs, id);
    struct attempt *att;
    json_t *a;

    if (!job || !(att = job->att) || att->row.state != ATT_RUNNING)
        return NULL;
    a = json_array ();
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        char tbuf[40];
        json_t *o = json_pack ("{s:i s:s s:i s:i s:s s:b}", "rank", r, "node", rk->node,
                               "local_rank", rk->local_rank, "pid", rk->pid, "state",
                               rk->state[0] ? rk->state : "starting", "client", rk->client);
        json_object_set_new (o, "step", rk->step >= 0 ? json_integer (rk->step) : json_null ());
        json_object_set_new (o, "loss", isnan (rk->loss) ? json_null () : json_real (rk->loss));
        json_object_set_new (o, "samples",
                             rk->samples >= 0 ? json_integer (rk->samples) : json_null ());
        json_object_set_new (o, "compute_ms", isnan (rk->compute_ms)
                                 ? json_null () : json_real (rk->compute_ms));
        json_object_set_new (o, "comm_ms", isnan (rk->comm_ms)
                                 ? json_null () : json_real (rk->comm_ms));
        json_object_set_new (o, "straggler_score", isnan (rk->score)
                                 ? json_null () : json_real (rk->score));
        json_object_set_new (o, "exit_code", rk->exit_code >= 0
                                 ? json_integer (rk->exit_code) : json_null ());
        json_object_set_new (o, "last_seen", rk->updated
                                 ? json_string (dt_format_time (rk->updated, tbuf, sizeof (tbuf)))
                                 : json_null ());
        json_array_append_new (a, o);
    }
    return a;
}

void jobs_stats (struct jobs *jobs, struct jobs_stats *st)
{
    memset (st, 0, sizeof (*st));
    st->restarts = jobs->restarts;
    st->checkpoints_committed = jobs->ckpts;
    for (struct job *j = jobs->list; j; j = j->next) {
        st->live_jobs++;
        if (j->att && !fsm_attempt_terminal (j->att->row.state))
            st->live_attempts++;
    }
}

/* --- create / reload -------------------------------------------------------------- */

/* Rebuild a live attempt's agents and ranks from the store after a restart
 * of the controller.  The agents get a fresh heartbeat grace period. */
static int attempt_reload (struct jobs *jobs, struct job *job, struct attempt *att,
                           dt_error_t *err)
{
    int64_t now = dt_real_ms ();
    json_t *j = store_job_json (jobs->ctx->store, job->row.id, true, err);
    json_t *atts, *a, *n;
    size_t i, k;

    if (!j)
        return -1;
    atts = json_object_get (j, "attempts");
    json_array_foreach (atts, i, a) {
        if (json_integer_value (json_object_get (a, "attempt")) != att->row.attempt)
            continue;
        json_t *nodes = json_object_get (a, "nodes");
        json_array_foreach (nodes, k, n) {
            if (att->nagents == att->cap) {
                int cap = att->cap ? att->cap * 2 : 8;
                struct agent *p = realloc (att->agents, cap * sizeof (*p));
                if (!p) {
                    json_decref (j);
                    return errnoprintf (err, ENOMEM, "out of memory");
                }
                att->agents = p;
                att->cap = cap;
            }
            struct agent *ag = &att->agents[att->nagents++];
            memset (ag, 0, sizeof (*ag));
            snprintf (ag->node, sizeof (ag->node), "%s",
                      json_string_value (json_object_get (n, "node")));
            ag->order = json_integer_value (json_object_get (n, "node_order"));
            json_t *nr = json_object_get (n, "node_rank");
            ag->node_rank = json_is_integer (nr) ? json_integer_value (nr) : -1;
            ag->spare = json_is_true (json_object_get (n, "spare"));
            snprintf (ag->addr, sizeof (ag->addr), "%s",
                      json_string_value (json_object_get (n, "addr")) ?: "");
            ag->port = json_integer_value (json_object_get (n, "port"));
            ag->pid = json_integer_value (json_object_get (n, "pid"));
            const char *state = json_string_value (json_object_get (n, "state"));
            ag->done = state && !strcmp (state, "done");
            ag->register_time = now;
            ag->last_hb_ms = now;
            int rpn = att->row.ranks_per_node;
            for (int l = 0; ag->node_rank >= 0 && l < rpn; l++) {
                int r = ag->node_rank * rpn + l;
                if (r < att->row.world_size) {
                    snprintf (att->ranks[r].node, sizeof (att->ranks[r].node), "%s", ag->node);
                    att->ranks[r].local_rank = l;
                }
            }
        }
    }
    json_decref (j);
    if (att->row.state == ATT_STARTING)
        att->deadline_ms = now + jobs->ctx->cfg->rendezvous_timeout_ms;
    if (att->row.state == ATT_ENDING) {
        att->ending_since_ms = now;
        if (!strcmp (att->row.cause, "cancelled"))
            att->end_state = ATT_CANCELLED;
        else if (job->row.state == JOB_COMPLETED)
            att->end_state = ATT_SUCCEEDED;
        else
            att->end_state = ATT_FAILED;
    }
    return 0;
}

static int jobs_reload (struct jobs *jobs, dt_error_t *err)
{
    int64_t *ids;
    int n;

    if (store_live_jobs (jobs->ctx->store, &ids, &n, err) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        struct job *job = calloc (1, sizeof (*job));
        if (!job) {
            free (ids);
            return errnoprintf (err, ENOMEM, "out of memory");
        }
        if (store_job_load (jobs->ctx->store, ids[i], &job->row, err) < 0) {
            free (job);
            free (ids);
            return -1;
        }
        job->last_metric_step = job->row.last_step;
        /* Restart-policy state kept in the failure record (issue 7). */
        job->no_progress_streak = json_integer_value (json_object_get (job->row.failure,
                                                                       "no_progress_streak"));
        if (job->row.state == JOB_RESTARTING)
            job->next_nodes = json_integer_value (json_object_get (job->row.failure,
                                                                   "next_nodes"));
        store_metrics_count (jobs->ctx->store, job->row.id, &job->metrics_rows, err);
        if (job->row.attempts > 0) {
            struct attempt *att = calloc (1, sizeof (*att));
            if (!att || store_attempt_load (jobs->ctx->store, job->row.id, job->row.attempts,
                                            &att->row, err) < 0) {
                free (att);
                job_destroy (job);
                free (ids);
                return -1;
            }
            att->job = job;
            att->ranks = calloc (att->row.world_size ? att->row.world_size : 1,
                                 sizeof (*att->ranks));
            for (int r = 0; att->ranks && r < att->row.world_size; r++) {
                att->ranks[r].step = -1;
                att->ranks[r].loss = att->ranks[r].compute_ms = att->ranks[r].comm_ms = NAN;
                att->ranks[r].score = NAN;
                att->ranks[r].samples = -1;
                att->ranks[r].exit_code = att->ranks[r].signal = -1;
            }
            job->att = att;
            if (!att->ranks || attempt_reload (jobs, job, att, err) < 0) {
                job_destroy (job);
                free (ids);
                return -1;
            }
        }
        job->restart_at_ms = dt_real_ms ();
        job->next = jobs->list;
        jobs->list = job;
        dt_log (LOG_INFO, "job %lld reloaded: %s, attempt %d %s", (long long)job->row.id,
                fsm_job_state_name (job->row.state), job->row.attempts,
                job->att ? fsm_attempt_state_name (job->att->row.state) : "-");
    }
    free (ids);
    return 0;
}

struct jobs *jobs_create (struct ctld *ctx, dt_error_t *err)
{
    struct jobs *jobs;

    if (!(jobs = calloc (1, sizeof (*jobs)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    jobs->ctx = ctx;
    if (jobs_reload (jobs, err) < 0) {
        jobs_destroy (jobs);
        return NULL;
    }
    return jobs;
}

void jobs_destroy (struct jobs *jobs)
{
    if (jobs) {
        int saved = errno;
        while (jobs->list) {
            struct job *n = jobs->list->next;
            job_destroy (jobs->list);
            jobs->list = n;
        }
        free (jobs);
        errno = saved;
    }
}

int64_t jobs_hang_timeout_ms (const struct job *job)
{
    int64_t h = spec_int (job, "heartbeat", "hang_timeout_ms");
    /* Auto: the agents' own detector is only a backstop (see above). */
    return h > 0 ? h : hang_agent_backstop * ft_hang_defaults.floor_ms;
}

/* --- issue 7: signals, corrupt shards, node health ------------------------------ */

void jobs_signal (struct jobs *jobs, struct attempt *att, const char *node, const char *detail)
{
    dt_error_t err;
    const char *cause = detail && strstr (detail, "SIGUSR1") ? "time_limit" : "preempted";
    if (jobs_note (jobs, att, "signal", node, -1, detail, NULL, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    /* The agent already asked its ranks to stop (the trainers agree on the
     * step among themselves); the stop command reaches the other nodes'
     * agents too, and the end becomes a restart, not a completion. */
    char d[256];
    snprintf (d, sizeof (d), "%s on %s", detail ? detail : "signal", node);
    attempt_stop (jobs, att, cause, NULL, -1, d);
    att->stop_step = 0;                     /* at each rank's next step */
}

/* The shard path in a dttrain error line "checkpoint shard PATH: ...". */
static bool shard_named (const char *text, char *path, size_t len)
{
    const char *p = text ? strstr (text, "checkpoint shard ") : NULL;
    if (!p)
        return false;
    p += strlen ("checkpoint shard ");
    size_t n = strcspn (p, ": \n");
    if (n == 0 || n >= len)
        return false;
    memcpy (path, p, n);
    path[n] = '\0';
    return true;
}

struct bad_arg {
    int64_t step;
    const char *node, *detail;
    int rank;
    json_t *data;
};

static int tx_ckpt_bad (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                        dt_error_t *err)
{
    struct bad_arg *b = arg;
    if (store_ckpt_set_state (jobs->ctx->store, job->row.id, b->step, "bad", NULL, 0, err) < 0)
        return -1;
    return store_event (jobs->ctx->store, dt_real_ms (), job->row.id, att->row.attempt,
                        "checkpoint_bad", b->node, b->rank, b->detail, b->data, err);
}

void jobs_rank_exit_check (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                           int exit_code, const char *stderr_tail)
{
    char path[1024], detail[256];
    size_t dl = strlen (att->row.resume_dir);
    dt_error_t err;

    /* dttrain: exit 3 = a shard failed verification at load.  Only a named
     * shard of the checkpoint this attempt resumed from condemns it. */
    if (exit_code != 3 || att->row.resume_step < 0 || dl == 0
        || !shard_named (stderr_tail, path, sizeof (path)) || strncmp (path, att->row.resume_dir, dl)
        || path[dl] != '/')
        return;
    snprintf (detail, sizeof (detail), "checkpoint of step %lld is bad: shard %.160s failed "
              "verification at load", (long long)att->row.resume_step, path);
    struct bad_arg b = { att->row.resume_step, node, detail, rank,
                         json_pack ("{s:I s:s s:i}", "step", (json_int_t)att->row.resume_step,
                                    "shard", path, "exit_code", exit_code) };
    if (transact (jobs, att->job, att, tx_ckpt_bad, &b, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    else
        dt_log (LOG_WARNING, "job %lld: %s; the next attempt resumes from the previous one",
                (long long)att->row.job_id, detail);
    json_decref (b.data);
}

int jobs_node_clear (struct jobs *jobs, const char *node, uid_t uid, int *status,
                     dt_error_t *err)
{
    store_t *st = jobs->ctx->store;
    char note[96], detail[160];
    int64_t now = dt_real_ms ();

    if (!config_is_admin (jobs->ctx->cfg, uid)) {
        *status = 403;
        return errnoprintf (err, EPERM, "only an admin may clear a node");
    }
    snprintf (note, sizeof (note), "cleared by uid %ld", (long)uid);
    snprintf (detail, sizeof (detail), "node %s cleared by uid %ld", node, (long)uid);
    if (store_begin (st, err) < 0) {
        *status = 500;
        return -1;
    }
    if (store_node_clear (st, node, now, note, err) < 0
        || store_event (st, now, 0, 0, "node_cleared", node, -1, detail, NULL, err) < 0
        || store_commit (st, err) < 0) {
        int e = errno;
        store_rollback (st);
        *status = e == ENOENT ? 404 : 500;
        errno = e;
        return -1;
    }
    dt_log (LOG_NOTICE, "%s", detail);
    return 0;
}
