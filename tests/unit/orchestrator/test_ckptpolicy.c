/* test_ckptpolicy.c: checkpoint decisions (orchestrator/jobs/ckptpolicy.c):
 * the step the ranks checkpoint at, abandoning a step, and the bookkeeping
 * of a just-in-time shard set. */
#include <config.h>
#include <stdlib.h>
#include <string.h>
#include "orchestrator/jobs/ckptpolicy.h"
#include "tests/unit/unit.h"

static void test_lookahead (void)
{
    /* Not running yet, or no step: the minimum of 2. */
    CU_ASSERT_EQUAL (ckpt_lookahead_steps (0, 10000, -1, 100, 1000), 2);
    CU_ASSERT_EQUAL (ckpt_lookahead_steps (1000, 10000, -1, 0, 1000), 2);
    /* 100 steps in 10 s = 0.01 steps/ms; 2 intervals of 1000 ms: 20, + 1. */
    CU_ASSERT_EQUAL (ckpt_lookahead_steps (1000, 11000, -1, 100, 1000), 21);
    /* Counted from the resume step: 50 steps in 10 s. */
    CU_ASSERT_EQUAL (ckpt_lookahead_steps (1000, 11000, 50, 100, 1000), 11);
    /* A clock that went back: no rate, the minimum. */
    CU_ASSERT_EQUAL (ckpt_lookahead_steps (20000, 11000, -1, 100, 1000), 2);
}

static void test_periodic_step (void)
{
    CU_ASSERT_EQUAL (ckpt_periodic_step (0, 2, 10), 10);
    CU_ASSERT_EQUAL (ckpt_periodic_step (8, 2, 10), 10); /* exactly a multiple */
    CU_ASSERT_EQUAL (ckpt_periodic_step (9, 2, 10), 20);
    CU_ASSERT_EQUAL (ckpt_periodic_step (100, 21, 1), 121);
}

static void test_abandoned (void)
{
    CU_ASSERT_FALSE (ckpt_step_abandoned (0, 100)); /* none asked */
    CU_ASSERT_FALSE (ckpt_step_abandoned (20, 20)); /* at it: may still write */
    CU_ASSERT_TRUE (ckpt_step_abandoned (20, 21));
}

static void test_jit_set (void)
{
    struct jit_set js = { 0 };
    CU_ASSERT_EQUAL (jit_set_add (&js, 3, 3, "n1", 0, 7, 100, "aa"), 0);
    CU_ASSERT_EQUAL (jit_set_add (&js, 3, 3, "n1", 0, 7, 100, "aa"),
                     0); /* repeat counts once */
    CU_ASSERT_EQUAL (js.nhave, 1);
    CU_ASSERT_EQUAL (jit_set_add (&js, 3, 3, "n1", 2, 7, 300, "cc"), 0);
    /* A newer step starts over. */
    CU_ASSERT_EQUAL (jit_set_add (&js, 3, 3, "n2", 1, 8, 200, "bb"), 0);
    CU_ASSERT_EQUAL (js.nhave, 1);
    CU_ASSERT_EQUAL (js.step, 8);
    CU_ASSERT_STRING_EQUAL (js.node, "n2");
    CU_ASSERT_FALSE (js.shards[0].got);
    CU_ASSERT_EQUAL (jit_set_add (&js, 3, 3, "n2", 0, 8, 100, "aa"), 0);
    CU_ASSERT_EQUAL (jit_set_add (&js, 3, 3, "n2", 2, 8, 300, "cc"), 1); /* complete */
    CU_ASSERT_EQUAL (js.shards[2].bytes, 300);
    CU_ASSERT_STRING_EQUAL (js.shards[1].crc32c, "bb");
    free (js.shards);
}

/* dp 2 x (tp 2 x pp 1) over 4 ranks: rank r writes the shards of ranks
 * r mod 2 and r mod 2 + 2; positions are covered by any complete set of
 * the step, one set each. */
static void test_jit_cover (void)
{
    struct jit_set s[4] = { { 0 } };
    int pick[2];
    CU_ASSERT_EQUAL (jit_cover (NULL, 4, 2, 9, pick), 0);
    CU_ASSERT_EQUAL (pick[0], -1);
    /* rank 1 (position 1): one of its two shards, then both */
    CU_ASSERT_EQUAL (jit_set_add (&s[1], 4, 2, "n1", 1, 9, 10, "a"), 0);
    CU_ASSERT_EQUAL (jit_cover (s, 4, 2, 9, pick), 0);
    CU_ASSERT_EQUAL (jit_set_add (&s[1], 4, 2, "n1", 3, 9, 10, "b"), 1);
    CU_ASSERT_EQUAL (jit_shard_index (4, 2, 3), 1); /* rank 3: dp index 1 */
    CU_ASSERT_STRING_EQUAL (s[1].shards[1].crc32c, "b");
    CU_ASSERT_EQUAL (jit_cover (s, 4, 2, 9, pick), 1);
    CU_ASSERT_EQUAL (pick[1], 1);
    CU_ASSERT_EQUAL (pick[0], -1); /* no survivor of position 0 yet */
    /* rank 2 (position 0) of another step does not count */
    CU_ASSERT_EQUAL (jit_set_add (&s[2], 4, 2, "n2", 0, 8, 10, "c"), 0);
    CU_ASSERT_EQUAL (jit_set_add (&s[2], 4, 2, "n2", 2, 8, 10, "d"), 1);
    CU_ASSERT_EQUAL (jit_cover (s, 4, 2, 9, pick), 1);
    CU_ASSERT_EQUAL (jit_cover (s, 4, 2, 8, pick), 1);
    CU_ASSERT_EQUAL (pick[0], 2);
    /* rank 0 (position 0) at step 9: every position covered, once each */
    CU_ASSERT_EQUAL (jit_set_add (&s[0], 4, 2, "n0", 0, 9, 10, "e"), 0);
    CU_ASSERT_EQUAL (jit_set_add (&s[0], 4, 2, "n0", 2, 9, 10, "f"), 1);
    CU_ASSERT_EQUAL (jit_cover (s, 4, 2, 9, pick), 2);
    CU_ASSERT_EQUAL (pick[0], 0);
    CU_ASSERT_EQUAL (pick[1], 1);
    /* plain dp (group 1): one survivor's complete set covers everything */
    CU_ASSERT_EQUAL (jit_cover (s, 4, 1, 9, pick), 0); /* no set of 4 shards */
    for (int i = 0; i < 4; i++)
        free (s[i].shards);
}

static void test_jit_needed (void)
{
    CU_ASSERT_TRUE (jit_set_needed (0, false, -1, 5));  /* nothing committed */
    CU_ASSERT_TRUE (jit_set_needed (0, true, 4, 5));    /* newer than the last */
    CU_ASSERT_FALSE (jit_set_needed (0, true, 5, 5));   /* as new: not needed */
    CU_ASSERT_FALSE (jit_set_needed (6, false, -1, 7)); /* one committed already */
}

static const struct dt_unit_test tests[] = {
    { "lookahead from the step rate", test_lookahead },
    { "periodic step: next multiple ahead", test_periodic_step },
    { "jit sets cover every (tp, pp) position", test_jit_cover },
    { "a step every rank passed is abandoned", test_abandoned },
    { "just-in-time set bookkeeping", test_jit_set },
    { "just-in-time set worth committing", test_jit_needed },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("ckptpolicy", tests);
}
