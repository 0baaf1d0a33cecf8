/* report.c: goodput accounting of jobs (see report.h).
 *
 * A leaf: the job manager pushes what it sees (report_heartbeat,
 * report_progress, report_rank_exit, report_attempt_end), store.c holds
 * the SQL, api.c and metrics.c ask for the figures.  Nothing here calls
 * back into the job manager. */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "common/log.h"
#include "orchestrator/fsm.h"
#include "orchestrator/report.h"
#include "orchestrator/store.h"

/* The step-time histogram: bucket b holds [base * ratio^b, base * ratio^(b+1))
 * ms, from 50 us to about 2.6 hours; a percentile is known to +-5%. */
static const double hist_base_ms = 0.05;
static const double hist_ratio = 1.1;
/* What heartbeats taught is written at most this often (batched). */
static const int64_t flush_interval_ms = 1000;

/* What heartbeats teach about one live attempt. */
struct gstat {
    struct gstat *next;
    int64_t job;
    int attempt;
    int64_t start_step; /* resume step, or 0 */
    int64_t train_start, first_step, first_step_time, last_step, last_step_time;
    int64_t hb_samples, busy_samples, step_samples, batch_samples;
    bool last_busy; /* the last heartbeat had a busy rank */
    bool running;   /* the attempt runs: keep it in memory */
    double step_ms_sum;
    uint32_t hist[REPORT_HIST_BUCKETS];
    double dims_sum[9]; /* communication per dimension, over dims_steps steps */
    int64_t dims_steps;
    bool dirty;
};

struct report {
    store_t *store;
    struct gstat *list;
    int64_t next_flush_ms;
};

/* --- the histogram ----------------------------------------------------------- */

int report_hist_bucket (double ms)
{
    if (!(ms > hist_base_ms))
        return 0;
    int b = (int)floor (log (ms / hist_base_ms) / log (hist_ratio));
    return b < 0 ? 0 : b >= REPORT_HIST_BUCKETS ? REPORT_HIST_BUCKETS - 1 : b;
}

double report_hist_value (int b)
{
    return hist_base_ms * pow (hist_ratio, b + 0.5); /* geometric middle */
}

static double hist_pct (const uint32_t *h, double q)
{
    uint64_t total = 0, acc = 0;
    for (int b = 0; b < REPORT_HIST_BUCKETS; b++)
        total += h[b];
    if (total == 0)
        return NAN;
    uint64_t want = (uint64_t)ceil (q * total);
    if (want < 1)
        want = 1;
    for (int b = 0; b < REPORT_HIST_BUCKETS; b++) {
        acc += h[b];
        if (acc >= want)
            return report_hist_value (b);
    }
    return report_hist_value (REPORT_HIST_BUCKETS - 1);
}

static json_t *hist_json (const uint32_t *h)
{
    json_t *c = json_array ();
    for (int b = 0; b < REPORT_HIST_BUCKETS; b++)
        if (h[b])
            json_array_append_new (c, json_pack ("[i, I]", b, (json_int_t)h[b]));
    return json_pack ("{s:f s:f s:o}", "base_ms", hist_base_ms, "ratio", hist_ratio,
                      "counts", c);
}

static void hist_load (uint32_t *h, const char *text)
{
    json_t *o = text ? json_loads (text, 0, NULL) : NULL;
    json_t *c = json_object_get (o, "counts"), *e;
    size_t i;
    json_array_foreach (c, i, e)
    {
        json_int_t b = json_integer_value (json_array_get (e, 0));
        if (b >= 0 && b < REPORT_HIST_BUCKETS)
            h[b] = (uint32_t)json_integer_value (json_array_get (e, 1));
    }
    json_decref (o);
}

/* --- the store ----------------------------------------------------------------- */

static int gstat_put (struct report *rp, const struct gstat *g, dt_error_t *err)
{
    struct store_goodput_row row = {
        .job_id = g->job,
        .attempt = g->attempt,
        .train_start = g->train_start,
        .first_step = g->first_step,
        .first_step_time = g->first_step_time,
        .last_step = g->last_step,
        .last_step_time = g->last_step_time,
        .hb_samples = g->hb_samples,
        .busy_samples = g->busy_samples,
        .step_samples = g->step_samples,
        .batch_samples = g->batch_samples,
        .step_ms_sum = g->step_ms_sum,
        .dims_steps = g->dims_steps,
    };
    memcpy (row.dims_sum, g->dims_sum, sizeof (row.dims_sum));
    json_t *h = hist_json (g->hist);
    char *ht = h ? json_dumps (h, JSON_COMPACT) : NULL;
    json_decref (h);
    int rc = store_goodput_put (rp->store, &row, ht, err);
    free (ht);
    return rc;
}

