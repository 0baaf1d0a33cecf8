/* progress.c: what heartbeats bring: per-rank step bookkeeping, the
 * attempt-wide pass (progress, throughput, step metrics, the first step
 * past the resume point), planned stops, and the commands for the ranks.
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
#include "orchestrator/jobs/stragglerpolicy.h"

/* Step metrics kept per job (the stride doubles beyond it). */
static const int64_t metrics_cap = 1000;

/* One sweep over the ranks for the whole attempt-wide pass (struct
 * rank_totals). */
static void rank_totals_sweep (const struct attempt *att, struct rank_totals *t)
{
    *t = (struct rank_totals){
        .max_step = -1,
        .min_step = -1,
        .all_ranks = true,
        .done_step = -1,
        .step_ms = NAN,
        .cb_cmin = NAN,
        .cb_cmax = NAN,
        .cb_min_step = -1,
        .fastest = NAN,
    };
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        if (rk->has_dims) {
            for (int d = 0; d < 9; d++)
                t->dims[d] += rk->dims[d];
            t->ndims++;
        }
        t->fastest = straggler_fastest_with (t->fastest, rk);
        if (!rk->seen) {
            t->all_ranks = false;
            continue;
        }
        if (rk->step > t->max_step)
            t->max_step = rk->step;
        if (t->min_step < 0 || rk->step < t->min_step)
            t->min_step = rk->step;
        if (rk->samples > 0)
            t->samples += rk->samples;
        if (!isnan (rk->compute_ms)) {
            t->comp += rk->compute_ms;
            t->ncomp++;
            if (!isnan (rk->comm_ms))
                t->comm += rk->comm_ms;
        }
        if (rk->step < 0) {
            t->all_ranks = false;
            continue;
        }
        /* goodput: a step is reached when every rank has finished it; in
         * synchronous training a step takes its slowest rank's compute +
         * communication */
        if (rk->has_dims) {
            for (int d = 0; d < 9; d++)
                t->dims_seen[d] += rk->dims[d];
            t->ndims_seen++;
        }
        if (t->done_step < 0 || rk->step < t->done_step)
            t->done_step = rk->step;
        if (rk->samples > 0)
            t->batch += rk->samples;
        double st = (isnan (rk->compute_ms) ? 0 : rk->compute_ms) +
                    (isnan (rk->comm_ms) ? 0 : rk->comm_ms);
        if (!isnan (rk->compute_ms) && (isnan (t->step_ms) || st > t->step_ms))
            t->step_ms = st;
        /* communication-bound figures */
        if (isnan (rk->compute_ms) || isnan (rk->comm_ms) ||
            rk->compute_ms + rk->comm_ms <= 0)
            continue;
        t->cb_share += rk->comm_ms / (rk->compute_ms + rk->comm_ms);
        if (isnan (t->cb_cmin) || rk->compute_ms < t->cb_cmin)
            t->cb_cmin = rk->compute_ms;
        if (isnan (t->cb_cmax) || rk->compute_ms > t->cb_cmax)
            t->cb_cmax = rk->compute_ms;
        if (t->cb_min_step < 0 || rk->step < t->cb_min_step)
            t->cb_min_step = rk->step;
        if (rk->compute_ms + rk->comm_ms > t->cb_step_ms)
            t->cb_step_ms = rk->compute_ms + rk->comm_ms;
        t->cb_n++;
    }
}

/* Goodput accounting (report.c): what it needs of the ranks, pushed. */
static void report_sample (struct jobs *jobs, struct attempt *att,
                           const struct rank_totals *t)
{
    struct report_sample sm = {
        .job = att->row.job_id,
        .attempt = att->row.attempt,
        .resume_step = att->row.resume_step,
        .start_time = att->row.start_time,
        .all_ranks = t->all_ranks,
        .min_step = t->done_step,
        .step_ms = t->step_ms,
        .batch = t->batch,
        .has_dims = t->ndims_seen > 0,
    };
    if (att->row.state != ATT_RUNNING)
        return;
    for (int d = 0; t->ndims_seen && d < 9; d++)
        sm.dims[d] = t->dims_seen[d] / t->ndims_seen;
    report_progress (jobs->ctx->report, &sm);
}

