/* httpd_park.c: suspended requests: those deferred to a coming run of
 * the server (past a run's budget), and those that wait for an event
 * before they are answered (long polls, see dt_http_req_park in httpd.h).
 *
 * A parked request's connection is suspended (MHD_suspend_connection): it
 * costs its descriptor and its buffers, nothing per pass.  Waking it moves
 * it to the server's deferred requests, which dt_httpd_run resumes a run's
 * worth at a time, so that waking 20,000 at once does not stall the
 * owner's loop; MHD then calls the access handler again and the route's
 * handler runs again for the same request.  A request that waited its
 * longest is woken like one whose event came, with park_expired set: its
 * handler then answers (dt_http_req_park refuses to park it again).
 */
#include <config.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "common/dtime.h"
#include "common/httpd.h"
#include "common/httpd_int.h"

/* --- the urgent listener -------------------------------------------------- */

/* A run over the other listeners looks at the urgent one after this long,
 * and then at most every httpd_urgent_every_ns: a request to it (a user's
 * status poll) waits for a few ms of others' requests, not a whole run's
 * budget of them. */
static const int64_t httpd_urgent_after_ns = 3 * 1000000LL;
static const int64_t httpd_urgent_every_ns = 1000000LL;

void dt_httpd_set_urgent (dt_httpd_t *h, int idx)
{
    const union MHD_DaemonInfo *di;
    h->has_urgent = false;
    if (idx < 0 || idx >= h->nls ||
        !(di = MHD_get_daemon_info (h->ls[idx].d, MHD_DAEMON_INFO_EPOLL_FD)))
        return;
    h->urgent = idx;
    h->urgent_fd = di->epoll_fd;
    h->has_urgent = true;
}

/* The urgent listener's epoll fd is readable: a connection or a request. */
static bool urgent_ready (const dt_httpd_t *h)
{
    struct pollfd p = { .fd = h->urgent_fd, .events = POLLIN };
    return h->has_urgent && poll (&p, 1, 0) > 0 && (p.revents & POLLIN);
}

static bool urgent_yield (dt_httpd_t *h, const struct listener *l)
{
    if (!h->has_urgent || l == &h->ls[h->urgent])
        return false;
    if (h->urgent_waiting)
        return true;
    int64_t now = dt_mono_ns ();
    if (now - h->run_start_ns < httpd_urgent_after_ns ||
        now - h->urgent_check_ns < httpd_urgent_every_ns)
        return false;
    h->urgent_check_ns = now;
    return h->urgent_waiting = urgent_ready (h);
}

bool httpd_defer_now (dt_httpd_t *h, const struct listener *l)
{
    return h->running &&
           (dt_mono_ns () - h->run_start_ns > httpd_run_budget_ns || urgent_yield (h, l));
}

int httpd_urgent_turn (dt_httpd_t *h, int i)
{
    if (!h->urgent_waiting || i == h->urgent)
        return 0;
    h->urgent_waiting = false;
    return MHD_run (h->ls[h->urgent].d) == MHD_YES ? 0 : -1;
}

int dt_httpd_run_urgent (dt_httpd_t *h)
{
    if (h->running || !urgent_ready (h))
        return 0;
    h->running = true;
    h->run_start_ns = dt_mono_ns ();
    int rc = MHD_run (h->ls[h->urgent].d) == MHD_YES ? 0 : -1;
    h->running = false;
    if (rc < 0)
        errno = EIO;
    return rc;
}

bool httpd_more_ready (const dt_httpd_t *h)
{
    for (int i = 0; i < h->nls; i++) {
        MHD_UNSIGNED_LONG_LONG t;
        if (MHD_get_timeout (h->ls[i].d, &t) == MHD_YES && t == 0)
            return true;
    }
    return false;
}

/* --- requests deferred to a coming run ----------------------------------- */

/* Past the run's budget: suspend the connection, to be handled in the next
 * run (dt_httpd_run resumes it), after the owner's loop had its turn. */
static int deferred_room (dt_httpd_t *h)
{
    if (h->ndeferred == h->deferred_cap) {
        size_t cap = h->deferred_cap ? h->deferred_cap * 2 : 256;
        struct MHD_Connection **p = realloc (h->deferred, cap * sizeof (*p));
        if (!p)
            return -1; /* handle it now */
        h->deferred = p;
        h->deferred_cap = cap;
    }
    return 0;
}
int httpd_defer (dt_httpd_t *h, struct MHD_Connection *conn)
{
    if (deferred_room (h) < 0)
        return -1;
    MHD_suspend_connection (conn);
    h->deferred[h->ndeferred++] = conn;
    return 0;
}
int httpd_defer_suspended (dt_httpd_t *h, struct MHD_Connection *conn)
{
    if (deferred_room (h) < 0)
        return -1;
    h->deferred[h->ndeferred++] = conn;
    return 0;
}

