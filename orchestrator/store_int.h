/* store_int.h: what the files of the store (store*.c) share: the
 * statements, the store's struct, and the helpers that prepare, bind and
 * step statements and turn rows into JSON.  Not for the rest of dtctld. */
#ifndef DT_STORE_INT_H
#define DT_STORE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sqlite3.h>
#include <jansson.h>
#include "common/db.h"
#include "common/errprintf.h"
#include "orchestrator/store.h"

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
    S_METRICS_RANGE,
    S_METRIC_AT,
    S_METRIC_BEFORE,
    S_METRIC_CHANGE,
    S_RANKS_VIEW,
    S_NODES_VIEW,
    S_JOB_COUNTS,
    S_ATT_COUNTS,
    S_FAIL_COUNTS,
    S_CKPT_COUNT,
    S_NODE_FAIL_JOBS,
    S_NODE_SUSPECT,
    S_NODE_EXISTS,
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

/* The SQL of each statement (store_sql.c). */
extern const char *const store_sql[S_COUNT];

/* Job views show a huge attempt's provenance trimmed to its first nodes.
 * Trimming means reading the whole text (about 70 bytes a node), so the
 * trimmed copy is kept, per attempt, until the store writes that attempt
 * again: dtctld is the database's only writer. */
enum {
    PROV_MEMO_SLOTS = 8,
    PROV_MEMO_MIN_BYTES = 65536, /* smaller: read every time */
};

struct prov_memo {
    int64_t job; /* 0: free */
    int attempt, nodes_max;
    json_t *prov;  /* owned */
    uint64_t used; /* for eviction: the least recently used goes */
};

/* The metrics route's answers, per (job, max_points), until the store
 * writes that job's metrics again (store_plot.c). */
enum { PLOT_MEMO_SLOTS = 8 };

struct plot_memo {
    int64_t job; /* 0: free */
    int max_points;
    char *text; /* owned */
    size_t len;
    uint64_t used; /* for eviction: the least recently used goes */
};

struct store {
    dt_db_t *db;
    sqlite3_stmt *stmt[S_COUNT];
    struct prov_memo memo[PROV_MEMO_SLOTS];
    uint64_t memo_clock;
    struct plot_memo plot[PLOT_MEMO_SLOTS];
    uint64_t plot_clock;
};

/* The statement 'id', prepared on first use, else reset with its bindings
 * cleared (borrowed: the store keeps it), or NULL with err. */
sqlite3_stmt *store_stmt (store_t *st, enum stmt_id id, dt_error_t *err);
/* Bind the arguments described by 'fmt', one char per parameter ?1, ?2, ...:
 *   I int64           N int64, < 0 -> NULL      T time, 0 -> NULL
 *   S string          s string, NULL/"" -> NULL
 *   J json_t* (NULL -> NULL)                    D double, NAN -> NULL
 *   _ skip this parameter number
 * 'fmt' must have exactly one character per parameter of 's'. */
int store_bind (store_t *st, sqlite3_stmt *s, dt_error_t *err, const char *fmt, ...);
/* Step a statement that returns no rows. */
int store_run (store_t *st, sqlite3_stmt *s, const char *what, dt_error_t *err);
/* Step a statement returning one integer in column 'col': 1 row (*out
 * set), 0 none, -1 error. */
int store_query_int64 (store_t *st, sqlite3_stmt *s, int col, int64_t *out,
                       const char *what, dt_error_t *err);
/* Columns: "" for NULL text; 'null_value' / NAN for NULL numbers; a JSON
 * column parsed (new), NULL when NULL. */
void store_col_str (sqlite3_stmt *s, int i, char *buf, size_t len);
int64_t store_col_int (sqlite3_stmt *s, int i, int64_t null_value);
double store_col_real (sqlite3_stmt *s, int i);
json_t *store_col_json (sqlite3_stmt *s, int i);
/* The current row as an object named by its columns (new), and all rows
 * of 's' as an array (new), or NULL with err. */
json_t *store_row_json (sqlite3_stmt *s);
json_t *store_rows_json (store_t *st, sqlite3_stmt *s, const char *what, dt_error_t *err);
/* The trimmed provenance kept per attempt for the job views. */
void store_prov_memo_forget (store_t *st, int64_t job, int attempt);
/* store_plot.c: drop the job's memoised metrics answers; free them all. */
void store_plot_forget (store_t *st, int64_t job);
void store_plot_free (store_t *st);
json_t *store_prov_memo_get (store_t *st, int64_t job, int attempt, int nodes_max,
                             dt_error_t *err);

#endif
