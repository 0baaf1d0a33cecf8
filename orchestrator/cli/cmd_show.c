/* cmd_show.c: dtctl show: one job's state, attempts, restarts, checkpoints,
 * stragglers, silent errors and communication, as tables. */
#include <config.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

static void print_kv_object (const json_t *obj, int indent)
{
    const char *key;
    json_t *v;

    json_object_foreach ((json_t *)obj, key, v)
    {
        char buf[512];
        if (json_is_object (v) && json_object_size (v) > 0) {
            printf ("%*s%s:\n", indent, "", key);
            print_kv_object (v, indent + 2);
        }
        else if (json_is_array (v) && strstr (key, "command")) {
            /* A command line reads best as the shell would show it. */
            size_t i;
            json_t *a;
            printf ("%*s%s:", indent, "", key);
            json_array_foreach (v, i, a)
              printf (" %s", jfmt (a, NULL, buf, sizeof (buf)));
            printf ("\n");
        }
        else if (json_is_array (v) && json_array_size (v) > 8) {
            /* Long series (e.g. losses) shortened to first and last. */
            size_t n = json_array_size (v);
            char a[64], b[64];
            printf ("%*s%s: [%zu values: %s ... %s]\n", indent, "", key, n,
                    jfmt (json_array_get (v, 0), NULL, a, sizeof (a)),
                    jfmt (json_array_get (v, n - 1), NULL, b, sizeof (b)));
        }
        else
            printf ("%*s%s: %s\n", indent, "", key, jfmt (v, "%.6g", buf, sizeof (buf)));
    }
}

static void show_job_header (const json_t *job)
{
    char b[8][256];
    const json_t *spec = jget (job, "spec");
    const char *reason = json_string_value (jget (job, "reason"));
    char *cmdline = NULL;
    size_t n = 0;
    size_t i;
    json_t *a;
    FILE *m = open_memstream (&cmdline, &n);

    json_array_foreach (jget (spec, "command"), i, a) fprintf (
      m, "%s%s", i ? " " : "", json_string_value (a) ? json_string_value (a) : "?");
    fclose (m);

    printf (
      "Job %s %s  user=%s  state=%s%s%s%s\n", jtext (job, "id", b[0], sizeof (b[0])),
      jtext (job, "name|spec.name", b[1], sizeof (b[1])),
      cmd_user_of (job, b[2], sizeof (b[2])), jtext (job, "state", b[3], sizeof (b[3])),
      reason ? " (" : "", reason ? reason : "", reason ? ")" : "");
    printf ("  Submitted %s  Started %s  Ended %s\n",
            fmt_when (job, "submit_time", b[0], sizeof (b[0])),
            fmt_when (job, "start_time", b[1], sizeof (b[1])),
            fmt_when (job, "end_time", b[2], sizeof (b[2])));
    printf ("  Nodes %s (+%s spare)  Ranks/node %s  Partition %s  Time limit %s\n",
            jtext (spec, "nodes", b[0], sizeof (b[0])),
            jtext (spec, "spare_nodes", b[1], sizeof (b[1])),
            jtext (spec, "ranks_per_node", b[2], sizeof (b[2])),
            jtext (spec, "partition", b[3], sizeof (b[3])),
            jtext (spec, "time_limit", b[4], sizeof (b[4])));
    printf ("  Command %s\n", cmdline && *cmdline ? cmdline : "-");
    printf ("  Workdir %s  Checkpoints %s every %s steps (keep %s)\n",
            jtext (spec, "workdir", b[0], sizeof (b[0])),
            jtext (spec, "checkpoint.dir", b[1], sizeof (b[1])),
            jtext (spec, "checkpoint.every_steps", b[2], sizeof (b[2])),
            jtext (spec, "checkpoint.keep", b[3], sizeof (b[3])));
    printf (
      "  Attempt %s  Restarts %s (max %s)  Step %s  Loss %s  Throughput %s samples/s  "
      "Last checkpoint %s\n",
      jtext (job, "attempt", b[0], sizeof (b[0])),
      jtext (job, "restarts", b[1], sizeof (b[1])),
      jtext (spec, "restart.max_restarts", b[2], sizeof (b[2])),
      jtext (job, "step", b[3], sizeof (b[3])),
      jfmt (jget (job, "loss"), "%.6g", b[4], sizeof (b[4])),
      jfmt (jget (job, "throughput"), "%.1f", b[5], sizeof (b[5])),
      jtext (job, "last_checkpoint", b[6], sizeof (b[6])));
    free (cmdline);
    if (jget (job, "failure")) {
        const json_t *f = jget (job, "failure");
        printf ("  Failure %s  node=%s  rank=%s  at %s  %s\n",
                jtext (f, "cause", b[0], sizeof (b[0])),
                jtext (f, "node", b[1], sizeof (b[1])),
                jtext (f, "rank", b[2], sizeof (b[2])),
                fmt_when (f, "time", b[3], sizeof (b[3])),
                jtext (f, "detail", b[4], sizeof (b[4])));
    }
}

