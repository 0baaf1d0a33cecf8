/* checkpoint.c: checkpoints: the two-phase commit of the ranks' shards
 * (manifest, then the commit row), retention, scheduling the periodic
 * checkpoint step, removing partial checkpoints, and condemning a
 * checkpoint whose shard fails verification at load.
 */
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tree.h"
#include "orchestrator/jobs/internal.h"
#include "orchestrator/jobs/ckptpolicy.h"

int job_ckpt_dir (const struct job *job, char *buf, size_t len)
{
    return dt_pathf (buf, len, "%s/%lld", job->spec.ckpt.dir, (long long)job->row.id);
}

/* Steps the fastest rank makes in two heartbeat intervals, at least 2:
 * far enough ahead that every rank gets the command before reaching it.
 * In a fan-in tree a command reaches a node one level down up to 1.25
 * intervals later (its relay answers with the commands of its own last
 * exchange, a quarter interval to an interval old): the interval counted
 * grows by that for each level below the first. */
int64_t ckpt_lookahead (struct attempt *att)
{
    int64_t iv = att->job->spec.hb.interval_ms;
    int levels =
      att->job->spec.hb.tree_width > 0
        ? dt_tree_height (att->row.num_nodes, (int)att->job->spec.hb.tree_width)
        : 1;
    if (levels > 1)
        iv += iv * 5 / 4 * (levels - 1);
    return ckpt_lookahead_steps (att->row.start_time, dt_real_ms (), att->row.resume_step,
                                 att->max_step, iv);
}

void job_fs_id (const struct job *job, struct userfs_id *id)
{
    userfs_id_init (id, job->row.uid, job->row.gid);
}

/* Remove a deleted checkpoint's files (only the ones we know of). */
void ckpt_remove_files (struct jobs *jobs, struct job *job, int64_t step)
{
    char dir[PATH_MAX], name[48];
    struct userfs_id id;
    dt_error_t err;

    (void)jobs;
    job_fs_id (job, &id);
    if (job_ckpt_dir (job, dir, sizeof (dir)) < 0)
        return;
    snprintf (name, sizeof (name), "step-%lld", (long long)step);
    /* As the job's user, never through a link: rank-<R>.ckpt, the
     * manifest and their temporaries, then the directory if empty. */
    if (userfs_remove_dir (&id, dir, name, ckptpath_is_ckpt_file, &err) < 0)
        dt_log (LOG_WARNING, "job %lld: %s", (long long)job->row.id, err.text);
}

/* Phase two of a commit, inside the caller's transaction, once every shard
 * of 'step' is in checkpoint_shards: the manifest first (atomically, into
 * sdir), then the commit in SQLite; a crash in between leaves a manifest of
 * an uncommitted checkpoint, which is never resumed.  'kind': "regular"
 * (each rank wrote its shard) or "jit" (one survivor wrote them all after
 * a failure); 'extra' (borrowed, may be NULL) goes into the
 * manifest and the event.  *deleted (new array, caller frees): the steps
 * retention removed (their files are the caller's, after the commit). */
