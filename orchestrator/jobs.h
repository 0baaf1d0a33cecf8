/* jobs.h: the job manager: jobs and attempts in memory, their state
 * machines, restarts, checkpoint commits, and the supervision tick.  Its
 * code is in orchestrator/jobs/, one file per concern (internal.h lists
 * them).
 *
 * Live state (heartbeats, rank progress) is kept here in memory and
 * flushed to the store in one batched transaction about once per second;
 * every state transition is written at once, in one transaction with its
 * event, before anyone is answered.
 *
 * Who may touch the structs below outside orchestrator/jobs/, and why:
 * - agentapi.c, the agents' side of the same daemon, is the heartbeat
 *   ingest path: it writes the fields of struct rank that a heartbeat
 *   carries (seen, node, local_rank, pid, state, client, step, loss,
 *   samples, compute_ms, comm_ms, exit_code, signal, updated, dirty, busy,
 *   waiting, stopped), an agent's registration fields and last_hb_ms /
 *   dirty, appends to attempt.agents[] at registration, and keeps the
 *   attempt's key-value store (kv, kv_bytes).  Going through a call per
 *   field would cost the 80,000 rank-heartbeats a second it must take.
 * - api.c, provenance.c: read only (rows, agents[], nagents, stopping).
 * Everything else (the rows' states, the bookkeeping fields, the rings)
 * is changed only by orchestrator/jobs/, which owns the state machines.
 */
#ifndef DT_JOBS_H
#define DT_JOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include "common/errprintf.h"
#include "orchestrator/store.h"
#include "orchestrator/launcher.h"
#include "orchestrator/spec.h"

struct ctld;

/* One registered agent (= node) of an attempt. */
struct agent {
    char node[64];
    int order; /* node_order (Slurm node id) */
    char addr[64];
    int port;
    int relay_port; /* its listener for tree children; 0: none (an older agent) */
    int pid;
    int node_rank; /* -1: spare or not assigned yet */
    bool spare;
    bool standby_ready;    /* a spare's standby processes are ready (hotspare.c) */
    bool done;             /* reported "done" */
    bool dirty;            /* heartbeat time not flushed */
    bool reg_pending;      /* registration not yet in the database (regbatch.c) */
    int64_t register_time; /* epoch ms */
    int64_t last_hb_ms;    /* epoch ms of the last heartbeat/registration */
    /* A neighbour in the fan-in tree (its relay, a child) said in its
     * heartbeat at unheard_at_ms (epoch ms) that it had not heard from
     * this node for unheard_for_ms; 0: never.  unheard_how: the evidence
     * (enum unheard_how). */
    int64_t unheard_at_ms, unheard_for_ms;
    int unheard_how;
    json_t *hostinfo;
};

/* A neighbour's evidence that a node is gone (struct agent's
 * unheard_how), weakest first: its relay did not hear from it for over
 * 5/4 of an interval; its child's connection to it, its relay, failed
 * (refused, or no connection or answer in time); its connection to its
 * relay closed (its process, or its node, died). */
enum unheard_how { UNHEARD_LATE, UNHEARD_RELAY_FAILED, UNHEARD_CLOSED };

#define STRAGGLER_RING 64

/* Latest state of one rank.  The fields that the attempt-wide passes read
 * for every rank (progress, stragglers, communication, the watchdog) come
 * first, together in the struct's first three cache lines: an attempt of
 * 64,000 ranks is 48 MB of these, and with the fields spread over the
 * struct each pass touched a line per field (a pass of 10-16 ms, which
 * every request waited behind). */
