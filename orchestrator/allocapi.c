/* allocapi.c: the allocation route (in-allocation restart).
 *
 * An allocation that outlives its attempts (launcher.h, "reuse") asks
 * here what to run next.  Only the Slurm launcher keeps one today: the
 * allocation of a job with spare nodes or restarting in place, whose batch
 * script
 * (launcher_slurm.c, make_script) runs one srun step per attempt and asks,
 * about four times a second:
 *
 *   POST /v1/alloc/next   Authorization: Bearer <token of the attempt that
 *                         created the allocation (the batch job's DT_TOKEN)>
 *   {"slurm_job_id": 17, "attempt": 2, "step_running": true}
 *
 *   -> {"action": "run", "attempt": 3, "token": "<hex>", "nodes": 3,
 *       "exclude": ["node2"]}        start attempt 3 as a new step
 *       (+ "nodelist": ["node1", "node3"] for a restart in place: run on
 *       exactly these nodes, the attempt before's)
 *   -> {"action": "wait"}            keep going (the step runs, or the
 *                                    controller has not decided yet)
 *   -> {"action": "exit"}            the job is over, or goes on in another
 *                                    allocation: end the batch script
 *
 * With ?format=sh the same answer comes as text/plain "key=value" lines
 * (exclude and nodelist comma-joined), which the batch script reads without a JSON
 * parser.  Documented in schemas/agent-api.md.
 *
 * The token is checked like an agent's, except that an ended attempt's
 * token is accepted here -- but only for the allocation that attempt
 * created, and only while the job's live attempt belongs to it: a token
 * cannot reach another allocation or job.
 */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/httpd.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "orchestrator/allocapi.h"
#include "orchestrator/auth.h"
#include "orchestrator/ctld.h"
#include "orchestrator/fsm.h"
#include "orchestrator/jobs.h"
#include "orchestrator/launcher.h"
#include "orchestrator/sha256.h"
#include "orchestrator/store.h"

/* A fresh token for 'att' (its old one is known by hash only), stored. */
static int new_token (struct ctld *ctx, struct attempt *att, dt_error_t *err)
{
    char old[65];

    snprintf (old, sizeof (old), "%s", att->row.token_sha256);
    if (auth_token_new (att->row.token, err) < 0)
        return -1;
    sha256_hex (att->row.token, strlen (att->row.token), att->row.token_sha256);
    if (store_attempt_update (ctx->store, &att->row, err) < 0) {
        att->row.token[0] = '\0';
        snprintf (att->row.token_sha256, sizeof (att->row.token_sha256), "%s", old);
        return -1;
    }
    return 0;
}

/* A node name safe to hand to a shell script as a word. */
static bool node_name_ok (const char *s)
{
    if (!s || !*s || strlen (s) > 63)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
            return false;
    return true;
}

/* Answer 'data' (stolen) as JSON, or as key=value lines for ?format=sh. */
static void reply (dt_http_req_t *req, json_t *data)
{
    const char *fmt = dt_http_req_query (req, "format");

    if (fmt && !strcmp (fmt, "sh")) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream (&text, &len);
        const char *k;
        json_t *v;

        if (!f) {
            json_decref (data);
            dt_http_reply_error (req, 500, NULL, "out of memory");
            return;
        }
        json_object_foreach (data, k, v)
        {
            if (json_is_string (v))
                fprintf (f, "%s=%s\n", k, json_string_value (v));
            else if (json_is_integer (v))
                fprintf (f, "%s=%" JSON_INTEGER_FORMAT "\n", k, json_integer_value (v));
            else if (json_is_array (v)) {
                size_t i;
                json_t *e;
                fprintf (f, "%s=", k);
                json_array_foreach (v, i, e)
                  fprintf (f, "%s%s", i ? "," : "", json_string_value (e));
                fprintf (f, "\n");
            }
        }
        fclose (f);
        json_decref (data);
        dt_http_reply_text (req, 200, "text/plain; charset=utf-8", text, len);
        free (text);
        return;
    }
    dt_http_reply_json (req, 200, data);
}