int ckpt_commit_tx (struct jobs *jobs, struct job *job, struct attempt *att, int64_t step,
                    const char *sdir, const char *kind, const json_t *extra,
                    int64_t **deleted, int *ndeleted, dt_error_t *err)
{
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    int nshards, rc;
    int64_t bytes;
    char detail[160];

    if (store_ckpt_shards (st, job->row.id, step, &nshards, &bytes, err) < 0)
        return -1;
    json_t *shards = store_ckpt_shards_json (st, job->row.id, step, err);
    if (!shards)
        return -1;
    json_t *m = json_pack ("{s:i s:I s:I s:i s:i s:I s:s s:o s:s s:s}", "format", 1,
                           "job", (json_int_t)job->row.id, "step", (json_int_t)step,
                           "attempt", att->row.attempt, "world_size", att->row.world_size,
                           "bytes", (json_int_t)bytes, "time", "", "shards", shards,
                           "dtctl", PACKAGE_VERSION, "kind", kind);
    if (!m)
        return errnoprintf (err, ENOMEM, "out of memory");
    if (extra)
        json_object_set (m, "jit", (json_t *)extra);
    /* Who wrote it, how to reproduce it (provenance.c). */
    if (att->row.provenance)
        json_object_set (m, "provenance", att->row.provenance);
    char tbuf[40];
    json_object_set_new (m, "time",
                         json_string (dt_format_time (now, tbuf, sizeof (tbuf))));
    char *text = json_dumps (m, JSON_INDENT (1) | JSON_SORT_KEYS);
    json_decref (m);
    if (!text)
        return errnoprintf (err, ENOMEM, "out of memory");
    char sha[65], cdir[PATH_MAX], sname[48];
    struct userfs_id id;
    sha256_hex (text, strlen (text), sha);
    job_fs_id (job, &id);
    rc = job_ckpt_dir (job, cdir, sizeof (cdir));
    snprintf (sname, sizeof (sname), "step-%lld", (long long)step);
    if (rc == 0)
        rc = userfs_mkdir (&id, cdir, sname, 0755, err);
    if (rc == 0)
        rc = userfs_write_atomic (&id, sdir, "manifest.json", text, strlen (text), err);
    free (text);
    if (rc < 0)
        return -1;
    if (store_ckpt_set_state (st, job->row.id, step, "committed", sha, now, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail),
              "%scheckpoint of step %lld committed (%d shards, %lld "
              "bytes)",
              strcmp (kind, "jit") ? "" : "just-in-time ", (long long)step, nshards,
              (long long)bytes);
    json_t *data = json_pack ("{s:I s:s s:s s:s}", "step", (json_int_t)step, "dir", sdir,
                              "manifest_sha256", sha, "kind", kind);
    if (data && extra)
        json_object_set (data, "jit", (json_t *)extra);
    rc = store_event (st, now, job->row.id, att->row.attempt, "checkpoint_committed",
                      NULL, -1, detail, data, err);
    json_decref (data);
    if (rc < 0)
        return -1;

    /* Retention: keep the newest 'keep' committed checkpoints. */
    if (store_ckpt_beyond_keep (st, job->row.id, job->spec.ckpt.keep, deleted, ndeleted,
                                err) < 0)
        return -1;
    for (int i = 0; i < *ndeleted; i++)
        if (store_ckpt_set_state (st, job->row.id, (*deleted)[i], "deleted", NULL, 0,
                                  err) < 0)
            return -1;
    return 0;
}

struct shard_arg {
    const char *node, *path, *crc32c;
    int rank;
    int64_t step, bytes;
    bool committed;
    int64_t *deleted;
    int ndeleted;
};

static int tx_shard (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                     dt_error_t *err)
{
    struct shard_arg *a = arg;
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    char state[32] = "", cdir[PATH_MAX], sdir[PATH_MAX], detail[160];
    int nshards;
    int64_t bytes;

    job_ckpt_dir (job, cdir, sizeof (cdir));
    if (dt_pathf (sdir, sizeof (sdir), "%s/step-%lld", cdir, (long long)a->step) < 0)
        return errnoprintf (err, ENAMETOOLONG, "checkpoint path too long");
    if (store_ckpt_state (st, job->row.id, a->step, state, sizeof (state), err) < 0 &&
        errno != ENOENT)
        return -1;
    if (!strcmp (state, "committed"))
        return 0; /* a late duplicate */
    if (store_ckpt_put_pending (st, job->row.id, a->step, att->row.attempt, sdir,
                                att->row.world_size, now, err) < 0 ||
        store_shard_put (st, job->row.id, a->step, a->rank, att->row.attempt, a->node,
                         a->path, a->bytes, a->crc32c, now, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail),
              "rank %d wrote its shard of step %lld (%lld bytes)", a->rank,
              (long long)a->step, (long long)a->bytes);
    json_t *data =
      json_pack ("{s:I s:s s:I s:s}", "step", (json_int_t)a->step, "path", a->path,
                 "bytes", (json_int_t)a->bytes, "crc32c", a->crc32c);
    int rc = store_event (st, now, job->row.id, att->row.attempt, "shard", a->node,
                          a->rank, detail, data, err);
    json_decref (data);
    if (rc < 0 || store_ckpt_shards (st, job->row.id, a->step, &nshards, &bytes, err) < 0)
        return -1;
    if (nshards < att->row.world_size)
        return 0;

    /* Every shard of step S is durable: phase two. */
    if (ckpt_commit_tx (jobs, job, att, a->step, sdir, "regular", NULL, &a->deleted,
                        &a->ndeleted, err) < 0)
        return -1;
    a->committed = true;
    return 0;
}

