/* test_httpd.c: the HTTP server on real sockets on 127.0.0.1.
 *
 * The server runs its event loop in a thread (as dtctld's main loop would);
 * the test thread is the client, using libcurl and raw sockets.
 */
#include <config.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/httpd.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "tests/unit/unit.h"

#define MAX_BODY 4096

static dt_httpd_t *srv;
static pthread_t srv_thread;
static atomic_int srv_stop;
static char base[64];

/* --- handlers (run in the server thread) --------------------------------- */

static void get_job_cb (dt_http_req_t *req, void *arg)
{
    const char *q = dt_http_req_query (req, "verbose");
    const char *h = dt_http_req_header (req, "X-Test");
    json_t *data = json_pack (
      "{s:s s:s s:s* s:s* s:s}", "id", dt_http_req_param (req, "id"), "method",
      dt_http_req_method (req), "verbose", q, "hdr", h, "peer", dt_http_req_peer (req));
    dt_http_reply_json (req, 200, data);
}

static void get_event_cb (dt_http_req_t *req, void *arg)
{
    dt_http_reply_json (req, 200,
                        json_pack ("{s:s s:s s:s}", "id", dt_http_req_param (req, "id"),
                                   "n", dt_http_req_param (req, "n"), "path",
                                   dt_http_req_path (req)));
}

static void del_job_cb (dt_http_req_t *req, void *arg)
{
    dt_http_reply_json (req, 200, NULL);
}

static void post_job_cb (dt_http_req_t *req, void *arg)
{
    size_t len;
    const char *body = dt_http_req_body (req, &len);
    dt_error_t err;
    json_t *spec, *name = NULL;
    const char *s;

    if (!(spec = dt_json_parse (body, len, &err))) {
        dt_http_reply_error (req, 400, NULL, "%s", err.text);
        return;
    }
    if (dt_json_get_str (spec, "", "name", true, 64, false, &s, &err) < 0) {
        dt_http_reply_error (req, 400, "name", "%s", err.text);
        json_decref (spec);
        return;
    }
    name = json_string (s);
    json_decref (spec);
    dt_http_add_warning (req, "field %s is deprecated", "foo");
    dt_http_add_warning (req, "second warning");
    dt_http_reply_json (req, 201,
                        json_pack ("{s:o s:I}", "name", name, "len", (json_int_t)len));
}

static void metrics_cb (dt_http_req_t *req, void *arg)
{
    const char *text = "# TYPE dt_jobs gauge\ndt_jobs 3\n";
    dt_http_reply_text (req, 200, "text/plain; version=0.0.4", text, strlen (text));
}

static void noanswer_cb (dt_http_req_t *req, void *arg)
{
}

static void *srv_loop (void *arg)
{
    int fd = dt_httpd_fd (srv);
    while (!atomic_load (&srv_stop)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int t = dt_httpd_timeout_ms (srv);
        if (t < 0 || t > 20)
            t = 20;
        poll (&p, 1, t);
        dt_httpd_run (srv);
    }
    return NULL;
}

