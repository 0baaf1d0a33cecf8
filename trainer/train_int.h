/* train_int.h: what the files of dttrain's training loop share (train.c,
 * train_ckpt.c, train_ctl.c): the trainer's state and each file's
 * functions the others call. */
#ifndef DT_TRAIN_INT_H
#define DT_TRAIN_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/errprintf.h"
#include "trainer/ckpt.h"
#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/integrity.h"
#include "trainer/layout.h"
#include "trainer/model.h"
#include "trainer/train.h"

struct trainer {
    struct train_opts o;
    dtclient_t *client;
    struct dt_kern_ops *k;
    dt_comm_t *comm;
    struct data data;
    struct model model;
    int rank, world;
    /* The layout (layout.h) and its communicators: tp_comm over this
     * rank's tp group (NULL when tp = 1), dp_comm over its dp group (the
     * gradient all-reduce, zero1's all-gather; comm itself when the
     * layout is data-parallel only, NULL when dp = 1).  tp_ranks, dp_ranks:
     * the groups' members. */
    struct layout ly;
    dt_comm_t *tp_comm, *dp_comm, *pp_comm; /* pp_comm: NULL when pp = 1 */
    int *tp_ranks, *dp_ranks, *pp_ranks;
    size_t *counts; /* balanced partition of the parameters (over the dp group) */
    size_t lo, hi;  /* this rank's slice */
    float *m, *v;   /* AdamW moments: full (dp) or slice (zero1) */
    size_t opt_elems;
    struct ckpt_writer *writer;
    struct integ *integ; /* silent-error guards (integrity.c) */
    char *config;
    int64_t step; /* completed steps */
    int64_t start_step;
    int mb; /* micro-batch */
    uint8_t *ctx_host, *tgt_host;
    double *ctrl;
    size_t nctrl;
    /* commands */
    int64_t my_ckpt_req, my_stop_req, ckpt_req_done, last_saved;
    int64_t pending_commit;
    /* stats */
    double compute_s, comm_s, ckpt_stall_s, ckpt_snapshot_s, ckpt_write_s, ar_bytes_s,
      ar_bytes;
    double tp_s, tp_bytes; /* tensor-parallel all-reduces */
    double pp_s, pp_bytes; /* pipeline sends and receives (blocked time) */
    /* the stage's forward and backward passes in the pipeline: wall time,
     * and the main thread's CPU time in them (against the wall time: the
     * share of a core the passes got) */
    double pp_pass_s, pp_pass_cpu_s;
    double pp_phase_s; /* wall time in pipe_step: passes, waits, transfers */
    /* after the run: every stage's pp_pass_cpu_s, then every stage's
     * pp_pass_s, then every stage's pp_phase_s (3 x pp) */
    double *pp_stage_cpu;
    /* the data-parallel dimension: what the step waited for (the gradient
     * reduction after the backward pass, zero1's all-gather); zero1's
     * all-gather (ag_*) counts in dp but not in allreduce_gbps */
    double dp_exposed_s, ag_s, ag_bytes;
    /* per step (index step - 1, when --steps is at most DP_STEPS_MAX):
     * this rank's dp exposed and communication time; after the run, the
     * sums over the steps of their minimum over the dp group (the rank
     * that finished its passes last waits for communication only, the
     * others also for it): -1 when not measured */
    double *dp_step_x, *dp_step_c;
    double dp_exposed_min_s, dp_comm_min_s;
    int nckpt;
    /* re-forming in place (train_reform.c): capable (declared), the
     * attempt re-formed as (0: none; its kv prefix), joining as a
     * replacement, the last state transfer's time */
    int reform_ok, reform_joining;
    int64_t reform_attempt;
    int64_t reform_first; /* the first step after a re-form (logged) */
    /* a re-form command read in the step loop, before this rank's own
     * collective failed: the attempt it names (0: none) */
    int64_t reform_pending;
    /* a stop read in the step loop whose step is negative: the attempt
     * ended with a peer's loss, save the state now (train_rwatch.c) */
    int peer_lost;
    struct train_rwatch *rwatch; /* train_rwatch.c (NULL: not watching) */
    /* the FLOP report's peak, once known (a re-formed group's replacement
     * takes its source's instead of measuring before its first step) */
    int perf_known;
    double perf_peak;
    const char *perf_src;
    double reform_transfer_ms;
    double last_loss, val_loss;
    int have_val;
    /* gradient buckets (reduced by a comm thread during the backward pass
     * with --overlap): bucket b is the whole tensors at flat offsets
     * bstart[b] .. bstart[b + 1] - 1; bucket: the largest size asked */
    size_t bucket, nbuckets, *bstart;
    struct {
        int on;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        ssize_t next;       /* next bucket to reduce (descending); -1: done */
        ssize_t ready_from; /* buckets >= this are final */
        int quit, failed;
        int dev; /* no thread: NCCL all-reduces queued behind events */
        dt_error_t err;
        /* zero1's parameter all-gather (train_overlap.c): npieces pieces,
         * gnext the next to gather (npieces: none pending), every
         * parameter below gdone gathered; the thread's time and bytes
         * until the main thread adds them to ag_s, ag_bytes */
        size_t *gstart, npieces, gnext, gdone;
        int *gowner;
        double ag_s, ag_bytes;
    } ov;
};

