/* test_hangpolicy.c: the hang watchdog's decision (orchestrator/jobs/hangpolicy.c):
 * which rank is blamed, in which class, after which timeout, and when the
 * blame is not known (several ranks of the class stalled). */
#include <config.h>
#include <string.h>
#include "orchestrator/jobs/hangpolicy.h"
#include "tests/unit/unit.h"

enum { N = 4, T_IDLE = 1000, T_BUSY = 5000 };
static const int64_t now = 100000;

/* Every rank healthy: watched, running, stepped just now. */
static void ranks_init (struct rank *r, int n)
{
    memset (r, 0, n * sizeof (*r));
    for (int i = 0; i < n; i++) {
        r[i].seen = r[i].client = true;
        strcpy (r[i].state, "running");
        r[i].step = 50;
        r[i].progress_ms = now - 10;
        r[i].waiting = true; /* healthy peers wait in collectives */
    }
}

static void test_class (void)
{
    struct rank r = { 0 };
    CU_ASSERT_EQUAL (hang_class (&r), HANG_NOT_WAITING);
    r.waiting = true;
    CU_ASSERT_EQUAL (hang_class (&r), HANG_WAITING);
    r.stopped = true;
    CU_ASSERT_EQUAL (hang_class (&r), HANG_STOPPED); /* stopped wins */
    CU_ASSERT_STRING_EQUAL (hang_class_name (HANG_STOPPED), "stopped");
    CU_ASSERT_STRING_EQUAL (hang_class_name (HANG_WAITING), "blocked in a collective");
}

static void test_none (void)
{
    struct rank r[N];
    struct hang_verdict v;
    ranks_init (r, N);
    CU_ASSERT_FALSE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    CU_ASSERT_EQUAL (v.rank, -1);
    /* Silent exactly the timeout: not over it. */
    r[2].progress_ms = now - T_IDLE;
    r[2].waiting = false;
    CU_ASSERT_FALSE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    /* Not watched: no libdtclient, not running, never progressed. */
    ranks_init (r, N);
    r[0].client = false;
    r[1].progress_ms = 0;
    strcpy (r[2].state, "exited");
    r[0].progress_ms = r[2].progress_ms = now - 10 * T_IDLE;
    CU_ASSERT_FALSE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
}

/* The rank not waiting is blamed, not its waiting peers (which stalled
 * longer but only after twice the timeout do they count). */
static void test_not_waiting_blamed (void)
{
    struct rank r[N];
    struct hang_verdict v;
    ranks_init (r, N);
    for (int i = 0; i < N; i++)
        r[i].progress_ms = now - 3 * T_IDLE;
    r[1].waiting = false;
    CU_ASSERT_TRUE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    CU_ASSERT_EQUAL (v.rank, 1);
    CU_ASSERT_EQUAL (v.cls, HANG_NOT_WAITING);
    CU_ASSERT_EQUAL (v.timeout_ms, T_IDLE);
    CU_ASSERT_EQUAL (v.over, N);    /* waiting ones over 2 x the timeout too */
    CU_ASSERT_EQUAL (v.stalled, 1); /* the blame is known */
}

/* A stopped rank is blamed before one not waiting; a busy rank gets the
 * busy allowance. */
static void test_order_and_busy (void)
{
    struct rank r[N];
    struct hang_verdict v;
    ranks_init (r, N);
    r[0].waiting = false;
    r[0].progress_ms = now - 2 * T_IDLE;
    r[3].stopped = true;
    r[3].progress_ms = now - 2 * T_IDLE;
    CU_ASSERT_TRUE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    CU_ASSERT_EQUAL (v.rank, 3);
    CU_ASSERT_EQUAL (v.cls, HANG_STOPPED);
    r[3].busy = r[0].busy = true; /* saving a checkpoint: allowed T_BUSY */
    CU_ASSERT_FALSE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    r[0].progress_ms = now - T_BUSY - 1;
    CU_ASSERT_TRUE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    CU_ASSERT_EQUAL (v.rank, 0);
    CU_ASSERT_EQUAL (v.timeout_ms, T_BUSY);
}

/* Only waiting ranks stalled: blamed after twice the timeout; the lowest
 * step first, then the longest silence; all of them stalled: not known. */
static void test_waiting_ties (void)
{
    struct rank r[N];
    struct hang_verdict v;
    ranks_init (r, N);
    for (int i = 0; i < N; i++)
        r[i].progress_ms = now - (2 * T_IDLE - 1);
    CU_ASSERT_FALSE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    for (int i = 0; i < N; i++)
        r[i].progress_ms = now - 3 * T_IDLE;
    r[2].step = 49;
    CU_ASSERT_TRUE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    CU_ASSERT_EQUAL (v.rank, 2);
    CU_ASSERT_EQUAL (v.cls, HANG_WAITING);
    CU_ASSERT_EQUAL (v.timeout_ms, 2 * T_IDLE);
    CU_ASSERT_EQUAL (v.stalled, N);
    r[2].step = 50;
    r[1].progress_ms = now - 4 * T_IDLE;
    CU_ASSERT_TRUE (hang_decide (r, N, now, T_IDLE, T_BUSY, &v));
    CU_ASSERT_EQUAL (v.rank, 1);
}

static const struct dt_unit_test tests[] = {
    { "rank classes", test_class },
    { "no hang", test_none },
    { "the rank not waiting is blamed", test_not_waiting_blamed },
    { "stopped first, busy allowance", test_order_and_busy },
    { "waiting ranks: twice the timeout, lowest step, ties", test_waiting_ties },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("hangpolicy", tests);
}
