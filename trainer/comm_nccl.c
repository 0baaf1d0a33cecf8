/* comm_nccl.c: the NCCL backend of comm.h (built only with --with-cuda).
 *
 * Bootstrap: rank 0 makes the ncclUniqueId and publishes it through the
 * store (agent kv) or a file in the rendezvous directory.  The communicator
 * is non-blocking (ncclConfig_t.blocking = 0) so that every collective can
 * be waited for with a deadline: past the timeout, or on an asynchronous
 * NCCL error (a dead peer), the communicator is aborted and -1 returned,
 * never a hang.
 *
 * - An operation on a non-blocking communicator that returns ncclInProgress
 *   is not yet enqueued: it is polled (ncclCommGetAsyncError, under the
 *   same deadline) until it is, before anything is queued after it.
 * - Host buffers (the trainer's small control vectors) go through pinned
 *   host staging and a device scratch buffer: a device-to-host copy into
 *   pageable memory would block the host inside cudaMemcpyAsync, outside
 *   the deadline; into pinned memory it is queued like a kernel.
 * - The kernels run on the legacy default stream, NCCL on its own
 *   non-blocking stream: every collective first makes its stream wait for
 *   an event recorded on the default stream, so it reads finished
 *   gradients whether or not the caller synchronised the device.
 * - A failure names the lost peer when the error text (NCCL's last error)
 *   carries an address or host name that belongs to one rank only: every
 *   rank's host name and IPv4 addresses are gathered at init.
 * - The groups of a parallel layout (tp, pp, dp) are split from the world
 *   communicator (ncclCommSplit, a collective over the world: every rank
 *   splits in the same order); a pipeline group also gets its
 *   point-to-point links (comm_nccl_p2p.c).
 * - Abort from another thread (dt_comm_abort: the re-form's watch, when a
 *   collective waits on a lost peer that NCCL does not report, as over
 *   NVLink, where the kernel spins): the thread only sets a flag.  NCCL's
 *   thread-safety rules forbid operating one communicator from two
 *   threads at once, and ncclCommAbort frees the communicator (2.28: it
 *   runs blocking even on a non-blocking one), so calling it while the
 *   owning thread polls ncclCommGetAsyncError on it would use freed
 *   memory.  The owning thread's waits (every wait on NCCL here is a poll
 *   of ours, the communicator being non-blocking) see the flag within a
 *   poll and call ncclCommAbort themselves: it raises NCCL's abort flags
 *   first, so the spinning kernel and the proxy thread quit, then frees.
 *   The collective fails with "aborted", and so does every later one.
 */
#include "config.h"

#include <arpa/inet.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/dtime.h"
#include "trainer/comm.h"
#include "trainer/comm_nccl_int.h"

#define cuda_fail nccl_cuda_fail

static void n_destroy (dt_comm_t *c);

int dt_comm_nccl_version (void)
{
    int v = -1;
    return ncclGetVersion (&v) == ncclSuccess ? v : -1;
}

int nccl_cuda_fail (dt_error_t *err, const char *what, cudaError_t e)
{
    errno = EIO;
    return errprintf (err, "%s: %s", what, cudaGetErrorString (e));
}

int nccl_fail (dt_error_t *err, const char *what, ncclResult_t r)
{
    errno = EIO;
    return errprintf (err, "NCCL %s: %s", what, ncclGetErrorString (r));
}

static int ensure_scratch (struct nccl_comm *n, size_t bytes, dt_error_t *err)
{
    if (n->scratch_bytes >= bytes)
        return 0;
    if (n->scratch)
        cudaFree (n->scratch);
    n->scratch = NULL;
    n->scratch_bytes = 0;
    cudaError_t e = cudaMalloc (&n->scratch, bytes);
    if (e != cudaSuccess)
        return cuda_fail (err, "cudaMalloc (nccl scratch)", e);
    n->scratch_bytes = bytes;
    return 0;
}

