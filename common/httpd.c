/* httpd.c: HTTP/JSON server over libmicrohttpd, single-threaded (see httpd.h).
 *
 * MHD runs in "external select" mode with epoll: it owns no thread, the
 * owner's event loop polls dt_httpd_fd() and calls dt_httpd_run(), so every
 * handler runs on the owner's thread.  The controller must keep thousands
 * of agents' keep-alive connections open, hence the high connection limit
 * and the RLIMIT_NOFILE raise at create.
 */
#include <config.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/dtime.h"
#include "common/fdlimit.h"
#include "common/httpd.h"
#include "common/httpd_conn.h"
#include "common/httpd_int.h"
#include "common/log.h"

/* Room for 10k simulated agents plus CLIs, below a typical hard nofile limit
 * (the default of a listener; dt_httpd_listen may set its own). */
static const unsigned int httpd_connection_limit = 20000;
/* Idle keep-alive connections are closed after this many seconds; agents
 * heartbeat far more often than that, so they keep their connection. */
static const unsigned int httpd_connection_timeout_s = 300;
/* Per-connection MHD pool (request line + headers).  Bodies are kept in our
 * own buffer, so this stays small: 10k connections x 16 KiB. */
static const size_t httpd_connection_memory = 16 * 1024;
/* Asked of listen(); capped at net.core.somaxconn (backlog_note). */
static const int httpd_listen_backlog = 65535;
static const int httpd_runs_max = 64; /* MHD runs per dt_httpd_run, at most */

/* --- routes ------------------------------------------------------------- */

/* Split 'path' (modified in place) into non-empty segments. */
static int split_path (char *path, char **segs, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r (path, "/", &save); s; s = strtok_r (NULL, "/", &save)) {
        if (n == max)
            return -1;
        segs[n++] = s;
    }
    return n;
}

static bool is_param (const char *seg)
{
    size_t l = strlen (seg);
    return l > 2 && seg[0] == '{' && seg[l - 1] == '}';
}

int dt_httpd_route (dt_httpd_t *h, const char *method, const char *pattern,
                    dt_http_handler_f cb, void *arg)
{
    struct route r = { 0 };
    struct route *nr;
    int nparams = 0;

    if (!h || !method || !pattern || pattern[0] != '/' || !cb) {
        errno = EINVAL;
        return -1;
    }
    if (!(r.method = strdup (method)) || !(r.pattern = strdup (pattern)))
        goto nomem;
    if ((r.nsegs = split_path (r.pattern, r.segs, HTTPD_MAX_SEGS)) < 0)
        goto inval;
    for (int i = 0; i < r.nsegs; i++)
        if (is_param (r.segs[i]))
            nparams++;
    if (nparams > HTTPD_MAX_PARAMS)
        goto inval;
    r.cb = cb;
    r.arg = arg;
    if (!(nr = realloc (h->routes, (h->nroutes + 1) * sizeof (*nr))))
        goto nomem;
    h->routes = nr;
    h->routes[h->nroutes++] = r;
    return 0;
inval:
    free (r.method);
    free (r.pattern);
    errno = EINVAL;
    return -1;
nomem:
    free (r.method);
    free (r.pattern);
    errno = ENOMEM;
    return -1;
}

/* Find the route for req->method/path; fill params.  Sets route_status. */
static void route_match (dt_http_req_t *req)
{
    char *copy = strdup (req->path);
    char *segs[HTTPD_MAX_SEGS];
    int n;
    bool path_matched = false;

    req->route_status = 404;
    if (!copy) {
        req->route_status = 500;
        return;
    }
    n = split_path (copy, segs, HTTPD_MAX_SEGS);
    for (int i = 0; n >= 0 && i < req->h->nroutes; i++) {
        struct route *r = &req->h->routes[i];
        bool ok = (r->nsegs == n);
        for (int j = 0; ok && j < n; j++)
            if (!is_param (r->segs[j]) && strcmp (r->segs[j], segs[j]) != 0)
                ok = false;
        if (!ok)
            continue;
        path_matched = true;
        if (strcmp (r->method, req->method) != 0)
            continue;
        req->route = r;
        req->route_status = 0;
        for (int j = 0; j < n; j++) {
            if (!is_param (r->segs[j]))
                continue;
            size_t l = strlen (r->segs[j]);
            req->pnames[req->nparams] = strndup (r->segs[j] + 1, l - 2);
            req->pvalues[req->nparams] = strdup (segs[j]);
            if (!req->pnames[req->nparams] || !req->pvalues[req->nparams]) {
                req->route_status = 500;
                break;
            }
            req->nparams++;
        }
        break;
    }
    if (!req->route && path_matched)
        req->route_status = 405;
    free (copy);
}

