/* agent.c: the event loop of a registered dtagent (see agent.h).
 *
 * Single-threaded: one poll() over the signalfd and the trainer socket, with
 * a 100 ms tick for reading the ranks' pages (hang detection) and the
 * heartbeat schedule.  HTTP calls to the controller are blocking but short
 * (ctl.c uses second-scale timeouts and no retries): the agent retries on
 * its own schedule, so an unreachable controller never stops it from
 * watching its ranks. */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/fsutil.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "client/dtclient.h"
#include "agent.h"
#include "chan.h"
#include "ranks.h"
#include "reaper.h"
#include "relay.h"
#include "rundir.h"
#include "agent_int.h"

/* Granularity of hang detection and SIGKILL deadlines. */
static const int agent_tick_ms = 100;
/* How long an agent whose ranks are over keeps trying to deliver their
 * last events (exits, done): a controller restarting meanwhile must still
 * learn that the ranks finished, or it would count the node lost and run
 * the attempt again.  As long as the batch script waits for a controller. */
static const int64_t agent_final_flush_ms = 600000;

/* While a rank waits to re-form: a heartbeat every agent_reform_poll_every_ms
 * for up to agent_reform_poll_ms (the survivor's own wait). */
static const int64_t agent_reform_poll_ms = 3000;
static const int64_t agent_reform_poll_every_ms = 50;

/* ---- events -------------------------------------------------------------- */

void agent_event_add (agent_t *a, json_t *ev)
{
    if (!ev)
        return;
    json_array_append_new (a->events, ev);
    a->next_ev_ms = 0;
}

/* Events go in chunks of at most this many bytes of JSON (the controller's
 * MaxBodySize is 1 MiB by default); a 413 halves the chunk. */
static const size_t events_chunk_max = 256 * 1024;

/* The body for the first events that fit in a->ev_chunk bytes (at least
 * one); *count says how many.  New reference, NULL when out of memory. */
static json_t *events_chunk (agent_t *a, size_t *count)
{
    json_t *batch = json_array ();
    size_t used = 0, n = json_array_size (a->events);
    *count = 0;
    if (!batch)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get (a->events, i);
        char *text = json_dumps (e, JSON_COMPACT);
        size_t len = text ? strlen (text) + 1 : 0;
        free (text);
        if (i > 0 && used + len > a->ev_chunk)
            break;
        json_array_append (batch, e);
        used += len;
        (*count)++;
    }
    json_t *body = json_pack ("{s:s, s:o}", "node", a->ni->name, "events", batch);
    return body;
}

/* Deliver the pending events: one answer per event (schemas/agent-api.md):
 * "accepted" and "refused" ones leave the queue, "retry" ones (and the
 * events of a chunk the controller could not answer) stay, in order. */
static void apply_commands (agent_t *a, const json_t *cmds);