static int abort_requested (struct nccl_comm *n)
{
    return __atomic_load_n (&n->abort_req, __ATOMIC_ACQUIRE);
}

int nccl_broken (struct nccl_comm *n, ncclComm_t *c, const char *what, ncclResult_t r,
                 dt_error_t *err)
{
    char last[160] = "";
    const char *l = *c ? ncclGetLastError (*c) : NULL;
    int aborted = r == ncclSuccess && abort_requested (n);
    if (l && *l && !aborted)
        snprintf (last, sizeof (last), " (%s)", l);
    n->broken = 1;
    if (*c)
        ncclCommAbort (*c);
    *c = NULL;
    nccl_p2p_abort (n); /* its other links' sends may wait for the lost peer */
    /* (an abort is the whole group's: its collectives and links) */
    if (aborted) {
        if (n->comm)
            ncclCommAbort (n->comm);
        n->comm = NULL;
        errno = ECANCELED;
        return errprintf (err, "NCCL %s: aborted: the group is broken (a peer was lost)",
                          what);
    }
    if (r == ncclSuccess) {
        errno = ETIMEDOUT;
        return errprintf (err, "NCCL %s: timed out after %ld ms (a peer died or hangs)%s",
                          what, n->timeout_ms, last);
    }
    errno = EIO;
    return errprintf (err, "NCCL %s: %s%s", what, ncclGetErrorString (r), last);
}

void nccl_pause (void)
{
    struct timespec ts = { 0, 50000 };
    nanosleep (&ts, NULL);
}

int nccl_enqueued (struct nccl_comm *n, ncclComm_t *c, const char *what, ncclResult_t r,
                   dt_error_t *err)
{
    int64_t deadline = dt_mono_ms () + n->timeout_ms;
    if (r == ncclSuccess)
        return 0;
    if (r != ncclInProgress)
        return nccl_broken (n, c, what, r, err);
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t q = ncclCommGetAsyncError (*c, &st);
        if (q != ncclSuccess)
            return nccl_broken (n, c, what, q, err);
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress)
            return nccl_broken (n, c, what, st, err);
        if (dt_mono_ms () > deadline || abort_requested (n))
            return nccl_broken (n, c, what, ncclSuccess, err);
        nccl_pause ();
    }
}

int nccl_wait_stream (struct nccl_comm *n, ncclComm_t *c, cudaStream_t s,
                      const char *what, dt_error_t *err)
{
    int64_t deadline = dt_mono_ms () + n->timeout_ms;
    for (;;) {
        cudaError_t e = cudaStreamQuery (s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return cuda_fail (err, what, e);
        /* "Not ready" is an answer, not an error, but the runtime keeps it
         * as this thread's last error: the kernel wrappers check that
         * after each launch (CKLAUNCH), and the first kernel after this
         * wait would fail with it.  Clear it. */
        (void)cudaGetLastError ();
        ncclResult_t ae = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError (*c, &ae);
        if (r != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress))
            return nccl_broken (n, c, what, r != ncclSuccess ? r : ae, err);
        if (dt_mono_ms () > deadline || abort_requested (n))
            return nccl_broken (n, c, what, ncclSuccess, err);
        nccl_pause ();
    }
}

static int enqueued (struct nccl_comm *n, const char *what, ncclResult_t r,
                     dt_error_t *err)
{
    return nccl_enqueued (n, &n->comm, what, r, err);
}

static int wait_done (struct nccl_comm *n, const char *what, dt_error_t *err)
{
    return nccl_wait_stream (n, &n->comm, n->stream, what, err);
}

int nccl_after_compute (struct nccl_comm *n, cudaStream_t s, dt_error_t *err)
{
    cudaError_t e;
    if ((e = cudaEventRecord (n->ready, 0)) != cudaSuccess ||
        (e = cudaStreamWaitEvent (s, n->ready, 0)) != cudaSuccess)
        return cuda_fail (err, "ordering the NCCL stream after the compute stream", e);
    return 0;
}