static void gstat_init (struct gstat *g, int64_t job, int attempt)
{
    memset (g, 0, sizeof (*g));
    g->job = job;
    g->attempt = attempt;
    g->first_step = g->last_step = -1;
}

/* Fill g from the attempt_goodput row: 1 found, 0 none, -1 error. */
static int gstat_load (struct report *rp, struct gstat *g, dt_error_t *err)
{
    struct store_goodput_row row;
    char *hist;
    int rc = store_goodput_load (rp->store, g->job, g->attempt, &row, &hist, err);
    if (rc == 1) {
        g->train_start = row.train_start;
        g->first_step = row.first_step;
        g->first_step_time = row.first_step_time;
        g->last_step = row.last_step;
        g->last_step_time = row.last_step_time;
        g->hb_samples = row.hb_samples;
        g->busy_samples = row.busy_samples;
        g->step_samples = row.step_samples;
        g->step_ms_sum = row.step_ms_sum;
        g->batch_samples = row.batch_samples;
        memcpy (g->dims_sum, row.dims_sum, sizeof (g->dims_sum));
        g->dims_steps = row.dims_steps;
        hist_load (g->hist, hist);
        free (hist);
    }
    return rc;
}

/* --- learning from heartbeats ------------------------------------------------- */

static struct gstat *gstat_get (struct report *rp, int64_t job, int attempt, bool load)
{
    struct gstat *g;
    dt_error_t err;
    for (g = rp->list; g; g = g->next)
        if (g->job == job && g->attempt == attempt)
            return g;
    if (!(g = malloc (sizeof (*g))))
        return NULL;
    gstat_init (g, job, attempt);
    /* After a controller restart: continue from what was written. */
    if (load && gstat_load (rp, g, &err) < 0)
        dt_log (LOG_WARNING, "job %lld attempt %d: %s", (long long)job, attempt,
                err.text);
    g->next = rp->list;
    rp->list = g;
    return g;
}

void report_heartbeat (struct report *rp, int64_t job, int attempt, bool busy)
{
    if (!rp)
        return;
    struct gstat *g = gstat_get (rp, job, attempt, true);
    if (!g)
        return;
    g->running = true;
    g->last_busy = busy;
    if (g->first_step >= 0) {
        g->hb_samples++;
        if (busy)
            g->busy_samples++;
        g->dirty = true;
    }
}

void report_progress (struct report *rp, const struct report_sample *sm)
{
    int64_t now = dt_real_ms ();

    if (!rp)
        return;
    struct gstat *g = gstat_get (rp, sm->job, sm->attempt, true);
    if (!g)
        return;
    g->running = true;
    g->start_step = sm->resume_step > 0 ? sm->resume_step : 0;
    int64_t prev = g->last_step >= 0 ? g->last_step : g->start_step;
    if (!sm->all_ranks || sm->min_step <= prev)
        return;
    if (g->first_step < 0) {
        /* The first step began about (steps done) x (step time) ago, but
         * not before the attempt was running. */
        double back =
          isnan (sm->step_ms) ? 0 : (sm->min_step - g->start_step) * sm->step_ms;
        int64_t lo = sm->start_time > 0 ? sm->start_time : now;
        g->train_start = now - (int64_t)back;
        if (g->train_start < lo)
            g->train_start = lo;
        if (g->train_start > now)
            g->train_start = now;
        g->first_step = sm->min_step;
        g->first_step_time = now;
        g->hb_samples = 1;
        g->busy_samples = g->last_busy;
    }
    g->last_step = sm->min_step;
    g->last_step_time = now;
    if (!isnan (sm->step_ms) && sm->step_ms > 0) {
        g->hist[report_hist_bucket (sm->step_ms)]++;
        g->step_samples++;
        g->step_ms_sum += sm->step_ms;
    }
    if (sm->has_dims) {
        for (int k = 0; k < 9; k++)
            g->dims_sum[k] += sm->dims[k];
        g->dims_steps++;
    }
    if (sm->batch > 0)
        g->batch_samples = sm->batch;
    g->dirty = true;
}

