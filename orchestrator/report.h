/* report.h: goodput accounting of jobs.
 *
 * The wall time of a job, from its submission to its end (or now, while it
 * runs), is split into parts that add up to it exactly:
 *
 *   kept_training_s     training steps that the final lineage of checkpoints
 *                       keeps (steps of attempt i not undone by a rollback)
 *   lost_work_s         training steps recomputed after a rollback
 *   detection_s         from the last step seen to the failure being recorded
 *   restart_s           from a failure being recorded to the next attempt's
 *                       first step, less that attempt's time queued in Slurm
 *                       (teardown, backoff, rendezvous, start-up, loading)
 *   queue_s             attempts waiting for their allocation (Slurm queue)
 *   checkpoint_stall_s  training paused by checkpoint snapshots
 *   startup_s           the first attempt's rendezvous and start-up, until
 *                       its first step began
 *   shutdown_s          after the last step of the final attempt (final
 *                       save, exit, cancellation)
 *   idle_s              a failed or cancelled job waiting for a resubmission
 *
 * ETTR = kept_training_s / (wall_s - the first attempt's queue_s - idle_s),
 * i.e. kept training time over the wall time since the job first started.
 *
 * Where the facts come from: attempt rows (submit, end, failure first-seen,
 * cause, resume step), the events table (when an attempt left the queue),
 * checkpoints, and per attempt what this module learns from heartbeats and
 * keeps in the attempt_goodput table (schemas/002-run-record.sql): the
 * estimated start of the first step, the steps reached and when, a fixed
 * step-time histogram, and busy (checkpoint) samples.  A step is "reached"
 * when every rank has reported it.  Times between a heartbeat and the next
 * are known to one heartbeat interval; steps are exact up to the steps a
 * trainer makes between its last heartbeat and a crash.
 */
#ifndef DT_REPORT_H
#define DT_REPORT_H

#include <stdint.h>
#include <stdbool.h>
#include <jansson.h>
#include "common/errprintf.h"

#include "orchestrator/store.h"

struct report;

/* The accounting reads and writes through 'store' (borrowed; it must
 * outlive the report).  The job manager pushes what it sees with the
 * calls below; the report never calls back into it. */
struct report *report_create (store_t *store, dt_error_t *err);
void report_destroy (struct report *rp);

/* After a heartbeat of a running attempt updated its ranks ('busy': some
 * rank of the heartbeat said it was saving or loading a checkpoint). */
void report_heartbeat (struct report *rp, int64_t job, int attempt, bool busy);

/* What the attempt-wide pass saw of a running attempt's ranks. */
struct report_sample {
    int64_t job;
    int attempt;
    int64_t resume_step; /* -1: from scratch */
    int64_t start_time;  /* when it began running (epoch ms), 0 unknown */
    bool all_ranks;      /* every rank has reported a step */
    int64_t min_step;    /* the lowest step of the ranks that reported; -1 none */
    double step_ms;      /* the slowest rank's compute + comm, ms; NAN unknown */
    int64_t batch;       /* samples of one step, summed over the ranks */
    /* Communication per parallel dimension of that step (tp, pp, dp:
     * bytes, comm_ms, exposed_ms), the mean over the ranks reporting it;
     * has_dims false: none does. */
    double dims[9];
    bool has_dims;
};
/* The attempt-wide pass (after heartbeats): the step every rank reached,
 * its step time. */
void report_progress (struct report *rp, const struct report_sample *sample);

/* A rank of a running ('running') or ending attempt exited and its agent
 * said the last step it reported: 'min_step', the step every rank has now
 * reported, becomes exact instead of one heartbeat old. */
void report_rank_exit (struct report *rp, int64_t job, int attempt, bool running,
                       int64_t min_step);

/* The attempt stopped running: once written, its figures leave memory. */
void report_attempt_end (struct report *rp, int64_t job, int attempt);

/* Write what heartbeats taught to the store (at most about once a second)
 * and forget attempts that have ended.  Call from the main loop. */
void report_tick (struct report *rp);
/* Write everything now (shutdown). */
void report_flush (struct report *rp);

/* The report of job 'id' (new reference), or NULL with errno ENOENT (no
 * such job) or another errno and err. */
json_t *report_job_json (struct report *rp, int64_t id, dt_error_t *err);

/* Prometheus text for the jobs not ended (new string, caller frees), or
 * NULL on error. */
char *report_prometheus (struct report *rp, dt_error_t *err);

/* --- the accounting itself (pure; unit-tested) ---------------------------- */

#define REPORT_HIST_BUCKETS 200

/* What is known of one attempt.  Times in ms since the epoch, 0 = absent;
 * steps -1 = absent. */
struct report_attempt {
    int attempt;
    const char *state;        /* attempt state name */
    const char *cause, *node; /* "" = none */
    int rank;
    bool failed;      /* ended by a failure (not success, not cancel) */
    bool live;        /* still submitted/starting/running */
    bool resubmitted; /* created by a manual resubmission */
    int64_t submit, leave_queue, end, fail;
    int64_t resume_step; /* -1: from scratch */
    int64_t train_start, first_step, first_step_time, last_step, last_step_time;
    int64_t hb_samples, busy_samples, step_samples, batch_samples;
    double step_ms_sum;
    double stall_reported_s;  /* NAN: not reported */
    const uint32_t *hist;     /* REPORT_HIST_BUCKETS counts, may be NULL */
    const char *restart_path; /* in_place, spare, new_allocation, ...; "" first */
    int64_t running;          /* became running (rendezvous done); 0 never */
    int tp, pp, world_size;   /* its layout; tp, pp 0 unknown */
    bool zero1;               /* the spec's parallel.zero1 */
    const double *dims_sum;   /* 9 sums over dims_steps steps (tp, pp, dp) */
    int64_t dims_steps;
};

struct report_job {
    int64_t id;
    const char *name, *state;
    bool final;               /* ended: the figures will not change */
    bool live_restart;        /* the job is restarting (tail = restart) */
    int64_t submit, end;      /* end 0: now */
    int64_t latest_ckpt_step; /* -1: none (what a restart would resume) */
};

json_t *report_compute (const struct report_job *job, const struct report_attempt *atts,
                        int n, int64_t now);

/* report_restart.c: an attempt's layout {tp, pp, dp, zero1} (null when
 * not recorded) and its communication per dimension {steps, tp, pp, dp}
 * (null when none was reported); new references. */
json_t *report_layout_json (const struct report_attempt *a);
json_t *report_comm_json (const struct report_attempt *a);
/* The same communication as table rows {attempt, dim, steps,
 * bytes_per_step, comm_ms_per_step, exposed_ms_per_step} (new array). */
json_t *report_comm_rows (const struct report_attempt *atts, int n);
/* From the failure of the attempt before (first seen) to this attempt's
 * first step, ms; NAN when either is unknown. */
double report_recovery_ms (const struct report_attempt *prev,
                           const struct report_attempt *a);
/* Restart time per path: {path: {count, recovery_s_total, recovery_s_max}}. */
json_t *report_recovery_by_path (const struct report_attempt *atts, int n);
/* One row per restart after a failure: its path, layout change and the
 * times from the failure to each recorded point (new array); detect_ms[i]:
 * attempt i's detection time (last step seen to its failure). */
json_t *report_restarts (const struct report_attempt *atts, int n,
                         const double *detect_ms);

/* The step time (ms) of bucket b of the histogram, and the bucket of t. */
double report_hist_value (int b);
int report_hist_bucket (double ms);

#endif
