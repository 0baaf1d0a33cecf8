/* httpd.h: HTTP/JSON server over libmicrohttpd.
 *
 * Single-threaded: the server is driven from the owner's event loop
 * (dt_httpd_fd / dt_httpd_timeout_ms / dt_httpd_run), so handlers run on
 * the owner's thread and need no locks.  Routes are "METHOD /path/{param}".
 * A path that matches no route answers 404; a path that matches with another
 * method answers 405; a body above max_body answers 413.  Every JSON answer
 * uses one envelope: {"data": ..., "errors": [...], "warnings": [...]}, where
 * each error is {"error": "text"} (and "field" when one field is at fault).
 * One access-log line is written per request (dt_log, LOG_INFO).
 */
#ifndef DT_HTTPD_H
#define DT_HTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "common/errprintf.h"

typedef struct dt_httpd dt_httpd_t;
typedef struct dt_http_req dt_http_req_t;

/* A request handler.  It must answer exactly once with one of the
 * dt_http_reply_* calls (a handler that returns without answering yields
 * 500). */
typedef void (*dt_http_handler_f) (dt_http_req_t *req, void *arg);

/* Listen on addr:port (port 0 picks a free one, see dt_httpd_port).
 * max_body in bytes.  NULL with err on failure (port taken: EADDRINUSE). */
dt_httpd_t *dt_httpd_create (const char *addr, int port, size_t max_body, dt_error_t *err);
void dt_httpd_destroy (dt_httpd_t *h);

int dt_httpd_port (const dt_httpd_t *h);

/* Register a route, e.g. ("GET", "/v1/jobs/{id}/events").  Up to 12 params
 * (dtctld's kv routes take keys of many segments, e.g. dttrain/J/aN/sS/rank_R). */
int dt_httpd_route (dt_httpd_t *h, const char *method, const char *pattern,
                    dt_http_handler_f cb, void *arg);

/* Event-loop integration: poll dt_httpd_fd for POLLIN with a timeout of at
 * most dt_httpd_timeout_ms (-1: none), then call dt_httpd_run. */
int dt_httpd_fd (const dt_httpd_t *h);
int dt_httpd_timeout_ms (const dt_httpd_t *h);
int dt_httpd_run (dt_httpd_t *h);

/* Request accessors; all strings borrowed, valid until the reply. */
const char *dt_http_req_method (const dt_http_req_t *req);
const char *dt_http_req_path (const dt_http_req_t *req);
const char *dt_http_req_param (const dt_http_req_t *req, const char *name);   /* {name} */
const char *dt_http_req_query (const dt_http_req_t *req, const char *name);   /* ?name= */
const char *dt_http_req_header (const dt_http_req_t *req, const char *name);
const char *dt_http_req_body (const dt_http_req_t *req, size_t *len);        /* NUL-terminated */
const char *dt_http_req_peer (const dt_http_req_t *req);                     /* "127.0.0.1" */

/* Answers.  dt_http_reply_json steals 'data' (may be NULL -> null).
 * Warnings added before the reply go into the envelope. */
void dt_http_add_warning (dt_http_req_t *req, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
void dt_http_reply_json (dt_http_req_t *req, int status, json_t *data);
/* The same envelope around 'data', a JSON text already serialized (len
 * bytes, borrowed, copied): for hot routes that build their answer without
 * a JSON tree.  The caller vouches that it is valid JSON. */
void dt_http_reply_json_text (dt_http_req_t *req, int status, const char *data, size_t len);
/* Error envelope with data null; 'field' may be NULL. */
void dt_http_reply_error (dt_http_req_t *req, int status, const char *field,
                          const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
/* A non-JSON body (e.g. Prometheus text); body is copied. */
void dt_http_reply_text (dt_http_req_t *req, int status, const char *content_type,
                         const char *body, size_t len);

#endif
