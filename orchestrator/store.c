/* store.c: all SQL of dtctld (see store.h), in five files: store_sql.c
 * (the statements), this one (opening, transactions, the statement
 * helpers, and the writes of jobs, attempts, ranks and metrics),
 * store_ckpt.c (checkpoints), store_node.c (nodes and their health),
 * store_read.c (loading rows and the API's views) and store_report.c (the
 * goodput accounting's rows). */
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
#include "orchestrator/ftpolicy.h"
#include "orchestrator/sha256.h"
#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

/* Generated at build time from schemas/NNN-*.sql (schema_sql.c). */
extern const char store_sql_001[];
extern const char store_sql_002[];
extern const char store_sql_003[];
extern const char store_sql_004[];
extern const char store_sql_005[];
extern const char store_sql_006[];
extern const char store_sql_007[];
extern const char store_sql_008[];
extern const char store_sql_009[];
extern const char store_sql_010[];
extern const char store_sql_011[];
extern const char store_sql_012[];

const struct dt_db_migration store_migrations[] = {
    { 1, "001-initial.sql", store_sql_001 },
    { 2, "002-run-record.sql", store_sql_002 },
    { 3, "003-view-index.sql", store_sql_003 },
    { 4, "004-token-sha256.sql", store_sql_004 },
    { 5, "005-restart-path.sql", store_sql_005 },
    { 6, "006-mfu.sql", store_sql_006 },
    { 7, "007-integrity-state.sql", store_sql_007 },
    { 8, "008-attempt-layout.sql", store_sql_008 },
    { 9, "009-attempt-comm.sql", store_sql_009 },
    { 10, "010-reform.sql", store_sql_010 },
    { 11, "011-hot-spare.sql", store_sql_011 },
    { 12, "012-numerics.sql", store_sql_012 },
};
const int store_nmigrations = sizeof (store_migrations) / sizeof (store_migrations[0]);

/* Columns holding JSON text: parsed into the API's objects. */
static const char *const json_columns[] = {
    "spec", "exclude",  "failure", "result",    "evidence", "provenance",
    "data", "hostinfo", "layout",  "comm_dims", "numerics", NULL,
};
/* Integer columns that are booleans. */
static const char *const bool_columns[] = { "spare", "client", "since_clear",
                                            "numerics_changed", NULL };

/* --- helpers --------------------------------------------------------------- */

sqlite3_stmt *store_stmt (store_t *st, enum stmt_id id, dt_error_t *err)
{
    sqlite3_stmt *s = st->stmt[id];

    if (!s) {
        if (dt_db_prepare (st->db, store_sql[id], &s, err) < 0)
            return NULL;
        st->stmt[id] = s;
    }
    else {
        sqlite3_reset (s);
        sqlite3_clear_bindings (s);
    }
    return s;
}

/* Bind the arguments described by 'fmt', one char per parameter ?1, ?2, ...:
 *   I int64           N int64, < 0 -> NULL      T time, 0 -> NULL
 *   S string          s string, NULL/"" -> NULL
 *   J json_t* (NULL -> NULL)                    D double, NAN -> NULL
 *   _ skip this parameter number */
int store_bind (store_t *st, sqlite3_stmt *s, dt_error_t *err, const char *fmt, ...)
{
    va_list ap;
    int rc = SQLITE_OK;
    int i = 1;

    /* One format character per parameter: a format that does not match
     * its statement would bind values to the wrong columns. */
    if ((int)strlen (fmt) != sqlite3_bind_parameter_count (s))
        return errnoprintf (
          err, EINVAL, "bind: %zu values for the %d parameters of: %.80s", strlen (fmt),
          sqlite3_bind_parameter_count (s), sqlite3_sql (s));
    va_start (ap, fmt);
    for (const char *f = fmt; *f && rc == SQLITE_OK; f++, i++) {
        switch (*f) {
        case 'I': rc = sqlite3_bind_int64 (s, i, va_arg (ap, int64_t)); break;
        case 'N': {
            int64_t v = va_arg (ap, int64_t);
            rc = v < 0 ? sqlite3_bind_null (s, i) : sqlite3_bind_int64 (s, i, v);
            break;
        }
        case 'T': {
            int64_t v = va_arg (ap, int64_t);
            rc = v == 0 ? sqlite3_bind_null (s, i) : sqlite3_bind_int64 (s, i, v);
            break;
        }
        case 'S':
            rc =
              sqlite3_bind_text (s, i, va_arg (ap, const char *), -1, SQLITE_TRANSIENT);
            break;
        case 's': {
            const char *v = va_arg (ap, const char *);
            rc = (!v || !*v) ? sqlite3_bind_null (s, i)
                             : sqlite3_bind_text (s, i, v, -1, SQLITE_TRANSIENT);
            break;
        }
        case 'J': {
            const json_t *v = va_arg (ap, const json_t *);
            char *txt = v ? dt_json_dumps (v) : NULL;
            if (v && !txt) {
                va_end (ap);
                return errnoprintf (err, ENOMEM, "out of memory");
            }
            rc = txt ? sqlite3_bind_text (s, i, txt, -1, free) : sqlite3_bind_null (s, i);
            break;
        }
        case 'D': {
            double v = va_arg (ap, double);
            rc = isnan (v) ? sqlite3_bind_null (s, i) : sqlite3_bind_double (s, i, v);
            break;
        }
        case '_': break;
        default: rc = SQLITE_MISUSE;
        }
    }
    va_end (ap);
    if (rc != SQLITE_OK)
        return dt_db_error (st->db, rc, "bind", err);
    return 0;
}