struct rank {
    bool seen;
    bool client;
    bool has_dims;
    bool flagged;
    bool median_stale; /* ring changed since 'median' */
    /* controller-side hang watchdog */
    bool busy;    /* saving/loading a checkpoint (libdtclient) */
    bool waiting; /* in a collective: blocked on its peers */
    bool stopped; /* its process is stopped (SIGSTOP, a debugger) */
    bool dirty;
    bool reform; /* declared it can re-form in place (event "caps") */
    int nring, ring_pos;
    char state[16];
    int64_t step;
    double loss;
    int64_t samples;
    double compute_ms, comm_ms;
    double median;         /* of ring[0..nring), cached; NAN none */
    double score;          /* straggler score, NAN unknown */
    int64_t progress_ms;   /* epoch ms of the last step change; 0 not yet seen */
    int64_t progress_step; /* the step seen then */
    int64_t ring_step;
    /* Per parallel dimension (tp, pp, dp) of the latest step: bytes,
     * comm_ms, exposed_ms (has_dims: the trainer reports them). */
    double dims[9];
    /* read when a rank's own report comes, or for the job's view */
    char node[64];
    int local_rank;
    int pid;
    int exit_code, signal;
    int64_t updated;
    /* its "perf" report (commbound.c): model FLOPs of its share of a step,
     * the peak FLOP/s it is measured against; 0 none */
    double model_flops, peak_flops;
    /* compute times of recent steps, for the straggler score */
    double ring[STRAGGLER_RING];
};

struct kv {
    struct kv *next;  /* every entry of the attempt */
    struct kv *hnext; /* its slot of the index (agentkv.c) */
    char *key;
    char *value; /* base64 text as received */
};

struct job;

/* Just-in-time checkpoint shards reported by one surviving rank: it
 * writes the shards of its data-parallel group (every rank's in plain dp)
 * of one step into a directory of its own. */
struct jit_set {
    int64_t step; /* 0: none yet */
    int nhave;
    char node[64];
    struct jit_shard {
        bool got;
        int64_t bytes;
        char crc32c[16];
    } * shards; /* [world_size / (tp pp)], by dp index */
};

struct attempt {
    struct job *job;
    struct store_attempt_row row;
    struct agent *agents;
    int nagents, cap;
    int reg_pending;    /* agents with reg_pending set */
    struct rank *ranks; /* [world_size] */
    struct kv *kv;
    size_t kv_bytes; /* keys, values and each entry's overhead (agentkv.c) */
    /* agentkv.c: the entries hashed by key (kv_cap slots, a power of two) */
    struct kv **kv_index;
    size_t kv_cap, kv_n;
    int64_t deadline_ms; /* rendezvous deadline (starting) */
    int64_t ending_since_ms;
    bool cancel_sent;
    enum attempt_state end_state; /* where ending leads */
    int64_t next_poll_ms;
    int64_t ckpt_cmd_step; /* the outstanding checkpoint command, 0 none */
    int64_t max_step;
    int64_t tp_step, tp_time_ms; /* throughput: the slowest rank's step, then */
    /* recent step times, for the automatic hang timeout */
#define STEPTIME_RING 256
    double steptime[STEPTIME_RING]; /* recent step times (compute + comm), ms */
    int nsteptime, steptime_pos;
    bool committed_any;    /* this attempt committed a checkpoint */
    bool first_step_noted; /* event "first_step" written (past resume_step) */
    /* A planned end (time-limit warning, preemption, straggler exclusion):
     * the ranks checkpoint at stop_step and exit; the attempt then ends
     * with stop_cause instead of succeeding. */
    char stop_cause[32];
    char stop_node[64];
    int stop_rank;
    char stop_detail[192];
    int64_t stop_step; /* 0: at the ranks' next step */
    bool stopping;
    /* Just-in-time checkpoint.  After a failure the launcher's
     * cancel waits (the JIT window) while surviving ranks may still
     * report a just-in-time shard set; the first complete set of a step
     * newer than the last committed checkpoint is committed (kind jit). */
    bool jit_open;        /* the window is open: ending, cancel deferred */
    int64_t jit_until_ms; /* the window closes at the latest then */
    int64_t jit_opened_ms;
    int64_t jit_step;         /* the JIT checkpoint committed, 0 none */
    struct jit_set *jit;      /* [world_size], per reporting rank; lazily */
    int jit_nsets;            /* ranks with a set in jit[] (at most jit_sets_max) */
    bool jit_refused_logged;  /* a rank past that was logged */
    int64_t survivor_exit_ms; /* a rank exited after writing a JIT set (a victim) */
    char resume_source[16];   /* "jit", "committed" or "none" */
    /* Heartbeat ingest: a heartbeat updates only its node's
     * ranks and marks the attempt; the attempt-wide pass (jobs_progress)
     * runs at most every progress_gap_ms, from the heartbeat or the tick. */
    bool progress_dirty;
    int64_t progress_last_ms; /* monotonic ms of the last attempt-wide pass */
    int64_t watchdog_last_ms; /* monotonic ms of the last hang watchdog run */
    int64_t loss_scan_ms;     /* monotonic ms of the last node-loss scan */
    /* node name -> index into agents[] (open addressing, index + 1; 0
     * empty), rebuilt when agents[] changed (count or order). */
    int *agent_hash;
    int agent_hash_cap, agent_hash_n;
    /* The communication-bound warning (commbound.c): the latest figures
     * (cb_valid once known); steps + 1, 0 none: the last step sampled, the
     * first of the current run above the threshold. */
    bool cb_valid, cb_fired;
    double cb_share, cb_spread;
    double cb_mfu; /* model FLOP utilisation of the latest step, NAN unknown */
    int64_t cb_seen, cb_from;
    /* Kept by the attempt-wide pass, so that the job view need not visit
     * every rank: the mean of the ranks' per-dimension figures over the
     * cb_dims_n ranks that report them, and how many ranks are flagged
     * stragglers. */
    double cb_dims[9];
    int cb_dims_n;
    int nflagged;
    /* jobs_flush writes a bounded number of rows at a time, from here */
    int flush_rank_pos, flush_agent_pos;
    int flush_rank_scan, flush_agent_scan; /* scanned by the open flush */
    struct integ_att *integ; /* integrity reports being collected (integrity.c) */
    /* numerics.c: the attempt's identity stored; it differs from the
     * job's pinned one (the event was recorded) */
    struct {
        bool stored, changed;
    } numerics;
    /* re-formed in place (reform.c): when decided, when the failure it
     * replaces was first seen (epoch ms) */
    int64_t reform_decided_ms, reform_fail_ms;
    /* a hot spare's re-formed attempt (hotspare.c): its rank nodes by node
     * rank, comma-joined (new; NULL otherwise) */
    char *hs_plan;
    /* re-formed in place or with a hot spare, reloaded by a restarted
     * controller before its rendezvous completed (reload.c): it is failed
     * at the first tick, and never completes its rendezvous */
    bool reform_orphaned;
    /* a rank reported losing a peer, epoch ms (0 none): a survivor's exit
     * after its just-in-time set (survivor_exit_ms), or a rank that waits
     * to re-form (event "caps" with "waiting") */
    int64_t peer_loss_ms;
};

