/* agentapi.c: HTTP handlers of the agent routes (schemas/agent-api.md). */
#include <config.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "common/fsutil.h"
#include "common/httpd.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "orchestrator/agentapi.h"
#include "orchestrator/agentev.h"
#include "orchestrator/agentkv.h"
#include "orchestrator/allocapi.h"
#include "orchestrator/auth.h"
#include "orchestrator/ftpolicy.h"
#include "orchestrator/ckptpath.h"
#include "orchestrator/hbparse.h"
#include "orchestrator/ctld.h"
#include "orchestrator/jobs.h"
#include "orchestrator/metrics.h"
#include "orchestrator/report.h"
#include "orchestrator/treeplan.h"

/* The attempt of the request's token: 401 unknown, 410 ended. */
struct attempt *agentapi_auth (struct ctld *ctx, dt_http_req_t *req)
{
    const char *tok = auth_bearer (req);
    struct attempt *att;
    dt_error_t err;
    int64_t job;
    int n;
    enum attempt_state st;

    if (!tok) {
        dt_http_reply_error (req, 401, NULL, "missing Authorization: Bearer <token>");
        return NULL;
    }
    if ((att = jobs_attempt_by_token (ctx->jobs, tok))) {
        /* An ending attempt is still heard while it waits for surviving
         * ranks' just-in-time checkpoint. */
        if ((att->row.state == ATT_ENDING && !jobs_jit_window (att)) ||
            fsm_attempt_terminal (att->row.state)) {
            dt_http_reply_error (req, 410, NULL, "attempt %d of job %lld has ended (%s)",
                                 att->row.attempt, (long long)att->row.job_id,
                                 fsm_attempt_state_name (att->row.state));
            return NULL;
        }
        return att;
    }
    if (store_attempt_by_token (ctx->store, tok, &job, &n, &st, &err) == 0) {
        dt_http_reply_error (req, 410, NULL, "attempt %d of job %lld has ended", n,
                             (long long)job);
        return NULL;
    }
    if (errno != ENOENT) {
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
        return NULL;
    }
    dt_http_reply_error (req, 401, NULL, "unknown token");
    return NULL;
}

/* Parse the JSON body; answers 400 itself on failure. */
json_t *agentapi_body_json (dt_http_req_t *req)
{
    size_t len;
    const char *b = dt_http_req_body (req, &len);
    dt_error_t err;
    json_t *v;

    if (!b || len == 0) {
        dt_http_reply_error (req, 400, NULL, "request body: expected a JSON object");
        return NULL;
    }
    if (!(v = dt_json_parse (b, len, &err))) {
        dt_http_reply_error (req, 400, NULL, "request body: %s", err.text);
        return NULL;
    }
    if (!json_is_object (v)) {
        json_decref (v);
        dt_http_reply_error (req, 400, NULL, "request body: expected a JSON object");
        return NULL;
    }
    return v;
}

void agentapi_reply_field_error (dt_http_req_t *req, int status, const dt_error_t *err)
{
    char field[128];
    const char *sep = strstr (err->text, ": ");
    size_t n = sep ? (size_t)(sep - err->text) : 0;
    if (n >= sizeof (field) || memchr (err->text, ' ', n))
        n = 0;
    memcpy (field, err->text, n);
    field[n] = '\0';
    dt_http_reply_error (req, status, n ? field : NULL, "%s", err->text);
}

/* --- register -------------------------------------------------------------------- */

static const char *const register_keys[] = {
    "node",          "node_order", "addr",       "port",    "pid", "slurm_job_id",
    "slurm_step_id", "hostinfo",   "relay_port", "wait_ms", NULL,
};

/* A registration that may wait ("wait_ms") is held at most this long
 * while its attempt waits for other agents, and at most half the request
 * timeout. */
static const int64_t register_park_max_ms = 30000;

/* The trainers' environment: the spec's, and the attempt's layout (spec.h's
 * parallel, or a smaller one the restart re-planned) as DT_TP and DT_PP,
 * which dttrain reads for --tp and --pp, and parallel.zero1 as
 * DT_PARALLEL=zero1 (--parallel).  New reference. */
static json_t *trainer_env (struct ctld *ctx, const struct attempt *att)
{
    const struct job *job = att->job;
    int tp = att->row.tp > 0 ? att->row.tp : job->spec.parallel.tp;
    int pp = att->row.pp > 0 ? att->row.pp : job->spec.parallel.pp;
    json_t *env = json_copy (json_object_get (job->row.spec, "env"));
    char b[16];
    if (!env)
        env = json_object ();
    if (!env)
        return NULL;
    /* The job's pinned numerics (its first attempt's BLAS core type...),
     * then the site's settings (PassEnv), where the spec's env does not
     * set them. */
    jobs_numerics_env (ctx->jobs, (struct job *)job, env);
    for (char **e = ctx->cfg->pass_env; e && *e; e++) {
        char name[128];
        const char *eq = strchr (*e, '=');
        snprintf (name, sizeof (name), "%.*s", (int)(eq - *e), *e);
        if (!json_object_get (env, name))
            json_object_set_new (env, name, json_string (eq + 1));
    }
    snprintf (b, sizeof (b), "%d", tp > 0 ? tp : 1);
    json_object_set_new (env, "DT_TP", json_string (b));
    snprintf (b, sizeof (b), "%d", pp > 0 ? pp : 1);
    json_object_set_new (env, "DT_PP", json_string (b));
    if (job->spec.parallel.zero1)
        json_object_set_new (env, "DT_PARALLEL", json_string ("zero1"));
    /* restart.reform: ranks that can re-form in place say so (dttrain). */
    if (job->spec.restart.reform)
        json_object_set_new (env, "DT_REFORM", json_string ("1"));
    return env;
}