static void events_flush (agent_t *a)
{
    if (a->ev_chunk == 0)
        a->ev_chunk = events_chunk_max;
    while (json_array_size (a->events) > 0 && !a->gone) {
        size_t count = 0;
        json_t *body = events_chunk (a, &count), *data = NULL;
        long status = 0;
        dt_error_t err;
        int rc =
          body ? ctl_post (a->ctl, "/v1/agent/events", body, &status, &data, &err) : -1;
        json_decref (body);
        int64_t now = dt_mono_ms ();
        if (rc < 0 || status >= 500) {
            if (rc < 0 && !a->unreachable)
                dt_log (LOG_WARNING, "controller unreachable, keeping %zu events: %s",
                        json_array_size (a->events), err.text);
            else if (rc == 0)
                dt_log (LOG_WARNING,
                        "controller answered HTTP %ld to %zu events: keeping them",
                        status, count);
            a->unreachable = rc < 0;
            a->ev_backoff_ms = a->ev_backoff_ms ? a->ev_backoff_ms * 2 : 200;
            if (a->ev_backoff_ms > 5000)
                a->ev_backoff_ms = 5000;
            a->next_ev_ms = now + a->ev_backoff_ms;
            json_decref (data);
            return;
        }
        a->unreachable = false;
        a->ev_backoff_ms = 0;
        /* The answer to the events that reported a rank's exit may say
         * re-form now: the batch belonged to the attempt that ended. */
        json_t *cmds = status == 200 && data ? json_object_get (data, "commands") : NULL;
        if (json_is_array (cmds) && json_array_size (cmds) > 0) {
            json_incref (cmds);
            json_decref (data);
            for (size_t i = 0; i < count; i++)
                json_array_remove (a->events, 0);
            apply_commands (a, cmds);
            json_decref (cmds);
            return;
        }
        if (status == CTL_GONE) {
            a->gone = true;
            json_decref (data);
            return;
        }
        if (status == 413) {
            /* Too big for the controller: smaller chunks, down to one
             * event; a single event it cannot take is dropped. */
            json_decref (data);
            if (count > 1) {
                a->ev_chunk = a->ev_chunk / 2 > 1 ? a->ev_chunk / 2 : 1;
                continue;
            }
            dt_log (LOG_ERR,
                    "controller refused an event as too large (HTTP 413): dropped");
            json_array_remove (a->events, 0);
            continue;
        }
        json_t *results = data ? json_object_get (data, "results") : NULL;
        if (status != 200 || !json_is_array (results)) {
            /* The whole request was refused (a bad envelope), or an older
             * controller answered 200 without per-event results. */
            if (status != 200)
                dt_log (LOG_ERR, "controller refused %zu events (HTTP %ld): dropped",
                        count, status);
            for (size_t i = 0; i < count; i++)
                json_array_remove (a->events, 0);
            json_decref (data);
            continue;
        }
        /* Keep the events answered "retry" (and any without an answer). */
        json_t *keep = json_array ();
        size_t nret = 0;
        for (size_t i = 0; i < count && keep; i++) {
            json_t *r = json_array_get (results, i);
            const char *st = json_string_value (json_object_get (r, "status"));
            const char *why = json_string_value (json_object_get (r, "error"));
            if (st && !strcmp (st, "accepted"))
                continue;
            if (st && !strcmp (st, "refused")) {
                dt_log (LOG_ERR, "controller refused an event: %s",
                        why ? why : "(no reason)");
                continue;
            }
            json_array_append (keep, json_array_get (a->events, i));
            nret++;
        }
        if (keep) {
            for (size_t i = count; i < json_array_size (a->events); i++)
                json_array_append (keep, json_array_get (a->events, i));
            json_decref (a->events);
            a->events = keep;
        }
        json_decref (data);
        if (nret > 0) {
            a->ev_backoff_ms = a->ev_backoff_ms ? a->ev_backoff_ms * 2 : 200;
            if (a->ev_backoff_ms > 5000)
                a->ev_backoff_ms = 5000;
            a->next_ev_ms = now + a->ev_backoff_ms;
            return;
        }
    }
}

/* ---- what happens to ranks ----------------------------------------------- */

static void on_rank_exit (struct rank *rk, void *arg)
{
    agent_t *a = arg;
    char tail[2048];
    /* Exits the agent caused (hang, abort, stop) were reported as their
     * cause already. */
    if (rk->killed)
        return;
    if (rk->standby) { /* no rank of the attempt: the spare just turns cold */
        dt_log (LOG_WARNING, "standby process %d exited (status %d, signal %d)",
                rk->local_rank, rk->exit_code, rk->signal);
        return;
    }
    ranks_stderr_tail (rk, tail, sizeof (tail));
    json_t *ev =
      json_pack ("{s:s, s:i, s:i, s:i, s:s}", "kind", "rank_exit", "rank", rk->rank,
                 "exit_code", rk->signal ? 128 + rk->signal : rk->exit_code, "signal",
                 rk->signal, "stderr_tail", tail);
    /* The last step it reported (read from its page at the exit, not at
     * the last heartbeat), so the controller counts the lost work exactly. */
    if (ev && rk->client && rk->last.step >= 0 && rk->last.nreports > 0)
        json_object_set_new (ev, "step", json_integer (rk->last.step));
    agent_event_add (a, ev);
}

static void on_rank_hang (struct rank *rk, int64_t idle_ms, bool stopped, void *arg)
{
    agent_t *a = arg;
    char detail[200];
    snprintf (detail, sizeof (detail), "no step progress for %lld ms (last step %lld)%s",
              (long long)idle_ms, (long long)rk->last.step,
              stopped ? "; the process is stopped (SIGSTOP or a debugger)"
              : rk->last.waiting
                ? "; blocked in a collective all that time: the collective "
                  "itself hangs"
                : "");
    dt_log (LOG_WARNING, "rank %d hangs: %s", rk->rank, detail);
    agent_event_add (a, json_pack ("{s:s, s:i, s:s}", "kind", "hang", "rank", rk->rank,
                                   "detail", detail));
    ranks_kill (a->ranks, rk, a->opts.kill_grace_ms);
}

/* Stop: ranks using libdtclient get DTCLIENT_CMD_STOP (checkpoint and
 * exit); the others cannot hear it and get SIGTERM, as torchrun would do. */
static void stop_ranks (agent_t *a, int64_t step)
{
    if (a->stopping)
        return;
    a->stopping = true;
    a->stop_deadline_ms = dt_mono_ms () + a->opts.stop_grace_ms;
    ranks_command (a->ranks, DTCLIENT_CMD_STOP, step);
    for (int i = 0; i < ranks_count (a->ranks); i++) {
        struct rank *rk = ranks_at (a->ranks, i);
        if (rk->state == RANK_RUNNING && !rk->client) {
            kill (-rk->pid, SIGTERM);
            rk->killed = true;
        }
    }
}

