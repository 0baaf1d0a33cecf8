/* db.c: SQLite open/migrate/transaction helpers (see db.h). */
#include <config.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/db.h"
#include "common/log.h"

/* How long a writer waits for another connection's lock before SQLITE_BUSY.
 * Long enough to ride out a checkpoint or a CLI reading the file. */
static const int db_busy_timeout_ms = 5000;

struct dt_db {
    sqlite3 *h;
    char *path;
    int version;
    bool lazy; /* in a dt_db_begin_lazy transaction: FULL again at its end */
};

static int errno_from_sqlite (sqlite3 *h, int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE: return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return EBUSY;
    case SQLITE_NOMEM: return ENOMEM;
    case SQLITE_READONLY: return EROFS;
    case SQLITE_PERM:
    case SQLITE_AUTH: return EPERM;
    case SQLITE_FULL: return ENOSPC;
    case SQLITE_CONSTRAINT: return EEXIST;
    case SQLITE_TOOBIG: return E2BIG;
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_ERROR: return EINVAL;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return EILSEQ;
    case SQLITE_CANTOPEN: {
        int e = h ? sqlite3_system_errno (h) : 0;
        return e ? e : ENOENT;
    }
    case SQLITE_INTERRUPT: return EINTR;
    default: return EIO;
    }
}

int dt_db_error (dt_db_t *db, int rc, const char *context, dt_error_t *err)
{
    sqlite3 *h = db ? db->h : NULL;
    int e = errno_from_sqlite (h, rc);
    const char *msg =
      (h && sqlite3_errcode (h) != SQLITE_OK) ? sqlite3_errmsg (h) : sqlite3_errstr (rc);
    if (e == 0)
        e = EIO;
    /* A constraint violation is usually an expected answer (duplicate
     * name, dangling reference) that the caller reports; not a fault. */
    dt_log ((rc & 0xff) == SQLITE_CONSTRAINT ? LOG_INFO : LOG_ERR, "sqlite %s: %s: %s",
            db && db->path ? db->path : "", context ? context : "", msg);
    return errnoprintf (err, e, "%s: %s", context ? context : "sqlite", msg);
}

sqlite3 *dt_db_handle (dt_db_t *db)
{
    return db ? db->h : NULL;
}

int dt_db_version (dt_db_t *db)
{
    return db ? db->version : -1;
}