/* Step a statement that returns no rows. */
int store_run (store_t *st, sqlite3_stmt *s, const char *what, dt_error_t *err)
{
    int rc = sqlite3_step (s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        dt_db_error (st->db, rc, what, err);
        sqlite3_reset (s);
        return -1;
    }
    sqlite3_reset (s);
    return 0;
}

void store_col_str (sqlite3_stmt *s, int i, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text (s, i);
    snprintf (buf, len, "%s", t ? (const char *)t : "");
}

int64_t store_col_int (sqlite3_stmt *s, int i, int64_t null_value)
{
    return sqlite3_column_type (s, i) == SQLITE_NULL ? null_value
                                                     : sqlite3_column_int64 (s, i);
}

double store_col_real (sqlite3_stmt *s, int i)
{
    return sqlite3_column_type (s, i) == SQLITE_NULL ? NAN : sqlite3_column_double (s, i);
}

json_t *store_col_json (sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text (s, i);
    if (!t)
        return NULL;
    return json_loads (t, JSON_DECODE_ANY, NULL);
}

static bool in_list (const char *const list[], const char *name)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp (list[i], name))
            return true;
    return false;
}

static bool is_time_column (const char *name)
{
    size_t n = strlen (name);
    return !strcmp (name, "time") || !strcmp (name, "first_seen") ||
           !strcmp (name, "last_seen") || !strcmp (name, "suspect_since") ||
           (n > 5 && !strcmp (name + n - 5, "_time"));
}

/* One result row as a JSON object, named by the columns: times become
 * ISO 8601 UTC strings, JSON columns are parsed, boolean columns become
 * true/false. */
json_t *store_row_json (sqlite3_stmt *s)
{
    json_t *o = json_object ();
    int n = sqlite3_column_count (s);

    for (int i = 0; o && i < n; i++) {
        const char *name = sqlite3_column_name (s, i);
        int type = sqlite3_column_type (s, i);
        json_t *v;

        if (type == SQLITE_NULL)
            v = json_null ();
        else if (in_list (json_columns, name)) {
            v = store_col_json (s, i);
            if (!v)
                v = json_null ();
        }
        else if (in_list (bool_columns, name))
            v = json_boolean (sqlite3_column_int (s, i));
        else if (is_time_column (name) && type == SQLITE_INTEGER) {
            char buf[40];
            v = json_string (
              dt_format_time (sqlite3_column_int64 (s, i), buf, sizeof (buf)));
        }
        else if (type == SQLITE_INTEGER)
            v = json_integer (sqlite3_column_int64 (s, i));
        else if (type == SQLITE_FLOAT)
            v = json_real (sqlite3_column_double (s, i));
        else
            v = json_string ((const char *)sqlite3_column_text (s, i));
        json_object_set_new (o, name, v);
    }
    return o;
}

/* All rows of a bound statement as a JSON array (new), or NULL with err. */
json_t *store_rows_json (store_t *st, sqlite3_stmt *s, const char *what, dt_error_t *err)
{
    json_t *a = json_array ();
    int rc;

    while ((rc = sqlite3_step (s)) == SQLITE_ROW)
        json_array_append_new (a, store_row_json (s));
    if (rc != SQLITE_DONE) {
        dt_db_error (st->db, rc, what, err);
        json_decref (a);
        a = NULL;
    }
    sqlite3_reset (s);
    return a;
}

/* --- open/close, transactions --------------------------------------------- */