static int after_compute (struct nccl_comm *n, dt_error_t *err)
{
    return nccl_after_compute (n, n->stream, err);
}

static int ensure_pinned (struct nccl_comm *n, size_t bytes, dt_error_t *err)
{
    if (n->pinned_bytes >= bytes)
        return 0;
    if (n->pinned)
        cudaFreeHost (n->pinned);
    n->pinned = NULL;
    n->pinned_bytes = 0;
    cudaError_t e = cudaMallocHost (&n->pinned, bytes);
    if (e != cudaSuccess)
        return cuda_fail (err, "cudaMallocHost (nccl staging)", e);
    n->pinned_bytes = bytes;
    return 0;
}

/* Stage a host buffer in: host -> pinned -> device scratch (queued). */
static int stage_in (struct nccl_comm *n, const void *buf, size_t bytes, dt_error_t *err)
{
    cudaError_t e;
    if (ensure_scratch (n, bytes, err) < 0 || ensure_pinned (n, bytes, err) < 0)
        return -1;
    memcpy (n->pinned, buf, bytes);
    if ((e = cudaMemcpyAsync (n->scratch, n->pinned, bytes, cudaMemcpyHostToDevice,
                              n->stream)))
        return cuda_fail (err, "cudaMemcpyAsync", e);
    return 0;
}

static int is_host (const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes (&a, p) != cudaSuccess) {
        (void)cudaGetLastError ();
        return 1;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

static size_t dtype_size (enum dt_comm_dtype t)
{
    return t == DT_F32 ? 4 : 8;
}

static ncclDataType_t dtype_nccl (enum dt_comm_dtype t)
{
    return t == DT_F32 ? ncclFloat32 : t == DT_F64 ? ncclFloat64 : ncclInt64;
}

static int n_allreduce (dt_comm_t *c, void *buf, size_t cnt, enum dt_comm_dtype t,
                        enum dt_comm_op op, dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    size_t bytes = cnt * dtype_size (t);
    void *dbuf = buf;
    int host = is_host (buf);
    cudaError_t e;
    ncclResult_t r;

    if (nccl_usable (n, err) < 0)
        return -1;
    if (after_compute (n, err) < 0)
        return -1;
    if (host) {
        if (stage_in (n, buf, bytes, err) < 0)
            return -1;
        dbuf = n->scratch;
    }
    r = ncclAllReduce (dbuf, dbuf, cnt, dtype_nccl (t), op == DT_MAX ? ncclMax : ncclSum,
                       n->comm, n->stream);
    if (enqueued (n, "allreduce", r, err) < 0)
        return -1;
    if (host &&
        (e = cudaMemcpyAsync (n->pinned, dbuf, bytes, cudaMemcpyDeviceToHost, n->stream)))
        return cuda_fail (err, "cudaMemcpyAsync", e);
    if (wait_done (n, "allreduce", err) < 0)
        return -1;
    if (host)
        memcpy (buf, n->pinned, bytes);
    return 0;
}

int dt_comm_nccl_allreduce_start (dt_comm_t *c, float *buf, size_t cnt, dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    if (c->ops->destroy != n_destroy)
        return errnoprintf (err, EINVAL, "not an NCCL communicator");
    if (nccl_usable (n, err) < 0)
        return -1;
    if (after_compute (n, err) < 0)
        return -1;
    ncclResult_t r =
      ncclAllReduce (buf, buf, cnt, ncclFloat32, ncclSum, n->comm, n->stream);
    return enqueued (n, "allreduce", r, err);
}

int dt_comm_nccl_wait (dt_comm_t *c, dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    if (c->ops->destroy != n_destroy)
        return errnoprintf (err, EINVAL, "not an NCCL communicator");
    if (nccl_usable (n, err) < 0)
        return -1;
    dt_comm_waiting (c, 1);
    int rc = wait_done (n, "allreduce", err);
    dt_comm_waiting (c, 0);
    return rc;
}

/* Uneven shards: allreduce then keep our slice (bit-identical to dp). */
static int n_reduce_scatter (dt_comm_t *c, float *in, float *out, const size_t *counts,
                             dt_error_t *err)
{
    size_t total = 0, off = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            off = total;
        total += counts[r];
    }
    if (n_allreduce (c, in, total, DT_F32, DT_SUM, err) < 0)
        return -1;
    if (out != in + off) {
        cudaError_t e =
          cudaMemcpy (out, in + off, counts[c->rank] * 4, cudaMemcpyDeviceToDevice);
        if (e != cudaSuccess)
            return cuda_fail (err, "cudaMemcpy", e);
    }
    return 0;
}

