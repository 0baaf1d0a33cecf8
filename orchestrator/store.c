/* store.c: all SQL of dtctld (see store.h). */
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

/* Generated at build time from schemas/NNN-*.sql (schema_sql.c). */
extern const char store_sql_001[];
extern const char store_sql_002[];
extern const char store_sql_003[];

const struct dt_db_migration store_migrations[] = {
    { 1, "001-initial.sql", store_sql_001 },
    { 2, "002-run-record.sql", store_sql_002 },
    { 3, "003-view-index.sql", store_sql_003 },
};
const int store_nmigrations = sizeof (store_migrations) / sizeof (store_migrations[0]);

/* --- SQL ----------------------------------------------------------------- */

enum stmt_id {
    S_EVENT,
    S_JOB_INSERT,
    S_JOB_UPDATE,
    S_ATT_INSERT,
    S_ATT_UPDATE,
    S_ATTNODE_PUT,
    S_NODE_SEEN,
    S_NODE_STATE,
    S_NODE_FAIL_HEALTH,
    S_NODE_FAIL_COUNT,
    S_RANK_PUT,
    S_METRIC_PUT,
    S_METRIC_COUNT,
    S_METRIC_THIN,
    S_CKPT_PENDING,
    S_SHARD_PUT,
    S_CKPT_SHARDS,
    S_CKPT_STATE,
    S_CKPT_LATEST,
    S_CKPT_COMMITTED,
    S_CKPT_GETSTATE,
    S_CKPT_SHARDS_LIST,
    S_ATT_BY_TOKEN,
    S_JOB_LOAD,
    S_ATT_LOAD,
    S_LIVE_JOBS,
    S_JOB_VIEW,
    S_ATT_VIEW,
    S_ATT_PROV_VIEW,
    S_ATTNODES_VIEW,
    S_EVENTS_VIEW,
    S_CKPTS_VIEW,
    S_METRICS_VIEW,
    S_RANKS_VIEW,
    S_NODES_VIEW,
    S_JOB_COUNTS,
    S_ATT_COUNTS,
    S_FAIL_COUNTS,
    S_CKPT_COUNT,
    S_NODE_FAIL_JOBS,
    S_NODE_SUSPECT,
    S_NODE_CLEAR,
    S_NODE_CLEARED_EVENT,
    S_NODES_SUSPECT,
    S_CKPT_IN_STATE,
    S_NODE_VIEW,
    S_NODE_HISTORY,
    S_NODE_LAST_CLEAR,
    S_GOODPUT_PUT,
    S_GOODPUT_LOAD,
    S_ATT_LEFT_QUEUE,
    S_ATT_RESUBMITTED,
    S_ATT_RESULT_TIME,
    S_COUNT,
};

/* The API's view of a node (GET /v1/nodes, GET /v1/nodes/{name}): its
 * health, "ok" unless suspect, and the newest failure blamed on it
 * (node_health rows other than admin clears). */
#define SQL_NODE_SELECT \
    "SELECT name, state, CASE WHEN state = 'suspect' THEN 'suspect' ELSE 'ok' END AS health," \
    " addr, first_seen, last_seen, job_id AS job, attempt, failures, suspect_since, note," \
    " (SELECT max (h.time) FROM node_health h WHERE h.node = nodes.name" \
    "   AND h.kind != 'cleared') AS last_failure_time," \
    " (SELECT h.kind FROM node_health h WHERE h.node = nodes.name AND h.kind != 'cleared'" \
    "   ORDER BY h.time DESC, h.id DESC LIMIT 1) AS last_cause," \
    " hostinfo"

