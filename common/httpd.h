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
 *
 * Denial of service: each listener has its own connection limit and an
 * optional limit per client address; an optional gate (dt_httpd_set_gate)
 * refuses requests at header time, before their body is buffered; all
 * bodies buffered at once share one budget; a request that takes longer
 * than the absolute request timeout (however slowly its bytes dribble in)
 * has its connection cut.  One dt_httpd_run handles requests for about
 * 50 ms; requests still ready then wait (suspended) for the next run, so
 * that a burst (10,000 agents registering at once) does not hold up the
 * owner's loop for seconds.
 */
#ifndef DT_HTTPD_H
#define DT_HTTPD_H

#include <stdbool.h>
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

/* Limits shared by every listener of a server. */
struct dt_httpd_conf {
    size_t max_body;    /* bytes of one request body (else 413) */
    size_t body_budget; /* bytes of all bodies buffered at once (else 503); 0 none */
    unsigned int idle_timeout_s; /* idle keep-alive connections; 0: 300 s */
    int64_t request_timeout_ms;  /* absolute: from accept, or from a request line on a
                                  * kept-alive connection, to the end of its answer;
                                  * a connection past it is cut.  0 none */
};

/* One listening socket.  'cls' is the class of its connections, which the
 * gate reads (dt_http_req_class): e.g. users and agents on two ports, so
 * that one class cannot use up the other's connections. */
struct dt_httpd_listen {
    const char *addr; /* NULL: 0.0.0.0 */
    int port;         /* 0: a free one */
    int cls;
    unsigned int max_connections; /* 0: 20000 */
    unsigned int per_address;     /* connections from one address (more are closed at
                                   * accept); 0 none */
};

/* A server with no listener yet.  NULL with err on failure. */
dt_httpd_t *dt_httpd_new (const struct dt_httpd_conf *conf, dt_error_t *err);
/* Add a listener; returns its index (0 for the first), or -1 with err
 * (port taken: EADDRINUSE). */
int dt_httpd_listen (dt_httpd_t *h, const struct dt_httpd_listen *l, dt_error_t *err);

/* dt_httpd_new plus one listener of class 0 on addr:port (port 0 picks a
 * free one, see dt_httpd_port).  max_body in bytes.  NULL with err on
 * failure (port taken: EADDRINUSE). */
dt_httpd_t *dt_httpd_create (const char *addr, int port, size_t max_body,
                             dt_error_t *err);
void dt_httpd_destroy (dt_httpd_t *h);

/* The port of listener 0 / of listener 'idx' (-1 if none). */
int dt_httpd_port (const dt_httpd_t *h);
int dt_httpd_listener_port (const dt_httpd_t *h, int idx);
/* Connections cut so far at the request timeout. */
uint64_t dt_httpd_cut_count (const dt_httpd_t *h);
/* Requests refused so far because their listener was at its connection
 * limit.  A server raises RLIMIT_NOFILE at creation (to the hard limit;
 * as root, the hard limit to fs.nr_open first) and logs it; each listener
 * gets what it asks for out of that, less a reserve.  Near its limit (its
 * last 1%) a listener answers every request 503 with "Retry-After: 1" and
 * "Connection: close", so a client learns why, instead of seeing its
 * connection closed unanswered. */
uint64_t dt_httpd_refused_count (const dt_httpd_t *h);
/* More than half of the descriptors for connections are in use: a handler
 * may then close connections it does not need kept (dt_http_req_close). */
bool dt_httpd_crowded (const dt_httpd_t *h);
/* The syslog level of the access log's lines (default LOG_INFO). */
void dt_httpd_set_access_log (dt_httpd_t *h, int level);
/* Close the request's connection after its answer ("Connection: close"):
 * for a client that will not need it soon, when the server is crowded.
 * Call before the reply. */
void dt_http_req_close (dt_http_req_t *req);

/* A handler may tag its request's connection (e.g. with the client's
 * node name, copied, up to 63 bytes; a later tag replaces it); returns
 * true when the connection had no tag yet.  When a tagged connection
 * closes, for whatever reason (the client closed it, its kernel reset it
 * because the client's process died, it was cut or timed out), the close
 * callback runs with the tag, on the owner's thread, inside dt_httpd_run
 * (never inside dt_httpd_destroy).  NULL: none. */
typedef void (*dt_httpd_close_f) (const char *tag, void *arg);
void dt_httpd_set_close_cb (dt_httpd_t *h, dt_httpd_close_f cb, void *arg);
bool dt_http_req_tag (dt_http_req_t *req, const char *tag);

