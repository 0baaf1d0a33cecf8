/* userfs.c: file system work with a job user's rights (see userfs.h). */
#define _GNU_SOURCE
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orchestrator/userfs.h"

void userfs_id_init (struct userfs_id *id, uid_t uid, gid_t gid)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    int n = USERFS_GROUPS_MAX;

    id->uid = uid;
    id->gid = gid;
    id->ngroups = 1;
    id->groups[0] = gid;
    if (getpwuid_r (uid, &pw, buf, sizeof (buf), &res) == 0 && res &&
        getgrouplist (pw.pw_name, gid, id->groups, &n) >= 0)
        id->ngroups = n;
    else
        id->groups[0] = gid; /* unknown user, or too many groups: its gid only */
}

/* Whether this process switches identities at all. */
static bool must_switch (const struct userfs_id *id)
{
    return geteuid () == 0 && id->uid != 0;
}

int userfs_enter (const struct userfs_id *id, struct userfs_saved *sv, dt_error_t *err)
{
    sv->switched = false;
    if (!must_switch (id))
        return 0;
    if ((sv->ngroups = getgroups (USERFS_GROUPS_MAX, sv->groups)) < 0)
        return errnoprintf (err, errno, "getgroups: %s", strerror (errno));
    /* The raw system calls: glibc's setgroups would change every thread. */
    if (syscall (SYS_setgroups, (size_t)id->ngroups, id->groups) < 0)
        return errnoprintf (err, errno, "setgroups for uid %u: %s", (unsigned)id->uid,
                            strerror (errno));
    sv->fsgid = (gid_t)setfsgid (id->gid);
    sv->fsuid = (uid_t)setfsuid (id->uid);
    sv->switched = true;
    /* setfsuid reports no error: read the value back (an invalid id is
     * refused and returns the current one). */
    if ((uid_t)setfsuid ((uid_t)-1) != id->uid ||
        (gid_t)setfsgid ((gid_t)-1) != id->gid) {
        userfs_leave (sv);
        return errnoprintf (err, EPERM, "cannot take the rights of uid %u gid %u",
                            (unsigned)id->uid, (unsigned)id->gid);
    }
    return 0;
}

void userfs_leave (struct userfs_saved *sv)
{
    int e = errno;
    if (!sv->switched)
        return;
    setfsuid (sv->fsuid);
    setfsgid (sv->fsgid);
    if (syscall (SYS_setgroups, (size_t)sv->ngroups, sv->groups) < 0)
        abort (); /* never keep a user's groups as root */
    sv->switched = false;
    errno = e;
}

static int fail (dt_error_t *err, int e, const char *what, const char *dir,
                 const char *name)
{
    return errnoprintf (err, e, "%s %s%s%s: %s", what, dir, name ? "/" : "",
                        name ? name : "", strerror (e));
}

