/* ranks.c: the trainer processes of one node (see ranks.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/childexec.h"
#include "common/dtime.h"
#include "common/log.h"
#include "client/dtclient.h"
#include "ranks.h"

struct ranks {
    const struct layout *l; /* borrowed from the agent */
    char *rundir;
    char *sock;
    int n;
    struct rank *v;
    bool started;
};

static char *xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static char *xasprintf (const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start (ap, fmt);
    if (vasprintf (&s, fmt, ap) < 0)
        s = NULL;
    va_end (ap);
    return s;
}

static volatile struct dtshm_page *page_create (const char *path, int rank,
                                                dt_error_t *err)
{
    /* A fresh file in the agent's private run directory: never an existing
     * one, never through a symbolic link. */
    int fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        errnoprintf (err, errno, "%s: %s", path, strerror (errno));
        return NULL;
    }
    if (ftruncate (fd, DTSHM_SIZE) < 0) {
        errnoprintf (err, errno, "%s: ftruncate: %s", path, strerror (errno));
        close (fd);
        return NULL;
    }
    void *p = mmap (NULL, DTSHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close (fd);
    if (p == MAP_FAILED) {
        errnoprintf (err, errno, "%s: mmap: %s", path, strerror (errno));
        return NULL;
    }
    struct dtshm_page *pg = p;
    memset (pg, 0, DTSHM_SIZE);
    pg->version = DTPROTO_VERSION;
    pg->rank = rank;
    /* The magic last: a client that maps the page sees it complete. */
    __atomic_store_n (&pg->magic, DTSHM_MAGIC, __ATOMIC_RELEASE);
    return pg;
}

ranks_t *ranks_create (const struct layout *l, const char *rundir, const char *sock,
                       dt_error_t *err)
{
    ranks_t *r = calloc (1, sizeof (*r));
    if (!r) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    r->l = l;
    r->n = l->spare ? 0 : l->ranks_per_node;
    if (!(r->rundir = strdup (rundir)) || !(r->sock = strdup (sock)) ||
        !(r->v = calloc ((size_t)r->n + 1, sizeof (struct rank)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }
    for (int i = 0; i < r->n; i++) {
        struct rank *rk = &r->v[i];
        rk->local_rank = i;
        rk->rank = l->node_rank * l->ranks_per_node + i;
        rk->exit_code = -1;
        rk->log_path = xasprintf ("%s/rank-%d.log", rundir, rk->rank);
        rk->err_path = xasprintf ("%s/rank-%d.err", rundir, rk->rank);
        rk->shm_path = xasprintf ("%s/rank-%d.shm", rundir, rk->rank);
        if (!rk->log_path || !rk->err_path || !rk->shm_path) {
            errnoprintf (err, ENOMEM, "out of memory");
            goto error;
        }
        if (!(rk->page = page_create (rk->shm_path, rk->rank, err)))
            goto error;
    }
    return r;
error:
    ranks_destroy (r);
    return NULL;
}

void ranks_destroy (ranks_t *r)
{
    if (!r)
        return;
    int saved = errno;
    for (int i = 0; r->v && i < r->n; i++) {
        struct rank *rk = &r->v[i];
        if (rk->state == RANK_RUNNING) {
            kill (-rk->pid, SIGKILL);
            kill (rk->pid, SIGKILL);
            waitpid (rk->pid, NULL, 0);
        }
        if (rk->page)
            munmap ((void *)rk->page, DTSHM_SIZE);
        if (rk->shm_path)
            unlink (rk->shm_path);
        free (rk->log_path);
        free (rk->err_path);
        free (rk->shm_path);
    }
    free (r->v);
    free (r->rundir);
    free (r->sock);
    free (r);
    errno = saved;
}

int ranks_count (const ranks_t *r)
{
    return r->n;
}

struct rank *ranks_at (ranks_t *r, int i)
{
    return i >= 0 && i < r->n ? &r->v[i] : NULL;
}

struct rank *ranks_find (ranks_t *r, int rank)
{
    for (int i = 0; i < r->n; i++)
        if (r->v[i].rank == rank)
            return &r->v[i];
    return NULL;
}

int ranks_running (const ranks_t *r)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += r->v[i].state == RANK_RUNNING;
    return n;
}

bool ranks_started (const ranks_t *r)
{
    return r->started;
}

bool ranks_all_succeeded (const ranks_t *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->v[i].state != RANK_EXITED || r->v[i].exit_code != 0)
            return false;
    return true;
}

