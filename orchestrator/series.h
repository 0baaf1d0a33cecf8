/* series.h: downsampling of a job's step series for plots (the web page):
 * a long run answers with a bounded number of points. */
#ifndef DT_SERIES_H
#define DT_SERIES_H

#include <jansson.h>

/* Thin 'points' (an array of metric rows ordered by step, each with an
 * "attempt") in place to at most max_points rows (max_points >= 16):
 * every k-th row of each attempt, and always each attempt's first and last
 * row, so that the plot keeps where every attempt began and ended.
 * Returns the stride k (1: nothing removed). */
int series_downsample (json_t *points, int max_points);

#endif
