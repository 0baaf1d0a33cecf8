/* train_overlap.c: dttrain's data-parallel communication around the
 * compute - the gradient buckets, their reduction after the backward
 * pass or by a comm thread during it (--overlap), and zero1's parameter
 * all-gather by the same thread during the next forward pass.
 *
 * Buckets are groups of consecutive whole tensors of the flat vector:
 * the backward pass says when a tensor's gradient is final (model_ready,
 * after each group of tensors it finishes), from the top of the vector
 * down, so the comm thread reduces bucket nbuckets - 1 first and bucket 0
 * (the embeddings, ready last) last.  Whatever is still being reduced
 * when the backward pass ends is exposed: the buckets at the bottom are
 * kept small for that.  The boundaries and the order are the same with
 * and without the thread, so the two give the same bits.
 *
 * zero1 with the thread: after the optimizer step each rank holds its
 * shard of the new parameters; the thread gathers them piece by piece
 * (the buckets cut at the shard boundaries, each piece broadcast by the
 * rank whose shard holds it) in ascending order, which is the order the
 * forward pass reads them in; the forward pass waits for a block's
 * parameters just before it needs them (model_need).  A copy either way:
 * bit-identical to the one all-gather without the thread.
 *
 * Only one thread uses dp_comm at a time: the main thread's own
 * collectives on it come after train_overlap_finish (the gradients) and
 * train_gather_wait (the parameters).
 *
 * On a GPU (NCCL) there is no thread: the kernels run ahead of the host,
 * so the host queues each bucket's all-reduce on the dp communicator's
 * stream when the backward pass has queued the kernels that finish it,
 * behind an event on the compute stream (dt_comm_nccl_allreduce_start),
 * and waits for them all at the end: the same buckets in the same order,
 * the same bits, and no synchronisation of the device in between. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "trainer/train_int.h"

int train_buckets_plan (struct trainer *t, dt_error_t *err)
{
    const struct model *m = &t->model;
    size_t nb = 0, size = (size_t)(t->o.bucket_mb * 1048576.0 / 4);

    t->bucket = size < 1024 ? 1024 : size;
    if (!(t->bstart = calloc (m->ntensors + 1, sizeof (size_t))))
        return errprintf (err, "out of memory");
    /* From offset 0 up, the first three at most 1/8, 1/4 and 1/2 of the
     * size (what remains lands at the top, in the bucket reduced first);
     * a tensor larger than its bucket's limit fills one alone. */
    for (int i = 0; i < m->ntensors;) {
        size_t cap = nb < 3 ? t->bucket >> (3 - nb) : t->bucket, got = m->t[i++].count;
        while (i < m->ntensors && got + m->t[i].count <= cap)
            got += m->t[i++].count;
        t->bstart[nb + 1] = t->bstart[nb] + got;
        nb++;
    }
    t->nbuckets = nb;
    return 0;
}

/* zero1's gather pieces: the buckets cut at the shard boundaries; piece p
 * is gstart[p] .. gstart[p + 1] - 1, in the shard of dp rank gowner[p]. */
static int plan_pieces (struct trainer *t)
{
    size_t n = t->nbuckets + t->ly.dp, np = 0, at = 0, shard_hi = t->counts[0];
    int r = 0;
    if (!(t->ov.gstart = calloc (n + 1, sizeof (size_t))) ||
        !(t->ov.gowner = calloc (n, sizeof (int))))
        return -1;
    for (size_t b = 0; b < t->nbuckets; b++)
        while (at < t->bstart[b + 1]) {
            while (at >= shard_hi)
                shard_hi += t->counts[++r];
            size_t end = t->bstart[b + 1] < shard_hi ? t->bstart[b + 1] : shard_hi;
            t->ov.gstart[np] = at;
            t->ov.gowner[np++] = r;
            at = t->ov.gstart[np] = end;
        }
    t->ov.npieces = np;
    t->ov.gnext = np; /* nothing to gather */
    t->ov.gdone = t->model.nparams;
    return 0;
}