/* ---- starting ------------------------------------------------------------ */

static void setenv_int (const char *k, long long v)
{
    char b[32];
    snprintf (b, sizeof (b), "%lld", v);
    setenv (k, b, 1);
}

/* In the child, between fork and exec.  The agent is single-threaded, so
 * setenv (which may malloc) is safe here. */
static void child_exec (ranks_t *r, struct rank *rk) __attribute__ ((noreturn));
static void child_exec (ranks_t *r, struct rank *rk)
{
    const struct layout *l = r->l;
    sigset_t all;

    /* Own session and process group: the agent kills the rank with its
     * helpers, and the trainer has no controlling terminal (a job started
     * from a terminal, as the local launcher's are when dtctld runs in the
     * foreground, cannot read it or push keystrokes into it). */
    if (setsid () < 0) {
        /* the agent made it a group leader first (spawn): stay in that
         * group and give up the terminal alone */
        setpgid (0, 0);
        dt_child_drop_tty ();
    }
    /* The agent blocks these for its signalfd; the trainer must not inherit
     * that mask. */
    sigfillset (&all);
    sigprocmask (SIG_UNBLOCK, &all, NULL);
    signal (SIGPIPE, SIG_DFL);
    /* If the agent dies (even by SIGKILL) the direct child dies with it;
     * grandchildren notice the socket closing (libdtclient) instead. */
    prctl (PR_SET_PDEATHSIG, SIGKILL);

    int in = open ("/dev/null", O_RDONLY);
    /* New files in the agent's private run directory (rundir.h): a
     * failure's evidence (the stderr tail) is this rank's own, and nothing
     * planted there (a symbolic link, an old file) is ever written. */
    int out =
      open (rk->log_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND, 0600);
    int er =
      open (rk->err_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND, 0600);
    if (in < 0 || out < 0 || er < 0)
        _exit (126);
    dup2 (in, 0);
    dup2 (out, 1);
    dup2 (er, 2);
    /* Nothing else of the agent's goes to the trainer: not these three,
     * not libcurl's connection to the controller (which a trainer outliving
     * a killed agent would otherwise hold open), not whatever the agent
     * inherited from its own launcher. */
    dt_child_close_from (3);

    if (l->workdir && chdir (l->workdir) < 0) {
        fprintf (stderr, "dtagent: chdir %s: %s\n", l->workdir, strerror (errno));
        _exit (126);
    }
    /* The job's env first, then ours on top: the launcher variables must
     * be right even if the job's env names them. */
    for (char **e = l->env; e && *e; e++)
        putenv (*e);
    if (!getenv ("OMP_NUM_THREADS"))
        setenv ("OMP_NUM_THREADS", "1", 1);
    if (!getenv ("OPENBLAS_NUM_THREADS"))
        setenv ("OPENBLAS_NUM_THREADS", "1", 1);
    setenv_int ("RANK", rk->rank);
    setenv_int ("LOCAL_RANK", rk->local_rank);
    setenv_int ("WORLD_SIZE", l->world_size);
    setenv_int ("LOCAL_WORLD_SIZE", l->ranks_per_node);
    setenv_int ("GROUP_RANK", l->node_rank);
    setenv_int ("GROUP_WORLD_SIZE", l->num_nodes);
    setenv_int ("ROLE_RANK", rk->rank);
    setenv_int ("ROLE_WORLD_SIZE", l->world_size);
    setenv ("ROLE_NAME", "default", 1);
    setenv ("MASTER_ADDR", l->master_addr, 1);
    setenv_int ("MASTER_PORT", l->master_port);
    setenv_int ("TORCHELASTIC_RESTART_COUNT", l->restart_count);
    setenv_int ("TORCHELASTIC_MAX_RESTARTS", l->max_restarts);
    setenv ("TORCHELASTIC_RUN_ID", l->run_id, 1);
    setenv ("DT_AGENT_SOCKET", r->sock, 1);
    setenv ("DT_AGENT_SHM", rk->shm_path, 1);
    setenv_int ("DT_JOB", l->job);
    setenv_int ("DT_ATTEMPT", l->attempt);
    setenv ("DT_RUN_DIR", r->rundir, 1);
    if (l->checkpoint_dir)
        setenv ("DT_CHECKPOINT_DIR", l->checkpoint_dir, 1);
    setenv_int ("DT_RESUME_STEP", l->resume_step >= 0 ? l->resume_step : 0);
    setenv_int ("DT_CHECKPOINT_EVERY", l->checkpoint_every_steps);
    /* The job's integrity keys (when the controller sent them). */
    if (l->integrity_every_steps >= 0)
        setenv_int ("DT_INTEGRITY_EVERY", l->integrity_every_steps);
    if (l->integrity_spike_window >= 0)
        setenv_int ("DT_INTEGRITY_SPIKE_WINDOW", l->integrity_spike_window);
    if (l->integrity_spike_k >= 0) {
        char k[32];
        snprintf (k, sizeof (k), "%g", l->integrity_spike_k);
        setenv ("DT_INTEGRITY_SPIKE_K", k, 1);
    }
    if (l->skip_steps && *l->skip_steps)
        setenv ("DT_SKIP_STEPS", l->skip_steps, 1);
    if (l->resume_dir)
        setenv ("DT_RESUME_DIR", l->resume_dir, 1);
    else
        unsetenv ("DT_RESUME_DIR");
    if (rk->joining)
        setenv ("DT_REFORM_JOIN", "1", 1);
    else
        unsetenv ("DT_REFORM_JOIN");
    if (rk->standby)
        setenv ("DT_STANDBY", "1", 1);
    else
        unsetenv ("DT_STANDBY");
    /* The attempt's secret stays with the agent. */
    unsetenv ("DT_TOKEN");

    execvp (l->command[0], l->command);
    fprintf (stderr, "dtagent: cannot run %s: %s\n", l->command[0], strerror (errno));
    _exit (127);
}

