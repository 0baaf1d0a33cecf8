/* test_httpc.c: the HTTP client against real servers on 127.0.0.1: our own
 * httpd driven from a thread, and a raw socket server that counts TCP
 * connections (keep-alive) or never answers (timeouts). */
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
#include <sys/socket.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/httpc.h"
#include "common/httpd.h"
#include "common/log.h"
#include "tests/unit/unit.h"

static dt_httpd_t *srv;
static pthread_t srv_thread;
static atomic_int srv_stop;
static char base[64];

static atomic_int flaky_left; /* 503 answers still to give */
static atomic_int hits;       /* requests seen by the counting routes */

static void echo_cb (dt_http_req_t *req, void *arg)
{
    size_t len;
    const char *body = dt_http_req_body (req, &len);
    const char *auth = dt_http_req_header (req, "Authorization");
    const char *ct = dt_http_req_header (req, "Content-Type");
    json_t *in = json_loadb (body, len, 0, NULL);
    atomic_fetch_add (&hits, 1);
    dt_http_reply_json (req, 200,
                        json_pack ("{s:s s:o s:s* s:s*}", "method",
                                   dt_http_req_method (req), "body",
                                   in ? in : json_null (), "auth", auth, "ctype", ct));
}

static void flaky_cb (dt_http_req_t *req, void *arg)
{
    atomic_fetch_add (&hits, 1);
    if (atomic_fetch_sub (&flaky_left, 1) > 0)
        dt_http_reply_error (req, 503, NULL, "busy, try again");
    else
        dt_http_reply_json (req, 200, json_pack ("{s:b}", "ok", 1));
}

static void status_cb (dt_http_req_t *req, void *arg)
{
    atomic_fetch_add (&hits, 1);
    int code = atoi (dt_http_req_param (req, "code"));
    dt_http_reply_error (req, code, "f", "status %d as asked", code);
}

static void text_cb (dt_http_req_t *req, void *arg)
{
    dt_http_reply_text (req, 200, "text/plain", "not json", 8);
}

static void *srv_loop (void *arg)
{
    int fd = dt_httpd_fd (srv);
    while (!atomic_load (&srv_stop)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int t = dt_httpd_timeout_ms (srv);
        poll (&p, 1, t < 0 || t > 20 ? 20 : t);
        dt_httpd_run (srv);
    }
    return NULL;
}

/* --- raw server: counts accepted connections, answers GETs or hangs ------ */

struct raw {
    int lfd;
    int port;
    bool hang;
    atomic_int accepts;
    atomic_int stop;
    pthread_t thread;
};

static void *raw_loop (void *arg)
{
    struct raw *r = arg;
    int conns[64];
    int n = 0;
    const char *body = "{\"data\":1,\"errors\":[],\"warnings\":[]}";
    char resp[256];
    snprintf (resp, sizeof (resp),
              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              "Content-Length: %zu\r\n\r\n%s",
              strlen (body), body);

    while (!atomic_load (&r->stop)) {
        struct pollfd p[65];
        p[0] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
        for (int i = 0; i < n; i++)
            p[i + 1] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
        if (poll (p, n + 1, 20) <= 0)
            continue;
        if ((p[0].revents & POLLIN) && n < 64) {
            int c = accept (r->lfd, NULL, NULL);
            if (c >= 0) {
                conns[n++] = c;
                atomic_fetch_add (&r->accepts, 1);
            }
        }
        for (int i = 0; i < n; i++) {
            if (!(p[i + 1].revents & (POLLIN | POLLHUP)))
                continue;
            char buf[4096];
            ssize_t k = read (conns[i], buf, sizeof (buf));
            if (k <= 0) {
                close (conns[i]);
                conns[i] = conns[--n];
                i--;
                continue;
            }
            /* one small GET per read is enough for this test */
            if (!r->hang)
                (void)!write (conns[i], resp, strlen (resp));
        }
    }
    for (int i = 0; i < n; i++)
        close (conns[i]);
    return NULL;
}