void report_rank_exit (struct report *rp, int64_t job, int attempt, bool running,
                       int64_t min_step)
{
    if (!rp)
        return;
    struct gstat *g = gstat_get (rp, job, attempt, true);
    if (!g)
        return;
    g->running = running;
    if (g->first_step < 0)
        return; /* training was never seen: heartbeats decide */
    if (min_step > g->last_step) {
        g->last_step = min_step;
        g->last_step_time = dt_real_ms ();
        g->dirty = true;
    }
}

void report_attempt_end (struct report *rp, int64_t job, int attempt)
{
    if (!rp)
        return;
    for (struct gstat *g = rp->list; g; g = g->next)
        if (g->job == job && g->attempt == attempt)
            g->running = false;
}

void report_flush (struct report *rp)
{
    dt_error_t err;
    bool any = false;
    for (struct gstat *g = rp->list; g; g = g->next)
        any = any || g->dirty;
    if (!any)
        return;
    if (store_begin (rp->store, &err) < 0)
        goto fail;
    for (struct gstat *g = rp->list; g; g = g->next)
        if (g->dirty && gstat_put (rp, g, &err) < 0) {
            store_rollback (rp->store);
            goto fail;
        }
    if (store_commit (rp->store, &err) < 0) {
        store_rollback (rp->store);
        goto fail;
    }
    for (struct gstat *g = rp->list; g; g = g->next)
        g->dirty = false;
    return;
fail:
    dt_log (LOG_ERR, "goodput flush: %s", err.text);
}

void report_tick (struct report *rp)
{
    int64_t now = dt_real_ms ();
    if (!rp || now < rp->next_flush_ms)
        return;
    rp->next_flush_ms = now + flush_interval_ms;
    report_flush (rp);
    /* Forget attempts that are written and no longer running. */
    struct gstat **pp = &rp->list;
    while (*pp) {
        struct gstat *g = *pp;
        if (!g->dirty && !g->running) {
            *pp = g->next;
            free (g);
            continue;
        }
        pp = &g->next;
    }
}

struct report *report_create (store_t *store, dt_error_t *err)
{
    struct report *rp = calloc (1, sizeof (*rp));
    if (!rp) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    rp->store = store;
    return rp;
}

void report_destroy (struct report *rp)
{
    if (rp) {
        int saved = errno;
        while (rp->list) {
            struct gstat *n = rp->list->next;
            free (rp->list);
            rp->list = n;
        }
        free (rp);
        errno = saved;
    }
}

/* --- the accounting ------------------------------------------------------------ */

enum part {
    P_KEPT,
    P_LOST,
    P_DETECT,
    P_RESTART,
    P_QUEUE,
    P_STALL,
    P_STARTUP,
    P_SHUTDOWN,
    P_IDLE,
    P_COUNT
};
static const char *const part_names[P_COUNT] = {
    "kept_training_s",    "lost_work_s", "detection_s", "restart_s", "queue_s",
    "checkpoint_stall_s", "startup_s",   "shutdown_s",  "idle_s",
};

struct cursor {
    int64_t t, w1;
    double part[P_COUNT]; /* ms */
    double *apart;        /* the current attempt's parts (ms) */
};

static int64_t clampt (const struct cursor *c, int64_t x)
{
    return x < c->t ? c->t : x > c->w1 ? c->w1 : x;
}

/* Time from the cursor to 'until' goes to part p. */
static void seg (struct cursor *c, enum part p, int64_t until)
{
    int64_t u = clampt (c, until);
    c->part[p] += u - c->t;
    if (c->apart)
        c->apart[p] += u - c->t;
    c->t = u;
}

static json_t *num_or_null (double v)
{
    return isnan (v) || isinf (v) ? json_null () : json_real (v);
}

static json_t *time_or_null (int64_t ms)
{
    char buf[40];
    return ms > 0 ? json_string (dt_format_time (ms, buf, sizeof (buf))) : json_null ();
}

/* Which steps each attempt keeps: walking back from the last attempt,
 * an attempt keeps its steps up to the step the next one resumed from
 * (the final lineage); the last keeps all if it succeeded or runs,
 * else up to the newest committed checkpoint (what a restart resumes). */
static void kept_lineage (const struct report_job *job, const struct report_attempt *atts,
                          int n, int64_t *kept, int64_t *steps)
{
    int64_t bound = INT64_MAX;
    if (n > 0 && (atts[n - 1].failed || !strcmp (job->state, "cancelled") ||
                  !strcmp (job->state, "failed") || job->live_restart))
        bound = job->latest_ckpt_step >= 0 ? job->latest_ckpt_step : 0;
    for (int i = n - 1; i >= 0; i--) {
        const struct report_attempt *a = &atts[i];
        int64_t start = a->resume_step > 0 ? a->resume_step : 0;
        steps[i] = a->last_step > start ? a->last_step - start : 0;
        int64_t top = a->last_step < bound ? a->last_step : bound;
        kept[i] = top > start ? top - start : 0;
        if (kept[i] > steps[i])
            kept[i] = steps[i];
        if (start < bound)
            bound = start;
    }
}

