/* ftpolicy.h: the pure decisions of fault tolerance.
 *
 * No I/O, no clock, no global state: the job manager (orchestrator/jobs/) feeds these
 * functions what it observed and acts on the answer, and the unit tests
 * (tests/unit/orchestrator/test_ftpolicy.c) check them on their own.
 *
 *   - the straggler score (man/dtctl-job.5.in, straggler) over a sliding window,
 *   - the automatic hang timeout (a multiple of the observed p99 step time,
 *     with a floor; a separate allowance while a rank is busy saving or
 *     loading a checkpoint),
 *   - the no-progress guard,
 *   - the restart decision (max_restarts, no progress, fewer nodes down to
 *     restart.min_nodes) and the exponential backoff between attempts.
 */
#ifndef DT_FTPOLICY_H
#define DT_FTPOLICY_H

#include <stdbool.h>
#include <stdint.h>

/* --- stragglers ------------------------------------------------------------ */

/* Median of v[0..n) (the upper median for even n); NAN when n == 0.
 * v is not modified. */
double ft_median (const double *v, int n);

/* Score of a rank whose median compute time over the window is 'own', when
 * the fastest rank's median is 'fastest': fastest / own, in (0, 1].  NAN
 * when either is unknown or not positive. */
double ft_straggler_score (double fastest, double own);

/* A rank is flagged when its window is full (nsamples >= window) and its
 * score is below the threshold. */
bool ft_straggler_flag (double score, int nsamples, int window, double threshold);

/* --- hangs ----------------------------------------------------------------- */

/* p-th percentile (0 < p <= 100) of v[0..n), nearest-rank method; NAN when
 * n == 0.  v is not modified. */
double ft_percentile (const double *v, int n, double p);

struct ft_hang_params {
    int64_t floor_ms;      /* never below this */
    double multiple;       /* k in k x p99 */
    int64_t busy_floor_ms; /* while busy (checkpoint save/load) */
    double busy_multiple;  /* busy allowance = max(busy_floor, this x timeout) */
    int min_samples;       /* below this many step times: floor only */
};

/* The defaults dtctld uses (floor 30 s, 10 x p99, busy: max(120 s, 4 x)). */
extern const struct ft_hang_params ft_hang_defaults;

/* The hang timeout: 'fixed_ms' when > 0 (the job set hang_timeout_ms);
 * else max(floor, multiple x p99_ms) once min_samples step times are known,
 * else the floor.  When 'busy', the busy allowance instead. */
int64_t ft_hang_timeout_ms (const struct ft_hang_params *p, int64_t fixed_ms,
                            double p99_ms, int nsamples, bool busy);

/* --- restarts -------------------------------------------------------------- */

/* An attempt made progress when some rank got past the step it resumed
 * from (from scratch: past step 0), or when it committed a checkpoint. */
bool ft_attempt_progressed (int64_t resume_step, int64_t max_step, bool committed);

/* The no-progress streak after an attempt failed: 0 if it progressed, else
 * streak + 1. */
int ft_no_progress_streak (int streak, bool progressed);

enum ft_verdict {
    FT_RESTART = 0,         /* start a new attempt on *nodes nodes */
    FT_GIVE_UP_RESTARTS,    /* max_restarts reached: failed with the attempt's cause */
    FT_GIVE_UP_NO_PROGRESS, /* failed with cause "no_progress" */
    FT_GIVE_UP_NO_NODES,    /* fewer healthy nodes than restart.min_nodes */
};

struct ft_restart_in {
    int restarts; /* restarts so far (before this one) */
    int max_restarts;
    int no_progress_streak; /* consecutive attempts without progress, this one included */
    int no_progress_limit;  /* K: give up when the streak reaches it (0: never) */
    int nodes;              /* nodes the job asks for */
    int min_nodes;          /* restart.min_nodes (<= nodes) */
    int available; /* healthy nodes the launcher can offer (< 0: unknown = enough) */
    /* The layout (spec parallel): the world must hold whole groups of
     * tp * pp ranks; 0: any world. */
    int ranks_per_node, group;
    /* For ft_restart_replan: the spec's degrees (0: group alone counts) and
     * the dimensions spec parallel.shrink lets a restart reduce, in order
     * (FT_DIM_PP, FT_DIM_TP; nshrink of them). */
    int tp, pp;
    int shrink[2], nshrink;
};

enum { FT_DIM_TP = 1, FT_DIM_PP = 2 };

/* What to do after an attempt failed; *nodes gets the size of the next
 * attempt (min(nodes, available), never below min_nodes) on FT_RESTART.
 * With a layout, the largest such size whose world holds whole tp * pp
 * groups (keeping tp and pp, dropping data-parallel replicas). */
enum ft_verdict ft_restart_decide (const struct ft_restart_in *in, int *nodes);

/* ft_restart_decide, re-planning the layout when too few nodes remain:
 * first the spec's tp x pp with fewer data-parallel replicas (as above);
 * when no size from min_nodes up holds a whole group, smaller degrees of
 * the dimensions in.shrink lists -- divisors of the spec's, so the model
 * still splits evenly -- the first listed alone, then both: the layout
 * that runs on the most nodes, then the one that keeps the most of the
 * dimension listed last.  *tp, *pp: the next attempt's degrees. */
enum ft_verdict ft_restart_replan (const struct ft_restart_in *in, int *nodes, int *tp,
                                   int *pp);

/* "restart", "max_restarts", "no_progress", "no_nodes" */
const char *ft_verdict_name (enum ft_verdict v);

/* Backoff before restart number 'restarts' (1, 2, ...): base, doubling,
 * capped at max_ms. */
int64_t ft_backoff_ms (int restarts, int64_t base_ms, int64_t max_ms);

/* --- node names and node health -------------------------------------------- */

#define FT_NODE_NAME_MAX 63

/* A node name as agents may report it: 1..FT_NODE_NAME_MAX characters of
 * [A-Za-z0-9._-], starting with a letter or digit.  Such a name is one
 * word for a shell and one host for a Slurm hostlist (no brackets, commas
 * or spaces: no range expression, no option). */
bool ft_node_name_ok (const char *name);

/* Causes that say something about a node's health, not about the job's
 * own code: "node_lost" and "slurm_node_fail".  A trainer's exit, hang or
 * crash is the user's to cause, and must not take a node from everyone. */
bool ft_cause_is_infra (const char *cause);

/* Whether a node becomes suspect: failures of at least 'jobs_threshold'
 * different jobs that belong to at least 'users_threshold' different
 * users (so that one user alone cannot take a node out of service). */
bool ft_node_suspect (int64_t jobs, int64_t users, int64_t jobs_threshold,
                      int64_t users_threshold);

#endif
