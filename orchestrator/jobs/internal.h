/* internal.h: what the files of the job manager (orchestrator/jobs/) share.
 *
 * One context (struct jobs) and one file per concern, each file's part
 * listed below under its name.  Nothing here is for the rest of dtctld:
 * its interface is orchestrator/jobs.h.  Every function that changes a
 * job's or an attempt's state does it through transact() (transition.c),
 * so that the change and its event are one SQLite transaction.
 *
 * The decisions that need no I/O live in pure files with their own
 * headers and unit tests (tests/unit/orchestrator/test_*policy.c):
 * hangpolicy.c (whom the hang watchdog blames), ckptpolicy.c (checkpoint
 * steps, just-in-time sets), restartpolicy.c (what a failure's cause
 * means for the restart), stragglerpolicy.c (windows, medians), besides
 * ../ftpolicy.c (restart verdict, backoff, automatic hang timeout).
 */
#ifndef DT_JOBS_INTERNAL_H
#define DT_JOBS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "common/dtime.h"
#include "common/errprintf.h"
#include "common/fsutil.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "orchestrator/auth.h"
#include "orchestrator/ckptpath.h"
#include "orchestrator/ctld.h"
#include "orchestrator/fsm.h"
#include "orchestrator/ftpolicy.h"
#include "orchestrator/jobs.h"
#include "orchestrator/provenance.h"
#include "orchestrator/report.h"
#include "orchestrator/sha256.h"
#include "orchestrator/spec.h"
#include "orchestrator/userfs.h"

struct jobs {
    struct ctld *ctx;
    struct job *list;
    int64_t next_flush_ms;
    int flush_stream; /* where the next bounded flush starts (tx_flush) */
    uint64_t restarts;
    uint64_t ckpts;
    uint64_t integ_events[3]; /* detections by kind (integritypolicy.h) */
    uint64_t integ_rollbacks;
    /* Deafness: the controller cannot hear heartbeats while its own loop is
     * held up (an fsync under checkpoint traffic, a slow libslurm call).
     * After such a stall every agent looks silent; node loss counts
     * silence from heard_since_ms at the earliest, so the controller's own
     * stall never blames a healthy node. */
    int64_t tick_end_ms;
    int64_t heard_since_ms;
    /* One attempt-wide pass of a huge attempt per tick (jobs_pass_ok): in
     * a tick now, passes run in it, and passes left for the next one. */
    bool in_tick;
    int tick_passes;
    bool passes_left;
    /* Epoch ms at which a node that a neighbour reported unheard has been
     * silent for the corroborated limit (attempt_check_running): the next
     * tick comes then, not up to a tick later.  0: none. */
    int64_t loss_due_ms;
};

/* A state change run by transact(): 0, or -1 with err (rolled back). */
typedef int (*tx_f) (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                     dt_error_t *err);

/* progress.c: may an attempt-wide pass (progress, watchdog) of 'att' run
 * now?  Always for an attempt of up to a few thousand ranks; a larger
 * one's run only in the tick, one per tick (the next tick comes sooner
 * when some were left). */
bool jobs_pass_ok (struct jobs *jobs, struct attempt *att);
extern const int pass_bounded_ranks; /* the ranks of such an attempt, over */

/* Rows one bounded flush writes at most (flush.c explains the figure). */
extern const int flush_rows_max;

/* transition.c: state changes in one transaction with their event */
int job_set_state (struct jobs *jobs, struct job *job, enum job_state to,
                   const char *reason, dt_error_t *err);
int att_set_state (struct jobs *jobs, struct attempt *att, enum attempt_state to,
                   dt_error_t *err);
int transact (struct jobs *jobs, struct job *job, struct attempt *att, tx_f fn, void *arg,
              dt_error_t *err);

/* attempt.c: allocation, launch, rendezvous, success, cancel, finish, polling */
void attempt_destroy (struct attempt *att);
struct attempt *attempt_alloc (struct jobs *jobs, struct job *job, int number,
                               bool from_scratch, dt_error_t *err);
int tx_insert_attempt (struct jobs *jobs, struct job *job, struct attempt *att,
                       dt_error_t *err);
