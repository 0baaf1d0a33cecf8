/* store_node.c: nodes: first and last seen, state, the failures blamed on
 * them, the health check that makes a node suspect, an admin's clear, and
 * the API's views of them. */
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
#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

int store_node_seen (store_t *st, const char *name, const char *addr,
                     const json_t *hostinfo, int64_t now, int64_t job, int attempt,
                     dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_NODE_SEEN, err)) ||
        store_bind (st, s, err, "SsJINN", name, addr, hostinfo, now, job,
                    (int64_t)attempt) < 0)
        return -1;
    return store_run (st, s, "node seen", err);
}

int store_node_set_state (store_t *st, const char *name, const char *state,
                          const char *note, dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_NODE_STATE, err)) ||
        store_bind (st, s, err, "SSsI", name, state, note, dt_real_ms ()) < 0)
        return -1;
    return store_run (st, s, "set node state", err);
}

int store_node_failure (store_t *st, const char *name, int64_t now, int64_t job,
                        int attempt, const char *kind, const char *detail,
                        dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_NODE_FAIL_HEALTH, err)) ||
        store_bind (st, s, err, "SINNSs", name, now, job, (int64_t)attempt, kind,
                    detail) < 0 ||
        store_run (st, s, "insert node health", err) < 0)
        return -1;
    if (!(s = store_stmt (st, S_NODE_FAIL_COUNT, err)) ||
        store_bind (st, s, err, "SI", name, now) < 0)
        return -1;
    return store_run (st, s, "count node failure", err);
}

/* --- node health, checkpoint lists ---------------------------------------- */

int store_node_health_check (store_t *st, const char *name, int64_t now,
                             int64_t window_ms, int jobs_threshold, int users_threshold,
                             bool any_cause, bool *suspect, dt_error_t *err)
{
    sqlite3_stmt *s;
    int64_t n = 0, users = 0;
    char note[128];
    int rc;

    *suspect = false;
    if (!(s = store_stmt (st, S_NODE_FAIL_JOBS, err)) ||
        store_bind (st, s, err, "SII", name, now - window_ms, (int64_t)any_cause) < 0)
        return -1;
    if ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        n = sqlite3_column_int64 (s, 0);
        users = sqlite3_column_int64 (s, 1);
    }
    sqlite3_reset (s);
    if (rc != SQLITE_ROW)
        return dt_db_error (st->db, rc, "count node failures", err);
    if (!ft_node_suspect (n, users, jobs_threshold, users_threshold))
        return 0;
    snprintf (note, sizeof (note), "failures in %lld jobs of %lld users within %lld s",
              (long long)n, (long long)users, (long long)(window_ms / 1000));
    if (!(s = store_stmt (st, S_NODE_SUSPECT, err)) ||
        store_bind (st, s, err, "SIS", name, now, note) < 0 ||
        store_run (st, s, "mark node suspect", err) < 0)
        return -1;
    *suspect = sqlite3_changes (dt_db_handle (st->db)) > 0;
    return 0;
}

int store_node_mark_suspect (store_t *st, const char *name, int64_t now, const char *note,
                             bool *changed, dt_error_t *err)
{
    sqlite3_stmt *s;
    int64_t n = 0;

    *changed = false;
    if (!(s = store_stmt (st, S_NODE_EXISTS, err)) ||
        store_bind (st, s, err, "S", name) < 0 ||
        store_query_int64 (st, s, 0, &n, "find node", err) < 0)
        return -1;
    if (n == 0)
        return errnoprintf (err, ENOENT, "node '%s' is not known", name);
    if (!(s = store_stmt (st, S_NODE_SUSPECT, err)) ||
        store_bind (st, s, err, "SIS", name, now, note) < 0 ||
        store_run (st, s, "mark node suspect", err) < 0)
        return -1;
    *changed = sqlite3_changes (dt_db_handle (st->db)) > 0;
    return 0;
}

int store_node_clear (store_t *st, const char *name, int64_t now, const char *note,
                      dt_error_t *err)
{
    sqlite3_stmt *s;
    if (!(s = store_stmt (st, S_NODE_CLEAR, err)) ||
        store_bind (st, s, err, "Ss", name, note) < 0 ||
        store_run (st, s, "clear node", err) < 0)
        return -1;
    if (sqlite3_changes (dt_db_handle (st->db)) == 0)
        return errnoprintf (err, ENOENT, "node '%s' is not known", name);
    if (!(s = store_stmt (st, S_NODE_CLEARED_EVENT, err)) ||
        store_bind (st, s, err, "SIs", name, now, note) < 0)
        return -1;
    return store_run (st, s, "record node clear", err);
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

    if (!(s = store_stmt (st, S_NODE_VIEW, err)) ||
        store_bind (st, s, err, "S", name) < 0)
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
    node = store_row_json (s);
    sqlite3_reset (s);

    if (!(s = store_stmt (st, S_NODE_LAST_CLEAR, err)) ||
        store_bind (st, s, err, "S", name) < 0)
        goto error;
    rc = sqlite3_step (s);
    if (rc == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text (s, 1);
        long uid = clear_uid (detail);
        char buf[40];
        json_decref (cleared);
        cleared = json_pack (
          "{s:s s:s? s:o}", "time",
          dt_format_time (sqlite3_column_int64 (s, 0), buf, sizeof (buf)), "detail",
          detail, "uid", uid < 0 ? json_null () : json_integer (uid));
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

    if (!(s = store_stmt (st, S_NODE_HISTORY, err)) ||
        store_bind (st, s, err, "SI", name, (int64_t)limit) < 0 ||
        !(hist = store_rows_json (st, s, "node history", err)))
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
    if (!(s = store_stmt (st, S_NODES_SUSPECT, err)) ||
        !(rows = store_rows_json (st, s, "list suspect nodes", err)))
        return NULL;
    /* Every user's exclude list gets these: only safe node names (a row
     * written before names were checked at registration is left out). */
    names = json_array ();
    json_array_foreach (
      rows, i, r) if (ft_node_name_ok (json_string_value (json_object_get (r, "name"))))
      json_array_append (names, json_object_get (r, "name"));
    json_decref (rows);
    return names;
}

uid_t store_job_owner (store_t *st, int64_t id)
{
    sqlite3_stmt *s = NULL;
    dt_error_t err;
    uid_t uid = (uid_t)-1;

    if (dt_db_prepare (st->db, "SELECT uid FROM jobs WHERE id = ?1", &s, &err) < 0)
        return uid;
    sqlite3_bind_int64 (s, 1, id);
    if (sqlite3_step (s) == SQLITE_ROW)
        uid = (uid_t)sqlite3_column_int64 (s, 0);
    sqlite3_finalize (s);
    return uid;
}
