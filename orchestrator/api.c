/* api.c: HTTP handlers of the user routes. */
#include <config.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "common/httpd.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "common/version.h"
#include "orchestrator/api.h"
#include "orchestrator/auth.h"
#include "orchestrator/ctld.h"
#include "orchestrator/jobs.h"
#include "orchestrator/privacy.h"
#include "orchestrator/metrics.h"
#include "orchestrator/report.h"
#include "orchestrator/spec.h"

static const int list_limit_default = 1000;
static const int list_limit_max = 10000;
static const int events_limit = 10000;
/* GET /v1/nodes/{name}: health history rows returned by default / at most. */
static const int node_history_default = 100;
static const int node_history_max = 10000;

/* Bumped by every user request that may change a job (the kept job
 * views below are then read afresh). */
static uint64_t api_generation;

static void api_changed (void)
{
    api_generation++;
}

/* Who asks; answers 401 itself on failure. */
static bool user_auth (struct ctld *ctx, dt_http_req_t *req, uid_t *uid, gid_t *gid)
{
    dt_error_t err;
    if (auth_user (ctx->cfg, req, uid, gid, &err) < 0) {
        dt_http_reply_error (req, 401, NULL, "%s", err.text);
        return false;
    }
    return true;
}

/* {id} as a positive integer; answers 400 itself on failure. */
static bool job_id (dt_http_req_t *req, int64_t *id)
{
    const char *s = dt_http_req_param (req, "id");
    char *end;
    long long v;

    errno = 0;
    v = s ? strtoll (s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v <= 0) {
        dt_http_reply_error (req, 400, "id",
                             "id: '%s' is not a job id (a positive integer)", s ? s : "");
        return false;
    }
    *id = v;
    return true;
}

/* Optional JSON object body (empty body = {}); answers 400 itself. */
static bool body_object (dt_http_req_t *req, json_t **out)
{
    size_t len;
    const char *b = dt_http_req_body (req, &len);
    dt_error_t err;

    *out = NULL;
    if (!b || len == 0) {
        *out = json_object ();
        return true;
    }
    if (!(*out = dt_json_parse (b, len, &err))) {
        dt_http_reply_error (req, 400, NULL, "request body: %s", err.text);
        return false;
    }
    if (!json_is_object (*out)) {
        json_decref (*out);
        *out = NULL;
        dt_http_reply_error (req, 400, NULL, "request body: expected a JSON object");
        return false;
    }
    return true;
}

static void reply_err (dt_http_req_t *req, int status, const dt_error_t *err)
{
    char field[128];
    spec_error_field (err, field, sizeof (field));
    dt_http_reply_error (req, status, field[0] ? field : NULL, "%s", err->text);
}

/* The job as JSON with live fields; answers 404/500 itself on failure. */
static json_t *job_view (struct ctld *ctx, dt_http_req_t *req, int64_t id, bool attempts)
{
    dt_error_t err;
    json_t *j = store_job_view (ctx->store, id, attempts, STORE_VIEW_NODES_MAX, &err);
    if (!j) {
        dt_http_reply_error (req, errno == ENOENT ? 404 : 500, NULL, "%s", err.text);
        return NULL;
    }
    jobs_overlay (ctx->jobs, j);
    return j;
}

/* PrivateData: 'view' hidden from 'uid' entirely (404 answered here, the
 * view released: returns false) or in part (redacted in place: true). */
static bool job_visible (struct ctld *ctx, dt_http_req_t *req, json_t *view, int64_t id,
                         uid_t uid)
{
    uid_t owner = privacy_owner (view);
    if (!privacy_sees_job (ctx->cfg, uid, owner)) {
        json_decref (view);
        dt_http_reply_error (req, 404, NULL, "job %lld not found", (long long)id);
        return false;
    }
    privacy_redact (ctx->cfg, view, uid, owner);
    return true;
}

static void submit_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    size_t len;
    const char *body;
    json_t *spec, *j;
    dt_error_t err;
    int64_t id;
    int status;

    api_changed ();

    if (!user_auth (ctx, req, &uid, &gid))
        return;
    body = dt_http_req_body (req, &len);
    if (!body || len == 0) {
        dt_http_reply_error (req, 400, NULL,
                             "request body: expected a job spec (JSON object)");
        return;
    }
    if (!(spec = dt_json_parse (body, len, &err))) {
        dt_http_reply_error (req, 400, NULL, "request body: %s", err.text);
        return;
    }
    if (jobs_submit (ctx->jobs, spec, uid, gid, &id, &status, &err) < 0) {
        json_decref (spec);
        reply_err (req, status, &err);
        return;
    }
    json_decref (spec);
    if ((j = job_view (ctx, req, id, true)))
        dt_http_reply_json (req, 201, j);
}

