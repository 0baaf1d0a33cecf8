/* restart.c: after a failure: the nodes available, the restart decision
 * (ftpolicy.c decides; this feeds it and records the verdict), backoff,
 * and starting the next attempt.
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
#include "orchestrator/jobs/restartpolicy.h"

/* Restart backoff: first restart after restart_backoff_ms, doubling, capped. */
static const int64_t restart_backoff_ms = 500;
static const int64_t restart_backoff_max_ms = 30000;
/* The no-progress guard: this many consecutive attempts failing before
 * passing their resume step fail the job with cause "no_progress". */
static const int no_progress_limit = 3;

int64_t backoff_ms (const struct job *job)
{
    return job->restart_wait_ms;
}

static void json_set_add (json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) if (!strcmp (json_string_value (v), name)) return;
    json_array_append_new (arr, json_string (name));
}

static bool json_set_has (const json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) if (!strcmp (json_string_value (v), name)) return true;
    return false;
}

/* Is 'node' suspect (store_nodes_suspect)?  Unknown counts as suspect. */
static bool node_suspect (struct jobs *jobs, const char *node)
{
    dt_error_t err;
    json_t *sus = store_nodes_suspect (jobs->ctx->store, &err);
    bool r = !sus || json_set_has (sus, node);
    json_decref (sus);
    return r;
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
    json_array_foreach (job->row.exclude, i, v) json_set_add (sus, json_string_value (v));
    n = json_array_size (sus);
    if ((exclude = calloc (n + 1, sizeof (*exclude)))) {
        json_array_foreach (sus, i, v) exclude[i] = json_string_value (v);
        if (ctx->lops->capacity (ctx->launcher, job->spec.partition, exclude, &avail,
                                 &err) < 0) {
            dt_log (LOG_WARNING, "job %lld: launcher capacity: %s",
                    (long long)job->row.id, err.text);
            avail = -1;
        }
    }
    free (exclude);
    json_decref (sus);
    return avail;
}

/* The wait before the next attempt (restartpolicy.h, restart_skip_backoff):
 * none for a first restart in place on a trusted node after an attempt that
 * made progress, else the doubling backoff; recorded in the failure. */
static void restart_set_backoff (struct job *job, const struct attempt *att,
                                 bool progressed)
{
    job->quick_restarts = restart_quick_streak (
      job->quick_restarts, att->row.start_time > 0 && att->row.fail_time > 0
                             ? att->row.fail_time - att->row.start_time
                             : 0);
    if (restart_skip_backoff (job->restart_in_place, progressed, job->quick_restarts)) {
        job->restart_wait_ms = 0;
        job->quick_restarts++;
    }
    else
        job->restart_wait_ms =
          ft_backoff_ms (job->row.restarts, restart_backoff_ms, restart_backoff_max_ms);
    json_object_set_new (job->row.failure, "backoff_ms",
                         json_integer (job->restart_wait_ms));
}

