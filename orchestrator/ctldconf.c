/* ctldconf.c: dtctld.conf parsing, defaults and validation. */
#include <config.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "orchestrator/ckptpath.h"
#include "orchestrator/ctldconf.h"
#include "orchestrator/spec.h"

static const char *const default_listen_address = "127.0.0.1";
static const int64_t default_listen_port = 6830;
static const char *const default_state_dir = "/var/lib/dtctld";
static const char *const default_launcher = "slurm";
static const char *const default_auth = "munge";
static const char *const default_checkpoint_root = "/var/lib/dtctld/checkpoints";
/* Root-owned parent of the per-user output directories (userdir.h): not
 * under the StateDir, which is root's alone. */
static const char *const default_user_dir = "/var/spool/dtctld";
/* The web page's files (installed with dtctl) and Debian's libjs-chart.js. */
static const char *const default_ui_dir = UIDIR;
static const char *const default_ui_chartjs =
  "/usr/share/javascript/chart.js/chart.min.js";
static const int64_t default_heartbeat_ms = 1000;
static const int64_t default_node_timeout_ms = 10000;
/* Direct connections unless asked: a tree of width W is the same as
 * direct for jobs of up to W nodes, and adds a relay's hop for larger
 * ones, which only clusters beyond the controller's connection limit
 * need (dtctld.conf(5)). */
static const int64_t default_tree_width = 0;
/* 0 = auto: the agent uses its floor until step times are known. */
static const int64_t default_hang_timeout_ms = 0;
static const int64_t default_rendezvous_timeout_ms = 120000;
static const int64_t default_max_body = 1 << 20;
/* The floor of the automatic hang timeout (jobs with
 * hang_timeout_ms 0), and node health: a node blamed for failures of
 * SuspectJobs different jobs within SuspectWindow becomes suspect. */
static const int64_t default_hang_floor_ms = 30000;
static const int64_t default_suspect_jobs = 3;
static const int64_t default_suspect_window_ms = 24 * 3600 * 1000LL;
/* ... and only failures of its infrastructure (node lost, Slurm node
 * failure) in the jobs of at least two users count: one user's trainer
 * cannot take a node from everyone. */
static const int64_t default_suspect_users = 2;
static const char *const default_suspect_causes = "infrastructure";
/* The site's settings passed from dtctld's environment to every rank
 * (PassEnv): OpenBLAS's core type and cache size, which a site sets where
 * the library's own choice computes wrongly or slowly. */
static const char *const default_pass_env = "OPENBLAS_CORETYPE,OPENBLAS_L2_SIZE";

/* What users see of other users' jobs (PrivateData, as in slurm.conf). */
static const char *const default_private_data = "env,stderr";
/* Denial of service.  Users and agents have a listener each, so that a
 * flood of user connections cannot take the agents' connections; the
 * agents' listener is on ListenPort + 1 unless AgentPort says otherwise
 * (a free port when ListenPort is 0).  Defaults: room for the 10,000
 * agents of one address in the benchmark; 64 connections per user address
 * (a CLI uses one at a time); a request must be done within 60 s however
 * slowly its bytes come (the largest body, MaxBodySize, takes
 * milliseconds on any network); 256 MiB of bodies buffered at once (256
 * requests of the largest size); 1,000 live jobs per user and 10,000 in
 * all (Slurm's MaxJobCount default, for the whole cluster); 1 GiB of key-value store
 * for every attempt together (16 attempts at their 64 MiB cap). */
static const int64_t default_max_connections = 4096;
static const int64_t default_max_agent_connections = 20000;
static const int64_t default_max_conn_per_address = 64;
/* None by default on the agents' listener: a test or a benchmark runs
 * thousands of agents on one address; a site sets it (a node runs one
 * agent per job on it). */
static const int64_t default_max_agent_conn_per_address = 0;
static const int64_t default_request_timeout_ms = 60000;
static const int64_t default_max_body_buffer = 256LL << 20;
static const int64_t default_max_jobs_per_user = 1000;
static const int64_t default_max_job_count = 10000;
static const int64_t default_max_kv_bytes = 1LL << 30;
/* Events that agents add to one job (results, failed shards, signals):
 * a job reports a handful; 10,000 leaves room for a long job's many
 * restarts.  A result is a small JSON summary of the training. */
