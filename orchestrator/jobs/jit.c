/* jit.c: just-in-time checkpoints.  After a failure the launcher's cancel
 * waits (the just-in-time window) while surviving ranks report the shards
 * of their data-parallel group for one step (every rank's shard in plain
 * dp); the first step newer than the last committed checkpoint whose sets
 * cover every (tp, pp) position is committed (kind "jit"), each shard
 * taken from one set, so every tensor slice is covered exactly once.
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

#include "orchestrator/jobs/internal.h"
#include "orchestrator/jobs/restartpolicy.h"
#include "orchestrator/jobs/ckptpolicy.h"

/* Just-in-time sets tracked per attempt, per (tp, pp) position: each holds
 * world_size / (tp pp) entries, so that every rank reporting one would hold
 * world_size squared / (tp pp); a few survivors of each position suffice. */
static const int jit_sets_max = 16;

/* How long an ending attempt waits for a survivor's just-in-time shard
 * set before its processes are cancelled: writing the whole state once
 * takes well under a second for the models dttrain trains here; the wait
 * ends sooner when a set is committed or every surviving rank exited. */
static const int64_t jit_wait_ms = 5000;

bool jobs_jit_window (const struct attempt *att)
{
    return att->jit_open && att->row.state == ATT_ENDING;
}

bool jobs_jit_reporter (const struct attempt *att, int rank)
{
    return att->jit && rank >= 0 && rank < att->row.world_size && att->jit[rank].step > 0;
}

/* The attempt's number of (tp, pp) positions: a rank writes the shards of
 * its dp group (world / group of them). */
static int att_group (const struct attempt *att)
{
    int g = att->row.tp * att->row.pp;
    return g > 0 && att->row.world_size % g == 0 ? g : 1;
}

struct jit_arg {
    const int *pick; /* [group]: the reporting rank each position's shards come from */
    int group;
    int64_t step;
    const char *sdir;
    int64_t *deleted;
    int ndeleted;
};

static int tx_jit_commit (struct jobs *jobs, struct job *job, struct attempt *att,
                          void *arg, dt_error_t *err)
{
    struct jit_arg *a = arg;
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    char path[PATH_MAX];

    if (store_ckpt_put_pending (st, job->row.id, a->step, att->row.attempt, a->sdir,
                                att->row.world_size, now, err) < 0)
        return -1;
    json_t *by = json_array (), *nodes = json_array ();
    for (int k = 0; k < att->row.world_size; k++) {
        struct jit_set *js = &att->jit[a->pick[k % a->group]];
        struct jit_shard *sh = &js->shards[k / a->group];
        if (dt_pathf (path, sizeof (path), "%s/rank-%d.ckpt", a->sdir, k) < 0) {
            json_decref (by), json_decref (nodes);
            return errnoprintf (err, ENAMETOOLONG, "checkpoint path too long");
        }
        if (store_shard_put (st, job->row.id, a->step, k, att->row.attempt, js->node,
                             path, sh->bytes, sh->crc32c, now, err) < 0) {
            json_decref (by), json_decref (nodes);
            return -1;
        }
    }
    for (int p = 0; p < a->group; p++) {
        json_array_append_new (by, json_integer (a->pick[p]));
        json_array_append_new (nodes, json_string (att->jit[a->pick[p]].node));
    }
    /* One writer (plain dp): its rank and node, as before; under tp or pp
     * also every position's writer. */
    json_t *extra =
      json_pack ("{s:i s:s s:I}", "written_by_rank", a->pick[0], "node",
                 att->jit[a->pick[0]].node, "attempt", (json_int_t)att->row.attempt);
    if (a->group > 1) {
        json_object_set_new (extra, "written_by_ranks", by);
        json_object_set_new (extra, "nodes", nodes);
        json_object_set_new (extra, "positions", json_integer (a->group));
    }
    else
        json_decref (by), json_decref (nodes);
    int rc = ckpt_commit_tx (jobs, job, att, a->step, a->sdir, "jit", extra, &a->deleted,
                             &a->ndeleted, err);
    json_decref (extra);
    return rc;
}

/* The survivors' sets cover every position at 'step' (pick[p]: the rank
 * whose set gives position p's shards): gather them into step-<S> - the
 * first position's directory renamed, the other positions' shards moved
 * into it - and commit it. */
