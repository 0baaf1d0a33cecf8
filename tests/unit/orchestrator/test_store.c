/* test_store.c: the controller's SQLite store (orchestrator/store.c):
 * migration from an empty file and from the previous version, rows
 * round-trip, one transaction per transition, crash recovery (kill -9 in
 * the middle of a transaction), metrics downsampling, checkpoints. */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sqlite3.h>
#include <jansson.h>
#include "common/db.h"
#include "common/log.h"
#include "orchestrator/sha256.h"
#include "orchestrator/store.h"
#include "tests/unit/unit.h"

static char dir[64];
static char path[128];

static void fresh (void)
{
    static int n;
    snprintf (path, sizeof (path), "%s/db%d.sqlite", dir, ++n);
}

static int64_t count (store_t *st, const char *sql)
{
    sqlite3_stmt *s;
    int64_t v = -1;
    if (sqlite3_prepare_v2 (dt_db_handle (store_db (st)), sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step (s) == SQLITE_ROW)
        v = sqlite3_column_int64 (s, 0);
    sqlite3_finalize (s);
    return v;
}

static void new_job (struct store_job_row *j)
{
    store_job_row_init (j);
    snprintf (j->name, sizeof (j->name), "t");
    snprintf (j->user, sizeof (j->user), "alice");
    j->uid = 1000;
    j->gid = 1000;
    j->state = JOB_PENDING;
    j->spec = json_pack ("{s:[s] s:i}", "command", "x", "nodes", 2);
    j->exclude = json_array ();
    j->submit_time = 1700000000123;
}

static void new_attempt (struct store_attempt_row *a, int64_t job, int n,
                         const char *token)
{
    store_attempt_row_init (a);
    a->job_id = job;
    a->attempt = n;
    a->state = ATT_SUBMITTED;
    snprintf (a->token, sizeof (a->token), "%s", token);
    snprintf (a->launcher, sizeof (a->launcher), "local");
    a->num_nodes = 2;
    a->ranks_per_node = 2;
    a->world_size = 4;
    a->submit_time = 1700000000456;
}

static void test_migrate_empty (void)
{
    dt_error_t err;
    store_t *st;
    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    CU_ASSERT_EQUAL (dt_db_version (store_db (st)), store_nmigrations);
    const char *tables[] = { "jobs",    "attempts",   "nodes",       "attempt_nodes",
                             "ranks",   "events",     "checkpoints", "checkpoint_shards",
                             "metrics", "node_health" };
    for (size_t i = 0; i < sizeof (tables) / sizeof (tables[0]); i++) {
        char q[128];
        snprintf (q, sizeof (q), "SELECT count(*) FROM sqlite_master WHERE name = '%s'",
                  tables[i]);
        CU_ASSERT_EQUAL (count (st, q), 1);
    }
    CU_ASSERT_EQUAL (dt_db_integrity_check (store_db (st), &err), 0);
    store_close (st);
}

/* A database left by the previous version (all migrations but the last
 * applied, with data in it) is brought forward without losing the data. */
static void test_migrate_previous (void)
{
    dt_error_t err;
    dt_db_t *db;
    store_t *st;
    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL (
      (db = dt_db_open (path, store_migrations,
                        store_nmigrations > 1 ? store_nmigrations - 1 : 1, &err)));
    CU_ASSERT_EQUAL (
      dt_db_exec (db,
                  "INSERT INTO jobs (name, uid, gid, user, state, spec, "
                  "submit_time) VALUES ('old', 1, 1, 'u', 'failed', '{}', 5)",
                  &err),
      0);
    dt_db_close (db);
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    CU_ASSERT_EQUAL (dt_db_version (store_db (st)), store_nmigrations);
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM jobs WHERE name = 'old'"), 1);
    store_close (st);

    /* A database from a newer dtctld is refused. */
    CU_ASSERT_PTR_NOT_NULL_FATAL (
      (db = dt_db_open (path, store_migrations, store_nmigrations, &err)));
    CU_ASSERT_EQUAL (dt_db_exec (db, "PRAGMA user_version = 999", &err), 0);
    dt_db_close (db);
    CU_ASSERT_PTR_NULL (store_open (path, &err));
}

/* Migration 004: a database written with tokens in clear keeps no token
 * in clear; each attempt is found by its token (through the hash). */
static void test_migrate_tokens (void)
{
    dt_error_t err;
    dt_db_t *db;
    store_t *st;
    int64_t job;
    int n;
    enum attempt_state as;
    const char *tok = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char want[65], sql[512];

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((db = dt_db_open (path, store_migrations, 3, &err)));
    snprintf (sql, sizeof (sql),
              "INSERT INTO jobs (id, name, uid, gid, user, state, spec, "
              "submit_time) VALUES (7, 'old', 1, 1, 'u', 'running', '{}', 5);"
              "INSERT INTO attempts (job_id, attempt, state, token, launcher, num_nodes, "
              "ranks_per_node, world_size, submit_time) VALUES "
              "(7, 1, 'running', '%s', 'local', 1, 1, 1, 5)",
              tok);
    CU_ASSERT_EQUAL (dt_db_exec (db, sql, &err), 0);
    dt_db_close (db);
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    sha256_hex (tok, strlen (tok), want);
    snprintf (sql, sizeof (sql), "SELECT count(*) FROM attempts WHERE token = '%s'",
              want);
    CU_ASSERT_EQUAL (count (st, sql), 1);
    snprintf (sql, sizeof (sql),
              "SELECT count(*) FROM attempts WHERE token LIKE '%%%s%%'", tok);
    CU_ASSERT_EQUAL (count (st, sql), 0);
    CU_ASSERT_EQUAL (store_attempt_by_token (st, tok, &job, &n, &as, &err), 0);
    CU_ASSERT (job == 7 && n == 1);
    CU_ASSERT_EQUAL (store_attempt_by_token (st, want, &job, &n, &as, &err),
                     -1); /* the hash is no token */
    store_close (st);
}

static void test_rows_roundtrip (void)
{
    dt_error_t err;
    store_t *st;
    struct store_job_row j, j2;
    struct store_attempt_row a, a2;
    int64_t job;
    int n;
    enum attempt_state as;

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    new_job (&j);
    CU_ASSERT_EQUAL_FATAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_job_insert (st, &j, &err), 0);
    CU_ASSERT (j.id > 0);
    new_attempt (&a, j.id, 1, "tok1");
    a.resume_step = 40;
    snprintf (a.resume_dir, sizeof (a.resume_dir), "/c/1/step-40");
    CU_ASSERT_EQUAL (store_attempt_insert (st, &a, &err), 0);
    CU_ASSERT_EQUAL (
      store_event (st, 1, j.id, 1, "job_submitted", NULL, -1, "d", NULL, &err), 0);
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);

    /* update: every field comes back */
    j.state = JOB_RUNNING;
    j.last_step = 12;
    j.last_loss = 2.5;
    j.failure = json_pack ("{s:s}", "cause", "hang");
    json_array_append_new (j.exclude, json_string ("node3"));
    a.state = ATT_ENDING;
    snprintf (a.cause, sizeof (a.cause), "hang");
    snprintf (a.cause_node, sizeof (a.cause_node), "node3");
    a.cause_rank = 5;
    a.evidence = json_pack ("{s:i}", "gap_ms", 3000);
    /* (kept as in_place with reform = 1 in the table: migration 010) */
    snprintf (a.restart_path, sizeof (a.restart_path), "reform");
    CU_ASSERT_EQUAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_job_update (st, &j, &err), 0);
    CU_ASSERT_EQUAL (store_attempt_update (st, &a, &err), 0);
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);

    CU_ASSERT_EQUAL_FATAL (store_job_load (st, j.id, &j2, &err), 0);
    CU_ASSERT_EQUAL (j2.state, JOB_RUNNING);
    CU_ASSERT_EQUAL (j2.last_step, 12);
    CU_ASSERT_DOUBLE_EQUAL (j2.last_loss, 2.5, 1e-12);
    CU_ASSERT (isnan (j2.throughput));
    CU_ASSERT_STRING_EQUAL (json_string_value (json_array_get (j2.exclude, 0)), "node3");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (j2.failure, "cause")),
                            "hang");
    CU_ASSERT_EQUAL (j2.uid, 1000);
    CU_ASSERT_EQUAL_FATAL (store_attempt_load (st, j.id, 1, &a2, &err), 0);
    CU_ASSERT_EQUAL (a2.state, ATT_ENDING);
    CU_ASSERT_STRING_EQUAL (a2.cause_node, "node3");
    CU_ASSERT_EQUAL (a2.cause_rank, 5);
    CU_ASSERT_EQUAL (a2.resume_step, 40);
    CU_ASSERT_STRING_EQUAL (a2.restart_path, "reform");
    CU_ASSERT_EQUAL (a2.exit_code, -1);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (a2.evidence, "gap_ms")), 3000);

    CU_ASSERT_EQUAL (store_attempt_by_token (st, "tok1", &job, &n, &as, &err), 0);
    CU_ASSERT (job == j.id && n == 1 && as == ATT_ENDING);
    CU_ASSERT_EQUAL (store_attempt_by_token (st, "nope", &job, &n, &as, &err), -1);
    CU_ASSERT_EQUAL (errno, ENOENT);
    /* store_job_load() re-initialises the row it is given, so a loaded row
     * must be cleared before it is reused, even for a lookup that fails. */
    store_job_row_clear (&j2);
    CU_ASSERT_EQUAL (store_job_load (st, 999, &j2, &err), -1);
    CU_ASSERT_EQUAL (errno, ENOENT);

    /* the JSON views */
    json_t *v = store_job_json (st, j.id, true, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (v, "state")), "running");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (v, "submit_time")),
                            "2023-11-14T22:13:20.123Z");
    CU_ASSERT_EQUAL (json_array_size (json_object_get (v, "attempts")), 1);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (
        json_array_get (json_object_get (v, "attempts"), 0), "restart_path")),
      "reform");
    json_decref (v);
    /* hot_spare: kept as spare with hot_spare = 1 (migration 011) */
    snprintf (a.restart_path, sizeof (a.restart_path), "hot_spare");
    CU_ASSERT_EQUAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_attempt_update (st, &a, &err), 0);
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);
    store_attempt_row_clear (&a2);
    CU_ASSERT_EQUAL_FATAL (store_attempt_load (st, j.id, 1, &a2, &err), 0);
    CU_ASSERT_STRING_EQUAL (a2.restart_path, "hot_spare");
    v = store_job_json (st, j.id, true, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (
        json_array_get (json_object_get (v, "attempts"), 0), "restart_path")),
      "hot_spare");
    json_decref (v);
    v = store_jobs_json (st, "running", 1000, "t", 10, &err);
    CU_ASSERT_EQUAL (json_array_size (v), 1);
    json_decref (v);
    v = store_jobs_json (st, "failed", -1, NULL, 10, &err);
    CU_ASSERT_EQUAL (json_array_size (v), 0);
    json_decref (v);
    v = store_events_json (st, j.id, 0, 100, &err);
    CU_ASSERT_EQUAL (json_array_size (v), 1);
    json_decref (v);

    /* Communication per parallel dimension outlives the attempt: the
     * goodput row keeps its means per step, the job view shows them. */
    struct store_goodput_row g = {
        .job_id = j.id, .attempt = 1, .first_step = -1, .last_step = -1, .dims_steps = 4
    };
    for (int k = 0; k < 9; k++)
        g.dims_sum[k] = 4.0 * (k + 1);
    CU_ASSERT_EQUAL (store_goodput_put (st, &g, NULL, &err), 0);
    struct store_goodput_row g2;
    char *hist = NULL;
    CU_ASSERT_EQUAL (store_goodput_load (st, j.id, 1, &g2, &hist, &err), 1);
    free (hist);
    CU_ASSERT_EQUAL (g2.dims_steps, 4);
    CU_ASSERT_DOUBLE_EQUAL (g2.dims_sum[0], 4.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL (g2.dims_sum[8], 36.0, 1e-9);
    v = store_job_json (st, j.id, true, &err);
    json_t *cd =
      json_object_get (json_array_get (json_object_get (v, "attempts"), 0), "comm_dims");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (cd, "steps")), 4);
    CU_ASSERT_DOUBLE_EQUAL (
      json_number_value (json_object_get (json_object_get (cd, "tp"), "bytes")), 1.0,
      1e-9);
    CU_ASSERT_DOUBLE_EQUAL (
      json_number_value (json_object_get (json_object_get (cd, "dp"), "exposed_ms")), 9.0,
      1e-9);
    json_decref (v);

    int64_t *ids;
    int nids;
    CU_ASSERT_EQUAL (store_live_jobs (st, &ids, &nids, &err), 0);
    CU_ASSERT (nids == 1 && ids[0] == j.id);
    free (ids);

    store_job_row_clear (&j);
    store_job_row_clear (&j2);
    store_attempt_row_clear (&a);
    store_attempt_row_clear (&a2);
    CU_ASSERT_EQUAL (dt_db_integrity_check (store_db (st), &err), 0);
    store_close (st);
}

