/* provenance.c: what is needed to reproduce an attempt (see provenance.h). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/version.h"
#include "orchestrator/jobs.h"
#include "orchestrator/provenance.h"
#include "orchestrator/sha256.h"

/* 256 MiB hashes in about a second: the most a new attempt may cost. */
const int64_t provenance_full_hash_max = (int64_t)256 << 20;
/* What a larger file is hashed by, besides its size and mtime. */
static const size_t part_bytes = 1 << 20;
/* Arguments that name files: at most this many are hashed. */
static const int files_max = 32;

/* Interpreters whose first non-option argument is the trainer's script. */
static const char *const interpreters[] = {
    "sh", "bash", "dash", "zsh", "ksh", "python", "python2", "python3", "perl", "ruby",
    "Rscript", "julia", "node", "lua", "torchrun", "accelerate", "deepspeed", NULL,
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

static bool is_file (const char *path)
{
    struct stat sb;
    return stat (path, &sb) == 0 && S_ISREG (sb.st_mode);
}

/* command[0] as execvp would find it: a path (relative to workdir) or the
 * first executable file of PATH (the job's PATH if its env sets one). */
static bool resolve_command (const char *arg0, const char *workdir, const char *path_env,
                             char *out, size_t len)
{
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
        if (resolve (dir, workdir, out, len) && (l = strlen (out)) < len
            && snprintf (out + l, len - l, "/%s", arg0) < (int)(len - l) && is_file (out)
            && access (out, X_OK) == 0)
            return true;
        p += n;
        if (*p == ':')
            p++;
    }
    return false;
}

