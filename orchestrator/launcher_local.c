/* launcher_local.c: the "local" launcher: one dtagent process per node,
 * forked on this machine, with node names local1..localN.
 *
 * Each attempt's agents share one process group (the first agent's pid);
 * the handle is "pgid:<pgid>".  While dtctld is their parent it reaps them
 * and knows their exit codes; after a controller restart it only knows
 * whether the group still exists.
 */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/childexec.h"
#include "common/dtime.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "orchestrator/launcher.h"

/* After SIGTERM, the agents get this long before SIGKILL. */
static const int64_t kill_grace_ms = 5000;

struct lgroup {
    struct lgroup *next;
    pid_t pgid;
    pid_t *pids;
    int n, alive;
    int exit_code; /* first non-zero exit, else 0 */
    bool any_signal;
    int64_t term_ms; /* when SIGTERM was sent, 0 none */
    bool cancelled;
    char nodelist[256]; /* "local1,local3" */
};

struct local {
    char *url;
    char *agent;
    char *state_dir;
    int64_t max_nodes; /* LocalNodes: 0 unlimited */
    struct lgroup *groups;
};

/* Node numbers of the pretend cluster: local1, local2, ...  The k-th node
 * of an attempt is the k-th name not in the exclude list (a new
 * attempt never runs on a node that failed); LocalNodes bounds the list. */
static bool excluded (const char *const *exclude, int num)
{
    char name[32];
    snprintf (name, sizeof (name), "local%d", num);
    for (int i = 0; exclude && exclude[i]; i++)
        if (!strcmp (exclude[i], name))
            return true;
    return false;
}

/* Fill num[0..n) with the node numbers to use; -1 if the cluster is too small. */
static int pick_nodes (const struct local *l, const char *const *exclude, int n, int *num)
{
    int k = 0;
    for (int c = 1; k < n; c++) {
        if (l->max_nodes > 0 && c > l->max_nodes)
            return -1;
        if (!excluded (exclude, c))
            num[k++] = c;
    }
    return 0;
}

static void local_destroy (void *ctx);

static void *local_create (const struct launcher_conf *conf, dt_error_t *err)
{
    struct local *l = calloc (1, sizeof (*l));
    if (!l || !(l->url = strdup (conf->controller_url)) ||
        !(l->agent = strdup (conf->dtagent_path)) ||
        !(l->state_dir = strdup (conf->state_dir))) {
        if (l) {
            free (l->url);
            free (l->agent);
        }
        free (l);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (dt_conf_get_int (conf->conf, "LocalNodes", 0, 0, 100000, &l->max_nodes, err) <
        0) {
        local_destroy (l);
        return NULL;
    }
    return l;
}

static void local_destroy (void *ctx)
{
    struct local *l = ctx;
    if (l) {
        while (l->groups) {
            struct lgroup *g = l->groups->next;
            free (l->groups->pids);
            free (l->groups);
            l->groups = g;
        }
        free (l->url);
        free (l->agent);
        free (l->state_dir);
        free (l);
    }
}

/* "%n" in 'pattern' -> node name. */
static void expand_output (const char *pattern, const char *node, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'n') {
            o += snprintf (out + o, len - o, "%s", node);
            if (o >= len)
                o = len - 1;
            p++;
        }
        else
            out[o++] = *p;
    }
    out[o] = '\0';
}

