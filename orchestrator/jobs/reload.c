/* reload.c: rebuilding the live jobs, attempts, agents and ranks from
 * SQLite when dtctld starts.
 */
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/jobs/internal.h"

/* The rendezvous writes the node rows of a huge attempt with the bounded
 * flush (attempt.c): rows still without their node rank get it as the
 * rendezvous gave it, from the registration order of all the agents. */
static void reload_node_ranks (struct attempt *att)
{
    int rpn = att->row.ranks_per_node, i;
    for (i = 0; i < att->nagents; i++)
        if (att->agents[i].node_rank < 0 && !att->agents[i].spare)
            break;
    if (i == att->nagents)
        return;
    qsort (att->agents, att->nagents, sizeof (*att->agents), jobs_agent_cmp);
    att->agent_hash_n = -1; /* the node index is stale */
    for (i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        ag->spare = i >= att->row.num_nodes;
        ag->node_rank = ag->spare ? -1 : i;
        for (int l = 0; !ag->spare && l < rpn; l++) {
            int r = i * rpn + l;
            if (r < att->row.world_size) {
                snprintf (att->ranks[r].node, sizeof (att->ranks[r].node), "%s",
                          ag->node);
                att->ranks[r].local_rank = l;
            }
        }
        ag->dirty = true; /* written again, with the rank */
    }
}

/* Rebuild a live attempt's agents and ranks from the store after a restart
 * of the controller.  The agents get a fresh heartbeat grace period. */
static int attempt_reload (struct jobs *jobs, struct job *job, struct attempt *att,
                           dt_error_t *err)
{
    int64_t now = dt_real_ms ();
    json_t *j = store_job_json (jobs->ctx->store, job->row.id, true, err);
    json_t *atts, *a, *n;
    size_t i, k;

    if (!j)
        return -1;
    atts = json_object_get (j, "attempts");
    json_array_foreach (atts, i, a)
    {
        if (json_integer_value (json_object_get (a, "attempt")) != att->row.attempt)
            continue;
        json_t *nodes = json_object_get (a, "nodes");
        json_array_foreach (nodes, k, n)
        {
            if (att->nagents == att->cap) {
                int cap = att->cap ? att->cap * 2 : 8;
                struct agent *p = realloc (att->agents, cap * sizeof (*p));
                if (!p) {
                    json_decref (j);
                    return errnoprintf (err, ENOMEM, "out of memory");
                }
                att->agents = p;
                att->cap = cap;
            }
            struct agent *ag = &att->agents[att->nagents++];
            memset (ag, 0, sizeof (*ag));
            snprintf (ag->node, sizeof (ag->node), "%s",
                      json_string_value (json_object_get (n, "node")));
            ag->order = json_integer_value (json_object_get (n, "node_order"));
            json_t *nr = json_object_get (n, "node_rank");
            ag->node_rank = json_is_integer (nr) ? json_integer_value (nr) : -1;
            ag->spare = json_is_true (json_object_get (n, "spare"));
            snprintf (ag->addr, sizeof (ag->addr), "%s",
                      json_string_value (json_object_get (n, "addr")) ?: "");
            ag->port = json_integer_value (json_object_get (n, "port"));
            ag->pid = json_integer_value (json_object_get (n, "pid"));
            const char *state = json_string_value (json_object_get (n, "state"));
            ag->done = state && !strcmp (state, "done");
            ag->register_time = now;
            ag->last_hb_ms = now;
            int rpn = att->row.ranks_per_node;
            for (int l = 0; ag->node_rank >= 0 && l < rpn; l++) {
                int r = ag->node_rank * rpn + l;
                if (r < att->row.world_size) {
                    snprintf (att->ranks[r].node, sizeof (att->ranks[r].node), "%s",
                              ag->node);
                    att->ranks[r].local_rank = l;
                }
            }
        }
    }
    json_decref (j);
    if (att->row.state != ATT_SUBMITTED && att->row.state != ATT_STARTING)
        reload_node_ranks (att);
    if (att->row.state == ATT_STARTING)
        att->deadline_ms = now + jobs->ctx->cfg->rendezvous_timeout_ms;
    /* A re-formation (reform, hot_spare) still gathering its agents when
     * the controller stopped cannot go on: the agents still on the failed
     * attempt learn the new token only from the re-form command, and the
     * store holds tokens as their SHA-256 only; what tied the old token to
     * the new attempt, and a hot spare's node ranks, were in memory.  It
     * fails at the first tick (attempt_tick), and the ordinary restart
     * follows, from the last committed checkpoint. */
    if (att->row.state == ATT_STARTING &&
        (!strcmp (att->row.restart_path, "reform") ||
         !strcmp (att->row.restart_path, "hot_spare"))) {
        att->reform_orphaned = true;
        dt_log (LOG_NOTICE,
                "job %lld attempt %d: re-forming (%s) when the controller stopped: "
                "the ordinary restart follows",
                (long long)job->row.id, att->row.attempt, att->row.restart_path);
    }
    if (att->row.state == ATT_ENDING) {
        att->ending_since_ms = now;
        if (!strcmp (att->row.cause, "cancelled"))
            att->end_state = ATT_CANCELLED;
        else if (job->row.state == JOB_COMPLETED)
            att->end_state = ATT_SUCCEEDED;
        else
            att->end_state = ATT_FAILED;
    }
    return 0;
}