static int jit_commit (struct jobs *jobs, struct attempt *att, int64_t step,
                       const int *pick, dt_error_t *err)
{
    struct job *job = att->job;
    int group = att_group (att);
    char cdir[PATH_MAX], jdir[64], sdir[PATH_MAX], sname[48], old[64], state[32] = "";
    char from[PATH_MAX], fname[48];
    struct jit_arg a = { pick, group, step, sdir, NULL, 0 };
    struct userfs_id id;
    int rc;

    job_fs_id (job, &id);
    snprintf (jdir, sizeof (jdir), "jit-%lld-r%d", (long long)step, pick[0]);
    snprintf (sname, sizeof (sname), "step-%lld", (long long)step);
    snprintf (old, sizeof (old), ".partial-step-%lld-a%d", (long long)step,
              att->row.attempt);
    if (job_ckpt_dir (job, cdir, sizeof (cdir)) < 0 ||
        dt_pathf (sdir, sizeof (sdir), "%s/%s", cdir, sname) < 0)
        return errnoprintf (err, ENAMETOOLONG, "checkpoint path too long");
    if (store_ckpt_state (jobs->ctx->store, job->row.id, step, state, sizeof (state),
                          err) < 0 &&
        errno != ENOENT)
        return -1;
    if (!strcmp (state, "committed"))
        return 0; /* the ranks committed that step themselves */
    /* A partial regular checkpoint of the same step (its writers died or
     * were waited for): its shards hold the same state; set it aside. */
    if ((rc = userfs_exists (&id, cdir, sname, err)) < 0)
        return -1;
    if (rc == 1) {
        rm_dir_files (job, cdir, old);
        if (userfs_rename (&id, cdir, sname, old, err) < 0)
            return -1;
    }
    if (userfs_rename (&id, cdir, jdir, sname, err) < 0)
        return -1;
    rm_dir_files (job, cdir, old);
    /* The other positions' shards: their writers' directories keep the
     * rest (replicas' copies), removed with the job's jit-* directories. */
    for (int k = 0; k < att->row.world_size; k++) {
        if (k % group == 0)
            continue;
        snprintf (fname, sizeof (fname), "rank-%d.ckpt", k);
        if (dt_pathf (from, sizeof (from), "%s/jit-%lld-r%d", cdir, (long long)step,
                      pick[k % group]) < 0)
            return errnoprintf (err, ENAMETOOLONG, "checkpoint path too long");
        if (userfs_move (&id, from, sdir, fname, err) < 0)
            return -1;
    }
    if (transact (jobs, job, att, tx_jit_commit, &a, err) < 0) {
        free (a.deleted);
        return -1;
    }
    att->jit_step = step;
    att->committed_any = true;
    jobs->ckpts++;
    dt_log (LOG_NOTICE,
            "job %lld: just-in-time checkpoint of step %lld committed (written by "
            "rank %d on %s%s)",
            (long long)att->row.job_id, (long long)step, pick[0], att->jit[pick[0]].node,
            group > 1 ? " and the other positions' survivors" : "");
    for (int i = 0; i < a.ndeleted; i++)
        ckpt_remove_files (jobs, job, a.deleted[i]);
    free (a.deleted);
    return 0;
}

