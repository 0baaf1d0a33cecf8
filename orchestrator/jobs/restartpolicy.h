/* restartpolicy.h: what a failure's cause means for the restart, pure (no
 * I/O, no clock).  The restart verdict itself (max_restarts, the
 * no-progress guard, min_nodes) is ftpolicy.c's ft_restart_decide; these
 * are the decisions around it that depend on the cause.
 */
#ifndef DT_JOBS_RESTARTPOLICY_H
#define DT_JOBS_RESTARTPOLICY_H

#include <stdbool.h>

/* Ends that were asked for (a final checkpoint was taken: time-limit
 * warning, preemption, straggler exclusion): they restart without
 * counting against the no-progress guard. */
bool restart_cause_planned (const char *cause);

/* Is the failed node (cause_node, "" none) excluded from the job's next
 * attempts?  Always an excluded straggler's; another failed node when
 * restart.exclude_failed_nodes is set and the end was not planned. */
bool restart_exclude_node (const char *cause, const char *cause_node,
                           bool exclude_failed_nodes);

/* Does the cancel of a failed attempt keep its allocation for the next
 * attempt (in-allocation restart)?  For a job with spare nodes that will
 * restart, unless the scheduler is taking the allocation back (time limit,
 * preemption). */
bool restart_keep_alloc (int spare_nodes, bool restarting, const char *cause);

/* May surviving ranks still save the whole state after this failure (a
 * just-in-time checkpoint)?  After a rank's exit, a lost node, or a hang
 * whose rank is named (it is killed, so its peers lose a peer). */
bool restart_jit_cause (const char *cause, int cause_rank);

#endif