void attempt_cancel (struct jobs *jobs, struct attempt *att);
/* qsort order of the rendezvous: node ranks follow it (node order, then name). */
int jobs_agent_cmp (const void *a, const void *b);
void attempt_succeed (struct jobs *jobs, struct attempt *att);
int attempt_launch (struct jobs *jobs, struct attempt *att);
bool attempt_poll (struct jobs *jobs, struct attempt *att, int64_t now);
void attempt_tick_ending (struct jobs *jobs, struct attempt *att, int64_t now);

/* regbatch.c: registrations recorded in batches.  mark: recorded in
 * memory only; write: their rows, inside the caller's transaction;
 * written: after its commit; forget: the attempt goes away. */
void regbatch_mark (struct attempt *att, struct agent *ag);
int regbatch_write (struct jobs *jobs, struct job *job, struct attempt *att,
                    dt_error_t *err);
void regbatch_written (struct attempt *att);
void regbatch_forget (struct attempt *att);

/* detect.c: failures: node loss, the launcher's word, the hang watchdog */
void attempt_launcher_failed (struct jobs *jobs, struct attempt *att,
                              const struct launcher_status *st, int64_t now);
void attempt_check_running (struct jobs *jobs, struct attempt *att, int64_t now);
int job_blame_node (struct jobs *jobs, struct job *job, struct attempt *att,
                    const char *node, const char *cause, const char *detail, int64_t now,
                    dt_error_t *err);

/* restart.c: the decision after a failure, backoff, the next attempt */
int64_t backoff_ms (const struct job *job);
int job_after_failure (struct jobs *jobs, struct job *job, struct attempt *att,
                       dt_error_t *err);
void job_restart (struct jobs *jobs, struct job *job);

/* checkpoint.c: two-phase commit, retention, scheduling, partial and bad checkpoints */
/* The job's checkpoint directory <checkpoint.dir>/<id>; -1 ENAMETOOLONG
 * (an attempt is never launched then, so the other callers may ignore it). */
int job_ckpt_dir (const struct job *job, char *buf, size_t len);
int64_t ckpt_lookahead (struct attempt *att);
void ckpt_remove_files (struct jobs *jobs, struct job *job, int64_t step);
int ckpt_commit_tx (struct jobs *jobs, struct job *job, struct attempt *att, int64_t step,
                    const char *sdir, const char *kind, const json_t *extra,
                    int64_t **deleted, int *ndeleted, dt_error_t *err);
void rm_dir_files (const struct job *job, const char *cdir, const char *name);
/* Whose rights the controller uses in the job's directories (userfs.h). */
void job_fs_id (const struct job *job, struct userfs_id *id);
void ckpt_schedule (struct jobs *jobs, struct attempt *att, int64_t min_step);
void ckpt_clean_partial (struct jobs *jobs, struct job *job);

/* jit.c: just-in-time checkpoints and their window */
void jit_window_open (struct attempt *att);
void jit_window_close (struct jobs *jobs, struct attempt *att, const char *why);
bool jit_survivors_running (struct attempt *att, int64_t now);
/* Why no running rank can write one although some run (NULL otherwise):
 * the window's reason when it ends for that. */
const char *jit_why_none (struct attempt *att, int64_t now);
bool jit_may_help (struct attempt *att, const char *cause);
/* The same, whoever still runs: the job would take one for this cause. */
bool jit_applies (struct attempt *att, const char *cause);
/* After a failure of a zero1 job (the spec's parallel.zero1) that would
 * otherwise wait for the survivors: none of them holds the lost ranks'
 * optimizer slices, so there is nothing to wait for. */
bool jit_zero1_lost (struct attempt *att, const char *cause);

/* progress.c: the attempt-wide pass, planned stops */
void attempt_stop (struct jobs *jobs, struct attempt *att, const char *cause,
                   const char *node, int rank, const char *detail);
int64_t progress_gap_ms (struct attempt *att);

