/* restartpolicy.h: what a failure's cause means for the restart, pure (no
 * I/O, no clock).  The restart verdict itself (max_restarts, the
 * no-progress guard, min_nodes) is ftpolicy.c's ft_restart_decide; these
 * are the decisions around it that depend on the cause.
 */
#ifndef DT_JOBS_RESTARTPOLICY_H
#define DT_JOBS_RESTARTPOLICY_H

#include <stdbool.h>
#include <stdint.h>

/* Ends that were asked for (a final checkpoint was taken: time-limit
 * warning, preemption, straggler exclusion): they restart without
 * counting against the no-progress guard. */
bool restart_cause_planned (const char *cause);

/* Is the failed node (cause_node, "" none) excluded from the job's next
 * attempts?  Always an excluded straggler's; another failed node when
 * restart.exclude_failed_nodes is set and the node itself failed (node
 * causes: node_lost, node_failure, slurm_node_fail, agent_exit, ...) --
 * not after a planned end, and not after a rank's own end (trainer_exit,
 * a hang blamed on a rank): that node restarts in place unless it is
 * suspect (node health) or excluded for another reason (an integrity
 * fault attributed to the hardware). */
bool restart_exclude_node (const char *cause, int cause_rank, const char *cause_node,
                           bool exclude_failed_nodes);

/* May the next attempt run in place -- on the same nodes, as a new step of
 * the same allocation -- after this failure?  When a rank ended on its own
 * (trainer_exit: its agent reported the exit; a hang blamed on a rank)
 * and the controller has no reason to distrust the node: node_distrusted
 * is true when the node is excluded from the job's next attempts
 * (exclude_failed_nodes, a straggler, an integrity fault attributed to
 * the hardware) or suspect.  Node causes (node_lost, node_failure,
 * slurm_node_fail, agent_exit) never restart in place. */
bool restart_in_place (const char *cause, int cause_rank, bool node_distrusted);

/* Does the restart after this failure skip the backoff?  Only a restart
 * in place (the node is trusted) after an attempt that made progress,
 * and only the first of a run: quick_streak counts the restarts that
 * skipped it since an attempt last ran healthy (restart_quick_streak).
 * A rank that crashes again and again therefore backs off from its
 * second restart on, as does an attempt that fails before passing its
 * resume step. */
bool restart_skip_backoff (bool in_place, bool progressed, int quick_streak);

/* The quick_streak before deciding on an attempt that ran ran_ms (from
 * running to its failure): 0 after a healthy run of at least
 * RESTART_HEALTHY_MS, else 'streak' unchanged. */
#define RESTART_HEALTHY_MS 2000
int restart_quick_streak (int streak, int64_t ran_ms);

/* Does the cancel of a failed attempt keep its allocation for the next
 * attempt (in-allocation restart)?  For a job that will restart and can
 * go on in the allocation -- it has spare nodes, or the restart is in
 * place -- unless the scheduler is taking the allocation back (time
 * limit, preemption).  A job without spares that lost a node gets a new
 * allocation: it cannot run in one with a dead node. */
bool restart_keep_alloc (int spare_nodes, bool in_place, bool restarting,
                         const char *cause);

/* The restart path of attempt 'attempt', as its record says it (static
 * text, NULL for the first attempt): "new_allocation" when it did not run
 * in its predecessor's allocation (a new Slurm job; every restart of the
 * local and external launchers), else "in_place" when its nodes are its
 * predecessor's, "spare" when a spare of the allocation took a node's
 * place. */
const char *restart_path_of (int attempt, bool reused_alloc, bool same_nodes);

/* Is 'path' one of the words above? */
bool restart_path_valid (const char *path);

/* May surviving ranks still save the whole state after this failure (a
 * just-in-time checkpoint)?  After a rank's exit, a lost node, or a hang
 * whose rank is named (it is killed, so its peers lose a peer). */
bool restart_jit_cause (const char *cause, int cause_rank);

#endif