/* The job's side of an attempt failure (inside the transaction). */
int job_after_failure (struct jobs *jobs, struct job *job, struct attempt *att,
                       dt_error_t *err)
{
    const char *cause = att->row.cause;
    int64_t maxr = job->spec.restart.max_restarts;

    if (fsm_job_terminal (job->row.state))
        return 0; /* cancelled meanwhile */

    /* Exclusions: the failed node (restart.exclude_failed_nodes; every
     * launcher honours them, the local one by picking other names) when
     * the node failed -- not after a rank's own end -- and always an
     * excluded straggler's node. */
    if (restart_exclude_node (cause, att->row.cause_rank, att->row.cause_node,
                              job->spec.restart.exclude_failed_nodes))
        json_set_add (job->row.exclude, att->row.cause_node);

    /* In place: a rank ended on its own on a node the controller still
     * trusts (not excluded above, not suspect): the next attempt runs on
     * the same nodes as a new step of the same allocation. */
    job->restart_in_place = restart_in_place (
      cause, att->row.cause_rank,
      att->row.cause_node[0] && (json_set_has (job->row.exclude, att->row.cause_node) ||
                                 node_suspect (jobs, att->row.cause_node)));

    /* The restart decision (ftpolicy.c). */
    bool progressed =
      ft_attempt_progressed (att->row.resume_step, att->max_step, att->committed_any);
    job->no_progress_streak =
      restart_cause_planned (cause)
        ? 0
        : ft_no_progress_streak (job->no_progress_streak, progressed);
    struct ft_restart_in in = {
        .restarts = job->row.restarts,
        .max_restarts = maxr,
        .no_progress_streak = job->no_progress_streak,
        .no_progress_limit = no_progress_limit,
        .nodes = job->spec.nodes,
        .min_nodes = job->spec.restart.min_nodes,
        .available = nodes_available (jobs, job),
        .ranks_per_node = job->spec.ranks_per_node,
        .group = job->spec.parallel.tp * job->spec.parallel.pp,
        .tp = job->spec.parallel.tp,
        .pp = job->spec.parallel.pp,
        .nshrink = job->spec.parallel.nshrink,
        .shrink = { job->spec.parallel.shrink[0], job->spec.parallel.shrink[1] },
    };
    int next_nodes = 0, ntp = in.tp, npp = in.pp;
    enum ft_verdict v = ft_restart_replan (&in, &next_nodes, &ntp, &npp);

    json_decref (job->row.failure);
    char tbuf[40];
    job->row.failure = json_pack (
      "{s:s s:s? s:o? s:s s:s s:i s:O? s:s s:b s:i s:i s:i}", "cause", cause, "node",
      att->row.cause_node[0] ? att->row.cause_node : NULL, "rank",
      att->row.cause_rank >= 0 ? json_integer (att->row.cause_rank) : NULL, "time",
      dt_format_time (att->row.fail_time, tbuf, sizeof (tbuf)), "detail", att->row.detail,
      "attempt", att->row.attempt, "evidence", att->row.evidence, "verdict",
      ft_verdict_name (v), "progressed", progressed, "no_progress_streak",
      job->no_progress_streak, "next_nodes", next_nodes, "available_nodes", in.available);
    if (v == FT_RESTART) {
        /* The failed attempt's layout (the spec's for rows from before
         * layouts were recorded) and the next one's. */
        int otp = att->row.tp > 0 ? att->row.tp : in.tp;
        int opp = att->row.pp > 0 ? att->row.pp : in.pp;
        int rpn = job->spec.ranks_per_node, ow = att->row.world_size;
        job->next_nodes = next_nodes;
        restart_set_backoff (job, att, progressed);
        job->next_tp = ntp, job->next_pp = npp;
        json_object_set_new (job->row.failure, "next_layout",
                             json_pack ("{s:i s:i s:i}", "tp", ntp, "pp", npp, "dp",
                                        next_nodes * rpn / (ntp * npp)));
        if (next_nodes < in.nodes || ntp != otp || npp != opp) {
            char d[300];
            int at = snprintf (d, sizeof (d),
                               "only %d healthy nodes: the next attempt runs on %d of %d "
                               "nodes (min_nodes %d), same global batch",
                               in.available, next_nodes, in.nodes, in.min_nodes);
            if ((otp * opp > 1 || ntp * npp > 1) && at > 0 && (size_t)at < sizeof (d))
                snprintf (d + at, sizeof (d) - at,
                          "; layout tp %d x pp %d x dp %d, was tp %d x pp %d x dp %d%s",
                          ntp, npp, next_nodes * rpn / (ntp * npp), otp, opp,
                          ow / (otp * opp),
                          ntp != in.tp || npp != in.pp ? " (parallel.shrink)" : "");
            json_t *data =
              json_pack ("{s:{s:i s:i s:i} s:{s:i s:i s:i}}", "old_layout", "tp", otp,
                         "pp", opp, "dp", ow / (otp * opp), "new_layout", "tp", ntp, "pp",
                         npp, "dp", next_nodes * rpn / (ntp * npp));
            int erc = store_event (jobs->ctx->store, dt_real_ms (), job->row.id,
                                   att->row.attempt, "shrink", NULL, -1, d, data, err);
            json_decref (data);
            if (erc < 0)
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
    snprintf (why, sizeof (why), "%s",
              v == FT_GIVE_UP_RESTARTS ? cause : ft_verdict_name (v));
    json_object_set_new (job->row.failure, "cause", json_string (why));
    json_object_set_new (job->row.failure, "attempt_cause", json_string (cause));
    return job_set_state (jobs, job, JOB_FAILED, why, err);
}

struct restart_arg {
    struct attempt *att;
};

static int tx_restart (struct jobs *jobs, struct job *job, struct attempt *old, void *arg,
                       dt_error_t *err)
{
    struct restart_arg *a = arg;
    /* The rank nodes of the attempt that ends: an in-place restart runs
     * on them again, and its record says whether it did. */
    job->prev_nodes[0] = '\0';
    if (job->att) {
        size_t off = 0;
        for (int i = 0; i < job->att->nagents && off < sizeof (job->prev_nodes); i++)
            if (!job->att->agents[i].spare)
                off += snprintf (job->prev_nodes + off, sizeof (job->prev_nodes) - off,
                                 "%s%s", off ? "," : "", job->att->agents[i].node);
        if (off >= sizeof (job->prev_nodes))
            job->prev_nodes[0] = '\0'; /* too many to name: never pinned */
    }
    if (!(a->att = attempt_alloc (jobs, job, job->row.attempts + 1, false, err)))
        return -1;
    job->row.attempts++;
    job->row.restarts++;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0 ||
        tx_insert_attempt (jobs, job, a->att, err) < 0) {
        attempt_destroy (a->att);
        a->att = NULL;
        return -1;
    }
    return 0;
}

void job_restart (struct jobs *jobs, struct job *job)
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