json_t *provenance_file (const char *arg, const char *path)
{
    struct stat sb;
    char sha[65], tbuf[40], how[128];
    int fd = open (path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || fstat (fd, &sb) < 0) {
        int e = errno;
        if (fd >= 0)
            close (fd);
        return json_pack ("{s:s s:s s:s}", "arg", arg, "path", path, "error", strerror (e));
    }
    int64_t mtime_ms = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
    if (sb.st_size <= provenance_full_hash_max) {
        void *p = sb.st_size ? mmap (NULL, sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        if (sb.st_size && p == MAP_FAILED) {
            int e = errno;
            close (fd);
            return json_pack ("{s:s s:s s:s}", "arg", arg, "path", path, "error", strerror (e));
        }
        sha256_hex (p ? p : "", sb.st_size, sha);
        if (p)
            munmap (p, sb.st_size);
        snprintf (how, sizeof (how), "sha256");
    } else {
        /* "size mtime_ns\n" + first MiB + last MiB */
        char head[64];
        int hn = snprintf (head, sizeof (head), "%lld %lld.%09ld\n", (long long)sb.st_size,
                           (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
        char *buf = malloc (hn + 2 * part_bytes);
        if (!buf) {
            close (fd);
            return NULL;
        }
        memcpy (buf, head, hn);
        ssize_t a = pread (fd, buf + hn, part_bytes, 0);
        ssize_t b = pread (fd, buf + hn + (a > 0 ? a : 0), part_bytes,
                           sb.st_size - (off_t)part_bytes);
        if (a < 0 || b < 0) {
            int e = errno;
            free (buf);
            close (fd);
            return json_pack ("{s:s s:s s:s}", "arg", arg, "path", path, "error", strerror (e));
        }
        sha256_hex (buf, hn + a + b, sha);
        free (buf);
        snprintf (how, sizeof (how), "sha256 of size, mtime, first and last MiB (file larger "
                  "than %lld bytes)", (long long)provenance_full_hash_max);
    }
    close (fd);
    return json_pack ("{s:s s:s s:I s:s s:s s:s}", "arg", arg, "path", path, "bytes",
                      (json_int_t)sb.st_size, "mtime",
                      dt_format_time (mtime_ms, tbuf, sizeof (tbuf)), "sha256", sha, "hash",
                      how);
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
    json_object_set_new (o, "LOCAL_RANK", json_string ("per rank: 0..LOCAL_WORLD_SIZE-1"));
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
    snprintf (buf, sizeof (buf), "%lld", (long long)json_integer_value (
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
    json_object_set_new (o, "DT_AGENT_SOCKET", json_string ("per node: the agent's socket"));
    json_object_set_new (o, "DT_AGENT_SHM", json_string ("per rank: its shared-memory file"));
    json_object_set_new (o, "DT_RUN_DIR", json_string ("per node: the agent's run directory"));
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
    const char *path_env = json_string_value (json_object_get (json_object_get (spec, "env"),
                                                               "PATH"));
    char path[PATH_MAX], sha[65];
    json_t *p, *files = json_array ();
    size_t n = json_array_size (cmd);
    size_t script_at = 0;

    char *text = json_dumps (spec, JSON_COMPACT | JSON_SORT_KEYS);
    sha256_hex (text ? text : "", text ? strlen (text) : 0, sha);
    free (text);
    p = json_pack ("{s:s s:s s:s s:O s:s s:O s:s? s:O s:o s:o}",
                   "dtctl_version", PACKAGE_VERSION,
                   "source_revision", DT_GIT_REV,
                   "version", dt_version_string (),
                   "spec", spec,
                   "spec_sha256", sha,
                   "command", cmd,
                   "workdir", workdir,
                   "env", json_object_get (spec, "env"),
                   "env_set_by_agent", agent_env (job, att),
                   "machine", json_pack ("{s:s}", "launcher", launcher ? launcher : ""));
    if (!p || !files) {
        json_decref (p);
        json_decref (files);
        return NULL;
    }
    if (path_env == NULL)
        path_env = getenv ("PATH");
    /* The trainer: command[0] as the agent's execvp finds it. */
    if (n > 0) {
        const char *arg0 = json_string_value (json_array_get (cmd, 0));
        if (resolve_command (arg0, workdir, path_env, path, sizeof (path)))
            json_object_set_new (p, "trainer", provenance_file (arg0, path));
        else
            json_object_set_new (p, "trainer", json_pack ("{s:s s:s}", "arg", arg0, "error",
                                                          "not found in PATH/workdir"));
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
                    json_object_set_new (p, "script", provenance_file (a, path));
                    script_at = i;
                }
                break;
            }
        }
    }
    /* Data (and other) files named by the arguments, or by --opt=FILE. */
    for (size_t i = 1; i < n && (int)json_array_size (files) < files_max; i++) {
        const char *a = json_string_value (json_array_get (cmd, i));
        const char *eq = strchr (a, '=');
        if (i == script_at || !*a)
            continue;
        if (a[0] == '-' && eq)
            a = eq + 1;
        if (!*a || a[0] == '-')
            continue;
        if (resolve (a, workdir, path, sizeof (path)) && is_file (path)) {
            json_t *f = provenance_file (a, path);
            if (f)
                json_array_append_new (files, f);
        }
    }
    json_object_set_new (p, "files", files);
    if (att->row.resume_step >= 0)
        json_object_set_new (p, "resumed_from",
                             json_pack ("{s:I s:s s:s}", "step",
                                        (json_int_t)att->row.resume_step, "manifest_sha256",
                                        att->row.resume_sha256, "dir", att->row.resume_dir));
    else
        json_object_set_new (p, "resumed_from", json_null ());
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
            const char *sv = json_string_value (json_object_get (ag->hostinfo,
                                                                 "slurm_version"));
            if (sv && *sv && !slurm_version)
                slurm_version = sv;
        }
        json_array_append_new (nodes, o);
    }
    json_t *m = json_object_get (att->row.provenance, "machine");
    const char *launcher = json_string_value (json_object_get (m, "launcher"));
    json_t *machine = json_pack ("{s:s s:s? s:I s:s s:o}", "launcher", launcher ? launcher : "",
                                 "slurm_version", slurm_version, "slurm_job_id",
                                 (json_int_t)att->row.slurm_job_id, "nodelist",
                                 att->row.nodelist, "nodes", nodes);
    if (machine)
        json_object_set_new (att->row.provenance, "machine", machine);
    json_object_set_new (att->row.provenance, "env_set_by_agent", agent_env (att->job, att));
}
