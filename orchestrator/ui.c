/* ui.c: the web page's static files and its link route (see ui.h).
 *
 * The files are read from UiDir, one name at a time: a name is one path
 * segment of letters, digits, '.', '_' and '-' that does not start with a
 * '.', opened relative to the directory without following a symlink, and
 * must be a regular file; anything else answers 404.  So no request can
 * reach outside UiDir.  The one file under /ui/lib/ is the charting
 * library that Debian installs (UiChartJs), served as it is.
 */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/httpd.h"
#include "common/jsonx.h"
#include "orchestrator/auth.h"
#include "orchestrator/ctld.h"
#include "orchestrator/linktoken.h"
#include "orchestrator/ui.h"

/* Links live an hour unless asked otherwise; a day at most. */
static const int64_t link_ttl_default_s = 3600;
static const int64_t link_ttl_max_s = 86400;
/* No file of the page (or the library, ~200 KB) comes near this. */
static const off_t file_max = 8 << 20;

bool ui_is_static_path (const char *path)
{
    return !strcmp (path, "/ui") || !strncmp (path, "/ui/", 4);
}

static bool name_ok (const char *n)
{
    if (!n || !*n || n[0] == '.' || strlen (n) > 64)
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

static const char *content_type (const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        { ".html", "text/html; charset=utf-8" },
        { ".css", "text/css; charset=utf-8" },
        { ".js", "application/javascript; charset=utf-8" },
        { ".svg", "image/svg+xml" },
        { ".png", "image/png" },
    };
    const char *dot = strrchr (name, '.');
    for (size_t i = 0; dot && i < sizeof (types) / sizeof (types[0]); i++)
        if (!strcmp (dot, types[i].ext))
            return types[i].type;
    return "application/octet-stream";
}

/* Answer with the regular file 'name' under 'dir' (dir NULL: 'name' is
 * a path of the configuration, followed as it is). */
static void reply_file (dt_http_req_t *req, const char *dir, const char *name,
                        const char *type)
{
    int dfd = -1, fd = -1;
    struct stat st;
    char *buf = NULL;
    ssize_t got = 0;

    if (dir) {
        if ((dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
            dt_http_reply_error (req, 500, NULL, "UiDir %s: %s", dir, strerror (errno));
            return;
        }
        fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        close (dfd);
    }
    else
        fd = open (name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size > file_max) {
        if (fd >= 0)
            close (fd);
        dt_http_reply_error (req, 404, NULL, "%s: no such file of the web page",
                             dt_http_req_path (req));
        return;
    }
    if (!(buf = malloc (st.st_size + 1))) {
        close (fd);
        dt_http_reply_error (req, 500, NULL, "out of memory");
        return;
    }
    while (got < st.st_size) {
        ssize_t n = read (fd, buf + got, st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
    }
    close (fd);
    dt_http_reply_text (req, 200, type, buf, got);
    free (buf);
}

static void index_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    reply_file (req, ctx->cfg->ui_dir, "index.html", content_type ("index.html"));
}

static void file_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    const char *name = dt_http_req_param (req, "file");
    if (!name_ok (name)) {
        dt_http_reply_error (req, 404, NULL, "%s: no such file of the web page",
                             dt_http_req_path (req));
        return;
    }
    reply_file (req, ctx->cfg->ui_dir, name, content_type (name));
}

static void lib_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    const char *name = dt_http_req_param (req, "file");
    if (!name || strcmp (name, "chart.js")) {
        dt_http_reply_error (req, 404, NULL, "%s: no such file of the web page",
                             dt_http_req_path (req));
        return;
    }
    reply_file (req, NULL, ctx->cfg->ui_chartjs, content_type (name));
}

/* The host the client dialled, when it is a plain host[:port]. */
static bool host_ok (const char *h)
{
    if (!h || !*h || strlen (h) > 255)
        return false;
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || strchr (".-:[]", *p)))
            return false;
    return true;
}

/* POST /v1/ui/link {"ttl_s": N}: a link token for the caller. */
static void link_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    static const char *const keys[] = { "ttl_s", NULL };
    uid_t uid;
    gid_t gid;
    dt_error_t err;
    size_t len;
    const char *b = dt_http_req_body (req, &len);
    json_t *body = NULL;
    json_int_t ttl = link_ttl_default_s;
    char tok[LINKTOKEN_MAX], url[512], when[40], name[64];

    if (auth_user (ctx->cfg, req, &uid, &gid, &err) < 0) {
        dt_http_reply_error (req, 401, NULL, "%s", err.text);
        return;
    }
    if (b && len > 0 && !(body = dt_json_parse (b, len, &err))) {
        dt_http_reply_error (req, 400, NULL, "request body: %s", err.text);
        return;
    }
    if (body &&
        (!json_is_object (body) || dt_json_check_object (body, "", keys, &err) < 0 ||
         dt_json_get_int (body, "", "ttl_s", false, 1, link_ttl_max_s, &ttl, &err) < 0)) {
        if (!json_is_object (body))
            snprintf (err.text, sizeof (err.text),
                      "request body: expected a JSON object");
        json_decref (body);
        dt_http_reply_error (req, 400, "ttl_s", "%s", err.text);
        return;
    }
    json_decref (body);
    int64_t now = (int64_t)time (NULL);
    if (linktoken_make (uid, now, ttl, tok) < 0) {
        dt_http_reply_error (req, 500, NULL, "link tokens: no signing key");
        return;
    }
    const char *host = dt_http_req_header (req, "Host");
    if (host_ok (host))
        snprintf (url, sizeof (url), "http://%s/ui/#token=%s", host, tok);
    else
        snprintf (url, sizeof (url), "http://%s:%d/ui/#token=%s",
                  ctx->cfg->listen_address, dt_httpd_port (ctx->httpd), tok);
    dt_http_reply_json (
      req, 200,
      json_pack ("{s:s s:s s:s s:I s:s s:I}", "token", tok, "url", url, "expires",
                 dt_format_time ((now + ttl) * 1000, when, sizeof (when)), "ttl_s", ttl,
                 "user", auth_user_name (uid, name, sizeof (name)), "uid",
                 (json_int_t)uid));
}

/* GET /v1/ui/whoami: who the page reads as. */
static void whoami_cb (dt_http_req_t *req, void *arg)
{
    struct ctld *ctx = arg;
    uid_t uid;
    gid_t gid;
    dt_error_t err;
    char name[64];

    if (auth_user (ctx->cfg, req, &uid, &gid, &err) < 0) {
        dt_http_reply_error (req, 401, NULL, "%s", err.text);
        return;
    }
    dt_http_reply_json (
      req, 200,
      json_pack ("{s:s s:I s:b}", "user", auth_user_name (uid, name, sizeof (name)),
                 "uid", (json_int_t)uid, "admin", config_is_admin (ctx->cfg, uid)));
}

int ui_register_routes (struct ctld *ctx, dt_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        dt_http_handler_f cb;
    } routes[] = {
        { "GET", "/ui", index_cb },
        { "GET", "/ui/{file}", file_cb },
        { "GET", "/ui/lib/{file}", lib_cb },
        { "POST", "/v1/ui/link", link_cb },
        { "GET", "/v1/ui/whoami", whoami_cb },
    };
    if (linktoken_init (err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof (routes) / sizeof (routes[0]); i++) {
        if (dt_httpd_route (ctx->httpd, routes[i].method, routes[i].pattern, routes[i].cb,
                            ctx) < 0)
            return errnoprintf (err, errno, "route %s %s: %s", routes[i].method,
                                routes[i].pattern, strerror (errno));
    }
    return 0;
}
