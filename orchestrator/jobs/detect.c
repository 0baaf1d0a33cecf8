/* detect.c: failure detection and recording: a failure recorded once (with
 * node health), node loss by silence, the end of an attempt the launcher
 * saw first, the controller-side hang watchdog, and relayed signals.
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
#include "orchestrator/jobs/hangpolicy.h"

/* hang_timeout_ms = 0 (auto): the controller's watchdog is the detector
 * (ftpolicy: max(HangTimeoutFloor, 10 x p99 step time)); the agents get
 * this multiple of the floor as a backstop for when the controller is
 * unreachable, since they cannot learn the step times. */
static const int64_t hang_agent_backstop = 4;

/* A failure blamed on NODE: its health record, and a node_suspect event
 * (and a log line) when that makes it suspect (store_node_health_check:
 * failures in enough jobs within the window). */
int job_blame_node (struct jobs *jobs, struct job *job, struct attempt *att,
                    const char *node, const char *cause, const char *detail, int64_t now,
                    dt_error_t *err)
{
    struct ctld_config *cfg = jobs->ctx->cfg;
    bool suspect = false;
    if (store_node_failure (jobs->ctx->store, node, now, job->row.id, att->row.attempt,
                            cause, detail, err) < 0 ||
        store_node_health_check (jobs->ctx->store, node, now, cfg->suspect_window_ms,
                                 cfg->suspect_jobs, cfg->suspect_users,
                                 cfg->suspect_any_cause, &suspect, err) < 0)
        return -1;
    if (!suspect)
        return 0;
    char d[160];
    snprintf (
      d, sizeof (d),
      "node %s is suspect: failures in %lld jobs within %lld s; excluded from new "
      "attempts until cleared",
      node, (long long)cfg->suspect_jobs, (long long)(cfg->suspect_window_ms / 1000));
    if (store_event (jobs->ctx->store, now, job->row.id, att->row.attempt, "node_suspect",
                     node, -1, d, NULL, err) < 0)
        return -1;
    dt_log (LOG_WARNING, "%s", d);
    return 0;
}

struct fail_arg {
    const char *cause, *node, *detail;
    int rank;
    json_t *evidence;
    int64_t first_seen; /* 0: now */
};

static int tx_fail (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                    dt_error_t *err)
{
    struct fail_arg *f = arg;
    int64_t now = dt_real_ms ();

    if (f->first_seen > 0 && f->first_seen < now)
        now = f->first_seen;
    snprintf (att->row.cause, sizeof (att->row.cause), "%s", f->cause);
    snprintf (att->row.cause_node, sizeof (att->row.cause_node), "%s",
              f->node ? f->node : "");
    snprintf (att->row.detail, sizeof (att->row.detail), "%s",
              f->detail ? f->detail : "");
    att->row.cause_rank = f->rank;
    att->row.fail_time = now;
    json_decref (att->row.evidence);
    att->row.evidence = json_incref (f->evidence);
    att->end_state = ATT_FAILED;
    /* Nothing started yet: nothing to end. */
    if (att->row.handle[0] == '\0' && att->row.state == ATT_SUBMITTED) {
        if (att_set_state (jobs, att, ATT_FAILED, err) < 0)
            return -1;
    }
    else if (att_set_state (jobs, att, ATT_ENDING, err) < 0)
        return -1;
    if (store_event (jobs->ctx->store, now, job->row.id, att->row.attempt, f->cause,
                     f->node, f->rank, f->detail, f->evidence, err) < 0)
        return -1;
    if (f->node && *f->node &&
        job_blame_node (jobs, job, att, f->node, f->cause, f->detail, now, err) < 0)
        return -1;
    return job_after_failure (jobs, job, att, err);
}

static void attempt_fail_at (struct jobs *jobs, struct attempt *att, const char *cause,
                             const char *node, int rank, const char *detail,
                             json_t *evidence, int64_t first_seen);

void jobs_attempt_fail (struct jobs *jobs, struct attempt *att, const char *cause,
                        const char *node, int rank, const char *detail, json_t *evidence)
{
    attempt_fail_at (jobs, att, cause, node, rank, detail, evidence, 0);
}

/* The failure, first seen at 'first_seen' (epoch ms; 0: now), e.g. the end
 * time Slurm gives for a NODE_FAIL that the controller learns later. */