int jobs_reload (struct jobs *jobs, dt_error_t *err)
{
    int64_t *ids;
    int n;

    if (store_live_jobs (jobs->ctx->store, &ids, &n, err) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        struct job *job = calloc (1, sizeof (*job));
        if (!job) {
            free (ids);
            return errnoprintf (err, ENOMEM, "out of memory");
        }
        if (store_job_load (jobs->ctx->store, ids[i], &job->row, err) < 0) {
            free (job);
            free (ids);
            return -1;
        }
        spec_parse (job->row.spec, &job->spec);
        job->last_metric_step = job->row.last_step;
        /* A fault awaiting its re-run, checkpoints to mark bad, steps to skip */
        if (integ_job_load (jobs, job, err) < 0)
            dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err->text);
        /* Restart-policy state kept in the failure record. */
        job->no_progress_streak =
          json_integer_value (json_object_get (job->row.failure, "no_progress_streak"));
        if (job->row.state == JOB_RESTARTING) {
            const json_t *nl = json_object_get (job->row.failure, "next_layout");
            job->next_nodes =
              json_integer_value (json_object_get (job->row.failure, "next_nodes"));
            job->next_tp = json_integer_value (json_object_get (nl, "tp"));
            job->next_pp = json_integer_value (json_object_get (nl, "pp"));
        }
        store_metrics_count (jobs->ctx->store, job->row.id, &job->metrics_rows, err);
        if (job->row.attempts > 0) {
            struct attempt *att = calloc (1, sizeof (*att));
            if (!att || store_attempt_load (jobs->ctx->store, job->row.id,
                                            job->row.attempts, &att->row, err) < 0) {
                free (att);
                job_destroy (job);
                free (ids);
                return -1;
            }
            att->job = job;
            att->ranks = calloc (att->row.world_size ? att->row.world_size : 1,
                                 sizeof (*att->ranks));
            for (int r = 0; att->ranks && r < att->row.world_size; r++) {
                att->ranks[r].step = -1;
                att->ranks[r].loss = att->ranks[r].compute_ms = att->ranks[r].comm_ms =
                  NAN;
                att->ranks[r].score = NAN;
                att->ranks[r].samples = -1;
                att->ranks[r].exit_code = att->ranks[r].signal = -1;
            }
            job->att = att;
            if (!att->ranks || attempt_reload (jobs, job, att, err) < 0) {
                job_destroy (job);
                free (ids);
                return -1;
            }
        }
        job->restart_at_ms = dt_real_ms ();
        job->next = jobs->list;
        jobs->list = job;
        dt_log (LOG_INFO, "job %lld reloaded: %s, attempt %d %s", (long long)job->row.id,
                fsm_job_state_name (job->row.state), job->row.attempts,
                job->att ? fsm_attempt_state_name (job->att->row.state) : "-");
    }
    free (ids);
    return 0;
}
