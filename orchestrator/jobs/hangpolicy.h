/* hangpolicy.h: the controller-side hang watchdog's decision, pure (no
 * I/O, no clock: 'now' is an argument), over the job manager's rank table.
 *
 * In synchronous data parallelism every rank stops when one does, and the
 * steps alone do not tell the frozen rank from its peers blocked in a
 * collective.  The agents say more: whether a rank is blocked in a
 * collective ("waiting", from libdtclient) and whether its process is
 * stopped.  So the blame goes, in this order, to a stopped rank, to a rank
 * not waiting on its peers, and only then to a waiting one (after
 * HANG_WAITING_MULTIPLE times the timeout: the collective itself hangs);
 * within a class, to the lowest step, then the longest silence.
 */
#ifndef DT_JOBS_HANGPOLICY_H
#define DT_JOBS_HANGPOLICY_H

#include <stdbool.h>
#include <stdint.h>
#include "orchestrator/jobs.h"

enum hang_class {
    HANG_STOPPED = 0,     /* its process is stopped (SIGSTOP, a debugger) */
    HANG_NOT_WAITING = 1, /* not blocked on its peers: it is the hang */
    HANG_WAITING = 2,     /* blocked in a collective on its peers */
};
enum { HANG_WAITING_MULTIPLE = 2 }; /* the agents' ranks_waiting_multiple */

/* The class of a rank, and its name for messages. */
enum hang_class hang_class (const struct rank *rk);
const char *hang_class_name (enum hang_class c);

/* Is rank 'rk' watched: seen, with libdtclient, running, progress known? */
bool hang_watched (const struct rank *rk);

/* The watchdog's verdict over ranks[0..n). */
struct hang_verdict {
    int rank;            /* the rank to blame; -1: no hang */
    enum hang_class cls; /* its class */
    int64_t timeout_ms;  /* the timeout it exceeded */
    int over;            /* ranks over their timeout */
    int stalled;         /* ranks of its class stalled over half of it,
                          * itself included: > 1 means it is not known
                          * which of them hangs */
};

/* Decide at 'now' (epoch ms) with the hang timeouts of idle and busy
 * (saving/loading a checkpoint) ranks.  Returns true when a rank is over
 * its timeout (v->rank >= 0). */
bool hang_decide (const struct rank *ranks, int n, int64_t now, int64_t t_idle,
                  int64_t t_busy, struct hang_verdict *v);

#endif