/* Fork and exec one rank in a process group of its own. */
static int spawn (ranks_t *r, struct rank *rk, dt_error_t *err)
{
    pid_t pid = fork ();
    if (pid < 0)
        return errnoprintf (err, errno, "fork for rank %d: %s", rk->rank,
                            strerror (errno));
    if (pid == 0)
        child_exec (r, rk);
    /* Also in the parent, so a kill(-pid) right after fork cannot miss. */
    setpgid (pid, pid);
    rk->pid = pid;
    rk->state = RANK_RUNNING;
    rk->progress_ms = dt_mono_ms ();
    return 0;
}

int ranks_start (ranks_t *r, dt_error_t *err)
{
    r->started = true;
    for (int i = 0; i < r->n; i++) {
        struct rank *rk = &r->v[i];
        if (spawn (r, rk, err) < 0)
            return -1;
        dt_log (LOG_INFO, "rank %d (local %d) started: pid %d, log %s", rk->rank,
                rk->local_rank, (int)rk->pid, rk->log_path);
    }
    return 0;
}

void ranks_set_layout (ranks_t *r, const struct layout *l)
{
    r->l = l;
}

int ranks_relaunch (ranks_t *r, struct rank *rk, dt_error_t *err)
{
    char *lp = xasprintf ("%s/rank-%d.a%d.log", r->rundir, rk->rank, r->l->attempt);
    char *ep = xasprintf ("%s/rank-%d.a%d.err", r->rundir, rk->rank, r->l->attempt);
    if (!lp || !ep) {
        free (lp), free (ep);
        return errnoprintf (err, ENOMEM, "out of memory");
    }
    free (rk->log_path), free (rk->err_path);
    rk->log_path = lp, rk->err_path = ep;
    rk->client = rk->killed = rk->kill_now = rk->reform = false;
    rk->reform_wait_ms = 0;
    rk->client_pid = 0;
    rk->exit_code = -1;
    rk->signal = 0;
    rk->kill_at_ms = 0;
    rk->joining = true;
    if (spawn (r, rk, err) < 0)
        return -1;
    dt_log (LOG_INFO, "rank %d (local %d) restarted to join its re-formed group: pid %d",
            rk->rank, rk->local_rank, (int)rk->pid);
    return 0;
}

