/* test_sha256.c: SHA-256 (orchestrator/sha256.c) against the FIPS 180-2
 * examples (appendix B) and the padding boundaries around one block. */
#include <config.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/sha256.h"
#include "tests/unit/unit.h"

static void expect (const void *buf, size_t len, const char *want)
{
    char out[65];
    memset (out, 'x', sizeof (out));
    sha256_hex (buf, len, out);
    CU_ASSERT_STRING_EQUAL (out, want);
}

static void test_fips_vectors (void)
{
    /* B.1: "abc" */
    expect ("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* B.2: the 448-bit two-block message */
    const char *b2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect (b2, strlen (b2),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* B.3: one million 'a' */
    char *m = malloc (1000000);
    CU_ASSERT_FATAL (m != NULL);
    memset (m, 'a', 1000000);
    expect (m, 1000000,
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free (m);
    /* the empty message */
    expect ("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* Lengths at the padding boundaries (55, 56, 63, 64, 65 bytes): computed
 * with coreutils' sha256sum. */
static void test_padding_boundaries (void)
{
    char a[130];
    memset (a, 'a', sizeof (a));
    expect (a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    expect (a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    expect (a, 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
    expect (a, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    expect (a, 65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0");
    expect (a, 128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e");
}

/* Binary input: NUL bytes count. */
static void test_binary (void)
{
    const unsigned char z[3] = { 0, 0, 0 };
    expect (z, 3, "709e80c88487a2411e1ee4dfb9f22a861492d20c4765150c0c794abd70f8147c");
}

static const struct dt_unit_test tests[] = {
    { "FIPS 180-2 appendix B vectors and the empty message", test_fips_vectors },
    { "padding boundaries 55..65 and 128 bytes", test_padding_boundaries },
    { "binary input", test_binary },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("sha256", tests);
}
