/* train.c: dttrain's training loop - data parallelism (dp / zero1), AdamW, checkpoints,
 * reports.
 *
 * Reproducibility contract: the global batch of step s is samples
 * i = 0..B-1 drawn by data_train_pos (seed, s, i); rank r processes the
 * contiguous slice [B r / W, B (r+1) / W) in micro-batches.  Gradients are
 * scaled by 1/B and summed (allreduce in fixed buckets), so the update is
 * the same function of the global batch for any world size (up to float
 * summation order), and bit-identical from run to run at one world size.
 *
 * Per step, one small float64 allreduce carries: the loss sum, the squared
 * gradient norm of each rank's shard (summed in rank order by everyone, so
 * dp and zero1 clip identically), each rank's pending command (checkpoint
 * at S / stop at S: the max wins, so all ranks act at the same step), and
 * each rank's last finished checkpoint write (for the standalone commit).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/dtime.h"
#include "common/log.h"
#include "kernels/kernels.h"
#include "trainer/ckpt.h"
#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/dump.h"
#include "trainer/model.h"
#include "trainer/pipeline.h"
#include "trainer/train.h"
#include "trainer/train_int.h"

static void sleep_s (double s)
{
    if (s <= 0)
        return;
    struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Linear scaling rule (Goyal et al. 2017): peak = lr * B / ref; linear
 * warmup from peak/warmup to peak, then cosine decay to min_lr_frac * peak. */
static double lr_at (const struct train_opts *o, int64_t s)
{
    double peak = o->lr * o->global_batch / o->lr_ref_batch;
    double floor = peak * o->min_lr_frac;
    if (s < o->warmup_steps)
        return peak * (double)(s + 1) / (double)o->warmup_steps;
    int64_t rest = o->steps - o->warmup_steps;
    if (rest <= 0)
        return peak;
    double p = (double)(s - o->warmup_steps) / (double)rest;
    if (p > 1)
        p = 1;
    return floor + 0.5 * (peak - floor) * (1.0 + cos (M_PI * p));
}

/* The micro-batch: a rank's share of the batch unless given (the batch
 * is divided among the dp replicas; the ranks of one replica process the
 * same samples); in a pipeline, a quarter of the share per stage, so that
 * 4 pp micro-batches keep the bubble at (pp - 1) / (5 pp - 1). */
static int micro_batch (const struct trainer *t)
{
    int dp = t->ly.dp, pp = t->ly.pp;
    int64_t maxshare = (t->o.global_batch + dp - 1) / dp;
    int64_t mb = t->o.micro_batch ? t->o.micro_batch
                 : pp > 1         ? (maxshare + 4 * pp - 1) / (4 * pp)
                                  : maxshare;
    if (mb > maxshare)
        mb = maxshare;
    return mb < 1 ? 1 : (int)mb;
}

/* Partition (ZeRO-1 shards and checkpoint slices) of this rank's
 * parameters over its dp group. */
static int partition (struct trainer *t, dt_error_t *err)
{
    size_t n = t->model.nparams;
    int dp = t->ly.dp;
    if (!(t->counts = calloc (dp, sizeof (size_t))))
        return errprintf (err, "out of memory");
    for (int r = 0; r < dp; r++) {
        size_t a = n * r / dp, b = n * (r + 1) / dp;
        t->counts[r] = b - a;
        if (r == t->ly.dpr)
            t->lo = a, t->hi = b;
    }
    return 0;
}

/* What the options ask of the kernels, against what the backend has:
 * flash attention and bf16 GEMMs are CUDA's.  Sets the GEMM precision.
 * 0 or -1 with err. */
static int check_kernels (struct dt_kern_ops *k, const struct train_opts *o,
                          dt_error_t *err)
{
    if (o->attention == ATTN_FLASH && !k->attn_flash_fwd)
        return errprintf (err,
                          "--attention flash: the %s backend has no flash attention "
                          "(cuda only)",
                          k->name);
    if (o->attention == ATTN_FLASH && o->width / o->heads > DT_ATTN_FLASH_MAX_D)
        return errprintf (err,
                          "--attention flash: heads of width %d; the flash kernels "
                          "take at most %d",
                          o->width / o->heads, DT_ATTN_FLASH_MAX_D);
    /* bf16 GEMMs with fp32 master weights need no loss scaling: bf16 has
     * fp32's exponent range, so small gradients do not flush to zero as
     * they would in fp16. */
    if (o->precision == PREC_BF16 && !k->set_bf16)
        return errprintf (err,
                          "--precision bf16: the %s backend computes in fp32 only "
                          "(bf16 needs --backend cuda)",
                          k->name);
    if (k->set_bf16 && k->set_bf16 (o->precision == PREC_BF16) < 0)
        return errprintf (err, "--precision: %s", k->last_error);
    return 0;
}

