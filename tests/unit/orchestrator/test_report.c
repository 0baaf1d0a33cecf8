/* test_report.c: the goodput accounting of orchestrator/report.c
 * (report_compute), on timelines written out by hand: the parts, the kept
 * and lost steps of the final lineage (including a fallback to an older
 * checkpoint), live jobs, stalls, and the step-time histogram. */
#include <config.h>
#include <math.h>
#include <string.h>
#include "orchestrator/report.h"
#include "tests/unit/unit.h"

static const int64_t T = 1700000000000LL; /* an epoch in ms */

static double num (json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get (o, a);
    if (b)
        v = json_object_get (v, b);
    return json_number_value (v);
}

static struct report_attempt att (int n, const char *state, bool failed)
{
    struct report_attempt a;
    memset (&a, 0, sizeof (a));
    a.attempt = n;
    a.state = state;
    a.cause = failed ? "trainer_exit" : "";
    a.node = failed ? "node1" : "";
    a.rank = failed ? 0 : -1;
    a.failed = failed;
    a.resume_step = -1;
    a.first_step = a.last_step = -1;
    a.stall_reported_s = NAN;
    return a;
}

/* The sum of the parts, and that it equals the wall time. */
static void check_sum (json_t *r)
{
    json_t *bd = json_object_get (r, "breakdown");
    const char *k;
    json_t *v;
    double sum = 0;
    json_object_foreach (bd, k, v) if (strcmp (k, "unaccounted_s")) sum +=
      json_number_value (v);
    CU_ASSERT_DOUBLE_EQUAL (sum, num (r, "wall_s", NULL), 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "unaccounted_s"), 0, 1e-9);
}

/* One failure, resumed from step 8: every part by hand. */
static void test_one_failure (void)
{
    struct report_attempt a[2] = { att (1, "failed", true), att (2, "succeeded", false) };
    a[0].submit = T;
    a[0].leave_queue = T + 100;
    a[0].train_start = T + 500;
    a[0].first_step = 1;
    a[0].last_step = 10;
    a[0].last_step_time = T + 3000;
    a[0].fail = T + 3100;
    a[0].end = T + 3300;
    a[1].submit = T + 3600;
    a[1].leave_queue = T + 3700;
    a[1].resume_step = 8;
    a[1].train_start = T + 4200;
    a[1].first_step = 9;
    a[1].last_step = 20;
    a[1].last_step_time = T + 7200;
    a[1].end = T + 7300;
    struct report_job j = { .id = 1,
                            .name = "x",
                            .state = "completed",
                            .final = true,
                            .submit = T,
                            .end = T + 7300,
                            .latest_ckpt_step = 16 };
    json_t *r = report_compute (&j, a, 2, T + 9999);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    check_sum (r);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "wall_s", NULL), 7.3, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "queue_s"), 0.2, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "startup_s"), 0.4, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "kept_training_s"), 2.0 + 3.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "lost_work_s"), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "detection_s"), 0.1, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "restart_s"), 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "shutdown_s"), 0.1, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "wall_since_start_s", NULL), 7.2, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "ettr", NULL), 5.0 / 7.2, 1e-9);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (r, "lost_steps")), 2);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (r, "kept_steps")), 20);
    json_t *f = json_object_get (r, "failures");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (f, "count")), 1);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_object_get (f, "by_node"), "node1")), 1);
    CU_ASSERT_DOUBLE_EQUAL (num (f, "mtbf_s", NULL), 7.2, 1e-9);
    json_decref (r);
}

/* A later attempt falls back to an older checkpoint (4): the steps of
 * attempt 1 after 4 and all of attempt 2's are lost. */