static void on_signal (agent_t *a, int sig)
{
    const char *detail;
    if (sig == SIGCHLD) {
        ranks_reap (a->ranks, on_rank_exit, a);
        return;
    }
    if (a->stopping) {
        dt_log (LOG_WARNING, "%s again: killing the ranks now", strsignal (sig));
        ranks_kill_all (a->ranks, 0);
        a->stop_deadline_ms = dt_mono_ms ();
        return;
    }
    switch (sig) {
    case SIGUSR1: detail = "SIGUSR1 from Slurm: time limit warning"; break;
    case SIGTERM: detail = "SIGTERM: stop requested (Slurm preemption or cancel)"; break;
    case SIGINT: detail = "SIGINT: interrupted"; break;
    default: detail = "SIGHUP: hang-up"; break;
    }
    dt_log (LOG_NOTICE, "%s: asking the ranks to stop (grace %lld ms)", detail,
            (long long)a->opts.stop_grace_ms);
    agent_event_add (a, json_pack ("{s:s, s:s}", "kind", "signal", "detail", detail));
    stop_ranks (a, 0);
}

static void read_signals (agent_t *a)
{
    struct signalfd_siginfo si;
    while (read (a->sigfd, &si, sizeof (si)) == (ssize_t)sizeof (si))
        on_signal (a, (int)si.ssi_signo);
    /* SIGCHLD coalesces; reap anyway in case one was merged. */
    ranks_reap (a->ranks, on_rank_exit, a);
}

/* ---- heartbeats and commands --------------------------------------------- */

static void apply_commands (agent_t *a, const json_t *cmds)
{
    size_t i;
    json_t *c;
    json_array_foreach (cmds, i, c)
    {
        json_t *k = json_object_get (c, "kind"), *s = json_object_get (c, "step");
        const char *kind = json_is_string (k) ? json_string_value (k) : "";
        int64_t step = json_is_integer (s) ? json_integer_value (s) : 0;
        if (strcmp (kind, "checkpoint") == 0) {
            /* The page holds one command: a checkpoint never takes the
             * place of a stop (it includes its checkpoint), an abort or a
             * re-form the trainer has not read yet (ranks_command keeps
             * them); it is offered again with the controller's next
             * answer, which asks for it until it is written. */
            if (step != a->last_ckpt_step && !a->stopping && !a->abort &&
                ranks_command (a->ranks, DTCLIENT_CMD_CHECKPOINT, step) == 0) {
                dt_log (LOG_INFO, "command: checkpoint at step %lld", (long long)step);
                a->last_ckpt_step = step;
            }
        }
        else if (strcmp (kind, "stop") == 0 && step < 0 && !a->reform) {
            /* The attempt ended with a peer's loss and the controller
             * waits for a just-in-time checkpoint: the ranks save the
             * state now and exit on their own (a rank stuck in a
             * collective is woken by its own watch); nothing else stops,
             * the controller cancels what lingers. */
            if (!a->jit_stop_applied && !a->stopping && !a->abort) {
                dt_log (LOG_INFO, "command: stop with a just-in-time checkpoint");
                a->jit_stop_applied = true;
                ranks_command (a->ranks, DTCLIENT_CMD_STOP, step);
            }
        }
        else if (strcmp (kind, "stop") == 0) {
            if (!a->stop_applied) {
                dt_log (LOG_INFO, "command: stop (checkpoint at step %lld)",
                        (long long)step);
                a->stop_applied = true;
                stop_ranks (a, step);
            }
        }
        else if (strcmp (kind, "kill") == 0) {
            /* A rank the controller found hung: SIGKILL at once, so that
             * its peers' collective fails and they save the state. */
            json_t *rj = json_object_get (c, "rank");
            struct rank *rk = json_is_integer (rj)
                                ? ranks_find (a->ranks, (int)json_integer_value (rj))
                                : NULL;
            if (rk && rk->state == RANK_RUNNING && !rk->kill_now) {
                dt_log (LOG_NOTICE, "command: kill rank %d (hung)", rk->rank);
                rk->kill_now = true;
                ranks_kill (a->ranks, rk, 0);
            }
        }
        else if (strcmp (kind, "reform") == 0) {
            json_t *at = json_object_get (c, "attempt"),
                   *tk = json_object_get (c, "token");
            if (json_is_integer (at) && json_is_string (tk))
                agent_reform (a, (int)json_integer_value (at), json_string_value (tk));
        }
        else if (strcmp (kind, "abort") == 0) {
            if (!a->abort) {
                dt_log (LOG_NOTICE, "command: abort: killing the ranks");
                a->abort = true;
                ranks_command (a->ranks, DTCLIENT_CMD_ABORT, 0);
                ranks_kill_all (a->ranks, 0);
            }
        }
        else {
            dt_log (LOG_WARNING, "command '%s' unknown: ignored", kind);
        }
    }
}