int ranks_standby_start (ranks_t *r, const struct layout *l, dt_error_t *err)
{
    int n = l->ranks_per_node;
    struct rank *v;

    if (r->n != 0 || n < 1)
        return errnoprintf (err, EINVAL, "standby processes: not a spare's ranks");
    if (!(v = calloc ((size_t)n + 1, sizeof (*v))))
        return errnoprintf (err, ENOMEM, "out of memory");
    free (r->v);
    r->v = v;
    for (int i = 0; i < n; i++) {
        struct rank *rk = &r->v[i];
        rk->local_rank = rk->rank = i;
        rk->standby = true;
        rk->exit_code = -1;
        rk->log_path = xasprintf ("%s/standby-%d.log", r->rundir, i);
        rk->err_path = xasprintf ("%s/standby-%d.err", r->rundir, i);
        rk->shm_path = xasprintf ("%s/standby-%d.shm", r->rundir, i);
        if (!rk->log_path || !rk->err_path || !rk->shm_path)
            return errnoprintf (err, ENOMEM, "out of memory");
        r->n = i + 1; /* (ranks_destroy frees what exists) */
        if (!(rk->page = page_create (rk->shm_path, i, err)))
            return -1;
    }
    r->started = true;
    for (int i = 0; i < n; i++) {
        struct rank *rk = &r->v[i];
        if (spawn (r, rk, err) < 0)
            return -1;
        dt_log (LOG_INFO, "standby process %d started: pid %d, log %s", i, (int)rk->pid,
                rk->log_path);
    }
    return 0;
}

int ranks_standby_ready (const ranks_t *r)
{
    int k = 0;
    for (int i = 0; i < r->n; i++)
        if (r->v[i].standby && r->v[i].state == RANK_RUNNING && r->v[i].reform)
            k++;
    return k;
}

int ranks_take_over (ranks_t *r, int node_rank)
{
    int rpn = r->l->ranks_per_node;
    if (node_rank < 0 || r->n != rpn || ranks_standby_ready (r) != rpn)
        return -1;
    for (int i = 0; i < r->n; i++) {
        struct rank *rk = &r->v[i];
        rk->rank = node_rank * rpn + rk->local_rank;
        /* Before the command (ranks_command), which the process reads
         * first: dtclient_assigned_rank then sees this rank. */
        __atomic_store_n (&rk->page->rank, rk->rank, __ATOMIC_RELEASE);
        rk->standby = false;
        rk->joining = true;
        rk->client = rk->reform = false; /* until it says hello as that rank */
        rk->client_pid = 0;
        rk->progress_ms = dt_mono_ms ();
        dt_log (LOG_INFO, "standby process %d (pid %d) takes over rank %d",
                rk->local_rank, (int)rk->pid, rk->rank);
    }
    return 0;
}

/* ---- watching ------------------------------------------------------------ */

