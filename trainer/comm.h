/* comm.h: collectives of dttrain behind one C interface (gloo on CPUs, NCCL on GPUs).
 *
 * Every call returns 0, or -1 with a one-line message in err (the peer
 * involved when the backend says).  A dead peer gives an error within the
 * collective timeout, never a hang.  After an error the communicator is
 * unusable: destroy it (the trainer exits).
 *
 * Buffers are host memory for gloo and device memory for NCCL (the
 * trainer's kernel backend decides; see comm_create).  All ranks must call
 * the same collectives in the same order with the same sizes.
 *
 * Determinism: for a fixed world size and message size, every collective
 * gives the same bits on every rank and on every run.
 */
#ifndef DT_TRAINER_COMM_H
#define DT_TRAINER_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm_t;

enum dt_comm_dtype { DT_F32 = 0, DT_F64 = 1, DT_I64 = 2 };
enum dt_comm_op { DT_SUM = 0, DT_MAX = 1 };

/* A key-value store for the bootstrap (the agent's kv through libdtclient).
 * set: 0 or -1.  wait: blocks until key exists or timeout; *val is
 * malloc'ed (caller frees); 0 or -1. */
typedef struct {
    void *ctx;
    int (*set) (void *ctx, const char *key, const void *val, size_t len);
    int (*wait) (void *ctx, const char *key, long timeout_ms, void **val, size_t *len);
} dt_comm_store_t;

struct dt_comm_params {
    int rank, size;
    const char *rendezvous_dir;   /* directory store (gloo FileStore), or NULL */
    const dt_comm_store_t *store; /* used when rendezvous_dir is NULL */
    const char *prefix;           /* key prefix: unique per attempt */
    const char *host;             /* address this rank listens on (gloo) */
    long timeout_ms;              /* collective and bootstrap timeout */
};

/* gloo over TCP.  New; NULL on error. */
dt_comm_t *dt_comm_gloo_create (const struct dt_comm_params *p, dt_error_t *err);
/* One rank, no peers.  New; NULL on error. */
dt_comm_t *dt_comm_self_create (dt_error_t *err);
/* NCCL on the current CUDA device; NULL with ENOTSUP when not built. */
dt_comm_t *dt_comm_nccl_create (const struct dt_comm_params *p, dt_error_t *err);
/* NCCL: the group of parent's ranks that pass the same color, ranked by
 * key (0 .. size - 1), split from parent: a collective over parent (every
 * rank of it calls, in the same order).  members[size]: parent's ranks of
 * the group in its order (the peer an error names).  p2p: also send and
 * recv between neighbouring ranks (rank +- 1: a pipeline).  New; NULL on
 * error (ENOTSUP when not built). */
dt_comm_t *dt_comm_nccl_split (dt_comm_t *parent, int color, int key, const int *members,
                               int size, int p2p, dt_error_t *err);
/* NCCL: start the sum over c of buf[n] (float32, device memory) behind
 * the kernels queued so far (an event on the compute stream) and return;
 * buf stays untouched until dt_comm_nccl_wait, which waits for every one
 * started, within the timeout (a gradient bucket reduced while the
 * backward pass goes on).  0 or -1 with err (ENOTSUP when not built). */
int dt_comm_nccl_allreduce_start (dt_comm_t *c, float *buf, size_t n, dt_error_t *err);
int dt_comm_nccl_wait (dt_comm_t *c, dt_error_t *err);
/* NCCL's version as ncclGetVersion gives it (e.g. 21805 for 2.18.5), or
 * -1 when NCCL is not built. */
int dt_comm_nccl_version (void);