/* A rolled-back transaction leaves nothing; a duplicate token is refused. */
static void test_rollback (void)
{
    dt_error_t err;
    store_t *st;
    struct store_job_row j;
    struct store_attempt_row a;

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    new_job (&j);
    CU_ASSERT_EQUAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_job_insert (st, &j, &err), 0);
    new_attempt (&a, j.id, 1, "same");
    CU_ASSERT_EQUAL (store_attempt_insert (st, &a, &err), 0);
    a.attempt = 2;
    CU_ASSERT_EQUAL (store_attempt_insert (st, &a, &err), -1); /* token UNIQUE */
    store_rollback (st);
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM jobs"), 0);
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM attempts"), 0);
    store_job_row_clear (&j);
    store_attempt_row_clear (&a);
    store_close (st);
}

/* kill -9 between a commit and the next: the committed rows survive, the
 * half-done transaction vanishes, and the file is intact. */
static void test_crash_recovery (void)
{
    dt_error_t err;
    store_t *st;
    pid_t pid;
    int status;
    int pfd[2];

    fresh ();
    CU_ASSERT_EQUAL_FATAL (pipe (pfd), 0);
    if ((pid = fork ()) == 0) {
        struct store_job_row j;
        store_t *cs = store_open (path, &err);
        if (!cs)
            _exit (2);
        for (int i = 0; i < 3; i++) {
            new_job (&j);
            if (store_begin (cs, &err) < 0 || store_job_insert (cs, &j, &err) < 0 ||
                store_event (cs, 1, j.id, 0, "job_submitted", NULL, -1, NULL, NULL,
                             &err) < 0 ||
                store_commit (cs, &err) < 0)
                _exit (3);
            store_job_row_clear (&j);
        }
        new_job (&j);
        store_begin (cs, &err);
        store_job_insert (cs, &j, &err);
        store_event (cs, 1, j.id, 0, "job_submitted", NULL, -1, NULL, NULL, &err);
        /* tell the parent, then wait to be killed mid-transaction */
        if (write (pfd[1], "x", 1) != 1)
            _exit (4);
        pause ();
        _exit (5);
    }
    char c;
    close (pfd[1]);
    CU_ASSERT_EQUAL (read (pfd[0], &c, 1), 1);
    close (pfd[0]);
    kill (pid, SIGKILL);
    waitpid (pid, &status, 0);
    CU_ASSERT (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);

    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM jobs"), 3);
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM events"), 3);
    CU_ASSERT_EQUAL (dt_db_integrity_check (store_db (st), &err), 0);
    store_close (st);
}