static json_t *ready_answer (struct ctld *ctx, struct attempt *att, struct agent *ag)
{
    struct job *job = att->job;
    json_t *spec = job->row.spec;
    json_t *hb = json_object_get (spec, "heartbeat");
    json_t *resume = json_null ();
    char run_id[64], cdir[PATH_MAX];

    snprintf (run_id, sizeof (run_id), "dt-%lld-a%d", (long long)job->row.id,
              att->row.attempt);
    /* The launch checked that it fits (no attempt runs otherwise). */
    if (dt_pathf (cdir, sizeof (cdir), "%s/%lld", job->spec.ckpt.dir,
                  (long long)job->row.id) < 0)
        return NULL;
    /* (a re-formed attempt resumes from its ranks' memory: no checkpoint) */
    if (att->row.resume_step >= 0 && att->row.resume_dir[0])
        resume =
          json_pack ("{s:I s:s s:s}", "step", (json_int_t)att->row.resume_step, "dir",
                     att->row.resume_dir, "manifest_sha256", att->row.resume_sha256);
    json_t *tree = treeplan_answer (att, ag);
    /* the node's name, as the controller knows it (DT_NODE) */
    json_t *env = trainer_env (ctx, att);
    if (env)
        json_object_set_new (env, "DT_NODE", json_string (ag->node));
    json_t *ans = json_pack (
      "{s:o s:s s:I s:i s:s s:i s:i s:i s:i s:b s:s s:i s:i s:i"
      " s:O s:o s:O s:s s:o s:I s:I s:I s:I}",
      "tree", tree ? tree : json_null (), "state", "ready", "job",
      (json_int_t)job->row.id, "attempt", att->row.attempt, "run_id", run_id, "node_rank",
      ag->node_rank, "num_nodes", att->row.num_nodes, "ranks_per_node",
      att->row.ranks_per_node, "world_size", att->row.world_size, "spare", ag->spare,
      "master_addr", att->row.master_addr, "master_port", att->row.master_port,
      "restart_count", job->row.restarts, "max_restarts",
      (int)json_integer_value (
        json_object_get (json_object_get (spec, "restart"), "max_restarts")),
      "command", json_object_get (spec, "command"), "env", env ? env : json_object (),
      "workdir", json_object_get (spec, "workdir"), "checkpoint_dir", cdir, "resume",
      resume, "heartbeat_interval_ms",
      json_integer_value (json_object_get (hb, "interval_ms")), "hang_timeout_ms",
      (json_int_t)jobs_hang_timeout_ms (job), "node_timeout_ms",
      json_integer_value (json_object_get (hb, "node_timeout_ms")),
      /* Trainers that know it checkpoint at every multiple by
       * themselves, so no periodic checkpoint depends on a
       * command arriving ahead of the fastest rank. */
      "checkpoint_every_steps",
      (json_int_t)json_integer_value (
        json_object_get (json_object_get (spec, "checkpoint"), "every_steps")));
    /* The integrity keys, and the bad batches to skip (DT_INTEGRITY_*,
     * DT_SKIP_STEPS). */
    if (ans && jobs_integrity_ready (att, ans) < 0) {
        json_decref (ans);
        return NULL;
    }
    return ans;
}

/* An agent's node name is blamed for failures and may end up in every
 * user's exclude list: it must be a safe word and a node of the attempt's
 * allocation.  Answers the refusal (400/403) with an event and returns
 * true, or returns false. */
