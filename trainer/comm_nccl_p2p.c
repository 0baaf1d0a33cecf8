/* comm_nccl_p2p.c: point-to-point sends and receives of comm.h on NCCL, for
 * the pipeline (activations forward, gradients backward between
 * neighbouring stages).  Built only with --with-cuda.
 *
 * NCCL matches a send and a receive between two ranks by their order, not
 * by a tag, and both are blocking for the GPU: an NCCL send does not finish
 * until the peer's receive runs, and every operation of a communicator
 * runs after the ones queued before it.  On one communicator, the 1F1B
 * schedule would deadlock: stage p's send of activations would wait behind
 * its receive of gradients, which waits for stage p + 1's send of
 * gradients, which waits behind p + 1's receive of those activations.  So
 * every direction between two neighbours is a communicator of its own (a
 * link: two ranks, split from the group), with a stream of its own:
 * operations on a link only ever wait for the peer's matching operation,
 * which the peer posts in the same order, as on gloo.  A rank has at most
 * four links (to and from rank - 1 and rank + 1); each link carries one
 * operation at a time, so nothing needs fusing in a group.
 *
 * The order is what matches a send with its receive (the slot only checks
 * that a recv is the receive posted before it): both ends of a link move
 * the micro-batches in the same order, as the pipeline's schedule does
 * (ascending on every link, step after step).
 *
 * NCCL connects a link lazily, at its first operation, which needs the
 * peer's first operation on it too: until the peer gets there a first
 * send does not return (within the deadline).  In the 1F1B schedule the
 * peer reaches its first receive on the link without anything more from
 * this rank (its warm-up needs only what was sent before), so this costs
 * a wait in the first step, never a deadlock.
 *
 * Deadlines: a send is queued after an event on the compute stream (it
 * reads what the kernels wrote, whether or not the device was
 * synchronised) and returns; flush waits for the sends with the deadline.
 * A receive is queued after the same event (the kernels that still read
 * the buffer come first) and waited for with the deadline.  Past it, or on
 * an asynchronous NCCL error (ncclCommGetAsyncError), the link is aborted
 * (ncclCommAbort) and the error names the peer: never a hang.  An abort
 * requested from another thread (dt_comm_abort on the group) is seen by
 * the same polls: the group and all its links are aborted.
 *
 * post_recv records the receive (checked against the recv that follows)
 * and recv queues it: a receive queued ahead would be a kernel waiting on
 * the device, and any device-wide synchronisation meanwhile (the kernels'
 * buffers growing: cudaFree) would wait for data that the peer sends only
 * after this rank goes on.  The contract holds (the buffer is untouched
 * until recv returns); the bytes move when recv runs, which over NVLink
 * costs little next to a stage's pass. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm_nccl_int.h"

struct nccl_post {
    void *buf;
    size_t bytes;
    uint64_t slot;
};

struct nccl_link {
    ncclComm_t comm;        /* two ranks: this one and the neighbour */
    cudaStream_t stream;    /* the link's operations, in order */
    int peer;               /* the neighbour's rank in the group */
    int other;              /* its rank in comm */
    struct nccl_post *post; /* receives posted, not yet received (FIFO) */
    size_t head, npost, cap;
};

static void link_free (struct nccl_link *l)
{
    if (!l)
        return;
    if (l->comm)
        ncclCommAbort (l->comm);
    if (l->stream)
        cudaStreamDestroy (l->stream);
    free (l->post);
    free (l);
}

void nccl_p2p_abort (struct nccl_comm *n)
{
    for (int d = 0; d < NCCL_NLINKS; d++)
        if (n->link[d] && n->link[d]->comm) {
            ncclCommAbort (n->link[d]->comm);
            n->link[d]->comm = NULL;
        }
}

void nccl_p2p_close (struct nccl_comm *n)
{
    for (int d = 0; d < NCCL_NLINKS; d++) {
        link_free (n->link[d]);
        n->link[d] = NULL;
    }
}

/* The links of the pairs (a, a + 1) with a of parity par: one split for
 * the direction a -> a + 1, one for a + 1 -> a.  Every rank of the group
 * calls both (NCCL_SPLIT_NOCOLOR outside a pair). */
static int open_pairs (struct nccl_comm *n, int par, dt_error_t *err)
{
    int r = n->base.rank, P = n->base.size;
    int a = r % 2 == par ? r : r - 1;
    int in = a >= 0 && a + 1 < P;
    char what[64];

    for (int back = 0; back < 2; back++) {
        struct nccl_link *l = calloc (1, sizeof (*l));
        ncclComm_t c = NULL;
        if (!l)
            return errprintf (err, "out of memory");
        snprintf (what, sizeof (what), "split (link %d %s %d)", a, back ? "<-" : "->",
                  a + 1);
        ncclResult_t res =
          ncclCommSplit (n->comm, in ? a : NCCL_SPLIT_NOCOLOR, r, &c, NULL);
        if (nccl_split_wait (n, n->comm, &c, in, res, what, err) < 0) {
            nccl_split_failed (n, &c);
            free (l);
            return -1;
        }
        if (!in) {
            free (l);
            continue;
        }
        l->comm = c;
        l->other = r == a ? 1 : 0;
        l->peer = r == a ? a + 1 : a;
        cudaError_t e = cudaStreamCreateWithFlags (&l->stream, cudaStreamNonBlocking);
        /* lower end: sends forward, receives back; upper end: the reverse */
        int d = r == a ? (back ? NCCL_FROM_NEXT : NCCL_TO_NEXT)
                       : (back ? NCCL_TO_PREV : NCCL_FROM_PREV);
        n->link[d] = l;
        if (e != cudaSuccess)
            return nccl_cuda_fail (err, "cudaStreamCreate (NCCL link)", e);
    }
    return 0;
}

