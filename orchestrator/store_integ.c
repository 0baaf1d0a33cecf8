/* store_integ.c: the integrity guard's memory of a job (store.h, table
 * job_integrity of migration 006): one JSON object per job, replaced
 * whole.  Rare writes (a rollback, an attribution, a new attempt), so the
 * statements are prepared on each use. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

int store_integ_put (store_t *st, int64_t job, const json_t *state, dt_error_t *err)
{
    sqlite3_stmt *s = NULL;
    char *text = state ? json_dumps (state, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    int rc;

    if (state && !text)
        return errnoprintf (err, ENOMEM, "integrity state: out of memory");
    if (dt_db_prepare (st->db,
                       state ? "INSERT OR REPLACE INTO job_integrity (job_id, state) "
                               "VALUES (?1, ?2)"
                             : "DELETE FROM job_integrity WHERE job_id = ?1",
                       &s, err) < 0) {
        free (text);
        return -1;
    }
    sqlite3_bind_int64 (s, 1, job);
    if (text)
        sqlite3_bind_text (s, 2, text, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step (s);
    sqlite3_finalize (s);
    free (text);
    if (rc != SQLITE_DONE)
        return dt_db_error (st->db, rc, "integrity state", err);
    return 0;
}

json_t *store_integ_get (store_t *st, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s = NULL;
    json_t *state = NULL;
    int rc;

    err->text[0] = '\0';
    if (dt_db_prepare (st->db, "SELECT state FROM job_integrity WHERE job_id = ?1", &s,
                       err) < 0)
        return NULL;
    sqlite3_bind_int64 (s, 1, job);
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW && !(state = store_col_json (s, 0)))
        errnoprintf (err, EBADMSG, "integrity state of job %lld: not JSON",
                     (long long)job);
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        dt_db_error (st->db, rc, "integrity state", err);
    sqlite3_finalize (s);
    return state;
}
