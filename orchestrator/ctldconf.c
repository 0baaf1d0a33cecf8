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
#include "orchestrator/ctldconf.h"

static const char *const default_listen_address = "127.0.0.1";
static const int64_t default_listen_port = 6830;
static const char *const default_state_dir = "/var/lib/dtctld";
static const char *const default_launcher = "slurm";
static const char *const default_auth = "munge";
static const char *const default_checkpoint_root = "/var/lib/dtctld/checkpoints";
/* Root-owned parent of the per-user output directories (userdir.h): not
 * under the StateDir, which is root's alone. */
static const char *const default_user_dir = "/var/spool/dtctld";
static const int64_t default_heartbeat_ms = 1000;
static const int64_t default_node_timeout_ms = 10000;
/* 0 = auto: the agent uses its floor until step times are known. */
static const int64_t default_hang_timeout_ms = 0;
static const int64_t default_rendezvous_timeout_ms = 120000;
static const int64_t default_max_body = 1 << 20;
/* Issue 7: the floor of the automatic hang timeout (jobs with
 * hang_timeout_ms 0), and node health: a node blamed for failures of
 * SuspectJobs different jobs within SuspectWindow becomes suspect. */
static const int64_t default_hang_floor_ms = 30000;
static const int64_t default_suspect_jobs = 3;
static const int64_t default_suspect_window_ms = 24 * 3600 * 1000LL;

const char *const config_keys[] = {
    "ListenAddress", "ListenPort", "ControllerURL", "DatabasePath", "StateDir", "PidFile",
    "Launcher", "AuthType", "AdminUsers", "CheckpointRoot", "HeartbeatInterval",
    "NodeTimeout", "HangTimeout", "RendezvousTimeout", "LogLevel", "DtagentPath",
    "MaxBodySize", "UserDir",
    /* read by launcher_slurm.c */
    "SlurmAccount", "SlurmQos", "SlurmPartition", "SlurmExtraArgs", "SlurmWarnSeconds",
    /* read by jobs.c (issue 7: hang floor, node health) and launcher_local.c */
    "HangTimeoutFloor", "SuspectJobs", "SuspectWindow", "LocalNodes",
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
        free (cfg);
        errno = saved;
    }
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