static int start_server (void)
{
    dt_error_t err;
    if (!(srv = dt_httpd_create ("127.0.0.1", 0, MAX_BODY, &err))) {
        fprintf (stderr, "httpd: %s\n", err.text);
        return -1;
    }
    if (dt_httpd_route (srv, "GET", "/v1/jobs/{id}", get_job_cb, NULL) < 0 ||
        dt_httpd_route (srv, "DELETE", "/v1/jobs/{id}", del_job_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/v1/jobs/{id}/events/{n}", get_event_cb, NULL) < 0 ||
        dt_httpd_route (srv, "POST", "/v1/jobs", post_job_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/metrics", metrics_cb, NULL) < 0 ||
        dt_httpd_route (srv, "GET", "/noanswer", noanswer_cb, NULL) < 0)
        return -1;
    snprintf (base, sizeof (base), "http://127.0.0.1:%d", dt_httpd_port (srv));
    return pthread_create (&srv_thread, NULL, srv_loop, NULL) == 0 ? 0 : -1;
}

static void stop_server (void)
{
    atomic_store (&srv_stop, 1);
    pthread_join (srv_thread, NULL);
    dt_httpd_destroy (srv);
}

/* --- client helpers ------------------------------------------------------ */

struct reply {
    long status;
    char body[65536];
    size_t len;
    char ctype[128];
    char allow[128];
};

static size_t write_cb (char *p, size_t sz, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t k = sz * n;
    if (r->len + k >= sizeof (r->body))
        k = sizeof (r->body) - 1 - r->len;
    memcpy (r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return sz * n;
}

static size_t header_cb (char *p, size_t sz, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t k = sz * n;
    if (k > 6 && !strncasecmp (p, "Allow:", 6))
        snprintf (r->allow, sizeof (r->allow), "%.*s", (int)(k - 9), p + 7);
    return k;
}

/* One request on handle 'h' (created if NULL). Returns the parsed JSON body
 * (or NULL) and fills r. */
static json_t *request (CURL *h, const char *method, const char *path, const char *body,
                        long body_len, struct curl_slist *hdrs, struct reply *r)
{
    char url[256];
    bool own = !h;
    char *ct = NULL;

    memset (r, 0, sizeof (*r));
    if (own)
        h = curl_easy_init ();
    curl_easy_reset (h);
    snprintf (url, sizeof (url), "%s%s", base, path);
    curl_easy_setopt (h, CURLOPT_URL, url);
    curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt (h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt (h, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt (h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt (h, CURLOPT_TIMEOUT, 20L);
    if (hdrs)
        curl_easy_setopt (h, CURLOPT_HTTPHEADER, hdrs);
    if (body) {
        curl_easy_setopt (h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt (h, CURLOPT_POSTFIELDSIZE, body_len);
    }
    CURLcode rc = curl_easy_perform (h);
    if (rc != CURLE_OK)
        fprintf (stderr, "curl %s %s: %s\n", method, path, curl_easy_strerror (rc));
    CU_ASSERT_EQUAL (rc, CURLE_OK);
    curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo (h, CURLINFO_CONTENT_TYPE, &ct);
    if (ct)
        snprintf (r->ctype, sizeof (r->ctype), "%s", ct);
    if (own)
        curl_easy_cleanup (h);
    return json_loads (r->body, 0, NULL);
}

/* Check the envelope shape and return its first error text (or NULL). */
static const char *envelope (json_t *v, size_t nerrors, size_t nwarnings)
{
    CU_ASSERT_FATAL (json_is_object (v));
    CU_ASSERT_EQUAL (json_object_size (v), 3);
    CU_ASSERT_PTR_NOT_NULL (json_object_get (v, "data"));
    CU_ASSERT (json_is_array (json_object_get (v, "errors")));
    CU_ASSERT (json_is_array (json_object_get (v, "warnings")));
    CU_ASSERT_EQUAL (json_array_size (json_object_get (v, "errors")), nerrors);
    CU_ASSERT_EQUAL (json_array_size (json_object_get (v, "warnings")), nwarnings);
    json_t *e = json_array_get (json_object_get (v, "errors"), 0);
    return e ? json_string_value (json_object_get (e, "error")) : NULL;
}

/* --- tests --------------------------------------------------------------- */

static void test_get_params (void)
{
    struct reply r;
    struct curl_slist *h = curl_slist_append (NULL, "X-Test: hello");
    json_t *v = request (NULL, "GET", "/v1/jobs/42?verbose=yes", NULL, 0, h, &r);
    curl_slist_free_all (h);

    CU_ASSERT_EQUAL (r.status, 200);
    CU_ASSERT_STRING_EQUAL (r.ctype, "application/json");
    CU_ASSERT_PTR_NULL (envelope (v, 0, 0));
    json_t *d = json_object_get (v, "data");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "id")), "42");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "method")), "GET");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "verbose")), "yes");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "hdr")), "hello");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "peer")), "127.0.0.1");
    json_decref (v);

    /* no query, no header */
    v = request (NULL, "GET", "/v1/jobs/abc", NULL, 0, NULL, &r);
    d = json_object_get (v, "data");
    CU_ASSERT_PTR_NULL (json_object_get (d, "verbose"));
    json_decref (v);

    /* two params */
    v = request (NULL, "GET", "/v1/jobs/7/events/3", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 200);
    d = json_object_get (v, "data");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "id")), "7");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "n")), "3");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "path")),
                            "/v1/jobs/7/events/3");
    json_decref (v);

    /* DELETE with null data */
    v = request (NULL, "DELETE", "/v1/jobs/7", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 200);
    envelope (v, 0, 0);
    CU_ASSERT (json_is_null (json_object_get (v, "data")));
    json_decref (v);
}

