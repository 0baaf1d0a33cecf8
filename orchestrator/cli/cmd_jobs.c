/* cmd_jobs.c: dtctl's job commands: submit, list, history, events, cancel,
 * resubmit, checkpoint (show is cmd_show.c). */
#include <config.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

/* ---- helpers --------------------------------------------------------- */

const char *cmd_job_arg (const struct cmd *cmd, int argc, char **argv)
{
    const char *id;
    char *end;

    cmd_need_args (cmd, argc, argv, 1, "JOB (a job id)");
    id = argv[0];
    errno = 0;
    if (strtoll (id, &end, 10) <= 0 || *end || errno)
        cmd_usage_error (cmd->name, "JOB must be a job id (a positive integer), not '%s'",
                         id);
    return id;
}

static json_int_t int_arg (const struct cmd *cmd, const char *flag, const char *s,
                           json_int_t min)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll (s, &end, 10);
    if (end == s || *end || errno || v < min)
        cmd_usage_error (cmd->name, "%s: expected an integer >= %lld, not '%s'", flag,
                         (long long)min, s);
    return (json_int_t)v;
}

/* The sub-object 'key' of 'spec', created when absent (borrowed). */
static json_t *sub_obj (const struct cmd *cmd, json_t *spec, const char *key)
{
    json_t *o = json_object_get (spec, key);

    if (!o) {
        o = json_object ();
        json_object_set_new (spec, key, o);
    }
    else if (!json_is_object (o))
        cmd_usage_error (cmd->name, "%s: expected an object in the job spec", key);
    return o;
}

/* The controller wants absolute paths; a relative one is taken from the
 * current directory, as the user meant.  New JSON string. */
static json_t *abs_path (const char *p)
{
    char cwd[PATH_MAX], buf[PATH_MAX + 4096];

    if (p[0] == '/' || !getcwd (cwd, sizeof (cwd)))
        return json_string (p);
    snprintf (buf, sizeof (buf), "%s/%s", cwd, p);
    return json_string (buf);
}

const char *cmd_user_of (const json_t *job, char *buf, size_t len)
{
    const char *u = json_string_value (jget (job, "user"));
    if (u && *u)
        return u;
    return jtext (job, "uid", buf, len);
}

static bool job_ended (const json_t *job)
{
    const char *s = json_string_value (jget (job, "state"));
    return s && (!strcmp (s, "completed") || !strcmp (s, "failed") ||
                 !strcmp (s, "cancelled"));
}

/* ---- submit ----------------------------------------------------------- */

enum {
    OPT_SPARE = OPT_CMD_FIRST,
    OPT_CKPT_DIR,
    OPT_CKPT_EVERY,
    OPT_CKPT_KEEP,
    OPT_MAX_RESTARTS,
    OPT_MIN_NODES,
    OPT_STRAGGLER_ACTION,
    OPT_TP,
    OPT_PP,
    OPT_SHRINK,
    OPT_ZERO1,
    OPT_LIMIT,
    OPT_NAME,
    OPT_FROM_SCRATCH,
};