struct ctld_config *config_load (const char *path, const struct config_overrides *ov,
                                 dt_error_t *err)
{
    struct ctld_config *cfg;
    const char *v;
    int64_t n;

    if (!(cfg = calloc (1, sizeof (*cfg)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (path) {
        if (!(cfg->path = strdup (path))
            || !(cfg->conf = dt_conf_load (path, config_keys, err)))
            goto error;
    } else if (!(cfg->conf = dt_conf_parse ("(defaults)", "", config_keys, err)))
        goto error;
    for (int i = 0; ov && i < ov->n; i++) {
        if (dt_conf_set (cfg->conf, ov->kv[i].key, ov->kv[i].value, err) < 0)
            goto error;
    }

    const dt_conf_t *c = cfg->conf;
    cfg->state_dir = strdup (dt_conf_get (c, "StateDir", default_state_dir));
    cfg->listen_address = strdup (dt_conf_get (c, "ListenAddress", default_listen_address));
    cfg->controller_url = strdup (dt_conf_get (c, "ControllerURL", ""));
    cfg->database_path = dup_or_join (dt_conf_get (c, "DatabasePath", NULL), cfg->state_dir,
                                      "dtctld.db");
    cfg->pid_file = dup_or_join (dt_conf_get (c, "PidFile", NULL), cfg->state_dir,
                                 "dtctld.pid");
    cfg->launcher = strdup (dt_conf_get (c, "Launcher", default_launcher));
    cfg->checkpoint_root = strdup (dt_conf_get (c, "CheckpointRoot", default_checkpoint_root));
    cfg->user_dir = strdup (dt_conf_get (c, "UserDir", default_user_dir));
    v = dt_conf_get (c, "DtagentPath", NULL);
    cfg->dtagent_path = v ? strdup (v) : NULL;
    if (!cfg->state_dir || !cfg->listen_address || !cfg->controller_url
        || !cfg->database_path || !cfg->pid_file || !cfg->launcher || !cfg->checkpoint_root
        || !cfg->user_dir
        || (v && !cfg->dtagent_path)) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto error;
    }

    if (dt_conf_get_int (c, "ListenPort", default_listen_port, 0, 65535, &n, err) < 0)
        goto error;
    cfg->listen_port = (int)n;
    if (dt_conf_get_int (c, "MaxBodySize", default_max_body, 1024, 1 << 30, &cfg->max_body,
                         err) < 0
        || dt_conf_get_duration_ms (c, "HeartbeatInterval", default_heartbeat_ms,
                                    &cfg->heartbeat_interval_ms, err) < 0
        || dt_conf_get_duration_ms (c, "NodeTimeout", default_node_timeout_ms,
                                    &cfg->node_timeout_ms, err) < 0
        || dt_conf_get_duration_ms (c, "HangTimeout", default_hang_timeout_ms,
                                    &cfg->hang_timeout_ms, err) < 0
        || dt_conf_get_duration_ms (c, "RendezvousTimeout", default_rendezvous_timeout_ms,
                                    &cfg->rendezvous_timeout_ms, err) < 0)
        goto error;
    if (dt_conf_get_duration_ms (c, "HangTimeoutFloor", default_hang_floor_ms,
                                 &cfg->hang_floor_ms, err) < 0
        || dt_conf_get_int (c, "SuspectJobs", default_suspect_jobs, 1, 1000,
                            &cfg->suspect_jobs, err) < 0
        || dt_conf_get_duration_ms (c, "SuspectWindow", default_suspect_window_ms,
                                    &cfg->suspect_window_ms, err) < 0)
        goto error;
    if (cfg->hang_floor_ms < 1000) {
        errnoprintf (err, EINVAL, "HangTimeoutFloor: must be at least 1s");
        goto error;
    }
    if (cfg->suspect_window_ms < 1000) {
        errnoprintf (err, EINVAL, "SuspectWindow: must be at least 1s");
        goto error;
    }
    if (cfg->heartbeat_interval_ms < 100 || cfg->heartbeat_interval_ms > 60000) {
        errnoprintf (err, EINVAL, "HeartbeatInterval: must be between 100ms and 60s");
        goto error;
    }
    if (cfg->node_timeout_ms < 2 * cfg->heartbeat_interval_ms) {
        errnoprintf (err, EINVAL, "NodeTimeout: must be at least twice HeartbeatInterval");
        goto error;
    }
    if (cfg->hang_timeout_ms != 0 && cfg->hang_timeout_ms < 1000) {
        errnoprintf (err, EINVAL, "HangTimeout: must be 0 (auto) or at least 1s");
        goto error;
    }
    if (cfg->rendezvous_timeout_ms < 1000) {
        errnoprintf (err, EINVAL, "RendezvousTimeout: must be at least 1s");
        goto error;
    }

    if (strcmp (cfg->launcher, "local") && strcmp (cfg->launcher, "slurm")
        && strcmp (cfg->launcher, "external")) {
        errnoprintf (err, EINVAL, "Launcher: must be 'local', 'slurm' or 'external', not '%.40s'",
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
    if (cfg->auth == AUTH_NONE && strcmp (cfg->listen_address, "127.0.0.1")
        && strcmp (cfg->listen_address, "::1") && strcmp (cfg->listen_address, "localhost")) {
        errnoprintf (err, EINVAL, "AuthType=none is allowed only with a loopback "
                     "ListenAddress (127.0.0.1, ::1), not '%.40s'", cfg->listen_address);
        goto error;
    }
    v = dt_conf_get (c, "LogLevel", "info");
    if ((cfg->log_level = dt_log_level_parse (v)) < 0) {
        errnoprintf (err, EINVAL, "LogLevel: unknown level '%.40s' (debug, info, notice, "
                     "warning, error)", v);
        goto error;
    }
    if (cfg->checkpoint_root[0] != '/' || cfg->state_dir[0] != '/') {
        errnoprintf (err, EINVAL, "%s: must be an absolute path",
                     cfg->checkpoint_root[0] != '/' ? "CheckpointRoot" : "StateDir");
        goto error;
    }
    if (cfg->user_dir[0] != '/') {
        errnoprintf (err, EINVAL, "UserDir: must be an absolute path");
        goto error;
    }
    size_t sl = strlen (cfg->state_dir);
    while (sl > 1 && cfg->state_dir[sl - 1] == '/')
        sl--;
    if (strncmp (cfg->user_dir, cfg->state_dir, sl) == 0
        && (cfg->user_dir[sl] == '\0' || cfg->user_dir[sl] == '/')) {
        errnoprintf (err, EINVAL, "UserDir %s: must not be the StateDir or under it (jobs' "
                     "processes write there as their users)", cfg->user_dir);
        goto error;
    }
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
