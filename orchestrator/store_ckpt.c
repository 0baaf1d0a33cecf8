/* store_ckpt.c: checkpoint rows: pending, shards, commit, retention, the
 * latest committed one, lists by state (the two-phase commit itself is the
 * job manager's, orchestrator/jobs/checkpoint.c). */
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

int store_ckpt_put_pending (store_t *st, int64_t job, int64_t step, int attempt,
                            const char *dir, int world_size, int64_t now, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_CKPT_PENDING, err)) ||
        store_bind (st, s, err, "IIISII", job, step, (int64_t)attempt, dir,
                    (int64_t)world_size, now) < 0)
        return -1;
    return store_run (st, s, "put checkpoint", err);
}

int store_shard_put (store_t *st, int64_t job, int64_t step, int rank, int attempt,
                     const char *node, const char *path, int64_t bytes,
                     const char *crc32c, int64_t now, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_SHARD_PUT, err)) ||
        store_bind (st, s, err, "IIIIsSISI", job, step, (int64_t)rank, (int64_t)attempt,
                    node, path, bytes, crc32c, now) < 0)
        return -1;
    return store_run (st, s, "put shard", err);
}

int store_ckpt_shards (store_t *st, int64_t job, int64_t step, int *nshards,
                       int64_t *bytes, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    *nshards = 0;
    *bytes = 0;
    if (!(s = store_stmt (st, S_CKPT_SHARDS, err)) ||
        store_bind (st, s, err, "II", job, step) < 0)
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
    if (!(s = store_stmt (st, S_CKPT_STATE, err)) ||
        store_bind (st, s, err, "IISsT", job, step, state, sha256, commit_time) < 0)
        return -1;
    return store_run (st, s, "set checkpoint state", err);
}

int store_ckpt_latest (store_t *st, int64_t job, int64_t *step, char *dir, size_t dirlen,
                       char *sha256, size_t shalen, dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_stmt (st, S_CKPT_LATEST, err)) ||
        store_bind (st, s, err, "I", job) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        *step = sqlite3_column_int64 (s, 0);
        store_col_str (s, 1, dir, dirlen);
        store_col_str (s, 2, sha256, shalen);
        sqlite3_reset (s);
        return 1;
    }
    sqlite3_reset (s);
    if (rc == SQLITE_DONE)
        return 0;
    return dt_db_error (st->db, rc, "latest checkpoint", err);
}

/* The first column of every row of bound statement 's': a new array in
 * *steps (caller frees), *n of them. */
static int step_column (store_t *st, sqlite3_stmt *s, int64_t **steps, int *n,
                        dt_error_t *err)
{
    int rc, cap = 0;
    *steps = NULL;
    *n = 0;
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

int store_ckpt_beyond_keep (store_t *st, int64_t job, int keep, int64_t **steps, int *n,
                            dt_error_t *err)
{
    sqlite3_stmt *s;
    *steps = NULL;
    *n = 0;
    if (!(s = store_stmt (st, S_CKPT_COMMITTED, err)) ||
        store_bind (st, s, err, "II", job, (int64_t)keep) < 0)
        return -1;
    return step_column (st, s, steps, n, err);
}

int store_ckpt_state (store_t *st, int64_t job, int64_t step, char *buf, size_t len,
                      dt_error_t *err)
{
    sqlite3_stmt *s;
    int rc;
    if (!(s = store_stmt (st, S_CKPT_GETSTATE, err)) ||
        store_bind (st, s, err, "II", job, step) < 0)
        return -1;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        store_col_str (s, 0, buf, len);
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
    if (!(s = store_stmt (st, S_CKPT_SHARDS_LIST, err)) ||
        store_bind (st, s, err, "II", job, step) < 0)
        return NULL;
    return store_rows_json (st, s, "list shards", err);
}

int store_ckpt_list (store_t *st, int64_t job, const char *state, int64_t **steps, int *n,
                     dt_error_t *err)
{
    sqlite3_stmt *s;
    *steps = NULL;
    *n = 0;
    if (!(s = store_stmt (st, S_CKPT_IN_STATE, err)) ||
        store_bind (st, s, err, "IS", job, state) < 0)
        return -1;
    return step_column (st, s, steps, n, err);
}