struct job {
    struct job *next;
    struct store_job_row row;
    struct job_spec spec;  /* row.spec decoded (borrows from it) */
    struct attempt *att;   /* latest attempt, or NULL */
    int64_t restart_at_ms; /* restarting: when to start the next attempt */
    int64_t metrics_rows;
    int64_t last_metric_step;
    bool dirty; /* row's live fields not flushed */
    /* restart policy */
    int no_progress_streak;  /* consecutive failed attempts without progress */
    int next_nodes;          /* size of the next attempt (0: the spec's nodes) */
    int next_tp, next_pp;    /* its layout (0: the spec's) */
    char reuse_handle[64];   /* allocation kept for an in-allocation restart */
    bool restart_in_place;   /* the next attempt runs on prev_nodes, same allocation */
    char prev_nodes[256];    /* the last attempt's rank nodes, comma-joined */
    int quick_restarts;      /* restarts without backoff since a healthy run */
    int64_t restart_wait_ms; /* the backoff before the next attempt */
    int64_t agent_events;    /* events its agents added (MaxEventsPerJob), since start */
    struct integ_job *integ; /* integrity: a fault awaiting its re-run, skipped steps */
    /* numerics.c: the job's pinned numerics identity (its first attempt's;
     * owned, NULL none yet), read from the store once */
    struct {
        json_t *pin;
        bool loaded;
    } numerics;
    /* re-formed in place (reform.c): the token hash of the attempt it
     * replaced, answered only with the re-form command, and the attempt */
    char reform_old_sha[65];
    int reform_attempt;
    /* the attempt it replaced, kept until the next re-form: the handler
     * whose event made it re-form still holds it */
    struct attempt *reform_prev;
};

struct jobs;

/* Create the manager and reload every live job from the store. */
struct jobs *jobs_create (struct ctld *ctx, dt_error_t *err);
void jobs_destroy (struct jobs *jobs);

