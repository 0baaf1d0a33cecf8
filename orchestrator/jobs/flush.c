/* flush.c: the bounded flush of live state (job rows, rank rows, node rows)
 * to SQLite, in one transaction, a bounded number of rows at a time.
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

/* Rows written by one flush: a huge attempt's ranks and nodes change
 * every heartbeat (80,000 rows a second for 10,000 nodes of 8 ranks);
 * writing them all at once would stall the main loop for a fraction of a
 * second.  A flush writes this many at most, resuming at a cursor per
 * attempt, and the rest follow at the next ticks.  Small
 * attempts are written completely by every flush, as before.  250 rows
 * take about 1.5 ms here; 1,000 took 5 ms of every 100 ms tick at 80,000
 * rank-heartbeats/s, and every request arriving meanwhile waited (status
 * p99 13-19 ms, against 8 with 250).  The rows are the durable copy of
 * live state the API reads from memory; at that scale each is rewritten
 * about every 35 s (a restarted dtctld learns the rest from the next
 * heartbeats). */
const int flush_rows_max = 250;

struct flush_arg {
    int budget; /* rows left; < 0 unlimited */
    bool more;  /* dirty rows left for a later flush */
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
            if (store_attempt_node_put (
                  st, job->row.id, att->row.attempt, ag->node, ag->order, ag->node_rank,
                  ag->spare, ag->addr, ag->port, ag->pid,
                  ag->done ? "done" : "registered", ag->register_time, ag->last_hb_ms,
                  ag->hostinfo, err) < 0)
                return -1;
        }
        else {
            int r = (att->flush_rank_pos + k) % n;
            struct rank *rk = &att->ranks[r];
            if (!rk->dirty)
                continue;
            struct store_rank_row row = {
                .rank = r,
                .node = rk->node,
                .local_rank = rk->local_rank,
                .pid = rk->pid,
                .state = rk->state[0] ? rk->state : "unknown",
                .client = rk->client,
                .step = rk->step,
                .loss = rk->loss,
                .compute_ms = rk->compute_ms,
                .comm_ms = rk->comm_ms,
                .straggler_score = rk->score,
                .samples = rk->samples,
                .exit_code = rk->exit_code,
                .signal = rk->signal,
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
bool jobs_flush_some (struct jobs *jobs, int budget)
{
    dt_error_t err;
    store_t *st = jobs->ctx->store;
    struct flush_arg fa = { budget, false };

    /* The bounded flushes (10 a second while a huge attempt's rows change)
     * do not wait for the disk: an fsync of the log took 3-25 ms on a
     * shared machine, in the one loop, each time; the next state
     * transition's commit syncs them.  The complete flush (at shutdown)
     * waits. */
    int rc = budget < 0 ? store_begin (st, &err) : store_begin_lazy (st, &err);
    if (rc < 0 || tx_flush (jobs, NULL, NULL, &fa, &err) < 0 ||
        store_commit (st, &err) < 0) {
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
