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

/* A rank's own end: its agent reported the exit, or a hang is blamed on
 * that rank -- the node itself gave no sign of failing. */
static bool rank_cause (const char *cause, int cause_rank)
{
    return !strcmp (cause, "trainer_exit") ||
           (!strcmp (cause, "hang") && cause_rank >= 0);
}

bool restart_exclude_node (const char *cause, int cause_rank, const char *cause_node,
                           bool exclude_failed_nodes)
{
    return cause_node && cause_node[0] &&
           (!strcmp (cause, "straggler_excluded") ||
            (exclude_failed_nodes && !restart_cause_planned (cause) &&
             !rank_cause (cause, cause_rank)));
}

bool restart_in_place (const char *cause, int cause_rank, bool node_distrusted)
{
    if (node_distrusted)
        return false;
    return rank_cause (cause, cause_rank);
}

bool restart_skip_backoff (bool in_place, bool progressed, int quick_streak)
{
    return in_place && progressed && quick_streak == 0;
}

int restart_quick_streak (int streak, int64_t ran_ms)
{
    return ran_ms >= RESTART_HEALTHY_MS ? 0 : streak;
}

bool restart_keep_alloc (int spare_nodes, bool in_place, bool restarting,
                         const char *cause)
{
    return (spare_nodes > 0 || in_place) && restarting && strcmp (cause, "time_limit") &&
           strcmp (cause, "preempted");
}

const char *restart_path_of (int attempt, bool reused_alloc, bool same_nodes)
{
    if (attempt <= 1)
        return NULL;
    if (!reused_alloc)
        return "new_allocation";
    return same_nodes ? "in_place" : "spare";
}

bool restart_path_valid (const char *path)
{
    return path && (!strcmp (path, "in_place") || !strcmp (path, "spare") ||
                    !strcmp (path, "new_allocation") || !strcmp (path, "reform") ||
                    !strcmp (path, "hot_spare"));
}

bool restart_jit_cause (const char *cause, int cause_rank)
{
    return !strcmp (cause, "trainer_exit") || !strcmp (cause, "node_lost") ||
           !strcmp (cause, "node_failure") ||
           (!strcmp (cause, "hang") && cause_rank >= 0);
}