/* Periodic work: launcher polling, timeouts, restarts.  Call at least
 * every 200 ms, each time followed by jobs_flush_tick.  Returns in how
 * many ms it wants to run again (sooner while an attempt ends or a
 * restart is due; INT64_MAX: nothing urgent). */
int64_t jobs_tick (struct jobs *jobs);
/* The batched flush of live state, when due (a bounded number of rows in
 * one transaction).  A phase of its own, so that the event loop can serve
 * the users' requests between it and jobs_tick's passes: a request then
 * waits behind one of them, not both. */
void jobs_flush_tick (struct jobs *jobs);
/* Flush live state now (shutdown). */
void jobs_flush (struct jobs *jobs);

/* The user operations answer like HTTP: 0 on success, else -1 with
 * *status (400, 403, 404, 409, 500) and err. */
int jobs_submit (struct jobs *jobs, const json_t *spec, uid_t uid, gid_t gid, int64_t *id,
                 int *status, dt_error_t *err);
int jobs_cancel (struct jobs *jobs, int64_t id, uid_t uid, const char *reason,
                 int *status, dt_error_t *err);
int jobs_resubmit (struct jobs *jobs, int64_t id, uid_t uid, const json_t *exclude,
                   bool from_scratch, int *status, dt_error_t *err);
int jobs_checkpoint (struct jobs *jobs, int64_t id, uid_t uid, int64_t *step, int *status,
                     dt_error_t *err);

/* The live job (borrowed), or NULL when it is not live. */
struct job *jobs_find (struct jobs *jobs, int64_t id);
/* The live attempt holding 'token' (borrowed), or NULL. */
/* Prometheus gauges of the running jobs' communication figures
 * (commbound.c): new text, caller frees; NULL out of memory. */
char *jobs_comm_metrics_text (struct jobs *jobs);
struct attempt *jobs_attempt_by_token (struct jobs *jobs, const char *token);
/* Live (not terminal) jobs of 'uid', of everyone for (uid_t)-1: the
 * MaxJobsPerUser and MaxJobCount quotas. */
int jobs_live_count (struct jobs *jobs, uid_t uid);
/* Bytes held in the key-value stores of every live attempt (MaxKvBytes). */
size_t jobs_kv_bytes (struct jobs *jobs);

/* Add live fields (step, loss, throughput, stragglers) to a job's JSON. */
void jobs_overlay (struct jobs *jobs, json_t *job);
/* Live ranks of the job's latest attempt as JSON (new), or NULL if not live. */
json_t *jobs_ranks_json (struct jobs *jobs, int64_t id);

/* --- used by agentapi.c ---------------------------------------------- */

/* Transitions driven by agents.  Each is one transaction with its event,
 * except a first registration that does not complete the rendezvous: it
 * is recorded by the next jobs_flush_registrations, with the others of the
 * same pass, in one transaction. */
int jobs_agent_registered (struct jobs *jobs, struct attempt *att, struct agent *ag,
                           bool first, dt_error_t *err);
/* Write the registrations recorded since the last call (one transaction
 * per attempt); call it after each pass of the event loop.  Cheap when
 * there are none.  A failure is logged and retried at the next call. */
void jobs_flush_registrations (struct jobs *jobs);
/* When an agent told to wait should ask again (ms): 50 ms, so that a
 * small attempt starts as soon as its last agent registers, and longer
 * when many agents wait (1 s per 4,000, up to 10 s), so that their
 * questions do not take the controller's time from the registrations
 * still to come. */
int jobs_register_retry_ms (struct jobs *jobs);
/* A failure of the attempt (recorded once; later ones are ignored). */
void jobs_attempt_fail (struct jobs *jobs, struct attempt *att, const char *cause,
                        const char *node, int rank, const char *detail, json_t *evidence);
/* An agent reported done; may complete the attempt and the job. */
int jobs_agent_done (struct jobs *jobs, struct attempt *att, struct agent *ag,
                     int exit_code, dt_error_t *err);
/* A rank reported a shard; may commit the checkpoint. */
int jobs_shard (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                int64_t step, const char *path, int64_t bytes, const char *crc32c,
                dt_error_t *err);