static void test_metrics_thinning (void)
{
    dt_error_t err;
    store_t *st;
    struct store_job_row j;
    int64_t n;

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    new_job (&j);
    CU_ASSERT_EQUAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_job_insert (st, &j, &err), 0);
    for (int s = 0; s < 100; s++)
        CU_ASSERT_EQUAL (
          store_metric_put (st, j.id, s, 1, s, 1.0 / (s + 1), NAN, 1, 0, &err), 0);
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);
    CU_ASSERT_EQUAL (store_metrics_count (st, j.id, &n, &err), 0);
    CU_ASSERT_EQUAL (n, 100);
    CU_ASSERT_EQUAL (store_metrics_thin (st, j.id, 4, &err), 0);
    CU_ASSERT_EQUAL (store_metrics_count (st, j.id, &n, &err), 0);
    CU_ASSERT_EQUAL (n, 25);
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM metrics WHERE step % 4 != 0"), 0);
    CU_ASSERT_EQUAL (store_metrics_thin (st, j.id, 0, &err), -1);
    json_t *v = store_metrics_json (st, j.id, &err);
    CU_ASSERT_EQUAL (json_array_size (v), 25);
    CU_ASSERT (json_is_null (json_object_get (json_array_get (v, 0), "samples_per_s")));
    json_decref (v);
    store_job_row_clear (&j);
    store_close (st);
}

