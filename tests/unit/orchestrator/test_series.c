/* test_series.c: downsampling of step series for plots
 * (orchestrator/series.c): at most max_points rows, each attempt's first
 * and last row kept, rows in order, nothing done to a short series; the
 * same on C rows (series_thin), whose JSON text (series_json) equals what
 * jansson writes for the same rows. */
#include <config.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/dtime.h"
#include "orchestrator/series.h"
#include "tests/unit/unit.h"

static json_t *series (int n, int split)
{
    json_t *a = json_array ();
    for (int i = 0; i < n; i++)
        json_array_append_new (
          a, json_pack ("{s:i s:i}", "step", i, "attempt", i < split ? 1 : 2));
    return a;
}

static bool has_step (json_t *a, int step)
{
    size_t i;
    json_t *r;
    json_array_foreach (a, i, r)
    {
        if (json_integer_value (json_object_get (r, "step")) == step)
            return true;
    }
    return false;
}

static void test_short (void)
{
    json_t *a = series (100, 50);
    CU_ASSERT_EQUAL (series_downsample (a, 100), 1);
    CU_ASSERT_EQUAL (json_array_size (a), 100);
    CU_ASSERT_EQUAL (series_downsample (a, 8), 1); /* below the floor: untouched */
    CU_ASSERT_EQUAL (json_array_size (a), 100);
    json_decref (a);
}

static void test_long (void)
{
    int max[] = { 16, 100, 1500, 2000 };
    for (size_t m = 0; m < sizeof (max) / sizeof (max[0]); m++) {
        json_t *a = series (100000, 60001);
        int k = series_downsample (a, max[m]);
        CU_ASSERT (k > 1);
        CU_ASSERT (json_array_size (a) <= (size_t)max[m]);
        CU_ASSERT (json_array_size (a) >= (size_t)max[m] / 2);
        CU_ASSERT_TRUE (has_step (a, 0));
        CU_ASSERT_TRUE (has_step (a, 60000));
        CU_ASSERT_TRUE (has_step (a, 60001));
        CU_ASSERT_TRUE (has_step (a, 99999));
        json_int_t prev = -1;
        size_t i;
        json_t *r;
        json_array_foreach (a, i, r)
        {
            json_int_t s = json_integer_value (json_object_get (r, "step"));
            CU_ASSERT (s > prev);
            prev = s;
        }
        json_decref (a);
    }
}

static void test_thin (void)
{
    size_t n = 100000;
    struct series_row *r = calloc (n, sizeof (*r));
    json_t *a = series ((int)n, 60001);
    for (size_t i = 0; i < n; i++)
        r[i] = (struct series_row){ .step = (int64_t)i, .attempt = i < 60001 ? 1 : 2 };
    int k = series_thin (r, &n, 1500);
    CU_ASSERT_EQUAL (k, series_downsample (a, 1500));
    CU_ASSERT_EQUAL (n, json_array_size (a)); /* the same rows as the JSON path */
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL (r[i].step, json_integer_value (
                                      json_object_get (json_array_get (a, i), "step")));
    size_t m = 10;
    CU_ASSERT_EQUAL (series_thin (r, &m, 100), 1); /* short: untouched */
    CU_ASSERT_EQUAL (m, 10);
    json_decref (a);
    free (r);
}

static void test_json (void)
{
    struct series_row r[] = {
        { 1, 1700000000250, 1, 5.0 / 3, 256.0, 40.0, 9.0 },
        { 2, 1700000000500, 2, NAN, 1e-7, 0.1, NAN },
        { 3, 1700000000750, 2, 1e300, -2.5, 123456789012.0, 0 },
    };
    char *text = NULL, tb[40];
    size_t len = 0;
    FILE *f = open_memstream (&text, &len);
    series_json (f, r, 3);
    fclose (f);
    json_t *want = json_array ();
    for (int i = 0; i < 3; i++) {
        json_t *o = json_pack ("{s:I s:s s:I}", "step", (json_int_t)r[i].step, "time",
                               dt_format_time (r[i].time, tb, sizeof (tb)), "attempt",
                               (json_int_t)r[i].attempt);
        double v[] = { r[i].loss, r[i].samples_per_s, r[i].compute_ms, r[i].comm_ms };
        const char *k[] = { "loss", "samples_per_s", "compute_ms", "comm_ms" };
        for (int j = 0; j < 4; j++)
            json_object_set_new (o, k[j], isnan (v[j]) ? json_null () : json_real (v[j]));
        json_array_append_new (want, o);
    }
    char *dump = json_dumps (want, JSON_COMPACT | JSON_PRESERVE_ORDER);
    CU_ASSERT_STRING_EQUAL (text, dump);
    free (dump);
    free (text);
    json_decref (want);
}

static const struct dt_unit_test tests[] = {
    { "short series untouched", test_short },
    { "long series bounded, attempts' ends kept", test_long },
    { "C rows thinned as the JSON rows", test_thin },
    { "C rows written as jansson writes them", test_json },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("series", tests);
}
