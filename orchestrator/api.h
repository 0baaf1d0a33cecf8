/* api.h: the user-facing routes of dtctld (schemas/openapi.json): jobs,
 * nodes, /metrics, /healthz. */
#ifndef DT_API_H
#define DT_API_H

#include "common/errprintf.h"

struct ctld;

/* Register the user routes on ctx->httpd. */
int api_register_routes (struct ctld *ctx, dt_error_t *err);

#endif
