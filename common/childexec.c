/* childexec.c: a forked child's preparations before exec (childexec.h). */
#include "config.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/childexec.h"

void dt_child_close_from (int lowfd)
{
#ifdef SYS_close_range
    if (syscall (SYS_close_range, (unsigned)lowfd, ~0U, 0U) == 0)
        return;
#endif
    long max = sysconf (_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = lowfd; fd < max; fd++)
        close (fd);
}

void dt_child_drop_tty (void)
{
    int tty = open ("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (tty >= 0) {
        ioctl (tty, TIOCNOTTY);
        close (tty);
    }
}
