/* store_report.c: the rows of the goodput accounting (report.c): what
 * heartbeats taught per attempt, and the facts of an attempt's timeline
 * that only its events hold. */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/db.h"
#include "common/dtime.h"
#include "common/jsonx.h"
#include "common/log.h"
#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

/* --- goodput (report.c) ---------------------------------------------------- */

static const char *const dim_names[3] = { "tp", "pp", "dp" };

/* The comm_dims column of 'g': its means per step (new), NULL none. */
static json_t *dims_encode (const struct store_goodput_row *g)
{
    if (g->dims_steps <= 0)
        return NULL;
    json_t *o = json_pack ("{s:I}", "steps", (json_int_t)g->dims_steps);
    for (int d = 0; o && d < 3; d++) {
        const double *x = &g->dims_sum[3 * d];
        double n = (double)g->dims_steps;
        json_object_set_new (o, dim_names[d],
                             json_pack ("{s:f s:f s:f}", "bytes", x[0] / n, "comm_ms",
                                        x[1] / n, "exposed_ms", x[2] / n));
    }
    return o;
}

/* The sums of 'g' back from a comm_dims column's text (NULL: none). */
static void dims_decode (struct store_goodput_row *g, const char *text)
{
    json_t *o = text ? json_loads (text, 0, NULL) : NULL;
    json_int_t n = json_integer_value (json_object_get (o, "steps"));
    memset (g->dims_sum, 0, sizeof (g->dims_sum));
    g->dims_steps = n > 0 ? n : 0;
    for (int d = 0; g->dims_steps && d < 3; d++) {
        json_t *x = json_object_get (o, dim_names[d]);
        g->dims_sum[3 * d] = json_number_value (json_object_get (x, "bytes")) * n;
        g->dims_sum[3 * d + 1] = json_number_value (json_object_get (x, "comm_ms")) * n;
        g->dims_sum[3 * d + 2] =
          json_number_value (json_object_get (x, "exposed_ms")) * n;
    }
    json_decref (o);
}

int store_goodput_put (store_t *st, const struct store_goodput_row *g, const char *hist,
                       dt_error_t *err)
{
    sqlite3_stmt *s;
    json_t *dims = dims_encode (g);
    int rc = -1;
    if ((s = store_stmt (st, S_GOODPUT_PUT, err)) &&
        store_bind (st, s, err, "IITNTNTIIIDTsIJ", g->job_id, (int64_t)g->attempt,
                    g->train_start, g->first_step, g->first_step_time, g->last_step,
                    g->last_step_time, g->hb_samples, g->busy_samples, g->step_samples,
                    g->step_ms_sum, g->batch_samples, hist, dt_real_ms (), dims) == 0)
        rc = store_run (st, s, "attempt_goodput", err);
    json_decref (dims);
    return rc;
}

int store_goodput_load (store_t *st, int64_t job, int attempt,
                        struct store_goodput_row *g, char **hist, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;

    *hist = NULL;
    if (!(s = store_stmt (st, S_GOODPUT_LOAD, err)) ||
        store_bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text (s, 10);
        g->job_id = job;
        g->attempt = attempt;
        g->train_start = store_col_int (s, 0, 0);
        g->first_step = store_col_int (s, 1, -1);
        g->first_step_time = store_col_int (s, 2, 0);
        g->last_step = store_col_int (s, 3, -1);
        g->last_step_time = store_col_int (s, 4, 0);
        g->hb_samples = store_col_int (s, 5, 0);
        g->busy_samples = store_col_int (s, 6, 0);
        g->step_samples = store_col_int (s, 7, 0);
        g->step_ms_sum = sqlite3_column_double (s, 8);
        g->batch_samples = store_col_int (s, 9, 0);
        dims_decode (g, (const char *)sqlite3_column_text (s, 11));
        if (h && !(*hist = strdup ((const char *)h))) {
            sqlite3_reset (s);
            return errnoprintf (err, ENOMEM, "out of memory");
        }
        sqlite3_reset (s);
        return 1;
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE)
        return dt_db_error (st->db, rc, "attempt_goodput", err);
    return 0;
}

/* One integer of a one-row aggregate over (job, attempt); NULL -> 'dflt'. */
static int attempt_aggregate (store_t *st, enum stmt_id id, int64_t job, int attempt,
                              int64_t dflt, int64_t *out, const char *what,
                              dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;

    *out = dflt;
    if (!(s = store_stmt (st, id, err)) ||
        store_bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW)
        *out = store_col_int (s, 0, dflt);
    sqlite3_reset (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return dt_db_error (st->db, rc, what, err);
    return 0;
}

int store_attempt_timeline (store_t *st, int64_t job, int attempt,
                            struct store_attempt_timeline *t, dt_error_t *err)
{
    int64_t n;
    if (attempt_aggregate (st, S_ATT_LEFT_QUEUE, job, attempt, 0, &t->left_queue,
                           "attempt left the queue", err) < 0 ||
        attempt_aggregate (st, S_ATT_RESUBMITTED, job, attempt, 0, &n,
                           "attempt resubmitted", err) < 0 ||
        attempt_aggregate (st, S_ATT_RESULT_TIME, job, attempt, 0, &t->result_time,
                           "attempt result time", err) < 0)
        return -1;
    t->resubmitted = attempt > 1 && n > 0;
    return 0;
}
