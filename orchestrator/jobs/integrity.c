/* integrity.c: silent errors, the controller's side.  Ranks report at the
 * same steps (event "integrity", schemas/agent-api.md): parameter
 * fingerprints, non-finite values, loss spikes.  Once every rank of the
 * attempt reported a step, the step is judged (integritypolicy.c decides):
 * - fingerprints of the replicas of one parameter position (the report's
 *   "group") are voted on: event replica_divergence naming the odd rank
 *   and its node;
 * - a non-finite value: event nonfinite, naming the ranks whose own
 *   gradient or loss was not finite (dttrain skipped the update);
 * - a loss spike: event loss_spike, with the batch's sample positions.
 * integrity.action "rollback": the attempt ends (cause integrity_rollback)
 * and the next one resumes from the last committed checkpoint before the
 * first bad step: every committed checkpoint from that step on is marked
 * bad when the next attempt is made (integ_resume_guard).  The same steps
 * then run again: the same fault at the same step is the data's (event
 * integrity_attributed, cause data; with skip_bad_batches the step is
 * skipped by every later attempt, DT_SKIP_STEPS, after one more rollback);
 * a clean pass of the step is the hardware's (cause hardware: the suspect
 * node gets a node-health failure of kind silent_data_corruption, which
 * counts towards making it suspect, and the job excludes it).
 *
 * What a job remembers across attempts (the fault awaiting its re-run,
 * the step from which checkpoints are bad, the steps to skip) is written
 * to SQLite (table job_integrity) whenever it changes and read back when
 * the controller reloads the job, so a controller restart between a
 * rollback and its re-run still attributes the fault.
 */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/jobs/internal.h"
#include "orchestrator/jobs/integritypolicy.h"

/* Steps being collected at once per attempt: reports of a step arrive
 * within a heartbeat or two of each other; an older incomplete step (a
 * rank died before reporting it) is dropped for a newer one. */
#define INTEG_SLOTS 8

struct integ_slot {
    int64_t step; /* 0: free */
    int nrep;
    json_t **rep;     /* [world] the rank's report, NULL until it came */
    char (*node)[64]; /* [world] the node that sent it */
};

struct integ_att {
    int world;
    int64_t agreed; /* the last step whose fingerprints agreed */
    struct integ_slot slot[INTEG_SLOTS];
};

static void slot_clear (struct integ_slot *s, int world)
{
    for (int r = 0; s->rep && r < world; r++)
        json_decref (s->rep[r]);
    if (s->rep)
        memset (s->rep, 0, world * sizeof (json_t *));
    s->step = 0;
    s->nrep = 0;
}

void integ_att_free (struct attempt *att)
{
    struct integ_att *ia = att ? att->integ : NULL;
    if (!ia)
        return;
    for (int i = 0; i < INTEG_SLOTS; i++) {
        slot_clear (&ia->slot[i], ia->world);
        free (ia->slot[i].rep);
        free (ia->slot[i].node);
    }
    free (ia);
    att->integ = NULL;
}

void integ_job_free (struct job *job)
{
    if (job) {
        free (job->integ);
        job->integ = NULL;
    }
}

static struct integ_job *job_integ (struct job *job)
{
    if (!job->integ && (job->integ = calloc (1, sizeof (*job->integ))))
        job->integ->rank = -1;
    return job->integ;
}

/* Write the job's integrity state (logged on failure: the memory stays
 * right, a controller restart would lose the change). */
static int save (struct jobs *jobs, struct job *job, dt_error_t *err)
{
    json_t *o = job->integ ? integ_state_encode (job->integ) : NULL;
    if (job->integ && !o)
        return errnoprintf (err, ENOMEM, "out of memory");
    int rc = store_integ_put (jobs->ctx->store, job->row.id, o, err);
    json_decref (o);
    return rc;
}

static void save_or_log (struct jobs *jobs, struct job *job)
{
    dt_error_t err;
    if (save (jobs, job, &err) < 0)
        dt_log (LOG_ERR, "job %lld: integrity state: %s", (long long)job->row.id,
                err.text);
}

