/* childexec.h: what a forked child does before it execs code that is not
 * the daemon's own (a job's agent, a trainer): nothing of the parent's
 * descriptors goes with it, and no controlling terminal.  Both are safe
 * between fork and exec (no allocation). */
#ifndef DT_CHILDEXEC_H
#define DT_CHILDEXEC_H

/* Close every descriptor from lowfd up. */
void dt_child_close_from (int lowfd);

/* Give up the controlling terminal, if any, without leaving the process
 * group (TIOCNOTTY): /dev/tty can no longer be opened, by this process or
 * its children. */
void dt_child_drop_tty (void);

#endif
