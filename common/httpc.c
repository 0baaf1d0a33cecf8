/* httpc.c: HTTP/JSON client over libcurl with keep-alive and retries
 * (see httpc.h).
 *
 * One easy handle per client: curl keeps its connection cache in the
 * handle, so reusing it (curl_easy_reset between requests keeps live
 * connections) gives keep-alive for free.  A client is used by one thread.
 */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/httpc.h"
#include "common/jsonx.h"
#include "common/log.h"

static const struct dt_httpc_opts httpc_defaults = {
    .connect_timeout_ms = 2000,
    .total_timeout_ms = 10000,
    .retries = 3,
    .backoff_ms = 100,
    .backoff_max_ms = 2000,
};

/* A reply larger than this is refused: no dtctl answer comes close, and a
 * runaway peer must not exhaust the CLI's or the agent's memory. */
static const size_t httpc_max_reply = 256 * 1024 * 1024;

struct dt_httpc {
    CURL *curl;
    char *base;
    struct dt_httpc_opts opts;
    struct curl_slist *headers; /* set with dt_httpc_set_header */
    unsigned int seed;          /* jitter */
};

struct buf {
    char *data;
    size_t len;
    size_t cap;
    bool overflow;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once (void)
{
    curl_global_init (CURL_GLOBAL_DEFAULT);
}

void dt_httpc_destroy (dt_httpc_t *c)
{
    if (c) {
        int saved = errno;
        if (c->curl)
            curl_easy_cleanup (c->curl);
        curl_slist_free_all (c->headers);
        free (c->base);
        free (c);
        errno = saved;
    }
}

dt_httpc_t *dt_httpc_create (const char *base_url, const struct dt_httpc_opts *opts,
                             dt_error_t *err)
{
    dt_httpc_t *c;
    size_t l;

    if (!base_url ||
        (strncmp (base_url, "http://", 7) && strncmp (base_url, "https://", 8))) {
        errnoprintf (err, EINVAL, "invalid base URL '%s' (expected http://host:port)",
                     base_url ? base_url : "(null)");
        return NULL;
    }
    pthread_once (&curl_once, curl_init_once);
    if (!(c = calloc (1, sizeof (*c))) || !(c->base = strdup (base_url))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    l = strlen (c->base);
    while (l > 0 && c->base[l - 1] == '/')
        c->base[--l] = '\0';
    c->opts = opts ? *opts : httpc_defaults;
    if (c->opts.connect_timeout_ms <= 0)
        c->opts.connect_timeout_ms = httpc_defaults.connect_timeout_ms;
    if (c->opts.total_timeout_ms <= 0)
        c->opts.total_timeout_ms = httpc_defaults.total_timeout_ms;
    if (c->opts.retries < 0)
        c->opts.retries = 0;
    if (c->opts.backoff_ms <= 0)
        c->opts.backoff_ms = httpc_defaults.backoff_ms;
    if (c->opts.backoff_max_ms < c->opts.backoff_ms)
        c->opts.backoff_max_ms = c->opts.backoff_ms;
    c->seed = (unsigned int)time (NULL) ^ ((unsigned int)getpid () << 16);
    if (!(c->curl = curl_easy_init ())) {
        errnoprintf (err, ENOMEM, "cannot create curl handle");
        goto error;
    }
    return c;
error:
    dt_httpc_destroy (c);
    return NULL;
}

int dt_httpc_set_header (dt_httpc_t *c, const char *header)
{
    struct curl_slist *l;
    if (!c || !header || !strchr (header, ':')) {
        errno = EINVAL;
        return -1;
    }
    if (!(l = curl_slist_append (c->headers, header))) {
        errno = ENOMEM;
        return -1;
    }
    c->headers = l;
    return 0;
}

void dt_httpc_clear_headers (dt_httpc_t *c)
{
    if (!c)
        return;
    curl_slist_free_all (c->headers);
    c->headers = NULL;
}

static size_t write_cb (char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;

    if (b->len + n > httpc_max_reply) {
        b->overflow = true;
        return 0; /* makes curl fail with CURLE_WRITE_ERROR */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *nd = realloc (b->data, cap);
        if (!nd)
            return 0;
        b->data = nd;
        b->cap = cap;
    }
    memcpy (b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

static bool transport_retryable (CURLcode rc)
{
    switch (rc) {
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_WRITE_ERROR:
    case CURLE_BAD_FUNCTION_ARGUMENT: return false;
    default: return true;
    }
}

static int errno_from_curl (CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT: return ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT: return ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST: return EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY: return ENOMEM;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return EINVAL;
    case CURLE_WRITE_ERROR: return EFBIG;
    default: return EIO;
    }
}

/* Capped exponential backoff with "equal jitter": half fixed, half random,
 * so that 10k agents that lost the controller at once do not come back in
 * lockstep. */
static void backoff_sleep (dt_httpc_t *c, int attempt)
{
    long d = c->opts.backoff_ms;
    for (int i = 0; i < attempt && d < c->opts.backoff_max_ms; i++)
        d *= 2;
    if (d > c->opts.backoff_max_ms)
        d = c->opts.backoff_max_ms;
    long half = d / 2;
    long ms = half + (half > 0 ? (long)(rand_r (&c->seed) % (half + 1)) : 0);
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* One exchange; returns the CURLcode. */
static CURLcode perform (dt_httpc_t *c, const char *method, const char *url,
                         const char *body, size_t body_len, struct curl_slist *headers,
                         struct buf *reply, long *status, char *errbuf)
{
    CURL *h = c->curl;
    CURLcode rc;

    curl_easy_reset (h); /* keeps the connection cache */
    errbuf[0] = '\0';
    curl_easy_setopt (h, CURLOPT_URL, url);
    curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt (h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
    curl_easy_setopt (h, CURLOPT_TIMEOUT_MS, (long)c->opts.total_timeout_ms);
    curl_easy_setopt (h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt (h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt (h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt (h, CURLOPT_WRITEDATA, reply);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85 */
    curl_easy_setopt (h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt (h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    if (body) {
        curl_easy_setopt (h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt (h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    if (!body && (!strcmp (method, "GET") || !strcmp (method, "DELETE"))) {
        /* no body: a GET-style request, with the method name swapped in */
        curl_easy_setopt (h, CURLOPT_HTTPGET, 1L);
        if (strcmp (method, "GET") != 0)
            curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, method);
    }
    else if (!strcmp (method, "HEAD"))
        curl_easy_setopt (h, CURLOPT_NOBODY, 1L);
    else {
        if (!body) {
            /* POST/PUT/PATCH without a body: send Content-Length: 0 */
            curl_easy_setopt (h, CURLOPT_POSTFIELDS, "");
            curl_easy_setopt (h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
        }
        if (strcmp (method, "POST") != 0)
            curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, method);
    }
    rc = curl_easy_perform (h);
    if (rc == CURLE_OK)
        curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, status);
    return rc;
}

int dt_httpc_raw (dt_httpc_t *c, const char *method, const char *path, const char *body,
                  size_t body_len, const char *content_type, long *status,
                  char **reply_body, size_t *reply_len, dt_error_t *err)
{
    struct curl_slist *headers = NULL;
    char errbuf[CURL_ERROR_SIZE];
    char *url = NULL;
    struct buf reply = { 0 };
    CURLcode rc = CURLE_OK;
    long st = 0;
    int attempt;

    if (!c || !method || !path || !status)
        return errnoprintf (err, EINVAL, "invalid argument");
    if (asprintf (&url, "%s%s%s", c->base, path[0] == '/' ? "" : "/", path) < 0)
        return errnoprintf (err, ENOMEM, "out of memory");
    /* The caller's headers first, then ours; "Expect:" turns off curl's
     * 100-continue round trip for larger bodies. */
    for (struct curl_slist *l = c->headers; l; l = l->next)
        headers = curl_slist_append (headers, l->data);
    if (content_type && body) {
        char ct[128];
        snprintf (ct, sizeof (ct), "Content-Type: %s", content_type);
        headers = curl_slist_append (headers, ct);
    }
    headers = curl_slist_append (headers, "Expect:");
    if (!headers) {
        free (url);
        return errnoprintf (err, ENOMEM, "out of memory");
    }

    for (attempt = 0;; attempt++) {
        reply.len = 0;
        reply.overflow = false;
        st = 0;
        rc = perform (c, method, url, body, body_len, headers, &reply, &st, errbuf);
        bool retry;
        if (rc != CURLE_OK)
            retry = transport_retryable (rc) && !reply.overflow;
        else
            retry = (st == 502 || st == 503 || st == 504);
        if (!retry || attempt >= c->opts.retries)
            break;
        dt_log (LOG_DEBUG, "httpc: %s %s: %s, retrying (%d/%d)", method, url,
                rc != CURLE_OK ? (errbuf[0] ? errbuf : curl_easy_strerror (rc))
                               : "gateway error",
                attempt + 1, c->opts.retries);
        backoff_sleep (c, attempt);
    }
    curl_slist_free_all (headers);
    if (rc != CURLE_OK) {
        int e = reply.overflow ? EFBIG : errno_from_curl (rc);
        errnoprintf (err, e, "%s %s: %s%s", method, url,
                     reply.overflow ? "reply too large"
                                    : (errbuf[0] ? errbuf : curl_easy_strerror (rc)),
                     attempt > 0 ? " (after retries)" : "");
        free (url);
        free (reply.data);
        return -1;
    }
    free (url);
    *status = st;
    if (reply_len)
        *reply_len = reply.len;
    if (reply_body) {
        if (!reply.data && !(reply.data = calloc (1, 1)))
            return errnoprintf (err, ENOMEM, "out of memory");
        *reply_body = reply.data;
    }
    else
        free (reply.data);
    return 0;
}

int dt_httpc_json (dt_httpc_t *c, const char *method, const char *path,
                   const json_t *body, long *status, json_t **reply, dt_error_t *err)
{
    char *s = NULL;
    char *rbody = NULL;
    size_t rlen = 0;
    int rc;

    if (body && !(s = dt_json_dumps (body)))
        return errnoprintf (err, ENOMEM, "out of memory");
    rc = dt_httpc_raw (c, method, path, s, s ? strlen (s) : 0, "application/json", status,
                       &rbody, &rlen, err);
    free (s);
    if (rc < 0)
        return -1;
    if (reply) {
        *reply = rlen > 0 ? json_loadb (rbody, rlen, 0, NULL) : NULL;
    }
    free (rbody);
    return 0;
}

const char *dt_httpc_envelope_error (const json_t *reply)
{
    json_t *errors, *e, *text;
    if (!json_is_object (reply) || !(errors = json_object_get (reply, "errors")) ||
        !json_is_array (errors) || !(e = json_array_get (errors, 0)) ||
        !(text = json_object_get (e, "error")) || !json_is_string (text))
        return NULL;
    return json_string_value (text);
}
