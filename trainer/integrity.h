/* integrity.h: dttrain guards its own consistency - parameter fingerprints
 * compared across replicas by the controller, non-finite losses and
 * gradients (the update of such a step is skipped), loss spikes (median +
 * k MAD over a window), fingerprints in checkpoints verified at load, and
 * the fault injection that tests all of it.
 *
 * What a rank reports goes to its agent as one "integrity" message (a JSON
 * object, schemas/dtclient-protocol.md) at the steps that need it: every
 * --integrity-every steps, every checkpoint, and any step with a
 * non-finite value or a loss spike.  Every rank reports at the same steps
 * (the decisions use allreduced values), so the controller can compare
 * the reports of one step across all ranks.
 */
#ifndef DT_TRAINER_INTEGRITY_H
#define DT_TRAINER_INTEGRITY_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

struct trainer;
struct integ;

/* New state for trainer t (its options, model and rank must be set), or
 * NULL with err (out of memory, an --inject-bitflip tensor or index that
 * the model lacks). */
struct integ *integ_create (struct trainer *t, dt_error_t *err);
void integ_destroy (struct integ *g);

/* At the top of the loop, before step t->step + 1: --inject-bitflip. */
void integ_before_step (struct trainer *t);

/* The samples of step t->step + 1 were read into ctx[cnt * C], tgt[cnt]:
 * --inject-bad-batch corrupts them. */
void integ_batch (struct trainer *t, uint8_t *ctx, uint8_t *tgt, int cnt);

/* At the start of step t->step + 1's compute. */
void integ_step_start (struct trainer *t);

/* A gradient bucket of this rank at flat offset off, before it is reduced
 * (from the thread that reduces it, one at a time): does it hold NaN or
 * Inf?  So a non-finite gradient names its rank.  --inject-nan poisons
 * the bucket at offset 0 here. */
void integ_local_grads (struct trainer *t, size_t off, float *g, size_t n);

/* This rank's share of the squared gradient norm (before the control
 * allreduce): without data parallelism it is the norm of the rank's own,
 * unreduced gradient, and says whether that is finite in place of a scan
 * (the scan reads every element before the reduction; the norm, after
 * it, reads only the rank's share of the reduced gradient, so with data
 * parallelism the two passes cannot be one). */
void integ_local_sumsq (struct trainer *t, double sumsq);

/* After the control allreduce of step t->step + 1: loss_local is this
 * rank's loss sum, loss the global mean, norm2 the global squared
 * gradient norm.  Reports a non-finite value or a spike.  Returns 1 when
 * the update must be skipped (non-finite, or a step of --skip-steps), else
 * 0.  Every rank decides the same (the inputs are allreduced). */
int integ_judge (struct trainer *t, double loss_local, double loss, double norm2);

/* After step t->step's update: the periodic fingerprint report. */
void integ_after_step (struct trainer *t);

/* The replica group of this rank: the ranks that hold the same parameters
 * (one parameter position).  dttrain's data parallelism: "dp", everyone.
 * A layout with tensor or pipeline parallelism names each (tp, pp)
 * position, so that only the replicas of one position are compared. */
const char *integ_group (const struct trainer *t);

/* The fingerprint of this rank's parameters (CRC32C of the per-tensor
 * CRC32Cs), reported to the agent as a checkpoint's: called when a
 * checkpoint of t->step starts.  The text
 * "params_fingerprint=GROUP:%08x\n" is appended to the checkpoint's
 * config (each shard records its replica's fingerprint). */
uint32_t integ_checkpoint (struct trainer *t);

/* After a resume from stepdir (saved by 'world' ranks) into host params
 * (nparams floats, this rank's tensors): the shards of one replica group
 * must record the same fingerprint, and when the checkpoint was saved in
 * this run's layout (same_layout: the same tp and pp) the loaded
 * parameters must have the fingerprint of this rank's group; else -1 with
 * err "checkpoint shard PATH: ..." and errno EBADMSG (a checkpoint
 * written after replicas diverged).  Shards without a fingerprint (older
 * ones) pass. */
int integ_verify_resume (struct trainer *t, const char *stepdir, int world,
                         int same_layout, const float *params, dt_error_t *err);

/* For tests and benchmarks: the fingerprint of n floats laid out as the
 * model's tensors (host memory); per-tensor CRC32Cs into crcs (may be
 * NULL). */
uint32_t integ_fingerprint (struct trainer *t, const float *params, uint32_t *crcs);

/* Add "fingerprints" (how many), "fingerprint_s" (their seconds),
 * "grad_scan_s" (seconds scanning this rank's gradients for NaN/Inf) and
 * "skipped_updates" to the result object in json (a buffer of len bytes,
 * ending in '}'); unchanged when it would not fit. */
void integ_result (const struct integ *g, char *json, size_t len);

#endif