int jobs_shard (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                int64_t step, const char *path, int64_t bytes, const char *crc32c,
                dt_error_t *err)
{
    struct shard_arg a = { node, path, crc32c, rank, step, bytes, false, NULL, 0 };

    if (rank < 0 || rank >= att->row.world_size)
        return errnoprintf (err, EINVAL, "rank: %d is outside the world (size %d)", rank,
                            att->row.world_size);
    if (transact (jobs, att->job, att, tx_shard, &a, err) < 0) {
        free (a.deleted);
        return -1;
    }
    if (a.committed) {
        att->committed_any = true;
        jobs->ckpts++;
        dt_log (LOG_INFO, "job %lld: checkpoint of step %lld committed",
                (long long)att->row.job_id, (long long)step);
        if (att->ckpt_cmd_step == step)
            att->ckpt_cmd_step = 0;
        for (int i = 0; i < a.ndeleted; i++)
            ckpt_remove_files (jobs, att->job, a.deleted[i]);
    }
    free (a.deleted);
    return 0;
}

/* Remove the plain files of cdir/name and the directory (one level: a
 * checkpoint step directory holds only shards, temporaries and a
 * manifest), as the job's user and never through a link (userfs.h). */
void rm_dir_files (const struct job *job, const char *cdir, const char *name)
{
    struct userfs_id id;
    dt_error_t err;
    job_fs_id (job, &id);
    if (userfs_remove_dir (&id, cdir, name, NULL, &err) < 0)
        dt_log (LOG_WARNING, "job %lld: %s", (long long)job->row.id, err.text);
}

static bool is_jit_dir (const char *name)
{
    return ckptpath_classify (name) == CKPTPATH_JIT;
}

/* Periodic checkpoints: the next multiple of every_steps ahead of the
 * fastest rank; abandoned if every rank passed it (min_step, the slowest
 * rank's step) without a commit. */
void ckpt_schedule (struct jobs *jobs, struct attempt *att, int64_t min_step)
{
    struct job *job = att->job;
    int64_t every = job->spec.ckpt.every_steps;
    if (ckpt_step_abandoned (att->ckpt_cmd_step, min_step)) {
        char detail[96];
        dt_error_t err;
        snprintf (detail, sizeof (detail),
                  "checkpoint of step %lld abandoned: all ranks "
                  "passed it",
                  (long long)att->ckpt_cmd_step);
        jobs_note (jobs, att, "checkpoint_abandoned", NULL, -1, detail, NULL, &err);
        att->ckpt_cmd_step = 0;
    }
    if (every > 0 && att->ckpt_cmd_step == 0 && att->max_step >= 0)
        att->ckpt_cmd_step =
          ckpt_periodic_step (att->max_step, ckpt_lookahead (att), every);
}

/* Partial checkpoints (pending: not every shard arrived) of ended attempts
 * are never resumed from; remove them.  Called between attempts, when no
 * attempt of the job can add a shard any more. */
