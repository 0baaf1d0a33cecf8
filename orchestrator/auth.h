/* auth.h: who is asking: users (MUNGE or AuthType=none) and agents
 * (per-attempt bearer tokens). */
#ifndef DT_AUTH_H
#define DT_AUTH_H

#include <stdbool.h>
#include <sys/types.h>
#include "common/errprintf.h"
#include "common/httpd.h"
#include "orchestrator/ctldconf.h"

#define AUTH_TOKEN_LEN 64 /* hex chars of a 256-bit token */

/* A new random token (256 bits from getrandom) as 64 hex chars + NUL. */
int auth_token_new (char out[AUTH_TOKEN_LEN + 1], dt_error_t *err);

/* The user behind a request.  AuthType=munge: header X-Munge-Credential
 * decoded with munge_decode, whose payload must be the request's digest
 * (authdigest.h): a credential made for another request is refused.
 * AuthType=none: always the daemon's own uid (no header is trusted).  -1
 * with errno EACCES and err when the request carries no valid credential.
 * Handlers call it, with the body complete; the credential is decoded once
 * per request (MUNGE refuses a second decode as a replay) and the identity
 * kept on the request (dt_http_req_set_data). */
int auth_user (const struct ctld_config *cfg, dt_http_req_t *req, uid_t *uid, gid_t *gid,
               dt_error_t *err);

/* The same at header time (gate.c), before any of the body is read:
 * decodes the credential and keeps the identity for auth_user, which then
 * checks its payload against the complete request. */
int auth_user_early (const struct ctld_config *cfg, dt_http_req_t *req, uid_t *uid,
                     dt_error_t *err);

/* Constant-time comparison of two len-byte buffers (secrets). */
bool auth_equal (const void *a, const void *b, size_t len);

/* The bearer token of a request (borrowed), or NULL. */
const char *auth_bearer (dt_http_req_t *req);

/* The name of 'uid' into buf ("uid<N>" when unknown).  Returns buf. */
char *auth_user_name (uid_t uid, char *buf, size_t len);

#endif