static void list_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    const char *state = dt_http_req_query (req, "state");
    const char *user = dt_http_req_query (req, "user");
    const char *name = dt_http_req_query (req, "name");
    const char *lim = dt_http_req_query (req, "limit");
    long fuid = -1;
    int limit = list_limit_default;
    dt_error_t err;
    json_t *a;

    if (!user_auth (ctx, req, &uid, &gid))
        return;
    if (state && fsm_job_state_parse (state) < 0) {
        dt_http_reply_error (req, 400, "state", "state: unknown job state '%.40s'",
                             state);
        return;
    }
    if (user) {
        char *end;
        long v = strtol (user, &end, 10);
        struct passwd *pw;
        if (*user && !*end && v >= 0)
            fuid = v;
        else if ((pw = getpwnam (user)))
            fuid = pw->pw_uid;
        else {
            dt_http_reply_error (req, 400, "user", "user: unknown user '%.40s'", user);
            return;
        }
    }
    if (lim) {
        char *end;
        long v = strtol (lim, &end, 10);
        if (!*lim || *end || v < 1 || v > list_limit_max) {
            dt_http_reply_error (req, 400, "limit",
                                 "limit: must be an integer in [1, %d]", list_limit_max);
            return;
        }
        limit = v;
    }
    /* PrivateData=jobs: a user lists only their own jobs. */
    if ((ctx->cfg->private_data & PRIVATE_JOBS) && !config_is_admin (ctx->cfg, uid)) {
        if (fuid >= 0 && (uid_t)fuid != uid) {
            dt_http_reply_json (req, 200, json_array ());
            return;
        }
        fuid = uid;
    }
    if (!(a = store_jobs_json (ctx->store, state, fuid, name, limit, &err))) {
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
        return;
    }
    size_t i;
    json_t *j;
    json_array_foreach (a, i, j)
    {
        jobs_overlay (ctx->jobs, j);
        privacy_redact (ctx->cfg, j, uid, privacy_owner (j));
    }
    dt_http_reply_json (req, 200, a);
}

/* GET /v1/jobs/{id} of a job larger than its view shows (more than
 * STORE_VIEW_NODES_MAX nodes) costs milliseconds: about 2 ms for 5,000
 * nodes (the store keeps the trimmed provenance and reads the first nodes
 * through an index; it was 10-30 ms before).  Polled while 10,000 agents
 * heartbeat, each build holds up the one event loop, so such an answer is
 * kept for up to view_cache_ms (view_stale_ms while api_tick builds it
 * again), as
 * long as the job's state, attempt and restart count and the attempt's
 * state are the same and no user request changed anything in between.
 * Its live fields (step, loss, node heartbeats) are then that much older;
 * smaller jobs are always read afresh. */
static const int64_t view_cache_ms = 1000;
/* A kept view that was served since it was built is built again by
 * api_tick, between requests, once it is view_cache_ms old: the build
 * (6-10 ms for a job of 6,666 nodes) then delays no request of its own,
 * and a request meanwhile gets the kept one, up to view_stale_ms old. */
static const int64_t view_stale_ms = 2000;
enum { VIEW_CACHE_SLOTS = 4 };

struct view_cache {
    int64_t id; /* 0: free */
    int64_t built_ms;
    uint64_t sig;
    char *text; /* the serialized job view */
    size_t len;
    bool served; /* since it was built: api_tick builds it again */
};
static struct view_cache view_cache[VIEW_CACHE_SLOTS];
/* What must not have changed for a kept view to be served; 0: do not keep. */
static uint64_t view_sig (struct ctld *ctx, int64_t id)
{
    struct job *job = jobs_find (ctx->jobs, id);
    const struct attempt *att = job ? job->att : NULL;
    if (!att || att->row.num_nodes + att->row.spare_nodes <= STORE_VIEW_NODES_MAX)
        return 0;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the fields */
    int64_t f[] = { job->row.state,   job->row.attempts,      job->row.restarts,
                    att->row.attempt, att->row.state,         att->stopping,
                    att->nagents,     (int64_t)api_generation };
    for (size_t i = 0; i < sizeof (f) / sizeof (f[0]); i++)
        h = (h ^ (uint64_t)f[i]) * 1099511628211ULL;
    return h ? h : 1;
}