void ranks_reap (ranks_t *r, ranks_exit_f cb, void *arg)
{
    int status;
    pid_t pid;
    while ((pid = waitpid (-1, &status, WNOHANG)) > 0) {
        struct rank *rk = NULL;
        for (int i = 0; i < r->n; i++)
            if (r->v[i].pid == pid && r->v[i].state == RANK_RUNNING)
                rk = &r->v[i];
        if (!rk)
            continue;
        rk->state = RANK_EXITED;
        rk->kill_at_ms = 0;
        if (WIFEXITED (status)) {
            rk->exit_code = WEXITSTATUS (status);
            rk->signal = 0;
        }
        else {
            rk->exit_code = -1;
            rk->signal = WIFSIGNALED (status) ? WTERMSIG (status) : 0;
        }
        /* Whatever the rank left in its group goes with it. */
        kill (-pid, SIGKILL);
        if (rk->page)
            dtshm_read_report (rk->page, &rk->last);
        dt_log (rk->exit_code == 0 ? LOG_INFO : LOG_WARNING,
                "rank %d (pid %d) exited: %s %d", rk->rank, (int)pid,
                rk->signal ? "signal" : "code", rk->signal ? rk->signal : rk->exit_code);
        if (cb)
            cb (rk, arg);
    }
}

void ranks_tick (ranks_t *r, int64_t now, int64_t hang_timeout_ms, ranks_hang_f hang_cb,
                 void *arg)
{
    for (int i = 0; i < r->n; i++) {
        struct rank *rk = &r->v[i];
        if (rk->state != RANK_RUNNING)
            continue;
        if (rk->kill_at_ms && now >= rk->kill_at_ms) {
            dt_log (LOG_WARNING, "rank %d did not exit after SIGTERM: SIGKILL", rk->rank);
            kill (-rk->pid, SIGKILL);
            kill (rk->pid, SIGKILL);
            rk->kill_at_ms = 0;
        }
        struct dtshm_report rep;
        if (rk->page && dtshm_read_report (rk->page, &rep) == 0) {
            if (rep.nreports != rk->last.nreports || rep.step != rk->last.step ||
                rep.busy != rk->last.busy || rep.waiting != rk->last.waiting)
                rk->progress_ms = now;
            rk->last = rep;
        }
        struct dtshm_dims dims;
        if (rk->page && dtshm_read_dims (rk->page, &dims) == 0)
            rk->dims = dims;
        if (!rk->client || rk->killed || rk->last.busy || hang_timeout_ms <= 0 ||
            rk->standby)
            continue;
        int64_t idle = now - rk->progress_ms;
        if (idle <= hang_timeout_ms)
            continue;
        /* In a synchronous job every rank stalls when one does; those
         * blocked in a collective are not the cause.  Only a process that
         * was stopped while in one is. */
        bool stopped = ranks_stopped (rk);
        if (rk->last.waiting && !stopped &&
            idle <= ranks_waiting_multiple * hang_timeout_ms)
            continue;
        rk->killed = true;
        if (hang_cb)
            hang_cb (rk, idle, stopped, arg);
    }
}

