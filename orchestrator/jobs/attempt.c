/* attempt.c: the life of an attempt: allocation, launch, rendezvous of
 * its agents, success, cancel and finish, and polling its launcher.
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
#include "orchestrator/userdir.h"

/* Launchers are polled this often per live attempt; an ending one more
 * often: the next attempt waits for its end (a poll of the Slurm
 * launcher is two RPCs to slurmctld, a few ms, for a second or so). */
static const int64_t poll_interval_ms = 1000;
static const int64_t ending_poll_ms = 50;
/* An ending attempt whose processes do not go away: cancel again after
 * this, and give up waiting (recording it) after ending_giveup_ms. */
static const int64_t ending_cancel_ms = 10000;
static const int64_t ending_giveup_ms = 120000;

static int workers (const struct attempt *att)
{
    return att->row.num_nodes;
}

static uint32_t node_hash (const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* (Re)build the node -> agent index of 'att' for its current agents[]. */
static int agent_hash_build (struct attempt *att)
{
    int cap = 16;
    while (cap < 2 * att->nagents)
        cap *= 2;
    if (cap != att->agent_hash_cap) {
        int *h = realloc (att->agent_hash, cap * sizeof (*h));
        if (!h)
            return -1;
        att->agent_hash = h;
        att->agent_hash_cap = cap;
    }
    memset (att->agent_hash, 0, cap * sizeof (*att->agent_hash));
    for (int i = 0; i < att->nagents; i++) {
        uint32_t k = node_hash (att->agents[i].node) & (cap - 1);
        while (att->agent_hash[k])
            k = (k + 1) & (cap - 1);
        att->agent_hash[k] = i + 1;
    }
    att->agent_hash_n = att->nagents;
    return 0;
}

static struct agent *agent_hash_get (struct attempt *att, const char *node)
{
    int cap = att->agent_hash_cap;
    for (uint32_t k = node_hash (node) & (cap - 1); att->agent_hash[k];
         k = (k + 1) & (cap - 1)) {
        struct agent *ag = &att->agents[att->agent_hash[k] - 1];
        if (!strcmp (ag->node, node))
            return ag;
    }
    return NULL;
}

/* agents[] grows by appending (registration, reload: the new ones are
 * added to the index) and is sorted once, when all registered (which sets
 * agent_hash_n to -1: rebuild); a shrink rebuilds too. */
struct agent *jobs_agent_find (struct attempt *att, const char *node)
{
    if (!att->agent_hash || att->agent_hash_n < 0 || att->agent_hash_n > att->nagents ||
        2 * att->nagents > att->agent_hash_cap) {
        if (agent_hash_build (att) < 0) {
            for (int i = 0; i < att->nagents; i++) /* out of memory: scan */
                if (!strcmp (att->agents[i].node, node))
                    return &att->agents[i];
            return NULL;
        }
    }
    for (int cap = att->agent_hash_cap; att->agent_hash_n < att->nagents;
         att->agent_hash_n++) {
        uint32_t k = node_hash (att->agents[att->agent_hash_n].node) & (cap - 1);
        while (att->agent_hash[k])
            k = (k + 1) & (cap - 1);
        att->agent_hash[k] = att->agent_hash_n + 1;
    }
    return agent_hash_get (att, node);
}

void attempt_destroy (struct attempt *att)
{
    if (att) {
        integ_att_free (att);
        regbatch_forget (att);
        for (int i = 0; i < att->nagents; i++)
            json_decref (att->agents[i].hostinfo);
        free (att->agents);
        free (att->agent_hash);
        free (att->ranks);
        free (att->hs_plan);
        if (att->jit)
            for (int r = 0; r < att->row.world_size; r++)
                free (att->jit[r].shards);
        free (att->jit);
        free (att->kv_index);
        while (att->kv) {
            struct kv *n = att->kv->next;
            free (att->kv->key);
            free (att->kv->value);
            free (att->kv);
            att->kv = n;
        }
        store_attempt_row_clear (&att->row);
        free (att);
    }
}

/* A new attempt object for 'job' (not yet stored). */
struct attempt *attempt_alloc (struct jobs *jobs, struct job *job, int number,
                               bool from_scratch, dt_error_t *err)
{
    struct attempt *att;

    if (!(att = calloc (1, sizeof (*att)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    store_attempt_row_init (&att->row);
    att->job = job;
    att->row.job_id = job->row.id;
    att->row.attempt = number;
    att->row.state = ATT_SUBMITTED;
    snprintf (att->row.launcher, sizeof (att->row.launcher), "%s", jobs->ctx->lops->name);
    att->row.num_nodes = job->next_nodes > 0 ? job->next_nodes : job->spec.nodes;
    att->row.spare_nodes = job->spec.spare_nodes;
    att->row.ranks_per_node = job->spec.ranks_per_node;
    att->row.world_size = att->row.num_nodes * att->row.ranks_per_node;
    /* The layout: the restart decision's when it re-planned, else the spec's. */
    att->row.tp = job->next_tp > 0 ? job->next_tp : job->spec.parallel.tp;
    att->row.pp = job->next_pp > 0 ? job->next_pp : job->spec.parallel.pp;
    att->row.exclude = json_deep_copy (job->row.exclude);
    att->stop_rank = -1;
    /* Suspect nodes (node health: repeated failures in several jobs) are kept out of
     * every new attempt until an admin clears them. */
    {
        json_t *sus = store_nodes_suspect (jobs->ctx->store, err);
        size_t i, j;
        json_t *v, *w;
        if (!sus)
            goto error;
        json_array_foreach (sus, i, v)
        {
            bool have = false;
            json_array_foreach (att->row.exclude, j, w) if (json_equal (v, w)) have =
              true;
            if (!have)
                json_array_append (att->row.exclude, v);
        }
        json_decref (sus);
    }
    att->row.submit_time = dt_real_ms ();
    if (auth_token_new (att->row.token, err) < 0)
        goto error;
    sha256_hex (att->row.token, strlen (att->row.token), att->row.token_sha256);
    if (!(att->ranks = calloc (att->row.world_size, sizeof (*att->ranks)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    for (int r = 0; r < att->row.world_size; r++) {
        att->ranks[r].step = -1;
        att->ranks[r].loss = NAN;
        att->ranks[r].samples = -1;
        att->ranks[r].compute_ms = att->ranks[r].comm_ms = att->ranks[r].score = NAN;
        att->ranks[r].median = NAN;
        att->ranks[r].exit_code = att->ranks[r].signal = -1;
    }
    if (!from_scratch && job->row.id > 0 &&
        integ_resume_guard (jobs, job, number, err) < 0)
        goto error;
    if (!from_scratch && job->row.id > 0) {
        int64_t step;
        char dir[1024], sha[65];
        int rc = store_ckpt_latest (jobs->ctx->store, job->row.id, &step, dir,
                                    sizeof (dir), sha, sizeof (sha), err);
        if (rc < 0)
            goto error;
        if (rc == 1) {
            att->row.resume_step = step;
            snprintf (att->row.resume_dir, sizeof (att->row.resume_dir), "%s", dir);
            snprintf (att->row.resume_sha256, sizeof (att->row.resume_sha256), "%s", sha);
            /* Which kind of checkpoint (regular or just-in-time): its manifest says. */
            char mpath[PATH_MAX];
            json_t *man = NULL;
            struct userfs_id id;
            char *mtext;
            job_fs_id (job, &id);
            if (dt_pathf (mpath, sizeof (mpath), "%s/manifest.json", dir) == 0 &&
                (mtext = userfs_read_file (&id, mpath, 1 << 24, NULL, err))) {
                man = json_loads (mtext, 0, NULL);
                free (mtext);
            }
            const char *kind = json_string_value (json_object_get (man, "kind"));
            snprintf (att->resume_source, sizeof (att->resume_source), "%s",
                      kind && !strcmp (kind, "jit") ? "jit" : "committed");
            json_decref (man);
        }
    }
    if (!att->resume_source[0])
        snprintf (att->resume_source, sizeof (att->resume_source), "none");
    /* The ranks start at the resume step: the periodic checkpoint, an
     * on-demand one and a stop are scheduled ahead of it, not from step 0
     * before the first heartbeat (a command for a step already passed
     * would make every rank write a checkpoint at its first step). */
    if (att->row.resume_step > 0)
        att->max_step = att->row.resume_step;
    /* What reproduces this attempt (provenance.c). */
    att->row.provenance = provenance_attempt_new (job, att, jobs->ctx->lops->name);
    return att;
error:
    attempt_destroy (att);
    return NULL;
}

int tx_insert_attempt (struct jobs *jobs, struct job *job, struct attempt *att,
                       dt_error_t *err)
{
    char detail[160];

    if (store_attempt_insert (jobs->ctx->store, &att->row, err) < 0)
        return -1;
    if (att->row.resume_step >= 0)
        snprintf (detail, sizeof (detail),
                  "attempt %d submitted, resuming from step %lld", att->row.attempt,
                  (long long)att->row.resume_step);
    else
        snprintf (detail, sizeof (detail), "attempt %d submitted, from scratch",
                  att->row.attempt);
    /* resume_source: "jit" when the checkpoint resumed from is a
     * just-in-time one (its manifest's kind), "committed" for a regular
     * committed checkpoint, "none" from scratch. */
    json_t *data =
      json_pack ("{s:I s:I s:s s:O}", "resume_step", (json_int_t)att->row.resume_step,
                 "world_size", (json_int_t)att->row.world_size, "resume_source",
                 att->row.resume_step >= 0 && att->resume_source[0] ? att->resume_source
                 : att->row.resume_step >= 0                        ? "committed"
                                                                    : "none",
                 "exclude", att->row.exclude);
    /* A restart: the backoff waited before it (0: none, restartpolicy.h). */
    if (data && att->row.attempt > 1)
        json_object_set_new (data, "backoff_ms", json_integer (job->restart_wait_ms));
    int rc =
      store_event (jobs->ctx->store, att->row.submit_time, job->row.id, att->row.attempt,
                   "attempt_submitted", NULL, -1, detail, data, err);
    json_decref (data);
    return rc;
}

/* End the processes of an ending attempt (the launcher's cancel). */
void attempt_cancel (struct jobs *jobs, struct attempt *att)
{
    const char *cause = att->row.cause;
    dt_error_t err;
    if (att->cancel_sent || !att->row.handle[0])
        return;
    /* A job that will restart in its allocation keeps it -- it has
     * spares, or a rank ended on a trusted node (in place): the next
     * attempt runs in it as a new step (launcher.h, "reuse"). */
    int flags = 0;
    if (restart_keep_alloc (att->job->spec.spare_nodes, att->job->restart_in_place,
                            att->job->row.state == JOB_RESTARTING, cause)) {
        flags = LAUNCHER_CANCEL_KEEP_ALLOC;
        snprintf (att->job->reuse_handle, sizeof (att->job->reuse_handle), "%s",
                  att->row.handle);
    }
    if (jobs->ctx->lops->cancel (jobs->ctx->launcher, att->row.handle, flags, &err) < 0)
        dt_log (LOG_ERR, "job %lld: cancel %s: %s", (long long)att->row.job_id,
                att->row.handle, err.text);
    att->cancel_sent = true;
}

static int tx_succeed (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                       dt_error_t *err)
{
    att->end_state = ATT_SUCCEEDED;
    att->row.exit_code = 0;
    if (att_set_state (jobs, att, ATT_ENDING, err) < 0)
        return -1;
    return job_set_state (jobs, job, JOB_COMPLETED, "completed", err);
}

/* The attempt's processes are gone: its final state. */
static int tx_finish (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                      dt_error_t *err)
{
    const struct launcher_status *st = arg;
    if (st) {
        /* One failure, recorded once: when the launcher saw the end of a
         * failed attempt earlier than the controller first saw its failure
         * (e.g. slurmctld's NODE_FAIL time before the heartbeat timeout),
         * keep the earliest first-seen time and add the launcher's word. */
        if (att->end_state == ATT_FAILED && st->end_time_ms > 0 &&
            att->row.fail_time > 0 && st->end_time_ms < att->row.fail_time &&
            st->end_kind != LAUNCHER_END_OTHER) {
            char tbuf[40];
            if (!att->row.evidence)
                att->row.evidence = json_object ();
            json_object_set_new (att->row.evidence, "launcher_cause",
                                 json_string (st->cause));
            json_object_set_new (att->row.evidence, "launcher_detail",
                                 json_string (st->detail));
            json_object_set_new (
              att->row.evidence, "controller_first_seen",
              json_string (dt_format_time (att->row.fail_time, tbuf, sizeof (tbuf))));
            att->row.fail_time = st->end_time_ms;
        }
        if (att->row.exit_code < 0)
            att->row.exit_code = st->exit_code;
        if (st->nodelist[0])
            snprintf (att->row.nodelist, sizeof (att->row.nodelist), "%s", st->nodelist);
    }
    return att_set_state (jobs, att, att->end_state, err);
}

static void attempt_finish (struct jobs *jobs, struct attempt *att,
                            const struct launcher_status *st)
{
    dt_error_t err;
    if (transact (jobs, att->job, att, tx_finish, (void *)st, &err) < 0) {
        dt_log (LOG_ERR, "job %lld attempt %d: finishing: %s", (long long)att->row.job_id,
                att->row.attempt, err.text);
        return;
    }
    dt_log (LOG_INFO, "job %lld attempt %d %s", (long long)att->row.job_id,
            att->row.attempt, fsm_attempt_state_name (att->row.state));
    if (att->job->row.state == JOB_RESTARTING)
        att->job->restart_at_ms = dt_real_ms () + backoff_ms (att->job);
}

static bool all_workers_done (const struct attempt *att)
{
    int done = 0;
    for (int i = 0; i < att->nagents; i++)
        if (!att->agents[i].spare && att->agents[i].done)
            done++;
    return done >= workers (att);
}

void attempt_succeed (struct jobs *jobs, struct attempt *att)
{
    dt_error_t err;
    if (att->row.state != ATT_RUNNING)
        return;
    /* Every worker exited 0 after a planned stop (time-limit warning,
     * preemption, straggler exclusion): unless the trainer says it simply
     * finished, this is the end of the attempt, not of the job. */
    if (att->stopping) {
        json_t *stopped = json_object_get (att->job->row.result, "stopped");
        if (!att->job->row.result || json_is_true (stopped)) {
            char detail[256];
            snprintf (detail, sizeof (detail), "%s (the ranks took a final checkpoint%s)",
                      att->stop_detail[0] ? att->stop_detail : att->stop_cause,
                      att->committed_any ? "" : "; none was committed");
            jobs_attempt_fail (
              jobs, att, att->stop_cause, att->stop_node[0] ? att->stop_node : NULL,
              att->stop_rank, detail,
              json_pack ("{s:I s:b}", "stop_step", (json_int_t)att->stop_step,
                         "final_checkpoint_committed", att->committed_any));
            return;
        }
    }
    if (transact (jobs, att->job, att, tx_succeed, NULL, &err) < 0)
        dt_log (LOG_ERR, "job %lld: completing: %s", (long long)att->row.job_id,
                err.text);
    else
        dt_log (LOG_NOTICE, "job %lld completed (attempt %d)", (long long)att->row.job_id,
                att->row.attempt);
}

static int tx_launched (struct jobs *jobs, struct job *job, struct attempt *att,
                        void *arg, dt_error_t *err)
{
    char detail[160];
    if (store_attempt_update (jobs->ctx->store, &att->row, err) < 0)
        return -1;
    snprintf (detail, sizeof (detail), "launched by %s as %s", att->row.launcher,
              att->row.handle);
    return store_event (jobs->ctx->store, dt_real_ms (), job->row.id, att->row.attempt,
                        "attempt_launched", NULL, -1, detail, NULL, err);
}

/* The restart path of a launched attempt ('handle' its launcher's):
 * refined once every agent is in (tx_registered), when the nodes are
 * known.  Only the Slurm launcher reuses an allocation (the local one's
 * handles, "pgid:N", would all look like one allocation to
 * launcher_same_alloc). */
static void launched_path (struct jobs *jobs, struct attempt *att, const char *handle)
{
    struct job *job = att->job;
    bool reused = job->reuse_handle[0] && !strcmp (jobs->ctx->lops->name, "slurm") &&
                  launcher_same_alloc (handle, job->reuse_handle);
    const char *path = restart_path_of (att->row.attempt, reused, job->restart_in_place);
    snprintf (att->row.restart_path, sizeof (att->row.restart_path), "%s",
              path ? path : "");
}

/* The job's checkpoint directory, made with the user's rights: the
 * controller writes the manifests there, so it must reach it anyway (a
 * shared file system under Slurm).  -1 (the attempt failed) when its paths
 * would not fit, or when another user's directory or link holds its name;
 * a directory that cannot be made otherwise is told to the user, and the
 * job runs without checkpoints. */
static int attempt_ckpt_dir (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    char cdir[PATH_MAX], jobname[32];
    struct userfs_id id;
    dt_error_t err;

    if (job_ckpt_dir (job, cdir, sizeof (cdir)) < 0) {
        jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1,
                           "checkpoint.dir is too long for the job's checkpoint paths",
                           NULL);
        return -1;
    }
    job_fs_id (job, &id);
    snprintf (jobname, sizeof (jobname), "%lld", (long long)job->row.id);
    if (userfs_job_dir (&id, job->spec.ckpt.dir, jobname, jobs->ctx->cfg->checkpoint_root,
                        &err) < 0) {
        int e = errno; /* (what refused it) */
        dt_error_t e2;
        char detail[256];
        dt_log (LOG_WARNING, "job %lld: checkpoint directory: %s", (long long)job->row.id,
                err.text);
        snprintf (detail, sizeof (detail),
                  "checkpoint directory (made with the user's "
                  "rights): %s",
                  err.text);
        jobs_note (jobs, att, "checkpoint_dir_failed", NULL, -1, detail, NULL, &e2);
        /* Something of another user's at the job's name (a directory
         * planted in a shared checkpoint root, a link): no trainer may
         * write there.  The attempt fails before it starts. */
        if (e == EPERM || e == ENOTDIR || e == ELOOP) {
            jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1, detail, NULL);
            return -1;
        }
    }
    return 0;
}

int attempt_launch (struct jobs *jobs, struct attempt *att)
{
    struct job *job = att->job;
    struct ctld *ctx = jobs->ctx;
    struct launcher_req req = { 0 };
    char handle[LAUNCHER_HANDLE_MAX] = "";
    char output[PATH_MAX], logdir[PATH_MAX];
    const char **env = NULL, **exclude = NULL;
    dt_error_t err;
    size_t i, n;
    const char *k;
    json_t *v;
    int rc = -1;

    /* Output goes to the user's own directory (UserDir/<uid>): Slurm opens
     * it as the user.  A path that does not fit fails the launch (a
     * truncated log path would be some other file). */
    if (userdir_get (ctx->cfg->user_dir, job->row.uid, job->row.gid, logdir,
                     sizeof (logdir), &err) < 0) {
        dt_log (LOG_ERR, "job %lld attempt %d: %s", (long long)job->row.id,
                att->row.attempt, err.text);
        jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1, err.text, NULL);
        return -1;
    }
    if (dt_pathf (output, sizeof (output), "%s/job-%lld.%d.%%n.log", logdir,
                  (long long)job->row.id, att->row.attempt) < 0) {
        jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1,
                           "the log path under UserDir is too long", NULL);
        return -1;
    }

    if (attempt_ckpt_dir (jobs, att) < 0)
        return -1;

    json_t *jenv = job->spec.env;
    n = json_object_size (jenv);
    if (!(env = calloc (n + 1, sizeof (*env))))
        goto fail;
    i = 0;
    json_object_foreach (jenv, k, v)
    {
        char *kv;
        if (asprintf (&kv, "%s=%s", k, json_string_value (v)) < 0)
            goto fail;
        env[i++] = kv;
    }
    n = json_array_size (att->row.exclude);
    if (!(exclude = calloc (n + 1, sizeof (*exclude))))
        goto fail;
    json_array_foreach (att->row.exclude, i, v) exclude[i] = json_string_value (v);

    /* Only the token's hash survives a controller restart: an attempt
     * launched after one (it was not launched before the crash) gets a
     * fresh token, stored with the launch (nobody holds the old one). */
    if (!att->row.token[0]) {
        if (auth_token_new (att->row.token, &err) < 0) {
            jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1, err.text, NULL);
            goto done;
        }
        sha256_hex (att->row.token, strlen (att->row.token), att->row.token_sha256);
    }
    req.job_id = job->row.id;
    req.attempt = att->row.attempt;
    req.job_name = job->row.name;
    req.token = att->row.token;
    req.uid = job->row.uid;
    req.gid = job->row.gid;
    req.nodes = att->row.num_nodes;
    req.spare_nodes = att->row.spare_nodes;
    req.ranks_per_node = att->row.ranks_per_node;
    req.partition = job->spec.partition;
    req.time_limit_s = job->spec.time_limit_s;
    req.exclude = exclude;
    req.workdir = job->spec.workdir;
    req.output = output;
    req.user_dir = logdir;
    req.env = env;
    req.reuse = job->reuse_handle[0] ? job->reuse_handle : NULL;

    if (ctx->lops->submit (ctx->launcher, &req, handle, &err) < 0) {
        dt_log (LOG_ERR, "job %lld attempt %d: launch failed: %s", (long long)job->row.id,
                att->row.attempt, err.text);
        jobs_attempt_fail (jobs, att, "launch_failed", NULL, -1, err.text, NULL);
        goto done;
    }
    snprintf (att->row.handle, sizeof (att->row.handle), "%s", handle);
    launched_path (jobs, att, handle);
    if (job->reuse_handle[0])
        dt_log (LOG_INFO, "job %lld attempt %d: %s allocation %s", (long long)job->row.id,
                att->row.attempt,
                strcmp (handle, job->reuse_handle) ? "reuse asked of" : "kept",
                job->reuse_handle);
    job->reuse_handle[0] = '\0'; /* the launcher owns it now */
    if (transact (jobs, job, att, tx_launched, NULL, &err) < 0)
        dt_log (LOG_ERR, "job %lld: recording launch: %s", (long long)job->row.id,
                err.text);
    dt_log (LOG_INFO, "job %lld attempt %d launched (%s)", (long long)job->row.id,
            att->row.attempt, handle);
    att->next_poll_ms = dt_real_ms () + 200;
    rc = 0;
    goto done;
fail:
    dt_log (LOG_ERR, "job %lld: launch: out of memory", (long long)job->row.id);
done:
    if (env)
        for (i = 0; env[i]; i++)
            free ((char *)env[i]);
    free (env);
    free (exclude);
    return rc;
}

int jobs_agent_cmp (const void *a, const void *b)
{
    const struct agent *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return strcmp (x->node, y->node);
}

/* Are the attempt's rank nodes exactly 'list' (comma-joined)? */
static bool same_nodes (const struct attempt *att, const char *list)
{
    char buf[256], *save = NULL;
    int n = 0;
    snprintf (buf, sizeof (buf), "%s", list);
    for (char *t = strtok_r (buf, ",", &save); t; t = strtok_r (NULL, ",", &save)) {
        bool found = false;
        for (int i = 0; i < att->nagents && !found; i++)
            found = !att->agents[i].spare && !strcmp (att->agents[i].node, t);
        if (!found)
            return false;
        n++;
    }
    return n > 0 && n == workers (att);
}

struct reg_arg {
    struct agent *ag;
    bool first;
};

/* Node rows the rendezvous writes in its own transaction, at most: those
 * of a huge attempt (6,666 agents: 60-80 ms of the event loop in one
 * request) follow with the bounded flush. */
static const int rendezvous_rows_max = 512;

static int tx_registered (struct jobs *jobs, struct job *job, struct attempt *att,
                          void *arg, dt_error_t *err)
{
    struct reg_arg *r = arg;
    store_t *st = jobs->ctx->store;
    int64_t now = dt_real_ms ();
    int expected = att->row.num_nodes + att->row.spare_nodes;

    if (att->row.state == ATT_SUBMITTED &&
        att_set_state (jobs, att, ATT_STARTING, err) < 0)
        return -1;
    /* The registrations batched so far, before the rendezvous sorts the
     * agents (regbatch.c). */
    if (regbatch_write (jobs, job, att, err) < 0)
        return -1;
    if (r->first) {
        char detail[128];
        struct agent *ag = r->ag;
        snprintf (detail, sizeof (detail), "agent on %s registered (%d of %d)", ag->node,
                  att->nagents, expected);
        if (store_attempt_node_put (st, job->row.id, att->row.attempt, ag->node,
                                    ag->order, -1, false, ag->addr, ag->port, ag->pid,
                                    "registered", ag->register_time, 0, ag->hostinfo,
                                    err) < 0 ||
            store_node_seen (st, ag->node, ag->addr, ag->hostinfo, now, job->row.id,
                             att->row.attempt, err) < 0 ||
            store_event (st, now, job->row.id, att->row.attempt, "agent_registered",
                         ag->node, -1, detail, NULL, err) < 0)
            return -1;
    }
    if (att->nagents < expected || att->row.state != ATT_STARTING || att->reform_orphaned)
        return 0;

    /* Everyone is here: node ranks in Slurm node order. */
    qsort (att->agents, att->nagents, sizeof (*att->agents), jobs_agent_cmp);
    hot_spare_order (att);  /* a hot spare's re-form: every node keeps its rank */
    att->agent_hash_n = -1; /* the node index is stale */
    int rpn = att->row.ranks_per_node;
    for (int i = 0; i < att->nagents; i++) {
        struct agent *ag = &att->agents[i];
        ag->spare = i >= att->row.num_nodes;
        ag->node_rank = ag->spare ? -1 : i;
        ag->last_hb_ms = now;
        if (!ag->spare) {
            /* (copied, not printed: 65,536 ranks at once) */
            size_t nl = strnlen (ag->node, sizeof (ag->node) - 1);
            for (int l = 0; l < rpn; l++) {
                struct rank *rk = &att->ranks[i * rpn + l];
                memcpy (rk->node, ag->node, nl);
                rk->node[nl] = '\0';
                rk->local_rank = l;
                memcpy (rk->state, "starting", sizeof ("starting"));
                rk->updated = now;
                rk->dirty = true;
            }
        }
        /* The first rows now (the job view shows them), the rest with the
         * bounded flush: each row is derived from the rows already written
         * (node ranks are the agents' registration order), and a restarted
         * controller derives them the same way (reload.c). */
        if (i >= rendezvous_rows_max) {
            ag->dirty = true;
            continue;
        }
        if (store_attempt_node_put (st, job->row.id, att->row.attempt, ag->node,
                                    ag->order, ag->node_rank, ag->spare, ag->addr,
                                    ag->port, ag->pid, "registered", ag->register_time,
                                    now, ag->hostinfo, err) < 0)
            return -1;
    }
    /* A restart in the same allocation: in place when its rank nodes are
     * the last attempt's, else a spare took a node's place. */
    if (att->row.attempt > 1 && strcmp (att->row.restart_path, "new_allocation") &&
        strcmp (att->row.restart_path, "reform") &&
        strcmp (att->row.restart_path, "hot_spare") && att->row.restart_path[0]) {
        const char *p =
          restart_path_of (att->row.attempt, true, same_nodes (att, job->prev_nodes));
        snprintf (att->row.restart_path, sizeof (att->row.restart_path), "%s", p);
    }
    snprintf (att->row.master_addr, sizeof (att->row.master_addr), "%s",
              att->agents[0].addr);
    att->row.master_port = att->agents[0].port;
    {
        char list[256] = "";
        size_t off = 0;
        for (int i = 0; i < att->nagents && off < sizeof (list); i++)
            off += snprintf (list + off, sizeof (list) - off, "%s%s", i ? "," : "",
                             att->agents[i].node);
        if (!att->row.nodelist[0])
            snprintf (att->row.nodelist, sizeof (att->row.nodelist), "%s", list);
    }
    provenance_set_machine (att); /* stored by att_set_state */
    if (att_set_state (jobs, att, ATT_RUNNING, err) < 0 ||
        reform_registered (jobs, job, att, err) < 0)
        return -1;
    if (job->row.state != JOB_RUNNING &&
        job_set_state (jobs, job, JOB_RUNNING, NULL, err) < 0)
        return -1;
    return 0;
}

int jobs_agent_registered (struct jobs *jobs, struct attempt *att, struct agent *ag,
                           bool first, dt_error_t *err)
{
    struct reg_arg r = { ag, first };
    char node[64];
    snprintf (node, sizeof (node), "%s", ag->node); /* qsort may move ag */
    /* One more agent of a starting attempt that still waits for others:
     * recorded with the others of this pass (regbatch.c). */
    if (first && att->row.state == ATT_STARTING &&
        att->nagents < att->row.num_nodes + att->row.spare_nodes) {
        regbatch_mark (att, ag);
        return 0;
    }
    if (transact (jobs, att->job, att, tx_registered, &r, err) < 0)
        return -1;
    regbatch_written (att);
    if (att->row.state == ATT_RUNNING && first &&
        att->nagents == att->row.num_nodes + att->row.spare_nodes)
        dt_log (LOG_INFO, "job %lld attempt %d running on %s (master %s:%d)",
                (long long)att->row.job_id, att->row.attempt, att->row.nodelist,
                att->row.master_addr, att->row.master_port);
    (void)node;
    return 0;
}

struct done_arg {
    struct agent *ag;
    int exit_code;
};

static int tx_done (struct jobs *jobs, struct job *job, struct attempt *att, void *arg,
                    dt_error_t *err)
{
    struct done_arg *d = arg;
    struct agent *ag = d->ag;
    char detail[96];
    int64_t now = dt_real_ms ();

    snprintf (detail, sizeof (detail), "agent on %s done (exit %d)", ag->node,
              d->exit_code);
    if (store_attempt_node_put (jobs->ctx->store, job->row.id, att->row.attempt, ag->node,
                                ag->order, ag->node_rank, ag->spare, ag->addr, ag->port,
                                ag->pid, "done", ag->register_time, ag->last_hb_ms,
                                ag->hostinfo, err) < 0)
        return -1;
    return store_event (jobs->ctx->store, now, job->row.id, att->row.attempt,
                        "agent_done", ag->node, -1, detail, NULL, err);
}

int jobs_agent_done (struct jobs *jobs, struct attempt *att, struct agent *ag,
                     int exit_code, dt_error_t *err)
{
    struct done_arg d = { ag, exit_code };
    if (ag->done)
        return 0;
    ag->done = true;
    if (transact (jobs, att->job, att, tx_done, &d, err) < 0) {
        ag->done = false;
        return -1;
    }
    if (exit_code != 0) {
        char detail[96];
        snprintf (detail, sizeof (detail), "agent on %s done with exit code %d", ag->node,
                  exit_code);
        jobs_attempt_fail (jobs, att, "trainer_exit", ag->node, -1, detail,
                           json_pack ("{s:i}", "exit_code", exit_code));
        return 0;
    }
    if (all_workers_done (att))
        attempt_succeed (jobs, att);
    return 0;
}

/* Every process of a failed attempt ended before the controller
 * cancelled it (each rank exited): its allocation may live on, its batch
 * script waiting for the next step.  A restart that may run in it (in
 * place, or on a spare) asks to reuse it, as after a cancel with
 * KEEP_ALLOC; a launcher that cannot reuse it ends it (launcher.h). */
static void keep_ended_alloc (struct attempt *att)
{
    struct job *job = att->job;
    if (att->cancel_sent || job->reuse_handle[0] || !att->row.handle[0] ||
        !restart_keep_alloc (job->spec.spare_nodes, job->restart_in_place,
                             job->row.state == JOB_RESTARTING, att->row.cause))
        return;
    snprintf (job->reuse_handle, sizeof (job->reuse_handle), "%s", att->row.handle);
}

/* Poll the launcher (every poll interval; faster while ending): it may
 * say that the attempt started or ended.  True when the attempt's tick
 * is over (its processes ended). */
bool attempt_poll (struct jobs *jobs, struct attempt *att, int64_t now)
{
    struct ctld *ctx = jobs->ctx;
    dt_error_t err;

    if (now < att->next_poll_ms || !att->row.handle[0])
        return false;
    struct launcher_status st;
    /* An ending attempt is polled faster: the next one waits on it. */
    att->next_poll_ms =
      now + (att->row.state == ATT_ENDING ? ending_poll_ms : poll_interval_ms);
    memset (&st, 0, sizeof (st));
    if (ctx->lops->poll (ctx->launcher, att->row.handle, &st, &err) < 0)
        dt_log (LOG_WARNING, "job %lld: poll %s: %s", (long long)att->row.job_id,
                att->row.handle, err.text);
    else {
        if (st.sched_id)
            att->row.slurm_job_id = st.sched_id;
        if (st.batch_host[0] && strcmp (att->row.batch_host, st.batch_host)) {
            snprintf (att->row.batch_host, sizeof (att->row.batch_host), "%s",
                      st.batch_host);
            /* Learned after the rendezvous wrote the row (the agents
             * registered before this poll): written now, so that the
             * record names the batch host while the attempt runs. */
            if (att->row.state == ATT_RUNNING &&
                store_attempt_update (ctx->store, &att->row, &err) < 0)
                dt_log (LOG_WARNING, "job %lld: %s", (long long)att->row.job_id,
                        err.text);
        }
        if (st.state == LAUNCHER_RUNNING && att->row.state == ATT_SUBMITTED) {
            struct reg_arg r = { NULL, false };
            if (transact (jobs, att->job, att, tx_registered, &r, &err) < 0)
                dt_log (LOG_ERR, "job %lld: %s", (long long)att->row.job_id, err.text);
        }
        else if (st.state == LAUNCHER_ENDED) {
            if (att->row.state == ATT_RUNNING && all_workers_done (att))
                attempt_succeed (jobs, att);
            else if (att->row.state != ATT_ENDING)
                attempt_launcher_failed (jobs, att, &st, now);
            if (att->row.state == ATT_ENDING) {
                jit_window_close (jobs, att, "every process of the attempt ended");
                keep_ended_alloc (att);
                attempt_finish (jobs, att, &st);
            }
            return true;
        }
    }
    return false;
}

/* An ending attempt: close the just-in-time window when it has done its
 * work, cancel processes that linger, give up waiting at last. */
void attempt_tick_ending (struct jobs *jobs, struct attempt *att, int64_t now)
{
    struct ctld *ctx = jobs->ctx;
    dt_error_t err;

    /* The just-in-time window: done when a set is committed, when no
     * surviving rank runs any more, or at its deadline. */
    if (att->jit_open) {
        const char *why = NULL;
        if (att->jit_step > 0)
            why = "committed";
        else if (!jit_survivors_running (att, now) && !(why = jit_why_none (att, now)))
            why = "the surviving ranks exited without one (zero1, --no-jit, or nothing "
                  "newer than the last checkpoint)";
        else if (now >= att->jit_until_ms)
            why = "none arrived in time";
        if (!why)
            return;
        jit_window_close (jobs, att, why);
        attempt_cancel (jobs, att);
    }
    if (!att->cancel_sent && now - att->ending_since_ms > ending_cancel_ms) {
        if (ctx->lops->cancel (ctx->launcher, att->row.handle, 0, &err) < 0)
            dt_log (LOG_ERR, "job %lld: cancel: %s", (long long)att->row.job_id,
                    err.text);
        att->cancel_sent = true;
    }
    if (now - att->ending_since_ms > ending_giveup_ms) {
        dt_log (LOG_WARNING,
                "job %lld attempt %d: launcher still reports processes "
                "after %lld ms; recording the end anyway",
                (long long)att->row.job_id, att->row.attempt,
                (long long)ending_giveup_ms);
        attempt_finish (jobs, att, NULL);
    }
}

void jobs_alloc_next (struct jobs *jobs, int64_t job_id, const char *alloc, int64_t cur,
                      bool step_running, struct jobs_alloc_next *out)
{
    struct job *job = jobs_find (jobs, job_id);
    struct attempt *att = job ? job->att : NULL;
    dt_error_t err;

    memset (out, 0, sizeof (*out));
    out->action = JOBS_ALLOC_WAIT;
    if (!job || fsm_job_terminal (job->row.state)) {
        out->action = JOBS_ALLOC_EXIT;
        out->why = "the job is over";
        return;
    }
    if (att && att->row.handle[0] && !launcher_same_alloc (att->row.handle, alloc)) {
        out->action = JOBS_ALLOC_EXIT;
        out->why = "the job goes on in another allocation";
        return;
    }
    if (!att || !att->row.handle[0] || att->row.attempt <= cur ||
        (att->row.state != ATT_SUBMITTED && att->row.state != ATT_STARTING))
        return;
    /* A re-formed attempt runs in the step that is still running. */
    if (!strcmp (att->row.restart_path, "reform") ||
        !strcmp (att->row.restart_path, "hot_spare"))
        return;
    /* A reused allocation runs exactly num_nodes agents: its spares stay
     * idle without one (launcher.h, reuse). */
    att->row.spare_nodes = 0;
    dt_log (LOG_NOTICE,
            "job %lld: allocation %s starts attempt %d as a new step "
            "(%d nodes; it ran attempt %lld%s)",
            (long long)job_id, alloc, att->row.attempt,
            att->row.num_nodes + att->row.spare_nodes, (long long)cur,
            step_running ? ", whose step is still ending" : "");
    char detail[160];
    snprintf (detail, sizeof (detail),
              "allocation %s starts attempt %d as a new step "
              "(in-allocation restart)",
              alloc, att->row.attempt);
    if (jobs_note (jobs, att, "alloc_step", NULL, -1, detail, NULL, &err) < 0)
        dt_log (LOG_WARNING, "job %lld: %s", (long long)job_id, err.text);
    out->action = JOBS_ALLOC_RUN;
    out->attempt = att->row.attempt;
    out->token = att->row.token;
    out->nodes = att->row.num_nodes + att->row.spare_nodes;
    out->exclude = att->row.exclude;
    /* In place: the same nodes as the attempt before, so that a spare
     * stays free for a real node loss. */
    if (job->restart_in_place && job->prev_nodes[0]) {
        int n = 1;
        for (const char *c = job->prev_nodes; *c; c++)
            n += *c == ',';
        if (n == att->row.num_nodes)
            out->nodelist = job->prev_nodes;
    }
}