void api_tick (struct ctld *ctx)
{
    int64_t now = dt_mono_ms ();
    for (int i = 0; i < VIEW_CACHE_SLOTS; i++) {
        struct view_cache *c = &view_cache[i];
        if (!c->id || !c->served || now - c->built_ms < view_cache_ms)
            continue;
        c->served = false;
        /* Changed meanwhile: the next request builds it (as it must). */
        if (view_sig (ctx, c->id) != c->sig)
            continue;
        dt_error_t err;
        int64_t id = c->id;
        uint64_t sig = c->sig;
        json_t *j = store_job_view (ctx->store, id, true, STORE_VIEW_NODES_MAX, &err);
        char *text = NULL;
        if (j) {
            jobs_overlay (ctx->jobs, j);
            /* The read takes 4-6 ms for a job of thousands of nodes, the
             * text 1-3 ms more: users' requests that came meanwhile are
             * answered in between (from the kept view as it was).  One of
             * them may have changed the job, or taken this slot for
             * another job's view: then this one is dropped. */
            dt_httpd_run_urgent (ctx->httpd);
            if (c->id == id && view_sig (ctx, id) == sig)
                text = dt_json_dumps (j);
            json_decref (j);
        }
        if (!text)
            continue; /* kept as it is; the next request past view_stale_ms builds it */
        free (c->text);
        c->text = text;
        c->len = strlen (text);
        c->built_ms = now;
    }
}

static void show_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    int64_t id;
    json_t *j;

    if (!user_auth (ctx, req, &uid, &gid) || !job_id (req, &id))
        return;
    /* A kept view is the full one: only for those who see everything. */
    struct job *live = jobs_find (ctx->jobs, id);
    uint64_t sig =
      live && privacy_sees_all (ctx->cfg, uid, live->row.uid) ? view_sig (ctx, id) : 0;
    int64_t now = dt_mono_ms ();
    struct view_cache *slot = NULL;
    if (sig) {
        for (int i = 0; i < VIEW_CACHE_SLOTS; i++) {
            struct view_cache *c = &view_cache[i];
            if (c->id == id && c->sig == sig && now - c->built_ms < view_stale_ms) {
                c->served = true;
                dt_http_reply_json_text (req, 200, c->text, c->len);
                return;
            }
            /* this job's slot, else the oldest */
            if (!slot || c->id == id || (slot->id != id && c->built_ms < slot->built_ms))
                slot = c;
        }
    }
    if (!(j = job_view (ctx, req, id, true)) || !job_visible (ctx, req, j, id, uid))
        return;
    char *text;
    if (!slot || !(text = dt_json_dumps (j))) {
        dt_http_reply_json (req, 200, j);
        return;
    }
    json_decref (j);
    free (slot->text);
    *slot = (struct view_cache){
        .id = id, .built_ms = now, .sig = sig, .text = text, .len = strlen (text)
    };
    dt_http_reply_json_text (req, 200, text, slot->len);
}

/* The common start of the per-job reads: auth, id, existence, who may
 * see what (*viewer, *owner; may be NULL). */
static bool job_read (struct ctld *ctx, dt_http_req_t *req, int64_t *id, int *attempt,
                      uid_t *viewer, uid_t *owner)
{
    uid_t uid;
    gid_t gid;
    json_t *j;
    if (!user_auth (ctx, req, &uid, &gid) || !job_id (req, id))
        return false;
    if (!(j = job_view (ctx, req, *id, false)) || !job_visible (ctx, req, j, *id, uid))
        return false;
    if (viewer)
        *viewer = uid;
    if (owner)
        *owner = privacy_owner (j);
    if (attempt)
        *attempt = json_integer_value (json_object_get (j, "attempt"));
    json_decref (j);
    return true;
}

static void events_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    int64_t id, after = 0;
    const char *a = dt_http_req_query (req, "after");
    dt_error_t err;
    json_t *ev;

    uid_t viewer, owner;

    if (!job_read (ctx, req, &id, NULL, &viewer, &owner))
        return;
    if (a) {
        char *end;
        after = strtoll (a, &end, 10);
        if (!*a || *end || after < 0) {
            dt_http_reply_error (req, 400, "after",
                                 "after: must be an event id (integer >= 0)");
            return;
        }
    }
    if (!(ev = store_events_json (ctx->store, id, after, events_limit, &err)))
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else {
        privacy_redact (ctx->cfg, ev, viewer, owner);
        dt_http_reply_json (req, 200, ev);
    }
}

