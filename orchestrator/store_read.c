/* store_read.c: loading the rows of live jobs and attempts (start-up,
 * tokens) and the API's views (jobs, events, checkpoints, metrics, ranks,
 * counts), as JSON built from the rows. */
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
#include "orchestrator/sha256.h"
#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

/* The jobs list is built at run time from the filters (all values bound). */
static const char *const sql_jobs_list_head = "SELECT id FROM jobs WHERE 1";

/* --- reads ----------------------------------------------------------------- */

int store_attempt_by_token (store_t *st, const char *token, int64_t *job, int *attempt,
                            enum attempt_state *state, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    char hash[65];
    sha256_hex (token, strlen (token), hash);
    if (!(s = store_stmt (st, S_ATT_BY_TOKEN, err)) ||
        store_bind (st, s, err, "S", hash) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        char buf[32];
        *job = sqlite3_column_int64 (s, 0);
        *attempt = sqlite3_column_int (s, 1);
        store_col_str (s, 2, buf, sizeof (buf));
        *state = fsm_attempt_state_parse (buf);
        sqlite3_reset (s);
        return 0;
    }
    sqlite3_reset (s);
    if (rc == SQLITE_DONE)
        return errnoprintf (err, ENOENT, "unknown token");
    return dt_db_error (st->db, rc, "token lookup", err);
}

int store_job_load (store_t *st, int64_t id, struct store_job_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    char buf[32];

    store_job_row_init (r);
    if (!(s = store_stmt (st, S_JOB_LOAD, err)) || store_bind (st, s, err, "I", id) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        if (rc == SQLITE_DONE)
            return errnoprintf (err, ENOENT, "job %lld not found", (long long)id);
        return dt_db_error (st->db, rc, "load job", err);
    }
    r->id = sqlite3_column_int64 (s, 0);
    store_col_str (s, 1, r->name, sizeof (r->name));
    r->uid = sqlite3_column_int64 (s, 2);
    r->gid = sqlite3_column_int64 (s, 3);
    store_col_str (s, 4, r->user, sizeof (r->user));
    store_col_str (s, 5, buf, sizeof (buf));
    r->state = fsm_job_state_parse (buf);
    store_col_str (s, 6, r->reason, sizeof (r->reason));
    r->spec = store_col_json (s, 7);
    r->submit_time = store_col_int (s, 8, 0);
    r->start_time = store_col_int (s, 9, 0);
    r->end_time = store_col_int (s, 10, 0);
    r->attempts = sqlite3_column_int (s, 11);
    r->restarts = sqlite3_column_int (s, 12);
    r->exclude = store_col_json (s, 13);
    r->last_step = store_col_int (s, 14, -1);
    r->last_loss = store_col_real (s, 15);
    r->throughput = store_col_real (s, 16);
    r->metrics_stride = store_col_int (s, 17, 1);
    r->failure = store_col_json (s, 18);
    r->result = store_col_json (s, 19);
    sqlite3_reset (s);
    if (!r->exclude)
        r->exclude = json_array ();
    if (!r->spec || (int)r->state < 0) {
        store_job_row_clear (r);
        return errnoprintf (err, EILSEQ, "job %lld: corrupt row", (long long)id);
    }
    return 0;
}