int dt_db_exec (dt_db_t *db, const char *sql, dt_error_t *err)
{
    int rc = sqlite3_exec (db->h, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return dt_db_error (db, rc, "exec", err);
    return 0;
}

int dt_db_prepare (dt_db_t *db, const char *sql, sqlite3_stmt **stmt, dt_error_t *err)
{
    int rc = sqlite3_prepare_v2 (db->h, sql, -1, stmt, NULL);
    if (rc != SQLITE_OK) {
        char ctx[80];
        snprintf (ctx, sizeof (ctx), "prepare '%.50s'", sql);
        return dt_db_error (db, rc, ctx, err);
    }
    return 0;
}

/* After a lazy transaction: every later commit waits for the disk again. */
static void lazy_end (dt_db_t *db)
{
    if (db->lazy &&
        sqlite3_exec (db->h, "PRAGMA synchronous = FULL", NULL, NULL, NULL) == SQLITE_OK)
        db->lazy = false;
}

int dt_db_begin (dt_db_t *db, dt_error_t *err)
{
    int rc = sqlite3_exec (db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return dt_db_error (db, rc, "begin", err);
    return 0;
}

int dt_db_begin_lazy (dt_db_t *db, dt_error_t *err)
{
    int rc = sqlite3_exec (db->h, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return dt_db_error (db, rc, "synchronous = NORMAL", err);
    db->lazy = true;
    if (dt_db_begin (db, err) < 0) {
        lazy_end (db);
        return -1;
    }
    return 0;
}

int dt_db_commit (dt_db_t *db, dt_error_t *err)
{
    int rc = sqlite3_exec (db->h, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        lazy_end (db);
    else {
        dt_db_error (db, rc, "commit", err);
        int saved = errno;
        dt_db_rollback (db);
        errno = saved;
        return -1;
    }
    return 0;
}

int dt_db_rollback (dt_db_t *db)
{
    int saved = errno;
    if (db && db->h && !sqlite3_get_autocommit (db->h))
        sqlite3_exec (db->h, "ROLLBACK", NULL, NULL, NULL);
    if (db && db->h)
        lazy_end (db);
    errno = saved;
    return 0;
}

static int query_int (dt_db_t *db, const char *sql, int *out, dt_error_t *err)
{
    sqlite3_stmt *st;
    int rc;

    if (dt_db_prepare (db, sql, &st, err) < 0)
        return -1;
    rc = sqlite3_step (st);
    if (rc != SQLITE_ROW) {
        dt_db_error (db, rc, sql, err);
        sqlite3_finalize (st);
        return -1;
    }
    *out = sqlite3_column_int (st, 0);
    sqlite3_finalize (st);
    return 0;
}

static int apply_migration (dt_db_t *db, const struct dt_db_migration *m, dt_error_t *err)
{
    char sql[64];
    char ctx[100];
    int rc;

    if (dt_db_begin (db, err) < 0)
        return -1;
    rc = sqlite3_exec (db->h, m->sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        snprintf (ctx, sizeof (ctx), "migration %d (%.60s)", m->version,
                  m->name ? m->name : "");
        dt_db_error (db, rc, ctx, err);
        goto error;
    }
    /* user_version is part of the transaction: a crash leaves either the
     * old schema with the old number or the new schema with the new one. */
    snprintf (sql, sizeof (sql), "PRAGMA user_version = %d", m->version);
    rc = sqlite3_exec (db->h, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        dt_db_error (db, rc, "set user_version", err);
        goto error;
    }
    if (dt_db_commit (db, err) < 0)
        return -1;
    db->version = m->version;
    dt_log (LOG_INFO, "%s: applied migration %d (%s)", db->path, m->version,
            m->name ? m->name : "");
    return 0;
error:
    dt_db_rollback (db);
    return -1;
}

void dt_db_close (dt_db_t *db)
{
    if (db) {
        int saved = errno;
        if (db->h)
            sqlite3_close_v2 (db->h);
        free (db->path);
        free (db);
        errno = saved;
    }
}

dt_db_t *dt_db_open (const char *path, const struct dt_db_migration *migs, int nmigs,
                     dt_error_t *err)
{
    dt_db_t *db;
    int rc, version, newest = 0;
    char mode[16] = "";
    sqlite3_stmt *st;

    for (int i = 0; i < nmigs; i++) {
        if (migs[i].version <= newest || !migs[i].sql) {
            errnoprintf (err, EINVAL, "migration %d: versions must increase from 1", i);
            return NULL;
        }
        newest = migs[i].version;
    }
    if (!(db = calloc (1, sizeof (*db))) || !(db->path = strdup (path))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    rc = sqlite3_open_v2 (path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        dt_db_error (db, rc, path, err);
        goto error;
    }
    sqlite3_extended_result_codes (db->h, 1);
    sqlite3_busy_timeout (db->h, db_busy_timeout_ms);

    /* WAL: readers (CLI status queries) never block the writer. */
    if (dt_db_prepare (db, "PRAGMA journal_mode = WAL", &st, err) < 0)
        goto error;
    rc = sqlite3_step (st);
    if (rc == SQLITE_ROW)
        snprintf (mode, sizeof (mode), "%s", (const char *)sqlite3_column_text (st, 0));
    sqlite3_finalize (st);
    if (rc != SQLITE_ROW) {
        dt_db_error (db, rc, path, err);
        goto error;
    }
    if (strcmp (mode, "wal") != 0) {
        errnoprintf (err, EIO, "%s: cannot enable WAL mode (journal_mode=%s)", path,
                     mode);
        goto error;
    }
    /* FULL: a committed transaction survives power loss, not just a crash
     * (NORMAL in WAL mode may lose the last commits). */
    if (dt_db_exec (db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;", err) < 0)
        goto error;

    if (query_int (db, "PRAGMA user_version", &version, err) < 0)
        goto error;
    db->version = version;
    if (version > newest) {
        errnoprintf (
          err, EPROTO,
          "%s: database schema version %d is newer than this program knows (%d)", path,
          version, newest);
        goto error;
    }
    for (int i = 0; i < nmigs; i++) {
        if (migs[i].version <= db->version)
            continue;
        if (apply_migration (db, &migs[i], err) < 0)
            goto error;
    }
    return db;
error:
    dt_db_close (db);
    return NULL;
}

int dt_db_integrity_check (dt_db_t *db, dt_error_t *err)
{
    sqlite3_stmt *st;
    int rc;

    if (dt_db_prepare (db, "PRAGMA integrity_check", &st, err) < 0)
        return -1;
    rc = sqlite3_step (st);
    if (rc != SQLITE_ROW) {
        dt_db_error (db, rc, "integrity_check", err);
        sqlite3_finalize (st);
        return -1;
    }
    const char *res = (const char *)sqlite3_column_text (st, 0);
    if (!res || strcmp (res, "ok") != 0) {
        errnoprintf (err, EILSEQ, "integrity_check: %s", res ? res : "(null)");
        sqlite3_finalize (st);
        return -1;
    }
    sqlite3_finalize (st);
    return 0;
}
