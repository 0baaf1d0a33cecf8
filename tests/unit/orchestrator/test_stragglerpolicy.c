/* test_stragglerpolicy.c: straggler windows and medians
 * (orchestrator/jobs/stragglerpolicy.c). */
#include <config.h>
#include <math.h>
#include <string.h>
#include "orchestrator/ftpolicy.h"
#include "orchestrator/jobs/stragglerpolicy.h"
#include "tests/unit/unit.h"

static void rank_init (struct rank *rk)
{
    memset (rk, 0, sizeof (*rk));
    rk->step = -1;
    rk->ring_step = 0;
    rk->compute_ms = NAN;
    rk->median = NAN;
}

/* Feed the rank 'n' steps of compute times t(i). */
static void feed (struct rank *rk, int window, int n, double (*t) (int))
{
    for (int i = 0; i < n; i++) {
        rk->step++;
        if (rk->step == 0)
            rk->step = 1;
        rk->compute_ms = t (i);
        straggler_sample (rk, window);
    }
}

static double t40 (int i)
{
    return 40 + i % 3;
}
static double t120 (int i)
{
    return 120 + i % 4;
}
static double tseq (int i)
{
    return i;
}

static void test_window (void)
{
    CU_ASSERT_EQUAL (straggler_window_steps (20), 20);
    CU_ASSERT_EQUAL (straggler_window_steps (0), 1);
    CU_ASSERT_EQUAL (straggler_window_steps (100000), STRAGGLER_RING);
}

static void test_sample (void)
{
    struct rank rk;
    rank_init (&rk);
    CU_ASSERT (isnan (straggler_median (&rk)));
    rk.step = 1; /* compute time unknown: no sample */
    straggler_sample (&rk, 4);
    CU_ASSERT_EQUAL (rk.nring, 0);
    rk.compute_ms = 10;
    straggler_sample (&rk, 4);
    straggler_sample (&rk, 4); /* the same step again: once */
    CU_ASSERT_EQUAL (rk.nring, 1);
    /* The window keeps the last 4: 6..9 of 0..9. */
    rank_init (&rk);
    feed (&rk, 4, 10, tseq);
    CU_ASSERT_EQUAL (rk.nring, 4);
    CU_ASSERT_DOUBLE_EQUAL (straggler_median (&rk), 8, 1e-12); /* upper median */
}

/* The median agrees with ftpolicy's sort-based one on every window. */
static void test_median_matches_ft (void)
{
    struct rank rk;
    rank_init (&rk);
    unsigned x = 12345;
    for (int i = 0; i < 500; i++) {
        x = x * 1103515245u + 12345u;
        rk.step = i + 1;
        rk.compute_ms = (x >> 16) % 1000;
        straggler_sample (&rk, 17);
        double w[STRAGGLER_RING];
        memcpy (w, rk.ring, rk.nring * sizeof (*w));
        CU_ASSERT_DOUBLE_EQUAL (straggler_median (&rk), ft_median (w, rk.nring), 1e-12);
    }
}

static void test_fastest_and_score (void)
{
    struct rank r[3];
    for (int i = 0; i < 3; i++)
        rank_init (&r[i]);
    CU_ASSERT (isnan (straggler_fastest (r, 3)));
    feed (&r[0], 20, 20, t40);
    feed (&r[1], 20, 20, t40);
    feed (&r[2], 20, 20, t120);
    double f = straggler_fastest (r, 3);
    CU_ASSERT_DOUBLE_EQUAL (f, 41, 1e-12);
    double s = ft_straggler_score (f, straggler_median (&r[2]));
    CU_ASSERT (s < 0.4 && s > 0.3);
    CU_ASSERT_TRUE (ft_straggler_flag (s, r[2].nring, 20, 0.75));
}

static void test_exclude (void)
{
    CU_ASSERT_TRUE (straggler_exclude ("exclude", 2, false, 3));
    CU_ASSERT_FALSE (straggler_exclude ("report", 2, false, 3));
    CU_ASSERT_FALSE (straggler_exclude (NULL, 2, false, 3));
    CU_ASSERT_FALSE (straggler_exclude ("exclude", -1, false, 3)); /* none flagged */
    CU_ASSERT_FALSE (straggler_exclude ("exclude", 2, true, 3));   /* stopping already */
    CU_ASSERT_FALSE (straggler_exclude ("exclude", 2, false, 1));  /* no other node */
}

static const struct dt_unit_test tests[] = {
    { "window clamp", test_window },
    { "samples: once per step, last window", test_sample },
    { "median = ft_median", test_median_matches_ft },
    { "fastest median and score", test_fastest_and_score },
    { "exclusion policy", test_exclude },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("stragglerpolicy", tests);
}