void ckpt_clean_partial (struct jobs *jobs, struct job *job)
{
    store_t *st = jobs->ctx->store;
    dt_error_t err;
    int64_t *steps = NULL;
    int n = 0;

    if (store_ckpt_list (st, job->row.id, "pending", &steps, &n, &err) < 0) {
        dt_log (LOG_ERR, "job %lld: partial checkpoints: %s", (long long)job->row.id,
                err.text);
        return;
    }
    for (int i = 0; i < n; i++) {
        char detail[128];
        snprintf (detail, sizeof (detail), "partial checkpoint of step %lld removed",
                  (long long)steps[i]);
        if (store_begin (st, &err) < 0)
            break;
        if (store_ckpt_set_state (st, job->row.id, steps[i], "deleted", NULL, 0, &err) <
              0 ||
            store_event (st, dt_real_ms (), job->row.id, job->row.attempts,
                         "checkpoint_partial_removed", NULL, -1, detail, NULL,
                         &err) < 0 ||
            store_commit (st, &err) < 0) {
            store_rollback (st);
            dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
            break;
        }
        ckpt_remove_files (jobs, job, steps[i]);
    }
    free (steps);

    /* Just-in-time sets that were not committed (incomplete, or a second
     * survivor's copy): jit-<S>-r<R> directories of the job. */
    char cdir[PATH_MAX];
    struct userfs_id id;
    job_fs_id (job, &id);
    if (job_ckpt_dir (job, cdir, sizeof (cdir)) == 0 &&
        userfs_remove_dirs (&id, cdir, is_jit_dir, &err) < 0)
        dt_log (LOG_WARNING, "job %lld: %s", (long long)job->row.id, err.text);
}

/* The shard path in a dttrain error line "checkpoint shard PATH: ...". */
static bool shard_named (const char *text, char *path, size_t len)
{
    const char *p = text ? strstr (text, "checkpoint shard ") : NULL;
    if (!p)
        return false;
    p += strlen ("checkpoint shard ");
    size_t n = strcspn (p, ": \n");
    if (n == 0 || n >= len)
        return false;
    memcpy (path, p, n);
    path[n] = '\0';
    return true;
}

struct bad_arg {
    int64_t step;
    const char *node, *detail;
    int rank;
    json_t *data;
};

static int tx_ckpt_bad (struct jobs *jobs, struct job *job, struct attempt *att,
                        void *arg, dt_error_t *err)
{
    struct bad_arg *b = arg;
    if (store_ckpt_set_state (jobs->ctx->store, job->row.id, b->step, "bad", NULL, 0,
                              err) < 0)
        return -1;
    return store_event (jobs->ctx->store, dt_real_ms (), job->row.id, att->row.attempt,
                        "checkpoint_bad", b->node, b->rank, b->detail, b->data, err);
}

void jobs_rank_exit_check (struct jobs *jobs, struct attempt *att, const char *node,
                           int rank, int exit_code, const char *stderr_tail)
{
    char path[1024], detail[256];
    size_t dl = strlen (att->row.resume_dir);
    dt_error_t err;

    /* dttrain: exit 3 = a shard failed verification at load.  Only a named
     * shard of the checkpoint this attempt resumed from condemns it. */
    if (exit_code != 3 || att->row.resume_step < 0 || dl == 0 ||
        !shard_named (stderr_tail, path, sizeof (path)) ||
        strncmp (path, att->row.resume_dir, dl) || path[dl] != '/')
        return;
    snprintf (detail, sizeof (detail),
              "checkpoint of step %lld is bad: shard %.160s failed "
              "verification at load",
              (long long)att->row.resume_step, path);
    struct bad_arg b = { att->row.resume_step, node, detail, rank,
                         json_pack ("{s:I s:s s:i}", "step",
                                    (json_int_t)att->row.resume_step, "shard", path,
                                    "exit_code", exit_code) };
    if (transact (jobs, att->job, att, tx_ckpt_bad, &b, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    else
        dt_log (LOG_WARNING,
                "job %lld: %s; the next attempt resumes from the previous one",
                (long long)att->row.job_id, detail);
    json_decref (b.data);
}