static void heartbeat (agent_t *a)
{
    int64_t interval = a->l->heartbeat_interval_ms;
    json_t *body = json_pack ("{s:s, s:o}", "node", a->ni->name, "ranks",
                              ranks_heartbeat_json (a->ranks));
    json_t *data = NULL;
    long status = 0;
    dt_error_t err;
    int rc;
    if (!body)
        rc = errnoprintf (&err, ENOMEM, "out of memory");
    else if (a->relay)
        rc = relay_heartbeat (a->relay, a->ctl, body, &status, &data, &err);
    else
        rc = ctl_post (a->ctl, "/v1/agent/heartbeat", body, &status, &data, &err);
    json_decref (body);
    int64_t now = dt_mono_ms ();
    if (rc < 0) {
        /* Keep the trainers running; retry with a capped backoff that stays
         * well inside the node timeout, so a short outage is not a loss. */
        int64_t cap = a->l->node_timeout_ms / 3;
        if (cap > 5000)
            cap = 5000;
        if (cap < interval)
            cap = interval;
        if (!a->unreachable)
            dt_log (LOG_WARNING, "heartbeat: %s (the ranks keep running)", err.text);
        a->unreachable = true;
        a->hb_backoff_ms = a->hb_backoff_ms ? a->hb_backoff_ms * 2 : interval;
        if (a->hb_backoff_ms > cap)
            a->hb_backoff_ms = cap;
        a->next_hb_ms = now + a->hb_backoff_ms;
        return;
    }
    if (a->unreachable)
        dt_log (LOG_NOTICE, "controller reachable again");
    a->unreachable = false;
    a->hb_backoff_ms = 0;
    a->next_hb_ms =
      now + (now < a->reform_poll_until_ms && !a->stopping ? agent_reform_poll_every_ms
                                                           : interval);
    /* After the first heartbeat, the next one comes at a phase of this
     * agent's own, uniformly within one interval: the agents of an
     * attempt register together (the rendezvous answers them all at
     * once), and in step their heartbeats, and a fan-in tree's relays
     * forwarding them, would reach the controller as one burst each
     * interval (at 40,000 agents, 155 relays of 257 nodes in the first
     * eighth of every second: a backlog of 200 ms).  The gap is shorter
     * than an interval once, never longer, so no silence grows. */
    if (!a->hb_phased && status == 200 && a->next_hb_ms == now + interval) {
        a->hb_phased = true;
        a->next_hb_ms = now + ctl_random_ms (interval);
    }
    /* Refused at the controller's connection limit (ctl_post logged its
     * answer): the next try at a jittered time, so the refused agents do
     * not all return together. */
    if (status == 503)
        a->next_hb_ms = now + ctl_jitter_ms (interval);
    if (status == CTL_GONE)
        a->gone = true;
    else if (status == 200 && data) {
        json_t *cmds = json_object_get (data, "commands");
        if (json_is_array (cmds))
            apply_commands (a, cmds);
    }
    json_decref (data);
}

/* ---- the trainer socket -------------------------------------------------- */

/* A rank's shard is durable: an event for the controller, which checks
 * its path against the one it assigned. */
static void on_shard (agent_t *a, const struct dtproto_msg *m, int conn_rank,
                      struct dtproto_buf *reply)
{
    char crc[16], *path = malloc (m->slen[DTPROTO_T_PATH] + 1);
    if (!path) {
        chan_reply_status (reply, DTCLIENT_ERR_IO, "out of memory");
        return;
    }
    memcpy (path, m->s[DTPROTO_T_PATH], m->slen[DTPROTO_T_PATH]);
    path[m->slen[DTPROTO_T_PATH]] = '\0';
    snprintf (crc, sizeof (crc), "%08x", (unsigned)m->i[DTPROTO_T_CRC32C]);
    json_t *ev =
      json_pack ("{s:s, s:i, s:I, s:s, s:I, s:s}", "kind", "shard", "rank", conn_rank,
                 "step", (json_int_t)m->i[DTPROTO_T_STEP], "path", path, "bytes",
                 (json_int_t)m->i[DTPROTO_T_BYTES], "crc32c", crc);
    /* A just-in-time shard: written by this rank for 'shard_rank'. */
    if (ev && dtproto_has (m, DTPROTO_T_JIT) && m->i[DTPROTO_T_JIT]) {
        json_object_set_new (ev, "jit", json_true ());
        json_object_set_new (ev, "shard_rank",
                             json_integer (dtproto_has (m, DTPROTO_T_RANK)
                                             ? m->i[DTPROTO_T_RANK]
                                             : conn_rank));
    }
    agent_event_add (a, ev);
    free (path);
    chan_reply_status (reply, DTCLIENT_OK, NULL);
}

