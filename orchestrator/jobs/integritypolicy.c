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

json_t *integ_state_encode (const struct integ_job *ij)
{
    json_t *skip = json_array ();
    for (int i = 0; skip && i < ij->nskip; i++)
        json_array_append_new (skip, json_integer (ij->skip[i]));
    json_t *pend = NULL;
    if (ij->pending)
        pend = json_pack ("{s:s s:I s:i s:s s:i}", "kind", integ_kind_name (ij->kind),
                          "step", (json_int_t)ij->step, "rank", ij->rank, "node",
                          ij->node, "attempt", ij->attempt);
    if (!skip || (ij->pending && !pend)) {
        json_decref (skip);
        return NULL;
    }
    return json_pack ("{s:o* s:I s:o}", "pending", pend, "bad_from",
                      (json_int_t)ij->bad_from, "skip", skip);
}

int integ_state_decode (const json_t *o, struct integ_job *ij)
{
    json_t *pend = NULL, *skip = NULL, *v;
    json_int_t bad_from = 0, step = 0;
    const char *kind = NULL, *node = NULL;
    size_t i;

    memset (ij, 0, sizeof (*ij));
    ij->rank = -1;
    if (json_unpack ((json_t *)o, "{s?o s?I s?o}", "pending", &pend, "bad_from",
                     &bad_from, "skip", &skip) < 0 ||
        bad_from < 0 || (skip && !json_is_array (skip)) ||
        json_array_size (skip) > INTEG_SKIP_MAX)
        goto bad;
    if (pend && !json_is_null (pend)) {
        if (json_unpack (pend, "{s:s s:I s:i s:s s:i}", "kind", &kind, "step", &step,
                         "rank", &ij->rank, "node", &node, "attempt", &ij->attempt) < 0 ||
            strlen (node) >= sizeof (ij->node))
            goto bad;
        int k = 0;
        while (k <= INTEG_SPIKE && strcmp (kind, integ_kind_name ((enum integ_kind)k)))
            k++;
        if (k > INTEG_SPIKE)
            goto bad;
        ij->pending = true;
        ij->kind = (enum integ_kind)k;
        ij->step = step;
        strcpy (ij->node, node);
    }
    ij->bad_from = bad_from;
    json_array_foreach (skip, i, v)
    {
        if (!json_is_integer (v))
            goto bad;
        ij->skip[ij->nskip++] = json_integer_value (v);
    }
    return 0;
bad:
    memset (ij, 0, sizeof (*ij));
    ij->rank = -1;
    return -1;
}