static void attempt_fail_at (struct jobs *jobs, struct attempt *att, const char *cause,
                             const char *node, int rank, const char *detail,
                             json_t *evidence, int64_t first_seen)
{
    struct fail_arg f = { cause, node, detail, rank, evidence, first_seen };
    dt_error_t err;

    if (att->row.state == ATT_ENDING || fsm_attempt_terminal (att->row.state)) {
        dt_log (LOG_DEBUG, "job %lld attempt %d: %s ignored (already %s)",
                (long long)att->row.job_id, att->row.attempt, cause,
                fsm_attempt_state_name (att->row.state));
        json_decref (evidence);
        return;
    }
    dt_log (LOG_NOTICE, "job %lld attempt %d failed: %s%s%s rank %d: %s",
            (long long)att->row.job_id, att->row.attempt, cause, node ? " node " : "",
            node ? node : "", rank, detail ? detail : "");
    if (transact (jobs, att->job, att, tx_fail, &f, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: recording failure %s: %s", (long long)att->row.job_id,
                cause, err.text);
        json_decref (evidence);
        return;
    }
    json_decref (evidence);
    /* The survivors keep running and re-form with a replacement. */
    if (att->row.state == ATT_ENDING &&
        (reform_try (jobs, att) || hot_spare_try (jobs, att)))
        return;
    if (att->row.state == ATT_ENDING && att->row.handle[0]) {
        /* Surviving data-parallel ranks may still save the whole state
         * (a just-in-time checkpoint): let them, for a bounded
         * time, before their processes are cancelled. */
        if (att->jit_step > 0 || jit_may_help (att, cause)) {
            jit_window_open (att);
            if (att->jit_step == 0)
                return;
            jit_window_close (jobs, att, "committed before the failure was recorded");
        }
        else if (att->jit_nsets > 0) {
            /* Survivors reported sets and exited before the failure was
             * recorded, without one that could be committed: say so. */
            jit_window_open (att);
            jit_window_close (jobs, att,
                              "the surviving ranks exited before the failure "
                              "was recorded, without a complete set");
        }
        else if (jit_applies (att, cause) && jit_why_none (att, dt_real_ms ())) {
            /* Only ranks without the state run (a failed re-formation's
             * replacements): nothing to wait for; say why. */
            jit_window_open (att);
            jit_window_close (jobs, att, jit_why_none (att, dt_real_ms ()));
        }
        else if (jit_zero1_lost (att, cause)) {
            /* Nothing to wait for: say so, resume from the last commit. */
            jit_window_open (att);
            jit_window_close (jobs, att, "zero1");
        }
        attempt_cancel (jobs, att);
    }
    if (fsm_attempt_terminal (att->row.state))
        att->job->restart_at_ms = dt_real_ms () + backoff_ms (att->job);
}

static int64_t attempt_hang_timeout (struct jobs *jobs, struct attempt *att, bool busy,
                                     double *p99)
{
    struct ft_hang_params hp = ft_hang_defaults;
    hp.floor_ms = jobs->ctx->cfg->hang_floor_ms;
    *p99 = ft_percentile (att->steptime, att->nsteptime, 99.0);
    int64_t t = ft_hang_timeout_ms (&hp, att->job->spec.hb.hang_timeout_ms, *p99,
                                    att->nsteptime, busy);
    /* A fixed timeout is the agents' too, and an agent sees its ranks'
     * steps a heartbeat earlier: the controller's watchdog is their
     * backstop one heartbeat interval later, so that the agent next to a
     * hung rank is the one that detects and blames it. */
    if (att->job->spec.hb.hang_timeout_ms > 0)
        t += att->job->spec.hb.interval_ms;
    return t;
}

static const char *cause_of_launcher_end (const struct launcher_status *st)
{
    if (!strcmp (st->cause, "completed") || !strcmp (st->cause, "failed"))
        return "agent_exit";
    if (!strcmp (st->cause, "lost"))
        return "agent_lost";
    return st->cause[0] ? st->cause : "agent_exit";
}

/* The controller-side hang watchdog: a rank whose step has not changed
 * for longer than the hang timeout (automatic: ftpolicy; a longer
 * allowance while it reports busy).  hangpolicy.c decides whom to blame:
 * a stopped rank, then one not waiting on its peers, then a waiting one
 * (a frozen rank may even be one step ahead: it finished a collective
 * whose last message to a peer it never sent).  When more than one rank
 * of the chosen class stalled, the failure names no node (a wrong blame
 * would exclude a healthy node) and the evidence lists the candidates. */
