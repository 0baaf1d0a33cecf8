/* httpd_conn.c: the HTTP server's connections: the absolute request
 * timeout, rate-limited warnings, tagged connections' close callback and
 * the answer over the connection limits (see httpd_conn.h and httpd.h). */
#include <config.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common/dtime.h"
#include "common/fdlimit.h"
#include "common/httpd_conn.h"
#include "common/httpd_int.h"
#include "common/log.h"

static const int log_burst = 20;
static const int64_t log_window_ns = 10LL * 1000000000;

void httpd_conn_idle (struct httpd_conns *cs, struct httpd_conn *c)
{
    if (!c->busy_ns)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        cs->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        cs->tail = c->prev;
    c->prev = c->next = NULL;
    c->busy_ns = 0;
}

/* Appended: the list stays in time order. */
void httpd_conn_busy (struct httpd_conns *cs, struct httpd_conn *c)
{
    if (c->busy_ns)
        return;
    c->busy_ns = dt_mono_ns ();
    c->prev = cs->tail;
    c->next = NULL;
    if (cs->tail)
        cs->tail->next = c;
    else
        cs->head = c;
    cs->tail = c;
}

bool httpd_conn_log_allowed (struct httpd_conns *cs)
{
    int64_t now = dt_mono_ns ();

    if (now - cs->log_window_ns >= log_window_ns) {
        if (cs->log_dropped)
            dt_log (LOG_WARNING,
                    "httpd: %d more warnings not logged (%d per %llds at most)",
                    cs->log_dropped, log_burst, (long long)(log_window_ns / 1000000000));
        cs->log_window_ns = now;
        cs->log_count = cs->log_dropped = 0;
    }
    if (cs->log_count < log_burst) {
        cs->log_count++;
        return true;
    }
    cs->log_dropped++;
    return false;
}

void httpd_conn_cut_expired (struct httpd_conns *cs)
{
    int64_t now;

    if (!cs->timeout_ns || !cs->head)
        return;
    now = dt_mono_ns ();
    while (cs->head && now - cs->head->busy_ns >= cs->timeout_ns) {
        struct httpd_conn *c = cs->head;
        httpd_conn_idle (cs, c);
        cs->cut++; /* counted before the client can see the cut */
        if (c->fd >= 0)
            shutdown (c->fd, SHUT_RDWR);
        if (httpd_conn_log_allowed (cs))
            dt_log (LOG_WARNING, "httpd: connection cut: request not done within %lld ms",
                    (long long)(cs->timeout_ns / 1000000));
    }
}

int64_t httpd_conn_next_ms (const struct httpd_conns *cs)
{
    if (!cs->timeout_ns || !cs->head)
        return -1;
    int64_t left = (cs->head->busy_ns + cs->timeout_ns - dt_mono_ns ()) / 1000000;
    return left < 0 ? 0 : left + 1;
}

/* --- tagged connections ---------------------------------------------------- */

void dt_httpd_set_close_cb (dt_httpd_t *h, dt_httpd_close_f cb, void *arg)
{
    h->close_cb = cb;
    h->close_arg = arg;
}

bool dt_http_req_tag (dt_http_req_t *req, const char *tag)
{
    const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info (req->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct httpd_conn *c = ci ? ci->socket_context : NULL;
    if (!c)
        return false; /* untracked (out of memory at accept): never reported */
    bool fresh = !c->tag[0];
    snprintf (c->tag, sizeof (c->tag), "%s", tag ? tag : "");
    return fresh;
}

void httpd_conn_closed (dt_httpd_t *h, struct httpd_conn *c)
{
    if (c->tag[0] && h->close_cb)
        h->close_cb (c->tag, h->close_arg);
}

/* Over the listener's connection limit: a clear answer, not a connection
 * closed at accept (which a client cannot tell from a controller that is
 * down); agents back off with jitter.  True when it answered. */
bool httpd_refuse_overfull (struct listener *l, dt_http_req_t *req)
{
    dt_httpd_t *h = l->h;
    /* The urgent listener (the users': a status query, a cancel) keeps a
     * share of the descriptors of its own: the others are refused that
     * much sooner, so that agents at the limit cannot lock the users out. */
    uint64_t all_at = h->refuse_all_at;
    if (h->has_urgent && l != &h->ls[h->urgent]) {
        uint64_t band = dt_fdlimit_band (h->nofile_budget);
        all_at = all_at > band ? all_at - band : 1;
    }
    if (l->nconns <= l->refuse_at && h->nconns <= all_at)
        return false;
    l->refused++;
    req->overfull = true;
    dt_http_reply_error (req, 503, NULL,
                         "controller at its connection limit (%llu connections open, "
                         "descriptor limit %llu): retry after a randomized backoff; "
                         "large jobs should use a fan-in tree (TreeWidth)",
                         (unsigned long long)h->nconns, (unsigned long long)h->nofile);
    return true;
}
