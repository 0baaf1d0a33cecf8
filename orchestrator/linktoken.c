/* linktoken.c: HMAC-SHA256 link tokens of the web page (see linktoken.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "orchestrator/auth.h"
#include "orchestrator/linktoken.h"
#include "orchestrator/sha256.h"

/* The signing key: one per controller run, never written anywhere. */
static unsigned char key[32];
static bool have_key;

int linktoken_init (dt_error_t *err)
{
    size_t got = 0;
    while (got < sizeof (key)) {
        ssize_t n = getrandom (key + got, sizeof (key) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errnoprintf (err, errno, "getrandom: %s", strerror (errno));
        }
        got += n;
    }
    have_key = true;
    return 0;
}

bool linktoken_is (const char *tok)
{
    return tok && !strncmp (tok, LINKTOKEN_PREFIX, strlen (LINKTOKEN_PREFIX));
}

static int hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Raw digest from sha256_final_hex's text. */
static void final_raw (struct sha256_ctx *c, unsigned char out[32])
{
    char hex[65];
    sha256_final_hex (c, hex);
    for (int i = 0; i < 32; i++)
        out[i] = (unsigned char)(hexval (hex[2 * i]) << 4 | hexval (hex[2 * i + 1]));
}

/* HMAC-SHA256 (RFC 2104) of msg under the key, as 64 hex chars + NUL. */
static void hmac_hex (const char *msg, char out[65])
{
    unsigned char pad[64], inner[32];
    struct sha256_ctx c;

    memset (pad, 0, sizeof (pad));
    memcpy (pad, key, sizeof (key));
    for (int i = 0; i < 64; i++)
        pad[i] ^= 0x36;
    sha256_init (&c);
    sha256_update (&c, pad, sizeof (pad));
    sha256_update (&c, msg, strlen (msg));
    final_raw (&c, inner);
    for (int i = 0; i < 64; i++)
        pad[i] ^= 0x36 ^ 0x5c;
    sha256_init (&c);
    sha256_update (&c, pad, sizeof (pad));
    sha256_update (&c, inner, sizeof (inner));
    sha256_final_hex (&c, out);
}

int linktoken_make (uid_t uid, int64_t now_s, int64_t ttl_s, char out[LINKTOKEN_MAX])
{
    char msg[48], mac[65];
    if (!have_key) {
        errno = EINVAL;
        return -1;
    }
    snprintf (msg, sizeof (msg), LINKTOKEN_PREFIX "%lu.%" PRId64, (unsigned long)uid,
              now_s + ttl_s);
    hmac_hex (msg, mac);
    if (snprintf (out, LINKTOKEN_MAX, "%s.%s", msg, mac) >= LINKTOKEN_MAX) {
        errno = EOVERFLOW;
        return -1;
    }
    return 0;
}

int linktoken_check (const char *tok, int64_t now_s, uid_t *uid, dt_error_t *err)
{
    char msg[64], mac[65];
    const char *p = tok + strlen (LINKTOKEN_PREFIX);
    unsigned long u;
    long long exp;
    int n = 0;

    if (!linktoken_is (tok) || strlen (tok) >= LINKTOKEN_MAX ||
        sscanf (p, "%lu.%lld.%n", &u, &exp, &n) != 2 || n == 0 || strlen (p + n) != 64 ||
        (size_t)(p + n - 1 - tok) >= sizeof (msg))
        return errnoprintf (err, EACCES,
                            "link token refused: malformed (expected "
                            "dtui1.UID.EXPIRY.SIGNATURE; run 'dtctl ui' for a new link)");
    memcpy (msg, tok, p + n - 1 - tok);
    msg[p + n - 1 - tok] = '\0';
    if (!have_key)
        return errnoprintf (err, EACCES, "link token refused: no signing key");
    hmac_hex (msg, mac);
    if (!auth_equal (mac, p + n, 64))
        return errnoprintf (err, EACCES,
                            "link token refused: bad signature (altered, or made "
                            "before the controller restarted with a new key); run "
                            "'dtctl ui' for a new link");
    if (exp <= now_s) {
        char when[32];
        time_t t = (time_t)exp;
        struct tm tm;
        strftime (when, sizeof (when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r (&t, &tm));
        return errnoprintf (err, EACCES,
                            "link token refused: expired at %s; run 'dtctl ui' "
                            "for a new link",
                            when);
    }
    *uid = (uid_t)u;
    return 0;
}