/* Overlap on gloo (host buffers): a comm thread, which needs CPU to
 * reduce: overlap unless the ranks' threads already outnumber the cores
 * (2 ranks on 2 cores: 6 to 21% shorter steps with the buckets of whole
 * tensors, bench/results/layouts.md).  On NCCL no thread: the all-reduces
 * are queued behind events as the backward pass goes (not zero1's
 * all-gather). */
static int overlap_wanted (const struct trainer *t, const struct train_opts *o)
{
    if (o->overlap >= 0)
        return o->overlap;
    const char *lws = getenv ("LOCAL_WORLD_SIZE");
    long local = lws ? atol (lws) : t->world;
    return t->k->is_device || sysconf (_SC_NPROCESSORS_ONLN) >= local * o->threads;
}

struct trainer *trainer_create (const struct train_opts *o, dtclient_t *client,
                                int *exit_code, dt_error_t *err)
{
    struct trainer *t = calloc (1, sizeof (*t));
    char why[256];

    *exit_code = EXIT_TRAIN_ERR;
    if (!t) {
        errprintf (err, "out of memory");
        return NULL;
    }
    t->o = *o;
    t->client = client;
    t->rank = o->rank;
    t->world = o->world;
    /* The layout (opts_parse checked it against the model) */
    if (layout_init (&t->ly, o, t->world, t->rank, err) < 0) {
        *exit_code = EXIT_USAGE;
        goto error;
    }

    /* Data: mmap, hold out the tail. */
    if (data_open (&t->data, o->data, o->context, o->val_frac, err) < 0)
        goto error;

    /* Kernel backend: CUDA only if built and a device is present. */
    if (!(t->k = dt_kern_select (o->backend, why, sizeof (why)))) {
        errprintf (err, "--backend: %s", why);
        goto error;
    }
    if (!t->k->is_device)
        dt_kern_cpu_set_threads (o->threads);
    /* (on CUDA, the layout's groups are split from the NCCL world
     * communicator: train_layout_open) */
    if (t->ly.tp * t->ly.pp > 1 && o->dump_tensors) {
        errprintf (err, "--tp %d --pp %d: --dump-tensors writes the one-rank layout only",
                   t->ly.tp, t->ly.pp);
        goto error;
    }
    if (check_kernels (t->k, o, err) < 0)
        goto error;

    t->mb = micro_batch (t);
    /* (a hot spare's standby process built it while it waited) */
    if (!train_standby_take_model (&t->model, t->k, t->mb) &&
        model_create_opts (&t->model, t->k, o, t->mb) < 0) {
        errprintf (err, "model: %s (%s backend)", t->k->last_error, t->k->name);
        goto error;
    }
    if (o->dump_tensors && t->rank == 0 &&
        (dump_table (&t->model, o->dump_tensors, err) < 0 ||
         dump_vector (&t->model, o->dump_tensors, "init.f32", t->model.params, err) < 0))
        goto error;

    size_t n = t->model.nparams;
    if (partition (t, err) < 0)
        goto error;
    t->opt_elems = o->parallel == PAR_ZERO1 ? t->hi - t->lo : n;
    if (!(t->m = t->k->alloc (t->opt_elems * 4)) ||
        !(t->v = t->k->alloc (t->opt_elems * 4))) {
        errprintf (err, "optimizer state: out of memory (%s)", t->k->last_error);
        goto error;
    }
    t->nctrl = 1 + 6 * (size_t)t->world;
    if (!(t->ctrl = calloc (t->nctrl, sizeof (double))) ||
        !(t->ctx_host = malloc ((size_t)t->mb * o->context)) ||
        !(t->tgt_host = malloc (t->mb)) ||
        !(t->config = opts_to_text (o, t->data.len, t->data.crc)) ||
        !(t->writer = ckpt_writer_create (client))) {
        errprintf (err, "out of memory");
        goto error;
    }

    /* Resume (before the communicator: the start step names its keys);
     * a replacement of a lost rank takes the state from its peers. */
    t->reform_joining = train_reform_init (t);
    if (train_resume (t, exit_code, err) < 0)
        goto error;

    if (!(t->comm = train_comm_open (t, err)) || train_layout_open (t, err) < 0 ||
        (t->reform_joining && train_reform_sync (t, err) < 0)) {
        *exit_code = EXIT_COMM;
        goto error;
    }
    /* The agent learns when this rank is blocked on its peers, so a stall
     * is blamed on the rank that froze, not on those waiting for it. */
    if (dtclient_connected (t->client))
        dt_comm_set_wait_hook (t->comm, train_client_waiting, t->client);
    if (train_buckets_plan (t, err) < 0)
        goto error;
    int overlap = overlap_wanted (t, o);
    /* (in a pipeline, during the last micro-batch's backward pass: the
     * schedule interleaves the others') */
    if (t->ly.dp > 1 && overlap &&
        (t->k->is_device ? o->parallel != PAR_ZERO1 && train_overlap_start_dev (t) < 0
                         : train_overlap_start (t) < 0)) {
        errprintf (err, "comm thread: %s", strerror (errno));
        goto error;
    }
    if (t->rank == 0)
        dt_log (
          LOG_INFO,
          "%d rank%s, %s, backend %s, comm %s; %zu parameters; global batch %d "
          "(micro-batch %d); %zu gradient buckets%s; optimizer state %.2f MiB per rank",
          t->world, t->world > 1 ? "s" : "", o->parallel ? "zero1" : "dp", t->k->name,
          t->comm->ops->name, n, o->global_batch, t->mb, t->nbuckets,
          t->ov.on ? " overlapped with backward" : "", t->opt_elems * 8.0 / 1048576.0);
    return t;
error:
    trainer_destroy (t);
    return NULL;
}

