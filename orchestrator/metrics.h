/* metrics.h: counters and the Prometheus text exposition (/metrics). */
#ifndef DT_METRICS_H
#define DT_METRICS_H

#include "common/errprintf.h"

struct ctld;
struct metrics;

struct metrics *metrics_create (struct ctld *ctx, dt_error_t *err);
void metrics_destroy (struct metrics *m);

/* One heartbeat handled in 'seconds'. */
void metrics_heartbeat (struct metrics *m, double seconds);

/* Why a request was refused before its handler (gate.c) or by a quota. */
enum metrics_refusal {
    REFUSED_UNAUTHENTICATED, /* no valid credential or agent token */
    REFUSED_LISTENER,        /* a user request on the agents' listener */
    REFUSED_MAX_JOBS_PER_USER,
    REFUSED_MAX_JOB_COUNT,
    REFUSED_MAX_KV_BYTES,
    REFUSED_MAX_EVENTS_PER_JOB,
    REFUSED_COUNT
};
void metrics_refused (struct metrics *m, enum metrics_refusal why);

/* The exposition text (new string, caller frees), or NULL with err. */
char *metrics_render (struct metrics *m, dt_error_t *err);

#endif