static json_t *load_spec (const struct cmd *cmd, const char *path)
{
    json_error_t jerr;
    json_t *spec;

    if (strcmp (path, "-") == 0)
        spec = json_loadf (stdin, 0, &jerr);
    else
        spec = json_load_file (path, 0, &jerr);
    if (!spec) {
        if (jerr.line < 0 || jerr.line == 0)
            ctl_die (CTL_EXIT_USAGE, "%s: %s", path, jerr.text);
        ctl_die (CTL_EXIT_USAGE, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    }
    if (!json_is_object (spec))
        ctl_die (CTL_EXIT_USAGE, "%s: a job spec must be a JSON object", path);
    return spec;
}

/* --shrink LIST: the spec's parallel.shrink from "tp", "pp", "tp,pp",
 * "pp,tp" or "none" (an empty list, overriding the file's). */
static json_t *shrink_arg (const struct cmd *cmd, const char *s)
{
    json_t *list = json_array ();
    char buf[64];
    if (!strcmp (s, "none"))
        return list;
    if (strlen (s) >= sizeof (buf))
        cmd_usage_error (cmd->name, "--shrink: '%s' is too long", s);
    snprintf (buf, sizeof (buf), "%s", s);
    for (char *save = NULL, *w = strtok_r (buf, ",", &save); w;
         w = strtok_r (NULL, ",", &save)) {
        if (!strcmp (w, "dp"))
            cmd_usage_error (cmd->name,
                             "--shrink: dp needs no listing (a restart on fewer nodes "
                             "always drops data-parallel replicas first); list tp "
                             "and/or pp");
        if (strcmp (w, "tp") && strcmp (w, "pp"))
            cmd_usage_error (cmd->name,
                             "--shrink: '%s' is not tp or pp (expected a "
                             "comma-separated list such as tp,pp, or none)",
                             w);
        if (json_array_size (list) &&
            !strcmp (json_string_value (json_array_get (list, 0)), w))
            cmd_usage_error (cmd->name, "--shrink: '%s' is listed twice", w);
        json_array_append_new (list, json_string (w));
    }
    if (!json_array_size (list))
        cmd_usage_error (cmd->name,
                         "--shrink: expected tp, pp, tp,pp, pp,tp or none, "
                         "not '%s'",
                         s);
    return list;
}

/* One flag of "dtctl submit" into 'flags' (the spec fields it sets). */
static void submit_flag (const struct cmd *cmd, json_t *flags, int c)
{
    switch (c) {
    case 'J': json_object_set_new (flags, "name", json_string (optarg)); break;
    case 'N':
        json_object_set_new (flags, "nodes",
                             json_integer (int_arg (cmd, "--nodes", optarg, 1)));
        break;
    case OPT_SPARE:
        json_object_set_new (flags, "spare_nodes",
                             json_integer (int_arg (cmd, "--spare-nodes", optarg, 0)));
        break;
    case 'n':
        json_object_set_new (flags, "ranks_per_node",
                             json_integer (int_arg (cmd, "--ranks-per-node", optarg, 1)));
        break;
    case 'p': json_object_set_new (flags, "partition", json_string (optarg)); break;
    case 't':
        /* As sbatch: a bare number is minutes.  Anything else is passed
         * as written: the controller parses Slurm's forms and units
         * and names the field if it is wrong. */
        if (*optarg && optarg[strspn (optarg, "0123456789")] == '\0' &&
            strlen (optarg) < 32) {
            char m[40];
            snprintf (m, sizeof (m), "%sm", optarg);
            json_object_set_new (flags, "time_limit", json_string (m));
        }
        else
            json_object_set_new (flags, "time_limit", json_string (optarg));
        break;
    case 'D': json_object_set_new (flags, "workdir", abs_path (optarg)); break;
    case 'e': {
        const char *eq = strchr (optarg, '=');
        if (!eq || eq == optarg)
            cmd_usage_error (cmd->name, "--env: expected KEY=VALUE, not '%s'", optarg);
        json_t *env = sub_obj (cmd, flags, "env");
        char *key = strndup (optarg, (size_t)(eq - optarg));
        json_object_set_new (env, key, json_string (eq + 1));
        free (key);
        break;
    }
    case OPT_CKPT_DIR:
        json_object_set_new (sub_obj (cmd, flags, "checkpoint"), "dir",
                             abs_path (optarg));
        break;
    case OPT_CKPT_EVERY:
        json_object_set_new (
          sub_obj (cmd, flags, "checkpoint"), "every_steps",
          json_integer (int_arg (cmd, "--checkpoint-every", optarg, 0)));
        break;
    case OPT_CKPT_KEEP:
        json_object_set_new (
          sub_obj (cmd, flags, "checkpoint"), "keep",
          json_integer (int_arg (cmd, "--checkpoint-keep", optarg, 1)));
        break;
    case OPT_MAX_RESTARTS:
        json_object_set_new (sub_obj (cmd, flags, "restart"), "max_restarts",
                             json_integer (int_arg (cmd, "--max-restarts", optarg, 0)));
        break;
    case OPT_MIN_NODES:
        json_object_set_new (sub_obj (cmd, flags, "restart"), "min_nodes",
                             json_integer (int_arg (cmd, "--min-nodes", optarg, 1)));
        break;
    case OPT_STRAGGLER_ACTION:
        json_object_set_new (sub_obj (cmd, flags, "straggler"), "action",
                             json_string (optarg));
        break;
    case OPT_TP:
        json_object_set_new (sub_obj (cmd, flags, "parallel"), "tp",
                             json_integer (int_arg (cmd, "--tp", optarg, 1)));
        break;
    case OPT_PP:
        json_object_set_new (sub_obj (cmd, flags, "parallel"), "pp",
                             json_integer (int_arg (cmd, "--pp", optarg, 1)));
        break;
    case OPT_SHRINK:
        json_object_set_new (sub_obj (cmd, flags, "parallel"), "shrink",
                             shrink_arg (cmd, optarg));
        break;
    case OPT_ZERO1:
        json_object_set_new (sub_obj (cmd, flags, "parallel"), "zero1", json_true ());
        break;
    }
}

int cmd_submit (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        CMD_COMMON_OPTS,
        { "name", required_argument, NULL, 'J' },
        { "nodes", required_argument, NULL, 'N' },
        { "spare-nodes", required_argument, NULL, OPT_SPARE },
        { "ranks-per-node", required_argument, NULL, 'n' },
        { "partition", required_argument, NULL, 'p' },
        { "time-limit", required_argument, NULL, 't' },
        { "workdir", required_argument, NULL, 'D' },
        { "env", required_argument, NULL, 'e' },
        { "checkpoint-dir", required_argument, NULL, OPT_CKPT_DIR },
        { "checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY },
        { "checkpoint-keep", required_argument, NULL, OPT_CKPT_KEEP },
        { "max-restarts", required_argument, NULL, OPT_MAX_RESTARTS },
        { "min-nodes", required_argument, NULL, OPT_MIN_NODES },
        { "straggler-action", required_argument, NULL, OPT_STRAGGLER_ACTION },
        { "tp", required_argument, NULL, OPT_TP },
        { "pp", required_argument, NULL, OPT_PP },
        { "shrink", required_argument, NULL, OPT_SHRINK },
        { "zero1", no_argument, NULL, OPT_ZERO1 },
        { NULL, 0, NULL, 0 },
    };
    const struct cmd *cmd = cmd_lookup ("submit");
    json_t *flags = json_object (); /* fields set by flags, merged last */
    json_t *spec, *job, *cmdline = NULL;
    int nopt = argc;
    int c;

    /* Everything after "--" is the trainer's command line, untouched. */
    for (int i = 1; i < argc; i++)
        if (strcmp (argv[i], "--") == 0) {
            nopt = i;
            cmdline = json_array ();
            for (int j = i + 1; j < argc; j++)
                json_array_append_new (cmdline, json_string (argv[j]));
            break;
        }

    while ((c = cmd_getopt (cmd, ctl, nopt, argv, ":hJ:N:n:p:t:D:e:", opts)) != -1) {
        submit_flag (cmd, flags, c);
    }
    if (nopt - optind > 1)
        cmd_usage_error (cmd->name,
                         "unexpected argument '%s' (put the trainer command after '--')",
                         argv[optind + 1]);
    spec = (optind < nopt) ? load_spec (cmd, argv[optind]) : json_object ();

    /* Flags override the file; nested objects are merged key by key. */
    {
        const char *key;
        json_t *v;
        json_object_foreach (flags, key, v)
        {
            if (json_is_object (v))
                json_object_update (sub_obj (cmd, spec, key), v);
            else
                json_object_set (spec, key, v);
        }
    }
    if (cmdline)
        json_object_set_new (spec, "command", cmdline);
    if (!json_object_get (spec, "command"))
        cmd_usage_error (cmd->name, "no trainer command: give JOB.json with \"command\", "
                                    "or the command after '--'");
    /* Like sbatch: the job runs where it was submitted from unless told. */
    if (!json_object_get (spec, "workdir")) {
        char cwd[PATH_MAX];
        if (getcwd (cwd, sizeof (cwd)))
            json_object_set_new (spec, "workdir", json_string (cwd));
    }

    job = ctl_call (ctl, "POST", "/v1/jobs", spec);
    if (ctl->json)
        out_json (job);
    else {
        char buf[64];
        printf ("%s\n", jtext (job, "id", buf, sizeof (buf)));
    }
    json_decref (job);
    json_decref (spec);
    json_decref (flags);
    return CTL_EXIT_OK;
}

/* ---- list ------------------------------------------------------------- */

/* Append "?k=v&k2=v2" query parameters (values percent-encoded). */
static void add_query (char *buf, size_t len, const char *key, const char *val)
{
    char enc[512];
    size_t n = strlen (buf);

    if (!val)
        return;
    ctl_path (enc, sizeof (enc), "", val, NULL);
    snprintf (buf + n, len - n, "%s%s=%s", strchr (buf, '?') ? "&" : "?", key, enc);
}

int cmd_list (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        CMD_COMMON_OPTS,
        { "state", required_argument, NULL, 's' },
        { "user", required_argument, NULL, 'u' },
        { "name", required_argument, NULL, OPT_NAME },
        { "limit", required_argument, NULL, OPT_LIMIT },
        { NULL, 0, NULL, 0 },
    };
    static const char *const hdr[] = {
        "ID", "NAME", "USER", "STATE", "NODES", "STEP", "LOSS", "RESTARTS", "AGE",
    };
    const struct cmd *cmd = cmd_lookup ("list");
    const char *state = NULL, *user = NULL, *name = NULL, *limit = NULL;
    char path[2048] = "/v1/jobs";
    json_t *jobs, *job;
    struct table *t;
    size_t i;
    int c;

    while ((c = cmd_getopt (cmd, ctl, argc, argv, ":hs:u:", opts)) != -1) {
        switch (c) {
        case 's': state = optarg; break;
        case 'u': user = optarg; break;
        case OPT_NAME: name = optarg; break;
        case OPT_LIMIT:
            int_arg (cmd, "--limit", optarg, 1);
            limit = optarg;
            break;
        }
    }
    cmd_need_args (cmd, argc - optind, argv + optind, 0, "");
    add_query (path, sizeof (path), "state", state);
    add_query (path, sizeof (path), "user", user);
    add_query (path, sizeof (path), "name", name);
    add_query (path, sizeof (path), "limit", limit);

    jobs = ctl_call (ctl, "GET", path, NULL);
    if (ctl->json) {
        out_json (jobs);
        json_decref (jobs);
        return CTL_EXIT_OK;
    }
    t = table_create (9, hdr);
    json_array_foreach (jobs, i, job)
    {
        char id[32], nm[128], us[64], st[32], nodes[16], step[32], loss[32], rs[16],
          age[32];
        int64_t sub = jtime_ms (jget (job, "submit_time"));
        const char *row[] = {
            jtext (job, "id", id, sizeof (id)),
            jtext (job, "name|spec.name", nm, sizeof (nm)),
            cmd_user_of (job, us, sizeof (us)),
            jtext (job, "state", st, sizeof (st)),
            jtext (job, "spec.nodes|nodes", nodes, sizeof (nodes)),
            jtext (job, "step", step, sizeof (step)),
            jfmt (jget (job, "loss"), "%.4f", loss, sizeof (loss)),
            jtext (job, "restarts", rs, sizeof (rs)),
            fmt_age (sub < 0 ? -1 : now_ms () - sub, age, sizeof (age)),
        };
        table_add (t, row);
    }
    table_print (t, stdout, 0);
    json_decref (jobs);
    return CTL_EXIT_OK;
}

