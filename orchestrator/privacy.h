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

/* Node views (GET /v1/nodes, /v1/nodes/{name}: a node, a list of them,
 * or a node with its "history") under PrivateData=jobs: what a job that
 * 'viewer' may not see left on a node is hidden: the node's "job",
 * "attempt" and the "hostinfo" and "note" its agent or failure wrote, and
 * a history row's "job", "attempt" and "detail" (the node's state and the
 * causes of its failures stay: a node's health is every user's concern).
 * owner_of gives a job's owner, (uid_t)-1 when unknown (hidden).  In
 * place; nothing for an admin or without PrivateData=jobs. */
void privacy_redact_nodes (const struct ctld_config *cfg, json_t *v, uid_t viewer,
                           uid_t (*owner_of) (int64_t job, void *arg), void *arg);

/* The owner of a job view ("uid"), or (uid_t)-1 when it has none. */
uid_t privacy_owner (const json_t *view);

#endif
