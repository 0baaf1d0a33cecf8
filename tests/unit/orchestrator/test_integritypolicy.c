/* test_integritypolicy.c: the controller's integrity decisions
 * (orchestrator/jobs/integritypolicy.c). */
#include <config.h>
#include <string.h>
#include "orchestrator/jobs/integritypolicy.h"
#include "tests/unit/unit.h"

static void test_vote_agree (void)
{
    uint32_t fp[4] = { 7, 7, 7, 7 }, maj = 0;
    int s[4];
    CU_ASSERT_EQUAL (integ_vote (fp, 4, s, &maj), 0);
    CU_ASSERT_EQUAL (maj, 7);
    CU_ASSERT_EQUAL (integ_vote (fp, 1, s, &maj), 0);
}

static void test_vote_majority (void)
{
    uint32_t fp[4] = { 7, 7, 9, 7 }, maj = 0;
    int s[4];
    CU_ASSERT_EQUAL (integ_vote (fp, 4, s, &maj), 1);
    CU_ASSERT_EQUAL (s[0], 2);
    CU_ASSERT_EQUAL (maj, 7);
    /* three replicas, the first one odd */
    uint32_t f3[3] = { 1, 5, 5 };
    CU_ASSERT_EQUAL (integ_vote (f3, 3, s, &maj), 1);
    CU_ASSERT_EQUAL (s[0], 0);
    CU_ASSERT_EQUAL (maj, 5);
}

static void test_vote_no_majority (void)
{
    uint32_t two[2] = { 1, 2 }, four[4] = { 1, 1, 2, 2 }, three[3] = { 1, 2, 3 }, maj;
    int s[4];
    /* two replicas that differ: both suspect */
    CU_ASSERT_EQUAL (integ_vote (two, 2, s, &maj), 2);
    CU_ASSERT_EQUAL (s[0], 0);
    CU_ASSERT_EQUAL (s[1], 1);
    /* a tie or all different: everyone */
    CU_ASSERT_EQUAL (integ_vote (four, 4, s, &maj), 4);
    CU_ASSERT_EQUAL (integ_vote (three, 3, s, &maj), 3);
}

static void test_bad_from (void)
{
    /* divergence seen at 40, fingerprints agreed at 30: from 31 */
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_DIVERGENCE, 40, 30), 31);
    /* no agreement known (no check yet, fresh start): the step itself */
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_DIVERGENCE, 40, -1), 40);
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_NONFINITE, 33, 30), 33);
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_SPIKE, 60, 50), 60);
}

static void test_cause_and_action (void)
{
    CU_ASSERT_STRING_EQUAL (integ_cause (true), "data");
    CU_ASSERT_STRING_EQUAL (integ_cause (false), "hardware");
    CU_ASSERT_STRING_EQUAL (integ_kind_name (INTEG_DIVERGENCE), "replica_divergence");
    CU_ASSERT_STRING_EQUAL (integ_kind_name (INTEG_NONFINITE), "nonfinite");
    CU_ASSERT_STRING_EQUAL (integ_kind_name (INTEG_SPIKE), "loss_spike");
    CU_ASSERT_TRUE (integ_rollback ("rollback", false, false));
    CU_ASSERT_FALSE (integ_rollback ("report", false, true));
    CU_ASSERT_FALSE (integ_rollback (NULL, false, true));
    /* a reproduced fault: roll back again only to skip its batch */
    CU_ASSERT_TRUE (integ_rollback ("rollback", true, true));
    CU_ASSERT_FALSE (integ_rollback ("rollback", true, false));
}

static const struct dt_unit_test tests[] = {
    { "replicas that agree", test_vote_agree },
    { "a strict majority names the odd replica", test_vote_majority },
    { "two replicas or no majority: all suspect", test_vote_no_majority },
    { "first suspect step", test_bad_from },
    { "cause by re-run, and when to roll back", test_cause_and_action },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("integritypolicy", tests);
}
