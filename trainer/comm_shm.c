/* comm_shm.c: point-to-point links in shared memory between two ranks on
 * one node, for a pipeline's activations and gradients.
 *
 * Why: over gloo's TCP pair on loopback every message costs the sender's
 * thread a copy through the socket (60-150 us for 128 KiB) and the
 * receiver a wake-up of gloo's loop thread, which reads and then wakes the
 * training thread; the data moves only once the sender's loop thread has
 * seen the receiver's notice that it posted the receive.  On shared cores
 * each of these threads waits for a core, so transfers on a pipeline's
 * critical path cost about half of what its bubble exceeds the theory by
 * (bench/results/layouts.md).  Here a message is one copy into a ring the
 * receiver owns and one copy out, and only the two training threads run.
 *
 * Each rank owns the ring it receives into: a memfd of a header and RING
 * data bytes; its peer maps it through /proc/PID/fd/FD (same node, same
 * user) after the two exchanged a struct shm_hello over gloo, and checks a
 * random cookie.  One sender, one receiver: the sender publishes a record
 * (slot, bytes, payload) by moving head, the receiver frees it by moving
 * tail; each waits on a futex word (head_seq, tail_seq) in slices of
 * 10 ms, checking the deadline, an abort, the peer's process (a pidfd:
 * a dead peer is an error at once, not at the deadline) and whether the
 * peer destroyed the link (a re-forming peer's closed "socket"). */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/dtime.h"
#include "trainer/comm_shm.h"

#define SHM_MAGIC 0x64747368726e6731ull /* "dtshrng1" */
/* 4 MiB of ring per direction: 32 activation sets of 128 KiB in flight;
 * a message above half of it goes over gloo. */
#define RING ((size_t)4 << 20)
#define HDR 4096
#define REC 64 /* records start on 64-byte boundaries */

struct ring {
    uint64_t magic, cookie;
    _Atomic uint64_t head, tail;         /* bytes published / freed, ever */
    _Atomic uint32_t head_seq, tail_seq; /* futex words: bumped on each move */
    _Atomic uint32_t rx_wait, tx_wait;   /* a side sleeps on its word */
    _Atomic uint32_t closed;             /* a side destroyed the link */
};

struct rec {
    uint64_t slot, bytes, skip; /* skip: the rest up to the ring's end is unused */
};

struct shm_link {
    int fd;          /* our ring's memfd */
    struct ring *rx; /* our ring (we receive) */
    struct ring *tx; /* the peer's ring (we send), NULL until attached */
    int pidfd;       /* the peer's process */
    atomic_int aborted;
};

static char *data (struct ring *r)
{
    return (char *)r + HDR;
}

static size_t up (size_t n)
{
    return (n + REC - 1) / REC * REC;
}