void trainer_destroy (struct trainer *t)
{
    if (!t)
        return;
    train_rwatch_stop (t);
    train_overlap_stop (t);
    ckpt_writer_destroy (t->writer);
    integ_destroy (t->integ);
    train_layout_close (t);
    dt_comm_destroy (t->comm);
    if (t->k) {
        t->k->free (t->m);
        t->k->free (t->v);
    }
    model_destroy (&t->model);
    data_close (&t->data);
    free (t->counts);
    free (t->bstart);
    free (t->dp_step_x);
    free (t->pp_stage_cpu);
    free (t->ctrl);
    free (t->ctx_host);
    free (t->tgt_host);
    free (t->config);
    free (t);
}

/* Whether a step's error came from a collective (a peer lost or hung). */
static int lost_peer (const dt_error_t *err)
{
    return strstr (err->text, "gloo") || strstr (err->text, "NCCL");
}

static int comm_fail (struct trainer *t, dt_error_t *err)
{
    /* gloo names the peer's address, which the communicator maps to a
     * rank; with two ranks it can only be the other one. */
    char peer[48] = "";
    int who = train_layout_peer (t, err->text);
    if (who < 0 && t->world == 2)
        who = 1 - t->rank;
    if (who >= 0)
        snprintf (peer, sizeof (peer), " (peer rank %d lost or hung)", who);
    dt_log (LOG_ERR, "rank %d: collective failed at step %" PRId64 "%s: %s", t->rank,
            t->step + 1, peer, err->text);
    return -1;
}

/* What reads the parameters outside a forward pass (the fingerprint, a
 * checkpoint, validation, the bit-flip injection, the end of the run)
 * waits for zero1's overlapped all-gather first. */
static int params_ready (struct trainer *t, dt_error_t *err)
{
    return train_gather_wait (t, t->model.nparams, err);
}