/* Replace the tokens that migration 004 marked "plain:<token>" with their
 * SHA-256 (a database written before tokens were hashed). */
static int hash_plain_tokens (store_t *st, dt_error_t *err)
{
    sqlite3_stmt *sel = NULL, *upd = NULL;
    int rc, n = 0;

    if (dt_db_prepare (st->db,
                       "SELECT job_id, attempt, token FROM attempts"
                       " WHERE token LIKE 'plain:%'",
                       &sel, err) < 0 ||
        dt_db_prepare (st->db,
                       "UPDATE attempts SET token = ?3"
                       " WHERE job_id = ?1 AND attempt = ?2",
                       &upd, err) < 0)
        goto error;
    while ((rc = sqlite3_step (sel)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text (sel, 2);
        char hash[65];
        sha256_hex (t + 6, strlen (t + 6), hash);
        sqlite3_bind_int64 (upd, 1, sqlite3_column_int64 (sel, 0));
        sqlite3_bind_int64 (upd, 2, sqlite3_column_int64 (sel, 1));
        sqlite3_bind_text (upd, 3, hash, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step (upd);
        sqlite3_reset (upd);
        if (rc != SQLITE_DONE) {
            dt_db_error (st->db, rc, "hash stored tokens", err);
            goto error;
        }
        n++;
    }
    if (rc != SQLITE_DONE) {
        dt_db_error (st->db, rc, "hash stored tokens", err);
        goto error;
    }
    if (n > 0)
        dt_log (LOG_NOTICE, "database: %d agent token(s) now stored as SHA-256", n);
    sqlite3_finalize (sel);
    sqlite3_finalize (upd);
    return 0;
error:
    sqlite3_finalize (sel);
    sqlite3_finalize (upd);
    return -1;
}

store_t *store_open (const char *path, dt_error_t *err)
{
    store_t *st;

    if (!(st = calloc (1, sizeof (*st)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (!(st->db = dt_db_open (path, store_migrations, store_nmigrations, err)) ||
        hash_plain_tokens (st, err) < 0)
        goto error;
    /* Prepare everything now, so that a schema/code mismatch shows at start. */
    for (int i = 0; i < S_COUNT; i++) {
        if (dt_db_prepare (st->db, store_sql[i], &st->stmt[i], err) < 0)
            goto error;
    }
    return st;
error:
    store_close (st);
    return NULL;
}

void store_close (store_t *st)
{
    if (st) {
        int saved = errno;
        for (int i = 0; i < PROV_MEMO_SLOTS; i++)
            json_decref (st->memo[i].prov);
        store_plot_free (st);
        for (int i = 0; i < S_COUNT; i++)
            sqlite3_finalize (st->stmt[i]);
        dt_db_close (st->db);
        free (st);
        errno = saved;
    }
}

dt_db_t *store_db (store_t *st)
{
    return st->db;
}

int store_begin (store_t *st, dt_error_t *err)
{
    return dt_db_begin (st->db, err);
}

int store_begin_lazy (store_t *st, dt_error_t *err)
{
    return dt_db_begin_lazy (st->db, err);
}

int store_commit (store_t *st, dt_error_t *err)
{
    return dt_db_commit (st->db, err);
}

void store_rollback (store_t *st)
{
    dt_db_rollback (st->db);
}

/* --- rows ------------------------------------------------------------------ */

void store_job_row_init (struct store_job_row *r)
{
    memset (r, 0, sizeof (*r));
    r->last_step = -1;
    r->last_loss = NAN;
    r->throughput = NAN;
    r->metrics_stride = 1;
}

void store_job_row_clear (struct store_job_row *r)
{
    json_decref (r->spec);
    json_decref (r->exclude);
    json_decref (r->failure);
    json_decref (r->result);
    store_job_row_init (r);
}

void store_attempt_row_init (struct store_attempt_row *r)
{
    memset (r, 0, sizeof (*r));
    r->resume_step = -1;
    r->cause_rank = -1;
    r->exit_code = -1;
    r->model_flops = r->peak_flops = NAN;
}

void store_attempt_row_clear (struct store_attempt_row *r)
{
    json_decref (r->exclude);
    json_decref (r->evidence);
    json_decref (r->provenance);
    store_attempt_row_init (r);
}

/* --- writes ---------------------------------------------------------------- */

int store_event (store_t *st, int64_t time, int64_t job, int attempt, const char *kind,
                 const char *node, int rank, const char *detail, const json_t *data,
                 dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_EVENT, err)) ||
        store_bind (st, s, err, "INNSsNsJ", time, job <= 0 ? (int64_t)-1 : job,
                    attempt <= 0 ? (int64_t)-1 : (int64_t)attempt, kind, node,
                    (int64_t)rank, detail, data) < 0)
        return -1;
    return store_run (st, s, "insert event", err);
}

static int bind_job (store_t *st, sqlite3_stmt *s, const struct store_job_row *r,
                     dt_error_t *err)
{
    static json_t *empty;
    if (!empty)
        empty = json_array ();
    return store_bind (
      st, s, err, "ISIISSsJTTTIIJNDDIJJ", r->id, r->name, (int64_t)r->uid,
      (int64_t)r->gid, r->user, fsm_job_state_name (r->state), r->reason, r->spec,
      r->submit_time, r->start_time, r->end_time, (int64_t)r->attempts,
      (int64_t)r->restarts, r->exclude ? r->exclude : empty, r->last_step, r->last_loss,
      r->throughput, r->metrics_stride, r->failure, r->result);
}

int store_job_insert (store_t *st, struct store_job_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_JOB_INSERT, err)) || bind_job (st, s, r, err) < 0 ||
        store_run (st, s, "insert job", err) < 0)
        return -1;
    r->id = sqlite3_last_insert_rowid (dt_db_handle (st->db));
    return 0;
}

