/* test_httpd_conn.c: the HTTP server's busy list, request timeout and
 * warning limiter, on real sockets (socketpairs); the close callback of
 * tagged connections, on a real server. */
#include <config.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/httpd.h"
#include "common/httpd_conn.h"
#include "common/log.h"
#include "tests/unit/unit.h"

/* A connection on one end of a socketpair; *peer is the client's end. */
static void conn_init (struct httpd_conn *c, int *peer)
{
    int sv[2];
    memset (c, 0, sizeof (*c));
    CU_ASSERT_FATAL (socketpair (AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    c->fd = sv[0];
    *peer = sv[1];
}

/* Whether the server end was shut down: the client reads end of file. */
static bool peer_eof (int peer)
{
    char b;
    struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
    setsockopt (peer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv));
    return recv (peer, &b, 1, 0) == 0;
}

static void test_busy_list (void)
{
    struct httpd_conns cs = { 0 };
    struct httpd_conn a, b, c;
    int pa, pb, pc;

    conn_init (&a, &pa);
    conn_init (&b, &pb);
    conn_init (&c, &pc);
    CU_ASSERT_EQUAL (httpd_conn_next_ms (&cs), -1); /* no timeout */
    cs.timeout_ns = 60LL * 1000000000;
    CU_ASSERT_EQUAL (httpd_conn_next_ms (&cs), -1); /* none busy */
    httpd_conn_busy (&cs, &a);
    httpd_conn_busy (&cs, &b);
    httpd_conn_busy (&cs, &c);
    httpd_conn_busy (&cs, &a); /* already: stays first */
    CU_ASSERT_PTR_EQUAL (cs.head, &a);
    CU_ASSERT_PTR_EQUAL (cs.tail, &c);
    CU_ASSERT (httpd_conn_next_ms (&cs) > 59000 && httpd_conn_next_ms (&cs) <= 60001);
    /* Idle from the middle, the head and the tail. */
    httpd_conn_idle (&cs, &b);
    CU_ASSERT_PTR_EQUAL (a.next, &c);
    CU_ASSERT_PTR_EQUAL (c.prev, &a);
    httpd_conn_idle (&cs, &a);
    CU_ASSERT_PTR_EQUAL (cs.head, &c);
    httpd_conn_idle (&cs, &c);
    httpd_conn_idle (&cs, &c); /* already idle: no-op */
    CU_ASSERT_PTR_NULL (cs.head);
    CU_ASSERT_PTR_NULL (cs.tail);
    /* Busy again: at the tail, with a new start. */
    httpd_conn_busy (&cs, &b);
    CU_ASSERT_PTR_EQUAL (cs.head, &b);
    CU_ASSERT_PTR_EQUAL (cs.tail, &b);
    httpd_conn_cut_expired (&cs); /* not expired: nothing cut */
    CU_ASSERT_EQUAL (cs.cut, 0);
    CU_ASSERT_FALSE (peer_eof (pb));
    close (a.fd), close (b.fd), close (c.fd), close (pa), close (pb), close (pc);
}

static void test_cut (void)
{
    const int64_t s = 1000000000;
    struct httpd_conns cs = { .timeout_ns = 10 * s };
    struct httpd_conn a, b;
    int pa, pb;

    conn_init (&a, &pa);
    conn_init (&b, &pb);
    /* a has been busy for 20 s, b for 0. */
    httpd_conn_busy (&cs, &a);
    a.busy_ns -= 20 * s;
    httpd_conn_busy (&cs, &b);
    CU_ASSERT_EQUAL (httpd_conn_next_ms (&cs), 0); /* a is due now */
    httpd_conn_cut_expired (&cs);
    CU_ASSERT_EQUAL (cs.cut, 1);
    CU_ASSERT (peer_eof (pa));       /* a shut down ... */
    CU_ASSERT_FALSE (peer_eof (pb)); /* ... b not yet */
    CU_ASSERT_PTR_EQUAL (cs.head, &b);
    CU_ASSERT_EQUAL (a.busy_ns, 0);
    b.busy_ns -= 20 * s;
    httpd_conn_cut_expired (&cs);
    CU_ASSERT_EQUAL (cs.cut, 2);
    CU_ASSERT (peer_eof (pb));
    CU_ASSERT_PTR_NULL (cs.head);
    close (a.fd), close (b.fd), close (pa), close (pb);
}

static void test_log_limit (void)
{
    struct httpd_conns cs = { 0 };
    int allowed = 0;

    for (int i = 0; i < 1000; i++)
        allowed += httpd_conn_log_allowed (&cs);
    CU_ASSERT_EQUAL (allowed, 20);
    CU_ASSERT_EQUAL (cs.log_dropped, 980);
    /* A new window: allowed again, the dropped ones counted afresh. */
    cs.log_window_ns -= 11LL * 1000000000;
    CU_ASSERT_TRUE (httpd_conn_log_allowed (&cs));
    CU_ASSERT_EQUAL (cs.log_dropped, 0);
    CU_ASSERT_EQUAL (cs.log_count, 1);
}

/* --- tagged connections: the close callback ------------------------------ */

static char closed_tags[256];
static int nclosed;

static void on_close (const char *tag, void *arg)
{
    (void)arg;
    nclosed++;
    snprintf (closed_tags + strlen (closed_tags),
              sizeof (closed_tags) - strlen (closed_tags), "%s ", tag);
}

/* Tags its connection with ?tag= when given; answers whether it was new. */
static void tag_cb (dt_http_req_t *req, void *arg)
{
    const char *t = dt_http_req_query (req, "tag");
    bool fresh = t && dt_http_req_tag (req, t);
    dt_http_reply_json (req, 200, json_pack ("{s:b}", "fresh", fresh));
}

/* Run the server for up to ms, or until 'until' connections closed. */
static void serve (dt_httpd_t *h, int ms, int until)
{
    int64_t end = dt_mono_ms () + ms;
    while (dt_mono_ms () < end && nclosed < until) {
        struct pollfd p = { .fd = dt_httpd_fd (h), .events = POLLIN };
        poll (&p, 1, 10);
        dt_httpd_run (h);
    }
}

static int client (int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port) };
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    inet_pton (AF_INET, "127.0.0.1", &sa.sin_addr);
    CU_ASSERT_FATAL (fd >= 0 && connect (fd, (struct sockaddr *)&sa, sizeof (sa)) == 0);
    return fd;
}

