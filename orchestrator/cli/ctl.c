/* ctl.c: dtctl's connection to dtctld (URL, MUNGE, requests, exit codes). */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <munge.h>

#include "common/conf.h"
#include "common/errprintf.h"
#include "common/httpc.h"
#include "common/jsonx.h"
#include "orchestrator/authdigest.h"
#include "orchestrator/cli/ctl.h"

#ifndef DTCTL_CONF_PATH
#define DTCTL_CONF_PATH "/etc/dtctl/dtctl.conf"
#endif

/* A CLI talks to one controller a few times: one try plus one retry is
 * enough to ride over a controller restart, and keeps "unreachable" fast. */
static const struct dt_httpc_opts http_opts = {
    .connect_timeout_ms = 3000,
    .total_timeout_ms = 30000,
    .retries = 1,
    .backoff_ms = 200,
    .backoff_max_ms = 1000,
};

static const char *const conf_keys[] = { "ControllerURL", NULL };

void ctl_die (int code, const char *fmt, ...)
{
    va_list ap;

    fflush (stdout);
    fputs ("dtctl: ", stderr);
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fputc ('\n', stderr);
    exit (code);
}

static char *xstrdup (const char *s)
{
    char *p = strdup (s);
    if (!p)
        ctl_die (CTL_EXIT_USAGE, "out of memory");
    return p;
}

/* ControllerURL from the config file, or NULL.  A missing default file is
 * normal (a laptop, a test); a file named by $DTCTL_CONF must exist. */
static char *url_from_conf (const char **from)
{
    const char *path = getenv ("DTCTL_CONF");
    bool named = path && *path;
    dt_error_t err;
    dt_conf_t *conf;
    char *url = NULL;
    const char *v;

    if (!named)
        path = DTCTL_CONF_PATH;
    if (!named && access (path, F_OK) < 0)
        return NULL;
    if (!(conf = dt_conf_load (path, conf_keys, &err)))
        ctl_die (CTL_EXIT_USAGE, "%s", err.text);
    if ((v = dt_conf_get (conf, "ControllerURL", NULL)) && *v) {
        url = xstrdup (v);
        *from = path;
    }
    dt_conf_destroy (conf);
    return url;
}

void ctl_resolve (struct ctl *ctl)
{
    const char *env = getenv ("DTCTL_CONTROLLER");
    const char *flag = ctl->controller_flag;

    if (ctl->url)
        return;
    if (flag) {
        ctl->url = xstrdup (flag);
        ctl->url_from = "--controller";
    }
    else if (env && *env) {
        ctl->url = xstrdup (env);
        ctl->url_from = "DTCTL_CONTROLLER";
    }
    else if (!(ctl->url = url_from_conf (&ctl->url_from))) {
        ctl->url = xstrdup (CTL_DEFAULT_URL);
        ctl->url_from = "default";
    }
    if (strncmp (ctl->url, "http://", 7) != 0 && strncmp (ctl->url, "https://", 8) != 0)
        ctl_die (CTL_EXIT_USAGE,
                 "controller URL '%s' (from %s): expected http://HOST:PORT", ctl->url,
                 ctl->url_from);
    /* "http://h:p/" + "/v1/jobs" would give "//v1"; strip trailing '/'. */
    for (size_t n = strlen (ctl->url); n > 8 && ctl->url[n - 1] == '/'; n--)
        ctl->url[n - 1] = '\0';
}

void ctl_fini (struct ctl *ctl)
{
    free (ctl->url);
    ctl->url = NULL;
}

char *ctl_path (char *buf, size_t len, const char *prefix, const char *seg,
                const char *suffix)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    /* Keep room for the worst case; ids and node names are short. */
    if (strlen (prefix) + 3 * strlen (seg) + strlen (suffix ? suffix : "") + 1 > len)
        ctl_die (CTL_EXIT_USAGE, "argument too long: '%.40s...'", seg);
    n = (size_t)snprintf (buf, len, "%s", prefix);
    for (const unsigned char *p = (const unsigned char *)seg; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~')
            buf[n++] = (char)*p;
        else {
            buf[n++] = '%';
            buf[n++] = hex[*p >> 4];
            buf[n++] = hex[*p & 15];
        }
    }
    snprintf (buf + n, len - n, "%s", suffix ? suffix : "");
    return buf;
}

/* Attach a fresh MUNGE credential bound to this request: its payload is
 * the request's digest (authdigest.h), so it is good for this method, path
 * and body only (and munged refuses a replayed one, so every request needs
 * its own).  If munged cannot be reached, send the request without one: a
 * controller with AuthType=none accepts that, one with AuthType=munge
 * answers 401 and we report why.  Returns the munge error text for that
 * 401 message, or NULL. */
static const char *add_auth (dt_httpc_t *c, const char *base, const char *method,
                             const char *path, const char *body)
{
    static char munge_err[128];
    char *cred = NULL;
    char target[4096], rpath[4096], digest[AUTHDIGEST_LEN + 1];
    const char *bpath;
    munge_err_t e;

    /* The path the server sees: the base URL's own path (if any, without
     * trailing slashes, as httpc joins them) and the request's. */
    bpath = strstr (base, "://");
    bpath = bpath ? strchr (bpath + 3, '/') : NULL;
    size_t bl = bpath ? strlen (bpath) : 0;
    while (bl > 0 && bpath[bl - 1] == '/')
        bl--;
    if ((size_t)snprintf (target, sizeof (target), "%.*s%s%s", (int)bl,
                          bpath ? bpath : "", path[0] == '/' ? "" : "/",
                          path) >= sizeof (target) ||
        authdigest_path (target, rpath, sizeof (rpath)) < 0)
        ctl_die (CTL_EXIT_USAGE, "request path too long: '%.40s...'", path);
    if (authdigest_compute (method, rpath, body ? body : "", body ? strlen (body) : 0,
                            digest) < 0)
        ctl_die (CTL_EXIT_USAGE, "out of memory");
    if ((e = munge_encode (&cred, NULL, digest, AUTHDIGEST_LEN)) == EMUNGE_SUCCESS) {
        size_t len = strlen (cred) + 32;
        char *h = malloc (len);
        if (!h)
            ctl_die (CTL_EXIT_USAGE, "out of memory");
        snprintf (h, len, "X-Munge-Credential: %s", cred);
        if (dt_httpc_set_header (c, h) < 0)
            ctl_die (CTL_EXIT_USAGE, "cannot set request header");
        free (h);
        free (cred);
        return NULL;
    }
    snprintf (munge_err, sizeof (munge_err), "%s", munge_strerror (e));
    return munge_err;
}

