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
        while (total < (ssize_t)sizeof (buf) - 1
               && (n = read (fds[0], buf + total, sizeof (buf) - 1 - total)) != 0) {
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
    umask (022);
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
        if (fscanf (f, "%ld", &pid) == 1 && pid > 0 && pid != getpid ()
            && kill ((pid_t)pid, 0) == 0) {
            fclose (f);
            return errnoprintf (err, EEXIST, "%s: dtctld already running as pid %ld", path,
                                pid);
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
