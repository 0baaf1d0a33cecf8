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
    struct dt_http_req **parked; /* waiting for dt_httpd_wake (httpd_park.c) */
    size_t nparked, parked_cap;
    int64_t park_next_ns; /* the earliest deadline of a parked request; 0 none */
    size_t dispatched;    /* requests handled in the current (last) run */
    dt_http_gate_f gate;
    void *gate_arg;
    dt_httpd_close_f close_cb; /* a tagged connection closed (httpd_conn.c) */
    void *close_arg;
    struct route *routes;
    int nroutes;
    int access_level;       /* of the access log's lines (LOG_INFO) */
    uint64_t nofile;        /* RLIMIT_NOFILE after the raise */
    uint64_t nofile_budget; /* descriptors for connections: nofile less a reserve */
    uint64_t refuse_all_at; /* connections of all listeners: above it, 503 */
    uint64_t nconns;        /* connections of all listeners, open now */
    size_t accepted;        /* connections accepted so far */
    /* The listener served first (dt_httpd_set_urgent, when has_urgent),
     * its MHD epoll fd, when a run last looked at it, and whether it has
     * work: then a run over the others yields (httpd_park.c). */
    bool has_urgent;
    int urgent;
    int urgent_fd;
    int64_t urgent_check_ns;
    bool urgent_waiting;
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
    bool overfull;         /* refused for the connection limit: close after it */
    bool close;            /* dt_http_req_close: close the connection after the answer */
    bool parked;           /* waiting in h->parked (dt_http_req_park) */
    bool park_expired;     /* woken at its deadline, not by its event */
    const void *park_key;  /* what it waits for (dt_httpd_wake) */
    int64_t park_since_ns; /* when it was first parked; 0 never */
    int64_t park_deadline_ns; /* when it is woken at the latest */
    int cls;                  /* the listener's class */
    void *data;               /* dt_http_req_set_data */
    void (*data_free) (void *);
    int status;
    size_t reply_len;
    json_t *warnings;
    int64_t start_ns;
    char peer[INET6_ADDRSTRLEN];
};

/* httpd_park.c: suspend 'conn' to handle its request in a coming run;
 * queue 'conn', already suspended, likewise; -1 (nothing done) when out
 * of memory.  Resume the oldest 'max' of them (SIZE_MAX: all). */
/* One dt_httpd_run handles requests for about this long; the rest wait for
 * the next run, so that a burst (10,000 agents registering at once) does not
 * hold up the owner's loop for seconds.  (20 ms was tried: direct agents
 * then got less of their offered heartbeat rate through, 4 times of 4.) */
static const int64_t httpd_run_budget_ns = 50 * 1000000LL;

int httpd_defer (dt_httpd_t *h, struct MHD_Connection *conn);
/* A request of listener l that is ready: true when it should wait for the
 * next run (httpd_defer), because the run is past its budget or the
 * urgent listener has work (it is served first). */
bool httpd_defer_now (dt_httpd_t *h, const struct listener *l);
/* In a run, after listener i's turn: the urgent one's, when it waits. */
int httpd_urgent_turn (dt_httpd_t *h, int i);
/* httpd_conn.c: over listener l's connection limit, or over all the
 * listeners' (less the urgent listener's share, for the others): req is
 * answered 503 and true returned. */
bool httpd_refuse_overfull (struct listener *l, dt_http_req_t *req);
/* A listener has work MHD can do at once: a connection with data read or
 * readable (MHD's ready list), or one resumed. */
bool httpd_more_ready (const dt_httpd_t *h);
int httpd_defer_suspended (dt_httpd_t *h, struct MHD_Connection *conn);
void httpd_resume_deferred (dt_httpd_t *h, size_t max);
/* Wake the parked requests past their deadline (all: every
 * one, before the server stops); ms until the next deadline (-1 none);
 * drop a request that ends while parked from the parked ones. */
void httpd_park_expire (dt_httpd_t *h, bool all);
int64_t httpd_park_next_ms (const dt_httpd_t *h);
void httpd_park_forget (dt_http_req_t *req);

#endif
