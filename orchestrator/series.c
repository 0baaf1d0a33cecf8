/* series.c: downsampling of step series (see series.h). */
#include <config.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "orchestrator/series.h"

int series_keep (const int64_t *attempt, size_t n, int max_points, bool *keep)
{
    size_t nattempts = 0, budget, k, kept = 0;

    if (max_points < 16 || n <= (size_t)max_points) {
        for (size_t i = 0; i < n; i++)
            keep[i] = true;
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        if (i == 0 || attempt[i] != attempt[i - 1])
            nattempts++;
    /* The first and last rows of each attempt come on top of the stride. */
    budget = (size_t)max_points > 2 * nattempts + 8 ? max_points - 2 * nattempts : 8;
    k = (n + budget - 1) / budget;
    size_t pos = 0; /* index within the current attempt */
    for (size_t i = 0; i < n; i++) {
        bool first = i == 0 || attempt[i] != attempt[i - 1];
        bool last = i + 1 == n || attempt[i] != attempt[i + 1];
        if (first)
            pos = 0;
        keep[i] = (first || last || pos % k == 0) && kept < (size_t)max_points;
        if (keep[i])
            kept++;
        pos++;
    }
    return (int)k;
}

int series_downsample (json_t *points, int max_points)
{
    size_t n = json_array_size (points);
    int64_t *att;
    bool *keep;
    json_t *out;
    int k;

    if (max_points < 16 || n <= (size_t)max_points)
        return 1;
    att = malloc (n * sizeof (*att));
    keep = malloc (n * sizeof (*keep));
    if (!att || !keep || !(out = json_array ())) {
        free (att);
        free (keep);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        att[i] =
          json_integer_value (json_object_get (json_array_get (points, i), "attempt"));
    k = series_keep (att, n, max_points, keep);
    for (size_t i = 0; i < n; i++)
        if (keep[i])
            json_array_append (out, json_array_get (points, i));
    json_array_clear (points);
    json_array_extend (points, out);
    json_decref (out);
    free (att);
    free (keep);
    return k;
}

int series_thin (struct series_row *rows, size_t *n, int max_points)
{
    int64_t *att;
    bool *keep;
    size_t m = 0;
    int k;

    if (max_points < 16 || *n <= (size_t)max_points)
        return 1;
    att = malloc (*n * sizeof (*att));
    keep = malloc (*n * sizeof (*keep));
    if (!att || !keep) {
        free (att);
        free (keep);
        return -1;
    }
    for (size_t i = 0; i < *n; i++)
        att[i] = rows[i].attempt;
    k = series_keep (att, *n, max_points, keep);
    for (size_t i = 0; i < *n; i++)
        if (keep[i])
            rows[m++] = rows[i];
    *n = m;
    free (att);
    free (keep);
    return k;
}

/* A real as jansson dumps it: %.17g, with ".0" when it would read as an
 * integer, the exponent without '+' or leading zeros; NAN as null. */
static void put_real (FILE *f, const char *key, double v)
{
    char buf[40];
    if (isnan (v) || isinf (v)) {
        fprintf (f, ",\"%s\":null", key);
        return;
    }
    snprintf (buf, sizeof (buf), "%.17g", v);
    for (char *p = buf; *p; p++)
        if (*p == ',')
            *p = '.'; /* a locale's decimal comma */
    char *e = strchr (buf, 'e');
    if (e) {
        char *from = e + 1, *to = e + 1;
        if (*from == '-')
            *to++ = *from++;
        else if (*from == '+')
            from++;
        while (*from == '0' && from[1])
            from++;
        memmove (to, from, strlen (from) + 1);
    }
    bool integral = !strpbrk (buf, ".e");
    fprintf (f, ",\"%s\":%s%s", key, buf, integral ? ".0" : "");
}

void series_json (FILE *f, const struct series_row *rows, size_t n)
{
    char tb[40];
    fputc ('[', f);
    for (size_t i = 0; i < n; i++) {
        const struct series_row *r = &rows[i];
        fprintf (f, "%s{\"step\":%lld,\"time\":\"%s\",\"attempt\":%lld", i ? "," : "",
                 (long long)r->step, dt_format_time (r->time, tb, sizeof (tb)),
                 (long long)r->attempt);
        put_real (f, "loss", r->loss);
        put_real (f, "samples_per_s", r->samples_per_s);
        put_real (f, "compute_ms", r->compute_ms);
        put_real (f, "comm_ms", r->comm_ms);
        fputc ('}', f);
    }
    fputc (']', f);
}
