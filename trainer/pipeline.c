/* pipeline.c: pipeline parallelism in dttrain - a step's micro-batches through the
 * stages in the 1F1B schedule, activations and gradients between neighbouring
 * stages, the loss on the last stage.
 *
 * Stage p < P - 1 of P runs min(P - p, M) forward passes (warmup; the
 * last stage none), then alternates one forward and one backward pass,
 * then the remaining backward passes (PipeDream-Flush / Megatron's 1F1B
 * with one micro-batch of slack, see pipe_step): at most P - p + 1
 * micro-batches are in flight on stage p, so P + 1 activation sets
 * suffice (micro-batch j uses set j mod (P + 1)).  A stage receives its
 * input before a forward pass and the gradient of its output before a
 * backward pass (blocking, within the collective timeout: a dead or hung
 * neighbour is an error naming its rank, never a hang); it posts its sends without
 * waiting (gloo queues a send until the peer posts the receive, so two
 * neighbours may send to each other at once; between stages on one node
 * a send is a copy into a shared-memory ring, comm_shm.c) and waits for
 * them all at the end of the step.  Sets are reused only after the neighbour has
 * received from them (the schedule's dependencies order it).
 * Micro-batch j's activations travel in slot 2j, its gradients in 2j + 1.
 *
 * DT_PP_TRACE=PREFIX records, per step, when each pass, send and receive
 * began and ended (monotonic ns and the thread's CPU time) into
 * PREFIX.RANK at the end of the run (bench/pp_trace.py replays the
 * schedule from it and says where the bubble's time went). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dtime.h"
#include "common/log.h"
#include "trainer/pipeline.h"
#include "trainer/train_int.h"
#include "trainer/transformer.h"

/* The trace (DT_PP_TRACE): a fixed buffer filled without locks from the
 * training thread; what does not fit is dropped. */
enum trace_ev {
    TR_STEP = 1,   /* j: the step; TR_STEP + 1 at its end */
    TR_SEND = 10,  /* j: the slot; TR_SEND + 1 when dt_comm_send returned */
    TR_RECV = 12,  /* j: the slot; TR_RECV + 1 when the bytes are in */
    TR_POST = 14,  /* j: the slot of a receive posted ahead */
    TR_FWD = 20,   /* j: the micro-batch; TR_FWD + 1 at the pass's end */
    TR_BWD = 30,   /* likewise for the backward pass */
    TR_FLUSH = 40, /* waiting for the step's sends; TR_FLUSH + 1 at the end */
};
struct trace_rec {
    int64_t ns;
    double cpu_s;
    int ev, j;
};
static struct trace_rec *trace_buf;
static int trace_n, trace_cap = -1;

static double thread_cpu_s (void);

static void trace (int ev, int64_t j)
{
    if (trace_cap < 0) { /* first use: on when DT_PP_TRACE is set */
        trace_cap = 0;
        if (getenv ("DT_PP_TRACE") && (trace_buf = calloc (1 << 20, sizeof (*trace_buf))))
            trace_cap = 1 << 20;
    }
    if (trace_n < trace_cap)
        trace_buf[trace_n++] =
          (struct trace_rec){ dt_mono_ns (), thread_cpu_s (), ev, (int)j };
}

void pipe_trace_write (struct trainer *t)
{
    const char *pre = getenv ("DT_PP_TRACE");
    char path[4096];
    FILE *f;
    if (!trace_buf || !pre)
        return;
    snprintf (path, sizeof (path), "%s.%d", pre, t->rank);
    if (!(f = fopen (path, "w"))) {
        dt_log_errno (LOG_WARNING, "DT_PP_TRACE: %s", path);
        return;
    }
    for (int i = 0; i < trace_n; i++)
        fprintf (f, "%" PRId64 " %.9f %d %d\n", trace_buf[i].ns, trace_buf[i].cpu_s,
                 trace_buf[i].ev, trace_buf[i].j);
    if (fclose (f) != 0)
        dt_log_errno (LOG_WARNING, "DT_PP_TRACE: %s", path);
}

/* The rank of the pp group member idx (for errors). */
static int world_rank (struct trainer *t, int idx)
{
    return t->pp_ranks[idx];
}

/* p2p with the stage 'peer' (index in the pp group); the error names its
 * world rank and what was being moved. */
static int xfer (struct trainer *t, int send, float *buf, size_t n, int peer,
                 uint64_t slot, const char *what, dt_error_t *err)
{
    dt_error_t e;
    trace (send ? TR_SEND : TR_RECV, (int64_t)slot);
    int64_t t0 = dt_mono_ns ();
    int rc = send ? dt_comm_send (t->pp_comm, buf, n * 4, peer, slot, &e)
                  : dt_comm_recv (t->pp_comm, buf, n * 4, peer, slot, &e);
    t->pp_s += (dt_mono_ns () - t0) / 1e9;
    trace ((send ? TR_SEND : TR_RECV) + 1, (int64_t)slot);
    if (rc < 0)
        return errprintf (err, "pipeline %s %s stage %d (rank %d): %s", what,
                          send ? "to" : "from", peer, world_rank (t, peer), e.text);
    t->pp_bytes += n * 4.0;
    return 0;
}