static bool node_refused (struct ctld *ctx, struct attempt *att, dt_http_req_t *req,
                          const char *node)
{
    char detail[200];
    dt_error_t err;
    int member = -1;

    if (!ft_node_name_ok (node)) {
        char shown[64];
        size_t k = 0;
        for (const char *p = node; *p && k < 40; p++) /* printable for the log */
            shown[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
        shown[k] = '\0';
        snprintf (detail, sizeof (detail),
                  "an agent registered with node name '%s': not a "
                  "node name (1-%d of [A-Za-z0-9._-], starting with a letter or digit); "
                  "refused",
                  shown, FT_NODE_NAME_MAX);
        if (jobs_note (ctx->jobs, att, "agent_refused", NULL, -1, detail, NULL, &err) < 0)
            dt_log (LOG_WARNING, "%s", err.text);
        dt_http_reply_error (
          req, 400, "node",
          "node: '%s' is not a valid node name (1-%d "
          "characters of [A-Za-z0-9._-], starting with a letter or digit)",
          shown, FT_NODE_NAME_MAX);
        return true;
    }
    if (ctx->lops->node_member)
        member = ctx->lops->node_member (ctx->launcher, att->row.handle,
                                         att->row.nodelist, node);
    if (member == 0) {
        snprintf (detail, sizeof (detail),
                  "an agent registered as node %s, which is not a "
                  "node of attempt %d's allocation (%.60s); refused",
                  node, att->row.attempt,
                  att->row.nodelist[0] ? att->row.nodelist : att->row.handle);
        if (jobs_note (ctx->jobs, att, "agent_refused", NULL, -1, detail, NULL, &err) < 0)
            dt_log (LOG_WARNING, "%s", err.text);
        dt_log (LOG_WARNING, "job %lld: %s", (long long)att->row.job_id, detail);
        dt_http_reply_error (req, 403, "node",
                             "node: %s is not a node of attempt %d's "
                             "allocation",
                             node, att->row.attempt);
        return true;
    }
    if (member < 0 && ctx->lops->node_member && ctx->lops->node_member_strict) {
        /* A name taken on trust now could be blamed for a failure later:
         * the agent asks again (it retries 503 with a backoff). */
        dt_log (LOG_INFO,
                "job %lld attempt %d: cannot check node %s against the allocation "
                "now: the agent is asked to register again",
                (long long)att->row.job_id, att->row.attempt, node);
        dt_http_reply_error (req, 503, NULL,
                             "cannot check node %s against attempt %d's allocation "
                             "now; register again",
                             node, att->row.attempt);
        return true;
    }
    if (member < 0)
        dt_log (LOG_DEBUG,
                "job %lld attempt %d: cannot check node %s against the allocation "
                "yet",
                (long long)att->row.job_id, att->row.attempt, node);
    return false;
}

/* How long a waiting registration is held: what the agent allows, within
 * register_park_max_ms and half the request timeout. */
static int64_t register_wait_ms (const struct ctld *ctx, int64_t asked)
{
    int64_t ms = asked < register_park_max_ms ? asked : register_park_max_ms;
    int64_t half = ctx->cfg->request_timeout_ms / 2;
    return ms < half ? ms : half;
}

static void register_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    struct attempt *att;
    json_t *body, *hostinfo = NULL;
    const char *node, *addr;
    json_int_t order, port, pid = 0, sjob = 0, sstep = 0, rport = 0, wait_ms = 0;
    dt_error_t err;

    if (!(att = agentapi_auth (ctx, req)) || !(body = agentapi_body_json (req)))
        return;
    if (dt_json_check_object (body, "", register_keys, &err) < 0 ||
        dt_json_get_str (body, "", "node", true, 255, false, &node, &err) < 0 ||
        dt_json_get_int (body, "", "node_order", true, 0, 1000000, &order, &err) < 0 ||
        dt_json_get_str (body, "", "addr", true, 63, false, &addr, &err) < 0 ||
        dt_json_get_int (body, "", "port", true, 1, 65535, &port, &err) < 0 ||
        dt_json_get_int (body, "", "pid", false, 0, 0x7fffffff, &pid, &err) < 0 ||
        dt_json_get_int (body, "", "slurm_job_id", false, 0, INT64_MAX, &sjob, &err) <
          0 ||
        dt_json_get_int (body, "", "slurm_step_id", false, 0, INT64_MAX, &sstep, &err) <
          0 ||
        dt_json_get_obj (body, "", "hostinfo", false, &hostinfo, &err) < 0 ||
        dt_json_get_int (body, "", "relay_port", false, 0, 65535, &rport, &err) < 0 ||
        dt_json_get_int (body, "", "wait_ms", false, 0, 600000, &wait_ms, &err) < 0) {
        agentapi_reply_field_error (req, 400, &err);
        goto done;
    }
    if (node_refused (ctx, att, req, node))
        goto done;
    struct agent *ag = jobs_agent_find (att, node);
    int expected = att->row.num_nodes + att->row.spare_nodes;
    bool first = false;
    if (!ag) {
        if (att->row.state == ATT_RUNNING || att->nagents >= expected) {
            dt_http_reply_error (req, 409, "node",
                                 "attempt %d already has its %d nodes; "
                                 "%s is not one of them",
                                 att->row.attempt, expected, node);
            goto done;
        }
        if (att->nagents == att->cap) {
            int cap = att->cap ? att->cap * 2 : 8;
            struct agent *p = realloc (att->agents, cap * sizeof (*p));
            if (!p) {
                dt_http_reply_error (req, 500, NULL, "out of memory");
                goto done;
            }
            att->agents = p;
            att->cap = cap;
        }
        ag = &att->agents[att->nagents++];
        memset (ag, 0, sizeof (*ag));
        snprintf (ag->node, sizeof (ag->node), "%s", node);
        ag->node_rank = -1;
        ag->register_time = dt_real_ms ();
        first = true;
    }
    /* A re-registration may bring a new address/port (agent restarted). */
    ag->order = order;
    snprintf (ag->addr, sizeof (ag->addr), "%s", addr);
    if (att->row.state != ATT_RUNNING)
        ag->port = port;
    ag->relay_port = (int)rport;
    ag->pid = pid;
    ag->last_hb_ms = dt_real_ms ();
    if (hostinfo) {
        json_decref (ag->hostinfo);
        ag->hostinfo = json_incref (hostinfo);
    }
    if (sjob > 0 && att->row.slurm_job_id == 0)
        att->row.slurm_job_id = sjob;
    if (first || att->row.state == ATT_SUBMITTED) {
        if (jobs_agent_registered (ctx->jobs, att, ag, first, &err) < 0) {
            if (first) {
                att->nagents--;
                att->agent_hash_n = -1; /* rebuild the node index */
            }
            dt_http_reply_error (req, errno == EBUSY ? 409 : 500, NULL, "%s", err.text);
            goto done;
        }
    }
    /* qsort in the rendezvous may have moved the agent */
    ag = jobs_agent_find (att, node);
    json_t *ready =
      att->row.state == ATT_RUNNING && ag ? ready_answer (ctx, att, ag) : NULL;
    /* An agent in a fan-in tree heartbeats to its relay: it does not keep
     * a connection here. */
    if (ready && json_is_object (json_object_get (ready, "tree")))
        dt_http_req_close (req);
    if (ready)
        dt_http_reply_json (req, 200, ready);
    else if (att->row.state == ATT_RUNNING && ag)
        dt_http_reply_error (req, 500, NULL,
                             "the job's checkpoint directory path is too long");
    /* A long poll: held, and answered when the rendezvous completes (the
     * attempt's change of state wakes it) or at its longest wait, so a
     * storm of agents asks once, not once a retry_ms.  Not held while
     * crowded (the gate then closes a waiting agent's connection). */
    else if (!ag || wait_ms <= 0 || dt_httpd_crowded (ctx->httpd) ||
             !dt_http_req_park (req, att, register_wait_ms (ctx, wait_ms)))
        dt_http_reply_json (req, 200,
                            json_pack ("{s:s s:i s:i s:i}", "state", "waiting",
                                       "registered", att->nagents, "expected", expected,
                                       "retry_ms", jobs_register_retry_ms (ctx->jobs)));
done:
    json_decref (body);
}

