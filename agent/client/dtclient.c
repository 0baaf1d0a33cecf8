/* dtclient.c: libdtclient, the trainer side of the trainer⇄agent protocol.
 *
 * Self-contained on purpose (libc + pthread only): it is installed and
 * linked into arbitrary trainers, so it must not drag libdt, jansson or curl
 * along.  See dtclient.h for the API and schemas/dtclient-protocol.md for
 * the bytes. */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dtclient.h"
#include "dtproto.h"

struct dtclient {
    int fd;                           /* socket to the agent, -1 for no-op */
    volatile struct dtshm_page *page; /* the agent's page, or 'local' */
    int page_mapped;                  /* page is an mmap of DT_AGENT_SHM */
    struct dtshm_page local;          /* stands in when there is no agent page */
    uint64_t last_cmd_seq;            /* seq of the last command returned by poll */
    int64_t nreports;
    int rank;
    char *rdv_dir;          /* DT_RENDEZVOUS_DIR for the no-op kv, or NULL */
    pthread_mutex_t lock;   /* one request/reply exchange at a time */
    struct dtproto_buf buf; /* encode buffer, under lock */
    pthread_t watcher;
    int watcher_started;
    int wake[2]; /* pipe that tells the watcher to quit */
};

static void warn (const char *fmt, const char *arg, int errnum)
{
    char msg[DTPROTO_MAX_TEXT + 256];
    snprintf (msg, sizeof (msg), fmt, arg);
    if (errnum)
        fprintf (stderr, "dtclient: %s: %s\n", msg, strerror (errnum));
    else
        fprintf (stderr, "dtclient: %s\n", msg);
}

const char *dtclient_strerror (dtclient_err_t e)
{
    switch (e) {
    case DTCLIENT_OK: return "success";
    case DTCLIENT_ERR_NOAGENT: return "no agent and no DT_RENDEZVOUS_DIR";
    case DTCLIENT_ERR_IO: return "connection to the agent lost";
    case DTCLIENT_ERR_PROTO: return "protocol error";
    case DTCLIENT_ERR_TIMEOUT: return "timed out";
    case DTCLIENT_ERR_INVAL: return "invalid argument";
    case DTCLIENT_ERR_NOTFOUND: return "key not found";
    }
    return "unknown error";
}

/* ---- socket helpers ------------------------------------------------------ */

/* DT_AGENT_SOCKET is the path of the agent's socket, in its private run
 * directory.  An abstract name ("@name") is refused (EINVAL): it has no
 * permissions, so anyone could have bound it; and the peer must run as
 * this process's own user (SO_PEERCRED), else EPERM. */
