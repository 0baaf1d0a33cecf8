/* agentapi.h: the controller side of schemas/agent-api.md: register
 * (rendezvous), heartbeat (with commands in the answer), events, and the
 * per-attempt key-value store.  Authenticated by the attempt's token. */
#ifndef DT_AGENTAPI_H
#define DT_AGENTAPI_H

#include "common/errprintf.h"
#include "common/httpd.h"
#include <jansson.h>

struct ctld;
struct attempt;
struct agent;
struct hb_msg;

/* Register the /v1/agent/... routes on ctx->httpd. */
int agentapi_register_routes (struct ctld *ctx, dt_error_t *err);

/* The live attempt of the request's bearer token (borrowed), or NULL
 * after answering 401 (unknown token) or 410 (the attempt has ended). */
struct attempt *agentapi_auth (struct ctld *ctx, dt_http_req_t *req);

/* Apply one node's heartbeat, decoded and validated in full (hb_parse),
 * to the live state of its attempt: its ranks, the node's last heartbeat
 * time, the progress pass.  Used for direct and relayed heartbeats. */
void agentapi_heartbeat_apply (struct ctld *ctx, struct attempt *att, struct agent *ag,
                               const struct hb_msg *m);

/* The request's body as a JSON object (new reference), or NULL after
 * answering 400; and an error answer naming the field of an error text
 * "FIELD: ..." (shared by the agents' routes). */
json_t *agentapi_body_json (dt_http_req_t *req);
void agentapi_reply_field_error (dt_http_req_t *req, int status, const dt_error_t *err);

#endif