static int optimizer_step (struct trainer *t, double gscale, double *comm_s,
                           dt_error_t *err)
{
    const struct train_opts *o = &t->o;
    struct model *m = &t->model;
    double lr = lr_at (o, t->step);
    double bc1 = 1.0 - pow (o->beta1, (double)(t->step + 1));
    double bc2 = 1.0 - pow (o->beta2, (double)(t->step + 1));
    size_t lo = o->parallel == PAR_ZERO1 ? t->lo : 0;
    size_t hi = o->parallel == PAR_ZERO1 ? t->hi : m->nparams;

    for (int i = 0; i < m->ntensors; i++) {
        size_t a = m->t[i].off, b = a + m->t[i].count;
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        if (a >= b)
            continue;
        if (t->k->adamw (b - a, m->params + a, m->grads + a, t->m + (a - lo),
                         t->v + (a - lo), (float)lr, (float)o->beta1, (float)o->beta2,
                         (float)o->eps, m->t[i].decay ? (float)o->weight_decay : 0.0f,
                         (float)bc1, (float)bc2, (float)gscale) < 0)
            return errprintf (err, "adamw: %s", t->k->last_error);
    }
    if (o->parallel == PAR_ZERO1 && t->ly.dp > 1) {
        if (t->k->sync () < 0)
            return errprintf (err, "%s", t->k->last_error);
        /* With the comm thread: gathered during the next forward pass
         * (train_overlap.c); whatever reads the parameters before it
         * waits (params_ready). */
        if (t->ov.on) {
            train_gather_start (t);
            return 0;
        }
        int64_t t0 = dt_mono_ns ();
        if (dt_comm_allgather (t->dp_comm, m->params + t->lo, m->params, t->counts, err) <
            0)
            return -1;
        double s = (dt_mono_ns () - t0) / 1e9;
        *comm_s += s;
        t->ag_s += s;
        t->dp_exposed_s += s;
        t->ag_bytes += (m->nparams - (t->hi - t->lo)) * 4.0;
    }
    return 0;
}

static int validate (struct trainer *t, double *loss, dt_error_t *err)
{
    const struct train_opts *o = &t->o;
    int64_t n = o->val_samples;
    double s[2] = { 0, 0 };

    if (data_val_pos (&t->data, 0, n) == (size_t)-1 || n == 0)
        return 1;
    int64_t a = n * t->ly.dpr / t->ly.dp, b = n * (t->ly.dpr + 1) / t->ly.dp;
    if (t->ly.pp > 1) {
        double ls;
        if (pipe_eval (t, a, b, n, &ls, err) < 0)
            return -1;
        if (t->ly.tpr == 0)
            s[0] += ls;
    }
    for (int64_t i = a; t->ly.pp == 1 && i < b; i += t->mb) {
        int cnt = (int)(b - i < t->mb ? b - i : t->mb);
        for (int j = 0; j < cnt; j++)
            data_window (&t->data, data_val_pos (&t->data, i + j, n),
                         t->ctx_host + (size_t)j * o->context, t->tgt_host + j);
        double ls;
        if (model_eval (&t->model, cnt, t->ctx_host, t->tgt_host, &ls) < 0)
            return errprintf (err, "validation: %s", t->k->last_error);
        if (t->ly.tpr == 0) /* the tp ranks of a replica compute the same loss */
            s[0] += ls;
    }
    if (dt_comm_allreduce (t->comm, s, 1, DT_F64, DT_SUM, err) < 0)
        return -1;
    *loss = s[0] / n;
    return 0;
}

/* --dump-tensors: step 1's reduced gradients (before clipping) and loss. */
static int dump_step1 (struct trainer *t, dt_error_t *err)
{
    char line[64];
    snprintf (line, sizeof (line), "%.9g\n", t->ctrl[0] / t->o.global_batch);
    if (dump_vector (&t->model, t->o.dump_tensors, "grads-1.f32", t->model.grads, err) <
          0 ||
        dump_text (t->o.dump_tensors, "loss-1.txt", line, err) < 0)
        return -1;
    return 0;
}

/* Per dimension (tp, pp, dp): bytes moved, communication time, exposed
 * time, totals so far.  Tensor-parallel all-reduces and pipeline receives
 * block the step (all exposed); data-parallel buckets reduced by the comm
 * thread during the backward pass are hidden, what the step waited for
 * after it is exposed. */
static void dims_totals (const struct trainer *t, double d[9])
{
    double dpb = t->ar_bytes + t->ag_bytes, dps = t->ar_bytes_s + t->ag_s;
    const double v[9] = { t->tp_bytes, t->tp_s, t->tp_s, t->pp_bytes,    t->pp_s,
                          t->pp_s,     dpb,     dps,     t->dp_exposed_s };
    memcpy (d, v, sizeof (v));
}

/* The step's share of them (since d0), to the agent, under a layout (and
 * the dp figures to train_dp_step). */
static void dims_report (struct trainer *t, const double d0[9])
{
    double d1[9], bytes[3], cs[3], xs[3];
    if (t->ly.tp * t->ly.pp * t->ly.dp == 1)
        return;
    dims_totals (t, d1);
    train_dp_step (t, d1[8] - d0[8], d1[7] - d0[7]);
    for (int d = 0; d < 3; d++) {
        bytes[d] = d1[3 * d] - d0[3 * d];
        cs[d] = d1[3 * d + 1] - d0[3 * d + 1];
        xs[d] = d1[3 * d + 2] - d0[3 * d + 2];
    }
    dtclient_step_dims (t->client, t->step, bytes, cs, xs);
}