/* An attempt's layout as "tp2 pp1 dp2" ("-" when not recorded). */
static const char *fmt_layout (const json_t *a, char *buf, size_t len)
{
    const json_t *l = jget (a, "layout");
    if (!json_is_object (l))
        return "-";
    snprintf (buf, len, "tp%lld pp%lld dp%lld",
              (long long)json_integer_value (json_object_get (l, "tp")),
              (long long)json_integer_value (json_object_get (l, "pp")),
              (long long)json_integer_value (json_object_get (l, "dp")));
    return buf;
}

static void show_attempts (const json_t *job)
{
    static const char *const hdr[] = {
        "ATTEMPT", "STATE", "CAUSE", "NODE",  "RANK",   "SLURM_JOB", "RESTART",
        "RESUMED", "START", "END",   "NODES", "LAYOUT", "MFU",       "DETAIL",
    };
    json_t *attempts = jget (job, "attempts");
    struct table *t;
    size_t i;
    json_t *a;

    if (json_array_size (attempts) == 0)
        return;
    printf ("\nAttempts:\n");
    t = table_create (14, hdr);
    json_array_foreach (attempts, i, a)
    {
        char b[14][256];
        const json_t *mfu = jget (a, "mfu");
        snprintf (b[13], sizeof (b[13]), json_is_number (mfu) ? "%.1f%%" : "-",
                  100 * json_number_value (mfu));
        json_int_t sj = json_integer_value (jget (a, "slurm_job_id"));
        const char *row[] = {
            jtext (a, "attempt", b[0], sizeof (b[0])),
            jtext (a, "state", b[1], sizeof (b[1])),
            jtext (a, "cause", b[2], sizeof (b[2])),
            jtext (a, "cause_node", b[3], sizeof (b[3])),
            jtext (a, "cause_rank", b[4], sizeof (b[4])),
            sj > 0 ? jtext (a, "slurm_job_id", b[5], sizeof (b[5]))
                   : jtext (a, "handle", b[5], sizeof (b[5])),
            jtext (a, "restart_path", b[11], sizeof (b[11])),
            jtext (a, "resume_step", b[6], sizeof (b[6])),
            fmt_when (a, "start_time|submit_time", b[7], sizeof (b[7])),
            fmt_when (a, "end_time", b[8], sizeof (b[8])),
            jtext (a, "nodes", b[9], sizeof (b[9])),
            fmt_layout (a, b[12], sizeof (b[12])),
            b[13],
            jtext (a, "detail", b[10], sizeof (b[10])),
        };
        table_add (t, row);
    }
    table_print (t, stdout, 2);
}

static int cmp_str (const void *a, const void *b)
{
    return strcmp (*(const char *const *)a, *(const char *const *)b);
}

/* A numerics identity in one line: its members as name=value, sorted,
 * without pin_env. */