static void next_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    const char *tok = auth_bearer (req);
    struct store_attempt_row row;
    enum attempt_state tstate;
    dt_error_t err;
    json_error_t jerr;
    json_t *body = NULL;
    json_int_t sjid = 0, cur = 0;
    int tattempt = 0;
    int64_t jobid;
    char alloc[32];
    size_t len;
    const char *b;

    store_attempt_row_init (&row);
    if (!tok) {
        dt_http_reply_error (req, 401, NULL, "missing Authorization: Bearer <token>");
        goto done;
    }
    b = dt_http_req_body (req, &len);
    if (!b || !len || !(body = json_loadb (b, len, 0, &jerr))) {
        dt_http_reply_error (req, 400, NULL, "request body: expected a JSON object");
        goto done;
    }
    int running = 0;
    if (json_unpack_ex (body, &jerr, JSON_STRICT, "{s:I s:I s?b}", "slurm_job_id", &sjid,
                        "attempt", &cur, "step_running", &running) < 0) {
        dt_http_reply_error (req, 400, NULL,
                             "request body: %s (want slurm_job_id, attempt, "
                             "optional step_running)",
                             jerr.text);
        goto done;
    }
    if (sjid < 1 || sjid > UINT32_MAX) {
        dt_http_reply_error (req, 400, "slurm_job_id",
                             "slurm_job_id: must be a Slurm job id");
        goto done;
    }
    if (cur < 1) {
        dt_http_reply_error (req, 400, "attempt", "attempt: must be >= 1");
        goto done;
    }
    /* The token names an attempt; that attempt must have run in this
     * allocation (normally it created it). */
    if (store_attempt_by_token (ctx->store, tok, &jobid, &tattempt, &tstate, &err) < 0) {
        if (errno == ENOENT)
            dt_http_reply_error (req, 401, NULL, "unknown token");
        else
            dt_http_reply_error (req, 500, NULL, "%s", err.text);
        goto done;
    }
    snprintf (alloc, sizeof (alloc), "%" JSON_INTEGER_FORMAT, sjid);
    if (store_attempt_load (ctx->store, jobid, tattempt, &row, &err) < 0) {
        dt_http_reply_error (req, 500, NULL, "%s", err.text);
        goto done;
    }
    if (!launcher_same_alloc (row.handle, alloc)) {
        dt_http_reply_error (req, 403, "slurm_job_id",
                             "this token does not belong to "
                             "allocation %s",
                             alloc);
        goto done;
    }

    /* The job manager decides; this route only speaks the protocol. */
    struct jobs_alloc_next next;
    jobs_alloc_next (ctx->jobs, jobid, alloc, cur, running, &next);
    if (next.action == JOBS_ALLOC_EXIT)
        reply (req, json_pack ("{s:s s:s}", "action", "exit", "why", next.why));
    else if (next.action == JOBS_ALLOC_RUN) {
        /* Only names safe as shell words reach the script. */
        json_t *ex = json_array ();
        size_t i;
        json_t *v;
        json_array_foreach (next.exclude, i, v) if (node_name_ok (json_string_value (v)))
          json_array_append (ex, v);
        /* Only the token's hash survives a controller restart: an attempt
         * made before it gets a new token now (nobody holds the old one). */
        struct job *job = jobs_find (ctx->jobs, jobid);
        if (!next.token[0] &&
            (!job || !job->att || new_token (ctx, job->att, &err) < 0)) {
            dt_http_reply_error (req, 500, NULL, "%s",
                                 job ? err.text : "the job is gone");
            json_decref (ex);
            goto done;
        }
        /* In place: the nodes to run on, each a safe shell word too. */
        json_t *pin = NULL;
        if (next.nodelist) {
            char buf[256], *save = NULL;
            pin = json_array ();
            snprintf (buf, sizeof (buf), "%s", next.nodelist);
            for (char *t = strtok_r (buf, ",", &save); t && pin;
                 t = strtok_r (NULL, ",", &save)) {
                if (!node_name_ok (t)) {
                    json_decref (pin);
                    pin = NULL;
                }
                else
                    json_array_append_new (pin, json_string (t));
            }
        }
        reply (req, json_pack ("{s:s s:i s:s s:i s:o s:o*}", "action", "run", "attempt",
                               next.attempt, "token", next.token, "nodes", next.nodes,
                               "exclude", ex, "nodelist", pin));
    }
    else
        reply (req, json_pack ("{s:s}", "action", "wait"));
done:
    json_decref (body);
    store_attempt_row_clear (&row);
}

int allocapi_register_routes (struct ctld *ctx, dt_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        dt_http_handler_f cb;
    } routes[] = {
        { "POST", "/v1/alloc/next", next_cb },
    };
    for (size_t i = 0; i < sizeof (routes) / sizeof (routes[0]); i++)
        if (dt_httpd_route (ctx->httpd, routes[i].method, routes[i].pattern, routes[i].cb,
                            ctx) < 0)
            return errnoprintf (err, errno, "route %s %s: %s", routes[i].method,
                                routes[i].pattern, strerror (errno));
    return 0;
}
