/* test_httpd_limits.c: the HTTP server's denial-of-service limits on real
 * sockets on 127.0.0.1: the header-time gate, listener classes, the
 * per-address connection limit, the budget of buffered bodies and the
 * absolute request timeout.
 *
 * The server runs its event loop in a thread; the test thread is the
 * client, on raw sockets (to send exactly the bytes it wants, when it
 * wants).
 */
#include <config.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/httpd.h"
#include "common/log.h"
#include "tests/unit/unit.h"

#define MAX_BODY 4096
#define BODY_BUDGET 6000
#define PER_ADDRESS 3
#define REQUEST_TIMEOUT_MS 2000

static dt_httpd_t *srv;
static pthread_t srv_thread;
static atomic_int srv_stop;
static int port_user, port_agent, port_small;
/* The third listener's connection limit: its last 16 (the least band)
 * answer 503, so requests on connections past the 24th are refused. */
#define SMALL_LIMIT 40
#define SMALL_SERVED 24
static atomic_int gate_calls;

/* --- server side (its own thread) ---------------------------------------- */

/* Admits requests that carry "X-Key: good", and leaves a note for the
 * handler; refuses the others with 401. */
static int gate_cb (dt_http_req_t *req, void *arg)
{
    const char *k = dt_http_req_header (req, "X-Key");

    atomic_fetch_add (&gate_calls, 1);
    if (!k || strcmp (k, "good")) {
        dt_http_reply_error (req, 401, NULL, "no key");
        return -1;
    }
    dt_http_req_set_data (req, strdup ("from-gate"), free);
    return 0;
}

/* {"cls": N, "note": "...", "len": N} */
static void echo_cb (dt_http_req_t *req, void *arg)
{
    size_t len;
    dt_http_req_body (req, &len);
    dt_http_reply_json (req, 200,
                        json_pack ("{s:i s:s? s:I}", "cls", dt_http_req_class (req),
                                   "note", (const char *)dt_http_req_data (req), "len",
                                   (json_int_t)len));
}

/* Sleeps 20 ms (a slow handler) and answers the loop's iteration. */
static atomic_int srv_iter;
static void slow_cb (dt_http_req_t *req, void *arg)
{
    usleep (20000);
    dt_http_reply_json (req, 200, json_pack ("{s:i}", "iter", atomic_load (&srv_iter)));
}

/* The order of handling: {"seq": N}.  The first agents' request (class 1)
 * waits until the test sent a user's request, then each takes 2 ms. */
static atomic_int order_seq, user_sent;
static void ordered_cb (dt_http_req_t *req, void *arg)
{
    int seq = atomic_fetch_add (&order_seq, 1);
    if (dt_http_req_class (req) == 1) {
        for (int i = 0; i < 5000 && !atomic_load (&user_sent); i++)
            usleep (1000);
        usleep (2000);
    }
    dt_http_reply_json (req, 200, json_pack ("{s:i}", "seq", seq));
}

/* A long poll: parks until /wake released it (or its ?max= ms passed),
 * then answers whether it was parked and whether it was released. */
static int park_key;
static atomic_int park_released;
static void park_cb (dt_http_req_t *req, void *arg)
{
    const char *m = dt_http_req_query (req, "max");
    if (!atomic_load (&park_released) &&
        dt_http_req_park (req, &park_key, m ? atoi (m) : 5000))
        return;
    dt_http_reply_json (req, 200,
                        json_pack ("{s:b s:b}", "was_parked",
                                   dt_http_req_was_parked (req), "released",
                                   atomic_load (&park_released)));
}
static void wake_cb (dt_http_req_t *req, void *arg)
{
    atomic_store (&park_released, 1);
    dt_http_reply_json (
      req, 200, json_pack ("{s:I}", "woken", (json_int_t)dt_httpd_wake (srv, &park_key)));
}

/* Held by the loop while it runs the server; a test holds it to let
 * requests pile up. */
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;

