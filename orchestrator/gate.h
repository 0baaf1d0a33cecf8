/* gate.h: admission of requests at header time, before their body is read:
 * which listener serves which requests, who is asking (credential or agent
 * token), and the per-user quotas that a submission must fit.
 */
#ifndef DT_GATE_H
#define DT_GATE_H

#include <stdbool.h>
#include "common/httpd.h"

struct ctld;

/* Connection classes: the listener a request came in on. */
enum gate_class {
    GATE_CLASS_USER = 0,  /* ListenPort: CLIs, browsers, scripts (and agents that
                           * are given it as ControllerURL) */
    GATE_CLASS_AGENT = 1, /* AgentPort: agents and batch scripts only */
};

/* Install the gate on ctx->httpd.  Requests it refuses are answered at
 * header time: 401 without a valid credential or agent token, 403 for a
 * user request on the agents' listener, 429 for a quota (the error names
 * it), and their body is never buffered. */
void gate_install (struct ctld *ctx);

/* Whether 'path' is an agent route (agent bearer token, agents' listener). */
bool gate_is_agent_path (const char *path);

#endif
