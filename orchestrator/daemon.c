/* daemon.c: daemonize with a status pipe; PID file. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "orchestrator/daemon.h"

static int status_fd = -1;

int daemon_start (dt_error_t *err)
{
    int fds[2];
    pid_t pid;

    if (pipe (fds) < 0)
        return errnoprintf (err, errno, "pipe: %s", strerror (errno));
    if ((pid = fork ()) < 0)
        return errnoprintf (err, errno, "fork: %s", strerror (errno));
    if (pid > 0) {
        /* The parent: relay the daemon's verdict. */
        char buf[512];
        ssize_t n, total = 0;
        close (fds[1]);
        while (total < (ssize_t)sizeof (buf) - 1 &&
               (n = read (fds[0], buf + total, sizeof (buf) - 1 - total)) != 0) {
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                break;
            }
            total += n;
        }
        buf[total] = '\0';
        if (total > 0 && buf[0] == '\0')
            _exit (0);
        if (total == 0)
            fprintf (stderr, "dtctld: daemon exited during startup\n");
        else
            fprintf (stderr, "%s\n", buf);
        _exit (1);
    }
    close (fds[0]);
    if (setsid () < 0)
        return errnoprintf (err, errno, "setsid: %s", strerror (errno));
    /* Second fork: never reacquire a controlling terminal. */
    if ((pid = fork ()) < 0)
        return errnoprintf (err, errno, "fork: %s", strerror (errno));
    if (pid > 0)
        _exit (0);
    status_fd = fds[1];
    umask (077);
    if (chdir ("/") < 0)
        return errnoprintf (err, errno, "chdir /: %s", strerror (errno));
    int fd = open ("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2 (fd, STDIN_FILENO);
        dup2 (fd, STDOUT_FILENO);
        /* stderr stays until daemon_ready(), so a crash message still
         * reaches the terminal. */
        if (fd > STDERR_FILENO)
            close (fd);
    }
    return 0;
}

void daemon_ready (void)
{
    if (status_fd >= 0) {
        char c = '\0';
        ssize_t rc = write (status_fd, &c, 1);
        (void)rc;
        close (status_fd);
        status_fd = -1;
        int fd = open ("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2 (fd, STDERR_FILENO);
            if (fd > STDERR_FILENO)
                close (fd);
        }
    }
}

void daemon_fail (const char *msg)
{
    if (status_fd >= 0) {
        ssize_t rc = write (status_fd, msg, strlen (msg));
        (void)rc;
        close (status_fd);
        status_fd = -1;
    }
}

int daemon_pidfile_write (const char *path, dt_error_t *err)
{
    FILE *f;
    char tmp[4096];

    if ((f = fopen (path, "r"))) {
        long pid = 0;
        if (fscanf (f, "%ld", &pid) == 1 && pid > 0 && pid != getpid () &&
            kill ((pid_t)pid, 0) == 0) {
            fclose (f);
            return errnoprintf (err, EEXIST, "%s: dtctld already running as pid %ld",
                                path, pid);
        }
        fclose (f);
    }
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    if (!(f = fopen (tmp, "w")))
        return errnoprintf (err, errno, "%s: %s", tmp, strerror (errno));
    fprintf (f, "%ld\n", (long)getpid ());
    if (fclose (f) != 0 || rename (tmp, path) < 0) {
        int e = errno;
        unlink (tmp);
        return errnoprintf (err, e, "%s: %s", path, strerror (e));
    }
    return 0;
}

void daemon_pidfile_remove (const char *path)
{
    if (path)
        unlink (path);
}

int daemon_state_dir (const char *path, dt_error_t *err)
{
    struct stat sb;
    int fd;

    if (mkdir (path, 0700) < 0 && errno != EEXIST)
        return errnoprintf (err, errno, "StateDir %s: %s", path, strerror (errno));
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return errnoprintf (err, errno, "StateDir %s: %s", path,
                            errno == ENOTDIR || errno == ELOOP
                              ? "not a directory (a symbolic link is refused)"
                              : strerror (errno));
    if (fstat (fd, &sb) < 0) {
        int e = errno;
        close (fd);
        return errnoprintf (err, e, "StateDir %s: %s", path, strerror (e));
    }
    if (sb.st_uid != geteuid ()) {
        close (fd);
        return errnoprintf (err, EPERM,
                            "StateDir %s: owned by uid %ld, not by dtctld's user "
                            "(uid %ld); refusing it (its owner could read or change the "
                            "controller's state)",
                            path, (long)sb.st_uid, (long)geteuid ());
    }
    if (sb.st_mode & 077) {
        if (fchmod (fd, 0700) < 0) {
            int e = errno;
            close (fd);
            return errnoprintf (err, e,
                                "StateDir %s: mode %04o lets other users in, and "
                                "chmod 0700 failed: %s",
                                path, (unsigned)(sb.st_mode & 07777), strerror (e));
        }
        dt_log (LOG_WARNING,
                "StateDir %s was mode %04o (other users could read the "
                "database): now 0700",
                path, (unsigned)(sb.st_mode & 07777));
    }
    close (fd);
    return 0;
}

int daemon_private_file (const char *path, dt_error_t *err)
{
    static const char *const suffix[] = { "", "-wal", "-shm" };

    for (size_t i = 0; i < sizeof (suffix) / sizeof (suffix[0]); i++) {
        char p[4096];
        struct stat sb;
        int fd;

        snprintf (p, sizeof (p), "%s%s", path, suffix[i]);
        if ((fd = open (p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            if (errno == ENOENT)
                continue;
            return errnoprintf (err, errno, "%s: %s", p,
                                errno == ELOOP ? "a symbolic link (refused)"
                                               : strerror (errno));
        }
        if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || sb.st_uid != geteuid ()) {
            close (fd);
            return errnoprintf (err, EPERM,
                                "%s: not a regular file owned by dtctld's user "
                                "(uid %ld); refusing it",
                                p, (long)geteuid ());
        }
        if (sb.st_mode & 077) {
            if (fchmod (fd, 0600) < 0) {
                int e = errno;
                close (fd);
                return errnoprintf (err, e, "%s: chmod 0600: %s", p, strerror (e));
            }
            dt_log (LOG_WARNING, "%s was mode %04o (other users could read it): now 0600",
                    p, (unsigned)(sb.st_mode & 07777));
        }
        close (fd);
    }
    return 0;
}

int daemon_shared_dir (const char *path, dt_error_t *err)
{
    if (mkdir (path, 0755) < 0) {
        if (errno == EEXIST)
            return 0;
        return errnoprintf (err, errno, "%s: %s", path, strerror (errno));
    }
    if (chmod (path, 0755) < 0)
        return errnoprintf (err, errno, "%s: chmod 0755: %s", path, strerror (errno));
    return 0;
}