/* One bucket: the sum over the dp group, in place. */
static int reduce_bucket (struct trainer *t, size_t b, dt_error_t *err)
{
    size_t off = t->bstart[b], len = t->bstart[b + 1] - off;
    int64_t t0 = dt_mono_ns ();
    integ_local_grads (t, off, t->model.grads + off, len);
    if (dt_comm_allreduce (t->dp_comm, t->model.grads + off, len, DT_F32, DT_SUM, err) <
        0)
        return -1;
    t->ar_bytes += len * 4.0;
    t->ar_bytes_s += (dt_mono_ns () - t0) / 1e9;
    return 0;
}

int train_reduce_grads (struct trainer *t, dt_error_t *err)
{
    if (t->ly.dp == 1) {
        integ_local_grads (t, 0, t->model.grads, t->model.nparams);
        return 0;
    }
    for (ssize_t b = (ssize_t)t->nbuckets - 1; b >= 0; b--)
        if (reduce_bucket (t, b, err) < 0)
            return -1;
    return 0;
}

/* One gather piece: broadcast by its owner. */
static int gather_piece (struct trainer *t, size_t p, dt_error_t *err)
{
    size_t off = t->ov.gstart[p], len = t->ov.gstart[p + 1] - off;
    int64_t t0 = dt_mono_ns ();
    if (dt_comm_broadcast (t->dp_comm, t->model.params + off, len * 4, t->ov.gowner[p],
                           err) < 0)
        return -1;
    double s = (dt_mono_ns () - t0) / 1e9;
    pthread_mutex_lock (&t->ov.lock);
    t->ov.ag_s += s;
    if (t->ov.gowner[p] != t->ly.dpr)
        t->ov.ag_bytes += len * 4.0;
    pthread_mutex_unlock (&t->ov.lock);
    return 0;
}

/* The thread's gather figures into the trainer's, once the gather is
 * complete (the main thread, holding the lock): a step's report counts
 * the gather in the step whose forward pass it overlapped. */
static void fold_gather (struct trainer *t)
{
    if (t->ov.gnext < t->ov.npieces)
        return;
    t->ag_s += t->ov.ag_s;
    t->ag_bytes += t->ov.ag_bytes;
    t->ov.ag_s = t->ov.ag_bytes = 0;
}

static void *overlap_thread (void *arg)
{
    struct trainer *t = arg;
    pthread_mutex_lock (&t->ov.lock);
    for (;;) {
        while (!t->ov.quit && t->ov.gnext >= t->ov.npieces &&
               !(t->ov.next >= 0 && t->ov.next >= t->ov.ready_from))
            pthread_cond_wait (&t->ov.cond, &t->ov.lock);
        if (t->ov.quit)
            break;
        dt_error_t err;
        int rc, gather = t->ov.gnext < t->ov.npieces; /* posted before the reduction */
        size_t p = gather ? t->ov.gnext : (size_t)t->ov.next;
        pthread_mutex_unlock (&t->ov.lock);
        rc = t->ov.failed ? -1
             : gather     ? gather_piece (t, p, &err)
                          : reduce_bucket (t, p, &err);
        pthread_mutex_lock (&t->ov.lock);
        if (rc < 0 && !t->ov.failed) {
            t->ov.failed = 1;
            t->ov.err = err;
        }
        if (gather) {
            t->ov.gnext++;
            t->ov.gdone =
              t->ov.gnext < t->ov.npieces ? t->ov.gstart[t->ov.gnext] : t->model.nparams;
        }
        else
            t->ov.next--;
        pthread_cond_broadcast (&t->ov.cond);
    }
    pthread_mutex_unlock (&t->ov.lock);
    return NULL;
}

static void overlap_ready_cb (void *arg, size_t off)
{
    struct trainer *t = arg;
    pthread_mutex_lock (&t->ov.lock);
    /* the buckets that start at or above off are final */
    ssize_t from = t->ov.ready_from;
    while (from > 0 && t->bstart[from - 1] >= off)
        from--;
    if (from < t->ov.ready_from) {
        t->ov.ready_from = from;
        pthread_cond_broadcast (&t->ov.cond);
    }
    pthread_mutex_unlock (&t->ov.lock);
}

