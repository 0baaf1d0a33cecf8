/* test_series.c: downsampling of step series for plots
 * (orchestrator/series.c): at most max_points rows, each attempt's first
 * and last row kept, rows in order, nothing done to a short series. */
#include <config.h>
#include <stdbool.h>
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

static const struct dt_unit_test tests[] = {
    { "short series untouched", test_short },
    { "long series bounded, attempts' ends kept", test_long },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("series", tests);
}
