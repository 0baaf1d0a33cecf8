/* restartpolicy.c: what a failure's cause means for the restart (see
 * restartpolicy.h). */
#include <config.h>
#include <string.h>

#include "orchestrator/jobs/restartpolicy.h"

bool restart_cause_planned (const char *cause)
{
    return !strcmp (cause, "time_limit") || !strcmp (cause, "preempted") ||
           !strcmp (cause, "straggler_excluded");
}

bool restart_exclude_node (const char *cause, const char *cause_node,
                           bool exclude_failed_nodes)
{
    return cause_node && cause_node[0] &&
           (!strcmp (cause, "straggler_excluded") ||
            (exclude_failed_nodes && !restart_cause_planned (cause)));
}

bool restart_keep_alloc (int spare_nodes, bool restarting, const char *cause)
{
    return spare_nodes > 0 && restarting && strcmp (cause, "time_limit") &&
           strcmp (cause, "preempted");
}

bool restart_jit_cause (const char *cause, int cause_rank)
{
    return !strcmp (cause, "trainer_exit") || !strcmp (cause, "node_lost") ||
           !strcmp (cause, "node_failure") ||
           (!strcmp (cause, "hang") && cause_rank >= 0);
}
