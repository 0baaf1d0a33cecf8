/* userdir.c: the per-user output directories under UserDir (see userdir.h). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/userdir.h"

/* The root is traversable by every user (each reaches only its own
 * directory, which is 0700); its entries' names are not listable. */
static const mode_t userdir_root_mode = 0711;

/* Check an open directory: owned by the daemon, writable by no one else. */
static int check_root (int fd, const char *root, dt_error_t *err)
{
    struct stat st;
    if (fstat (fd, &st) < 0)
        return errnoprintf (err, errno, "UserDir %s: %s", root, strerror (errno));
    if (!S_ISDIR (st.st_mode))
        return errnoprintf (err, ENOTDIR, "UserDir %s: not a directory", root);
    if (st.st_uid != geteuid ())
        return errnoprintf (err, EPERM,
                            "UserDir %s: owned by uid %ld, not by dtctld's uid %ld", root,
                            (long)st.st_uid, (long)geteuid ());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return errnoprintf (err, EPERM,
                            "UserDir %s: writable by group or others (mode %04o); "
                            "make it %04o",
                            root, (unsigned)(st.st_mode & 07777),
                            (unsigned)userdir_root_mode);
    return 0;
}

/* Open 'root' as a directory, refusing a symbolic link as its last part. */
static int open_root (const char *root, dt_error_t *err)
{
    struct stat st;
    int fd = open (root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        bool link = lstat (root, &st) == 0 && S_ISLNK (st.st_mode);
        return errnoprintf (err, e, "UserDir %s: %s", root,
                            link ? "a symbolic link" : strerror (e));
    }
    if (check_root (fd, root, err) < 0) {
        close (fd);
        return -1;
    }
    return fd;
}

int userdir_setup (const char *root, dt_error_t *err)
{
    char buf[PATH_MAX];
    if (!root || root[0] != '/')
        return errnoprintf (err, EINVAL, "UserDir: must be an absolute path");
    if (snprintf (buf, sizeof (buf), "%s", root) >= (int)sizeof (buf))
        return errnoprintf (err, ENAMETOOLONG, "UserDir: path too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        /* A parent made here is 0755 whatever dtctld's umask (077): the
         * users must reach their directories below it. */
        if (mkdir (buf, 0755) == 0) {
            if (chmod (buf, 0755) < 0)
                return errnoprintf (err, errno, "UserDir: chmod %s: %s", buf,
                                    strerror (errno));
        }
        else if (errno != EEXIST)
            return errnoprintf (err, errno, "UserDir: mkdir %s: %s", buf,
                                strerror (errno));
        *p = '/';
    }
    if (mkdir (buf, userdir_root_mode) == 0) {
        /* mkdir applies the umask: set the mode the users need. */
        if (chmod (buf, userdir_root_mode) < 0)
            return errnoprintf (err, errno, "UserDir: chmod %s: %s", buf,
                                strerror (errno));
    }
    else if (errno != EEXIST)
        return errnoprintf (err, errno, "UserDir: mkdir %s: %s", buf, strerror (errno));
    int fd = open_root (root, err);
    if (fd < 0)
        return -1;
    close (fd);
    return 0;
}

int userdir_get (const char *root, uid_t uid, gid_t gid, char *out, size_t size,
                 dt_error_t *err)
{
    char name[32];
    struct stat st;
    int rfd, fd = -1, rc = -1;

    snprintf (name, sizeof (name), "%ld", (long)uid);
    if ((size_t)snprintf (out, size, "%s/%s", root, name) >= size)
        return errnoprintf (err, ENAMETOOLONG, "UserDir: path too long");
    if ((rfd = open_root (root, err)) < 0)
        return -1;
    if (mkdirat (rfd, name, 0700) < 0 && errno != EEXIST) {
        errnoprintf (err, errno, "%s: mkdir: %s", out, strerror (errno));
        goto done;
    }
    /* Whatever is there now: never a symbolic link, always a directory. */
    if (fstatat (rfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        errnoprintf (err, errno, "%s: %s", out, strerror (errno));
        goto done;
    }
    if (!S_ISDIR (st.st_mode)) {
        errnoprintf (err, ENOTDIR, "%s: %s", out,
                     S_ISLNK (st.st_mode) ? "a symbolic link, not a directory"
                                          : "not a directory");
        goto done;
    }
    if ((fd = openat (rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        errnoprintf (err, errno, "%s: %s", out, strerror (errno));
        goto done;
    }
    if (fstat (fd, &st) < 0) {
        errnoprintf (err, errno, "%s: %s", out, strerror (errno));
        goto done;
    }
    if (st.st_uid != uid && st.st_uid != geteuid ()) {
        errnoprintf (err, EPERM, "%s: owned by uid %ld, not by the job's uid %ld", out,
                     (long)st.st_uid, (long)uid);
        goto done;
    }
    if (st.st_uid != uid || st.st_gid != gid) {
        if (fchown (fd, uid, gid) < 0) {
            errnoprintf (err, errno, "%s: chown to %ld:%ld: %s", out, (long)uid,
                         (long)gid, strerror (errno));
            goto done;
        }
    }
    if ((st.st_mode & 07777) != 0700 && fchmod (fd, 0700) < 0) {
        errnoprintf (err, errno, "%s: chmod 0700: %s", out, strerror (errno));
        goto done;
    }
    rc = 0;
done:
    if (fd >= 0)
        close (fd);
    close (rfd);
    return rc;
}

/* One part of a program's path: trusted owner, not writable by others. */
static int check_trusted (const char *path, const char *what, dt_error_t *err)
{
    struct stat st;
    if (stat (path, &st) < 0)
        return errnoprintf (err, errno, "%s: %s", what, strerror (errno));
    if (st.st_uid != 0 && st.st_uid != geteuid ())
        return errnoprintf (err, EPERM,
                            "%s: %s is owned by uid %ld: any user's job would run "
                            "what that user puts there",
                            what, path, (long)st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
        !(S_ISDIR (st.st_mode) && (st.st_mode & S_ISVTX)))
        return errnoprintf (err, EPERM,
                            "%s: %s is writable by group or others (mode %04o)", what,
                            path, (unsigned)(st.st_mode & 07777));
    return 0;
}

int userdir_check_program (const char *path, dt_error_t *err)
{
    struct stat st;
    char *real = realpath (path, NULL);
    int rc = -1;
    if (!real)
        return errnoprintf (err, errno, "%s: %s", path, strerror (errno));
    if (stat (real, &st) < 0 || !S_ISREG (st.st_mode)) {
        errnoprintf (err, ENOEXEC, "%s: not a regular file", path);
        goto done;
    }
    if (!(st.st_mode & S_IXOTH)) {
        errnoprintf (err, EACCES,
                     "%s: not executable by others: users' jobs cannot run it", path);
        goto done;
    }
    if (check_trusted (real, path, err) < 0)
        goto done;
    for (char *p = strrchr (real, '/'); p; p = strrchr (real, '/')) {
        *p = '\0';
        if (check_trusted (p == real ? "/" : real, path, err) < 0)
            goto done;
        if (p == real)
            break;
    }
    rc = 0;
done:
    free (real);
    return rc;
}
