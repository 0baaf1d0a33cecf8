/* store_plot.c: a job's step metrics as the text of the metrics route's
 * answer (GET /v1/jobs/ID/metrics, the web page's plots).
 *
 * With max_points the rows are sampled in the database: the first row at
 * or after the start of each bucket of steps (a seek each: no pass over the
 * job's rows), and where the attempt changes between two of them the last
 * row before and the first row after; then thinned to max_points
 * (series.h).  Columns are read straight into C rows and written as text
 * (no JSON tree: for 1,000 points the tree and its dump were most of the
 * time), and the text is kept per (job, max_points) until the store
 * writes that job's metrics again (store_metric_put, store_metrics_thin):
 * dtctld is the database's only writer, so a finished job's page answers
 * from memory.
 */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/series.h"
#include "orchestrator/store_int.h"

void store_plot_forget (store_t *st, int64_t job)
{
    for (int i = 0; i < PLOT_MEMO_SLOTS; i++) {
        struct plot_memo *m = &st->plot[i];
        if (m->job == job) {
            free (m->text);
            *m = (struct plot_memo){ 0 };
        }
    }
}

void store_plot_free (store_t *st)
{
    for (int i = 0; i < PLOT_MEMO_SLOTS; i++)
        free (st->plot[i].text);
}

/* Rows being collected. */
struct rows {
    struct series_row *r;
    size_t n, cap;
};

static int rows_push (struct rows *rs, const struct series_row *row, dt_error_t *err)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 1024;
        struct series_row *p = realloc (rs->r, cap * sizeof (*p));
        if (!p)
            return errnoprintf (err, ENOMEM, "out of memory");
        rs->r = p;
        rs->cap = cap;
    }
    rs->r[rs->n++] = *row;
    return 0;
}

/* The current row of s (step, time, attempt, loss, samples_per_s,
 * compute_ms, comm_ms). */
static struct series_row row_of (sqlite3_stmt *s)
{
    return (struct series_row){
        .step = sqlite3_column_int64 (s, 0),
        .time = sqlite3_column_int64 (s, 1),
        .attempt = sqlite3_column_int64 (s, 2),
        .loss = store_col_real (s, 3),
        .samples_per_s = store_col_real (s, 4),
        .compute_ms = store_col_real (s, 5),
        .comm_ms = store_col_real (s, 6),
    };
}

/* The first row of statement 'which' bound with (job, a) or, for
 * S_METRIC_CHANGE, (job, a, b, c).  1: *out filled, 0: none, -1: error. */
static int row_one (store_t *st, int which, int64_t job, int64_t a, int64_t b, int64_t c,
                    struct series_row *out, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_stmt (st, which, err)) ||
        (which == S_METRIC_CHANGE ? store_bind (st, s, err, "IIII", job, a, b, c)
                                  : store_bind (st, s, err, "II", job, a)) < 0)
        return -1;
    if ((rc = sqlite3_step (s)) == SQLITE_ROW)
        *out = row_of (s);
    sqlite3_reset (s);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return rc == SQLITE_ROW;
    return dt_db_error (st->db, rc, "metric row", err);
}

/* Every row of the job. */
static int rows_all (store_t *st, struct rows *rs, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_stmt (st, S_METRICS_VIEW, err)) ||
        store_bind (st, s, err, "I", job) < 0)
        return -1;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        struct series_row row = row_of (s);
        if (rows_push (rs, &row, err) < 0) {
            sqlite3_reset (s);
            return -1;
        }
    }
    sqlite3_reset (s);
    return rc == SQLITE_DONE ? 0 : dt_db_error (st->db, rc, "metrics view", err);
}

