/* ckptpath.h: the checkpoint paths dtctl assigns, and the check of the
 * paths that trainers report.
 *
 * A job's checkpoints live in <dir>/<job> (dir: the spec's checkpoint.dir):
 *   step-<S>/rank-<R>.ckpt       rank R's shard of step S
 *   step-<S>/manifest.json       written by the controller at the commit
 *   jit-<S>-r<W>/rank-<K>.ckpt   a just-in-time set: rank W wrote every K
 *   .partial-step-<S>-a<A>       a partial step-<S> set aside (attempt A)
 * The controller removes and renames these on behalf of the job's user, so
 * it accepts a reported shard only when its path is exactly the one dtctl
 * assigned; these functions are pure (no file system access). */
#ifndef DT_CKPTPATH_H
#define DT_CKPTPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

/* The name of each kind of entry of a job's checkpoint directory. */
enum ckptpath_kind {
    CKPTPATH_OTHER = 0, /* not one of ours: never touched */
    CKPTPATH_STEP,      /* step-<S> */
    CKPTPATH_JIT,       /* jit-<S>-r<W> */
    CKPTPATH_PARTIAL,   /* .partial-step-<S>-a<A> */
};

/* The path rank 'rank' must report for its shard of 'step' into buf: a
 * regular shard (jit false) or a just-in-time one that 'rank' wrote for
 * 'shard_rank' (jit true).  'jobdir' is <dir>/<job>.  Returns 0, or -1
 * (ENAMETOOLONG) when it does not fit in len. */
int ckptpath_shard (char *buf, size_t len, const char *jobdir, int64_t step, int rank,
                    bool jit, int shard_rank);

/* Check a reported shard path against the one dtctl assigned (above), and
 * the job directory itself (absolute, no empty, "." or ".." components).
 * Returns 0 if 'path' is exactly it; else -1 with errno EINVAL and err
 * naming the refused path (cut to fit) and the expected one. */
int ckptpath_check_shard (const char *jobdir, int64_t step, int rank, bool jit,
                          int shard_rank, const char *path, dt_error_t *err);

/* Which kind of checkpoint-directory entry 'name' (one path component) is,
 * by its exact form (decimal numbers without sign or leading zeros). */
enum ckptpath_kind ckptpath_classify (const char *name);

/* True if 'name' is a file dtctl or dttrain put in a step or just-in-time
 * directory: rank-<R>.ckpt, manifest.json, or a temporary of either
 * (.rank-<R>.ckpt.tmp and the like: a leading '.' and a ".tmp" ending). */
bool ckptpath_is_ckpt_file (const char *name);

/* True if 'p' is an absolute path whose components are all non-empty and
 * neither "." nor ".." (so string comparison of paths is meaningful). */
bool ckptpath_is_normal (const char *p);

#endif /* DT_CKPTPATH_H */
