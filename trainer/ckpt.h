/* ckpt.h: checkpoint shards - asynchronous writer and loader.
 *
 * Layout (man/dttrain.1.in, --checkpoint-dir): <dir>/step-<S>/rank-<R>.ckpt, where dir
 * already names the job.  A shard holds this rank's slice [lo, hi) of the
 * flat parameter vector and of both AdamW moments (the same balanced
 * partition as ZeRO-1), so dp and zero1 write the same files and a resume
 * on any world size regathers the full state from all shards.
 *
 * File: a fixed header (magic, version, job, step, rank, world size,
 * parallel layout, slice, seed, data cursor, header CRC32C), a table of
 * parts (name, offset, count, CRC32C each), the config text, the three
 * slices (params, adam_m, adam_v) and, from version 2, the named tensor
 * table (ckpt_table.h: each model tensor's name, global shape and the
 * range of it this shard holds, per kind), which the loader uses to place
 * the data by name; from version 3, the table also says which block of
 * each tensor the writer held under its tensor-parallel layout, so a
 * checkpoint resumes in any other layout (every rank takes from every
 * shard the parts of its own slices).  Version 1 shards (no table) load
 * by flat offset.
 * Written to a temporary name, fsync'd, renamed, directory fsync'd.
 *
 * Writing: the snapshot is the file's image in one block-aligned buffer,
 * written with O_DIRECT in large pieces (buffered where the file system
 * refuses O_DIRECT).  Periodic checkpoints copy on the writer thread,
 * while the step loop runs the next forward and backward pass: the state
 * only changes in the optimizer update, which waits for the copy first
 * (ckpt_snapshot_wait); the CRC32Cs and the write come after the copy.
 */
#ifndef DT_TRAINER_CKPT_H
#define DT_TRAINER_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "agent/client/dtclient.h"
#include "common/errprintf.h"
#include "kernels/kernels.h"

struct model_tensor;

/* The layout in a shard header's (and ckpt_meta's) parallel field: the
 * optimizer mode (0 dp, 1 zero1) in bits 0-7, tp - 1 in bits 8-19 and
 * pp - 1 in bits 20-31, so one-rank-layout shards read as before. */
#define CKPT_PARALLEL(mode, tp, pp)                                                      \
    ((int)((unsigned)(mode) | (unsigned)((tp)-1) << 8 | (unsigned)((pp)-1) << 20))
#define CKPT_PAR_MODE(p) ((int)((unsigned)(p)&0xff))
#define CKPT_PAR_TP(p) ((int)(((unsigned)(p) >> 8) & 0xfff) + 1)
#define CKPT_PAR_PP(p) ((int)(((unsigned)(p) >> 20) & 0xfff) + 1)

struct ckpt_meta {
    const char *root; /* checkpoint dir (job included) */
    const char *job;
    int64_t step;
    int rank, world, parallel;
    uint64_t nparams, lo, hi;
    uint64_t seed, data_cursor;
    const char *config;                 /* borrowed; copied by the writer */
    const struct model_tensor *tensors; /* the layout (borrowed, must outlive
                                         * the write); NULL: an empty table */
    int ntensors;
};

struct ckpt_done {
    int64_t step; /* 0: none yet */
    uint64_t bytes;
    uint32_t crc;      /* CRC32C of the whole file */
    double snapshot_s; /* copy into the image + CRC32Cs */
    double write_s;    /* open to directory fsync'd */
    int failed;
    char path[1024];
    char error[160];
};

struct ckpt_writer;

/* New writer; client may be the no-op client (borrowed). */
struct ckpt_writer *ckpt_writer_create (dtclient_t *client);
/* Waits for a write in progress, then frees. */
void ckpt_writer_destroy (struct ckpt_writer *w);

/* Start a checkpoint of the params/m/v slices (backend memory, hi - lo
 * floats each; borrowed until the snapshot is taken): the writer thread
 * copies them into its host image and writes the shard.  The caller must
 * not change them before ckpt_snapshot_wait (or ckpt_wait) returns.  A
 * device backend's copy runs here, on the calling thread (the thread that
 * owns the device).  A write still in progress is waited for first (never
 * two writers).  *stall_s: time this call blocked the step loop.  0 or -1;
 * a copy that fails on the thread fails the shard (ckpt_last_done). */
