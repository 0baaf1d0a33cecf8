/* chan.c: the agent's Unix socket server for libdtclient (see chan.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "client/dtclient.h"
#include "chan.h"

/* Every local rank opens one connection, Python trainers perhaps a few;
 * past this a runaway client is refused rather than exhausting fds. */
#define CHAN_MAX_CONNS 256

struct conn {
    int fd;
    int rank; /* from hello, -1 before */
    uint8_t hdr[DTPROTO_HDR_LEN];
    size_t hdr_got;
    int type;
    uint8_t *payload; /* DTPROTO_MAX_PAYLOAD bytes, once a header is in */
    uint32_t plen, pgot;
    uint8_t *out; /* pending reply bytes */
    size_t out_len, out_off;
    int closing; /* close once 'out' is written */
};

struct chan {
    int lfd;
    char *path; /* file to unlink */
    chan_request_f cb;
    void *arg;
    struct conn *conns[CHAN_MAX_CONNS];
    int nconns;
    struct dtproto_buf reply;
};

chan_t *chan_create (const char *path, chan_request_f cb, void *arg, dt_error_t *err)
{
    struct sockaddr_un sun;
    socklen_t sl;
    size_t n = strlen (path);
    chan_t *c = calloc (1, sizeof (*c));
    if (!c) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    c->lfd = -1;
    c->cb = cb;
    c->arg = arg;
    memset (&sun, 0, sizeof (sun));
    sun.sun_family = AF_UNIX;
    if (n == 0 || n >= sizeof (sun.sun_path)) {
        errnoprintf (err, ENAMETOOLONG, "socket path '%s' is too long", path);
        goto error;
    }
    /* A file in the agent's private directory only: an abstract socket
     * ("@name") has no permissions, any local user could connect. */
    if (path[0] != '/') {
        errnoprintf (err, EINVAL, "socket path '%s': not an absolute path", path);
        goto error;
    }
    memcpy (sun.sun_path, path, n);
    sl = offsetof (struct sockaddr_un, sun_path) + n + 1;
    unlink (path);
    if (!(c->path = strdup (path))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    c->lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->lfd < 0 || bind (c->lfd, (struct sockaddr *)&sun, sl) < 0 ||
        listen (c->lfd, 64) < 0) {
        errnoprintf (err, errno, "listen on %s: %s", path, strerror (errno));
        goto error;
    }
    return c;
error:
    chan_destroy (c);
    return NULL;
}

static void conn_free (struct conn *k)
{
    if (k->fd >= 0)
        close (k->fd);
    free (k->payload);
    free (k->out);
    free (k);
}

void chan_destroy (chan_t *c)
{
    if (!c)
        return;
    int saved = errno;
    for (int i = 0; i < c->nconns; i++)
        conn_free (c->conns[i]);
    if (c->lfd >= 0)
        close (c->lfd);
    if (c->path)
        unlink (c->path);
    free (c->path);
    dtproto_buf_free (&c->reply);
    free (c);
    errno = saved;
}

int chan_connections (const chan_t *c)
{
    return c->nconns;
}

void chan_reply_status (struct dtproto_buf *reply, int status, const char *text)
{
    dtproto_begin (reply, DTPROTO_REPLY);
    dtproto_add_int (reply, DTPROTO_T_STATUS, status);
    if (text && *text)
        dtproto_add_bytes (reply, DTPROTO_T_TEXT, text, strnlen (text, DTPROTO_MAX_TEXT));
}

int chan_pollfds (chan_t *c, struct pollfd *pfd, int max)
{
    int n = 0;
    if (n < max)
        pfd[n++] = (struct pollfd){ .fd = c->lfd, .events = POLLIN };
    for (int i = 0; i < c->nconns && n < max; i++) {
        struct conn *k = c->conns[i];
        short ev = k->closing ? 0 : POLLIN;
        if (k->out_off < k->out_len)
            ev |= POLLOUT;
        pfd[n++] = (struct pollfd){ .fd = k->fd, .events = ev };
    }
    return n;
}

/* Queue 'b' for sending; written as far as the socket takes now. */
static void conn_queue (struct conn *k, const struct dtproto_buf *b)
{
    if (dtproto_end ((struct dtproto_buf *)b) < 0)
        return;
    size_t pending = k->out_len - k->out_off;
    uint8_t *o = malloc (pending + b->len);
    if (!o) {
        k->closing = 1;
        return;
    }
    if (pending)
        memcpy (o, k->out + k->out_off, pending);
    memcpy (o + pending, b->data, b->len);
    free (k->out);
    k->out = o;
    k->out_len = pending + b->len;
    k->out_off = 0;
}

