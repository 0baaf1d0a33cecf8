/* store_numerics.c: each attempt's numerics identity (store.h, columns of
 * migration 012): what its trainers computed with, and whether it differs
 * from the job's pinned identity, its first attempt's.  One write per
 * attempt (the first rank's report, or a rank that differs), so the
 * statements are prepared on each use. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

int store_attempt_numerics (store_t *st, int64_t job, int attempt, const json_t *numerics,
                            bool changed, dt_error_t *err)
{
    sqlite3_stmt *s = NULL;
    char *text = json_dumps (numerics, JSON_COMPACT | JSON_SORT_KEYS);
    int rc;

    if (!text)
        return errnoprintf (err, ENOMEM, "numerics: out of memory");
    if (dt_db_prepare (st->db,
                       "UPDATE attempts SET numerics = ?3, numerics_changed ="
                       " max (numerics_changed, ?4) WHERE job_id = ?1 AND attempt = ?2",
                       &s, err) < 0) {
        free (text);
        return -1;
    }
    sqlite3_bind_int64 (s, 1, job);
    sqlite3_bind_int64 (s, 2, attempt);
    sqlite3_bind_text (s, 3, text, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int (s, 4, changed ? 1 : 0);
    rc = sqlite3_step (s);
    sqlite3_finalize (s);
    free (text);
    if (rc != SQLITE_DONE)
        return dt_db_error (st->db, rc, "attempt numerics", err);
    return 0;
}

json_t *store_job_numerics_pin (store_t *st, int64_t job, dt_error_t *err)
{
    sqlite3_stmt *s = NULL;
    json_t *pin = NULL;
    int rc;

    err->text[0] = '\0';
    if (dt_db_prepare (st->db,
                       "SELECT numerics FROM attempts WHERE job_id = ?1 AND numerics"
                       " IS NOT NULL ORDER BY attempt LIMIT 1",
                       &s, err) < 0)
        return NULL;
    sqlite3_bind_int64 (s, 1, job);
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW && !(pin = store_col_json (s, 0)))
        errnoprintf (err, EBADMSG, "numerics of job %lld: not JSON", (long long)job);
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        dt_db_error (st->db, rc, "job numerics", err);
    sqlite3_finalize (s);
    return pin;
}
