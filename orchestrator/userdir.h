/* userdir.h: the per-user directories where a job's processes, acting as
 * the job's user, write their output (dtctld.conf UserDir).
 *
 * UserDir is a root-owned directory, mode 0711, that is not the StateDir
 * (which is root's alone): it holds one directory per user, named by the
 * decimal uid, owned by that user and mode 0700.  Slurm's slurmstepd opens
 * the batch and per-node output files there as the job's user; the local
 * launcher's agents keep their run directories there.  Under Slurm it must
 * be on a file system the nodes share with the controller.
 *
 * The controller creates these directories with root's rights, so every
 * step is done relative to a directory descriptor, without following
 * symbolic links, and checks owners with fstat: a user can never make root
 * create, chown or chmod anything outside UserDir/<uid>.
 *
 * Error convention: 0 / -1 with errno set and err->text saying why.
 */
#ifndef DT_USERDIR_H
#define DT_USERDIR_H

#include <stddef.h>
#include <sys/types.h>
#include "common/errprintf.h"

/* Create 'root' (and its missing parents, mode 0755) if missing, and check
 * it: a directory, not a symbolic link, owned by the daemon's uid, writable
 * by no one else.  A root that was there with a looser mode is refused
 * rather than changed (an admin's directory: the error says what to fix). */
int userdir_setup (const char *root, dt_error_t *err);

/* The directory of 'uid' under 'root': created (mode 0700, owner
 * uid:gid) when missing, checked when present (a directory owned by uid;
 * one left owned by the daemon, from a crash between mkdir and chown, is
 * handed over).  Writes its path to out[size]. */
int userdir_get (const char *root, uid_t uid, gid_t gid, char *out, size_t size,
                 dt_error_t *err);

/* Check a program every user's jobs run (the dtagent binary): the file and
 * every directory above it (symbolic links resolved) owned by root or the
 * daemon's uid, and none writable by group or others (a directory with the
 * sticky bit excepted): otherwise one user could replace what the others
 * run as themselves.  The file must be executable by others. */
int userdir_check_program (const char *path, dt_error_t *err);

#endif /* DT_USERDIR_H */