static const char *const sql[S_COUNT] = {
    [S_GOODPUT_PUT] =
        "INSERT OR REPLACE INTO attempt_goodput (job_id, attempt, train_start, first_step,"
        " first_step_time, last_step, last_step_time, hb_samples, busy_samples, step_samples,"
        " step_ms_sum, batch_samples, hist, updated)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [S_GOODPUT_LOAD] =
        "SELECT train_start, first_step, first_step_time, last_step, last_step_time,"
        " hb_samples, busy_samples, step_samples, step_ms_sum, batch_samples, hist"
        " FROM attempt_goodput WHERE job_id = ?1 AND attempt = ?2",
    /* Left the queue: became starting (the allocation began). */
    [S_ATT_LEFT_QUEUE] =
        "SELECT min (time) FROM events WHERE job_id = ?1 AND attempt = ?2"
        " AND kind = 'attempt_state' AND json_extract (data, '$.to') = 'starting'",
    /* Created by a manual resubmission: the job went back to pending
     * during the attempt before. */
    [S_ATT_RESUBMITTED] =
        "SELECT count (*) FROM events WHERE job_id = ?1 AND attempt = ?2 - 1"
        " AND kind = 'job_state' AND json_extract (data, '$.to') = 'pending'",
    [S_ATT_RESULT_TIME] =
        "SELECT max (time) FROM events WHERE job_id = ?1 AND attempt = ?2 AND kind = 'result'",
    [S_EVENT] =
        "INSERT INTO events (time, job_id, attempt, kind, node, rank, detail, data)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_JOB_INSERT] =
        "INSERT INTO jobs (name, uid, gid, user, state, reason, spec, submit_time,"
        " start_time, end_time, attempts, restarts, exclude, last_step, last_loss,"
        " throughput, metrics_stride, failure, result)"
        " VALUES (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20)",
    [S_JOB_UPDATE] =
        "UPDATE jobs SET name = ?2, uid = ?3, gid = ?4, user = ?5, state = ?6, reason = ?7,"
        " spec = ?8, submit_time = ?9, start_time = ?10, end_time = ?11, attempts = ?12,"
        " restarts = ?13, exclude = ?14, last_step = ?15, last_loss = ?16, throughput = ?17,"
        " metrics_stride = ?18, failure = ?19, result = ?20 WHERE id = ?1",
    [S_ATT_INSERT] =
        "INSERT INTO attempts (job_id, attempt, state, token, launcher, handle, slurm_job_id,"
        " batch_host, nodelist, num_nodes, spare_nodes, ranks_per_node, world_size, exclude,"
        " resume_step, resume_dir, resume_sha256, master_addr, master_port, cause,"
        " cause_node, cause_rank, detail, evidence, fail_time, exit_code, submit_time,"
        " start_time, end_time, provenance)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
    [S_ATT_UPDATE] =
        "UPDATE attempts SET state = ?3, token = ?4, launcher = ?5, handle = ?6,"
        " slurm_job_id = ?7, batch_host = ?8, nodelist = ?9, num_nodes = ?10,"
        " spare_nodes = ?11, ranks_per_node = ?12, world_size = ?13, exclude = ?14,"
        " resume_step = ?15, resume_dir = ?16, resume_sha256 = ?17, master_addr = ?18,"
        " master_port = ?19, cause = ?20, cause_node = ?21, cause_rank = ?22, detail = ?23,"
        " evidence = ?24, fail_time = ?25, exit_code = ?26, submit_time = ?27,"
        " start_time = ?28, end_time = ?29, provenance = ?30"
        " WHERE job_id = ?1 AND attempt = ?2",
    [S_ATTNODE_PUT] =
        "INSERT OR REPLACE INTO attempt_nodes (job_id, attempt, node, node_order, node_rank,"
        " spare, addr, port, pid, state, register_time, last_heartbeat, hostinfo)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [S_NODE_SEEN] =
        "INSERT INTO nodes (name, state, addr, hostinfo, first_seen, last_seen, job_id, attempt)"
        " VALUES (?1, 'up', ?2, ?3, ?4, ?4, ?5, ?6)"
        " ON CONFLICT (name) DO UPDATE SET addr = coalesce (?2, addr),"
        " hostinfo = coalesce (?3, hostinfo), last_seen = ?4, job_id = ?5, attempt = ?6,"
        " state = CASE WHEN state = 'suspect' THEN state ELSE 'up' END",
    [S_NODE_STATE] =
        "UPDATE nodes SET state = ?2, note = coalesce (?3, note),"
        " suspect_since = CASE WHEN ?2 = 'suspect' THEN ?4 ELSE NULL END WHERE name = ?1",
    [S_NODE_FAIL_HEALTH] =
        "INSERT INTO node_health (node, time, job_id, attempt, kind, detail)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [S_NODE_FAIL_COUNT] =
        "INSERT INTO nodes (name, state, first_seen, last_seen, failures)"
        " VALUES (?1, 'up', ?2, ?2, 1)"
        " ON CONFLICT (name) DO UPDATE SET failures = failures + 1",
    [S_RANK_PUT] =
        "INSERT OR REPLACE INTO ranks (job_id, attempt, rank, node, local_rank, pid, state,"
        " client, step, loss, samples, compute_ms, comm_ms, straggler_score, exit_code,"
        " signal, updated)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    [S_METRIC_PUT] =
        "INSERT OR REPLACE INTO metrics (job_id, step, attempt, time, loss, samples_per_s,"
        " compute_ms, comm_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_METRIC_COUNT] = "SELECT count(*) FROM metrics WHERE job_id = ?1",
    [S_METRIC_THIN] =
        "DELETE FROM metrics WHERE job_id = ?1 AND EXISTS (SELECT 1 FROM metrics m"
        " WHERE m.job_id = metrics.job_id AND m.step / ?2 = metrics.step / ?2"
        " AND m.step < metrics.step)",
    [S_CKPT_PENDING] =
        "INSERT INTO checkpoints (job_id, step, attempt, state, dir, world_size, create_time)"
        " VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)"
        " ON CONFLICT (job_id, step) DO UPDATE SET attempt = ?3, state = 'pending',"
        " dir = ?4, world_size = ?5, create_time = ?6, shards = 0, bytes = 0,"
        " manifest_sha256 = NULL, commit_time = NULL WHERE state != 'committed'",
    [S_SHARD_PUT] =
        "INSERT OR REPLACE INTO checkpoint_shards (job_id, step, rank, attempt, node, path,"
        " bytes, crc32c, time) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [S_CKPT_SHARDS] =
        "SELECT count(*), coalesce (sum (s.bytes), 0) FROM checkpoint_shards s"
        " JOIN checkpoints c ON c.job_id = s.job_id AND c.step = s.step"
        " WHERE s.job_id = ?1 AND s.step = ?2 AND s.attempt = c.attempt",
    [S_CKPT_STATE] =
        "UPDATE checkpoints SET state = ?3, manifest_sha256 = coalesce (?4, manifest_sha256),"
        " commit_time = coalesce (?5, commit_time),"
        " shards = (SELECT count(*) FROM checkpoint_shards s WHERE s.job_id = ?1"
        "   AND s.step = ?2 AND s.attempt = checkpoints.attempt),"
        " bytes = (SELECT coalesce (sum (bytes), 0) FROM checkpoint_shards s"
        "   WHERE s.job_id = ?1 AND s.step = ?2 AND s.attempt = checkpoints.attempt)"
        " WHERE job_id = ?1 AND step = ?2",
    [S_CKPT_LATEST] =
        "SELECT step, dir, manifest_sha256 FROM checkpoints"
        " WHERE job_id = ?1 AND state = 'committed' ORDER BY step DESC LIMIT 1",
    [S_CKPT_COMMITTED] =
        "SELECT step FROM checkpoints WHERE job_id = ?1 AND state = 'committed'"
        " ORDER BY step DESC LIMIT -1 OFFSET ?2",
    [S_CKPT_GETSTATE] = "SELECT state FROM checkpoints WHERE job_id = ?1 AND step = ?2",
    [S_CKPT_SHARDS_LIST] =
        "SELECT s.rank, s.path, s.bytes, s.crc32c, s.node FROM checkpoint_shards s"
        " JOIN checkpoints c ON c.job_id = s.job_id AND c.step = s.step"
        " WHERE s.job_id = ?1 AND s.step = ?2 AND s.attempt = c.attempt ORDER BY s.rank",
    [S_ATT_BY_TOKEN] = "SELECT job_id, attempt, state FROM attempts WHERE token = ?1",
    [S_JOB_LOAD] =
        "SELECT id, name, uid, gid, user, state, reason, spec, submit_time, start_time,"
        " end_time, attempts, restarts, exclude, last_step, last_loss, throughput,"
        " metrics_stride, failure, result FROM jobs WHERE id = ?1",
    [S_ATT_LOAD] =
        "SELECT job_id, attempt, state, token, launcher, handle, slurm_job_id, batch_host,"
        " nodelist, num_nodes, spare_nodes, ranks_per_node, world_size, exclude, resume_step,"
        " resume_dir, resume_sha256, master_addr, master_port, cause, cause_node, cause_rank,"
        " detail, evidence, fail_time, exit_code, submit_time, start_time, end_time,"
        " provenance FROM attempts WHERE job_id = ?1 AND attempt = ?2",
    [S_LIVE_JOBS] =
        "SELECT id FROM jobs WHERE state IN ('pending', 'running', 'restarting')"
        " UNION SELECT job_id FROM attempts"
        " WHERE state IN ('submitted', 'starting', 'running', 'ending') ORDER BY 1",
    [S_JOB_VIEW] =
        "SELECT id, name, user, uid, gid, state, reason, submit_time, start_time, end_time,"
        " spec, attempts AS attempt, restarts, last_step AS step, last_loss AS loss,"
        " throughput, exclude,"
        " (SELECT max (step) FROM checkpoints c WHERE c.job_id = jobs.id"
        "   AND c.state = 'committed') AS last_checkpoint,"
        " failure, result FROM jobs WHERE id = ?1",
    [S_ATT_VIEW] =
        "SELECT job_id AS job, attempt, state, cause, cause_node, cause_rank, detail, evidence,"
        " fail_time, exit_code, submit_time, start_time, end_time, launcher, handle,"
        " slurm_job_id, batch_host, nodelist, num_nodes, spare_nodes, ranks_per_node,"
        " world_size, exclude, resume_step, master_addr, master_port,"
        /* A huge attempt's provenance comes trimmed from the memo (below). */
        " CASE WHEN ?2 >= 0 AND length (provenance) > ?3 THEN NULL ELSE provenance END"
        " AS provenance, ?2 >= 0 AND length (provenance) > ?3 AS provenance_big"
        " FROM attempts WHERE job_id = ?1 ORDER BY attempt",
    /* The provenance of one attempt with its first ?3 nodes: SQLite's JSON
     * functions skim the text, where building the whole tree in jansson
     * took 10-30 ms for 5,000 nodes. */
    [S_ATT_PROV_VIEW] =
        "SELECT CASE WHEN json_array_length (provenance, '$.machine.nodes') > ?3"
        "  THEN json_set (provenance, '$.machine.nodes', json ((SELECT json_group_array (value)"
        "   FROM json_each (attempts.provenance, '$.machine.nodes') WHERE key < ?3)),"
        "   '$.machine.nodes_truncated', json ('true'))"
        "  ELSE provenance END FROM attempts WHERE job_id = ?1 AND attempt = ?2",
    [S_ATTNODES_VIEW] =
        "SELECT node, node_order, node_rank, spare, addr, port, pid, state,"
        " register_time, last_heartbeat AS last_heartbeat_time"
        " FROM attempt_nodes WHERE job_id = ?1 AND attempt = ?2 ORDER BY node_order, node"
        " LIMIT ?3",
    [S_EVENTS_VIEW] =
        "SELECT id, time, job_id AS job, attempt, kind, node, rank, detail, data FROM events"
        " WHERE job_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
    [S_CKPTS_VIEW] =
        "SELECT step, attempt, state, dir, world_size, shards, bytes, manifest_sha256,"
        " create_time AS time, commit_time FROM checkpoints WHERE job_id = ?1"
        " ORDER BY step DESC",
    [S_METRICS_VIEW] =
        "SELECT step, time, attempt, loss, samples_per_s, compute_ms, comm_ms FROM metrics"
        " WHERE job_id = ?1 ORDER BY step",
    [S_RANKS_VIEW] =
        "SELECT rank, node, local_rank, pid, state, client, step, loss, samples, compute_ms,"
        " comm_ms, straggler_score, exit_code, signal, updated AS last_seen FROM ranks"
        " WHERE job_id = ?1 AND attempt = ?2 ORDER BY rank",
    [S_NODES_VIEW] = SQL_NODE_SELECT " FROM nodes ORDER BY name",
    [S_JOB_COUNTS] = "SELECT state, count(*) FROM jobs GROUP BY state",
    [S_ATT_COUNTS] = "SELECT state, count(*) FROM attempts GROUP BY state",
    [S_FAIL_COUNTS] =
        "SELECT cause, count(*) FROM attempts WHERE cause IS NOT NULL"
        " AND state IN ('failed', 'ending') GROUP BY cause",
    [S_CKPT_COUNT] = "SELECT count(*) FROM checkpoints WHERE state = 'committed'",
    /* Issue 7, node health: distinct jobs a node failed since its last
     * clear, within the window. */
    [S_NODE_FAIL_JOBS] =
        "SELECT count(DISTINCT job_id) FROM node_health h WHERE h.node = ?1"
        " AND h.kind != 'cleared' AND h.time >= ?2 AND h.time > coalesce ((SELECT max (c.time)"
        "   FROM node_health c WHERE c.node = ?1 AND c.kind = 'cleared'), 0)",
    [S_NODE_SUSPECT] =
        "UPDATE nodes SET state = 'suspect', suspect_since = ?2, note = ?3"
        " WHERE name = ?1 AND state != 'suspect'",
    [S_NODE_CLEAR] =
        "UPDATE nodes SET state = 'up', suspect_since = NULL, note = ?2 WHERE name = ?1",
    [S_NODE_CLEARED_EVENT] =
        "INSERT INTO node_health (node, time, kind, detail) VALUES (?1, ?2, 'cleared', ?3)",
    [S_NODES_SUSPECT] = "SELECT name FROM nodes WHERE state = 'suspect' ORDER BY name",
    [S_CKPT_IN_STATE] =
        "SELECT step FROM checkpoints WHERE job_id = ?1 AND state = ?2 ORDER BY step",
    /* GET /v1/nodes/{name}: the node as in S_NODES_VIEW ... */
    [S_NODE_VIEW] = SQL_NODE_SELECT " FROM nodes WHERE name = ?1",
    /* ... its health history, newest first: failures blamed on it (kind
     * "failure", the cause as recorded) and admin clears (kind "cleared",
     * detail says who).  since_clear: the failure happened after the last
     * clear, so it still counts towards making the node suspect (see
     * S_NODE_FAIL_JOBS, which uses the same comparison). */
    [S_NODE_HISTORY] =
        "SELECT id, time, CASE WHEN kind = 'cleared' THEN 'cleared' ELSE 'failure' END AS kind,"
        " job_id AS job, attempt, CASE WHEN kind = 'cleared' THEN NULL ELSE kind END AS cause,"
        " detail, (kind != 'cleared' AND time > coalesce ((SELECT max (c.time)"
        "   FROM node_health c WHERE c.node = ?1 AND c.kind = 'cleared'), 0)) AS since_clear"
        " FROM node_health WHERE node = ?1 ORDER BY time DESC, id DESC LIMIT ?2",
    /* ... and its latest clear, if any. */
    [S_NODE_LAST_CLEAR] =
        "SELECT time, detail FROM node_health WHERE node = ?1 AND kind = 'cleared'"
        " ORDER BY time DESC, id DESC LIMIT 1",
};