static void checkpoints_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    int64_t id;
    dt_error_t err;
    json_t *c;

    if (!job_read (ctx, req, &id, NULL, NULL, NULL))
        return;
    if (!(c = store_ckpts_json (ctx->store, id, &err)))
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else
        dt_http_reply_json (req, 200, c);
}

static void metrics_job_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    int64_t id;
    dt_error_t err;

    const char *mp = dt_http_req_query (req, "max_points");
    long max_points = 0;

    if (!job_read (ctx, req, &id, NULL, NULL, NULL))
        return;
    if (mp) {
        char *end;
        max_points = strtol (mp, &end, 10);
        if (!*mp || *end || max_points < 16 || max_points > 100000) {
            dt_http_reply_error (req, 400, "max_points",
                                 "max_points: must be an integer in [16, 100000]");
            return;
        }
    }
    /* Plots ask for a bounded answer (store_plot.c); the total says how
     * many rows the store holds. */
    size_t len = 0;
    char *text = store_metrics_text (ctx->store, id, (int)max_points, &len, &err);
    if (!text)
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else
        dt_http_reply_json_text (req, 200, text, len);
    free (text);
}

static void ranks_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    int64_t id;
    int attempt = 0;
    dt_error_t err;
    json_t *r;

    if (!job_read (ctx, req, &id, &attempt, NULL, NULL))
        return;
    if ((r = jobs_ranks_json (ctx->jobs, id))) {
        dt_http_reply_json (req, 200, r);
        return;
    }
    if (!(r = store_ranks_json (ctx->store, id, attempt, &err)))
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else
        dt_http_reply_json (req, 200, r);
}

/* The goodput report (report.c): any authenticated user, like the job
 * views, under the same PrivateData rules. */
static void report_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    int64_t id;
    dt_error_t err;
    json_t *r;

    if (!user_auth (ctx, req, &uid, &gid) || !job_id (req, &id))
        return;
    if (!(r = report_job_json (ctx->report, id, &err))) {
        dt_http_reply_error (req, errno == ENOENT ? 404 : 500, NULL, "%s", err.text);
        return;
    }
    /* PrivateData: what others may not see of the job (its owner's). */
    struct store_job_row jr;
    memset (&jr, 0, sizeof (jr));
    if (store_job_load (ctx->store, id, &jr, &err) < 0) {
        json_decref (r);
        dt_http_reply_error (req, errno == ENOENT ? 404 : 500, NULL, "%s", err.text);
        return;
    }
    uid_t owner = jr.uid;
    store_job_row_clear (&jr);
    if (!privacy_sees_job (ctx->cfg, uid, owner)) {
        json_decref (r);
        dt_http_reply_error (req, 404, NULL, "job %lld not found", (long long)id);
        return;
    }
    privacy_redact (ctx->cfg, r, uid, owner);
    dt_http_reply_json (req, 200, r);
}

static void cancel_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    static const char *const keys[] = { "reason", NULL };
    uid_t uid;
    gid_t gid;
    int64_t id;
    json_t *body, *j;
    const char *reason = NULL;
    dt_error_t err;
    int status;

    api_changed ();

    if (!user_auth (ctx, req, &uid, &gid) || !job_id (req, &id) ||
        !body_object (req, &body))
        return;
    if (dt_json_check_object (body, "", keys, &err) < 0 ||
        dt_json_get_str (body, "", "reason", false, 200, true, &reason, &err) < 0) {
        reply_err (req, 400, &err);
        goto done;
    }
    if (jobs_cancel (ctx->jobs, id, uid, reason, &status, &err) < 0) {
        dt_http_reply_error (req, status, NULL, "%s", err.text);
        goto done;
    }
    if ((j = job_view (ctx, req, id, true)))
        dt_http_reply_json (req, 200, j);
done:
    json_decref (body);
}