static int exit_code_of (long status)
{
    switch (status) {
    case 400:
    case 405:
    case 413:
    case 415:
    case 422: return CTL_EXIT_USAGE;
    case 401:
    case 403: return CTL_EXIT_DENIED;
    case 404: return CTL_EXIT_NOTFOUND;
    case 409:
    case 410: return CTL_EXIT_CONFLICT;
    default: return CTL_EXIT_SERVER;
    }
}

/* Print every error of the envelope as "dtctl: FIELD: TEXT" (the field
 * only when the text does not already name it), then exit. */
static void die_with_envelope (long status, const json_t *reply, const char *munge_err)
{
    json_t *errors = reply ? json_object_get (reply, "errors") : NULL;
    int code = exit_code_of (status);
    size_t i, n = 0;
    json_t *e;

    fflush (stdout);
    /* No credential could be made and the controller wants one: that is
     * the cause to show, in one line with the controller's words. */
    if (status == 401 && munge_err) {
        const char *text =
          json_string_value (json_object_get (json_array_get (errors, 0), "error"));
        fprintf (stderr,
                 "dtctl: %s%sno MUNGE credential could be made: %s "
                 "(is munged running?)\n",
                 text ? text : "", text ? "; " : "", munge_err);
        exit (code);
    }
    json_array_foreach (errors, i, e)
    {
        const char *text = json_string_value (json_object_get (e, "error"));
        const char *field = json_string_value (json_object_get (e, "field"));
        if (!text)
            continue;
        if (field && *field && !strstr (text, field))
            fprintf (stderr, "dtctl: %s: %s\n", field, text);
        else
            fprintf (stderr, "dtctl: %s\n", text);
        n++;
    }
    if (n == 0)
        fprintf (stderr, "dtctl: controller answered HTTP %ld%s\n", status,
                 status == 404 ? " (not found)" : "");
    exit (code);
}

static void print_warnings (const json_t *reply)
{
    json_t *w = json_object_get (reply, "warnings");
    size_t i;
    json_t *v;

    json_array_foreach (w, i, v)
    {
        const char *text = json_is_string (v)
                             ? json_string_value (v)
                             : json_string_value (json_object_get (v, "warning"));
        if (!text)
            text = json_string_value (json_object_get (v, "error"));
        if (text)
            fprintf (stderr, "dtctl: warning: %s\n", text);
    }
}

static json_t *call (struct ctl *ctl, const char *method, const char *path,
                     const json_t *body, bool optional)
{
    dt_error_t err;
    dt_httpc_t *c;
    const char *munge_err;
    char *sbody = NULL, *rbody = NULL;
    size_t rlen = 0;
    long status = 0;
    json_t *reply = NULL;
    json_t *data;

    ctl_resolve (ctl);
    /* A fresh client per request: each request carries its own
     * credential, and dt_httpc_set_header adds rather than replaces. */
    if (!(c = dt_httpc_create (ctl->url, &http_opts, &err)))
        ctl_die (CTL_EXIT_USAGE, "controller URL '%s' (from %s): %s", ctl->url,
                 ctl->url_from, err.text);
    /* The body is serialized here: the credential is bound to its bytes. */
    if (body && !(sbody = dt_json_dumps (body)))
        ctl_die (CTL_EXIT_USAGE, "out of memory");
    munge_err = add_auth (c, ctl->url, method, path, sbody);
    if (dt_httpc_raw (c, method, path, sbody, sbody ? strlen (sbody) : 0,
                      "application/json", &status, &rbody, &rlen, &err) < 0)
        ctl_die (CTL_EXIT_UNREACHABLE, "cannot reach controller at %s (from %s): %s",
                 ctl->url, ctl->url_from, err.text);
    dt_httpc_destroy (c);
    free (sbody);
    reply = rlen > 0 ? json_loadb (rbody, rlen, 0, NULL) : NULL;
    free (rbody);

    if (status < 200 || status > 299) {
        if (optional && status == 404) {
            json_decref (reply);
            return NULL;
        }
        die_with_envelope (status, reply, munge_err);
    }
    if (!json_is_object (reply))
        ctl_die (CTL_EXIT_SERVER,
                 "%s %s: controller answered HTTP %ld without a JSON envelope", method,
                 path, status);
    print_warnings (reply);
    data = json_object_get (reply, "data");
    data = data ? json_incref (data) : json_null ();
    json_decref (reply);
    return data;
}

json_t *ctl_call (struct ctl *ctl, const char *method, const char *path,
                  const json_t *body)
{
    return call (ctl, method, path, body, false);
}

json_t *ctl_call_optional (struct ctl *ctl, const char *method, const char *path,
                           const json_t *body)
{
    return call (ctl, method, path, body, true);
}