/* An attempt's training stretch, from its first step to its last (now
 * while it runs): checkpoint stall, kept and lost training in proportion
 * to its kept steps; then detection up to a failure.  sp: the part the
 * time before the first step goes to. */
static void seg_training (struct cursor *c, const struct report_attempt *a, enum part sp,
                          double *apart, int64_t kept, int64_t steps, int64_t now)
{
    int64_t ts = a->train_start > 0 ? a->train_start : a->first_step_time;
    seg (c, sp, ts);
    int64_t te = a->live && !strcmp (a->state, "running") ? now : a->last_step_time;
    int64_t t0 = c->t;
    te = clampt (c, te);
    double T = te - t0;
    double stall;
    if (!isnan (a->stall_reported_s))
        stall = a->stall_reported_s * 1000.0;
    else if (a->hb_samples > 0)
        stall = T * (double)a->busy_samples / a->hb_samples;
    else
        stall = 0;
    if (stall > T)
        stall = T;
    if (stall < 0)
        stall = 0;
    double rest = T - stall;
    double k = steps > 0 ? rest * kept / steps : rest;
    c->part[P_STALL] += stall;
    c->part[P_KEPT] += k;
    c->part[P_LOST] += rest - k;
    apart[P_STALL] += stall;
    apart[P_KEPT] += k;
    apart[P_LOST] += rest - k;
    c->t = te;
    if (a->failed)
        seg (c, P_DETECT, a->fail);
}

/* o[key] += 1 (a missing key counts 0). */
static void count_add (json_t *o, const char *key)
{
    json_object_set_new (
      o, key, json_integer (json_integer_value (json_object_get (o, key)) + 1));
}

/* One failure of the report's list; next_resume: the step the next
 * attempt resumed from, -1 none. */
static json_t *failure_json (const struct report_attempt *a, int64_t next_resume)
{
    return json_pack ("{s:i s:s s:s? s:o s:o s:o s:o}", "attempt", a->attempt, "cause",
                      a->cause, "node", *a->node ? a->node : NULL, "rank",
                      a->rank >= 0 ? json_integer (a->rank) : json_null (), "time",
                      time_or_null (a->fail), "step_reached",
                      a->last_step >= 0 ? json_integer (a->last_step) : json_null (),
                      "next_resume_step",
                      next_resume >= 0 ? json_integer (next_resume) : json_null ());
}

/* One attempt of the report from its parts (ms), kept and done steps. */
static json_t *attempt_json (const struct report_attempt *a, const double *apart,
                             int64_t kept, int64_t steps)
{
    double p50 = a->hist ? hist_pct (a->hist, 0.50) : NAN;
    double p90 = a->hist ? hist_pct (a->hist, 0.90) : NAN;
    double p99 = a->hist ? hist_pct (a->hist, 0.99) : NAN;
    double mean = a->step_samples > 0 ? a->step_ms_sum / a->step_samples : NAN;
    double sps =
      a->batch_samples > 0 && mean > 0 ? a->batch_samples * 1000.0 / mean : NAN;
    double tr = apart[P_KEPT] + apart[P_LOST];
    json_t *o = json_pack (
      "{s:i s:s s:s? s:s? s:o s:o s:o s:I s:I s:o s:f s:f s:f s:f"
      " s:f s:o s:o s:o s:o s:o}",
      "attempt", a->attempt, "state", a->state, "cause", *a->cause ? a->cause : NULL,
      "node", *a->node ? a->node : NULL, "resume_step",
      a->resume_step >= 0 ? json_integer (a->resume_step) : json_null (), "first_step",
      a->first_step >= 0 ? json_integer (a->first_step) : json_null (), "last_step",
      a->last_step >= 0 ? json_integer (a->last_step) : json_null (), "kept_steps",
      (json_int_t)kept, "lost_steps", (json_int_t)(steps - kept), "wall_s",
      json_real ((apart[P_QUEUE] + apart[P_STARTUP] + apart[P_RESTART] + tr +
                  apart[P_STALL] + apart[P_DETECT]) /
                 1000.0),
      "queue_s", apart[P_QUEUE] / 1000.0, "startup_s",
      (apart[P_STARTUP] + apart[P_RESTART]) / 1000.0, "training_s", tr / 1000.0,
      "checkpoint_stall_s", apart[P_STALL] / 1000.0, "detection_s",
      apart[P_DETECT] / 1000.0, "step_ms_p50", num_or_null (p50), "step_ms_p90",
      num_or_null (p90), "step_ms_p99", num_or_null (p99), "step_ms_mean",
      num_or_null (mean), "samples_per_s", num_or_null (sps));
    if (o) {
        json_object_set_new (o, "restart_path",
                             a->restart_path && *a->restart_path
                               ? json_string (a->restart_path)
                               : json_null ());
        json_object_set_new (o, "layout", report_layout_json (a));
        json_object_set_new (o, "comm_dims", report_comm_json (a));
    }
    return o;
}