/* ---- show ------------------------------------------------------------- */

static int cmp_attempt_newest (const void *pa, const void *pb)
{
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    int64_t ta = jtime_ms (jget (a, "submit_time|start_time"));
    int64_t tb = jtime_ms (jget (b, "submit_time|start_time"));

    if (ta != tb)
        return ta < tb ? 1 : -1;
    /* Same millisecond: the higher job id / attempt is the newer. */
    if (json_integer_value (jget (a, "job")) != json_integer_value (jget (b, "job")))
        return json_integer_value (jget (a, "job")) < json_integer_value (jget (b, "job"))
                 ? 1
                 : -1;
    return json_integer_value (jget (a, "attempt")) <
               json_integer_value (jget (b, "attempt"))
             ? 1
             : -1;
}

int cmd_history (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        CMD_COMMON_OPTS,
        { "state", required_argument, NULL, 's' },
        { "user", required_argument, NULL, 'u' },
        { "limit", required_argument, NULL, OPT_LIMIT },
        { NULL, 0, NULL, 0 },
    };
    static const char *const hdr[] = {
        "JOB",  "ATTEMPT",   "NAME",    "USER",  "STATE", "CAUSE", "NODE",
        "RANK", "SLURM_JOB", "RESUMED", "START", "END",   "NODES",
    };
    const struct cmd *cmd = cmd_lookup ("history");
    const char *state = NULL, *user = NULL, *limit = "100";
    char path[2048] = "/v1/jobs";
    json_t *jobs, *job, *all = json_array ();
    json_t **sorted;
    size_t i, n;
    int c;

    while ((c = cmd_getopt (cmd, ctl, argc, argv, ":hs:u:", opts)) != -1) {
        switch (c) {
        case 's': state = optarg; break;
        case 'u': user = optarg; break;
        case OPT_LIMIT:
            int_arg (cmd, "--limit", optarg, 1);
            limit = optarg;
            break;
        }
    }
    cmd_need_args (cmd, argc - optind, argv + optind, 0, "");
    add_query (path, sizeof (path), "state", state);
    add_query (path, sizeof (path), "user", user);
    add_query (path, sizeof (path), "limit", limit);
    jobs = ctl_call (ctl, "GET", path, NULL);

    /* The list has no attempts; each job's own answer has them.  A job
     * removed in between is skipped rather than failing the listing. */
    json_array_foreach (jobs, i, job)
    {
        char id[32], p[256], us[64];
        json_t *full = ctl_call_optional (
          ctl, "GET",
          ctl_path (p, sizeof (p), "/v1/jobs/", jtext (job, "id", id, sizeof (id)), NULL),
          NULL);
        size_t j;
        json_t *a;
        json_array_foreach (jget (full, "attempts"), j, a)
        {
            json_t *row = json_deep_copy (a);
            if (!jget (row, "job"))
                json_object_set (row, "job", json_object_get (job, "id"));
            json_object_set_new (row, "job_name",
                                 json_string (jtext (job, "name", p, sizeof (p))));
            json_object_set_new (row, "user",
                                 json_string (cmd_user_of (job, us, sizeof (us))));
            json_array_append_new (all, row);
        }
        json_decref (full);
    }
    n = json_array_size (all);
    if (!(sorted = calloc (n + 1, sizeof (*sorted))))
        ctl_die (CTL_EXIT_USAGE, "out of memory");
    for (i = 0; i < n; i++)
        sorted[i] = json_array_get (all, i);
    qsort (sorted, n, sizeof (*sorted), cmp_attempt_newest);

    if (ctl->json) {
        json_t *out = json_array ();
        for (i = 0; i < n; i++)
            json_array_append (out, sorted[i]);
        out_json (out);
        json_decref (out);
    }
    else {
        struct table *t = table_create (13, hdr);
        for (i = 0; i < n; i++) {
            json_t *a = sorted[i];
            char b[13][256];
            json_int_t sj = json_integer_value (jget (a, "slurm_job_id"));
            const char *row[] = {
                jtext (a, "job", b[0], sizeof (b[0])),
                jtext (a, "attempt", b[1], sizeof (b[1])),
                jtext (a, "job_name", b[2], sizeof (b[2])),
                jtext (a, "user", b[3], sizeof (b[3])),
                jtext (a, "state", b[4], sizeof (b[4])),
                jtext (a, "cause", b[5], sizeof (b[5])),
                jtext (a, "cause_node", b[6], sizeof (b[6])),
                jtext (a, "cause_rank", b[7], sizeof (b[7])),
                sj > 0 ? jtext (a, "slurm_job_id", b[8], sizeof (b[8])) : "-",
                jtext (a, "resume_step", b[9], sizeof (b[9])),
                fmt_when (a, "start_time|submit_time", b[10], sizeof (b[10])),
                fmt_when (a, "end_time", b[11], sizeof (b[11])),
                jtext (a, "nodes", b[12], sizeof (b[12])),
            };
            table_add (t, row);
        }
        table_print (t, stdout, 0);
    }
    free (sorted);
    json_decref (all);
    json_decref (jobs);
    return CTL_EXIT_OK;
}

