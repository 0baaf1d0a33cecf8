/* metrics.c: Prometheus text format 0.0.4 for /metrics. */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "orchestrator/ctld.h"
#include "orchestrator/fsm.h"
#include "orchestrator/jobs.h"
#include "orchestrator/metrics.h"
#include "orchestrator/report.h"

/* Heartbeat handling is meant to take well under a millisecond. */
static const double hb_buckets[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                     0.005,  0.01,    0.025,  0.1 };
#define NBUCKETS (sizeof (hb_buckets) / sizeof (hb_buckets[0]))

struct metrics {
    struct ctld *ctx;
    uint64_t hb_count;
    double hb_sum;
    uint64_t hb_bucket[NBUCKETS];
    int64_t start_ms;
    uint64_t refused[REFUSED_COUNT];
};

/* Label values of dtctld_requests_refused_total, by enum metrics_refusal. */
static const char *const refusal_names[REFUSED_COUNT] = {
    "unauthenticated", "listener",   "MaxJobsPerUser",
    "MaxJobCount",     "MaxKvBytes", "MaxEventsPerJob",
};

struct metrics *metrics_create (struct ctld *ctx, dt_error_t *err)
{
    struct metrics *m = calloc (1, sizeof (*m));
    if (!m) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    m->ctx = ctx;
    m->start_ms = dt_real_ms ();
    return m;
}

void metrics_destroy (struct metrics *m)
{
    free (m);
}

void metrics_heartbeat (struct metrics *m, double seconds)
{
    m->hb_count++;
    m->hb_sum += seconds;
    for (size_t i = 0; i < NBUCKETS; i++)
        if (seconds <= hb_buckets[i])
            m->hb_bucket[i]++;
}

void metrics_refused (struct metrics *m, enum metrics_refusal why)
{
    if (m && why >= 0 && why < REFUSED_COUNT)
        m->refused[why]++;
}

struct buf {
    char *s;
    size_t len, cap;
    bool oom;
};

