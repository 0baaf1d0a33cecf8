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

#define NCCL_WHO_LEN 256

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
};

static int cuda_fail (dt_error_t *err, const char *what, cudaError_t e)
{
    errno = EIO;
    return errprintf (err, "%s: %s", what, cudaGetErrorString (e));
}

static int nccl_fail (dt_error_t *err, const char *what, ncclResult_t r)
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

/* The communicator failed (r) or timed out (r == ncclSuccess): keep
 * NCCL's last error text (it may name the peer), abort, report. */
static int broken_fail (struct nccl_comm *n, const char *what, ncclResult_t r,
                        dt_error_t *err)
{
    char last[160] = "";
    const char *l = n->comm ? ncclGetLastError (n->comm) : NULL;
    if (l && *l)
        snprintf (last, sizeof (last), " (%s)", l);
    n->broken = 1;
    if (n->comm)
        ncclCommAbort (n->comm);
    n->comm = NULL;
    if (r == ncclSuccess) {
        errno = ETIMEDOUT;
        return errprintf (err, "NCCL %s: timed out after %ld ms (a peer died or hangs)%s",
                          what, n->timeout_ms, last);
    }
    errno = EIO;
    return errprintf (err, "NCCL %s: %s%s", what, ncclGetErrorString (r), last);
}

static void pause_50us (void)
{
    struct timespec ts = { 0, 50000 };
    nanosleep (&ts, NULL);
}

/* r from an operation on the non-blocking communicator: ncclInProgress
 * means not yet enqueued; poll until it is (or fails, or the deadline). */
static int enqueued (struct nccl_comm *n, const char *what, ncclResult_t r,
                     dt_error_t *err)
{
    int64_t deadline = dt_mono_ms () + n->timeout_ms;
    if (r == ncclSuccess)
        return 0;
    if (r != ncclInProgress)
        return broken_fail (n, what, r, err);
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t q = ncclCommGetAsyncError (n->comm, &st);
        if (q != ncclSuccess)
            return broken_fail (n, what, q, err);
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress)
            return broken_fail (n, what, st, err);
        if (dt_mono_ms () > deadline)
            return broken_fail (n, what, ncclSuccess, err);
        pause_50us ();
    }
}

/* Wait for the stream with a deadline, watching NCCL's async error. */
static int wait_done (struct nccl_comm *n, const char *what, dt_error_t *err)
{
    int64_t deadline = dt_mono_ms () + n->timeout_ms;
    for (;;) {
        cudaError_t e = cudaStreamQuery (n->stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return cuda_fail (err, what, e);
        ncclResult_t ae = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError (n->comm, &ae);
        if (r != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress))
            return broken_fail (n, what, r != ncclSuccess ? r : ae, err);
        if (dt_mono_ms () > deadline)
            return broken_fail (n, what, ncclSuccess, err);
        pause_50us ();
    }
}

/* Order the NCCL stream after the work queued so far on the compute
 * (legacy default) stream. */
static int after_compute (struct nccl_comm *n, dt_error_t *err)
{
    cudaError_t e;
    if ((e = cudaEventRecord (n->ready, 0)) != cudaSuccess ||
        (e = cudaStreamWaitEvent (n->stream, n->ready, 0)) != cudaSuccess)
        return cuda_fail (err, "ordering the NCCL stream after the compute stream", e);
    return 0;
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

    if (n->broken)
        return errprintf (err, "NCCL communicator is broken");
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

/* ncclAllGather needs equal counts: pad every shard to the largest. */
static int n_allgather (dt_comm_t *c, const float *in, float *out, const size_t *counts,
                        dt_error_t *err)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    size_t mx = 0, off = 0;
    cudaError_t e;
    for (int r = 0; r < c->size; r++)
        if (counts[r] > mx)
            mx = counts[r];
    if (n->broken)
        return errprintf (err, "NCCL communicator is broken");
    if (ensure_scratch (n, mx * 4 * (c->size + 1), err) < 0 || after_compute (n, err) < 0)
        return -1;
    float *sin = (float *)n->scratch + mx * c->size;
    float *sout = (float *)n->scratch;
    if ((e = cudaMemcpyAsync (sin, in, counts[c->rank] * 4, cudaMemcpyDeviceToDevice,
                              n->stream)))
        return cuda_fail (err, "cudaMemcpyAsync", e);
    ncclResult_t r = ncclAllGather (sin, sout, mx, ncclFloat32, n->comm, n->stream);
    if (enqueued (n, "allgather", r, err) < 0)
        return -1;
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
    if (n->broken)
        return errprintf (err, "NCCL communicator is broken");
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

static void n_destroy (dt_comm_t *c)
{
    struct nccl_comm *n = (struct nccl_comm *)c;
    if (!n)
        return;
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
    NULL,      NULL, /* pipeline parallelism: gloo only */
    NULL,            /* abort: ncclCommAbort is not wired (re-form is gloo only) */
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

dt_comm_t *dt_comm_nccl_create (const struct dt_comm_params *p, dt_error_t *err)
{
    struct nccl_comm *n = calloc (1, sizeof (*n));
    ncclUniqueId id;
    ncclResult_t r;
    cudaError_t e;

    if (!n) {
        errprintf (err, "out of memory");
        return NULL;
    }
    n->base.ops = &nccl_ops;
    n->base.rank = p->rank;
    n->base.size = p->size;
    n->timeout_ms = p->timeout_ms;
    if (p->rank == 0 && (r = ncclGetUniqueId (&id)) != ncclSuccess) {
        nccl_fail (err, "ncclGetUniqueId", r);
        goto error;
    }
    if (exchange_id (p, &id, err) < 0)
        goto error;
    if ((e = cudaStreamCreateWithFlags (&n->stream, cudaStreamNonBlocking))) {
        cuda_fail (err, "cudaStreamCreate", e);
        goto error;
    }
    if ((e = cudaEventCreateWithFlags (&n->ready, cudaEventDisableTiming))) {
        cuda_fail (err, "cudaEventCreate", e);
        goto error;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    r = ncclCommInitRankConfig (&n->comm, p->size, id, p->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_fail (err, "ncclCommInitRankConfig", r);
        goto error;
    }
    int64_t deadline = dt_mono_ms () + p->timeout_ms;
    ncclResult_t st;
    do {
        if ((r = ncclCommGetAsyncError (n->comm, &st)) != ncclSuccess) {
            nccl_fail (err, "init", r);
            goto error;
        }
        if (st != ncclSuccess && st != ncclInProgress) {
            nccl_fail (err, "init", st);
            goto error;
        }
        if (st == ncclInProgress && dt_mono_ms () > deadline) {
            errno = ETIMEDOUT;
            errprintf (err, "NCCL init: timed out after %ld ms waiting for peers",
                       p->timeout_ms);
            goto error;
        }
        if (st == ncclInProgress)
            usleep (1000);
    } while (st == ncclInProgress);
    if (gather_who (n, err) < 0)
        goto error;
    return &n->base;
error:
    n_destroy (&n->base);
    return NULL;
}
