/* allocapi.h: POST /v1/alloc/next, asked by the batch script of a Slurm
 * allocation what to run next (in-allocation restart, issue 7). */
#ifndef DT_ALLOCAPI_H
#define DT_ALLOCAPI_H

#include "common/errprintf.h"

struct ctld;

/* Register the route; -1 with err. */
int allocapi_register_routes (struct ctld *ctx, dt_error_t *err);

#endif