/* ncclAllGather needs equal counts: pad every shard to the largest.  Host
 * buffers (the parameters gathered into the one-rank layout) go through
 * the pinned staging like the other collectives'. */
static int n_allgather (dt_comm_t *c, const float *in, float *out, const size_t *counts,
                        dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    size_t mx = 0, off = 0;
    int host = is_host (out);
    cudaError_t e;
    for (int r = 0; r < c->size; r++)
        if (counts[r] > mx)
            mx = counts[r];
    if (nccl_usable (n, err) < 0)
        return -1;
    if (ensure_scratch (n, mx * 4 * (c->size + 1), err) < 0 ||
        after_compute (n, err) < 0 ||
        (host && ensure_pinned (n, mx * 4 * c->size, err) < 0))
        return -1;
    float *sin = (float *)n->scratch + mx * c->size;
    float *sout = (float *)n->scratch;
    if (host) {
        memcpy (n->pinned, in, counts[c->rank] * 4);
        e = cudaMemcpyAsync (sin, n->pinned, counts[c->rank] * 4, cudaMemcpyHostToDevice,
                             n->stream);
    }
    else
        e = cudaMemcpyAsync (sin, in, counts[c->rank] * 4, cudaMemcpyDeviceToDevice,
                             n->stream);
    if (e)
        return cuda_fail (err, "cudaMemcpyAsync", e);
    ncclResult_t r = ncclAllGather (sin, sout, mx, ncclFloat32, n->comm, n->stream);
    if (enqueued (n, "allgather", r, err) < 0)
        return -1;
    if (host) {
        if ((e = cudaMemcpyAsync (n->pinned, sout, mx * 4 * c->size,
                                  cudaMemcpyDeviceToHost, n->stream)))
            return cuda_fail (err, "cudaMemcpyAsync", e);
        if (wait_done (n, "allgather", err) < 0)
            return -1;
        for (int k = 0; k < c->size; k++) {
            memmove (out + off, (float *)n->pinned + mx * k, counts[k] * 4);
            off += counts[k];
        }
        return 0;
    }
    for (int k = 0; k < c->size; k++) {
        if ((e = cudaMemcpyAsync (out + off, sout + mx * k, counts[k] * 4,
                                  cudaMemcpyDeviceToDevice, n->stream)))
            return cuda_fail (err, "cudaMemcpyAsync", e);
        off += counts[k];
    }
    return wait_done (n, "allgather", err);
}

static int n_broadcast (dt_comm_t *c, void *buf, size_t bytes, int root, dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    void *dbuf = buf;
    int host = is_host (buf);
    cudaError_t e;
    if (nccl_usable (n, err) < 0)
        return -1;
    if (after_compute (n, err) < 0)
        return -1;
    if (host) {
        if (stage_in (n, buf, bytes, err) < 0)
            return -1;
        dbuf = n->scratch;
    }
    ncclResult_t r =
      ncclBroadcast (dbuf, dbuf, bytes, ncclUint8, root, n->comm, n->stream);
    if (enqueued (n, "broadcast", r, err) < 0)
        return -1;
    if (host &&
        (e = cudaMemcpyAsync (n->pinned, dbuf, bytes, cudaMemcpyDeviceToHost, n->stream)))
        return cuda_fail (err, "cudaMemcpyAsync", e);
    if (wait_done (n, "broadcast", err) < 0)
        return -1;
    if (host)
        memcpy (buf, n->pinned, bytes);
    return 0;
}

