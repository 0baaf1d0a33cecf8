/* reaper.c: the agent as child subreaper (see reaper.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reaper.h"

int reaper_init (void)
{
    return prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

/* Parent pid of 'pid' from /proc/PID/stat, -1 if gone or a zombie (dead
 * already: reaped by its parent, or by the agent once it is reparented).
 * The command name (field 2) may hold spaces and parentheses: parse after
 * the last ')'. */
static pid_t parent_of (pid_t pid)
{
    char path[64], buf[512];
    snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen (path, "re");
    if (!f)
        return -1;
    size_t n = fread (buf, 1, sizeof (buf) - 1, f);
    fclose (f);
    buf[n] = '\0';
    char *p = strrchr (buf, ')');
    char state;
    int ppid;
    if (!p || sscanf (p + 1, " %c %d", &state, &ppid) != 2 || state == 'Z')
        return -1;
    return (pid_t)ppid;
}

/* Every process whose chain of parents reaches 'root'. */
static int descendants (pid_t root, pid_t **out)
{
    DIR *d = opendir ("/proc");
    pid_t *pid = NULL, *ppid = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir (d))) {
        if (!isdigit ((unsigned char)e->d_name[0]))
            continue;
        pid_t p = (pid_t)atoi (e->d_name);
        pid_t pp = parent_of (p);
        if (pp <= 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            pid_t *a = realloc (pid, cap * sizeof (*a)),
                  *b = a ? realloc (ppid, cap * sizeof (*b)) : NULL;
            if (a)
                pid = a;
            if (!a || !b) {
                closedir (d);
                free (pid);
                free (ppid);
                return -1;
            }
            ppid = b;
        }
        pid[n] = p;
        ppid[n] = pp;
        n++;
    }
    closedir (d);
    /* Mark descendants: repeat until no new one is found (the list is in
     * pid order, not tree order). */
    char *mark = calloc (n ? n : 1, 1);
    int count = 0;
    bool more = mark != NULL;
    while (more) {
        more = false;
        for (size_t i = 0; i < n; i++) {
            if (mark[i])
                continue;
            bool hit = ppid[i] == root;
            for (size_t j = 0; !hit && j < n; j++)
                hit = mark[j] && pid[j] == ppid[i];
            if (hit) {
                mark[i] = 1;
                count++;
                more = true;
            }
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n && mark; i++)
        if (mark[i])
            pid[k++] = pid[i];
    free (mark);
    free (ppid);
    *out = pid;
    return mark || n == 0 ? count : -1;
}

static long elapsed_ms (const struct timespec *t0)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Reap what has died and count the descendants still alive, for up to
 * 'ms': the ranks' process groups were just sent SIGKILL, and their members
 * take a moment to go.  0 once none is left. */
static int wait_gone (int ms)
{
    struct timespec t0;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t *v = NULL;
        while (waitpid (-1, NULL, WNOHANG) > 0)
            ;
        int n = descendants (getpid (), &v);
        free (v);
        if (n <= 0 || elapsed_ms (&t0) > ms)
            return n;
        usleep (10 * 1000);
    }
}

int reaper_kill_all (int timeout_ms)
{
    int killed = 0;
    struct timespec t0;

    /* What is dying already is not left behind: only the processes still
     * there after a short grace escaped the process-group kills. */
    if (wait_gone (200) <= 0)
        return 0;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    for (bool first = true;; first = false) {
        pid_t *v = NULL;
        int n = descendants (getpid (), &v);
        for (int i = 0; i < n; i++)
            if (kill (v[i], SIGKILL) == 0 && first)
                killed++; /* each leftover once, however long it takes to go */
        free (v);
        while (waitpid (-1, NULL, WNOHANG) > 0)
            ;
        if (n <= 0 || elapsed_ms (&t0) > timeout_ms)
            break;
        usleep (10 * 1000);
    }
    return killed;
}
