/* rundir.h: the agent's private run directory (rank logs, pages, socket).
 *
 * Another user of the node must not be able to guess it, pre-create it, or
 * plant a symbolic link in it.  It is made with mkdtemp (a fresh name, mode
 * 0700, owned by the agent's uid, which is the job's user) in a base
 * directory that is checked first: a directory owned by this uid or root,
 * and, if others may write to it, with the sticky bit (as /tmp).  The
 * trainer socket lives inside it; where that path is too long for a Unix
 * socket address, in a second private directory of the same kind under
 * $TMPDIR or /tmp -- never an abstract socket, which has no permissions.
 *
 * Error convention: 0 / -1 with errno set and err->text saying why.
 */
#ifndef DT_AGENT_RUNDIR_H
#define DT_AGENT_RUNDIR_H

#include <stddef.h>
#include "common/errprintf.h"

/* Check 'base' as above (stat follows a symbolic link in the base itself,
 * an admin's or the user's own choice; what matters is the directory it
 * names). */
int rundir_check_base (const char *base, dt_error_t *err);

/* A new private directory "<base>/<prefix>-XXXXXX"; returns it (caller
 * must free) or NULL. */
char *rundir_make (const char *base, const char *prefix, dt_error_t *err);

/* The socket path for 'name' in 'rundir'; when too long for sun_path, a
 * private directory under $TMPDIR or /tmp is made for it and returned in
 * *sockdir (caller frees and removes it), else *sockdir is NULL.  Returns
 * the path (caller must free) or NULL. */
char *rundir_socket_path (const char *rundir, const char *name, char **sockdir,
                          dt_error_t *err);

#endif /* DT_AGENT_RUNDIR_H */