int jobs_shard_jit (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                    int shard_rank, int64_t step, const char *path, int64_t bytes,
                    const char *crc32c, dt_error_t *err)
{
    int W = att->row.world_size, group = att_group (att);
    char cdir[PATH_MAX], want[PATH_MAX], dir[1024], sha[65];
    int64_t latest = -1;

    if (rank < 0 || rank >= W)
        return errnoprintf (err, EINVAL, "rank: %d is outside the world (size %d)", rank,
                            W);
    if (shard_rank < 0 || shard_rank >= W)
        return errnoprintf (err, EINVAL, "shard_rank: %d is outside the world (size %d)",
                            shard_rank, W);
    if (shard_rank % group != rank % group)
        return errnoprintf (err, EINVAL,
                            "shard_rank: %d is not in rank %d's data-parallel group "
                            "(tp %d x pp %d: the ranks %d mod %d)",
                            shard_rank, rank, att->row.tp, att->row.pp, rank % group,
                            group);
    /* The controller moves this directory: it must be exactly where a
     * just-in-time set of this rank goes, inside the job's checkpoint dir. */
    job_ckpt_dir (att->job, cdir, sizeof (cdir));
    if (dt_pathf (want, sizeof (want), "%s/jit-%lld-r%d/rank-%d.ckpt", cdir,
                  (long long)step, rank, shard_rank) < 0 ||
        strcmp (path, want))
        return errnoprintf (
          err, EINVAL, "path: a just-in-time shard of rank %d must be %s", rank, want);
    if (!att->jit && !(att->jit = calloc (W, sizeof (*att->jit))))
        return errnoprintf (err, ENOMEM, "out of memory");
    if (!att->jit[rank].shards && att->jit_nsets >= jit_sets_max * group) {
        /* Each set costs world_size entries: a few survivors write one,
         * and the first complete sets win; the sets of more ranks are
         * ignored (their files stay in the job's directory, removed with
         * the job's other just-in-time directories). */
        if (!att->jit_refused_logged)
            dt_log (LOG_WARNING,
                    "job %lld attempt %d: rank %d reports a just-in-time set "
                    "but %d ranks already do; ignored",
                    (long long)att->row.job_id, att->row.attempt, rank,
                    jit_sets_max * group);
        att->jit_refused_logged = true;
        return 0;
    }
    if (!att->jit[rank].shards)
        att->jit_nsets++;
    int complete =
      jit_set_add (&att->jit[rank], W, W / group, node, shard_rank, step, bytes, crc32c);
    if (complete < 0)
        return errnoprintf (err, ENOMEM, "out of memory");
    if (!complete)
        return 0;

    /* A complete set: the first step newer than every committed checkpoint
     * whose sets cover every position wins; the others are identical or
     * older, and removed. */
    int rc = store_ckpt_latest (jobs->ctx->store, att->row.job_id, &latest, dir,
                                sizeof (dir), sha, sizeof (sha), err);
    if (rc < 0)
        return -1;
    char jdir[64], detail[192];
    snprintf (jdir, sizeof (jdir), "jit-%lld-r%d", (long long)step, rank);
    if (!jit_set_needed (att->jit_step, rc == 1, latest, step)) {
        snprintf (detail, sizeof (detail),
                  "just-in-time checkpoint of step %lld by rank %d "
                  "not needed (%s %lld)",
                  (long long)step, rank,
                  att->jit_step > 0 ? "just-in-time checkpoint committed at step"
                                    : "a committed checkpoint has step",
                  (long long)(att->jit_step > 0 ? att->jit_step : latest));
        rm_dir_files (att->job, cdir, jdir);
        return jobs_note (jobs, att, "jit_checkpoint_unused", node, rank, detail, NULL,
                          err);
    }
    int pick[group];
    if (jit_cover (att->jit, W, group, step, pick) < group)
        return 0; /* a position is still missing: wait for its survivors */
    return jit_commit (jobs, att, step, pick, err);
}

/* Why no just-in-time checkpoint could be assembled under tp or pp: the
 * survivors reported sets, but those of the newest step reported leave
 * (tp, pp) positions uncovered.  Text for the event's detail into buf
 * ("" when that is not the reason) and the positions ("tpX.ppY") into
 * 'missing' (may be NULL). */
static void jit_missing (const struct attempt *att, char *buf, size_t len,
                         json_t *missing)
{
    int W = att->row.world_size, group = att_group (att), pick[group];
    int64_t step = 0;
    buf[0] = '\0';
    for (int r = 0; att->jit && r < W; r++)
        if (att->jit[r].shards && att->jit[r].nhave >= W / group &&
            att->jit[r].step > step)
            step = att->jit[r].step;
    if (group == 1 || step == 0)
        return;
    int covered = jit_cover (att->jit, W, group, step, pick);
    size_t off = (size_t)snprintf (buf, len,
                                   "; the survivors' sets of step %lld cover %d of %d "
                                   "(tp, pp) positions, no survivor holds",
                                   (long long)step, covered, group);
    for (int p = 0; p < group; p++) {
        char pos[32];
        if (pick[p] >= 0)
            continue;
        snprintf (pos, sizeof (pos), "tp%d.pp%d", p % att->row.tp, p / att->row.tp);
        if (off < len)
            off += (size_t)snprintf (buf + off, len - off, " %s", pos);
        if (missing)
            json_array_append_new (missing, json_string (pos));
    }
}

