/* dtclient_crc.c: the CRC32C that checkpoint shards are reported with,
 * exported by libdtclient so that trainers in other languages (the Python
 * module, through ctypes) checksum their shards exactly as dttrain does,
 * with the hardware instruction where there is one.  The implementation is
 * common/crc32c.c, compiled into this library (libdtclient links nothing
 * of libdt); only dtclient_crc32c is exported. */
#include "common/crc32c.c"

#include "agent/client/dtclient.h"

uint32_t dtclient_crc32c (uint32_t crc, const void *buf, size_t len)
{
    return dt_crc32c (crc, buf, len);
}
