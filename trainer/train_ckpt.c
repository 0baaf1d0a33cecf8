/* train_ckpt.c: dttrain's checkpoints: resuming from the controller's (or
 * the directory's) checkpoint, the step-synchronous snapshot and its
 * background write, the standalone commit, and the just-in-time
 * checkpoint a survivor writes after losing a peer. */
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
#include "trainer/model.h"
#include "trainer/train.h"
#include "trainer/train_int.h"

/* "dp", "zero1", and the tp and pp degrees where they are not 1. */
static void layout_text (char *buf, size_t len, int mode, int tp, int pp)
{
    if (tp * pp > 1)
        snprintf (buf, len, "%s, tp %d, pp %d", mode ? "zero1" : "dp", tp, pp);
    else
        snprintf (buf, len, "%s", mode ? "zero1" : "dp");
}

/* The staging buffers of a resume, unless it read in place (direct). */
static void staging_free (bool direct, float *p, float *m, float *v)
{
    if (!direct)
        free (p), free (m), free (v);
}

int train_resume (struct trainer *t, int *exit_code, dt_error_t *err)
{
    const struct train_opts *o = &t->o;
    char stepdir[1024], from[1024];
    int64_t step;
    int world, parallel;
    size_t n = t->model.nparams;

    /* The integrity guards first: a resume verifies fingerprints. */
    if (!(t->integ = integ_create (t, err))) {
        *exit_code = EXIT_USAGE;
        return -1;
    }
    if (t->reform_joining)
        return 0; /* the state comes from the peers (train_reform.c) */
    if (o->resume)
        snprintf (from, sizeof (from), "%s", o->resume);
    else if (o->resume_step > 0 && o->checkpoint_dir)
        snprintf (from, sizeof (from), "%s/step-%" PRId64, o->checkpoint_dir,
                  o->resume_step);
    else
        return 0;
    int rc = ckpt_find (from, stepdir, sizeof (stepdir), err);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        /* An explicit request names something that must exist. */
        return errprintf (
          err, "resume: no checkpoint in %s (no rank-0.ckpt, no committed step-*)", from);
    }
    /* On the host, with the whole optimizer state in this rank (dp), the
     * checkpoint is read straight into the model's and the optimizer's
     * buffers: no 3 x n staging copy to fault in and copy over on the
     * way to the first step (a failed load ends the run anyway). */
    bool direct = !t->k->is_device && o->parallel != PAR_ZERO1 && t->opt_elems == n;
    float *p = direct ? t->model.params : malloc (n * 4);
    float *m = direct ? t->m : malloc (n * 4);
    float *v = direct ? t->v : malloc (n * 4);
    if (!p || !m || !v) {
        staging_free (direct, p, m, v);
        return errprintf (err, "resume: out of memory");
    }
    dtclient_set_busy (t->client, 1);
    int64_t t0 = dt_mono_ns ();
    /* The whole model's tensors, for the names of the other stages' */
    struct model *whole = NULL;
    if (t->model.kind == MODEL_TRANSFORMER && t->ly.pp > 1) {
        if (!(whole = calloc (1, sizeof (*whole)))) {
            staging_free (direct, p, m, v);
            return errprintf (err, "resume: out of memory");
        }
        layout_tfm (whole, o->context, o->width, o->layers, 1, 0, 0, o->layers, 1, 1);
    }
    rc = ckpt_load_layout (stepdir, t->config, t->model.t, t->model.ntensors,
                           whole ? whole->t : NULL, whole ? whole->ntensors : 0, n, p, m,
                           v, &step, &world, &parallel, err);
    free (whole);
    if (rc < 0) {
        *exit_code = errno == EBADMSG  ? EXIT_CKPT_CORRUPT
                     : errno == EINVAL ? EXIT_CKPT_MISMATCH
                                       : EXIT_TRAIN_ERR;
        staging_free (direct, p, m, v);
        dtclient_set_busy (t->client, 0);
        return -1;
    }
    size_t off = o->parallel == PAR_ZERO1 ? t->lo : 0;
    if (!direct && (t->k->upload (t->model.params, p, n * 4) < 0 ||
                    t->k->upload (t->m, m + off, t->opt_elems * 4) < 0 ||
                    t->k->upload (t->v, v + off, t->opt_elems * 4) < 0)) {
        staging_free (direct, p, m, v);
        dtclient_set_busy (t->client, 0);
        return errprintf (err, "resume: %s", t->k->last_error);
    }
    /* A checkpoint written after replicas diverged is refused. */
    if (integ_verify_resume (t, stepdir, world,
                             CKPT_PAR_TP (parallel) == t->ly.tp &&
                               CKPT_PAR_PP (parallel) == t->ly.pp,
                             p, err) < 0) {
        *exit_code = EXIT_CKPT_CORRUPT;
        staging_free (direct, p, m, v);
        dtclient_set_busy (t->client, 0);
        return -1;
    }
    staging_free (direct, p, m, v);
    dtclient_set_busy (t->client, 0);
    t->step = t->start_step = step;
    t->last_saved = step;
    if (t->rank == 0) {
        char was[64], now[64];
        layout_text (was, sizeof (was), CKPT_PAR_MODE (parallel), CKPT_PAR_TP (parallel),
                     CKPT_PAR_PP (parallel));
        layout_text (now, sizeof (now), o->parallel, t->ly.tp, t->ly.pp);
        dt_log (LOG_NOTICE,
                "resumed from %s: step %" PRId64
                ", saved by %d rank%s (%s), now %d (%s), load %.3f s",
                stepdir, step, world, world == 1 ? "" : "s", was, t->world, now,
                (dt_mono_ns () - t0) / 1e9);
    }
    return 0;
}