/* --- heartbeat ------------------------------------------------------------------- */

/* The decoded heartbeat: one buffer for all of them (the daemon is
 * single-threaded, and the rank buffer then grows once, not per request). */
static struct hb_msg hb_scratch;

/* Copy a string into a fixed field (truncating), without printf. */
static void field_copy (char *dst, size_t len, const char *src)
{
    size_t n = strnlen (src, len - 1);
    memcpy (dst, src, n);
    dst[n] = '\0';
}

static struct agent *agent_of (struct attempt *att, const char *node)
{
    return jobs_agent_find (att, node); /* hashed */
}

/* One node's decoded heartbeat into the live state of its attempt: from
 * a direct heartbeat, or one line of a relay's (relayapi.c). */
void agentapi_heartbeat_apply (struct ctld *ctx, struct attempt *att, struct agent *ag,
                               const struct hb_msg *m)
{
    bool busy = false;
    int64_t now = dt_real_ms ();
    ag->last_hb_ms = now;
    ag->dirty = true;
    /* Neighbours it has not heard from: corroboration of their silence. */
    treeplan_unheard (att, ag, m, now);
    for (size_t i = 0; i < m->nranks; i++) {
        const struct hb_rank *h = &m->ranks[i];
        struct rank *rk = &att->ranks[h->rank];
        rk->seen = true;
        rk->updated = now;
        rk->dirty = true;
        if (!rk->node[0])
            field_copy (rk->node, sizeof (rk->node), m->node);
        if (h->has & HB_LOCAL_RANK)
            rk->local_rank = h->local_rank;
        if (h->has & HB_PID)
            rk->pid = h->pid;
        if (h->has & HB_STATE)
            field_copy (rk->state, sizeof (rk->state), h->state);
        if (h->has & HB_CLIENT) {
            /* The hang clock starts when libdtclient connects, as the
             * agent's does: the rank was in the heartbeats since it was
             * spawned, and its start-up before that (interpreter, imports,
             * the process group's rendezvous with peers still starting)
             * is not a step that failed to progress. */
            if (h->client && !rk->client && rk->progress_ms)
                rk->progress_ms = now;
            rk->client = h->client;
        }
        if (h->has & HB_STEP)
            rk->step = h->step;
        if (h->has & HB_SAMPLES)
            rk->samples = h->samples;
        if (h->has & HB_LOSS)
            rk->loss = h->loss;
        if (h->has & HB_COMPUTE_MS)
            rk->compute_ms = h->compute_ms;
        if (h->has & HB_COMM_MS)
            rk->comm_ms = h->comm_ms;
        if (h->has & HB_DIMS) {
            memcpy (rk->dims, h->dims, sizeof (rk->dims));
            rk->has_dims = true;
        }
        if (h->has & HB_BUSY) {
            /* Entering or leaving a checkpoint save/load restarts the hang
             * clock (the watchdog gives busy ranks their own allowance). */
            if (h->busy != rk->busy && rk->progress_ms)
                rk->progress_ms = now;
            rk->busy = h->busy;
            busy = busy || h->busy;
        }
        /* Sent for running libdtclient ranks only: absent means no. */
        rk->waiting = (h->has & HB_WAITING) && h->waiting;
        rk->stopped = (h->has & HB_STOPPED) && h->stopped;
        if (att->row.state == ATT_RUNNING)
            jobs_rank_heartbeat (ctx->jobs, att, h->rank, now);
    }
    /* Only this node's ranks were touched: the attempt-wide pass runs here
     * for a small attempt, from the tick for a large one. */
    if (att->row.state == ATT_RUNNING) /* goodput accounting */
        report_heartbeat (ctx->report, att->row.job_id, att->row.attempt, busy);
    if (att->row.state == ATT_RUNNING)
        jobs_heartbeat_done (ctx->jobs, att);
}