static void test_404_405 (void)
{
    struct reply r;
    json_t *v = request (NULL, "GET", "/v1/nothing", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 404);
    const char *e = envelope (v, 1, 0);
    CU_ASSERT_PTR_NOT_NULL (e);
    CU_ASSERT_PTR_NOT_NULL (e ? strstr (e, "/v1/nothing") : NULL);
    CU_ASSERT (json_is_null (json_object_get (v, "data")));
    json_decref (v);

    /* one segment too many / too few */
    v = request (NULL, "GET", "/v1/jobs/1/events", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 404);
    json_decref (v);
    v = request (NULL, "GET", "/", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 404);
    json_decref (v);

    v = request (NULL, "PUT", "/v1/jobs/5", "{}", 2, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 405);
    e = envelope (v, 1, 0);
    CU_ASSERT_PTR_NOT_NULL (e ? strstr (e, "PUT") : NULL);
    CU_ASSERT_STRING_EQUAL (r.allow, "GET, DELETE");
    json_decref (v);

    v = request (NULL, "GET", "/v1/jobs", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 405);
    CU_ASSERT_STRING_EQUAL (r.allow, "POST");
    json_decref (v);
}

static void test_post_bodies (void)
{
    struct reply r;
    const char *good = "{\"name\":\"resnet\"}";
    json_t *v = request (NULL, "POST", "/v1/jobs", good, strlen (good), NULL, &r);
    CU_ASSERT_EQUAL (r.status, 201);
    envelope (v, 0, 2);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_array_get (json_object_get (v, "warnings"), 0)),
      "field foo is deprecated");
    json_t *d = json_object_get (v, "data");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (d, "name")), "resnet");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "len")),
                     (json_int_t)strlen (good));
    json_decref (v);

    /* malformed, truncated, empty */
    const char *bad[] = { "{\"name\":", "{name:1}", "", "[1,2", NULL };
    for (int i = 0; bad[i]; i++) {
        v = request (NULL, "POST", "/v1/jobs", bad[i], strlen (bad[i]), NULL, &r);
        CU_ASSERT_EQUAL (r.status, 400);
        const char *e = envelope (v, 1, 0);
        CU_ASSERT_PTR_NOT_NULL (e ? strstr (e, "invalid JSON") : NULL);
        json_decref (v);
    }

    /* wrong field type: error names the field */
    const char *wrong = "{\"name\":5}";
    v = request (NULL, "POST", "/v1/jobs", wrong, strlen (wrong), NULL, &r);
    CU_ASSERT_EQUAL (r.status, 400);
    CU_ASSERT_STRING_EQUAL (envelope (v, 1, 0), "name: expected string");
    json_t *e0 = json_array_get (json_object_get (v, "errors"), 0);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (e0, "field")), "name");
    json_decref (v);
}

static void test_413 (void)
{
    struct reply r;
    char *big = malloc (MAX_BODY + 100);
    CU_ASSERT_PTR_NOT_NULL_FATAL (big);

    /* exactly max_body is accepted */
    memset (big, ' ', MAX_BODY);
    memcpy (big, "{\"name\":\"x\"}", 12);
    json_t *v = request (NULL, "POST", "/v1/jobs", big, MAX_BODY, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 201);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_object_get (v, "data"), "len")),
      MAX_BODY);
    json_decref (v);

    /* one byte more: 413 with the envelope */
    memset (big, ' ', MAX_BODY + 1);
    memcpy (big, "{\"name\":\"x\"}", 12);
    v = request (NULL, "POST", "/v1/jobs", big, MAX_BODY + 1, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 413);
    const char *e = envelope (v, 1, 0);
    CU_ASSERT_PTR_NOT_NULL (e ? strstr (e, "larger than 4096 bytes") : NULL);
    json_decref (v);

    /* chunked body without Content-Length, over the limit */
    struct curl_slist *h = curl_slist_append (NULL, "Transfer-Encoding: chunked");
    v = request (NULL, "POST", "/v1/jobs", big, MAX_BODY + 50, h, &r);
    curl_slist_free_all (h);
    CU_ASSERT_EQUAL (r.status, 413);
    json_decref (v);
    free (big);
}

