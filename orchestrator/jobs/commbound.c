/* commbound.c: the communication-bound early warning.  From the ranks'
 * step reports (compute time and communication-wait time of their latest
 * step) each attempt-wide pass computes the exposed communication share
 * (communication wait / (compute + communication wait), the mean over the
 * ranks), the spread of compute time between the ranks ((slowest -
 * fastest) / slowest), and raises one "comm_bound" event per attempt when
 * the share stays above comm_bound.threshold for comm_bound.window_steps
 * consecutive steps.  Where the ranks report their FLOPs (event "perf",
 * jobs_perf), also the model FLOP utilisation: the model FLOPs of one step
 * of the job over (the step time x the peak FLOP/s of the ranks), the
 * step time being the slowest rank's compute + communication wait.  The
 * figures are in the job view ("comm") and on /metrics.
 */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "orchestrator/jobs/internal.h"

/* Defaults of a spec that predates the comm_bound section (spec.c has the
 * same for new specs). */
static const double default_threshold = 0.5;
static const int default_window_steps = 20;

static double cb_threshold (const struct job *job)
{
    double t = job->spec.comm_bound.threshold;
    return t > 0 ? t : default_threshold;
}

static int cb_window (const struct job *job)
{
    int w = job->spec.comm_bound.window_steps;
    return w > 0 ? w : default_window_steps;
}

void commbound_pass (struct jobs *jobs, struct attempt *att, const struct rank_totals *t)
{
    struct job *job = att->job;
    int64_t min_step = t->cb_min_step;

    for (int k = 0; k < 9; k++)
        att->cb_dims[k] = t->ndims ? t->dims[k] / t->ndims : 0;
    att->cb_dims_n = t->ndims;
    if (t->cb_n == 0)
        return;
    att->cb_valid = true;
    att->cb_mfu =
      att->row.model_flops > 0 && att->row.peak_flops > 0 && t->cb_step_ms > 0
        ? att->row.model_flops / (att->row.peak_flops * t->cb_step_ms / 1000.0)
        : NAN;
    att->cb_share = t->cb_share / t->cb_n;
    att->cb_spread = t->cb_cmax > 0 ? (t->cb_cmax - t->cb_cmin) / t->cb_cmax : 0;
    /* One sample per step every rank has reported (the fields hold step
     * + 1, so that a new attempt's zeroed fields read as none). */
    if (min_step + 1 <= att->cb_seen)
        return;
    att->cb_seen = min_step + 1;
    if (att->cb_share <= cb_threshold (job)) {
        att->cb_from = 0;
        return;
    }
    if (att->cb_from == 0)
        att->cb_from = min_step + 1;
    if (att->cb_fired || min_step + 1 - att->cb_from < cb_window (job))
        return;

    char detail[256];
    dt_error_t err;
    att->cb_fired = true;
    snprintf (detail, sizeof (detail),
              "communication-bound: %.0f%% of the step time is exposed communication "
              "wait (above %.0f%% for %lld steps); compute-time spread between ranks "
              "%.0f%%",
              100 * att->cb_share, 100 * cb_threshold (job),
              (long long)(min_step + 1 - att->cb_from), 100 * att->cb_spread);
    json_t *data =
      json_pack ("{s:f s:f s:i s:f s:I s:I}", "exposed_share", att->cb_share, "threshold",
                 cb_threshold (job), "window_steps", cb_window (job), "compute_spread",
                 att->cb_spread, "step", (json_int_t)min_step, "since_step",
                 (json_int_t)(att->cb_from - 1));
    if (jobs_note (jobs, att, "comm_bound", NULL, -1, detail, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
    else
        dt_log (LOG_NOTICE, "job %lld attempt %d: %s", (long long)job->row.id,
                att->row.attempt, detail);
    json_decref (data);
}

json_t *commbound_dims_json (const double *dims)
{
    static const char *const name[3] = { "tp", "pp", "dp" };
    json_t *o = json_object ();
    for (int d = 0; o && d < 3; d++)
        json_object_set_new (o, name[d],
                             json_pack ("{s:f s:f s:f}", "bytes", dims[3 * d], "comm_ms",
                                        dims[3 * d + 1], "exposed_ms", dims[3 * d + 2]));
    return o;
}

void commbound_overlay (const struct job *job, json_t *o)
{
    const struct attempt *att = job->att;
    if (!att || !att->cb_valid || att->row.state != ATT_RUNNING)
        return;
    int64_t above = att->cb_from ? att->cb_seen - att->cb_from : 0;
    json_t *c = json_pack (
      "{s:f s:f s:o s:f s:i s:I s:b}", "exposed_share", att->cb_share, "compute_spread",
      att->cb_spread, "mfu", isnan (att->cb_mfu) ? json_null () : json_real (att->cb_mfu),
      "threshold", cb_threshold (job), "window_steps", cb_window (job), "steps_above",
      (json_int_t)above, "comm_bound", att->cb_fired);
    /* Per parallel dimension: the mean over the ranks that report them of
     * their latest step's figures (null: no rank reports them), as of the
     * last attempt-wide pass. */
    if (c)
        json_object_set_new (
          c, "dims", att->cb_dims_n ? commbound_dims_json (att->cb_dims) : json_null ());
    json_object_set_new (o, "comm", c);
}

char *jobs_comm_metrics_text (struct jobs *jobs)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    if (!f)
        return NULL;
    fputs ("# HELP dtctld_job_comm_exposed_share Exposed communication-wait share of "
           "the step time of a running job (mean over its ranks' latest steps).\n"
           "# TYPE dtctld_job_comm_exposed_share gauge\n",
           f);
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att && j->att->cb_valid && j->att->row.state == ATT_RUNNING)
            fprintf (f, "dtctld_job_comm_exposed_share{job=\"%lld\"} %.4f\n",
                     (long long)j->row.id, j->att->cb_share);
    fputs ("# HELP dtctld_job_compute_spread Spread of compute time between the ranks "
           "of a running job: (slowest - fastest) / slowest.\n"
           "# TYPE dtctld_job_compute_spread gauge\n",
           f);
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att && j->att->cb_valid && j->att->row.state == ATT_RUNNING)
            fprintf (f, "dtctld_job_compute_spread{job=\"%lld\"} %.4f\n",
                     (long long)j->row.id, j->att->cb_spread);
    fputs ("# HELP dtctld_job_comm_bound 1 when the running attempt of a job raised a "
           "comm_bound event.\n"
           "# TYPE dtctld_job_comm_bound gauge\n",
           f);
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att && j->att->cb_valid && j->att->row.state == ATT_RUNNING)
            fprintf (f, "dtctld_job_comm_bound{job=\"%lld\"} %d\n", (long long)j->row.id,
                     j->att->cb_fired ? 1 : 0);
    fputs ("# HELP dtctld_job_mfu Model FLOP utilisation of a running job's latest "
           "step (absent where its trainer reports no FLOPs).\n"
           "# TYPE dtctld_job_mfu gauge\n",
           f);
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->att && j->att->cb_valid && j->att->row.state == ATT_RUNNING &&
            !isnan (j->att->cb_mfu))
            fprintf (f, "dtctld_job_mfu{job=\"%lld\"} %.6f\n", (long long)j->row.id,
                     j->att->cb_mfu);
    if (fclose (f) != 0) {
        free (buf);
        return NULL;
    }
    return buf;
}