/* A request with the token of an attempt that re-formed in place: its
 * only answer is the command to re-form as the new attempt (true when
 * answered). */
static bool reform_answer (struct ctld *ctx, dt_http_req_t *req)
{
    struct attempt *next = jobs_reform_successor (ctx->jobs, auth_bearer (req));
    char ans[256];
    if (!next)
        return false;
    size_t n = (size_t)snprintf (ans, sizeof (ans), "{\"commands\":");
    n += jobs_reform_command_text (next, ans + n, sizeof (ans) - n - 1);
    if (n >= sizeof (ans) - 1) {
        dt_http_reply_error (req, 500, NULL, "internal error: command too long");
        return true;
    }
    ans[n++] = '}';
    dt_http_reply_json_text (req, 200, ans, n);
    return true;
}

static void heartbeat_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    int64_t t0 = dt_mono_ns ();
    struct hb_msg *m = &hb_scratch;
    struct attempt *att;
    struct agent *ag;
    const char *body;
    size_t len;
    dt_error_t err;
    enum hb_result rc;

    if (reform_answer (ctx, req) || !(att = agentapi_auth (ctx, req)))
        return;
    /* Decoded and validated in full before any state is touched. */
    body = dt_http_req_body (req, &len);
    rc = hb_parse (body, len, att->row.world_size, m, &err);
    if (rc == HB_ERR_BODY) {
        dt_http_reply_error (req, 400, NULL, "request body: %s", err.text);
        return;
    }
    if (rc == HB_ERR_NOMEM) {
        dt_http_reply_error (req, 500, NULL, "out of memory");
        return;
    }
    if (rc != HB_OK && !m->node[0]) {
        agentapi_reply_field_error (req, 400, &err); /* the top level is at fault */
        return;
    }
    /* An unknown node answers 409 before its rank entries are judged. */
    if (!(ag = agent_of (att, m->node))) {
        dt_http_reply_error (req, 409, "node", "%s has not registered with attempt %d",
                             m->node, att->row.attempt);
        return;
    }
    if (rc != HB_OK) {
        agentapi_reply_field_error (req, 400, &err);
        return;
    }
    agentapi_heartbeat_apply (ctx, att, ag, m);
    /* The answer without a JSON tree: {"commands":[...]}. */
    char ans[128];
    size_t n = 12;
    memcpy (ans, "{\"commands\":", n);
    n += jobs_commands_text (ctx->jobs, att, ans + n, sizeof (ans) - n - 1);
    if (n >= sizeof (ans) - 1) {
        dt_http_reply_error (req, 500, NULL, "internal error: commands too long");
        return;
    }
    ans[n++] = '}';
    dt_http_reply_json_text (req, 200, ans, n);
    metrics_heartbeat (ctx->metrics, (dt_mono_ns () - t0) / 1e9);
}

/* --- events --------------------------------------------------------------------- */

static const char *const ev_keys[] = { "node", "events", NULL };

/* A shard event's path must be exactly the one dtctl assigned (the
 * controller later removes and renames it on the user's behalf); 0 or -1
 * with err naming the refused path (ckptpath.h). */
static int shard_path_check (struct attempt *att, json_t *e, dt_error_t *err)
{
    char jobdir[PATH_MAX];
    bool jit = json_is_true (json_object_get (e, "jit"));
    json_int_t rank = json_integer_value (json_object_get (e, "rank"));

    if (dt_pathf (jobdir, sizeof (jobdir), "%s/%lld", att->job->spec.ckpt.dir,
                  (long long)att->job->row.id) < 0)
        return errnoprintf (err, ENAMETOOLONG,
                            "path: the checkpoint directory is too long");
    return ckptpath_check_shard (
      jobdir, json_integer_value (json_object_get (e, "step")), (int)rank, jit,
      (int)json_integer_value (json_object_get (e, "shard_rank")),
      json_string_value (json_object_get (e, "path")), err);
}

