/* ctldconf.h: dtctld.conf (Key=Value) and the command-line flags over it.
 *
 * Parse once into a struct ctld_config; SIGHUP parses again with the same
 * code and swaps only when the new config is valid.
 */
#ifndef DT_CTLDCONF_H
#define DT_CTLDCONF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/conf.h"
#include "common/errprintf.h"

enum auth_type { AUTH_MUNGE = 0, AUTH_NONE = 1 };

/* PrivateData: what of a job only its owner and admins see. */
enum private_data {
    PRIVATE_ENV = 1,    /* the values of spec.env */
    PRIVATE_STDERR = 2, /* stderr tails (failure evidence, events) */
    PRIVATE_JOBS = 4,   /* the job itself (others: 404) */
};

/* Flag overrides: applied over the file on every (re)load. */
struct config_overrides {
    int n;
    struct {
        const char *key;
        const char *value;
    } kv[32];
};

struct ctld_config {
    char *path;           /* the file read, or NULL */
    dt_conf_t *conf;      /* the raw table (launchers read their keys) */
    char *listen_address; /* ListenAddress, default 127.0.0.1 */
    int listen_port;      /* ListenPort, default 6830 */
    char *controller_url; /* ControllerURL: what agents dial ("" = derived) */
    char *database_path;  /* DatabasePath, default StateDir/dtctld.db */
    char *state_dir;      /* StateDir */
    char *pid_file;       /* PidFile, default StateDir/dtctld.pid */
    char *launcher;       /* Launcher: local | slurm */
    enum auth_type auth;  /* AuthType */
    uid_t admin_uids[64]; /* AdminUsers (names or uids), plus root always */
    int nadmins;
    char *checkpoint_root; /* CheckpointRoot */
    char *user_dir;        /* UserDir: per-user output directories (userdir.h) */
    char *ui_dir;          /* UiDir: the web page's files (ui.h) */
    char *ui_chartjs;      /* UiChartJs: the charting library the page loads */
    int64_t heartbeat_interval_ms, node_timeout_ms, hang_timeout_ms,
      rendezvous_timeout_ms;
    int64_t tree_width; /* TreeWidth: the agents' fan-in tree; 0 direct */
    int log_level;      /* LogLevel */
    char *dtagent_path; /* DtagentPath */
    int64_t max_body;   /* MaxBodySize (bytes) */
    /* Fault tolerance */
    int64_t hang_floor_ms;     /* HangTimeoutFloor: floor of the auto hang timeout */
    int64_t suspect_jobs;      /* SuspectJobs: failures in this many jobs ... */
    int64_t suspect_window_ms; /* SuspectWindow: ... within this window -> suspect */
    int64_t suspect_users;     /* SuspectUsers: ... of at least this many users */
    bool suspect_any_cause;    /* SuspectCauses=any (default: infrastructure only) */
    int private_data;          /* PrivateData: enum private_data bits */
    char **pass_env;      /* PassEnv: "NAME=VALUE" of dtctld's environment, NULL-ended */
    bool metrics_per_job; /* MetricsPerJob: /metrics has series labelled by job */
    /* Denial of service: connections, requests and quotas */
    int agent_port;                /* AgentPort: the agents' listener */
    bool agent_port_set;           /* given in the file or a flag (else derived) */
    int64_t max_connections;       /* MaxConnections: users' listener */
    int64_t max_agent_connections; /* MaxAgentConnections: agents' listener */
    int64_t max_conn_per_address;  /* MaxConnectionsPerAddress: users' listener; 0 none */
    int64_t max_agent_conn_per_address; /* MaxAgentConnectionsPerAddress; 0 none */
    int64_t request_timeout_ms;         /* RequestTimeout: absolute, per request */
    int64_t max_body_buffer;            /* MaxBodyBuffer: all bodies buffered at once */
    int64_t max_jobs_per_user;          /* MaxJobsPerUser: live jobs; 0 none */
    int64_t max_job_count;              /* MaxJobCount: live jobs of everyone; 0 none */
    int64_t max_kv_bytes;       /* MaxKvBytes: every attempt's key-value store; 0 none */
    int64_t max_events_per_job; /* MaxEventsPerJob: events agents add to a job; 0 none */
    int64_t max_result_size;    /* MaxResultSize: a trainer's result, bytes of JSON */
};

/* Keys accepted in dtctld.conf (NULL-terminated). */
extern const char *const config_keys[];

/* Load 'path' (NULL: built-in defaults only), apply overrides, validate.
 * Returns a new config or NULL with err ("file:line: Key: problem"). */
struct ctld_config *config_load (const char *path, const struct config_overrides *ov,
                                 dt_error_t *err);
void config_destroy (struct ctld_config *cfg);

/* Add a flag override; -1 if full. */
int config_override (struct config_overrides *ov, const char *key, const char *value);

bool config_is_admin (const struct ctld_config *cfg, uid_t uid);

#endif
