/* integritypolicy.h: the controller's integrity decisions, pure (no I/O, no
 * clock): which replica of a parameter position holds the odd fingerprint,
 * from which step on checkpoints are suspect, and what a re-run after a
 * rollback says about the cause (integrity.c applies them).
 */
#ifndef DT_JOBS_INTEGRITYPOLICY_H
#define DT_JOBS_INTEGRITYPOLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

/* What a detection is. */
enum integ_kind {
    INTEG_DIVERGENCE = 0, /* replicas' parameter fingerprints differ */
    INTEG_NONFINITE = 1,  /* NaN or Inf in the loss or the gradient norm */
    INTEG_SPIKE = 2,      /* loss above median + k MAD of its window */
};

/* Steps a job skips at most (skip_bad_batches). */
#define INTEG_SKIP_MAX 64

/* What the controller remembers about a job across its attempts, and
 * across its own restarts (kept in SQLite, table job_integrity). */
struct integ_job {
    /* A fault that caused a rollback, awaiting its re-run. */
    bool pending;
    enum integ_kind kind;
    int64_t step;                 /* the step it was seen at */
    int rank;                     /* the sole suspect, -1 none */
    char node[64];                /* its node, "" none */
    int attempt;                  /* the attempt that saw it */
    int64_t bad_from;             /* checkpoints from this step on are bad; 0 none */
    int64_t skip[INTEG_SKIP_MAX]; /* steps whose batches are skipped */
    int nskip;
};

/* ij as a JSON object (new; NULL: out of memory):
 * {"pending": {"kind", "step", "rank", "node", "attempt"} (only when
 * pending), "bad_from", "skip": [steps]}. */
json_t *integ_state_encode (const struct integ_job *ij);

/* The reverse, into ij (zeroed first): 0, or -1 when o is not such an
 * object (ij left zeroed: nothing pending). */
int integ_state_decode (const json_t *o, struct integ_job *ij);

/* The event kind of a detection: "replica_divergence", "nonfinite",
 * "loss_spike" (static text). */
const char *integ_kind_name (enum integ_kind k);

/* Compare the fingerprints fp[0..n) of the n replicas of one parameter
 * position.  Returns how many are suspect, their indexes in suspects[]
 * (room for n), and in *majority the value most hold: 0 when all agree.
 * With three or more replicas the value held by a strict majority wins
 * and the others are suspect; without a strict majority, and with two
 * replicas that differ, every replica is suspect (nothing says which one
 * is right). */
int integ_vote (const uint32_t *fp, int n, int *suspects, uint32_t *majority);

/* The first step whose state is suspect, so every checkpoint of that step
 * or later is bad: a divergence seen at a check is known to be absent at
 * the last step where fingerprints agreed ('agreed'; the resume step when
 * none in this attempt), so it entered after it; a non-finite value or a
 * spike is in step 'step' itself. */
int64_t integ_bad_from (enum integ_kind k, int64_t step, int64_t agreed);

/* After a rollback the same steps run again.  The fault is reproduced
 * when the same kind is detected at the same step; it is not when a later
 * complete check passes the step cleanly.  The cause then: reproduced ->
 * "data" (the data or the model: it follows the batch), not -> "hardware"
 * (it followed the machine). */
const char *integ_cause (bool reproduced);

/* The action on a detection: roll back (true) or only report.  A rollback
 * happens for the first detection of a fault (action "rollback"), and
 * again for a reproduced data fault whose batch is to be skipped. */
bool integ_rollback (const char *action, bool reproduced, bool skip_bad_batches);

#endif
