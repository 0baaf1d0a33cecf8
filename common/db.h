/* db.h: SQLite helpers: open, migrate, transactions, errors.
 *
 * The database is opened in WAL mode with synchronous=FULL (a committed
 * transaction survives kill -9 and power loss) and a busy timeout.  The
 * schema is a list of migrations, applied in order inside one transaction
 * each, with PRAGMA user_version recording the version reached.  SQLite
 * errors are mapped to errno and their message is put in err and logged.
 */
#ifndef DT_DB_H
#define DT_DB_H

#include <sqlite3.h>
#include "common/errprintf.h"

struct dt_db_migration {
    int version;      /* 1, 2, 3, ... strictly increasing */
    const char *name; /* e.g. "001-initial.sql" */
    const char *sql;
};

typedef struct dt_db dt_db_t;

/* Open (creating) 'path' and bring it to the newest migration.  A database
 * newer than the code knows is refused (EPROTO). */
dt_db_t *dt_db_open (const char *path, const struct dt_db_migration *migs, int nmigs,
                     dt_error_t *err);
void dt_db_close (dt_db_t *db);

sqlite3 *dt_db_handle (dt_db_t *db); /* borrowed */
int dt_db_version (dt_db_t *db);

/* Run SQL text with no results. */
int dt_db_exec (dt_db_t *db, const char *sql, dt_error_t *err);
/* Prepare a statement kept by the caller (finalize it with sqlite3_finalize). */
int dt_db_prepare (dt_db_t *db, const char *sql, sqlite3_stmt **stmt, dt_error_t *err);

int dt_db_begin (dt_db_t *db, dt_error_t *err); /* BEGIN IMMEDIATE */
/* BEGIN IMMEDIATE of a transaction whose commit does not wait for the
 * disk (synchronous = NORMAL for it alone; WAL mode): after a crash of the
 * machine, not of the process, it may be lost, with whatever lazy
 * transactions followed it up to the next ordinary commit, which syncs
 * the log they are in.  For rows rewritten all the time from live state. */
int dt_db_begin_lazy (dt_db_t *db, dt_error_t *err);
int dt_db_commit (dt_db_t *db, dt_error_t *err);
int dt_db_rollback (dt_db_t *db); /* never fails loudly */

/* Map an SQLite result code to errno, write "context: sqlite message" to
 * err, log it.  Always returns -1. */
int dt_db_error (dt_db_t *db, int rc, const char *context, dt_error_t *err);

/* PRAGMA integrity_check == "ok": 0, else -1 with the first problem in err. */
int dt_db_integrity_check (dt_db_t *db, dt_error_t *err);

#endif