/* Events that add a row to the job's events table whenever an agent
 * sends them (MaxEventsPerJob). */
static bool event_noted (json_t *e)
{
    const char *kind = json_string_value (json_object_get (e, "kind"));
    return kind && (!strcmp (kind, "result") || !strcmp (kind, "shard_failed") ||
                    !strcmp (kind, "signal"));
}

/* A result is kept in the job's row and in its event: MaxResultSize. */
static int event_result_check (struct ctld *ctx, json_t *e, const char *path,
                               dt_error_t *err)
{
    const char *kind = json_string_value (json_object_get (e, "kind"));
    size_t n;

    if (!kind || strcmp (kind, "result"))
        return 0;
    n = json_dumpb (json_object_get (e, "result"), NULL, 0, JSON_COMPACT);
    if ((int64_t)n > ctx->cfg->max_result_size)
        return errnoprintf (err, EINVAL,
                            "%s.result: %zu bytes of JSON, larger than "
                            "MaxResultSize (%lld)",
                            path, n, (long long)ctx->cfg->max_result_size);
    return 0;
}

static int rank_of (json_t *e)
{
    json_t *r = json_object_get (e, "rank");
    return r ? (int)json_integer_value (r) : -1;
}

/* A rank exited (event "rank_exit"): its last step, then a survivor's
 * exit, a failure, or a clean exit noted.  0, or -1 with err. */
static int rank_exit_event (struct ctld *ctx, struct attempt *att, const char *node,
                            int rank, const json_t *e, dt_error_t *err)
{
    char buf[256];
    int code = json_integer_value (json_object_get (e, "exit_code"));
    int sig = json_integer_value (json_object_get (e, "signal"));
    struct rank *rk = &att->ranks[rank];
    json_t *js = json_object_get (e, "step");
    rk->exit_code = code;
    rk->signal = sig;
    snprintf (rk->state, sizeof (rk->state), "exited");
    rk->dirty = true;
    /* The exact last step (the agent read the rank's page). */
    if (js)
        jobs_rank_last_step (ctx->jobs, att, rank, json_integer_value (js));
    if ((code != 0 || sig != 0) && !sig && jobs_jit_reporter (att, rank)) {
        /* It saved the state after losing a peer: a survivor. */
        jobs_survivor_exit (ctx->jobs, att, node, rank, code);
    }
    else if (code != 0 || sig != 0) {
        if (sig)
            snprintf (buf, sizeof (buf), "rank %d on %s killed by signal %d", rank, node,
                      sig);
        else
            snprintf (buf, sizeof (buf), "rank %d on %s exited with code %d", rank, node,
                      code);
        json_t *ev =
          json_pack ("{s:i s:i s:O? s:O?}", "exit_code", code, "signal", sig,
                     "stderr_tail", json_object_get (e, "stderr_tail"), "last_step", js);
        jobs_rank_exit_check (ctx->jobs, att, node, rank, code,
                              json_string_value (json_object_get (e, "stderr_tail")));
        jobs_attempt_fail (ctx->jobs, att, "trainer_exit", node, rank, buf, ev);
    }
    else {
        snprintf (buf, sizeof (buf), "rank %d on %s exited with code 0", rank, node);
        return jobs_note (ctx->jobs, att, "rank_exit", node, rank, buf, NULL, err);
    }
    return 0;
}

/* Append the answer for one event: {"status": ..., "error"?: ...}. */
static void ev_result (json_t *results, const char *status, const char *error)
{
    json_array_append_new (results,
                           json_pack ("{s:s, s:s*}", "status", status, "error", error));
}

static void ev_refused (json_t *results, int *refused, char *first, size_t len,
                        const char *why)
{
    ev_result (results, "refused", why);
    if ((*refused)++ == 0)
        snprintf (first, len, "%s", why);
}

/* Apply one checked event of an agent's batch; 0, or -1 with err (errno
 * EINVAL: the event is bad and refused; else it may be sent again). */