int store_job_update (store_t *st, const struct store_job_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_JOB_UPDATE, err)) || bind_job (st, s, r, err) < 0)
        return -1;
    return store_run (st, s, "update job", err);
}

static int bind_attempt (store_t *st, sqlite3_stmt *s, const struct store_attempt_row *r,
                         dt_error_t *err)
{
    static json_t *empty;
    if (!empty)
        empty = json_array ();
    /* The token is stored as its SHA-256 only (schemas/004). */
    char hash[65];
    if (r->token[0])
        sha256_hex (r->token, strlen (r->token), hash);
    else
        snprintf (hash, sizeof (hash), "%s", r->token_sha256);
    return store_bind (
      st, s, err, "IISSSsIssIIIIJNsssNssNsJTNTTTJsDDsNN", r->job_id, (int64_t)r->attempt,
      fsm_attempt_state_name (r->state), hash, r->launcher, r->handle, r->slurm_job_id,
      r->batch_host, r->nodelist, (int64_t)r->num_nodes, (int64_t)r->spare_nodes,
      (int64_t)r->ranks_per_node, (int64_t)r->world_size, r->exclude ? r->exclude : empty,
      r->resume_step, r->resume_dir, r->resume_sha256, r->master_addr,
      r->master_port > 0 ? (int64_t)r->master_port : (int64_t)-1, r->cause, r->cause_node,
      (int64_t)r->cause_rank, r->detail, r->evidence, r->fail_time, (int64_t)r->exit_code,
      r->submit_time, r->start_time, r->end_time, r->provenance, r->restart_path,
      r->model_flops, r->peak_flops, r->peak_source, (int64_t)(r->tp > 0 ? r->tp : -1),
      (int64_t)(r->pp > 0 ? r->pp : -1));
}

void store_prov_memo_forget (store_t *st, int64_t job, int attempt)
{
    for (int i = 0; i < PROV_MEMO_SLOTS; i++) {
        struct prov_memo *m = &st->memo[i];
        if (m->job == job && m->attempt == attempt) {
            json_decref (m->prov);
            *m = (struct prov_memo){ 0 };
        }
    }
}

/* A copy of attempt's provenance with at most nodes_max nodes; NULL with
 * err on failure. */
json_t *store_prov_memo_get (store_t *st, int64_t job, int attempt, int nodes_max,
                             dt_error_t *err)
{
    struct prov_memo *slot = &st->memo[0];
    for (int i = 0; i < PROV_MEMO_SLOTS; i++) {
        struct prov_memo *m = &st->memo[i];
        if (m->job == job && m->attempt == attempt && m->nodes_max == nodes_max) {
            m->used = ++st->memo_clock;
            return json_deep_copy (m->prov);
        }
        if (m->used < slot->used)
            slot = m;
    }
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_ATT_PROV_VIEW, err)) ||
        store_bind (st, s, err, "III", job, (int64_t)attempt, (int64_t)nodes_max) < 0)
        return NULL;
    int rc = sqlite3_step (s);
    json_t *prov = NULL;
    if (rc == SQLITE_ROW)
        prov = store_col_json (s, 0);
    else if (rc == SQLITE_DONE)
        errnoprintf (err, ENOENT, "job %lld attempt %d not found", (long long)job,
                     attempt);
    else
        dt_db_error (st->db, rc, "attempt provenance", err);
    sqlite3_reset (s);
    if (!prov) {
        if (rc == SQLITE_ROW)
            errnoprintf (err, EIO, "attempt provenance: not JSON");
        return NULL;
    }
    json_decref (slot->prov);
    *slot = (struct prov_memo){ .job = job,
                                .attempt = attempt,
                                .nodes_max = nodes_max,
                                .prov = prov,
                                .used = ++st->memo_clock };
    return json_deep_copy (prov);
}