static void futex_wake (_Atomic uint32_t *w)
{
    syscall (SYS_futex, (uint32_t *)w, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

static void futex_wait (_Atomic uint32_t *w, uint32_t seen, long ns)
{
    struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
    syscall (SYS_futex, (uint32_t *)w, FUTEX_WAIT, seen, &ts, NULL, 0);
}

struct shm_link *shm_link_create (dt_error_t *err)
{
    struct shm_link *l = calloc (1, sizeof (*l));
    if (!l) {
        errprintf (err, "out of memory");
        return NULL;
    }
    l->pidfd = -1;
    if ((l->fd = memfd_create ("dttrain-p2p", MFD_CLOEXEC)) < 0 ||
        ftruncate (l->fd, HDR + RING) < 0) {
        errnoprintf (err, errno, "shared-memory ring");
        goto error;
    }
    l->rx = mmap (NULL, HDR + RING, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                  l->fd, 0);
    if (l->rx == MAP_FAILED) {
        l->rx = NULL;
        errnoprintf (err, errno, "shared-memory ring: mmap");
        goto error;
    }
    l->rx->magic = SHM_MAGIC;
    if (getrandom (&l->rx->cookie, sizeof (l->rx->cookie), 0) != sizeof (l->rx->cookie))
        l->rx->cookie = (uint64_t)dt_mono_ns () ^ ((uint64_t)getpid () << 32);
    return l;
error:
    shm_link_destroy (l);
    return NULL;
}

void shm_link_hello (const struct shm_link *l, struct shm_hello *h)
{
    memset (h, 0, sizeof (*h));
    h->magic = SHM_MAGIC;
    h->cookie = l->rx->cookie;
    h->pid = getpid ();
    h->fd = l->fd;
    h->ring = RING;
}

int shm_link_attach (struct shm_link *l, const struct shm_hello *p, dt_error_t *err)
{
    char path[64];
    int fd;
    struct ring *r;
    if (p->magic != SHM_MAGIC || p->ring != RING || p->pid <= 0)
        return errprintf (err, "the peer's shared-memory ring does not match this build");
    snprintf (path, sizeof (path), "/proc/%lld/fd/%lld", (long long)p->pid,
              (long long)p->fd);
    if ((fd = open (path, O_RDWR | O_CLOEXEC)) < 0)
        return errnoprintf (err, errno, "%s (the peer is on another node?)", path);
    r = mmap (NULL, HDR + RING, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close (fd);
    if (r == MAP_FAILED)
        return errnoprintf (err, errno, "%s: mmap", path);
    if (r->magic != SHM_MAGIC || r->cookie != p->cookie) {
        munmap (r, HDR + RING);
        return errprintf (err, "%s is not the peer's ring (another node's process?)",
                          path);
    }
    if ((l->pidfd = (int)syscall (SYS_pidfd_open, (pid_t)p->pid, 0)) < 0) {
        munmap (r, HDR + RING);
        return errnoprintf (err, errno, "pidfd_open %lld", (long long)p->pid);
    }
    l->tx = r;
    return 0;
}

size_t shm_link_max (const struct shm_link *l)
{
    (void)l;
    return RING / 2 - REC;
}

/* Waits until ready (re-read after every wake-up) or fails: the deadline,
 * an abort, the peer's exit.  word/seen/flag: the futex to sleep on. */
static int wait_for (struct shm_link *l, int (*ready) (struct shm_link *, size_t),
                     size_t arg, _Atomic uint32_t *word, _Atomic uint32_t *flag,
                     int64_t deadline, long timeout_ms, const char *what, dt_error_t *err)
{
    for (int spin = 0; spin < 64; spin++) /* the peer is often about to publish */
        if (ready (l, arg))
            return 0;
    for (;;) {
        uint32_t seen = atomic_load (word);
        if (ready (l, arg))
            return 0;
        if (atomic_load (&l->aborted))
            return errprintf (err, "%s: aborted (the group is broken)", what);
        if (atomic_load (&l->rx->closed) || atomic_load (&l->tx->closed))
            return errprintf (err, "%s: the peer closed the link", what);
        struct pollfd pf = { l->pidfd, POLLIN, 0 };
        if (poll (&pf, 1, 0) > 0)
            return errprintf (err, "%s: the peer's process has exited", what);
        int64_t now = dt_mono_ns ();
        if (now >= deadline)
            return errprintf (err, "%s: timed out after %ld ms", what, timeout_ms);
        atomic_store (flag, 1);
        if (!ready (l, arg))
            futex_wait (word, seen,
                        deadline - now < 10000000 ? (long)(deadline - now) : 10000000L);
        atomic_store (flag, 0);
    }
}

static int room (struct shm_link *l, size_t need)
{
    return atomic_load_explicit (&l->tx->head, memory_order_relaxed) + need -
             atomic_load_explicit (&l->tx->tail, memory_order_acquire) <=
           RING;
}

int shm_link_send (struct shm_link *l, const void *buf, size_t bytes, uint64_t slot,
                   long timeout_ms, dt_error_t *err)
{
    struct ring *r = l->tx;
    size_t need = REC + up (bytes);
    uint64_t head = atomic_load_explicit (&r->head, memory_order_relaxed);
    size_t pos = head % RING, pad = pos + need > RING ? RING - pos : 0;
    if (need > RING / 2)
        return errprintf (err, "shared-memory send of %zu bytes: above the ring's half",
                          bytes);
    if (wait_for (l, room, pad + need, &r->tail_seq, &r->tx_wait,
                  dt_mono_ns () + (int64_t)timeout_ms * 1000000, timeout_ms,
                  "shared-memory send", err) < 0)
        return -1;
    if (pad) { /* the record would cross the end: skip to the start */
        ((struct rec *)(data (r) + pos))->skip = 1;
        pos = 0;
    }
    struct rec *h = (struct rec *)(data (r) + pos);
    h->slot = slot;
    h->bytes = bytes;
    h->skip = 0;
    memcpy (data (r) + pos + REC, buf, bytes);
    atomic_store_explicit (&r->head, head + pad + need, memory_order_release);
    atomic_fetch_add (&r->head_seq, 1);
    if (atomic_load (&r->rx_wait))
        futex_wake (&r->head_seq);
    return 0;
}

static int nonempty (struct shm_link *l, size_t unused)
{
    (void)unused;
    return atomic_load_explicit (&l->rx->head, memory_order_acquire) !=
           atomic_load_explicit (&l->rx->tail, memory_order_relaxed);
}

int shm_link_recv (struct shm_link *l, void *buf, size_t bytes, uint64_t slot,
                   long timeout_ms, dt_error_t *err)
{
    struct ring *r = l->rx;
    int64_t deadline = dt_mono_ns () + (int64_t)timeout_ms * 1000000;
    for (;;) {
        if (wait_for (l, nonempty, 0, &r->head_seq, &r->rx_wait, deadline, timeout_ms,
                      "shared-memory receive", err) < 0)
            return -1;
        uint64_t tail = atomic_load_explicit (&r->tail, memory_order_relaxed);
        size_t pos = tail % RING;
        struct rec *h = (struct rec *)(data (r) + pos);
        if (h->skip) {
            atomic_store_explicit (&r->tail, tail + (RING - pos), memory_order_release);
            continue;
        }
        if (h->slot != slot || h->bytes != bytes)
            return errprintf (err,
                              "shared-memory receive: expected slot %llu of %zu bytes, "
                              "the peer sent slot %llu of %llu bytes",
                              (unsigned long long)slot, bytes,
                              (unsigned long long)h->slot, (unsigned long long)h->bytes);
        memcpy (buf, data (r) + pos + REC, bytes);
        atomic_store_explicit (&r->tail, tail + REC + up (bytes), memory_order_release);
        atomic_fetch_add (&r->tail_seq, 1);
        if (atomic_load (&r->tx_wait))
            futex_wake (&r->tail_seq);
        return 0;
    }
}

void shm_link_abort (struct shm_link *l)
{
    atomic_store (&l->aborted, 1);
    if (l->rx)
        futex_wake (&l->rx->head_seq);
    if (l->tx)
        futex_wake (&l->tx->tail_seq);
}

void shm_link_destroy (struct shm_link *l)
{
    if (!l)
        return;
    int e = errno;
    /* A peer still waiting on the link fails at once (like a closed
     * socket), not at its deadline: the re-form relies on it. */
    if (l->tx && l->rx) {
        atomic_store (&l->tx->closed, 1);
        atomic_store (&l->rx->closed, 1);
        futex_wake (&l->tx->head_seq);
        futex_wake (&l->rx->tail_seq);
    }
    if (l->tx)
        munmap (l->tx, HDR + RING);
    if (l->rx)
        munmap (l->rx, HDR + RING);
    if (l->fd >= 0)
        close (l->fd);
    if (l->pidfd >= 0)
        close (l->pidfd);
    free (l);
    errno = e;
}
