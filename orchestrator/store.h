/* store.h: the controller's SQLite store (schemas/001-initial.sql).
 *
 * The only place with SQL in dtctld: store.c and the store_*.c files it
 * names, every statement prepared once when the store opens (store_sql.c).
 * Writes are composed by the job
 * manager inside store_begin/store_commit, so that one state transition is
 * one transaction together with its events row.  The database runs with
 * synchronous=FULL (common/db.c): a commit that returned survives kill -9,
 * so the controller answers a client only after store_commit.
 *
 * Rows: the job manager keeps a store_job_row / store_attempt_row per live
 * job and attempt and writes them back whole with *_update.  Conventions
 * for "absent" (written as SQL NULL): a time of 0, an empty string, a rank
 * or step below 0, a NULL json_t.
 */
#ifndef DT_STORE_H
#define DT_STORE_H

#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>
#include "common/errprintf.h"
#include "common/db.h"
#include "orchestrator/fsm.h"

typedef struct store store_t;

struct store_job_row {
    int64_t id;
    char name[65];
    uid_t uid;
    gid_t gid;
    char user[64];
    enum job_state state;
    char reason[32];
    json_t *spec; /* owned by the row */
    int64_t submit_time, start_time, end_time;
    int attempts; /* number of the latest attempt */
    int restarts;
    json_t *exclude;   /* array of node names; owned */
    int64_t last_step; /* -1: none */
    double last_loss;  /* NAN: none */
    double throughput; /* NAN: none */
    int64_t metrics_stride;
    json_t *failure; /* owned, may be NULL */
    json_t *result;  /* owned, may be NULL */
};

struct store_attempt_row {
    int64_t job_id;
    int attempt;
    enum attempt_state state;
    char token[65];        /* in clear: only while this daemon made it ("" when loaded) */
    char token_sha256[65]; /* what the database holds (loaded rows) */
    char launcher[16];
    char handle[64];
    int64_t slurm_job_id;
    char batch_host[64];
    char nodelist[256];
    int num_nodes, spare_nodes, ranks_per_node, world_size;
    json_t *exclude;     /* owned */
    int64_t resume_step; /* -1: from scratch */
    char resume_dir[1024];
    char resume_sha256[65];
    char master_addr[64];
    int master_port;
    char cause[32];
    char cause_node[64];
    int cause_rank; /* -1: none */
    char detail[256];
    json_t *evidence; /* owned, may be NULL */
    int64_t fail_time;
    int exit_code; /* -1: none */
    int64_t submit_time, start_time, end_time;
    json_t *provenance;    /* owned, may be NULL */
    char restart_path[16]; /* restartpolicy.h, restart_path_of; "" first attempt */
    /* What the ranks reported of their FLOPs (schemas/006-mfu.sql), summed
     * over the ranks that did: NAN none. */
    double model_flops; /* model FLOPs of one step of the job */
    double peak_flops;  /* FLOP/s the step is measured against */
    char peak_source[32];
    int tp, pp; /* the layout it runs in (dp = world_size / (tp pp)); 0 unknown */
};

/* Zero a row and set the "absent" markers; free what a row owns. */
void store_job_row_init (struct store_job_row *r);
void store_job_row_clear (struct store_job_row *r);
void store_attempt_row_init (struct store_attempt_row *r);
void store_attempt_row_clear (struct store_attempt_row *r);

/* Open (creating and migrating) the database at 'path'. */
store_t *store_open (const char *path, dt_error_t *err);
void store_close (store_t *st);
dt_db_t *store_db (store_t *st); /* borrowed */

/* The embedded migrations (generated from schemas/NNN-*.sql). */
extern const struct dt_db_migration store_migrations[];
extern const int store_nmigrations;

int store_begin (store_t *st, dt_error_t *err);
/* A transaction whose commit does not wait for the disk (dt_db_begin_lazy):
 * the bounded flush of live state. */
int store_begin_lazy (store_t *st, dt_error_t *err);
int store_commit (store_t *st, dt_error_t *err);
void store_rollback (store_t *st);

