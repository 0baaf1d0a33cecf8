/* ftpolicy.c: the pure decisions of fault tolerance (see ftpolicy.h). */
#include <config.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/ftpolicy.h"

/* Defaults: a floor well under stock PyTorch's 10-minute collective timeout but
 * long enough for a slow first collective; 10 x p99 leaves room for the
 * noise of shared machines; checkpoint I/O gets minutes of its own. */
const struct ft_hang_params ft_hang_defaults = {
    .floor_ms = 30000,
    .multiple = 10.0,
    .busy_floor_ms = 120000,
    .busy_multiple = 4.0,
    .min_samples = 5,
};

static int dbl_cmp (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A sorted copy of v (caller frees), or NULL. */
static double *sorted (const double *v, int n)
{
    double *s = malloc ((size_t)n * sizeof (*s));
    if (!s)
        return NULL;
    memcpy (s, v, (size_t)n * sizeof (*s));
    qsort (s, n, sizeof (*s), dbl_cmp);
    return s;
}

double ft_median (const double *v, int n)
{
    double *s, m;
    if (n <= 0 || !(s = sorted (v, n)))
        return NAN;
    m = s[n / 2];
    free (s);
    return m;
}

double ft_straggler_score (double fastest, double own)
{
    if (isnan (fastest) || isnan (own) || fastest <= 0 || own <= 0)
        return NAN;
    double s = fastest / own;
    return s > 1.0 ? 1.0 : s;
}

bool ft_straggler_flag (double score, int nsamples, int window, double threshold)
{
    return !isnan (score) && nsamples >= window && score < threshold;
}

double ft_percentile (const double *v, int n, double p)
{
    double *s, x;
    if (n <= 0 || p <= 0 || p > 100 || !(s = sorted (v, n)))
        return NAN;
    int k = (int)ceil (p / 100.0 * n) - 1; /* nearest rank */
    if (k < 0)
        k = 0;
    if (k >= n)
        k = n - 1;
    x = s[k];
    free (s);
    return x;
}

int64_t ft_hang_timeout_ms (const struct ft_hang_params *p, int64_t fixed_ms,
                            double p99_ms, int nsamples, bool busy)
{
    int64_t t;
    if (fixed_ms > 0)
        t = fixed_ms;
    else {
        t = p->floor_ms;
        if (nsamples >= p->min_samples && !isnan (p99_ms) && p99_ms > 0) {
            double k = p->multiple * p99_ms;
            if (k > (double)t)
                t = k > 1e15 ? (int64_t)1e15 : (int64_t)ceil (k);
        }
    }
    if (busy) {
        double b = p->busy_multiple * (double)t;
        int64_t bt = b > 1e15 ? (int64_t)1e15 : (int64_t)b;
        return bt > p->busy_floor_ms ? bt : p->busy_floor_ms;
    }
    return t;
}

bool ft_attempt_progressed (int64_t resume_step, int64_t max_step, bool committed)
{
    if (committed)
        return true;
    return max_step > (resume_step > 0 ? resume_step : 0);
}

int ft_no_progress_streak (int streak, bool progressed)
{
    return progressed ? 0 : streak + 1;
}

enum ft_verdict ft_restart_decide (const struct ft_restart_in *in, int *nodes)
{
    int tp, pp;
    return ft_restart_replan (in, nodes, &tp, &pp);
}

/* The most nodes, from minn up to n, whose world holds whole groups of g
 * ranks; 0 when none does. */
static int fit_nodes (int n, int minn, int rpn, int g)
{
    while (g > 1 && n >= minn && ((int64_t)n * rpn) % g)
        n--;
    return n >= minn ? n : 0;
}

enum ft_verdict ft_restart_replan (const struct ft_restart_in *in, int *nodes, int *tp,
                                   int *pp)
{
    int T = in->tp > 0 ? in->tp : 1, P = in->pp > 0 ? in->pp : 1;
    *nodes = 0;
    *tp = T, *pp = P;
    if (in->no_progress_limit > 0 && in->no_progress_streak >= in->no_progress_limit)
        return FT_GIVE_UP_NO_PROGRESS;
    if (in->restarts >= in->max_restarts)
        return FT_GIVE_UP_RESTARTS;
    int n = in->nodes;
    if (in->available >= 0 && in->available < n)
        n = in->available;
    int minn = in->min_nodes > 0 ? in->min_nodes : in->nodes;
    /* keep tp x pp: drop nodes until the world holds whole groups */
    int best = fit_nodes (n, minn, in->ranks_per_node, in->tp > 0 ? T * P : in->group);
    /* else reduce the listed dimensions: the first alone, then both (the
     * outer loop, over the one listed last, keeps it largest on a tie) */
    for (int k = 0; !best && k < in->nshrink && k < 2; k++) {
        bool vt = false, vp = false;
        for (int i = 0; i <= k; i++)
            vt |= in->shrink[i] == FT_DIM_TP, vp |= in->shrink[i] == FT_DIM_PP;
        bool tp_outer = in->shrink[k] == FT_DIM_TP;
        int A = tp_outer ? T : P, B = tp_outer ? P : T;
        bool va = tp_outer ? vt : vp, vb = tp_outer ? vp : vt;
        for (int a = A; a >= 1; a--) {
            for (int b = B; b >= 1; b--) {
                if (A % a || B % b || (!va && a != A) || (!vb && b != B))
                    continue;
                int f = fit_nodes (n, minn, in->ranks_per_node, a * b);
                if (f > best)
                    best = f, *tp = tp_outer ? a : b, *pp = tp_outer ? b : a;
            }
        }
    }
    if (!best) {
        *tp = T, *pp = P;
        return FT_GIVE_UP_NO_NODES;
    }
    *nodes = best;
    return FT_RESTART;
}

const char *ft_verdict_name (enum ft_verdict v)
{
    switch (v) {
    case FT_RESTART: return "restart";
    case FT_GIVE_UP_RESTARTS: return "max_restarts";
    case FT_GIVE_UP_NO_PROGRESS: return "no_progress";
    case FT_GIVE_UP_NO_NODES: return "no_nodes";
    }
    return "?";
}

int64_t ft_backoff_ms (int restarts, int64_t base_ms, int64_t max_ms)
{
    int64_t b = base_ms;
    for (int i = 1; i < restarts && b < max_ms; i++)
        b *= 2;
    return b < max_ms ? b : max_ms;
}

/* --- node names and node health -------------------------------------------- */

bool ft_node_name_ok (const char *name)
{
    size_t n = 0;

    if (!name || !((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') ||
                   (*name >= '0' && *name <= '9')))
        return false;
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        if (n >= FT_NODE_NAME_MAX ||
            !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

bool ft_cause_is_infra (const char *cause)
{
    return cause && (!strcmp (cause, "node_lost") || !strcmp (cause, "slurm_node_fail"));
}

bool ft_node_suspect (int64_t jobs, int64_t users, int64_t jobs_threshold,
                      int64_t users_threshold)
{
    return jobs >= jobs_threshold && users >= users_threshold;
}
