/* stragglerpolicy.c: straggler scores (see stragglerpolicy.h). */
#include <config.h>
#include <math.h>
#include <string.h>

#include "orchestrator/jobs/stragglerpolicy.h"

int straggler_window_steps (int window)
{
    return window > STRAGGLER_RING ? STRAGGLER_RING : window < 1 ? 1 : window;
}

void straggler_sample (struct rank *rk, int window)
{
    if (isnan (rk->compute_ms) || rk->step <= rk->ring_step)
        return;
    if (rk->ring_pos >= window)
        rk->ring_pos = 0;
    rk->ring[rk->ring_pos] = rk->compute_ms;
    rk->ring_pos = (rk->ring_pos + 1) % window;
    if (rk->nring < window)
        rk->nring++;
    rk->ring_step = rk->step;
    rk->median_stale = true;
    straggler_median (rk);
}

/* A selection, not a sort (Hoare's). */
double straggler_median (struct rank *rk)
{
    if (rk->median_stale) {
        double v[STRAGGLER_RING];
        int n = rk->nring, k = n / 2, lo = 0, hi = n - 1;
        memcpy (v, rk->ring, n * sizeof (*v));
        while (lo < hi) {
            double piv = v[(lo + hi) / 2];
            int i = lo, j = hi;
            while (i <= j) {
                while (v[i] < piv)
                    i++;
                while (v[j] > piv)
                    j--;
                if (i <= j) {
                    double t = v[i];
                    v[i++] = v[j];
                    v[j--] = t;
                }
            }
            if (k <= j)
                hi = j;
            else if (k >= i)
                lo = i;
            else
                break;
        }
        rk->median = n > 0 ? v[k] : NAN;
        rk->median_stale = false;
    }
    return rk->median;
}

double straggler_fastest_with (double fastest, struct rank *rk)
{
    double m = straggler_median (rk);
    return !isnan (m) && m > 0 && (isnan (fastest) || m < fastest) ? m : fastest;
}

double straggler_fastest (struct rank *ranks, int n)
{
    double fastest = NAN;
    for (int r = 0; r < n; r++)
        fastest = straggler_fastest_with (fastest, &ranks[r]);
    return fastest;
}

bool straggler_exclude (const char *action, int flagged_rank, bool stopping,
                        int num_nodes)
{
    return flagged_rank >= 0 && action && !strcmp (action, "exclude") && !stopping &&
           num_nodes > 1;
}