int jobs_perf (struct jobs *jobs, struct attempt *att, int rank, double model_flops,
               double peak_flops, const char *peak_source, dt_error_t *err)
{
    struct store_attempt_row *row = &att->row;
    double old_m = row->model_flops, old_p = row->peak_flops;
    char old_src[sizeof (row->peak_source)];
    double m = 0, p = 0;
    bool peak_known = true;
    int reported = 0;
    const char *src = NULL;

    if (rank < 0 || rank >= row->world_size)
        return errnoprintf (err, EINVAL, "perf: rank %d out of range", rank);
    att->ranks[rank].model_flops = model_flops;
    att->ranks[rank].peak_flops = peak_flops;
    /* One source for the attempt: the ranks' common word, or "mixed"
     * (the first rank to report sets it). */
    snprintf (old_src, sizeof (old_src), "%s", row->peak_source);
    if (peak_source && *peak_source) {
        if (!row->peak_source[0])
            src = peak_source;
        else if (strcmp (row->peak_source, peak_source))
            src = "mixed";
    }
    for (int r = 0; r < row->world_size; r++) {
        const struct rank *rk = &att->ranks[r];
        if (rk->model_flops <= 0)
            continue;
        m += rk->model_flops;
        reported++;
        if (rk->peak_flops > 0)
            p += rk->peak_flops;
        else
            peak_known = false;
    }
    row->model_flops = m;
    row->peak_flops = peak_known && p > 0 ? p : NAN;
    if (src)
        snprintf (row->peak_source, sizeof (row->peak_source), "%s", src);
    /* Written once every rank has reported (a large job's ranks would
     * otherwise cost a commit each); until then the sums ride along with
     * the attempt's other writes, like the ranks' live fields. */
    if (reported < row->world_size)
        return 0;
    if (store_attempt_update (jobs->ctx->store, row, err) < 0) {
        row->model_flops = old_m;
        row->peak_flops = old_p;
        snprintf (row->peak_source, sizeof (row->peak_source), "%s", old_src);
        att->ranks[rank].model_flops = att->ranks[rank].peak_flops = 0;
        return -1;
    }
    return 0;
}
