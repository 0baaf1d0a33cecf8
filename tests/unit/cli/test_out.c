/* test_out.c: dtctl's output formatting (orchestrator/cli/out.c): JSON
 * paths with alternatives, scalars as text, times, ages and durations,
 * and the column layout of tables.  out.c is compiled into this test. */
#include "orchestrator/cli/out.c"

#include <stdarg.h>
#include "tests/unit/unit.h"

/* out.c's only exit path (out of memory): ctl.c is not linked here. */
void ctl_die (int code, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    exit (code);
}

static void test_jget (void)
{
    json_t *o = json_pack ("{s:{s:i, s:n}, s:s, s:n}", "checkpoint", "every_steps", 20,
                           "dir", "name", "j1", "submit_time");
    CU_ASSERT_EQUAL (json_integer_value (jget (o, "checkpoint.every_steps")), 20);
    CU_ASSERT_PTR_NULL (jget (o, "checkpoint.dir")); /* null is absent */
    CU_ASSERT_PTR_NULL (jget (o, "checkpoint.every_steps.x"));
    CU_ASSERT_PTR_NULL (jget (o, "nothing"));
    CU_ASSERT_STRING_EQUAL (json_string_value (jget (o, "submit_time|name")), "j1");
    CU_ASSERT_STRING_EQUAL (json_string_value (jget (o, "name|submit_time")), "j1");
    CU_ASSERT_EQUAL (json_integer_value (jget (o, "x|checkpoint.every_steps")), 20);
    json_decref (o);
}

static void test_jfmt (void)
{
    char buf[64];
    json_t *v;
    CU_ASSERT_STRING_EQUAL (jfmt (NULL, NULL, buf, sizeof (buf)), "-");
    CU_ASSERT_STRING_EQUAL (jfmt (json_null (), NULL, buf, sizeof (buf)), "-");
    CU_ASSERT_STRING_EQUAL (jfmt (v = json_integer (-42), NULL, buf, sizeof (buf)),
                            "-42");
    json_decref (v);
    CU_ASSERT_STRING_EQUAL (jfmt (v = json_real (0.123456), NULL, buf, sizeof (buf)),
                            "0.1235");
    CU_ASSERT_STRING_EQUAL (jfmt (v, "%.1f", buf, sizeof (buf)), "0.1");
    json_decref (v);
    CU_ASSERT_STRING_EQUAL (jfmt (json_true (), NULL, buf, sizeof (buf)), "yes");
    CU_ASSERT_STRING_EQUAL (jfmt (json_false (), NULL, buf, sizeof (buf)), "no");
    v = json_pack ("[s, i, {s:s}, {s:i}]", "a", 2, "node", "local1", "id", 7);
    CU_ASSERT_STRING_EQUAL (jfmt (v, NULL, buf, sizeof (buf)), "a,2,local1,7");
    json_decref (v);
    CU_ASSERT_STRING_EQUAL (jfmt (v = json_array (), NULL, buf, sizeof (buf)), "-");
    json_decref (v);
    CU_ASSERT_STRING_EQUAL (
      jfmt (v = json_pack ("{s:i}", "k", 1), NULL, buf, sizeof (buf)), "{\"k\":1}");
    json_decref (v);
    /* truncated to the buffer, never past it */
    char small[4];
    CU_ASSERT_STRING_EQUAL (
      jfmt (v = json_string ("abcdef"), NULL, small, sizeof (small)), "abc");
    json_decref (v);
}

static void test_times (void)
{
    json_t *v;
    CU_ASSERT_EQUAL (jtime_ms (v = json_string ("2026-11-30T09:01:36.123Z")),
                     1796029296123LL);
    json_decref (v);
    CU_ASSERT_EQUAL (jtime_ms (v = json_string ("2026-11-30T09:01:36Z")),
                     1796029296000LL);
    json_decref (v);
    CU_ASSERT_EQUAL (jtime_ms (v = json_string ("2026-11-30T09:01:36.5Z")),
                     1796029296500LL);
    json_decref (v);
    CU_ASSERT_EQUAL (jtime_ms (v = json_integer (1796029296)),
                     1796029296000LL); /* seconds */
    json_decref (v);
    CU_ASSERT_EQUAL (jtime_ms (v = json_integer (1796029296123LL)), 1796029296123LL);
    json_decref (v);
    CU_ASSERT_EQUAL (jtime_ms (v = json_string ("yesterday")), -1);
    json_decref (v);
    CU_ASSERT_EQUAL (jtime_ms (NULL), -1);

    char buf[32];
    v = json_pack ("{s:s}", "t", "2026-11-30T09:01:36.123Z");
    CU_ASSERT_STRING_EQUAL (fmt_when (v, "t", buf, sizeof (buf)), "2026-11-30T09:01:36Z");
    CU_ASSERT_STRING_EQUAL (fmt_when (v, "absent", buf, sizeof (buf)), "-");
    json_decref (v);
}

static void test_ages (void)
{
    char buf[32];
    CU_ASSERT_STRING_EQUAL (fmt_age (-1, buf, sizeof (buf)), "-");
    CU_ASSERT_STRING_EQUAL (fmt_age (0, buf, sizeof (buf)), "0s");
    CU_ASSERT_STRING_EQUAL (fmt_age (45999, buf, sizeof (buf)), "45s");
    CU_ASSERT_STRING_EQUAL (fmt_age (12 * 60000 + 5000, buf, sizeof (buf)), "12m");
    CU_ASSERT_STRING_EQUAL (fmt_age ((3 * 3600 + 5 * 60) * 1000LL, buf, sizeof (buf)),
                            "3h05m");
    CU_ASSERT_STRING_EQUAL (
      fmt_age ((2 * 86400 + 4 * 3600 + 59) * 1000LL, buf, sizeof (buf)), "2d04h");
    CU_ASSERT_STRING_EQUAL (fmt_secs (-0.5, buf, sizeof (buf)), "-");
    CU_ASSERT_STRING_EQUAL (fmt_secs (1.25, buf, sizeof (buf)), "1.25s");
    CU_ASSERT_STRING_EQUAL (fmt_secs (12.34, buf, sizeof (buf)), "12.3s");
    CU_ASSERT_STRING_EQUAL (fmt_secs (192, buf, sizeof (buf)), "3m12s");
    CU_ASSERT_STRING_EQUAL (fmt_secs (7380, buf, sizeof (buf)), "2h03m");
}

static void test_table (void)
{
    const char *h[] = { "JOB", "NAME", "STATE" };
    const char *r1[] = { "1", "a-long-name", "running" };
    const char *r2[] = { "12345", "", NULL };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    struct table *t = table_create (3, h);
    table_add (t, r1);
    table_add (t, r2);
    table_print (t, f, 2);
    fclose (f);
    CU_ASSERT_STRING_EQUAL (text, "  JOB    NAME         STATE\n"
                                  "  1      a-long-name  running\n"
                                  "  12345  -            -\n");
    free (text);
}

static const struct dt_unit_test tests[] = {
    { "jget: dotted paths and alternatives; null is absent", test_jget },
    { "jfmt: each JSON type as text", test_jfmt },
    { "times: ISO and epoch inputs, fmt_when", test_times },
    { "fmt_age and fmt_secs", test_ages },
    { "tables: columns as wide as their widest cell", test_table },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("out", tests);
}