/* ---- events ----------------------------------------------------------- */

int cmd_events (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS, { NULL, 0, NULL, 0 } };
    static const char *const hdr[] = {
        "TIME", "ATTEMPT", "KIND", "NODE", "RANK", "DETAIL"
    };
    const struct cmd *cmd = cmd_lookup ("events");
    char path[256];
    const char *id;
    json_t *events, *e;
    struct table *t;
    size_t i;

    while (cmd_getopt (cmd, ctl, argc, argv, ":h", opts) != -1)
        ;
    id = cmd_job_arg (cmd, argc - optind, argv + optind);
    /* The controller answers at most a page of events (10,000) from the
     * one after 'after': ask again after the last until a page is empty. */
    events = json_array ();
    for (json_int_t after = 0;;) {
        char q[384];
        snprintf (q, sizeof (q), "%s?after=%lld",
                  ctl_path (path, sizeof (path), "/v1/jobs/", id, "/events"),
                  (long long)after);
        json_t *page = ctl_call (ctl, "GET", q, NULL);
        size_t n = json_array_size (page);
        json_int_t last =
          n ? json_integer_value (json_object_get (json_array_get (page, n - 1), "id"))
            : 0;
        json_array_extend (events, page);
        json_decref (page);
        if (n == 0 || last <= after)
            break;
        after = last;
    }
    if (ctl->json) {
        out_json (events);
        json_decref (events);
        return CTL_EXIT_OK;
    }
    t = table_create (6, hdr);
    json_array_foreach (events, i, e)
    {
        char b[6][512];
        const char *row[] = {
            jtext (e, "time", b[0], sizeof (b[0])),
            jtext (e, "attempt", b[1], sizeof (b[1])),
            jtext (e, "kind", b[2], sizeof (b[2])),
            jtext (e, "node", b[3], sizeof (b[3])),
            jtext (e, "rank", b[4], sizeof (b[4])),
            jtext (e, "detail", b[5], sizeof (b[5])),
        };
        table_add (t, row);
    }
    table_print (t, stdout, 0);
    json_decref (events);
    return CTL_EXIT_OK;
}