struct dt_comm_ops {
    const char *name;
    int (*allreduce) (dt_comm_t *c, void *buf, size_t n, enum dt_comm_dtype t,
                      enum dt_comm_op op, dt_error_t *err);
    /* out[counts[rank]] = this rank's slice (offset = sum of counts[<rank])
     * of the elementwise sum of in[sum counts] over ranks.  float32.  The
     * contents of in are undefined afterwards (used as scratch); out may be
     * in + offset. */
    int (*reduce_scatter) (dt_comm_t *c, float *in, float *out, const size_t *counts,
                           dt_error_t *err);
    /* out[sum counts] = concat over ranks of in[counts[r]].  float32.
     * in may be out + offset. */
    int (*allgather) (dt_comm_t *c, const float *in, float *out, const size_t *counts,
                      dt_error_t *err);
    int (*broadcast) (dt_comm_t *c, void *buf, size_t bytes, int root, dt_error_t *err);
    int (*barrier) (dt_comm_t *c, dt_error_t *err);
    void (*destroy) (dt_comm_t *c);
    /* The rank whose address appears in an error text of this
     * communicator, or -1 (NULL: the backend cannot tell). */
    int (*peer_of) (dt_comm_t *c, const char *errtext);
    /* Point to point (pipeline parallelism; NULL: the backend has none).
     * send posts bytes for peer under slot and returns: buf must stay
     * unchanged until flush returns.  recv blocks until the bytes peer
     * sent under slot are in buf, or fails within the timeout naming the
     * peer.  flush waits for every posted send. */
    int (*send) (dt_comm_t *c, const void *buf, size_t bytes, int peer, uint64_t slot,
                 dt_error_t *err);
    int (*recv) (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                 dt_error_t *err);
    int (*flush) (dt_comm_t *c, dt_error_t *err);
    /* Post the receive of bytes from peer under slot into buf ahead of
     * the recv that waits for it (same peer, slot, buf, bytes): the bytes
     * may arrive meanwhile; buf must stay untouched until that recv
     * returns.  NULL: the backend has none (recv does it all). */
    int (*post_recv) (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                      dt_error_t *err);
    /* From any thread: fail every collective in progress on c, and every
     * later one (the group is known to be broken: a lost peer's
     * replacement is joining).  gloo wakes the waits at once; NCCL only
     * flags c, and the thread in the collective sees the flag within a
     * poll and aborts the NCCL communicator itself (ncclCommAbort frees
     * it: no other thread may call it meanwhile).  NULL: the backend
     * cannot. */
    void (*abort) (dt_comm_t *c);
};

/* Every communicator starts with a pointer to its ops.  The backends
 * zero on_wait when they create it. */
struct dt_comm {
    const struct dt_comm_ops *ops;
    int rank, size;
    /* Called with 1 before and 0 after every collective (dttrain tells
     * its agent it is blocked on peers: dtclient_collective). */
    void (*on_wait) (void *arg, int waiting);
    void *wait_arg;
};

static inline void dt_comm_set_wait_hook (dt_comm_t *c, void (*fn) (void *, int),
                                          void *arg)
{
    c->on_wait = fn;
    c->wait_arg = arg;
}

static inline void dt_comm_waiting (dt_comm_t *c, int waiting)
{
    if (c->on_wait)
        c->on_wait (c->wait_arg, waiting);
}

static inline int dt_comm_allreduce (dt_comm_t *c, void *buf, size_t n,
                                     enum dt_comm_dtype t, enum dt_comm_op op,
                                     dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->allreduce (c, buf, n, t, op, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline int dt_comm_reduce_scatter (dt_comm_t *c, float *in, float *out,
                                          const size_t *counts, dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->reduce_scatter (c, in, out, counts, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline int dt_comm_allgather (dt_comm_t *c, const float *in, float *out,
                                     const size_t *counts, dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->allgather (c, in, out, counts, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline int dt_comm_broadcast (dt_comm_t *c, void *buf, size_t bytes, int root,
                                     dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->broadcast (c, buf, bytes, root, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline int dt_comm_barrier (dt_comm_t *c, dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->barrier (c, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline void dt_comm_abort (dt_comm_t *c)
{
    if (c && c->ops->abort)
        c->ops->abort (c);
}

static inline int dt_comm_peer_of (dt_comm_t *c, const char *errtext)
{
    return c && c->ops->peer_of ? c->ops->peer_of (c, errtext) : -1;
}

static inline int dt_comm_send (dt_comm_t *c, const void *buf, size_t bytes, int peer,
                                uint64_t slot, dt_error_t *err)
{
    return c->ops->send (c, buf, bytes, peer, slot, err);
}

static inline int dt_comm_recv (dt_comm_t *c, void *buf, size_t bytes, int peer,
                                uint64_t slot, dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->recv (c, buf, bytes, peer, slot, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline int dt_comm_post_recv (dt_comm_t *c, void *buf, size_t bytes, int peer,
                                     uint64_t slot, dt_error_t *err)
{
    return c->ops->post_recv ? c->ops->post_recv (c, buf, bytes, peer, slot, err) : 0;
}

static inline int dt_comm_flush (dt_comm_t *c, dt_error_t *err)
{
    dt_comm_waiting (c, 1);
    int rc = c->ops->flush (c, err);
    dt_comm_waiting (c, 0);
    return rc;
}

static inline void dt_comm_destroy (dt_comm_t *c)
{
    if (c)
        c->ops->destroy (c);
}

#ifdef __cplusplus
}
#endif
#endif
