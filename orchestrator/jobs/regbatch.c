/* regbatch.c: registrations written to the database in batches.
 *
 * A registration storm (20,000 agents of one attempt registering within a
 * second) made one SQLite transaction, with its fsync, per agent: seconds
 * of commits that held up the event loop.  An agent that registers while
 * its attempt still waits for others needs no durable row to be answered
 * "waiting" (it asks again until the answer is "ready", also after a
 * controller restart), so such registrations are only marked in memory
 * here and written together: by jobs_flush_registrations after each pass
 * of the event loop, one transaction for all of them, and by the
 * registration that completes the rendezvous, in its own transaction,
 * before the node ranks are assigned.
 */
#include <config.h>
#include <stdio.h>

#include "common/dtime.h"
#include "common/log.h"
#include "orchestrator/ctld.h"
#include "orchestrator/jobs/internal.h"

/* Registrations marked and not yet written, over all attempts. */
static int regbatch_pending;

void regbatch_mark (struct attempt *att, struct agent *ag)
{
    if (ag->reg_pending)
        return;
    ag->reg_pending = true;
    att->reg_pending++;
    regbatch_pending++;
}

int regbatch_write (struct jobs *jobs, struct job *job, struct attempt *att,
                    dt_error_t *err)
{
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    int expected = att->row.num_nodes + att->row.spare_nodes;

    if (att->reg_pending == 0)
        return 0;
    /* The agents are in registration order until the rendezvous sorts
     * them, which runs after this. */
    for (int i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        char detail[128];
        if (!ag->reg_pending)
            continue;
        snprintf (detail, sizeof (detail), "agent on %s registered (%d of %d)", ag->node,
                  i + 1, expected);
        if (store_attempt_node_put (st, job->row.id, att->row.attempt, ag->node,
                                    ag->order, -1, false, ag->addr, ag->port, ag->pid,
                                    "registered", ag->register_time, 0, ag->hostinfo,
                                    err) < 0 ||
            store_node_seen (st, ag->node, ag->addr, ag->hostinfo, now, job->row.id,
                             att->row.attempt, err) < 0 ||
            store_event (st, ag->register_time, job->row.id, att->row.attempt,
                         "agent_registered", ag->node, -1, detail, NULL, err) < 0)
            return -1;
    }
    return 0;
}

void regbatch_written (struct attempt *att)
{
    if (att->reg_pending == 0)
        return;
    for (int i = 0; i < att->nagents; i++)
        att->agents[i].reg_pending = false;
    regbatch_pending -= att->reg_pending;
    att->reg_pending = 0;
}

void regbatch_forget (struct attempt *att)
{
    regbatch_pending -= att->reg_pending;
    att->reg_pending = 0;
}

static int tx_batch (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                     dt_error_t *err)
{
    (void)arg;
    return regbatch_write (jobs, job, att, err);
}

int jobs_register_retry_ms (struct jobs *jobs)
{
    static int64_t at_ms;
    static int cached = 50;
    int64_t now = dt_mono_ms ();
    if (now - at_ms < 100)
        return cached; /* counted at most every 100 ms */
    at_ms = now;
    int64_t waiting = 0;
    for (struct job *job = jobs->list; job; job = job->next)
        if (job->att &&
            (job->att->row.state == ATT_SUBMITTED || job->att->row.state == ATT_STARTING))
            waiting += job->att->nagents;
    int64_t ms = waiting / 4; /* 4,000 agents asking once a second */
    cached = ms < 50 ? 50 : ms > 10000 ? 10000 : (int)ms;
    return cached;
}

void jobs_flush_registrations (struct jobs *jobs)
{
    dt_error_t err;

    if (regbatch_pending <= 0)
        return;
    /* One transaction per attempt (transact's unit), usually one. */
    for (struct job *job = jobs->list; job; job = job->next) {
        struct attempt *att = job->att;
        if (!att || att->reg_pending == 0)
            continue;
        int64_t t0 = dt_mono_ms ();
        int n = att->reg_pending;
        if (transact (jobs, job, att, tx_batch, NULL, &err) < 0) {
            /* Kept marked: the next pass tries again. */
            dt_log (LOG_ERR, "job %lld attempt %d: cannot record %d registrations: %s",
                    (long long)job->row.id, att->row.attempt, n, err.text);
            continue;
        }
        regbatch_written (att);
        dt_log (LOG_DEBUG, "job %lld attempt %d: %d registrations recorded in %lld ms",
                (long long)job->row.id, att->row.attempt, n,
                (long long)(dt_mono_ms () - t0));
    }
}
