/* userfs.h: file system work of dtctld on paths a job's user can influence.
 *
 * dtctld runs as root; its users' trainer code is untrusted.  Checkpoint
 * directories, manifests and the files named in a job's command belong to
 * the user, who can put symlinks, FIFOs or hard links in them.  Every such
 * operation goes through this module, which does it:
 *   - with the user's own rights: setfsuid/setfsgid and the user's
 *     supplementary groups, for the calling thread only (Linux credentials
 *     are per thread; the raw system calls leave other threads alone), so
 *     the worst a planted link can do is what the user could do anyway;
 *   - relative to a directory descriptor, with O_NOFOLLOW on the last
 *     component, O_EXCL when creating, unlinkat/renameat, and owner and
 *     type checks with fstat/fstatat(AT_SYMLINK_NOFOLLOW);
 *   - durably: a created entry's directory is fsync'd.
 * When dtctld is not root, or the user is root, no identity changes (the
 * daemon has no rights beyond its own), and the other rules still apply.
 *
 * Every function returns 0 (or a descriptor, or a pointer) on success and
 * -1 (NULL) with errno set and text in err otherwise. */
#ifndef DT_USERFS_H
#define DT_USERFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/errprintf.h"

#define USERFS_GROUPS_MAX 64

/* Whose rights: fill with userfs_id_init. */
struct userfs_id {
    uid_t uid;
    gid_t gid;
    int ngroups; /* supplementary groups, -1: unknown */
    gid_t groups[USERFS_GROUPS_MAX];
};

/* What userfs_enter changed, for userfs_leave. */
struct userfs_saved {
    bool switched;
    uid_t fsuid;
    gid_t fsgid;
    int ngroups;
    gid_t groups[USERFS_GROUPS_MAX];
};

/* Fill id for uid/gid, with the user's supplementary groups (getgrouplist;
 * only gid when the user is not in the passwd database). */
void userfs_id_init (struct userfs_id *id, uid_t uid, gid_t gid);

/* Switch the calling thread's file system identity to id (when the process
 * is root and id is not); userfs_leave restores it.  Keep the code between
 * the two short: no logging, no database. */
int userfs_enter (const struct userfs_id *id, struct userfs_saved *sv, dt_error_t *err);
void userfs_leave (struct userfs_saved *sv);

/* Create 'dir' (mkdir -p, mode 0755 for missing parents) and then
 * dir/name (mode 0700) as the user; fsync each parent of what was
 * created.  When 'dir' is exactly 'trusted' (the admin's CheckpointRoot),
 * root creates 'dir' and dir/name (O_NOFOLLOW, the existing dir must be
 * owned by the daemon) and gives dir/name to the user; an existing
 * dir/name must be a directory (not a link) owned by the user. */
int userfs_job_dir (const struct userfs_id *id, const char *dir, const char *name,
                    const char *trusted, dt_error_t *err);

/* mkdir dir/name as the user (an existing directory of the user's is
 * fine), then fsync dir. */
int userfs_mkdir (const struct userfs_id *id, const char *dir, const char *name,
                  mode_t mode, dt_error_t *err);

/* Write 'len' bytes to dir/name atomically as the user: a temporary
 * ".name.tmp" (a stale one, or a link of that name, is removed first;
 * created O_EXCL|O_NOFOLLOW), fsync, renameat over name, fsync dir. */
int userfs_write_atomic (const struct userfs_id *id, const char *dir, const char *name,
                         const void *data, size_t len, dt_error_t *err);

/* As the user: remove the entries of dir/name that are not directories
 * and for which want(entry) is true (want NULL: all), then the directory
 * itself if it is empty.  A dir/name that is a symbolic link is removed
 * itself (never followed).  A missing dir/name is not an error. */
int userfs_remove_dir (const struct userfs_id *id, const char *dir, const char *name,
                       bool (*want) (const char *entry), dt_error_t *err);

/* As the user: userfs_remove_dir (want NULL) of every entry of 'dir' whose
 * name pick(name) accepts. */
int userfs_remove_dirs (const struct userfs_id *id, const char *dir,
                        bool (*pick) (const char *name), dt_error_t *err);

/* As the user: renameat dir/from to dir/to (never through links: both are
 * entries of the one directory), then fsync dir. */
int userfs_rename (const struct userfs_id *id, const char *dir, const char *from,
                   const char *to, dt_error_t *err);

/* As the user: renameat from/name to to/name (both directories opened
 * O_NOFOLLOW; name is an entry of each), then fsync both. */
int userfs_move (const struct userfs_id *id, const char *from, const char *to,
                 const char *name, dt_error_t *err);

/* As the user: 1 if dir/name exists (lstat), 0 if not. */
int userfs_exists (const struct userfs_id *id, const char *dir, const char *name,
                   dt_error_t *err);

/* Open 'path' for reading as the user: symbolic links in it are resolved
 * first (with the user's rights), then the file itself is opened
 * O_NOFOLLOW|O_NONBLOCK (a FIFO or device never blocks) and must be a
 * regular file.  Returns the descriptor (caller closes) and its stat. */
int userfs_open_regular (const struct userfs_id *id, const char *path, struct stat *sb,
                         dt_error_t *err);

/* Read all of 'path' (at most 'max' bytes; larger is EFBIG) as the user
 * with userfs_open_regular.  Returns a new NUL-terminated buffer (caller
 * frees) and its length in *len (may be NULL). */
char *userfs_read_file (const struct userfs_id *id, const char *path, size_t max,
                        size_t *len, dt_error_t *err);

#endif /* DT_USERFS_H */