/* "GET, POST" for the Allow header of a 405. */
static void allowed_methods (dt_http_req_t *req, char *buf, size_t len)
{
    char *copy = strdup (req->path);
    char *segs[HTTPD_MAX_SEGS];
    int n = copy ? split_path (copy, segs, HTTPD_MAX_SEGS) : -1;
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; n >= 0 && i < req->h->nroutes; i++) {
        struct route *r = &req->h->routes[i];
        bool ok = (r->nsegs == n);
        for (int j = 0; ok && j < n; j++)
            if (!is_param (r->segs[j]) && strcmp (r->segs[j], segs[j]) != 0)
                ok = false;
        if (ok && used < len) {
            int w =
              snprintf (buf + used, len - used, "%s%s", used ? ", " : "", r->method);
            if (w > 0)
                used += w;
        }
    }
    free (copy);
}

/* --- requests ----------------------------------------------------------- */

static void req_destroy (dt_http_req_t *req)
{
    if (req) {
        for (int i = 0; i < req->nparams; i++) {
            free (req->pnames[i]);
            free (req->pvalues[i]);
        }
        /* a strndup that failed in route_match may leave one half set */
        if (req->nparams < HTTPD_MAX_PARAMS) {
            free (req->pnames[req->nparams]);
            free (req->pvalues[req->nparams]);
        }
        free (req->method);
        free (req->path);
        if (req->body)
            req->h->body_bytes -= req->cap;
        free (req->body);
        if (req->data && req->data_free)
            req->data_free (req->data);
        json_decref (req->warnings);
        httpd_park_forget (req);
        free (req);
    }
}

const char *dt_http_req_method (const dt_http_req_t *req)
{
    return req->method;
}

const char *dt_http_req_path (const dt_http_req_t *req)
{
    return req->path;
}

const char *dt_http_req_param (const dt_http_req_t *req, const char *name)
{
    for (int i = 0; i < req->nparams; i++)
        if (!strcmp (req->pnames[i], name))
            return req->pvalues[i];
    return NULL;
}