/* The report's sections per restart and per attempt: time per path, one
 * row per restart, communication per dimension. */
static void tail_sections (json_t *out, const struct report_attempt *atts, int n,
                           double (*apart)[P_COUNT])
{
    json_object_set_new (out, "recovery_by_path", report_recovery_by_path (atts, n));
    double *det = calloc (n > 0 ? n : 1, sizeof (*det));
    for (int i = 0; det && i < n; i++)
        det[i] = apart[i][P_DETECT];
    json_object_set_new (out, "restarts",
                         det ? report_restarts (atts, n, det) : json_array ());
    free (det);
    json_object_set_new (out, "communication", report_comm_rows (atts, n));
}

json_t *report_compute (const struct report_job *job, const struct report_attempt *atts,
                        int n, int64_t now)
{
    struct cursor c = { 0 };
    int64_t w0 = job->submit, w1 = job->end > 0 ? job->end : now;
    double (*apart)[P_COUNT] = calloc (n > 0 ? n : 1, sizeof (*apart));
    int64_t *kept = calloc (n > 0 ? n : 1, sizeof (*kept));
    int64_t *steps = calloc (n > 0 ? n : 1, sizeof (*steps));
    double first_queue = 0;
    json_t *out = NULL;

    if (!apart || !kept || !steps)
        goto done;
    if (w1 < w0)
        w1 = w0;
    c.t = w0;
    c.w1 = w1;

    kept_lineage (job, atts, n, kept, steps);

    /* Walk the timeline once; each stretch goes to exactly one part. */
    for (int i = 0; i < n; i++) {
        const struct report_attempt *a = &atts[i];
        bool chain_start = i == 0 || a->resubmitted;
        int64_t stop = a->fail > 0 ? a->fail : a->end > 0 ? a->end : now;

        seg (&c, i == 0 ? P_QUEUE : a->resubmitted ? P_IDLE : P_RESTART, a->submit);
        c.apart = apart[i];
        seg (&c, P_QUEUE, a->leave_queue > 0 ? a->leave_queue : stop);
        if (i == 0)
            first_queue = apart[i][P_QUEUE];
        enum part sp = chain_start ? P_STARTUP : P_RESTART;
        if (a->last_step_time > 0 && steps[i] > 0) {
            seg_training (&c, a, sp, apart[i], kept[i], steps[i], now);
        }
        else if (a->live)
            seg (&c, sp, now);
        else
            seg (&c, sp, stop);
        c.apart = NULL;
    }
    /* The tail: a restart under way, or the end of the final attempt. */
    seg (&c, job->live_restart ? P_RESTART : P_SHUTDOWN, w1);

    double wall = (double)(w1 - w0), sum = 0;
    json_t *bd = json_object ();
    for (int p = 0; p < P_COUNT; p++) {
        sum += c.part[p];
        json_object_set_new (bd, part_names[p], json_real (c.part[p] / 1000.0));
    }
    json_object_set_new (bd, "unaccounted_s", json_real ((wall - sum) / 1000.0));
    double since_start = wall - first_queue - c.part[P_IDLE];

    /* Failures, attempts, step times, throughput. */
    json_t *by_cause = json_object (), *by_node = json_object (), *flist = json_array ();
    json_t *alist = json_array ();
    int nfail = 0;
    int64_t kept_steps = 0, lost_steps = 0, reached = -1;
    double train_ms = 0, samples_done = 0, kept_samples = 0;
    for (int i = 0; i < n; i++) {
        const struct report_attempt *a = &atts[i];
        int64_t next_resume =
          i + 1 < n ? (atts[i + 1].resume_step > 0 ? atts[i + 1].resume_step : 0) : -1;
        kept_steps += kept[i];
        lost_steps += steps[i] - kept[i];
        if (a->last_step > reached)
            reached = a->last_step;
        if (a->failed) {
            nfail++;
            count_add (by_cause, a->cause);
            if (a->node && *a->node)
                count_add (by_node, a->node);
            json_array_append_new (flist, failure_json (a, next_resume));
        }
        double tr = apart[i][P_KEPT] + apart[i][P_LOST];
        train_ms += tr;
        if (a->batch_samples > 0) {
            samples_done += (double)a->batch_samples * steps[i];
            kept_samples += (double)a->batch_samples * kept[i];
        }
        json_t *aj = attempt_json (a, apart[i], kept[i], steps[i]);
        if (aj)
            json_object_set_new (
              aj, "recovery_s",
              num_or_null (report_recovery_ms (i > 0 ? &atts[i - 1] : NULL, a) / 1000.0));
        json_array_append_new (alist, aj);
    }
    double ettr = since_start > 0 ? c.part[P_KEPT] / since_start : NAN;
    out = json_pack (
      "{s:I s:s s:s s:b s:o s:o s:f s:f s:o s:o s:I s:I s:o s:o s:o s:o}", "job",
      (json_int_t)job->id, "name", job->name ? job->name : "", "state", job->state,
      "final", job->final, "submit_time", time_or_null (w0), "end_time",
      time_or_null (job->end), "wall_s", wall / 1000.0, "wall_since_start_s",
      since_start / 1000.0, "ettr", num_or_null (ettr), "breakdown", bd, "kept_steps",
      (json_int_t)kept_steps, "lost_steps", (json_int_t)lost_steps, "steps_reached",
      reached >= 0 ? json_integer (reached) : json_null (), "throughput",
      json_pack ("{s:o s:o}", "samples_per_s",
                 num_or_null (train_ms > 0 ? samples_done * 1000.0 / train_ms : NAN),
                 "goodput_samples_per_s",
                 num_or_null (since_start > 0 && kept_samples > 0
                                ? kept_samples * 1000.0 / since_start
                                : NAN)),
      "failures",
      json_pack ("{s:i s:o s:o s:o s:o}", "count", nfail, "mtbf_s",
                 nfail > 0 ? json_real (since_start / 1000.0 / nfail) : json_null (),
                 "by_cause", by_cause, "by_node", by_node, "list", flist),
      "attempts", alist);
    if (out)
        tail_sections (out, atts, n, apart);
done:
    free (apart);
    free (kept);
    free (steps);
    return out;
}

