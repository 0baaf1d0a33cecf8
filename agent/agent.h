/* agent.h: one dtagent: the subsystems of a registered agent and its event
 * loop (signals, trainer socket, rank reaping, hang detection, heartbeats,
 * events). */
#ifndef DT_AGENT_AGENT_H
#define DT_AGENT_AGENT_H

#include <stdint.h>
#include "common/errprintf.h"
#include "ctl.h"
#include "node.h"

typedef struct agent agent_t;

struct agent_opts {
    const char *state_dir; /* where the attempt's directory goes; NULL: workdir */
    int64_t stop_grace_ms; /* after a stop request (signal/stop), before SIGKILL */
    int64_t kill_grace_ms; /* after SIGTERM of a hung rank, before SIGKILL */
};

/* Build the agent of a registered node.  ctl, ni and l are borrowed and
 * must outlive the agent; sigfd is the signalfd of SIGCHLD, SIGTERM,
 * SIGUSR1, SIGINT, SIGHUP (borrowed).  Creates the attempt directory, the
 * trainer socket and the ranks' pages, but starts nothing. */
agent_t *agent_create (ctl_t *ctl, const struct node_info *ni, const struct layout *l,
                       int sigfd, const struct agent_opts *opts, dt_error_t *err);
/* Kills any rank still running (every exit path goes through here). */
void agent_destroy (agent_t *a);

/* The agent's relay for the fan-in tree (relay.h; borrowed, must outlive
 * the agent): its heartbeats then go up the tree with its children's, and
 * the loop serves the children.  Without one, heartbeats go directly to
 * the controller. */
struct relay;
void agent_set_relay (agent_t *a, struct relay *r);

/* Start the ranks and run until the agent is done.  Returns the agent's
 * exit code: 0 all local ranks exited 0 (or a spare told to stop), 1 a rank
 * failed or was killed, 2 the attempt is over (410), 3 internal failure. */
int agent_run (agent_t *a);

#endif