static void *srv_loop (void *arg)
{
    int fd = dt_httpd_fd (srv);
    while (!atomic_load (&srv_stop)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int t = dt_httpd_timeout_ms (srv);
        if (t < 0 || t > 20)
            t = 20;
        poll (&p, 1, t);
        pthread_mutex_lock (&srv_lock);
        atomic_fetch_add (&srv_iter, 1);
        dt_httpd_run (srv);
        pthread_mutex_unlock (&srv_lock);
    }
    return NULL;
}

static int start_server (void)
{
    dt_error_t err;
    struct dt_httpd_conf conf = {
        .max_body = MAX_BODY,
        .body_budget = BODY_BUDGET,
        .request_timeout_ms = REQUEST_TIMEOUT_MS,
    };
    struct dt_httpd_listen users = { .addr = "127.0.0.1",
                                     .cls = 0,
                                     .per_address = PER_ADDRESS };
    struct dt_httpd_listen agents = { .addr = "127.0.0.1", .cls = 1 };
    struct dt_httpd_listen small = { .addr = "127.0.0.1",
                                     .cls = 2,
                                     .max_connections = SMALL_LIMIT };

    if (!(srv = dt_httpd_new (&conf, &err)) || dt_httpd_listen (srv, &users, &err) != 0 ||
        dt_httpd_listen (srv, &agents, &err) != 1 ||
        dt_httpd_listen (srv, &small, &err) != 2) {
        fprintf (stderr, "httpd: %s\n", err.text);
        return -1;
    }
    dt_httpd_set_gate (srv, gate_cb, NULL);
    if (dt_httpd_route (srv, "POST", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/slow", slow_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/ordered", ordered_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/park", park_cb, NULL) < 0 ||
        dt_httpd_route (srv, "POST", "/wake", wake_cb, NULL) < 0)
        return -1;
    port_user = dt_httpd_listener_port (srv, 0);
    port_agent = dt_httpd_listener_port (srv, 1);
    port_small = dt_httpd_listener_port (srv, 2);
    if (port_user != dt_httpd_port (srv) || port_agent <= 0 || port_agent == port_user)
        return -1;
    return pthread_create (&srv_thread, NULL, srv_loop, NULL) == 0 ? 0 : -1;
}

static void stop_server (void)
{
    atomic_store (&srv_stop, 1);
    pthread_join (srv_thread, NULL);
    dt_httpd_destroy (srv);
}

/* --- client helpers ------------------------------------------------------ */

static int connect_to (int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port) };
    struct timeval tv = { .tv_sec = 20 };
    int fd = socket (AF_INET, SOCK_STREAM, 0);

    inet_pton (AF_INET, "127.0.0.1", &sa.sin_addr);
    if (fd < 0 || connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        if (fd >= 0)
            close (fd);
        return -1;
    }
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv));
    return fd;
}

