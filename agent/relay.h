/* relay.h: the agent's part in the heartbeat fan-in tree.
 *
 * Every agent listens for tree children (a small HTTP server on its
 * address, port chosen by the kernel, sent with its registration).  A
 * child POSTs /v1/agent/relay with its heartbeat and those of its own
 * subtree, one node's heartbeat body a line (schemas/agent-api.md); the
 * relay keeps the lines and answers at once with the commands of its own
 * last answer from above, so commands fan down the tree.  At its next
 * heartbeat (or sooner, relay_due) the relay sends its own line and the
 * kept ones up in one request: to the first ancestor it can reach, else
 * to the controller.  An ancestor that cannot be reached is given up for
 * the rest of the attempt: the agent reattaches to the next one up, and
 * says so in its log.
 */
#ifndef DT_AGENT_RELAY_H
#define DT_AGENT_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "common/errprintf.h"
#include "ctl.h"

typedef struct relay relay_t;

/* Listen on addr (port chosen by the kernel) for children that present
 * 'token' (borrowed; the attempt's bearer token).  NULL with err. */
relay_t *relay_create (const char *addr, const char *token, dt_error_t *err);
void relay_destroy (relay_t *r);

int relay_port (const relay_t *r);
/* Event-loop integration: poll relay_fd for POLLIN, then relay_run. */
int relay_fd (const relay_t *r);
void relay_run (relay_t *r);

/* The tree this agent is in (from the registration answer): ancestors
 * (borrowed, NULL-terminated relay URLs, nearest first; NULL: none). */
void relay_set_ancestors (relay_t *r, char **ancestors);

/* The heartbeat interval: a child silent for longer than 5/4 of it, and an
 * ancestor that stopped answering, are reported in this node's own
 * heartbeat ("unheard", schemas/agent-api.md) so that the controller can
 * corroborate their silence. */
void relay_set_interval (relay_t *r, int64_t interval_ms);

/* Children's lines are waiting and were received at least 'min_age_ms'
 * ago, or a child fell silent (over 5/4 of an interval) and was not
 * reported yet: time to send them up. */
bool relay_due (const relay_t *r, int64_t now_ms, int64_t min_age_ms);

/* Send this node's heartbeat body 'own' (borrowed) and the children's
 * lines up the tree, or to the controller through ctl.  Without a tree
 * and without children's lines this is the direct heartbeat.  0 with
 * *status and *data (the answer's data, new reference, may be NULL), or
 * -1 with err when neither an ancestor nor the controller answered.  The
 * children's next answers carry the commands (or the 410) of this one. */
int relay_heartbeat (relay_t *r, ctl_t *ctl, const json_t *own, long *status,
                     json_t **data, dt_error_t *err);

/* Milliseconds until relay_due becomes true (0: it is), -1: never (no
 * lines kept, no child that could fall silent): the owner's poll
 * timeout, so that lines go up and silent children are reported when
 * due, not at the loop's next tick. */
int64_t relay_due_in (const relay_t *r, int64_t now_ms, int64_t min_age_ms);

/* This node has a place in a fan-in tree: ancestors, or children that
 * sent it heartbeats. */
bool relay_in_tree (const relay_t *r);

/* Where the heartbeats go now: an ancestor's URL, or NULL (controller). */
const char *relay_upstream (const relay_t *r);

#endif
