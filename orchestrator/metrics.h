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

/* The exposition text (new string, caller frees), or NULL with err. */
char *metrics_render (struct metrics *m, dt_error_t *err);

#endif
