/* test_restartpolicy.c: what a failure's cause means for the restart
 * (orchestrator/jobs/restartpolicy.c). */
#include <config.h>
#include "orchestrator/jobs/restartpolicy.h"
#include "tests/unit/unit.h"

static void test_planned (void)
{
    CU_ASSERT_TRUE (restart_cause_planned ("time_limit"));
    CU_ASSERT_TRUE (restart_cause_planned ("preempted"));
    CU_ASSERT_TRUE (restart_cause_planned ("straggler_excluded"));
    CU_ASSERT_FALSE (restart_cause_planned ("trainer_exit"));
    CU_ASSERT_FALSE (restart_cause_planned ("node_lost"));
}

static void test_exclude (void)
{
    CU_ASSERT_TRUE (restart_exclude_node ("node_lost", -1, "n3", true));
    CU_ASSERT_FALSE (restart_exclude_node ("node_lost", -1, "n3", false));
    CU_ASSERT_FALSE (
      restart_exclude_node ("node_lost", -1, "", true)); /* no node named */
    CU_ASSERT_TRUE (restart_exclude_node ("node_failure", -1, "n3", true));
    CU_ASSERT_TRUE (restart_exclude_node ("slurm_node_fail", -1, "n3", true));
    /* A rank's own end on its node: restarts in place, not excluded. */
    CU_ASSERT_FALSE (restart_exclude_node ("trainer_exit", 1, "n3", true));
    CU_ASSERT_FALSE (restart_exclude_node ("hang", 1, "n3", true));
    /* A hang blamed on nobody in particular: the node named is excluded. */
    CU_ASSERT_TRUE (restart_exclude_node ("hang", -1, "n3", true));
    /* A straggler's node always; a planned end's node never. */
    CU_ASSERT_TRUE (restart_exclude_node ("straggler_excluded", -1, "n2", false));
    CU_ASSERT_FALSE (restart_exclude_node ("time_limit", -1, "n2", true));
}

static void test_keep_alloc (void)
{
    CU_ASSERT_TRUE (restart_keep_alloc (1, false, true, "node_lost"));
    CU_ASSERT_FALSE (restart_keep_alloc (0, false, true, "node_lost"));  /* no spares */
    CU_ASSERT_FALSE (restart_keep_alloc (1, false, false, "node_lost")); /* no restart */
    /* In place: kept without spares; never when no restart follows or
     * when the scheduler takes the allocation back. */
    CU_ASSERT_TRUE (restart_keep_alloc (0, true, true, "trainer_exit"));
    CU_ASSERT_TRUE (restart_keep_alloc (0, true, true, "hang"));
    CU_ASSERT_FALSE (restart_keep_alloc (0, true, false, "trainer_exit"));
    CU_ASSERT_FALSE (restart_keep_alloc (0, true, true, "time_limit"));
    CU_ASSERT_FALSE (
      restart_keep_alloc (1, false, true, "time_limit")); /* Slurm takes it back */
    CU_ASSERT_FALSE (restart_keep_alloc (1, false, true, "preempted"));
}

static void test_in_place (void)
{
    /* A rank's own end on a trusted node: same nodes, same allocation. */
    CU_ASSERT_TRUE (restart_in_place ("trainer_exit", 1, false));
    CU_ASSERT_TRUE (restart_in_place ("trainer_exit", -1, false));
    CU_ASSERT_TRUE (restart_in_place ("hang", 0, false));
    /* A hang nobody is blamed for may be the node's (or the network's). */
    CU_ASSERT_FALSE (restart_in_place ("hang", -1, false));
    /* A node the controller distrusts: excluded (exclude_failed_nodes, a
     * straggler, hardware integrity fault) or suspect. */
    CU_ASSERT_FALSE (restart_in_place ("trainer_exit", 1, true));
    CU_ASSERT_FALSE (restart_in_place ("hang", 0, true));
    /* Node causes and planned ends never restart in place. */
    const char *never[] = { "node_lost",          "node_failure",
                            "slurm_node_fail",    "agent_exit",
                            "time_limit",         "preempted",
                            "straggler_excluded", "launch_failed",
                            "rendezvous_timeout", NULL };
    for (int i = 0; never[i]; i++)
        CU_ASSERT_FALSE (restart_in_place (never[i], 0, false));
}