static void test_fallback (void)
{
    struct report_attempt a[3] = { att (1, "failed", true), att (2, "failed", true),
                                   att (3, "succeeded", false) };
    int64_t t = T;
    for (int i = 0; i < 3; i++) {
        a[i].submit = t;
        a[i].leave_queue = t + 10;
        a[i].train_start = t + 20;
        a[i].last_step_time = t + 1020;
        a[i].fail = i < 2 ? t + 1030 : 0;
        a[i].end = t + 1040;
        t += 1050;
    }
    a[0].last_step = 10;
    a[1].resume_step = 8;
    a[1].last_step = 15;
    a[2].resume_step = 4;
    a[2].last_step = 20;
    struct report_job j = { .id = 2,
                            .name = "y",
                            .state = "completed",
                            .final = true,
                            .submit = T,
                            .end = t - 10,
                            .latest_ckpt_step = 20 };
    json_t *r = report_compute (&j, a, 3, t + 5000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    check_sum (r);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (r, "kept_steps")), 20);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (r, "lost_steps")), 6 + 7);
    json_t *as = json_object_get (r, "attempts");
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_array_get (as, 0), "kept_steps")), 4);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_array_get (as, 1), "kept_steps")), 0);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_array_get (as, 2), "kept_steps")), 16);
    /* attempt 2: all 1000 ms of training lost; attempt 1: 600 of 1000 */
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "lost_work_s"), 1.0 + 0.6, 1e-9);
    json_decref (r);
}

/* A job restarting right now: the last attempt keeps only up to the newest
 * committed checkpoint, and the time since its failure is restart. */
static void test_live_restarting (void)
{
    struct report_attempt a[1] = { att (1, "failed", true) };
    a[0].submit = T;
    a[0].leave_queue = T + 1000; /* a second in the Slurm queue */
    a[0].train_start = T + 2000;
    a[0].last_step = 30;
    a[0].last_step_time = T + 5000;
    a[0].fail = T + 5500;
    a[0].end = T + 5600;
    struct report_job j = { .id = 3,
                            .name = "z",
                            .state = "restarting",
                            .final = false,
                            .live_restart = true,
                            .submit = T,
                            .end = 0,
                            .latest_ckpt_step = 20 };
    json_t *r = report_compute (&j, a, 1, T + 8000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    check_sum (r);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "wall_s", NULL), 8.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "restart_s"), 2.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "detection_s"), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "kept_training_s"), 2.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "lost_work_s"), 1.0, 1e-9);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (r, "lost_steps")), 10);
    /* ETTR excludes the first queue: 2 / (8 - 1) */
    CU_ASSERT_DOUBLE_EQUAL (num (r, "ettr", NULL), 2.0 / 7.0, 1e-9);
    CU_ASSERT (json_is_false (json_object_get (r, "final")));
    json_decref (r);
}

/* A running attempt: training runs up to now; busy heartbeats are stalls. */
static void test_live_running_stall (void)
{
    struct report_attempt a[1] = { att (1, "running", false) };
    a[0].live = true;
    a[0].submit = T;
    a[0].leave_queue = T;
    a[0].train_start = T + 1000;
    a[0].last_step = 90;
    a[0].last_step_time = T + 9900;
    a[0].hb_samples = 100;
    a[0].busy_samples = 10;
    struct report_job j = {
        .id = 4, .name = "w", .state = "running", .submit = T, .latest_ckpt_step = 50
    };
    json_t *r = report_compute (&j, a, 1, T + 11000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    check_sum (r);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "checkpoint_stall_s"), 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "kept_training_s"), 9.0, 1e-9);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (r, "lost_steps")), 0);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_object_get (r, "failures"), "count")), 0);
    CU_ASSERT (
      json_is_null (json_object_get (json_object_get (r, "failures"), "mtbf_s")));
    json_decref (r);
}

/* A failure before the first step: all start-up, nothing trained or lost. */
static void test_no_steps (void)
{
    struct report_attempt a[2] = { att (1, "failed", true), att (2, "submitted", false) };
    a[0].submit = T;
    a[0].leave_queue = T + 100;
    a[0].fail = T + 700;
    a[0].end = T + 800;
    a[1].submit = T + 1300;
    a[1].live = true; /* still queued */
    struct report_job j = {
        .id = 5, .name = "v", .state = "running", .submit = T, .latest_ckpt_step = -1
    };
    json_t *r = report_compute (&j, a, 2, T + 2000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    check_sum (r);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "startup_s"), 0.6, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "restart_s"), 0.6, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "queue_s"), 0.1 + 0.7, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "kept_training_s"), 0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "ettr", NULL), 0, 1e-9);
    json_decref (r);
}