static void resubmit_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    static const char *const keys[] = { "exclude", "from_scratch", NULL };
    uid_t uid;
    gid_t gid;
    int64_t id;
    json_t *body, *exclude = NULL, *j, *v;
    bool scratch = false;
    dt_error_t err;
    int status;
    size_t i;

    api_changed ();

    if (!user_auth (ctx, req, &uid, &gid) || !job_id (req, &id) ||
        !body_object (req, &body))
        return;
    if (dt_json_check_object (body, "", keys, &err) < 0 ||
        dt_json_get_arr (body, "", "exclude", false, &exclude, &err) < 0 ||
        dt_json_get_bool (body, "", "from_scratch", false, &scratch, &err) < 0) {
        reply_err (req, 400, &err);
        goto done;
    }
    json_array_foreach (exclude, i, v)
    {
        if (!json_is_string (v) || json_string_length (v) == 0 ||
            json_string_length (v) > 63) {
            dt_http_reply_error (req, 400, "exclude",
                                 "exclude[%zu]: expected a node name", i);
            goto done;
        }
    }
    if (jobs_resubmit (ctx->jobs, id, uid, exclude, scratch, &status, &err) < 0) {
        dt_http_reply_error (req, status, NULL, "%s", err.text);
        goto done;
    }
    if ((j = job_view (ctx, req, id, true)))
        dt_http_reply_json (req, 200, j);
done:
    json_decref (body);
}

static void checkpoint_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    static const char *const keys[] = { NULL };
    uid_t uid;
    gid_t gid;
    int64_t id, step;
    json_t *body;
    dt_error_t err;
    int status;

    api_changed ();

    if (!user_auth (ctx, req, &uid, &gid) || !job_id (req, &id) ||
        !body_object (req, &body))
        return;
    if (dt_json_check_object (body, "", keys, &err) < 0) {
        reply_err (req, 400, &err);
        goto done;
    }
    if (jobs_checkpoint (ctx->jobs, id, uid, &step, &status, &err) < 0) {
        dt_http_reply_error (req, status, NULL, "%s", err.text);
        goto done;
    }
    dt_http_reply_json (req, 200, json_pack ("{s:I}", "step", (json_int_t)step));
done:
    json_decref (body);
}

/* A job's owner, for the node views' PrivateData (privacy.h). */
static uid_t job_owner_of (int64_t id, void *arg)
{
    struct ctld *ctx = arg;
    struct job *j = jobs_find (ctx->jobs, id);
    return j ? j->row.uid : store_job_owner (ctx->store, id);
}

static void nodes_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    dt_error_t err;
    json_t *n;

    if (!user_auth (ctx, req, &uid, &gid))
        return;
    if (!(n = store_nodes_json (ctx->store, &err)))
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else {
        privacy_redact_nodes (ctx->cfg, n, uid, job_owner_of, ctx);
        dt_http_reply_json (req, 200, n);
    }
}

/* {name} of the node routes; answers 400 itself on failure. */
static const char *node_name (dt_http_req_t *req)
{
    const char *name = dt_http_req_param (req, "name");
    if (!name || !*name || strlen (name) > 63) {
        dt_http_reply_error (req, 400, "name",
                             "name: expected a node name (1 to 63 characters)");
        return NULL;
    }
    return name;
}

/* GET /v1/nodes/{name}: one node with its health history (failures blamed
 * on it, admin clears), newest first; ?limit=N rows. */
static void node_show_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    dt_error_t err;
    const char *name, *lim = dt_http_req_query (req, "limit");
    int limit = node_history_default;
    json_t *n, *c;

    if (!user_auth (ctx, req, &uid, &gid) || !(name = node_name (req)))
        return;
    if (lim) {
        char *end;
        long v = strtol (lim, &end, 10);
        if (!*lim || *end || v < 1 || v > node_history_max) {
            dt_http_reply_error (req, 400, "limit",
                                 "limit: must be an integer in [1, %d]",
                                 node_history_max);
            return;
        }
        limit = v;
    }
    if (!(n = store_node_json (ctx->store, name, limit, &err))) {
        int e = errno;
        dt_http_reply_error (req, e == ENOENT ? 404 : 500, e == ENOENT ? "name" : NULL,
                             "%s", err.text);
        return;
    }
    /* Who cleared it, by name where the uid is known here. */
    c = json_object_get (n, "cleared");
    if (json_is_integer (json_object_get (c, "uid"))) {
        struct passwd *pw =
          getpwuid ((uid_t)json_integer_value (json_object_get (c, "uid")));
        json_object_set_new (c, "user", pw ? json_string (pw->pw_name) : json_null ());
    }
    else if (json_is_object (c))
        json_object_set_new (c, "user", json_null ());
    privacy_redact_nodes (ctx->cfg, n, uid, job_owner_of, ctx);
    dt_http_reply_json (req, 200, n);
}

/* POST /v1/nodes/{name}/clear: an admin puts a suspect node back
 * into service; answers the node list. */