int nccl_p2p_open (struct nccl_comm *n, dt_error_t *err)
{
    if (n->base.size < 2)
        return 0;
    /* (two ranks: one pair, (0, 1)) */
    if (open_pairs (n, 0, err) < 0 || (n->base.size > 2 && open_pairs (n, 1, err) < 0)) {
        nccl_p2p_close (n);
        return -1;
    }
    return 0;
}

/* The link for a send to or a receive from peer, of a device buffer;
 * NULL with err. */
static struct nccl_link *link_for (struct nccl_comm *n, int send, int peer, void *buf,
                                   dt_error_t *err)
{
    int r = n->base.rank;
    struct nccl_link *l = NULL;
    struct cudaPointerAttributes a;

    if (nccl_usable (n, err) < 0)
        return NULL;
    if (peer == r + 1)
        l = n->link[send ? NCCL_TO_NEXT : NCCL_FROM_NEXT];
    else if (peer == r - 1)
        l = n->link[send ? NCCL_TO_PREV : NCCL_FROM_PREV];
    if (!l) {
        errnoprintf (err, EINVAL,
                     "NCCL point to point: rank %d %s only its neighbours in the group "
                     "(rank %d of %d asked)",
                     r, send ? "sends to" : "receives from", peer, n->base.size);
        return NULL;
    }
    if (cudaPointerGetAttributes (&a, buf) != cudaSuccess ||
        (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)) {
        (void)cudaGetLastError ();
        errnoprintf (err, EINVAL, "NCCL point to point: the buffer is not device memory");
        return NULL;
    }
    return l;
}

int nccl_p2p_send (dt_comm_t *c, const void *buf, size_t bytes, int peer, uint64_t slot,
                   dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    struct nccl_link *l = link_for (n, 1, peer, (void *)buf, err);
    char what[48];
    if (!l || nccl_after_compute (n, l->stream, err) < 0)
        return -1;
    snprintf (what, sizeof (what), "send to rank %d", peer);
    ncclResult_t r = ncclSend (buf, bytes, ncclUint8, l->other, l->comm, l->stream);
    return nccl_enqueued (n, &l->comm, what, r, err);
}

int nccl_p2p_post_recv (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                        dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    struct nccl_link *l = link_for (n, 0, peer, buf, err);
    if (!l)
        return -1;
    if (l->head > 0 && l->head == l->npost)
        l->head = l->npost = 0;
    if (l->npost == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        struct nccl_post *p = realloc (l->post, cap * sizeof (*p));
        if (!p)
            return errprintf (err, "out of memory");
        l->post = p;
        l->cap = cap;
    }
    l->post[l->npost++] = (struct nccl_post){ buf, bytes, slot };
    return 0;
}

int nccl_p2p_recv (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                   dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    struct nccl_link *l = link_for (n, 0, peer, buf, err);
    char what[48];
    if (!l)
        return -1;
    if (l->head < l->npost) { /* posted: it must be the oldest, as posted */
        struct nccl_post *p = &l->post[l->head];
        if (p->slot != slot || p->buf != buf || p->bytes != bytes)
            return errnoprintf (err, EINVAL,
                                "NCCL point to point: recv of slot %llu from rank %d, "
                                "but slot %llu (%zu bytes) was posted first",
                                (unsigned long long)slot, peer,
                                (unsigned long long)p->slot, p->bytes);
        l->head++;
    }
    if (nccl_after_compute (n, l->stream, err) < 0)
        return -1;
    snprintf (what, sizeof (what), "recv from rank %d", peer);
    ncclResult_t r = ncclRecv (buf, bytes, ncclUint8, l->other, l->comm, l->stream);
    if (nccl_enqueued (n, &l->comm, what, r, err) < 0)
        return -1;
    return nccl_wait_stream (n, &l->comm, l->stream, what, err);
}

int nccl_p2p_flush (dt_comm_t *c, dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    const int dirs[2] = { NCCL_TO_NEXT, NCCL_TO_PREV };
    char what[48];
    if (nccl_usable (n, err) < 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        struct nccl_link *l = n->link[dirs[i]];
        if (!l)
            continue;
        snprintf (what, sizeof (what), "send to rank %d", l->peer);
        if (nccl_wait_stream (n, &l->comm, l->stream, what, err) < 0)
            return -1;
    }
    return 0;
}