/* A replica's samples [a, b) through the pipeline; pipe_step arms the
 * overlap before the last backward pass.  0 or -1 with err. */
static int step_pipeline (struct trainer *t, int64_t a, int64_t b, double *loss_sum,
                          dt_error_t *err)
{
    double ls;
    if (pipe_step (t, a, b, 1.0f / t->o.global_batch, &ls, err) < 0) {
        dt_error_t e2;
        if (t->ov.on)
            train_overlap_finish (t, &e2);
        char msg[sizeof (err->text)];
        snprintf (msg, sizeof (msg), "%s", err->text);
        errprintf (err, "step %" PRId64 ": %s", t->step + 1, msg);
        return -1;
    }
    if (t->ly.tpr == 0) /* the tp ranks of a replica compute the same loss */
        *loss_sum += ls;
    return 0;
}

static int train_step (struct trainer *t, double *loss, dt_error_t *err)
{
    const struct train_opts *o = &t->o;
    struct model *m = &t->model;
    int B = o->global_batch, C = o->context;
    int64_t a = (int64_t)B * t->ly.dpr / t->ly.dp,
            b = (int64_t)B * (t->ly.dpr + 1) / t->ly.dp;
    double loss_sum = 0, sumsq = 0;

    double d0[9]; /* per-dimension totals before the step */
    dims_totals (t, d0);

    /* compute */
    int64_t t0 = dt_mono_ns ();
    integ_step_start (t);
    if (t->k->zero (m->grads, m->nparams * 4) < 0)
        return errprintf (err, "%s", t->k->last_error);
    int armed = 0;
    if (t->ly.pp > 1) {
        if (step_pipeline (t, a, b, &loss_sum, err) < 0)
            return lost_peer (err) ? comm_fail (t, err) : -1;
        armed = t->ov.on && b > a;
    }
    for (int64_t i = a; t->ly.pp == 1 && i < b; i += t->mb) {
        int cnt = (int)(b - i < t->mb ? b - i : t->mb);
        for (int j = 0; j < cnt; j++)
            data_window (&t->data, data_train_pos (&t->data, o->seed, t->step, i + j),
                         t->ctx_host + (size_t)j * C, t->tgt_host + j);
        integ_batch (t, t->ctx_host, t->tgt_host, cnt);
        if (t->ov.on && i + t->mb >= b) {
            train_overlap_arm (t); /* the last micro-batch: reduce as we go */
            armed = 1;
        }
        double ls;
        if (model_step (m, cnt, t->ctx_host, t->tgt_host, 1.0f / B, &ls) < 0) {
            dt_error_t e2;
            if (armed)
                train_overlap_finish (t, &e2);
            errprintf (err, "step %" PRId64 ": %s", t->step + 1, t->k->last_error);
            return lost_peer (err) ? comm_fail (t, err) : -1;
        }
        if (t->ly.tpr == 0) /* the tp ranks of a replica compute the same loss */
            loss_sum += ls;
    }
    if (t->ov.on && !armed) {
        train_overlap_arm (t); /* no samples on this rank: reduce anyway */
        armed = 1;
    }
    if (t->k->sync () < 0)
        return errprintf (err, "%s", t->k->last_error);
    double compute = (dt_mono_ns () - t0) / 1e9;
    if (o->slow_rank == t->rank && o->slow_factor > 1) {
        sleep_s (compute * (o->slow_factor - 1));
        compute = (dt_mono_ns () - t0) / 1e9;
    }

    /* communicate: gradients, then the control vector */
    int64_t t1 = dt_mono_ns ();
    double comm = 0;
    if ((armed ? train_overlap_finish (t, err) : train_reduce_grads (t, err)) < 0)
        return comm_fail (t, err);
    t->dp_exposed_s += (dt_mono_ns () - t1) / 1e9;
    if (train_layout_sumsq (t, &sumsq) < 0)
        return errprintf (err, "%s", t->k->last_error);
    integ_local_sumsq (t, sumsq);
    train_ctrl_fill (t, loss_sum, sumsq);
    if (dt_comm_allreduce (t->comm, t->ctrl, t->nctrl, DT_F64, DT_SUM, err) < 0)
        return comm_fail (t, err);
    double norm2 = 0;
    for (int r = 0; r < t->world; r++)
        norm2 += t->ctrl[1 + r];
    double norm = sqrt (norm2);
    /* A non-finite gradient never reaches the parameters. */
    int skip = integ_judge (t, loss_sum, t->ctrl[0] / B, norm2);
    double gscale = (o->clip > 0 && norm > o->clip) ? o->clip / norm : 1.0;
    comm += (dt_mono_ns () - t1) / 1e9;
    if (o->dump_tensors && t->rank == 0 && t->step == 0 && dump_step1 (t, err) < 0)
        return -1;

    /* update (zero1: own shard, then allgather) */
    train_snapshot_barrier (t);
    int64_t t2 = dt_mono_ns ();
    double comm_before = comm;
    if (!skip && optimizer_step (t, gscale, &comm, err) < 0)
        return o->parallel == PAR_ZERO1 ? comm_fail (t, err) : -1;
    if (t->k->sync () < 0)
        return errprintf (err, "%s", t->k->last_error);
    compute += (dt_mono_ns () - t2) / 1e9 - (comm - comm_before);
    t->compute_s += compute;
    t->comm_s += comm;
    t->step++;
    *loss = t->ctrl[0] / B;
    /* samples: what this rank processed in this step (its share of the
     * global batch), so the controller's sum over ranks is the batch. */
    /* (one rank of each replica counts them: tp rank 0 of the last stage) */
    dtclient_step (t->client, t->step, *loss,
                   t->ly.tpr == 0 && t->ly.ppr == t->ly.pp - 1 ? b - a : 0, compute,
                   comm);
    dims_report (t, d0);
    if (o->integrity_every > 0 && t->step % o->integrity_every == 0 &&
        params_ready (t, err) < 0)
        return comm_fail (t, err);
    integ_after_step (t);
    if (!o->quiet && t->rank == 0) {
        int64_t every = o->log_every > 0 ? o->log_every
                        : o->steps >= 20 ? o->steps / 20
                                         : 1;
        if (t->step % every == 0 || t->step == t->start_step + 1 ||
            t->step == t->reform_first)
            dt_log (LOG_INFO,
                    "step %" PRId64 "/%" PRId64 " loss %.4f (%.3f bits/byte) lr %.3g "
                    "|g| %.3f compute %.1f ms comm %.1f ms",
                    t->step, o->steps, *loss, *loss / M_LN2, lr_at (o, t->step - 1), norm,
                    compute * 1e3, comm * 1e3);
    }
    return 0;
}