/* The jobs list is built at run time from the filters (all values bound). */
static const char *const sql_jobs_list_head =
    "SELECT id FROM jobs WHERE 1";

/* Columns holding JSON text: parsed into the API's objects. */
static const char *const json_columns[] = {
    "spec", "exclude", "failure", "result", "evidence", "provenance", "data", "hostinfo", NULL,
};
/* Integer columns that are booleans. */
static const char *const bool_columns[] = { "spare", "client", "since_clear", NULL };

/* Job views show a huge attempt's provenance trimmed to its first nodes.
 * Trimming means reading the whole text (about 70 bytes a node), so the
 * trimmed copy is kept here, per attempt, until the store writes that
 * attempt again: dtctld is the database's only writer. */
enum { PROV_MEMO_SLOTS = 8 };
static const int prov_memo_min_bytes = 65536;       /* smaller: read every time */

struct prov_memo {
    int64_t job;                /* 0: free */
    int attempt, nodes_max;
    json_t *prov;               /* owned */
    uint64_t used;              /* for eviction: the least recently used goes */
};

struct store {
    dt_db_t *db;
    sqlite3_stmt *stmt[S_COUNT];
    struct prov_memo memo[PROV_MEMO_SLOTS];
    uint64_t memo_clock;
};

/* --- helpers --------------------------------------------------------------- */

