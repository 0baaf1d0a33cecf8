/* fsutil.h: small file-system helpers shared by dtctld, dtagent and
 * dttrain: paths that refuse to truncate, mkdir -p, and the atomic write
 * of a small file (temporary, fsync, rename, directory fsync).
 *
 * All return 0 on success, -1 with errno set on failure.
 */
#ifndef DT_FSUTIL_H
#define DT_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>
#include "common/errprintf.h"

/* snprintf for paths: a path that does not fit is an error
 * (ENAMETOOLONG), never a silently different, truncated file name. */
int dt_pathf (char *buf, size_t len, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

/* mkdir -p: create 'path' and its missing parents with 'mode'; existing
 * directories are fine; the parent of each directory it creates is fsync'd, so
 * that the new entry survives a crash.  ENAMETOOLONG if the path is over
 * PATH_MAX. */
int dt_mkdir_p (const char *path, mode_t mode);

/* fsync a directory, so that a rename or a new entry in it is durable. */
int dt_fsync_dir (const char *dir);

/* Write 'len' bytes of 'data' to dir/name atomically: into a temporary
 * file dir/.name.tmp, fsync, rename over dir/name, fsync dir.  A crash
 * leaves either the old file or the new one, never a part.  On failure
 * the temporary file is removed and err names the path. */
int dt_write_atomic (const char *dir, const char *name, const void *data, size_t len,
                     dt_error_t *err);

#endif
