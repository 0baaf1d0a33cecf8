/* agent_int.h: the state of a registered dtagent, shared by the files of
 * its event loop (agent.c) and of its re-formation in place
 * (agent_reform.c).  Owned by agent.c: created in agent_create, freed in
 * agent_destroy; nothing outside agent/ sees it. */
#ifndef DT_AGENT_INT_H
#define DT_AGENT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "agent.h"
#include "chan.h"
#include "ctl.h"
#include "ranks.h"
#include "relay.h"

struct agent {
    ctl_t *ctl;
    const struct node_info *ni;
    const struct layout *l;
    int sigfd;
    struct agent_opts opts;
    char *rundir;
    char *sock;
    char *sockdir; /* a second private dir for a long socket path */
    chan_t *chan;
    ranks_t *ranks;
    relay_t *relay; /* borrowed; NULL: direct heartbeats */

    json_t *events;     /* not yet accepted by the controller */
    size_t ev_chunk;    /* bytes of JSON per events request */
    int64_t next_ev_ms; /* 0: send now */
    int64_t ev_backoff_ms;
    int64_t next_hb_ms;
    int64_t hb_backoff_ms;
    bool hb_phased;   /* the heartbeats' own phase is drawn (heartbeat()) */
    bool unreachable; /* last call to the controller failed */

    bool gone;     /* 410: the attempt is over */
    bool stopping; /* stop requested (signal or command) */
    int64_t stop_deadline_ms;
    bool abort;
    int64_t last_ckpt_step; /* de-duplication of repeated commands */
    bool stop_applied;
    bool jit_stop_applied; /* a just-in-time stop (negative step) passed on */

    /* Re-forming in place (the attempt's env says DT_REFORM=1): after a
     * rank's failure the agent waits, until reform_until_ms, for the
     * controller's re-form command instead of exiting; the layout of the
     * attempt it re-formed as is its own (a->l then points to it). */
    bool reform;
    int64_t reform_until_ms;
    int64_t reform_poll_until_ms; /* a rank waits to re-form: heartbeat often */
    int64_t reform_at_ms;         /* when the ranks were told to re-form */
    struct layout own_l;
    bool has_own_l;

    /* A neighbour in a fan-in tree whose ranks failed heartbeats on (and
     * relays) until linger_until_ms, or until the attempt ends: the
     * controller declares a lost node sooner when the nodes around it
     * still say they do not hear it.  0: not lingering. */
    int64_t linger_until_ms;
};

/* How long an agent whose ranks all failed waits for a re-form command
 * (or a stop) before exiting as before. */
#define AGENT_REFORM_WAIT_MS 5000

/* Queue an event (stolen; NULL is ignored) for the next delivery. */
void agent_event_add (agent_t *a, json_t *ev);

/* agent_reform.c: the controller's re-form command (a new attempt of the
 * same processes, 'token' its key), and the check, called every tick,
 * for survivors stuck in a collective of the old group. */
void agent_reform (agent_t *a, int attempt, const char *token);
void agent_reform_check_read (agent_t *a, int64_t now);

#endif /* !DT_AGENT_INT_H */
