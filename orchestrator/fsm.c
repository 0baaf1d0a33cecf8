/* fsm.c: the job and attempt state machines (tables of legal transitions). */
#include <config.h>
#include <errno.h>
#include <string.h>
#include "orchestrator/fsm.h"

static const char *job_names[JOB_STATE_COUNT] = {
    "pending", "running", "restarting", "completed", "failed", "cancelled",
};

static const char *attempt_names[ATT_STATE_COUNT] = {
    "submitted", "starting", "running", "ending", "succeeded", "failed", "cancelled",
};

/* job_table[from][to] */
static const bool job_table[JOB_STATE_COUNT][JOB_STATE_COUNT] = {
    /*                 pend   run    rest   comp   fail   canc */
    [JOB_PENDING] = { 0, 1, 1, 0, 1, 1 },    [JOB_RUNNING] = { 0, 0, 1, 1, 1, 1 },
    [JOB_RESTARTING] = { 0, 1, 0, 0, 1, 1 }, [JOB_COMPLETED] = { 0, 0, 0, 0, 0, 0 },
    [JOB_FAILED] = { 1, 0, 0, 0, 0, 0 },     [JOB_CANCELLED] = { 1, 0, 0, 0, 0, 0 },
};

static const bool attempt_table[ATT_STATE_COUNT][ATT_STATE_COUNT] = {
    /*                 subm   start  run    end    succ   fail   canc */
    [ATT_SUBMITTED] = { 0, 1, 0, 1, 0, 1, 1 }, [ATT_STARTING] = { 0, 0, 1, 1, 0, 1, 1 },
    [ATT_RUNNING] = { 0, 0, 0, 1, 0, 0, 0 },   [ATT_ENDING] = { 0, 0, 0, 0, 1, 1, 1 },
    [ATT_SUCCEEDED] = { 0, 0, 0, 0, 0, 0, 0 }, [ATT_FAILED] = { 0, 0, 0, 0, 0, 0, 0 },
    [ATT_CANCELLED] = { 0, 0, 0, 0, 0, 0, 0 },
};

const char *fsm_job_state_name (enum job_state s)
{
    if ((int)s < 0 || s >= JOB_STATE_COUNT)
        return NULL;
    return job_names[s];
}

const char *fsm_attempt_state_name (enum attempt_state s)
{
    if ((int)s < 0 || s >= ATT_STATE_COUNT)
        return NULL;
    return attempt_names[s];
}

static int parse (const char *const names[], int n, const char *name)
{
    if (name) {
        for (int i = 0; i < n; i++)
            if (!strcmp (names[i], name))
                return i;
    }
    errno = EINVAL;
    return -1;
}

int fsm_job_state_parse (const char *name)
{
    return parse (job_names, JOB_STATE_COUNT, name);
}

int fsm_attempt_state_parse (const char *name)
{
    return parse (attempt_names, ATT_STATE_COUNT, name);
}

bool fsm_job_ok (enum job_state from, enum job_state to)
{
    if ((int)from < 0 || from >= JOB_STATE_COUNT || (int)to < 0 || to >= JOB_STATE_COUNT)
        return false;
    return job_table[from][to];
}

bool fsm_attempt_ok (enum attempt_state from, enum attempt_state to)
{
    if ((int)from < 0 || from >= ATT_STATE_COUNT || (int)to < 0 || to >= ATT_STATE_COUNT)
        return false;
    return attempt_table[from][to];
}

bool fsm_job_terminal (enum job_state s)
{
    return s == JOB_COMPLETED || s == JOB_FAILED || s == JOB_CANCELLED;
}

bool fsm_attempt_terminal (enum attempt_state s)
{
    return s == ATT_SUCCEEDED || s == ATT_FAILED || s == ATT_CANCELLED;
}
