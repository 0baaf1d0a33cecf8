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
    CU_ASSERT_TRUE (restart_exclude_node ("node_lost", "n3", true));
    CU_ASSERT_FALSE (restart_exclude_node ("node_lost", "n3", false));
    CU_ASSERT_FALSE (restart_exclude_node ("node_lost", "", true)); /* no node named */
    /* A straggler's node always; a planned end's node never. */
    CU_ASSERT_TRUE (restart_exclude_node ("straggler_excluded", "n2", false));
    CU_ASSERT_FALSE (restart_exclude_node ("time_limit", "n2", true));
}

static void test_keep_alloc (void)
{
    CU_ASSERT_TRUE (restart_keep_alloc (1, true, "node_lost"));
    CU_ASSERT_FALSE (restart_keep_alloc (0, true, "node_lost"));  /* no spares */
    CU_ASSERT_FALSE (restart_keep_alloc (1, false, "node_lost")); /* no restart */
    CU_ASSERT_FALSE (
      restart_keep_alloc (1, true, "time_limit")); /* Slurm takes it back */
    CU_ASSERT_FALSE (restart_keep_alloc (1, true, "preempted"));
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
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("restartpolicy", tests);
}
