/* fsutil.c: paths, mkdir -p, atomic writes (see fsutil.h). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"

int dt_pathf (char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start (ap, fmt);
    n = vsnprintf (buf, len, fmt, ap);
    va_end (ap);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* mkdir of buf, and an fsync of its parent when it was created, so that a
 * new directory survives a crash as the files written into it do. */
static int mkdir_durable (char *buf, mode_t mode)
{
    if (mkdir (buf, mode) < 0)
        return errno == EEXIST ? 0 : -1;
    char *slash = strrchr (buf, '/');
    if (!slash)
        return dt_fsync_dir (".");
    if (slash == buf)
        return dt_fsync_dir ("/");
    *slash = '\0';
    int rc = dt_fsync_dir (buf);
    *slash = '/';
    return rc;
}

int dt_mkdir_p (const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (dt_pathf (buf, sizeof (buf), "%s", path) < 0)
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir_durable (buf, mode) < 0)
                return -1;
            *p = '/';
        }
    }
    return mkdir_durable (buf, mode);
}

int dt_fsync_dir (const char *dir)
{
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync (fd);
    int e = errno;
    close (fd);
    errno = e;
    return rc;
}

int dt_write_atomic (const char *dir, const char *name, const void *data, size_t len,
                     dt_error_t *err)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    const char *p = data;
    size_t off = 0;
    int fd;

    if (dt_pathf (tmp, sizeof (tmp), "%s/.%s.tmp", dir, name) < 0 ||
        dt_pathf (path, sizeof (path), "%s/%s", dir, name) < 0)
        return errnoprintf (err, ENAMETOOLONG, "%s/%s: path too long", dir, name);
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return errnoprintf (err, errno, "%s: %s", tmp, strerror (errno));
    while (off < len) {
        ssize_t n = write (fd, p + off, len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        off += n;
    }
    if (fsync (fd) < 0 || close (fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (rename (tmp, path) < 0 || dt_fsync_dir (dir) < 0)
        goto error;
    return 0;
error : {
    int e = errno;
    if (fd >= 0)
        close (fd);
    unlink (tmp);
    return errnoprintf (err, e, "%s: %s", path, strerror (e));
}
}