/* Long poll: instead of answering, a handler may park its request until
 * dt_httpd_wake (h, key) is called, or until max_ms after it was first
 * parked; its connection waits, suspended, and the handler then runs again
 * for the same request (the same body), when the server has time for it
 * (a run's budget at a time).  Returns false, parking nothing, when the
 * request already waited its longest (its handler must answer now), or
 * cannot be parked; the handler then answers as usual. */
bool dt_http_req_park (dt_http_req_t *req, const void *key, int64_t max_ms);
/* The request was parked before (this is a later run of its handler). */
bool dt_http_req_was_parked (const dt_http_req_t *req);
/* Wake the requests parked with 'key'; returns how many. */
size_t dt_httpd_wake (dt_httpd_t *h, const void *key);
size_t dt_httpd_parked_count (const dt_httpd_t *h);

/* The gate runs once per request that matched a route, when its headers
 * have arrived and before any of its body is read: it may answer (e.g. 401
 * for a missing credential, 429 for a quota), and then the body is never
 * buffered; it returns 0 to let the request go on to its handler, -1 when
 * it refused (answered 403 if it did not answer itself).  NULL: none. */
typedef int (*dt_http_gate_f) (dt_http_req_t *req, void *arg);
void dt_httpd_set_gate (dt_httpd_t *h, dt_http_gate_f cb, void *arg);

/* Register a route, e.g. ("GET", "/v1/jobs/{id}/events").  Up to 12 params
 * (dtctld's kv routes take keys of many segments, e.g. dttrain/J/aN/sS/rank_R). */
int dt_httpd_route (dt_httpd_t *h, const char *method, const char *pattern,
                    dt_http_handler_f cb, void *arg);

/* Event-loop integration: poll dt_httpd_fd for POLLIN with a timeout of at
 * most dt_httpd_timeout_ms (-1: none), then call dt_httpd_run. */
int dt_httpd_fd (const dt_httpd_t *h);
int dt_httpd_timeout_ms (const dt_httpd_t *h);
int dt_httpd_run (dt_httpd_t *h);
/* Listener idx (dt_httpd_listen's index) is urgent: its requests are
 * served first in a run, and a run over the other listeners' requests
 * yields to them after a few ms (the rest are handled in the next run).
 * dt_httpd_run_urgent serves the urgent listener alone when it has
 * anything ready (one poll otherwise): for the owner's loop between its
 * own long phases.  0, or -1 (errno) when MHD failed. */
void dt_httpd_set_urgent (dt_httpd_t *h, int idx); /* idx -1: none */
int dt_httpd_run_urgent (dt_httpd_t *h);
/* Requests handled by the last dt_httpd_run. */
size_t dt_httpd_last_run_requests (const dt_httpd_t *h);

/* Request accessors; all strings borrowed, valid until the reply. */
const char *dt_http_req_method (const dt_http_req_t *req);
const char *dt_http_req_path (const dt_http_req_t *req);
const char *dt_http_req_param (const dt_http_req_t *req, const char *name); /* {name} */
const char *dt_http_req_query (const dt_http_req_t *req, const char *name); /* ?name= */
const char *dt_http_req_header (const dt_http_req_t *req, const char *name);
const char *dt_http_req_body (const dt_http_req_t *req, size_t *len); /* NUL-terminated */
const char *dt_http_req_peer (const dt_http_req_t *req);              /* "127.0.0.1" */
/* The class of the listener the request came in on (dt_httpd_listen). */
int dt_http_req_class (const dt_http_req_t *req);
/* Data that the gate leaves for the handler (e.g. a decoded credential):
 * steals 'data', freed with free_fn (may be NULL) when the request ends. */
void dt_http_req_set_data (dt_http_req_t *req, void *data, void (*free_fn) (void *));
void *dt_http_req_data (const dt_http_req_t *req); /* borrowed, or NULL */

/* Answers.  dt_http_reply_json steals 'data' (may be NULL -> null).
 * Warnings added before the reply go into the envelope. */
void dt_http_add_warning (dt_http_req_t *req, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
void dt_http_reply_json (dt_http_req_t *req, int status, json_t *data);
/* The same envelope around 'data', a JSON text already serialized (len
 * bytes, borrowed, copied): for hot routes that build their answer without
 * a JSON tree.  The caller vouches that it is valid JSON. */
void dt_http_reply_json_text (dt_http_req_t *req, int status, const char *data,
                              size_t len);
/* Error envelope with data null; 'field' may be NULL. */
void dt_http_reply_error (dt_http_req_t *req, int status, const char *field,
                          const char *fmt, ...) __attribute__ ((format (printf, 4, 5)));
/* A non-JSON body (e.g. Prometheus text); body is copied. */
void dt_http_reply_text (dt_http_req_t *req, int status, const char *content_type,
                         const char *body, size_t len);

#endif
