/* data.h: the training text, memory-mapped read-only, and the sampling of windows.
 *
 * Sampling is a pure function of (seed, step, sample index): the global
 * batch of a step is the same whatever the world size, and a resumed run
 * draws the same windows as an uninterrupted one (no hidden RNG state). */
#ifndef DT_TRAINER_DATA_H
#define DT_TRAINER_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

struct data {
    const uint8_t *bytes;
    size_t len;
    size_t train_len; /* [0, train_len) trains, the tail validates */
    size_t val_len;
    int context;
    uint32_t crc; /* CRC32C of the whole file */
};

/* Map path; hold out val_frac of the tail.  Needs at least context + 2
 * training bytes.  0 or -1 with err naming the file. */
int data_open (struct data *d, const char *path, int context, double val_frac,
               dt_error_t *err);
void data_close (struct data *d);

/* splitmix64 finaliser, the counter-based hash behind all randomness. */
uint64_t data_hash (uint64_t x);

/* Start offset of training window i of step 'step' (context + 1 bytes:
 * context, then the target byte). */
size_t data_train_pos (const struct data *d, uint64_t seed, int64_t step, int64_t i);

/* Start offset of validation window k of n (evenly spaced over the tail),
 * or (size_t)-1 when the tail is shorter than a window. */
size_t data_val_pos (const struct data *d, int64_t k, int64_t n);

/* Copy window at pos: ctx[context] and *tgt. */
void data_window (const struct data *d, size_t pos, uint8_t *ctx, uint8_t *tgt);

#endif
