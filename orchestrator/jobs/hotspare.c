/* hotspare.c: a hot spare replaces a lost node in a re-formed group.
 *
 * A spare node's agent of a job with restart.reform starts its trainer
 * processes ahead of time, warm, waiting for a rank (agent/ranks.c
 * ranks_standby_start, trainer/train_standby.c).  When a node is lost (its
 * agent fell silent) and every rank on it has a data-parallel replica on
 * a live node, the surviving processes keep running as in a re-form after
 * a rank's exit (reform.c): the attempt ends failed, and a new attempt of
 * the same processes, launcher handle and Slurm step starts at once with a
 * new token (restart path "hot_spare").  The launcher first takes the dead
 * node out of the allocation so that the step lives on without it
 * (launcher drop_node).  Every node keeps its node rank; the spare takes
 * the lost node's, its standby processes become that node's ranks and
 * receive the state from a survivor over the network.  The lost node is
 * excluded as after any node loss.  A re-formation that does not complete
 * in time fails the new attempt, and the ordinary restart follows.
 */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/jobs/internal.h"

/* The new attempt's rendezvous deadline (as for a re-form in place). */
static const int64_t hot_spare_rendezvous_ms = 5000;

static bool agent_live (const struct job *job, const struct agent *ag, int64_t now)
{
    return !ag->done && now - ag->last_hb_ms <= 3 * job->spec.hb.interval_ms + 1000;
}

/* May the node loss that failed 'att' be repaired by a hot spare?  The
 * lost node's agent in *lost, the spare's in *spare. */
static bool hot_spare_eligible (struct jobs *jobs, struct attempt *att,
                                struct agent **lost, struct agent **spare)
{
    struct job *job = att->job;
    int64_t now = dt_real_ms ();
    (void)jobs;

    *lost = *spare = NULL;
    if (!job->spec.restart.reform || job->row.state != JOB_RESTARTING ||
        att->row.spare_nodes < 1 || att->row.world_size < 2 || !att->row.handle[0] ||
        att->stopping || strcmp (att->row.cause, "node_lost") ||
        !att->row.cause_node[0] || job->spec.parallel.zero1 ||
        job->spec.hb.tree_width > 0)
        return false;
    /* The same layout next (no shrink re-planned). */
    if ((job->next_nodes > 0 && job->next_nodes != att->row.num_nodes) ||
        (job->next_tp > 0 && job->next_tp != att->row.tp) ||
        (job->next_pp > 0 && job->next_pp != att->row.pp))
        return false;
    for (int r = 0; r < att->row.world_size; r++)
        if (!att->ranks[r].reform)
            return false;
    for (int i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        if (!strcmp (ag->node, att->row.cause_node))
            *lost = ag;
        else if (ag->spare) {
            /* (its standby processes said they are ready in this attempt) */
            if (!*spare && ag->standby_ready && agent_live (job, ag, now))
                *spare = ag;
        }
        else if (!agent_live (job, ag, now))
            return false; /* a second node is gone */
    }
    if (!*lost || (*lost)->spare || (*lost)->node_rank < 0 || !*spare)
        return false;
    /* Every lost rank's (tp, pp) slice survives in a replica on a live
     * node (ranks are (dp, pp, tp) with tp innermost, node by node). */
    int rpn = att->row.ranks_per_node, k = (*lost)->node_rank;
    int group = (att->row.tp > 0 ? att->row.tp : 1) * (att->row.pp > 0 ? att->row.pp : 1);
    for (int r = k * rpn; r < (k + 1) * rpn; r++) {
        bool held = false;
        for (int s = r % group; s < att->row.world_size && !held; s += group)
            held = s / rpn != k;
        if (!held)
            return false;
    }
    return true;
}

struct hs_arg {
    struct attempt *old, *att;
    struct agent *lost, *spare;
};

