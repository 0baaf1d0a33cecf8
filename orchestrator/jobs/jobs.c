/* jobs.c: the job manager's front: create and destroy, the user operations
 * (submit, cancel, resubmit, checkpoint, clear a node), the supervision
 * tick that dispatches to the other parts, and the views of live state.
 */
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/jobs/internal.h"

/* Live state is written to SQLite at most this often (batched). */
static const int64_t flush_interval_ms = 1000;
/* A pause of the event loop longer than this is a stall (see struct jobs). */
static const int64_t stall_ms = 1000;

void job_destroy (struct job *job)
{
    if (job) {
        attempt_destroy (job->att);
        attempt_destroy (job->reform_prev);
        integ_job_free (job);
        numerics_job_free (job);
        store_job_row_clear (&job->row);
        free (job);
    }
}

struct submit_arg {
    struct attempt *att;
};

static int tx_submit (struct jobs *jobs, struct job *job, struct attempt *unused,
                      void *arg, dt_error_t *err)
{
    struct submit_arg *a = arg;
    char detail[160];

    if (store_job_insert (jobs->ctx->store, &job->row, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail), "job '%.64s' submitted by %.63s", job->row.name,
              job->row.user);
    if (store_event (jobs->ctx->store, job->row.submit_time, job->row.id, 0,
                     "job_submitted", NULL, -1, detail, job->row.spec, err) < 0)
        return -1;
    if (!(a->att = attempt_alloc (jobs, job, 1, true, err)))
        return -1;
    job->row.attempts = 1;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0 ||
        tx_insert_attempt (jobs, job, a->att, err) < 0) {
        attempt_destroy (a->att);
        a->att = NULL;
        return -1;
    }
    return 0;
}

int jobs_submit (struct jobs *jobs, const json_t *spec_in, uid_t uid, gid_t gid,
                 int64_t *id, int *status, dt_error_t *err)
{
    struct ctld_config *cfg = jobs->ctx->cfg;
    struct spec_defaults d = {
        .checkpoint_root = cfg->checkpoint_root,
        .heartbeat_interval_ms = cfg->heartbeat_interval_ms,
        .tree_width = cfg->tree_width,
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
        int want = (int)(json_integer_value (json_object_get (spec, "nodes")) +
                         json_integer_value (json_object_get (spec, "spare_nodes")));
        if (jobs->ctx->lops->check (jobs->ctx->launcher,
                                    json_is_string (sp) ? json_string_value (sp) : NULL,
                                    want, &cerr) < 0) {
            if (errno == EINVAL) {
                json_decref (spec);
                *status = 400;
                return errprintf (err, "%s", cerr.text);
            }
            dt_log (LOG_WARNING, "submit: launcher check: %s (accepting the job)",
                    cerr.text);
        }
    }
    if (!(job = calloc (1, sizeof (*job)))) {
        json_decref (spec);
        *status = 500;
        return errnoprintf (err, ENOMEM, "out of memory");
    }
    store_job_row_init (&job->row);
    job->row.spec = spec;
    spec_parse (job->row.spec, &job->spec);
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
        return NULL; /* exists, not live: caller decides */
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

int jobs_cancel (struct jobs *jobs, int64_t id, uid_t uid, const char *reason,
                 int *status, dt_error_t *err)
{
    struct job *job;

    *status = 409;
    if (!(job = job_for_change (jobs, id, uid, status, err))) {
        if (*status == 409)
            errnoprintf (err, EBUSY, "job %lld has ended: cannot be cancelled",
                         (long long)id);
        return -1;
    }
    if (!fsm_job_ok (job->row.state, JOB_CANCELLED)) {
        *status = 409;
        return errnoprintf (err, EBUSY, "job %lld is %s: cannot be cancelled",
                            (long long)id, fsm_job_state_name (job->row.state));
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
        if (jobs->ctx->lops->cancel (jobs->ctx->launcher, job->att->row.handle, 0, &e2) <
            0)
            dt_log (LOG_ERR, "job %lld: cancel %s: %s", (long long)id,
                    job->att->row.handle, e2.text);
        job->att->cancel_sent = true;
    }
    return 0;
}

struct resubmit_arg {
    const json_t *exclude;
    bool from_scratch;
    struct attempt *att;
};

static int tx_resubmit (struct jobs *jobs, struct job *job, struct attempt *old,
                        void *arg, dt_error_t *err)
{
    struct resubmit_arg *a = arg;
    size_t i;
    json_t *v;

    json_array_foreach (a->exclude, i, v)
    {
        bool have = false;
        size_t j;
        json_t *w;
        json_array_foreach (job->row.exclude, j, w) if (json_equal (v, w)) have = true;
        if (!have)
            json_array_append (job->row.exclude, v);
    }
    job->row.restarts = 0;
    if (job_set_state (jobs, job, JOB_PENDING, "resubmitted", err) < 0)
        return -1;
    if (!(a->att =
            attempt_alloc (jobs, job, job->row.attempts + 1, a->from_scratch, err)))
        return -1;
    job->row.attempts++;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0 ||
        tx_insert_attempt (jobs, job, a->att, err) < 0) {
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
        spec_parse (job->row.spec, &job->spec);
        job->last_metric_step = -1;
        job->next = jobs->list;
        jobs->list = job;
    }
    if (!fsm_job_ok (job->row.state, JOB_PENDING)) {
        *status = 409;
        return errnoprintf (err, EBUSY,
                            "job %lld is %s: only a failed or cancelled job can "
                            "be resubmitted",
                            (long long)id, fsm_job_state_name (job->row.state));
    }
    if (job->att && !fsm_attempt_terminal (job->att->row.state)) {
        *status = 409;
        return errnoprintf (err, EBUSY,
                            "job %lld: attempt %d is still %s; try again shortly",
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
        return errnoprintf (err, EBUSY,
                            "job %lld is %s: a checkpoint needs a running attempt",
                            (long long)id, fsm_job_state_name (job->row.state));
    }
    int64_t s = (att->max_step > 0 ? att->max_step : 0) + ckpt_lookahead (att);
    if (att->ckpt_cmd_step == 0 || s < att->ckpt_cmd_step)
        att->ckpt_cmd_step = s;
    *step = att->ckpt_cmd_step;
    char detail[96];
    snprintf (detail, sizeof (detail), "checkpoint requested at step %lld",
              (long long)*step);
    if (jobs_note (jobs, att, "checkpoint_requested", NULL, -1, detail, NULL, &e2) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)id, e2.text);
    return 0;
}