static void test_checkpoints (void)
{
    dt_error_t err;
    store_t *st;
    struct store_job_row j;
    int nshards;
    int64_t bytes, step, *old;
    int nold;
    char d[256], sha[65], state[32];

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    new_job (&j);
    CU_ASSERT_EQUAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_job_insert (st, &j, &err), 0);
    CU_ASSERT_EQUAL (
      store_ckpt_latest (st, j.id, &step, d, sizeof (d), sha, sizeof (sha), &err), 0);
    for (int s = 10; s <= 30; s += 10) {
        CU_ASSERT_EQUAL (store_ckpt_put_pending (st, j.id, s, 1, "/c", 2, 1, &err), 0);
        CU_ASSERT_EQUAL (
          store_shard_put (st, j.id, s, 0, 1, "n1", "/c/r0", 100, "0a", 1, &err), 0);
        CU_ASSERT_EQUAL (
          store_shard_put (st, j.id, s, 1, 1, "n2", "/c/r1", 50, "0b", 1, &err), 0);
        CU_ASSERT_EQUAL (
          store_shard_put (st, j.id, s, 1, 1, "n2", "/c/r1", 50, "0b", 1, &err), 0);
        CU_ASSERT_EQUAL (store_ckpt_shards (st, j.id, s, &nshards, &bytes, &err), 0);
        CU_ASSERT_EQUAL (nshards, 2);
        CU_ASSERT_EQUAL (bytes, 150);
        if (s < 30)
            CU_ASSERT_EQUAL (
              store_ckpt_set_state (st, j.id, s, "committed", "ab", 2, &err), 0);
    }
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);
    /* step 30 is pending: never offered */
    CU_ASSERT_EQUAL (
      store_ckpt_latest (st, j.id, &step, d, sizeof (d), sha, sizeof (sha), &err), 1);
    CU_ASSERT_EQUAL (step, 20);
    CU_ASSERT_STRING_EQUAL (sha, "ab");
    CU_ASSERT_EQUAL (store_ckpt_beyond_keep (st, j.id, 1, &old, &nold, &err), 0);
    CU_ASSERT (nold == 1 && old[0] == 10);
    free (old);
    CU_ASSERT_EQUAL (store_ckpt_state (st, j.id, 30, state, sizeof (state), &err), 0);
    CU_ASSERT_STRING_EQUAL (state, "pending");
    CU_ASSERT_EQUAL (store_ckpt_state (st, j.id, 99, state, sizeof (state), &err), -1);
    /* a shard from another attempt does not count */
    CU_ASSERT_EQUAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_ckpt_put_pending (st, j.id, 30, 2, "/c", 2, 3, &err), 0);
    CU_ASSERT_EQUAL (store_ckpt_shards (st, j.id, 30, &nshards, &bytes, &err), 0);
    CU_ASSERT_EQUAL (nshards, 0);
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);
    json_t *v = store_ckpts_json (st, j.id, &err);
    CU_ASSERT_EQUAL (json_array_size (v), 3);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_array_get (v, 1), "shards")), 2);
    json_decref (v);
    store_job_row_clear (&j);
    store_close (st);
}