static void node_clear_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    dt_error_t err;
    const char *name;
    int status;
    json_t *n;

    api_changed ();

    if (!user_auth (ctx, req, &uid, &gid) || !(name = node_name (req)))
        return;
    if (jobs_node_clear (ctx->jobs, name, uid, &status, &err) < 0) {
        dt_http_reply_error (req, status, status == 404 ? "name" : NULL, "%s", err.text);
        return;
    }
    if (!(n = store_nodes_json (ctx->store, &err)))
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else
        dt_http_reply_json (req, 200, n);
}

/* POST /v1/nodes/{name}/suspect: an admin takes a node out of new
 * attempts (until cleared) without waiting for failures of several
 * users' jobs to do so. */
static void node_suspect_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    dt_error_t err;
    const char *name;
    char note[96], detail[160];
    int64_t now = dt_real_ms ();
    bool changed = false;
    json_t *n;

    api_changed ();

    if (!user_auth (ctx, req, &uid, &gid) || !(name = node_name (req)))
        return;
    if (!config_is_admin (ctx->cfg, uid)) {
        dt_http_reply_error (req, 403, NULL, "only an admin may mark a node suspect");
        return;
    }
    snprintf (note, sizeof (note), "marked suspect by uid %ld", (long)uid);
    snprintf (detail, sizeof (detail),
              "node %s marked suspect by uid %ld: excluded from new "
              "attempts until cleared",
              name, (long)uid);
    if (store_begin (ctx->store, &err) < 0 ||
        store_node_mark_suspect (ctx->store, name, now, note, &changed, &err) < 0 ||
        (changed && store_event (ctx->store, now, 0, 0, "node_suspect", name, -1, detail,
                                 NULL, &err) < 0) ||
        store_commit (ctx->store, &err) < 0) {
        int e = errno;
        store_rollback (ctx->store);
        dt_http_reply_error (req, e == ENOENT ? 404 : 500, e == ENOENT ? "name" : NULL,
                             "%s", err.text);
        return;
    }
    if (changed)
        dt_log (LOG_NOTICE, "%s", detail);
    if (!(n = store_nodes_json (ctx->store, &err)))
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
    else
        dt_http_reply_json (req, 200, n);
}

static void prometheus_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    dt_error_t err;
    char *text = metrics_render (ctx->metrics, &err);

    if (!text) {
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
        return;
    }
    dt_http_reply_text (req, 200, "text/plain; version=0.0.4; charset=utf-8", text,
                        strlen (text));
    free (text);
}

static void healthz_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    /* agent_url: what agents dial (the agents' listener, or ControllerURL). */
    dt_http_reply_json (req, 200,
                        json_pack ("{s:s s:s s:s}", "status", "ok", "version",
                                   dt_version_string (), "agent_url", ctx->url));
}

int api_register_routes (struct ctld *ctx, dt_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        dt_http_handler_f cb;
    } routes[] = {
        { "POST", "/v1/jobs", submit_cb },
        { "GET", "/v1/jobs", list_cb },
        { "GET", "/v1/jobs/{id}", show_cb },
        { "GET", "/v1/jobs/{id}/events", events_cb },
        { "GET", "/v1/jobs/{id}/checkpoints", checkpoints_cb },
        { "GET", "/v1/jobs/{id}/metrics", metrics_job_cb },
        { "GET", "/v1/jobs/{id}/ranks", ranks_cb },
        { "GET", "/v1/jobs/{id}/report", report_cb },
        { "POST", "/v1/jobs/{id}/cancel", cancel_cb },
        { "POST", "/v1/jobs/{id}/resubmit", resubmit_cb },
        { "POST", "/v1/jobs/{id}/checkpoint", checkpoint_cb },
        { "GET", "/v1/nodes", nodes_cb },
        { "GET", "/v1/nodes/{name}", node_show_cb },
        { "POST", "/v1/nodes/{name}/clear", node_clear_cb },
        { "POST", "/v1/nodes/{name}/suspect", node_suspect_cb },
        { "GET", "/metrics", prometheus_cb },
        { "GET", "/healthz", healthz_cb },
    };
    for (size_t i = 0; i < sizeof (routes) / sizeof (routes[0]); i++) {
        if (dt_httpd_route (ctx->httpd, routes[i].method, routes[i].pattern, routes[i].cb,
                            ctx) < 0)
            return errnoprintf (err, errno, "route %s %s: %s", routes[i].method,
                                routes[i].pattern, strerror (errno));
    }
    return 0;
}