static int open_dir (const char *dir)
{
    return open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* mkdir -p with the current (file system) identity. */
static int mkdir_p (const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf (buf, sizeof (buf), "%s", path) >= (int)sizeof (buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir (buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* mkdirat dfd/name; an existing entry must be a directory (not a link)
 * owned by 'owner'.  Returns 1 if created, 0 if it existed, -1. */
static int mkdir_owned (int dfd, const char *name, mode_t mode, uid_t owner)
{
    struct stat sb;
    if (mkdirat (dfd, name, mode) == 0)
        return 1;
    if (errno != EEXIST)
        return -1;
    if (fstatat (dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (!S_ISDIR (sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    if (sb.st_uid != owner) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* Open the admin's directory 'path' (creating what is missing, 0755) as
 * the daemon, walking it from "/" one component at a time: each must be
 * owned by root or the daemon's user (a directory a user owns, or a link
 * a user planted, would let that user choose where root creates), and a
 * link is followed only when root or the daemon owns it. */
static int open_trusted (const char *path, dt_error_t *err)
{
    char buf[PATH_MAX], *save = NULL, *comp;
    struct stat sb;
    int fd, next;

    if (snprintf (buf, sizeof (buf), "%s", path) >= (int)sizeof (buf))
        return fail (err, ENAMETOOLONG, "open", path, NULL);
    if ((fd = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return fail (err, errno, "open", "/", NULL);
    for (comp = strtok_r (buf, "/", &save); comp; comp = strtok_r (NULL, "/", &save)) {
        if (fstatat (fd, comp, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
            /* 0755 whatever dtctld's umask (077): the jobs' users must
             * reach their own directories below it. */
            if (errno != ENOENT || (mkdirat (fd, comp, 0755) < 0 && errno != EEXIST) ||
                fstatat (fd, comp, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
                (sb.st_uid == geteuid () && fchmodat (fd, comp, 0755, 0) < 0))
                goto error;
        }
        if (S_ISLNK (sb.st_mode) && sb.st_uid != 0 && sb.st_uid != geteuid ())
            goto not_trusted;
        next = openat (fd, comp,
                       O_RDONLY | O_DIRECTORY | O_CLOEXEC |
                         (S_ISLNK (sb.st_mode) ? 0 : O_NOFOLLOW));
        if (next < 0)
            goto error;
        close (fd);
        fd = next;
        if (fstat (fd, &sb) < 0)
            goto error;
        if (sb.st_uid != 0 && sb.st_uid != geteuid ())
            goto not_trusted;
    }
    return fd;
error : {
    int e = errno;
    close (fd);
    return fail (err, e, "open", path, NULL);
}
not_trusted:
    close (fd);
    return errnoprintf (err, EPERM,
                        "%s: '%s' on the way is owned by uid %u, not by root or "
                        "dtctld's user: refused",
                        path, comp, (unsigned)sb.st_uid);
}

int userfs_job_dir (const struct userfs_id *id, const char *dir, const char *name,
                    const char *trusted, dt_error_t *err)
{
    struct userfs_saved sv;
    struct stat sb;
    int dfd = -1, fd = -1, rc;

    if (trusted && !strcmp (dir, trusted)) {
        /* The admin's directory: root creates the job's own one in it. */
        if ((dfd = open_trusted (dir, err)) < 0)
            return -1;
        if (fstat (dfd, &sb) < 0)
            goto error_name;
        if ((sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX)) {
            close (dfd);
            return errnoprintf (err, EPERM,
                                "%s: writable by all without the sticky bit: "
                                "refused",
                                dir);
        }
        if ((rc = mkdir_owned (dfd, name, 0700, id->uid)) < 0)
            goto error_name;
        if (rc == 1) {
            if ((fd = openat (dfd, name,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
                fchown (fd, id->uid, id->gid) < 0)
                goto error_name;
            close (fd);
            fsync (dfd);
        }
        close (dfd);
        return 0;
    }
    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if (mkdir_p (dir, 0755) < 0) {
        int e = errno;
        userfs_leave (&sv);
        return fail (err, e, "mkdir", dir, NULL);
    }
    if ((dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        int e = errno;
        userfs_leave (&sv);
        return fail (err, e, "open", dir, NULL);
    }
    rc = mkdir_owned (dfd, name, 0700, id->uid);
    if (rc == 1)
        fsync (dfd);
    int e = errno;
    userfs_leave (&sv);
    close (dfd);
    if (rc < 0)
        return fail (err, e, "mkdir", dir, name);
    return 0;
error_name : {
    int e = errno;
    if (fd >= 0)
        close (fd);
    close (dfd);
    return fail (err, e, "mkdir", dir, name);
}
}

int userfs_mkdir (const struct userfs_id *id, const char *dir, const char *name,
                  mode_t mode, dt_error_t *err)
{
    struct userfs_saved sv;
    int dfd, rc = -1, e = 0;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((dfd = open_dir (dir)) < 0)
        e = errno;
    else if ((rc = mkdir_owned (dfd, name, mode,
                                must_switch (id) ? id->uid : geteuid ())) < 0)
        e = errno;
    else if (rc == 1)
        fsync (dfd);
    userfs_leave (&sv);
    if (dfd >= 0)
        close (dfd);
    if (dfd < 0)
        return fail (err, e, "open", dir, NULL);
    if (rc < 0)
        return fail (err, e, "mkdir", dir, name);
    return 0;
}

int userfs_write_atomic (const struct userfs_id *id, const char *dir, const char *name,
                         const void *data, size_t len, dt_error_t *err)
{
    struct userfs_saved sv;
    char tmp[NAME_MAX + 1];
    const char *what = "open";
    size_t off = 0;
    int dfd, fd = -1, e = 0;

    if (snprintf (tmp, sizeof (tmp), ".%s.tmp", name) >= (int)sizeof (tmp))
        return fail (err, ENAMETOOLONG, "write", dir, name);
    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((dfd = open_dir (dir)) < 0) {
        e = errno;
        userfs_leave (&sv);
        return fail (err, e, "open", dir, NULL);
    }
    /* Whatever has the temporary's name (a crash's leftover, or a link
     * planted there) goes: unlinkat removes a link, never its target. */
    if (unlinkat (dfd, tmp, 0) < 0 && errno != ENOENT) {
        what = "unlink";
        goto error;
    }
    if ((fd = openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0644)) < 0)
        goto error;
    fchmod (fd, 0644); /* the job's trainer reads it; dtctld's umask is 077 */
    what = "write";
    while (off < len) {
        ssize_t n = write (fd, (const char *)data + off, len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        off += n;
    }
    if (fsync (fd) < 0)
        goto error;
    if (close (fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    what = "rename";
    if (renameat (dfd, tmp, dfd, name) < 0)
        goto error;
    fsync (dfd);
    userfs_leave (&sv);
    close (dfd);
    return 0;
error:
    e = errno;
    if (fd >= 0) {
        close (fd);
        unlinkat (dfd, tmp, 0);
    }
    userfs_leave (&sv);
    close (dfd);
    return fail (err, e, what, dir, name);
}

/* The body of userfs_remove_dir, as the user already. */
static int remove_dir (int dfd, const char *name, bool (*want) (const char *))
{
    struct stat sb;
    struct dirent *e;
    int fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d;

    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        /* A link (or file) in the directory's place: remove it, never follow. */
        if ((errno == ELOOP || errno == ENOTDIR) &&
            fstatat (dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR (sb.st_mode))
            return unlinkat (dfd, name, 0);
        return -1;
    }
    if (!(d = fdopendir (fd))) {
        close (fd);
        return -1;
    }
    while ((e = readdir (d))) {
        if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
            continue;
        if (fstatat (fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR (sb.st_mode))
            continue;
        if (!want || want (e->d_name))
            unlinkat (fd, e->d_name, 0);
    }
    closedir (d);
    if (unlinkat (dfd, name, AT_REMOVEDIR) < 0 && errno != ENOTEMPTY && errno != EEXIST &&
        errno != ENOENT)
        return -1;
    fsync (dfd);
    return 0;
}

int userfs_remove_dir (const struct userfs_id *id, const char *dir, const char *name,
                       bool (*want) (const char *entry), dt_error_t *err)
{
    struct userfs_saved sv;
    int dfd, rc = -1, e = 0;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((dfd = open_dir (dir)) < 0)
        e = errno;
    else if ((rc = remove_dir (dfd, name, want)) < 0)
        e = errno;
    userfs_leave (&sv);
    if (dfd < 0)
        return e == ENOENT ? 0 : fail (err, e, "open", dir, NULL);
    close (dfd);
    return rc < 0 ? fail (err, e, "remove", dir, name) : 0;
}

int userfs_remove_dirs (const struct userfs_id *id, const char *dir,
                        bool (*pick) (const char *name), dt_error_t *err)
{
    struct userfs_saved sv;
    struct dirent *de;
    int dfd, lfd, e = 0, rc = 0;
    DIR *d = NULL;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((dfd = open_dir (dir)) < 0 || (lfd = dup (dfd)) < 0 || !(d = fdopendir (lfd))) {
        e = errno;
        userfs_leave (&sv);
        if (dfd >= 0)
            close (dfd);
        return e == ENOENT ? 0 : fail (err, e, "open", dir, NULL);
    }
    while ((de = readdir (d)))
        if (strcmp (de->d_name, ".") && strcmp (de->d_name, "..") && pick (de->d_name) &&
            remove_dir (dfd, de->d_name, NULL) < 0 && !rc) {
            rc = -1;
            e = errno;
        }
    userfs_leave (&sv);
    closedir (d);
    close (dfd);
    return rc < 0 ? fail (err, e, "remove in", dir, NULL) : 0;
}

int userfs_rename (const struct userfs_id *id, const char *dir, const char *from,
                   const char *to, dt_error_t *err)
{
    struct userfs_saved sv;
    int dfd, rc = -1, e = 0;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((dfd = open_dir (dir)) < 0)
        e = errno;
    else if ((rc = renameat (dfd, from, dfd, to)) < 0)
        e = errno;
    else
        fsync (dfd);
    userfs_leave (&sv);
    if (dfd < 0)
        return fail (err, e, "open", dir, NULL);
    close (dfd);
    if (rc < 0)
        return errnoprintf (err, e, "rename %s/%s to %s: %s", dir, from, to,
                            strerror (e));
    return 0;
}

int userfs_move (const struct userfs_id *id, const char *from, const char *to,
                 const char *name, dt_error_t *err)
{
    struct userfs_saved sv;
    int ffd = -1, tfd = -1, rc = -1, e = 0;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((ffd = open_dir (from)) < 0 || (tfd = open_dir (to)) < 0)
        e = errno;
    else if ((rc = renameat (ffd, name, tfd, name)) < 0)
        e = errno;
    else
        fsync (tfd), fsync (ffd);
    userfs_leave (&sv);
    if (ffd >= 0)
        close (ffd);
    if (tfd >= 0)
        close (tfd);
    if (ffd < 0 || tfd < 0)
        return fail (err, e, "open", ffd < 0 ? from : to, NULL);
    if (rc < 0)
        return errnoprintf (err, e, "rename %s/%s to %s/%s: %s", from, name, to, name,
                            strerror (e));
    return 0;
}

int userfs_exists (const struct userfs_id *id, const char *dir, const char *name,
                   dt_error_t *err)
{
    struct userfs_saved sv;
    struct stat sb;
    int dfd, rc = -1, e = 0;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if ((dfd = open_dir (dir)) < 0)
        e = errno;
    else if ((rc = fstatat (dfd, name, &sb, AT_SYMLINK_NOFOLLOW)) < 0)
        e = errno;
    userfs_leave (&sv);
    if (dfd < 0)
        return fail (err, e, "open", dir, NULL);
    close (dfd);
    if (rc < 0)
        return e == ENOENT ? 0 : fail (err, e, "stat", dir, name);
    return 1;
}

int userfs_open_regular (const struct userfs_id *id, const char *path, struct stat *sb,
                         dt_error_t *err)
{
    struct userfs_saved sv;
    char *real;
    int fd = -1, e = 0;

    if (userfs_enter (id, &sv, err) < 0)
        return -1;
    if (!(real = realpath (path, NULL)))
        e = errno;
    else if ((fd = open (real,
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        e = errno;
    userfs_leave (&sv);
    free (real);
    if (fd < 0)
        return errnoprintf (err, e, "%s: %s", path, strerror (e));
    if (fstat (fd, sb) < 0 || !S_ISREG (sb->st_mode)) {
        e = errno;
        bool reg = S_ISREG (sb->st_mode);
        close (fd);
        return reg ? errnoprintf (err, e, "%s: %s", path, strerror (e))
                   : errnoprintf (err, EINVAL, "%s: not a regular file", path);
    }
    return fd;
}

char *userfs_read_file (const struct userfs_id *id, const char *path, size_t max,
                        size_t *len, dt_error_t *err)
{
    struct stat sb;
    size_t off = 0;
    char *buf;
    int fd = userfs_open_regular (id, path, &sb, err);

    if (fd < 0)
        return NULL;
    if ((size_t)sb.st_size > max) {
        close (fd);
        errnoprintf (err, EFBIG, "%s: larger than %zu bytes", path, max);
        return NULL;
    }
    if (!(buf = malloc ((size_t)sb.st_size + 1))) {
        close (fd);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    while (off < (size_t)sb.st_size) {
        ssize_t n = read (fd, buf + off, sb.st_size - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* a file that shrank: what was there */
        off += n;
    }
    close (fd);
    buf[off] = '\0';
    if (len)
        *len = off;
    return buf;
}