/* A rank exited: the step every rank reported, when all have. */
static void report_exit (struct jobs *jobs, struct attempt *att)
{
    int64_t min_step = -1;
    if (att->row.state != ATT_RUNNING && att->row.state != ATT_ENDING)
        return;
    for (int k = 0; k < att->row.world_size; k++) {
        const struct rank *rk = &att->ranks[k];
        if (!rk->seen || rk->step < 0)
            return;
        if (min_step < 0 || rk->step < min_step)
            min_step = rk->step;
    }
    report_rank_exit (jobs->ctx->report, att->row.job_id, att->row.attempt,
                      att->row.state == ATT_RUNNING, min_step);
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
    report_exit (jobs, att);
}

/* Ask every rank to checkpoint at a step a little ahead of the fastest one
 * and stop there; the attempt then ends with 'cause' (attempt_succeed). */
void attempt_stop (struct jobs *jobs, struct attempt *att, const char *cause,
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
    json_t *data =
      json_pack ("{s:s s:I}", "cause", cause, "stop_step", (json_int_t)att->stop_step);
    if (jobs_note (jobs, att, "stop_requested", node, rank, d, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    json_decref (data);
    dt_log (LOG_NOTICE, "job %lld attempt %d: %s", (long long)att->row.job_id,
            att->row.attempt, d);
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
            att->steptime[att->steptime_pos] =
              rk->compute_ms + (isnan (rk->comm_ms) ? 0 : rk->comm_ms);
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
    straggler_sample (rk, straggler_window (att->job));
}

/* How often the attempt-wide pass may run: small attempts after every
 * heartbeat, large ones about world_size / 200 ms
 * apart (at most about 200,000 rank visits a second), and at least twice
 * a heartbeat interval. */
int64_t progress_gap_ms (struct attempt *att)
{
    int64_t gap = att->row.world_size / 200;
    int64_t hb = att->job->spec.hb.interval_ms;
    if (gap < 0)
        gap = 0;
    if (hb > 0 && gap > hb / 2)
        gap = hb / 2;
    return gap;
}

/* Ranks of an attempt whose attempt-wide passes are bounded to one per
 * tick: a pass over 65,536 ranks (progress, stragglers, communication,
 * watchdog) takes 3-10 ms of CPU, and three such attempts' passes in one
 * heartbeat's request or one tick held every request behind them (passes
 * of 25-80 ms of CPU at 160,000 rank-heartbeats/s). */
const int pass_bounded_ranks = 4096;

bool jobs_pass_ok (struct jobs *jobs, struct attempt *att)
{
    if (att->row.world_size <= pass_bounded_ranks)
        return true;
    if (jobs->in_tick && jobs->tick_passes == 0) {
        jobs->tick_passes++;
        return true;
    }
    jobs->passes_left = true;
    return false;
}

void jobs_heartbeat_done (struct jobs *jobs, struct attempt *att)
{
    att->progress_dirty = true;
    if (att->row.state == ATT_RUNNING &&
        dt_mono_ms () - att->progress_last_ms >= progress_gap_ms (att) &&
        jobs_pass_ok (jobs, att))
        jobs_progress (jobs, att);
}

/* Step metric: the first step seen in each stride bucket, as rank 0
 * reported it: its loss is of its own step, which may be one ahead of
 * the slowest rank's, and a loss filed under the wrong step would not
 * match an uninterrupted run's curve.  comp, comm: mean compute and
 * communication times of the step (NAN unknown). */
static void progress_metric (struct jobs *jobs, struct attempt *att, int64_t now,
                             double comp, double comm)
{
    struct job *job = att->job;
    /* An exited rank's step may come from its exit event (the exact last
     * step) while its loss is of the last step it reported: no point. */
    int64_t mstep = att->ranks[0].seen && strcmp (att->ranks[0].state, "exited")
                      ? att->ranks[0].step
                      : -1;
    if (mstep >= 0 && job->row.metrics_stride > 0 &&
        (job->last_metric_step < 0 ||
         mstep / job->row.metrics_stride >
           job->last_metric_step / job->row.metrics_stride)) {
        dt_error_t err;
        if (store_metric_put (jobs->ctx->store, job->row.id, mstep, att->row.attempt, now,
                              att->ranks[0].loss, job->row.throughput, comp, comm,
                              &err) < 0)
            dt_log (LOG_ERR, "job %lld: metrics: %s", (long long)job->row.id, err.text);
        else {
            job->last_metric_step = mstep;
            if (++job->metrics_rows > metrics_cap) {
                job->row.metrics_stride *= 2;
                job->dirty = true;
                if (store_metrics_thin (jobs->ctx->store, job->row.id,
                                        job->row.metrics_stride, &err) < 0 ||
                    store_metrics_count (jobs->ctx->store, job->row.id,
                                         &job->metrics_rows, &err) < 0)
                    dt_log (LOG_ERR, "job %lld: metrics: %s", (long long)job->row.id,
                            err.text);
            }
        }
    }
}

void jobs_progress (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    int64_t now = dt_real_ms ();
    struct rank_totals tot;

    att->progress_dirty = false;
    att->progress_last_ms = dt_mono_ms ();
    rank_totals_sweep (att, &tot);
    if (tot.max_step > att->max_step)
        att->max_step = tot.max_step;
    int64_t min_step = tot.min_step;
    report_sample (jobs, att, &tot); /* goodput accounting */
    straggler_pass (jobs, att, tot.fastest);
    commbound_pass (jobs, att, &tot);

    /* The first step past the resume point: when the restart paid off
     * (the failure timelines and the goodput report use it). */
    if (!att->first_step_noted &&
        att->max_step > (att->row.resume_step > 0 ? att->row.resume_step : 0)) {
        char detail[128];
        dt_error_t err;
        att->first_step_noted = true;
        snprintf (detail, sizeof (detail),
                  "first step past the resume point: %lld (resumed "
                  "from %lld)",
                  (long long)att->max_step, (long long)att->row.resume_step);
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
        }
        else if (now - att->tp_time_ms >= 1000) {
            if (tot.samples > 0)
                job->row.throughput = (double)(min_step - att->tp_step) *
                                      (double)tot.samples * 1000.0 /
                                      (double)(now - att->tp_time_ms);
            att->tp_time_ms = now;
            att->tp_step = min_step;
            job->dirty = true;
        }
    }

    progress_metric (jobs, att, now, tot.ncomp ? tot.comp / tot.ncomp : NAN,
                     tot.ncomp ? tot.comm / tot.ncomp : NAN);
    ckpt_schedule (jobs, att, min_step);
}

size_t jobs_commands_text (struct jobs *jobs, struct attempt *att, char *buf, size_t len)
{
    int n;
    (void)jobs;
    if (att->row.state == ATT_ENDING && att->jit_open &&
        !strcmp (att->row.cause, "hang") && att->row.cause_rank >= 0)
        /* The just-in-time window after a hang: the hung rank goes, and its
         * peers save the state and exit.  The kill fails their collective
         * on it where gloo sees the peer go; the stop wakes them where it
         * does not (a copy of the killed rank's socket still open in
         * another process), as on the ordinary path below. */
        n = snprintf (buf, len,
                      "[{\"kind\":\"kill\",\"rank\":%d},{\"kind\":\"stop\",\"step\":-1}]",
                      att->row.cause_rank);
    else if (att->row.state == ATT_ENDING && att->jit_open)
        /* The just-in-time window: survivors save the state now and exit
         * (a negative step; dttrain wakes a rank stuck in a collective on
         * its lost peer, which gloo may never fail). */
        n = snprintf (buf, len, "[{\"kind\":\"stop\",\"step\":-1}]");
    else if (att->row.state == ATT_ENDING && att->job->spec.restart.reform)
        /* Survivors that wait to re-form: no re-form, write the state and
         * exit (a stop includes its checkpoint). */
        n = snprintf (buf, len, "[{\"kind\":\"stop\",\"step\":0}]");
    else if (att->row.state == ATT_ENDING)
        n = snprintf (buf, len, "[]"); /* the just-in-time window: nothing new to do */
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
