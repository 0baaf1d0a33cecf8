/* crc32c.h: CRC32C (Castagnoli), as used by checkpoint shards.
 *
 * Uses the SSE4.2 crc32 instruction where the CPU has it, a table-driven
 * portable version otherwise; both give the same results. */
#ifndef DT_CRC32C_H
#define DT_CRC32C_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

/* Extend 'crc' (0 to start) over buf[0..len).  dt_crc32c(0, "123456789", 9)
 * == 0xE3069283. */
uint32_t dt_crc32c (uint32_t crc, const void *buf, size_t len);

/* The two implementations, exposed for tests and benchmarks. */
uint32_t dt_crc32c_sw (uint32_t crc, const void *buf, size_t len);
uint32_t dt_crc32c_hw (uint32_t crc, const void *buf,
                       size_t len); /* only if dt_crc32c_hw_available() */
bool dt_crc32c_hw_available (void);

#endif
