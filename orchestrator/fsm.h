/* fsm.h: the job and attempt state machines (man/dtctl-job.5.in lists the states).
 *
 * Job:     pending -> running -> (restarting -> running)* -> completed | failed |
 * cancelled Attempt: submitted -> starting -> running -> ending -> succeeded | failed |
 * cancelled
 *
 * Pure functions: which transitions are legal, names <-> enums.  The job
 * manager asks fsm_*_ok() before every change and answers 409 (changing
 * nothing) when it says no.
 */
#ifndef DT_FSM_H
#define DT_FSM_H

#include <stdbool.h>

enum job_state {
    JOB_PENDING = 0,
    JOB_RUNNING,
    JOB_RESTARTING,
    JOB_COMPLETED,
    JOB_FAILED,
    JOB_CANCELLED,
    JOB_STATE_COUNT,
};

enum attempt_state {
    ATT_SUBMITTED = 0,
    ATT_STARTING,
    ATT_RUNNING,
    ATT_ENDING,
    ATT_SUCCEEDED,
    ATT_FAILED,
    ATT_CANCELLED,
    ATT_STATE_COUNT,
};

/* "pending", ... (static storage); NULL for an out-of-range value. */
const char *fsm_job_state_name (enum job_state s);
const char *fsm_attempt_state_name (enum attempt_state s);

/* Name -> enum; -1 (errno EINVAL) for an unknown name. */
int fsm_job_state_parse (const char *name);
int fsm_attempt_state_parse (const char *name);

/* Legal transitions.  A transition to the same state is never legal.
 * Besides the main line, the job machine allows:
 *   pending -> restarting | failed | cancelled   (the first attempt failed
 *                                                 before running / a cancel)
 *   restarting -> failed | cancelled
 *   failed | cancelled -> pending                (resubmit)
 * and the attempt machine:
 *   submitted | starting -> failed | cancelled   (nothing was started: the
 *                                                 launcher refused it)
 *   submitted -> ending, starting -> ending      (give up before running) */
bool fsm_job_ok (enum job_state from, enum job_state to);
bool fsm_attempt_ok (enum attempt_state from, enum attempt_state to);

bool fsm_job_terminal (enum job_state s);
bool fsm_attempt_terminal (enum attempt_state s);

#endif
