/* api.h: the user-facing routes of dtctld (schemas/openapi.json): jobs,
 * nodes, /metrics, /healthz. */
#ifndef DT_API_H
#define DT_API_H

#include "common/errprintf.h"

struct ctld;

/* Register the user routes on ctx->httpd. */
int api_register_routes (struct ctld *ctx, dt_error_t *err);

/* Between requests (the controller's tick): build again the kept views of
 * huge jobs that were served since they were built and are older than
 * their keep time, so that no request waits for such a build. */
void api_tick (struct ctld *ctx);

#endif