static void test_histogram (void)
{
    uint32_t h[REPORT_HIST_BUCKETS] = { 0 };
    for (int i = 0; i < 89; i++)
        h[report_hist_bucket (250)]++;
    for (int i = 0; i < 10; i++)
        h[report_hist_bucket (400)]++;
    h[report_hist_bucket (2000)]++;
    for (double ms = 0.1; ms < 1e6; ms *= 3.7) {
        double v = report_hist_value (report_hist_bucket (ms));
        CU_ASSERT (fabs (v - ms) / ms < 0.06);
    }
    struct report_attempt a[1] = { att (1, "succeeded", false) };
    a[0].submit = a[0].leave_queue = T;
    a[0].train_start = T;
    a[0].last_step = 100;
    a[0].last_step_time = T + 25000;
    a[0].hist = h;
    a[0].stall_reported_s = 0.5;
    struct report_job j = { .id = 6,
                            .name = "u",
                            .state = "completed",
                            .final = true,
                            .submit = T,
                            .end = T + 25000,
                            .latest_ckpt_step = 100 };
    json_t *r = report_compute (&j, a, 1, T + 30000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    json_t *a0 = json_array_get (json_object_get (r, "attempts"), 0);
    CU_ASSERT (fabs (num (a0, "step_ms_p50", NULL) - 250) < 0.06 * 250);
    CU_ASSERT (fabs (num (a0, "step_ms_p90", NULL) - 400) < 0.06 * 400);
    CU_ASSERT (fabs (num (a0, "step_ms_p99", NULL) - 400) < 0.06 * 400);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "breakdown", "checkpoint_stall_s"), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r, "ettr", NULL), 24.5 / 25.0, 1e-9);
    json_decref (r);
}

/* Restart time per path: from a failure (first seen) to the next
 * attempt's first step, per attempt and summed by restart_path. */
static void test_recovery_by_path (void)
{
    struct report_attempt a[4] = { att (1, "failed", true), att (2, "failed", true),
                                   att (3, "failed", true), att (4, "succeeded", false) };
    const char *path[4] = { "", "in_place", "in_place", "new_allocation" };
    for (int i = 0; i < 4; i++) {
        a[i].restart_path = path[i];
        a[i].submit = T + i * 10000;
        a[i].leave_queue = a[i].submit + 100;
        a[i].first_step = 1;
        a[i].last_step = 5;
        a[i].train_start = a[i].submit + 200;
        a[i].last_step_time = a[i].submit + 5000;
        if (i < 3)
            a[i].fail = a[i].submit + 6000;
    }
    /* Recoveries: 4.3 s and 4.5 s in place, 4.9 s in a new allocation. */
    a[1].first_step_time = a[0].fail + 4300;
    a[2].first_step_time = a[1].fail + 4500;
    a[3].first_step_time = a[2].fail + 4900;
    a[3].end = T + 40000;
    struct report_job j = { .id = 1,
                            .name = "x",
                            .state = "completed",
                            .final = true,
                            .submit = T,
                            .end = T + 40000,
                            .latest_ckpt_step = 5 };
    json_t *r = report_compute (&j, a, 4, T + 40000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    json_t *al = json_object_get (r, "attempts");
    CU_ASSERT_TRUE (
      json_is_null (json_object_get (json_array_get (al, 0), "restart_path")));
    CU_ASSERT_TRUE (
      json_is_null (json_object_get (json_array_get (al, 0), "recovery_s")));
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (al, 1), "restart_path")),
      "in_place");
    CU_ASSERT_DOUBLE_EQUAL (num (json_array_get (al, 1), "recovery_s", NULL), 4.3, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (json_array_get (al, 3), "recovery_s", NULL), 4.9, 1e-9);
    json_t *bp = json_object_get (r, "recovery_by_path");
    json_t *ip = json_object_get (bp, "in_place"),
           *na = json_object_get (bp, "new_allocation");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (ip, "count")), 2);
    CU_ASSERT_DOUBLE_EQUAL (num (ip, "recovery_s_total", NULL), 8.8, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (ip, "recovery_s_max", NULL), 4.5, 1e-9);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (na, "count")), 1);
    CU_ASSERT_PTR_NULL (json_object_get (bp, "spare"));
    json_decref (r);
}

/* Which path each restart took, its layout change and how long it took,
 * phase by phase from the failure; a path name the report does not know
 * shows up as recorded; the communication per dimension of each attempt. */