/* A surviving rank reported shard 'shard_rank' of its just-in-time
 * checkpoint of 'step' (written under <checkpoint dir>/jit-<step>-r<rank>/);
 * may commit the set as a checkpoint of kind jit. */
int jobs_shard_jit (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                    int shard_rank, int64_t step, const char *path, int64_t bytes,
                    const char *crc32c, dt_error_t *err);
/* True while an ending attempt waits for just-in-time shards: its agents
 * are still heard (heartbeats, events) instead of being told 410. */
bool jobs_jit_window (const struct attempt *att);
/* Did 'rank' report a just-in-time shard in this attempt? */
bool jobs_jit_reporter (const struct attempt *att, int rank);
/* A rank that wrote a just-in-time checkpoint exited: it is a survivor of
 * a peer's failure, not its cause; the attempt waits for the cause (a
 * peer's exit, a node timeout) a little before failing without blame. */
void jobs_survivor_exit (struct jobs *jobs, struct attempt *att, const char *node,
                         int rank, int exit_code);
/* A rank exited after reporting 'step' last (the agent read its page):
 * the step bookkeeping (max step, goodput) gets the exact figure. */
void jobs_rank_last_step (struct jobs *jobs, struct attempt *att, int rank, int64_t step);

/* Record an event with no state change (signal, shard_failed, result, ...). */
int jobs_note (struct jobs *jobs, struct attempt *att, const char *kind, const char *node,
               int rank, const char *detail, const json_t *data, dt_error_t *err);
/* A rank reported what it computes with (numerics.c): the first report
 * of the job is pinned; a later one that differs is an event
 * numerics_changed, and with the spec's numerics "strict" a failure of the
 * attempt (cause numerics_changed) that excludes the node. */
int jobs_numerics (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                   const json_t *numerics, dt_error_t *err);
/* A numerics identity as a trainer may report it: at most 64 members,
 * each a short string, a number, a boolean or null, plus "pin_env", an
 * object of at most 8 variables named OPENBLAS_*, OMP_*, MKL_*, CUBLAS_*
 * or NCCL_* with short plain values.  0, or -1 with err ("PATH.numerics.
 * MEMBER: ..."). */
int jobs_numerics_check (const json_t *numerics, const char *path, dt_error_t *err);
/* The environment variables that reproduce the job's pinned numerics
 * ("pin_env" of its first attempt's report), to set for a later attempt's
 * ranks where the spec's env does not name them: added to env. */
void jobs_numerics_env (struct jobs *jobs, struct job *job, json_t *env);
/* The trainer's final result (kept with the job). */
int jobs_result (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                 const json_t *result, dt_error_t *err);
/* The registered agent of 'node' (hash lookup), NULL if none. */
struct agent *jobs_agent_find (struct attempt *att, const char *node);
/* A heartbeat updated rank 'rank' (att->ranks[rank]): its own step
 * bookkeeping (hang clock, step-time and straggler samples), O(1). */
void jobs_rank_heartbeat (struct jobs *jobs, struct attempt *att, int rank, int64_t now);
/* After a heartbeat of a running attempt: mark it for the attempt-wide
 * pass (progress, stragglers, throughput, metrics, checkpoint commands),
 * run here when the last one is older than the attempt's gap (always for
 * small attempts), else from the tick. */
void jobs_heartbeat_done (struct jobs *jobs, struct attempt *att);
/* The attempt-wide pass itself: O(world_size). */
void jobs_progress (struct jobs *jobs, struct attempt *att);
/* Commands for the agents of 'att': the JSON array, as text, into buf (a
 * heartbeat answer is built without a JSON tree, for speed; 64 bytes hold
 * any).  Returns its length (as snprintf: >= len means truncated). */
size_t jobs_commands_text (struct jobs *jobs, struct attempt *att, char *buf, size_t len);

/* The hang timeout the agents get (auto -> a backstop well above the
 * controller's own automatic timeout, which is the primary detector). */
int64_t jobs_hang_timeout_ms (const struct job *job);

/* An agent relayed a signal (SIGUSR1: Slurm's time-limit warning; SIGTERM:
 * preemption): the ranks checkpoint and stop; the attempt then ends with
 * cause time_limit / preempted and the next attempt resumes from that
 * final checkpoint. */
