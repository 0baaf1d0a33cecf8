/* test_ftpolicy.c: the pure fault-tolerance decisions (orchestrator/ftpolicy.c):
 * straggler score, automatic hang timeout, no-progress guard, restart
 * decision with min_nodes, backoff. */
#include <config.h>
#include <string.h>
#include <math.h>
#include "orchestrator/ftpolicy.h"
#include "tests/unit/unit.h"

static void test_median (void)
{
    double v[] = { 5, 1, 4, 2, 3 };
    CU_ASSERT_DOUBLE_EQUAL (ft_median (v, 5), 3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL (v[0], 5, 1e-12); /* input untouched */
    double e[] = { 10, 20, 30, 40 };
    CU_ASSERT_DOUBLE_EQUAL (ft_median (e, 4), 30, 1e-12); /* upper median */
    CU_ASSERT (isnan (ft_median (v, 0)));
}

static void test_straggler_score (void)
{
    /* The straggler score: fastest median / own median, in (0, 1]. */
    CU_ASSERT_DOUBLE_EQUAL (ft_straggler_score (40, 40), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL (ft_straggler_score (40, 80), 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL (ft_straggler_score (40, 20), 1.0, 1e-12); /* clamped */
    CU_ASSERT (isnan (ft_straggler_score (NAN, 40)));
    CU_ASSERT (isnan (ft_straggler_score (40, 0)));
    CU_ASSERT (isnan (ft_straggler_score (-1, 40)));
}

static void test_straggler_flag (void)
{
    /* Only over a full window, only strictly below the threshold. */
    CU_ASSERT_TRUE (ft_straggler_flag (0.5, 20, 20, 0.75));
    CU_ASSERT_FALSE (ft_straggler_flag (0.5, 19, 20, 0.75));
    CU_ASSERT_FALSE (ft_straggler_flag (0.75, 20, 20, 0.75));
    CU_ASSERT_FALSE (ft_straggler_flag (0.9, 64, 20, 0.75));
    CU_ASSERT_FALSE (ft_straggler_flag (NAN, 64, 20, 0.75));
}

/* A window of compute times: one rank 3x slower is flagged, a noisy one is not. */
static void test_straggler_window (void)
{
    double fast[20], noisy[20], slow[20];
    for (int i = 0; i < 20; i++) {
        fast[i] = 40 + (i % 3);
        noisy[i] = i % 5 == 0 ? 200 : 42; /* rare spikes: the median ignores them */
        slow[i] = 120 + (i % 4);
    }
    double f = ft_median (fast, 20);
    double sn = ft_straggler_score (f, ft_median (noisy, 20));
    double ss = ft_straggler_score (f, ft_median (slow, 20));
    CU_ASSERT_FALSE (ft_straggler_flag (sn, 20, 20, 0.75));
    CU_ASSERT_TRUE (ft_straggler_flag (ss, 20, 20, 0.75));
    CU_ASSERT (ss > 0.3 && ss < 0.4);
}

static void test_percentile (void)
{
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100 - i; /* 100 .. 1, unsorted */
    CU_ASSERT_DOUBLE_EQUAL (ft_percentile (v, 100, 99), 99, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL (ft_percentile (v, 100, 100), 100, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL (ft_percentile (v, 100, 50), 50, 1e-12);
    double one = 7;
    CU_ASSERT_DOUBLE_EQUAL (ft_percentile (&one, 1, 99), 7, 1e-12);
    CU_ASSERT (isnan (ft_percentile (v, 0, 99)));
    CU_ASSERT (isnan (ft_percentile (v, 10, 0)));
}

static void test_hang_timeout (void)
{
    struct ft_hang_params p = ft_hang_defaults;
    p.floor_ms = 5000;
    /* Fixed by the job: used as is (busy still gets its allowance). */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 42000, 100, 50, false), 42000);
    /* Auto, too few samples: the floor. */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 0, 2000, p.min_samples - 1, false), 5000);
    /* Auto, fast steps: still the floor. */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 0, 40, 100, false), 5000);
    /* Auto, slow steps: k x p99 (10 x 1.5 s). */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 0, 1500, 100, false), 15000);
    /* Unknown p99: the floor. */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 0, NAN, 100, false), 5000);
    /* Busy (checkpoint save/load): max(busy floor, 4 x the timeout). */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 0, 40, 100, true), p.busy_floor_ms);
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 0, 6000, 100, true), 4 * 60000);
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&p, 100000, 0, 0, true), 400000);
    /* The defaults: floor 30 s, 10 x p99. */
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&ft_hang_defaults, 0, 10, 100, false), 30000);
    CU_ASSERT_EQUAL (ft_hang_timeout_ms (&ft_hang_defaults, 0, 4000, 100, false), 40000);
}

