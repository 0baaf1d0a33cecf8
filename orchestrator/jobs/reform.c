/* reform.c: re-forming in place.  After a rank's exit on a node that stays
 * healthy, when every rank of the attempt declared that it can (dttrain
 * with dp >= 2: each lost slice survives in a data-parallel replica), the
 * surviving processes keep running: the attempt ends failed as always, and
 * a new attempt (restart path "reform") of the same processes, the same
 * launcher handle and Slurm step, with a new token, starts at once.  The
 * agents learn it in the answer to their next request with the old token
 * (the very events request that reported the exit, the others' next
 * heartbeat), register again with the new token, restart the lost rank as
 * a replacement and tell the survivors to re-form.  The old token is
 * answered nothing but that command from then on; everything else of the
 * old attempt (its events, its kv) is refused as before.  A re-formation
 * that does not complete in time (a second kill, a rank that cannot
 * re-form) fails the new attempt, and the ordinary restart follows.
 */
#include <config.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/jobs/internal.h"

/* The new attempt's rendezvous deadline: its agents are alive and
 * re-register within a heartbeat interval or two; past this the
 * re-formation failed and the ordinary restart takes over. */
static const int64_t reform_rendezvous_ms = 5000;

/* May the failure of 'att' (recorded, the job restarting) re-form? */
static bool reform_eligible (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    int64_t now = dt_real_ms ();
    /* Only a restart that waits no backoff (restartpolicy.h): a crash
     * loop backs off through the ordinary path. */
    if (!job->spec.restart.reform || job->row.state != JOB_RESTARTING ||
        job->restart_wait_ms != 0 || !job->restart_in_place || att->row.world_size < 2 ||
        !att->row.handle[0] || att->stopping || att->row.cause_rank < 0 ||
        strcmp (att->row.cause, "trainer_exit"))
        return false;
    /* A rank reported the result: the run is over and the survivors are
     * exiting; a replacement would wait for them in vain. */
    if (job->row.result)
        return false;
    /* The command reaches the agents in the answers to their own requests:
     * not through the relays of a fan-in tree. */
    if (job->spec.hb.tree_width > 0)
        return false;
    /* Idle spares would have to register with the new attempt as spares
     * again: jobs with spares keep the ordinary path (for now). */
    if (att->row.spare_nodes > 0)
        return false;
    /* A data-parallel replica of the lost rank's (tp, pp) slice survives:
     * dp >= 2 (one rank lost). */
    int group = (att->row.tp > 0 ? att->row.tp : 1) * (att->row.pp > 0 ? att->row.pp : 1);
    if (att->row.world_size / group < 2)
        return false;
    /* The same layout next (no shrink re-planned). */
    if ((job->next_nodes > 0 && job->next_nodes != att->row.num_nodes) ||
        (job->next_tp > 0 && job->next_tp != att->row.tp) ||
        (job->next_pp > 0 && job->next_pp != att->row.pp))
        return false;
    for (int r = 0; r < att->row.world_size; r++)
        if (!att->ranks[r].reform)
            return false;
    /* Every agent alive (the lost rank's included: it starts the
     * replacement). */
    for (int i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        if (!ag->spare &&
            (ag->done || now - ag->last_hb_ms > 3 * job->spec.hb.interval_ms + 1000))
            return false;
    }
    return true;
}

struct reform_arg {
    struct attempt *old, *att;
};

/* The successor of 'old' made of the same processes (the same Slurm job
 * and step), on restart path 'path': 'old' ends failed now (its processes
 * live on in the next), the new attempt is allocated, not yet stored.
 * NULL on error. */
struct attempt *reform_successor (struct jobs *jobs, struct job *job, struct attempt *old,
                                  const char *path, dt_error_t *err)
{
    if (att_set_state (jobs, old, ATT_FAILED, err) < 0)
        return NULL;
    struct attempt *att = attempt_alloc (jobs, job, job->row.attempts + 1, false, err);
    if (!att)
        return NULL;
    snprintf (att->row.handle, sizeof (att->row.handle), "%s", old->row.handle);
    snprintf (att->row.restart_path, sizeof (att->row.restart_path), "%s", path);
    att->row.slurm_job_id = old->row.slurm_job_id;
    snprintf (att->row.batch_host, sizeof (att->row.batch_host), "%s",
              old->row.batch_host);
    return att;
}

/* Store 'att' as the job's next attempt, starting.  It resumes from the
 * survivors' memory: at least the newest step any rank of 'old' reported
 * (the state source is the lowest rank at the newest completed step),
 * from no checkpoint. */
int reform_store (struct jobs *jobs, struct job *job, struct attempt *old,
                  struct attempt *att, dt_error_t *err)
{
    if (old->max_step > att->max_step)
        att->max_step = old->max_step;
    att->row.resume_step = att->max_step;
    att->row.resume_dir[0] = att->row.resume_sha256[0] = '\0';
    snprintf (att->resume_source, sizeof (att->resume_source), "reform");
    job->row.attempts++;
    job->row.restarts++;
    if (store_job_update (jobs->ctx->store, &job->row, err) < 0 ||
        tx_insert_attempt (jobs, job, att, err) < 0)
        return -1;
    return att_set_state (jobs, att, ATT_STARTING, err);
}

