/* comm_nccl_int.h: what comm_nccl.c (collectives, splits) and
 * comm_nccl_p2p.c (the pipeline's point-to-point links) share: the NCCL
 * communicator of comm.h and its deadline helpers.  Built only with
 * --with-cuda. */
#ifndef DT_TRAINER_COMM_NCCL_INT_H
#define DT_TRAINER_COMM_NCCL_INT_H

#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/comm.h"

#define NCCL_WHO_LEN 256

/* The four one-way links of a rank in a pipeline group (comm_nccl_p2p.c). */
enum nccl_link_dir {
    NCCL_TO_NEXT = 0,   /* sends to rank + 1 */
    NCCL_FROM_PREV = 1, /* receives from rank - 1 */
    NCCL_TO_PREV = 2,   /* sends to rank - 1 */
    NCCL_FROM_NEXT = 3, /* receives from rank + 1 */
    NCCL_NLINKS = 4
};

struct nccl_link;

struct nccl_comm {
    struct dt_comm base; /* must be first */
    ncclComm_t comm;
    cudaStream_t stream;
    long timeout_ms;
    void *scratch; /* device staging for host buffers / allgather */
    size_t scratch_bytes;
    void *pinned; /* pinned host staging for host buffers */
    size_t pinned_bytes;
    cudaEvent_t ready;         /* recorded on the compute (default) stream */
    char (*who)[NCCL_WHO_LEN]; /* per rank: "host ip ip ..." (init's allgather) */
    int broken;
    /* Set by dt_comm_abort from any thread (the re-form's watch): the
     * owning thread's waits see it and abort the communicator themselves
     * (NCCL calls on one communicator from two threads at once are not
     * allowed, and ncclCommAbort frees it). */
    int abort_req;
    struct nccl_link *link[NCCL_NLINKS]; /* point-to-point (a pipeline group) */
    struct nccl_comm *next_live;         /* the process's live communicators */
};

/* Set errno (EIO) and err; -1. */
int nccl_cuda_fail (dt_error_t *err, const char *what, cudaError_t e);
int nccl_fail (dt_error_t *err, const char *what, ncclResult_t r);

/* The NCCL communicator *c failed with r, or timed out (r ==
 * ncclSuccess): keep NCCL's last error text (it may name the peer), abort
 * *c (set to NULL), mark n broken, report.  -1. */
int nccl_broken (struct nccl_comm *n, ncclComm_t *c, const char *what, ncclResult_t r,
                 dt_error_t *err);

/* 0 when n may be used; -1 with err when it is broken, or when an abort
 * was requested (dt_comm_abort): then it is aborted here, in the thread
 * that owns it. */
int nccl_usable (struct nccl_comm *n, dt_error_t *err);

/* r from an operation on the non-blocking communicator *c: ncclInProgress
 * means not yet enqueued; poll until it is (or fails, or the deadline). */
int nccl_enqueued (struct nccl_comm *n, ncclComm_t *c, const char *what, ncclResult_t r,
                   dt_error_t *err);

/* Wait with the deadline until the work queued on s so far is done,
 * watching *c's asynchronous error. */
int nccl_wait_stream (struct nccl_comm *n, ncclComm_t *c, cudaStream_t s,
                      const char *what, dt_error_t *err);

/* Make s wait for the work queued so far on the compute (legacy default)
 * stream: an event, not a synchronisation of the device. */
int nccl_after_compute (struct nccl_comm *n, cudaStream_t s, dt_error_t *err);

/* A split of the non-blocking communicator parent (r: what ncclCommSplit
 * returned): poll until the parent is ready again and, for a rank with a
 * colour, *child is set and ready, within the deadline. */
int nccl_split_wait (struct nccl_comm *n, ncclComm_t parent, ncclComm_t *child,
                     int colored, ncclResult_t r, const char *what, dt_error_t *err);

/* A split that failed: abort the parent pn (which waits for NCCL's split
 * job to end, so that it no longer writes *child), then *child if set. */
void nccl_split_failed (struct nccl_comm *pn, ncclComm_t *child);

void nccl_pause (void);

/* comm_nccl_p2p.c: the links of n (a group of n->base.size ranks), split
 * from n->comm: a collective over n.  0 or -1 with err. */
int nccl_p2p_open (struct nccl_comm *n, dt_error_t *err);
void nccl_p2p_close (struct nccl_comm *n);
/* Abort the links' NCCL communicators (their queued operations quit). */
void nccl_p2p_abort (struct nccl_comm *n);
int nccl_p2p_send (dt_comm_t *c, const void *buf, size_t bytes, int peer, uint64_t slot,
                   dt_error_t *err);
int nccl_p2p_recv (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                   dt_error_t *err);
int nccl_p2p_post_recv (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                        dt_error_t *err);
int nccl_p2p_flush (dt_comm_t *c, dt_error_t *err);

#endif