/* Resume the oldest 'max' deferred connections (all: SIZE_MAX).  Only
 * about as many as a run handles are resumed at a time: resuming
 * thousands only to suspend most of them again costs more than the work. */
void httpd_resume_deferred (dt_httpd_t *h, size_t max)
{
    size_t n = h->ndeferred < max ? h->ndeferred : max;
    if (n == 0)
        return; /* and h->deferred may be NULL: no memmove of it */
    for (size_t i = 0; i < n; i++)
        MHD_resume_connection (h->deferred[i]);
    memmove (h->deferred, h->deferred + n, (h->ndeferred - n) * sizeof (*h->deferred));
    h->ndeferred -= n;
}

/* --- parked requests ------------------------------------------------------ */

/* Move parked request i (it stays suspended) to the deferred ones. */
static void unpark (dt_httpd_t *h, size_t i)
{
    dt_http_req_t *req = h->parked[i];
    req->parked = false;
    h->parked[i] = h->parked[--h->nparked];
    if (httpd_defer_suspended (h, req->conn) < 0)
        MHD_resume_connection (req->conn); /* out of memory: resumed at once */
}

bool dt_http_req_park (dt_http_req_t *req, const void *key, int64_t max_ms)
{
    dt_httpd_t *h = req->h;
    int64_t now = dt_mono_ns ();

    if (req->replied || req->parked || req->park_expired || max_ms <= 0)
        return false;
    if (req->park_since_ns == 0)
        req->park_since_ns = now;
    int64_t deadline = req->park_since_ns + max_ms * 1000000LL;
    if (deadline <= now)
        return false;
    if (h->nparked == h->parked_cap) {
        size_t cap = h->parked_cap ? h->parked_cap * 2 : 256;
        dt_http_req_t **p = realloc (h->parked, cap * sizeof (*p));
        if (!p)
            return false;
        h->parked = p;
        h->parked_cap = cap;
    }
    MHD_suspend_connection (req->conn);
    req->parked = true;
    req->park_key = key;
    req->park_deadline_ns = deadline;
    h->parked[h->nparked++] = req;
    if (h->park_next_ns == 0 || deadline < h->park_next_ns)
        h->park_next_ns = deadline;
    return true;
}

bool dt_http_req_was_parked (const dt_http_req_t *req)
{
    return req->park_since_ns != 0;
}

size_t dt_httpd_wake (dt_httpd_t *h, const void *key)
{
    size_t n = 0;
    for (size_t i = 0; i < h->nparked;) {
        if (h->parked[i]->park_key == key) {
            unpark (h, i);
            n++;
        }
        else
            i++;
    }
    return n;
}

size_t dt_httpd_parked_count (const dt_httpd_t *h)
{
    return h->nparked;
}

void httpd_park_expire (dt_httpd_t *h, bool all)
{
    int64_t now = dt_mono_ns ();
    if (!all && (h->park_next_ns == 0 || now < h->park_next_ns))
        return;
    h->park_next_ns = 0;
    for (size_t i = 0; i < h->nparked;) {
        dt_http_req_t *req = h->parked[i];
        if (all || req->park_deadline_ns <= now) {
            req->park_expired = true;
            unpark (h, i);
            continue;
        }
        if (h->park_next_ns == 0 || req->park_deadline_ns < h->park_next_ns)
            h->park_next_ns = req->park_deadline_ns;
        i++;
    }
}

int64_t httpd_park_next_ms (const dt_httpd_t *h)
{
    if (h->nparked == 0 || h->park_next_ns == 0)
        return -1;
    int64_t left = h->park_next_ns - dt_mono_ns ();
    return left > 0 ? (left + 999999) / 1000000 : 0;
}

void httpd_park_forget (dt_http_req_t *req)
{
    dt_httpd_t *h = req->h;
    if (!req->parked)
        return;
    for (size_t i = 0; i < h->nparked; i++)
        if (h->parked[i] == req) {
            h->parked[i] = h->parked[--h->nparked];
            break;
        }
    req->parked = false;
}

size_t dt_httpd_last_run_requests (const dt_httpd_t *h)
{
    return h->dispatched;
}
