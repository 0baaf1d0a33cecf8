/* treeplan.c: each agent's place in its attempt's fan-in tree (see
 * treeplan.h and common/tree.h). */
#include <config.h>
#include <stdio.h>
#include <string.h>

#include "common/tree.h"
#include "common/log.h"
#include "orchestrator/hbparse.h"
#include "orchestrator/jobs.h"
#include "orchestrator/treeplan.h"

/* The node of node rank r (the agents are sorted by node rank at the
 * rendezvous, so usually at index r). */
static struct agent *agent_at_rank (struct attempt *att, int r)
{
    if (r >= 0 && r < att->nagents && att->agents[r].node_rank == r)
        return &att->agents[r];
    for (int i = 0; i < att->nagents; i++)
        if (att->agents[i].node_rank == r)
            return &att->agents[i];
    return NULL;
}

/* The agent's place in the fan-in tree (common/tree.h): the width and its
 * ancestors' relay URLs, nearest first; its heartbeats go to the first
 * one it can reach, else to the controller.  NULL (no tree): width 0, a
 * spare, a child of the controller, or an ancestor without a relay
 * listener (an older dtagent).  New reference. */
json_t *treeplan_answer (struct attempt *att, struct agent *ag)
{
    int w = (int)att->job->spec.hb.tree_width, n = att->row.num_nodes;
    if (w <= 0 || ag->spare || ag->node_rank < 0 || ag->node_rank >= n)
        return NULL;
    json_t *anc = json_array ();
    for (int p = dt_tree_parent (ag->node_rank, n, w); p >= 0 && anc;
         p = dt_tree_parent (p, n, w)) {
        struct agent *a = agent_at_rank (att, p);
        char url[128];
        if (!a || a->relay_port <= 0) {
            json_decref (anc);
            return NULL;
        }
        snprintf (url, sizeof (url), "http://%s:%d", a->addr, a->relay_port);
        json_array_append_new (anc, json_string (url));
    }
    if (!anc || json_array_size (anc) == 0) {
        json_decref (anc);
        return NULL;
    }
    int first;
    return json_pack ("{s:i s:o s:i}", "width", w, "ancestors", anc, "children",
                      dt_tree_children (ag->node_rank, n, w, &first));
}

void treeplan_unheard (struct attempt *att, struct agent *ag, const struct hb_msg *m,
                       int64_t now)
{
    for (size_t i = 0; i < m->nunheard; i++) {
        const struct hb_unheard *u = &m->unheard[i];
        struct agent *n = u->node[0] ? jobs_agent_find (att, u->node) : NULL;
        for (int k = 0; !u->node[0] && k < att->nagents && !n; k++) {
            struct agent *a = &att->agents[k];
            char url[128];
            snprintf (url, sizeof (url), "http://%s:%d", a->addr, a->relay_port);
            if (a->relay_port > 0 && !strcmp (url, u->relay))
                n = a;
        }
        if (!n || n == ag)
            continue;
        int how = u->closed    ? UNHEARD_CLOSED
                  : u->node[0] ? UNHEARD_LATE
                               : UNHEARD_RELAY_FAILED;
        bool fresh = n->unheard_at_ms <= n->last_hb_ms;
        if (fresh || how > n->unheard_how)
            dt_log (LOG_INFO,
                    "job %lld attempt %d: %s has not heard from %s for %lld ms%s",
                    (long long)att->row.job_id, att->row.attempt, ag->node, n->node,
                    (long long)u->ms,
                    how == UNHEARD_CLOSED         ? " (its connection closed)"
                    : how == UNHEARD_RELAY_FAILED ? " (the connection to it failed)"
                                                  : "");
        /* Stronger evidence since the node's last heartbeat stands: a
         * later, weaker report (the relay's that the child is late, after
         * it said that the child's connection closed) does not undo it. */
        if (fresh || how > n->unheard_how)
            n->unheard_how = how;
        n->unheard_at_ms = now;
        n->unheard_for_ms = u->ms;
    }
}
