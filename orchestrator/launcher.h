/* launcher.h: how dtctld starts, watches and ends the agents of an attempt.
 *
 * A launcher turns one attempt into running dtagent processes, one per node
 * (plus one per spare node), and reports on them.  Three implementations
 * sit behind this one ops table:
 *   - "local"  (launcher_local.c): forks the agents on this machine, with
 *              node names local1, local2, ... skipping the names in the
 *              request's exclude list; dtctld.conf LocalNodes=N (default 0:
 *              unlimited) sizes this pretend cluster to local1..localN, so
 *              tests can run out of healthy nodes; for development and tests.
 *   - "slurm"  (launcher_slurm.c): one Slurm batch job per allocation whose
 *              script runs `srun --ntasks-per-node=1 dtagent ...`.
 *   - "external" (launcher_external.c): starts nothing; the agents are
 *              started by someone else (bench/loadgen).
 *
 * The job manager knows launchers only through this file: what a
 * scheduler did (a node failure, a time limit) reaches it as
 * launcher_status.end_kind, never as a launcher's own words.
 *
 * Every agent is started the same way by every launcher:
 *     dtagent --controller URL --node NAME --node-order K [--state-dir DIR]
 * with the environment
 *     DT_TOKEN=<attempt token> DT_CONTROLLER=URL DT_JOB=<job id> DT_ATTEMPT=<n>
 * plus the job's own 'env'.  Under Slurm, NAME is $SLURMD_NODENAME and K is
 * $SLURM_NODEID.  The agent learns everything else (its rank, the world, the
 * command to run) from POST /v1/agent/register, so a launcher never needs to
 * know the trainer's command line.
 *
 * The controller is single-threaded: no call here may block for long (a
 * fork, an sbatch RPC, a non-blocking waitpid are fine; waiting for a job
 * to start is not — that is what poll is for).
 *
 * A launcher identifies what it started with a "handle": a short string it
 * chooses (Slurm: the job id, e.g. "1234"; local: "pgid:<n>"), which the
 * controller stores with the attempt in SQLite.  After a controller restart,
 * poll and cancel are called with handles from a previous run of the
 * daemon, so a handle must be meaningful on its own.
 *
 * Error convention: 0 / -1 with errno set and err->text saying why.
 */
#ifndef DT_LAUNCHER_H
#define DT_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>
#include "common/errprintf.h"
#include "common/conf.h"

/* Size of buffers holding a launcher handle (with its NUL). */
#define LAUNCHER_HANDLE_MAX 64

/* What a launcher is created with (all strings borrowed for the duration of
 * the create call; a launcher copies what it keeps). */
struct launcher_conf {
    const char *controller_url; /* "http://10.0.0.1:6830": what agents dial */
    const char *dtagent_path;   /* absolute path of the dtagent binary */
    const char *state_dir;      /* dtctld's StateDir: launchers may keep files
                                 * (batch scripts, local agents' dirs) under it */
    const dt_conf_t *conf;      /* the whole dtctld.conf, for launcher-specific
                                 * keys (e.g. SlurmAccount); never NULL */
};

/* One attempt to start.  All pointers are borrowed for the duration of the
 * submit call. */
