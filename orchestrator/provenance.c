/* provenance.c: what is needed to reproduce an attempt (see provenance.h). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/version.h"
#include "orchestrator/jobs.h"
#include "orchestrator/provenance.h"
#include "orchestrator/sha256.h"
#include "orchestrator/userfs.h"

/* 256 MiB hashes in about a second: the most one file may cost. */
const int64_t provenance_full_hash_max = (int64_t)256 << 20;
/* What one attempt's hashing may read in all (the worker thread's time). */
const int64_t provenance_budget_bytes = (int64_t)1 << 30;
/* What a larger file is hashed by, besides its size and mtime. */
static const size_t part_bytes = 1 << 20;
/* Arguments that name files: at most this many are hashed. */
static const int files_max = 32;

/* Interpreters whose first non-option argument is the trainer's script. */
static const char *const interpreters[] = {
    "sh",      "bash",    "dash",     "zsh",        "ksh",       "python",
    "python2", "python3", "perl",     "ruby",       "Rscript",   "julia",
    "node",    "lua",     "torchrun", "accelerate", "deepspeed", NULL,
};

static bool is_interpreter (const char *arg0)
{
    const char *b = strrchr (arg0, '/');
    b = b ? b + 1 : arg0;
    for (int i = 0; interpreters[i]; i++) {
        size_t n = strlen (interpreters[i]);
        /* python3.11 counts as python3 */
        if (!strncmp (b, interpreters[i], n) && (b[n] == '\0' || b[n] == '.'))
            return true;
    }
    return false;
}

/* 'arg' relative to workdir, unless absolute.  False if it does not fit. */
static bool resolve (const char *arg, const char *workdir, char *out, size_t len)
{
    int n;
    if (arg[0] == '/' || !workdir || !*workdir)
        n = snprintf (out, len, "%s", arg);
    else
        n = snprintf (out, len, "%s/%s", workdir, arg);
    if (n < 0 || (size_t)n >= len) {
        out[0] = '\0';
        return false;
    }
    return true;
}

/* Everything below until the worker section runs in the worker thread,
 * with the job user's file system identity (userfs_enter): stat, open
 * and read see what that user may see, nothing more. */

static bool is_file (const char *path)
{
    struct stat sb;
    return stat (path, &sb) == 0 && S_ISREG (sb.st_mode);
}

/* command[0] as execvp would find it: a path (relative to workdir) or the
 * first executable file of PATH (the job's PATH if its env sets one).
 * Executable by its mode bits (access(2) would ask with root's rights). */
static bool resolve_command (const char *arg0, const char *workdir, const char *path_env,
                             char *out, size_t len)
{
    struct stat sb;
    if (strchr (arg0, '/')) {
        return resolve (arg0, workdir, out, len) && is_file (out);
    }
    const char *p = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    while (*p) {
        size_t n = strcspn (p, ":");
        char dir[PATH_MAX];
        snprintf (dir, sizeof (dir), "%.*s", (int)n, p);
        if (n == 0)
            snprintf (dir, sizeof (dir), ".");
        size_t l;
        if (resolve (dir, workdir, out, len) && (l = strlen (out)) < len &&
            snprintf (out + l, len - l, "/%s", arg0) < (int)(len - l) &&
            stat (out, &sb) == 0 && S_ISREG (sb.st_mode) && (sb.st_mode & 0111))
            return true;
        p += n;
        if (*p == ':')
            p++;
    }
    return false;
}

static json_t *file_error (const char *arg, const char *path, const char *error)
{
    return json_pack ("{s:s s:s s:s}", "arg", arg, "path", path, "error", error);
}

/* Hash fd's bytes [off, off+len) into c; a file that shrank meanwhile
 * ends it early (read, never mmap: a truncation must not raise SIGBUS). */