static int event_apply (struct ctld *ctx, struct attempt *att, struct agent *ag,
                        const char *node, json_t *e, dt_error_t *err)
{
    const char *kind = json_string_value (json_object_get (e, "kind"));
    const char *detail = json_string_value (json_object_get (e, "detail"));
    int rank = rank_of (e);
    char buf[256];
    int rc = 0;

    if (!strcmp (kind, "rank_exit")) {
        rc = rank_exit_event (ctx, att, node, rank, e, err);
    }
    else if (!strcmp (kind, "hang")) {
        snprintf (buf, sizeof (buf), "rank %d on %s hangs: %s", rank, node,
                  detail ? detail : "no progress");
        jobs_attempt_fail (
          ctx->jobs, att, "hang", node, rank, buf,
          json_pack ("{s:s?, s:s}", "detail", detail, "detected_by", "agent"));
    }
    else if (!strcmp (kind, "shard") && shard_path_check (att, e, err) < 0) {
        /* Refused: recorded, never stored, never touched. */
        dt_log (LOG_WARNING, "job %lld: rank %d on %s: shard %s",
                (long long)att->row.job_id, rank, node, err->text);
        json_t *ev = json_pack ("{s:O s:O s:O?}", "step", json_object_get (e, "step"),
                                "path", json_object_get (e, "path"), "shard_rank",
                                json_object_get (e, "shard_rank"));
        snprintf (buf, sizeof (buf), "rank %d on %s: shard %s", rank, node, err->text);
        rc = jobs_note (ctx->jobs, att, "shard_refused", node, rank, buf, ev, err);
        json_decref (ev);
    }
    else if (!strcmp (kind, "shard") && json_is_true (json_object_get (e, "jit"))) {
        rc = jobs_shard_jit (ctx->jobs, att, node, rank,
                             json_integer_value (json_object_get (e, "shard_rank")),
                             json_integer_value (json_object_get (e, "step")),
                             json_string_value (json_object_get (e, "path")),
                             json_integer_value (json_object_get (e, "bytes")),
                             json_string_value (json_object_get (e, "crc32c")), err);
    }
    else if (!strcmp (kind, "shard")) {
        rc = jobs_shard (ctx->jobs, att, node, rank,
                         json_integer_value (json_object_get (e, "step")),
                         json_string_value (json_object_get (e, "path")),
                         json_integer_value (json_object_get (e, "bytes")),
                         json_string_value (json_object_get (e, "crc32c")), err);
    }
    else if (!strcmp (kind, "shard_failed")) {
        int64_t step = json_integer_value (json_object_get (e, "step"));
        snprintf (buf, sizeof (buf), "rank %d could not write its shard of step %lld: %s",
                  rank, (long long)step, detail ? detail : "");
        rc = jobs_note (ctx->jobs, att, "shard_failed", node, rank, buf, e, err);
        if (att->ckpt_cmd_step == step)
            att->ckpt_cmd_step = 0;
    }
    else if (!strcmp (kind, "result")) {
        rc = jobs_result (ctx->jobs, att, node, rank, json_object_get (e, "result"), err);
    }
    else if (!strcmp (kind, "node_failure")) {
        jobs_attempt_fail (ctx->jobs, att, "node_failure", node, -1,
                           detail ? detail : "agent reported a node failure", NULL);
    }
    else if (!strcmp (kind, "signal")) {
        jobs_signal (ctx->jobs, att, node, detail);
    }
    else if (!strcmp (kind, "integrity")) {
        rc = jobs_integrity (ctx->jobs, att, node, rank,
                             json_integer_value (json_object_get (e, "step")),
                             json_object_get (e, "report"), err);
    }
    else if (!strcmp (kind, "perf")) {
        rc = jobs_perf (ctx->jobs, att, rank,
                        json_number_value (json_object_get (e, "model_flops")),
                        json_number_value (json_object_get (e, "peak_flops")),
                        json_string_value (json_object_get (e, "peak_source")), err);
    }
    else if (!strcmp (kind, "numerics")) {
        rc = jobs_numerics (ctx->jobs, att, node, rank, json_object_get (e, "numerics"),
                            err);
    }
    else if (!strcmp (kind, "caps")) {
        jobs_caps (att, ag, rank, e);
    }
    else if (!strcmp (kind, "done")) {
        json_t *c = json_object_get (e, "exit_code");
        rc = jobs_agent_done (ctx->jobs, att, ag, c ? json_integer_value (c) : 0, err);
    }
    return rc;
}

/* Record that some of a batch's events were refused (one event per batch). */
static void note_refusals (struct ctld *ctx, struct attempt *att, const char *node,
                           int refused, const char *first)
{
    char detail[512];
    dt_error_t nerr;

    snprintf (detail, sizeof (detail),
              "%d event%s from the agent on %s refused; the first: %s", refused,
              refused == 1 ? "" : "s", node, first);
    dt_log (LOG_WARNING, "job %lld attempt %d: %s", (long long)att->row.job_id,
            att->row.attempt, detail);
    if (jobs_note (ctx->jobs, att, "agent_event_refused", node, -1, detail, NULL, &nerr) <
        0)
        dt_log (LOG_ERR, "job %lld: recording a refused event: %s",
                (long long)att->row.job_id, nerr.text);
}