/* What the attempt-wide pass needs of all the ranks, gathered in one
 * sweep over them (progress.c): an attempt of 64,000 ranks is 48 MB of
 * struct rank, a sweep costs about 2 ms however little it reads, and the
 * pass made five (progress, goodput, the fastest straggler median, the
 * communication figures), each request waiting behind all of them. */
struct rank_totals {
    /* the ranks seen */
    int64_t max_step, min_step; /* -1: none */
    int64_t samples;
    double comp, comm; /* sums over the ncomp ranks that report compute */
    int ncomp;
    /* the ranks seen with a step (goodput, report.c) */
    bool all_ranks;    /* every rank is among them */
    int64_t done_step; /* the step all of them finished; -1 none */
    int64_t batch;
    double step_ms; /* the slowest one's compute + communication; NAN none */
    /* per parallel dimension, summed over the ranks that report them
     * (ndims_seen of them also have a step) */
    double dims[9], dims_seen[9];
    int ndims, ndims_seen;
    /* the ranks with a step and finite compute and communication times
     * (commbound.c) */
    int cb_n;
    double cb_share, cb_cmin, cb_cmax, cb_step_ms;
    int64_t cb_min_step;
    /* the fastest rank's median compute time (straggler.c); NAN none */
    double fastest;
};

/* straggler.c: the straggler pass: scores, events, exclusion */
int straggler_window (struct job *job);
void straggler_pass (struct jobs *jobs, struct attempt *att, double fastest);

/* commbound.c: the communication-bound pass and its view */
void commbound_pass (struct jobs *jobs, struct attempt *att, const struct rank_totals *t);
void commbound_overlay (const struct job *job, json_t *o);
/* {"tp": {"bytes", "comm_ms", "exposed_ms"}, "pp": ..., "dp": ...} from a
 * rank's nine figures (struct rank's dims). */
json_t *commbound_dims_json (const double *dims);

/* flush.c: the bounded flush of live state */
bool jobs_flush_some (struct jobs *jobs, int budget);

/* integrity.c: silent errors (the interface is in jobs.h) */
void integ_att_free (struct attempt *att);
void integ_job_free (struct job *job);
/* numerics.c */
void numerics_job_free (struct job *job);
/* Read back what the store holds of a reloaded job's integrity state. */
int integ_job_load (struct jobs *jobs, struct job *job, dt_error_t *err);
/* Before a new attempt picks its checkpoint (inside its transaction): mark
 * bad every committed checkpoint a rollback condemned.  0 or -1. */
int integ_resume_guard (struct jobs *jobs, struct job *job, int attempt, dt_error_t *err);

/* reform.c: re-forming in place.  try: after a failure recorded (the
 * attempt ending, the job restarting): when eligible, end the attempt
 * failed and start its successor of the same processes; true when done
 * (the caller then does nothing else).  registered: inside the
 * rendezvous's transaction: the re-formed attempt's timing event. */
bool reform_try (struct jobs *jobs, struct attempt *att);
/* The steps both re-form paths share (reform.c): the successor of the
 * same processes, allocated; stored and starting; made current after the
 * transaction. */
struct attempt *reform_successor (struct jobs *jobs, struct job *job, struct attempt *old,
                                  const char *path, dt_error_t *err);
int reform_store (struct jobs *jobs, struct job *job, struct attempt *old,
                  struct attempt *att, dt_error_t *err);
void reform_adopt (struct jobs *jobs, struct job *job, struct attempt *old,
                   struct attempt *att, int64_t rendezvous_ms);
/* hotspare.c: after a node loss recorded, a hot spare takes the lost
 * node's place in a re-formed group (true: done, the new attempt is
 * current); order: at the rendezvous of that attempt, the agents in the
 * planned node-rank order (every survivor keeps its node rank). */
bool hot_spare_try (struct jobs *jobs, struct attempt *att);
void hot_spare_order (struct attempt *att);
int reform_registered (struct jobs *jobs, struct job *job, struct attempt *att,
                       dt_error_t *err);

/* reload.c: rebuilding live state at start-up */
int jobs_reload (struct jobs *jobs, dt_error_t *err);

/* jobs.c: create/destroy, user operations, the tick, views */
void job_destroy (struct job *job);

#endif