/* Node health: failures blamed on a node, an admin clear, the history view
 * (GET /v1/nodes/{name}) and the list view (GET /v1/nodes). */
/* The default policy: only infrastructure failures count, and only from
 * the jobs of two different users; an admin's mark needs neither. */
static void test_node_suspect_users (void)
{
    store_t *st;
    dt_error_t err;
    bool suspect = true, changed = false;

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    CU_ASSERT_EQUAL (dt_db_exec (store_db (st),
                                 "INSERT INTO jobs (id, name, uid, gid, user, "
                                 "state, spec, submit_time) VALUES "
                                 "(1, 'a1', 1001, 1001, 'alice', 'failed', '{}', 5),"
                                 "(2, 'a2', 1001, 1001, 'alice', 'failed', '{}', 5),"
                                 "(3, 'a3', 1001, 1001, 'alice', 'failed', '{}', 5),"
                                 "(4, 'b1', 1002, 1002, 'bob', 'failed', '{}', 5)",
                                 &err),
                     0);
    CU_ASSERT_EQUAL (store_node_set_state (st, "n1", "up", NULL, &err), 0);
    /* one user's trainer exits and hangs in three jobs: nothing */
    CU_ASSERT_EQUAL (store_node_failure (st, "n1", 1000, 1, 1, "trainer_exit", "x", &err),
                     0);
    CU_ASSERT_EQUAL (store_node_failure (st, "n1", 1001, 2, 1, "hang", "x", &err), 0);
    CU_ASSERT_EQUAL (store_node_failure (st, "n1", 1002, 4, 1, "trainer_exit", "x", &err),
                     0);
    CU_ASSERT_EQUAL (
      store_node_health_check (st, "n1", 1003, 3600000, 2, 2, false, &suspect, &err), 0);
    CU_ASSERT (!suspect);
    /* node losses in two jobs of one user: still nothing */
    CU_ASSERT_EQUAL (store_node_failure (st, "n1", 1004, 1, 1, "node_lost", "x", &err),
                     0);
    CU_ASSERT_EQUAL (store_node_failure (st, "n1", 1005, 3, 1, "node_lost", "x", &err),
                     0);
    CU_ASSERT_EQUAL (
      store_node_health_check (st, "n1", 1006, 3600000, 2, 2, false, &suspect, &err), 0);
    CU_ASSERT (!suspect);
    /* with any cause (the old rule) and one user, it would have been */
    CU_ASSERT_EQUAL (
      store_node_health_check (st, "n2", 1006, 3600000, 2, 1, true, &suspect, &err), 0);
    CU_ASSERT (!suspect); /* n2 has no failures */
    /* a Slurm node failure in another user's job: now suspect */
    CU_ASSERT_EQUAL (
      store_node_failure (st, "n1", 1007, 4, 1, "slurm_node_fail", "x", &err), 0);
    CU_ASSERT_EQUAL (
      store_node_health_check (st, "n1", 1008, 3600000, 2, 2, false, &suspect, &err), 0);
    CU_ASSERT (suspect);
    /* an admin's mark: an unknown node is refused, a known one marked once */
    CU_ASSERT_EQUAL (
      store_node_mark_suspect (st, "nope", 1009, "by uid 0", &changed, &err), -1);
    CU_ASSERT_EQUAL (errno, ENOENT);
    CU_ASSERT_EQUAL (store_node_failure (st, "n3", 1009, 1, 1, "hang", "x", &err), 0);
    CU_ASSERT_EQUAL (store_node_mark_suspect (st, "n3", 1010, "by uid 0", &changed, &err),
                     0);
    CU_ASSERT (changed);
    CU_ASSERT_EQUAL (store_node_mark_suspect (st, "n3", 1011, "by uid 0", &changed, &err),
                     0);
    CU_ASSERT (!changed);
    CU_ASSERT_EQUAL (count (st, "SELECT count(*) FROM nodes WHERE state = 'suspect'"), 2);
    store_close (st);
}