static const int64_t default_max_events_per_job = 10000;
static const int64_t default_max_result_size = 65536;

const char *const config_keys[] = {
    "ListenAddress",
    "ListenPort",
    "ControllerURL",
    "DatabasePath",
    "StateDir",
    "PidFile",
    "Launcher",
    "AuthType",
    "AdminUsers",
    "CheckpointRoot",
    "HeartbeatInterval",
    "NodeTimeout",
    "HangTimeout",
    "RendezvousTimeout",
    "TreeWidth",
    "LogLevel",
    "DtagentPath",
    "MaxBodySize",
    "UserDir",
    "UiDir",
    "UiChartJs",
    /* read by launcher_slurm.c */
    "SlurmAccount",
    "SlurmQos",
    "SlurmPartition",
    "SlurmExtraArgs",
    "SlurmWarnSeconds",
    /* read by the job manager (hang floor, node health) and launcher_local.c */
    "HangTimeoutFloor",
    "SuspectJobs",
    "SuspectWindow",
    "LocalNodes",
    /* multi-user safety: node health, what other users see */
    "SuspectUsers",
    "SuspectCauses",
    "PrivateData",
    "MetricsPerJob",
    /* the trainers' environment (agentapi.c) */
    "PassEnv",
    /* denial of service: listeners, requests, quotas */
    "AgentPort",
    "MaxConnections",
    "MaxAgentConnections",
    "MaxConnectionsPerAddress",
    "MaxAgentConnectionsPerAddress",
    "RequestTimeout",
    "MaxBodyBuffer",
    "MaxJobsPerUser",
    "MaxJobCount",
    "MaxKvBytes",
    "MaxEventsPerJob",
    "MaxResultSize",
    NULL,
};

int config_override (struct config_overrides *ov, const char *key, const char *value)
{
    if (ov->n >= (int)(sizeof (ov->kv) / sizeof (ov->kv[0]))) {
        errno = ENOSPC;
        return -1;
    }
    ov->kv[ov->n].key = key;
    ov->kv[ov->n].value = value;
    ov->n++;
    return 0;
}

void config_destroy (struct ctld_config *cfg)
{
    if (cfg) {
        int saved = errno;
        free (cfg->path);
        dt_conf_destroy (cfg->conf);
        free (cfg->listen_address);
        free (cfg->controller_url);
        free (cfg->database_path);
        free (cfg->state_dir);
        free (cfg->pid_file);
        free (cfg->launcher);
        free (cfg->checkpoint_root);
        free (cfg->user_dir);
        free (cfg->dtagent_path);
        free (cfg->ui_dir);
        free (cfg->ui_chartjs);
        for (char **e = cfg->pass_env; e && *e; e++)
            free (*e);
        free (cfg->pass_env);
        free (cfg);
        errno = saved;
    }
}