static void test_progress (void)
{
    /* From scratch: past step 0. */
    CU_ASSERT_FALSE (ft_attempt_progressed (-1, -1, false));
    CU_ASSERT_FALSE (ft_attempt_progressed (-1, 0, false));
    CU_ASSERT_TRUE (ft_attempt_progressed (-1, 1, false));
    /* Resumed from 30: must pass 30. */
    CU_ASSERT_FALSE (ft_attempt_progressed (30, 30, false));
    CU_ASSERT_FALSE (ft_attempt_progressed (30, -1, false));
    CU_ASSERT_TRUE (ft_attempt_progressed (30, 31, false));
    /* A commit is progress whatever the heartbeats saw. */
    CU_ASSERT_TRUE (ft_attempt_progressed (30, 30, true));
    /* The streak counts consecutive failures without progress. */
    int s = 0;
    s = ft_no_progress_streak (s, false);
    s = ft_no_progress_streak (s, false);
    CU_ASSERT_EQUAL (s, 2);
    s = ft_no_progress_streak (s, true);
    CU_ASSERT_EQUAL (s, 0);
}

static void test_restart_decide (void)
{
    struct ft_restart_in in = {
        .restarts = 0,
        .max_restarts = 3,
        .no_progress_streak = 0,
        .no_progress_limit = 3,
        .nodes = 4,
        .min_nodes = 2,
        .available = -1,
    };
    int n = -1;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 4); /* unknown capacity: full size */
    in.available = 10;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 4);
    in.available = 3; /* fewer healthy nodes: shrink */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 3);
    in.available = 2; /* down to min_nodes */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 2);
    in.available = 1; /* below: give up */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_NO_NODES);
    CU_ASSERT_EQUAL (n, 0);
    in.min_nodes = 0; /* unset: the full size is the minimum */
    in.available = 3;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_NO_NODES);
    in.min_nodes = 2;
    in.available = -1;
    in.restarts = 3; /* max_restarts reached */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_RESTARTS);
    in.restarts = 1;
    in.no_progress_streak = 3; /* K consecutive without progress */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_NO_PROGRESS);
    in.restarts = 3; /* no_progress wins over max_restarts */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_NO_PROGRESS);
    in.no_progress_limit = 0; /* guard off */
    in.restarts = 1;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    in.max_restarts = 0; /* never restart */
    in.restarts = 0;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_RESTARTS);
    CU_ASSERT_STRING_EQUAL (ft_verdict_name (FT_GIVE_UP_NO_PROGRESS), "no_progress");
    CU_ASSERT_STRING_EQUAL (ft_verdict_name (FT_GIVE_UP_NO_NODES), "no_nodes");
}

/* tp 2 x pp 2 on 4 one-rank nodes: too few nodes for a whole group ->
 * smaller degrees where parallel.shrink allows them, in its order. */
static void test_restart_replan (void)
{
    struct ft_restart_in in = {
        .max_restarts = 3,
        .nodes = 4,
        .min_nodes = 1,
        .available = 3,
        .ranks_per_node = 1,
        .tp = 2,
        .pp = 2,
    };
    int n, tp, pp;
    /* 3 nodes hold one group of 4? no: without shrink, give up */
    CU_ASSERT_EQUAL (ft_restart_replan (&in, &n, &tp, &pp), FT_GIVE_UP_NO_NODES);
    CU_ASSERT_EQUAL (tp * pp, 4);
    /* shrink [pp, tp]: pp first -> tp 2 x pp 1 on 2 nodes */
    in.shrink[0] = FT_DIM_PP, in.shrink[1] = FT_DIM_TP, in.nshrink = 2;
    CU_ASSERT_EQUAL (ft_restart_replan (&in, &n, &tp, &pp), FT_RESTART);
    CU_ASSERT (n == 2 && tp == 2 && pp == 1);
    /* one node: both reduced, tp 1 x pp 1 */
    in.available = 1;
    CU_ASSERT_EQUAL (ft_restart_replan (&in, &n, &tp, &pp), FT_RESTART);
    CU_ASSERT (n == 1 && tp == 1 && pp == 1);
    /* shrink [tp] only: tp 1 x pp 2 on 2 nodes; nothing on 1 */
    in.available = 2, in.shrink[0] = FT_DIM_TP, in.nshrink = 1;
    CU_ASSERT_EQUAL (ft_restart_replan (&in, &n, &tp, &pp), FT_RESTART);
    CU_ASSERT (n == 2 && tp == 1 && pp == 2);
    in.available = 1;
    CU_ASSERT_EQUAL (ft_restart_replan (&in, &n, &tp, &pp), FT_GIVE_UP_NO_NODES);
    /* enough nodes: the spec's layout, fewer replicas first (tp 2 x pp 2 x dp 2
     * on 8 nodes, 5 healthy -> 4 nodes, dp 1) */
    in.nodes = 8, in.available = 5;
    CU_ASSERT_EQUAL (ft_restart_replan (&in, &n, &tp, &pp), FT_RESTART);
    CU_ASSERT (n == 4 && tp == 2 && pp == 2);
}

/* With a layout (tp x pp = 4 ranks, 2 ranks per node), a restart on fewer
 * nodes keeps whole groups: 5 healthy nodes -> 4, 3 -> 2, below min_nodes
 * -> give up. */
