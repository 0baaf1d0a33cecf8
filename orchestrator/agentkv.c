/* agentkv.c: the attempt's key-value store of the agents' API (PUT and GET
 * /v1/agent/kv/KEY, schemas/agent-api.md): the rendezvous of the trainers'
 * collectives.  The store lives in the attempt (struct attempt's kv list)
 * and ends with it. */
#include <config.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/httpd.h"
#include "common/jsonx.h"
#include "orchestrator/agentapi.h"
#include "orchestrator/agentkv.h"
#include "orchestrator/ctld.h"
#include "orchestrator/jobs.h"
#include "orchestrator/metrics.h"

/* KV limits of the contract: keys [A-Za-z0-9_.:/-]{1,200}, values up to
 * 64 KiB decoded (base64: 4/3 of that), and a cap per attempt so one
 * attempt cannot exhaust the controller's memory. */
static const size_t kv_key_max = 200;
static const size_t kv_value_max = (65536 + 2) / 3 * 4;
static const size_t kv_attempt_max = 64 << 20;
/* What one entry costs beyond its key and value (its struct, the
 * allocations' headers, its slot of the index): counted in both quotas,
 * so that many tiny keys cannot grow the controller's memory past them. */
static const size_t kv_entry_overhead = 96;

static size_t kv_slot (const struct attempt *att, const char *key)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)key; *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    return (size_t)(h & (att->kv_cap - 1));
}

static struct kv *kv_lookup (const struct attempt *att, const char *key)
{
    if (!att->kv_cap)
        return NULL;
    for (struct kv *kv = att->kv_index[kv_slot (att, key)]; kv; kv = kv->hnext)
        if (!strcmp (kv->key, key))
            return kv;
    return NULL;
}

/* Index a new entry (already on att->kv), growing the index at 3/4. */
static int kv_index_add (struct attempt *att, struct kv *kv)
{
    if ((att->kv_n + 1) * 4 > att->kv_cap * 3) {
        size_t cap = att->kv_cap ? att->kv_cap * 2 : 64;
        struct kv **idx = calloc (cap, sizeof (*idx));
        if (!idx)
            return -1;
        free (att->kv_index);
        att->kv_index = idx;
        att->kv_cap = cap;
        for (struct kv *e = att->kv; e; e = e->next) {
            if (e == kv)
                continue;
            size_t s = kv_slot (att, e->key);
            e->hnext = idx[s];
            idx[s] = e;
        }
    }
    size_t s = kv_slot (att, kv->key);
    kv->hnext = att->kv_index[s];
    att->kv_index[s] = kv;
    att->kv_n++;
    return 0;
}

static bool kv_key_ok (const char *k)
{
    size_t n = strlen (k);
    if (n == 0 || n > kv_key_max)
        return false;
    for (; *k; k++)
        if (!isalnum ((unsigned char)*k) && !strchr ("_.:/-", *k))
            return false;
    return true;
}

static bool base64_ok (const char *s, size_t n)
{
    if (n % 4)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (isalnum ((unsigned char)c) || c == '+' || c == '/')
            continue;
        if (c == '=' && i >= n - 2)
            continue;
        return false;
    }
    return true;
}

static const char *kv_key (dt_http_req_t *req)
{
    /* The route is /v1/agent/kv/{key} but keys may contain '/': take the
     * whole rest of the path. */
    const char *p = dt_http_req_path (req);
    const char *pre = "/v1/agent/kv/";
    if (p && !strncmp (p, pre, strlen (pre)))
        return p + strlen (pre);
    return dt_http_req_param (req, "key");
}