/* --- writes (call inside a transaction) ------------------------------- */

/* Append an event.  job <= 0, attempt <= 0, rank < 0, NULL strings and a
 * NULL 'data' (borrowed) are stored as NULL.  *id (may be NULL) gets the
 * event id. */
int store_event (store_t *st, int64_t time, int64_t job, int attempt, const char *kind,
                 const char *node, int rank, const char *detail, const json_t *data,
                 dt_error_t *err);

/* Insert a new job from r (r->id is set). */
int store_job_insert (store_t *st, struct store_job_row *r, dt_error_t *err);
int store_job_update (store_t *st, const struct store_job_row *r, dt_error_t *err);
int store_attempt_insert (store_t *st, const struct store_attempt_row *r,
                          dt_error_t *err);
int store_attempt_update (store_t *st, const struct store_attempt_row *r,
                          dt_error_t *err);

int store_attempt_node_put (store_t *st, int64_t job, int attempt, const char *node,
                            int node_order, int node_rank, bool spare, const char *addr,
                            int port, int pid, const char *state, int64_t register_time,
                            int64_t last_heartbeat, const json_t *hostinfo,
                            dt_error_t *err);

/* Insert or refresh a node seen at registration/heartbeat. */
int store_node_seen (store_t *st, const char *name, const char *addr,
                     const json_t *hostinfo, int64_t now, int64_t job, int attempt,
                     dt_error_t *err);
int store_node_set_state (store_t *st, const char *name, const char *state,
                          const char *note, dt_error_t *err);
/* A failure blamed on a node: node_health row + nodes.failures + 1. */
int store_node_failure (store_t *st, const char *name, int64_t now, int64_t job,
                        int attempt, const char *kind, const char *detail,
                        dt_error_t *err);

struct store_rank_row {
    int rank;
    const char *node;
    int local_rank;
    int pid;
    const char *state;
    bool client;
    int64_t step;                                      /* -1: none */
    double loss, compute_ms, comm_ms, straggler_score; /* NAN: none */
    int64_t samples;                                   /* -1: none */
    int exit_code, signal;                             /* -1: none */
    int64_t updated;
};
int store_rank_put (store_t *st, int64_t job, int attempt, const struct store_rank_row *r,
                    dt_error_t *err);

/* Step metrics, downsampled: store_metrics_thin keeps only the first row
 * of each bucket of 'stride' steps (step / stride). */
int store_metric_put (store_t *st, int64_t job, int64_t step, int attempt, int64_t time,
                      double loss, double samples_per_s, double compute_ms,
                      double comm_ms, dt_error_t *err);
int store_metrics_count (store_t *st, int64_t job, int64_t *n, dt_error_t *err);
int store_metrics_thin (store_t *st, int64_t job, int64_t stride, dt_error_t *err);

/* Checkpoints. */
int store_ckpt_put_pending (store_t *st, int64_t job, int64_t step, int attempt,
                            const char *dir, int world_size, int64_t now,
                            dt_error_t *err);
/* Record one shard; duplicate (same job, step, rank) replaces the old row. */
int store_shard_put (store_t *st, int64_t job, int64_t step, int rank, int attempt,
                     const char *node, const char *path, int64_t bytes,
                     const char *crc32c, int64_t now, dt_error_t *err);
int store_ckpt_shards (store_t *st, int64_t job, int64_t step, int *nshards,
                       int64_t *bytes, dt_error_t *err);
/* Set state (and, for committed, sha256 + commit time). */
int store_ckpt_set_state (store_t *st, int64_t job, int64_t step, const char *state,
                          const char *sha256, int64_t commit_time, dt_error_t *err);
/* The newest committed checkpoint: 1 and fills the outputs, 0 if none. */
int store_ckpt_latest (store_t *st, int64_t job, int64_t *step, char *dir, size_t dirlen,
                       char *sha256, size_t shalen, dt_error_t *err);
/* Steps of committed checkpoints older than the newest 'keep' (new array
 * in *steps, caller frees; *n count). */