/* zero1: the optimizer slices of the lost ranks (the failed rank, or every
 * rank of the failed node), "tpX.ppY.dpZ" each, into 'missing' and the
 * event's detail text into buf. */
static void jit_zero1_missing (const struct attempt *att, char *buf, size_t len,
                               json_t *missing)
{
    int tp = att->row.tp > 0 ? att->row.tp : 1, pp = att->row.pp > 0 ? att->row.pp : 1;
    size_t off = (size_t)snprintf (buf, len,
                                   "; zero1 shards the optimizer state across the "
                                   "data-parallel group, no survivor holds");
    int n = 0;
    for (int r = 0; r < att->row.world_size; r++) {
        const struct rank *rk = &att->ranks[r];
        bool lost = r == att->row.cause_rank ||
                    (att->row.cause_rank < 0 && att->row.cause_node[0] && rk->seen &&
                     !strcmp (rk->node, att->row.cause_node));
        if (!lost)
            continue;
        char pos[48];
        snprintf (pos, sizeof (pos), "tp%d.pp%d.dp%d", r % tp, (r / tp) % pp,
                  r / (tp * pp));
        if (off < len)
            off += (size_t)snprintf (buf + off, len - off, " %s", pos);
        json_array_append_new (missing, json_string (pos));
        n++;
    }
    if (n == 0 && off < len)
        snprintf (buf + off, len - off, " the lost ranks' slices");
}

bool jit_zero1_lost (struct attempt *att, const char *cause)
{
    return att->job->spec.parallel.zero1 && att->row.world_size > 1 &&
           att->job->spec.ckpt.dir && att->job->row.state == JOB_RESTARTING &&
           restart_jit_cause (cause, att->row.cause_rank);
}

/* Open the window in which surviving ranks may still report a set. */
void jit_window_open (struct attempt *att)
{
    att->jit_open = true;
    att->jit_opened_ms = dt_real_ms ();
    att->jit_until_ms = att->jit_opened_ms + jit_wait_ms;
}