/* The sampled rows of a job with more than max_points rows in lo..hi. */
static int rows_sampled (store_t *st, struct rows *rs, int64_t job, int max_points,
                         int64_t lo, int64_t hi, int64_t *bucket, dt_error_t *err)
{
    /* three quarters of max_points leave room for the attempts' ends */
    int64_t budget = max_points * 3 / 4;
    struct series_row row, last = { 0 }, ch, prev;
    bool have_last = false;
    int rc;

    *bucket = (hi - lo + budget) / budget;
    for (int64_t from = lo; from <= hi;) {
        if ((rc = row_one (st, S_METRIC_AT, job, from, 0, 0, &row, err)) <= 0) {
            if (rc < 0)
                return -1;
            break;
        }
        /* The attempt changed between two samples: the last row of the
         * one and the first of the next. */
        if (have_last && last.attempt != row.attempt) {
            int got_ch, got_prev;
            if ((got_ch = row_one (st, S_METRIC_CHANGE, job, last.step, row.step,
                                   last.attempt, &ch, err)) < 0 ||
                (got_prev = row_one (st, S_METRIC_BEFORE, job,
                                     got_ch ? ch.step : row.step, 0, 0, &prev, err)) < 0)
                return -1;
            if (got_prev && prev.step != last.step && rows_push (rs, &prev, err) < 0)
                return -1;
            if (got_ch && rows_push (rs, &ch, err) < 0)
                return -1;
        }
        if (rows_push (rs, &row, err) < 0)
            return -1;
        last = row;
        have_last = true;
        from = lo + ((row.step - lo) / *bucket + 1) * *bucket;
    }
    /* and the last row of all */
    if (have_last && last.step != hi) {
        if ((rc = row_one (st, S_METRIC_AT, job, hi, 0, 0, &row, err)) < 0 ||
            (rc > 0 && rows_push (rs, &row, err) < 0))
            return -1;
    }
    return 0;
}

char *store_metrics_text (store_t *st, int64_t job, int max_points, size_t *len,
                          dt_error_t *err)
{
    struct plot_memo *slot = NULL;
    struct rows rs = { 0 };
    int64_t total = 0, lo = 0, hi = -1, bucket = 1;
    sqlite3_stmt *s;
    char *text = NULL;
    size_t n = 0;
    FILE *f;
    int rc;

    if (max_points > 0) {
        slot = &st->plot[0];
        for (int i = 0; i < PLOT_MEMO_SLOTS; i++) {
            struct plot_memo *m = &st->plot[i];
            if (m->job == job && m->max_points == max_points) {
                m->used = ++st->plot_clock;
                if (!(text = malloc (m->len + 1)))
                    return errnoprintf (err, ENOMEM, "out of memory"), NULL;
                memcpy (text, m->text, m->len + 1);
                *len = m->len;
                return text;
            }
            if (m->used < slot->used)
                slot = m;
        }
    }
    if (!(s = store_stmt (st, S_METRICS_RANGE, err)) ||
        store_bind (st, s, err, "I", job) < 0)
        return NULL;
    if ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        total = sqlite3_column_int64 (s, 0);
        lo = sqlite3_column_int64 (s, 1);
        hi = sqlite3_column_int64 (s, 2);
    }
    sqlite3_reset (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return dt_db_error (st->db, rc, "metrics range", err), NULL;
    if (max_points > 0 && total > max_points)
        rc = rows_sampled (st, &rs, job, max_points, lo, hi, &bucket, err);
    else
        rc = rows_all (st, &rs, job, err);
    int stride = rc < 0 ? -1 : max_points > 0 ? series_thin (rs.r, &rs.n, max_points) : 1;
    if (rc < 0 || stride < 0 || !(f = open_memstream (&text, &n))) {
        free (rs.r);
        if (rc >= 0)
            errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    fprintf (f, "{\"job\":%lld,\"points\":", (long long)job);
    series_json (f, rs.r, rs.n);
    fprintf (f, ",\"total\":%lld,\"stride\":%lld}", (long long)total,
             (long long)(bucket * stride));
    free (rs.r);
    if (fclose (f) != 0) {
        free (text);
        return errnoprintf (err, ENOMEM, "out of memory"), NULL;
    }
    *len = n;
    if (slot) {
        char *copy = malloc (n + 1);
        if (copy) {
            memcpy (copy, text, n + 1);
            free (slot->text);
            *slot = (struct plot_memo){ .job = job,
                                        .max_points = max_points,
                                        .text = copy,
                                        .len = n,
                                        .used = ++st->plot_clock };
        }
    }
    return text;
}