static void events_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    struct attempt *att;
    struct agent *ag;
    json_t *body, *events, *e, *results = NULL;
    const char *node;
    dt_error_t err;
    char path[64], first_refusal[400] = "";
    size_t i;
    int accepted = 0, refused = 0;
    bool retry_rest = false;

    if (reform_answer (ctx, req) || !(att = agentapi_auth (ctx, req)) ||
        !(body = agentapi_body_json (req)))
        return;
    struct job *job = att->job;
    int attempt_no = att->row.attempt;
    if (dt_json_check_object (body, "", ev_keys, &err) < 0 ||
        dt_json_get_str (body, "", "node", true, 63, false, &node, &err) < 0 ||
        dt_json_get_arr (body, "", "events", true, &events, &err) < 0) {
        agentapi_reply_field_error (req, 400, &err);
        goto done;
    }
    if (!(ag = agent_of (att, node))) {
        dt_http_reply_error (req, 409, "node", "%s has not registered with attempt %d",
                             node, att->row.attempt);
        goto done;
    }
    /* The job's events table is not the trainer's log: the events an agent
     * may add to it are counted (the others are bounded by the ranks); a
     * batch past the quota is refused whole, none of it recorded. */
    int64_t noted = 0, max_ev = ctx->cfg->max_events_per_job;
    json_array_foreach (events, i, e) if (event_noted (e)) noted++;
    if (max_ev > 0 && att->job->agent_events + noted > max_ev) {
        metrics_refused (ctx->metrics, REFUSED_MAX_EVENTS_PER_JOB);
        dt_http_reply_error (req, 429, NULL,
                             "quota MaxEventsPerJob: job %lld has %lld events "
                             "from its agents, the limit is %lld; none of these %lld was "
                             "recorded",
                             (long long)att->job->row.id,
                             (long long)att->job->agent_events, (long long)max_ev,
                             (long long)noted);
        goto done;
    }
    /* One answer per event, in order (schemas/agent-api.md): "accepted";
     * "refused" (bad, never to be sent again: named in an event of the
     * job); "retry" (the controller could not take it now: send it again,
     * with every later one, which is answered "retry" unprocessed so that
     * the order of events is kept). */
    if (!(results = json_array ())) {
        dt_http_reply_error (req, 500, NULL, "out of memory");
        goto done;
    }
    ag->last_hb_ms = dt_real_ms ();
    json_array_foreach (events, i, e)
    {
        dt_json_path_index (path, sizeof (path), "events", i);
        if (retry_rest) {
            ev_result (results, "retry",
                       "an earlier event of the batch must be taken first");
            continue;
        }
        if (job->att != att) { /* re-formed: the rest was the old attempt's */
            ev_result (results, "refused", "the attempt re-formed in place");
            continue;
        }
        if (agentev_check (att, e, path, &err) < 0 ||
            event_result_check (ctx, e, path, &err) < 0) {
            ev_refused (results, &refused, first_refusal, sizeof (first_refusal),
                        err.text);
            continue;
        }
        if (event_apply (ctx, att, ag, node, e, &err) < 0) {
            char text[sizeof (err.text) + 80];
            snprintf (text, sizeof (text), "%s: %s", path, err.text);
            if (errno == EINVAL)
                ev_refused (results, &refused, first_refusal, sizeof (first_refusal),
                            text);
            else {
                ev_result (results, "retry", text);
                retry_rest = true;
            }
            continue;
        }
        if (event_noted (e))
            att->job->agent_events++;
        ev_result (results, "accepted", NULL);
        accepted++;
    }
    /* A rank exit of this batch made the attempt re-form in place (the
     * old attempt 'att' is gone then): the command goes with the answer. */
    struct attempt *next = job->att;
    bool reformed =
      next && next->row.attempt != attempt_no && job->reform_attempt == next->row.attempt;
    if (refused > 0 && !reformed)
        note_refusals (ctx, att, node, refused, first_refusal);
    json_t *ans = json_pack ("{s:i, s:i, s:o}", "accepted", accepted, "refused", refused,
                             "results", results);
    results = NULL;
    if (ans && reformed) {
        char cmd[200];
        jobs_reform_command_text (next, cmd, sizeof (cmd));
        json_object_set_new (ans, "commands", json_loads (cmd, 0, NULL));
    }
    dt_http_reply_json (req, 200, ans);
done:
    json_decref (results);
    json_decref (body);
}

int agentapi_register_routes (struct ctld *ctx, dt_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        dt_http_handler_f cb;
    } routes[] = {
        { "POST", "/v1/agent/register", register_cb },
        { "POST", "/v1/agent/heartbeat", heartbeat_cb },
        { "POST", "/v1/agent/events", events_cb },
    };
    for (size_t i = 0; i < sizeof (routes) / sizeof (routes[0]); i++) {
        if (dt_httpd_route (ctx->httpd, routes[i].method, routes[i].pattern, routes[i].cb,
                            ctx) < 0)
            return errnoprintf (err, errno, "route %s %s: %s", routes[i].method,
                                routes[i].pattern, strerror (errno));
    }
    /* The attempt's key-value store: orchestrator/agentkv.c; the batch
     * scripts' route (in-allocation restart): orchestrator/allocapi.c. */
    if (agentkv_register_routes (ctx, err) < 0)
        return -1;
    return allocapi_register_routes (ctx, err);
}
