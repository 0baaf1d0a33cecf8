/* test_crc32c.c: CRC32C known vectors; hardware and table paths agree. */
#include <config.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "tests/unit/unit.h"

/* Vectors from RFC 3720 (iSCSI) appendix B.4 and the usual check value. */
static void test_known_vectors (void)
{
    unsigned char buf[32];

    CU_ASSERT_EQUAL (dt_crc32c (0, "123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL (dt_crc32c_sw (0, "123456789", 9), 0xE3069283u);
    memset (buf, 0, sizeof (buf));
    CU_ASSERT_EQUAL (dt_crc32c (0, buf, 32), 0x8A9136AAu);
    CU_ASSERT_EQUAL (dt_crc32c_sw (0, buf, 32), 0x8A9136AAu);
    memset (buf, 0xff, sizeof (buf));
    CU_ASSERT_EQUAL (dt_crc32c (0, buf, 32), 0x62A8AB43u);
    CU_ASSERT_EQUAL (dt_crc32c_sw (0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = i;
    CU_ASSERT_EQUAL (dt_crc32c_sw (0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = 31 - i;
    CU_ASSERT_EQUAL (dt_crc32c_sw (0, buf, 32), 0x113FDB5Cu);
    /* empty input leaves the value unchanged */
    CU_ASSERT_EQUAL (dt_crc32c (0, buf, 0), 0u);
    CU_ASSERT_EQUAL (dt_crc32c (0x12345678u, buf, 0), 0x12345678u);
}

static void test_incremental (void)
{
    const char *s = "The quick brown fox jumps over the lazy dog";
    size_t n = strlen (s);
    uint32_t whole = dt_crc32c_sw (0, s, n);

    CU_ASSERT_EQUAL (whole, 0x22620404u);
    for (size_t cut = 0; cut <= n; cut++) {
        uint32_t c = dt_crc32c (0, s, cut);
        c = dt_crc32c (c, s + cut, n - cut);
        CU_ASSERT_EQUAL_FATAL (c, whole);
    }
}

static void test_hw_matches_sw (void)
{
    unsigned char *buf;
    unsigned int seed = 12345;

    if (!dt_crc32c_hw_available ()) {
        /* dt_crc32c must still give the table results */
        CU_ASSERT_EQUAL (dt_crc32c (0, "123456789", 9), 0xE3069283u);
        return;
    }
    CU_ASSERT_EQUAL (dt_crc32c_hw (0, "123456789", 9), 0xE3069283u);
    buf = malloc (300 + 16);
    CU_ASSERT_PTR_NOT_NULL_FATAL (buf);
    for (size_t i = 0; i < 316; i++)
        buf[i] = rand_r (&seed) & 0xff;
    /* every length 0..300 at every alignment 0..7, and a running crc */
    for (size_t off = 0; off < 8; off++) {
        for (size_t len = 0; len <= 300; len++) {
            uint32_t init = (uint32_t)rand_r (&seed);
            uint32_t a = dt_crc32c_hw (init, buf + off, len);
            uint32_t b = dt_crc32c_sw (init, buf + off, len);
            if (a != b) {
                CU_FAIL_FATAL ("hw and sw CRC32C differ");
            }
        }
    }
    CU_PASS ("hw == sw for all lengths and alignments");
    free (buf);
}

static void test_large_buffer (void)
{
    size_t n = 1 << 20;
    unsigned char *buf = malloc (n);
    unsigned int seed = 7;

    CU_ASSERT_PTR_NOT_NULL_FATAL (buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = rand_r (&seed) & 0xff;
    uint32_t sw = dt_crc32c_sw (0, buf, n);
    CU_ASSERT_EQUAL (dt_crc32c (0, buf, n), sw);
    /* flipping one bit changes the checksum */
    buf[n / 2] ^= 0x10;
    CU_ASSERT_NOT_EQUAL (dt_crc32c (0, buf, n), sw);
    free (buf);
}

static const struct dt_unit_test tests[] = {
    { "known vectors", test_known_vectors },
    { "incremental equals whole", test_incremental },
    { "hardware equals table, lengths 0..300, misaligned", test_hw_matches_sw },
    { "1 MiB buffer, single bit flip", test_large_buffer },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("crc32c", tests);
}
