/* series.h: downsampling of a job's step series for plots (the web page):
 * a long run answers with a bounded number of points. */
#ifndef DT_SERIES_H
#define DT_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* One metric row (the metrics table, schemas/001-initial.sql); NAN: null. */
struct series_row {
    int64_t step, time; /* time: epoch ms */
    int64_t attempt;
    double loss, samples_per_s, compute_ms, comm_ms;
};

/* Which of n rows ordered by step (attempt[i]: row i's attempt) to keep
 * for at most max_points (>= 16): every k-th row of each attempt, and
 * always each attempt's first and last row, so that the plot keeps where
 * every attempt began and ended.  Fills keep[0..n) and returns the stride
 * k (1: every row kept). */
int series_keep (const int64_t *attempt, size_t n, int max_points, bool *keep);

/* series_keep on 'points', a JSON array of rows with an "attempt", thinned
 * in place.  Returns the stride k. */
int series_downsample (json_t *points, int max_points);

/* series_keep on rows[0..*n), thinned in place (*n updated).  Returns the
 * stride k, or -1 out of memory (rows untouched). */
int series_thin (struct series_row *rows, size_t *n, int max_points);

/* Append rows[0..n) to the open memory stream f as a JSON array of
 * {"step", "time" (ISO 8601, as every time of the API), "attempt", "loss",
 * "samples_per_s", "compute_ms", "comm_ms"}, numbers written as jansson
 * writes them (so the text equals the JSON tree's dump). */
void series_json (FILE *f, const struct series_row *rows, size_t n);

#endif
