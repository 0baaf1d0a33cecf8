/* test_auth.c: who is asking (orchestrator/auth.c), on a real HTTP server
 * on 127.0.0.1: the bearer token of an agent's request (Authorization
 * header forms), the user of an AuthType=none request (X-Dtctl-Uid, or the
 * daemon's own uid; a bad value refused), an AuthType=munge request without
 * or with a bad credential refused; and new tokens. */
#include <config.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/httpd.h"
#include "orchestrator/auth.h"
#include "tests/unit/unit.h"

static dt_httpd_t *srv;
static pthread_t srv_thread;
static atomic_int srv_stop;
static char base[64];
static struct ctld_config cfg;

/* GET /who: what auth.c makes of the request. */
static void who_cb (dt_http_req_t *req, void *arg)
{
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    dt_error_t err = { "" };
    int rc = auth_user (&cfg, req, &uid, &gid, &err);
    dt_http_reply_json (req, 200,
                        json_pack ("{s:i s:i s:i s:s s:s?}", "rc", rc, "uid", (int)uid,
                                   "gid", (int)gid, "error", err.text, "bearer",
                                   auth_bearer (req)));
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

static size_t write_cb (char *p, size_t size, size_t n, void *arg)
{
    char *buf = arg;
    size_t have = strlen (buf), add = size * n;
    if (have + add >= 4096)
        add = 4095 - have;
    memcpy (buf + have, p, add);
    buf[have + add] = '\0';
    return size * n;
}

/* GET /who with the given header lines; the answer's data (new). */
static json_t *who (const char *h1, const char *h2)
{
    char body[4096] = "", url[128];
    struct curl_slist *hdrs = NULL;
    CURL *h = curl_easy_init ();
    if (h1)
        hdrs = curl_slist_append (hdrs, h1);
    if (h2)
        hdrs = curl_slist_append (hdrs, h2);
    snprintf (url, sizeof (url), "%s/who", base);
    curl_easy_setopt (h, CURLOPT_URL, url);
    curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt (h, CURLOPT_WRITEDATA, body);
    curl_easy_setopt (h, CURLOPT_TIMEOUT, 20L);
    if (hdrs)
        curl_easy_setopt (h, CURLOPT_HTTPHEADER, hdrs);
    CU_ASSERT_EQUAL (curl_easy_perform (h), CURLE_OK);
    curl_easy_cleanup (h);
    curl_slist_free_all (hdrs);
    json_t *j = json_loads (body, 0, NULL),
           *d = json_incref (json_object_get (j, "data"));
    json_decref (j);
    CU_ASSERT_PTR_NOT_NULL (d);
    return d;
}

static const char *bearer_of (const char *header)
{
    static char out[128];
    json_t *d = who (header, NULL);
    json_t *b = json_object_get (d, "bearer");
    snprintf (out, sizeof (out), "%s",
              json_is_string (b) ? json_string_value (b) : "(none)");
    json_decref (d);
    return out;
}

static void test_bearer (void)
{
    CU_ASSERT_STRING_EQUAL (bearer_of (NULL), "(none)");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: Bearer abc123"), "abc123");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: bearer    abc123"), "abc123");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: BEARER x"), "x");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: Basic YWxhZGRpbg=="), "(none)");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: Bearer"), "(none)");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: Bearer   "), "(none)");
    CU_ASSERT_STRING_EQUAL (bearer_of ("Authorization: Bearerabc"), "(none)");
}

static void test_user_none (void)
{
    json_t *d;
    cfg.auth = AUTH_NONE;
    d = who (NULL, NULL); /* no header: the daemon's own user */
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "rc")), 0);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "uid")), (int)getuid ());
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "gid")), (int)getgid ());
    json_decref (d);
    /* No header names another user: X-Dtctl-Uid, well formed or not, is
     * ignored, and the request is still the daemon's own. */
    const char *hdr[] = { "X-Dtctl-Uid: 0", "X-Dtctl-Uid: 54321", "X-Dtctl-Uid: 12x",
                          "X-Dtctl-Uid: root" };
    for (size_t i = 0; i < sizeof (hdr) / sizeof (hdr[0]); i++) {
        d = who (hdr[i], NULL);
        CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "rc")), 0);
        CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "uid")), (int)getuid ());
        CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "gid")), (int)getgid ());
        json_decref (d);
    }
}

static void test_user_munge (void)
{
    json_t *d;
    cfg.auth = AUTH_MUNGE;
    d = who (NULL, "X-Dtctl-Uid: 0"); /* the AuthType=none header means nothing here */
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "rc")), -1);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (json_string_value (json_object_get (d, "error")), "X-Munge-Credential"));
    json_decref (d);
    d = who ("X-Munge-Credential: MUNGE:not-a-credential:", NULL);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (d, "rc")), -1);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (json_string_value (json_object_get (d, "error")), "MUNGE"));
    json_decref (d);
    cfg.auth = AUTH_NONE;
}

static void test_token (void)
{
    char a[AUTH_TOKEN_LEN + 1], b[AUTH_TOKEN_LEN + 1];
    dt_error_t err;
    CU_ASSERT_EQUAL (auth_token_new (a, &err), 0);
    CU_ASSERT_EQUAL (auth_token_new (b, &err), 0);
    CU_ASSERT_EQUAL (strlen (a), AUTH_TOKEN_LEN);
    CU_ASSERT_EQUAL (strspn (a, "0123456789abcdef"), AUTH_TOKEN_LEN);
    CU_ASSERT_STRING_NOT_EQUAL (a, b);
    char name[64];
    CU_ASSERT_STRING_EQUAL (auth_user_name (0, name, sizeof (name)), "root");
    CU_ASSERT_STRING_EQUAL (auth_user_name (54321, name, sizeof (name)), "uid54321");
}

static const struct dt_unit_test tests[] = {
    { "bearer tokens: the Authorization header's forms", test_bearer },
    { "AuthType=none: X-Dtctl-Uid or the daemon's user; bad values refused",
      test_user_none },
    { "AuthType=munge: no credential, a bad one: refused", test_user_munge },
    { "tokens: 256 random bits in hex; user names", test_token },
    { NULL, NULL },
};

int main (void)
{
    dt_error_t err;
    curl_global_init (CURL_GLOBAL_DEFAULT);
    cfg.auth = AUTH_NONE;
    if (!(srv = dt_httpd_create ("127.0.0.1", 0, 4096, &err)) ||
        dt_httpd_route (srv, "GET", "/who", who_cb, NULL) < 0) {
        fprintf (stderr, "httpd: %s\n", err.text);
        return 99;
    }
    snprintf (base, sizeof (base), "http://127.0.0.1:%d", dt_httpd_port (srv));
    if (pthread_create (&srv_thread, NULL, srv_loop, NULL) != 0)
        return 99;
    int rc = dt_unit_run ("auth", tests);
    atomic_store (&srv_stop, 1);
    pthread_join (srv_thread, NULL);
    dt_httpd_destroy (srv);
    curl_global_cleanup ();
    return rc;
}
