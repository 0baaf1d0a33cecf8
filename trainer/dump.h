/* dump.h: --dump-tensors - named tensors for oracle tests (PyTorch reads them).
 *
 * DIR/tensors.txt: one line per tensor, "name offset count decay ndim d0 [d1]"
 * (offset and count in floats of the flat vector; decay 1: AdamW's weight
 * decay applies); DIR/<file>.f32: the
 * flat vector, raw little-endian float32. */
#ifndef DT_TRAINER_DUMP_H
#define DT_TRAINER_DUMP_H

#include "common/errprintf.h"
#include "trainer/model.h"

/* Create dir (one level) and write the tensor table.  0 or -1 with err. */
int dump_table (const struct model *m, const char *dir, dt_error_t *err);

/* Write the backend vector vec (m->nparams floats) to dir/file.  0 or -1. */
int dump_vector (const struct model *m, const char *dir, const char *file,
                 const float *vec, dt_error_t *err);

/* Write a line of text to dir/file.  0 or -1. */
int dump_text (const char *dir, const char *file, const char *text, dt_error_t *err);

#endif
