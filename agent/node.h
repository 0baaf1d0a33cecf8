/* node.h: who this node is: name, order, the address other nodes reach it
 * on, a free port for the rendezvous master, and facts about the host. */
#ifndef DT_AGENT_NODE_H
#define DT_AGENT_NODE_H

#include <stdint.h>
#include <jansson.h>
#include "common/errprintf.h"

struct node_info {
    char name[256]; /* SLURMD_NODENAME, else --node, else hostname */
    int order;      /* SLURM_NODEID, else --node-order, else 0 */
    char addr[64];  /* first non-loopback IPv4, else 127.0.0.1 */
    int port;       /* a TCP port free right now on this node */
    int relay_port; /* the agent's listener for its tree children; 0 none */
    int64_t slurm_job_id;
    int64_t slurm_step_id;
};

/* Fill *ni from the environment and the options (opt_name may be NULL,
 * opt_order < 0 when not given).  -1 with err on a bad SLURM_NODEID or when
 * no free port can be found. */
int node_detect (struct node_info *ni, const char *opt_name, int opt_order,
                 dt_error_t *err);

/* {"cpu_model":..., "cores":N, "mem_mb":N, "gpus":[...], "slurm_version":"..."}:
 * new reference. */
json_t *node_hostinfo (void);

#endif
