/* relayapi.c: POST /v1/agent/relay, the heartbeats of a subtree in one
 * request (see relayapi.h).
 *
 * The body is newline-delimited JSON: each line is one node's heartbeat,
 * byte for byte the body that node would POST to /v1/agent/heartbeat, so a
 * relay forwards its children's messages without decoding them, and the
 * controller decodes each with the heartbeat's own parser and applies it
 * with the heartbeat's own code.  A bad or unknown line does not spoil the
 * others: the answer lists them, and the relay passes each verdict down to
 * the node concerned.  The commands of the answer are the attempt's (the
 * same for every node), so one answer serves the whole subtree.
 */
#include <config.h>
#include <string.h>

#include "common/dtime.h"
#include "common/httpd.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "orchestrator/agentapi.h"
#include "orchestrator/ctld.h"
#include "orchestrator/hbparse.h"
#include "orchestrator/jobs.h"
#include "orchestrator/metrics.h"
#include "orchestrator/relayapi.h"

/* The decoded line: one buffer for all of them (single-threaded daemon). */
static struct hb_msg relay_scratch;

/* Lines named in the answer, at most: a relay whose whole subtree is
 * unknown learns enough from the first ones, and the answer stays small. */
static const size_t relay_listed_max = 256;

static void relay_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    int64_t t0 = dt_mono_ns ();
    struct hb_msg *m = &relay_scratch;
    struct attempt *att;
    size_t len, applied = 0, lines = 0;
    dt_error_t err;
    json_t *unknown = NULL, *refused = NULL;

    if (!(att = agentapi_auth (ctx, req)))
        return;
    /* Owned by the request and NUL-terminated: each line is cut in place. */
    char *body = (char *)dt_http_req_body (req, &len);
    if (!body || len == 0) {
        dt_http_reply_error (req, 400, NULL,
                             "request body: expected heartbeats, one JSON object a line");
        return;
    }
    if (!(unknown = json_array ()) || !(refused = json_array ()))
        goto nomem;
    for (char *p = body, *end = body + len; p < end;) {
        char *nl = memchr (p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        size_t n = (size_t)(stop - p);
        char saved = *stop;
        if (n == 0 || (n == 1 && *p == '\r')) {
            p = stop + 1;
            continue; /* blank lines between heartbeats are tolerated */
        }
        lines++;
        *stop = '\0';
        enum hb_result rc = hb_parse (p, n, att->row.world_size, m, &err);
        *stop = saved;
        p = stop + 1;
        if (rc == HB_ERR_NOMEM)
            goto nomem;
        struct agent *ag =
          rc == HB_OK || m->node[0] ? jobs_agent_find (att, m->node) : NULL;
        if (rc == HB_OK && ag) {
            agentapi_heartbeat_apply (ctx, att, ag, m);
            applied++;
            continue;
        }
        if (rc == HB_OK || (m->node[0] && !ag)) {
            /* Not registered (a restarted controller forgot it, or the
             * node is not of this attempt): it must register again. */
            if (json_array_size (unknown) < relay_listed_max)
                json_array_append_new (unknown, json_string (m->node));
            continue;
        }
        if (json_array_size (refused) < relay_listed_max)
            json_array_append_new (
              refused, json_pack ("{s:I s:s? s:s}", "line", (json_int_t)lines, "node",
                                  m->node[0] ? m->node : NULL, "error", err.text));
    }
    if (lines == 0) {
        json_decref (unknown);
        json_decref (refused);
        dt_http_reply_error (req, 400, NULL,
                             "request body: expected heartbeats, one JSON object a line");
        return;
    }
    if (json_array_size (refused) > 0)
        dt_log (LOG_WARNING, "job %lld attempt %d: relay: %zu of %zu heartbeats refused",
                (long long)att->row.job_id, att->row.attempt, json_array_size (refused),
                lines);
    /* The answer: the attempt's commands (as for one heartbeat), and the
     * verdicts on the lines that were not applied. */
    char cmds[128];
    size_t cn = jobs_commands_text (ctx->jobs, att, cmds, sizeof (cmds));
    json_t *cj = cn < sizeof (cmds) ? dt_json_parse (cmds, cn, &err) : NULL;
    if (!cj) {
        json_decref (unknown);
        json_decref (refused);
        dt_http_reply_error (req, 500, NULL, "internal error: commands");
        return;
    }
    dt_http_reply_json (req, 200,
                        json_pack ("{s:o s:I s:o s:o}", "commands", cj, "applied",
                                   (json_int_t)applied, "unknown", unknown, "refused",
                                   refused));
    /* One observation per relayed request: what a relay's heartbeat costs. */
    metrics_heartbeat (ctx->metrics, (dt_mono_ns () - t0) / 1e9);
    return;
nomem:
    json_decref (unknown);
    json_decref (refused);
    dt_http_reply_error (req, 500, NULL, "out of memory");
}

int relayapi_register_routes (struct ctld *ctx, dt_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        dt_http_handler_f cb;
    } routes[] = {
        { "POST", "/v1/agent/relay", relay_cb },
    };
    for (size_t i = 0; i < sizeof (routes) / sizeof (routes[0]); i++)
        if (dt_httpd_route (ctx->httpd, routes[i].method, routes[i].pattern, routes[i].cb,
                            ctx) < 0)
            return errprintf (err, "cannot register route %s %s", routes[i].method,
                              routes[i].pattern);
    return 0;
}