int store_attempt_load (store_t *st, int64_t job, int attempt,
                        struct store_attempt_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    char buf[32];

    store_attempt_row_init (r);
    if (!(s = store_stmt (st, S_ATT_LOAD, err)) ||
        store_bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        if (rc == SQLITE_DONE)
            return errnoprintf (err, ENOENT, "attempt %lld.%d not found", (long long)job,
                                attempt);
        return dt_db_error (st->db, rc, "load attempt", err);
    }
    r->job_id = sqlite3_column_int64 (s, 0);
    r->attempt = sqlite3_column_int (s, 1);
    store_col_str (s, 2, buf, sizeof (buf));
    r->state = fsm_attempt_state_parse (buf);
    r->token[0] = '\0'; /* only its hash is stored */
    store_col_str (s, 3, r->token_sha256, sizeof (r->token_sha256));
    store_col_str (s, 4, r->launcher, sizeof (r->launcher));
    store_col_str (s, 5, r->handle, sizeof (r->handle));
    r->slurm_job_id = store_col_int (s, 6, 0);
    store_col_str (s, 7, r->batch_host, sizeof (r->batch_host));
    store_col_str (s, 8, r->nodelist, sizeof (r->nodelist));
    r->num_nodes = sqlite3_column_int (s, 9);
    r->spare_nodes = sqlite3_column_int (s, 10);
    r->ranks_per_node = sqlite3_column_int (s, 11);
    r->world_size = sqlite3_column_int (s, 12);
    r->exclude = store_col_json (s, 13);
    r->resume_step = store_col_int (s, 14, -1);
    store_col_str (s, 15, r->resume_dir, sizeof (r->resume_dir));
    store_col_str (s, 16, r->resume_sha256, sizeof (r->resume_sha256));
    store_col_str (s, 17, r->master_addr, sizeof (r->master_addr));
    r->master_port = store_col_int (s, 18, 0);
    store_col_str (s, 19, r->cause, sizeof (r->cause));
    store_col_str (s, 20, r->cause_node, sizeof (r->cause_node));
    r->cause_rank = store_col_int (s, 21, -1);
    store_col_str (s, 22, r->detail, sizeof (r->detail));
    r->evidence = store_col_json (s, 23);
    r->fail_time = store_col_int (s, 24, 0);
    r->exit_code = store_col_int (s, 25, -1);
    r->submit_time = store_col_int (s, 26, 0);
    r->start_time = store_col_int (s, 27, 0);
    r->end_time = store_col_int (s, 28, 0);
    r->provenance = store_col_json (s, 29);
    store_col_str (s, 30, r->restart_path, sizeof (r->restart_path));
    r->model_flops = store_col_real (s, 31);
    r->peak_flops = store_col_real (s, 32);
    store_col_str (s, 33, r->peak_source, sizeof (r->peak_source));
    r->tp = store_col_int (s, 34, 0);
    r->pp = store_col_int (s, 35, 0);
    sqlite3_reset (s);
    if (!r->exclude)
        r->exclude = json_array ();
    if ((int)r->state < 0) {
        store_attempt_row_clear (r);
        return errnoprintf (err, EILSEQ, "attempt %lld.%d: corrupt row", (long long)job,
                            attempt);
    }
    return 0;
}

int store_live_jobs (store_t *st, int64_t **ids, int *n, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc, cap = 0;

    *ids = NULL;
    *n = 0;
    if (!(s = store_stmt (st, S_LIVE_JOBS, err)))
        return -1;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *p = realloc (*ids, cap * sizeof (**ids));
            if (!p) {
                sqlite3_reset (s);
                free (*ids);
                *ids = NULL;
                return errnoprintf (err, ENOMEM, "out of memory");
            }
            *ids = p;
        }
        (*ids)[(*n)++] = sqlite3_column_int64 (s, 0);
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE) {
        free (*ids);
        *ids = NULL;
        *n = 0;
        return dt_db_error (st->db, rc, "live jobs", err);
    }
    return 0;
}

json_t *store_job_json (store_t *st, int64_t id, bool with_attempts, dt_error_t *err)
{
    return store_job_view (st, id, with_attempts, -1, err);
}

json_t *store_job_view (store_t *st, int64_t id, bool with_attempts, int nodes_max,
                        dt_error_t *err)
{
    sqlite3_stmt *s;
    json_t *job, *atts;
    int rc;

    if (!(s = store_stmt (st, S_JOB_VIEW, err)) || store_bind (st, s, err, "I", id) < 0)
        return NULL;
    rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        if (rc == SQLITE_DONE)
            errnoprintf (err, ENOENT, "job %lld not found", (long long)id);
        else
            dt_db_error (st->db, rc, "job view", err);
        return NULL;
    }
    job = store_row_json (s);
    sqlite3_reset (s);
    if (!with_attempts)
        return job;

    if (!(s = store_stmt (st, S_ATT_VIEW, err)) ||
        store_bind (st, s, err, "III", id,
                    nodes_max < 0 ? (int64_t)-1 : (int64_t)nodes_max,
                    (int64_t)PROV_MEMO_MIN_BYTES) < 0 ||
        !(atts = store_rows_json (st, s, "attempt view", err))) {
        json_decref (job);
        return NULL;
    }
    size_t i;
    json_t *a;
    json_array_foreach (atts, i, a)
    {
        json_t *nodes, *prov, *pn;
        int n = json_integer_value (json_object_get (a, "attempt"));
        if (!(s = store_stmt (st, S_ATTNODES_VIEW, err)) ||
            store_bind (st, s, err, "III", id, (int64_t)n,
                        nodes_max < 0 ? (int64_t)-1 : (int64_t)nodes_max + 1) < 0 ||
            !(nodes = store_rows_json (st, s, "attempt nodes view", err))) {
            json_decref (atts);
            json_decref (job);
            return NULL;
        }
        /* A huge attempt: its first nodes only (the answer stays
         * small; every rank and its node is at /v1/jobs/{id}/ranks). */
        if (nodes_max >= 0 && json_array_size (nodes) > (size_t)nodes_max) {
            json_array_remove (nodes, nodes_max);
            json_object_set_new (a, "nodes_truncated", json_true ());
        }
        json_object_set_new (a, "nodes", nodes);
        if (json_integer_value (json_object_get (a, "provenance_big"))) {
            json_t *p = store_prov_memo_get (st, id, n, nodes_max, err);
            if (!p) {
                json_decref (atts);
                json_decref (job);
                return NULL;
            }
            json_object_set_new (a, "provenance", p);
        }
        json_object_del (a, "provenance_big");
        prov = json_object_get (json_object_get (a, "provenance"), "machine");
        if (nodes_max >= 0 && (pn = json_object_get (prov, "nodes")) &&
            json_array_size (pn) > (size_t)nodes_max) {
            while (json_array_size (pn) > (size_t)nodes_max)
                json_array_remove (pn, json_array_size (pn) - 1);
            json_object_set_new (prov, "nodes_truncated", json_true ());
        }
    }
    json_object_set_new (job, "attempts", atts);
    return job;
}