static int n_barrier (dt_comm_t *c, dt_error_t *err)
{
    int64_t x = 0;
    return n_allreduce (c, &x, 1, DT_I64, DT_SUM, err);
}

/* The process's live communicators.  After a failure, operations queued
 * on the others may wait for the lost peer forever, and freeing device
 * memory (cudaFree) may synchronise the device, waiting for them: so once
 * one is broken, destroying any aborts them all first. */
static struct nccl_comm *live;

static void abort_comm (struct nccl_comm *n)
{
    nccl_p2p_abort (n);
    if (n->comm)
        ncclCommAbort (n->comm);
    n->comm = NULL;
    n->broken = 1;
}

int nccl_usable (struct nccl_comm *n, dt_error_t *err)
{
    if (abort_requested (n) && !n->broken) {
        abort_comm (n);
        errno = ECANCELED;
        return errprintf (err, "NCCL: aborted: the group is broken (a peer was lost)");
    }
    if (n->broken || !n->comm) {
        errno = EIO;
        return errprintf (err, "NCCL communicator is broken");
    }
    return 0;
}

/* comm.h's abort, from any thread: a flag only (see the top of the file). */
static void n_abort (dt_comm_t *c)
{
    __atomic_store_n (&((struct nccl_comm *)c)->abort_req, 1, __ATOMIC_RELEASE);
}

static void n_destroy (dt_comm_t *c)
{
    struct nccl_comm *n = (struct nccl_comm *)c, **pp, *l;
    int broken = 0;
    if (!n)
        return;
    for (l = live; l; l = l->next_live)
        broken |= l->broken;
    if (broken)
        for (l = live; l; l = l->next_live)
            abort_comm (l);
    for (pp = &live; *pp; pp = &(*pp)->next_live)
        if (*pp == n) {
            *pp = n->next_live;
            break;
        }
    nccl_p2p_abort (n);
    nccl_p2p_close (n);
    if (n->comm)
        ncclCommAbort (n->comm);
    if (n->scratch)
        cudaFree (n->scratch);
    if (n->pinned)
        cudaFreeHost (n->pinned);
    if (n->ready)
        cudaEventDestroy (n->ready);
    if (n->stream)
        cudaStreamDestroy (n->stream);
    free (n->who);
    free (n);
}

/* The rank that the error text names: a host name or address of exactly
 * one other rank (ranks on one node share theirs: then -1). */
static int n_peer_of (dt_comm_t *c, const char *errtext)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    int found = -1;
    if (!n->who || !errtext)
        return -1;
    for (int j = 0; j < c->size; j++) {
        if (j == c->rank)
            continue;
        char rec[NCCL_WHO_LEN], *save = NULL;
        memcpy (rec, n->who[j], sizeof (rec));
        rec[sizeof (rec) - 1] = '\0';
        for (char *tok = strtok_r (rec, " ", &save); tok;
             tok = strtok_r (NULL, " ", &save)) {
            if (!*tok || !strstr (errtext, tok) || strstr (n->who[c->rank], tok))
                continue;
            /* The same token for two other ranks: ambiguous. */
            for (int k = 0; k < c->size; k++)
                if (k != j && k != c->rank && strstr (n->who[k], tok))
                    return -1;
            if (found >= 0 && found != j)
                return -1;
            found = j;
        }
    }
    return found;
}