/* The device's ready hook: queue the all-reduce of every bucket that
 * starts at or above off, from the top down (the main thread; no lock). */
static void dev_ready_cb (void *arg, size_t off)
{
    struct trainer *t = arg;
    while (t->ov.ready_from > 0 && t->bstart[t->ov.ready_from - 1] >= off)
        t->ov.ready_from--;
    while (!t->ov.failed && t->ov.next >= 0 && t->ov.next >= t->ov.ready_from) {
        size_t b = (size_t)t->ov.next, o = t->bstart[b], len = t->bstart[b + 1] - o;
        int64_t t0 = dt_mono_ns ();
        integ_local_grads (t, o, t->model.grads + o, len);
        if (dt_comm_nccl_allreduce_start (t->dp_comm, t->model.grads + o, len,
                                          &t->ov.err) < 0) {
            t->ov.failed = 1;
            break;
        }
        t->ar_bytes += len * 4.0;
        t->ar_bytes_s += (dt_mono_ns () - t0) / 1e9;
        t->ov.next--;
    }
}

/* The rest of the buckets queued, then all of them waited for. */
static int dev_finish (struct trainer *t, dt_error_t *err)
{
    int64_t t0 = dt_mono_ns ();
    dev_ready_cb (t, 0);
    t->ov.next = -1;
    if (!t->ov.failed && dt_comm_nccl_wait (t->dp_comm, &t->ov.err) < 0)
        t->ov.failed = 1;
    t->ar_bytes_s += (dt_mono_ns () - t0) / 1e9;
    if (t->ov.failed)
        *err = t->ov.err;
    return t->ov.failed ? -1 : 0;
}

void train_overlap_arm (struct trainer *t)
{
    pthread_mutex_lock (&t->ov.lock);
    t->ov.next = (ssize_t)t->nbuckets - 1;
    t->ov.ready_from = (ssize_t)t->nbuckets;
    pthread_mutex_unlock (&t->ov.lock);
    model_set_ready_cb (&t->model, t->ov.dev ? dev_ready_cb : overlap_ready_cb, t);
}

int train_overlap_finish (struct trainer *t, dt_error_t *err)
{
    model_set_ready_cb (&t->model, NULL, NULL);
    if (t->ov.dev)
        return dev_finish (t, err);
    overlap_ready_cb (t, 0);
    pthread_mutex_lock (&t->ov.lock);
    while (t->ov.next >= 0 || t->ov.gnext < t->ov.npieces)
        pthread_cond_wait (&t->ov.cond, &t->ov.lock);
    fold_gather (t);
    int failed = t->ov.failed;
    if (failed)
        *err = t->ov.err;
    pthread_mutex_unlock (&t->ov.lock);
    return failed ? -1 : 0;
}

void train_gather_start (struct trainer *t)
{
    pthread_mutex_lock (&t->ov.lock);
    t->ov.gnext = 0;
    t->ov.gdone = t->ov.gstart[0];
    pthread_cond_broadcast (&t->ov.cond);
    pthread_mutex_unlock (&t->ov.lock);
}

int train_gather_wait (struct trainer *t, size_t upto, dt_error_t *err)
{
    if (!t->ov.on)
        return 0;
    int64_t t0 = dt_mono_ns ();
    pthread_mutex_lock (&t->ov.lock);
    int waited = 0;
    while (!t->ov.failed && t->ov.gdone < upto) {
        pthread_cond_wait (&t->ov.cond, &t->ov.lock);
        waited = 1;
    }
    fold_gather (t);
    int failed = t->ov.failed;
    if (failed)
        *err = t->ov.err;
    pthread_mutex_unlock (&t->ov.lock);
    if (waited)
        t->dp_exposed_s += (dt_mono_ns () - t0) / 1e9;
    return failed ? -1 : 0;
}

/* model.h's need hook: the forward pass is about to read the parameters
 * below off.  The error goes to k->last_error ("gloo ..." marks a lost
 * peer). */