/* A rank's FLOP report: relayed with the rank added (the controller
 * checks its fields). */
static void on_perf (agent_t *a, const struct dtproto_msg *m, int conn_rank,
                     struct dtproto_buf *reply)
{
    dt_error_t err;
    json_t *perf =
      dt_json_parse ((const char *)m->s[DTPROTO_T_JSON], m->slen[DTPROTO_T_JSON], &err);
    if (!json_is_object (perf) || json_object_get (perf, "kind") ||
        json_object_get (perf, "rank")) {
        json_decref (perf);
        chan_reply_status (reply, DTCLIENT_ERR_INVAL,
                           "perf: not a JSON object of FLOP figures");
        return;
    }
    json_object_set_new (perf, "kind", json_string ("perf"));
    json_object_set_new (perf, "rank", json_integer (conn_rank));
    agent_event_add (a, perf);
    chan_reply_status (reply, DTCLIENT_OK, NULL);
}

/* What a rank computes with (dtclient_numerics): relayed with the rank
 * added; the controller checks its members and compares it with the
 * job's pinned numerics. */
static void on_numerics (agent_t *a, const struct dtproto_msg *m, int conn_rank,
                         struct dtproto_buf *reply)
{
    dt_error_t err;
    json_t *n =
      dt_json_parse ((const char *)m->s[DTPROTO_T_JSON], m->slen[DTPROTO_T_JSON], &err);
    if (!json_is_object (n)) {
        json_decref (n);
        chan_reply_status (reply, DTCLIENT_ERR_INVAL, "numerics: not a JSON object");
        return;
    }
    agent_event_add (a, json_pack ("{s:s, s:i, s:o}", "kind", "numerics", "rank",
                                   conn_rank, "numerics", n));
    chan_reply_status (reply, DTCLIENT_OK, NULL);
}

/* What a rank can do (dtclient_declare): kept, and relayed once. */
static void on_caps (agent_t *a, const struct dtproto_msg *m, int conn_rank,
                     struct dtproto_buf *reply)
{
    dt_error_t err;
    json_t *caps =
      dt_json_parse ((const char *)m->s[DTPROTO_T_JSON], m->slen[DTPROTO_T_JSON], &err);
    struct rank *rk = ranks_find (a->ranks, conn_rank);
    bool r = json_is_true (json_object_get (caps, "reform"));
    bool waiting = json_is_true (json_object_get (caps, "waiting"));
    json_decref (caps);
    if (!rk) {
        chan_reply_status (reply, DTCLIENT_ERR_INVAL, "caps: say hello first");
        return;
    }
    if (r && !rk->reform) {
        rk->reform = true;
        /* A hot spare's standby process is no rank: once all are ready the
         * controller may count on them (hotspare.c). */
        if (rk->standby && ranks_standby_ready (a->ranks) == ranks_count (a->ranks))
            agent_event_add (
              a, json_pack ("{s:s, s:i, s:b}", "kind", "caps", "rank", 0, "standby", 1));
        else if (!rk->standby)
            agent_event_add (a, json_pack ("{s:s, s:i, s:b}", "kind", "caps", "rank",
                                           conn_rank, "reform", 1));
    }
    /* It lost a peer and waits: ask the controller now and often (the
     * re-form command, or the stop of the ordinary path, comes sooner
     * than at the next heartbeat). */
    if (waiting && a->reform) {
        /* (the controller then needs less silence to declare a node lost) */
        agent_event_add (a, json_pack ("{s:s, s:i, s:b, s:b}", "kind", "caps", "rank",
                                       conn_rank, "reform", 1, "waiting", 1));
        rk->reform_wait_ms = dt_mono_ms ();
        a->reform_poll_until_ms = dt_mono_ms () + agent_reform_poll_ms;
        a->next_hb_ms = dt_mono_ms ();
    }
    chan_reply_status (reply, DTCLIENT_OK, NULL);
}

static void on_request (const struct dtproto_msg *m, int *conn_rank,
                        struct dtproto_buf *reply, void *arg)
{
    agent_t *a = arg;
    dt_error_t err;
    char key[DTPROTO_MAX_KEY + 1], text[DTPROTO_MAX_TEXT + 1];
    long status = 0;

#define STR(tag, buf)                                                                    \
    (memcpy ((buf), m->s[tag], m->slen[tag]), (buf)[m->slen[tag]] = '\0', (buf))