static int send_str (int fd, const char *s)
{
    size_t n = strlen (s);
    return send (fd, s, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* The HTTP status of the answer on fd (the whole answer into buf), 0 when
 * the server closed the connection without one, -1 on a receive error
 * (e.g. the 20 s receive timeout). */
static int read_status (int fd, char *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;
    int status = 0;

    buf[0] = '\0';
    /* Headers, then Content-Length bytes of body. */
    while (got + 1 < len) {
        n = recv (fd, buf + got, len - 1 - got, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            break;
        if (n < 0)
            return -1;
        got += n;
        buf[got] = '\0';
        char *end = strstr (buf, "\r\n\r\n");
        char *cl = strcasestr (buf, "Content-Length:");
        if (end && cl && got >= (size_t)(end + 4 - buf) + strtoul (cl + 15, NULL, 10))
            break;
    }
    if (sscanf (buf, "HTTP/1.1 %d", &status) != 1)
        status = 0;
    return status;
}

/* One request on a new connection: its status (see read_status). */
static int ask (int port, const char *request, char *buf, size_t len)
{
    int fd = connect_to (port), st;
    if (fd < 0)
        return -1;
    if (send_str (fd, request) < 0) {
        close (fd);
        return 0;
    }
    st = read_status (fd, buf, len);
    close (fd);
    return st;
}

/* --- tests --------------------------------------------------------------- */

static void test_gate (void)
{
    char buf[4096];
    int fd;

    /* Refused on its headers: answered although none of the body was sent. */
    CU_ASSERT_FATAL ((fd = connect_to (port_user)) >= 0);
    CU_ASSERT_EQUAL (send_str (fd, "POST /echo HTTP/1.1\r\nHost: x\r\n"
                                   "Content-Length: 3000\r\n\r\n"),
                     0);
    CU_ASSERT_EQUAL (read_status (fd, buf, sizeof (buf)), 401);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "no key"));
    close (fd);

    /* Admitted: the handler sees the body, the class and the gate's note. */
    CU_ASSERT_EQUAL (ask (port_user,
                          "POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n"
                          "Content-Length: 5\r\n\r\nhello",
                          buf, sizeof (buf)),
                     200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"cls\":0"));
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"note\":\"from-gate\""));
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"len\":5"));

    /* No route: 404 without the gate. */
    int before = atomic_load (&gate_calls);
    CU_ASSERT_EQUAL (
      ask (port_user, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof (buf)),
      404);
    CU_ASSERT_EQUAL (atomic_load (&gate_calls), before);
}

static void test_classes (void)
{
    char buf[4096];

    CU_ASSERT_EQUAL (ask (port_agent,
                          "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n", buf,
                          sizeof (buf)),
                     200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"cls\":1"));
}

static void test_per_address (void)
{
    char buf[4096];
    int held[PER_ADDRESS], st = -1;

    for (int i = 0; i < PER_ADDRESS; i++)
        CU_ASSERT_FATAL ((held[i] = connect_to (port_user)) >= 0);
    /* One more from this address is closed without an answer ... */
    CU_ASSERT_EQUAL (ask (port_user,
                          "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n", buf,
                          sizeof (buf)),
                     0);
    /* ... while the other listener serves it. */
    CU_ASSERT_EQUAL (ask (port_agent,
                          "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n", buf,
                          sizeof (buf)),
                     200);
    for (int i = 0; i < PER_ADDRESS; i++)
        close (held[i]);
    /* The server notices the closes on its next loop: retry a while. */
    for (int i = 0; i < 100 && st != 200; i++) {
        st = ask (port_user, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n", buf,
                  sizeof (buf));
        if (st != 200)
            usleep (50000);
    }
    CU_ASSERT_EQUAL (st, 200);
}

static void test_body_budget (void)
{
    char buf[8192], body[4000], head[256], req[3300];
    int a, b;

    memset (body, 'x', sizeof (body));
    /* A holds a 4096-byte buffer (3000 of its 4000 bytes sent) of the 6000. */
    snprintf (head, sizeof (head),
              "POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n"
              "Content-Length: %zu\r\n\r\n",
              sizeof (body));
    CU_ASSERT_FATAL ((a = connect_to (port_agent)) >= 0);
    CU_ASSERT_EQUAL (send_str (a, head), 0);
    CU_ASSERT_EQUAL (send (a, body, 3000, MSG_NOSIGNAL), 3000);
    /* Until A's bytes are in, a second body could still fit: ask until the
     * server answers B's head with 503 (it answers at once, B sends no body). */
    int st = 0;
    for (int i = 0; i < 100 && st != 503; i++) {
        CU_ASSERT_FATAL ((b = connect_to (port_agent)) >= 0);
        CU_ASSERT_EQUAL (send_str (b, "POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n"
                                      "Content-Length: 3000\r\n\r\n"),
                         0);
        struct pollfd p = { .fd = b, .events = POLLIN };
        if (poll (&p, 1, 200) == 1)
            st = read_status (b, buf, sizeof (buf));
        close (b);
    }
    CU_ASSERT_EQUAL (st, 503);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "MaxBodyBuffer"));
    /* A completes and is served; then B fits again. */
    CU_ASSERT_EQUAL (send (a, body + 3000, 1000, MSG_NOSIGNAL), 1000);
    CU_ASSERT_EQUAL (read_status (a, buf, sizeof (buf)), 200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"len\":4000"));
    close (a);
    snprintf (req, sizeof (req),
              "POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n"
              "Content-Length: 3000\r\n\r\n%.3000s",
              body);
    CU_ASSERT_EQUAL (ask (port_agent, req, buf, sizeof (buf)), 200);
}

