/* ctl.c: HTTP calls of the agent to the controller (see ctl.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/httpc.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "ctl.h"

/* The agent does its own retrying (it must keep watching its ranks between
 * tries), so each call is one try with short timeouts: a controller that
 * does not answer within these is treated as unreachable for this round. */
static const struct dt_httpc_opts ctl_http_opts = {
    .connect_timeout_ms = 1000,
    .total_timeout_ms = 3000,
    .retries = 0,
    .backoff_ms = 100,
    .backoff_max_ms = 1000,
};

/* Registration is not urgent, and in a storm of thousands the controller
 * answers in turn: a try waits for its answer this long, rather than
 * giving up and asking again at the back of the queue. */
static const struct dt_httpc_opts ctl_register_opts = {
    .connect_timeout_ms = 3000,
    .total_timeout_ms = 30000,
    .retries = 0,
    .backoff_ms = 100,
    .backoff_max_ms = 1000,
};

/* How long the controller may hold a registration while the others
 * register (a long poll, "wait_ms"): it answers when the rendezvous
 * completes, so a storm of agents asks once and a small attempt starts as
 * soon as its last agent is in.  Below the 30 s of ctl_register_opts. */
static const int64_t register_wait_ms = 10000;

struct ctl {
    dt_httpc_t *http;
    dt_httpc_t *reg; /* for registration (ctl_register_opts) */
};

void layout_clear (struct layout *l)
{
    if (!l)
        return;
    free (l->run_id);
    free (l->master_addr);
    for (char **p = l->command; p && *p; p++)
        free (*p);
    free (l->command);
    for (char **p = l->env; p && *p; p++)
        free (*p);
    free (l->env);
    free (l->workdir);
    free (l->checkpoint_dir);
    free (l->resume_dir);
    free (l->skip_steps);
    for (char **p = l->ancestors; p && *p; p++)
        free (*p);
    free (l->ancestors);
    memset (l, 0, sizeof (*l));
}

ctl_t *ctl_create (const char *url, const char *token, dt_error_t *err)
{
    char hdr[1024];
    ctl_t *c = calloc (1, sizeof (*c));
    if (!c) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (!(c->http = dt_httpc_create (url, &ctl_http_opts, err)) ||
        !(c->reg = dt_httpc_create (url, &ctl_register_opts, err)))
        goto error;
    if (token && *token) {
        snprintf (hdr, sizeof (hdr), "Authorization: Bearer %s", token);
        if (dt_httpc_set_header (c->http, hdr) < 0 ||
            dt_httpc_set_header (c->reg, hdr) < 0) {
            errprintf (err, "cannot set the Authorization header");
            goto error;
        }
    }
    return c;
error:
    ctl_destroy (c);
    return NULL;
}

int ctl_set_token (ctl_t *c, const char *token)
{
    char hdr[1024];
    snprintf (hdr, sizeof (hdr), "Authorization: Bearer %s", token);
    dt_httpc_clear_headers (c->http);
    dt_httpc_clear_headers (c->reg);
    return dt_httpc_set_header (c->http, hdr) < 0 || dt_httpc_set_header (c->reg, hdr) < 0
             ? -1
             : 0;
}

void ctl_destroy (ctl_t *c)
{
    if (c) {
        int saved = errno;
        dt_httpc_destroy (c->http);
        dt_httpc_destroy (c->reg);
        free (c);
        errno = saved;
    }
}

static int post_on (dt_httpc_t *h, const char *path, const json_t *body, long *status,
                    json_t **data, dt_error_t *err)
{
    json_t *reply = NULL;
    if (dt_httpc_json (h, "POST", path, body, status, &reply, err) < 0)
        return -1;
    if (*status >= 400) {
        const char *e = dt_httpc_envelope_error (reply);
        dt_log (*status == CTL_GONE ? LOG_INFO : LOG_WARNING, "POST %s: HTTP %ld%s%s",
                path, *status, e ? ": " : "", e ? e : "");
    }
    if (data) {
        json_t *d = reply ? json_object_get (reply, "data") : NULL;
        *data = d && !json_is_null (d) ? json_incref (d) : NULL;
    }
    json_decref (reply);
    return 0;
}

int ctl_post (ctl_t *c, const char *path, const json_t *body, long *status, json_t **data,
              dt_error_t *err)
{
    return post_on (c->http, path, body, status, data, err);
}

