/* errprintf.h: the one error convention of dtctl.
 *
 * Functions return 0 / a valid pointer on success and -1 / NULL on failure
 * with errno set; when they take a dt_error_t, its text says what went wrong
 * in one line, naming the file:line, field path or peer involved.
 */
#ifndef DT_ERRPRINTF_H
#define DT_ERRPRINTF_H

typedef struct {
    char text[160];
} dt_error_t;

/* Format into err->text (err may be NULL).  Preserves errno.  Always -1. */
int errprintf (dt_error_t *err, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* Like errprintf, then sets errno = errnum.  Always -1. */
int errnoprintf (dt_error_t *err, int errnum, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

#endif
