/* out.h: output helpers of dtctl: JSON lookups, formatting, tables. */
#ifndef DTCTL_OUT_H
#define DTCTL_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

/* Member at a dotted path ("checkpoint.every_steps"); alternatives are
 * separated by '|' ("submit_time|created"), the first present one wins.
 * Borrowed; NULL if absent or JSON null. */
json_t *jget (const json_t *v, const char *path);

/* A scalar as text into buf: strings as they are, integers in decimal,
 * reals with 'real_fmt' (NULL: "%.4g"), booleans yes/no, absent or null
 * as "-", arrays of scalars joined by ','.  Returns buf. */
const char *jfmt (const json_t *v, const char *real_fmt, char *buf, size_t len);

/* jfmt of jget (obj, path). */
const char *jtext (const json_t *obj, const char *path, char *buf, size_t len);

/* A time as epoch milliseconds: accepts an ISO-8601 UTC string
 * ("2026-01-02T03:04:05.678Z") or a number (seconds if below 1e11, else
 * milliseconds).  -1 if absent or unparsable. */
int64_t jtime_ms (const json_t *v);

/* "45s", "12m", "3h05m", "2d04h" into buf; "-" when ms < 0. */
const char *fmt_age (int64_t ms, char *buf, size_t len);

/* Seconds as "1.25s", "3m12s", "2h03m". */
const char *fmt_secs (double s, char *buf, size_t len);

/* An ISO time of jget (obj, path) shortened for tables ("01-02 03:04:05"),
 * or "-". */
const char *fmt_when (const json_t *obj, const char *path, char *buf, size_t len);

/* Print 'v' as indented JSON followed by a newline. */
void out_json (const json_t *v);

/* A left-aligned text table, columns sized to their widest cell. */
struct table;
struct table *table_create (int ncols, const char *const headers[]);
/* Add one row of ncols cells (copied). */
void table_add (struct table *t, const char *const cells[]);
/* Print with 'indent' spaces before each line, then free the table. */
void table_print (struct table *t, FILE *f, int indent);

/* Current time in epoch milliseconds. */
int64_t now_ms (void);

#endif