/* 0 to keep the connection, -1 to drop it. */
static int conn_flush (struct conn *k)
{
    while (k->out_off < k->out_len) {
        ssize_t w = send (k->fd, k->out + k->out_off, k->out_len - k->out_off,
                          MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        k->out_off += (size_t)w;
    }
    return k->closing ? -1 : 0;
}

static void conn_refuse (chan_t *c, struct conn *k, const char *why, int fatal)
{
    dt_log (LOG_WARNING, "trainer connection (rank %d): refused message: %s", k->rank,
            why);
    chan_reply_status (&c->reply, DTCLIENT_ERR_PROTO, why);
    conn_queue (k, &c->reply);
    if (fatal)
        k->closing = 1;
}

/* Read what is there; dispatch complete frames.  -1: drop the connection. */
static int conn_read (chan_t *c, struct conn *k)
{
    char err[200];
    for (;;) {
        if (k->closing)
            return 0;
        ssize_t r;
        if (k->hdr_got < DTPROTO_HDR_LEN) {
            r = recv (k->fd, k->hdr + k->hdr_got, DTPROTO_HDR_LEN - k->hdr_got,
                      MSG_DONTWAIT);
        }
        else {
            r = k->plen > k->pgot
                  ? recv (k->fd, k->payload + k->pgot, k->plen - k->pgot, MSG_DONTWAIT)
                  : 0;
            if (k->plen == 0)
                r = -2; /* no payload to read: dispatch now */
        }
        if (r == 0)
            return -1; /* peer closed */
        if (r == -1) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        if (k->hdr_got < DTPROTO_HDR_LEN) {
            k->hdr_got += (size_t)r;
            if (k->hdr_got < DTPROTO_HDR_LEN)
                continue;
            if (dtproto_header_decode (k->hdr, &k->type, &k->plen, err, sizeof (err)) <
                0) {
                conn_refuse (c, k, err, 1);
                return 0;
            }
            if (k->type == DTPROTO_REPLY) {
                conn_refuse (c, k, "a reply is not a request", 1);
                return 0;
            }
            if (!k->payload && !(k->payload = malloc (DTPROTO_MAX_PAYLOAD)))
                return -1;
            k->pgot = 0;
            if (k->plen > 0)
                continue;
        }
        else if (r > 0) {
            k->pgot += (uint32_t)r;
        }
        if (k->pgot < k->plen)
            continue;
        /* A complete frame. */
        struct dtproto_msg m;
        if (dtproto_decode (k->type, k->payload, k->plen, &m, err, sizeof (err)) < 0)
            conn_refuse (c, k, err, 0);
        else if (m.type != DTPROTO_HELLO && k->rank < 0)
            conn_refuse (c, k, "hello must come first", 0);
        else {
            dtproto_begin (&c->reply, DTPROTO_REPLY);
            c->reply.len = 0; /* the handler starts the reply */
            c->cb (&m, &k->rank, &c->reply, c->arg);
            if (c->reply.len == 0)
                chan_reply_status (&c->reply, DTCLIENT_ERR_PROTO, "no answer");
            conn_queue (k, &c->reply);
        }
        k->hdr_got = 0;
        k->plen = k->pgot = 0;
        if (conn_flush (k) < 0)
            return -1;
    }
}

static void chan_accept (chan_t *c)
{
    for (;;) {
        int fd = accept4 (c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        /* Only the agent's own user (the job's) may talk to it: the run
         * directory is private already; this holds even for root. */
        struct ucred cr;
        socklen_t crl = sizeof (cr);
        if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 ||
            crl != sizeof (cr) || cr.uid != geteuid ()) {
            dt_log (LOG_WARNING,
                    "trainer socket: connection from pid %ld uid %ld refused: "
                    "not this job's user (uid %ld)",
                    crl == sizeof (cr) ? (long)cr.pid : -1L,
                    crl == sizeof (cr) ? (long)cr.uid : -1L, (long)geteuid ());
            close (fd);
            continue;
        }
        if (c->nconns >= CHAN_MAX_CONNS) {
            dt_log (LOG_WARNING, "trainer socket: %d connections already, refusing one",
                    c->nconns);
            close (fd);
            continue;
        }
        struct conn *k = calloc (1, sizeof (*k));
        if (!k) {
            close (fd);
            return;
        }
        k->fd = fd;
        k->rank = -1;
        c->conns[c->nconns++] = k;
    }
}

void chan_process (chan_t *c, const struct pollfd *pfd, int n)
{
    /* Entries follow chan_pollfds' order; connections accepted below are
     * appended after them and are served at the next round. */
    int nconns = c->nconns;
    struct conn *seen[CHAN_MAX_CONNS];
    memcpy (seen, c->conns, sizeof (struct conn *) * (size_t)nconns);
    for (int i = 1; i < n && i - 1 < nconns; i++) {
        struct conn *k = seen[i - 1];
        if (pfd[i].fd != k->fd || !pfd[i].revents)
            continue;
        int drop = 0;
        if (pfd[i].revents & POLLOUT)
            drop = conn_flush (k) < 0;
        if (!drop && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            drop = conn_read (c, k) < 0 || conn_flush (k) < 0;
        if (drop) {
            dt_log (LOG_DEBUG, "trainer connection (rank %d) closed", k->rank);
            for (int j = 0; j < c->nconns; j++)
                if (c->conns[j] == k) {
                    c->conns[j] = c->conns[--c->nconns];
                    break;
                }
            conn_free (k);
        }
    }
    if (n > 0 && (pfd[0].revents & POLLIN))
        chan_accept (c);
}
