/* test_db.c: SQLite helpers on a real database file in a temp dir. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/db.h"
#include "common/log.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/test_db.XXXXXX";

static const struct dt_db_migration migs[] = {
    { 1, "001-initial.sql",
      "CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
      "CREATE TABLE attempts (id INTEGER PRIMARY KEY,"
      "  job_id INTEGER NOT NULL REFERENCES jobs(id));" },
    { 2, "002-state.sql",
      "ALTER TABLE jobs ADD COLUMN state TEXT NOT NULL DEFAULT 'pending';" },
};

static void path_of (char *buf, size_t len, const char *name)
{
    snprintf (buf, len, "%s/%s", dir, name);
}

static int pragma_int (dt_db_t *db, const char *sql)
{
    sqlite3_stmt *st;
    int v = -1;
    if (dt_db_prepare (db, sql, &st, NULL) < 0)
        return -1;
    if (sqlite3_step (st) == SQLITE_ROW)
        v = sqlite3_column_int (st, 0);
    sqlite3_finalize (st);
    return v;
}

static const char *pragma_text (dt_db_t *db, const char *sql, char *buf, size_t len)
{
    sqlite3_stmt *st;
    buf[0] = '\0';
    if (dt_db_prepare (db, sql, &st, NULL) < 0)
        return buf;
    if (sqlite3_step (st) == SQLITE_ROW)
        snprintf (buf, len, "%s", (const char *)sqlite3_column_text (st, 0));
    sqlite3_finalize (st);
    return buf;
}

static void test_fresh (void)
{
    char path[256], buf[32];
    dt_error_t err = { "" };
    dt_db_t *db;

    path_of (path, sizeof (path), "fresh.db");
    db = dt_db_open (path, migs, 2, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db);
    CU_ASSERT_EQUAL (dt_db_version (db), 2);
    CU_ASSERT_EQUAL (pragma_int (db, "PRAGMA user_version"), 2);
    CU_ASSERT_STRING_EQUAL (pragma_text (db, "PRAGMA journal_mode", buf, sizeof (buf)),
                            "wal");
    CU_ASSERT_EQUAL (pragma_int (db, "PRAGMA synchronous"), 2); /* FULL */
    CU_ASSERT_EQUAL (pragma_int (db, "PRAGMA foreign_keys"), 1);
    CU_ASSERT (pragma_int (db, "PRAGMA busy_timeout") >= 1000);
    CU_ASSERT_PTR_NOT_NULL (dt_db_handle (db));
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO jobs (name) VALUES ('a')", &err), 0);
    CU_ASSERT_EQUAL (pragma_int (db, "SELECT count(*) FROM jobs WHERE state='pending'"),
                     1);
    CU_ASSERT_EQUAL (dt_db_integrity_check (db, &err), 0);
    dt_db_close (db);

    /* reopening at the same version applies nothing and keeps data */
    db = dt_db_open (path, migs, 2, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db);
    CU_ASSERT_EQUAL (pragma_int (db, "SELECT count(*) FROM jobs"), 1);
    dt_db_close (db);
}

static void test_upgrade_and_newer (void)
{
    char path[256];
    dt_error_t err = { "" };
    dt_db_t *db;

    path_of (path, sizeof (path), "upgrade.db");
    /* an older program created version 1 */
    db = dt_db_open (path, migs, 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db);
    CU_ASSERT_EQUAL (dt_db_version (db), 1);
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO jobs (name) VALUES ('old')", &err), 0);
    dt_db_close (db);

    /* the new program migrates it, keeping the rows */
    db = dt_db_open (path, migs, 2, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db);
    CU_ASSERT_EQUAL (dt_db_version (db), 2);
    CU_ASSERT_EQUAL (pragma_int (db, "SELECT count(*) FROM jobs WHERE name='old' "
                                     "AND state='pending'"),
                     1);
    dt_db_close (db);

    /* the old program refuses the newer database */
    errno = 0;
    db = dt_db_open (path, migs, 1, &err);
    CU_ASSERT_PTR_NULL (db);
    CU_ASSERT_EQUAL (errno, EPROTO);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (err.text, "version 2 is newer than this program knows (1)"));
}

static void test_failed_migration_rolls_back (void)
{
    char path[256];
    dt_error_t err = { "" };
    dt_db_t *db;
    const struct dt_db_migration bad[] = {
        migs[0],
        { 2, "002-broken.sql",
          "CREATE TABLE half (x INTEGER); INSERT INTO nosuchtable VALUES (1);" },
    };

    path_of (path, sizeof (path), "broken.db");
    errno = 0;
    db = dt_db_open (path, bad, 2, &err);
    CU_ASSERT_PTR_NULL (db);
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "migration 2 (002-broken.sql)"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "no such table: nosuchtable"));

    /* version 1 committed, version 2 left no trace */
    db = dt_db_open (path, migs, 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db);
    CU_ASSERT_EQUAL (dt_db_version (db), 1);
    CU_ASSERT_EQUAL (
      pragma_int (db, "SELECT count(*) FROM sqlite_master WHERE name='half'"), 0);
    dt_db_close (db);

    /* bad migration lists */
    const struct dt_db_migration unordered[] = { migs[1], migs[0] };
    errno = 0;
    CU_ASSERT_PTR_NULL (dt_db_open (path, unordered, 2, &err));
    CU_ASSERT_EQUAL (errno, EINVAL);
}

