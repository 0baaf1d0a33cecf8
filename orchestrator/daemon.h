/* daemon.h: becoming a daemon without losing startup errors (munge's
 * daemonpipe), and the PID file. */
#ifndef DT_DAEMON_H
#define DT_DAEMON_H

#include "common/errprintf.h"

/* Fork into the background.  The original process waits on a pipe until
 * the daemon calls daemon_ready() (it then exits 0) or daemon_fail() (it
 * prints the message to stderr and exits 1).  Returns 0 in the daemon,
 * -1 with err if the fork itself failed. */
int daemon_start (dt_error_t *err);

/* Tell the waiting parent that startup succeeded / failed.  No-ops when
 * not daemonized or already told. */
void daemon_ready (void);
void daemon_fail (const char *msg);

/* The state directory: created 0700 if missing; refused (-1, err) when it
 * is not a directory owned by this process's user (a symbolic link
 * included); made 0700 (with a warning) when group or others could enter
 * it.  It holds the database (agent tokens, every job's spec). */
int daemon_state_dir (const char *path, dt_error_t *err);

/* A private file ('path', and SQLite's path-wal and path-shm): those that
 * exist and are open to group or others are made 0600, with a warning;
 * refused (-1, err) when owned by another user. */
int daemon_private_file (const char *path, dt_error_t *err);

/* A directory other users must traverse (CheckpointRoot): created 0755 if
 * missing (the daemon's umask is 077). */
int daemon_shared_dir (const char *path, dt_error_t *err);

/* Write our pid to 'path' (refusing if another live dtctld holds it). */
int daemon_pidfile_write (const char *path, dt_error_t *err);
void daemon_pidfile_remove (const char *path);

#endif