/* Every replica must hold the same parameters: compare CRCs.  *crc: the
 * one-rank layout's params_crc32c (comparable across layouts).  0 or an
 * exit status. */
static int final_crc (struct trainer *t, uint32_t *crc)
{
    dt_error_t err;
    *crc = train_params_crc (t);
    int64_t mm[2] = { *crc, -(int64_t)*crc };
    if (t->ly.dp > 1 && dt_comm_allreduce (t->dp_comm, mm, 2, DT_I64, DT_MAX, &err) < 0)
        return comm_fail (t, &err), train_comm_lost (t);
    if (mm[0] != -mm[1]) {
        dt_log (LOG_ERR,
                "rank %d: replicas diverged: params_crc32c %08x here, ranks range "
                "%08x..%08x",
                t->rank, *crc, (uint32_t)-mm[1], (uint32_t)mm[0]);
        return EXIT_TRAIN_ERR;
    }
    int differ = train_layout_replicas_differ (t, &err);
    if (differ < 0)
        return comm_fail (t, &err), train_comm_lost (t);
    if (differ)
        return EXIT_TRAIN_ERR;
    if (t->ly.tp * t->ly.pp > 1) {
        int ok;
        *crc = train_layout_global_crc (t, &ok);
        if (!ok)
            return EXIT_COMM;
    }
    return 0;
}

/* The run's one JSON line: rank 0 prints it; every rank reports it as the
 * job's result. */
