/* dtclient.h: libdtclient, what a trainer links to talk to its dtagent.
 *
 * The agent publishes its socket in DT_AGENT_SOCKET.  Without it (a trainer
 * run by hand) dtclient_open returns a no-op client: every call succeeds and
 * does nothing, and kv calls fall back to the directory given by
 * DT_RENDEZVOUS_DIR when set, else fail with ENOTCONN.
 *
 * Step reports are written to a shared-memory page that the agent reads at
 * each heartbeat, so dtclient_step costs no system call.  Everything else
 * (shards, kv, events) is one framed message over the Unix socket.
 * The wire format is described in schemas/dtclient-protocol.md.
 *
 * Thread safety: one dtclient_t per process, used from one thread, except
 * dtclient_shard_written/dtclient_shard_failed which may be called from a
 * checkpoint writer thread (they take an internal lock).
 */
#ifndef DTCLIENT_H
#define DTCLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dtclient dtclient_t;

typedef enum {
    DTCLIENT_OK = 0,
    DTCLIENT_ERR_NOAGENT = 1,  /* no agent (no-op client) and no fallback */
    DTCLIENT_ERR_IO = 2,       /* socket error; the agent is gone */
    DTCLIENT_ERR_PROTO = 3,    /* malformed answer */
    DTCLIENT_ERR_TIMEOUT = 4,  /* kv wait timed out */
    DTCLIENT_ERR_INVAL = 5,    /* bad argument */
    DTCLIENT_ERR_NOTFOUND = 6, /* kv key absent */
} dtclient_err_t;

const char *dtclient_strerror (dtclient_err_t e);

typedef enum {
    DTCLIENT_CMD_NONE = 0,
    DTCLIENT_CMD_CHECKPOINT = 1, /* checkpoint when reaching 'step' */
    DTCLIENT_CMD_STOP = 2,       /* checkpoint at 'step' (if > 0) and exit 0; a
                                  * negative step: a peer was lost, save the
                                  * state now (just in time) and exit */
    DTCLIENT_CMD_ABORT = 3,      /* exit now, no checkpoint */
    /* A peer was lost and is being replaced in place: keep the state,
     * re-form the group as attempt 'step' (the new attempt's number). */
    DTCLIENT_CMD_REFORM = 4,
} dtclient_cmd_kind_t;

/* Capabilities a trainer declares (dtclient_declare). */
enum {
    /* After a peer's loss it keeps its state and waits for
     * DTCLIENT_CMD_REFORM (or a stop), then re-forms its group in place;
     * a replacement started with DT_REFORM_JOIN=1 receives the state from
     * it instead of reading a checkpoint. */
    DTCLIENT_CAP_REFORM = 1,
    /* Not a capability but a moment: it lost a peer and waits for the
     * re-form command now (the agent asks the controller at once and
     * then often, for a few seconds, instead of at its next heartbeat). */
    DTCLIENT_REFORM_WAITING = 2,
};

typedef struct {
    dtclient_cmd_kind_t kind;
    int64_t step;
    uint64_t seq; /* increases with each new command */
} dtclient_cmd_t;

/* Open the client from the environment (DT_AGENT_SOCKET, DT_AGENT_SHM,
 * RANK).  Never NULL unless out of memory. */
dtclient_t *dtclient_open (void);
void dtclient_close (dtclient_t *c);

/* 1 if connected to an agent, 0 for the no-op client. */
int dtclient_connected (const dtclient_t *c);

/* Report the step just finished.  samples: what this rank processed in
 * this step (its share of the batch, not a running total).  compute_s and
 * comm_s: seconds of this step spent computing and waiting on
 * collectives.  No system call. */
void dtclient_step (dtclient_t *c, int64_t step, double loss, int64_t samples,
                    double compute_s, double comm_s);

/* With a parallel layout, per dimension (0 tp, 1 pp, 2 dp) for the step
 * just reported: bytes this rank moved, seconds its communication took,
 * and seconds of those the step waited for (exposed, not hidden behind
 * compute).  Call after dtclient_step.  No system call. */
void dtclient_step_dims (dtclient_t *c, int64_t step, const double bytes[3],
                         const double comm_s[3], const double exposed_s[3]);

/* Tell the agent a checkpoint save/load is in progress (the hang detector
 * then uses its checkpoint allowance).  No system call. */
void dtclient_set_busy (dtclient_t *c, int busy);

/* Tell the agent a thread of this rank enters (enter = 1) or leaves
 * (enter = 0) a collective: it is then blocked on its peers.  When a step
 * stalls, the hang detector blames the rank that is not waiting - the one
 * that froze - rather than the peers blocked on it.  Calls may come from
 * several threads at once (the page keeps a count).  No system call. */