int store_ckpt_beyond_keep (store_t *st, int64_t job, int keep, int64_t **steps, int *n,
                            dt_error_t *err);
/* The state of checkpoint (job, step) into buf; 0 if found, -1 ENOENT. */
int store_ckpt_state (store_t *st, int64_t job, int64_t step, char *buf, size_t len,
                      dt_error_t *err);
/* Shards of a checkpoint as a JSON array [{rank,path,bytes,crc32c}] (new). */
json_t *store_ckpt_shards_json (store_t *st, int64_t job, int64_t step, dt_error_t *err);

/* The uid of job 'id''s owner, or (uid_t)-1 when there is no such job
 * (or the read failed). */
uid_t store_job_owner (store_t *st, int64_t id);

/* --- integrity ------------------------------------------------------ */

/* What the integrity guard remembers about a job across attempts
 * (orchestrator/jobs/integrity.c; table job_integrity): set 'state' (a
 * JSON object, borrowed), or forget it (NULL). */
int store_integ_put (store_t *st, int64_t job, const json_t *state, dt_error_t *err);
/* The job's state (new), or NULL: none (err.text ""), or an error. */
json_t *store_integ_get (store_t *st, int64_t job, dt_error_t *err);

/* An attempt's numerics identity (store_numerics.c): set (a transaction
 * of its own or the caller's); 'changed' marks it as differing from the
 * job's pinned identity (never cleared).  The job's pinned identity: its
 * first attempt's that has one (new reference), or NULL with err->text
 * empty when none has, or NULL with err. */
int store_attempt_numerics (store_t *st, int64_t job, int attempt, const json_t *numerics,
                            bool changed, dt_error_t *err);
json_t *store_job_numerics_pin (store_t *st, int64_t job, dt_error_t *err);

/* --- fault tolerance ---------------------------------------------- */

/* Node health: after a failure was blamed on 'name' (store_node_failure),
 * mark it suspect when failures of at least 'jobs_threshold' different jobs
 * of at least 'users_threshold' different users happened within
 * 'window_ms' before 'now' and since its last clear; only failures of an
 * infrastructure cause (ftpolicy.h) count unless 'any_cause'.
 * *suspect: true if it became suspect now (it was not before). */
int store_node_health_check (store_t *st, const char *name, int64_t now,
                             int64_t window_ms, int jobs_threshold, int users_threshold,
                             bool any_cause, bool *suspect, dt_error_t *err);
/* An admin marks the node suspect (note says who): *changed false when it
 * already was.  -1 ENOENT for an unknown node. */
int store_node_mark_suspect (store_t *st, const char *name, int64_t now, const char *note,
                             bool *changed, dt_error_t *err);
/* An admin cleared the node: state up, and its failure history before now
 * no longer counts.  -1 ENOENT for an unknown node. */
int store_node_clear (store_t *st, const char *name, int64_t now, const char *note,
                      dt_error_t *err);
/* One node as in store_nodes_json, plus "cleared" (the latest admin clear:
 * {time, detail, uid}, or null) and "history": its node_health rows,
 * newest first, at most 'limit' ({id, time, kind: "failure"|"cleared",
 * job, attempt, cause, detail, since_clear}).  New reference; NULL with
 * errno ENOENT for an unknown node. */
json_t *store_node_json (store_t *st, const char *name, int limit, dt_error_t *err);
/* Names of the suspect nodes (new JSON array of strings). */
json_t *store_nodes_suspect (store_t *st, dt_error_t *err);
/* Steps of the job's checkpoints in 'state' ("pending", ...), ascending
 * (new array in *steps, caller frees). */
int store_ckpt_list (store_t *st, int64_t job, const char *state, int64_t **steps, int *n,
                     dt_error_t *err);

/* --- reads ------------------------------------------------------------- */

/* Which attempt holds 'token': 0 with outputs, -1 ENOENT if none. */
int store_attempt_by_token (store_t *st, const char *token, int64_t *job, int *attempt,
                            enum attempt_state *state, dt_error_t *err);