static void train_summary (struct trainer *t, double wall, int stopped, uint32_t crc)
{
    const struct train_opts *o = &t->o;
    int64_t steps_run = t->step - t->start_step;
    double tps =
      wall > 0 ? (double)steps_run * o->global_batch * t->model.tokens_per_sample / wall
               : 0;
    double flops = t->model.flops_per_sample * o->global_batch * steps_run;
    char json[4096], val[96], numerics[1024];
    if (t->have_val && isfinite (t->val_loss))
        snprintf (val, sizeof (val), "\"val_loss\": %.6f, \"val_bpb\": %.6f", t->val_loss,
                  t->val_loss / M_LN2);
    else
        snprintf (val, sizeof (val), "\"val_loss\": null, \"val_bpb\": null");
    if (train_numerics_json (t, numerics, sizeof (numerics)) < 0)
        snprintf (numerics, sizeof (numerics), "null");
    /* every stage's pp_pass_cpu_s, pp_pass_s and pp_phase_s
     * (bench/bench_layouts.sh's bubble of the stages as they ran) */
    char stages[3][256];
    for (int k = 0; k < 3; k++) {
        snprintf (stages[k], sizeof (stages[k]), "null");
        for (int p = 0, at = 0; t->pp_stage_cpu && p < t->ly.pp && p < 16; p++)
            at += snprintf (stages[k] + at, sizeof (stages[k]) - at, "%s%.4f%s",
                            p ? ", " : "[", t->pp_stage_cpu[k * t->ly.pp + p],
                            p + 1 < t->ly.pp && p < 15 ? "" : "]");
    }
    snprintf (
      json, sizeof (json),
      "{\"steps\": %" PRId64 ", \"steps_run\": %" PRId64 ", \"world_size\": %d, "
      "\"parallel\": \"%s\", \"backend\": \"%s\", \"global_batch\": %d, "
      "\"tokens_per_s\": %.1f, \"model_gflops_per_s\": %.2f, \"train_loss\": %.6f, "
      "\"train_bpb\": %.6f, %s, \"params\": %zu, \"params_crc32c\": \"%08x\", "
      "\"wall_s\": %.3f, \"compute_s\": %.3f, \"comm_s\": %.3f, "
      "\"allreduce_gbps\": %.3f, \"opt_state_bytes_per_rank\": %zu, "
      "\"checkpoints\": %d, \"ckpt_stall_s\": %.6f, \"ckpt_snapshot_s\": %.4f, "
      "\"ckpt_write_s\": %.4f, "
      "\"stopped\": %s, \"blas_core\": \"%s\", \"tp\": %d, \"pp\": %d, \"dp\": %d, "
      "\"tp_comm_s\": %.3f, \"tp_bytes\": %.0f, \"pp_comm_s\": %.3f, \"pp_bytes\": %.0f, "
      "\"dp_comm_s\": %.3f, \"dp_bytes\": %.0f, \"tp_exposed_s\": %.3f, "
      "\"pp_exposed_s\": %.3f, \"dp_exposed_s\": %.3f, \"pp_pass_s\": %.3f, "
      "\"pp_pass_cpu_s\": %.3f, \"pp_stage_pass_cpu_s\": %s, "
      "\"pp_stage_pass_s\": %s, \"pp_stage_phase_s\": %s, "
      "\"dp_buckets\": %zu, \"dp_exposed_min_s\": %.4f, "
      "\"dp_comm_min_s\": %.4f, \"attention\": \"%s\", "
      "\"precision\": \"%s\", \"numerics\": %s}",
      t->step, steps_run, t->world, o->parallel ? "zero1" : "dp", t->k->name,
      o->global_batch, tps, wall > 0 ? flops / wall / 1e9 : 0,
      isfinite (t->last_loss) ? t->last_loss : -1.0,
      isfinite (t->last_loss) ? t->last_loss / M_LN2 : -1.0, val, t->model.nparams, crc,
      wall, t->compute_s, t->comm_s,
      t->ar_bytes_s > 0 ? t->ar_bytes / t->ar_bytes_s / 1e9 : 0, t->opt_elems * 8,
      t->nckpt, t->ckpt_stall_s, t->ckpt_snapshot_s, t->ckpt_write_s,
      stopped ? "true" : "false", t->k->is_device ? "cublas" : dt_kern_cpu_corename (),
      t->ly.tp, t->ly.pp, t->ly.dp, t->tp_s, t->tp_bytes, t->pp_s, t->pp_bytes,
      t->ar_bytes_s + t->ag_s, t->ar_bytes + t->ag_bytes, t->tp_s, t->pp_s,
      t->dp_exposed_s, t->pp_pass_s, t->pp_pass_cpu_s, stages[0], stages[1], stages[2],
      t->nbuckets, t->dp_exposed_min_s, t->dp_comm_min_s,
      t->model.kind != MODEL_TRANSFORMER ? "none"
      : t->model.flash                   ? "flash"
                                         : "simple",
      o->precision == PREC_BF16 ? "bf16" : "fp32", numerics);
    integ_result (t->integ, json, sizeof (json));
    if (t->rank == 0) {
        printf ("%s\n", json);
        fflush (stdout);
    }
    dtclient_result (t->client, json);
}

