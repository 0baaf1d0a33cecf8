/* test_authdigest.c: the request digest a MUNGE credential is bound to
 * (orchestrator/authdigest.c): known values (the same as sha256sum over
 * "METHOD\nPATH\n" + body, what tests/system/dtcurl computes), every part
 * of the request changes it, and the client's path normalisation. */
#include <config.h>
#include <errno.h>
#include <string.h>
#include "orchestrator/authdigest.h"
#include "tests/unit/unit.h"

static void test_known (void)
{
    char d[AUTHDIGEST_LEN + 1];

    CU_ASSERT_EQUAL (authdigest_compute ("GET", "/v1/jobs", "", 0, d), 0);
    CU_ASSERT_STRING_EQUAL (
      d, "a81f0b3dcdc43c2f524dae65b39d341012066237795e712d06650b29c19ac83a");
    CU_ASSERT_EQUAL (authdigest_compute ("POST", "/v1/jobs", "{\"a\":1}", 7, d), 0);
    CU_ASSERT_STRING_EQUAL (
      d, "51b7c18561960145e2b4cb2a525cf8f25abf4c3bcdf1ca82714b2a0b84048f4a");
}

static void test_bound (void)
{
    char a[AUTHDIGEST_LEN + 1], b[AUTHDIGEST_LEN + 1];

    authdigest_compute ("POST", "/v1/jobs", "{}", 2, a);
    authdigest_compute ("GET", "/v1/jobs", "{}", 2, b);
    CU_ASSERT (strcmp (a, b) != 0); /* method */
    authdigest_compute ("POST", "/v1/jobs/1/cancel", "{}", 2, b);
    CU_ASSERT (strcmp (a, b) != 0); /* path */
    authdigest_compute ("POST", "/v1/jobs", "{ }", 3, b);
    CU_ASSERT (strcmp (a, b) != 0); /* body */
    /* the separators keep the parts apart: "GE" + "T\n/x" is not "GET" + "/x" */
    authdigest_compute ("GET", "/x", "", 0, a);
    authdigest_compute ("GE", "T\n/x", "", 0, b);
    CU_ASSERT (strcmp (a, b) != 0);
    /* a body with a NUL byte counts every byte */
    authdigest_compute ("PUT", "/k", "a\0b", 3, a);
    authdigest_compute ("PUT", "/k", "a\0c", 3, b);
    CU_ASSERT (strcmp (a, b) != 0);
}

static void test_path (void)
{
    char p[64];

    CU_ASSERT_EQUAL (authdigest_path ("/v1/jobs?state=running&limit=5", p, sizeof (p)),
                     0);
    CU_ASSERT_STRING_EQUAL (p, "/v1/jobs");
    CU_ASSERT_EQUAL (authdigest_path ("/v1/nodes/gpu%2D1%2e", p, sizeof (p)), 0);
    CU_ASSERT_STRING_EQUAL (p, "/v1/nodes/gpu-1.");
    CU_ASSERT_EQUAL (authdigest_path ("/a%zz%4", p, sizeof (p)),
                     0); /* not escapes: kept */
    CU_ASSERT_STRING_EQUAL (p, "/a%zz%4");
    CU_ASSERT_EQUAL (authdigest_path ("/0123456789", p, 8), -1);
    CU_ASSERT_EQUAL (errno, ENAMETOOLONG);
}

static const struct dt_unit_test tests[] = {
    { "known digests", test_known },
    { "method, path and body are bound", test_bound },
    { "path as the server sees it", test_path },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("authdigest", tests);
}