/* --- gathering the facts ----------------------------------------------------------- */

/* The facts of attempt 'number' of job 'id' for the accounting, into *r:
 * its row 'a', heartbeat facts (kept in *g, which *r points into), its
 * events, and the job's result.  0, or -1 with err. */
static int attempt_facts (struct report *rp, int64_t id, int number,
                          const struct store_attempt_row *a, const json_t *result,
                          struct gstat *g, struct report_attempt *r, dt_error_t *err)
{
    /* Heartbeat facts: the live copy if any, else the stored one. */
    struct gstat *lg = NULL;
    for (lg = rp->list; lg; lg = lg->next)
        if (lg->job == id && lg->attempt == number)
            break;
    if (lg)
        *g = *lg;
    else {
        gstat_init (g, id, number);
        if (gstat_load (rp, g, err) < 0)
            return -1;
    }
    r->attempt = number;
    r->state = fsm_attempt_state_name (a->state);
    r->cause = a->cause;
    r->node = a->cause_node;
    r->rank = a->cause_rank;
    /* An ending attempt with a failure recorded (not a cancel) ends
     * failed: a success records none, and nothing is recorded over a
     * cancel or another failure once an attempt is ending. */
    r->failed = a->fail_time > 0 && strcmp (a->cause, "cancelled") &&
                (a->state == ATT_FAILED || a->state == ATT_ENDING);
    r->live =
      a->state == ATT_SUBMITTED || a->state == ATT_STARTING || a->state == ATT_RUNNING;
    r->submit = a->submit_time;
    struct store_attempt_timeline tl;
    if (store_attempt_timeline (rp->store, id, number, &tl, err) < 0)
        return -1;
    /* Left the queue: became starting (the allocation began). */
    r->leave_queue = tl.left_queue > 0 ? tl.left_queue : a->start_time;
    r->end = a->end_time;
    r->fail = a->fail_time;
    r->resume_step = a->resume_step;
    /* Created by a manual resubmission (the job went back to pending). */
    r->resubmitted = tl.resubmitted;
    r->train_start = g->train_start;
    r->first_step = g->first_step;
    r->first_step_time = g->first_step_time;
    r->last_step = g->last_step;
    r->last_step_time = g->last_step_time;
    r->hb_samples = g->hb_samples;
    r->busy_samples = g->busy_samples;
    r->step_samples = g->step_samples;
    r->batch_samples = g->batch_samples;
    r->step_ms_sum = g->step_ms_sum;
    r->hist = g->hist;
    r->stall_reported_s = NAN;
    r->restart_path = a->restart_path;
    r->running = a->start_time;
    r->tp = a->tp;
    r->pp = a->pp;
    r->world_size = a->world_size;
    r->dims_sum = g->dims_sum;
    r->dims_steps = g->dims_steps;
    /* The trainer's own figure, when the attempt that ran to the end
     * reported one (dttrain: ckpt_stall_s). */
    json_t *st = json_object_get (result, "ckpt_stall_s");
    if (a->state == ATT_SUCCEEDED && json_is_number (st))
        r->stall_reported_s = json_number_value (st);
    /* The last steps of a successful attempt may finish after its last
     * heartbeat: the trainer's result says how many there were, and its
     * event when they were done (dttrain's wall_s: when they began). */
    int64_t rt = tl.result_time;
    json_t *rs = json_object_get (result, "steps");
    if (rt > 0 && json_is_integer (rs) && json_integer_value (rs) > r->last_step &&
        a->state != ATT_FAILED) {
        double w = json_number_value (json_object_get (result, "wall_s"));
        r->last_step = json_integer_value (rs);
        if (rt > r->last_step_time)
            r->last_step_time = rt;
        if (r->train_start == 0 && w > 0)
            r->train_start = rt - (int64_t)(w * 1000);
        /* An attempt that trained entirely between two heartbeats: its
         * first step ended one mean step time after training began. */
        if (r->first_step < 0) {
            int64_t from = r->resume_step > 0 ? r->resume_step : 0;
            int64_t n = r->last_step - from;
            r->first_step = from + 1;
            if (r->train_start > 0 && n > 0)
                r->first_step_time = r->train_start + (int64_t)(w * 1000 / n);
        }
    }
    return 0;
}