static void test_node_health (void)
{
    store_t *st;
    dt_error_t err;
    bool suspect = false;
    json_t *n, *h, *all;
    size_t i;
    int since = 0;

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    CU_ASSERT_EQUAL_FATAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (
      store_node_failure (st, "n1", 1000, 1, 1, "hang", "rank 0 hung", &err), 0);
    CU_ASSERT_EQUAL (
      store_node_failure (st, "n1", 2000, 2, 3, "trainer_exit", "rank 1 exited", &err),
      0);
    CU_ASSERT_EQUAL (
      store_node_health_check (st, "n1", 2000, 3600000, 2, 1, true, &suspect, &err), 0);
    CU_ASSERT (suspect);
    CU_ASSERT_EQUAL (store_commit (st, &err), 0);

    /* suspect, never cleared, newest first */
    n = store_node_json (st, "n1", 100, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (n);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (n, "health")), "suspect");
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (n, "failures")), 2);
    CU_ASSERT (json_is_null (json_object_get (n, "cleared")));
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (n, "last_cause")),
                            "trainer_exit");
    h = json_object_get (n, "history");
    CU_ASSERT_EQUAL_FATAL (json_array_size (h), 2);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (json_array_get (h, 0), "job")),
                     2);
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_array_get (h, 0), "attempt")), 3);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (h, 0), "kind")), "failure");
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (h, 1), "cause")), "hang");
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (h, 1), "detail")),
      "rank 0 hung");
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (h, 1), "time")),
      "1970-01-01T00:00:01.000Z");
    CU_ASSERT (json_is_true (json_object_get (json_array_get (h, 1), "since_clear")));
    json_decref (n);

    /* cleared by uid 1234, then one more failure */
    CU_ASSERT_EQUAL (store_node_clear (st, "n1", 3000, "cleared by uid 1234", &err), 0);
    CU_ASSERT_EQUAL (store_node_failure (st, "n1", 4000, 3, 1, "node_lost", NULL, &err),
                     0);
    n = store_node_json (st, "n1", 100, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (n);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (n, "health")), "ok");
    CU_ASSERT_EQUAL (
      json_integer_value (json_object_get (json_object_get (n, "cleared"), "uid")), 1234);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_object_get (n, "cleared"), "time")),
      "1970-01-01T00:00:03.000Z");
    h = json_object_get (n, "history");
    CU_ASSERT_EQUAL_FATAL (json_array_size (h), 4);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_array_get (h, 1), "kind")), "cleared");
    CU_ASSERT (json_is_null (json_object_get (json_array_get (h, 1), "cause")));
    json_array_foreach (h, i, all) since +=
      json_is_true (json_object_get (all, "since_clear"));
    CU_ASSERT_EQUAL (since, 1); /* only the failure after the clear */
    CU_ASSERT (json_is_true (json_object_get (json_array_get (h, 0), "since_clear")));
    json_decref (n);

    /* limit, unknown node, the list view */
    n = store_node_json (st, "n1", 1, &err);
    CU_ASSERT_EQUAL (json_array_size (json_object_get (n, "history")), 1);
    json_decref (n);
    errno = 0;
    CU_ASSERT_PTR_NULL (store_node_json (st, "nosuch", 10, &err));
    CU_ASSERT_EQUAL (errno, ENOENT);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "nosuch"));
    all = store_nodes_json (st, &err);
    CU_ASSERT_EQUAL_FATAL (json_array_size (all), 1);
    n = json_array_get (all, 0);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (n, "last_failure_time")),
                            "1970-01-01T00:00:04.000Z");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (n, "last_cause")),
                            "node_lost");
    json_decref (all);
    store_close (st);
}