static void test_request_timeout (void)
{
    char buf[4096], line[64];
    uint64_t cut0 = dt_httpd_cut_count (srv);
    int fd, idle, silent, lines = 0, st = -1;

    /* Three connections timed together (each has its own deadline, so
     * the test waits one timeout, not three). */
    /* A kept-alive connection idle between requests is not cut: a request
     * half a second past the timeout is served on it (the server wakes for
     * the deadline it would have cut it at); its idle time counts from
     * the answer. */
    CU_ASSERT_FATAL ((idle = connect_to (port_agent)) >= 0);
    CU_ASSERT_EQUAL (
      send_str (idle, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n"), 0);
    CU_ASSERT_EQUAL (read_status (idle, buf, sizeof (buf)), 200);
    int64_t idle_until = dt_mono_ms () + REQUEST_TIMEOUT_MS + 500;
    /* A connection that sends nothing. */
    CU_ASSERT_FATAL ((silent = connect_to (port_agent)) >= 0);

    /* Headers dribbled in, one line per 50 ms, would take 10 s (5 times the timeout): the
     * connection is closed before the request is complete. */
    CU_ASSERT_FATAL ((fd = connect_to (port_user)) >= 0);
    CU_ASSERT_EQUAL (send_str (fd, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n"),
                     0);
    for (; lines < 200; lines++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        snprintf (line, sizeof (line), "X-Dribble-%d: y\r\n", lines);
        if (send_str (fd, line) < 0)
            break;
        if (poll (&p, 1, 50) == 1) {
            st = read_status (fd, buf, sizeof (buf));
            break;
        }
    }
    CU_ASSERT_EQUAL (st, 0); /* closed, no answer */
    CU_ASSERT (lines < 200);
    close (fd);

    /* The silent connection is closed as well. */
    CU_ASSERT_EQUAL (read_status (silent, buf, sizeof (buf)), 0);
    close (silent);
    /* The server's thread counts a cut after it shut the socket down, so
     * the count may lag what this client saw: wait for it (up to 5 s). */
    for (int i = 0; i < 500 && dt_httpd_cut_count (srv) < cut0 + 2; i++)
        usleep (10000);
    CU_ASSERT (dt_httpd_cut_count (srv) >= cut0 + 2);

    /* The idle connection, half a second past the timeout: served. */
    int64_t left = idle_until - dt_mono_ms ();
    if (left > 0)
        usleep ((useconds_t)left * 1000);
    CU_ASSERT_EQUAL (
      send_str (idle, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n"), 0);
    CU_ASSERT_EQUAL (read_status (idle, buf, sizeof (buf)), 200);
    close (idle);
}

/* Twenty requests ready at once, each handled in 20 ms: one run handles
 * about 50 ms of them and leaves the rest to the next runs, so the
 * owner's loop gets its turn in between.  (MHD alone accepts 10
 * connections per run and handles them together in the next: 200 ms.) */
static void test_run_budget (void)
{
    enum { N = 20 };
    char buf[4096];
    int fd[N], per_iter[N] = { 0 }, iters[N], most = 0;

    pthread_mutex_lock (&srv_lock);
    for (int i = 0; i < N; i++) {
        CU_ASSERT_FATAL ((fd[i] = connect_to (port_agent)) >= 0);
        CU_ASSERT_EQUAL (
          send_str (fd[i], "GET /slow HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n"), 0);
    }
    usleep (200000); /* every request is in the server's socket buffers */
    pthread_mutex_unlock (&srv_lock);
    for (int i = 0; i < N; i++) {
        CU_ASSERT_EQUAL (read_status (fd[i], buf, sizeof (buf)), 200);
        char *p = strstr (buf, "\"iter\":");
        CU_ASSERT_FATAL (p != NULL);
        iters[i] = atoi (p + 7);
        close (fd[i]);
    }
    /* Handlers that ran in one iteration: at most 3 of 20 ms fit in a run's
     * 50 ms (they start at 0, 20 and 40 ms). */
    for (int i = 0; i < N; i++) {
        int n = 0;
        for (int k = 0; k < N; k++)
            n += iters[k] == iters[i];
        per_iter[i] = n;
        if (n > most)
            most = n;
    }
    if (most > 3) {
        fprintf (stderr, "slow handlers per loop iteration:");
        for (int i = 0; i < N; i++)
            fprintf (stderr, " %d@%d", per_iter[i], iters[i]);
        fprintf (stderr, "\n");
    }
    CU_ASSERT (most <= 3);
}

/* Near a listener's connection limit a request is answered 503 with
 * Retry-After and Connection: close (and its connection closed), not
 * dropped unanswered; once connections close, requests are served again. */
static void test_connection_limit (void)
{
    enum { N = SMALL_SERVED + 1 };
    char buf[4096];
    int fd[N];
    uint64_t refused0 = dt_httpd_refused_count (srv);

    for (int i = 0; i < N - 1; i++)
        CU_ASSERT_FATAL ((fd[i] = connect_to (port_small)) >= 0);
    /* The 24th connection's request: 24 open, not over 24: served (so the
     * server has accepted them all); then a 25th connection's is refused. */
    CU_ASSERT_EQUAL (
      send_str (fd[N - 2], "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n"), 0);
    CU_ASSERT_EQUAL (read_status (fd[N - 2], buf, sizeof (buf)), 200);
    CU_ASSERT_FATAL ((fd[N - 1] = connect_to (port_small)) >= 0);
    CU_ASSERT_EQUAL (
      send_str (fd[N - 1], "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n"), 0);
    CU_ASSERT_EQUAL (read_status (fd[N - 1], buf, sizeof (buf)), 503);
    CU_ASSERT_PTR_NOT_NULL (strcasestr (buf, "\r\nRetry-After: 1\r\n"));
    CU_ASSERT_PTR_NOT_NULL (strcasestr (buf, "\r\nConnection: close\r\n"));
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "connection limit"));
    CU_ASSERT_EQUAL (dt_httpd_refused_count (srv), refused0 + 1);
    /* The refused connection is closed by the server. */
    CU_ASSERT_EQUAL (recv (fd[N - 1], buf, sizeof (buf), 0), 0);
    for (int i = 0; i < N; i++)
        close (fd[i]);
    /* Room again: served (the server counts the closes as it sees them). */
    int status = 0;
    for (int t = 0; t < 100 && status != 200; t++) {
        int f = connect_to (port_small);
        CU_ASSERT_FATAL (f >= 0);
        send_str (f, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n");
        status = read_status (f, buf, sizeof (buf));
        close (f);
        if (status != 200)
            usleep (20000);
    }
    CU_ASSERT_EQUAL (status, 200);
}

static size_t parked_now (void)
{
    pthread_mutex_lock (&srv_lock);
    size_t n = dt_httpd_parked_count (srv);
    pthread_mutex_unlock (&srv_lock);
    return n;
}

/* A parked request is not answered until it is woken (then its handler
 * runs again), or until its longest wait; one whose client went away
 * while parked is dropped at its wake. */
static void test_park (void)
{
    const char *get = "GET /park HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n";
    char buf[4096];
    int a, b, gone;

    atomic_store (&park_released, 0);
    /* Its longest wait (200 ms): answered, was parked, not released. */
    CU_ASSERT_EQUAL (ask (port_agent,
                          "GET /park?max=200 HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n",
                          buf, sizeof (buf)),
                     200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"was_parked\":true,\"released\":false"));
    /* Two parked (5 s), one of whose clients goes away. */
    CU_ASSERT_FATAL ((a = connect_to (port_agent)) >= 0);
    CU_ASSERT_FATAL ((gone = connect_to (port_agent)) >= 0);
    CU_ASSERT_EQUAL (send_str (a, get), 0);
    CU_ASSERT_EQUAL (send_str (gone, get), 0);
    for (int t = 0; t < 100 && parked_now () < 2; t++)
        usleep (10000);
    CU_ASSERT_EQUAL (parked_now (), 2);
    close (gone);
    usleep (100000);
    CU_ASSERT_EQUAL (recv (a, buf, sizeof (buf), MSG_DONTWAIT), -1); /* no answer yet */
    CU_ASSERT_EQUAL (ask (port_user,
                          "POST /wake HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n"
                          "Content-Length: 0\r\n\r\n",
                          buf, sizeof (buf)),
                     200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"woken\":2"));
    CU_ASSERT_EQUAL (read_status (a, buf, sizeof (buf)), 200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"was_parked\":true,\"released\":true"));
    close (a);
    CU_ASSERT_EQUAL (parked_now (), 0);
    /* Released: not parked at all. */
    CU_ASSERT_FATAL ((b = connect_to (port_agent)) >= 0);
    CU_ASSERT_EQUAL (send_str (b, get), 0);
    CU_ASSERT_EQUAL (read_status (b, buf, sizeof (buf)), 200);
    CU_ASSERT_PTR_NOT_NULL (strstr (buf, "\"was_parked\":false"));
    close (b);
}

/* The urgent listener: a user's request that comes while a run handles
 * the agents' is answered before the rest of them, which wait for the
 * next run and are answered too. */
static void test_urgent (void)
{
    enum { N = 20 };
    const char *get = "GET /ordered HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n";
    char buf[4096];
    int fd[N], u, seq = -1;

    pthread_mutex_lock (&srv_lock);
    dt_httpd_set_urgent (srv, 0);
    atomic_store (&order_seq, 0);
    atomic_store (&user_sent, 0);
    for (int i = 0; i < N; i++) {
        CU_ASSERT_FATAL ((fd[i] = connect_to (port_agent)) >= 0);
        CU_ASSERT_EQUAL (send_str (fd[i], get), 0);
    }
    pthread_mutex_unlock (&srv_lock);
    /* The run is in the first agents' request: now the user's. */
    for (int i = 0; i < 5000 && atomic_load (&order_seq) == 0; i++)
        usleep (1000);
    CU_ASSERT_FATAL ((u = connect_to (port_user)) >= 0);
    CU_ASSERT_EQUAL (send_str (u, get), 0);
    atomic_store (&user_sent, 1);
    CU_ASSERT_EQUAL (read_status (u, buf, sizeof (buf)), 200);
    CU_ASSERT_EQUAL (sscanf (strstr (buf, "\"seq\":") ? strstr (buf, "\"seq\":") : "",
                             "\"seq\":%d", &seq),
                     1);
    /* Without the yield it would come after all N. */
    CU_ASSERT (seq >= 1 && seq < N / 2);
    close (u);
    for (int i = 0; i < N; i++) {
        CU_ASSERT_EQUAL (read_status (fd[i], buf, sizeof (buf)), 200);
        close (fd[i]);
    }
    pthread_mutex_lock (&srv_lock);
    dt_httpd_set_urgent (srv, -1);
    pthread_mutex_unlock (&srv_lock);
}

/* The users' share of the descriptors, in a child process run before any
 * thread (its descriptor limit is lowered for good): at a limit of 320,
 * 64 descriptors are for connections, all listeners together are refused
 * over 48 and, with an urgent listener, the others over 32.  With 34
 * agents' connections open, an agent's request is refused and a user's
 * served; without the share both would be served. */
static int reserve_status = -1;

static int reserve_child (void)
{
    struct rlimit rl = { 320, 320 };
    dt_error_t err;
    struct dt_httpd_conf conf = { .max_body = MAX_BODY,
                                  .body_budget = BODY_BUDGET,
                                  .request_timeout_ms = REQUEST_TIMEOUT_MS };
    struct dt_httpd_listen users = { .addr = "127.0.0.1", .cls = 0 };
    struct dt_httpd_listen agents = { .addr = "127.0.0.1", .cls = 1 };
    const char *get = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Key: good\r\n\r\n";
    char buf[4096];
    int fd[33], agent_st, user_st;

    if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
        return 2;
    if (!(srv = dt_httpd_new (&conf, &err)) || dt_httpd_listen (srv, &users, &err) != 0 ||
        dt_httpd_listen (srv, &agents, &err) != 1 ||
        dt_httpd_route (srv, "GET", "/echo", echo_cb, NULL) < 0)
        return 3;
    dt_httpd_set_gate (srv, gate_cb, NULL);
    dt_httpd_set_urgent (srv, 0);
    port_user = dt_httpd_listener_port (srv, 0);
    port_agent = dt_httpd_listener_port (srv, 1);
    if (pthread_create (&srv_thread, NULL, srv_loop, NULL) != 0)
        return 4;
    for (int i = 0; i < 33; i++)
        if ((fd[i] = connect_to (port_agent)) < 0)
            return 5;
    /* The 34th's request, again until the server has accepted the 33
     * (it counts connections as it accepts them; 2 s at most). */
    agent_st = 0;
    for (int t = 0; t < 100 && agent_st != 503; t++) {
        int f = connect_to (port_agent);
        if (f < 0 || send_str (f, get) < 0)
            return 6;
        agent_st = read_status (f, buf, sizeof (buf));
        close (f);
        if (agent_st != 503)
            usleep (20000);
    }
    user_st = ask (port_user, get, buf, sizeof (buf));
    fprintf (stderr, "users' share: an agent's request %d, a user's %d\n", agent_st,
             user_st);
    return agent_st == 503 && user_st == 200 ? 0 : 1;
}

static void test_users_share (void)
{
    CU_ASSERT_EQUAL (reserve_status, 0);
}

static const struct dt_unit_test tests[] = {
    { "the users' share of the descriptors: an agent refused, a user served",
      test_users_share },
    { "long poll: parked until woken or its longest wait", test_park },
    { "gate: refused at header time, note to the handler, not for 404", test_gate },
    { "listener classes", test_classes },
    { "per-address connection limit, other listener unaffected", test_per_address },
    { "budget of buffered bodies: 503, then served", test_body_budget },
    { "absolute request timeout: dribble and silence cut, idle kept",
      test_request_timeout },
    { "a run's budget: a burst is handled over several loop iterations",
      test_run_budget },
    { "connection limit: 503 with Retry-After and a close, then served",
      test_connection_limit },
    { "urgent listener: a user's request before the rest of a run", test_urgent },
    { NULL, NULL },
};

int main (void)
{
    int rc;

    dt_log_init ("test_httpd_limits", DT_LOG_STDERR, LOG_ERR);
    pid_t child = fork ();
    if (child == 0)
        _exit (reserve_child ());
    int ws;
    if (child > 0 && waitpid (child, &ws, 0) == child && WIFEXITED (ws))
        reserve_status = WEXITSTATUS (ws);
    if (start_server () < 0)
        return 99;
    rc = dt_unit_run ("httpd_limits", tests);
    stop_server ();
    return rc;
}