enum { candidates_max = 16 }; /* ranks listed in the evidence of an unattributed hang */

static void attempt_watchdog (struct jobs *jobs, struct attempt *att, int64_t now)
{
    struct hang_verdict v;
    double p99 = NAN;

    if (att->stopping)
        return; /* a planned stop has its own grace (the agents') */
    /* The two timeouts (busy or not) once, not per rank (a sort each). */
    int64_t t_idle = attempt_hang_timeout (jobs, att, false, &p99);
    int64_t t_busy = attempt_hang_timeout (jobs, att, true, &p99);
    if (!hang_decide (att->ranks, att->row.world_size, now, t_idle, t_busy, &v))
        return;
    const struct rank *worst = &att->ranks[v.rank];
    int wr = v.rank, over = v.over, stalled = v.stalled;
    enum hang_class wcls = v.cls;
    int64_t timeout = v.timeout_ms;
    int ties = stalled > 1 ? stalled - 1 : 0;
    char detail[320], tbuf[40];
    snprintf (
      detail, sizeof (detail),
      "rank %d on %s made no step progress for %lld ms "
      "(last step %lld; %s hang timeout %lld ms%s); it is %s",
      wr, worst->node, (long long)(now - worst->progress_ms), (long long)worst->step,
      att->job->spec.hb.hang_timeout_ms > 0 ? "fixed" : "automatic", (long long)timeout,
      worst->busy ? ", busy allowance" : "", hang_class_name (wcls));
    json_t *ev = json_pack (
      "{s:I s:I s:I s:b s:b s:b s:i s:i s:s s:s}", "idle_ms",
      (json_int_t)(now - worst->progress_ms), "timeout_ms", (json_int_t)timeout,
      "last_step", (json_int_t)worst->step, "busy", worst->busy, "waiting",
      worst->waiting, "stopped", worst->stopped, "ranks_over_timeout", over, "tied_ranks",
      ties, "last_progress", dt_format_time (worst->progress_ms, tbuf, sizeof (tbuf)),
      "detected_by", "controller");
    json_object_set_new (ev, "p99_step_ms", isnan (p99) ? json_null () : json_real (p99));
    json_object_set_new (ev, "step_samples", json_integer (att->nsteptime));
    if (ties) {
        /* The first few: a stalled 80,000-rank job would otherwise put
         * megabytes into every view of the job. */
        json_t *cand = json_array ();
        for (int r = 0;
             r < att->row.world_size && json_array_size (cand) < candidates_max; r++)
            if (att->ranks[r].seen && att->ranks[r].progress_ms &&
                hang_class (&att->ranks[r]) == wcls &&
                now - att->ranks[r].progress_ms > timeout / 2)
                json_array_append_new (
                  cand, json_pack ("{s:i s:s}", "rank", r, "node", att->ranks[r].node));
        json_object_set_new (ev, "candidates", cand);
        json_object_set_new (ev, "candidates_total", json_integer (ties + 1));
        snprintf (
          detail, sizeof (detail),
          "%d ranks made no step progress for %lld ms, the "
          "lowest at step %lld (%s hang timeout %lld ms), all %s: which one hangs "
          "is not known",
          ties + 1, (long long)(now - worst->progress_ms), (long long)worst->step,
          att->job->spec.hb.hang_timeout_ms > 0 ? "fixed" : "automatic",
          (long long)timeout, hang_class_name (wcls));
    }
    jobs_attempt_fail (jobs, att, "hang", ties ? NULL : worst->node, ties ? -1 : wr,
                       detail, ev);
}

/* The launcher saw every process of a running or starting attempt end
 * before the attempt did: a failure, attributed to a node when the
 * launcher's word or the agents' silence names one. */