int store_attempt_insert (store_t *st, const struct store_attempt_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    store_prov_memo_forget (st, r->job_id, r->attempt);
    if (!(s = store_stmt (st, S_ATT_INSERT, err)) || bind_attempt (st, s, r, err) < 0)
        return -1;
    return store_run (st, s, "insert attempt", err);
}

int store_attempt_update (store_t *st, const struct store_attempt_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    store_prov_memo_forget (st, r->job_id, r->attempt);
    if (!(s = store_stmt (st, S_ATT_UPDATE, err)) || bind_attempt (st, s, r, err) < 0)
        return -1;
    return store_run (st, s, "update attempt", err);
}

int store_attempt_node_put (store_t *st, int64_t job, int attempt, const char *node,
                            int node_order, int node_rank, bool spare, const char *addr,
                            int port, int pid, const char *state, int64_t register_time,
                            int64_t last_heartbeat, const json_t *hostinfo,
                            dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_ATTNODE_PUT, err)) ||
        store_bind (st, s, err, "IISINIsNNSITJ", job, (int64_t)attempt, node,
                    (int64_t)node_order, (int64_t)node_rank, (int64_t)spare, addr,
                    (int64_t)port, (int64_t)pid, state, register_time, last_heartbeat,
                    hostinfo) < 0)
        return -1;
    return store_run (st, s, "put attempt node", err);
}

int store_rank_put (store_t *st, int64_t job, int attempt, const struct store_rank_row *r,
                    dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_RANK_PUT, err)) ||
        store_bind (st, s, err, "IIISINSINDNDDDNNI", job, (int64_t)attempt,
                    (int64_t)r->rank, r->node, (int64_t)r->local_rank, (int64_t)r->pid,
                    r->state, (int64_t)r->client, r->step, r->loss, r->samples,
                    r->compute_ms, r->comm_ms, r->straggler_score, (int64_t)r->exit_code,
                    (int64_t)r->signal, r->updated) < 0)
        return -1;
    return store_run (st, s, "put rank", err);
}

int store_metric_put (store_t *st, int64_t job, int64_t step, int attempt, int64_t time,
                      double loss, double samples_per_s, double compute_ms,
                      double comm_ms, dt_error_t *err)
{
    sqlite3_stmt *s;
    store_plot_forget (st, job);
    if (!(s = store_stmt (st, S_METRIC_PUT, err)) ||
        store_bind (st, s, err, "IIIIDDDD", job, step, (int64_t)attempt, time, loss,
                    samples_per_s, compute_ms, comm_ms) < 0)
        return -1;
    return store_run (st, s, "put metric", err);
}

int store_query_int64 (store_t *st, sqlite3_stmt *s, int col, int64_t *out,
                       const char *what, dt_error_t *err)
{
    int rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64 (s, col);
        sqlite3_reset (s);
        return 1;
    }
    sqlite3_reset (s);
    if (rc == SQLITE_DONE)
        return 0;
    return dt_db_error (st->db, rc, what, err);
}

int store_metrics_count (store_t *st, int64_t job, int64_t *n, dt_error_t *err)
{
    sqlite3_stmt *s;
    *n = 0;
    if (!(s = store_stmt (st, S_METRIC_COUNT, err)) ||
        store_bind (st, s, err, "I", job) < 0)
        return -1;
    return store_query_int64 (st, s, 0, n, "count metrics", err) < 0 ? -1 : 0;
}

int store_metrics_thin (store_t *st, int64_t job, int64_t stride, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (stride < 1)
        return errnoprintf (err, EINVAL, "metrics stride must be >= 1");
    store_plot_forget (st, job);
    if (!(s = store_stmt (st, S_METRIC_THIN, err)) ||
        store_bind (st, s, err, "II", job, stride) < 0)
        return -1;
    return store_run (st, s, "thin metrics", err);
}