static void test_text_and_noanswer (void)
{
    struct reply r;
    json_t *v = request (NULL, "GET", "/metrics", NULL, 0, NULL, &r);
    CU_ASSERT_PTR_NULL (v);
    CU_ASSERT_EQUAL (r.status, 200);
    CU_ASSERT_STRING_EQUAL (r.ctype, "text/plain; version=0.0.4");
    CU_ASSERT_STRING_EQUAL (r.body, "# TYPE dt_jobs gauge\ndt_jobs 3\n");

    v = request (NULL, "GET", "/noanswer", NULL, 0, NULL, &r);
    CU_ASSERT_EQUAL (r.status, 500);
    envelope (v, 1, 0);
    json_decref (v);
}

static void test_keepalive (void)
{
    struct reply r;
    long total = 0, n;
    CURL *h = curl_easy_init ();

    for (int i = 0; i < 50; i++) {
        json_t *v = request (h, "GET", "/v1/jobs/1", NULL, 0, NULL, &r);
        CU_ASSERT_EQUAL (r.status, 200);
        json_decref (v);
        curl_easy_getinfo (h, CURLINFO_NUM_CONNECTS, &n);
        total += n;
    }
    /* 50 requests, one TCP connection */
    CU_ASSERT_EQUAL (total, 1);
    curl_easy_cleanup (h);
}

/* Read one HTTP response with Content-Length from a blocking socket. */
static int read_response (int fd, int *status)
{
    char buf[8192];
    size_t len = 0;
    char *hdr_end = NULL;

    while (!hdr_end) {
        ssize_t n = read (fd, buf + len, sizeof (buf) - 1 - len);
        if (n <= 0)
            return -1;
        len += n;
        buf[len] = '\0';
        hdr_end = strstr (buf, "\r\n\r\n");
    }
    if (sscanf (buf, "HTTP/1.1 %d", status) != 1)
        return -1;
    char *cl = strcasestr (buf, "Content-Length:");
    if (!cl)
        return -1;
    size_t want = (hdr_end + 4 - buf) + strtoul (cl + 15, NULL, 10);
    while (len < want) {
        ssize_t n = read (fd, buf + len, sizeof (buf) - 1 - len);
        if (n <= 0)
            return -1;
        len += n;
    }
    return 0;
}

static void test_many_connections (void)
{
    /* More than select()'s 1024 limit, all open at once, each used twice. */
    enum { N = 1200 };
    static int fds[N];
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_port = htons (dt_httpd_port (srv)) };
    const char *req = "GET /v1/jobs/9 HTTP/1.1\r\nHost: x\r\n\r\n";
    int ok = 0, open = 0;

    inet_pton (AF_INET, "127.0.0.1", &sa.sin_addr);
    for (int i = 0; i < N; i++) {
        fds[i] = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || connect (fds[i], (struct sockaddr *)&sa, sizeof (sa)) < 0) {
            fprintf (stderr, "connect %d: %s\n", i, strerror (errno));
            break;
        }
        open++;
    }
    CU_ASSERT_EQUAL_FATAL (open, N);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            if (write (fds[i], req, strlen (req)) != (ssize_t)strlen (req))
                break;
        for (int i = 0; i < N; i++) {
            int st = 0;
            struct timeval tv = { .tv_sec = 30 };
            setsockopt (fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv));
            if (read_response (fds[i], &st) == 0 && st == 200)
                ok++;
        }
    }
    CU_ASSERT_EQUAL (ok, 2 * N);
    for (int i = 0; i < open; i++)
        close (fds[i]);
}