/* The end of the window: record what it gave (the caller cancels). */
void jit_window_close (struct jobs *jobs, struct attempt *att, const char *why)
{
    dt_error_t err;
    char detail[480];
    if (!att->jit_open)
        return;
    att->jit_open = false;
    int64_t waited = dt_real_ms () - att->jit_opened_ms;
    if (att->jit_step > 0)
        snprintf (detail, sizeof (detail),
                  "just-in-time checkpoint of step %lld committed; "
                  "the next attempt resumes from it (waited %lld ms)",
                  (long long)att->jit_step, (long long)waited);
    json_t *missing = json_array ();
    if (att->jit_step <= 0) {
        char text[200];
        if (att->job->spec.parallel.zero1)
            jit_zero1_missing (att, text, sizeof (text), missing);
        else
            jit_missing (att, text, sizeof (text), missing);
        if (text[0])
            why = "the survivors do not hold every slice";
        snprintf (detail, sizeof (detail),
                  "no just-in-time checkpoint (%s%s, waited %lld ms): "
                  "the next attempt resumes from the last committed checkpoint",
                  why, text, (long long)waited);
    }
    /* The layout says which slices a survivor holds: its dp group's. */
    json_t *data = json_pack (
      "{s:s s:I s:I s:s s:{s:i s:i s:i}}", "resume_source",
      att->jit_step > 0 ? "jit" : "committed", "jit_step", (json_int_t)att->jit_step,
      "waited_ms", (json_int_t)waited, "why", why, "layout", "tp",
      att->row.tp > 0 ? att->row.tp : 1, "pp", att->row.pp > 0 ? att->row.pp : 1, "dp",
      att->row.world_size / att_group (att));
    if (json_array_size (missing))
        json_object_set (data, "missing_positions", missing);
    json_decref (missing);
    if (jobs_note (jobs, att, "jit_window", NULL, -1, detail, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    json_decref (data);
    dt_log (LOG_INFO, "job %lld attempt %d: %s", (long long)att->row.job_id,
            att->row.attempt, detail);
}

/* Rank r of a re-formed attempt that has not stepped yet is a replacement
 * (holds no state): a rank lost in the attempt it replaced (its failed
 * rank, or a rank of its lost node), started again or taken over by a hot
 * spare's standby process.  (Its page may still report the lost process's
 * last step.) */
static bool jit_replacement (const struct attempt *att, int r)
{
    const struct attempt *prev = att->job->reform_prev;
    if (strcmp (att->resume_source, "reform") || att->max_step > att->row.resume_step ||
        !prev || prev->row.attempt != att->row.attempt - 1 || r >= prev->row.world_size)
        return false;
    return r == prev->row.cause_rank ||
           (prev->row.cause_rank < 0 && prev->row.cause_node[0] && prev->ranks[r].seen &&
            !strcmp (prev->ranks[r].node, prev->row.cause_node));
}

/* Why no running rank can write a just-in-time checkpoint although some
 * still run: NULL when one can, or none runs.  A surviving rank (one that
 * may write one) has libdtclient, is not on the failed node, its agent is
 * not silent, and it holds the state: a re-formed group's replacement
 * (jit_replacement) holds none until the group has stepped, so when a
 * re-formation fails (a survivor killed by its agent's backstop, or lost)
 * and only replacements run, nothing is left to wait for. */
static const char *jit_none_holds (struct attempt *att, int64_t now, bool *any)
{
    int64_t hb = att->job->spec.hb.interval_ms;
    bool stateless = false;
    *any = false;
    for (int r = 0; r < att->row.world_size; r++) {
        struct rank *rk = &att->ranks[r];
        if (!rk->seen || !rk->client || strcmp (rk->state, "running") ||
            (att->row.cause_node[0] && !strcmp (rk->node, att->row.cause_node)))
            continue;
        struct agent *ag = jobs_agent_find (att, rk->node);
        if (!ag || ag->done || now - ag->last_hb_ms > 3 * hb + 1000)
            continue;
        if (jit_replacement (att, r)) {
            stateless = true;
            continue;
        }
        *any = true;
        return NULL;
    }
    return stateless ? "no running rank holds the state: the re-formed group's "
                       "survivors are gone and its replacements hold none"
                     : NULL;
}

bool jit_survivors_running (struct attempt *att, int64_t now)
{
    bool any;
    jit_none_holds (att, now, &any);
    return any;
}

const char *jit_why_none (struct attempt *att, int64_t now)
{
    bool any;
    return jit_none_holds (att, now, &any);
}

/* After a failure: may survivors still save the state?  Only when the job
 * checkpoints, will restart, and some libdtclient rank still runs. */
bool jit_applies (struct attempt *att, const char *cause)
{
    return att->row.world_size > 1 && att->job->spec.ckpt.dir &&
           !att->job->spec.parallel.zero1 &&
           att->job->row.state == JOB_RESTARTING
           /* a named hung rank is killed (jobs_commands_text): its peers,
            * blocked on it, then lose a peer like any other */
           && restart_jit_cause (cause, att->row.cause_rank);
}

bool jit_may_help (struct attempt *att, const char *cause)
{
    return jit_applies (att, cause) && jit_survivors_running (att, dt_real_ms ());
}

void jobs_survivor_exit (struct jobs *jobs, struct attempt *att, const char *node,
                         int rank, int exit_code)
{
    dt_error_t err;
    char detail[192];
    snprintf (detail, sizeof (detail),
              "rank %d on %s exited with code %d after writing a "
              "just-in-time checkpoint: it lost a peer",
              rank, node, exit_code);
    json_t *data = json_pack ("{s:i s:b s:I}", "exit_code", exit_code, "survivor", 1,
                              "last_step", (json_int_t)att->ranks[rank].step);
    if (jobs_note (jobs, att, "rank_exit", node, rank, detail, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
    json_decref (data);
    if (att->row.state == ATT_RUNNING && att->survivor_exit_ms == 0)
        att->survivor_exit_ms = dt_real_ms ();
    if (att->row.state == ATT_RUNNING && att->peer_loss_ms == 0)
        att->peer_loss_ms = dt_real_ms ();
}
