/* sha256.h: SHA-256 of a buffer, for checkpoint manifests (FIPS 180-4). */
#ifndef DT_SHA256_H
#define DT_SHA256_H

#include <stddef.h>

/* Hex digest (64 chars + NUL) of buf[0..len) into out. */
void sha256_hex (const void *buf, size_t len, char out[65]);

#endif
