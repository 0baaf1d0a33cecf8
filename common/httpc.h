/* httpc.h: HTTP/JSON client over libcurl, for the CLI and the agent.
 *
 * Keeps one connection alive between calls.  Connection failures and 502/
 * 503/504 answers are retried with capped exponential backoff and jitter, up
 * to 'retries' times; other answers (including 4xx) are returned as they are.
 */
#ifndef DT_HTTPC_H
#define DT_HTTPC_H

#include <stddef.h>
#include <jansson.h>
#include "common/errprintf.h"

typedef struct dt_httpc dt_httpc_t;

struct dt_httpc_opts {
    int connect_timeout_ms; /* default 2000 */
    int total_timeout_ms;   /* default 10000 */
    int retries;            /* default 3; 0 = one try */
    int backoff_ms;         /* first backoff, default 100, doubling */
    int backoff_max_ms;     /* cap, default 2000 */
};

/* base_url like "http://127.0.0.1:6830" (no trailing slash needed).
 * opts may be NULL for defaults.  Returns new client or NULL. */
dt_httpc_t *dt_httpc_create (const char *base_url, const struct dt_httpc_opts *opts,
                             dt_error_t *err);
void dt_httpc_destroy (dt_httpc_t *c);

/* Add a header sent with every request ("Authorization: Bearer ..."). */
int dt_httpc_set_header (dt_httpc_t *c, const char *header);
/* Forget every header added by dt_httpc_set_header. */
void dt_httpc_clear_headers (dt_httpc_t *c);

/* Send 'method' to base_url + path with body 'body' (borrowed, may be NULL)
 * as JSON.  On a completed exchange returns 0, *status = HTTP status and
 * *reply = the parsed envelope (new reference, NULL if the body was not
 * JSON).  Transport failure after all retries: -1, err says why
 * ("connect to http://...: Connection refused"). */
int dt_httpc_json (dt_httpc_t *c, const char *method, const char *path,
                   const json_t *body, long *status, json_t **reply, dt_error_t *err);

/* Same with raw bodies; *reply_body is malloc'ed (caller frees). */
int dt_httpc_raw (dt_httpc_t *c, const char *method, const char *path, const char *body,
                  size_t body_len, const char *content_type, long *status,
                  char **reply_body, size_t *reply_len, dt_error_t *err);

/* Text of the first error of an envelope ("errors":[{"error":...}]) or
 * NULL; borrowed from 'reply'. */
const char *dt_httpc_envelope_error (const json_t *reply);

#endif