static int raw_start (struct raw *r, bool hang)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof (sa);

    memset (r, 0, sizeof (*r));
    r->hang = hang;
    inet_pton (AF_INET, "127.0.0.1", &sa.sin_addr);
    if ((r->lfd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind (r->lfd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (r->lfd, 16) < 0 || getsockname (r->lfd, (struct sockaddr *)&sa, &sl) < 0)
        return -1;
    r->port = ntohs (sa.sin_port);
    return pthread_create (&r->thread, NULL, raw_loop, r);
}

static void raw_stop (struct raw *r)
{
    atomic_store (&r->stop, 1);
    pthread_join (r->thread, NULL);
    close (r->lfd);
}

/* A port with nothing listening: bind, read the port, close. */
static int dead_port (void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof (sa);
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    inet_pton (AF_INET, "127.0.0.1", &sa.sin_addr);
    bind (fd, (struct sockaddr *)&sa, sizeof (sa));
    getsockname (fd, (struct sockaddr *)&sa, &sl);
    close (fd);
    return ntohs (sa.sin_port);
}

static const struct dt_httpc_opts fast = {
    .connect_timeout_ms = 2000,
    .total_timeout_ms = 10000,
    .retries = 3,
    .backoff_ms = 10,
    .backoff_max_ms = 40,
};

/* --- tests --------------------------------------------------------------- */

static void test_json_roundtrip (void)
{
    dt_error_t err = { "" };
    dt_httpc_t *c = dt_httpc_create (base, NULL, &err);
    json_t *body = json_pack ("{s:s s:i}", "name", "resnet", "nodes", 4);
    json_t *reply = NULL;
    long status = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    CU_ASSERT_EQUAL (dt_httpc_set_header (c, "Authorization: Bearer s3cret"), 0);
    CU_ASSERT_EQUAL (dt_httpc_set_header (c, "no colon"), -1);
    CU_ASSERT_EQUAL (dt_httpc_json (c, "POST", "/echo", body, &status, &reply, &err), 0);
    CU_ASSERT_EQUAL (status, 200);
    CU_ASSERT_PTR_NOT_NULL_FATAL (reply);
    json_t *d = json_object_get (reply, "data");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "method")), "POST");
    CU_ASSERT (json_equal (json_object_get (d, "body"), body));
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "auth")),
                            "Bearer s3cret");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "ctype")),
                            "application/json");
    CU_ASSERT_PTR_NULL (dt_httpc_envelope_error (reply));
    json_decref (reply);

    /* other methods, without a body */
    const char *methods[] = { "GET", "DELETE", "PUT", "PATCH", "POST", NULL };
    for (int i = 0; methods[i]; i++) {
        reply = NULL;
        CU_ASSERT_EQUAL (
          dt_httpc_json (c, methods[i], "echo", NULL, &status, &reply, &err), 0);
        CU_ASSERT_EQUAL (status, 200);
        d = json_object_get (reply, "data");
        CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "method")),
                                methods[i]);
        CU_ASSERT (json_is_null (json_object_get (d, "body")));
        json_decref (reply);
    }

    /* a non-JSON answer: 0, status, reply NULL; raw gives the bytes */
    reply = (json_t *)1;
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/text", NULL, &status, &reply, &err), 0);
    CU_ASSERT_EQUAL (status, 200);
    CU_ASSERT_PTR_NULL (reply);
    char *raw = NULL;
    size_t rawlen = 0;
    CU_ASSERT_EQUAL (
      dt_httpc_raw (c, "GET", "/text", NULL, 0, NULL, &status, &raw, &rawlen, &err), 0);
    CU_ASSERT_EQUAL (rawlen, 8);
    CU_ASSERT_STRING_EQUAL (raw, "not json");
    free (raw);

    json_decref (body);
    dt_httpc_destroy (c);
}