void dtclient_collective (dtclient_t *c, int enter);

/* Latest command from the controller, without blocking.  Returns 1 and
 * fills *cmd when a command newer than the last one returned is pending,
 * else 0.  No system call. */
int dtclient_poll (dtclient_t *c, dtclient_cmd_t *cmd);

/* The rank the agent has assigned to this process now (its shared page),
 * which differs from RANK only for a standby process of a hot spare
 * (DT_STANDBY=1): started before it had a rank, it learns the rank it
 * takes over when DTCLIENT_CMD_REFORM arrives, from this call.  RANK
 * when no agent page is mapped.  No system call. */
int dtclient_assigned_rank (const dtclient_t *c);

/* A checkpoint shard is durable: step, its path, size and CRC32C. */
dtclient_err_t dtclient_shard_written (dtclient_t *c, int64_t step, const char *path,
                                       uint64_t bytes, uint32_t crc32c);
dtclient_err_t dtclient_shard_failed (dtclient_t *c, int64_t step, const char *reason);

/* A just-in-time checkpoint shard is durable: after a peer was
 * lost, a surviving data-parallel rank wrote shard 'shard_rank' of the
 * last completed step (it holds the whole state, so it writes every
 * rank's shard, into a directory of its own), verified its CRC32C by
 * reading it back, and reports it.  The controller commits the first
 * complete set of a step newer than its last committed checkpoint. */
dtclient_err_t dtclient_shard_written_jit (dtclient_t *c, int64_t step, int shard_rank,
                                           const char *path, uint64_t bytes,
                                           uint32_t crc32c);

/* Final result of the run (a JSON object as text), stored as the job's result. */
dtclient_err_t dtclient_result (dtclient_t *c, const char *json_object);

/* An integrity report (a JSON object as text, at most 64 KiB): the step,
 * the replica group, the parameters' fingerprint and per-tensor CRC32Cs,
 * a non-finite value or a loss spike (schemas/dtclient-protocol.md).  The
 * agent relays it to the controller as an event "integrity", which
 * compares the reports of one step across ranks. */
dtclient_err_t dtclient_integrity (dtclient_t *c, const char *json_object);

/* What this rank computes with (a JSON object as text, at most 4 KiB of
 * flat members: strings, numbers and one object "pin_env" of environment
 * variables that reproduce it, such as OPENBLAS_CORETYPE): once, at start.
 * The controller keeps it with the attempt, pins the job's first one for
 * every later attempt (it sets pin_env for their ranks) and records an
 * event "numerics_changed" when a later report differs: a resume is then
 * no longer bit-identical to an uninterrupted run (dtctl-job(5),
 * NUMERICS).  An agent older than this call answers DTCLIENT_ERR_PROTO. */
dtclient_err_t dtclient_numerics (dtclient_t *c, const char *json_object);

/* What one step of this rank costs in model FLOPs (its share of the
 * job's step: the controller sums the ranks), the peak FLOP/s it is
 * measured against (0: unknown) and where that peak came from (a short
 * word, [a-z0-9_.-], may be NULL).  Once, at start: the controller
 * computes the model FLOP utilisation from it and the step times.  An
 * agent older than this call answers DTCLIENT_ERR_PROTO (nothing is lost
 * but the figure). */
/* Declare capabilities (DTCLIENT_CAP_* ored): the agent passes them on to
 * the controller, which relies on them only when every rank of the
 * attempt declared them. */
dtclient_err_t dtclient_declare (dtclient_t *c, unsigned caps);
dtclient_err_t dtclient_perf (dtclient_t *c, double model_flops, double peak_flops,
                              const char *peak_source);

/* Per-attempt key-value store (bootstrap of gloo / NCCL).  Values are
 * opaque bytes (up to 64 KiB).  get: *val is malloc'ed, caller frees. */
dtclient_err_t dtclient_kv_set (dtclient_t *c, const char *key, const void *val,
                                size_t len);
dtclient_err_t dtclient_kv_get (dtclient_t *c, const char *key, void **val, size_t *len);
dtclient_err_t dtclient_kv_wait (dtclient_t *c, const char *key, int timeout_ms,
                                 void **val, size_t *len);

/* CRC32C (Castagnoli) of buf[0..len), extending 'crc' (0 to start): the
 * checksum dtclient_shard_written expects.  Uses the SSE4.2 instruction
 * when the CPU has it. */
uint32_t dtclient_crc32c (uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