int ckpt_save_async (struct ckpt_writer *w, struct dt_kern_ops *k,
                     const struct ckpt_meta *meta, const float *params, const float *m,
                     const float *v, double *stall_s, dt_error_t *err);

/* Block until the snapshot of the last ckpt_save_async is taken, so its
 * sources may change.  *stall_s: the time blocked.  1 the first time after
 * a ckpt_save_async, else 0 (nothing to wait for). */
int ckpt_snapshot_wait (struct ckpt_writer *w, double *stall_s);

/* Wait for the write in progress, if any (the snapshot included). */
void ckpt_wait (struct ckpt_writer *w);

/* The last finished write (thread-safe snapshot). */
void ckpt_last_done (struct ckpt_writer *w, struct ckpt_done *out);

/* Just-in-time checkpoint: write every shard of meta->rank's dp group
 * from its whole (tp, pp) slice of the state (params, m, v: host arrays
 * of nparams floats each, the non-zero1 state every replica holds) into
 * 'dir' (created), synchronously: with T = tp pp (meta->parallel) and
 * dp = world / T, the ranks K = rank mod T + j T for j < dp, shard K
 * holding the balanced slice [n j / dp, n (j+1) / dp) exactly as rank K
 * would have written it (in plain dp: every shard 0..world-1).  Each
 * shard is read back and its CRC32C checked before it counts.  meta->lo
 * and hi are ignored.  Calls cb (arg, K, done) after each verified shard.
 * 0 or -1 with err (the shards already reported stay). */
typedef void (*ckpt_jit_f) (void *arg, int shard_rank, const struct ckpt_done *d);
int ckpt_save_jit (const struct ckpt_meta *meta, const char *dir, const float *params,
                   const float *m, const float *v, ckpt_jit_f cb, void *arg,
                   dt_error_t *err);

/* Write <root>/step-<S>/manifest.json atomically (standalone commit);
 * parallel as CKPT_PARALLEL: the manifest records the layout (tp, pp, dp
 * and the optimizer mode). */
int ckpt_write_manifest (const char *root, const char *job, int64_t step, int world,
                         int parallel, const uint64_t *bytes, const uint32_t *crc,
                         dt_error_t *err);

/* Resolve the step directory to resume from: dir itself when it holds
 * rank-0.ckpt, else the highest step-<S> under it that has manifest.json.
 * 0, 1 when nothing to resume from, -1 on error. */
int ckpt_find (const char *dir, char *stepdir, size_t len, dt_error_t *err);

/* Load every shard of stepdir into full host arrays (nparams floats each).
 * Verifies magic, header and tensor CRC32Cs (errno EBADMSG, err names the
 * shard) and the config (errno EINVAL, err names the field).  Fills step,
 * the saved world size and parallel layout. */
int ckpt_load (const char *stepdir, const char *config, uint64_t nparams, float *params,
               float *m, float *v, int64_t *step, int *world, int *parallel,
               dt_error_t *err);

/* ckpt_load, placing version 2 shards' data by the names in their tensor
 * tables into the layout mt[0..nmt) (a name or shape this layout lacks is
 * errno EINVAL, naming the tensor). */
int ckpt_load_named (const char *stepdir, const char *config,
                     const struct model_tensor *mt, int nmt, uint64_t nparams,
                     float *params, float *m, float *v, int64_t *step, int *world,
                     int *parallel, dt_error_t *err);

/* The config text of one shard (header checked), new string the caller
 * frees, or NULL with err (errno EBADMSG). */
char *ckpt_shard_config (const char *path, dt_error_t *err);
/* ckpt_load_named into a rank's part of a layout (mt: its tensors, or
 * slices of them, trainer/layout.h), the whole model's tensors being
 * all[0..nall) (NULL: mt): a tensor of the whole model that this rank
 * does not hold (another pipeline stage's) is skipped, one of neither is
 * errno EINVAL.  Every element of mt must come from exactly one shard. */
int ckpt_load_layout (const char *stepdir, const char *config,
                      const struct model_tensor *mt, int nmt,
                      const struct model_tensor *all, int nall, uint64_t nparams,
                      float *params, float *m, float *v, int64_t *step, int *world,
                      int *parallel, dt_error_t *err);

#endif