/* Load a job / an attempt into a row (row init'ed by the call). -1 ENOENT. */
int store_job_load (store_t *st, int64_t id, struct store_job_row *r, dt_error_t *err);
int store_attempt_load (store_t *st, int64_t job, int attempt,
                        struct store_attempt_row *r, dt_error_t *err);

/* Ids of jobs that are not terminal, or whose latest attempt is not
 * terminal (new array, caller frees). */
int store_live_jobs (store_t *st, int64_t **ids, int *n, dt_error_t *err);

/* JSON views for the API (new references). */
json_t *store_job_json (store_t *st, int64_t id, bool with_attempts, dt_error_t *err);
/* The same with at most 'nodes_max' nodes per attempt (< 0: all); a longer
 * list is cut, with "nodes_truncated": true (also in provenance.machine):
 * GET /v1/jobs/{id} of a huge attempt stays small. */
#define STORE_VIEW_NODES_MAX 256
json_t *store_job_view (store_t *st, int64_t id, bool with_attempts, int nodes_max,
                        dt_error_t *err);
/* Filters may be NULL; uid < 0 means any. */
json_t *store_jobs_json (store_t *st, const char *state, long uid, const char *name,
                         int limit, dt_error_t *err);
json_t *store_events_json (store_t *st, int64_t job, int64_t after, int limit,
                           dt_error_t *err);
json_t *store_ckpts_json (store_t *st, int64_t job, dt_error_t *err);
json_t *store_metrics_json (store_t *st, int64_t job, dt_error_t *err);
/* The data of GET /v1/jobs/ID/metrics as JSON text, {"job", "points",
 * "total", "stride"} (schemas/openapi.json, Metrics): every row, or with
 * max_points > 0 at most max_points of them for a plot (store_plot.c:
 * sampled by seeks, each attempt's ends kept; the text is kept until the
 * job's metrics change).  New string (*len bytes), caller frees; NULL
 * with err. */
char *store_metrics_text (store_t *st, int64_t job, int max_points, size_t *len,
                          dt_error_t *err);
json_t *store_ranks_json (store_t *st, int64_t job, int attempt, dt_error_t *err);
json_t *store_nodes_json (store_t *st, dt_error_t *err);
/* Counts for /metrics: 'sql' is one of the STORE_COUNT_* queries. */
json_t *store_counts_json (store_t *st, dt_error_t *err);

/* --- goodput accounting (report.c) ------------------------------------------ */

/* What heartbeats taught about one attempt (attempt_goodput).  Times in
 * epoch ms, 0 absent; steps -1 absent; batch_samples 0 absent. */
struct store_goodput_row {
    int64_t job_id;
    int attempt;
    int64_t train_start, first_step, first_step_time, last_step, last_step_time;
    int64_t hb_samples, busy_samples, step_samples, batch_samples;
    double step_ms_sum;
    /* Communication per parallel dimension (tp, pp, dp: bytes, comm_ms,
     * exposed_ms each), summed over dims_steps sampled steps; stored as
     * their means (schemas/009-attempt-comm.sql), NULL when dims_steps 0. */
    double dims_sum[9];
    int64_t dims_steps;
};
/* Insert or replace the row; 'hist' (borrowed, may be NULL): the step-time
 * histogram as JSON text. */
int store_goodput_put (store_t *st, const struct store_goodput_row *g, const char *hist,
                       dt_error_t *err);
/* Load the row of (job, attempt): 1 found (*hist: its histogram text, new,
 * caller frees; NULL if none), 0 no row, -1 error. */
int store_goodput_load (store_t *st, int64_t job, int attempt,
                        struct store_goodput_row *g, char **hist, dt_error_t *err);

/* Facts of an attempt's timeline that only its events hold. */
struct store_attempt_timeline {
    int64_t left_queue;  /* first became starting (epoch ms); 0 never */
    bool resubmitted;    /* created by a manual resubmission */
    int64_t result_time; /* the trainer's result event; 0 none */
};
int store_attempt_timeline (store_t *st, int64_t job, int attempt,
                            struct store_attempt_timeline *t, dt_error_t *err);

#endif
