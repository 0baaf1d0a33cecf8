/* httpd_conn.h: the HTTP server's view of its connections (internal to
 * httpd.c): the absolute request timeout, rate-limited warnings and the
 * close callback of tagged connections.
 *
 * A connection is "busy" from its accept, and again from each request
 * line on a kept-alive connection, until its request is answered.  Busy
 * connections are kept in a list in the order they became busy, so the
 * oldest is at the head and the timeout checks only the head.
 */
#ifndef DT_HTTPD_CONN_H
#define DT_HTTPD_CONN_H

#include <stdbool.h>
#include <stdint.h>

/* One accepted connection (MHD's socket context). */
struct httpd_conn {
    struct httpd_conn *prev, *next; /* in the busy list, when busy_ns != 0 */
    int fd;
    int64_t busy_ns; /* monotonic ns the current request began; 0 idle */
    char tag[64];    /* dt_http_req_tag; "" none */
};

struct httpd_conns {
    struct httpd_conn *head, *tail;
    int64_t timeout_ns;    /* the absolute request timeout; 0 none */
    uint64_t cut;          /* connections cut at it so far */
    int64_t log_window_ns; /* start of the current warning window */
    int log_count;         /* warnings logged in it */
    int log_dropped;       /* warnings dropped in it */
};

/* Mark 'c' busy from now (no-op if it is) / idle. */
void httpd_conn_busy (struct httpd_conns *cs, struct httpd_conn *c);
void httpd_conn_idle (struct httpd_conns *cs, struct httpd_conn *c);

/* Cut every connection busy for longer than the timeout: shutdown() makes
 * MHD read end of file and close it (MHD has no call to close a
 * connection from outside its callbacks). */
void httpd_conn_cut_expired (struct httpd_conns *cs);

/* Milliseconds until the oldest busy connection expires (0: now), or -1
 * when none can. */
int64_t httpd_conn_next_ms (const struct httpd_conns *cs);

/* Whether one more warning that a client can provoke (a connection
 * refused at a limit, a request cut) may be logged: at most a burst per
 * window, so that a flood cannot fill the log; the number dropped is
 * logged when the next window opens. */
bool httpd_conn_log_allowed (struct httpd_conns *cs);

/* 'c' is closing: the close callback runs if it was tagged. */
struct dt_httpd;
void httpd_conn_closed (struct dt_httpd *h, struct httpd_conn *c);

#endif
