/* ckpt_table.h: the named tensor table of a checkpoint shard (format version 2).
 *
 * A shard holds the slice [lo, hi) of the flat parameter vector and of both
 * AdamW moments.  The table says what that slice is, by name: one entry per
 * (kind, model tensor) that intersects the slice, with the tensor's global
 * shape, the range of its row-major elements held here and where they are
 * in the file.  A loader that places data by these names does not depend
 * on the flat order or on how the vector was cut into shards, which is
 * what resharding between tensor- and pipeline-parallel layouts needs: a
 * rank that owns some tensors (or a block of rows of one) reads exactly
 * those entries from whichever shards hold them. */
#ifndef DT_TRAINER_CKPT_TABLE_H
#define DT_TRAINER_CKPT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"
#include "trainer/model.h"

/* The three kinds of state, in the order of the shard's slices. */
#define CKPT_KINDS 3
extern const char *const ckpt_kind_names[CKPT_KINDS]; /* params, adam_m, adam_v */

/* One entry, 216 bytes, little-endian on disk (as the rest of the shard).
 * Version 3 adds the block (vdim ...): the slice of the tensor the
 * writing rank held under its layout (trainer/layout.h), the block
 * boff .. boff + bext of the row-major view vshape of the whole tensor;
 * first and count index the block's own row-major elements.  vdim 0 (and
 * every version 2 entry): the block is the whole tensor. */
struct ckpt_named {
    char name[48];         /* "<kind>/<tensor>", e.g. "adam_m/h0.attn.wqkv" */
    uint32_t ndim;         /* 1 or 2 (up to 4) */
    uint32_t dtype;        /* 0: float32 */
    uint64_t shape[4];     /* the tensor's global shape (unused dims 0) */
    uint64_t first, count; /* the block's row-major elements [first, first + count) */
    uint64_t offset;       /* file offset of element 'first' */
    uint32_t vdim;         /* version 3: the block (0: the whole tensor) */
    uint32_t flags;        /* CKPT_NAMED_REPLICA */
    uint64_t vshape[4], boff[4], bext[4];
};

/* The entry is a copy of a replicated tensor that another shard of the
 * same checkpoint also holds (tp ranks other than 0): loaders skip it, so
 * that every element comes from exactly one shard. */
#define CKPT_NAMED_REPLICA 1u

/* A version 2 entry (112 bytes): the fields up to offset. */
#define CKPT_NAMED_V2_BYTES 112

/* Fill out (when non-NULL) with the entries for the slice [lo, hi) of a
 * flat vector laid out as t[0..nt), the three kinds' slices starting at
 * file offsets koff[kind].  Returns the number of entries. */
size_t ckpt_table_build (const struct model_tensor *t, int nt, uint64_t lo, uint64_t hi,
                         const size_t koff[CKPT_KINDS], struct ckpt_named *out);

/* Place the entries' data by name: for each entry, find the model tensor
 * of that name in t[0..nt), check its shape, and copy its elements from
 * slice[kind] (the shard's slices as read, starting at file offsets
 * koff[kind]) into out[kind] + tensor offset + first.  The entries must
 * lie inside the slices (n_slice floats each) and cover them.  0, or -1
 * with err (errno EINVAL: a name or shape this model lacks; EBADMSG: a
 * malformed entry, or a table that leaves part of a slice unnamed) naming
 * the shard (path) and the tensor. */
int ckpt_table_place (const char *path, const struct ckpt_named *e, size_t ne,
                      const struct model_tensor *t, int nt, const size_t koff[CKPT_KINDS],
                      const float *const slice[CKPT_KINDS], size_t n_slice,
                      float *const out[CKPT_KINDS], dt_error_t *err);

/* ckpt_table_place between layouts: an entry's block and the model
 * tensor's (t[i].vdim ...) may be any slices of the tensor; the elements
 * of the entry that lie in the model's slice are copied, the others
 * skipped.  cover (NULL: none) counts, per element of the model's flat
 * vector, how many entries placed it (params only; the moments follow
 * the same entries), for the caller's check that every element comes
 * from exactly one shard.  all[0..nall) (NULL: none): the whole model's
 * tensors; an entry of one of them that t lacks (another pipeline
 * stage's) is skipped after its shape is checked against it. */
int ckpt_table_place_cover (const char *path, const struct ckpt_named *e, size_t ne,
                            const struct model_tensor *t, int nt,
                            const struct model_tensor *all, int nall,
                            const size_t koff[CKPT_KINDS],
                            const float *const slice[CKPT_KINDS], size_t n_slice,
                            float *const out[CKPT_KINDS], uint8_t *cover,
                            dt_error_t *err);

/* Whether any entry (not a replica) may hold elements of the layout
 * t[0..nt): a tensor of the same name whose slice may meet the entry's
 * block (when both are blocks of the same view, their boxes must meet;
 * otherwise assumed). */
int ckpt_table_needed (const struct ckpt_named *e, size_t ne,
                       const struct model_tensor *t, int nt);

/* After placing every shard with ckpt_table_place_cover: every element
 * of the layout mt placed exactly once (cover: the count per element).
 * 0, or -1 with err (EBADMSG) naming the tensor and the count. */
int ckpt_table_check_cover (const char *stepdir, const uint8_t *cover,
                            const struct model_tensor *mt, int nmt, dt_error_t *err);

/* Shards without a table (placed by flat offset): their slices [lo, hi)
 * of the flat vector (rank: the shard's) must tile [0, nparams) exactly.
 * Sorts s.  0, or -1 with err (EBADMSG) naming the gap or overlap. */
struct ckpt_slice {
    uint64_t lo, hi;
    uint32_t rank;
};
int ckpt_slices_tile (const char *stepdir, struct ckpt_slice *s, size_t n,
                      uint64_t nparams, dt_error_t *err);

#endif