static sqlite3_stmt *get_stmt (store_t *st, enum stmt_id id, dt_error_t *err)
{
    sqlite3_stmt *s = st->stmt[id];

    if (!s) {
        if (dt_db_prepare (st->db, sql[id], &s, err) < 0)
            return NULL;
        st->stmt[id] = s;
    } else {
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
static int bind (store_t *st, sqlite3_stmt *s, dt_error_t *err, const char *fmt, ...)
{
    va_list ap;
    int rc = SQLITE_OK;
    int i = 1;

    /* One format character per parameter: a format that does not match
     * its statement would bind values to the wrong columns. */
    if ((int)strlen (fmt) != sqlite3_bind_parameter_count (s))
        return errnoprintf (err, EINVAL, "bind: %zu values for the %d parameters of: %.80s",
                            strlen (fmt), sqlite3_bind_parameter_count (s), sqlite3_sql (s));
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
        case 'S': rc = sqlite3_bind_text (s, i, va_arg (ap, const char *), -1, SQLITE_TRANSIENT);
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
        default:
            rc = SQLITE_MISUSE;
        }
    }
    va_end (ap);
    if (rc != SQLITE_OK)
        return dt_db_error (st->db, rc, "bind", err);
    return 0;
}

/* Step a statement that returns no rows. */
static int run (store_t *st, sqlite3_stmt *s, const char *what, dt_error_t *err)
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

static void col_str (sqlite3_stmt *s, int i, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text (s, i);
    snprintf (buf, len, "%s", t ? (const char *)t : "");
}

static int64_t col_int (sqlite3_stmt *s, int i, int64_t null_value)
{
    return sqlite3_column_type (s, i) == SQLITE_NULL ? null_value : sqlite3_column_int64 (s, i);
}

static double col_real (sqlite3_stmt *s, int i)
{
    return sqlite3_column_type (s, i) == SQLITE_NULL ? NAN : sqlite3_column_double (s, i);
}

static json_t *col_json (sqlite3_stmt *s, int i)
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
    return !strcmp (name, "time") || !strcmp (name, "first_seen") || !strcmp (name, "last_seen")
           || !strcmp (name, "suspect_since")
           || (n > 5 && !strcmp (name + n - 5, "_time"));
}

/* One result row as a JSON object, named by the columns: times become
 * ISO 8601 UTC strings, JSON columns are parsed, boolean columns become
 * true/false. */
static json_t *row_json (sqlite3_stmt *s)
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
            v = col_json (s, i);
            if (!v)
                v = json_null ();
        } else if (in_list (bool_columns, name))
            v = json_boolean (sqlite3_column_int (s, i));
        else if (is_time_column (name) && type == SQLITE_INTEGER) {
            char buf[40];
            v = json_string (dt_format_time (sqlite3_column_int64 (s, i), buf, sizeof (buf)));
        } else if (type == SQLITE_INTEGER)
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
static json_t *rows_json (store_t *st, sqlite3_stmt *s, const char *what, dt_error_t *err)
{
    json_t *a = json_array ();
    int rc;

    while ((rc = sqlite3_step (s)) == SQLITE_ROW)
        json_array_append_new (a, row_json (s));
    if (rc != SQLITE_DONE) {
        dt_db_error (st->db, rc, what, err);
        json_decref (a);
        a = NULL;
    }
    sqlite3_reset (s);
    return a;
}

/* --- open/close, transactions --------------------------------------------- */

store_t *store_open (const char *path, dt_error_t *err)
{
    store_t *st;

    if (!(st = calloc (1, sizeof (*st)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (!(st->db = dt_db_open (path, store_migrations, store_nmigrations, err)))
        goto error;
    /* Prepare everything now, so that a schema/code mismatch shows at start. */
    for (int i = 0; i < S_COUNT; i++) {
        if (dt_db_prepare (st->db, sql[i], &st->stmt[i], err) < 0)
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
    if (!(s = get_stmt (st, S_EVENT, err))
        || bind (st, s, err, "INNSsNsJ", time, job <= 0 ? (int64_t)-1 : job,
                 attempt <= 0 ? (int64_t)-1 : (int64_t)attempt, kind, node, (int64_t)rank,
                 detail, data) < 0)
        return -1;
    return run (st, s, "insert event", err);
}

static int bind_job (store_t *st, sqlite3_stmt *s, const struct store_job_row *r,
                     dt_error_t *err)
{
    static json_t *empty;
    if (!empty)
        empty = json_array ();
    return bind (st, s, err, "ISIISSsJTTTIIJNDDIJJ", r->id, r->name, (int64_t)r->uid,
                 (int64_t)r->gid, r->user, fsm_job_state_name (r->state), r->reason, r->spec,
                 r->submit_time, r->start_time, r->end_time, (int64_t)r->attempts,
                 (int64_t)r->restarts, r->exclude ? r->exclude : empty, r->last_step,
                 r->last_loss, r->throughput, r->metrics_stride, r->failure, r->result);
}

int store_job_insert (store_t *st, struct store_job_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_JOB_INSERT, err)) || bind_job (st, s, r, err) < 0
        || run (st, s, "insert job", err) < 0)
        return -1;
    r->id = sqlite3_last_insert_rowid (dt_db_handle (st->db));
    return 0;
}

int store_job_update (store_t *st, const struct store_job_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_JOB_UPDATE, err)) || bind_job (st, s, r, err) < 0)
        return -1;
    return run (st, s, "update job", err);
}