/* This process's "host ip ip ..." (IPv4, not loopback), for n_peer_of. */
static void who_am_i (char *buf, size_t len)
{
    struct ifaddrs *ifa = NULL;
    size_t at;
    if (gethostname (buf, len) < 0)
        buf[0] = '\0';
    buf[len - 1] = '\0';
    at = strlen (buf);
    if (getifaddrs (&ifa) < 0)
        return;
    for (struct ifaddrs *i = ifa; i && at + 20 < len; i = i->ifa_next) {
        char a[INET_ADDRSTRLEN];
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (!inet_ntop (AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a,
                        sizeof (a)) ||
            !strncmp (a, "127.", 4))
            continue;
        at += snprintf (buf + at, len - at, " %s", a);
    }
    freeifaddrs (ifa);
}

/* Every rank's who_am_i, through the communicator (once, at init). */
static int gather_who (struct nccl_comm *n, dt_error_t *err)
{
    size_t W = n->base.size, L = NCCL_WHO_LEN;
    char me[NCCL_WHO_LEN];
    cudaError_t e;
    memset (me, 0, sizeof (me));
    who_am_i (me, sizeof (me));
    if (!(n->who = calloc (W, L)))
        return errprintf (err, "out of memory");
    if (ensure_scratch (n, L * (W + 1), err) < 0 || ensure_pinned (n, L * W, err) < 0)
        return -1;
    char *sin = (char *)n->scratch + L * W;
    memcpy (n->pinned, me, L);
    if ((e = cudaMemcpyAsync (sin, n->pinned, L, cudaMemcpyHostToDevice, n->stream)))
        return cuda_fail (err, "cudaMemcpyAsync", e);
    ncclResult_t r = ncclAllGather (sin, n->scratch, L, ncclUint8, n->comm, n->stream);
    if (enqueued (n, "allgather (peer addresses)", r, err) < 0)
        return -1;
    if ((e = cudaMemcpyAsync (n->pinned, n->scratch, L * W, cudaMemcpyDeviceToHost,
                              n->stream)))
        return cuda_fail (err, "cudaMemcpyAsync", e);
    if (wait_done (n, "allgather (peer addresses)", err) < 0)
        return -1;
    memcpy (n->who, n->pinned, L * W);
    return 0;
}

static const struct dt_comm_ops nccl_ops = {
    "nccl",    n_allreduce, n_reduce_scatter, n_allgather, n_broadcast,
    n_barrier, n_destroy,   n_peer_of,        NULL,        NULL,
    NULL,      NULL, /* point to point: a pipeline group's (nccl_p2p_ops) */
    n_abort,
};

/* A pipeline group: the collectives, and sends and receives between
 * neighbouring ranks over its links (comm_nccl_p2p.c). */
static const struct dt_comm_ops nccl_p2p_ops = {
    "nccl",         n_allreduce,        n_reduce_scatter, n_allgather,   n_broadcast,
    n_barrier,      n_destroy,          n_peer_of,        nccl_p2p_send, nccl_p2p_recv,
    nccl_p2p_flush, nccl_p2p_post_recv, n_abort,
};

