/* ckptpolicy.c: checkpoint decisions (see ckptpolicy.h). */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/jobs/ckptpolicy.h"

int64_t ckpt_lookahead_steps (int64_t start_ms, int64_t now, int64_t resume_step,
                              int64_t max_step, int64_t hb_ms)
{
    double steps_per_ms = 0;
    if (start_ms > 0 && max_step > 0) {
        int64_t dt = now - start_ms;
        int64_t ds = max_step - (resume_step > 0 ? resume_step : 0);
        if (dt > 0 && ds > 0)
            steps_per_ms = (double)ds / dt;
    }
    int64_t la = (int64_t)ceil (steps_per_ms * 2 * hb_ms) + 1;
    return la < 2 ? 2 : la;
}

int64_t ckpt_periodic_step (int64_t max_step, int64_t lookahead, int64_t every)
{
    int64_t target = max_step + lookahead;
    return (target + every - 1) / every * every;
}

bool ckpt_step_abandoned (int64_t cmd_step, int64_t min_step)
{
    return cmd_step > 0 && min_step > cmd_step;
}

int jit_set_add (struct jit_set *js, int world, int need, const char *node,
                 int shard_rank, int64_t step, int64_t bytes, const char *crc32c)
{
    struct jit_shard *sh;
    if (!js->shards && !(js->shards = calloc (need, sizeof (*js->shards)))) {
        errno = ENOMEM;
        return -1;
    }
    if (js->step != step) {
        memset (js->shards, 0, need * sizeof (*js->shards));
        js->step = step;
        js->nhave = 0;
    }
    snprintf (js->node, sizeof (js->node), "%s", node);
    sh = &js->shards[jit_shard_index (world, need, shard_rank)];
    if (!sh->got)
        js->nhave++;
    sh->got = true;
    sh->bytes = bytes;
    snprintf (sh->crc32c, sizeof (sh->crc32c), "%s", crc32c);
    return js->nhave >= need ? 1 : 0;
}

int jit_shard_index (int world, int need, int shard_rank)
{
    return shard_rank / (world / need);
}

bool jit_set_needed (int64_t jit_step, bool have_latest, int64_t latest, int64_t step)
{
    return !(jit_step > 0 || (have_latest && step <= latest));
}

int jit_cover (const struct jit_set *sets, int world, int group, int64_t step, int *pick)
{
    int covered = 0;
    for (int p = 0; p < group; p++) {
        pick[p] = -1;
        for (int r = p; sets && r < world && pick[p] < 0; r += group)
            if (sets[r].shards && sets[r].step == step && sets[r].nhave >= world / group)
                pick[p] = r;
        covered += pick[p] >= 0;
    }
    return covered;
}
