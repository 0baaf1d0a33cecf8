/* relay.c: the agent's part in the heartbeat fan-in tree (see relay.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "common/httpc.h"
#include "common/httpd.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "relay.h"

/* Children's lines kept at most (a relay cut off from everything above
 * must not grow without bound): 8 MiB, some 7,000 nodes of 8 ranks. */
static const size_t relay_buf_max = 8 << 20;

/* The listener is open to anyone who can reach the node: a request is
 * checked at header time, before its body is read (relay_gate), so that a
 * request without the attempt's token costs no memory; all bodies
 * buffered at once share a budget (a few children's worth), and a request
 * that takes longer than relay_request_timeout_ms, however slowly its
 * bytes come, has its connection cut. */
static const size_t relay_body_budget = 4 * (8 << 20);
static const int64_t relay_request_timeout_ms = 10000;

/* Calls up the tree fail fast, as the controller's do (ctl.c): the next
 * ancestor or the controller is tried at once.  The connect timeout is
 * half a heartbeat interval when that is shorter (relay_connect_ms): a
 * relay whose machine vanished (no reset, no answer) is given up, and
 * reported, within the interval, so that its loss can be corroborated in
 * time; a live relay's kernel completes the connection at once even when
 * its agent is busy. */
static const struct dt_httpc_opts relay_http_opts = {
    .connect_timeout_ms = 1000,
    .total_timeout_ms = 3000,
    .retries = 0,
    .backoff_ms = 100,
    .backoff_max_ms = 1000,
};

/* The connect timeout's floor (a loaded machine, a short interval). */
static const int relay_connect_min_ms = 100;

/* Children remembered (by the node name of the first line of their
 * requests), and entries of "unheard" sent, at most. */
#define RELAY_KIDS_MAX 64

/* An ancestor that stopped answering, and a child whose connection
 * closed, are reported for this long. */
static const int64_t relay_lost_report_intervals = 4;

struct relay_kid {
    char node[64];
    int64_t last_ms;     /* monotonic: its last request */
    bool reported;       /* its silence went up (relay_due sends it at once) */
    int conns;           /* its connections open now (tagged with its node) */
    int64_t closed_ms;   /* monotonic: its last connection closed, and it was
                          * not heard since; 0 none */
    bool close_reported; /* that went up (relay_due sends it at once) */
};

struct relay {
    dt_httpd_t *httpd;
    struct relay_kid kids[RELAY_KIDS_MAX];
    int nkids;
    int64_t interval_ms;               /* 0: nothing is reported */
    char lost_url[256];                /* the ancestor that stopped answering; "" none */
    int64_t lost_heard_ms, lost_at_ms; /* monotonic: last answer, failure */
    int64_t up_ok_ms;                  /* monotonic: last answer from above */
    char *token;
    char *lines; /* children's heartbeat lines, '\n'-separated */
    size_t len, cap;
    int64_t oldest_ms; /* when the first kept line came; 0 none */
    char *commands;    /* JSON array text for the children's answers */
    bool gone;         /* the attempt is over: children get 410 */
    char **ancestors;  /* borrowed */
    int up;            /* index of the ancestor in use */
    dt_httpc_t *http;  /* to ancestors[up] */
};

/* --- the children's side -------------------------------------------------- */

/* The child that sent 'body' (its own line comes first) was heard now;
 * its connection is tagged with its node, so that its close is known. */
static void kid_heard (relay_t *r, dt_http_req_t *req, const char *body, size_t len)
{
    const char *nl = memchr (body, '\n', len);
    dt_error_t e;
    json_t *o = dt_json_parse (body, nl ? (size_t)(nl - body) : len, &e);
    const char *node = json_string_value (json_object_get (o, "node"));
    if (node && strlen (node) < sizeof (r->kids[0].node)) {
        int i;
        for (i = 0; i < r->nkids && strcmp (r->kids[i].node, node); i++)
            ;
        if (i == r->nkids && r->nkids < RELAY_KIDS_MAX)
            snprintf (r->kids[r->nkids++].node, sizeof (r->kids[0].node), "%s", node);
        if (i < r->nkids) {
            r->kids[i].last_ms = dt_mono_ms ();
            r->kids[i].reported = false;
            r->kids[i].closed_ms = 0;
            if (dt_http_req_tag (req, node))
                r->kids[i].conns++;
        }
    }
    json_decref (o);
}

