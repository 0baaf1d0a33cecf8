/* out.c: output helpers of dtctl (JSON lookups, formatting, tables). */
#include <config.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

static void *xcalloc (size_t n, size_t size)
{
    void *p = calloc (n, size);
    if (!p)
        ctl_die (CTL_EXIT_USAGE, "out of memory");
    return p;
}

static json_t *jget_one (const json_t *v, const char *path, size_t len)
{
    char key[128];

    while (v && len > 0) {
        const char *dot = memchr (path, '.', len);
        size_t n = dot ? (size_t)(dot - path) : len;
        if (n >= sizeof (key))
            return NULL;
        memcpy (key, path, n);
        key[n] = '\0';
        v = json_object_get (v, key);
        if (!dot)
            break;
        len -= n + 1;
        path = dot + 1;
    }
    return json_is_null (v) ? NULL : (json_t *)v;
}

json_t *jget (const json_t *v, const char *path)
{
    while (v && path && *path) {
        const char *bar = strchr (path, '|');
        size_t n = bar ? (size_t)(bar - path) : strlen (path);
        json_t *r = jget_one (v, path, n);
        if (r)
            return r;
        path = bar ? bar + 1 : NULL;
    }
    return NULL;
}

const char *jfmt (const json_t *v, const char *real_fmt, char *buf, size_t len)
{
    if (!v || json_is_null (v))
        snprintf (buf, len, "-");
    else if (json_is_string (v))
        snprintf (buf, len, "%s", json_string_value (v));
    else if (json_is_integer (v))
        snprintf (buf, len, "%lld", (long long)json_integer_value (v));
    else if (json_is_real (v))
        snprintf (buf, len, real_fmt ? real_fmt : "%.4g", json_real_value (v));
    else if (json_is_boolean (v))
        snprintf (buf, len, "%s", json_is_true (v) ? "yes" : "no");
    else if (json_is_array (v)) {
        size_t i, off = 0;
        json_t *e;
        buf[0] = '\0';
        if (json_array_size (v) == 0)
            snprintf (buf, len, "-");
        json_array_foreach (v, i, e)
        {
            char one[256];
            if (json_is_object (e))
                jfmt (jget (e, "name|node|id"), real_fmt, one, sizeof (one));
            else
                jfmt (e, real_fmt, one, sizeof (one));
            if (off < len)
                off += (size_t)snprintf (buf + off, len - off, "%s%s", i ? "," : "", one);
        }
    }
    else {
        char *s = json_dumps (v, JSON_COMPACT);
        snprintf (buf, len, "%s", s ? s : "?");
        free (s);
    }
    return buf;
}

const char *jtext (const json_t *obj, const char *path, char *buf, size_t len)
{
    return jfmt (jget (obj, path), NULL, buf, len);
}

int64_t jtime_ms (const json_t *v)
{
    if (json_is_integer (v) || json_is_real (v)) {
        double x = json_number_value (v);
        if (x <= 0)
            return -1;
        return x < 1e11 ? (int64_t)(x * 1000) : (int64_t)x;
    }
    if (json_is_string (v)) {
        const char *s = json_string_value (v);
        struct tm tm;
        const char *rest;
        int64_t ms = 0;

        memset (&tm, 0, sizeof (tm));
        if (!(rest = strptime (s, "%Y-%m-%dT%H:%M:%S", &tm)) &&
            !(rest = strptime (s, "%Y-%m-%d %H:%M:%S", &tm)))
            return -1;
        if (*rest == '.') {
            int digits = 0;
            for (rest++; *rest >= '0' && *rest <= '9'; rest++) {
                if (digits < 3)
                    ms = ms * 10 + (*rest - '0');
                digits++;
            }
            while (digits++ < 3)
                ms *= 10;
        }
        return (int64_t)timegm (&tm) * 1000 + ms;
    }
    return -1;
}

const char *fmt_age (int64_t ms, char *buf, size_t len)
{
    int64_t s = ms / 1000;

    if (ms < 0)
        snprintf (buf, len, "-");
    else if (s < 60)
        snprintf (buf, len, "%llds", (long long)s);
    else if (s < 3600)
        snprintf (buf, len, "%lldm", (long long)(s / 60));
    else if (s < 86400)
        snprintf (buf, len, "%lldh%02lldm", (long long)(s / 3600),
                  (long long)(s % 3600 / 60));
    else
        snprintf (buf, len, "%lldd%02lldh", (long long)(s / 86400),
                  (long long)(s % 86400 / 3600));
    return buf;
}

const char *fmt_secs (double s, char *buf, size_t len)
{
    if (s < 0)
        snprintf (buf, len, "-");
    else if (s < 10)
        snprintf (buf, len, "%.3gs", s);
    else if (s < 60)
        snprintf (buf, len, "%.1fs", s);
    else if (s < 3600)
        snprintf (buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf (buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
    return buf;
}

const char *fmt_when (const json_t *obj, const char *path, char *buf, size_t len)
{
    int64_t ms = jtime_ms (jget (obj, path));
    time_t t;
    struct tm tm;

    if (ms < 0)
        return jtext (obj, path, buf, len);
    t = (time_t)(ms / 1000);
    gmtime_r (&t, &tm);
    strftime (buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void out_json (const json_t *v)
{
    json_dumpf (v, stdout, JSON_INDENT (2) | JSON_ENCODE_ANY);
    fputc ('\n', stdout);
}

struct table {
    int ncols;
    size_t nrows, cap;
    char **cells; /* (nrows + 1) * ncols, row 0 = headers */
};

struct table *table_create (int ncols, const char *const headers[])
{
    struct table *t = xcalloc (1, sizeof (*t));
    t->ncols = ncols;
    table_add (t, headers);
    return t;
}

void table_add (struct table *t, const char *const cells[])
{
    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        if (!(t->cells = realloc (t->cells, t->cap * (size_t)t->ncols * sizeof (char *))))
            ctl_die (CTL_EXIT_USAGE, "out of memory");
    }
    for (int c = 0; c < t->ncols; c++) {
        const char *s = cells[c] ? cells[c] : "-";
        if (!(t->cells[t->nrows * (size_t)t->ncols + (size_t)c] = strdup (*s ? s : "-")))
            ctl_die (CTL_EXIT_USAGE, "out of memory");
    }
    t->nrows++;
}

void table_print (struct table *t, FILE *f, int indent)
{
    size_t *w = xcalloc ((size_t)t->ncols, sizeof (size_t));

    for (size_t r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            size_t n = strlen (t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (n > w[c])
                w[c] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        fprintf (f, "%*s", indent, "");
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c == t->ncols - 1)
                fprintf (f, "%s\n", s);
            else
                fprintf (f, "%-*s  ", (int)w[c], s);
        }
    }
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free (t->cells[i]);
    free (t->cells);
    free (w);
    free (t);
}

int64_t now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
