/* dtime.c: clocks, Slurm-style durations and UTC timestamps (see dtime.h). */
#include <config.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/dtime.h"

static int64_t clock_ns (clockid_t id)
{
    struct timespec ts;
    clock_gettime (id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t dt_mono_ns (void)
{
    return clock_ns (CLOCK_MONOTONIC);
}

int64_t dt_mono_ms (void)
{
    return clock_ns (CLOCK_MONOTONIC) / 1000000;
}

int64_t dt_real_ms (void)
{
    return clock_ns (CLOCK_REALTIME) / 1000000;
}

/* Read decimal digits at *p into *out; at least one digit.  Advances *p.
 * Returns -1 (ERANGE) on overflow, -1 (EINVAL) when no digit. */
static int read_digits (const char **p, int64_t *out)
{
    const char *s = *p;
    int64_t v = 0;

    if (!isdigit ((unsigned char)*s)) {
        errno = EINVAL;
        return -1;
    }
    while (isdigit ((unsigned char)*s)) {
        if (__builtin_mul_overflow (v, 10, &v) ||
            __builtin_add_overflow (v, *s - '0', &v)) {
            errno = ERANGE;
            return -1;
        }
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

/* *acc += v * mult_ms, with overflow detection. */
static int accumulate (int64_t *acc, int64_t v, int64_t mult_ms)
{
    int64_t t;
    if (__builtin_mul_overflow (v, mult_ms, &t) ||
        __builtin_add_overflow (*acc, t, acc)) {
        errno = ERANGE;
        return -1;
    }
    return 0;
}

#define MS_S ((int64_t)1000)
#define MS_M (60 * MS_S)
#define MS_H (60 * MS_M)
#define MS_D (24 * MS_H)

/* "N" followed by an optional unit suffix. */
static int parse_unit (const char *s, int64_t *out)
{
    const char *p = s;
    int64_t v, mult;

    if (read_digits (&p, &v) < 0)
        return -1;
    if (*p == '\0' || !strcmp (p, "s"))
        mult = MS_S;
    else if (!strcmp (p, "ms"))
        mult = 1;
    else if (!strcmp (p, "m"))
        mult = MS_M;
    else if (!strcmp (p, "h"))
        mult = MS_H;
    else if (!strcmp (p, "d"))
        mult = MS_D;
    else {
        errno = EINVAL;
        return -1;
    }
    *out = 0;
    return accumulate (out, v, mult);
}

/* Slurm's "[D-]HH[:MM[:SS]]" / "MM:SS" forms.  Fields after the first are
 * bounded (minutes, seconds < 60; hours < 24 after a day count) so that a
 * typo like "1:75" is caught instead of silently meaning 2:15. */
static int parse_slurm (const char *s, int64_t *out)
{
    const char *p = s;
    int64_t f[3];
    int nf = 0;
    int64_t days = 0;
    bool have_days = false;
    int64_t acc = 0;

    if (strchr (s, '-')) {
        if (read_digits (&p, &days) < 0 || *p != '-')
            goto inval;
        p++;
        have_days = true;
    }
    for (;;) {
        if (nf == 3)
            goto inval;
        if (read_digits (&p, &f[nf]) < 0)
            return -1;
        nf++;
        if (*p == '\0')
            break;
        if (*p != ':')
            goto inval;
        p++;
    }
    if (have_days) {
        /* D-HH, D-HH:MM, D-HH:MM:SS */
        if (f[0] >= 24 || (nf > 1 && f[1] >= 60) || (nf > 2 && f[2] >= 60))
            goto range;
        if (accumulate (&acc, days, MS_D) < 0 || accumulate (&acc, f[0], MS_H) < 0 ||
            (nf > 1 && accumulate (&acc, f[1], MS_M) < 0) ||
            (nf > 2 && accumulate (&acc, f[2], MS_S) < 0))
            return -1;
    }
    else if (nf == 2) {
        /* MM:SS */
        if (f[1] >= 60)
            goto range;
        if (accumulate (&acc, f[0], MS_M) < 0 || accumulate (&acc, f[1], MS_S) < 0)
            return -1;
    }
    else if (nf == 3) {
        /* HH:MM:SS */
        if (f[1] >= 60 || f[2] >= 60)
            goto range;
        if (accumulate (&acc, f[0], MS_H) < 0 || accumulate (&acc, f[1], MS_M) < 0 ||
            accumulate (&acc, f[2], MS_S) < 0)
            return -1;
    }
    else
        goto inval;
    *out = acc;
    return 0;
range:
    errno = ERANGE;
    return -1;
inval:
    errno = EINVAL;
    return -1;
}

int dt_parse_duration_ms (const char *s, int64_t *out_ms, dt_error_t *err)
{
    int64_t v;
    int rc;

    if (!s || *s == '\0')
        return errnoprintf (err, EINVAL, "empty duration");
    if (*s == '-')
        return errnoprintf (err, EINVAL, "'%s': negative duration", s);
    if (strchr (s, ':') || strchr (s, '-'))
        rc = parse_slurm (s, &v);
    else
        rc = parse_unit (s, &v);
    if (rc < 0) {
        if (errno == ERANGE)
            return errnoprintf (err, ERANGE, "'%s': duration out of range", s);
        return errnoprintf (err, EINVAL,
                            "'%s': invalid duration (expected e.g. 250ms, 90s, 5m, "
                            "2h, 1d, MM:SS, HH:MM:SS or D-HH:MM:SS)",
                            s);
    }
    *out_ms = v;
    return 0;
}

char *dt_format_time (int64_t epoch_ms, char *buf, size_t len)
{
    struct tm tm;
    time_t t;
    int64_t ms = epoch_ms % 1000;

    if (ms < 0)
        ms += 1000;
    t = (time_t)((epoch_ms - ms) / 1000);
    if (!buf || len == 0)
        return buf;
    if (!gmtime_r (&t, &tm)) {
        snprintf (buf, len, "invalid-time");
        return buf;
    }
    snprintf (buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
              tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
    return buf;
}