static int bind_attempt (store_t *st, sqlite3_stmt *s, const struct store_attempt_row *r,
                         dt_error_t *err)
{
    static json_t *empty;
    if (!empty)
        empty = json_array ();
    return bind (st, s, err, "IISSSsIssIIIIJNsssNssNsJTNTTTJ", r->job_id, (int64_t)r->attempt,
                 fsm_attempt_state_name (r->state), r->token, r->launcher, r->handle,
                 r->slurm_job_id, r->batch_host, r->nodelist, (int64_t)r->num_nodes,
                 (int64_t)r->spare_nodes, (int64_t)r->ranks_per_node, (int64_t)r->world_size,
                 r->exclude ? r->exclude : empty, r->resume_step, r->resume_dir,
                 r->resume_sha256, r->master_addr,
                 r->master_port > 0 ? (int64_t)r->master_port : (int64_t)-1, r->cause,
                 r->cause_node, (int64_t)r->cause_rank, r->detail, r->evidence, r->fail_time,
                 (int64_t)r->exit_code, r->submit_time, r->start_time, r->end_time,
                 r->provenance);
}

static void prov_memo_forget (store_t *st, int64_t job, int attempt)
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
static json_t *prov_memo_get (store_t *st, int64_t job, int attempt, int nodes_max,
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
    if (!(s = get_stmt (st, S_ATT_PROV_VIEW, err))
        || bind (st, s, err, "III", job, (int64_t)attempt, (int64_t)nodes_max) < 0)
        return NULL;
    int rc = sqlite3_step (s);
    json_t *prov = NULL;
    if (rc == SQLITE_ROW)
        prov = col_json (s, 0);
    else if (rc == SQLITE_DONE)
        errnoprintf (err, ENOENT, "job %lld attempt %d not found", (long long)job, attempt);
    else
        dt_db_error (st->db, rc, "attempt provenance", err);
    sqlite3_reset (s);
    if (!prov) {
        if (rc == SQLITE_ROW)
            errnoprintf (err, EIO, "attempt provenance: not JSON");
        return NULL;
    }
    json_decref (slot->prov);
    *slot = (struct prov_memo){ .job = job, .attempt = attempt, .nodes_max = nodes_max,
                                .prov = prov, .used = ++st->memo_clock };
    return json_deep_copy (prov);
}

int store_attempt_insert (store_t *st, const struct store_attempt_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    prov_memo_forget (st, r->job_id, r->attempt);
    if (!(s = get_stmt (st, S_ATT_INSERT, err)) || bind_attempt (st, s, r, err) < 0)
        return -1;
    return run (st, s, "insert attempt", err);
}

int store_attempt_update (store_t *st, const struct store_attempt_row *r, dt_error_t *err)
{
    sqlite3_stmt *s;
    prov_memo_forget (st, r->job_id, r->attempt);
    if (!(s = get_stmt (st, S_ATT_UPDATE, err)) || bind_attempt (st, s, r, err) < 0)
        return -1;
    return run (st, s, "update attempt", err);
}

int store_attempt_node_put (store_t *st, int64_t job, int attempt, const char *node,
                            int node_order, int node_rank, bool spare, const char *addr,
                            int port, int pid, const char *state, int64_t register_time,
                            int64_t last_heartbeat, const json_t *hostinfo, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_ATTNODE_PUT, err))
        || bind (st, s, err, "IISINIsNNSITJ", job, (int64_t)attempt, node, (int64_t)node_order,
                 (int64_t)node_rank, (int64_t)spare, addr, (int64_t)port, (int64_t)pid, state,
                 register_time, last_heartbeat, hostinfo) < 0)
        return -1;
    return run (st, s, "put attempt node", err);
}

int store_node_seen (store_t *st, const char *name, const char *addr, const json_t *hostinfo,
                     int64_t now, int64_t job, int attempt, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_NODE_SEEN, err))
        || bind (st, s, err, "SsJINN", name, addr, hostinfo, now, job, (int64_t)attempt) < 0)
        return -1;
    return run (st, s, "node seen", err);
}

int store_node_set_state (store_t *st, const char *name, const char *state, const char *note,
                          dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_NODE_STATE, err))
        || bind (st, s, err, "SSsI", name, state, note, dt_real_ms ()) < 0)
        return -1;
    return run (st, s, "set node state", err);
}

int store_node_failure (store_t *st, const char *name, int64_t now, int64_t job, int attempt,
                        const char *kind, const char *detail, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_NODE_FAIL_HEALTH, err))
        || bind (st, s, err, "SINNSs", name, now, job, (int64_t)attempt, kind, detail) < 0
        || run (st, s, "insert node health", err) < 0)
        return -1;
    if (!(s = get_stmt (st, S_NODE_FAIL_COUNT, err)) || bind (st, s, err, "SI", name, now) < 0)
        return -1;
    return run (st, s, "count node failure", err);
}

int store_rank_put (store_t *st, int64_t job, int attempt, const struct store_rank_row *r,
                    dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_RANK_PUT, err))
        || bind (st, s, err, "IIISINSINDNDDDNNI", job, (int64_t)attempt, (int64_t)r->rank,
                 r->node, (int64_t)r->local_rank, (int64_t)r->pid, r->state, (int64_t)r->client,
                 r->step, r->loss, r->samples, r->compute_ms, r->comm_ms, r->straggler_score,
                 (int64_t)r->exit_code, (int64_t)r->signal, r->updated) < 0)
        return -1;
    return run (st, s, "put rank", err);
}

int store_metric_put (store_t *st, int64_t job, int64_t step, int attempt, int64_t time,
                      double loss, double samples_per_s, double compute_ms, double comm_ms,
                      dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_METRIC_PUT, err))
        || bind (st, s, err, "IIIIDDDD", job, step, (int64_t)attempt, time, loss, samples_per_s,
                 compute_ms, comm_ms) < 0)
        return -1;
    return run (st, s, "put metric", err);
}

static int query_int64 (store_t *st, sqlite3_stmt *s, int col, int64_t *out, const char *what,
                        dt_error_t *err)
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
    if (!(s = get_stmt (st, S_METRIC_COUNT, err)) || bind (st, s, err, "I", job) < 0)
        return -1;
    return query_int64 (st, s, 0, n, "count metrics", err) < 0 ? -1 : 0;
}

int store_metrics_thin (store_t *st, int64_t job, int64_t stride, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (stride < 1)
        return errnoprintf (err, EINVAL, "metrics stride must be >= 1");
    if (!(s = get_stmt (st, S_METRIC_THIN, err)) || bind (st, s, err, "II", job, stride) < 0)
        return -1;
    return run (st, s, "thin metrics", err);
}