void attempt_launcher_failed (struct jobs *jobs, struct attempt *att,
                              const struct launcher_status *st, int64_t now)
{
    char detail[256];
    const char *cause = cause_of_launcher_end (st);
    struct agent *silent = NULL;
    snprintf (detail, sizeof (detail),
              "agents ended before the attempt did: "
              "%s",
              st->detail[0] ? st->detail : st->cause);
    /* A node failure the scheduler names no node for: blame the
     * agent that has been silent longest (over two intervals), the
     * one heartbeats would declare lost a little later. */
    if (st->end_kind == LAUNCHER_END_NODE_FAIL) {
        int64_t hb = att->job->spec.hb.interval_ms;
        for (int i = 0; i < att->nagents; i++) {
            struct agent *ag = &att->agents[i];
            if (!ag->done && now - ag->last_hb_ms > 2 * hb &&
                (!silent || ag->last_hb_ms < silent->last_hb_ms))
                silent = ag;
        }
    }
    else {
        /* Agents that ended without a word about their
         * ranks (no exit reported, not done) vanished with
         * their node: when exactly one did, it is the
         * failure. */
        int nv = 0;
        struct agent *v = NULL;
        for (int i = 0; i < att->nagents; i++) {
            struct agent *ag = &att->agents[i];
            bool running = false;
            for (int r = 0; r < att->row.world_size && !ag->done && !ag->spare; r++)
                if (att->ranks[r].seen && !strcmp (att->ranks[r].node, ag->node) &&
                    !strcmp (att->ranks[r].state, "running"))
                    running = true;
            if (running) {
                nv++;
                v = ag;
            }
        }
        if (nv == 1) {
            silent = v;
            snprintf (detail, sizeof (detail),
                      "the agent on %.63s ended "
                      "without reporting its ranks (%.120s)",
                      v->node, st->detail[0] ? st->detail : st->cause);
        }
    }
    json_t *ev =
      json_pack ("{s:s s:i}", "launcher_cause", st->cause, "exit_code", st->exit_code);
    if (silent)
        json_object_set_new (ev, "heartbeat_gap_ms",
                             json_integer (now - silent->last_hb_ms));
    attempt_fail_at (jobs, att, cause, silent ? silent->node : NULL, -1, detail, ev,
                     st->end_time_ms);
}

/* The agent silent longest (not done), or NULL; *next: the one after it. */
static struct agent *silent_longest (struct attempt *att, struct agent **next)
{
    struct agent *lost = NULL;
    *next = NULL;
    for (int i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        if (ag->done)
            continue;
        if (!lost || ag->last_hb_ms < lost->last_hb_ms) {
            *next = lost;
            lost = ag;
        }
        else if (!*next || ag->last_hb_ms < (*next)->last_hb_ms)
            *next = ag;
    }
    return lost;
}

static const int64_t loss_wait_ms = 10;

/* AG, silent longest (NEXT after it), is lost now: silent over 'limit',
 * or over 2 intervals (hb) when corroborated (*corr).
 *
 * In a fan-in tree a neighbour (the node's relay, or its child that had to
 * go around it) may say in a heartbeat that it has not heard from the node
 * either (for half an interval at least: a child learns at its next
 * heartbeat that its relay is gone; or at once when the relay saw the
 * child's connection close).  That heartbeat proves the neighbour
 * alive after the node's last one, so the silence is the node's own, not a
 * dead relay's, and 2 intervals of it suffice, provided the node is the
 * only one silent: every other agent was heard from since the report, the
 * reporter too (a relay that reported its late child and died at once, its
 * child's lines with it, is not vouched for).  When the report is a child's
 * whose connection to the node, its relay, failed (a refused or timed-out
 * connection, not merely a late heartbeat), or a relay's whose child's
 * connection closed (the kernel of a dead process closes its sockets; a
 * live child keeps its connection), other agents heard within 7/4
 * of an interval count as heard too (the neighbours of a lost node keep
 * heartbeating after their ranks ended, agent.c), so that the loss is
 * declared when 2 intervals are over.  A relay's report that a child is
 * late is weaker evidence (a child on a loaded machine is often a quarter
 * interval late; the looser rule blamed healthy leaves, t0785 under a load
 * of 10-17 on 2 cores), so for it the others must have been heard
 * since.  Only the node silent longest may be declared (with either
 * limit).  The check comes when the loss becomes due (jobs->loss_due_ms),
 * not at the next tick. */