static void test_port_in_use (void)
{
    dt_error_t err = { "" };
    errno = 0;
    dt_httpd_t *h2 = dt_httpd_create ("127.0.0.1", dt_httpd_port (srv), 1024, &err);
    CU_ASSERT_PTR_NULL (h2);
    CU_ASSERT_EQUAL (errno, EADDRINUSE);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "Address already in use"));
    dt_httpd_destroy (h2);

    errno = 0;
    CU_ASSERT_PTR_NULL (dt_httpd_create ("not-an-address", 0, 1024, &err));
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NULL (dt_httpd_create ("127.0.0.1", 70000, 1024, &err));
    CU_ASSERT_EQUAL (errno, EINVAL);

    /* bad route patterns */
    dt_httpd_t *h = dt_httpd_create ("127.0.0.1", 0, 1024, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (h);
    CU_ASSERT (dt_httpd_port (h) > 0);
    CU_ASSERT (dt_httpd_fd (h) >= 0);
    CU_ASSERT_EQUAL (dt_httpd_route (h, "GET", "no-slash", noanswer_cb, NULL), -1);
    /* up to 12 params (httpd.h), up to 16 segments */
    errno = 0;
    CU_ASSERT_EQUAL (
      dt_httpd_route (h, "GET", "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}/{j}/{k}/{l}/{m}",
                      noanswer_cb, NULL),
      -1);
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_EQUAL (
      dt_httpd_route (h, "GET", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q", noanswer_cb, NULL),
      -1);
    CU_ASSERT_EQUAL (dt_httpd_route (h, "GET",
                                     "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}/{j}/{k}/{l}",
                                     noanswer_cb, NULL),
                     0);
    CU_ASSERT_EQUAL (dt_httpd_route (h, "GET", "/{a}/{b}/{c}/{d}", noanswer_cb, NULL), 0);
    dt_httpd_destroy (h);
}

static char logpath[] = "/tmp/test_httpd_log.XXXXXX";

static void test_access_log (void)
{
    struct reply r;
    int fd = mkstemp (logpath), saved = dup (2);
    char buf[4096] = "";

    CU_ASSERT_FATAL (fd >= 0);
    dt_log_set_level (LOG_INFO);
    dup2 (fd, 2);
    json_decref (request (NULL, "GET", "/v1/jobs/77", NULL, 0, NULL, &r));
    json_decref (request (NULL, "GET", "/v1/missing", NULL, 0, NULL, &r));
    dt_log_set_level (LOG_NOTICE); /* access lines are LOG_INFO: now silent */
    json_decref (request (NULL, "GET", "/v1/jobs/78", NULL, 0, NULL, &r));
    dup2 (saved, 2);
    close (saved);
    lseek (fd, 0, SEEK_SET);
    ssize_t n = read (fd, buf, sizeof (buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close (fd);
    unlink (logpath);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (buf, "test_httpd: 127.0.0.1 \"GET /v1/jobs/77\" 200 "));
    CU_ASSERT_PTR_NOT_NULL (
      strstr (buf, "test_httpd: 127.0.0.1 \"GET /v1/missing\" 404 "));
    CU_ASSERT_PTR_NULL (strstr (buf, "/v1/jobs/78"));
}

static const struct dt_unit_test tests[] = {
    { "GET with path params, query, headers", test_get_params },
    { "404 and 405 with Allow", test_404_405 },
    { "POST bodies: good, malformed, truncated, wrong type", test_post_bodies },
    { "413 for oversized bodies (Content-Length and chunked)", test_413 },
    { "text replies; handler without answer gives 500", test_text_and_noanswer },
    { "keep-alive: 50 requests on one connection", test_keepalive },
    { "1200 concurrent keep-alive connections", test_many_connections },
    { "port in use and bad arguments", test_port_in_use },
    { "access log line per request", test_access_log },
    { NULL, NULL },
};

int main (void)
{
    int rc;

    dt_log_init ("test_httpd", DT_LOG_STDERR, LOG_NOTICE);
    curl_global_init (CURL_GLOBAL_DEFAULT);
    if (start_server () < 0)
        return 99;
    rc = dt_unit_run ("httpd", tests);
    stop_server ();
    curl_global_cleanup ();
    return rc;
}