int integ_job_load (struct jobs *jobs, struct job *job, dt_error_t *err)
{
    json_t *o = store_integ_get (jobs->ctx->store, job->row.id, err);
    if (!o)
        return err->text[0] ? -1 : 0;
    struct integ_job *ij = job_integ (job);
    int rc = ij ? integ_state_decode (o, ij) : -1;
    json_decref (o);
    if (!ij)
        return errnoprintf (err, ENOMEM, "out of memory");
    if (rc < 0)
        return errnoprintf (err, EBADMSG, "job %lld: integrity state: malformed",
                            (long long)job->row.id);
    if (ij->pending)
        dt_log (LOG_INFO,
                "job %lld: %s at step %lld (attempt %d) awaits its re-run's attribution",
                (long long)job->row.id, integ_kind_name (ij->kind), (long long)ij->step,
                ij->attempt);
    return 0;
}

static struct integ_att *att_integ (struct attempt *att)
{
    struct integ_att *ia = att->integ;
    if (ia)
        return ia;
    if (!(ia = calloc (1, sizeof (*ia))))
        return NULL;
    ia->world = att->row.world_size;
    ia->agreed = att->row.resume_step > 0 ? att->row.resume_step : 0;
    for (int i = 0; i < INTEG_SLOTS; i++)
        if (!(ia->slot[i].rep = calloc (ia->world, sizeof (json_t *))) ||
            !(ia->slot[i].node = calloc (ia->world, 64))) {
            att->integ = ia;
            integ_att_free (att);
            return NULL;
        }
    att->integ = ia;
    return ia;
}

/* The slot of 'step': its own, a free one, or the oldest one's. */
static struct integ_slot *slot_for (struct integ_att *ia, int64_t step)
{
    struct integ_slot *s = NULL;
    for (int i = 0; i < INTEG_SLOTS; i++)
        if (ia->slot[i].step == step)
            return &ia->slot[i];
    for (int i = 0; i < INTEG_SLOTS; i++)
        if (!s || ia->slot[i].step < s->step)
            s = &ia->slot[i];
    slot_clear (s, ia->world);
    s->step = step;
    return s;
}

/* --- actions -------------------------------------------------------------------- */

/* Roll back: the next attempt resumes before bad_from. */
static void rollback (struct jobs *jobs, struct attempt *att, int64_t bad_from, int rank,
                      const char *detail, json_t *evidence)
{
    struct integ_job *ij = job_integ (att->job);
    if (!ij) {
        json_decref (evidence);
        return;
    }
    if (!ij->bad_from || bad_from < ij->bad_from)
        ij->bad_from = bad_from;
    save_or_log (jobs, att->job);
    jobs->integ_rollbacks++;
    char d[320];
    snprintf (d, sizeof (d),
              "%s: rolling back to the last committed checkpoint before step %lld",
              detail, (long long)bad_from);
    json_object_set_new (evidence, "bad_from", json_integer (bad_from));
    jobs_attempt_fail (jobs, att, "integrity_rollback", NULL, rank, d, evidence);
}

struct attr_arg {
    const char *cause, *node, *detail;
    int rank;
    json_t *data;
};

/* Record the attribution; for the hardware, blame the node (health) and
 * exclude it from the job's next attempts. */
static int tx_attributed (struct jobs *jobs, struct job *job, struct attempt *att,
                          void *arg, dt_error_t *err)
{
    struct attr_arg *a = arg;
    int64_t now = dt_real_ms ();

    if (store_event (jobs->ctx->store, now, job->row.id, att->row.attempt,
                     "integrity_attributed", a->node, a->rank, a->detail, a->data,
                     err) < 0 ||
        save (jobs, job, err) < 0)
        return -1;
    if (strcmp (a->cause, "hardware") || !a->node || !*a->node)
        return 0;
    if (job_blame_node (jobs, job, att, a->node, "silent_data_corruption", a->detail, now,
                        err) < 0)
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach (job->row.exclude, i,
                        v) if (!strcmp (json_string_value (v), a->node)) return 0;
    json_array_append_new (job->row.exclude, json_string (a->node));
    return store_job_update (jobs->ctx->store, &job->row, err);
}

