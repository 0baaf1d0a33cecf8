/* agent_reform.c: re-forming in place (see agent_int.h).  The controller
 * made a new attempt of the same processes: the agent takes the new
 * token, registers again, restarts its failed local ranks as replacements
 * (or, on a hot spare, hands the lost node's ranks to its standby
 * processes) and tells its running ranks to re-form; survivors stuck in a
 * collective of the old group are killed so that the ordinary restart
 * follows. */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>

#include "common/dtime.h"
#include "common/log.h"
#include "client/dtclient.h"
#include "agent_int.h"

/* A running rank told to re-form that has not read the command this long
 * after, and waits in a collective all along, is stuck on its lost peer:
 * gloo (Debian's 2022 snapshot) closes a pair whose peer died, but never
 * wakes a send of an unbound buffer queued behind an unfinished write, nor
 * a receive whose message had begun to arrive; such a collective waits
 * out the communicator's timeout (60 s).  The rank is killed and reported,
 * so the re-formation fails over to the ordinary restart at once. */
static const int64_t agent_reform_read_ms = 3000;

/* The new layout 'nl' (stolen) of a hot spare's agent in the re-formed
 * attempt: still a spare (its standby processes keep waiting), or the
 * lost node's replacement: its standby processes take over that node's
 * ranks and join the group. */
static void reform_spare (agent_t *a, int attempt, struct layout *nl, int64_t t0)
{
    if (nl->world_size != a->l->world_size ||
        nl->ranks_per_node != a->l->ranks_per_node ||
        (!nl->spare && ranks_take_over (a->ranks, nl->node_rank) < 0)) {
        dt_log (LOG_ERR, "re-form as attempt %d: %s: ending the standby processes",
                attempt,
                nl->spare ? "the layout changed" : "the standby processes are not ready");
        layout_clear (nl);
        a->gone = true;
        return;
    }
    if (a->has_own_l)
        layout_clear (&a->own_l);
    a->own_l = *nl;
    a->has_own_l = true;
    a->l = &a->own_l;
    ranks_set_layout (a->ranks, a->l);
    json_array_clear (a->events);
    a->last_ckpt_step = -1;
    if (a->l->spare) {
        dt_log (LOG_INFO, "re-formed as attempt %d: still a spare", attempt);
        return;
    }
    ranks_command (a->ranks, DTCLIENT_CMD_REFORM, attempt);
    dt_log (LOG_NOTICE,
            "hot spare: node rank %d of attempt %d, ranks %d..%d taken over by the "
            "standby processes in %lld ms (registration included)",
            a->l->node_rank, attempt, a->l->node_rank * a->l->ranks_per_node,
            (a->l->node_rank + 1) * a->l->ranks_per_node - 1,
            (long long)(dt_mono_ms () - t0));
    a->next_hb_ms = dt_mono_ms ();
}

/* The controller made a new attempt of the same processes (re-form in
 * place): take its token, register with it (the same node rank, a new
 * layout), drop what the old attempt had not delivered (it must never
 * reach the new one), restart the failed local ranks as replacements
 * that join from their peers, and tell the running ones to re-form. */
void agent_reform (agent_t *a, int attempt, const char *token)
{
    dt_error_t err;
    struct layout nl;
    int64_t t0 = dt_mono_ms ();

    if (!a->reform || attempt <= a->l->attempt || a->stopping || a->abort || a->gone)
        return;
    dt_log (LOG_NOTICE, "command: re-form as attempt %d", attempt);
    if (ctl_set_token (a->ctl, token) < 0 ||
        ctl_register (a->ctl, a->ni, a->l->node_timeout_ms, -1, &nl, &err) < 0) {
        dt_log (LOG_ERR, "re-form as attempt %d: %s: ending the ranks", attempt,
                err.text);
        a->gone = true;
        return;
    }
    if (a->l->spare) {
        reform_spare (a, attempt, &nl, t0);
        return;
    }
    if (nl.node_rank != a->l->node_rank || nl.world_size != a->l->world_size ||
        nl.ranks_per_node != a->l->ranks_per_node) {
        dt_log (LOG_ERR, "re-form as attempt %d: the layout changed: ending the ranks",
                attempt);
        layout_clear (&nl);
        a->gone = true;
        return;
    }
    if (a->has_own_l)
        layout_clear (&a->own_l);
    a->own_l = nl;
    a->has_own_l = true;
    a->l = &a->own_l;
    ranks_set_layout (a->ranks, a->l);
    json_array_clear (a->events);
    a->last_ckpt_step = -1;
    a->reform_until_ms = 0;
    a->reform_poll_until_ms = 0;
    ranks_command (a->ranks, DTCLIENT_CMD_REFORM, attempt);
    a->reform_at_ms = dt_mono_ms ();
    for (int i = 0; i < ranks_count (a->ranks); i++) {
        struct rank *rk = ranks_at (a->ranks, i);
        if (rk->state == RANK_RUNNING) {
            /* still capable in the new attempt */
            if (rk->reform)
                agent_event_add (a, json_pack ("{s:s, s:i, s:b}", "kind", "caps", "rank",
                                               rk->rank, "reform", 1));
        }
        else if (ranks_relaunch (a->ranks, rk, &err) < 0) {
            dt_log (LOG_ERR, "%s", err.text);
            a->gone = true;
            return;
        }
    }
    dt_log (LOG_INFO, "re-formed as attempt %d in %lld ms (registration included)",
            attempt, (long long)(dt_mono_ms () - t0));
    a->next_hb_ms = dt_mono_ms ();
}

/* agent_reform_read_ms after the re-form command: kill the surviving
 * ranks stuck in a collective of the old group - those that have not read
 * the command, and those that read it in their step loop but never said
 * they wait to re-form (a survivor says so before it re-forms, at most a
 * few seconds before the command: its own wait). */
void agent_reform_check_read (agent_t *a, int64_t now)
{
    if (!a->reform_at_ms || now - a->reform_at_ms < agent_reform_read_ms)
        return;
    int64_t at = a->reform_at_ms;
    a->reform_at_ms = 0;
    for (int i = 0; i < ranks_count (a->ranks); i++) {
        struct rank *rk = ranks_at (a->ranks, i);
        struct dtshm_cmd k;
        if (rk->state != RANK_RUNNING || rk->joining || !rk->page || !rk->last.waiting)
            continue;
        bool unread = dtshm_cmd_unread (rk->page, &k) && k.kind == DTCLIENT_CMD_REFORM;
        if (!unread && rk->reform_wait_ms >= at - AGENT_REFORM_WAIT_MS)
            continue;
        dt_log (LOG_WARNING,
                "rank %d has %s its re-form command in %lld ms and waits in a "
                "collective on its lost peer: killing it (the ordinary restart follows)",
                rk->rank, unread ? "not read" : "not acted on",
                (long long)agent_reform_read_ms);
        ranks_kill (a->ranks, rk, 0);
        rk->killed = false; /* its exit is reported: the re-formation failed */
    }
}