int trainer_run (struct trainer *t)
{
    const struct train_opts *o = &t->o;
    dt_error_t err;
    double loss = NAN;
    int stopped = 0;
    train_perf_report (t);
    train_numerics_report (t);
    train_reform_declare (t);
    /* A survivor stuck in a collective on its lost peer must still write
     * its just-in-time checkpoint when the controller asks for it. */
    if (o->jit && o->checkpoint_dir && t->world >= 2 && o->parallel == PAR_DP &&
        dtclient_connected (t->client))
        train_rwatch_start (t);
    int64_t t0 = dt_mono_ns ();

    while (t->step < o->steps) {
        if (o->bitflip_rank == t->rank && o->bitflip_step == t->step + 1 &&
            params_ready (t, &err) < 0)
            return comm_fail (t, &err), train_comm_lost (t);
        train_inject (t);
        train_poll_commands (t);
        if (train_step (t, &loss, &err) < 0) {
            /* A lost peer: re-form in place when the controller says so. */
            int lost = lost_peer (&err);
            if (lost && train_reform_survivor (t) == 0)
                continue;
            if (lost)
                return train_comm_lost (t);
            dt_log (LOG_ERR, "rank %d: %s", t->rank, err.text);
            return EXIT_TRAIN_ERR;
        }
        t->last_loss = loss;
        train_maybe_commit (t);

        /* Checkpoint: every N, on command (all ranks saw the same max),
         * on stop, and at the end. */
        int64_t creq = (int64_t)train_ctrl_max (t, 1),
                sreq = (int64_t)train_ctrl_max (t, 2);
        int want = 0;
        if (o->checkpoint_every && t->step % o->checkpoint_every == 0)
            want = 1;
        if (creq > t->ckpt_req_done && t->step >= creq) {
            want = 1;
            t->ckpt_req_done = creq;
        }
        if (sreq > 0 && t->step >= sreq)
            stopped = want = 1;
        if (t->step == o->steps)
            want = 1;
        if (want && o->checkpoint_dir && t->last_saved != t->step &&
            params_ready (t, &err) < 0)
            return comm_fail (t, &err), train_comm_lost (t);
        if (want && o->checkpoint_dir && t->last_saved != t->step &&
            train_checkpoint (t, &err) < 0) {
            dt_log (LOG_ERR, "rank %d: %s", t->rank, err.text);
            if (strstr (err.text, "gloo") || strstr (err.text, "NCCL"))
                return train_comm_lost (t);
            return EXIT_TRAIN_ERR;
        }
        if (o->val_every && t->step % o->val_every == 0 && t->step < o->steps) {
            double vl;
            int rc = params_ready (t, &err) < 0 ? -1 : validate (t, &vl, &err);
            if (rc < 0)
                return comm_fail (t, &err), train_comm_lost (t);
            if (rc == 0 && t->rank == 0)
                dt_log (LOG_INFO, "step %" PRId64 " val loss %.4f (%.3f bits/byte)",
                        t->step, vl, vl / M_LN2);
        }
        if (stopped)
            break;
    }
    if (params_ready (t, &err) < 0)
        return comm_fail (t, &err), train_comm_lost (t);
    double wall = (dt_mono_ns () - t0) / 1e9;
    if (train_dp_minima (t, &err) < 0 || pipe_stage_costs (t, &err) < 0)
        return comm_fail (t, &err), train_comm_lost (t);
    if (t->ly.pp > 1)
        pipe_trace_write (t);

    /* Finish the last write and commit it (one more control exchange). */
    ckpt_wait (t->writer);
    if (t->world > 1 || t->pending_commit) {
        train_ctrl_fill (t, 0, 0);
        if (dt_comm_allreduce (t->comm, t->ctrl, t->nctrl, DT_F64, DT_SUM, &err) < 0)
            return comm_fail (t, &err), train_comm_lost (t);
        train_maybe_commit (t);
    }
    int vrc = validate (t, &t->val_loss, &err);
    if (vrc < 0)
        return comm_fail (t, &err), train_comm_lost (t);
    t->have_val = vrc == 0;

    uint32_t crc;
    int rc = final_crc (t, &crc);
    if (rc)
        return rc;

    train_summary (t, wall, stopped, crc);
    return 0;
}