static const char *fmt_numerics (const json_t *n, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    size_t at = 0;
    const char *keys[64];
    size_t nk = 0;

    buf[0] = '\0';
    json_object_foreach ((json_t *)n, k, v)
    {
        if (strcmp (k, "pin_env") && nk < 64)
            keys[nk++] = k;
    }
    qsort (keys, nk, sizeof (keys[0]), cmp_str);
    for (size_t i = 0; i < nk && at < len; i++) {
        const json_t *x = json_object_get (n, keys[i]);
        char *t = json_is_string (x) ? NULL : json_dumps (x, JSON_ENCODE_ANY);
        int w = snprintf (buf + at, len - at, "%s%s=%s", at ? " " : "", keys[i],
                          json_is_string (x) ? json_string_value (x)
                          : t                ? t
                                             : "?");
        free (t);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    return buf;
}

/* What each attempt computed with, against the job's pinned numerics (its
 * first attempt's): bit-identity with an uninterrupted run holds up to the
 * attempt before the first that computed otherwise. */
static void show_numerics (const json_t *job)
{
    const json_t *pin = jget (job, "numerics");
    json_int_t from = json_integer_value (jget (job, "numerics_changed_from"));
    size_t i;
    json_t *a;
    char b[1024];

    if (!json_is_object (pin))
        return;
    printf ("\nNumerics (pinned: the first attempt's):\n  %s\n",
            fmt_numerics (pin, b, sizeof (b)));
    json_array_foreach (jget (job, "attempts"), i, a)
    {
        const json_t *n = jget (a, "numerics");
        if (!json_is_object (n) || json_equal ((json_t *)n, (json_t *)pin))
            continue;
        printf ("  attempt %lld computed otherwise%s: %s\n",
                (long long)json_integer_value (jget (a, "attempt")),
                !strcmp (json_string_value (jget (a, "cause")) ?: "", "numerics_changed")
                  ? " (refused: numerics strict)"
                  : "",
                fmt_numerics (n, b, sizeof (b)));
    }
    if (from > 0)
        printf ("  numerics changed from attempt %lld on: the parameters are no longer "
                "bit-identical to an uninterrupted run's\n",
                (long long)from);
    else
        printf ("  every attempt computed with these: a resume is bit-identical to an "
                "uninterrupted run\n");
}

static void show_checkpoints (const json_t *ckpts)
{
    static const char *const hdr[] = {
        "STEP", "ATTEMPT", "STATE", "SHARDS", "BYTES", "COMMITTED", "DIR",
    };
    struct table *t;
    size_t i;
    json_t *k;

    if (json_array_size (ckpts) == 0)
        return;
    printf ("\nCheckpoints:\n");
    t = table_create (7, hdr);
    json_array_foreach (ckpts, i, k)
    {
        char b[7][512];
        const char *row[] = {
            jtext (k, "step", b[0], sizeof (b[0])),
            jtext (k, "attempt", b[1], sizeof (b[1])),
            jtext (k, "state", b[2], sizeof (b[2])),
            jtext (k, "shards", b[3], sizeof (b[3])),
            jtext (k, "bytes", b[4], sizeof (b[4])),
            fmt_when (k, "commit_time", b[5], sizeof (b[5])),
            jtext (k, "dir", b[6], sizeof (b[6])),
        };
        table_add (t, row);
    }
    table_print (t, stdout, 2);
}

static void show_stragglers (const json_t *job)
{
    static const char *const hdr[] = { "RANK", "NODE", "SCORE" };
    json_t *s = jget (job, "stragglers");
    struct table *t;
    size_t i;
    json_t *r;

    if (json_array_size (s) == 0)
        return;
    printf ("\nStragglers:\n");
    t = table_create (3, hdr);
    json_array_foreach (s, i, r)
    {
        char b[3][64];
        const char *row[] = {
            jtext (r, "rank", b[0], sizeof (b[0])),
            jtext (r, "node", b[1], sizeof (b[1])),
            jfmt (jget (r, "score"), "%.3f", b[2], sizeof (b[2])),
        };
        table_add (t, row);
    }
    table_print (t, stdout, 2);
}

/* Silent errors (dtctl-job(5), integrity): detections, rollbacks,
 * attributions, from the job's events. */
static void show_integrity (const json_t *events)
{
    static const char *const hdr[] = {
        "ATTEMPT", "KIND", "STEP", "RANK", "NODE", "DETAIL"
    };
    static const char *const kinds[] = { "replica_divergence", "nonfinite", "loss_spike",
                                         "integrity_attributed", NULL };
    struct table *t = NULL;
    size_t i;
    json_t *e;

    json_array_foreach (events, i, e)
    {
        const char *k = json_string_value (jget (e, "kind"));
        bool want = false;
        for (int j = 0; k && kinds[j]; j++)
            want = want || !strcmp (k, kinds[j]);
        if (!want)
            continue;
        if (!t) {
            printf ("\nIntegrity:\n");
            t = table_create (6, hdr);
        }
        char b[6][512];
        const char *row[] = {
            jtext (e, "attempt", b[0], sizeof (b[0])),
            k,
            jtext (e, "data.step", b[2], sizeof (b[2])),
            jtext (e, "rank", b[3], sizeof (b[3])),
            jtext (e, "node", b[4], sizeof (b[4])),
            jtext (e, "detail", b[5], sizeof (b[5])),
        };
        table_add (t, row);
    }
    if (t)
        table_print (t, stdout, 2);
}

/* The running attempt's communication figures (the comm_bound warning). */
static void show_comm (const json_t *job)
{
    const json_t *c = jget (job, "comm"), *mfu;
    char m[48] = "";
    if (!json_is_object (c))
        return;
    mfu = jget (c, "mfu");
    if (json_is_number (mfu))
        snprintf (m, sizeof (m), ", MFU %.1f%%", 100 * json_number_value (mfu));
    printf ("\nCommunication: exposed share %.1f%% (threshold %.0f%% over %lld steps), "
            "compute spread between ranks %.1f%%%s%s\n",
            100 * json_number_value (jget (c, "exposed_share")),
            100 * json_number_value (jget (c, "threshold")),
            (long long)json_integer_value (jget (c, "window_steps")),
            100 * json_number_value (jget (c, "compute_spread")), m,
            json_is_true (jget (c, "comm_bound"))
              ? "\n  COMM-BOUND: most of the step time is communication wait "
                "(event comm_bound)"
              : "");
    const json_t *d = jget (c, "dims");
    if (!json_is_object (d))
        return;
    printf ("  per dimension (mean over ranks, last step):\n");
    printf ("    %-4s %12s %10s %12s\n", "dim", "MiB", "comm ms", "exposed ms");
    static const char *const name[] = { "tp", "pp", "dp" };
    for (int k = 0; k < 3; k++) {
        const json_t *x = jget (d, name[k]);
        printf ("    %-4s %12.3f %10.2f %12.2f\n", name[k],
                json_number_value (jget (x, "bytes")) / 1048576.0,
                json_number_value (jget (x, "comm_ms")),
                json_number_value (jget (x, "exposed_ms")));
    }
}

/* Each attempt's communication per parallel dimension, kept after it
 * ended (the attempts' comm_dims): the means per step. */
static void show_comm_dims (const json_t *job)
{
    static const char *const hdr[] = { "ATTEMPT", "DIM",     "STEPS",
                                       "MIB",     "COMM_MS", "EXPOSED_MS" };
    static const char *const name[] = { "tp", "pp", "dp" };
    struct table *t = NULL;
    size_t i;
    json_t *a;

    json_array_foreach (jget (job, "attempts"), i, a)
    {
        const json_t *cd = jget (a, "comm_dims");
        if (!json_is_object (cd))
            continue;
        if (!t && !(t = table_create (6, hdr)))
            return;
        for (int k = 0; k < 3; k++) {
            const json_t *x = jget (cd, name[k]);
            char b[6][48];
            jtext (a, "attempt", b[0], sizeof (b[0]));
            jtext (cd, "steps", b[2], sizeof (b[2]));
            snprintf (b[3], sizeof (b[3]), "%.3f",
                      json_number_value (jget (x, "bytes")) / 1048576.0);
            snprintf (b[4], sizeof (b[4]), "%.2f",
                      json_number_value (jget (x, "comm_ms")));
            snprintf (b[5], sizeof (b[5]), "%.2f",
                      json_number_value (jget (x, "exposed_ms")));
            const char *row[] = { b[0], name[k], b[2], b[3], b[4], b[5] };
            table_add (t, row);
        }
    }
    if (!t)
        return;
    printf ("\nCommunication per dimension (per step: mean over the ranks and the steps "
            "sampled):\n");
    table_print (t, stdout, 2);
}

/* The event of 'kind' of attempt 'att' in 'events' (borrowed), or NULL. */
static json_t *attempt_event (const json_t *events, json_int_t att, const char *kind)
{
    size_t i;
    json_t *e;
    json_array_foreach (events, i, e)
    {
        const char *k = json_string_value (jget (e, "kind"));
        if (json_integer_value (jget (e, "attempt")) == att && k && !strcmp (k, kind))
            return e;
    }
    return NULL;
}

/* Each restart's path, backoff, and time from the failure (first seen) to
 * its first step past the resume point ("-": an event is not listed); a
 * re-formed attempt's phases from its events (the decision after the
 * failure was first seen; every agent registered again after it). */
static void show_restarts (const json_t *job, const json_t *events)
{
    static const char *const hdr[] = { "ATTEMPT", "PATH",    "AFTER",
                                       "BACKOFF", "TO_STEP", "PHASES" };
    json_t *atts = jget (job, "attempts");
    struct table *t = NULL;

    for (size_t i = 1; i < json_array_size (atts); i++) {
        const json_t *prev = json_array_get (atts, i - 1), *a = json_array_get (atts, i);
        json_int_t n = json_integer_value (jget (a, "attempt"));
        json_t *sub = attempt_event (events, n, "attempt_submitted");
        json_t *first = attempt_event (events, n, "first_step");
        int64_t fail = jtime_ms (jget (prev, "fail_time"));
        int64_t fs = first ? jtime_ms (jget (first, "time")) : -1;
        json_t *bo = sub ? jget (sub, "data.backoff_ms") : NULL;
        json_t *rf = attempt_event (events, n, "reform");
        json_t *rr = attempt_event (events, n, "reform_registered");
        json_t *dms = rf ? jget (rf, "data.decision_ms") : NULL;
        json_t *rms = rr ? jget (rr, "data.reform_ms") : NULL;
        char b[6][64];
        snprintf (b[3], sizeof (b[3]), "-");
        snprintf (b[4], sizeof (b[4]), "-");
        snprintf (b[5], sizeof (b[5]), "-");
        if (json_is_integer (dms))
            snprintf (b[5], sizeof (b[5]), "decision %lld ms, re-form %s%lld ms",
                      (long long)json_integer_value (dms),
                      json_is_integer (rms) ? "" : "? ",
                      json_is_integer (rms) ? (long long)json_integer_value (rms) : 0LL);
        if (json_is_integer (bo))
            snprintf (b[3], sizeof (b[3]), "%lld ms", (long long)json_integer_value (bo));
        if (fail > 0 && fs >= fail)
            snprintf (b[4], sizeof (b[4]), "%.2f s", (fs - fail) / 1000.0);
        const char *row[] = { jtext (a, "attempt", b[0], sizeof (b[0])),
                              jtext (a, "restart_path", b[1], sizeof (b[1])),
                              jtext (prev, "cause", b[2], sizeof (b[2])),
                              b[3],
                              b[4],
                              b[5] };
        if (!t && !(t = table_create (6, hdr)))
            return;
        table_add (t, row);
    }
    if (!t)
        return;
    printf ("\nRestarts (TO_STEP: failure first seen to the first new step; PHASES of a "
            "re-form):\n");
    table_print (t, stdout, 2);
}

int cmd_show (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS, { NULL, 0, NULL, 0 } };
    const struct cmd *cmd = cmd_lookup ("show");
    char path[256];
    const char *id;
    json_t *job, *ckpts, *events;
    size_t i;
    json_t *a;

    while (cmd_getopt (cmd, ctl, argc, argv, ":h", opts) != -1)
        ;
    id = cmd_job_arg (cmd, argc - optind, argv + optind);
    job =
      ctl_call (ctl, "GET", ctl_path (path, sizeof (path), "/v1/jobs/", id, NULL), NULL);
    if (ctl->json) {
        out_json (job);
        json_decref (job);
        return CTL_EXIT_OK;
    }
    ckpts = ctl_call_optional (
      ctl, "GET", ctl_path (path, sizeof (path), "/v1/jobs/", id, "/checkpoints"), NULL);
    events = ctl_call_optional (
      ctl, "GET", ctl_path (path, sizeof (path), "/v1/jobs/", id, "/events"), NULL);
    show_job_header (job);
    show_attempts (job);
    show_restarts (job, events);
    show_checkpoints (ckpts);
    show_stragglers (job);
    show_integrity (events);
    json_decref (events);
    show_comm (job);
    show_comm_dims (job);
    show_numerics (job);
    if (jget (job, "result")) {
        printf ("\nResult:\n");
        print_kv_object (jget (job, "result"), 2);
    }
    json_array_foreach (jget (job, "attempts"), i, a)
    {
        if (!json_is_object (jget (a, "provenance")))
            continue;
        char b[32];
        printf ("\nProvenance of attempt %s:\n", jtext (a, "attempt", b, sizeof (b)));
        print_kv_object (jget (a, "provenance"), 2);
    }
    json_decref (ckpts);
    json_decref (job);
    return CTL_EXIT_OK;
}

/* ---- history ---------------------------------------------------------- */
