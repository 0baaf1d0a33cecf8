/* treeplan.h: the fan-in tree of an attempt's agents, as the controller
 * tells each agent in its registration answer (schemas/agent-api.md). */
#ifndef DT_TREEPLAN_H
#define DT_TREEPLAN_H

#include <jansson.h>
#include <stdint.h>

struct attempt;
struct agent;

/* {"width": W, "ancestors": [URL, ...], "children": N} for agent 'ag' of
 * the running attempt 'att': the relay URLs of its ancestors, nearest
 * first (node rank order, common/tree.h), to which it sends its
 * heartbeats, the first it can reach, else the controller; and how many
 * children it relays for.  NULL when it talks to the controller directly:
 * the job's heartbeat.tree_width is 0, it is a spare or a child of the
 * controller, or an ancestor has no relay listener (an older dtagent).
 * New reference. */
json_t *treeplan_answer (struct attempt *att, struct agent *ag);

/* The "unheard" of AG's heartbeat M (schemas/agent-api.md): each named
 * neighbour (a child by node name, a relay by URL) is marked as not heard
 * from by a live agent at NOW (epoch ms), for detect.c. */
struct hb_msg;
void treeplan_unheard (struct attempt *att, struct agent *ag, const struct hb_msg *m,
                       int64_t now);

#endif
