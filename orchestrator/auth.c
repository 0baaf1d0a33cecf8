/* auth.c: MUNGE credentials of users; random attempt tokens. */
#include <config.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <munge.h>

#include "orchestrator/auth.h"
#include "orchestrator/authdigest.h"
#include "orchestrator/linktoken.h"

int auth_token_new (char out[AUTH_TOKEN_LEN + 1], dt_error_t *err)
{
    unsigned char raw[AUTH_TOKEN_LEN / 2];
    size_t got = 0;

    while (got < sizeof (raw)) {
        ssize_t n = getrandom (raw + got, sizeof (raw) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errnoprintf (err, errno, "getrandom: %s", strerror (errno));
        }
        got += n;
    }
    for (size_t i = 0; i < sizeof (raw); i++)
        sprintf (out + 2 * i, "%02x", raw[i]);
    out[AUTH_TOKEN_LEN] = '\0';
    return 0;
}

/* A request's identity, decoded once (at header time, by the gate) and
 * kept on the request: MUNGE refuses a credential decoded a second time
 * as a replay, and the handler asks again. */
struct auth_ident {
    uid_t uid;
    gid_t gid;
    void *payload; /* the credential's payload (malloc'ed), or NULL */
    int len;       /* AUTH_LEN_LINK: a link token, no payload */
};

/* The payload length that marks an identity from a link token. */
enum { AUTH_LEN_LINK = -1 };

static void ident_free (void *p)
{
    struct auth_ident *id = p;
    if (id) {
        free (id->payload);
        free (id);
    }
}

static int auth_decode (const struct ctld_config *cfg, dt_http_req_t *req, uid_t *uid,
                        gid_t *gid, void **payload, int *len, dt_error_t *err)
{
    *payload = NULL;
    *len = 0;
    /* A link token of the web page (linktoken.h): it stands for its user,
     * for reading only; its signature binds it, not a request digest. */
    const char *bearer = auth_bearer (req);
    if (linktoken_is (bearer)) {
        struct passwd *pw;
        if (strcmp (dt_http_req_method (req), "GET"))
            return errnoprintf (err, EACCES,
                                "a link token (dtctl ui) only reads: %s is refused",
                                dt_http_req_method (req));
        if (linktoken_check (bearer, (int64_t)time (NULL), uid, err) < 0)
            return -1;
        *gid = (pw = getpwuid (*uid)) ? pw->pw_gid : (gid_t)-1;
        *len = AUTH_LEN_LINK;
        return 0;
    }
    if (cfg->auth == AUTH_NONE) {
        /* Every request is the daemon's own user: no header can name
         * another (config_load refuses AuthType=none to a root daemon). */
        *uid = getuid ();
        *gid = getgid ();
        return 0;
    }
    const char *cred = dt_http_req_header (req, "X-Munge-Credential");
    if (!cred)
        return errnoprintf (err, EACCES,
                            "authentication required: no X-Munge-Credential header");
    munge_err_t e = munge_decode (cred, NULL, payload, len, uid, gid);
    if (e != EMUNGE_SUCCESS) {
        free (*payload);
        *payload = NULL;
        return errnoprintf (err, EACCES, "MUNGE credential refused: %s",
                            munge_strerror (e));
    }
    return 0;
}

/* The request's identity: decoded now, or earlier by auth_user_early. */
static struct auth_ident *ident_get (const struct ctld_config *cfg, dt_http_req_t *req,
                                     dt_error_t *err)
{
    struct auth_ident *id = dt_http_req_data (req);
    uid_t u;
    gid_t g;
    void *payload;
    int len;

    if (id)
        return id;
    if (auth_decode (cfg, req, &u, &g, &payload, &len, err) < 0)
        return NULL;
    if (!(id = calloc (1, sizeof (*id)))) {
        free (payload);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    id->uid = u;
    id->gid = g;
    id->payload = payload;
    id->len = len;
    dt_http_req_set_data (req, id, ident_free);
    return id;
}

int auth_user_early (const struct ctld_config *cfg, dt_http_req_t *req, uid_t *uid,
                     dt_error_t *err)
{
    struct auth_ident *id = ident_get (cfg, req, err);
    if (!id)
        return -1;
    *uid = id->uid;
    return 0;
}

int auth_user (const struct ctld_config *cfg, dt_http_req_t *req, uid_t *uid, gid_t *gid,
               dt_error_t *err)
{
    struct auth_ident *id = ident_get (cfg, req, err);
    if (!id)
        return -1;
    /* The body is complete when a handler calls auth_user: the
     * credential must be bound to this very request. */
    if (cfg->auth != AUTH_NONE && id->len != AUTH_LEN_LINK) {
        char want[AUTHDIGEST_LEN + 1];
        size_t blen;
        const char *body = dt_http_req_body (req, &blen);
        if (authdigest_compute (dt_http_req_method (req), dt_http_req_path (req), body,
                                blen, want) < 0)
            return errnoprintf (err, ENOMEM, "out of memory");
        if (!(id->len == AUTHDIGEST_LEN && id->payload &&
              auth_equal (id->payload, want, AUTHDIGEST_LEN)))
            return errnoprintf (
              err, EACCES, "MUNGE credential refused: %s",
              id->len == 0 ? "its payload is empty; it must be the SHA-256 of this "
                             "request (\"METHOD\\nPATH\\n\" and the body)"
                           : "it was made for another request (its payload is not the "
                             "SHA-256 of this method, path and body)");
    }
    *uid = id->uid;
    *gid = id->gid;
    return 0;
}

bool auth_equal (const void *a, const void *b, size_t len)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;

    for (size_t i = 0; i < len; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

const char *auth_bearer (dt_http_req_t *req)
{
    const char *h = dt_http_req_header (req, "Authorization");
    if (!h || strncasecmp (h, "Bearer ", 7))
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    return *h ? h : NULL;
}

char *auth_user_name (uid_t uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid (uid);
    if (pw)
        snprintf (buf, len, "%s", pw->pw_name);
    else
        snprintf (buf, len, "uid%ld", (long)uid);
    return buf;
}