/* Whether buf (got bytes) holds a whole answer: the headers and
 * Content-Length bytes of body after them. */
static bool answer_complete (const char *buf, size_t got)
{
    const char *end = strstr (buf, "\r\n\r\n");
    const char *cl = strcasestr (buf, "Content-Length:");
    return end && cl && cl < end &&
           got >= (size_t)(end + 4 - buf) + strtoul (cl + 15, NULL, 10);
}

/* Send a request on fd and serve until its whole answer came (up to 5 s);
 * the answer. */
static void request (dt_httpd_t *h, int fd, const char *path, char *buf, size_t len)
{
    char req[256];
    size_t got = 0;
    snprintf (req, sizeof (req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    CU_ASSERT_FATAL (send (fd, req, strlen (req), MSG_NOSIGNAL) == (ssize_t)strlen (req));
    buf[0] = '\0';
    for (int64_t end = dt_mono_ms () + 5000;
         dt_mono_ms () < end && !answer_complete (buf, got);) {
        serve (h, 10, 1000);
        ssize_t n = recv (fd, buf + got, len - 1 - got, MSG_DONTWAIT);
        if (n > 0)
            buf[got += (size_t)n] = '\0';
    }
}

static void test_close_cb (void)
{
    dt_error_t err;
    char buf[2048];
    dt_httpd_t *h = dt_httpd_create ("127.0.0.1", 0, 4096, &err);
    CU_ASSERT_FATAL (h != NULL);
    CU_ASSERT_FATAL (dt_httpd_route (h, "GET", "/t", tag_cb, NULL) == 0);
    dt_httpd_set_close_cb (h, on_close, NULL);
    int port = dt_httpd_port (h);
    /* a: tagged "n1" twice on one kept-alive connection (new the first
     * time only); b: never tagged; c: tagged "n2". */
    int a = client (port), b = client (port), c = client (port);
    request (h, a, "/t?tag=n1", buf, sizeof (buf));
    CU_ASSERT (strstr (buf, "\"fresh\":true") != NULL);
    request (h, a, "/t?tag=n1", buf, sizeof (buf));
    CU_ASSERT (strstr (buf, "\"fresh\":false") != NULL);
    request (h, b, "/t", buf, sizeof (buf));
    request (h, c, "/t?tag=n2", buf, sizeof (buf));
    CU_ASSERT_EQUAL (nclosed, 0); /* open: nothing reported */
    /* The client closes an untagged connection: no callback. */
    close (b);
    serve (h, 300, 1);
    CU_ASSERT_EQUAL (nclosed, 0);
    /* A tagged one: its tag, at once. */
    close (a);
    serve (h, 2000, 1);
    CU_ASSERT_EQUAL (nclosed, 1);
    CU_ASSERT_STRING_EQUAL (closed_tags, "n1 ");
    /* Destroying the server reports nothing (its owner is going away). */
    dt_httpd_destroy (h);
    CU_ASSERT_EQUAL (nclosed, 1);
    close (c);
}

static const struct dt_unit_test tests[] = {
    { "busy list: order, idle from anywhere, next deadline", test_busy_list },
    { "request timeout: the oldest cut first, by shutdown", test_cut },
    { "warnings: 20 per window, then counted", test_log_limit },
    { "tagged connections: the close callback names the tag", test_close_cb },
    { NULL, NULL },
};

int main (void)
{
    dt_log_init ("test_httpd_conn", DT_LOG_STDERR, LOG_CRIT);
    return dt_unit_run ("httpd_conn", tests);
}
