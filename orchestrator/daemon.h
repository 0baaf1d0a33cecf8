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

/* Write our pid to 'path' (refusing if another live dtctld holds it). */
int daemon_pidfile_write (const char *path, dt_error_t *err);
void daemon_pidfile_remove (const char *path);

#endif
