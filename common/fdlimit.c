/* fdlimit.c: the process's descriptor limit and what connections may use
 * of it (see fdlimit.h). */
#include <config.h>
#include <stdio.h>
#include <sys/resource.h>

#include "common/fdlimit.h"
#include "common/log.h"

/* Each keep-alive connection is a file descriptor: raise the soft limit to
 * the hard one so thousands of agents fit; a privileged daemon (root, as
 * dtctld runs) first raises the hard limit to the kernel's fs.nr_open, up
 * to fdlimit_max.  Logged, since the connection limits follow from it.
 * Returns the soft limit in force. */
static const rlim_t fdlimit_max = 1048576;
uint64_t dt_fdlimit_raise (void)
{
    struct rlimit rl, was;
    if (getrlimit (RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    was = rl;
    FILE *f = fopen ("/proc/sys/fs/nr_open", "r");
    unsigned long long nr_open = 0;
    if (f) {
        if (fscanf (f, "%llu", &nr_open) != 1)
            nr_open = 0;
        fclose (f);
    }
    rlim_t want = nr_open > 0 && nr_open < fdlimit_max ? (rlim_t)nr_open : fdlimit_max;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        struct rlimit up = { want, want };
        if (setrlimit (RLIMIT_NOFILE, &up) == 0)
            rl = up; /* privileged: hard and soft raised together */
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit (RLIMIT_NOFILE, &rl) < 0) {
            dt_log_errno (LOG_WARNING, "cannot raise RLIMIT_NOFILE");
            rl = was;
        }
    }
    if (rl.rlim_cur != was.rlim_cur)
        dt_log (LOG_NOTICE,
                "descriptor limit (RLIMIT_NOFILE) raised from %llu to %llu "
                "(hard limit %llu)",
                (unsigned long long)was.rlim_cur, (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max);
    else
        dt_log (LOG_INFO, "descriptor limit (RLIMIT_NOFILE): %llu",
                (unsigned long long)rl.rlim_cur);
    return rl.rlim_cur == RLIM_INFINITY ? fdlimit_max : (uint64_t)rl.rlim_cur;
}

/* Descriptors kept out of the connections' share: the database and its
 * WAL, logs, Slurm and munge sockets, the agents' child processes. */
static const uint64_t fdlimit_reserve = 256;

uint64_t dt_fdlimit_connections (uint64_t nofile)
{
    return nofile > fdlimit_reserve ? nofile - fdlimit_reserve : 0;
}

/* Near a limit, the last 1% (16 to 256) of the connections are answered
 * 503 instead of being closed unanswered at accept. */
uint64_t dt_fdlimit_band (uint64_t limit)
{
    uint64_t band = limit / 100;
    return band < 16 ? 16 : band > 256 ? 256 : band;
}