/* The calling thread's CPU time in seconds. */
static double thread_cpu_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Time a stage's pass: its wall and CPU time (pp_pass_s, pp_pass_cpu_s). */
static void pass_begin (double *w, double *c)
{
    *w = dt_mono_ns () / 1e9;
    *c = thread_cpu_s ();
}

static void pass_end (struct trainer *t, double w, double c)
{
    t->pp_pass_s += dt_mono_ns () / 1e9 - w;
    t->pp_pass_cpu_s += thread_cpu_s () - c;
}

/* Micro-batch j of the samples [a, b): draws its windows into the host
 * buffers; returns its size. */
static int fetch (struct trainer *t, int64_t a, int64_t b, int j, int val, int64_t nval)
{
    int64_t i = a + (int64_t)j * t->mb;
    int cnt = (int)(b - i < t->mb ? b - i : t->mb);
    for (int s = 0; s < cnt; s++)
        data_window (&t->data,
                     val ? data_val_pos (&t->data, i + s, nval)
                         : data_train_pos (&t->data, t->o.seed, t->step, i + s),
                     t->ctx_host + (size_t)s * t->o.context, t->tgt_host + s);
    return cnt;
}

static int fwd (struct trainer *t, int64_t a, int64_t b, int j, float scale, int val,
                int64_t nval, double *loss_sum, dt_error_t *err)
{
    struct model *m = &t->model;
    int p = t->ly.ppr, set = j % m->ntf;
    int cnt = fetch (t, a, b, j, val, nval);
    size_t n = (size_t)cnt * t->o.context * t->o.width;
    double ls = 0;

    if (!m->pp_first && xfer (t, 0, tfm_stage_buf (m, set, TFM_STAGE_IN), n, p - 1,
                              2 * (uint64_t)j, "activations", err) < 0)
        return -1;
    double w, c;
    trace (TR_FWD, j);
    pass_begin (&w, &c);
    if (tfm_stage_forward (m, set, cnt, t->ctx_host, t->tgt_host, scale, &ls) < 0)
        return errprintf (err, "%s", t->k->last_error);
    if (t->k->sync () < 0)
        return errprintf (err, "%s", t->k->last_error);
    pass_end (t, w, c);
    trace (TR_FWD + 1, j);
    if (!m->pp_last && xfer (t, 1, tfm_stage_buf (m, set, TFM_STAGE_OUT), n, p + 1,
                             2 * (uint64_t)j, "activations", err) < 0)
        return -1;
    *loss_sum += ls;
    return 0;
}

/* Post the receive of micro-batch j's activations (grad 0; a stage other
 * than the first, into its set's input) or of its output's gradient
 * (grad 1; one other than the last, into its set's GIN) ahead of the pass
 * that needs it, so the neighbour's send writes at once and the bytes
 * arrive while this stage computes.  Posted when the set is free: the
 * activations of j after the backward pass of j - ntf (its set's last
 * user), the gradient of j after j's forward pass (GIN's last reader was
 * the backward pass of j - ntf).  j past the step's last: nothing. */
static int post (struct trainer *t, int64_t a, int64_t b, int j, int grad,
                 dt_error_t *err)
{
    struct model *m = &t->model;
    int64_t i = a + (int64_t)j * t->mb;
    dt_error_t e;
    if (i >= b || (grad ? m->pp_last : m->pp_first))
        return 0;
    int cnt = (int)(b - i < t->mb ? b - i : t->mb), peer = t->ly.ppr + (grad ? 1 : -1);
    size_t n = (size_t)cnt * t->o.context * t->o.width;
    float *buf = tfm_stage_buf (m, j % m->ntf, grad ? TFM_STAGE_GIN : TFM_STAGE_IN);
    trace (TR_POST, 2 * (int64_t)j + grad);
    if (dt_comm_post_recv (t->pp_comm, buf, n * 4, peer, 2 * (uint64_t)j + grad, &e) < 0)
        return errprintf (err, "pipeline %s from stage %d (rank %d): %s",
                          grad ? "gradients" : "activations", peer, world_rank (t, peer),
                          e.text);
    return 0;
}

