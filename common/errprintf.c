/* errprintf.c: fill a dt_error_t and return -1 (see errprintf.h). */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/errprintf.h"

static void verr (dt_error_t *err, const char *fmt, va_list ap)
{
    if (err) {
        int saved = errno;
        vsnprintf (err->text, sizeof (err->text), fmt, ap);
        errno = saved;
    }
}

int errprintf (dt_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    verr (err, fmt, ap);
    va_end (ap);
    return -1;
}

int errnoprintf (dt_error_t *err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    verr (err, fmt, ap);
    va_end (ap);
    errno = errnum;
    return -1;
}