    switch (m->type) {
    case DTPROTO_HELLO:
        if (ranks_hello (a->ranks, (int)m->i[DTPROTO_T_RANK], (pid_t)m->i[DTPROTO_T_PID],
                         &err) < 0) {
            dt_log (LOG_WARNING, "trainer hello refused: %s", err.text);
            chan_reply_status (reply, DTCLIENT_ERR_INVAL, err.text);
            return;
        }
        *conn_rank = (int)m->i[DTPROTO_T_RANK];
        chan_reply_status (reply, DTCLIENT_OK, NULL);
        return;
    case DTPROTO_SHARD: on_shard (a, m, *conn_rank, reply); return;
    case DTPROTO_SHARD_FAILED:
        agent_event_add (a, json_pack ("{s:s, s:i, s:I, s:s}", "kind", "shard_failed",
                                       "rank", *conn_rank, "step",
                                       (json_int_t)m->i[DTPROTO_T_STEP], "detail",
                                       STR (DTPROTO_T_TEXT, text)));
        chan_reply_status (reply, DTCLIENT_OK, NULL);
        return;
    case DTPROTO_RESULT: {
        json_t *res = dt_json_parse ((const char *)m->s[DTPROTO_T_JSON],
                                     m->slen[DTPROTO_T_JSON], &err);
        if (!json_is_object (res)) {
            json_decref (res);
            dt_log (LOG_WARNING, "rank %d: result refused: not a JSON object",
                    *conn_rank);
            chan_reply_status (reply, DTCLIENT_ERR_INVAL, "result: not a JSON object");
            return;
        }
        agent_event_add (a, json_pack ("{s:s, s:i, s:o}", "kind", "result", "rank",
                                       *conn_rank, "result", res));
        chan_reply_status (reply, DTCLIENT_OK, NULL);
        return;
    }
    case DTPROTO_INTEGRITY: {
        /* Relayed as is: the controller checks its fields. */
        json_t *rep = dt_json_parse ((const char *)m->s[DTPROTO_T_JSON],
                                     m->slen[DTPROTO_T_JSON], &err);
        json_t *st = json_object_get (rep, "step");
        if (!json_is_object (rep) || !json_is_integer (st) ||
            json_integer_value (st) < 0) {
            json_decref (rep);
            chan_reply_status (reply, DTCLIENT_ERR_INVAL,
                               "integrity: not a JSON object with a step");
            return;
        }
        agent_event_add (a, json_pack ("{s:s, s:i, s:O, s:o}", "kind", "integrity",
                                       "rank", *conn_rank, "step", st, "report", rep));
        chan_reply_status (reply, DTCLIENT_OK, NULL);
        return;
    }
    case DTPROTO_PERF: on_perf (a, m, *conn_rank, reply); return;
    case DTPROTO_CAPS: on_caps (a, m, *conn_rank, reply); return;
    case DTPROTO_NUMERICS: on_numerics (a, m, *conn_rank, reply); return;
    case DTPROTO_KV_SET:
        if (ctl_kv_put (a->ctl, STR (DTPROTO_T_KEY, key), m->s[DTPROTO_T_VALUE],
                        m->slen[DTPROTO_T_VALUE], &status, &err) < 0) {
            chan_reply_status (reply, DTCLIENT_ERR_IO, err.text);
            return;
        }
        if (status == CTL_GONE)
            a->gone = true;
        if (status / 100 == 2)
            chan_reply_status (reply, DTCLIENT_OK, NULL);
        else {
            snprintf (text, sizeof (text), "kv set %s: controller answered HTTP %ld", key,
                      status);
            chan_reply_status (
              reply, status == 400 ? DTCLIENT_ERR_INVAL : DTCLIENT_ERR_IO, text);
        }
        return;
    case DTPROTO_KV_GET: {
        void *val = NULL;
        size_t len = 0;
        if (ctl_kv_get (a->ctl, STR (DTPROTO_T_KEY, key), &val, &len, &status, &err) <
            0) {
            chan_reply_status (reply, DTCLIENT_ERR_IO, err.text);
            return;
        }
        if (status == 200) {
            if (len > DTPROTO_MAX_VALUE) {
                chan_reply_status (reply, DTCLIENT_ERR_PROTO, "value larger than 64 KiB");
            }
            else {
                dtproto_begin (reply, DTPROTO_REPLY);
                dtproto_add_int (reply, DTPROTO_T_STATUS, DTCLIENT_OK);
                dtproto_add_bytes (reply, DTPROTO_T_VALUE, val, len);
            }
            free (val);
            return;
        }
        if (status == CTL_GONE)
            a->gone = true;
        if (status == 404)
            chan_reply_status (reply, DTCLIENT_ERR_NOTFOUND, NULL);
        else {
            snprintf (text, sizeof (text), "kv get %s: controller answered HTTP %ld", key,
                      status);
            chan_reply_status (reply, DTCLIENT_ERR_IO, text);
        }
        return;
    }
    default:
        chan_reply_status (reply, DTCLIENT_ERR_PROTO, "unexpected message type");
        return;
    }
#undef STR
}

/* ---- create / run / destroy ---------------------------------------------- */