int store_ckpt_put_pending (store_t *st, int64_t job, int64_t step, int attempt,
                            const char *dir, int world_size, int64_t now, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_CKPT_PENDING, err))
        || bind (st, s, err, "IIISII", job, step, (int64_t)attempt, dir, (int64_t)world_size,
                 now) < 0)
        return -1;
    return run (st, s, "put checkpoint", err);
}

int store_shard_put (store_t *st, int64_t job, int64_t step, int rank, int attempt,
                     const char *node, const char *path, int64_t bytes, const char *crc32c,
                     int64_t now, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_SHARD_PUT, err))
        || bind (st, s, err, "IIIIsSISI", job, step, (int64_t)rank, (int64_t)attempt, node, path,
                 bytes, crc32c, now) < 0)
        return -1;
    return run (st, s, "put shard", err);
}

int store_ckpt_shards (store_t *st, int64_t job, int64_t step, int *nshards, int64_t *bytes,
                       dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    *nshards = 0;
    *bytes = 0;
    if (!(s = get_stmt (st, S_CKPT_SHARDS, err)) || bind (st, s, err, "II", job, step) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        *nshards = sqlite3_column_int (s, 0);
        *bytes = sqlite3_column_int64 (s, 1);
    }
    sqlite3_reset (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return dt_db_error (st->db, rc, "count shards", err);
    return 0;
}

int store_ckpt_set_state (store_t *st, int64_t job, int64_t step, const char *state,
                          const char *sha256, int64_t commit_time, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_CKPT_STATE, err))
        || bind (st, s, err, "IISsT", job, step, state, sha256, commit_time) < 0)
        return -1;
    return run (st, s, "set checkpoint state", err);
}

int store_ckpt_latest (store_t *st, int64_t job, int64_t *step, char *dir, size_t dirlen,
                       char *sha256, size_t shalen, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = get_stmt (st, S_CKPT_LATEST, err)) || bind (st, s, err, "I", job) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        *step = sqlite3_column_int64 (s, 0);
        col_str (s, 1, dir, dirlen);
        col_str (s, 2, sha256, shalen);
        sqlite3_reset (s);
        return 1;
    }
    sqlite3_reset (s);
    if (rc == SQLITE_DONE)
        return 0;
    return dt_db_error (st->db, rc, "latest checkpoint", err);
}

int store_ckpt_beyond_keep (store_t *st, int64_t job, int keep, int64_t **steps, int *n,
                            dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc, cap = 0;
    *steps = NULL;
    *n = 0;
    if (!(s = get_stmt (st, S_CKPT_COMMITTED, err))
        || bind (st, s, err, "II", job, (int64_t)keep) < 0)
        return -1;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            int64_t *p = realloc (*steps, cap * sizeof (**steps));
            if (!p) {
                sqlite3_reset (s);
                free (*steps);
                *steps = NULL;
                return errnoprintf (err, ENOMEM, "out of memory");
            }
            *steps = p;
        }
        (*steps)[(*n)++] = sqlite3_column_int64 (s, 0);
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE) {
        free (*steps);
        *steps = NULL;
        *n = 0;
        return dt_db_error (st->db, rc, "list checkpoints", err);
    }
    return 0;
}

int store_ckpt_state (store_t *st, int64_t job, int64_t step, char *buf, size_t len,
                      dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = get_stmt (st, S_CKPT_GETSTATE, err)) || bind (st, s, err, "II", job, step) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        col_str (s, 0, buf, len);
        sqlite3_reset (s);
        return 0;
    }
    sqlite3_reset (s);
    if (rc == SQLITE_DONE)
        return errnoprintf (err, ENOENT, "checkpoint %lld of job %lld not found",
                            (long long)step, (long long)job);
    return dt_db_error (st->db, rc, "checkpoint state", err);
}

json_t *store_ckpt_shards_json (store_t *st, int64_t job, int64_t step, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_CKPT_SHARDS_LIST, err)) || bind (st, s, err, "II", job, step) < 0)
        return NULL;
    return rows_json (st, s, "list shards", err);
}

/* --- node health, checkpoint lists (issue 7) -------------------------------- */

int store_node_health_check (store_t *st, const char *name, int64_t now, int64_t window_ms,
                             int jobs_threshold, bool *suspect, dt_error_t *err)
{
    sqlite3_stmt *s;
    int64_t n = 0;
    char note[128];

    *suspect = false;
    if (!(s = get_stmt (st, S_NODE_FAIL_JOBS, err))
        || bind (st, s, err, "SI", name, now - window_ms) < 0
        || query_int64 (st, s, 0, &n, "count node failures", err) < 0)
        return -1;
    if (n < jobs_threshold)
        return 0;
    snprintf (note, sizeof (note), "failures in %lld jobs within %lld s", (long long)n,
              (long long)(window_ms / 1000));
    if (!(s = get_stmt (st, S_NODE_SUSPECT, err)) || bind (st, s, err, "SIS", name, now, note) < 0
        || run (st, s, "mark node suspect", err) < 0)
        return -1;
    *suspect = sqlite3_changes (dt_db_handle (st->db)) > 0;
    return 0;
}

int store_node_clear (store_t *st, const char *name, int64_t now, const char *note,
                      dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_NODE_CLEAR, err)) || bind (st, s, err, "Ss", name, note) < 0
        || run (st, s, "clear node", err) < 0)
        return -1;
    if (sqlite3_changes (dt_db_handle (st->db)) == 0)
        return errnoprintf (err, ENOENT, "node '%s' is not known", name);
    if (!(s = get_stmt (st, S_NODE_CLEARED_EVENT, err))
        || bind (st, s, err, "SIs", name, now, note) < 0)
        return -1;
    return run (st, s, "record node clear", err);
}

/* The uid in a clear's detail as jobs_node_clear() writes it ("cleared by
 * uid N"); -1 if the text does not say. */
static long clear_uid (const char *detail)
{
    const char *p = detail ? strstr (detail, "by uid ") : NULL;
    char *end;
    long v;

    if (!p)
        return -1;
    errno = 0;
    v = strtol (p + 7, &end, 10);
    return (end == p + 7 || errno || v < 0) ? -1 : v;
}

