/* log.c: syslog-level logging to stderr or syslog (see log.h).
 *
 * Each message is formatted into one buffer and written with one write(2),
 * so lines from several threads or processes sharing stderr do not
 * interleave.
 */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"

/* Long enough for an access-log line with a long path; longer messages are
 * truncated rather than allocated (logging must not fail). */
#define LOG_LINE_MAX 2048

static char log_ident[64] = "dtctl";
static enum dt_log_dest log_dest = DT_LOG_STDERR;
static int log_level = LOG_INFO;

void dt_log_init (const char *ident, enum dt_log_dest dest, int level)
{
    if (ident) {
        const char *base = strrchr (ident, '/');
        snprintf (log_ident, sizeof (log_ident), "%s", base ? base + 1 : ident);
    }
    if (log_dest == DT_LOG_SYSLOG && dest != DT_LOG_SYSLOG)
        closelog ();
    log_dest = dest;
    dt_log_set_level (level);
    if (dest == DT_LOG_SYSLOG)
        openlog (log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void dt_log_set_level (int level)
{
    if (level < LOG_EMERG)
        level = LOG_EMERG;
    if (level > LOG_DEBUG)
        level = LOG_DEBUG;
    log_level = level;
}

int dt_log_get_level (void)
{
    return log_level;
}

static const struct {
    const char *name;
    int level;
} level_names[] = {
    { "debug", LOG_DEBUG },     { "info", LOG_INFO },    { "notice", LOG_NOTICE },
    { "warning", LOG_WARNING }, { "warn", LOG_WARNING }, { "error", LOG_ERR },
    { "err", LOG_ERR },         { "crit", LOG_CRIT },
};

int dt_log_level_parse (const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof (level_names) / sizeof (level_names[0]); i++)
        if (!strcasecmp (name, level_names[i].name))
            return level_names[i].level;
    return -1;
}

static const char *level_prefix (int level)
{
    if (level <= LOG_ERR)
        return "error: ";
    if (level == LOG_WARNING)
        return "warning: ";
    if (level == LOG_DEBUG)
        return "debug: ";
    return "";
}

static void log_write (int level, bool tag, const char *suffix, const char *fmt,
                       va_list ap)
{
    char buf[LOG_LINE_MAX];
    int n;

    if (log_dest == DT_LOG_SYSLOG && tag) {
        n = vsnprintf (buf, sizeof (buf), fmt, ap);
        if (n < 0)
            return;
        syslog (level, "%s%s", buf, suffix ? suffix : "");
        return;
    }
    n =
      snprintf (buf, sizeof (buf), "%s: %s", log_ident, tag ? level_prefix (level) : "");
    if (n < 0 || (size_t)n >= sizeof (buf))
        n = 0;
    int m = vsnprintf (buf + n, sizeof (buf) - n, fmt, ap);
    if (m > 0)
        n += m;
    if ((size_t)n > sizeof (buf) - 2)
        n = sizeof (buf) - 2;
    if (suffix) {
        m = snprintf (buf + n, sizeof (buf) - n, "%s", suffix);
        if (m > 0)
            n += m;
        if ((size_t)n > sizeof (buf) - 2)
            n = sizeof (buf) - 2;
    }
    buf[n++] = '\n';
    /* One write; a short write to stderr is not worth retrying. */
    ssize_t w = write (STDERR_FILENO, buf, n);
    (void)w;
}

void dt_log_msg (int level, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;

    if (level > log_level)
        return;
    va_start (ap, fmt);
    log_write (level, true, NULL, fmt, ap);
    va_end (ap);
    errno = saved;
}

void dt_log_errno_msg (int level, const char *fmt, ...)
{
    int saved = errno;
    char suffix[160];
    va_list ap;

    if (level > log_level)
        return;
    snprintf (suffix, sizeof (suffix), ": %s", strerror (saved));
    va_start (ap, fmt);
    log_write (level, true, suffix, fmt, ap);
    va_end (ap);
    errno = saved;
}

void log_msg_exit (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    log_write (LOG_ERR, false, NULL, fmt, ap);
    va_end (ap);
    exit (1);
}

void log_err_exit (const char *fmt, ...)
{
    char suffix[160];
    va_list ap;

    snprintf (suffix, sizeof (suffix), ": %s", strerror (errno));
    va_start (ap, fmt);
    log_write (LOG_ERR, false, suffix, fmt, ap);
    va_end (ap);
    exit (1);
}
