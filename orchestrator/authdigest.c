/* authdigest.c: the request digest a user's MUNGE credential carries. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/authdigest.h"
#include "orchestrator/sha256.h"

int authdigest_compute (const char *method, const char *path, const void *body,
                        size_t len, char out[AUTHDIGEST_LEN + 1])
{
    size_t ml = strlen (method), pl = strlen (path);
    char *buf = malloc (ml + pl + 2 + len + 1);

    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (buf, method, ml);
    buf[ml] = '\n';
    memcpy (buf + ml + 1, path, pl);
    buf[ml + 1 + pl] = '\n';
    if (len)
        memcpy (buf + ml + pl + 2, body, len);
    sha256_hex (buf, ml + pl + 2 + len, out);
    free (buf);
    return 0;
}

static int hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int authdigest_path (const char *target, char *buf, size_t len)
{
    size_t n = 0;

    for (const char *p = target; *p && *p != '?'; p++) {
        char c = *p;
        int hi, lo;
        if (c == '%' && (hi = hexval (p[1])) >= 0 && (lo = hexval (p[2])) >= 0) {
            c = (char)(hi << 4 | lo);
            p += 2;
        }
        if (n + 1 >= len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        buf[n++] = c;
    }
    if (len == 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    buf[n] = '\0';
    return 0;
}