/* train_overlap.c: gradient buckets, the comm thread */
/* Plan the buckets (t->bstart, t->nbuckets) for --bucket-mb.  0 or -1. */
int train_buckets_plan (struct trainer *t, dt_error_t *err);
/* Reduce every bucket now, in the comm thread's order (no thread). */
int train_reduce_grads (struct trainer *t, dt_error_t *err);
/* Start the comm thread (and zero1's overlapped all-gather); 0 or -1
 * (errno).  stop: join it; harmless when not started. */
int train_overlap_start (struct trainer *t);
/* On a device (NCCL, dp without zero1): no thread; each bucket's
 * all-reduce is queued on the dp communicator's stream as the backward
 * pass finishes it, behind an event on the compute stream, and
 * train_overlap_finish waits for them.  0 or -1 (errno). */
int train_overlap_start_dev (struct trainer *t);
void train_overlap_stop (struct trainer *t);
/* The comm thread reduces gradient buckets as the backward pass about to
 * run finishes them (the last micro-batch of a step). */
void train_overlap_arm (struct trainer *t);
/* Wait until every armed bucket is reduced and every gather piece is
 * gathered; 0 or -1 with the thread's error. */
int train_overlap_finish (struct trainer *t, dt_error_t *err);
/* zero1 with the comm thread: gather the new parameters in the
 * background (after the optimizer step updated this rank's shard). */
void train_gather_start (struct trainer *t);
/* Wait until the parameters below flat offset upto are gathered (the
 * wait counts as exposed dp time); no-op without the thread.  0 or -1
 * with the thread's error. */
int train_gather_wait (struct trainer *t, size_t upto, dt_error_t *err);
/* The step just done had dp exposed time x and dp communication time c. */
void train_dp_step (struct trainer *t, double x, double c);
/* After the run, over the dp group (a collective): dp_exposed_min_s and
 * dp_comm_min_s.  0 or -1 with err. */
int train_dp_minima (struct trainer *t, dt_error_t *err);

/* train_ckpt.c: checkpoints */
int train_resume (struct trainer *t, int *exit_code, dt_error_t *err);
void train_snapshot_barrier (struct trainer *t);
int train_checkpoint (struct trainer *t, dt_error_t *err);
void train_ctrl_fill (struct trainer *t, double loss_sum, double sumsq);
double train_ctrl_max (struct trainer *t, int field);
void train_maybe_commit (struct trainer *t);
int train_comm_lost (struct trainer *t);
uint32_t train_params_crc (struct trainer *t);

/* train_ctl.c: the controller, commands, signals */
void train_client_waiting (void *client, int waiting);
dt_comm_t *train_comm_open (struct trainer *t, dt_error_t *err);
/* A communicator over a group of the layout, named group (NULL: the
 * world), this rank being rank of size. */
dt_comm_t *train_comm_open_group (struct trainer *t, const char *group, int rank,
                                  int size, dt_error_t *err);

/* train_reform.c: re-forming the group in place after a peer's loss.
 * init: from the environment (DT_REFORM, DT_REFORM_JOIN); true when this
 * process replaces a lost rank (it then skips the checkpoint and calls
 * sync once its communicator is open).  declare: tell the agent (once).
 * survivor: after a collective failed, wait for the re-form command and
 * re-form: 0 (go on training), -1 (stop, timeout or failure: the
 * ordinary path).  sync: agree on the step, transfer and check the
 * state; 0 or -1 with err. */
int train_reform_init (struct trainer *t);
void train_reform_declare (struct trainer *t);
int train_reform_survivor (struct trainer *t);
int train_reform_sync (struct trainer *t, dt_error_t *err);
/* train_standby.c: a standby process's warm model, moved into *m (true)
 * when it was kept and has the shape asked for; false otherwise. */
bool train_standby_take_model (struct model *m, const struct dt_kern_ops *k, int mb);

/* train_rwatch.c: a re-form command or a just-in-time stop left unread
 * (a collective stuck on the lost peer) aborts the old group's
 * communicators.  lock/unlock around replacing them. */
void train_rwatch_start (struct trainer *t);
void train_rwatch_lock (struct trainer *t);
void train_rwatch_unlock (struct trainer *t);
void train_rwatch_stop (struct trainer *t);

/* train_layout.c: the layout's communicators and what the step loop does
 * differently under it */
int train_layout_open (struct trainer *t, dt_error_t *err);
void train_layout_close (struct trainer *t);
int train_layout_sumsq (struct trainer *t, double *sumsq);
int train_layout_peer (struct trainer *t, const char *errtext);
uint32_t train_layout_global_crc (struct trainer *t, int *ok);
int train_layout_replicas_differ (struct trainer *t, dt_error_t *err);
void train_poll_commands (struct trainer *t);
/* Tell the controller once what a step costs in model FLOPs and the peak
 * FLOP/s it is measured against (--peak-flops, else measured). */
void train_perf_report (struct trainer *t);
/* train_numerics.c: this rank's numerics identity as a JSON object (0, or
 * -1 when len is too small), and its report to the controller (once). */
int train_numerics_json (struct trainer *t, char *buf, size_t len);
void train_numerics_report (struct trainer *t);
void train_inject (struct trainer *t);

#endif