agent_t *agent_create (ctl_t *ctl, const struct node_info *ni, const struct layout *l,
                       int sigfd, const struct agent_opts *opts, dt_error_t *err)
{
    char cwd[4096];
    agent_t *a = calloc (1, sizeof (*a));
    if (!a) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    a->ctl = ctl;
    a->ni = ni;
    a->l = l;
    a->sigfd = sigfd;
    a->opts = *opts;
    a->last_ckpt_step = -1;
    for (char **e = l->env; e && *e; e++)
        if (!strcmp (*e, "DT_REFORM=1"))
            a->reform = true;
    if (!(a->events = json_array ()))
        goto nomem;

    /* The attempt's directory: a private one (rundir.h) named
     * <run_id>-XXXXXX in the state dir or the workdir, holding the rank
     * logs, their pages and the socket. */
    const char *base = opts->state_dir ? opts->state_dir : l->workdir;
    if (!base)
        base = getcwd (cwd, sizeof (cwd)) ? cwd : ".";
    if (!(a->rundir = rundir_make (base, l->run_id, err)))
        goto error;
    if (!(a->sock = rundir_socket_path (a->rundir, ni->name, &a->sockdir, err)))
        goto error;
    if (!(a->chan = chan_create (a->sock, on_request, a, err)))
        goto error;
    if (!(a->ranks = ranks_create (l, a->rundir, a->sock, err)))
        goto error;
    return a;
nomem:
    errnoprintf (err, ENOMEM, "out of memory");
error:
    agent_destroy (a);
    return NULL;
}

void agent_set_relay (agent_t *a, struct relay *r)
{
    a->relay = r;
}

void agent_destroy (agent_t *a)
{
    if (!a)
        return;
    int saved = errno;
    ranks_destroy (a->ranks); /* SIGKILLs whatever still runs */
    /* ... and whatever a rank left behind, even outside its process group
     * and session (the agent is their subreaper): nothing of the attempt
     * outlives it. */
    int k = reaper_kill_all (2000);
    if (k > 0)
        dt_log (LOG_NOTICE, "killed %d leftover process%s of the ranks", k,
                k == 1 ? "" : "es");
    chan_destroy (a->chan);
    if (a->sockdir)
        rmdir (a->sockdir);
    free (a->sockdir);
    json_decref (a->events);
    if (a->has_own_l)
        layout_clear (&a->own_l);
    free (a->rundir);
    free (a->sock);
    free (a);
    errno = saved;
}

/* Deliver the last events (rank exits, done) before exiting, for a while. */
static void final_flush (agent_t *a)
{
    int64_t until = dt_mono_ms () + agent_final_flush_ms;
    bool said = false;
    while (json_array_size (a->events) > 0 && !a->gone && dt_mono_ms () < until) {
        events_flush (a);
        if (json_array_size (a->events) > 0) {
            if (!said)
                dt_log (LOG_NOTICE,
                        "the ranks are over; delivering their last %zu events "
                        "(for up to %lld s)",
                        json_array_size (a->events),
                        (long long)agent_final_flush_ms / 1000);
            said = true;
            usleep (200 * 1000);
        }
    }
    if (json_array_size (a->events) > 0 && !a->gone)
        dt_log (LOG_ERR, "controller unreachable for %lld s: %zu events not delivered",
                (long long)agent_final_flush_ms / 1000, json_array_size (a->events));
}

/* Every local rank has ended: the agent's exit code, or -1 while it waits
 * for the controller's word. */
static int ranks_over (agent_t *a, int64_t now)
{
    /* A failed rank may be restarted in place: wait for the controller's
     * word (re-form, or stop) a while. */
    if (a->reform && !a->stopping && !a->abort && !ranks_all_succeeded (a->ranks)) {
        if (a->reform_until_ms == 0)
            a->reform_until_ms = now + AGENT_REFORM_WAIT_MS;
        if (now < a->reform_until_ms)
            return -1;
    }
    if (ranks_all_succeeded (a->ranks)) {
        dt_log (LOG_INFO, "every local rank exited 0: done");
        agent_event_add (a, json_pack ("{s:s, s:i}", "kind", "done", "exit_code", 0));
        final_flush (a);
        return 0;
    }
    /* The ranks failed, usually because a peer's node was lost: in a
     * fan-in tree this node may be the only one that can say it no longer
     * hears that node (its relay, or its child), so it stays in the tree
     * until the controller ends the attempt (410) or says stop, for a node
     * timeout and an interval at most (by then the controller has decided
     * without it). */
    if (a->relay && relay_in_tree (a->relay) && !a->stopping && !a->abort &&
        !a->unreachable) {
        if (a->linger_until_ms == 0) {
            a->linger_until_ms =
              now + a->l->node_timeout_ms + a->l->heartbeat_interval_ms;
            dt_log (LOG_INFO,
                    "the ranks are over; heartbeating on in the fan-in tree "
                    "until the attempt ends (for up to %lld ms)",
                    (long long)(a->linger_until_ms - now));
        }
        if (now < a->linger_until_ms)
            return -1;
    }
    final_flush (a);
    return 1;
}

