/* allocapi.h: POST /v1/alloc/next, asked by an allocation that outlives
 * its attempts (the Slurm launcher's batch script) what to run next
 * (in-allocation restart). */
#ifndef DT_ALLOCAPI_H
#define DT_ALLOCAPI_H

#include "common/errprintf.h"

struct ctld;

/* Register the route; -1 with err. */
int allocapi_register_routes (struct ctld *ctx, dt_error_t *err);

#endif
