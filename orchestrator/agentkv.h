/* agentkv.h: the attempt's key-value store routes of the agents' API
 * (agentkv.c), authenticated by the attempt's token. */
#ifndef DT_AGENTKV_H
#define DT_AGENTKV_H

#include "common/errprintf.h"

struct ctld;

/* Register PUT and GET /v1/agent/kv/KEY (keys of 1 to 12 segments). */
int agentkv_register_routes (struct ctld *ctx, dt_error_t *err);

#endif
