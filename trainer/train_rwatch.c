/* train_rwatch.c: a survivor's collective stuck on its lost peer.
 *
 * gloo (the 2022 snapshot Debian ships) fails the operations of a pair
 * whose peer died, but not a send queued behind an unfinished write nor a
 * receive whose message had begun to arrive: the collective then waits
 * out the communicator's timeout (60 s) instead of failing, and the rank
 * never gets to the controller's re-form command.  A thread watches the
 * command page: a re-form command left unread for rwatch_after_ms (the
 * rank reads its page at every step, and every 2 ms while it waits to
 * re-form), or read by the step loop and still not acted upon, means a
 * collective is stuck; the old group is broken (a peer was lost and is
 * being replaced), so its communicators are aborted (dt_comm_abort): the
 * collective fails, and the rank re-forms.  The
 * thread reads the page through a read-only mapping of its own; reopen
 * (train_reform.c) replaces the communicators under the same lock.
 *
 * The ordinary restart has the same gap: a survivor stuck that way never
 * writes its just-in-time checkpoint.  While the controller waits for one
 * it sends a stop whose step is negative (the attempt ended with a peer's
 * loss: save the state now); left unread, or read by the step loop and
 * not acted upon, it aborts the communicators the same way.  The
 * collective fails, and the rank writes its just-in-time checkpoint as for
 * any lost peer: a collective can only fail before the step's optimizer
 * update (none runs between the update and the step's end), so the state
 * saved is the last completed step's.
 *
 * On NCCL the need is greater: a peer lost over NVLink or PCIe within a
 * node is never reported (the collective's kernel spins waiting for it;
 * only the network transports see a socket close), so the collective
 * would wait out --comm-timeout.  There the abort only flags the
 * communicators: NCCL forbids calling one communicator from two threads
 * at once and ncclCommAbort frees it, so the main thread, which polls
 * every NCCL wait (the communicators are non-blocking), sees the flag
 * and calls ncclCommAbort itself (comm_nccl.c).
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent/client/dtclient.h"
#include "agent/client/dtproto.h"
#include "common/dtime.h"
#include "common/log.h"
#include "trainer/train_int.h"

/* Longer than a step's own poll interval could leave a command unread
 * while the rank is healthy and computing (an abort then only makes its
 * next collective fail, which a broken group does anyway). */
static const int64_t rwatch_after_ms = 100;

struct train_rwatch {
    pthread_t thread;
    pthread_mutex_t lock; /* the communicators' pointers, the attempt */
    const volatile struct dtshm_page *page;
    volatile int quit;
};

/* The page's command (the agent's seqlock half, read as dtproto.c does:
 * libdtclient does not export that code): 0, or -1 while a write is in
 * flight. */
static int read_cmd (const volatile struct dtshm_page *p, struct dtshm_cmd *k)
{
    uint64_t s1 = __atomic_load_n (&p->cmd.seq, __ATOMIC_ACQUIRE);
    if (s1 & 1)
        return -1;
    k->cmd_seq = p->cmd.cmd_seq;
    k->kind = p->cmd.kind;
    k->step = p->cmd.step;
    __atomic_thread_fence (__ATOMIC_ACQUIRE);
    return __atomic_load_n (&p->cmd.seq, __ATOMIC_RELAXED) == s1 ? 0 : -1;
}

/* What the group waits for, 0 nothing: the attempt a re-form is pending
 * for (the page's unread re-form command's, or the one the step loop read
 * and keeps, reform_pending, until its collective fails), or -1 for a
 * just-in-time stop (unread, or read by the step loop: peer_lost). */
static int64_t pending (struct trainer *t, struct train_rwatch *w)
{
    struct dtshm_cmd k;
    uint64_t read = __atomic_load_n (&w->page->cmd_read, __ATOMIC_ACQUIRE);
    int64_t a = __atomic_load_n (&t->reform_pending, __ATOMIC_RELAXED);
    int got = read_cmd (w->page, &k) == 0 && k.cmd_seq > read;
    if (got && k.kind == DTCLIENT_CMD_REFORM && k.step > a)
        a = k.step;
    if (a > __atomic_load_n (&t->reform_attempt, __ATOMIC_RELAXED))
        return a;
    if (__atomic_load_n (&t->peer_lost, __ATOMIC_RELAXED) ||
        (got && k.kind == DTCLIENT_CMD_STOP && k.step < 0))
        return -1;
    return 0;
}

static void *rwatch_thread (void *arg)
{
    struct trainer *t = arg;
    struct train_rwatch *w = t->rwatch;
    struct timespec tick = { 0, 20 * 1000 * 1000 };
    int64_t seen = 0, done = 0, seen_ms = 0;

    while (!w->quit) {
        nanosleep (&tick, NULL);
        int64_t a = pending (t, w);
        if (!a || a == done) {
            seen = 0;
            continue;
        }
        if (a != seen) {
            seen = a;
            seen_ms = dt_mono_ms ();
            continue;
        }
        if (dt_mono_ms () - seen_ms < rwatch_after_ms)
            continue;
        pthread_mutex_lock (&w->lock);
        if (pending (t, w) == a) { /* (not re-forming meanwhile) */
            if (a > 0)
                dt_log (LOG_NOTICE,
                        "rank %d: the re-form (attempt %" PRId64
                        ") waits %lld ms for a collective stuck on the lost peer: "
                        "aborting the old group's communicators",
                        t->rank, a, (long long)(dt_mono_ms () - seen_ms));
            else
                dt_log (LOG_NOTICE,
                        "rank %d: the just-in-time checkpoint waits %lld ms for a "
                        "collective stuck on the lost peer: aborting the group's "
                        "communicators",
                        t->rank, (long long)(dt_mono_ms () - seen_ms));
            dt_comm_abort (t->comm);
            dt_comm_abort (t->dp_comm);
            dt_comm_abort (t->tp_comm);
            dt_comm_abort (t->pp_comm);
        }
        pthread_mutex_unlock (&w->lock);
        done = a;
    }
    return NULL;
}

void train_rwatch_start (struct trainer *t)
{
    const char *path = getenv ("DT_AGENT_SHM");
    struct train_rwatch *w;
    int fd;
    if (t->rwatch || !path || !*path || (fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    void *p = mmap (NULL, DTSHM_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close (fd);
    if (p == MAP_FAILED)
        return;
    if (!(w = calloc (1, sizeof (*w)))) {
        munmap (p, DTSHM_SIZE);
        return;
    }
    w->page = p;
    pthread_mutex_init (&w->lock, NULL);
    t->rwatch = w;
    if (pthread_create (&w->thread, NULL, rwatch_thread, t) != 0) {
        dt_log (LOG_WARNING, "rank %d: no watch of the re-form command", t->rank);
        t->rwatch = NULL;
        pthread_mutex_destroy (&w->lock);
        munmap ((void *)w->page, DTSHM_SIZE);
        free (w);
    }
}

void train_rwatch_lock (struct trainer *t)
{
    if (t->rwatch)
        pthread_mutex_lock (&t->rwatch->lock);
}

void train_rwatch_unlock (struct trainer *t)
{
    if (t->rwatch)
        pthread_mutex_unlock (&t->rwatch->lock);
}

void train_rwatch_stop (struct trainer *t)
{
    struct train_rwatch *w = t->rwatch;
    if (!w)
        return;
    w->quit = 1;
    pthread_join (w->thread, NULL);
    pthread_mutex_destroy (&w->lock);
    munmap ((void *)w->page, DTSHM_SIZE);
    free (w);
    t->rwatch = NULL;
}
