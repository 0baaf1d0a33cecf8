/* test_sha256_update.c: SHA-256 (orchestrator/sha256.c), one-shot and incremental
 * in chunks of every awkward size, against the FIPS 180-4 examples. */
#include <config.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/sha256.h"
#include "tests/unit/unit.h"

static const char abc_sha[] =
  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char empty_sha[] =
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
static const char mil_sha[] =
  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

static void test_one_shot (void)
{
    char out[65];
    sha256_hex ("abc", 3, out);
    CU_ASSERT_STRING_EQUAL (out, abc_sha);
    sha256_hex ("", 0, out);
    CU_ASSERT_STRING_EQUAL (out, empty_sha);
}

static void test_incremental (void)
{
    static const size_t chunks[] = { 1, 7, 55, 56, 63, 64, 65, 127, 128, 1000, 4096 };
    enum { N = 1000000 };
    char *a = malloc (N), out[65];
    CU_ASSERT_PTR_NOT_NULL_FATAL (a);
    memset (a, 'a', N);
    sha256_hex (a, N, out);
    CU_ASSERT_STRING_EQUAL (out, mil_sha);
    for (size_t i = 0; i < sizeof (chunks) / sizeof (chunks[0]); i++) {
        struct sha256_ctx c;
        sha256_init (&c);
        for (size_t off = 0; off < N; off += chunks[i])
            sha256_update (&c, a + off, N - off < chunks[i] ? N - off : chunks[i]);
        sha256_final_hex (&c, out);
        CU_ASSERT_STRING_EQUAL (out, mil_sha);
    }
    struct sha256_ctx c;
    sha256_init (&c);
    sha256_update (&c, "a", 1);
    sha256_update (&c, "", 0);
    sha256_update (&c, "bc", 2);
    sha256_final_hex (&c, out);
    CU_ASSERT_STRING_EQUAL (out, abc_sha);
    free (a);
}

static const struct dt_unit_test tests[] = {
    { "one shot: FIPS 180-4 examples", test_one_shot },
    { "incremental in chunks of every awkward size", test_incremental },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("sha256_update", tests);
}