/* Is 'given' the attempt's token?  In constant time over the token's
 * length: how long a refusal takes tells nothing of how much matched. */
static bool token_equal (const char *given, const char *token)
{
    size_t lg = strlen (given), lt = strlen (token);
    unsigned char d = lg != lt;
    for (size_t i = 0; i < lt; i++)
        d |= (unsigned char)(given[i < lg ? i : 0] ^ token[i]);
    return d == 0;
}

/* Before the body: the attempt's token, or 401. */
static int relay_gate (dt_http_req_t *req, void *arg)
{
    relay_t *r = arg;
    const char *auth = dt_http_req_header (req, "Authorization");
    if (!auth || strncmp (auth, "Bearer ", 7) || !token_equal (auth + 7, r->token)) {
        dt_http_reply_error (req, 401, NULL, "not a token of this attempt");
        return -1;
    }
    return 0;
}

static void relay_cb (dt_http_req_t *req, void *arg)
{
    relay_t *r = arg;
    size_t len;
    const char *body = dt_http_req_body (req, &len);

    /* (the token was checked on the headers: relay_gate) */
    if (r->gone) {
        dt_http_reply_error (req, 410, NULL, "the attempt is over");
        return;
    }
    if (!body || len == 0) {
        dt_http_reply_error (req, 400, NULL,
                             "request body: expected heartbeats, one JSON object a line");
        return;
    }
    if (r->len + len + 1 > relay_buf_max) {
        dt_http_reply_error (req, 503, NULL,
                             "relay: %zu bytes of heartbeats waiting to go up; retry",
                             r->len);
        return;
    }
    if (r->len + len + 2 > r->cap) {
        size_t cap = r->cap ? r->cap : 16384;
        while (cap < r->len + len + 2)
            cap *= 2;
        char *p = realloc (r->lines, cap);
        if (!p) {
            dt_http_reply_error (req, 500, NULL, "out of memory");
            return;
        }
        r->lines = p;
        r->cap = cap;
    }
    if (r->len > 0)
        r->lines[r->len++] = '\n';
    memcpy (r->lines + r->len, body, len);
    r->len += len;
    kid_heard (r, req, body, len);
    while (r->len > 0 && r->lines[r->len - 1] == '\n')
        r->len--;
    r->lines[r->len] = '\0';
    if (!r->oldest_ms)
        r->oldest_ms = dt_mono_ms ();
    /* The commands of the last answer from above: the same for every node
     * of the attempt. */
    char ans[4096];
    int n =
      snprintf (ans, sizeof (ans), "{\"commands\":%s}", r->commands ? r->commands : "[]");
    if (n < 0 || (size_t)n >= sizeof (ans))
        n = snprintf (ans, sizeof (ans), "{\"commands\":[]}");
    dt_http_reply_json_text (req, 200, ans, (size_t)n);
}

/* A child's connection closed.  Its last one closing is strong evidence
 * that the child is gone: a dead process's kernel closes its sockets (a
 * killed node's, too, as long as its network is up), while a live child
 * keeps its connection (it closes one only to reattach elsewhere, after
 * this relay failed it, or to open another at once).  It goes up at
 * once (relay_due). */