static int connect_agent (const char *path)
{
    struct sockaddr_un sun;
    socklen_t sl;
    size_t n = strlen (path);
    memset (&sun, 0, sizeof (sun));
    sun.sun_family = AF_UNIX;
    if (n == 0 || n >= sizeof (sun.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (path[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    memcpy (sun.sun_path, path, n);
    sl = offsetof (struct sockaddr_un, sun_path) + n + 1;
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect (fd, (struct sockaddr *)&sun, sl) < 0) {
        int e = errno;
        close (fd);
        errno = e;
        return -1;
    }
    struct ucred cr;
    socklen_t crl = sizeof (cr);
    if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 || crl != sizeof (cr) ||
        cr.uid != geteuid ()) {
        close (fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

static int write_all (int fd, const void *p, size_t n)
{
    const char *q = p;
    while (n > 0) {
        ssize_t w = send (fd, q, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all (int fd, void *p, size_t n)
{
    char *q = p;
    while (n > 0) {
        ssize_t r = read (fd, q, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = ECONNRESET;
            return -1;
        }
        q += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Send the frame in c->buf and read the reply.  Called with c->lock held.
 * On DTCLIENT_OK with want_value, *val (new, malloc'ed) and *len are set. */
static dtclient_err_t exchange (dtclient_t *c, void **val, size_t *len)
{
    uint8_t hdr[DTPROTO_HDR_LEN];
    int type;
    uint32_t plen;
    char err[160];
    struct dtproto_msg m;

    if (dtproto_end (&c->buf) < 0)
        return errno == EMSGSIZE ? DTCLIENT_ERR_INVAL : DTCLIENT_ERR_IO;
    if (c->fd < 0)
        return DTCLIENT_ERR_IO;
    if (write_all (c->fd, c->buf.data, c->buf.len) < 0 ||
        read_all (c->fd, hdr, sizeof (hdr)) < 0)
        return DTCLIENT_ERR_IO;
    if (dtproto_header_decode (hdr, &type, &plen, err, sizeof (err)) < 0 ||
        type != DTPROTO_REPLY) {
        warn ("bad reply from the agent: %s", type == DTPROTO_REPLY ? err : "not a reply",
              0);
        return DTCLIENT_ERR_PROTO;
    }
    uint8_t *payload = malloc (plen ? plen : 1);
    if (!payload)
        return DTCLIENT_ERR_IO;
    if (read_all (c->fd, payload, plen) < 0) {
        free (payload);
        return DTCLIENT_ERR_IO;
    }
    if (dtproto_decode (type, payload, plen, &m, err, sizeof (err)) < 0) {
        warn ("bad reply from the agent: %s", err, 0);
        free (payload);
        return DTCLIENT_ERR_PROTO;
    }
    dtclient_err_t st = (dtclient_err_t)m.i[DTPROTO_T_STATUS];
    if (st != DTCLIENT_OK && dtproto_has (&m, DTPROTO_T_TEXT)) {
        char text[DTPROTO_MAX_TEXT + 1];
        memcpy (text, m.s[DTPROTO_T_TEXT], m.slen[DTPROTO_T_TEXT]);
        text[m.slen[DTPROTO_T_TEXT]] = '\0';
        if (st != DTCLIENT_ERR_NOTFOUND)
            warn ("agent refused the request: %s", text, 0);
    }
    if (st == DTCLIENT_OK && val) {
        size_t n = dtproto_has (&m, DTPROTO_T_VALUE) ? m.slen[DTPROTO_T_VALUE] : 0;
        void *v = malloc (n ? n : 1);
        if (!v) {
            free (payload);
            return DTCLIENT_ERR_IO;
        }
        if (n)
            memcpy (v, m.s[DTPROTO_T_VALUE], n);
        *val = v;
        *len = n;
    }
    free (payload);
    return st;
}

/* The agent's socket closing means the agent is gone (killed, or it ended
 * the attempt): an orphaned trainer must not keep running, holding GPUs and
 * ports of the next attempt.  The thread polls for hang-up only (POLLRDHUP,
 * never POLLIN), so it does not consume the replies of the main thread. */
static void *watcher_cb (void *arg)
{
    dtclient_t *c = arg;
    struct pollfd pfd[2] = {
        { .fd = c->fd, .events = POLLRDHUP },
        { .fd = c->wake[0], .events = POLLIN },
    };
    for (;;) {
        if (poll (pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (pfd[1].revents)
            return NULL;
        if (pfd[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
            static const char msg[] = "dtclient: the agent's socket closed: exiting\n";
            ssize_t rc = write (STDERR_FILENO, msg, sizeof (msg) - 1);
            (void)rc;
            /* The agent made each rank a process group leader: take its
             * helpers (data loader workers...) down too. */
            if (getpgrp () == getpid ())
                kill (0, SIGKILL);
            _exit (1);
        }
    }
}

/* ---- open / close -------------------------------------------------------- */

static volatile struct dtshm_page *map_page (const char *path)
{
    int fd = open (path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        warn ("DT_AGENT_SHM=%s", path, errno);
        return NULL;
    }
    struct stat st;
    if (fstat (fd, &st) < 0 || st.st_size < DTSHM_SIZE) {
        warn ("DT_AGENT_SHM=%s: file too small for a dtclient page", path, 0);
        close (fd);
        return NULL;
    }
    void *p = mmap (NULL, DTSHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close (fd);
    if (p == MAP_FAILED) {
        warn ("mmap DT_AGENT_SHM=%s", path, errno);
        return NULL;
    }
    struct dtshm_page *pg = p;
    if (pg->magic != DTSHM_MAGIC || pg->version != DTPROTO_VERSION) {
        warn ("DT_AGENT_SHM=%s: not a dtclient page of protocol version 1", path, 0);
        munmap (p, DTSHM_SIZE);
        return NULL;
    }
    return pg;
}

dtclient_t *dtclient_open (void)
{
    dtclient_t *c = calloc (1, sizeof (*c));
    if (!c)
        return NULL;
    c->fd = -1;
    c->wake[0] = c->wake[1] = -1;
    pthread_mutex_init (&c->lock, NULL);
    c->page = &c->local;
    c->local.magic = DTSHM_MAGIC;
    c->local.version = DTPROTO_VERSION;

    const char *s = getenv ("RANK");
    c->rank = s ? atoi (s) : 0;
    c->local.rank = c->rank;
    s = getenv ("DT_RENDEZVOUS_DIR");
    if (s && *s)
        c->rdv_dir = strdup (s);

    const char *sock = getenv ("DT_AGENT_SOCKET");
    if (!sock || !*sock)
        return c; /* no agent: the no-op client */

    const char *shm = getenv ("DT_AGENT_SHM");
    if (shm && *shm) {
        volatile struct dtshm_page *pg = map_page (shm);
        if (pg) {
            c->page = pg;
            c->page_mapped = 1;
            c->nreports = pg->report.nreports;
        }
    }
    c->fd = connect_agent (sock);
    if (c->fd < 0) {
        warn ("connect to the agent at DT_AGENT_SOCKET=%s", sock, errno);
        return c;
    }
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, DTPROTO_HELLO);
    dtproto_add_int (&c->buf, DTPROTO_T_RANK, c->rank);
    dtproto_add_int (&c->buf, DTPROTO_T_PID, getpid ());
    dtclient_err_t e = exchange (c, NULL, NULL);
    pthread_mutex_unlock (&c->lock);
    if (e != DTCLIENT_OK) {
        warn ("hello to the agent: %s", dtclient_strerror (e), 0);
        close (c->fd);
        c->fd = -1;
        return c;
    }
    if (pipe2 (c->wake, O_CLOEXEC) == 0 &&
        pthread_create (&c->watcher, NULL, watcher_cb, c) == 0)
        c->watcher_started = 1;
    return c;
}

void dtclient_close (dtclient_t *c)
{
    if (!c)
        return;
    int saved = errno;
    if (c->watcher_started) {
        char b = 1;
        ssize_t rc = write (c->wake[1], &b, 1);
        (void)rc;
        pthread_join (c->watcher, NULL);
    }
    if (c->wake[0] >= 0)
        close (c->wake[0]);
    if (c->wake[1] >= 0)
        close (c->wake[1]);
    if (c->fd >= 0)
        close (c->fd);
    if (c->page_mapped)
        munmap ((void *)c->page, DTSHM_SIZE);
    dtproto_buf_free (&c->buf);
    pthread_mutex_destroy (&c->lock);
    free (c->rdv_dir);
    free (c);
    errno = saved;
}

int dtclient_connected (const dtclient_t *c)
{
    return c && c->fd >= 0;
}

/* ---- step, busy, poll: shared memory only -------------------------------- */

static inline uint64_t report_begin (volatile struct dtshm_page *p)
{
    uint64_t s = p->report.seq;
    __atomic_store_n (&p->report.seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence (__ATOMIC_RELEASE);
    return s;
}

static inline void report_end (volatile struct dtshm_page *p, uint64_t s)
{
    __atomic_store_n (&p->report.seq, s + 2, __ATOMIC_RELEASE);
}

void dtclient_step (dtclient_t *c, int64_t step, double loss, int64_t samples,
                    double compute_s, double comm_s)
{
    if (!c)
        return;
    volatile struct dtshm_page *p = c->page;
    uint64_t s = report_begin (p);
    p->report.step = step;
    p->report.loss = loss;
    p->report.samples = samples;
    p->report.compute_ms = compute_s * 1000.0;
    p->report.comm_ms = comm_s * 1000.0;
    p->report.nreports = ++c->nreports;
    report_end (p, s);
}

void dtclient_step_dims (dtclient_t *c, int64_t step, const double bytes[3],
                         const double comm_s[3], const double exposed_s[3])
{
    if (!c)
        return;
    volatile struct dtshm_page *p = c->page;
    uint64_t s = p->dims.seq;
    __atomic_store_n (&p->dims.seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence (__ATOMIC_RELEASE);
    p->dims.step = step;
    for (int d = 0; d < DTSHM_NDIMS; d++) {
        p->dims.bytes[d] = bytes[d];
        p->dims.comm_ms[d] = comm_s[d] * 1000.0;
        p->dims.exposed_ms[d] = exposed_s[d] * 1000.0;
    }
    __atomic_store_n (&p->dims.seq, s + 2, __ATOMIC_RELEASE);
}

void dtclient_set_busy (dtclient_t *c, int busy)
{
    if (!c)
        return;
    volatile struct dtshm_page *p = c->page;
    uint64_t s = report_begin (p);
    p->report.busy = busy ? 1 : 0;
    report_end (p, s);
}

void dtclient_collective (dtclient_t *c, int enter)
{
    if (!c)
        return;
    /* One atomic add, not the seqlock: the seqlock has one writer, and a
     * comm thread enters collectives while the main thread reports. */
    __atomic_add_fetch (&c->page->report.waiting, enter ? 1 : -1, __ATOMIC_RELAXED);
}

int dtclient_poll (dtclient_t *c, dtclient_cmd_t *cmd)
{
    struct dtshm_cmd k;
    if (!c || !c->page_mapped)
        return 0;
    if (dtshm_read_cmd (c->page, &k) < 0 || k.cmd_seq <= c->last_cmd_seq)
        return 0;
    c->last_cmd_seq = k.cmd_seq;
    dtshm_ack_cmd (c->page, k.cmd_seq);
    if (cmd) {
        cmd->kind = (dtclient_cmd_kind_t)k.kind;
        cmd->step = k.step;
        cmd->seq = k.cmd_seq;
    }
    return 1;
}

int dtclient_assigned_rank (const dtclient_t *c)
{
    if (!c)
        return -1;
    if (!c->page_mapped)
        return c->rank;
    /* (the agent writes the rank before the command that announces it) */
    return __atomic_load_n (&c->page->rank, __ATOMIC_ACQUIRE);
}

/* ---- messages ------------------------------------------------------------ */

dtclient_err_t dtclient_shard_written (dtclient_t *c, int64_t step, const char *path,
                                       uint64_t bytes, uint32_t crc32c)
{
    if (!c || !path || !*path || step < 0 || strlen (path) > DTPROTO_MAX_PATH ||
        bytes > INT64_MAX)
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, DTPROTO_SHARD);
    dtproto_add_int (&c->buf, DTPROTO_T_STEP, step);
    dtproto_add_str (&c->buf, DTPROTO_T_PATH, path);
    dtproto_add_int (&c->buf, DTPROTO_T_BYTES, (int64_t)bytes);
    dtproto_add_int (&c->buf, DTPROTO_T_CRC32C, crc32c);
    dtclient_err_t e = exchange (c, NULL, NULL);
    pthread_mutex_unlock (&c->lock);
    return e;
}

dtclient_err_t dtclient_shard_written_jit (dtclient_t *c, int64_t step, int shard_rank,
                                           const char *path, uint64_t bytes,
                                           uint32_t crc32c)
{
    if (!c || !path || !*path || step < 0 || shard_rank < 0 ||
        strlen (path) > DTPROTO_MAX_PATH || bytes > INT64_MAX)
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, DTPROTO_SHARD);
    dtproto_add_int (&c->buf, DTPROTO_T_STEP, step);
    dtproto_add_str (&c->buf, DTPROTO_T_PATH, path);
    dtproto_add_int (&c->buf, DTPROTO_T_BYTES, (int64_t)bytes);
    dtproto_add_int (&c->buf, DTPROTO_T_CRC32C, crc32c);
    dtproto_add_int (&c->buf, DTPROTO_T_RANK, shard_rank);
    dtproto_add_int (&c->buf, DTPROTO_T_JIT, 1);
    dtclient_err_t e = exchange (c, NULL, NULL);
    pthread_mutex_unlock (&c->lock);
    return e;
}

dtclient_err_t dtclient_shard_failed (dtclient_t *c, int64_t step, const char *reason)
{
    if (!c || step < 0)
        return DTCLIENT_ERR_INVAL;
    if (!reason)
        reason = "";
    if (c->fd < 0)
        return DTCLIENT_OK;
    size_t n = strnlen (reason, DTPROTO_MAX_TEXT); /* long reasons are cut */
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, DTPROTO_SHARD_FAILED);
    dtproto_add_int (&c->buf, DTPROTO_T_STEP, step);
    dtproto_add_bytes (&c->buf, DTPROTO_T_TEXT, reason, n);
    dtclient_err_t e = exchange (c, NULL, NULL);
    pthread_mutex_unlock (&c->lock);
    return e;
}

/* One request carrying a JSON object (result, integrity, numerics, perf,
 * caps), answered by a status. */
static dtclient_err_t send_json (dtclient_t *c, int type, const char *json)
{
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, type);
    dtproto_add_str (&c->buf, DTPROTO_T_JSON, json);
    dtclient_err_t e = exchange (c, NULL, NULL);
    pthread_mutex_unlock (&c->lock);
    return e;
}

dtclient_err_t dtclient_integrity (dtclient_t *c, const char *json_object)
{
    if (!c || !json_object || strlen (json_object) > DTPROTO_MAX_VALUE)
        return DTCLIENT_ERR_INVAL;
    if (json_object[0] != '{')
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    return send_json (c, DTPROTO_INTEGRITY, json_object);
}

dtclient_err_t dtclient_numerics (dtclient_t *c, const char *json_object)
{
    if (!c || !json_object || strlen (json_object) > DTPROTO_MAX_TEXT ||
        json_object[0] != '{')
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    return send_json (c, DTPROTO_NUMERICS, json_object);
}

dtclient_err_t dtclient_perf (dtclient_t *c, double model_flops, double peak_flops,
                              const char *peak_source)
{
    char json[192];
    if (!c || !(model_flops >= 1) || !(peak_flops >= 0) || model_flops > 1e24 ||
        peak_flops > 1e24 || (peak_source && strlen (peak_source) > 31))
        return DTCLIENT_ERR_INVAL;
    for (const char *p = peak_source; p && *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-' || *p == '.'))
            return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    snprintf (json, sizeof (json), "{\"model_flops\": %.6e, \"peak_flops\": %.6e%s%s%s}",
              model_flops, peak_flops, peak_source ? ", \"peak_source\": \"" : "",
              peak_source ? peak_source : "", peak_source ? "\"" : "");
    return send_json (c, DTPROTO_PERF, json);
}

dtclient_err_t dtclient_declare (dtclient_t *c, unsigned caps)
{
    if (!c || (caps & ~(unsigned)(DTCLIENT_CAP_REFORM | DTCLIENT_REFORM_WAITING)))
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    return send_json (c, DTPROTO_CAPS,
                      (caps & DTCLIENT_REFORM_WAITING)
                        ? "{\"reform\": true, \"waiting\": true}"
                      : (caps & DTCLIENT_CAP_REFORM) ? "{\"reform\": true}"
                                                     : "{}");
}

dtclient_err_t dtclient_result (dtclient_t *c, const char *json_object)
{
    if (!c || !json_object || strlen (json_object) > DTPROTO_MAX_VALUE)
        return DTCLIENT_ERR_INVAL;
    const char *j = json_object;
    while (*j == ' ' || *j == '\n' || *j == '\t' || *j == '\r')
        j++;
    if (*j != '{')
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return DTCLIENT_OK;
    return send_json (c, DTPROTO_RESULT, json_object);
}

/* ---- key-value store ----------------------------------------------------- */

/* The no-op client's kv: one file per key in DT_RENDEZVOUS_DIR.  '/' is
 * allowed in keys, not in file names: it is written "%2F" ('%' is not a key
 * character, so the mapping is one-to-one). */
static int rdv_path (const dtclient_t *c, const char *key, char *buf, size_t len)
{
    size_t o = (size_t)snprintf (buf, len, "%s/", c->rdv_dir);
    for (const char *k = key; *k; k++) {
        if (o + 4 >= len)
            return -1;
        if (*k == '/') {
            memcpy (buf + o, "%2F", 3);
            o += 3;
        }
        else
            buf[o++] = *k;
    }
    buf[o] = '\0';
    return 0;
}

static dtclient_err_t rdv_set (dtclient_t *c, const char *key, const void *val,
                               size_t len)
{
    char path[4096], tmp[4200];
    if (rdv_path (c, key, path, sizeof (path)) < 0)
        return DTCLIENT_ERR_INVAL;
    snprintf (tmp, sizeof (tmp), "%s.tmp.%d", path, (int)getpid ());
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return DTCLIENT_ERR_IO;
    /* Written to a temporary name and renamed: a reader never sees half. */
    const char *q = val;
    size_t n = len;
    while (n > 0) {
        ssize_t w = write (fd, q, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            close (fd);
            unlink (tmp);
            return DTCLIENT_ERR_IO;
        }
        q += w;
        n -= (size_t)w;
    }
    if (close (fd) < 0 || rename (tmp, path) < 0) {
        unlink (tmp);
        return DTCLIENT_ERR_IO;
    }
    return DTCLIENT_OK;
}

static dtclient_err_t rdv_get (dtclient_t *c, const char *key, void **val, size_t *len)
{
    char path[4096];
    if (rdv_path (c, key, path, sizeof (path)) < 0)
        return DTCLIENT_ERR_INVAL;
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? DTCLIENT_ERR_NOTFOUND : DTCLIENT_ERR_IO;
    size_t cap = 4096, n = 0;
    char *buf = malloc (cap);
    for (;;) {
        if (!buf)
            break;
        if (n == cap) {
            char *nb = cap >= DTPROTO_MAX_VALUE * 2 ? NULL : realloc (buf, cap * 2);
            if (!nb) {
                free (buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read (fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free (buf);
            buf = NULL;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close (fd);
    if (!buf)
        return DTCLIENT_ERR_IO;
    *val = buf;
    *len = n;
    return DTCLIENT_OK;
}

dtclient_err_t dtclient_kv_set (dtclient_t *c, const char *key, const void *val,
                                size_t len)
{
    if (!c || !key || !dtproto_key_valid (key, strlen (key)) || len > DTPROTO_MAX_VALUE ||
        (len && !val))
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return c->rdv_dir ? rdv_set (c, key, val, len) : DTCLIENT_ERR_NOAGENT;
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, DTPROTO_KV_SET);
    dtproto_add_str (&c->buf, DTPROTO_T_KEY, key);
    dtproto_add_bytes (&c->buf, DTPROTO_T_VALUE, val, len);
    dtclient_err_t e = exchange (c, NULL, NULL);
    pthread_mutex_unlock (&c->lock);
    return e;
}

dtclient_err_t dtclient_kv_get (dtclient_t *c, const char *key, void **val, size_t *len)
{
    if (!c || !key || !val || !len || !dtproto_key_valid (key, strlen (key)))
        return DTCLIENT_ERR_INVAL;
    if (c->fd < 0)
        return c->rdv_dir ? rdv_get (c, key, val, len) : DTCLIENT_ERR_NOAGENT;
    pthread_mutex_lock (&c->lock);
    dtproto_begin (&c->buf, DTPROTO_KV_GET);
    dtproto_add_str (&c->buf, DTPROTO_T_KEY, key);
    dtclient_err_t e = exchange (c, val, len);
    pthread_mutex_unlock (&c->lock);
    return e;
}

static int64_t mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waiting is polling (the controller never holds a request open): start
 * at 5 ms so a rendezvous of ranks started together completes quickly, at
 * most 20 ms apart for the first second (ranks of a restart start within
 * a few hundred ms of each other, and each poll is one small request),
 * then back off to 100 ms so a long wait costs little. */
dtclient_err_t dtclient_kv_wait (dtclient_t *c, const char *key, int timeout_ms,
                                 void **val, size_t *len)
{
    int64_t start = mono_ms ();
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : start + timeout_ms;
    int delay_ms = 5;
    for (;;) {
        dtclient_err_t e = dtclient_kv_get (c, key, val, len);
        if (e != DTCLIENT_ERR_NOTFOUND)
            return e;
        int64_t left = deadline - mono_ms ();
        if (left <= 0)
            return DTCLIENT_ERR_TIMEOUT;
        int d = delay_ms < left ? delay_ms : (int)left;
        struct timespec ts = { d / 1000, (long)(d % 1000) * 1000000L };
        while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
            ;
        if (delay_ms < (mono_ms () - start < 1000 ? 20 : 100))
            delay_ms *= 2;
    }
}