static bool loss_due (struct jobs *jobs, struct agent *ag, struct agent *next,
                      int64_t now, int64_t hb, int64_t limit, bool *corr,
                      int64_t *silent_ms)
{
    int64_t tree_limit = hb > 0 && 2 * hb < limit ? 2 * hb : limit;
    bool strong = ag->unheard_how != UNHEARD_LATE;
    bool reported = tree_limit < limit && ag->unheard_at_ms > ag->last_hb_ms &&
                    (2 * ag->unheard_for_ms >= hb || ag->unheard_how == UNHEARD_CLOSED);
    /* Silence counts from the node's last heartbeat; for a child whose
     * connection to its relay closed, from when the relay last heard it,
     * provided that was the line the controller got last (half an
     * interval before it at most: the relay holds its children's lines for
     * a quarter interval, and the way up takes some time; a line of the
     * child's that went another way would be an interval later), so that
     * the tree's delay does not add to the time to detection (with the
     * short limit only). */
    int64_t last = ag->last_hb_ms;
    if (reported && ag->unheard_how == UNHEARD_CLOSED) {
        int64_t heard = ag->unheard_at_ms - ag->unheard_for_ms;
        if (heard < last && 2 * (last - heard) <= hb)
            last = heard;
    }
    int64_t since =
      ag->last_hb_ms > jobs->heard_since_ms ? ag->last_hb_ms : jobs->heard_since_ms;
    int64_t since_corr = last > jobs->heard_since_ms ? last : jobs->heard_since_ms;
    *corr = reported && (!next || next->last_hb_ms > ag->unheard_at_ms ||
                         (strong && 4 * (now - next->last_hb_ms) < 7 * hb));
    *silent_ms = now - (*corr ? last : ag->last_hb_ms);
    if (*corr ? now - since_corr > tree_limit : now - since > limit)
        return true;
    /* (past due, it waits for the others to be heard: a look every
     * loss_wait_ms) */
    int64_t due = since_corr + tree_limit + 1 > now ? since_corr + tree_limit + 1
                                                    : now + loss_wait_ms;
    if (reported && (!jobs->loss_due_ms || due < jobs->loss_due_ms))
        jobs->loss_due_ms = due;
    return false;
}

static const int64_t loss_scan_ms = 100;

/* enum unheard_how in the detail of a loss and in its event's data. */
static const char *const unheard_text[] = {
    [UNHEARD_LATE] = "",
    [UNHEARD_RELAY_FAILED] = " (its child's connection to it failed)",
    [UNHEARD_CLOSED] = " (its connection to its relay closed)",
};
static const char *const unheard_evidence[] = {
    [UNHEARD_LATE] = "late",
    [UNHEARD_RELAY_FAILED] = "connection_failed",
    [UNHEARD_CLOSED] = "connection_closed",
};

/* A running attempt: node loss (silence), a peer loss no failure
 * explains, and the hang watchdog. */
