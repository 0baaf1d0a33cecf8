/* straggler.c: straggler detection: each rank's median compute time over a
 * window of steps, its score against the fastest rank (ftpolicy.c), a
 * "straggler" event when flagged, and the exclusion policy.
 */
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/jobs/internal.h"
#include "orchestrator/jobs/stragglerpolicy.h"

int straggler_window (struct job *job)
{
    return straggler_window_steps (job->spec.straggler.window_steps);
}

/* Straggler scores (fastest median / own median, over a full window;
 * fastest: straggler_fastest's, from the pass's sweep),
 * a "straggler" event for each newly flagged rank, and the exclusion
 * of the first one when straggler.action is "exclude". */
void straggler_pass (struct jobs *jobs, struct attempt *att, double fastest)
{
    struct job *job = att->job;
    int window = straggler_window (job);
    double threshold = job->spec.straggler.threshold;

    int flagged_rank = -1, nflagged = 0;
    for (int r = 0; r < att->row.world_size && !isnan (fastest); r++) {
        struct rank *rk = &att->ranks[r];
        nflagged += rk->flagged;
        double m = straggler_median (rk);
        double score = ft_straggler_score (fastest, m);
        if (isnan (score))
            continue;
        rk->score = score;
        if (ft_straggler_flag (rk->score, rk->nring, window, threshold) && !rk->flagged) {
            char detail[128];
            dt_error_t err;
            rk->flagged = true;
            nflagged++;
            snprintf (detail, sizeof (detail),
                      "rank %d is a straggler: score %.2f < %.2f", r, rk->score,
                      threshold);
            json_t *data =
              json_pack ("{s:f s:f s:f s:i s:s}", "score", rk->score, "median_compute_ms",
                         m, "fastest_median_compute_ms", fastest, "window_steps", window,
                         "action", job->spec.straggler.action);
            if (jobs_note (jobs, att, "straggler", rk->node, r, detail, data, &err) < 0)
                dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
            json_decref (data);
            if (flagged_rank < 0)
                flagged_rank = r;
        }
    }
    if (!isnan (fastest))
        att->nflagged = nflagged;
    /* straggler.action exclude: checkpoint now, restart without its node
     * (only when another node is left to run on). */
    const char *action = job->spec.straggler.action;
    if (straggler_exclude (action, flagged_rank, att->stopping, att->row.num_nodes)) {
        char detail[160];
        snprintf (detail, sizeof (detail),
                  "straggler rank %d on %s excluded (score %.2f)", flagged_rank,
                  att->ranks[flagged_rank].node, att->ranks[flagged_rank].score);
        attempt_stop (jobs, att, "straggler_excluded", att->ranks[flagged_rank].node,
                      flagged_rank, detail);
    }
}