bool ranks_stopped (const struct rank *rk)
{
    char path[64], buf[512];
    pid_t pid = rk->client_pid ? rk->client_pid : rk->pid;
    if (pid <= 0 || rk->state != RANK_RUNNING)
        return false;
    snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and parentheses, the state
     * follows the last ')'. */
    const char *p = strrchr (buf, ')');
    return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

int ranks_hello (ranks_t *r, int rank, pid_t pid, dt_error_t *err)
{
    struct rank *rk = ranks_find (r, rank);
    if (!rk)
        return errnoprintf (err, EINVAL, "rank %d is not a rank of this node", rank);
    if (!rk->client) {
        rk->client = true;
        rk->progress_ms = dt_mono_ms ();
    }
    rk->client_pid = pid;
    dt_log (LOG_INFO, "rank %d: libdtclient connected (pid %d)", rank, (int)pid);
    return 0;
}

int ranks_command (ranks_t *r, int kind, int64_t step)
{
    int kept = 0;
    for (int i = 0; i < r->n; i++)
        if (r->v[i].state == RANK_RUNNING && r->v[i].page)
            kept += !dtshm_offer_cmd (r->v[i].page, kind, step);
    return kept;
}

void ranks_kill (ranks_t *r, struct rank *rk, int64_t grace_ms)
{
    if (rk->state != RANK_RUNNING)
        return;
    rk->killed = true;
    if (grace_ms <= 0) {
        kill (-rk->pid, SIGKILL);
        kill (rk->pid, SIGKILL);
        return;
    }
    kill (-rk->pid, SIGTERM);
    kill (-rk->pid, SIGCONT);
    int64_t at = dt_mono_ms () + grace_ms;
    if (!rk->kill_at_ms || at < rk->kill_at_ms)
        rk->kill_at_ms = at;
}

void ranks_kill_all (ranks_t *r, int64_t grace_ms)
{
    for (int i = 0; i < r->n; i++)
        ranks_kill (r, &r->v[i], grace_ms);
}

json_t *ranks_heartbeat_json (ranks_t *r)
{
    json_t *a = json_array ();
    for (int i = 0; a && i < r->n; i++) {
        struct rank *rk = &r->v[i];
        if (rk->standby) /* not a rank of the attempt (yet) */
            continue;
        json_t *o = json_pack ("{s:i, s:i, s:i, s:s, s:b, s:I, s:f, s:I, s:f, s:f, s:b}",
                               "rank", rk->rank, "local_rank", rk->local_rank, "pid",
                               (int)(rk->client_pid ? rk->client_pid : rk->pid), "state",
                               rk->state == RANK_RUNNING ? "running" : "exited", "client",
                               rk->client, "step", (json_int_t)rk->last.step, "loss",
                               rk->last.loss, "samples", (json_int_t)rk->last.samples,
                               "compute_ms", rk->last.compute_ms, "comm_ms",
                               rk->last.comm_ms, "busy", rk->last.busy != 0);
        /* What tells a hung rank from one blocked on it (the controller's
         * watchdog uses them too). */
        if (o && rk->client && rk->state == RANK_RUNNING) {
            json_object_set_new (o, "waiting", json_boolean (rk->last.waiting != 0));
            json_object_set_new (o, "stopped", json_boolean (ranks_stopped (rk)));
        }
        /* Per dimension (tp, pp, dp): bytes, comm_ms, exposed_ms. */
        if (o && rk->client && rk->dims.step > 0) {
            json_t *d = json_array ();
            for (int k = 0; d && k < DTSHM_NDIMS; k++) {
                json_array_append_new (d, json_real (rk->dims.bytes[k]));
                json_array_append_new (d, json_real (rk->dims.comm_ms[k]));
                json_array_append_new (d, json_real (rk->dims.exposed_ms[k]));
            }
            if (d)
                json_object_set_new (o, "dims", d);
        }
        if (o)
            json_array_append_new (a, o);
    }
    return a;
}

void ranks_stderr_tail (const struct rank *rk, char *buf, size_t len)
{
    enum { TAIL_LINES = 20 };
    buf[0] = '\0';
    if (len < 2)
        return;
    int fd = open (rk->err_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    size_t want = len - 1;
    off_t off = 0;
    if (fstat (fd, &st) == 0 && (size_t)st.st_size > want)
        off = st.st_size - (off_t)want;
    ssize_t n = pread (fd, buf, want, off);
    close (fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    /* Printable ASCII and newlines only: the text goes into JSON, which
     * must be valid UTF-8, and a cut multibyte character would not be. */
    for (ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f)
            buf[i] = '?';
    }
    /* Keep the last TAIL_LINES lines, starting at a line boundary. */
    char *p = buf + n;
    int lines = 0;
    if (p > buf && p[-1] == '\n')
        p--;
    while (p > buf) {
        if (p[-1] == '\n' && ++lines == TAIL_LINES)
            break;
        p--;
    }
    if (p == buf && off > 0) {
        char *nl = strchr (buf, '\n');
        if (nl)
            p = nl + 1;
    }
    memmove (buf, p, strlen (p) + 1);
}
