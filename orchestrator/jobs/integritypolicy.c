/* integritypolicy.c: the controller's integrity decisions (see
 * integritypolicy.h). */
#include <config.h>
#include <string.h>

#include "orchestrator/jobs/integritypolicy.h"

const char *integ_kind_name (enum integ_kind k)
{
    switch (k) {
    case INTEG_DIVERGENCE: return "replica_divergence";
    case INTEG_NONFINITE: return "nonfinite";
    case INTEG_SPIKE: return "loss_spike";
    }
    return "?";
}

int integ_vote (const uint32_t *fp, int n, int *suspects, uint32_t *majority)
{
    int best = 0, ns = 0;
    uint32_t val = n > 0 ? fp[0] : 0;

    /* The most frequent value (n is a replica count: quadratic is fine). */
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int j = 0; j < n; j++)
            c += fp[j] == fp[i];
        if (c > best) {
            best = c;
            val = fp[i];
        }
    }
    *majority = val;
    if (best == n)
        return 0;
    bool strict = n >= 3 && 2 * best > n;
    for (int i = 0; i < n; i++)
        if (!strict || fp[i] != val)
            suspects[ns++] = i;
    return ns;
}

int64_t integ_bad_from (enum integ_kind k, int64_t step, int64_t agreed)
{
    if (k == INTEG_DIVERGENCE)
        return agreed >= 0 && agreed < step ? agreed + 1 : step;
    return step;
}

const char *integ_cause (bool reproduced)
{
    return reproduced ? "data" : "hardware";
}

bool integ_rollback (const char *action, bool reproduced, bool skip_bad_batches)
{
    if (!action || strcmp (action, "rollback"))
        return false;
    return !reproduced || skip_bad_batches;
}
