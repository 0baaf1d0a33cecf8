/* relayapi.h: relayed heartbeats (POST /v1/agent/relay): one request
 * carries the heartbeats of many nodes of one attempt, as a relay of the
 * fan-in tree forwards them (schemas/agent-api.md, "Fan-in tree"). */
#ifndef DT_RELAYAPI_H
#define DT_RELAYAPI_H

#include "common/errprintf.h"

struct ctld;

/* Register the relay route on ctx->httpd. */
int relayapi_register_routes (struct ctld *ctx, dt_error_t *err);

#endif