static void attempt_tick (struct jobs *jobs, struct attempt *att, int64_t now)
{
    struct ctld *ctx = jobs->ctx;

    if (att->row.state == ATT_SUBMITTED && att->row.handle[0] == '\0') {
        attempt_launch (jobs, att); /* e.g. not launched before a crash */
        return;
    }
    if (attempt_poll (jobs, att, now))
        return;
    switch (att->row.state) {
    case ATT_STARTING:
        if (att->reform_orphaned) {
            char detail[200];
            snprintf (detail, sizeof (detail),
                      "the controller restarted while attempt %d re-formed (%s): the "
                      "agents of the failed attempt can no longer learn its token",
                      att->row.attempt, att->row.restart_path);
            jobs_attempt_fail (jobs, att, "rendezvous_timeout", NULL, -1, detail, NULL);
        }
        else if (now > att->deadline_ms) {
            char detail[128];
            snprintf (detail, sizeof (detail),
                      "%d of %d agents registered within %lld ms", att->nagents,
                      att->row.num_nodes + att->row.spare_nodes,
                      (long long)ctx->cfg->rendezvous_timeout_ms);
            jobs_attempt_fail (jobs, att, "rendezvous_timeout", NULL, -1, detail, NULL);
        }
        break;
    case ATT_RUNNING: attempt_check_running (jobs, att, now); break;
    case ATT_ENDING: attempt_tick_ending (jobs, att, now); break;
    default: break;
    }
}

/* The controller could not listen from 'from' to 'to': when that is a
 * stall, node silence counts from 'to' (see struct jobs). */
static void note_stall (struct jobs *jobs, int64_t from, int64_t to)
{
    if (to - from <= stall_ms)
        return;
    dt_log (LOG_WARNING,
            "the controller was unresponsive for %lld ms: node timeouts count "
            "from now",
            (long long)(to - from));
    jobs->heard_since_ms = to;
}

/* While an attempt ends (the just-in-time window, the launcher polled
 * every 50 ms for its end) the tick comes this often: the next attempt
 * waits on it. */
static const int64_t ending_tick_ms = 25;
/* ... and this often while attempt-wide passes wait (jobs_pass_ok). */
static const int64_t pass_retry_ms = 10;

int64_t jobs_tick (struct jobs *jobs)
{
    int64_t now = dt_real_ms ();
    int64_t want = INT64_MAX;
    struct job **pp = &jobs->list;

    /* The loop was held up since the last tick (see struct jobs). */
    if (jobs->tick_end_ms)
        note_stall (jobs, jobs->tick_end_ms, now);
    jobs->in_tick = true;
    jobs->tick_passes = 0;
    jobs->passes_left = false;
    jobs->loss_due_ms = 0;
    while (*pp) {
        struct job *job = *pp;
        struct attempt *att = job->att;
        if (att && !fsm_attempt_terminal (att->row.state))
            attempt_tick (jobs, att, now);
        /* (the clock read again: an attempt that ended in this tick
         * restarts in it when no backoff applies) */
        if (job->row.state == JOB_RESTARTING &&
            (!job->att || fsm_attempt_terminal (job->att->row.state))) {
            int64_t t = dt_real_ms ();
            if (t >= job->restart_at_ms)
                job_restart (jobs, job);
            else if (job->restart_at_ms - t < want)
                want = job->restart_at_ms - t;
        }
        if (job->att && job->att->row.state == ATT_ENDING && ending_tick_ms < want)
            want = ending_tick_ms;
        /* Ended and nothing left running: forget it (the store has it). */
        if (fsm_job_terminal (job->row.state) &&
            (!job->att || fsm_attempt_terminal (job->att->row.state)) && !job->dirty) {
            *pp = job->next;
            job_destroy (job);
            continue;
        }
        pp = &job->next;
    }
    jobs->in_tick = false;
    /* Passes of huge attempts left over: the next tick comes soon. */
    if (jobs->passes_left && pass_retry_ms < want)
        want = pass_retry_ms;
    /* A corroborated node loss becomes due: check it then. */
    if (jobs->loss_due_ms) {
        int64_t w = jobs->loss_due_ms - dt_real_ms ();
        if (w < 1)
            w = 1;
        if (w < want)
            want = w;
    }
    /* ... or held up by this tick itself (a slow poll). */
    jobs->tick_end_ms = dt_real_ms ();
    note_stall (jobs, now, jobs->tick_end_ms);
    return want;
}

