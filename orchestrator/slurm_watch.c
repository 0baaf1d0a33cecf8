/* slurm_watch.c: watching attempts under Slurm: handles ("<jobid>" or
 * "<jobid>:<attempt>"), the steps of attempts inside an allocation, and
 * what poll reports from slurm_load_job / slurm_get_job_steps. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/errprintf.h"
#include "common/log.h"
#include "common/conf.h"
#include "orchestrator/launcher.h"
#include "orchestrator/slurm_int.h"

/* "J" (the attempt that created allocation J; *attempt = 0: the one in the
 * Slurm job's name) or "J:N" (attempt N, a later step of J). */
int parse_handle (const char *handle, uint32_t *jobid, int *attempt, dt_error_t *err)
{
    char *end;
    unsigned long v;
    long a = 0;

    errno = 0;
    v = handle ? strtoul (handle, &end, 10) : 0;
    if (handle && !errno && end != handle && *end == ':') {
        char *e2;
        a = strtol (end + 1, &e2, 10);
        if (errno || e2 == end + 1 || *e2 != '\0' || a < 1 || a > 1000000)
            end = (char *)handle; /* reject below */
        else
            end = e2;
    }
    if (!handle || errno || end == handle || *end != '\0' || v == 0 || v > UINT32_MAX)
        return errnoprintf (err, EINVAL,
                            "slurm launcher: bad handle '%s' (want a Slurm job id, "
                            "optionally ':attempt')",
                            handle ? handle : "(null)");
    *jobid = (uint32_t)v;
    if (attempt)
        *attempt = (int)a;
    return 0;
}

/* "dt-<job>-a<attempt>" (job and step names) -> job, attempt; -1 otherwise. */
int parse_step_name (const char *name, long long *job, int *attempt)
{
    long long j;
    int a, n = 0;

    if (!name || sscanf (name, "dt-%lld-a%d%n", &j, &a, &n) != 2 || name[n] != '\0')
        return -1;
    *job = j;
    *attempt = a;
    return 0;
}

struct step_track *track_get (struct slurm_launcher *sl, uint32_t jobid, int attempt,
                              bool create)
{
    struct step_track *t, **pp;
    double now = mono_now ();

    /* Forget what has not been asked about for a day (ended long ago). */
    for (pp = &sl->tracks; (t = *pp);) {
        if (now - t->used > 86400) {
            *pp = t->next;
            free (t);
            continue;
        }
        pp = &t->next;
    }
    for (t = sl->tracks; t; t = t->next)
        if (t->jobid == jobid && t->attempt == attempt)
            break;
    if (!t && create && (t = calloc (1, sizeof (*t)))) {
        t->jobid = jobid;
        t->attempt = attempt;
        t->next = sl->tracks;
        sl->tracks = t;
    }
    if (t)
        t->used = now;
    return t;
}

void track_drop_job (struct slurm_launcher *sl, uint32_t jobid)
{
    struct step_track *t, **pp;
    for (pp = &sl->tracks; (t = *pp);) {
        if (t->jobid == jobid) {
            *pp = t->next;
            free (t);
            continue;
        }
        pp = &t->next;
    }
}

/* The steps of allocation 'jobid' (new; free with
 * slurm_free_job_step_info_response_msg), or NULL with err. */
job_step_info_response_msg_t *load_steps (struct slurm_launcher *sl, uint32_t jobid,
                                          dt_error_t *err)
{
    job_step_info_response_msg_t *resp = NULL;

    if (slurm_get_job_steps ((time_t)0, jobid, NO_VAL, &resp, SHOW_ALL) !=
        SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO, "slurm_get_job_steps %u: %s",
                     jobid, slurm_strerror (e));
        return NULL;
    }
    ctld_result (sl, 0);
    return resp;
}

/* The running step of attempt 'attempt' of dtctl job 'job' (borrowed from
 * resp), or NULL.  *later: a step of a later attempt exists. */
static job_step_info_t *find_step (job_step_info_response_msg_t *resp, long long job,
                                   int attempt, bool *later)
{
    job_step_info_t *found = NULL;

    *later = false;
    for (uint32_t i = 0; resp && i < resp->job_step_count; i++) {
        job_step_info_t *s = &resp->job_steps[i];
        long long j;
        int a;
        if (s->step_id.step_id >= SLURM_MAX_NORMAL_STEP_ID ||
            parse_step_name (s->name, &j, &a) < 0 || j != job)
            continue;
        if (a == attempt)
            found = s;
        else if (a > attempt)
            *later = true;
    }
    return found;
}