static int bwd (struct trainer *t, int64_t a, int64_t b, int j, dt_error_t *err)
{
    struct model *m = &t->model;
    int p = t->ly.ppr, set = j % m->ntf;
    int64_t i = a + (int64_t)j * t->mb;
    int cnt = (int)(b - i < t->mb ? b - i : t->mb);
    size_t n = (size_t)cnt * t->o.context * t->o.width;
    float *dres = tfm_stage_buf (m, set, TFM_STAGE_DRES);
    float *gin = tfm_stage_buf (m, set, TFM_STAGE_GIN);

    if (!m->pp_last &&
        (xfer (t, 0, gin, n, p + 1, 2 * (uint64_t)j + 1, "gradients", err) < 0 ||
         t->k->copy (dres, gin, n * 4) < 0))
        return -1;
    /* The last micro-batch's backward pass makes the gradients final: the
     * comm thread (--overlap) reduces its buckets as it goes. */
    if (t->ov.on && i + t->mb >= b)
        train_overlap_arm (t);
    double w, c;
    trace (TR_BWD, j);
    pass_begin (&w, &c);
    if (tfm_stage_backward (m, set) < 0 || t->k->sync () < 0)
        return errprintf (err, "%s", t->k->last_error);
    pass_end (t, w, c);
    trace (TR_BWD + 1, j);
    if (!m->pp_first &&
        xfer (t, 1, dres, n, p - 1, 2 * (uint64_t)j + 1, "gradients", err) < 0)
        return -1;
    return 0;
}

static int finish (struct trainer *t, dt_error_t *err)
{
    dt_error_t e;
    trace (TR_FLUSH, 0);
    int64_t t0 = dt_mono_ns ();
    int rc = dt_comm_flush (t->pp_comm, &e);
    t->pp_s += (dt_mono_ns () - t0) / 1e9;
    trace (TR_FLUSH + 1, 0);
    if (rc < 0)
        return errprintf (err, "pipeline: %s", e.text);
    return 0;
}

int pipe_step (struct trainer *t, int64_t a, int64_t b, float scale, double *loss_sum,
               dt_error_t *err)
{
    int P = t->ly.pp, p = t->ly.ppr;
    int M = b > a ? (int)((b - a + t->mb - 1) / t->mb) : 0;
    /* One micro-batch of slack: a stage other than the last runs P - p
     * forward passes ahead (1F1B's P - p - 1, plus one), so the activations
     * its successor needs next are sent before it waits for a gradient.
     * With exactly P - p - 1, stage p sends the next activations only
     * after a gradient has come back from p + 1 and its backward pass has
     * run; with balanced stages p + 1 then waits for them, and every
     * steady-state slot pays a gradient's and an activation's transfer.
     * Costs one activation set (ntf = P + 1); the order of each stage's
     * forward and backward passes, and so every sum, is 1F1B's. */
    int warm = p == P - 1 ? 0 : P - p < M ? P - p : M;
    int64_t t0 = dt_mono_ns ();
    int rc = -1;

    *loss_sum = 0;
    trace (TR_STEP, t->step);
    for (int j = 0; j < t->model.ntf; j++)
        if (post (t, a, b, j, 0, err) < 0)
            goto out;
    for (int j = 0; j < warm; j++)
        if (fwd (t, a, b, j, scale, 0, 0, loss_sum, err) < 0 ||
            post (t, a, b, j, 1, err) < 0)
            goto out;
    for (int i = 0; i < M - warm; i++)
        if (fwd (t, a, b, warm + i, scale, 0, 0, loss_sum, err) < 0 ||
            post (t, a, b, warm + i, 1, err) < 0 || bwd (t, a, b, i, err) < 0 ||
            post (t, a, b, i + t->model.ntf, 0, err) < 0)
            goto out;
    for (int i = M - warm; i < M; i++)
        if (bwd (t, a, b, i, err) < 0 || post (t, a, b, i + t->model.ntf, 0, err) < 0)
            goto out;
    rc = finish (t, err);
out:
    trace (TR_STEP + 1, t->step);
    t->pp_phase_s += (dt_mono_ns () - t0) / 1e9;
    return rc;
}

int pipe_eval (struct trainer *t, int64_t a, int64_t b, int64_t nval, double *loss_sum,
               dt_error_t *err)
{
    int M = b > a ? (int)((b - a + t->mb - 1) / t->mb) : 0;
    *loss_sum = 0;
    /* Forward passes only: no backward pass orders the reuse of a set,
     * so each send is waited for before the next pass. */
    for (int j = 0; j < M; j++)
        if (fwd (t, a, b, j, 0.0f, 1, nval, loss_sum, err) < 0 || finish (t, err) < 0)
            return -1;
    return 0;
}

int pipe_stage_costs (struct trainer *t, dt_error_t *err)
{
    int P = t->ly.pp;
    if (P < 2)
        return 0;
    if (!(t->pp_stage_cpu = calloc (3 * P, sizeof (double))))
        return errprintf (err, "out of memory");
    t->pp_stage_cpu[t->ly.ppr] = t->pp_pass_cpu_s;
    t->pp_stage_cpu[P + t->ly.ppr] = t->pp_pass_s;
    t->pp_stage_cpu[2 * P + t->ly.ppr] = t->pp_phase_s;
    return dt_comm_allreduce (t->pp_comm, t->pp_stage_cpu, 3 * P, DT_F64, DT_SUM, err);
}