static void test_skip_backoff (void)
{
    /* The first restart in place after an attempt that progressed. */
    CU_ASSERT_TRUE (restart_skip_backoff (true, true, 0));
    /* Not the second in a row (a crash loop backs off)... */
    CU_ASSERT_FALSE (restart_skip_backoff (true, true, 1));
    CU_ASSERT_FALSE (restart_skip_backoff (true, true, 5));
    /* ...nor after an attempt that did not pass its resume step... */
    CU_ASSERT_FALSE (restart_skip_backoff (true, false, 0));
    /* ...nor on another path (a node cause, a spare, a new allocation). */
    CU_ASSERT_FALSE (restart_skip_backoff (false, true, 0));
    CU_ASSERT_FALSE (restart_skip_backoff (false, false, 0));
    /* A healthy run ends the streak; a short one keeps it. */
    CU_ASSERT_EQUAL (restart_quick_streak (1, RESTART_HEALTHY_MS), 0);
    CU_ASSERT_EQUAL (restart_quick_streak (3, RESTART_HEALTHY_MS + 1), 0);
    CU_ASSERT_EQUAL (restart_quick_streak (1, RESTART_HEALTHY_MS - 1), 1);
    CU_ASSERT_EQUAL (restart_quick_streak (2, 0), 2);
    CU_ASSERT_EQUAL (restart_quick_streak (0, 10), 0);
}

static void test_path_of (void)
{
    CU_ASSERT_PTR_NULL (restart_path_of (1, false, false)); /* the first attempt */
    CU_ASSERT_PTR_NULL (restart_path_of (1, true, true));
    CU_ASSERT_STRING_EQUAL (restart_path_of (2, true, true), "in_place");
    CU_ASSERT_STRING_EQUAL (restart_path_of (3, true, false), "spare");
    CU_ASSERT_STRING_EQUAL (restart_path_of (2, false, true), "new_allocation");
    CU_ASSERT_STRING_EQUAL (restart_path_of (2, false, false), "new_allocation");
    CU_ASSERT_TRUE (restart_path_valid ("in_place"));
    CU_ASSERT_TRUE (restart_path_valid ("spare"));
    CU_ASSERT_TRUE (restart_path_valid ("new_allocation"));
    CU_ASSERT_TRUE (restart_path_valid ("reform"));
    CU_ASSERT_TRUE (restart_path_valid ("hot_spare"));
    CU_ASSERT_FALSE (restart_path_valid (""));
    CU_ASSERT_FALSE (restart_path_valid (NULL));
    CU_ASSERT_FALSE (restart_path_valid ("in-place"));
}

static void test_jit_cause (void)
{
    CU_ASSERT_TRUE (restart_jit_cause ("trainer_exit", 1));
    CU_ASSERT_TRUE (restart_jit_cause ("node_lost", -1));
    CU_ASSERT_TRUE (restart_jit_cause ("node_failure", -1));
    CU_ASSERT_TRUE (restart_jit_cause ("hang", 2));
    CU_ASSERT_FALSE (restart_jit_cause ("hang", -1)); /* unattributed: nobody is killed */
    CU_ASSERT_FALSE (restart_jit_cause ("rendezvous_timeout", -1));
    CU_ASSERT_FALSE (restart_jit_cause ("time_limit", -1));
}

static const struct dt_unit_test tests[] = {
    { "planned ends", test_planned },
    { "which failed node is excluded", test_exclude },
    { "keep the allocation for the next attempt", test_keep_alloc },
    { "causes after which survivors may save", test_jit_cause },
    { "restart in place after a rank's end", test_in_place },
    { "the restart path of an attempt", test_path_of },
    { "no backoff for a first restart in place", test_skip_backoff },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("restartpolicy", tests);
}
