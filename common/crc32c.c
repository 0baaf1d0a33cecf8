/* crc32c.c: CRC32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * The hardware path uses the SSE4.2 crc32 instruction, selected at run
 * time with cpuid so one binary runs on any x86-64; the table path
 * (slicing-by-8) is the portable fallback and the oracle in tests.
 */
#include <config.h>
#include <stdint.h>
#include <string.h>

#include "common/crc32c.h"

#define POLY 0x82F63B78u

static uint32_t table[8][256];

/* Built once by a constructor: avoids a pthread_once on every call. */
__attribute__ ((constructor)) static void crc32c_init_table (void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[k][n] = c;
        }
    }
}

uint32_t dt_crc32c_sw (uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    crc = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy (&w, p, 8);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
        w = __builtin_bswap64 (w);
#endif
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
              table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
              table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__ ((target ("sse4.2"))) uint32_t dt_crc32c_hw (uint32_t crc, const void *buf,
                                                           size_t len)
{
    const unsigned char *p = buf;
    uint64_t c = ~crc & 0xffffffffu;

    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi ((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy (&w, p, 8);
        c = __builtin_ia32_crc32di (c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = __builtin_ia32_crc32qi ((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

bool dt_crc32c_hw_available (void)
{
    __builtin_cpu_init ();
    return __builtin_cpu_supports ("sse4.2");
}
#else
uint32_t dt_crc32c_hw (uint32_t crc, const void *buf, size_t len)
{
    return dt_crc32c_sw (crc, buf, len);
}

bool dt_crc32c_hw_available (void)
{
    return false;
}
#endif

uint32_t dt_crc32c (uint32_t crc, const void *buf, size_t len)
{
    /* Decided once; a benign race (every thread computes the same value). */
    static int hw = -1;
    if (hw < 0)
        hw = dt_crc32c_hw_available () ? 1 : 0;
    return hw ? dt_crc32c_hw (crc, buf, len) : dt_crc32c_sw (crc, buf, len);
}
