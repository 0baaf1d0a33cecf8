/* unit.h: the small runner every CUnit program under tests/unit/ uses.
 *
 *   static const struct dt_unit_test tests[] = {
 *       { "parses 90s", test_parse_seconds },
 *       { NULL, NULL },
 *   };
 *   int main (void) { return dt_unit_run ("dtime", tests); }
 *
 * Exit status: 0 all passed, 1 any failure (assertion or test error), 77
 * (automake SKIP) when a test calls dt_unit_skip() before any assertion
 * failed, 99 (hard error) when CUnit itself cannot start.
 */
#ifndef DT_TESTS_UNIT_H
#define DT_TESTS_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

struct dt_unit_test {
    const char *name;
    void (*fn) (void);
};

static int dt_unit_skipped __attribute__ ((unused));

/* Mark the whole program as skipped (e.g. no GPU); the caller returns. */
static inline void __attribute__ ((unused)) dt_unit_skip (const char *why)
{
    fprintf (stderr, "SKIP: %s\n", why);
    dt_unit_skipped = 1;
}

static inline int __attribute__ ((unused))
dt_unit_run (const char *suite_name, const struct dt_unit_test *tests)
{
    CU_pSuite suite;
    unsigned int failures;

    if (CU_initialize_registry () != CUE_SUCCESS)
        return 99;
    if (!(suite = CU_add_suite (suite_name, NULL, NULL)))
        goto error;
    for (int i = 0; tests[i].name; i++)
        if (!CU_add_test (suite, tests[i].name, tests[i].fn))
            goto error;
    CU_basic_set_mode (CU_BRM_VERBOSE);
    if (CU_basic_run_tests () != CUE_SUCCESS)
        goto error;
    failures = CU_get_number_of_failures () + CU_get_number_of_tests_failed ();
    CU_cleanup_registry ();
    if (failures > 0)
        return 1;
    return dt_unit_skipped ? 77 : 0;
error:
    fprintf (stderr, "CUnit error: %s\n", CU_get_error_msg ());
    CU_cleanup_registry ();
    return 99;
}

#endif
