/* gate.c: admission of requests at header time (see gate.h).
 *
 * A request is judged on its headers alone, so that nobody can make the
 * controller buffer a body (up to MaxBodySize) without a credential, and a
 * user at a quota is refused before anything is read or changed.  The
 * handlers check again what they need (the token's attempt may end
 * between the headers and the body); the identity decoded here is kept on
 * the request (auth_user), so a MUNGE credential is decoded only once.
 */
#include <config.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/httpd.h"
#include "orchestrator/auth.h"
#include "orchestrator/ctld.h"
#include "orchestrator/gate.h"
#include "orchestrator/jobs.h"
#include "orchestrator/metrics.h"
#include "orchestrator/ui.h"

bool gate_is_agent_path (const char *path)
{
    return !strncmp (path, "/v1/agent/", 10) || !strncmp (path, "/v1/alloc/", 10);
}

/* Routes that anyone may read, with no credential. */
static bool is_public (const char *method, const char *path)
{
    return !strcmp (method, "GET") &&
           (!strcmp (path, "/healthz") || !strcmp (path, "/metrics") ||
            ui_is_static_path (path));
}

/* An agent route: a token of an attempt the controller knows (live, or
 * ended: the handler answers 410 for those). */
static int gate_agent (struct ctld *ctx, dt_http_req_t *req)
{
    const char *tok = auth_bearer (req);
    int64_t job;
    int n;
    enum attempt_state st;
    dt_error_t err;

    if (!tok) {
        metrics_refused (ctx->metrics, REFUSED_UNAUTHENTICATED);
        dt_http_reply_error (req, 401, NULL, "missing Authorization: Bearer <token>");
        return -1;
    }
    /* Crowded: only heartbeats keep their connection (registrations,
     * events and kv calls are occasional), so that agents of a fan-in
     * tree, which heartbeat to their relays, hold no descriptor here. */
    const char *path = dt_http_req_path (req);
    if (dt_httpd_crowded (ctx->httpd) && strcmp (path, "/v1/agent/heartbeat") &&
        strcmp (path, "/v1/agent/relay"))
        dt_http_req_close (req);
    if (jobs_attempt_by_token (ctx->jobs, tok))
        return 0;
    if (store_attempt_by_token (ctx->store, tok, &job, &n, &st, &err) < 0 &&
        errno == ENOENT) {
        metrics_refused (ctx->metrics, REFUSED_UNAUTHENTICATED);
        dt_http_reply_error (req, 401, NULL, "unknown token");
        return -1;
    }
    return 0; /* known, or the store failed: the handler answers */
}

/* Would this request add a live job?  A new submission, or a resubmission
 * of a job that is not live any more. */
static bool adds_live_job (struct ctld *ctx, dt_http_req_t *req)
{
    const char *m = dt_http_req_method (req), *p = dt_http_req_path (req);
    size_t l = strlen (p);

    if (strcmp (m, "POST"))
        return false;
    if (!strcmp (p, "/v1/jobs"))
        return true;
    if (l > 9 && !strcmp (p + l - 9, "/resubmit")) {
        const char *id = dt_http_req_param (req, "id");
        char *end;
        long long v = id ? strtoll (id, &end, 10) : 0;
        if (!id || *end || v <= 0)
            return false; /* the handler answers 400 */
        return jobs_find (ctx->jobs, v) == NULL;
    }
    return false;
}

static int gate_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    const char *method = dt_http_req_method (req), *path = dt_http_req_path (req);
    uid_t uid;
    dt_error_t err;

    if (gate_is_agent_path (path))
        return gate_agent (ctx, req);
    if (dt_http_req_class (req) == GATE_CLASS_AGENT && strcmp (path, "/healthz")) {
        metrics_refused (ctx->metrics, REFUSED_LISTENER);
        dt_http_reply_error (req, 403, NULL,
                             "this is the agents' listener (AgentPort); "
                             "user requests go to ListenPort %d",
                             dt_httpd_port (ctx->httpd));
        return -1;
    }
    if (is_public (method, path))
        return 0;
    if (auth_user_early (ctx->cfg, req, &uid, &err) < 0) {
        metrics_refused (ctx->metrics, REFUSED_UNAUTHENTICATED);
        dt_http_reply_error (req, 401, NULL, "%s", err.text);
        return -1;
    }
    int64_t max = ctx->cfg->max_jobs_per_user, all = ctx->cfg->max_job_count;
    if ((max > 0 || all > 0) && adds_live_job (ctx, req)) {
        int live = max > 0 ? jobs_live_count (ctx->jobs, uid) : 0;
        int total = all > 0 ? jobs_live_count (ctx->jobs, (uid_t)-1) : 0;
        if (max > 0 && live >= max) {
            char name[64];
            metrics_refused (ctx->metrics, REFUSED_MAX_JOBS_PER_USER);
            dt_http_reply_error (
              req, 429, NULL,
              "quota MaxJobsPerUser: user %s has %d live "
              "jobs, the limit is %lld; wait for one to end or cancel one",
              auth_user_name (uid, name, sizeof (name)), live, (long long)max);
            return -1;
        }
        if (all > 0 && total >= all) {
            metrics_refused (ctx->metrics, REFUSED_MAX_JOB_COUNT);
            dt_http_reply_error (
              req, 429, NULL,
              "quota MaxJobCount: the controller holds %d "
              "live jobs, the limit is %lld; retry when jobs have ended",
              total, (long long)all);
            return -1;
        }
    }
    return 0;
}

void gate_install (struct ctld *ctx)
{
    dt_httpd_set_gate (ctx->httpd, gate_cb, ctx);
}
