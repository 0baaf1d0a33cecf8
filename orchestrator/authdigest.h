/* authdigest.h: what a user's MUNGE credential is bound to.
 *
 * A credential's payload is the SHA-256 (64 hex chars) of
 *
 *     METHOD "\n" PATH "\n" BODY
 *
 * where PATH is the request's path as the server sees it: without the
 * query string, percent-escapes decoded.  dtctl (and any client) puts it in
 * the payload; dtctld recomputes it from the request and refuses a
 * credential whose payload differs, so a credential captured on its way to
 * one request cannot be replayed on another within its TTL.  Pure code:
 * linked into dtctld and dtctl both.
 */
#ifndef DT_AUTHDIGEST_H
#define DT_AUTHDIGEST_H

#include <stddef.h>

#define AUTHDIGEST_LEN 64 /* hex chars */

/* The digest of (method, path, body[0..len)) into out (64 hex + NUL).
 * 'path' is used as given (the server's decoded path).  -1 with errno
 * ENOMEM, else 0. */
int authdigest_compute (const char *method, const char *path, const void *body,
                        size_t len, char out[AUTHDIGEST_LEN + 1]);

/* The path part of a request target as a server sees it: 'target' up to
 * its '?', with %XX escapes decoded, into buf.  -1 with errno ENAMETOOLONG
 * when it does not fit, else 0. */
int authdigest_path (const char *target, char *buf, size_t len);

#endif