/* Slurm's exit status word -> a shell-style code. */
static int exit_code_of (uint32_t status)
{
    if (WIFEXITED (status))
        return WEXITSTATUS (status);
    if (WIFSIGNALED (status))
        return 128 + WTERMSIG (status);
    return -1;
}

/* The cause word of a finished Slurm job state. */
static const char *cause_of (uint32_t base, int exit_code)
{
    switch (base) {
    case JOB_COMPLETE: return exit_code == 0 ? "completed" : "failed";
    case JOB_CANCELLED: return "cancelled";
    case JOB_NODE_FAIL: return "slurm_node_fail";
    case JOB_TIMEOUT:
    case JOB_DEADLINE: return "time_limit";
    case JOB_PREEMPTED: return "preempted";
    case JOB_BOOT_FAIL: return "launch_failed";
    case JOB_FAILED:
    case JOB_OOM:
    default: return "failed";
    }
}

static const char *state_name (uint32_t base)
{
    switch (base) {
    case JOB_PENDING: return "PENDING";
    case JOB_RUNNING: return "RUNNING";
    case JOB_SUSPENDED: return "SUSPENDED";
    case JOB_COMPLETE: return "COMPLETED";
    case JOB_CANCELLED: return "CANCELLED";
    case JOB_FAILED: return "FAILED";
    case JOB_TIMEOUT: return "TIMEOUT";
    case JOB_NODE_FAIL: return "NODE_FAIL";
    case JOB_PREEMPTED: return "PREEMPTED";
    case JOB_BOOT_FAIL: return "BOOT_FAIL";
    case JOB_DEADLINE: return "DEADLINE";
    case JOB_OOM: return "OUT_OF_MEMORY";
    default: return "UNKNOWN";
    }
}

/* A job that ended while one of its nodes was dead stays COMPLETING
 * until Slurm sets that node DOWN (~9 s on the testbed), although nothing
 * of it runs any more.  While COMPLETING, Slurm lists only the nodes that
 * have not finished yet: when every one of them is dead (nodes_dead), the
 * live nodes have killed their processes and the next attempt need not
 * wait for Slurm's node timeout. */
static bool completing_only_dead (struct slurm_launcher *sl, slurm_job_info_t *j)
{
    char **names;
    bool *dead, all = false;
    int n = 0;

    if (!(names = expand_hostlist (j->nodes, &n)) || n == 0) {
        free_names (names);
        return false;
    }
    if ((dead = calloc (n + 1, 1)) && nodes_dead (sl, names, n, dead) == 0) {
        all = true;
        for (int i = 0; i < n; i++)
            all &= dead[i];
    }
    free (dead);
    free_names (names);
    return all;
}

/* Poll of one attempt's step while its allocation runs: 1 when that
 * step is over (st filled: ENDED), 0 when the attempt still counts as
 * running (its step runs, or has not been started yet). */
static int step_poll (struct slurm_launcher *sl, slurm_job_info_t *j, uint32_t jobid,
                      int attempt, struct launcher_status *st)
{
    job_step_info_response_msg_t *resp;
    struct step_track *t;
    long long job;
    int first;
    bool later = false;
    dt_error_t err;

    if (parse_step_name (j->name, &job, &first) < 0)
        return 0; /* not ours: job-level state only */
    if (attempt == 0)
        attempt = first;
    t = track_get (sl, jobid, attempt, false);
    if (!(resp = load_steps (sl, jobid, &err)))
        return 0; /* cannot tell: job-level state */
    job_step_info_t *s = find_step (resp, job, attempt, &later);
    if (s && !(t && t->kept)) {
        if ((t = track_get (sl, jobid, attempt, true)))
            t->seen = true;
        slurm_free_job_step_info_response_msg (resp);
        return 0;
    }
    slurm_free_job_step_info_response_msg (resp);
    if (s || !(later || (t && (t->seen || t->kept))))
        return 0; /* kept but still running / not started yet */
    st->state = LAUNCHER_ENDED;
    st->end_time_ms = 0;
    if (t && t->kept) {
        snprintf (st->cause, sizeof (st->cause), "cancelled");
        snprintf (st->detail, sizeof (st->detail),
                  "step of attempt %d in Slurm job %u ended; "
                  "allocation kept",
                  attempt, jobid);
    }
    else {
        snprintf (st->cause, sizeof (st->cause), "failed");
        snprintf (st->detail, sizeof (st->detail),
                  "step of attempt %d in Slurm job %u ended "
                  "while the allocation lives on",
                  attempt, jobid);
    }
    return 1;
}

