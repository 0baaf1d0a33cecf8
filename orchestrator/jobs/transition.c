/* transition.c: state changes, each in one transaction with its event.
 *
 * transact() runs a change inside store_begin/store_commit and, when it
 * fails, rolls the database back and restores the scalars of the job and
 * attempt rows, so memory never runs ahead of the database.
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

int job_set_state (struct jobs *jobs, struct job *job, enum job_state to,
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
    int rc = store_event (jobs->ctx->store, now, job->row.id, job->row.attempts,
                          "job_state", NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}

int att_set_state (struct jobs *jobs, struct attempt *att, enum attempt_state to,
                   dt_error_t *err)
{
    enum attempt_state from = att->row.state;
    int64_t now = dt_real_ms ();

    if (!fsm_attempt_ok (from, to))
        return errnoprintf (err, EBUSY, "attempt %lld.%d is %s: cannot become %s",
                            (long long)att->row.job_id, att->row.attempt,
                            fsm_attempt_state_name (from), fsm_attempt_state_name (to));
    att->row.state = to;
    /* Registrations held until the rendezvous completes (a long poll):
     * any change of the attempt's state answers them. */
    if (jobs->ctx->httpd)
        dt_httpd_wake (jobs->ctx->httpd, att);
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
    if (from == ATT_RUNNING && to != ATT_RUNNING)
        report_attempt_end (jobs->ctx->report, att->row.job_id, att->row.attempt);
    json_t *data = json_pack ("{s:s s:s s:s?}", "from", fsm_attempt_state_name (from),
                              "to", fsm_attempt_state_name (to), "cause",
                              att->row.cause[0] ? att->row.cause : NULL);
    char detail[128];
    snprintf (detail, sizeof (detail), "attempt %d %s -> %s", att->row.attempt,
              fsm_attempt_state_name (from), fsm_attempt_state_name (to));
    int rc = store_event (jobs->ctx->store, now, att->row.job_id, att->row.attempt,
                          "attempt_state", NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}

int transact (struct jobs *jobs, struct job *job, struct attempt *att, tx_f fn, void *arg,
              dt_error_t *err)
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
