/* dtime.h: clocks, durations and timestamps. */
#ifndef DT_DTIME_H
#define DT_DTIME_H

#include <stdint.h>
#include <stddef.h>
#include "common/errprintf.h"

/* CLOCK_MONOTONIC in nanoseconds / milliseconds: for timeouts and intervals. */
int64_t dt_mono_ns (void);
int64_t dt_mono_ms (void);
/* CLOCK_REALTIME in milliseconds since the epoch: for records. */
int64_t dt_real_ms (void);

/* Parse a duration into milliseconds.  Accepted: "250ms", "90s", "5m",
 * "2h", "1d", a bare number of seconds ("30"), and Slurm's time forms
 * "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS".  Rejects empty,
 * negative, trailing junk and overflow, with err naming the input. */
int dt_parse_duration_ms (const char *s, int64_t *out_ms, dt_error_t *err);

/* Format epoch milliseconds as UTC "2026-11-30T09:01:36.123Z" into buf
 * (at least 32 bytes).  Returns buf. */
char *dt_format_time (int64_t epoch_ms, char *buf, size_t len);

#endif