/* Publish / fetch the unique id through the store or a file. */
static int exchange_id (const struct dt_comm_params *p, ncclUniqueId *id, dt_error_t *err)
{
    char key[512];
    snprintf (key, sizeof (key), "%s/nccl-id", p->prefix ? p->prefix : "dttrain");
    if (p->rendezvous_dir) {
        char path[1024], tmp[1100];
        snprintf (path, sizeof (path), "%s/%s", p->rendezvous_dir, key);
        for (char *s = path + strlen (p->rendezvous_dir) + 1; *s; s++)
            if (*s == '/')
                *s = '_';
        if (p->rank == 0) {
            snprintf (tmp, sizeof (tmp), "%s.tmp", path);
            FILE *f = fopen (tmp, "wb");
            if (!f || fwrite (id, sizeof (*id), 1, f) != 1 || fclose (f) != 0 ||
                rename (tmp, path) < 0)
                return errprintf (err, "writing %s: %s", path, strerror (errno));
            return 0;
        }
        int64_t deadline = dt_mono_ms () + p->timeout_ms;
        for (;;) {
            FILE *f = fopen (path, "rb");
            if (f) {
                size_t got = fread (id, sizeof (*id), 1, f);
                fclose (f);
                if (got == 1)
                    return 0;
            }
            if (dt_mono_ms () > deadline) {
                errno = ETIMEDOUT;
                return errprintf (err, "timed out waiting for %s from rank 0", path);
            }
            usleep (20000);
        }
    }
    if (!p->store)
        return errprintf (err, "no rendezvous store (need --rendezvous-dir or an agent)");
    if (p->rank == 0)
        return p->store->set (p->store->ctx, key, id, sizeof (*id)) < 0
                 ? errprintf (err, "kv set %s failed", key)
                 : 0;
    void *val = NULL;
    size_t len = 0;
    if (p->store->wait (p->store->ctx, key, p->timeout_ms, &val, &len) < 0)
        return errprintf (err, "timed out waiting for kv key %s from rank 0", key);
    if (len != sizeof (*id)) {
        free (val);
        return errprintf (err, "kv key %s: %zu bytes, expected %zu", key, len,
                          sizeof (*id));
    }
    memcpy (id, val, len);
    free (val);
    return 0;
}

/* A communicator of rank of size, not yet connected: its stream and
 * event.  New; NULL with err. */
static struct nccl_comm *nccl_new (int rank, int size, long timeout_ms, dt_error_t *err)
{
    struct nccl_comm *n = calloc (1, sizeof (*n));
    cudaError_t e;
    if (!n) {
        errprintf (err, "out of memory");
        return NULL;
    }
    n->base.ops = &nccl_ops;
    n->base.rank = rank;
    n->base.size = size;
    n->timeout_ms = timeout_ms;
    n->next_live = live;
    live = n;
    if ((e = cudaStreamCreateWithFlags (&n->stream, cudaStreamNonBlocking))) {
        cuda_fail (err, "cudaStreamCreate", e);
        goto error;
    }
    if ((e = cudaEventCreateWithFlags (&n->ready, cudaEventDisableTiming))) {
        cuda_fail (err, "cudaEventCreate", e);
        goto error;
    }
    return n;
error:
    n_destroy (&n->base);
    return NULL;
}

/* Poll c (non-blocking, being initialised) until it is ready. */
static int init_wait (struct nccl_comm *n, ncclComm_t c, const char *what,
                      int64_t deadline, dt_error_t *err)
{
    for (;;) {
        ncclResult_t st = ncclInProgress, r = ncclCommGetAsyncError (c, &st);
        if (r != ncclSuccess)
            return nccl_fail (err, what, r);
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress)
            return nccl_fail (err, what, st);
        if (dt_mono_ms () > deadline) {
            errno = ETIMEDOUT;
            return errprintf (err, "NCCL %s: timed out after %ld ms waiting for peers",
                              what, n->timeout_ms);
        }
        usleep (1000);
    }
}

int nccl_split_wait (struct nccl_comm *n, ncclComm_t parent, ncclComm_t *child,
                     int colored, ncclResult_t r, const char *what, dt_error_t *err)
{
    int64_t deadline = dt_mono_ms () + n->timeout_ms;
    ncclComm_t volatile *cp = child;
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail (err, what, r);
    /* The split runs as the parent's asynchronous job: the parent is in
     * progress until it is over (and may not be used before), and NCCL
     * sets *child (NULL for a rank without a colour) once the new
     * communicator is complete, or earlier in some versions, which then
     * says itself when it is ready. */
    for (;;) {
        ncclResult_t st = ncclInProgress, cst = ncclInProgress;
        if ((r = ncclCommGetAsyncError (parent, &st)) != ncclSuccess)
            return nccl_fail (err, what, r);
        if (st != ncclSuccess && st != ncclInProgress)
            return nccl_fail (err, what, st);
        if (*cp) {
            if ((r = ncclCommGetAsyncError (*cp, &cst)) != ncclSuccess)
                return nccl_fail (err, what, r);
            if (cst != ncclSuccess && cst != ncclInProgress)
                return nccl_fail (err, what, cst);
        }
        if (st == ncclSuccess && (!colored || (*cp && cst == ncclSuccess)))
            return 0;
        if (dt_mono_ms () > deadline) {
            errno = ETIMEDOUT;
            return errprintf (err, "NCCL %s: timed out after %ld ms waiting for peers",
                              what, n->timeout_ms);
        }
        usleep (1000);
    }
}