/* After the transaction: 'att' is the job's current attempt, with
 * rendezvous_ms to gather its agents; 'old' is kept for its agents, and
 * its token gets nothing but the re-form command from now on. */
void reform_adopt (struct jobs *jobs, struct job *job, struct attempt *old,
                   struct attempt *att, int64_t rendezvous_ms)
{
    snprintf (job->reform_old_sha, sizeof (job->reform_old_sha), "%s",
              old->row.token_sha256);
    job->reform_attempt = att->row.attempt;
    att->deadline_ms = dt_real_ms () + rendezvous_ms;
    att->reform_decided_ms = dt_real_ms ();
    att->reform_fail_ms = old->row.fail_time;
    attempt_destroy (job->reform_prev);
    job->reform_prev = job->att;
    job->att = att;
    jobs->restarts++;
}

static int tx_reform (struct jobs *jobs, struct job *job, struct attempt *old, void *arg,
                      dt_error_t *err)
{
    struct reform_arg *a = arg;
    char detail[256];

    if (!(a->att = reform_successor (jobs, job, old, "reform", err)))
        return -1;
    struct attempt *att = a->att;
    att->row.spare_nodes = 0; /* the same agents: a spare's stays idle */
    if (reform_store (jobs, job, old, att, err) < 0)
        goto error;
    int64_t now = dt_real_ms ();
    snprintf (detail, sizeof (detail),
              "rank %d lost: the surviving ranks re-form in place as attempt %d "
              "(launched as %s, the same processes)",
              old->row.cause_rank, att->row.attempt, att->row.handle);
    json_t *data = json_pack ("{s:i s:i s:I}", "from_attempt", old->row.attempt, "rank",
                              old->row.cause_rank, "decision_ms",
                              (json_int_t)(now - old->row.fail_time));
    int rc = store_event (jobs->ctx->store, now, job->row.id, att->row.attempt, "reform",
                          old->row.cause_node, old->row.cause_rank, detail, data, err);
    json_decref (data);
    if (rc < 0)
        goto error;
    return 0;
error:
    attempt_destroy (a->att);
    a->att = NULL;
    return -1;
}

bool reform_try (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    struct reform_arg a = { att, NULL };
    dt_error_t err;

    if (!reform_eligible (jobs, att))
        return false;
    jobs_flush (jobs); /* the old attempt's live rows, before it goes */
    if (transact (jobs, job, att, tx_reform, &a, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: re-form: %s: the ordinary restart follows",
                (long long)job->row.id, err.text);
        return false;
    }
    reform_adopt (jobs, job, att, a.att, reform_rendezvous_ms);
    dt_log (LOG_NOTICE, "job %lld restart %d: attempt %d re-forms in place (%s)",
            (long long)job->row.id, job->row.restarts, job->att->row.attempt,
            job->att->row.handle);
    return true;
}

struct attempt *jobs_reform_successor (struct jobs *jobs, const char *token)
{
    char hash[65];
    if (!token)
        return NULL;
    sha256_hex (token, strlen (token), hash);
    for (struct job *j = jobs->list; j; j = j->next)
        if (j->reform_old_sha[0] && j->att && j->att->row.attempt == j->reform_attempt &&
            !fsm_attempt_terminal (j->att->row.state) &&
            j->att->row.state != ATT_ENDING && auth_equal (j->reform_old_sha, hash, 64))
            return j->att;
    return NULL;
}

size_t jobs_reform_command_text (const struct attempt *att, char *buf, size_t len)
{
    int n = snprintf (buf, len, "[{\"kind\":\"reform\",\"attempt\":%d,\"token\":\"%s\"}]",
                      att->row.attempt, att->row.token);
    return n < 0 ? 0 : (size_t)n;
}

int reform_registered (struct jobs *jobs, struct job *job, struct attempt *att,
                       dt_error_t *err)
{
    char detail[200];
    int64_t now = dt_real_ms ();
    if (strcmp (att->row.restart_path, "reform") &&
        strcmp (att->row.restart_path, "hot_spare"))
        return 0;
    snprintf (detail, sizeof (detail),
              "every agent of attempt %d re-registered %lld ms after the decision: "
              "the ranks re-form",
              att->row.attempt, (long long)(now - att->reform_decided_ms));
    json_t *data = json_pack ("{s:I s:I}", "decision_ms",
                              (json_int_t)(att->reform_decided_ms - att->reform_fail_ms),
                              "reform_ms", (json_int_t)(now - att->reform_decided_ms));
    int rc = store_event (jobs->ctx->store, now, job->row.id, att->row.attempt,
                          "reform_registered", NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}