void jobs_signal (struct jobs *jobs, struct attempt *att, const char *node,
                  const char *detail);
/* A rank exited: when it is a dttrain-style corrupt-shard exit (code 3,
 * stderr naming a shard of the checkpoint this attempt resumed from), mark
 * that checkpoint bad so the next attempt resumes from the previous one.
 * Call before jobs_attempt_fail. */
void jobs_rank_exit_check (struct jobs *jobs, struct attempt *att, const char *node,
                           int rank, int exit_code, const char *stderr_tail);
/* POST /v1/nodes/{name}/clear: admins only (403), unknown node 404. */
int jobs_node_clear (struct jobs *jobs, const char *node, uid_t uid, int *status,
                     dt_error_t *err);

/* An allocation that outlives its attempts (launcher.h, "reuse": the
 * Slurm launcher's batch script, through allocapi.c) asks what to run
 * next.  'alloc': its handle; 'cur': the attempt it ran last;
 * 'step_running': that attempt's processes still end. */
enum jobs_alloc_action {
    JOBS_ALLOC_WAIT, /* keep going: nothing decided yet */
    JOBS_ALLOC_RUN,  /* start 'attempt' as a new step */
    JOBS_ALLOC_EXIT, /* the job is over or goes on elsewhere: end */
};
struct jobs_alloc_next {
    enum jobs_alloc_action action;
    const char *why;   /* EXIT: why (static text) */
    int attempt;       /* RUN: the attempt, its token, its nodes */
    const char *token; /* borrowed from the attempt */
    int nodes;
    const json_t *exclude; /* RUN: node names not to use (borrowed) */
    const char *nodelist;  /* RUN: in place: the nodes to run on, comma-joined
                            * (borrowed), or NULL: any but exclude */
};
/* The job manager's answer; a RUN makes the attempt run without spares (a
 * reused allocation runs exactly num_nodes agents) and notes the step. */
void jobs_alloc_next (struct jobs *jobs, int64_t job_id, const char *alloc, int64_t cur,
                      bool step_running, struct jobs_alloc_next *out);

/* A rank's integrity report (event "integrity") of 'step' (borrowed):
 * collected until every rank reported the step, then judged
 * (jobs/integrity.c).  0, or -1 with err (errno EINVAL: a bad report). */
int jobs_integrity (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                    int64_t step, const json_t *report, dt_error_t *err);
/* A rank's FLOP report (event "perf"): the model FLOPs of its share of one
 * step (> 0), the peak FLOP/s it is measured against (0: unknown) and
 * where that peak came from (may be NULL).  Summed over the ranks into the
 * attempt's row, written once every rank has reported (commbound.c).  0,
 * or -1 with err (the row could not be written: nothing changed). */
int jobs_perf (struct jobs *jobs, struct attempt *att, int rank, double model_flops,
               double peak_flops, const char *peak_source, dt_error_t *err);
/* Add the job's integrity keys and the steps to skip to an agent's ready
 * answer 'ans'.  0 or -1 (out of memory). */
int jobs_integrity_ready (struct attempt *att, json_t *ans);

/* Re-forming in place (jobs/reform.c): the attempt that replaced the one
 * holding 'token' (borrowed), while it starts or runs, else NULL; its
 * command for the agents as a JSON array into buf (as snprintf). */
struct attempt *jobs_reform_successor (struct jobs *jobs, const char *token);
/* A rank's capabilities (event "caps" from agent ag, checked; borrowed,
 * jobs/hotspare.c): "reform": it can re-form; "waiting": it lost a peer
 * and waits to re-form now; "standby": not a rank but ag's (a spare's)
 * standby processes, all ready (a hot spare). */
void jobs_caps (struct attempt *att, struct agent *ag, int rank, const json_t *ev);
size_t jobs_reform_command_text (const struct attempt *att, char *buf, size_t len);

/* Counters for /metrics. */
struct jobs_stats {
    uint64_t integ_events[3]; /* replica_divergence, nonfinite, loss_spike */
    uint64_t integ_rollbacks;
    uint64_t restarts;
    uint64_t checkpoints_committed;
    int live_jobs;
    int live_attempts;
};
void jobs_stats (struct jobs *jobs, struct jobs_stats *st);

#endif