static int need_cb (void *arg, size_t off)
{
    struct trainer *t = arg;
    dt_error_t err;
    if (train_gather_wait (t, off, &err) < 0) {
        snprintf (t->k->last_error, sizeof (t->k->last_error), "zero1 all-gather: %s",
                  err.text);
        return -1;
    }
    return 0;
}

int train_overlap_start (struct trainer *t)
{
    pthread_mutex_init (&t->ov.lock, NULL);
    pthread_cond_init (&t->ov.cond, NULL);
    t->ov.next = -1;
    t->ov.ready_from = (ssize_t)t->nbuckets;
    if (plan_pieces (t) < 0)
        return -1;
    if (pthread_create (&t->ov.thread, NULL, overlap_thread, t) != 0)
        return -1;
    t->ov.on = 1;
    if (t->o.parallel == PAR_ZERO1)
        model_set_need_cb (&t->model, need_cb, t);
    return 0;
}

int train_overlap_start_dev (struct trainer *t)
{
    if (!t->k->is_device || t->o.parallel == PAR_ZERO1) {
        errno = ENOTSUP;
        return -1;
    }
    pthread_mutex_init (&t->ov.lock, NULL);
    pthread_cond_init (&t->ov.cond, NULL);
    t->ov.next = -1;
    t->ov.ready_from = (ssize_t)t->nbuckets;
    t->ov.gnext = t->ov.npieces = 0; /* nothing to gather */
    t->ov.gdone = t->model.nparams;
    t->ov.dev = 1;
    t->ov.on = 1;
    return 0;
}

void train_overlap_stop (struct trainer *t)
{
    if (t->ov.on && t->ov.dev)
        t->ov.on = 0;
    if (t->ov.on) {
        pthread_mutex_lock (&t->ov.lock);
        t->ov.quit = 1;
        pthread_cond_broadcast (&t->ov.cond);
        pthread_mutex_unlock (&t->ov.lock);
        pthread_join (t->ov.thread, NULL);
        t->ov.on = 0;
        model_set_need_cb (&t->model, NULL, NULL);
    }
    free (t->ov.gstart);
    free (t->ov.gowner);
    t->ov.gstart = NULL;
    t->ov.gowner = NULL;
}

/* Steps recorded for the minima over the dp group (two doubles each). */
#define DP_STEPS_MAX (1 << 20)

void train_dp_step (struct trainer *t, double x, double c)
{
    int64_t i = t->step - 1;
    if (t->ly.dp < 2 || t->o.steps > DP_STEPS_MAX || i < 0 || i >= t->o.steps)
        return;
    if (!t->dp_step_x && (!(t->dp_step_x = calloc (2 * t->o.steps, sizeof (double)))))
        return;
    t->dp_step_c = t->dp_step_x + t->o.steps;
    t->dp_step_x[i] = x;
    t->dp_step_c[i] = c;
}

/* Per step, the minimum over the dp group of each rank's exposed and
 * communication time: the maximum of their negatives (one allreduce of
 * 2 x steps doubles at the end of the run), summed over the steps. */
int train_dp_minima (struct trainer *t, dt_error_t *err)
{
    int64_t n = t->o.steps;
    t->dp_exposed_min_s = t->dp_comm_min_s = -1;
    if (t->ly.dp < 2 || n > DP_STEPS_MAX || n < 1)
        return 0;
    /* every rank of the group takes part, whether it recorded or not */
    double *v = calloc (2 * n, sizeof (double));
    if (!v) /* the others are in the allreduce: fail, do not skip it */
        return errprintf (err, "dp minima: out of memory");
    for (int64_t i = 0; t->dp_step_x && i < 2 * n; i++)
        v[i] = -t->dp_step_x[i];
    int rc = dt_comm_allreduce (t->dp_comm, v, 2 * n, DT_F64, DT_MAX, err);
    if (rc == 0) {
        t->dp_exposed_min_s = t->dp_comm_min_s = 0;
        for (int64_t i = 0; i < n; i++) {
            t->dp_exposed_min_s -= v[i];
            t->dp_comm_min_s -= v[n + i];
        }
    }
    free (v);
    return rc;
}