static void test_restarts (void)
{
    struct report_attempt a[3] = { att (1, "failed", true), att (2, "failed", true),
                                   att (3, "succeeded", false) };
    const char *path[3] = { "", "re_formed", "new_allocation" };
    double dims[9] = { 80, 8, 4, 0, 0, 0, 40, 20, 2 };
    for (int i = 0; i < 3; i++) {
        a[i].restart_path = path[i];
        a[i].submit = T + i * 10000;
        a[i].leave_queue = a[i].submit + 100;
        a[i].running = a[i].submit + 300;
        a[i].first_step = 1;
        a[i].last_step = 5;
        a[i].train_start = a[i].submit + 400;
        a[i].first_step_time = a[i].submit + 500;
        a[i].last_step_time = a[i].submit + 5000;
        a[i].tp = 2;
        a[i].pp = 2;
        a[i].world_size = 8;
        if (i < 2) {
            a[i].fail = a[i].submit + 6000;
            a[i].end = a[i].submit + 7000;
        }
    }
    a[2].tp = 1; /* a smaller tp on fewer nodes */
    a[2].world_size = 2;
    a[2].zero1 = true;
    a[2].dims_sum = dims;
    a[2].dims_steps = 4;
    a[2].end = T + 28000;
    struct report_job j = { .id = 1,
                            .name = "x",
                            .state = "completed",
                            .final = true,
                            .submit = T,
                            .end = T + 28000,
                            .latest_ckpt_step = 5 };
    json_t *r = report_compute (&j, a, 3, T + 28000);
    CU_ASSERT_PTR_NOT_NULL_FATAL (r);
    json_t *rs = json_object_get (r, "restarts");
    CU_ASSERT_EQUAL_FATAL (json_array_size (rs), 2);
    json_t *r0 = json_array_get (rs, 0), *r1 = json_array_get (rs, 1);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (r0, "path")),
                            "re_formed");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (r0, "after")),
                            "trainer_exit");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (r0, "layout")),
                            "tp2 pp2 dp2");
    CU_ASSERT_TRUE (json_is_false (json_object_get (r0, "layout_changed")));
    /* failure at submit + 6000 of attempt 1 = T + 6000 */
    CU_ASSERT_DOUBLE_EQUAL (num (r0, "stopped_s", NULL), 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r0, "submitted_s", NULL), 4.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r0, "allocated_s", NULL), 4.1, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r0, "running_s", NULL), 4.3, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r0, "first_step_s", NULL), 4.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (r0, "detection_s", NULL), 1.0, 1e-9);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (r1, "path")),
                            "new_allocation");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (r1, "from_layout")),
                            "tp2 pp2 dp2");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (r1, "layout")),
                            "tp1 pp2 dp1 zero1");
    CU_ASSERT_TRUE (json_is_true (json_object_get (r1, "layout_changed")));
    json_t *al = json_object_get (r, "attempts");
    json_t *l2 = json_object_get (json_array_get (al, 2), "layout");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (l2, "tp")), 1);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (l2, "dp")), 1);
    CU_ASSERT_TRUE (json_is_true (json_object_get (l2, "zero1")));
    CU_ASSERT_TRUE (json_is_null (json_object_get (json_array_get (al, 0), "comm_dims")));
    json_t *cd = json_object_get (json_array_get (al, 2), "comm_dims");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (cd, "steps")), 4);
    CU_ASSERT_DOUBLE_EQUAL (num (cd, "tp", "bytes"), 20, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (cd, "dp", "comm_ms"), 5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (num (cd, "dp", "exposed_ms"), 0.5, 1e-9);
    CU_ASSERT_PTR_NOT_NULL (
      json_object_get (json_object_get (r, "recovery_by_path"), "re_formed"));
    json_t *cr = json_object_get (r, "communication");
    CU_ASSERT_EQUAL_FATAL (json_array_size (cr), 3); /* attempt 3's tp, pp, dp */
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_array_get (cr, 2), "attempt")), 3);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (cr, 2), "dim")), "dp");
    CU_ASSERT_DOUBLE_EQUAL (num (json_array_get (cr, 2), "bytes_per_step", NULL), 10,
                            1e-9);
    json_decref (r);
}

static const struct dt_unit_test tests[] = {
    { "one failure: every part by hand", test_one_failure },
    { "fallback to an older checkpoint", test_fallback },
    { "live, restarting", test_live_restarting },
    { "live, running, with stalls", test_live_running_stall },
    { "failure before the first step", test_no_steps },
    { "step-time histogram and reported stall", test_histogram },
    { "restart time per restart path", test_recovery_by_path },
    { "restarts: path, layout, phases; communication per dimension", test_restarts },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("report", tests);
}