/* PassEnv=NAME,...: "NAME=VALUE" of each that dtctld's environment has. */
static int parse_pass_env (struct ctld_config *cfg, const char *v, dt_error_t *err)
{
    char buf[1024], *save = NULL;
    size_t n = 0;

    if (strlen (v) >= sizeof (buf))
        return errnoprintf (err, EINVAL, "PassEnv: too long");
    snprintf (buf, sizeof (buf), "%s", v);
    if (!(cfg->pass_env = calloc (strlen (v) / 2 + 2, sizeof (char *))))
        return errnoprintf (err, ENOMEM, "out of memory");
    for (char *w = strtok_r (buf, ", \t", &save); w; w = strtok_r (NULL, ", \t", &save)) {
        bool ok = *w && !(w[0] >= '0' && w[0] <= '9') && strncmp (w, "DT_", 3) &&
                  strncmp (w, "LD_", 3);
        for (const char *c = w; *c; c++)
            ok =
              ok && ((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_');
        if (!ok)
            return errnoprintf (err, EINVAL,
                                "PassEnv: '%.40s' is not a variable name that may pass "
                                "([A-Z_][A-Z0-9_]*, not DT_* or LD_*)",
                                w);
        const char *val = getenv (w);
        if (val && asprintf (&cfg->pass_env[n++], "%s=%s", w, val) < 0)
            return errnoprintf (err, ENOMEM, "out of memory");
    }
    return 0;
}

static char *dup_or_join (const char *v, const char *dir, const char *name)
{
    char buf[PATH_MAX];
    if (v)
        return strdup (v);
    snprintf (buf, sizeof (buf), "%s/%s", dir, name);
    return strdup (buf);
}

static int parse_admins (struct ctld_config *cfg, const char *list, dt_error_t *err)
{
    char *copy, *tok, *save = NULL;

    cfg->nadmins = 0;
    if (!list || !*list)
        return 0;
    if (!(copy = strdup (list)))
        return errnoprintf (err, ENOMEM, "out of memory");
    for (tok = strtok_r (copy, ", ", &save); tok; tok = strtok_r (NULL, ", ", &save)) {
        char *end;
        long v = strtol (tok, &end, 10);
        uid_t uid;
        if (*end == '\0' && v >= 0)
            uid = (uid_t)v;
        else {
            struct passwd *pw = getpwnam (tok);
            if (!pw) {
                errnoprintf (err, EINVAL, "AdminUsers: unknown user '%.40s'", tok);
                free (copy);
                return -1;
            }
            uid = pw->pw_uid;
        }
        if (cfg->nadmins >= (int)(sizeof (cfg->admin_uids) / sizeof (uid_t))) {
            free (copy);
            return errnoprintf (err, EINVAL, "AdminUsers: too many users (max 64)");
        }
        cfg->admin_uids[cfg->nadmins++] = uid;
    }
    free (copy);
    return 0;
}

/* PrivateData=a,b,...: what of a job only its owner and admins see.
 * "env" (the values of spec.env), "stderr" (stderr tails in failures and
 * events), "jobs" (the whole job: others get 404), "none". */
static int parse_private_data (struct ctld_config *cfg, const char *v, dt_error_t *err)
{
    char buf[256], *save = NULL;

    cfg->private_data = 0;
    if (snprintf (buf, sizeof (buf), "%s", v) >= (int)sizeof (buf))
        return errnoprintf (err, EINVAL, "PrivateData: too long");
    for (char *w = strtok_r (buf, ", ", &save); w; w = strtok_r (NULL, ", ", &save)) {
        if (!strcmp (w, "env"))
            cfg->private_data |= PRIVATE_ENV;
        else if (!strcmp (w, "stderr"))
            cfg->private_data |= PRIVATE_STDERR;
        else if (!strcmp (w, "jobs"))
            cfg->private_data |= PRIVATE_JOBS | PRIVATE_ENV | PRIVATE_STDERR;
        else if (strcmp (w, "none"))
            return errnoprintf (err, EINVAL,
                                "PrivateData: unknown word '%.40s' (env, stderr, "
                                "jobs, none)",
                                w);
    }
    return 0;
}

/* The numbers of the configuration: port, body size, timeouts and node
 * health, each checked against its range. */
static int load_numbers (struct ctld_config *cfg, const dt_conf_t *c, dt_error_t *err)
{
    int64_t n;

    if (dt_conf_get_int (c, "ListenPort", default_listen_port, 0, 65535, &n, err) < 0)
        return -1;
    cfg->listen_port = (int)n;
    if (dt_conf_get_int (c, "MaxBodySize", default_max_body, 1024, 1 << 30,
                         &cfg->max_body, err) < 0 ||
        dt_conf_get_int (c, "TreeWidth", default_tree_width, 0, SPEC_MAX_TREE_WIDTH,
                         &cfg->tree_width, err) < 0 ||
        dt_conf_get_duration_ms (c, "HeartbeatInterval", default_heartbeat_ms,
                                 &cfg->heartbeat_interval_ms, err) < 0 ||
        dt_conf_get_duration_ms (c, "NodeTimeout", default_node_timeout_ms,
                                 &cfg->node_timeout_ms, err) < 0 ||
        dt_conf_get_duration_ms (c, "HangTimeout", default_hang_timeout_ms,
                                 &cfg->hang_timeout_ms, err) < 0 ||
        dt_conf_get_duration_ms (c, "RendezvousTimeout", default_rendezvous_timeout_ms,
                                 &cfg->rendezvous_timeout_ms, err) < 0)
        return -1;
    if (dt_conf_get_duration_ms (c, "HangTimeoutFloor", default_hang_floor_ms,
                                 &cfg->hang_floor_ms, err) < 0 ||
        dt_conf_get_int (c, "SuspectJobs", default_suspect_jobs, 1, 1000,
                         &cfg->suspect_jobs, err) < 0 ||
        dt_conf_get_duration_ms (c, "SuspectWindow", default_suspect_window_ms,
                                 &cfg->suspect_window_ms, err) < 0)
        return -1;
    if (cfg->hang_floor_ms < 1000) {
        errnoprintf (err, EINVAL, "HangTimeoutFloor: must be at least 1s");
        return -1;
    }
    if (cfg->suspect_window_ms < 1000) {
        errnoprintf (err, EINVAL, "SuspectWindow: must be at least 1s");
        return -1;
    }
    if (cfg->heartbeat_interval_ms < 100 || cfg->heartbeat_interval_ms > 60000) {
        errnoprintf (err, EINVAL, "HeartbeatInterval: must be between 100ms and 60s");
        return -1;
    }
    if (cfg->node_timeout_ms < 2 * cfg->heartbeat_interval_ms) {
        errnoprintf (err, EINVAL,
                     "NodeTimeout: must be at least twice HeartbeatInterval");
        return -1;
    }
    if (cfg->hang_timeout_ms != 0 && cfg->hang_timeout_ms < 1000) {
        errnoprintf (err, EINVAL, "HangTimeout: must be 0 (auto) or at least 1s");
        return -1;
    }
    if (cfg->rendezvous_timeout_ms < 1000) {
        errnoprintf (err, EINVAL, "RendezvousTimeout: must be at least 1s");
        return -1;
    }
    return 0;
}

/* Denial of service: the agents' listener, connections, requests and
 * quotas, each checked against its range. */
static int load_limits (struct ctld_config *cfg, const dt_conf_t *c, dt_error_t *err)
{
    int64_t n;

    if (dt_conf_get_int (
          c, "AgentPort",
          cfg->listen_port && cfg->listen_port < 65535 ? cfg->listen_port + 1 : 0, 0,
          65535, &n, err) < 0)
        return -1;
    cfg->agent_port = (int)n;
    cfg->agent_port_set = dt_conf_get (c, "AgentPort", NULL) != NULL;
    if (cfg->agent_port && cfg->agent_port == cfg->listen_port) {
        errnoprintf (err, EINVAL,
                     "AgentPort: must differ from ListenPort (%d): agents "
                     "have a listener of their own",
                     cfg->listen_port);
        return -1;
    }
    if (dt_conf_get_int (c, "MaxConnections", default_max_connections, 16, 1000000,
                         &cfg->max_connections, err) < 0 ||
        dt_conf_get_int (c, "MaxAgentConnections", default_max_agent_connections, 16,
                         1000000, &cfg->max_agent_connections, err) < 0 ||
        dt_conf_get_int (c, "MaxConnectionsPerAddress", default_max_conn_per_address, 0,
                         1000000, &cfg->max_conn_per_address, err) < 0 ||
        dt_conf_get_int (c, "MaxAgentConnectionsPerAddress",
                         default_max_agent_conn_per_address, 0, 1000000,
                         &cfg->max_agent_conn_per_address, err) < 0 ||
        dt_conf_get_duration_ms (c, "RequestTimeout", default_request_timeout_ms,
                                 &cfg->request_timeout_ms, err) < 0 ||
        dt_conf_get_int (c, "MaxBodyBuffer", default_max_body_buffer, 1024, INT64_MAX,
                         &cfg->max_body_buffer, err) < 0 ||
        dt_conf_get_int (c, "MaxJobsPerUser", default_max_jobs_per_user, 0, 100000000,
                         &cfg->max_jobs_per_user, err) < 0 ||
        dt_conf_get_int (c, "MaxJobCount", default_max_job_count, 0, 100000000,
                         &cfg->max_job_count, err) < 0 ||
        dt_conf_get_int (c, "MaxKvBytes", default_max_kv_bytes, 0, INT64_MAX,
                         &cfg->max_kv_bytes, err) < 0 ||
        dt_conf_get_int (c, "MaxEventsPerJob", default_max_events_per_job, 0, INT64_MAX,
                         &cfg->max_events_per_job, err) < 0 ||
        dt_conf_get_int (c, "MaxResultSize", default_max_result_size, 2, 1 << 30,
                         &cfg->max_result_size, err) < 0)
        return -1;
    if (cfg->request_timeout_ms < 1000) {
        errnoprintf (err, EINVAL, "RequestTimeout: must be at least 1s");
        return -1;
    }
    if (cfg->max_body_buffer < cfg->max_body) {
        errnoprintf (err, EINVAL,
                     "MaxBodyBuffer: must be at least MaxBodySize (%lld bytes)",
                     (long long)cfg->max_body);
        return -1;
    }
    return 0;
}

/* Sharing the cluster: what makes a node suspect for everyone, and what
 * users see of other users' jobs. */
static int load_sharing (struct ctld_config *cfg, const dt_conf_t *c, dt_error_t *err)
{
    const char *v;

    if (dt_conf_get_int (c, "SuspectUsers", default_suspect_users, 1, 1000,
                         &cfg->suspect_users, err) < 0)
        return -1;
    v = dt_conf_get (c, "SuspectCauses", default_suspect_causes);
    if (!strcmp (v, "infrastructure"))
        cfg->suspect_any_cause = false;
    else if (!strcmp (v, "any"))
        cfg->suspect_any_cause = true;
    else {
        errnoprintf (err, EINVAL,
                     "SuspectCauses: must be 'infrastructure' or 'any', not "
                     "'%.40s'",
                     v);
        return -1;
    }
    if (parse_private_data (cfg, dt_conf_get (c, "PrivateData", default_private_data),
                            err) < 0)
        return -1;
    if (parse_pass_env (cfg, dt_conf_get (c, "PassEnv", default_pass_env), err) < 0)
        return -1;
    /* /metrics answers anyone: per-job series (job ids with their goodput,
     * MFU and communication) only when the admin says so. */
    v = dt_conf_get (c, "MetricsPerJob", "no");
    if (strcmp (v, "yes") && strcmp (v, "no"))
        return errnoprintf (err, EINVAL,
                            "MetricsPerJob: must be 'yes' or 'no', not '%.40s'", v);
    cfg->metrics_per_job = !strcmp (v, "yes");
    return 0;
}

/* The directories of the configuration: absolute, normal where jobs'
 * paths are compared with them, and no user's directory under the
 * StateDir. */
static int check_paths (const struct ctld_config *cfg, dt_error_t *err)
{
    if (cfg->checkpoint_root[0] != '/' || cfg->state_dir[0] != '/') {
        errnoprintf (err, EINVAL, "%s: must be an absolute path",
                     cfg->checkpoint_root[0] != '/' ? "CheckpointRoot" : "StateDir");
        return -1;
    }
    /* Jobs' checkpoint.dir defaults to it and must be a normal path
     * (spec.c), and dtctld compares it with theirs as a string. */
    if (!ckptpath_is_normal (cfg->checkpoint_root)) {
        errnoprintf (err, EINVAL,
                     "CheckpointRoot: '%.80s' is not a normal path (no '//', "
                     "'.', '..' or trailing '/')",
                     cfg->checkpoint_root);
        return -1;
    }
    if (cfg->user_dir[0] != '/') {
        errnoprintf (err, EINVAL, "UserDir: must be an absolute path");
        return -1;
    }
    size_t sl = strlen (cfg->state_dir);
    while (sl > 1 && cfg->state_dir[sl - 1] == '/')
        sl--;
    if (strncmp (cfg->user_dir, cfg->state_dir, sl) == 0 &&
        (cfg->user_dir[sl] == '\0' || cfg->user_dir[sl] == '/')) {
        errnoprintf (err, EINVAL,
                     "UserDir %s: must not be the StateDir or under it (jobs' "
                     "processes write there as their users)",
                     cfg->user_dir);
        return -1;
    }
    return 0;
}

struct ctld_config *config_load (const char *path, const struct config_overrides *ov,
                                 dt_error_t *err)
{
    struct ctld_config *cfg;
    const char *v;

    if (!(cfg = calloc (1, sizeof (*cfg)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (path) {
        if (!(cfg->path = strdup (path)) ||
            !(cfg->conf = dt_conf_load (path, config_keys, err)))
            goto error;
    }
    else if (!(cfg->conf = dt_conf_parse ("(defaults)", "", config_keys, err)))
        goto error;
    for (int i = 0; ov && i < ov->n; i++) {
        if (dt_conf_set (cfg->conf, ov->kv[i].key, ov->kv[i].value, err) < 0)
            goto error;
    }

    const dt_conf_t *c = cfg->conf;
    cfg->state_dir = strdup (dt_conf_get (c, "StateDir", default_state_dir));
    cfg->listen_address =
      strdup (dt_conf_get (c, "ListenAddress", default_listen_address));
    cfg->controller_url = strdup (dt_conf_get (c, "ControllerURL", ""));
    cfg->database_path =
      dup_or_join (dt_conf_get (c, "DatabasePath", NULL), cfg->state_dir, "dtctld.db");
    cfg->pid_file =
      dup_or_join (dt_conf_get (c, "PidFile", NULL), cfg->state_dir, "dtctld.pid");
    cfg->launcher = strdup (dt_conf_get (c, "Launcher", default_launcher));
    cfg->checkpoint_root =
      strdup (dt_conf_get (c, "CheckpointRoot", default_checkpoint_root));
    cfg->user_dir = strdup (dt_conf_get (c, "UserDir", default_user_dir));
    cfg->ui_dir = strdup (dt_conf_get (c, "UiDir", default_ui_dir));
    cfg->ui_chartjs = strdup (dt_conf_get (c, "UiChartJs", default_ui_chartjs));
    v = dt_conf_get (c, "DtagentPath", NULL);
    cfg->dtagent_path = v ? strdup (v) : NULL;
    if (!cfg->ui_dir || !cfg->ui_chartjs || !cfg->state_dir || !cfg->listen_address ||
        !cfg->controller_url || !cfg->database_path || !cfg->pid_file || !cfg->launcher ||
        !cfg->checkpoint_root || !cfg->user_dir || (v && !cfg->dtagent_path)) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }

    if (load_numbers (cfg, c, err) < 0)
        goto error;
    if (load_limits (cfg, c, err) < 0 || load_sharing (cfg, c, err) < 0)
        goto error;

    if (strcmp (cfg->launcher, "local") && strcmp (cfg->launcher, "slurm") &&
        strcmp (cfg->launcher, "external")) {
        errnoprintf (err, EINVAL,
                     "Launcher: must be 'local', 'slurm' or 'external', not '%.40s'",
                     cfg->launcher);
        goto error;
    }
    v = dt_conf_get (c, "AuthType", default_auth);
    if (!strcasecmp (v, "munge") || !strcasecmp (v, "auth/munge"))
        cfg->auth = AUTH_MUNGE;
    else if (!strcasecmp (v, "none") || !strcasecmp (v, "auth/none"))
        cfg->auth = AUTH_NONE;
    else {
        errnoprintf (err, EINVAL, "AuthType: must be 'munge' or 'none', not '%.40s'", v);
        goto error;
    }
    if (cfg->auth == AUTH_NONE && strcmp (cfg->listen_address, "127.0.0.1") &&
        strcmp (cfg->listen_address, "::1") &&
        strcmp (cfg->listen_address, "localhost")) {
        errnoprintf (err, EINVAL,
                     "AuthType=none is allowed only with a loopback "
                     "ListenAddress (127.0.0.1, ::1), not '%.40s'",
                     cfg->listen_address);
        goto error;
    }
    /* With AuthType=none every request is the daemon's own user: as root
     * that would make every local user root. */
    if (cfg->auth == AUTH_NONE && geteuid () == 0) {
        errnoprintf (err, EPERM,
                     "AuthType=none is refused when dtctld runs as root (every "
                     "local user would act as root): use AuthType=munge");
        goto error;
    }
    v = dt_conf_get (c, "LogLevel", "info");
    if ((cfg->log_level = dt_log_level_parse (v)) < 0) {
        errnoprintf (err, EINVAL,
                     "LogLevel: unknown level '%.40s' (debug, info, notice, "
                     "warning, error)",
                     v);
        goto error;
    }
    if (check_paths (cfg, err) < 0)
        goto error;
    if (parse_admins (cfg, dt_conf_get (c, "AdminUsers", ""), err) < 0)
        goto error;
    return cfg;
error:
    config_destroy (cfg);
    return NULL;
}

bool config_is_admin (const struct ctld_config *cfg, uid_t uid)
{
    if (uid == 0)
        return true;
    for (int i = 0; i < cfg->nadmins; i++)
        if (cfg->admin_uids[i] == uid)
            return true;
    return false;
}
