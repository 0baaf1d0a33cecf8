/* stragglerpolicy.h: straggler scores, pure (no I/O, no clock), over the
 * job manager's rank table: each rank keeps the compute times of its last
 * window of steps; its median against the fastest rank's median is its
 * score (ftpolicy.c: ft_straggler_score, ft_straggler_flag).
 */
#ifndef DT_JOBS_STRAGGLERPOLICY_H
#define DT_JOBS_STRAGGLERPOLICY_H

#include <stdbool.h>
#include "orchestrator/jobs.h"

/* The spec's window_steps, clamped to 1..STRAGGLER_RING. */
int straggler_window_steps (int window_steps);

/* Add the compute time of the rank's current step to its window (once per
 * step; none while compute_ms is unknown), and compute the window's
 * median then: as the heartbeat that brought the step is handled, not in
 * the attempt-wide pass, which would otherwise redo it for every rank of
 * a step at once. */
void straggler_sample (struct rank *rk, int window);

/* The median of a rank's window (the upper one, as ft_median), NAN when
 * empty; cached until the window changes. */
double straggler_median (struct rank *rk);

/* The smallest positive median over ranks[0..n), NAN when none. */
double straggler_fastest (struct rank *ranks, int n);
/* The same, one rank at a time: fastest so far (NAN: none) and rk. */
double straggler_fastest_with (double fastest, struct rank *rk);

/* straggler.action "exclude": stop the attempt to restart without the
 * flagged rank's node, unless already stopping or no other node is left. */
bool straggler_exclude (const char *action, int flagged_rank, bool stopping,
                        int num_nodes);

#endif