void nccl_split_failed (struct nccl_comm *pn, ncclComm_t *child)
{
    if (pn->comm)
        ncclCommAbort (pn->comm);
    pn->comm = NULL;
    pn->broken = 1;
    if (*child)
        ncclCommAbort (*child);
    *child = NULL;
}

dt_comm_t *dt_comm_nccl_split (dt_comm_t *parent, int color, int key, const int *members,
                               int size, int p2p, dt_error_t *err)
{
    struct nccl_comm *pn = (struct nccl_comm *)parent, *n;
    char what[64];
    int count = 0, me = -1;

    if (!parent || parent->ops->destroy != n_destroy) {
        errnoprintf (err, EINVAL, "NCCL split: the parent is not an NCCL communicator");
        return NULL;
    }
    if (pn->broken || !pn->comm) {
        errprintf (err, "NCCL communicator is broken");
        return NULL;
    }
    if (!(n = nccl_new (key, size, pn->timeout_ms, err)))
        return NULL;
    snprintf (what, sizeof (what), "split (group %d of %d ranks)", color, size);
    ncclResult_t r = ncclCommSplit (pn->comm, color, key, &n->comm, NULL);
    if (nccl_split_wait (n, pn->comm, &n->comm, 1, r, what, err) < 0) {
        nccl_split_failed (pn, &n->comm);
        goto error;
    }
    if (!n->comm || ncclCommCount (n->comm, &count) != ncclSuccess ||
        ncclCommUserRank (n->comm, &me) != ncclSuccess || count != size || me != key) {
        errprintf (err, "NCCL %s: got rank %d of %d", what, me, count);
        goto error;
    }
    /* The group's peer addresses: the parent's, by rank */
    if (!(n->who = calloc (size, NCCL_WHO_LEN))) {
        errprintf (err, "out of memory");
        goto error;
    }
    for (int i = 0; i < size && pn->who; i++)
        memcpy (n->who[i], pn->who[members[i]], NCCL_WHO_LEN);
    if (p2p) {
        if (nccl_p2p_open (n, err) < 0)
            goto error;
        n->base.ops = &nccl_p2p_ops;
    }
    return &n->base;
error:
    n_destroy (&n->base);
    return NULL;
}

dt_comm_t *dt_comm_nccl_create (const struct dt_comm_params *p, dt_error_t *err)
{
    struct nccl_comm *n;
    ncclUniqueId id;
    ncclResult_t r;

    if (!(n = nccl_new (p->rank, p->size, p->timeout_ms, err)))
        return NULL;
    if (p->rank == 0 && (r = ncclGetUniqueId (&id)) != ncclSuccess) {
        nccl_fail (err, "ncclGetUniqueId", r);
        goto error;
    }
    if (exchange_id (p, &id, err) < 0)
        goto error;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    r = ncclCommInitRankConfig (&n->comm, p->size, id, p->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_fail (err, "ncclCommInitRankConfig", r);
        goto error;
    }
    if (init_wait (n, n->comm, "init", dt_mono_ms () + p->timeout_ms, err) < 0 ||
        gather_who (n, err) < 0)
        goto error;
    return &n->base;
error:
    n_destroy (&n->base);
    return NULL;
}