const char *dt_http_req_query (const dt_http_req_t *req, const char *name)
{
    return MHD_lookup_connection_value (req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *dt_http_req_header (const dt_http_req_t *req, const char *name)
{
    return MHD_lookup_connection_value (req->conn, MHD_HEADER_KIND, name);
}

const char *dt_http_req_body (const dt_http_req_t *req, size_t *len)
{
    if (len)
        *len = req->len;
    return req->body ? req->body : "";
}

const char *dt_http_req_peer (const dt_http_req_t *req)
{
    return req->peer;
}

int dt_http_req_class (const dt_http_req_t *req)
{
    return req->cls;
}

void dt_http_req_set_data (dt_http_req_t *req, void *data, void (*free_fn) (void *))
{
    if (req->data && req->data_free)
        req->data_free (req->data);
    req->data = data;
    req->data_free = free_fn;
}

void *dt_http_req_data (const dt_http_req_t *req)
{
    return req->data;
}

/* --- replies ------------------------------------------------------------ */

static void access_log (dt_http_req_t *req)
{
    if (req->h->access_level > dt_log_get_level ())
        return;
    double ms = (dt_mono_ns () - req->start_ns) / 1e6;
    dt_log_msg (req->h->access_level, "%s \"%s %s\" %d %zu %.1fms", req->peer,
                req->method, req->path, req->status, req->reply_len, ms);
}

/* Queue 'body' (malloc'ed, stolen) with 'status'. */
static void queue (dt_http_req_t *req, int status, const char *content_type, char *body,
                   size_t len, const char *allow)
{
    struct MHD_Response *resp;

    if (req->replied) {
        dt_log (LOG_ERR, "httpd: %s %s: handler answered twice", req->method, req->path);
        free (body);
        return;
    }
    req->replied = true;
    req->status = status;
    req->reply_len = len;
    resp = MHD_create_response_from_buffer (len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free (body);
        dt_log (LOG_ERR, "httpd: %s %s: cannot create response", req->method, req->path);
        return;
    }
    MHD_add_response_header (resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (allow)
        MHD_add_response_header (resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (req->overfull) {
        /* Free the descriptor at once, and say when to come back. */
        MHD_add_response_header (resp, MHD_HTTP_HEADER_CONNECTION, "close");
        MHD_add_response_header (resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    else if (req->close)
        MHD_add_response_header (resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (MHD_queue_response (req->conn, status, resp) != MHD_YES)
        dt_log (LOG_ERR, "httpd: %s %s: cannot queue response", req->method, req->path);
    MHD_destroy_response (resp);
    access_log (req);
}

static void reply_envelope (dt_http_req_t *req, int status, json_t *data, json_t *errors,
                            const char *allow)
{
    json_t *env;
    char *s;

    /* "o" steals each reference, also when json_pack fails. */
    env = json_pack ("{s:o s:o s:o}", "data", data ? data : json_null (), "errors",
                     errors ? errors : json_array (), "warnings",
                     req->warnings ? json_incref (req->warnings) : json_array ());
    if (!env || !(s = json_dumps (env, JSON_COMPACT))) {
        json_decref (env);
        s = strdup ("{\"data\":null,\"errors\":[{\"error\":\"out of memory\"}],"
                    "\"warnings\":[]}");
        status = 500;
        if (!s)
            return;
    }
    else
        json_decref (env);
    queue (req, status, "application/json", s, strlen (s), allow);
}

void dt_http_add_warning (dt_http_req_t *req, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (buf, sizeof (buf), fmt, ap);
    va_end (ap);
    if (!req->warnings && !(req->warnings = json_array ()))
        return;
    json_array_append_new (req->warnings, json_string (buf));
}

void dt_http_reply_json (dt_http_req_t *req, int status, json_t *data)
{
    if (req->replied) {
        json_decref (data);
        queue (req, status, "", NULL, 0, NULL); /* logs the double answer */
        return;
    }
    reply_envelope (req, status, data, NULL, NULL);
}

void dt_http_reply_json_text (dt_http_req_t *req, int status, const char *data,
                              size_t len)
{
    static const char pre[] = "{\"data\":", mid[] = ",\"errors\":[],\"warnings\":";
    char *w = NULL, *s;
    size_t wl = 2, n;

    if (req->warnings && !(w = json_dumps (req->warnings, JSON_COMPACT))) {
        dt_http_reply_error (req, 500, NULL, "out of memory");
        return;
    }
    if (w)
        wl = strlen (w);
    n = sizeof (pre) - 1 + len + sizeof (mid) - 1 + wl + 1;
    if (!(s = malloc (n + 1))) {
        free (w);
        dt_http_reply_error (req, 500, NULL, "out of memory");
        return;
    }
    char *p = s;
    memcpy (p, pre, sizeof (pre) - 1);
    p += sizeof (pre) - 1;
    memcpy (p, data, len);
    p += len;
    memcpy (p, mid, sizeof (mid) - 1);
    p += sizeof (mid) - 1;
    memcpy (p, w ? w : "[]", wl);
    p += wl;
    *p++ = '}';
    *p = '\0';
    free (w);
    queue (req, status, "application/json", s, n, NULL);
}

static void reply_error_v (dt_http_req_t *req, int status, const char *field,
                           const char *allow, const char *fmt, va_list ap)
{
    char buf[512];
    json_t *e;

    vsnprintf (buf, sizeof (buf), fmt, ap);
    if (field)
        e = json_pack ("[{s:s s:s}]", "error", buf, "field", field);
    else
        e = json_pack ("[{s:s}]", "error", buf);
    reply_envelope (req, status, NULL, e, allow);
}

void dt_http_reply_error (dt_http_req_t *req, int status, const char *field,
                          const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    reply_error_v (req, status, field, NULL, fmt, ap);
    va_end (ap);
}

static void reply_error_allow (dt_http_req_t *req, int status, const char *allow,
                               const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    reply_error_v (req, status, NULL, allow, fmt, ap);
    va_end (ap);
}

void dt_http_reply_text (dt_http_req_t *req, int status, const char *content_type,
                         const char *body, size_t len)
{
    char *copy = malloc (len ? len : 1);
    if (!copy) {
        dt_http_reply_error (req, 500, NULL, "out of memory");
        return;
    }
    if (len)
        memcpy (copy, body, len);
    queue (req, status, content_type ? content_type : "text/plain", copy, len, NULL);
}

/* --- MHD callbacks ------------------------------------------------------ */

static void set_peer (dt_http_req_t *req)
{
    const union MHD_ConnectionInfo *ci;
    ci = MHD_get_connection_info (req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf (req->peer, sizeof (req->peer), "?");
    if (!ci || !ci->client_addr)
        return;
    if (ci->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ci->client_addr;
        inet_ntop (AF_INET, &in->sin_addr, req->peer, sizeof (req->peer));
    }
    else if (ci->client_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ci->client_addr;
        inet_ntop (AF_INET6, &in6->sin6_addr, req->peer, sizeof (req->peer));
    }
}

static void reply_busy (dt_http_req_t *req)
{
    dt_http_reply_error (req, 503, NULL,
                         "controller busy: request bodies buffered "
                         "at once are limited to %zu bytes (MaxBodyBuffer); retry later",
                         req->h->body_budget);
}

static void dispatch (dt_http_req_t *req)
{
    if (req->over_budget) {
        reply_busy (req);
        return;
    }
    if (req->too_big) {
        dt_http_reply_error (req, 413, NULL, "request body larger than %zu bytes",
                             req->h->max_body);
        return;
    }
    req->route->cb (req, req->route->arg);
    if (!req->replied && !req->parked) {
        dt_log (LOG_ERR, "httpd: %s %s: handler did not answer", req->method, req->path);
        dt_http_reply_error (req, 500, NULL, "internal error: no answer");
    }
}

static enum MHD_Result access_cb (void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct listener *l = cls;
    dt_httpd_t *h = l->h;
    dt_http_req_t *req = *con_cls;

    if (!req) {
        /* First call: headers only.  Answer what can be answered now
         * (404, 405, 413 by Content-Length) without reading the body. */
        const char *cl;
        if (!(req = calloc (1, sizeof (*req))))
            return MHD_NO;
        *con_cls = req;
        req->h = h;
        req->cls = l->cls;
        req->conn = conn;
        req->start_ns = dt_mono_ns ();
        if (!(req->method = strdup (method)) || !(req->path = strdup (url)))
            return MHD_NO;
        set_peer (req);
        if (httpd_refuse_overfull (l, req))
            return MHD_YES;
        route_match (req);
        if (req->route_status == 404) {
            dt_http_reply_error (req, 404, NULL, "no such resource: %s", req->path);
            return MHD_YES;
        }
        if (req->route_status == 405) {
            char allow[128];
            allowed_methods (req, allow, sizeof (allow));
            reply_error_allow (req, 405, allow, "method %s not allowed on %s",
                               req->method, req->path);
            return MHD_YES;
        }
        if (req->route_status != 0) {
            dt_http_reply_error (req, 500, NULL, "out of memory");
            return MHD_YES;
        }
        /* Authentication at header time: a request the gate refuses is
         * answered before any of its body is read or kept. */
        if (h->gate && (h->gate (req, h->gate_arg) < 0 || req->replied)) {
            if (!req->replied)
                dt_http_reply_error (req, 403, NULL, "request refused");
            return MHD_YES;
        }
        cl = MHD_lookup_connection_value (conn, MHD_HEADER_KIND,
                                          MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull (cl, &end, 10);
            if (errno == ERANGE || n > h->max_body) {
                req->too_big = true;
                dispatch (req);
            }
            else if (h->body_budget && n + h->body_bytes > h->body_budget) {
                req->over_budget = true;
                dispatch (req);
            }
        }
        return MHD_YES;
    }
    if (req->replied) {
        /* Answered early: discard whatever body still arrives. */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->too_big || req->over_budget)
            return MHD_YES;
        if (req->len + n > h->max_body) {
            /* Chunked body over the limit: stop storing, answer 413 when
             * the request ends (MHD cannot answer in mid-upload). */
            req->too_big = true;
            free (req->body);
            h->body_bytes -= req->cap;
            req->body = NULL;
            req->len = req->cap = 0;
            return MHD_YES;
        }
        if (req->len + n + 1 > req->cap) {
            size_t cap = req->cap ? req->cap : 1024;
            while (cap < req->len + n + 1)
                cap *= 2;
            if (h->body_budget && h->body_bytes - req->cap + cap > h->body_budget) {
                /* Every buffered body together is over the budget. */
                req->over_budget = true;
                free (req->body);
                h->body_bytes -= req->cap;
                req->body = NULL;
                req->len = req->cap = 0;
                return MHD_YES;
            }
            char *nb = realloc (req->body, cap);
            if (!nb)
                return MHD_NO;
            h->body_bytes += cap - req->cap;
            req->body = nb;
            req->cap = cap;
        }
        memcpy (req->body + req->len, upload_data, n);
        req->len += n;
        req->body[req->len] = '\0';
        return MHD_YES;
    }
    if (httpd_defer_now (h, l) && httpd_defer (h, conn) == 0)
        return MHD_YES;
    h->dispatched++;
    dispatch (req);
    return MHD_YES;
}

/* --- connections and the absolute request timeout ------------------------ */

static struct httpd_conn *conn_of (struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci;
    ci = MHD_get_connection_info (mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void notify_cb (void *cls, struct MHD_Connection *mc, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    struct listener *l = cls;
    struct httpd_conn *c = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        l->nconns++;
        l->h->nconns++;
        l->h->accepted++;
    }
    else if (l->nconns > 0) {
        l->nconns--;
        l->h->nconns--;
    }
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci;
        if (!(c = calloc (1, sizeof (*c))))
            return; /* untracked: only the idle timeout applies to it */
        ci = MHD_get_connection_info (mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
        *socket_context = c;
        httpd_conn_busy (&l->h->conns, c); /* its first request begins at accept */
    }
    else if (c) {
        httpd_conn_idle (&l->h->conns, c);
        httpd_conn_closed (l->h, c);
        free (c);
        *socket_context = NULL;
    }
}

/* A request line arrived: a request on a kept-alive connection begins. */
static void *uri_cb (void *cls, const char *uri, struct MHD_Connection *mc)
{
    struct listener *l = cls;
    struct httpd_conn *c = conn_of (mc);
    if (c)
        httpd_conn_busy (&l->h->conns, c);
    return NULL;
}

static void completed_cb (void *cls, struct MHD_Connection *conn, void **con_cls,
                          enum MHD_RequestTerminationCode toe)
{
    struct listener *l = cls;
    struct httpd_conn *c = conn_of (conn);
    if (c)
        httpd_conn_idle (&l->h->conns, c);
    req_destroy (*con_cls);
    *con_cls = NULL;
}

static void mhd_log_cb (void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    if (!httpd_conn_log_allowed (&((dt_httpd_t *)cls)->conns))
        return;
    vsnprintf (buf, sizeof (buf), fmt, ap);
    size_t l = strlen (buf);
    while (l > 0 && (buf[l - 1] == '\n' || buf[l - 1] == '\r'))
        buf[--l] = '\0';
    dt_log (LOG_WARNING, "httpd: %s", buf);
}

/* --- daemon ------------------------------------------------------------- */

/* The limits of one listener: what it asks for (0: the default), cut to
 * what the descriptor limit allows (with a warning naming the fix), and
 * the threshold above which its requests are refused with 503.  The
 * listeners together are held to the descriptor limit as well (at
 * request time, h->refuse_all_at), so that none of them runs the process
 * out of descriptors. */
static void listener_limits (dt_httpd_t *h, struct listener *l, unsigned int asked,
                             int idx)
{
    uint64_t want = asked ? asked : httpd_connection_limit;
    if (want > h->nofile_budget) {
        uint64_t got = h->nofile_budget > 32 ? h->nofile_budget : 32;
        if (asked)
            dt_log (LOG_WARNING,
                    "listener %d: %llu connections wanted, but the descriptor limit "
                    "(%llu) leaves room for %llu: using that (raise the hard limit, "
                    "e.g. LimitNOFILE= in the service unit)",
                    idx, (unsigned long long)want, (unsigned long long)h->nofile,
                    (unsigned long long)got);
        want = got;
    }
    uint64_t band = dt_fdlimit_band (want);
    l->limit = (unsigned int)want;
    l->refuse_at = want > band ? (unsigned int)(want - band) : 1;
}

/* Bind ourselves (rather than letting MHD do it) so the caller gets the
 * real errno, e.g. EADDRINUSE. */
static int listen_socket (const char *addr, int port, dt_error_t *err)
{
    struct sockaddr_storage ss = { 0 };
    socklen_t sl;
    int fd, one = 1, e;

    if (!addr || !*addr)
        addr = "0.0.0.0";
    if (port < 0 || port > 65535)
        return errnoprintf (err, EINVAL, "invalid port %d", port);
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton (AF_INET, addr, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons (port);
        sl = sizeof (*in);
    }
    else if (inet_pton (AF_INET6, addr, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons (port);
        sl = sizeof (*in6);
    }
    else
        return errnoprintf (err, EINVAL, "invalid listen address '%s'", addr);
    if ((fd = socket (ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
        return errprintf (err, "socket: %s", strerror (errno));
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    if (bind (fd, (struct sockaddr *)&ss, sl) < 0 ||
        listen (fd, httpd_listen_backlog) < 0) {
        e = errno;
        close (fd);
        return errnoprintf (err, e, "listen on %s:%d: %s", addr, port, strerror (e));
    }
    return fd;
}

/* The accept queue is at most net.core.somaxconn: when more clients than
 * that connect at once (a registration storm), the kernel drops the
 * others' SYNs, and they come back only as TCP retransmits them (after 1,
 * 3, 7, 15 s).  Said once, for a listener meant for more connections. */
static void backlog_note (unsigned int limit)
{
    static bool said;
    unsigned int cap = 0;
    FILE *f = fopen ("/proc/sys/net/core/somaxconn", "r");
    if (!f)
        return;
    if (fscanf (f, "%u", &cap) != 1)
        cap = 0;
    fclose (f);
    if (said || cap == 0 || cap >= limit || cap >= (unsigned int)httpd_listen_backlog)
        return;
    said = true;
    dt_log (LOG_NOTICE,
            "httpd: the accept queue holds %u connections (net.core.somaxconn): more "
            "clients connecting at once wait for TCP to retry (seconds); raise it for "
            "registration storms of up to %u agents",
            cap, limit);
}

dt_httpd_t *dt_httpd_new (const struct dt_httpd_conf *conf, dt_error_t *err)
{
    dt_httpd_t *h;

    if (!(h = calloc (1, sizeof (*h)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    h->access_level = LOG_INFO;
    h->listen_fd = -1;
    h->max_body = conf->max_body;
    h->body_budget = conf->body_budget;
    h->idle_timeout_s =
      conf->idle_timeout_s ? conf->idle_timeout_s : httpd_connection_timeout_s;
    h->conns.timeout_ns = conf->request_timeout_ms * 1000000LL;
    if ((h->epfd = epoll_create1 (EPOLL_CLOEXEC)) < 0) {
        errprintf (err, "epoll_create1: %s", strerror (errno));
        free (h);
        return NULL;
    }
    h->nofile = dt_fdlimit_raise ();
    h->nofile_budget = dt_fdlimit_connections (h->nofile);
    h->refuse_all_at = h->nofile_budget > dt_fdlimit_band (h->nofile_budget)
                         ? h->nofile_budget - dt_fdlimit_band (h->nofile_budget)
                         : 1;
    return h;
}

int dt_httpd_listen (dt_httpd_t *h, const struct dt_httpd_listen *lc, dt_error_t *err)
{
    struct listener *l;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof (ss);
    const union MHD_DaemonInfo *di;
    struct epoll_event ev = { .events = EPOLLIN };

    if (h->nls == HTTPD_MAX_LISTENERS)
        return errnoprintf (err, ENOSPC, "too many listeners (%d)", HTTPD_MAX_LISTENERS);
    l = &h->ls[h->nls];
    memset (l, 0, sizeof (*l));
    l->h = h;
    l->cls = lc->cls;
    listener_limits (h, l, lc->max_connections, h->nls);
    if ((h->listen_fd = listen_socket (lc->addr, lc->port, err)) < 0)
        return -1;
    backlog_note (l->limit);
    if (getsockname (h->listen_fd, (struct sockaddr *)&ss, &sl) < 0) {
        errprintf (err, "getsockname: %s", strerror (errno));
        goto error;
    }
    l->port = ntohs (ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    /* The logger must be the first option to catch every message. */
    l->d = MHD_start_daemon (
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
      access_cb, l, MHD_OPTION_EXTERNAL_LOGGER, mhd_log_cb, h, MHD_OPTION_LISTEN_SOCKET,
      h->listen_fd, MHD_OPTION_CONNECTION_LIMIT, l->limit,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, lc->per_address, MHD_OPTION_CONNECTION_TIMEOUT,
      h->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, httpd_connection_memory,
      MHD_OPTION_NOTIFY_CONNECTION, notify_cb, l, MHD_OPTION_URI_LOG_CALLBACK, uri_cb, l,
      MHD_OPTION_NOTIFY_COMPLETED, completed_cb, l, MHD_OPTION_END);
    if (!l->d) {
        errnoprintf (err, errno ? errno : EIO, "cannot start HTTP server on port %d",
                     l->port);
        goto error;
    }
    h->listen_fd = -1; /* now owned (and closed) by MHD */
    if (!(di = MHD_get_daemon_info (l->d, MHD_DAEMON_INFO_EPOLL_FD)) ||
        epoll_ctl (h->epfd, EPOLL_CTL_ADD, di->epoll_fd, &ev) < 0) {
        errprintf (err, "epoll_ctl: %s", strerror (errno ? errno : EINVAL));
        MHD_stop_daemon (l->d);
        l->d = NULL;
        return -1;
    }
    return h->nls++;
error:
    close (h->listen_fd);
    h->listen_fd = -1;
    return -1;
}

dt_httpd_t *dt_httpd_create (const char *addr, int port, size_t max_body, dt_error_t *err)
{
    struct dt_httpd_conf conf = { .max_body = max_body };
    struct dt_httpd_listen lc = { .addr = addr, .port = port };
    dt_httpd_t *h;

    if (!(h = dt_httpd_new (&conf, err)))
        return NULL;
    if (dt_httpd_listen (h, &lc, err) < 0) {
        dt_httpd_destroy (h);
        return NULL;
    }
    return h;
}

void dt_httpd_set_gate (dt_httpd_t *h, dt_http_gate_f cb, void *arg)
{
    h->gate = cb;
    h->gate_arg = arg;
}

void dt_httpd_destroy (dt_httpd_t *h)
{
    if (h) {
        int saved = errno;
        h->close_cb = NULL;          /* the owner is going away */
        httpd_park_expire (h, true); /* MHD stops no daemon with suspended connections */
        httpd_resume_deferred (h, SIZE_MAX);
        for (int i = 0; i < h->nls; i++)
            if (h->ls[i].d)
                MHD_stop_daemon (h->ls[i].d);
        free (h->deferred);
        free (h->parked);
        if (h->listen_fd >= 0)
            close (h->listen_fd);
        if (h->epfd >= 0)
            close (h->epfd);
        for (int i = 0; i < h->nroutes; i++) {
            free (h->routes[i].method);
            free (h->routes[i].pattern);
        }
        free (h->routes);
        free (h);
        errno = saved;
    }
}

int dt_httpd_port (const dt_httpd_t *h)
{
    return h->nls > 0 ? h->ls[0].port : -1;
}

int dt_httpd_listener_port (const dt_httpd_t *h, int idx)
{
    return idx >= 0 && idx < h->nls ? h->ls[idx].port : -1;
}

uint64_t dt_httpd_cut_count (const dt_httpd_t *h)
{
    return h->conns.cut;
}

bool dt_httpd_crowded (const dt_httpd_t *h)
{
    return h->nconns > h->refuse_all_at / 2;
}

void dt_http_req_close (dt_http_req_t *req)
{
    req->close = true;
}

void dt_httpd_set_access_log (dt_httpd_t *h, int level)
{
    h->access_level = level;
}

uint64_t dt_httpd_refused_count (const dt_httpd_t *h)
{
    uint64_t n = 0;
    for (int i = 0; i < h->nls; i++)
        n += h->ls[i].refused;
    return n;
}

int dt_httpd_fd (const dt_httpd_t *h)
{
    return h->epfd;
}

int dt_httpd_timeout_ms (const dt_httpd_t *h)
{
    int64_t best = -1;

    if (h->ndeferred > 0)
        return 0;
    for (int i = 0; i < h->nls; i++) {
        MHD_UNSIGNED_LONG_LONG t;
        if (MHD_get_timeout (h->ls[i].d, &t) == MHD_YES &&
            (best < 0 || (int64_t)t < best))
            best = t > INT_MAX ? INT_MAX : (int64_t)t;
    }
    int64_t left = httpd_conn_next_ms (&h->conns), park = httpd_park_next_ms (h);
    if (left >= 0 && (best < 0 || left < best))
        best = left;
    if (park >= 0 && (best < 0 || park < best))
        best = park;
    return best > INT_MAX ? INT_MAX : (int)best;
}

int dt_httpd_run (dt_httpd_t *h)
{
    int rc = 0;

    httpd_park_expire (h, false);
    httpd_resume_deferred (h, h->dispatched > 32 ? 2 * h->dispatched : 64);
    h->dispatched = 0;
    h->running = true;
    h->run_start_ns = dt_mono_ns ();
    /* MHD accepts 10 connections a run, and reads a connection once a run
     * (at most its buffer, a few KiB of 16): again while it accepts or has
     * data read and not yet handled, in budget.  A relay's request of
     * 40 KiB had taken five runs, so five passes of the owner's loop, each
     * with its ticks, before its answer. */
    for (int k = 0; k < httpd_runs_max; k++) {
        size_t before = h->accepted;
        for (int i = 0; i < h->nls; i++)
            if (MHD_run (h->ls[i].d) != MHD_YES || httpd_urgent_turn (h, i) < 0)
                rc = -1;
        if ((h->accepted == before && !httpd_more_ready (h)) ||
            dt_mono_ns () - h->run_start_ns > httpd_run_budget_ns)
            break;
    }
    h->running = false;
    httpd_conn_cut_expired (&h->conns);
    if (rc < 0)
        errno = EIO;
    return rc;
}