static int mkdirs (const char *path, mode_t mode)
{
    char buf[4096];
    snprintf (buf, sizeof (buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir (buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* In the child: become the agent.  Never returns.  Everything on a path
 * the job's user can influence (the output file, the workdir, the agent's
 * directory in the user's own directory) is done after dropping to the
 * user's uid, so a symbolic link planted there gets only the user's
 * rights; the output file is opened without following one at all. */
static void exec_agent (struct local *l, const struct launcher_req *req, int k, int num,
                        pid_t pgid)
{
    char node[32], order[16], job[32], att[16], out[4096], sdir[4096];
    const char *base = req->user_dir && *req->user_dir ? req->user_dir : l->state_dir;

    setpgid (0, pgid);
    /* No controlling terminal for the job: with dtctld in the foreground
     * of an admin's terminal, a user's trainer could otherwise read it or
     * push keystrokes into the admin's shell (TIOCSTI).  The agents stay in
     * the group's process group (the launcher kills it whole). */
    dt_child_drop_tty ();
    umask (022); /* the job's usual umask, not dtctld's private 077 */
    /* Default signal dispositions and mask for the agent. */
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    signal (SIGPIPE, SIG_DFL);

    snprintf (node, sizeof (node), "local%d", num);
    snprintf (order, sizeof (order), "%d", k);
    snprintf (job, sizeof (job), "%lld", (long long)req->job_id);
    snprintf (att, sizeof (att), "%d", req->attempt);
    if (dt_pathf (sdir, sizeof (sdir), "%s/agents/job-%lld.%d/%s", base,
                  (long long)req->job_id, req->attempt, node) < 0) {
        fprintf (stderr, "dtagent (local launcher): agent directory path too long\n");
        _exit (126);
    }
    if (geteuid () == 0 && req->uid != 0) {
        if (setgroups (0, NULL) < 0 || setgid (req->gid) < 0 || setuid (req->uid) < 0) {
            fprintf (stderr, "dtagent (local launcher): cannot become uid %ld: %s\n",
                     (long)req->uid, strerror (errno));
            _exit (126);
        }
    }
    if (req->output) {
        expand_output (req->output, node, out, sizeof (out));
        int fd = open (out, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2 (fd, STDOUT_FILENO);
            dup2 (fd, STDERR_FILENO);
        }
        else
            fprintf (stderr, "dtagent (local launcher): %s: %s\n", out,
                     errno == ELOOP ? "a symbolic link: not used" : strerror (errno));
    }
    /* O_CLOEXEC: only the dup2'd copy goes on to the agent. */
    int nfd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nfd >= 0)
        dup2 (nfd, STDIN_FILENO);
    if (req->workdir && chdir (req->workdir) < 0)
        fprintf (stderr, "dtagent (local launcher): chdir %s: %s\n", req->workdir,
                 strerror (errno));
    if (mkdirs (sdir, 0700) < 0) {
        fprintf (stderr, "dtagent (local launcher): mkdir %s: %s\n", sdir,
                 strerror (errno));
        _exit (126);
    }
    /* The environment the Slurm batch job gets (slurm_script.c, make_env),
     * nothing of dtctld's own: the job's env, PATH, and the attempt's
     * variables after it (dtctl-job(5), ENVIRONMENT).  Built on the stack:
     * no allocation between fork and exec. */
    size_t nenv = 0;
    while (req->env && req->env[nenv])
        nenv++;
    const char *path = getenv ("PATH");
    char e_path[4096], e_tok[128], e_ctl[1024], e_job[48], e_att[32];
    const char *envp[nenv + 6];
    snprintf (e_path, sizeof (e_path), "PATH=%s",
              path ? path : "/usr/local/bin:/usr/bin:/bin");
    snprintf (e_tok, sizeof (e_tok), "DT_TOKEN=%s", req->token);
    snprintf (e_ctl, sizeof (e_ctl), "DT_CONTROLLER=%s", l->url);
    snprintf (e_job, sizeof (e_job), "DT_JOB=%s", job);
    snprintf (e_att, sizeof (e_att), "DT_ATTEMPT=%s", att);
    size_t ne = 0;
    bool job_path = false; /* the job's PATH replaces dtctld's */
    for (size_t i = 0; i < nenv; i++) {
        envp[ne++] = req->env[i];
        job_path = job_path || !strncmp (req->env[i], "PATH=", 5);
    }
    if (!job_path)
        envp[ne++] = e_path;
    envp[ne++] = e_tok, envp[ne++] = e_ctl;
    envp[ne++] = e_job, envp[ne++] = e_att, envp[ne] = NULL;
    const char *argv[] = {
        l->agent,       "--controller", l->url,        "--node", node,
        "--node-order", order,          "--state-dir", sdir,     NULL
    };
    /* Nothing of dtctld's goes to the job: not its database, listeners or
     * connections (whatever was opened without O_CLOEXEC). */
    dt_child_close_from (3);
    execve (l->agent, (char *const *)argv, (char *const *)envp);
    fprintf (stderr, "dtagent (local launcher): exec %s: %s\n", l->agent,
             strerror (errno));
    _exit (127);
}

static int local_submit (void *ctx, const struct launcher_req *req,
                         char handle[LAUNCHER_HANDLE_MAX], dt_error_t *err)
{
    struct local *l = ctx;
    int n = req->nodes + req->spare_nodes;
    struct lgroup *g;
    int *num;

    if (access (l->agent, X_OK) < 0)
        return errnoprintf (err, errno, "dtagent '%s' is not executable: %s", l->agent,
                            strerror (errno));
    if (!(num = calloc (n > 0 ? n : 1, sizeof (*num))))
        return errnoprintf (err, ENOMEM, "out of memory");
    if (pick_nodes (l, req->exclude, n, num) < 0) {
        free (num);
        return errnoprintf (err, ENOSPC,
                            "local launcher: %d nodes wanted, but LocalNodes=%lld "
                            "less the excluded ones leaves fewer",
                            n, (long long)l->max_nodes);
    }
    /* The agents' directories are made by the agents' processes, as the
     * job's user (exec_agent). */
    if (!(g = calloc (1, sizeof (*g))) || !(g->pids = calloc (n, sizeof (pid_t)))) {
        free (g);
        free (num);
        return errnoprintf (err, ENOMEM, "out of memory");
    }
    for (int k = 0; k < n; k++) {
        pid_t pid = fork ();
        if (pid < 0) {
            int e = errno;
            if (g->pgid > 0)
                kill (-g->pgid, SIGKILL);
            /* keep the group so the started ones are reaped */
            g->n = k;
            g->alive = k;
            g->cancelled = true;
            g->next = l->groups;
            l->groups = g;
            free (num);
            return errnoprintf (err, e, "fork: %s", strerror (e));
        }
        if (pid == 0)
            exec_agent (l, req, k, num[k], g->pgid);
        if (k == 0)
            g->pgid = pid;
        setpgid (pid, g->pgid); /* also in the parent: no race */
        g->pids[k] = pid;
    }
    for (int k = 0, off = 0; k < n && off < (int)sizeof (g->nodelist); k++)
        off += snprintf (g->nodelist + off, sizeof (g->nodelist) - off, "%slocal%d",
                         k ? "," : "", num[k]);
    free (num);
    g->n = n;
    g->alive = n;
    g->next = l->groups;
    l->groups = g;
    snprintf (handle, LAUNCHER_HANDLE_MAX, "pgid:%ld", (long)g->pgid);
    return 0;
}

static struct lgroup *find (struct local *l, pid_t pgid)
{
    for (struct lgroup *g = l->groups; g; g = g->next)
        if (g->pgid == pgid)
            return g;
    return NULL;
}

static int parse_handle (const char *handle, pid_t *pgid)
{
    long v;
    char *end;
    if (!handle || strncmp (handle, "pgid:", 5))
        return -1;
    v = strtol (handle + 5, &end, 10);
    if (*end || v <= 1)
        return -1;
    *pgid = (pid_t)v;
    return 0;
}

static void reap (struct lgroup *g)
{
    for (int i = 0; i < g->n; i++) {
        int status;
        if (g->pids[i] <= 0)
            continue;
        pid_t r = waitpid (g->pids[i], &status, WNOHANG);
        if (r == g->pids[i] || (r < 0 && errno == ECHILD)) {
            g->pids[i] = 0;
            g->alive--;
            if (r > 0 && WIFEXITED (status) && WEXITSTATUS (status) && !g->exit_code)
                g->exit_code = WEXITSTATUS (status);
            if (r > 0 && WIFSIGNALED (status))
                g->any_signal = true;
        }
    }
}

static int local_poll (void *ctx, const char *handle, struct launcher_status *st,
                       dt_error_t *err)
{
    struct local *l = ctx;
    struct lgroup *g;
    pid_t pgid;

    memset (st, 0, sizeof (*st));
    st->exit_code = -1;
    if (parse_handle (handle, &pgid) < 0) {
        st->state = LAUNCHER_ENDED;
        snprintf (st->cause, sizeof (st->cause), "lost");
        snprintf (st->detail, sizeof (st->detail), "not a local launcher handle: %.60s",
                  handle ? handle : "");
        return 0;
    }
    if (!(g = find (l, pgid))) {
        /* Not our children (dtctld restarted): does the group still exist? */
        if (kill (-pgid, 0) == 0 || errno == EPERM) {
            st->state = LAUNCHER_RUNNING;
            return 0;
        }
        st->state = LAUNCHER_ENDED;
        snprintf (st->cause, sizeof (st->cause), "lost");
        snprintf (st->detail, sizeof (st->detail), "process group %ld is gone",
                  (long)pgid);
        return 0;
    }
    reap (g);
    if (g->alive > 0) {
        if (g->term_ms && dt_mono_ms () - g->term_ms > kill_grace_ms)
            kill (-g->pgid, SIGKILL);
        st->state = LAUNCHER_RUNNING;
        snprintf (st->nodelist, sizeof (st->nodelist), "%s", g->nodelist);
        return 0;
    }
    /* Make sure nothing the agents left in their group survives. */
    kill (-g->pgid, SIGKILL);
    st->state = LAUNCHER_ENDED;
    st->exit_code = g->exit_code;
    snprintf (st->nodelist, sizeof (st->nodelist), "%s", g->nodelist);
    if (g->cancelled)
        snprintf (st->cause, sizeof (st->cause), "cancelled");
    else if (g->exit_code || g->any_signal)
        snprintf (st->cause, sizeof (st->cause), "failed");
    else
        snprintf (st->cause, sizeof (st->cause), "completed");
    snprintf (st->detail, sizeof (st->detail),
              "%d local agents ended (first non-zero exit "
              "%d%s)",
              g->n, g->exit_code, g->any_signal ? ", some killed by a signal" : "");
    return 0;
}

static int local_cancel (void *ctx, const char *handle, int flags, dt_error_t *err)
{
    struct local *l = ctx;
    struct lgroup *g;
    pid_t pgid;

    if (parse_handle (handle, &pgid) < 0)
        return 0;
    if ((g = find (l, pgid))) {
        g->cancelled = true;
        if (!g->term_ms)
            g->term_ms = dt_mono_ms ();
    }
    if (kill (-pgid, SIGTERM) < 0 && errno != ESRCH)
        return errnoprintf (err, errno, "kill -TERM -%ld: %s", (long)pgid,
                            strerror (errno));
    return 0;
}

static int local_capacity (void *ctx, const char *partition, const char *const *exclude,
                           int *nodes, dt_error_t *err)
{
    struct local *l = ctx;
    int n = 0;
    if (l->max_nodes <= 0) {
        *nodes = 1 << 20; /* unlimited */
        return 0;
    }
    for (int c = 1; c <= l->max_nodes; c++)
        if (!excluded (exclude, c))
            n++;
    *nodes = n;
    return 0;
}

/* The names the group was given ("local1,local3"). */
static int local_node_member (void *ctx, const char *handle, const char *nodelist,
                              const char *node)
{
    struct local *l = ctx;
    struct lgroup *g;
    const char *list = nodelist;
    size_t len = strlen (node);

    if (handle && !strncmp (handle, "pgid:", 5) &&
        (g = find (l, (pid_t)atol (handle + 5))))
        list = g->nodelist;
    if (!list || !*list)
        return -1;
    for (const char *p = list; p && *p; p = strchr (p, ',') ? strchr (p, ',') + 1 : NULL)
        if (!strncmp (p, node, len) && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

const struct launcher_ops launcher_local_ops = {
    .name = "local",
    .create = local_create,
    .destroy = local_destroy,
    .submit = local_submit,
    .poll = local_poll,
    .cancel = local_cancel,
    .capacity = local_capacity,
    .node_member = local_node_member,
};
