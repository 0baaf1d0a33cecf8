/* ranks.h: the trainer processes of this node: start them with the torchrun
 * environment, reap them, read their step reports from the shared pages,
 * detect hangs, deliver commands, and kill them. */
#ifndef DT_AGENT_RANKS_H
#define DT_AGENT_RANKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include "common/errprintf.h"
#include "client/dtproto.h"
#include "ctl.h"

enum rank_state {
    RANK_IDLE = 0, /* not started */
    RANK_RUNNING = 1,
    RANK_EXITED = 2, /* reaped */
};

struct rank {
    int rank, local_rank;
    pid_t pid; /* also its process group id */
    enum rank_state state;
    int exit_code; /* when exited normally, else -1 */
    int signal;    /* when killed by a signal, else 0 */
    bool client;   /* said hello through libdtclient */
    pid_t client_pid;
    bool killed;   /* the agent killed it (hang, abort, stop) */
    bool kill_now; /* the controller's kill command was applied */
    bool reform;   /* declared it can re-form in place (DTCLIENT_CAP_REFORM) */
    bool joining;  /* restarted to replace itself in a re-formed group */
    /* a hot spare's standby process (DT_STANDBY=1): no rank yet ('rank'
     * is its local index, never reported); ready once it declared
     * DTCLIENT_CAP_REFORM ('reform') */
    bool standby;
    /* when it last said it waits to re-form (DTCLIENT_REFORM_WAITING), 0 never */
    int64_t reform_wait_ms;
    volatile struct dtshm_page *page;
    struct dtshm_report last; /* latest report read from the page */
    struct dtshm_dims dims;   /* latest per-dimension figures (step 0: none) */
    int64_t progress_ms;      /* when the report last changed (or hello) */
    int64_t kill_at_ms;       /* SIGKILL deadline after a SIGTERM; 0: none */
    char *log_path, *err_path, *shm_path;
};

typedef struct ranks ranks_t;

/* The ranks of node 'l->node_rank' (none for a spare).  Creates the shared
 * pages in 'rundir'; 'sock' is what DT_AGENT_SOCKET says.  All borrowed. */
ranks_t *ranks_create (const struct layout *l, const char *rundir, const char *sock,
                       dt_error_t *err);
/* SIGKILLs every process group still alive, removes the pages. */
void ranks_destroy (ranks_t *r);

/* Fork and exec every rank.  -1 with err if a fork fails (the ranks already
 * started keep running; the caller kills them). */
int ranks_start (ranks_t *r, dt_error_t *err);
/* The layout of the attempt the ranks now belong to (borrowed): a group
 * re-formed in place keeps its processes under a new attempt. */
void ranks_set_layout (ranks_t *r, const struct layout *l);
/* Start an exited rank again as a replacement that joins its re-formed
 * group (DT_REFORM_JOIN=1), its logs under new names (.a<attempt>).  -1
 * with err if the fork fails. */
int ranks_relaunch (ranks_t *r, struct rank *rk, dt_error_t *err);

/* A hot spare (a spare node of a job with restart.reform): start
 * ranks_per_node standby processes (DT_STANDBY=1, RANK = the local index)
 * that warm up and wait for a rank (trainer/train_standby.c).  -1 with err
 * if a fork fails. */
int ranks_standby_start (ranks_t *r, const struct layout *l, dt_error_t *err);
/* Standby processes running and ready (declared they can re-form). */
int ranks_standby_ready (const ranks_t *r);
/* The spare takes node rank 'node_rank' in a re-formed group: each standby
 * process becomes rank node_rank * ranks_per_node + local, written to its
 * page (the process reads it when the re-form command that the caller
 * sends next arrives) and joins as a replacement.  -1 (nothing changed)
 * when not every standby process is ready. */
int ranks_take_over (ranks_t *r, int node_rank);

int ranks_count (const ranks_t *r);
struct rank *ranks_at (ranks_t *r, int i);      /* borrowed */
struct rank *ranks_find (ranks_t *r, int rank); /* borrowed, NULL if not here */
int ranks_running (const ranks_t *r);           /* how many still run */
bool ranks_started (const ranks_t *r);
bool ranks_all_succeeded (const ranks_t *r); /* all exited 0 */

/* Reap exited children (after SIGCHLD); calls cb once per rank that
 * exited.  Its process group is then killed, so helpers of a dead rank do
 * not linger. */
typedef void (*ranks_exit_f) (struct rank *rk, void *arg);
void ranks_reap (ranks_t *r, ranks_exit_f cb, void *arg);

/* Read every page; a rank connected through libdtclient, not busy, whose
 * report has not changed for hang_timeout_ms is passed to hang_cb once
 * (idle time in ms, whether its process is stopped).  A rank waiting in a
 * collective is blocked on a peer, most likely the one that hangs, so it
 * is given ranks_waiting_multiple x hang_timeout_ms - unless its own
 * process is stopped.  Also sends SIGKILL to ranks past their kill
 * deadline. */
enum { ranks_waiting_multiple = 2 };
typedef void (*ranks_hang_f) (struct rank *rk, int64_t idle_ms, bool stopped, void *arg);
void ranks_tick (ranks_t *r, int64_t now_ms, int64_t hang_timeout_ms,
                 ranks_hang_f hang_cb, void *arg);

/* Whether the rank's trainer process (the one that said hello, else the
 * one started) is stopped: state T or t in /proc (SIGSTOP, a debugger). */
bool ranks_stopped (const struct rank *rk);

/* A trainer said hello (rank, pid).  -1 with err when 'rank' is not one
 * of this node's. */
int ranks_hello (ranks_t *r, int rank, pid_t pid, dt_error_t *err);

/* Offer a command to every running rank's page (dtshm_offer_cmd: an
 * unread command of a higher rank stays).  The number of ranks whose page
 * kept its unread command. */
int ranks_command (ranks_t *r, int kind, int64_t step);

/* SIGTERM (and SIGCONT, so a stopped rank gets it) the rank's process
 * group, then SIGKILL after grace_ms (0: SIGKILL now). */
void ranks_kill (ranks_t *r, struct rank *rk, int64_t grace_ms);
void ranks_kill_all (ranks_t *r, int64_t grace_ms);

/* The "ranks" array of a heartbeat (new reference). */
json_t *ranks_heartbeat_json (ranks_t *r);

/* The last lines of the rank's stderr (at most len-1 bytes, made printable
 * ASCII/newline so it is valid JSON text). */
void ranks_stderr_tail (const struct rank *rk, char *buf, size_t len);

#endif