/* The job's silent-error events (jobs/integrity.c), oldest first: what
 * was detected, the rollbacks, the attributions, the checkpoints found
 * bad.  New array (empty when none or on error). */
static json_t *integrity_events (struct report *rp, int64_t id)
{
    static const char *const kinds[] = {
        "replica_divergence",   "nonfinite",      "loss_spike", "integrity_rollback",
        "integrity_attributed", "checkpoint_bad", NULL
    };
    dt_error_t err;
    json_t *all = store_events_json (rp->store, id, 0, 100000, &err),
           *out = json_array ();
    json_t *e;
    size_t i;
    json_array_foreach (all, i, e)
    {
        const char *k = json_string_value (json_object_get (e, "kind"));
        for (int j = 0; k && kinds[j]; j++)
            if (!strcmp (k, kinds[j])) {
                json_t *c = json_deep_copy (e);
                json_object_del (c, "job");
                json_array_append_new (out, c);
            }
    }
    json_decref (all);
    return out;
}

json_t *report_job_json (struct report *rp, int64_t id, dt_error_t *err)
{
    struct store_job_row jr;
    struct store_attempt_row *ar = NULL;
    struct report_attempt *ra = NULL;
    struct gstat *gs = NULL;
    json_t *out = NULL;
    int64_t now = dt_real_ms ();
    int n = 0;

    if (store_job_load (rp->store, id, &jr, err) < 0)
        return NULL;
    int na = jr.attempts;
    if (!(ar = calloc (na > 0 ? na : 1, sizeof (*ar))) ||
        !(ra = calloc (na > 0 ? na : 1, sizeof (*ra))) ||
        !(gs = calloc (na > 0 ? na : 1, sizeof (*gs)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < na; i++) {
        int number = i + 1;
        if (store_attempt_load (rp->store, id, number, &ar[i], err) < 0)
            goto done;
        n++;
        const struct store_attempt_row *a = &ar[i];
        struct report_attempt *r = &ra[i];
        struct gstat *g = &gs[i];

        if (attempt_facts (rp, id, number, a, jr.result, g, r, err) < 0)
            goto done;
        r->zero1 =
          json_is_true (json_object_get (json_object_get (jr.spec, "parallel"), "zero1"));
    }
    {
        int64_t step = -1;
        char dir[1024], sha[65];
        if (store_ckpt_latest (rp->store, id, &step, dir, sizeof (dir), sha, sizeof (sha),
                               err) < 0)
            goto done;
        const char *state = fsm_job_state_name (jr.state);
        struct report_job rj = {
            .id = id,
            .name = jr.name,
            .state = state,
            .final = fsm_job_terminal (jr.state) &&
                     (na == 0 || fsm_attempt_terminal (ar[na - 1].state)),
            .live_restart = jr.state == JOB_RESTARTING,
            .submit = jr.submit_time,
            .end = fsm_job_terminal (jr.state) ? jr.end_time : 0,
            .latest_ckpt_step = step,
        };
        /* The resubmission that brought the job back resets its end. */
        if (!(out = report_compute (&rj, ra, n, now)))
            errnoprintf (err, ENOMEM, "out of memory");
        else {
            json_object_set_new (out, "time", time_or_null (now));
            json_object_set_new (out, "integrity", integrity_events (rp, id));
            json_t *tps = json_object_get (jr.result, "tokens_per_s");
            if (json_is_number (tps))
                json_object_set (json_object_get (out, "throughput"), "tokens_per_s",
                                 tps);
        }
    }
done:
    for (int i = 0; i < n; i++)
        store_attempt_row_clear (&ar[i]);
    store_job_row_clear (&jr);
    free (ar);
    free (ra);
    free (gs);
    return out;
}

/* --- Prometheus ------------------------------------------------------------- */

static int appendf (char **buf, size_t *len, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
static int appendf (char **buf, size_t *len, const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;
    va_start (ap, fmt);
    n = vasprintf (&s, fmt, ap);
    va_end (ap);
    if (n < 0)
        return -1;
    char *p = realloc (*buf, *len + n + 1);
    if (!p) {
        free (s);
        return -1;
    }
    memcpy (p + *len, s, n + 1);
    *buf = p;
    *len += n;
    free (s);
    return 0;
}

char *report_prometheus (struct report *rp, dt_error_t *err)
{
    static const struct {
        const char *name, *help, *key;
    } gauges[] = {
        { "dtctld_job_ettr",
          "Effective training time ratio of a job not ended (kept "
          "training time / wall time since its first start).",
          "ettr" },
        { "dtctld_job_lost_steps",
          "Training steps recomputed after rollbacks, per job not "
          "ended.",
          "lost_steps" },
        { "dtctld_job_kept_training_seconds", "Kept training time, per job not ended.",
          "breakdown.kept_training_s" },
        { "dtctld_job_wall_seconds", "Wall time since submission, per job not ended.",
          "wall_s" },
    };
    const size_t ng = sizeof (gauges) / sizeof (gauges[0]);
    int64_t *ids = NULL;
    int n = 0;
    json_t **reps;
    char *buf = NULL;
    size_t len = 0;

    if (store_live_jobs (rp->store, &ids, &n, err) < 0)
        return NULL;
    if (!(reps = calloc (n > 0 ? n : 1, sizeof (*reps)))) {
        free (ids);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        reps[i] = report_job_json (rp, ids[i], err);
    buf = strdup ("");
    for (size_t k = 0; buf && k < ng; k++) {
        if (appendf (&buf, &len, "# HELP %s %s\n# TYPE %s gauge\n", gauges[k].name,
                     gauges[k].help, gauges[k].name) < 0)
            goto oom;
        for (int i = 0; i < n; i++) {
            json_t *v = reps[i];
            if (!v)
                continue;
            if (!strncmp (gauges[k].key, "breakdown.", 10))
                v =
                  json_object_get (json_object_get (v, "breakdown"), gauges[k].key + 10);
            else
                v = json_object_get (v, gauges[k].key);
            if (!json_is_number (v))
                continue;
            if (appendf (&buf, &len, "%s{job=\"%lld\"} %.6g\n", gauges[k].name,
                         (long long)ids[i], json_number_value (v)) < 0)
                goto oom;
        }
    }
    if (!buf)
        goto oom;
    goto done;
oom:
    free (buf);
    buf = NULL;
    errnoprintf (err, ENOMEM, "out of memory");
done:
    for (int i = 0; i < n; i++)
        json_decref (reps[i]);
    free (reps);
    free (ids);
    return buf;
}