struct launcher_req {
    int64_t job_id;
    int attempt;          /* 1, 2, ... */
    const char *job_name; /* the spec's name (Slurm job name "dt-<name>") */
    const char *token;    /* 64 hex chars; passed as DT_TOKEN only */
    uid_t uid;            /* owner of the job: agents run as this user */
    gid_t gid;
    int nodes;       /* nodes that run ranks */
    int spare_nodes; /* extra idle nodes in the allocation */
    int ranks_per_node;
    const char *partition;      /* NULL: the cluster's default */
    int64_t time_limit_s;       /* 0: no limit (the partition's) */
    const char *const *exclude; /* NULL-terminated node names never to use; may be NULL */
    const char *workdir;        /* cwd of the agents (and trainers) */
    const char *output;         /* file for the agents' stdout+stderr; the
                                 * launcher may expand "%n" to the node name;
                                 * opened as the job's user, never as root */
    const char *user_dir;       /* the job user's own directory (owner uid,
                                 * mode 0700; userdir.h): where processes
                                 * acting as the user may keep files (the
                                 * output above is there); Slurm's work_dir
                                 * when the job names no workdir */
    const char *const *env;     /* NULL-terminated "K=V" from the job spec; may be NULL */
    /* In-allocation restart: the handle of the previous attempt
     * whose allocation should run this attempt as a new step, or NULL for a
     * new allocation.  A launcher that cannot reuse it (allocation gone, too
     * few healthy nodes, feature not supported) starts a new allocation;
     * the handle it returns tells which happened (compare with reuse).
     *
     * The controller sets reuse only for a job with spare_nodes > 0 or one
     * restarting in place (a rank ended on a trusted node; restartpolicy.h),
     * after it ended the previous attempt with LAUNCHER_CANCEL_KEEP_ALLOC
     * (or poll reported it ENDED before any cancel: every rank exited), and
     * only once poll reported that previous attempt ENDED.  Contract for
     * the handles (the controller polls each attempt by its own handle):
     *   - poll (reuse) must report ENDED once the previous attempt's
     *     processes are gone even though the allocation lives on;
     *   - a reusing submit returns a handle different from reuse
     *     ("<alloc>:<attempt>", see launcher_same_alloc below) that the
     *     controller polls and cancels;
     *   - the exclude list names the failed nodes: a reusing submit must
     *     not place ranks on them (the spares take their places);
     *   - a launcher that does not reuse must end the kept allocation
     *     itself (cancel (reuse, 0)) so that nothing leaks.
     * Slurm launcher (launcher_slurm.c, allocapi.c): the handle of a reusing
     * attempt is "<jobid>:<attempt>" (launcher_same_alloc below); it reuses
     * when the allocation still has 'nodes' live, non-excluded nodes and its
     * batch host lives.  A reused allocation runs exactly 'nodes' agents --
     * its remaining spares stay idle without one -- so allocapi.c sets the
     * attempt's spare_nodes to 0 when it hands the step to the batch script,
     * before any agent of it can register. */
    const char *reuse;
};

enum launcher_state {
    LAUNCHER_PENDING = 0, /* queued, no process started yet */
    LAUNCHER_RUNNING = 1, /* agents started (some may have exited) */
    LAUNCHER_ENDED = 2,   /* nothing of the attempt is running any more */
};

/* What ended an attempt, as far as the launcher's scheduler says. */
enum launcher_end_kind {
    LAUNCHER_END_OTHER = 0,     /* the processes ended (or were cancelled) */
    LAUNCHER_END_NODE_FAIL = 1, /* a node of the allocation failed; which one
                                 * the scheduler does not say (Slurm NODE_FAIL) */
    LAUNCHER_END_LIMIT = 2,     /* the scheduler's time limit or a preemption */
};

/* What poll reports.  Strings are copied in (fixed size, NUL-terminated). */
struct launcher_status {
    enum launcher_state state;
    /* Only when ENDED: why, in the controller's cause words:
     *   "completed"       every agent exited 0
     *   "failed"          an agent exited non-zero / the batch job failed
     *   "slurm_node_fail" Slurm NODE_FAIL
     *   "time_limit"      Slurm TIMEOUT
     *   "preempted"       Slurm PREEMPTED
     *   "cancelled"       cancelled (by us or by an admin with scancel)
     *   "launch_failed"   could not start at all (e.g. sbatch rejected it)
     *   "lost"            the launcher no longer knows the handle */
    char cause[32];
    int exit_code;    /* when ENDED; -1 if unknown */
    char detail[160]; /* human text, e.g. "batch job 17 state NODE_FAIL" */
    /* The scheduler's numeric id of the allocation (Slurm: the job id),
     * recorded with the attempt (the API calls it slurm_job_id); 0 none. */
    int64_t sched_id;
    char nodelist[256];  /* "node[1-3]" or "local1,local2"; "" if unknown */
    char batch_host[64]; /* the node running the batch script; "" if none */
    /* When ENDED, the launcher's own time of the end where it knows one
     * (Slurm: the job's EndTime, e.g. when slurmctld set a node DOWN for
     * NODE_FAIL), epoch ms; 0 unknown.  The controller records a failure
     * once, with the earliest of its own detection and this time. */
    int64_t end_time_ms;
    /* When ENDED: whether the scheduler itself ended the attempt, which the
     * controller may have seen as a failure later (see enum). */
    enum launcher_end_kind end_kind;
};

/* Flags of cancel. */
enum launcher_cancel_flags {
    /* Stop the attempt's processes (the current srun step) but keep the
     * allocation for an in-allocation restart.  A launcher that
     * cannot keep it ends everything.  Slurm: poll reports the attempt
     * ENDED at once (cause "cancelled"); the agents of its step stop their
     * trainers on their own (410); the step itself is ended by the next
     * submit with reuse = this handle, after the failed nodes have left the
     * allocation (killing a step that spans a dead node first would wedge
     * the allocation), and Slurm starts the next step only once the old
     * one has released its nodes.  Without such a submit the allocation
     * ends when its batch script learns that the job is over, or with
     * cancel without this flag. */
    LAUNCHER_CANCEL_KEEP_ALLOC = 1,
};