static void test_errors_and_transactions (void)
{
    char path[256];
    dt_error_t err = { "" };
    dt_db_t *db;
    sqlite3_stmt *st = NULL;

    path_of (path, sizeof (path), "tx.db");
    db = dt_db_open (path, migs, 2, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db);

    /* constraint -> EEXIST, with the SQLite message */
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO jobs (name) VALUES ('x')", &err), 0);
    errno = 0;
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO jobs (name) VALUES ('x')", &err), -1);
    CU_ASSERT_EQUAL (errno, EEXIST);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "UNIQUE constraint failed"));
    /* foreign keys are enforced */
    errno = 0;
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO attempts (job_id) VALUES (999)", &err),
                     -1);
    CU_ASSERT_EQUAL (errno, EEXIST);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "FOREIGN KEY constraint failed"));
    /* syntax error -> EINVAL */
    errno = 0;
    CU_ASSERT_EQUAL (dt_db_prepare (db, "SELEKT 1", &st, &err), -1);
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "syntax error"));

    /* rollback discards, commit keeps */
    CU_ASSERT_EQUAL (dt_db_begin (db, &err), 0);
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO jobs (name) VALUES ('gone')", &err), 0);
    CU_ASSERT_EQUAL (dt_db_rollback (db), 0);
    CU_ASSERT_EQUAL (pragma_int (db, "SELECT count(*) FROM jobs WHERE name='gone'"), 0);
    CU_ASSERT_EQUAL (dt_db_rollback (db), 0); /* no transaction: quiet */
    CU_ASSERT_EQUAL (dt_db_begin (db, &err), 0);
    CU_ASSERT_EQUAL (dt_db_exec (db, "INSERT INTO jobs (name) VALUES ('kept')", &err), 0);
    CU_ASSERT_EQUAL (dt_db_commit (db, &err), 0);

    /* a second connection sees the committed row (WAL, no lock held) */
    dt_db_t *db2 = dt_db_open (path, migs, 2, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (db2);
    CU_ASSERT_EQUAL (pragma_int (db2, "SELECT count(*) FROM jobs WHERE name='kept'"), 1);
    /* while db holds the write lock, db2's BEGIN IMMEDIATE waits then fails
     * with EBUSY; use a short timeout to keep the test fast */
    sqlite3_busy_timeout (dt_db_handle (db2), 50);
    CU_ASSERT_EQUAL (dt_db_begin (db, &err), 0);
    errno = 0;
    CU_ASSERT_EQUAL (dt_db_begin (db2, &err), -1);
    CU_ASSERT_EQUAL (errno, EBUSY);
    CU_ASSERT_EQUAL (dt_db_commit (db, &err), 0);
    CU_ASSERT_EQUAL (dt_db_begin (db2, &err), 0);
    CU_ASSERT_EQUAL (dt_db_commit (db2, &err), 0);
    dt_db_close (db2);

    /* prepared statement kept by the caller */
    CU_ASSERT_EQUAL (dt_db_prepare (db, "SELECT name FROM jobs WHERE id = ?", &st, &err),
                     0);
    sqlite3_bind_int (st, 1, 1);
    CU_ASSERT_EQUAL (sqlite3_step (st), SQLITE_ROW);
    CU_ASSERT_STRING_EQUAL ((const char *)sqlite3_column_text (st, 0), "x");
    sqlite3_finalize (st);
    dt_db_close (db);
    dt_db_close (NULL);
}

static void test_not_a_database (void)
{
    char path[256];
    dt_error_t err = { "" };
    FILE *f;

    path_of (path, sizeof (path), "garbage.db");
    f = fopen (path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    for (int i = 0; i < 200; i++)
        fputs ("this is not an sqlite database\n", f);
    fclose (f);
    errno = 0;
    CU_ASSERT_PTR_NULL (dt_db_open (path, migs, 2, &err));
    CU_ASSERT_EQUAL (errno, EILSEQ);
    CU_ASSERT (strlen (err.text) > 0);

    /* a directory that does not exist */
    path_of (path, sizeof (path), "no/such/dir/x.db");
    errno = 0;
    CU_ASSERT_PTR_NULL (dt_db_open (path, migs, 2, &err));
    CU_ASSERT (errno == ENOENT || errno == EACCES);
}

static const struct dt_unit_test tests[] = {
    { "fresh database: pragmas and migrations", test_fresh },
    { "upgrade from previous version, refuse newer", test_upgrade_and_newer },
    { "failed migration rolls back", test_failed_migration_rolls_back },
    { "errors mapped to errno, transactions", test_errors_and_transactions },
    { "not a database, bad path", test_not_a_database },
    { NULL, NULL },
};

int main (void)
{
    char cmd[300];
    int rc;

    if (!mkdtemp (dir))
        return 99;
    /* SQLite errors are logged; keep the test output readable */
    dt_log_init ("test_db", DT_LOG_STDERR, LOG_CRIT);
    rc = dt_unit_run ("db", tests);
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        fprintf (stderr, "cannot remove %s\n", dir);
    return rc;
}