static int hash_range (int fd, struct sha256_ctx *c, off_t off, size_t len, char *buf,
                       size_t bufsz, int64_t *spent)
{
    while (len > 0) {
        ssize_t n = pread (fd, buf, len < bufsz ? len : bufsz, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        sha256_update (c, buf, (size_t)n);
        off += n;
        len -= (size_t)n;
        *spent += n;
    }
    return 0;
}

/* One file's entry (new reference): opened as the user, O_NOFOLLOW on the
 * resolved path and O_NONBLOCK (a FIFO or device is refused, never
 * waited on), a regular file only, within what is left of *budget. */
static json_t *hash_file (const char *arg, const char *path, int64_t *budget)
{
    struct stat sb;
    struct sha256_ctx c;
    char sha[65], tbuf[40], how[128];
    int64_t spent = 0;
    size_t bufsz = part_bytes;
    char *buf;
    int fd, rc;

    char *real = realpath (path, NULL);
    if (!real)
        return file_error (arg, path, strerror (errno));
    fd = open (real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    free (real);
    if (fd < 0)
        return file_error (arg, path, strerror (errno));
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode)) {
        close (fd);
        return file_error (arg, path, "not a regular file: not hashed");
    }
    int64_t cost =
      sb.st_size <= provenance_full_hash_max ? sb.st_size : 2 * (int64_t)part_bytes;
    if (cost > *budget) {
        close (fd);
        snprintf (how, sizeof (how),
                  "not hashed: the attempt's budget of %lld bytes is spent",
                  (long long)provenance_budget_bytes);
        return file_error (arg, path, how);
    }
    if (!(buf = malloc (bufsz))) {
        close (fd);
        return NULL;
    }
    int64_t mtime_ms = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
    sha256_init (&c);
    if (sb.st_size <= provenance_full_hash_max) {
        rc = hash_range (fd, &c, 0, (size_t)sb.st_size, buf, bufsz, &spent);
        snprintf (how, sizeof (how), "sha256");
    }
    else {
        /* "size mtime_ns\n" + first MiB + last MiB */
        char head[64];
        int hn =
          snprintf (head, sizeof (head), "%lld %lld.%09ld\n", (long long)sb.st_size,
                    (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
        sha256_update (&c, head, hn);
        rc = hash_range (fd, &c, 0, part_bytes, buf, bufsz, &spent);
        if (rc == 0)
            rc = hash_range (fd, &c, sb.st_size - (off_t)part_bytes, part_bytes, buf,
                             bufsz, &spent);
        snprintf (how, sizeof (how),
                  "sha256 of size, mtime, first and last MiB (file larger "
                  "than %lld bytes)",
                  (long long)provenance_full_hash_max);
    }
    int e = errno;
    free (buf);
    close (fd);
    *budget -= spent;
    if (rc < 0)
        return file_error (arg, path, strerror (e));
    sha256_final_hex (&c, sha);
    return json_pack ("{s:s s:s s:I s:s s:s s:s}", "arg", arg, "path", path, "bytes",
                      (json_int_t)sb.st_size, "mtime",
                      dt_format_time (mtime_ms, tbuf, sizeof (tbuf)), "sha256", sha,
                      "hash", how);
}

json_t *provenance_file (const char *arg, const char *path)
{
    int64_t budget = provenance_budget_bytes;
    return hash_file (arg, path, &budget);
}

/* The files of a request: {trainer, script?, files, hashing} (new). */
static json_t *hash_command (const struct userfs_id *id, const json_t *cmd,
                             const char *workdir, const char *path_env)
{
    char path[PATH_MAX];
    json_t *out = json_object (), *files = json_array ();
    size_t n = json_array_size (cmd), script_at = 0;
    int64_t budget = provenance_budget_bytes;

    if (!out || !files) {
        json_decref (out);
        json_decref (files);
        return NULL;
    }
    /* The trainer: command[0] as the agent's execvp finds it. */
    if (n > 0) {
        const char *arg0 = json_string_value (json_array_get (cmd, 0));
        if (resolve_command (arg0, workdir, path_env, path, sizeof (path)))
            json_object_set_new (out, "trainer", hash_file (arg0, path, &budget));
        else
            json_object_set_new (
              out, "trainer",
              json_pack ("{s:s s:s}", "arg", arg0, "error", "not found in PATH/workdir"));
        /* An interpreter's script: its first non-option argument, unless the
         * program is inline (-c) or a module (-m). */
        if (is_interpreter (arg0)) {
            for (size_t i = 1; i < n; i++) {
                const char *a = json_string_value (json_array_get (cmd, i));
                if (!strcmp (a, "-c") || !strcmp (a, "-m"))
                    break;
                if (a[0] == '-')
                    continue;
                if (resolve (a, workdir, path, sizeof (path)) && is_file (path)) {
                    json_object_set_new (out, "script", hash_file (a, path, &budget));
                    script_at = i;
                }
                break;
            }
        }
    }
    /* Data (and other) files named by the arguments, or by --opt=FILE: a
     * name that is not a regular file is recorded with the refusal. */
    for (size_t i = 1; i < n && (int)json_array_size (files) < files_max; i++) {
        const char *a = json_string_value (json_array_get (cmd, i));
        const char *eq = strchr (a, '=');
        struct stat sb;
        if (i == script_at || !*a)
            continue;
        if (a[0] == '-' && eq)
            a = eq + 1;
        if (!*a || a[0] == '-')
            continue;
        if (resolve (a, workdir, path, sizeof (path)) && stat (path, &sb) == 0 &&
            !S_ISDIR (sb.st_mode)) {
            json_t *f = hash_file (a, path, &budget);
            if (f)
                json_array_append_new (files, f);
        }
    }
    json_object_set_new (out, "files", files);
    json_object_set_new (out, "hashing",
                         json_pack ("{s:s s:i s:I s:I}", "state", "done", "as_uid",
                                    (int)id->uid, "bytes_read",
                                    (json_int_t)(provenance_budget_bytes - budget),
                                    "budget_bytes", (json_int_t)provenance_budget_bytes));
    return out;
}

/* --- the worker thread ----------------------------------------------------------- */

/* One attempt's hashing: queued by the event loop, done by the worker,
 * picked up by provenance_tick. */
struct request {
    struct request *next;
    int64_t job_id;
    int attempt;
    uid_t uid;
    gid_t gid;
    json_t *cmd;              /* owned: a deep copy */
    char *workdir, *path_env; /* owned, may be NULL */
    json_t *result;           /* owned, set by the worker */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool started, stop;
    struct request *todo, *todo_tail, *done;
} worker = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void request_free (struct request *r)
{
    if (r) {
        json_decref (r->cmd);
        json_decref (r->result);
        free (r->workdir);
        free (r->path_env);
        free (r);
    }
}

static void *worker_main (void *arg)
{
    (void)arg;
    pthread_mutex_lock (&worker.lock);
    for (;;) {
        while (!worker.todo && !worker.stop)
            pthread_cond_wait (&worker.cond, &worker.lock);
        if (worker.stop)
            break;
        struct request *r = worker.todo;
        worker.todo = r->next;
        if (!worker.todo)
            worker.todo_tail = NULL;
        pthread_mutex_unlock (&worker.lock);

        struct userfs_id id;
        struct userfs_saved sv;
        dt_error_t err;
        userfs_id_init (&id, r->uid, r->gid);
        if (userfs_enter (&id, &sv, &err) < 0)
            r->result = json_pack ("{s:{s:s s:s}}", "hashing", "state", "refused",
                                   "error", err.text);
        else {
            r->result = hash_command (&id, r->cmd, r->workdir, r->path_env);
            userfs_leave (&sv);
        }

        pthread_mutex_lock (&worker.lock);
        r->next = worker.done;
        worker.done = r;
    }
    pthread_mutex_unlock (&worker.lock);
    return NULL;
}

/* Queue the hashing of an attempt's files (steals r).  On failure (no
 * thread), the files are recorded as not hashed. */
static int worker_queue (struct request *r)
{
    pthread_mutex_lock (&worker.lock);
    if (!worker.started) {
        sigset_t all, old;
        /* The worker takes no signals: the event loop's signalfd has them. */
        sigfillset (&all);
        pthread_sigmask (SIG_SETMASK, &all, &old);
        int e = pthread_create (&worker.thread, NULL, worker_main, NULL);
        pthread_sigmask (SIG_SETMASK, &old, NULL);
        if (e != 0) {
            pthread_mutex_unlock (&worker.lock);
            request_free (r);
            errno = e;
            return -1;
        }
        worker.started = true;
    }
    if (worker.todo_tail)
        worker.todo_tail->next = r;
    else
        worker.todo = r;
    worker.todo_tail = r;
    pthread_cond_signal (&worker.cond);
    pthread_mutex_unlock (&worker.lock);
    return 0;
}

void provenance_tick (struct jobs *jobs)
{
    struct request *done;

    pthread_mutex_lock (&worker.lock);
    done = worker.done;
    worker.done = NULL;
    pthread_mutex_unlock (&worker.lock);
    while (done) {
        struct request *r = done;
        done = r->next;
        struct job *job = jobs_find (jobs, r->job_id);
        /* Still the job's attempt: its row is stored at its next state
         * change (and copied into the manifests it commits). */
        if (job && job->att && job->att->row.attempt == r->attempt &&
            json_is_object (job->att->row.provenance) && json_is_object (r->result))
            json_object_update (job->att->row.provenance, r->result);
        request_free (r);
    }
}

void provenance_shutdown (void)
{
    pthread_mutex_lock (&worker.lock);
    bool started = worker.started;
    worker.stop = true;
    pthread_cond_signal (&worker.cond);
    pthread_mutex_unlock (&worker.lock);
    if (started)
        pthread_join (worker.thread, NULL);
    worker.started = false;
    worker.stop = false;
    for (struct request **l = &worker.todo; *l;) {
        struct request *r = *l;
        *l = r->next;
        request_free (r);
    }
    worker.todo_tail = NULL;
    for (struct request **l = &worker.done; *l;) {
        struct request *r = *l;
        *l = r->next;
        request_free (r);
    }
}

static const char *spec_str (const json_t *spec, const char *sec, const char *key)
{
    const json_t *o = sec ? json_object_get (spec, sec) : spec;
    return json_string_value (json_object_get (o, key));
}

/* What dtagent sets for every rank on top of the spec's env (agent/ranks.c,
 * child_exec); values that differ per rank or node are described. */
static json_t *agent_env (const struct job *job, const struct attempt *att)
{
    const json_t *spec = job->row.spec;
    const json_t *env = json_object_get (spec, "env");
    char buf[1200];
    json_t *o = json_object ();

    json_object_set_new (o, "RANK", json_string ("per rank: 0..WORLD_SIZE-1"));
    json_object_set_new (o, "LOCAL_RANK",
                         json_string ("per rank: 0..LOCAL_WORLD_SIZE-1"));
    json_object_set_new (o, "GROUP_RANK", json_string ("per node: its node rank"));
    json_object_set_new (o, "ROLE_RANK", json_string ("per rank: = RANK"));
    snprintf (buf, sizeof (buf), "%d", att->row.world_size);
    json_object_set_new (o, "WORLD_SIZE", json_string (buf));
    json_object_set_new (o, "ROLE_WORLD_SIZE", json_string (buf));
    snprintf (buf, sizeof (buf), "%d", att->row.ranks_per_node);
    json_object_set_new (o, "LOCAL_WORLD_SIZE", json_string (buf));
    snprintf (buf, sizeof (buf), "%d", att->row.num_nodes);
    json_object_set_new (o, "GROUP_WORLD_SIZE", json_string (buf));
    json_object_set_new (o, "ROLE_NAME", json_string ("default"));
    json_object_set_new (o, "MASTER_ADDR", json_string (att->row.master_addr));
    snprintf (buf, sizeof (buf), "%d", att->row.master_port);
    json_object_set_new (o, "MASTER_PORT", json_string (buf));
    snprintf (buf, sizeof (buf), "%d", job->row.restarts);
    json_object_set_new (o, "TORCHELASTIC_RESTART_COUNT", json_string (buf));
    snprintf (buf, sizeof (buf), "%lld",
              (long long)json_integer_value (
                json_object_get (json_object_get (spec, "restart"), "max_restarts")));
    json_object_set_new (o, "TORCHELASTIC_MAX_RESTARTS", json_string (buf));
    snprintf (buf, sizeof (buf), "dt-%lld-a%d", (long long)job->row.id, att->row.attempt);
    json_object_set_new (o, "TORCHELASTIC_RUN_ID", json_string (buf));
    snprintf (buf, sizeof (buf), "%lld", (long long)job->row.id);
    json_object_set_new (o, "DT_JOB", json_string (buf));
    snprintf (buf, sizeof (buf), "%d", att->row.attempt);
    json_object_set_new (o, "DT_ATTEMPT", json_string (buf));
    snprintf (buf, sizeof (buf), "%s/%lld", spec_str (spec, "checkpoint", "dir") ?: "",
              (long long)job->row.id);
    json_object_set_new (o, "DT_CHECKPOINT_DIR", json_string (buf));
    snprintf (buf, sizeof (buf), "%lld",
              (long long)(att->row.resume_step >= 0 ? att->row.resume_step : 0));
    json_object_set_new (o, "DT_RESUME_STEP", json_string (buf));
    if (att->row.resume_step >= 0)
        json_object_set_new (o, "DT_RESUME_DIR", json_string (att->row.resume_dir));
    json_object_set_new (o, "DT_AGENT_SOCKET",
                         json_string ("per node: the agent's socket"));
    json_object_set_new (o, "DT_AGENT_SHM",
                         json_string ("per rank: its shared-memory file"));
    json_object_set_new (o, "DT_RUN_DIR",
                         json_string ("per node: the agent's run directory"));
    if (!json_object_get (env, "OMP_NUM_THREADS"))
        json_object_set_new (o, "OMP_NUM_THREADS", json_string ("1"));
    if (!json_object_get (env, "OPENBLAS_NUM_THREADS"))
        json_object_set_new (o, "OPENBLAS_NUM_THREADS", json_string ("1"));
    return o;
}

json_t *provenance_attempt_new (const struct job *job, const struct attempt *att,
                                const char *launcher)
{
    const json_t *spec = job->row.spec;
    const json_t *cmd = json_object_get (spec, "command");
    const char *workdir = spec_str (spec, NULL, "workdir");
    const char *path_env =
      json_string_value (json_object_get (json_object_get (spec, "env"), "PATH"));
    char sha[65];
    json_t *p;

    char *text = json_dumps (spec, JSON_COMPACT | JSON_SORT_KEYS);
    sha256_hex (text ? text : "", text ? strlen (text) : 0, sha);
    free (text);
    p = json_pack (
      "{s:s s:s s:s s:O s:s s:O s:s? s:O s:o s:o s:[] s:{s:s}}", "dtctl_version",
      PACKAGE_VERSION, "source_revision", DT_GIT_REV, "version", dt_version_string (),
      "spec", spec, "spec_sha256", sha, "command", cmd, "workdir", workdir, "env",
      json_object_get (spec, "env"), "env_set_by_agent", agent_env (job, att), "machine",
      json_pack ("{s:s}", "launcher", launcher ? launcher : ""), "files", "hashing",
      "state", "pending");
    if (!p)
        return NULL;
    if (att->row.resume_step >= 0)
        json_object_set_new (p, "resumed_from",
                             json_pack ("{s:I s:s s:s}", "step",
                                        (json_int_t)att->row.resume_step,
                                        "manifest_sha256", att->row.resume_sha256, "dir",
                                        att->row.resume_dir));
    else
        json_object_set_new (p, "resumed_from", json_null ());

    /* The files named in the command are hashed off the event loop, as
     * the job's user (the worker thread above). */
    struct request *r = calloc (1, sizeof (*r));
    if (!path_env)
        path_env = getenv ("PATH");
    if (r) {
        r->job_id = job->row.id;
        r->attempt = att->row.attempt;
        r->uid = job->row.uid;
        r->gid = job->row.gid;
        r->cmd = json_deep_copy (cmd);
        r->workdir = workdir ? strdup (workdir) : NULL;
        r->path_env = path_env ? strdup (path_env) : NULL;
    }
    int qrc = -1;
    if (r && r->cmd && (!workdir || r->workdir) && (!path_env || r->path_env))
        qrc = worker_queue (r); /* steals r */
    else {
        request_free (r);
        errno = ENOMEM;
    }
    if (qrc < 0)
        json_object_set_new (
          p, "hashing",
          json_pack ("{s:s s:s}", "state", "refused", "error", strerror (errno)));
    return p;
}

void provenance_set_machine (struct attempt *att)
{
    json_t *nodes = json_array ();
    const char *slurm_version = NULL;

    if (!att->row.provenance || !nodes) {
        json_decref (nodes);
        return;
    }
    for (int i = 0; i < att->nagents; i++) {
        const struct agent *ag = &att->agents[i];
        json_t *o = json_pack ("{s:s s:i s:b s:s}", "node", ag->node, "node_rank",
                               ag->node_rank, "spare", ag->spare, "addr", ag->addr);
        if (!o)
            continue;
        /* Everything the agent reported: cpu_model, cores, mem_mb, gpus,
         * gpu driver/CUDA/NCCL versions where present. */
        if (json_is_object (ag->hostinfo)) {
            json_object_update_missing (o, ag->hostinfo);
            const char *sv =
              json_string_value (json_object_get (ag->hostinfo, "slurm_version"));
            if (sv && *sv && !slurm_version)
                slurm_version = sv;
        }
        json_array_append_new (nodes, o);
    }
    json_t *m = json_object_get (att->row.provenance, "machine");
    const char *launcher = json_string_value (json_object_get (m, "launcher"));
    json_t *machine = json_pack ("{s:s s:s? s:I s:s s:o}", "launcher",
                                 launcher ? launcher : "", "slurm_version", slurm_version,
                                 "slurm_job_id", (json_int_t)att->row.slurm_job_id,
                                 "nodelist", att->row.nodelist, "nodes", nodes);
    if (machine)
        json_object_set_new (att->row.provenance, "machine", machine);
    json_object_set_new (att->row.provenance, "env_set_by_agent",
                         agent_env (att->job, att));
}