static void kv_put_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    struct attempt *att;
    json_t *body;
    const char *key = kv_key (req), *value;
    static const char *const keys[] = { "value", NULL };
    dt_error_t err;

    if (!(att = agentapi_auth (ctx, req)))
        return;
    if (!key || !kv_key_ok (key)) {
        dt_http_reply_error (req, 400, "key", "key: must match [A-Za-z0-9_.:/-]{1,200}");
        return;
    }
    if (!(body = agentapi_body_json (req)))
        return;
    if (dt_json_check_object (body, "", keys, &err) < 0 ||
        dt_json_get_str (body, "", "value", true, 0, true, &value, &err) < 0) {
        agentapi_reply_field_error (req, 400, &err);
        goto done;
    }
    size_t n = strlen (value);
    if (n > kv_value_max) {
        dt_http_reply_error (req, 413, "value", "value: larger than 64 KiB");
        goto done;
    }
    if (!base64_ok (value, n)) {
        dt_http_reply_error (req, 400, "value", "value: not base64");
        goto done;
    }
    struct kv *kv = kv_lookup (att, key);
    size_t old = kv ? strlen (kv->value) : 0;
    /* a new entry costs its key and its overhead too */
    size_t add = kv ? 0 : strlen (key) + kv_entry_overhead;
    if (att->kv_bytes - old + n + add > kv_attempt_max) {
        dt_http_reply_error (req, 413, NULL, "the attempt's key-value store is full");
        goto done;
    }
    /* Every attempt's store together (the controller's memory). */
    int64_t kv_max = ctx->cfg->max_kv_bytes;
    size_t kv_now = kv_max > 0 ? jobs_kv_bytes (ctx->jobs) : 0;
    if (kv_max > 0 && n + add > old && kv_now - old + n + add > (size_t)kv_max) {
        metrics_refused (ctx->metrics, REFUSED_MAX_KV_BYTES);
        dt_http_reply_error (req, 429, NULL,
                             "quota MaxKvBytes: the controller's key-value "
                             "stores hold %zu bytes, the limit is %lld",
                             kv_now, (long long)kv_max);
        goto done;
    }
    char *copy = strdup (value);
    if (!copy) {
        dt_http_reply_error (req, 500, NULL, "out of memory");
        goto done;
    }
    if (!kv) {
        if (!(kv = calloc (1, sizeof (*kv))) || !(kv->key = strdup (key))) {
            free (kv);
            free (copy);
            dt_http_reply_error (req, 500, NULL, "out of memory");
            goto done;
        }
        kv->next = att->kv;
        att->kv = kv;
        if (kv_index_add (att, kv) < 0) {
            att->kv = kv->next;
            free (kv->key);
            free (kv);
            free (copy);
            dt_http_reply_error (req, 500, NULL, "out of memory");
            goto done;
        }
        att->kv_bytes += add;
    }
    free (kv->value);
    kv->value = copy;
    att->kv_bytes = att->kv_bytes - old + n;
    dt_http_reply_json (req, 200, NULL);
done:
    json_decref (body);
}

static void kv_get_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    struct attempt *att;
    const char *key = kv_key (req);

    if (!(att = agentapi_auth (ctx, req)))
        return;
    if (!key || !kv_key_ok (key)) {
        dt_http_reply_error (req, 400, "key", "key: must match [A-Za-z0-9_.:/-]{1,200}");
        return;
    }
    struct kv *kv = kv_lookup (att, key);
    if (kv) {
        dt_http_reply_json (req, 200, json_pack ("{s:s}", "value", kv->value));
        return;
    }
    dt_http_reply_error (req, 404, "key", "key '%s' is not set", key);
}

int agentkv_register_routes (struct ctld *ctx, dt_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        dt_http_handler_f cb;
    } routes[] = {
        { "PUT", "/v1/agent/kv/{key}", kv_put_cb },
        { "GET", "/v1/agent/kv/{key}", kv_get_cb },
    };
    for (size_t i = 0; i < sizeof (routes) / sizeof (routes[0]); i++)
        if (dt_httpd_route (ctx->httpd, routes[i].method, routes[i].pattern, routes[i].cb,
                            ctx) < 0)
            return errnoprintf (err, errno, "route %s %s: %s", routes[i].method,
                                routes[i].pattern, strerror (errno));
    /* Keys may contain '/': the same handlers also serve keys of 2 to 12
     * segments (kv_key takes the whole rest of the path); dttrain's gloo
     * bootstrap uses 5 (dttrain/<job>/a<n>/s<seq>/rank_<r>). */
    char deeper[256] = "/v1/agent/kv/{k1}";
    for (int d = 2; d <= 12; d++) {
        size_t l = strlen (deeper);
        snprintf (deeper + l, sizeof (deeper) - l, "/{k%d}", d);
        if (dt_httpd_route (ctx->httpd, "PUT", deeper, kv_put_cb, ctx) < 0 ||
            dt_httpd_route (ctx->httpd, "GET", deeper, kv_get_cb, ctx) < 0)
            return errnoprintf (err, errno, "route %s: %s", deeper, strerror (errno));
    }
    return 0;
}
