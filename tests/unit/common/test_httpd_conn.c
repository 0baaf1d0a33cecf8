/* test_httpd_conn.c: the HTTP server's busy list, request timeout and
 * warning limiter, on real sockets (socketpairs). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

static const struct dt_unit_test tests[] = {
    { "busy list: order, idle from anywhere, next deadline", test_busy_list },
    { "request timeout: the oldest cut first, by shutdown", test_cut },
    { "warnings: 20 per window, then counted", test_log_limit },
    { NULL, NULL },
};

int main (void)
{
    dt_log_init ("test_httpd_conn", DT_LOG_STDERR, LOG_CRIT);
    return dt_unit_run ("httpd_conn", tests);
}
