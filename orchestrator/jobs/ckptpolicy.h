/* ckptpolicy.h: checkpoint decisions, pure (no I/O, no clock: 'now' is an
 * argument): which step the ranks checkpoint at, when a requested step is
 * abandoned, and the bookkeeping of a just-in-time shard set until it is
 * complete and worth committing.
 */
#ifndef DT_JOBS_CKPTPOLICY_H
#define DT_JOBS_CKPTPOLICY_H

#include <stdbool.h>
#include <stdint.h>
#include "orchestrator/jobs.h"

/* Steps the fastest rank makes in two heartbeat intervals (hb_ms), at
 * least 2: far enough ahead that every rank gets the command before
 * reaching the step.  The rate is the attempt's since it started running
 * (start_ms, epoch ms; 0 not yet) from its resume step (-1 none) to
 * max_step (-1 none). */
int64_t ckpt_lookahead_steps (int64_t start_ms, int64_t now, int64_t resume_step,
                              int64_t max_step, int64_t hb_ms);

/* The periodic checkpoint step: the first multiple of 'every' (> 0) at or
 * after max_step + lookahead. */
int64_t ckpt_periodic_step (int64_t max_step, int64_t lookahead, int64_t every);

/* A requested checkpoint step (> 0) is abandoned once the slowest rank
 * (min_step) has passed it without a commit. */
bool ckpt_step_abandoned (int64_t cmd_step, int64_t min_step);

/* Record shard 'shard_rank' (bytes, crc32c) of the just-in-time set of
 * 'step' written by one surviving rank on 'node' into *js for a world of
 * 'world' ranks; a set of another step starts over.  A rank writes the
 * shards of its dp group: 'need' = world / (tp pp) of them (the caller
 * checks shard_rank is one), kept in a table of 'need' entries at
 * jit_shard_index.  Returns 1 when the set is complete, 0 when shards are
 * missing, -1 (ENOMEM) when its table cannot be allocated.  A repeated
 * shard counts once. */
int jit_set_add (struct jit_set *js, int world, int need, const char *node,
                 int shard_rank, int64_t step, int64_t bytes, const char *crc32c);

/* Where shard 'shard_rank' is in a set's table: its dp index,
 * shard_rank / (tp pp) with tp pp = world / need. */
int jit_shard_index (int world, int need, int shard_rank);

/* Do the survivors' sets (sets[r]: reported by rank r; NULL none) cover
 * every (tp, pp) position of a layout of 'group' = tp pp positions at
 * 'step'?  Position p is covered by the first rank r = p mod group whose
 * set of 'step' is complete (world / group shards): pick[p] = r, else -1.
 * Taking each position's shards from one set covers every tensor slice
 * exactly once.  Returns the number of positions covered (group: all). */
int jit_cover (const struct jit_set *sets, int world, int group, int64_t step, int *pick);

/* Is a complete just-in-time set of 'step' worth committing?  Not when one
 * was committed already (jit_step > 0), nor when a committed checkpoint
 * (have_latest: latest is its step) is as new. */
bool jit_set_needed (int64_t jit_step, bool have_latest, int64_t latest, int64_t step);

#endif
