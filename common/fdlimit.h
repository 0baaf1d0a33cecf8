/* fdlimit.h: the descriptor limit of a server that keeps thousands of
 * connections open (dtctld's agents, a relay agent's children). */
#ifndef DT_FDLIMIT_H
#define DT_FDLIMIT_H

#include <stdint.h>

/* Raise RLIMIT_NOFILE: the soft limit to the hard one, and first, when
 * privileged (root), the hard limit to the kernel's fs.nr_open (up to
 * 1048576).  Logs the result (NOTICE when raised).  Returns the soft
 * limit in force. */
uint64_t dt_fdlimit_raise (void);

/* Of 'nofile' descriptors, those connections may use: less a reserve of
 * 256 for the database, logs, sockets and child processes. */
uint64_t dt_fdlimit_connections (uint64_t nofile);

/* Of 'limit' connections, the last ones, 1% of them (16 to 256), are
 * answered "503, retry" rather than accepted for service. */
uint64_t dt_fdlimit_band (uint64_t limit);

#endif
