/* log.h: logging with syslog levels for daemons, CLIs and the trainer.
 *
 * Daemons log to stderr in the foreground and to syslog otherwise; CLIs and
 * the trainer log to stderr and use the *_exit helpers to die on the first
 * error.  Library code never exits.
 */
#ifndef DT_LOG_H
#define DT_LOG_H

#include <syslog.h>
#include <stdbool.h>

enum dt_log_dest {
    DT_LOG_STDERR = 0,
    DT_LOG_SYSLOG = 1,
};

/* Set the program name shown in each line, the destination and the most
 * verbose level that is printed (LOG_DEBUG .. LOG_ERR; default LOG_INFO). */
void dt_log_init (const char *ident, enum dt_log_dest dest, int level);
void dt_log_set_level (int level);
int dt_log_get_level (void);

/* Parse "debug", "info", "notice", "warning", "error" (case-insensitive)
 * into a syslog level.  Returns -1 for anything else. */
int dt_log_level_parse (const char *name);

void dt_log_msg (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* As dt_log_msg, with ": strerror(errno)" appended. Preserves errno. */
void dt_log_errno_msg (int level, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* The level is checked before the arguments are evaluated. */
#define dt_log(level, ...)                                                               \
    do {                                                                                 \
        if ((level) <= dt_log_get_level ())                                              \
            dt_log_msg ((level), __VA_ARGS__);                                           \
    } while (0)
#define dt_log_errno(level, ...)                                                         \
    do {                                                                                 \
        if ((level) <= dt_log_get_level ())                                              \
            dt_log_errno_msg ((level), __VA_ARGS__);                                     \
    } while (0)

/* For CLIs and the trainer: print "ident: message" to stderr and exit(1);
 * log_errn_exit appends strerror(errno). */
void log_msg_exit (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2), noreturn));
void log_err_exit (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2), noreturn));

#endif
