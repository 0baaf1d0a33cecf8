/* sha256.h: SHA-256 of a buffer, for checkpoint manifests (FIPS 180-4). */
#ifndef DT_SHA256_H
#define DT_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Incremental hashing: init, update any number of times, final. */
struct sha256_ctx {
    uint32_t h[8];
    unsigned char buf[64];
    size_t n;     /* bytes in buf */
    uint64_t len; /* bytes hashed so far */
};

void sha256_init (struct sha256_ctx *c);
void sha256_update (struct sha256_ctx *c, const void *data, size_t len);
/* Hex digest (64 chars + NUL) into out; c is spent. */
void sha256_final_hex (struct sha256_ctx *c, char out[65]);

/* Hex digest (64 chars + NUL) of buf[0..len) into out. */
void sha256_hex (const void *buf, size_t len, char out[65]);

#endif