int64_t ctl_random_ms (int64_t below)
{
    static unsigned int seed;
    if (!seed)
        seed = (unsigned int)getpid () ^ (unsigned int)dt_mono_ns ();
    if (below < 1)
        return 0;
    return rand_r (&seed) % below;
}

int64_t ctl_jitter_ms (int64_t base_ms)
{
    if (base_ms < 2)
        return base_ms;
    return base_ms / 2 + ctl_random_ms (base_ms);
}

int ctl_post_text (ctl_t *c, const char *path, const char *body, size_t len,
                   const char *content_type, long *status, json_t **data, dt_error_t *err)
{
    char *reply = NULL;
    size_t rlen = 0;
    dt_error_t e;
    if (dt_httpc_raw (c->http, "POST", path, body, len, content_type, status, &reply,
                      &rlen, err) < 0)
        return -1;
    json_t *env = reply && rlen ? dt_json_parse (reply, rlen, &e) : NULL;
    free (reply);
    if (*status >= 400) {
        const char *m = dt_httpc_envelope_error (env);
        dt_log (*status == CTL_GONE ? LOG_INFO : LOG_WARNING, "POST %s: HTTP %ld%s%s",
                path, *status, m ? ": " : "", m ? m : "");
    }
    if (data) {
        json_t *d = env ? json_object_get (env, "data") : NULL;
        *data = d && !json_is_null (d) ? json_incref (d) : NULL;
    }
    json_decref (env);
    return 0;
}

/* ---- registration -------------------------------------------------------- */

static char *dup_opt_str (const json_t *obj, const char *key)
{
    json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? strdup (json_string_value (v)) : NULL;
}

static int get_int (const json_t *d, const char *key, bool required, json_int_t min,
                    json_int_t max, json_int_t dflt, int64_t *out, dt_error_t *err)
{
    json_int_t v = dflt;
    if (dt_json_get_int (d, "data", key, required, min, max, &v, err) < 0)
        return -1;
    *out = v;
    return 0;
}

static char **str_array (const json_t *arr, const char *path, dt_error_t *err)
{
    size_t n = json_array_size (arr), i;
    char **v = calloc (n + 1, sizeof (char *));
    if (!v) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    for (i = 0; i < n; i++) {
        json_t *s = json_array_get (arr, i);
        if (!json_is_string (s) || !(v[i] = strdup (json_string_value (s)))) {
            errnoprintf (err, EPROTO, "%s[%zu]: expected string", path, i);
            goto error;
        }
    }
    return v;
error:
    for (i = 0; i < n; i++)
        free (v[i]);
    free (v);
    return NULL;
}

/* The fan-in tree of the ready answer: absent or null means direct
 * heartbeats.  0 or -1 with err (the caller clears l). */
static int parse_tree (const json_t *d, struct layout *l, dt_error_t *err)
{
    json_t *o = json_object_get (d, "tree");
    if (json_is_object (o)) {
        json_int_t w = 0;
        json_t *anc = json_object_get (o, "ancestors");
        if (dt_json_get_int (o, "data.tree", "width", true, 1, 4096, &w, err) < 0)
            return -1;
        l->tree_width = (int)w;
        if (!json_is_array (anc) || json_array_size (anc) == 0)
            return errnoprintf (err, EPROTO,
                                "data.tree.ancestors: expected a non-empty array");
        if (!(l->ancestors = str_array (anc, "data.tree.ancestors", err)))
            return -1;
    }
    else if (o && !json_is_null (o))
        return errnoprintf (err, EPROTO, "data.tree: expected object or null");
    return 0;
}

/* Decode the "ready" answer.  Unknown keys are tolerated (the controller
 * may add fields in a later minor version); every known one is checked. */