static void test_restart_layout (void)
{
    struct ft_restart_in in = {
        .max_restarts = 3,
        .nodes = 6,
        .min_nodes = 2,
        .available = 5,
        .ranks_per_node = 2,
        .group = 4,
    };
    int n = -1;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 4);
    in.available = 3;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 2);
    in.available = -1;
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 6);
    in.min_nodes = 3;
    in.available = 3; /* 3 nodes hold no whole group count; 2 < min_nodes */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_GIVE_UP_NO_NODES);
    in.group = 1; /* no layout: 3 */
    CU_ASSERT_EQUAL (ft_restart_decide (&in, &n), FT_RESTART);
    CU_ASSERT_EQUAL (n, 3);
}

/* A job that fails on every attempt stops after K attempts, not in a loop. */
static void test_no_endless_loop (void)
{
    struct ft_restart_in in = {
        .max_restarts = 100,
        .no_progress_limit = 3,
        .nodes = 2,
        .min_nodes = 2,
        .available = -1,
    };
    int n, attempts = 0;
    enum ft_verdict v;
    do {
        attempts++;
        in.no_progress_streak = ft_no_progress_streak (in.no_progress_streak, false);
        v = ft_restart_decide (&in, &n);
        in.restarts++;
    } while (v == FT_RESTART && attempts < 1000);
    CU_ASSERT_EQUAL (v, FT_GIVE_UP_NO_PROGRESS);
    CU_ASSERT_EQUAL (attempts, 3);
}

static void test_backoff (void)
{
    CU_ASSERT_EQUAL (ft_backoff_ms (0, 500, 30000), 500);
    CU_ASSERT_EQUAL (ft_backoff_ms (1, 500, 30000), 500);
    CU_ASSERT_EQUAL (ft_backoff_ms (2, 500, 30000), 1000);
    CU_ASSERT_EQUAL (ft_backoff_ms (4, 500, 30000), 4000);
    CU_ASSERT_EQUAL (ft_backoff_ms (10, 500, 30000), 30000);
    CU_ASSERT_EQUAL (ft_backoff_ms (1000, 500, 30000), 30000);
}

static void test_node_names (void)
{
    char long_name[80];
    memset (long_name, 'n', sizeof (long_name) - 1);
    long_name[sizeof (long_name) - 1] = '\0';

    CU_ASSERT (ft_node_name_ok ("local1"));
    CU_ASSERT (ft_node_name_ok ("gpu-a100_07.cluster.example"));
    CU_ASSERT (ft_node_name_ok ("7node"));
    CU_ASSERT (!ft_node_name_ok (NULL));
    CU_ASSERT (!ft_node_name_ok (""));
    CU_ASSERT (!ft_node_name_ok ("node[1-100]")); /* a hostlist range */
    CU_ASSERT (!ft_node_name_ok ("n1,n2"));
    CU_ASSERT (!ft_node_name_ok ("a b"));
    CU_ASSERT (!ft_node_name_ok ("-x")); /* an option */
    CU_ASSERT (!ft_node_name_ok (".hidden"));
    CU_ASSERT (!ft_node_name_ok ("$(reboot)"));
    CU_ASSERT (!ft_node_name_ok ("n\n1"));
    CU_ASSERT (!ft_node_name_ok (long_name));
    long_name[FT_NODE_NAME_MAX] = '\0';
    CU_ASSERT (ft_node_name_ok (long_name)); /* exactly the maximum */
    long_name[FT_NODE_NAME_MAX] = 'n';
    long_name[FT_NODE_NAME_MAX + 1] = '\0';
    CU_ASSERT (!ft_node_name_ok (long_name));
}

static void test_node_suspect (void)
{
    CU_ASSERT (ft_cause_is_infra ("node_lost"));
    CU_ASSERT (ft_cause_is_infra ("slurm_node_fail"));
    CU_ASSERT (!ft_cause_is_infra ("trainer_exit"));
    CU_ASSERT (!ft_cause_is_infra ("hang"));
    CU_ASSERT (!ft_cause_is_infra (NULL));
    /* one user alone never makes a node suspect with the default of two */
    CU_ASSERT (!ft_node_suspect (100, 1, 3, 2));
    CU_ASSERT (!ft_node_suspect (2, 2, 3, 2));
    CU_ASSERT (ft_node_suspect (3, 2, 3, 2));
    CU_ASSERT (ft_node_suspect (2, 1, 2, 1));
}

static const struct dt_unit_test tests[] = {
    { "median", test_median },
    { "straggler score", test_straggler_score },
    { "straggler flag", test_straggler_flag },
    { "straggler over a window", test_straggler_window },
    { "percentile", test_percentile },
    { "auto hang timeout", test_hang_timeout },
    { "progress and the no-progress streak", test_progress },
    { "restart decision incl. min_nodes", test_restart_decide },
    { "restart on fewer nodes keeps the layout's groups", test_restart_layout },
    { "restart re-plans a smaller tp or pp", test_restart_replan },
    { "no endless loop", test_no_endless_loop },
    { "backoff", test_backoff },
    { "node names", test_node_names },
    { "suspect: infrastructure causes of several users", test_node_suspect },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("ftpolicy", tests);
}