void jobs_flush_tick (struct jobs *jobs)
{
    int64_t now = dt_real_ms ();
    if (now < jobs->next_flush_ms)
        return;
    bool more = jobs_flush_some (jobs, flush_rows_max);
    /* Rows left over: go on at the next tick. */
    jobs->next_flush_ms = now + (more ? 0 : flush_interval_ms);
    /* (held up by the flush itself: an fsync) */
    jobs->tick_end_ms = dt_real_ms ();
    note_stall (jobs, now, jobs->tick_end_ms);
}

struct attempt *jobs_attempt_by_token (struct jobs *jobs, const char *token)
{
    char hash[65];

    /* Only the token's hash is kept across restarts; compare in constant time. */
    sha256_hex (token, strlen (token), hash);
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att && auth_equal (j->att->row.token_sha256, hash, 64))
            return j->att;
    return NULL;
}

int jobs_live_count (struct jobs *jobs, uid_t uid)
{
    int n = 0;
    for (struct job *j = jobs->list; j; j = j->next)
        if ((uid == (uid_t)-1 || j->row.uid == uid) && !fsm_job_terminal (j->row.state))
            n++;
    return n;
}

size_t jobs_kv_bytes (struct jobs *jobs)
{
    size_t n = 0;
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att)
            n += j->att->kv_bytes;
    return n;
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
        /* (flagged ranks counted by the attempt-wide pass: a huge
         * attempt's 65,536 ranks are not visited for every view) */
        if (job->att && job->att->nflagged > 0) {
            for (int r = 0; r < job->att->row.world_size; r++) {
                struct rank *rk = &job->att->ranks[r];
                if (rk->flagged)
                    json_array_append_new (strag,
                                           json_pack ("{s:i s:s s:f}", "rank", r, "node",
                                                      rk->node, "score", rk->score));
            }
        }
        commbound_overlay (job, o);
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
        json_t *o =
          json_pack ("{s:i s:s s:i s:i s:s s:b}", "rank", r, "node", rk->node,
                     "local_rank", rk->local_rank, "pid", rk->pid, "state",
                     rk->state[0] ? rk->state : "starting", "client", rk->client);
        json_object_set_new (o, "step",
                             rk->step >= 0 ? json_integer (rk->step) : json_null ());
        json_object_set_new (o, "loss",
                             isnan (rk->loss) ? json_null () : json_real (rk->loss));
        json_object_set_new (
          o, "samples", rk->samples >= 0 ? json_integer (rk->samples) : json_null ());
        json_object_set_new (o, "compute_ms",
                             isnan (rk->compute_ms) ? json_null ()
                                                    : json_real (rk->compute_ms));
        json_object_set_new (
          o, "comm_ms", isnan (rk->comm_ms) ? json_null () : json_real (rk->comm_ms));
        json_object_set_new (
          o, "dims", rk->has_dims ? commbound_dims_json (rk->dims) : json_null ());
        json_object_set_new (o, "straggler_score",
                             isnan (rk->score) ? json_null () : json_real (rk->score));
        json_object_set_new (o, "exit_code",
                             rk->exit_code >= 0 ? json_integer (rk->exit_code)
                                                : json_null ());
        json_object_set_new (
          o, "last_seen",
          rk->updated ? json_string (dt_format_time (rk->updated, tbuf, sizeof (tbuf)))
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
    memcpy (st->integ_events, jobs->integ_events, sizeof (st->integ_events));
    st->integ_rollbacks = jobs->integ_rollbacks;
    for (struct job *j = jobs->list; j; j = j->next) {
        st->live_jobs++;
        if (j->att && !fsm_attempt_terminal (j->att->row.state))
            st->live_attempts++;
    }
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
    if (store_node_clear (st, node, now, note, err) < 0 ||
        store_event (st, now, 0, 0, "node_cleared", node, -1, detail, NULL, err) < 0 ||
        store_commit (st, err) < 0) {
        int e = errno;
        store_rollback (st);
        *status = e == ENOENT ? 404 : 500;
        errno = e;
        return -1;
    }
    dt_log (LOG_NOTICE, "%s", detail);
    return 0;
}