/* The optimizer update is the first thing since train_checkpoint () that
 * changes params and moments: a snapshot the writer thread is still
 * copying (during this step's forward, backward and allreduce) must be
 * complete before it.  The time blocked here is the checkpoint's stall. */
void train_snapshot_barrier (struct trainer *t)
{
    double stall;

    if (ckpt_snapshot_wait (t->writer, &stall) == 0)
        return;
    t->ckpt_stall_s += stall;
    if (t->rank == 0)
        dt_log (LOG_INFO,
                "checkpoint step %" PRId64 ": snapshot taken in the background, "
                "waited %.3f ms for it",
                t->last_saved, stall * 1e3);
}

int train_checkpoint (struct trainer *t, dt_error_t *err)
{
    double stall;

    /* The previous checkpoint is not committed yet (a rank was still
     * writing at the last control exchange): finish it and exchange once
     * more, so it is not lost.  pending_commit is the same on every rank
     * (it changes only on allreduced data), so all ranks come here. */
    if (t->pending_commit) {
        ckpt_wait (t->writer);
        train_ctrl_fill (t, 0, 0);
        if (dt_comm_allreduce (t->comm, t->ctrl, t->nctrl, DT_F64, DT_SUM, err) < 0)
            return -1;
        train_maybe_commit (t);
    }
    /* Each shard records its replica's fingerprint (verified at load). */
    char *config = NULL;
    if (asprintf (&config, "%sparams_fingerprint=%s:%08x\n", t->config, integ_group (t),
                  integ_checkpoint (t)) < 0)
        return errprintf (err, "out of memory");
    struct ckpt_meta meta = {
        .root = t->o.checkpoint_dir,
        .job = t->o.job,
        .step = t->step,
        .rank = t->rank,
        .world = t->world,
        .parallel = CKPT_PARALLEL (t->o.parallel, t->ly.tp, t->ly.pp),
        .nparams = t->model.nparams,
        .lo = t->lo,
        .hi = t->hi,
        .seed = t->o.seed,
        .data_cursor = (uint64_t)t->step * t->o.global_batch,
        .config = config,
        .tensors = t->model.t,
        .ntensors = t->model.ntensors,
    };
    size_t off = t->o.parallel == PAR_ZERO1 ? 0 : t->lo;
    dtclient_set_busy (t->client, 1);
    int rc = ckpt_save_async (t->writer, t->k, &meta, t->model.params + t->lo, t->m + off,
                              t->v + off, &stall, err);
    dtclient_set_busy (t->client, 0);
    free (config);
    if (rc < 0)
        return -1;
    t->ckpt_stall_s += stall;
    t->nckpt++;
    t->last_saved = t->step;
    t->pending_commit = t->step;
    if (t->rank == 0)
        dt_log (LOG_INFO,
                "checkpoint step %" PRId64 ": %.3f ms to start, copying and writing "
                "in the background",
                t->step, stall * 1e3);
    return 0;
}

