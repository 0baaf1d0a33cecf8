/* test_dtime.c: duration parsing (Slurm forms), clocks, time formatting. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/dtime.h"
#include "tests/unit/unit.h"

static int64_t ok (const char *s)
{
    int64_t v = -42;
    dt_error_t err = { "" };
    int rc = dt_parse_duration_ms (s, &v, &err);
    if (rc != 0)
        fprintf (stderr, "unexpected failure for '%s': %s\n", s, err.text);
    CU_ASSERT_EQUAL (rc, 0);
    return v;
}

static void bad (const char *s, int errnum)
{
    int64_t v = -42;
    dt_error_t err = { "" };
    errno = 0;
    CU_ASSERT_EQUAL (dt_parse_duration_ms (s, &v, &err), -1);
    CU_ASSERT_EQUAL (errno, errnum);
    CU_ASSERT_EQUAL (v, -42); /* untouched on failure */
    CU_ASSERT (strlen (err.text) > 0);
    if (s && *s)
        CU_ASSERT_PTR_NOT_NULL (strstr (err.text, s)); /* names the input */
}

static void test_units (void)
{
    CU_ASSERT_EQUAL (ok ("250ms"), 250);
    CU_ASSERT_EQUAL (ok ("0ms"), 0);
    CU_ASSERT_EQUAL (ok ("90s"), 90000);
    CU_ASSERT_EQUAL (ok ("30"), 30000);
    CU_ASSERT_EQUAL (ok ("0"), 0);
    CU_ASSERT_EQUAL (ok ("5m"), 300000);
    CU_ASSERT_EQUAL (ok ("2h"), 7200000);
    CU_ASSERT_EQUAL (ok ("1d"), 86400000);
}

static void test_slurm_forms (void)
{
    CU_ASSERT_EQUAL (ok ("02:00:00"), 7200000);
    CU_ASSERT_EQUAL (ok ("1-00:00:00"), 86400000);
    CU_ASSERT_EQUAL (ok ("05:30"), 330000);        /* MM:SS */
    CU_ASSERT_EQUAL (ok ("90:00"), 5400000);       /* minutes may exceed 59 */
    CU_ASSERT_EQUAL (ok ("1:02:03"), 3723000);     /* HH:MM:SS */
    CU_ASSERT_EQUAL (ok ("36:00:00"), 129600000);  /* hours may exceed 23 */
    CU_ASSERT_EQUAL (ok ("2-12"), 216000000);      /* D-HH */
    CU_ASSERT_EQUAL (ok ("2-12:30"), 217800000);   /* D-HH:MM */
    CU_ASSERT_EQUAL (ok ("1-01:01:01"), 90061000); /* D-HH:MM:SS */
}

static void test_bad_durations (void)
{
    bad ("", EINVAL);
    bad (NULL, EINVAL);
    bad ("-5s", EINVAL);
    bad ("5x", EINVAL);
    bad ("5 s", EINVAL);
    bad (" 5s", EINVAL);
    bad ("5s junk", EINVAL);
    bad ("1.5s", EINVAL);
    bad ("ms", EINVAL);
    bad ("s", EINVAL);
    bad ("1:2:3:4", EINVAL);
    bad ("1-", EINVAL);
    bad ("-1", EINVAL);
    bad ("1--2", EINVAL);
    bad ("1-2-3", EINVAL);
    bad ("1:", EINVAL);
    bad (":30", EINVAL);
    bad ("1-2:3:4:5", EINVAL);
    bad ("0x10", EINVAL);
    /* out-of-range fields */
    bad ("10:60", ERANGE);
    bad ("1:60:00", ERANGE);
    bad ("1-24:00:00", ERANGE);
    /* overflow */
    bad ("99999999999999999999", ERANGE);
    bad ("9223372036854775807s", ERANGE);
    bad ("9223372036854775807d", ERANGE);
    bad ("106751991167300-00:00:00", ERANGE);
    bad ("153722867280912931:00", ERANGE);
}

static void test_largest (void)
{
    /* the largest whole-millisecond value is accepted */
    CU_ASSERT_EQUAL (ok ("9223372036854775807ms"), INT64_MAX);
}

static void test_format_time (void)
{
    char buf[32];
    CU_ASSERT_STRING_EQUAL (dt_format_time (0, buf, sizeof (buf)),
                            "1970-01-01T00:00:00.000Z");
    CU_ASSERT_STRING_EQUAL (dt_format_time (1796029296123LL, buf, sizeof (buf)),
                            "2026-11-30T09:01:36.123Z");
    CU_ASSERT_STRING_EQUAL (dt_format_time (951782400007LL, buf, sizeof (buf)),
                            "2000-02-29T00:00:00.007Z");
    CU_ASSERT_STRING_EQUAL (dt_format_time (-1, buf, sizeof (buf)),
                            "1969-12-31T23:59:59.999Z");
}

static int64_t clock_ns (clockid_t id)
{
    struct timespec ts;
    clock_gettime (id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Each clock reads its own kernel clock: a reading lies between two
 * readings of that clock taken around it (so the monotonic clock is not
 * the wall clock, nor in other units). */
static void test_clocks (void)
{
    int64_t lo = clock_ns (CLOCK_MONOTONIC);
    int64_t ns = dt_mono_ns ();
    int64_t ms = dt_mono_ms ();
    int64_t hi = clock_ns (CLOCK_MONOTONIC);
    CU_ASSERT (lo <= ns && ns <= hi);
    CU_ASSERT (lo / 1000000 <= ms && ms <= hi / 1000000);
    lo = clock_ns (CLOCK_REALTIME);
    int64_t real = dt_real_ms ();
    hi = clock_ns (CLOCK_REALTIME);
    CU_ASSERT (lo / 1000000 <= real && real <= hi / 1000000);
}

static const struct dt_unit_test tests[] = {
    { "unit suffixes", test_units },
    { "Slurm time forms", test_slurm_forms },
    { "bad durations rejected", test_bad_durations },
    { "largest duration", test_largest },
    { "UTC millisecond timestamps", test_format_time },
    { "clocks", test_clocks },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("dtime", tests);
}