static int tx_hot_spare (struct jobs *jobs, struct job *job, struct attempt *old,
                         void *arg, dt_error_t *err)
{
    struct hs_arg *a = arg;
    char detail[640];

    if (!(a->att = reform_successor (jobs, job, old, "hot_spare", err)))
        return -1;
    struct attempt *att = a->att;
    /* The other spares (if any) stay spares of the new attempt. */
    att->row.spare_nodes = old->row.spare_nodes - 1;
    /* Every node keeps its node rank; the spare takes the lost node's. */
    size_t len = 0;
    char **plan = calloc ((size_t)old->row.num_nodes + 1, sizeof (char *));
    if (!plan)
        goto nomem;
    for (int i = 0; i < old->nagents; i++) {
        struct agent *ag = &old->agents[i];
        if (!ag->spare && ag->node_rank >= 0 && ag->node_rank < old->row.num_nodes)
            plan[ag->node_rank] = ag == a->lost ? a->spare->node : ag->node;
    }
    for (int i = 0; i < old->row.num_nodes; i++)
        len += (plan[i] ? strlen (plan[i]) : 0) + 1;
    if (!(att->hs_plan = calloc (len + 1, 1))) {
        free (plan);
        goto nomem;
    }
    for (int i = 0; i < old->row.num_nodes; i++)
        snprintf (att->hs_plan + strlen (att->hs_plan), len + 1 - strlen (att->hs_plan),
                  "%s%s", i ? "," : "", plan[i] ? plan[i] : "");
    free (plan);
    /* Used at once: no backoff. */
    job->restart_wait_ms = 0;
    json_object_set_new (job->row.failure, "backoff_ms", json_integer (0));
    if (reform_store (jobs, job, old, att, err) < 0)
        goto error;
    int64_t now = dt_real_ms ();
    snprintf (detail, sizeof (detail),
              "node %s lost: the surviving ranks re-form as attempt %d with the hot "
              "spare %s in its place (node rank %d; launched as %s, the same "
              "processes)",
              a->lost->node, att->row.attempt, a->spare->node, a->lost->node_rank,
              att->row.handle);
    json_t *data =
      json_pack ("{s:i s:i s:I s:s s:s s:i}", "from_attempt", old->row.attempt, "rank",
                 -1, "decision_ms", (json_int_t)(now - old->row.fail_time), "lost_node",
                 a->lost->node, "spare", a->spare->node, "node_rank", a->lost->node_rank);
    int rc = store_event (jobs->ctx->store, now, job->row.id, att->row.attempt, "reform",
                          a->lost->node, -1, detail, data, err);
    json_decref (data);
    if (rc < 0)
        goto error;
    return 0;
nomem:
    errprintf (err, "out of memory");
error:
    attempt_destroy (a->att);
    a->att = NULL;
    return -1;
}

bool hot_spare_try (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    struct hs_arg a = { att, NULL, NULL, NULL };
    dt_error_t err;

    if (!hot_spare_eligible (jobs, att, &a.lost, &a.spare))
        return false;
    /* The step must outlive the lost node: out of the allocation with it
     * first (Slurm kills a step on a node it sets DOWN).  A launcher
     * without the operation has nothing to remove it from. */
    const struct launcher_ops *lops = jobs->ctx->lops;
    if (lops->drop_node &&
        lops->drop_node (jobs->ctx->launcher, att->row.handle, a.lost->node, &err) < 0) {
        dt_log (LOG_NOTICE, "job %lld: hot spare: %s: the ordinary restart follows",
                (long long)job->row.id, err.text);
        return false;
    }
    jobs_flush (jobs); /* the old attempt's live rows, before it goes */
    if (transact (jobs, job, att, tx_hot_spare, &a, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: hot spare: %s: the ordinary restart follows",
                (long long)job->row.id, err.text);
        return false;
    }
    reform_adopt (jobs, job, att, a.att, hot_spare_rendezvous_ms);
    dt_log (LOG_NOTICE,
            "job %lld restart %d: attempt %d re-forms with the hot spare %s in place of "
            "%s (%s)",
            (long long)job->row.id, job->row.restarts, job->att->row.attempt,
            a.spare->node, a.lost->node, job->att->row.handle);
    return true;
}

void jobs_caps (struct attempt *att, struct agent *ag, int rank, const json_t *ev)
{
    bool waiting = json_is_true (json_object_get (ev, "waiting"));
    if (json_is_true (json_object_get (ev, "standby"))) { /* ('rank' is no rank) */
        if (ag && ag->spare)
            ag->standby_ready = true;
        return;
    }
    att->ranks[rank].reform = json_is_true (json_object_get (ev, "reform"));
    /* A rank lost a peer and waits to re-form: a node's silence from now
     * on is corroborated (detect.c), as after a survivor's exit, so that
     * a lost node is declared while the survivors still wait. */
    if (waiting && att->peer_loss_ms == 0 && att->row.state == ATT_RUNNING)
        att->peer_loss_ms = dt_real_ms ();
}

void hot_spare_order (struct attempt *att)
{
    if (!att->hs_plan || att->nagents < 1)
        return;
    struct agent *v = malloc ((size_t)att->nagents * sizeof (*v));
    bool *used = calloc ((size_t)att->nagents, sizeof (bool));
    int n = 0;
    if (!v || !used)
        goto done;
    /* The planned nodes in node-rank order, then the spares as sorted. */
    for (const char *p = att->hs_plan; *p;) {
        size_t l = strcspn (p, ",");
        for (int i = 0; i < att->nagents; i++)
            if (!used[i] && strlen (att->agents[i].node) == l &&
                !strncmp (att->agents[i].node, p, l)) {
                used[i] = true;
                v[n++] = att->agents[i];
                break;
            }
        p += l + (p[l] == ',');
    }
    for (int i = 0; i < att->nagents; i++)
        if (!used[i])
            v[n++] = att->agents[i];
    memcpy (att->agents, v, (size_t)n * sizeof (*v));
done:
    free (v);
    free (used);
}
