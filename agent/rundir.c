/* rundir.c: the agent's private run directory (see rundir.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rundir.h"

int rundir_check_base (const char *base, dt_error_t *err)
{
    struct stat st;
    if (stat (base, &st) < 0)
        return errnoprintf (err, errno, "run directory base %s: %s", base,
                            strerror (errno));
    if (!S_ISDIR (st.st_mode))
        return errnoprintf (err, ENOTDIR, "run directory base %s: not a directory", base);
    if (st.st_uid != geteuid () && st.st_uid != 0)
        return errnoprintf (err, EPERM,
                            "run directory base %s: owned by uid %ld, not by "
                            "this user (uid %ld) or root: refused",
                            base, (long)st.st_uid, (long)geteuid ());
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        return errnoprintf (err, EPERM,
                            "run directory base %s: writable by others without "
                            "the sticky bit (mode %04o): refused",
                            base, (unsigned)(st.st_mode & 07777));
    return 0;
}

char *rundir_make (const char *base, const char *prefix, dt_error_t *err)
{
    char *dir = NULL;
    struct stat st;
    if (rundir_check_base (base, err) < 0)
        return NULL;
    if (asprintf (&dir, "%s/%s-XXXXXX", base, prefix) < 0) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (!mkdtemp (dir)) {
        errnoprintf (err, errno, "mkdtemp %s: %s", dir, strerror (errno));
        free (dir);
        return NULL;
    }
    /* mkdtemp made it 0700 and ours; check anyway, without following a link. */
    if (lstat (dir, &st) < 0 || !S_ISDIR (st.st_mode) || st.st_uid != geteuid () ||
        (st.st_mode & 077)) {
        errnoprintf (err, EPERM, "run directory %s: not a private directory of this user",
                     dir);
        free (dir);
        return NULL;
    }
    return dir;
}

char *rundir_socket_path (const char *rundir, const char *name, char **sockdir,
                          dt_error_t *err)
{
    struct sockaddr_un sun;
    char *path = NULL;
    *sockdir = NULL;
    if (asprintf (&path, "%s/agent-%s.sock", rundir, name) < 0)
        goto nomem;
    if (strlen (path) < sizeof (sun.sun_path))
        return path;
    free (path);
    const char *tmp = getenv ("TMPDIR");
    if (!tmp || tmp[0] != '/' || rundir_check_base (tmp, err) < 0)
        tmp = "/tmp";
    if (!(*sockdir = rundir_make (tmp, "dtagent", err)))
        return NULL;
    if (asprintf (&path, "%s/agent.sock", *sockdir) < 0)
        goto nomem;
    if (strlen (path) >= sizeof (sun.sun_path)) {
        errnoprintf (err, ENAMETOOLONG, "socket path %s is too long", path);
        free (path);
        rmdir (*sockdir);
        free (*sockdir);
        *sockdir = NULL;
        return NULL;
    }
    return path;
nomem:
    errnoprintf (err, ENOMEM, "out of memory");
    return NULL;
}