/* The re-run decided: reproduced (the data) or not (the hardware). */
static void attribute (struct jobs *jobs, struct attempt *att, bool reproduced,
                       const json_t *batch)
{
    struct job *job = att->job;
    struct integ_job *ij = job->integ;
    const char *cause = integ_cause (reproduced);
    char d[320];
    dt_error_t err;

    ij->pending = false;
    if (reproduced)
        snprintf (d, sizeof (d),
                  "%s at step %lld reproduced by attempt %d after a rollback: the data "
                  "or the model%s",
                  integ_kind_name (ij->kind), (long long)ij->step, att->row.attempt,
                  job->spec.integ.skip_bad_batches ? "; its batch will be skipped" : "");
    else
        snprintf (d, sizeof (d),
                  "%s at step %lld not reproduced by attempt %d after a rollback: the "
                  "hardware%s%s%s",
                  integ_kind_name (ij->kind), (long long)ij->step, att->row.attempt,
                  ij->node[0] ? " of node " : "", ij->node,
                  ij->node[0] ? ", excluded from the next attempts" : "");
    json_t *data = json_pack ("{s:s s:s s:I s:i s:O?}", "cause", cause, "kind",
                              integ_kind_name (ij->kind), "step", (json_int_t)ij->step,
                              "detected_attempt", ij->attempt, "batch", batch);
    bool skip = reproduced && job->spec.integ.skip_bad_batches &&
                ij->kind != INTEG_DIVERGENCE && ij->nskip < INTEG_SKIP_MAX;
    if (skip)
        ij->skip[ij->nskip++] = ij->step;
    struct attr_arg a = { cause, ij->node[0] ? ij->node : NULL, d, ij->rank, data };
    if (transact (jobs, job, att, tx_attributed, &a, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
    else
        dt_log (LOG_WARNING, "job %lld: %s", (long long)job->row.id, d);
    json_decref (data);
    if (skip) {
        if (integ_rollback (job->spec.integ.action, true, true)) {
            snprintf (d, sizeof (d), "skipping the batch of step %lld",
                      (long long)ij->step);
            rollback (jobs, att, ij->step, -1, d,
                      json_pack ("{s:s s:I}", "kind", integ_kind_name (ij->kind),
                                 "skip_step", (json_int_t)ij->step));
        }
    }
}

/* A detection: its event, then the attribution of a pending fault or a
 * rollback. */
static void detected (struct jobs *jobs, struct attempt *att, enum integ_kind kind,
                      int64_t step, int rank, const char *node, const char *detail,
                      json_t *data, const json_t *batch)
{
    struct job *job = att->job;
    struct integ_job *ij = job_integ (job);
    dt_error_t err;

    jobs->integ_events[kind]++;
    if (jobs_note (jobs, att, integ_kind_name (kind), node, rank, detail, data, &err) < 0)
        dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
    dt_log (LOG_WARNING, "job %lld attempt %d: %s", (long long)job->row.id,
            att->row.attempt, detail);
    if (!ij)
        return;
    if (ij->pending && ij->attempt < att->row.attempt) {
        if (ij->kind == kind && ij->step == step)
            attribute (jobs, att, true, batch);
        return; /* another fault during a re-run: reported only */
    }
    if (ij->pending || !integ_rollback (job->spec.integ.action, false, false))
        return;
    ij->pending = true;
    ij->kind = kind;
    ij->step = step;
    ij->rank = rank;
    snprintf (ij->node, sizeof (ij->node), "%s", node ? node : "");
    ij->attempt = att->row.attempt;
    rollback (jobs, att,
              integ_bad_from (kind, step, att->integ ? att->integ->agreed : -1), rank,
              detail, json_incref (data));
}

/* --- judging a complete step ---------------------------------------------------- */

static bool hex32 (const json_t *v, uint32_t *out)
{
    const char *s = json_string_value (v);
    char *end;
    if (!s || strlen (s) != 8)
        return false;
    *out = (uint32_t)strtoul (s, &end, 16);
    return *end == '\0';
}

/* The names of the tensors whose CRCs differ between reports a and b. */
static json_t *tensors_differing (const json_t *a, const json_t *b)
{
    json_t *ta = json_object_get (a, "tensors"), *tb = json_object_get (b, "tensors");
    json_t *out = json_array (), *v;
    const char *name;
    json_object_foreach (ta, name, v)
    {
        json_t *w = json_object_get (tb, name);
        if (!json_equal (v, w) && json_array_size (out) < 16)
            json_array_append_new (out, json_string (name));
    }
    return out;
}

static void judge_fingerprints (struct jobs *jobs, struct attempt *att,
                                struct integ_slot *s, bool *found)
{
    struct integ_att *ia = att->integ;
    int n = ia->world;
    uint32_t *fp = calloc (n, sizeof (uint32_t)), maj;
    int *idx = calloc (n, sizeof (int)), *sus = calloc (n, sizeof (int));
    bool *done = calloc (n, sizeof (bool));

    if (!fp || !idx || !sus || !done)
        goto out;
    /* One vote per group (parameter position). */
    for (int r = 0; r < n; r++) {
        if (done[r])
            continue;
        const char *g = json_string_value (json_object_get (s->rep[r], "group"));
        int m = 0;
        for (int q = r; q < n; q++) {
            const char *h = json_string_value (json_object_get (s->rep[q], "group"));
            if (done[q] || strcmp (g ? g : "", h ? h : ""))
                continue;
            if (!hex32 (json_object_get (s->rep[q], "fingerprint"), &fp[m]))
                continue;
            done[q] = true;
            idx[m++] = q;
        }
        int ns = integ_vote (fp, m, sus, &maj);
        if (ns == 0)
            continue;
        *found = true;
        json_t *fps = json_object (), *ranks = json_array (), *nodes = json_array ();
        char maj_s[16], d[320];
        for (int i = 0; i < m; i++) {
            char k[16], v[16];
            snprintf (k, sizeof (k), "%d", idx[i]);
            snprintf (v, sizeof (v), "%08x", fp[i]);
            json_object_set_new (fps, k, json_string (v));
        }
        for (int i = 0; i < ns; i++) {
            json_array_append_new (ranks, json_integer (idx[sus[i]]));
            json_array_append_new (nodes, json_string (s->node[idx[sus[i]]]));
        }
        snprintf (maj_s, sizeof (maj_s), "%08x", maj);
        int odd = idx[sus[0]];
        int other = idx[0] == odd && m > 1 ? idx[1] : idx[0];
        json_t *tens = tensors_differing (s->rep[odd], s->rep[other]);
        if (ns == 1)
            snprintf (
              d, sizeof (d),
              "step %lld: rank %d on %s holds parameter fingerprint %08x, the "
              "other %d replicas %s (%zu tensors differ%s%s)",
              (long long)s->step, odd, s->node[odd], fp[sus[0]], m - 1, maj_s,
              json_array_size (tens), json_array_size (tens) ? ", first " : "",
              json_array_size (tens) ? json_string_value (json_array_get (tens, 0)) : "");
        else
            snprintf (
              d, sizeof (d),
              "step %lld: the %d replicas of group %s disagree on their parameter "
              "fingerprints and no majority says which is right: all suspect",
              (long long)s->step, m, g ? g : "");
        json_t *data = json_pack (
          "{s:I s:s? s:o s:s s:o s:o s:o s:I}", "step", (json_int_t)s->step, "group", g,
          "fingerprints", fps, "majority", maj_s, "suspects", ranks, "nodes", nodes,
          "tensors", tens, "last_agreed_step", (json_int_t)ia->agreed);
        detected (jobs, att, INTEG_DIVERGENCE, s->step, ns == 1 ? odd : -1,
                  ns == 1 ? s->node[odd] : NULL, d, data, NULL);
        json_decref (data);
        break; /* one event (and one rollback) per step */
    }
out:
    free (fp), free (idx), free (sus), free (done);
}

static void judge_nonfinite (struct jobs *jobs, struct attempt *att, struct integ_slot *s,
                             bool *found)
{
    int n = att->integ->world, first = -1, nsus = 0;
    const json_t *any = NULL, *batch = NULL;
    json_t *ranks = json_array ();
    for (int r = 0; r < n; r++) {
        json_t *nf = json_object_get (s->rep[r], "nonfinite");
        if (!nf)
            continue;
        if (!any) {
            any = nf;
            batch = json_object_get (s->rep[r], "batch");
        }
        if (json_is_false (json_object_get (nf, "local_grad_finite")) ||
            json_is_false (json_object_get (nf, "local_loss_finite"))) {
            json_array_append_new (ranks, json_integer (r));
            if (first < 0)
                first = r;
            nsus++;
        }
    }
    if (!any) {
        json_decref (ranks);
        return;
    }
    *found = true;
    char d[320];
    if (nsus == 1)
        snprintf (d, sizeof (d),
                  "step %lld: non-finite gradient from rank %d on %s (its own gradient "
                  "was not finite); the update was skipped",
                  (long long)s->step, first, s->node[first]);
    else
        snprintf (d, sizeof (d),
                  "step %lld: non-finite loss or gradient (%d ranks' own values not "
                  "finite); the update was skipped",
                  (long long)s->step, nsus);
    json_t *data =
      json_pack ("{s:I s:O? s:O? s:o s:O?}", "step", (json_int_t)s->step, "loss",
                 json_object_get (any, "loss"), "grad_norm",
                 json_object_get (any, "grad_norm"), "ranks", ranks, "batch", batch);
    detected (jobs, att, INTEG_NONFINITE, s->step, nsus == 1 ? first : -1,
              nsus == 1 ? s->node[first] : NULL, d, data, batch);
    json_decref (data);
}

static void judge_spike (struct jobs *jobs, struct attempt *att, struct integ_slot *s,
                         bool *found)
{
    int n = att->integ->world;
    for (int r = 0; r < n; r++) {
        json_t *sp = json_object_get (s->rep[r], "loss_spike");
        if (!sp)
            continue;
        *found = true;
        const json_t *batch = json_object_get (s->rep[r], "batch");
        char d[320];
        snprintf (d, sizeof (d),
                  "step %lld: loss spike %.4f (median %.4f, MAD %.4f over %lld steps, k "
                  "%g)",
                  (long long)s->step, json_number_value (json_object_get (sp, "loss")),
                  json_number_value (json_object_get (sp, "median")),
                  json_number_value (json_object_get (sp, "mad")),
                  (long long)json_integer_value (json_object_get (sp, "window")),
                  json_number_value (json_object_get (sp, "k")));
        json_t *data = json_pack ("{s:I s:O s:O?}", "step", (json_int_t)s->step,
                                  "loss_spike", sp, "batch", batch);
        detected (jobs, att, INTEG_SPIKE, s->step, -1, NULL, d, data, batch);
        json_decref (data);
        return;
    }
}

static void judge (struct jobs *jobs, struct attempt *att, struct integ_slot *s)
{
    struct integ_job *ij = att->job->integ;
    bool found = false, fps = true;

    for (int r = 0; r < att->integ->world; r++)
        if (!json_object_get (s->rep[r], "fingerprint"))
            fps = false;
    judge_nonfinite (jobs, att, s, &found);
    if (!found)
        judge_spike (jobs, att, s, &found);
    if (fps && att->row.state == ATT_RUNNING) {
        bool div = false;
        judge_fingerprints (jobs, att, s, &div);
        if (!div && s->step > att->integ->agreed)
            att->integ->agreed = s->step;
        found = found || div;
    }
    /* A re-run passed the faulty step cleanly: not reproduced. */
    if (!found && ij && ij->pending && ij->attempt < att->row.attempt &&
        s->step >= ij->step && att->row.state == ATT_RUNNING)
        attribute (jobs, att, false, NULL);
}

/* --- the interface -------------------------------------------------------------- */

int jobs_integrity (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                    int64_t step, const json_t *report, dt_error_t *err)
{
    struct integ_att *ia;
    json_t *v;

    if (rank < 0 || rank >= att->row.world_size)
        return errnoprintf (err, EINVAL, "rank: %d is outside the world (size %d)", rank,
                            att->row.world_size);
    if (!json_is_object (report))
        return errnoprintf (err, EINVAL, "report: expected object");
    uint32_t fp;
    if ((v = json_object_get (report, "fingerprint")) && !hex32 (v, &fp))
        return errnoprintf (err, EINVAL, "report.fingerprint: expected 8 hex digits");
    if ((v = json_object_get (report, "group")) && !json_is_string (v))
        return errnoprintf (err, EINVAL, "report.group: expected string");
    if (att->row.state != ATT_RUNNING && att->row.state != ATT_STARTING)
        return 0; /* an ending attempt's late reports judge nothing */
    if (!(ia = att_integ (att)))
        return errnoprintf (err, ENOMEM, "out of memory");
    struct integ_slot *s = slot_for (ia, step);
    if (!s->rep[rank])
        s->nrep++;
    json_decref (s->rep[rank]);
    s->rep[rank] = json_deep_copy (report);
    snprintf (s->node[rank], 64, "%s", node);
    if (s->nrep == ia->world) {
        judge (jobs, att, s);
        if (att->integ)
            slot_clear (s, ia->world);
    }
    return 0;
}

int jobs_integrity_ready (struct attempt *att, json_t *ans)
{
    const struct job_spec *js = &att->job->spec;
    const struct integ_job *ij = att->job->integ;
    int rc = 0;

    if (!js->integ.action)
        return 0; /* a spec from before integrity: the trainer's defaults */
    rc |= json_object_set_new (ans, "integrity_every_steps",
                               json_integer (js->integ.every_steps));
    rc |= json_object_set_new (ans, "integrity_spike_k", json_real (js->integ.spike_k));
    rc |= json_object_set_new (ans, "integrity_spike_window",
                               json_integer (js->integ.spike_window));
    if (ij && ij->nskip > 0) {
        char buf[INTEG_SKIP_MAX * 21 + 1] = "";
        size_t len = 0;
        for (int i = 0; i < ij->nskip; i++)
            len += snprintf (buf + len, sizeof (buf) - len, "%s%lld", i ? "," : "",
                             (long long)ij->skip[i]);
        rc |= json_object_set_new (ans, "skip_steps", json_string (buf));
    }
    return rc ? -1 : 0;
}

int integ_resume_guard (struct jobs *jobs, struct job *job, int attempt, dt_error_t *err)
{
    struct integ_job *ij = job->integ;
    int64_t *steps = NULL;
    int n = 0;

    if (!ij || !ij->bad_from)
        return 0;
    if (store_ckpt_beyond_keep (jobs->ctx->store, job->row.id, 0, &steps, &n, err) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char d[200];
        if (steps[i] < ij->bad_from)
            continue;
        snprintf (d, sizeof (d),
                  "checkpoint of step %lld is bad: taken at or after step %lld, the "
                  "first step an integrity fault may have touched",
                  (long long)steps[i], (long long)ij->bad_from);
        json_t *data = json_pack ("{s:I s:I}", "step", (json_int_t)steps[i], "bad_from",
                                  (json_int_t)ij->bad_from);
        int rc = store_ckpt_set_state (jobs->ctx->store, job->row.id, steps[i], "bad",
                                       NULL, 0, err);
        if (rc == 0)
            rc = store_event (jobs->ctx->store, dt_real_ms (), job->row.id, attempt,
                              "checkpoint_bad", NULL, -1, d, data, err);
        json_decref (data);
        if (rc < 0) {
            free (steps);
            return -1;
        }
    }
    free (steps);
    ij->bad_from = 0;
    return save (jobs, job, err);
}