json_t *store_node_json (store_t *st, const char *name, int limit, dt_error_t *err)
{
    sqlite3_stmt *s;
    json_t *node = NULL, *hist, *cleared = json_null ();
    int rc;

    if (!(s = get_stmt (st, S_NODE_VIEW, err)) || bind (st, s, err, "S", name) < 0)
        return NULL;
    rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        if (rc == SQLITE_DONE)
            errnoprintf (err, ENOENT, "node '%s' is not known", name);
        else
            dt_db_error (st->db, rc, "node view", err);
        return NULL;
    }
    node = row_json (s);
    sqlite3_reset (s);

    if (!(s = get_stmt (st, S_NODE_LAST_CLEAR, err)) || bind (st, s, err, "S", name) < 0)
        goto error;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text (s, 1);
        long uid = clear_uid (detail);
        char buf[40];
        json_decref (cleared);
        cleared = json_pack ("{s:s s:s? s:o}", "time",
                             dt_format_time (sqlite3_column_int64 (s, 0), buf, sizeof (buf)),
                             "detail", detail, "uid",
                             uid < 0 ? json_null () : json_integer (uid));
    }
    sqlite3_reset (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        dt_db_error (st->db, rc, "node last clear", err);
        goto error;
    }
    if (!cleared) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    json_object_set_new (node, "cleared", cleared);
    cleared = NULL;

    if (!(s = get_stmt (st, S_NODE_HISTORY, err))
        || bind (st, s, err, "SI", name, (int64_t)limit) < 0
        || !(hist = rows_json (st, s, "node history", err)))
        goto error;
    json_object_set_new (node, "history", hist);
    return node;
error:
    json_decref (cleared);
    json_decref (node);
    return NULL;
}

json_t *store_nodes_suspect (store_t *st, dt_error_t *err)
{
    sqlite3_stmt *s;
    json_t *rows, *names, *r;
    size_t i;
    if (!(s = get_stmt (st, S_NODES_SUSPECT, err))
        || !(rows = rows_json (st, s, "list suspect nodes", err)))
        return NULL;
    names = json_array ();
    json_array_foreach (rows, i, r)
        json_array_append (names, json_object_get (r, "name"));
    json_decref (rows);
    return names;
}

int store_ckpt_list (store_t *st, int64_t job, const char *state, int64_t **steps, int *n,
                     dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc, cap = 0;
    *steps = NULL;
    *n = 0;
    if (!(s = get_stmt (st, S_CKPT_IN_STATE, err)) || bind (st, s, err, "IS", job, state) < 0)
        return -1;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            int64_t *p = realloc (*steps, cap * sizeof (**steps));
            if (!p) {
                sqlite3_reset (s);
                free (*steps);
                *steps = NULL;
                *n = 0;
                return errnoprintf (err, ENOMEM, "out of memory");
            }
            *steps = p;
        }
        (*steps)[(*n)++] = sqlite3_column_int64 (s, 0);
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE) {
        free (*steps);
        *steps = NULL;
        *n = 0;
        return dt_db_error (st->db, rc, "list checkpoints", err);
    }
    return 0;
}

/* --- reads ----------------------------------------------------------------- */

int store_attempt_by_token (store_t *st, const char *token, int64_t *job, int *attempt,
                            enum attempt_state *state, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = get_stmt (st, S_ATT_BY_TOKEN, err)) || bind (st, s, err, "S", token) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        char buf[32];
        *job = sqlite3_column_int64 (s, 0);
        *attempt = sqlite3_column_int (s, 1);
        col_str (s, 2, buf, sizeof (buf));
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
    if (!(s = get_stmt (st, S_JOB_LOAD, err)) || bind (st, s, err, "I", id) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        if (rc == SQLITE_DONE)
            return errnoprintf (err, ENOENT, "job %lld not found", (long long)id);
        return dt_db_error (st->db, rc, "load job", err);
    }
    r->id = sqlite3_column_int64 (s, 0);
    col_str (s, 1, r->name, sizeof (r->name));
    r->uid = sqlite3_column_int64 (s, 2);
    r->gid = sqlite3_column_int64 (s, 3);
    col_str (s, 4, r->user, sizeof (r->user));
    col_str (s, 5, buf, sizeof (buf));
    r->state = fsm_job_state_parse (buf);
    col_str (s, 6, r->reason, sizeof (r->reason));
    r->spec = col_json (s, 7);
    r->submit_time = col_int (s, 8, 0);
    r->start_time = col_int (s, 9, 0);
    r->end_time = col_int (s, 10, 0);
    r->attempts = sqlite3_column_int (s, 11);
    r->restarts = sqlite3_column_int (s, 12);
    r->exclude = col_json (s, 13);
    r->last_step = col_int (s, 14, -1);
    r->last_loss = col_real (s, 15);
    r->throughput = col_real (s, 16);
    r->metrics_stride = col_int (s, 17, 1);
    r->failure = col_json (s, 18);
    r->result = col_json (s, 19);
    sqlite3_reset (s);
    if (!r->exclude)
        r->exclude = json_array ();
    if (!r->spec || (int)r->state < 0) {
        store_job_row_clear (r);
        return errnoprintf (err, EILSEQ, "job %lld: corrupt row", (long long)id);
    }
    return 0;
}

