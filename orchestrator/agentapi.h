/* agentapi.h: the controller side of schemas/agent-api.md: register
 * (rendezvous), heartbeat (with commands in the answer), events, and the
 * per-attempt key-value store.  Authenticated by the attempt's token. */
#ifndef DT_AGENTAPI_H
#define DT_AGENTAPI_H

#include "common/errprintf.h"

struct ctld;

/* Register the /v1/agent/... routes on ctx->httpd. */
int agentapi_register_routes (struct ctld *ctx, dt_error_t *err);

#endif