json_t *store_jobs_json (store_t *st, const char *state, long uid, const char *name,
                         int limit, dt_error_t *err)
{
    char q[512];
    sqlite3_stmt *s = NULL;
    json_t *out = NULL;
    int rc, i = 1;

    /* Only fixed SQL text with bound parameters: the filters never reach
     * the SQL string. */
    snprintf (q, sizeof (q), "%s%s%s%s ORDER BY id DESC LIMIT ?", sql_jobs_list_head,
              state ? " AND state = ?" : "", uid >= 0 ? " AND uid = ?" : "",
              name ? " AND name = ?" : "");
    if (dt_db_prepare (st->db, q, &s, err) < 0)
        return NULL;
    if (state)
        sqlite3_bind_text (s, i++, state, -1, SQLITE_TRANSIENT);
    if (uid >= 0)
        sqlite3_bind_int64 (s, i++, uid);
    if (name)
        sqlite3_bind_text (s, i++, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int (s, i++, limit);

    if (!(out = json_array ()))
        goto done;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        json_t *j;
        int64_t id = sqlite3_column_int64 (s, 0);
        if (!(j = store_job_json (st, id, false, err))) {
            json_decref (out);
            out = NULL;
            goto done;
        }
        json_array_append_new (out, j);
    }
    if (rc != SQLITE_DONE) {
        dt_db_error (st->db, rc, "list jobs", err);
        json_decref (out);
        out = NULL;
    }
done:
    sqlite3_finalize (s);
    return out;
}

json_t *store_events_json (store_t *st, int64_t job, int64_t after, int limit,
                           dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_EVENTS_VIEW, err)) ||
        store_bind (st, s, err, "III", job, after, (int64_t)limit) < 0)
        return NULL;
    return store_rows_json (st, s, "events view", err);
}

json_t *store_ckpts_json (store_t *st, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_CKPTS_VIEW, err)) ||
        store_bind (st, s, err, "I", job) < 0)
        return NULL;
    return store_rows_json (st, s, "checkpoints view", err);
}

json_t *store_metrics_json (store_t *st, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_METRICS_VIEW, err)) ||
        store_bind (st, s, err, "I", job) < 0)
        return NULL;
    return store_rows_json (st, s, "metrics view", err);
}

json_t *store_ranks_json (store_t *st, int64_t job, int attempt, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_RANKS_VIEW, err)) ||
        store_bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return NULL;
    return store_rows_json (st, s, "ranks view", err);
}

json_t *store_nodes_json (store_t *st, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_NODES_VIEW, err)))
        return NULL;
    return store_rows_json (st, s, "nodes view", err);
}

/* {"jobs": {state: n}, "attempts": {state: n}, "failures": {cause: n},
 *  "checkpoints_committed": n} */
json_t *store_counts_json (store_t *st, dt_error_t *err)
{
    static const struct {
        enum stmt_id id;
        const char *key;
    } groups[] = {
        { S_JOB_COUNTS, "jobs" },
        { S_ATT_COUNTS, "attempts" },
        { S_FAIL_COUNTS, "failures" },
    };
    json_t *out = json_object ();
    sqlite3_stmt *s;
    int64_t n = 0;

    for (size_t g = 0; g < sizeof (groups) / sizeof (groups[0]); g++) {
        json_t *o = json_object ();
        int rc;
        if (!(s = store_stmt (st, groups[g].id, err)))
            goto error;
        while ((rc = sqlite3_step (s)) == SQLITE_ROW)
            json_object_set_new (o, (const char *)sqlite3_column_text (s, 0),
                                 json_integer (sqlite3_column_int64 (s, 1)));
        sqlite3_reset (s);
        json_object_set_new (out, groups[g].key, o);
        if (rc != SQLITE_DONE) {
            dt_db_error (st->db, rc, "counts", err);
            goto error;
        }
    }
    if (!(s = store_stmt (st, S_CKPT_COUNT, err)) ||
        store_query_int64 (st, s, 0, &n, "count checkpoints", err) < 0)
        goto error;
    json_object_set_new (out, "checkpoints_committed", json_integer (n));
    return out;
error:
    json_decref (out);
    return NULL;
}