int store_attempt_load (store_t *st, int64_t job, int attempt, struct store_attempt_row *r,
                        dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    char buf[32];

    store_attempt_row_init (r);
    if (!(s = get_stmt (st, S_ATT_LOAD, err))
        || bind (st, s, err, "II", job, (int64_t)attempt) < 0)
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
    col_str (s, 2, buf, sizeof (buf));
    r->state = fsm_attempt_state_parse (buf);
    col_str (s, 3, r->token, sizeof (r->token));
    col_str (s, 4, r->launcher, sizeof (r->launcher));
    col_str (s, 5, r->handle, sizeof (r->handle));
    r->slurm_job_id = col_int (s, 6, 0);
    col_str (s, 7, r->batch_host, sizeof (r->batch_host));
    col_str (s, 8, r->nodelist, sizeof (r->nodelist));
    r->num_nodes = sqlite3_column_int (s, 9);
    r->spare_nodes = sqlite3_column_int (s, 10);
    r->ranks_per_node = sqlite3_column_int (s, 11);
    r->world_size = sqlite3_column_int (s, 12);
    r->exclude = col_json (s, 13);
    r->resume_step = col_int (s, 14, -1);
    col_str (s, 15, r->resume_dir, sizeof (r->resume_dir));
    col_str (s, 16, r->resume_sha256, sizeof (r->resume_sha256));
    col_str (s, 17, r->master_addr, sizeof (r->master_addr));
    r->master_port = col_int (s, 18, 0);
    col_str (s, 19, r->cause, sizeof (r->cause));
    col_str (s, 20, r->cause_node, sizeof (r->cause_node));
    r->cause_rank = col_int (s, 21, -1);
    col_str (s, 22, r->detail, sizeof (r->detail));
    r->evidence = col_json (s, 23);
    r->fail_time = col_int (s, 24, 0);
    r->exit_code = col_int (s, 25, -1);
    r->submit_time = col_int (s, 26, 0);
    r->start_time = col_int (s, 27, 0);
    r->end_time = col_int (s, 28, 0);
    r->provenance = col_json (s, 29);
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
    if (!(s = get_stmt (st, S_LIVE_JOBS, err)))
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

    if (!(s = get_stmt (st, S_JOB_VIEW, err)) || bind (st, s, err, "I", id) < 0)
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
    job = row_json (s);
    sqlite3_reset (s);
    if (!with_attempts)
        return job;

    if (!(s = get_stmt (st, S_ATT_VIEW, err))
        || bind (st, s, err, "III", id, nodes_max < 0 ? (int64_t)-1 : (int64_t)nodes_max,
                 (int64_t)prov_memo_min_bytes) < 0
        || !(atts = rows_json (st, s, "attempt view", err))) {
        json_decref (job);
        return NULL;
    }
    size_t i;
    json_t *a;
    json_array_foreach (atts, i, a) {
        json_t *nodes, *prov, *pn;
        int n = json_integer_value (json_object_get (a, "attempt"));
        if (!(s = get_stmt (st, S_ATTNODES_VIEW, err))
            || bind (st, s, err, "III", id, (int64_t)n,
                     nodes_max < 0 ? (int64_t)-1 : (int64_t)nodes_max + 1) < 0
            || !(nodes = rows_json (st, s, "attempt nodes view", err))) {
            json_decref (atts);
            json_decref (job);
            return NULL;
        }
        /* A huge attempt: its first nodes only (issue 9: the answer stays
         * small; every rank and its node is at /v1/jobs/{id}/ranks). */
        if (nodes_max >= 0 && json_array_size (nodes) > (size_t)nodes_max) {
            json_array_remove (nodes, nodes_max);
            json_object_set_new (a, "nodes_truncated", json_true ());
        }
        json_object_set_new (a, "nodes", nodes);
        if (json_integer_value (json_object_get (a, "provenance_big"))) {
            json_t *p = prov_memo_get (st, id, n, nodes_max, err);
            if (!p) {
                json_decref (atts);
                json_decref (job);
                return NULL;
            }
            json_object_set_new (a, "provenance", p);
        }
        json_object_del (a, "provenance_big");
        prov = json_object_get (json_object_get (a, "provenance"), "machine");
        if (nodes_max >= 0 && (pn = json_object_get (prov, "nodes"))
            && json_array_size (pn) > (size_t)nodes_max) {
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
    if (!(s = get_stmt (st, S_EVENTS_VIEW, err))
        || bind (st, s, err, "III", job, after, (int64_t)limit) < 0)
        return NULL;
    return rows_json (st, s, "events view", err);
}

json_t *store_ckpts_json (store_t *st, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_CKPTS_VIEW, err)) || bind (st, s, err, "I", job) < 0)
        return NULL;
    return rows_json (st, s, "checkpoints view", err);
}

json_t *store_metrics_json (store_t *st, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_METRICS_VIEW, err)) || bind (st, s, err, "I", job) < 0)
        return NULL;
    return rows_json (st, s, "metrics view", err);
}

json_t *store_ranks_json (store_t *st, int64_t job, int attempt, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_RANKS_VIEW, err))
        || bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return NULL;
    return rows_json (st, s, "ranks view", err);
}

json_t *store_nodes_json (store_t *st, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_NODES_VIEW, err)))
        return NULL;
    return rows_json (st, s, "nodes view", err);
}

/* {"jobs": {state: n}, "attempts": {state: n}, "failures": {cause: n},
 *  "checkpoints_committed": n} */
json_t *store_counts_json (store_t *st, dt_error_t *err)
{
    static const struct { enum stmt_id id; const char *key; } groups[] = {
        { S_JOB_COUNTS, "jobs" }, { S_ATT_COUNTS, "attempts" }, { S_FAIL_COUNTS, "failures" },
    };
    json_t *out = json_object ();
    sqlite3_stmt *s;
    int64_t n = 0;

    for (size_t g = 0; g < sizeof (groups) / sizeof (groups[0]); g++) {
        json_t *o = json_object ();
        int rc;
        if (!(s = get_stmt (st, groups[g].id, err)))
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
    if (!(s = get_stmt (st, S_CKPT_COUNT, err))
        || query_int64 (st, s, 0, &n, "count checkpoints", err) < 0)
        goto error;
    json_object_set_new (out, "checkpoints_committed", json_integer (n));
    return out;
error:
    json_decref (out);
    return NULL;
}

/* --- goodput (report.c) ---------------------------------------------------- */

int store_goodput_put (store_t *st, const struct store_goodput_row *g, const char *hist,
                       dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = get_stmt (st, S_GOODPUT_PUT, err))
        || bind (st, s, err, "IITNTNTIIIDTsI", g->job_id, (int64_t)g->attempt, g->train_start,
                 g->first_step, g->first_step_time, g->last_step, g->last_step_time,
                 g->hb_samples, g->busy_samples, g->step_samples, g->step_ms_sum,
                 g->batch_samples, hist, dt_real_ms ()) < 0)
        return -1;
    return run (st, s, "attempt_goodput", err);
}

int store_goodput_load (store_t *st, int64_t job, int attempt, struct store_goodput_row *g,
                        char **hist, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;

    *hist = NULL;
    if (!(s = get_stmt (st, S_GOODPUT_LOAD, err))
        || bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text (s, 10);
        g->job_id = job;
        g->attempt = attempt;
        g->train_start = col_int (s, 0, 0);
        g->first_step = col_int (s, 1, -1);
        g->first_step_time = col_int (s, 2, 0);
        g->last_step = col_int (s, 3, -1);
        g->last_step_time = col_int (s, 4, 0);
        g->hb_samples = col_int (s, 5, 0);
        g->busy_samples = col_int (s, 6, 0);
        g->step_samples = col_int (s, 7, 0);
        g->step_ms_sum = sqlite3_column_double (s, 8);
        g->batch_samples = col_int (s, 9, 0);
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
                              int64_t dflt, int64_t *out, const char *what, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;

    *out = dflt;
    if (!(s = get_stmt (st, id, err)) || bind (st, s, err, "II", job, (int64_t)attempt) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW)
        *out = col_int (s, 0, dflt);
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
                           "attempt left the queue", err) < 0
        || attempt_aggregate (st, S_ATT_RESUBMITTED, job, attempt, 0, &n,
                              "attempt resubmitted", err) < 0
        || attempt_aggregate (st, S_ATT_RESULT_TIME, job, attempt, 0, &t->result_time,
                              "attempt result time", err) < 0)
        return -1;
    t->resubmitted = attempt > 1 && n > 0;
    return 0;
}