static void test_4xx_not_retried (void)
{
    dt_error_t err = { "" };
    dt_httpc_t *c = dt_httpc_create (base, &fast, &err);
    json_t *reply = NULL;
    long status = 0;
    int codes[] = { 400, 404, 409, 413, 500 };

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    for (size_t i = 0; i < sizeof (codes) / sizeof (codes[0]); i++) {
        char path[32];
        snprintf (path, sizeof (path), "/status/%d", codes[i]);
        atomic_store (&hits, 0);
        CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", path, NULL, &status, &reply, &err), 0);
        CU_ASSERT_EQUAL (status, codes[i]);
        CU_ASSERT_EQUAL (atomic_load (&hits), 1);
        const char *e = dt_httpc_envelope_error (reply);
        CU_ASSERT_PTR_NOT_NULL (e ? strstr (e, "as asked") : NULL);
        json_decref (reply);
    }
    /* an unknown path answers 404 from the server itself, once */
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/nope", NULL, &status, &reply, &err), 0);
    CU_ASSERT_EQUAL (status, 404);
    json_decref (reply);
    dt_httpc_destroy (c);
}

static void test_503_retried (void)
{
    dt_error_t err = { "" };
    dt_httpc_t *c = dt_httpc_create (base, &fast, &err);
    json_t *reply = NULL;
    long status = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    /* two 503s then success: 3 requests, caller sees 200 */
    atomic_store (&flaky_left, 2);
    atomic_store (&hits, 0);
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/flaky", NULL, &status, &reply, &err), 0);
    CU_ASSERT_EQUAL (status, 200);
    CU_ASSERT_EQUAL (atomic_load (&hits), 3);
    CU_ASSERT (json_is_true (json_object_get (json_object_get (reply, "data"), "ok")));
    json_decref (reply);

    /* always 503: 1 + retries requests, the last answer is returned */
    atomic_store (&flaky_left, 100);
    atomic_store (&hits, 0);
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/flaky", NULL, &status, &reply, &err), 0);
    CU_ASSERT_EQUAL (status, 503);
    CU_ASSERT_EQUAL (atomic_load (&hits), 4);
    CU_ASSERT_STRING_EQUAL (dt_httpc_envelope_error (reply), "busy, try again");
    json_decref (reply);

    /* 502 and 504 are retried too */
    atomic_store (&hits, 0);
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/status/502", NULL, &status, &reply, &err),
                     0);
    CU_ASSERT_EQUAL (atomic_load (&hits), 4);
    json_decref (reply);
    atomic_store (&hits, 0);
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/status/504", NULL, &status, &reply, &err),
                     0);
    CU_ASSERT_EQUAL (atomic_load (&hits), 4);
    json_decref (reply);
    dt_httpc_destroy (c);

    /* retries = 0: one try */
    struct dt_httpc_opts once = fast;
    once.retries = 0;
    c = dt_httpc_create (base, &once, &err);
    atomic_store (&flaky_left, 1);
    atomic_store (&hits, 0);
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/flaky", NULL, &status, &reply, &err), 0);
    CU_ASSERT_EQUAL (status, 503);
    CU_ASSERT_EQUAL (atomic_load (&hits), 1);
    json_decref (reply);
    dt_httpc_destroy (c);
}

static void test_backoff_lower_bound (void)
{
    /* backoff 100 ms doubling, capped at 200, equal jitter (>= half):
     * waits >= 50 + 100 + 100 ms before the 4th try */
    struct dt_httpc_opts o = { .retries = 3, .backoff_ms = 100, .backoff_max_ms = 200 };
    dt_error_t err = { "" };
    dt_httpc_t *c = dt_httpc_create (base, &o, &err);
    json_t *reply = NULL;
    long status;

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    atomic_store (&flaky_left, 100);
    int64_t t0 = dt_mono_ms ();
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/flaky", NULL, &status, &reply, &err), 0);
    CU_ASSERT (dt_mono_ms () - t0 >= 250);
    CU_ASSERT_EQUAL (status, 503);
    json_decref (reply);
    dt_httpc_destroy (c);
}