int agent_run (agent_t *a)
{
    enum { MAXFDS = 300 };
    struct pollfd pfd[MAXFDS];
    dt_error_t err;

    if (a->l->spare) {
        dt_log (LOG_INFO, "spare node: idle, heartbeating");
        /* A hot spare: its trainers wait, warm, to replace a lost node's
         * ranks in a re-formed group.  Without them it is a cold spare. */
        if (a->reform && a->l->command && ranks_standby_start (a->ranks, a->l, &err) < 0)
            dt_log (LOG_WARNING, "standby processes: %s: a cold spare", err.text);
    }
    else {
        dt_log (LOG_INFO, "node rank %d of %d, ranks %d..%d of %d, run dir %s",
                a->l->node_rank, a->l->num_nodes, a->l->node_rank * a->l->ranks_per_node,
                (a->l->node_rank + 1) * a->l->ranks_per_node - 1, a->l->world_size,
                a->rundir);
        if (ranks_start (a->ranks, &err) < 0) {
            dt_log (LOG_ERR, "%s", err.text);
            agent_event_add (
              a, json_pack ("{s:s, s:s}", "kind", "node_failure", "detail", err.text));
            ranks_kill_all (a->ranks, 0);
            final_flush (a);
            return 3;
        }
    }
    a->next_hb_ms = dt_mono_ms ();
    for (;;) {
        int64_t now = dt_mono_ms ();
        int64_t timeout = agent_tick_ms;
        if (a->next_hb_ms - now < timeout)
            timeout = a->next_hb_ms - now;
        if (json_array_size (a->events) && a->next_ev_ms - now < timeout)
            timeout = a->next_ev_ms - now;
        /* Children's lines and silent children go up when due. */
        if (a->relay && !a->unreachable && !a->gone) {
            int64_t r = relay_due_in (a->relay, now, a->l->heartbeat_interval_ms / 4);
            if (r >= 0 && r < timeout)
                timeout = r;
        }
        if (timeout < 0)
            timeout = 0;

        pfd[0] = (struct pollfd){ .fd = a->sigfd, .events = POLLIN };
        pfd[1] =
          (struct pollfd){ .fd = a->relay ? relay_fd (a->relay) : -1, .events = POLLIN };
        int n = 2 + chan_pollfds (a->chan, pfd + 2, MAXFDS - 2);
        if (poll (pfd, (nfds_t)n, (int)timeout) < 0 && errno != EINTR) {
            dt_log_errno (LOG_ERR, "poll");
            return 3;
        }
        if (pfd[0].revents & POLLIN)
            read_signals (a);
        chan_process (a->chan, pfd + 2, n - 2);
        /* Children's heartbeats (answered at once, sent up with ours). */
        if (a->relay)
            relay_run (a->relay);
        now = dt_mono_ms ();
        /* Children's lines go up within a quarter interval, not a whole
         * one: each level of the tree adds at most that to what the
         * controller sees of a node. */
        if (a->relay && !a->unreachable && !a->gone &&
            relay_due (a->relay, now, a->l->heartbeat_interval_ms / 4))
            a->next_hb_ms = now;
        ranks_tick (a->ranks, now, a->l->hang_timeout_ms, on_rank_hang, a);
        agent_reform_check_read (a, now);

        if (json_array_size (a->events) && now >= a->next_ev_ms)
            events_flush (a);
        if (!a->gone && now >= a->next_hb_ms)
            heartbeat (a);

        /* ---- is the agent done? ---- */
        if (a->gone) {
            if (a->linger_until_ms) {
                /* Its ranks had failed already: the same end as without
                 * the wait. */
                dt_log (LOG_INFO, "the attempt is over (HTTP 410): exiting");
                final_flush (a);
                return 1;
            }
            dt_log (LOG_NOTICE,
                    "the attempt is over (HTTP 410): killing the ranks, exiting");
            ranks_kill_all (a->ranks, 0);
            return 2;
        }
        if (a->l->spare) {
            if (a->stopping || a->abort) {
                final_flush (a);
                return 0;
            }
            continue;
        }
        if (ranks_running (a->ranks) == 0) {
            int rc = ranks_over (a, now);
            if (rc >= 0)
                return rc;
            continue;
        }
        if (a->stopping && now >= a->stop_deadline_ms) {
            dt_log (LOG_WARNING, "stop grace period over: killing %d ranks",
                    ranks_running (a->ranks));
            ranks_kill_all (a->ranks, 0);
            a->stop_deadline_ms = now + 1000;
        }
    }
}