void attempt_check_running (struct jobs *jobs, struct attempt *att, int64_t now)
{
    int64_t timeout = att->job->spec.hb.node_timeout_ms;
    /* Heartbeats deferred the attempt-wide pass (a large attempt). */
    if (att->progress_dirty &&
        dt_mono_ms () - att->progress_last_ms >= progress_gap_ms (att) &&
        jobs_pass_ok (jobs, att)) {
        jobs_progress (jobs, att);
        if (att->row.state != ATT_RUNNING)
            return;
    }
    /* The ticks that come sooner for waiting passes (jobs_pass_ok) do not
     * scan a huge attempt's agents again: at most every loss_scan_ms, as
     * with the ordinary tick. */
    if (att->row.world_size > pass_bounded_ranks &&
        dt_mono_ms () - att->loss_scan_ms < loss_scan_ms)
        goto watchdog;
    att->loss_scan_ms = dt_mono_ms ();
    /* Node loss: the agent silent longest, counting silence from the
     * end of the controller's own last stall at the earliest.  Once a
     * surviving rank reported that it lost a peer, 2.5 heartbeat
     * intervals of silence suffice: the silence is corroborated, and a
     * peer whose agent still speaks reports its rank's exit instead.
     * With the tick (100 ms) on top, the loss is then declared within
     * the required bound of 3 intervals after the node died (3 intervals
     * of silence measured 3.2 with 250 ms heartbeats). */
    int64_t hb = att->job->spec.hb.interval_ms;
    int64_t limit = timeout;
    if (att->peer_loss_ms && hb > 0 && 5 * hb / 2 < timeout)
        limit = 5 * hb / 2;
    int64_t tree_limit = hb > 0 && 2 * hb < limit ? 2 * hb : limit;
    struct agent *next = NULL, *lost = silent_longest (att, &next);
    bool lost_corr = false;
    int64_t silent_ms = 0;
    if (lost && !loss_due (jobs, lost, next, now, hb, limit, &lost_corr, &silent_ms))
        lost = NULL;
    if (lost) {
        struct agent *ag = lost;
        char detail[256];
        if (lost_corr)
            snprintf (detail, sizeof (detail),
                      "no heartbeat from %s for %lld ms (over 2 intervals), and a "
                      "neighbour in the fan-in tree has not heard from it for %lld ms%s",
                      ag->node, (long long)silent_ms, (long long)ag->unheard_for_ms,
                      unheard_text[ag->unheard_how]);
        else if (limit < timeout)
            snprintf (detail, sizeof (detail),
                      "no heartbeat from %s for %lld ms (over 2.5 "
                      "intervals) after a surviving rank reported losing a peer",
                      ag->node, (long long)(now - ag->last_hb_ms));
        else
            snprintf (detail, sizeof (detail),
                      "no heartbeat from %s for %lld ms (timeout "
                      "%lld ms)",
                      ag->node, (long long)(now - ag->last_hb_ms), (long long)timeout);
        char tbuf[40];
        jobs_attempt_fail (
          jobs, att, "node_lost", ag->node, -1, detail,
          json_pack ("{s:I s:I s:s s:b s:b s:s?}", "heartbeat_gap_ms",
                     (json_int_t)(now - ag->last_hb_ms), "timeout_ms",
                     (json_int_t)(lost_corr ? tree_limit : limit), "last_heartbeat",
                     dt_format_time (ag->last_hb_ms, tbuf, sizeof (tbuf)),
                     "peer_loss_reported", att->peer_loss_ms != 0, "neighbour_unheard",
                     lost_corr, "neighbour_evidence",
                     lost_corr ? unheard_evidence[ag->unheard_how] : NULL));
        return;
    }
    /* A rank exited after a just-in-time checkpoint: it lost a peer.
     * The peer's own failure (its exit, its node's silence) names the
     * cause; if none shows up within the node timeout, fail anyway,
     * blaming no node. */
    if (att->survivor_exit_ms && now - att->survivor_exit_ms > timeout + 1000) {
        char detail[192];
        snprintf (detail, sizeof (detail),
                  "ranks exited after losing a peer (just-in-time "
                  "checkpoint of step %lld), and no failure of the peer was seen within "
                  "%lld ms",
                  (long long)att->jit_step, (long long)(timeout + 1000));
        jobs_attempt_fail (
          jobs, att, "trainer_exit", NULL, -1, detail,
          json_pack ("{s:I s:b}", "jit_step", (json_int_t)att->jit_step, "peer_lost", 1));
        return;
    }
watchdog:
    /* The watchdog visits every rank: a large attempt's as often as its
     * attempt-wide pass may run (hang timeouts are seconds). */
    if (dt_mono_ms () - att->watchdog_last_ms >= progress_gap_ms (att) &&
        jobs_pass_ok (jobs, att)) {
        att->watchdog_last_ms = dt_mono_ms ();
        attempt_watchdog (jobs, att, now);
    }
}

int64_t jobs_hang_timeout_ms (const struct job *job)
{
    int64_t h = job->spec.hb.hang_timeout_ms;
    /* Auto: the agents' own detector is only a backstop (see above). */
    return h > 0 ? h : hang_agent_backstop * ft_hang_defaults.floor_ms;
}

void jobs_signal (struct jobs *jobs, struct attempt *att, const char *node,
                  const char *detail)
{
    dt_error_t err;
    const char *cause = detail && strstr (detail, "SIGUSR1") ? "time_limit" : "preempted";
    if (jobs_note (jobs, att, "signal", node, -1, detail, NULL, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    /* The agent already asked its ranks to stop (the trainers agree on the
     * step among themselves); the stop command reaches the other nodes'
     * agents too, and the end becomes a restart, not a completion. */
    char d[256];
    snprintf (d, sizeof (d), "%s on %s", detail ? detail : "signal", node);
    attempt_stop (jobs, att, cause, NULL, -1, d);
    att->stop_step = 0; /* at each rank's next step */
}
