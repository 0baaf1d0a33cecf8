/* httpd_int.h: the HTTP server's own structures (httpd.c), apart so that
 * httpd.c stays one readable file.  Not for other users of httpd.h. */
#ifndef DT_HTTPD_INT_H
#define DT_HTTPD_INT_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <microhttpd.h>

#include "common/httpd.h"
#include "common/httpd_conn.h"

#define HTTPD_MAX_LISTENERS 4
#define HTTPD_MAX_PARAMS 12 /* httpd.h; kv keys of dtctld have up to 12 segments */
#define HTTPD_MAX_SEGS 16

struct route {
    char *method;
    char *pattern;
    char *segs[HTTPD_MAX_SEGS]; /* literal, or "{name}" */
    int nsegs;
    dt_http_handler_f cb;
    void *arg;
};

struct listener {
    struct dt_httpd *h;
    struct MHD_Daemon *d;
    int port;
    int cls;
    unsigned int limit;     /* MHD's hard limit: more are closed at accept */
    unsigned int refuse_at; /* above this many, requests get 503 and a close */
    unsigned int nconns;    /* open now */
    uint64_t refused;       /* requests refused for the connection limit */
};

struct dt_httpd {
    struct listener ls[HTTPD_MAX_LISTENERS];
    int nls;
    int epfd;      /* the listeners' epoll fds, for one poll */
    int listen_fd; /* bound, not yet handed to MHD */
    size_t max_body;
    size_t body_budget; /* bodies buffered at once, all requests; 0 none */
    size_t body_bytes;  /* buffered now */
    unsigned int idle_timeout_s;
    struct httpd_conns conns; /* busy connections, the request timeout */
    bool running;             /* inside dt_httpd_run */
    int64_t run_start_ns;
    struct MHD_Connection **deferred; /* suspended: handled in the next run */
    size_t ndeferred, deferred_cap;
    size_t dispatched; /* requests handled in the current (last) run */
    dt_http_gate_f gate;
    void *gate_arg;
    struct route *routes;
    int nroutes;
    int access_level;       /* of the access log's lines (LOG_INFO) */
    uint64_t nofile;        /* RLIMIT_NOFILE after the raise */
    uint64_t nofile_budget; /* descriptors for connections: nofile less a reserve */
    uint64_t refuse_all_at; /* connections of all listeners: above it, 503 */
    uint64_t nconns;        /* connections of all listeners, open now */
    size_t accepted;        /* connections accepted so far */
};

struct dt_http_req {
    dt_httpd_t *h;
    struct MHD_Connection *conn;
    char *method;
    char *path;
    struct route *route;
    int route_status; /* 0 matched, else 404/405 */
    char *pnames[HTTPD_MAX_PARAMS];
    char *pvalues[HTTPD_MAX_PARAMS];
    int nparams;
    char *body;
    size_t len;
    size_t cap;
    bool too_big;
    bool over_budget; /* the global body budget was full */
    bool replied;
    bool overfull; /* refused for the connection limit: close after it */
    bool close;    /* dt_http_req_close: close the connection after the answer */
    int cls;       /* the listener's class */
    void *data;    /* dt_http_req_set_data */
    void (*data_free) (void *);
    int status;
    size_t reply_len;
    json_t *warnings;
    int64_t start_ns;
    char peer[INET6_ADDRSTRLEN];
};

#endif
