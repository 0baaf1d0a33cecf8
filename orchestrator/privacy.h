/* privacy.h: what of a job other users see (dtctld.conf PrivateData).
 *
 * A job's owner and the admins (root, AdminUsers) see everything.  Every
 * other user sees what PrivateData does not name: by default ("env,stderr")
 * the names of the spec's environment variables but not their values
 * (tokens, passwords and paths live there), and no stderr tail of a
 * failed rank; with "jobs" not even the job (404, and not listed).
 */
#ifndef DT_PRIVACY_H
#define DT_PRIVACY_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "orchestrator/ctldconf.h"

/* What a hidden value reads as. */
#define PRIVACY_HIDDEN "(hidden: PrivateData)"

/* Whether 'viewer' sees everything of a job of 'owner'. */
bool privacy_sees_all (const struct ctld_config *cfg, uid_t viewer, uid_t owner);

/* Whether 'viewer' may see a job of 'owner' at all (PrivateData=jobs). */
bool privacy_sees_job (const struct ctld_config *cfg, uid_t viewer, uid_t owner);

/* Hide in 'v' (a job view, a list entry, events, a report: any JSON about
 * one job of 'owner') what PrivateData keeps from 'viewer': the values of
 * every "env" object, every "stderr_tail".  In place; nothing when the
 * viewer sees all. */
void privacy_redact (const struct ctld_config *cfg, json_t *v, uid_t viewer, uid_t owner);

/* The owner of a job view ("uid"), or (uid_t)-1 when it has none. */
uid_t privacy_owner (const json_t *view);

#endif