/* Fill this rank's slots of the control vector. */
void train_ctrl_fill (struct trainer *t, double loss_sum, double sumsq)
{
    int W = t->world, r = t->rank;
    struct ckpt_done d;
    memset (t->ctrl, 0, t->nctrl * sizeof (double));
    ckpt_last_done (t->writer, &d);
    t->ctrl[0] = loss_sum;
    t->ctrl[1 + r] = sumsq;
    t->ctrl[1 + W + r] = (double)t->my_ckpt_req;
    t->ctrl[1 + 2 * W + r] = (double)t->my_stop_req;
    t->ctrl[1 + 3 * W + r] = d.failed ? -1.0 : (double)d.step;
    t->ctrl[1 + 4 * W + r] = (double)d.crc;
    t->ctrl[1 + 5 * W + r] = (double)d.bytes;
    if (d.failed && d.step > 0 && d.step == t->pending_commit)
        dt_log (LOG_ERR, "rank %d: checkpoint step %" PRId64 " failed: %s", r, d.step,
                d.error);
}

double train_ctrl_max (struct trainer *t, int field)
{
    double mx = 0;
    for (int r = 0; r < t->world; r++)
        if (t->ctrl[1 + field * t->world + r] > mx)
            mx = t->ctrl[1 + field * t->world + r];
    return mx;
}

/* Standalone commit: every rank's write of pending_commit is done. */
void train_maybe_commit (struct trainer *t)
{
    int W = t->world;
    if (!t->pending_commit)
        return;
    for (int r = 0; r < W; r++)
        if ((int64_t)t->ctrl[1 + 3 * W + r] != t->pending_commit)
            return;
    if (t->rank == 0 && !dtclient_connected (t->client)) {
        uint64_t bytes[W];
        uint32_t crc[W];
        dt_error_t err;
        for (int r = 0; r < W; r++) {
            crc[r] = (uint32_t)t->ctrl[1 + 4 * W + r];
            bytes[r] = (uint64_t)t->ctrl[1 + 5 * W + r];
        }
        if (ckpt_write_manifest (t->o.checkpoint_dir, t->o.job, t->pending_commit, W,
                                 CKPT_PARALLEL (t->o.parallel, t->ly.tp, t->ly.pp), bytes,
                                 crc, &err) < 0)
            dt_log (LOG_ERR, "commit of checkpoint step %" PRId64 ": %s",
                    t->pending_commit, err.text);
        else
            dt_log (LOG_INFO, "checkpoint step %" PRId64 " committed (%d shard%s)",
                    t->pending_commit, W, W > 1 ? "s" : "");
    }
    struct ckpt_done d;
    ckpt_last_done (t->writer, &d);
    t->ckpt_snapshot_s += d.snapshot_s;
    t->ckpt_write_s += d.write_s;
    t->pending_commit = 0;
}

/* --- just-in-time checkpoint -------------------------------------------------------
 * A collective failed: a peer is lost (or hung).  In dp every rank holds
 * the whole state of its (tp, pp) position as of its last completed step:
 * a failure inside step k's collectives (tp and pp exchanges, gradient
 * buckets, control vector) comes before step k's optimizer update, which
 * needs no collective in dp, so params and moments are still exactly
 * those of step k-1's end (t->step).  This rank then writes the shards of
 * its dp group for that step - the balanced slices each of its replicas
 * would have written; every shard when tp = pp = 1 - into a directory of
 * its own, reports them, and exits EXIT_JIT.  The survivors can no longer
 * agree on anything, so each writes its own set; the controller commits a
 * step once the survivors' sets cover every (tp, pp) position, each shard
 * taken from one set.  Its shards record this rank's parameter fingerprint,
 * so the load verifies what it holds (integ_verify_resume), as for any
 * checkpoint.  zero1: the lost ranks' moment shards are gone; the
 * controller falls back to the last committed checkpoint. */
