/* slurm_int.h: what the files of the Slurm launcher share (launcher_slurm.c,
 * slurm_script.c, slurm_watch.c, slurm_alloc.c): its context and each
 * file's functions the others call.  Only these files include libslurm's
 * headers; the rest of dtctld sees launcher.h. */
#ifndef DT_SLURM_INT_H
#define DT_SLURM_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/errprintf.h"
#include "orchestrator/launcher.h"

/* Exported by libslurm.so.38 but not declared in the 22.05 slurm.h. */
extern char *slurm_job_reason_string (enum job_state_reason inx);

struct slurm_launcher {
    char *conf_path;
    char *controller_url;
    char *dtagent_path;
    char *state_dir;
    int64_t warn_time_s;
    /* from SlurmAccount, SlurmQos, SlurmPartition, SlurmExtraArgs */
    char *account;
    char *qos;
    char *partition;
    char *gres; /* tres_per_node: "gres:gpu:8,..." */
    char *features;
    char *reservation;
    uint64_t mem_mb;        /* 0: not set */
    uint16_t cpus_per_task; /* 0: not set */
    bool exclusive;

    /* slurmctld reachability */
    bool down;         /* last RPC failed with a communication error */
    double down_since; /* monotonic seconds */
    double next_try;   /* no RPC before this */
    double backoff;

    /* Steps of attempts inside allocations (in-allocation restart). */
    struct step_track *tracks;
};

/* What the launcher remembers of one attempt's step: poll must tell "not
 * started yet" from "ended" while the allocation lives on, and an attempt
 * ended with KEEP_ALLOC is over for the controller before its step is. */
struct step_track {
    struct step_track *next;
    uint32_t jobid;
    int attempt;
    bool seen;   /* its step was seen running */
    bool kept;   /* cancelled with LAUNCHER_CANCEL_KEEP_ALLOC */
    double used; /* mono time of the last use (garbage collection) */
};

/* launcher_slurm.c: the ops, configuration, slurmctld reachability */
double mono_now (void);
bool is_comm_error (int e);
int ctld_gate (struct slurm_launcher *sl, dt_error_t *err);
void ctld_result (struct slurm_launcher *sl, int e);
bool reason_hopeless (uint32_t reason);
void partition_size (const char *name, char *buf, size_t len);

/* slurm_script.c: the batch script and the agents' environment */
char *subst_node (const char *path, const char *with);
char *make_script (struct slurm_launcher *sl, const struct launcher_req *req,
                   const char *step_out);
char **make_env (struct slurm_launcher *sl, const struct launcher_req *req, int *count);
void free_env (char **env);
char *join_exclude (const char *const *exclude);

/* slurm_watch.c: handles, steps, and what poll reports */
int parse_handle (const char *handle, uint32_t *jobid, int *attempt, dt_error_t *err);
int parse_step_name (const char *name, long long *job, int *attempt);
struct step_track *track_get (struct slurm_launcher *sl, uint32_t jobid, int attempt,
                              bool create);
void track_drop_job (struct slurm_launcher *sl, uint32_t jobid);
job_step_info_response_msg_t *load_steps (struct slurm_launcher *sl, uint32_t jobid,
                                          dt_error_t *err);
int slurm_poll_job (void *ctx, const char *handle, struct launcher_status *st,
                    dt_error_t *err);

/* slurm_alloc.c: in-allocation restart: dead nodes, shrinking, reuse */
char **expand_hostlist (const char *expr, int *count);
void free_names (char **v);
bool name_in (const char *name, const char *const *list);
int nodes_dead (struct slurm_launcher *sl, char *const *names, int n, bool *dead);
int drop_node_alloc (struct slurm_launcher *sl, uint32_t jobid, const char *node,
                     dt_error_t *err);
int end_steps (struct slurm_launcher *sl, slurm_job_info_t *j, long long job,
               int upto_attempt);
int check_startable (struct slurm_launcher *sl, uint32_t jobid, dt_error_t *err);
int submit_reuse (struct slurm_launcher *sl, const struct launcher_req *req,
                  char handle[LAUNCHER_HANDLE_MAX], char **dead_out, dt_error_t *err);
int cancel_keep (struct slurm_launcher *sl, uint32_t jobid, int attempt, dt_error_t *err);

#endif