static void test_connection_refused (void)
{
    char url[64];
    dt_error_t err = { "" };
    json_t *reply = (json_t *)1;
    long status = -5;

    snprintf (url, sizeof (url), "http://127.0.0.1:%d", dead_port ());
    dt_httpc_t *c = dt_httpc_create (url, &fast, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    errno = 0;
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/v1/jobs", NULL, &status, &reply, &err),
                     -1);
    CU_ASSERT_EQUAL (errno, ECONNREFUSED);
    CU_ASSERT_EQUAL (status, -5);
    CU_ASSERT_PTR_EQUAL (reply, (json_t *)1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, url));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "after retries"));
    dt_httpc_destroy (c);

    /* bad base URLs */
    errno = 0;
    CU_ASSERT_PTR_NULL (dt_httpc_create ("ftp://x", NULL, &err));
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NULL (dt_httpc_create ("127.0.0.1:80", NULL, &err));
    CU_ASSERT_PTR_NULL (dt_httpc_create (NULL, NULL, &err));
}

static void test_keepalive (void)
{
    struct raw r;
    char url[64];
    dt_error_t err = { "" };
    long status;

    CU_ASSERT_FATAL (raw_start (&r, false) == 0);
    snprintf (url, sizeof (url), "http://127.0.0.1:%d/", r.port);
    dt_httpc_t *c = dt_httpc_create (url, &fast, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    for (int i = 0; i < 20; i++) {
        json_t *reply = NULL;
        CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/x", NULL, &status, &reply, &err), 0);
        CU_ASSERT_EQUAL (status, 200);
        CU_ASSERT_EQUAL (json_integer_value (json_object_get (reply, "data")), 1);
        json_decref (reply);
    }
    /* 20 calls, one TCP connection */
    CU_ASSERT_EQUAL (atomic_load (&r.accepts), 1);
    dt_httpc_destroy (c);
    raw_stop (&r);
}

static void test_total_timeout (void)
{
    struct raw r;
    char url[64];
    dt_error_t err = { "" };
    long status;
    struct dt_httpc_opts o = {
        .connect_timeout_ms = 1000,
        .total_timeout_ms = 300,
        .retries = 1,
        .backoff_ms = 10,
        .backoff_max_ms = 10,
    };

    CU_ASSERT_FATAL (raw_start (&r, true) == 0);
    snprintf (url, sizeof (url), "http://127.0.0.1:%d", r.port);
    dt_httpc_t *c = dt_httpc_create (url, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    errno = 0;
    json_t *reply = NULL;
    CU_ASSERT_EQUAL (dt_httpc_json (c, "GET", "/hang", NULL, &status, &reply, &err), -1);
    CU_ASSERT_EQUAL (errno, ETIMEDOUT);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "/hang"));
    /* timed-out requests are retried: two connections were made */
    CU_ASSERT_EQUAL (atomic_load (&r.accepts), 2);
    dt_httpc_destroy (c);
    raw_stop (&r);
}

static const struct dt_unit_test tests[] = {
    { "JSON round trip, headers, methods, non-JSON reply", test_json_roundtrip },
    { "4xx/500 returned, not retried", test_4xx_not_retried },
    { "502/503/504 retried up to the limit", test_503_retried },
    { "backoff waits at least the jittered minimum", test_backoff_lower_bound },
    { "connection refused after retries", test_connection_refused },
    { "keep-alive: one connection for many calls", test_keepalive },
    { "total timeout against a silent server", test_total_timeout },
    { NULL, NULL },
};

int main (void)
{
    dt_error_t err;
    int rc;

    dt_log_init ("test_httpc", DT_LOG_STDERR, LOG_NOTICE);
    if (!(srv = dt_httpd_create ("127.0.0.1", 0, 1 << 20, &err))) {
        fprintf (stderr, "%s\n", err.text);
        return 99;
    }
    if (dt_httpd_route (srv, "POST", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "PUT", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "PATCH", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "DELETE", "/echo", echo_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/flaky", flaky_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/status/{code}", status_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/text", text_cb, NULL) < 0)
        return 99;
    snprintf (base, sizeof (base), "http://127.0.0.1:%d", dt_httpd_port (srv));
    if (pthread_create (&srv_thread, NULL, srv_loop, NULL) != 0)
        return 99;
    rc = dt_unit_run ("httpc", tests);
    atomic_store (&srv_stop, 1);
    pthread_join (srv_thread, NULL);
    dt_httpd_destroy (srv);
    return rc;
}