int ctl_parse_layout (const json_t *d, struct layout *l, dt_error_t *err)
{
    int64_t v;
    const char *s;
    json_t *o;
    memset (l, 0, sizeof (*l));
    l->resume_step = -1;
#define INT_FIELD(key, req, min, max, dflt, dst)                                         \
    do {                                                                                 \
        if (get_int (d, key, req, min, max, dflt, &v, err) < 0)                          \
            goto error;                                                                  \
        dst = v;                                                                         \
    } while (0)
    INT_FIELD ("job", true, 0, INT64_MAX, 0, l->job);
    INT_FIELD ("attempt", true, 0, INT32_MAX, 0, l->attempt);
    INT_FIELD ("node_rank", false, -1, 1000000, 0, l->node_rank); /* -1: a spare */
    INT_FIELD ("num_nodes", false, 0, 1000000, 1, l->num_nodes);
    INT_FIELD ("ranks_per_node", false, 0, 4096, 1, l->ranks_per_node);
    INT_FIELD ("world_size", false, 0, INT32_MAX, 1, l->world_size);
    INT_FIELD ("master_port", false, 0, 65535, 0, l->master_port);
    INT_FIELD ("restart_count", false, 0, INT32_MAX, 0, l->restart_count);
    INT_FIELD ("max_restarts", false, 0, INT32_MAX, 0, l->max_restarts);
    INT_FIELD ("heartbeat_interval_ms", false, 10, 3600000, 1000,
               l->heartbeat_interval_ms);
    INT_FIELD ("hang_timeout_ms", false, 0, INT64_MAX, 30000, l->hang_timeout_ms);
    INT_FIELD ("node_timeout_ms", false, 0, INT64_MAX, 10000, l->node_timeout_ms);
    INT_FIELD ("checkpoint_every_steps", false, 0, INT64_MAX, 0,
               l->checkpoint_every_steps);
    INT_FIELD ("integrity_every_steps", false, 0, INT64_MAX, -1,
               l->integrity_every_steps);
    INT_FIELD ("integrity_spike_window", false, 4, 4096, -1, l->integrity_spike_window);
#undef INT_FIELD
    l->integrity_spike_k = -1;
    if ((o = json_object_get (d, "integrity_spike_k"))) {
        if (!json_is_number (o) || json_number_value (o) < 0) {
            errnoprintf (err, EPROTO, "data.integrity_spike_k: expected a number >= 0");
            goto error;
        }
        l->integrity_spike_k = json_number_value (o);
    }
    if (dt_json_get_bool (d, "data", "spare", false, &l->spare, err) < 0)
        goto error;
    s = NULL;
    if (dt_json_get_str (d, "data", "run_id", false, 256, false, &s, err) < 0)
        goto error;
    char rid[64];
    snprintf (rid, sizeof (rid), "dt-%lld-a%d", (long long)l->job, l->attempt);
    l->run_id = strdup (s ? s : rid);
    l->master_addr = dup_opt_str (d, "master_addr");
    l->workdir = dup_opt_str (d, "workdir");
    l->checkpoint_dir = dup_opt_str (d, "checkpoint_dir");
    l->skip_steps = dup_opt_str (d, "skip_steps");
    if (!l->master_addr)
        l->master_addr = strdup ("127.0.0.1");

    o = json_object_get (d, "command");
    if (json_is_array (o) && json_array_size (o) > 0) {
        if (!(l->command = str_array (o, "data.command", err)))
            goto error;
    }
    else if (!l->spare) {
        errnoprintf (err, EPROTO,
                     "data.command: required (a non-empty array of strings)");
        goto error;
    }
    o = json_object_get (d, "env");
    size_t n = json_is_object (o) ? json_object_size (o) : 0, i = 0;
    if (!(l->env = calloc (n + 1, sizeof (char *)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    if (n) {
        const char *k;
        json_t *val;
        json_object_foreach (o, k, val)
        {
            if (!json_is_string (val)) {
                errnoprintf (err, EPROTO, "data.env.%s: expected string", k);
                goto error;
            }
            if (asprintf (&l->env[i++], "%s=%s", k, json_string_value (val)) < 0) {
                l->env[i - 1] = NULL;
                errnoprintf (err, ENOMEM, "out of memory");
                goto error;
            }
        }
    }
    o = json_object_get (d, "resume");
    if (json_is_object (o)) {
        json_int_t st = 0;
        if (dt_json_get_int (o, "data.resume", "step", true, 0, INT64_MAX, &st, err) < 0)
            goto error;
        l->resume_step = st;
        l->resume_dir = dup_opt_str (o, "dir");
    }
    else if (o && !json_is_null (o)) {
        errnoprintf (err, EPROTO, "data.resume: expected object or null");
        goto error;
    }
    if (parse_tree (d, l, err) < 0)
        goto error;
    if (!l->spare && (l->ranks_per_node < 1 || l->world_size < 1)) {
        errnoprintf (err, EPROTO, "data: ranks_per_node and world_size must be >= 1");
        goto error;
    }
    if (!l->run_id || !l->master_addr) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    return 0;
error:
    layout_clear (l);
    return -1;
}

int ctl_register (ctl_t *c, const struct node_info *ni, int64_t timeout_ms, int stopfd,
                  struct layout *out, dt_error_t *err)
{
    int64_t deadline = dt_mono_ms () + timeout_ms;
    int delay = 100;
    int busy = 0;        /* answers 503/429 in a row */
    bool hinted = false; /* this wait is the controller's retry_ms */
    int rc = -1;
    json_t *body = json_pack (
      "{s:s, s:i, s:s, s:i, s:I, s:I, s:I, s:o}", "node", ni->name, "node_order",
      ni->order, "addr", ni->addr, "port", ni->port, "pid", (json_int_t)getpid (),
      "slurm_job_id", (json_int_t)ni->slurm_job_id, "slurm_step_id",
      (json_int_t)ni->slurm_step_id, "hostinfo", node_hostinfo ());
    if (!body)
        return errnoprintf (err, ENOMEM, "out of memory");
    if (ni->relay_port > 0)
        json_object_set_new (body, "relay_port", json_integer (ni->relay_port));
    json_object_set_new (body, "wait_ms", json_integer (register_wait_ms));
    /* node_hostinfo ran helper commands (popen: srun --version under
     * Slurm); their SIGCHLDs are pending on stopfd (the agent's signalfd),
     * which the wait below reads as "stop".  Consume only those: a TERM
     * stays pending. */
    {
        sigset_t chld;
        struct timespec zero = { 0, 0 };
        sigemptyset (&chld);
        sigaddset (&chld, SIGCHLD);
        while (sigtimedwait (&chld, NULL, &zero) > 0)
            ;
    }
    for (int tries = 1;; tries++) {
        long status = 0;
        json_t *data = NULL;
        dt_error_t e;
        if (post_on (c->reg, "/v1/agent/register", body, &status, &data, &e) < 0) {
            dt_log (tries == 1 || tries % 20 == 0 ? LOG_WARNING : LOG_DEBUG,
                    "register (try %d): %s", tries, e.text);
        }
        else if (status == 200 && data) {
            const char *state = NULL;
            json_t *sv = json_object_get (data, "state");
            state = json_is_string (sv) ? json_string_value (sv) : "";
            if (strcmp (state, "ready") == 0) {
                rc = ctl_parse_layout (data, out, err);
                if (rc < 0)
                    errno = EPROTO;
                json_decref (data);
                break;
            }
            if (strcmp (state, "waiting") != 0) {
                errnoprintf (err, EPROTO,
                             "register: data.state '%s' is neither ready nor waiting",
                             state);
                json_decref (data);
                break;
            }
            dt_log (LOG_DEBUG, "register: waiting for the other agents");
            /* The controller says when to ask again (many agents waiting). */
            json_t *rm = json_object_get (data, "retry_ms");
            if (json_is_integer (rm) && json_integer_value (rm) > 0 &&
                json_integer_value (rm) <= 60000) {
                delay = (int)ctl_jitter_ms (json_integer_value (rm));
                hinted = true;
            }
        }
        else if (status == CTL_GONE) {
            errnoprintf (err, ESTALE, "register: the attempt is over (HTTP 410)");
            json_decref (data);
            break;
        }
        else if (status == 401 || status == 403) {
            errnoprintf (err, EACCES, "register: token refused (HTTP %ld)", status);
            json_decref (data);
            break;
        }
        else if (status == 400) {
            errnoprintf (err, EPROTO,
                         "register: controller refused the request (HTTP 400)");
            json_decref (data);
            break;
        }
        else if (status == 503 || status == 429) {
            /* The controller is at its connection limit (or busy): back off
             * further than for a wait, with jitter, and say so. */
            int64_t base = (int64_t)1000 << (busy < 3 ? busy : 3);
            busy++;
            delay = (int)ctl_jitter_ms (base);
            dt_log (busy == 1 || busy % 10 == 0 ? LOG_WARNING : LOG_DEBUG,
                    "register: controller busy (HTTP %ld, try %d): retrying in %d ms",
                    status, tries, delay);
        }
        else {
            dt_log (LOG_WARNING, "register: HTTP %ld, retrying", status);
        }
        if (status != 503 && status != 429)
            busy = 0;
        json_decref (data);
        int64_t left = deadline - dt_mono_ms ();
        if (left <= 0) {
            errnoprintf (err, ETIMEDOUT, "register: no ready answer within %lld ms",
                         (long long)timeout_ms);
            break;
        }
        struct pollfd pfd = { .fd = stopfd, .events = POLLIN };
        int d = delay < left ? delay : (int)left;
        if (poll (&pfd, stopfd >= 0 ? 1 : 0, d) > 0) {
            errnoprintf (err, EINTR, "register: interrupted by a signal");
            break;
        }
        if (hinted)
            hinted = false; /* the next answer says again */
        else if (busy == 0 && delay < 1000)
            delay = delay * 3 / 2;
        else if (busy == 0)
            delay = (int)ctl_jitter_ms (1000);
    }
    json_decref (body);
    return rc;
}

/* ---- kv relay ------------------------------------------------------------ */

static const char b64chars[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode (const void *p, size_t n)
{
    const unsigned char *s = p;
    char *out = malloc ((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v =
          s[i] << 16 | (i + 1 < n ? s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        *o++ = b64chars[(v >> 18) & 63];
        *o++ = b64chars[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? b64chars[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int b64_val (char c)
{
    const char *p = c ? strchr (b64chars, c) : NULL;
    return p ? (int)(p - b64chars) : -1;
}

int b64_decode (const char *s, void **out, size_t *outlen)
{
    size_t n = strlen (s);
    if (n % 4) {
        errno = EINVAL;
        return -1;
    }
    unsigned char *o = malloc (n / 4 * 3 + 1);
    size_t k = 0;
    if (!o)
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        int a = b64_val (s[i]), b = b64_val (s[i + 1]);
        int pad2 = s[i + 2] == '=', pad3 = s[i + 3] == '=';
        int c = pad2 ? 0 : b64_val (s[i + 2]), d = pad3 ? 0 : b64_val (s[i + 3]);
        if (a < 0 || b < 0 || c < 0 || d < 0 || (pad2 && !pad3) ||
            ((pad2 || pad3) && i + 4 != n)) {
            free (o);
            errno = EINVAL;
            return -1;
        }
        unsigned v =
          (unsigned)a << 18 | (unsigned)b << 12 | (unsigned)c << 6 | (unsigned)d;
        o[k++] = (v >> 16) & 0xff;
        if (!pad2)
            o[k++] = (v >> 8) & 0xff;
        if (!pad3)
            o[k++] = v & 0xff;
    }
    *out = o;
    *outlen = k;
    return 0;
}

int ctl_kv_put (ctl_t *c, const char *key, const void *val, size_t len, long *status,
                dt_error_t *err)
{
    char path[512];
    char *b = b64_encode (val, len);
    if (!b)
        return errnoprintf (err, ENOMEM, "out of memory");
    json_t *body = json_pack ("{s:s}", "value", b);
    free (b);
    if (!body)
        return errnoprintf (err, ENOMEM, "out of memory");
    snprintf (path, sizeof (path), "/v1/agent/kv/%s", key);
    json_t *reply = NULL;
    int rc = dt_httpc_json (c->http, "PUT", path, body, status, &reply, err);
    json_decref (body);
    json_decref (reply);
    return rc;
}

int ctl_kv_get (ctl_t *c, const char *key, void **val, size_t *len, long *status,
                dt_error_t *err)
{
    char path[512];
    json_t *reply = NULL;
    snprintf (path, sizeof (path), "/v1/agent/kv/%s", key);
    if (dt_httpc_json (c->http, "GET", path, NULL, status, &reply, err) < 0)
        return -1;
    int rc = 0;
    if (*status == 200) {
        json_t *d = reply ? json_object_get (reply, "data") : NULL;
        json_t *v = d ? json_object_get (d, "value") : NULL;
        if (!json_is_string (v) || b64_decode (json_string_value (v), val, len) < 0)
            rc = errnoprintf (err, EPROTO, "GET %s: data.value: expected base64 string",
                              path);
    }
    json_decref (reply);
    return rc;
}