int slurm_poll_job (void *ctx, const char *handle, struct launcher_status *st,
                    dt_error_t *err)
{
    struct slurm_launcher *sl = ctx;
    job_info_msg_t *msg = NULL;
    slurm_job_info_t *j;
    uint32_t jobid, base;
    bool completing;
    int attempt;

    memset (st, 0, sizeof (*st));
    st->exit_code = -1;
    if (parse_handle (handle, &jobid, &attempt, err) < 0)
        return -1;
    st->sched_id = jobid;
    if (ctld_gate (sl, err) < 0)
        return -1;
    if (slurm_load_job (&msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        if (e == ESLURM_INVALID_JOB_ID) {
            /* Purged after MinJobAge, or never existed (state lost). */
            st->state = LAUNCHER_ENDED;
            snprintf (st->cause, sizeof (st->cause), "lost");
            snprintf (st->detail, sizeof (st->detail), "Slurm no longer knows job %u",
                      jobid);
            return 0;
        }
        return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                            "slurm_load_job %u: %s", jobid, slurm_strerror (e));
    }
    ctld_result (sl, 0);
    if (msg->record_count < 1) {
        slurm_free_job_info_msg (msg);
        st->state = LAUNCHER_ENDED;
        snprintf (st->cause, sizeof (st->cause), "lost");
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u not found", jobid);
        return 0;
    }
    j = &msg->job_array[0];
    base = j->job_state & JOB_STATE_BASE;
    completing = (j->job_state & JOB_COMPLETING) != 0;
    if (j->nodes)
        snprintf (st->nodelist, sizeof (st->nodelist), "%s", j->nodes);
    if (j->batch_host)
        snprintf (st->batch_host, sizeof (st->batch_host), "%s", j->batch_host);

    if (base == JOB_PENDING) {
        st->state = LAUNCHER_PENDING;
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u PENDING (%s)", jobid,
                  slurm_job_reason_string (j->state_reason));
    }
    else if ((base == JOB_RUNNING || base == JOB_SUSPENDED) && !completing &&
             step_poll (sl, j, jobid, attempt, st) == 1) {
        ; /* the attempt's step ended; the allocation lives on */
    }
    else if (completing && base != JOB_RUNNING && base != JOB_SUSPENDED &&
             completing_only_dead (sl, j)) {
        st->state = LAUNCHER_ENDED;
        st->end_time_ms = j->end_time > 0 ? (int64_t)j->end_time * 1000 : 0;
        track_drop_job (sl, jobid);
        st->exit_code = exit_code_of (j->exit_code);
        snprintf (st->cause, sizeof (st->cause), "%s", cause_of (base, st->exit_code));
        snprintf (st->detail, sizeof (st->detail),
                  "Slurm job %u %s; only dead nodes (%.64s) "
                  "still hold it in COMPLETING",
                  jobid, state_name (base), st->nodelist);
        st->nodelist[0] = '\0'; /* those are not the attempt's nodes */
    }
    else if (base == JOB_RUNNING || base == JOB_SUSPENDED || completing) {
        /* A job is over only when COMPLETING has cleared: until then some
         * of its processes may still run. */
        st->state = LAUNCHER_RUNNING;
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u %s%s", jobid,
                  state_name (base), completing ? "+COMPLETING" : "");
    }
    else {
        st->state = LAUNCHER_ENDED;
        st->end_time_ms = j->end_time > 0 ? (int64_t)j->end_time * 1000 : 0;
        track_drop_job (sl, jobid);
        st->exit_code = exit_code_of (j->exit_code);
        snprintf (st->cause, sizeof (st->cause), "%s", cause_of (base, st->exit_code));
        snprintf (st->detail, sizeof (st->detail), "Slurm job %u %s reason %s exit %d",
                  jobid, state_name (base), slurm_job_reason_string (j->state_reason),
                  st->exit_code);
    }
    slurm_free_job_info_msg (msg);
    return 0;
}