static void kid_closed (const char *node, void *arg)
{
    relay_t *r = arg;
    for (int i = 0; i < r->nkids; i++) {
        struct relay_kid *k = &r->kids[i];
        if (strcmp (k->node, node))
            continue;
        if (k->conns > 0)
            k->conns--;
        if (k->conns == 0 && !r->gone && r->interval_ms > 0) {
            k->closed_ms = dt_mono_ms ();
            k->close_reported = false;
            dt_log (LOG_INFO,
                    "relay: the connection of child %s closed, %lld ms after "
                    "its last heartbeat",
                    node, (long long)(k->closed_ms - k->last_ms));
        }
        return;
    }
}

relay_t *relay_create (const char *addr, const char *token, dt_error_t *err)
{
    relay_t *r = calloc (1, sizeof (*r));
    if (!r) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (!(r->token = strdup (token ? token : ""))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    const struct dt_httpd_conf conf = {
        .max_body = relay_buf_max,
        .body_budget = relay_body_budget,
        .request_timeout_ms = relay_request_timeout_ms,
    };
    const struct dt_httpd_listen lc = { .addr = addr, .port = 0 };
    if (!(r->httpd = dt_httpd_new (&conf, err)))
        goto error;
    if (dt_httpd_listen (r->httpd, &lc, err) < 0)
        goto error;
    dt_httpd_set_gate (r->httpd, relay_gate, r);
    /* A line per child per interval would drown the agent's log. */
    dt_httpd_set_access_log (r->httpd, LOG_DEBUG);
    dt_httpd_set_close_cb (r->httpd, kid_closed, r);
    if (dt_httpd_route (r->httpd, "POST", "/v1/agent/relay", relay_cb, r) < 0) {
        errprintf (err, "relay: cannot register its route");
        goto error;
    }
    return r;
error:
    relay_destroy (r);
    return NULL;
}

void relay_destroy (relay_t *r)
{
    if (!r)
        return;
    int saved = errno;
    dt_httpd_destroy (r->httpd);
    dt_httpc_destroy (r->http);
    free (r->token);
    free (r->lines);
    free (r->commands);
    free (r);
    errno = saved;
}

int relay_port (const relay_t *r)
{
    return dt_httpd_port (r->httpd);
}

int relay_fd (const relay_t *r)
{
    return dt_httpd_fd (r->httpd);
}

void relay_run (relay_t *r)
{
    if (dt_httpd_run (r->httpd) < 0)
        dt_log (LOG_WARNING, "relay: its HTTP server failed a run");
}

void relay_set_ancestors (relay_t *r, char **ancestors)
{
    r->ancestors = ancestors;
    r->up = 0;
}

void relay_set_interval (relay_t *r, int64_t interval_ms)
{
    r->interval_ms = interval_ms;
}

bool relay_due (const relay_t *r, int64_t now_ms, int64_t min_age_ms)
{
    /* A child that just fell silent is reported at once, not at the next
     * heartbeat: the controller's corroboration of its loss. */
    for (int i = 0; r->interval_ms > 0 && i < r->nkids; i++)
        if ((!r->kids[i].reported &&
             now_ms - r->kids[i].last_ms > 5 * r->interval_ms / 4) ||
            (r->kids[i].closed_ms && !r->kids[i].close_reported))
            return true;
    return r->len > 0 && now_ms - r->oldest_ms >= min_age_ms;
}

int64_t relay_due_in (const relay_t *r, int64_t now_ms, int64_t min_age_ms)
{
    int64_t at = r->len > 0 ? r->oldest_ms + min_age_ms : INT64_MAX;
    for (int i = 0; r->interval_ms > 0 && i < r->nkids; i++) {
        if (r->kids[i].closed_ms && !r->kids[i].close_reported)
            at = now_ms;
        if (!r->kids[i].reported && r->kids[i].last_ms + 5 * r->interval_ms / 4 + 1 < at)
            at = r->kids[i].last_ms + 5 * r->interval_ms / 4 + 1;
    }
    return at == INT64_MAX ? -1 : at > now_ms ? at - now_ms : 0;
}

bool relay_in_tree (const relay_t *r)
{
    return (r->ancestors && r->ancestors[0]) || r->nkids > 0;
}

const char *relay_upstream (const relay_t *r)
{
    return r->ancestors && r->ancestors[r->up] ? r->ancestors[r->up] : NULL;
}

/* --- the way up ------------------------------------------------------------ */

/* The answer's data (new reference or NULL) from a raw envelope. */
static json_t *envelope_data (const char *text, size_t len)
{
    dt_error_t e;
    json_t *env = text && len ? dt_json_parse (text, len, &e) : NULL;
    json_t *d = env ? json_object_get (env, "data") : NULL;
    d = d && !json_is_null (d) ? json_incref (d) : NULL;
    json_decref (env);
    return d;
}

/* POST the lines to ancestors[up]; on a transport failure, the next one. */
static int post_to_ancestors (relay_t *r, const char *body, size_t len, long *status,
                              json_t **data, dt_error_t *err)
{
    while (r->ancestors && r->ancestors[r->up]) {
        const char *url = r->ancestors[r->up];
        char hdr[1024], *reply = NULL;
        size_t rlen = 0;
        dt_error_t e;
        *status = 0;
        if (!r->http) {
            struct dt_httpc_opts o = relay_http_opts;
            if (r->interval_ms > 0 && r->interval_ms / 2 < o.connect_timeout_ms)
                o.connect_timeout_ms = r->interval_ms / 2 > relay_connect_min_ms
                                         ? (int)(r->interval_ms / 2)
                                         : relay_connect_min_ms;
            if (!(r->http = dt_httpc_create (url, &o, &e)))
                return errprintf (err, "relay %s: %s", url, e.text);
            snprintf (hdr, sizeof (hdr), "Authorization: Bearer %s", r->token);
            dt_httpc_set_header (r->http, hdr);
        }
        if (dt_httpc_raw (r->http, "POST", "/v1/agent/relay", body, len,
                          "application/x-ndjson", status, &reply, &rlen, &e) == 0 &&
            *status != 503) {
            *data = envelope_data (reply, rlen);
            free (reply);
            return 0;
        }
        free (reply);
        if (*status != 503) {
            /* Reported as unheard in the next heartbeats (see unheard_json). */
            snprintf (r->lost_url, sizeof (r->lost_url), "%s", url);
            r->lost_heard_ms = r->up_ok_ms;
            r->lost_at_ms = dt_mono_ms ();
        }
        /* Dead (or full): reattach to the next ancestor, or the controller. */
        const char *next = r->ancestors[r->up + 1];
        dt_log (LOG_WARNING, "relay %s unreachable (%s): heartbeats go to %s from now on",
                url, *status == 503 ? "full" : e.text, next ? next : "the controller");
        dt_httpc_destroy (r->http);
        r->http = NULL;
        r->up++;
    }
    return 1; /* no ancestor left */
}

/* "unheard" of this node's heartbeat: the children whose connection
 * closed (for a few intervals after, "closed": true) or that are silent
 * for over 5/4 of an interval by this relay's clock, and the ancestor that
 * stopped answering (for a few intervals after).  NULL: none.  New
 * reference. */
static json_t *unheard_json (relay_t *r, int64_t now)
{
    json_t *a = NULL;
    if (r->interval_ms <= 0)
        return NULL;
    for (int i = 0; i < r->nkids; i++) {
        struct relay_kid *k = &r->kids[i];
        int64_t ms = now - k->last_ms;
        bool closed = k->closed_ms &&
                      now - k->closed_ms <= relay_lost_report_intervals * r->interval_ms;
        if (k->closed_ms && !closed)
            k->close_reported = true; /* too late to say (relay_due stops) */
        if ((closed || ms > 5 * r->interval_ms / 4) && (a || (a = json_array ()))) {
            k->reported = true;
            k->close_reported |= closed;
            json_t *e = json_pack ("{s:s s:I}", "node", k->node, "ms", (json_int_t)ms);
            if (e && closed)
                json_object_set_new (e, "closed", json_true ());
            json_array_append_new (a, e);
        }
    }
    if (r->lost_url[0] &&
        now - r->lost_at_ms <= relay_lost_report_intervals * r->interval_ms &&
        (a || (a = json_array ())))
        json_array_append_new (
          a, json_pack ("{s:s s:I}", "relay", r->lost_url, "ms",
                        (json_int_t)(now - (r->lost_heard_ms ? r->lost_heard_ms
                                                             : r->lost_at_ms))));
    return a;
}

/* The heartbeat line: 'own' with "unheard" when there is any.  New
 * reference. */
static json_t *own_line (relay_t *r, const json_t *own)
{
    json_t *u = unheard_json (r, dt_mono_ms ());
    json_t *o = u ? json_copy ((json_t *)own) : json_incref ((json_t *)own);
    if (u && o)
        json_object_set (o, "unheard", u);
    json_decref (u);
    return o;
}

static int relay_heartbeat1 (relay_t *r, ctl_t *ctl, const json_t *own, long *status,
                             json_t **data, dt_error_t *err);

int relay_heartbeat (relay_t *r, ctl_t *ctl, const json_t *own, long *status,
                     json_t **data, dt_error_t *err)
{
    const char *up = relay_upstream (r);
    json_t *o = own_line (r, own);
    if (!o)
        return errnoprintf (err, ENOMEM, "out of memory");
    int rc = relay_heartbeat1 (r, ctl, o, status, data, err);
    json_decref (o);
    /* An ancestor stopped answering during this heartbeat (it went to the
     * next one without the report): say so at once, not an interval
     * later. */
    if (rc == 0 && up && relay_upstream (r) != up && r->lost_url[0] &&
        r->interval_ms > 0) {
        json_decref (*data);
        *data = NULL;
        if (!(o = own_line (r, own)))
            return errnoprintf (err, ENOMEM, "out of memory");
        rc = relay_heartbeat1 (r, ctl, o, status, data, err);
        json_decref (o);
    }
    if (rc == 0 && *status == 200)
        r->up_ok_ms = dt_mono_ms ();
    return rc;
}

static int relay_heartbeat1 (relay_t *r, ctl_t *ctl, const json_t *own, long *status,
                             json_t **data, dt_error_t *err)
{
    int rc;
    *data = NULL;
    *status = 0;
    if (!relay_upstream (r) && r->len == 0) {
        /* No tree above and no children's lines: the direct heartbeat. */
        rc = ctl_post (ctl, "/v1/agent/heartbeat", own, status, data, err);
    }
    else {
        char *line = json_dumps (own, JSON_COMPACT);
        size_t ll = line ? strlen (line) : 0, n = ll + 1 + r->len;
        char *body = line ? malloc (n + 1) : NULL;
        if (!body) {
            free (line);
            return errnoprintf (err, ENOMEM, "out of memory");
        }
        memcpy (body, line, ll);
        if (r->len) {
            body[ll] = '\n';
            memcpy (body + ll + 1, r->lines, r->len);
        }
        else
            n = ll;
        body[n] = '\0';
        free (line);
        rc = post_to_ancestors (r, body, n, status, data, err);
        if (rc == 1)
            rc = ctl_post_text (ctl, "/v1/agent/relay", body, n, "application/x-ndjson",
                                status, data, err);
        free (body);
        if (rc == 0) {
            /* Delivered (or refused for good): the children's lines go. */
            r->len = 0;
            r->oldest_ms = 0;
        }
    }
    if (rc == 0 && *status == 410)
        r->gone = true;
    if (rc == 0 && *status == 200 && *data) {
        json_t *c = json_object_get (*data, "commands");
        char *text = json_is_array (c) ? json_dumps (c, JSON_COMPACT) : NULL;
        if (text) {
            free (r->commands);
            r->commands = text;
        }
    }
    return rc;
}