static void jit_report_cb (void *arg, int shard_rank, const struct ckpt_done *d)
{
    struct trainer *t = arg;
    dtclient_shard_written_jit (t->client, d->step, shard_rank, d->path, d->bytes,
                                d->crc);
}

/* The exit status after a failed collective: EXIT_JIT when a just-in-time
 * checkpoint was written and reported, else EXIT_COMM. */
int train_comm_lost (struct trainer *t)
{
    const struct train_opts *o = &t->o;
    size_t n = t->model.nparams;
    dt_error_t err;
    char dir[1024];

    if (!o->jit || t->world < 2 || !o->checkpoint_dir || !dtclient_connected (t->client))
        return EXIT_COMM;
    if (o->parallel != PAR_DP) {
        dt_log (LOG_NOTICE,
                "rank %d: zero1: no just-in-time checkpoint (the lost ranks' "
                "optimizer shards are gone)",
                t->rank);
        return EXIT_COMM;
    }
    if (t->step <= t->start_step)
        return EXIT_COMM; /* nothing since the checkpoint resumed from */
    int64_t t0 = dt_mono_ns ();
    ckpt_wait (t->writer); /* a periodic write in flight finishes first */
    float *p = malloc (n * 4), *m = malloc (n * 4), *v = malloc (n * 4);
    char *config = NULL;
    int rc = -1;
    if (!p || !m || !v)
        errprintf (&err, "out of memory");
    else if (t->k->download (p, t->model.params, n * 4) < 0 ||
             t->k->download (m, t->m, n * 4) < 0 || t->k->download (v, t->v, n * 4) < 0)
        errprintf (&err, "%s", t->k->last_error);
    /* Every shard records the fingerprint of the replica it was cut from
     * (this rank's), verified at load like a periodic checkpoint's. */
    else if (asprintf (&config, "%sparams_fingerprint=%s:%08x\n", t->config,
                       integ_group (t), integ_fingerprint (t, p, NULL)) < 0) {
        config = NULL;
        errprintf (&err, "out of memory");
    }
    else {
        struct ckpt_meta meta = {
            .root = o->checkpoint_dir,
            .job = o->job,
            .step = t->step,
            .rank = t->rank,
            .world = t->world,
            .parallel = CKPT_PARALLEL (o->parallel, t->ly.tp, t->ly.pp),
            .nparams = n,
            .seed = o->seed,
            .data_cursor = (uint64_t)t->step * o->global_batch,
            .config = config,
            .tensors = t->model.t,
            .ntensors = t->model.ntensors,
        };
        snprintf (dir, sizeof (dir), "%s/jit-%" PRId64 "-r%d", o->checkpoint_dir, t->step,
                  t->rank);
        dtclient_set_busy (t->client, 1);
        rc = ckpt_save_jit (&meta, dir, p, m, v, jit_report_cb, t, &err);
        dtclient_set_busy (t->client, 0);
    }
    free (p), free (m), free (v);
    free (config);
    if (rc < 0) {
        dt_log (LOG_ERR, "rank %d: just-in-time checkpoint of step %" PRId64 ": %s",
                t->rank, t->step, err.text);
        return EXIT_COMM;
    }
    dt_log (LOG_NOTICE,
            "rank %d: just-in-time checkpoint of step %" PRId64 " written to %s "
            "(%d shard%s, %.1f ms)",
            t->rank, t->step, dir, t->ly.dp, t->ly.dp > 1 ? "s" : "",
            (dt_mono_ns () - t0) / 1e6);
    return EXIT_JIT;
}

uint32_t train_params_crc (struct trainer *t)
{
    size_t n = t->model.nparams;
    float *h = malloc (n * 4);
    uint32_t crc = 0;
    if (h && t->k->download (h, t->model.params, n * 4) == 0) {
        crc = dt_crc32c (0, h, n * 4);
        if (t->o.dump_params && t->rank == 0 && t->ly.tp * t->ly.pp == 1) {
            FILE *f = fopen (t->o.dump_params, "wb");
            if (!f || fwrite (h, 4, n, f) != n || fclose (f) != 0)
                dt_log (LOG_ERR, "--dump-params %s: %s", t->o.dump_params,
                        strerror (errno));
        }
    }
    free (h);
    return crc;
}