struct launcher_ops {
    const char *name; /* "local", "slurm" */

    /* New launcher context, or NULL with err. */
    void *(*create) (const struct launcher_conf *conf, dt_error_t *err);
    /* Free the context; does NOT cancel what it started (the controller
     * keeps supervising running attempts across restarts). */
    void (*destroy) (void *ctx);

    /* Start the attempt.  On success writes the handle into
     * handle[LAUNCHER_HANDLE_MAX] and returns 0.  -1 with err when the
     * attempt could not even be queued (the controller then fails the
     * attempt with cause "launch_failed"). */
    int (*submit) (void *ctx, const struct launcher_req *req,
                   char handle[LAUNCHER_HANDLE_MAX], dt_error_t *err);

    /* Report the state of what 'handle' started.  Cheap; called about once
     * per second per live attempt.  -1 only on a transient error (try again
     * later); a handle the launcher cannot find is ENDED with cause "lost". */
    int (*poll) (void *ctx, const char *handle, struct launcher_status *st,
                 dt_error_t *err);

    /* End what 'handle' started: SIGTERM, then SIGKILL after a grace period
     * handled by the launcher (Slurm: scancel / slurm_kill_job).  Returns
     * without waiting; poll reports ENDED once it is gone.  Idempotent;
     * cancelling an ended or unknown handle is 0. */
    int (*cancel) (void *ctx, const char *handle, int flags, dt_error_t *err);

    /* Optional (NULL: unknown, assume enough).  How many healthy nodes a
     * new attempt could get in 'partition' (NULL: default) when the nodes
     * in 'exclude' (NULL-terminated, may be NULL) are not used: *nodes >= 0.
     * The controller uses it to restart on fewer nodes, down to the job's
     * restart.min_nodes, when the cluster lacks healthy nodes.
     * Cheap; -1 on a transient error (the controller then assumes enough). */
    int (*capacity) (void *ctx, const char *partition, const char *const *exclude,
                     int *nodes, dt_error_t *err);

    /* Optional (NULL: accept).  Called at submission, before the job is
     * stored: -1 with errno EINVAL and the launcher's reason when the job
     * can never run (e.g. more nodes than the partition has), so that it is
     * refused with 400 and nothing changes.  Any other failure (the
     * scheduler unreachable) is not a refusal: the job is accepted. */
    int (*check) (void *ctx, const char *partition, int nodes, dt_error_t *err);

    /* Optional (NULL: unknown).  Whether 'node' is a node of the attempt
     * 'handle' started: 1 yes, 0 no, -1 cannot tell now.  'nodelist' is
     * what poll last reported for it ("" if nothing yet).  An agent that
     * registers with another name is refused: its name would be blamed
     * for failures and end up in exclude lists. */
    int (*node_member) (void *ctx, const char *handle, const char *nodelist,
                        const char *node);
    /* node_member's -1 means the launcher's authority cannot be asked now
     * (slurmctld backing off): the registration is answered 503 and the
     * agent asks again, rather than taken on trust.  False (the local
     * launcher): -1 means there is no list to check against. */
    bool node_member_strict;

    /* Optional (NULL: nothing to do).  Node 'node' of the attempt 'handle'
     * is dead and a hot spare replaces it in the running processes: take
     * it out of the allocation so that the running step lives on without
     * it (Slurm: the allocation shrunk to its other nodes; Slurm kills a
     * step on a node it sets DOWN otherwise).  -1 with err when that is
     * not possible (the ordinary restart then follows). */
    int (*drop_node) (void *ctx, const char *handle, const char *node, dt_error_t *err);
};

extern const struct launcher_ops launcher_local_ops;
extern const struct launcher_ops launcher_slurm_ops;
/* "external" (launcher_external.c): starts nothing; the agents are started
 * by someone else (bench/loadgen).  Submit records, poll says running. */
extern const struct launcher_ops launcher_external_ops;

/* Handles of attempts that share an allocation (in-allocation restart)
 * are "<alloc>" for the attempt that created it and
 * "<alloc>:<attempt>" for later ones.  True when 'a' and 'b' name the
 * same allocation (NULL or "": false). */
static inline bool launcher_same_alloc (const char *a, const char *b)
{
    size_t la, lb;

    if (!a || !b || !*a || !*b)
        return false;
    la = strcspn (a, ":");
    lb = strcspn (b, ":");
    return la == lb && !strncmp (a, b, la);
}

/* The ops of launcher 'name' ("local", "slurm"), or NULL with errno ENOENT. */
const struct launcher_ops *launcher_lookup (const char *name);

#endif