static void put (struct buf *b, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
static void put (struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (b->oom)
        return;
    for (;;) {
        va_start (ap, fmt);
        n = vsnprintf (b->s + b->len, b->cap - b->len, fmt, ap);
        va_end (ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += n;
            return;
        }
        size_t cap = b->cap * 2 + n + 64;
        char *p = realloc (b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
}

static void head (struct buf *b, const char *name, const char *type, const char *help)
{
    put (b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *metrics_render (struct metrics *m, dt_error_t *err)
{
    struct buf b = { 0 };
    struct jobs_stats js;
    json_t *counts = store_counts_json (m->ctx->store, err);
    json_t *o, *v;
    const char *k;

    if (!counts)
        return NULL;
    if (!(b.s = malloc (b.cap = 4096))) {
        json_decref (counts);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    b.s[0] = '\0';
    jobs_stats (m->ctx->jobs, &js);

    head (&b, "dtctld_jobs", "gauge", "Jobs in the database by state.");
    o = json_object_get (counts, "jobs");
    for (int s = 0; s < JOB_STATE_COUNT; s++) {
        const char *name = fsm_job_state_name (s);
        put (&b, "dtctld_jobs{state=\"%s\"} %lld\n", name,
             (long long)json_integer_value (json_object_get (o, name)));
    }
    head (&b, "dtctld_attempts", "gauge", "Attempts in the database by state.");
    o = json_object_get (counts, "attempts");
    for (int s = 0; s < ATT_STATE_COUNT; s++) {
        const char *name = fsm_attempt_state_name (s);
        put (&b, "dtctld_attempts{state=\"%s\"} %lld\n", name,
             (long long)json_integer_value (json_object_get (o, name)));
    }
    head (&b, "dtctld_attempt_failures", "gauge",
          "Failed attempts in the database by cause.");
    o = json_object_get (counts, "failures");
    json_object_foreach (o, k, v)
    {
        /* causes are our own words ([a-z_]); never user text */
        put (&b, "dtctld_attempt_failures{cause=\"%s\"} %lld\n", k,
             (long long)json_integer_value (v));
    }
    head (&b, "dtctld_config_reloads_total", "counter",
          "SIGHUP reloads since this dtctld started: taken, or refused (the old "
          "configuration kept).");
    put (&b, "dtctld_config_reloads_total{result=\"taken\"} %llu\n",
         (unsigned long long)m->ctx->reloads[0]);
    put (&b, "dtctld_config_reloads_total{result=\"refused\"} %llu\n",
         (unsigned long long)m->ctx->reloads[1]);
    head (&b, "dtctld_restarts_total", "counter",
          "Automatic restarts since this dtctld started.");
    put (&b, "dtctld_restarts_total %llu\n", (unsigned long long)js.restarts);
    /* integrity detections, by event kind (jobs/integritypolicy.h) */
    static const char *const integ_kinds[] = { "replica_divergence", "nonfinite",
                                               "loss_spike" };
    head (&b, "dtctld_integrity_detections_total", "counter",
          "Silent errors detected since this dtctld started, by kind.");
    for (int i = 0; i < 3; i++)
        put (&b, "dtctld_integrity_detections_total{kind=\"%s\"} %llu\n", integ_kinds[i],
             (unsigned long long)js.integ_events[i]);
    head (&b, "dtctld_integrity_rollbacks_total", "counter",
          "Rollbacks after silent errors since this dtctld started.");
    put (&b, "dtctld_integrity_rollbacks_total %llu\n",
         (unsigned long long)js.integ_rollbacks);
    head (&b, "dtctld_checkpoints_committed", "gauge",
          "Committed checkpoints in the database.");
    put (
      &b, "dtctld_checkpoints_committed %lld\n",
      (long long)json_integer_value (json_object_get (counts, "checkpoints_committed")));
    head (&b, "dtctld_live_attempts", "gauge", "Attempts being supervised.");
    put (&b, "dtctld_live_attempts %d\n", js.live_attempts);
    head (&b, "dtctld_heartbeats_received_total", "counter",
          "Agent heartbeats handled since this dtctld started.");
    put (&b, "dtctld_heartbeats_received_total %llu\n", (unsigned long long)m->hb_count);
    head (&b, "dtctld_heartbeat_handling_seconds", "histogram",
          "Time to handle one agent heartbeat.");
    for (size_t i = 0; i < NBUCKETS; i++)
        put (&b, "dtctld_heartbeat_handling_seconds_bucket{le=\"%g\"} %llu\n",
             hb_buckets[i], (unsigned long long)m->hb_bucket[i]);
    put (&b, "dtctld_heartbeat_handling_seconds_bucket{le=\"+Inf\"} %llu\n",
         (unsigned long long)m->hb_count);
    put (&b, "dtctld_heartbeat_handling_seconds_sum %.9f\n", m->hb_sum);
    put (&b, "dtctld_heartbeat_handling_seconds_count %llu\n",
         (unsigned long long)m->hb_count);
    head (&b, "dtctld_requests_refused_total", "counter",
          "Requests refused on their headers or by a quota, by reason, since this dtctld "
          "started.");
    for (int i = 0; i < REFUSED_COUNT; i++)
        put (&b, "dtctld_requests_refused_total{reason=\"%s\"} %llu\n", refusal_names[i],
             (unsigned long long)m->refused[i]);
    head (&b, "dtctld_http_requests_cut_total", "counter",
          "Connections closed because their request ran past RequestTimeout.");
    put (&b, "dtctld_http_requests_cut_total %llu\n",
         (unsigned long long)(m->ctx->httpd ? dt_httpd_cut_count (m->ctx->httpd) : 0));
    head (&b, "dtctld_start_time_seconds", "gauge",
          "When this dtctld started (Unix time).");
    put (&b, "dtctld_start_time_seconds %.3f\n", m->start_ms / 1000.0);
    /* Goodput of the jobs not ended (report.c), and their communication
     * share: series labelled by job, only with MetricsPerJob=yes (anyone
     * may read /metrics). */
    bool per_job = m->ctx->cfg->metrics_per_job;
    char *goodput =
      per_job && m->ctx->report ? report_prometheus (m->ctx->report, err) : NULL;
    if (goodput) {
        put (&b, "%s", goodput);
        free (goodput);
    }
    char *comm = per_job ? jobs_comm_metrics_text (m->ctx->jobs) : NULL;
    if (comm) {
        put (&b, "%s", comm);
        free (comm);
    }
    json_decref (counts);
    if (b.oom) {
        free (b.s);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    return b.s;
}