/* ---- cancel, resubmit, checkpoint ------------------------------------- */

int cmd_cancel (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS, { NULL, 0, NULL, 0 } };
    const struct cmd *cmd = cmd_lookup ("cancel");
    char path[256], st[32];
    const char *id;
    json_t *job;

    while (cmd_getopt (cmd, ctl, argc, argv, ":h", opts) != -1)
        ;
    id = cmd_job_arg (cmd, argc - optind, argv + optind);
    job = ctl_call (ctl, "POST",
                    ctl_path (path, sizeof (path), "/v1/jobs/", id, "/cancel"), NULL);
    if (ctl->json)
        out_json (job);
    else
        printf ("Job %s: %s\n", id,
                job_ended (job) ? jtext (job, "state", st, sizeof (st))
                                : "cancel requested");
    json_decref (job);
    return CTL_EXIT_OK;
}

int cmd_resubmit (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        CMD_COMMON_OPTS,
        { "exclude", required_argument, NULL, 'x' },
        { "from-scratch", no_argument, NULL, OPT_FROM_SCRATCH },
        { NULL, 0, NULL, 0 },
    };
    const struct cmd *cmd = cmd_lookup ("resubmit");
    json_t *body = json_object ();
    json_t *exclude = json_array ();
    char path[256], b[2][32];
    const char *id;
    json_t *job;
    int c;

    while ((c = cmd_getopt (cmd, ctl, argc, argv, ":hx:", opts)) != -1) {
        switch (c) {
        case 'x': {
            char *list = strdup (optarg), *save = NULL;
            for (char *tok = strtok_r (list, ", ", &save); tok;
                 tok = strtok_r (NULL, ", ", &save))
                json_array_append_new (exclude, json_string (tok));
            free (list);
            break;
        }
        case OPT_FROM_SCRATCH:
            json_object_set_new (body, "from_scratch", json_true ());
            break;
        }
    }
    id = cmd_job_arg (cmd, argc - optind, argv + optind);
    if (json_array_size (exclude) > 0)
        json_object_set (body, "exclude", exclude);
    job = ctl_call (ctl, "POST",
                    ctl_path (path, sizeof (path), "/v1/jobs/", id, "/resubmit"), body);
    if (ctl->json)
        out_json (job);
    else if (jget (job, "last_checkpoint") &&
             !json_is_true (json_object_get (body, "from_scratch")))
        printf ("Job %s resubmitted: attempt %s, resuming from checkpoint at step %s\n",
                id, jtext (job, "attempt", b[0], sizeof (b[0])),
                jtext (job, "last_checkpoint", b[1], sizeof (b[1])));
    else
        printf ("Job %s resubmitted: attempt %s, starting from step 0\n", id,
                jtext (job, "attempt", b[0], sizeof (b[0])));
    json_decref (job);
    json_decref (exclude);
    json_decref (body);
    return CTL_EXIT_OK;
}

int cmd_checkpoint (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS, { NULL, 0, NULL, 0 } };
    const struct cmd *cmd = cmd_lookup ("checkpoint");
    char path[256], step[32];
    const char *id;
    json_t *data;

    while (cmd_getopt (cmd, ctl, argc, argv, ":h", opts) != -1)
        ;
    id = cmd_job_arg (cmd, argc - optind, argv + optind);
    data = ctl_call (
      ctl, "POST", ctl_path (path, sizeof (path), "/v1/jobs/", id, "/checkpoint"), NULL);
    if (ctl->json)
        out_json (data);
    else
        printf ("Job %s: checkpoint requested at step %s\n", id,
                jtext (data, "step", step, sizeof (step)));
    json_decref (data);
    return CTL_EXIT_OK;
}