/* A huge attempt's provenance in the job view: its first nodes_max nodes,
 * in order, marked truncated; read again after the attempt is rewritten;
 * a small one untouched. */
static json_t *prov_nodes (int n)
{
    json_t *nodes = json_array ();
    for (int i = 0; i < n; i++)
        json_array_append_new (nodes,
                               json_pack ("{s:s+ s:i s:s}", "node", "node", "", "order",
                                          i, "hostinfo", "Linux x86_64 6.1.0-some-host"));
    return json_pack ("{s:s s:{s:s s:o}}", "version", "v1", "machine", "launcher",
                      "slurm", "nodes", nodes);
}

static void test_view_provenance (void)
{
    dt_error_t err;
    store_t *st;
    struct store_job_row j;
    struct store_attempt_row a, b;

    fresh ();
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    new_job (&j);
    CU_ASSERT_EQUAL_FATAL (store_begin (st, &err), 0);
    CU_ASSERT_EQUAL (store_job_insert (st, &j, &err), 0);
    new_attempt (&a, j.id, 1, "tokp1");
    a.provenance = prov_nodes (2000); /* about 130 KB: the trimmed path */
    CU_ASSERT_EQUAL (store_attempt_insert (st, &a, &err), 0);
    new_attempt (&b, j.id, 2, "tokp2");
    b.provenance = prov_nodes (10);
    CU_ASSERT_EQUAL (store_attempt_insert (st, &b, &err), 0);
    CU_ASSERT_EQUAL_FATAL (store_commit (st, &err), 0);

    for (int round = 0; round < 2; round++) { /* the second from the memo */
        json_t *v = store_job_view (st, j.id, true, 256, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL (v);
        json_t *atts = json_object_get (v, "attempts");
        json_t *m1 = json_object_get (
          json_object_get (json_array_get (atts, 0), "provenance"), "machine");
        json_t *m2 = json_object_get (
          json_object_get (json_array_get (atts, 1), "provenance"), "machine");
        CU_ASSERT_EQUAL (json_array_size (json_object_get (m1, "nodes")), 256);
        CU_ASSERT (json_is_true (json_object_get (m1, "nodes_truncated")));
        CU_ASSERT_EQUAL (json_integer_value (json_object_get (
                           json_array_get (json_object_get (m1, "nodes"), 255), "order")),
                         255);
        CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (m1, "launcher")),
                                "slurm");
        CU_ASSERT_EQUAL (json_array_size (json_object_get (m2, "nodes")), 10);
        CU_ASSERT_PTR_NULL (json_object_get (m2, "nodes_truncated"));
        CU_ASSERT_PTR_NULL (json_object_get (json_array_get (atts, 0), "provenance_big"));
        json_decref (v);
    }
    /* Rewritten: the view shows the new text, not the kept one. */
    json_object_set_new (json_object_get (a.provenance, "machine"), "launcher",
                         json_string ("external"));
    CU_ASSERT_EQUAL (store_attempt_update (st, &a, &err), 0);
    json_t *v = store_job_view (st, j.id, true, 256, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    json_t *m1 = json_object_get (
      json_object_get (json_array_get (json_object_get (v, "attempts"), 0), "provenance"),
      "machine");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (m1, "launcher")),
                            "external");
    json_decref (v);
    /* Unlimited: every node. */
    v = store_job_view (st, j.id, true, -1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    m1 = json_object_get (
      json_object_get (json_array_get (json_object_get (v, "attempts"), 0), "provenance"),
      "machine");
    CU_ASSERT_EQUAL (json_array_size (json_object_get (m1, "nodes")), 2000);
    json_decref (v);
    store_job_row_clear (&j);
    store_attempt_row_clear (&a);
    store_attempt_row_clear (&b);
    store_close (st);
}

static const struct dt_unit_test tests[] = {
    { "migration from an empty file", test_migrate_empty },
    { "migration from the previous version; newer refused", test_migrate_previous },
    { "migration 004: tokens hashed", test_migrate_tokens },
    { "job and attempt rows round-trip", test_rows_roundtrip },
    { "rollback leaves nothing", test_rollback },
    { "kill -9 mid-transaction", test_crash_recovery },
    { "metrics downsampling", test_metrics_thinning },
    { "checkpoints: pending never offered, keep", test_checkpoints },
    { "node health history", test_node_health },
    { "suspect: infrastructure causes of two users, admin mark",
      test_node_suspect_users },
    { "huge provenance trimmed in the job view", test_view_provenance },
    { NULL, NULL },
};

int main (void)
{
    int rc;
    dt_log_init ("test_store", DT_LOG_STDERR, LOG_WARNING);
    snprintf (dir, sizeof (dir), "/tmp/test_store.XXXXXX");
    if (!mkdtemp (dir))
        return 99;
    rc = dt_unit_run ("store", tests);
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", dir);
    return rc;
}
