/* linktoken.h: the short-lived links of the web page (dtctl ui).
 *
 * A browser cannot present a MUNGE credential, so a user who can (dtctl
 * ui, POST /v1/ui/link) gets a token that stands for them for a while:
 * "dtui1.<uid>.<expiry, epoch s>.<HMAC-SHA256 hex>", signed with a key of
 * 256 random bits made when the controller starts and kept only in its
 * memory.  A restart makes a new key, which revokes every link at once.
 * The page sends it as "Authorization: Bearer <token>"; it reads the API
 * only (auth.c and gate.c refuse anything but GET with it).
 */
#ifndef DT_LINKTOKEN_H
#define DT_LINKTOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/errprintf.h"

#define LINKTOKEN_PREFIX "dtui1."
#define LINKTOKEN_MAX 128 /* bytes of a token, NUL included */

/* Make a new signing key (at start; again to revoke every link). */
int linktoken_init (dt_error_t *err);

/* Whether 'tok' has the form of a link token (not whether it is valid). */
bool linktoken_is (const char *tok);

/* A token for 'uid' that expires 'ttl_s' seconds after 'now_s' (epoch
 * seconds) into out[LINKTOKEN_MAX].  -1 when no key was made. */
int linktoken_make (uid_t uid, int64_t now_s, int64_t ttl_s, char out[LINKTOKEN_MAX]);

/* The user of a valid token at 'now_s'.  -1 with errno EACCES and err
 * naming why (malformed, bad signature, expired at ...). */
int linktoken_check (const char *tok, int64_t now_s, uid_t *uid, dt_error_t *err);

#endif
