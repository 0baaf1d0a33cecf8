/* spec.c: strict validation and normalization of job specs. */
#include <config.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include "common/jsonx.h"
#include "common/dtime.h"
#include "orchestrator/spec.h"

/* Schema defaults (the conf-dependent ones are in struct spec_defaults). */
static const char *const default_name = "job";
static const char *const default_workdir = "/tmp";
static const json_int_t default_every_steps = 100;
static const json_int_t default_keep = 2;
static const json_int_t default_max_restarts = 3;
static const double default_threshold = 0.75;
static const json_int_t default_window_steps = 20;
/* integrity: a fingerprint every 50 steps costs well under 0.5% of a step
 * (bench/bench_integrity.sh); a spike is 8 MADs above the median of 32 losses. */
static const json_int_t default_integrity_every = 50;
static const double default_spike_k = 8.0;
static const json_int_t default_spike_window = 32;
/* comm_bound: warn when over half of the step time is exposed
 * communication wait for 20 steps in a row. */
static const double default_comm_threshold = 0.5;
static const json_int_t default_comm_window_steps = 20;

static const char *const top_keys[] = {
    "name",      "nodes",     "spare_nodes", "ranks_per_node", "command",  "env",
    "workdir",   "partition", "time_limit",  "checkpoint",     "restart",  "heartbeat",
    "straggler", "integrity", "comm_bound",  "parallel",       "numerics", NULL,
};
static const char *const checkpoint_keys[] = { "dir", "every_steps", "keep", NULL };
static const char *const restart_keys[] = {
    "max_restarts", "exclude_failed_nodes", "min_nodes", "reform", NULL,
};
static const char *const heartbeat_keys[] = {
    "interval_ms", "node_timeout_ms", "hang_timeout_ms", "tree_width", NULL,
};
static const char *const straggler_keys[] = { "threshold", "window_steps", "action",
                                              NULL };
static const char *const integrity_keys[] = {
    "every_steps", "action", "skip_bad_batches", "spike_k", "spike_window", NULL,
};
static const char *const comm_bound_keys[] = { "threshold", "window_steps", NULL };
static const char *const parallel_keys[] = { "tp", "pp", "shrink", "zero1", NULL };

static int fail (dt_error_t *err, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static int fail (dt_error_t *err, const char *fmt, ...)
{
    va_list ap;
    char buf[sizeof (err->text)];

    va_start (ap, fmt);
    vsnprintf (buf, sizeof (buf), fmt, ap);
    va_end (ap);
    errno = EINVAL;
    return errprintf (err, "%s", buf);
}

static bool name_ok (const char *s)
{
    for (; *s; s++)
        if (!isalnum ((unsigned char)*s) && !strchr ("_.-", *s))
            return false;
    return true;
}

static bool env_key_ok (const char *s)
{
    if (!*s || (!isalpha ((unsigned char)*s) && *s != '_'))
        return false;
    for (; *s; s++)
        if (!isalnum ((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

/* Room a job directory needs below checkpoint.dir for its own names
 * ("/<job>/jit-<S>-r<W>/rank-<K>.ckpt.tmp.<pid>"). */
static const size_t path_room = 128;

/* A path the controller and the agents use as the job's user: absolute and
 * normal (no empty, "." or ".." components, no trailing '/'), so that the
 * paths dtctl derives from it compare as strings (checkpoint shards are
 * accepted only at their exact paths), printable, and short enough. */
static int check_path (const char *field, const char *p, dt_error_t *err)
{
    if (p[0] != '/')
        return fail (err, "%s: must be an absolute path", field);
    for (const char *c = p; *c; c++)
        if (iscntrl ((unsigned char)*c))
            return fail (err, "%s: must not contain control characters", field);
    if (strlen (p) > PATH_MAX - path_room)
        return fail (err, "%s: longer than %zu bytes", field,
                     (size_t)PATH_MAX - path_room);
    if (p[1] == '\0')
        return 0;
    for (const char *c = p + 1;;) {
        size_t n = strcspn (c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return fail (err, "%s: must not contain '..'", field);
        if (n == 0 || (n == 1 && c[0] == '.'))
            return fail (
              err, "%s: must be a normal path (no '//', '/./' or trailing '/')", field);
        if (c[n] == '\0')
            return 0;
        c += n + 1;
    }
}

/* Get sub-object 'key' of 'in' (checked against 'allowed'), or an empty
 * object when absent.  Returns a borrowed reference or NULL on error. */
static json_t *get_section (const json_t *in, const char *key,
                            const char *const allowed[], json_t *empty, dt_error_t *err)
{
    json_t *o = NULL;
    if (dt_json_get_obj (in, "", key, false, &o, err) < 0)
        return NULL;
    if (!o)
        return empty;
    if (dt_json_check_object (o, key, allowed, err) < 0)
        return NULL;
    return o;
}

/* comm_bound: the communication-bound warning's threshold and window. */
static int validate_comm_bound (const json_t *in, json_t *empty, json_t *out,
                                dt_error_t *err)
{
    json_t *sec;
    double cthr = default_comm_threshold;
    json_int_t cwin = default_comm_window_steps;
    if (!(sec = get_section (in, "comm_bound", comm_bound_keys, empty, err)) ||
        dt_json_get_real (sec, "comm_bound", "threshold", false, 0.0, 1.0, &cthr, err) <
          0 ||
        dt_json_get_int (sec, "comm_bound", "window_steps", false, 1, 1000000, &cwin,
                         err) < 0)
        return -1;
    if (cthr <= 0.0)
        return fail (err, "comm_bound.threshold: must be in (0, 1]");
    json_object_set_new (
      out, "comm_bound",
      json_pack ("{s:f s:I}", "threshold", cthr, "window_steps", cwin));
    return 0;
}

/* The integrity section (dtctl-job(5)), with its defaults, into out. */
static int validate_integrity (const json_t *in, json_t *empty, json_t *out,
                               dt_error_t *err)
{
    json_t *sec;
    const char *action = "report";
    json_int_t iev = default_integrity_every, sw = default_spike_window;
    double sk = default_spike_k;
    bool skip = false;
    if (!(sec = get_section (in, "integrity", integrity_keys, empty, err)) ||
        dt_json_get_int (sec, "integrity", "every_steps", false, 0, 1000000000, &iev,
                         err) < 0 ||
        dt_json_get_str (sec, "integrity", "action", false, 16, false, &action, err) <
          0 ||
        dt_json_get_bool (sec, "integrity", "skip_bad_batches", false, &skip, err) < 0 ||
        dt_json_get_real (sec, "integrity", "spike_k", false, 0.0, 1e6, &sk, err) < 0 ||
        dt_json_get_int (sec, "integrity", "spike_window", false, 4, 4096, &sw, err) < 0)
        return -1;
    if (strcmp (action, "report") && strcmp (action, "rollback")) {
        fail (err, "integrity.action: must be \"report\" or \"rollback\"");
        return -1;
    }
    json_object_set_new (out, "integrity",
                         json_pack ("{s:I s:s s:b s:f s:I}", "every_steps", iev, "action",
                                    action, "skip_bad_batches", skip, "spike_k", sk,
                                    "spike_window", sw));
    return 0;
}

/* The sections of a spec (checkpoint, restart, heartbeat, straggler),
 * each with its defaults; 'nodes': the validated node count. */
static int validate_sections (const json_t *in, const struct spec_defaults *d,
                              json_int_t nodes, json_t *out, dt_error_t *err)
{
    const char *s;
    json_t *empty = NULL;
    int rc = -1;

    if (!(empty = json_object ()))
        return fail (err, "out of memory");

    /* checkpoint */
    json_t *sec;
    json_int_t every = default_every_steps, keep = default_keep;
    s = d->checkpoint_root;
    if (!(sec = get_section (in, "checkpoint", checkpoint_keys, empty, err)) ||
        dt_json_get_str (sec, "checkpoint", "dir", false, SPEC_MAX_STR, false, &s, err) <
          0 ||
        check_path ("checkpoint.dir", s, err) < 0 ||
        dt_json_get_int (sec, "checkpoint", "every_steps", false, 0, 1000000000, &every,
                         err) < 0 ||
        dt_json_get_int (sec, "checkpoint", "keep", false, 1, 1000, &keep, err) < 0)
        goto done;
    json_object_set_new (
      out, "checkpoint",
      json_pack ("{s:s s:I s:I}", "dir", s, "every_steps", every, "keep", keep));

    /* restart */
    json_int_t maxr = default_max_restarts, minn = nodes;
    int excl = 1;
    bool b = true, reform = false;
    if (!(sec = get_section (in, "restart", restart_keys, empty, err)) ||
        dt_json_get_int (sec, "restart", "max_restarts", false, 0, 1000, &maxr, err) <
          0 ||
        dt_json_get_bool (sec, "restart", "exclude_failed_nodes", false, &b, err) < 0 ||
        dt_json_get_int (sec, "restart", "min_nodes", false, 1, SPEC_MAX_NODES, &minn,
                         err) < 0 ||
        dt_json_get_bool (sec, "restart", "reform", false, &reform, err) < 0)
        goto done;
    excl = b;
    if (minn > nodes) {
        fail (err, "restart.min_nodes: must not exceed nodes (%lld)", (long long)nodes);
        goto done;
    }
    json_object_set_new (out, "restart",
                         json_pack ("{s:I s:b s:I}", "max_restarts", maxr,
                                    "exclude_failed_nodes", excl, "min_nodes", minn));
    /* (only when asked: the normalized spec of other jobs is unchanged) */
    if (reform)
        json_object_set_new (json_object_get (out, "restart"), "reform", json_true ());

    /* heartbeat */
    json_int_t hb = d->heartbeat_interval_ms, nt = d->node_timeout_ms,
               ht = d->hang_timeout_ms, tw = d->tree_width;
    if (!(sec = get_section (in, "heartbeat", heartbeat_keys, empty, err)) ||
        dt_json_get_int (sec, "heartbeat", "interval_ms", false, 100, 60000, &hb, err) <
          0 ||
        dt_json_get_int (sec, "heartbeat", "node_timeout_ms", false, 200, 3600000, &nt,
                         err) < 0 ||
        dt_json_get_int (sec, "heartbeat", "hang_timeout_ms", false, 0, 86400000, &ht,
                         err) < 0 ||
        dt_json_get_int (sec, "heartbeat", "tree_width", false, 0, SPEC_MAX_TREE_WIDTH,
                         &tw, err) < 0)
        goto done;
    if (!json_object_get (sec, "node_timeout_ms") && nt < 2 * hb)
        nt = 3 * hb; /* a faster heartbeat than the conf's default timeout */
    if (nt < 2 * hb) {
        fail (err, "heartbeat.node_timeout_ms: must be at least 2 * interval_ms (%lld)",
              (long long)(2 * hb));
        goto done;
    }
    if (ht != 0 && ht < 1000) {
        fail (err, "heartbeat.hang_timeout_ms: must be 0 (auto) or at least 1000");
        goto done;
    }
    json_object_set_new (out, "heartbeat",
                         json_pack ("{s:I s:I s:I s:I}", "interval_ms", hb,
                                    "node_timeout_ms", nt, "hang_timeout_ms", ht,
                                    "tree_width", tw));

    /* straggler */
    double thr = default_threshold;
    json_int_t win = default_window_steps;
    const char *action = "report";
    if (!(sec = get_section (in, "straggler", straggler_keys, empty, err)) ||
        dt_json_get_real (sec, "straggler", "threshold", false, 0.0, 1.0, &thr, err) <
          0 ||
        dt_json_get_int (sec, "straggler", "window_steps", false, 2, 100000, &win, err) <
          0 ||
        dt_json_get_str (sec, "straggler", "action", false, 16, false, &action, err) < 0)
        goto done;
    if (thr <= 0.0) {
        fail (err, "straggler.threshold: must be in (0, 1]");
        goto done;
    }
    if (strcmp (action, "report") && strcmp (action, "exclude")) {
        fail (err, "straggler.action: must be \"report\" or \"exclude\"");
        goto done;
    }
    json_object_set_new (out, "straggler",
                         json_pack ("{s:f s:I s:s}", "threshold", thr, "window_steps",
                                    win, "action", action));

    if (validate_integrity (in, empty, out, err) < 0)
        goto done;
    if (validate_comm_bound (in, empty, out, err) < 0)
        goto done;
    rc = 0;
done:
    json_decref (empty);
    return rc;
}

/* parallel.shrink: the dimensions ("pp", "tp") a restart on too few nodes
 * may reduce, in order, each at most once.  *min_group: the smallest group
 * they leave (tp x pp with the listed ones at 1).  0 or -1 with err. */
static int validate_shrink (const json_t *sec, json_int_t tp, json_int_t pp,
                            json_t **list, json_int_t *min_group, dt_error_t *err)
{
    const json_t *s = json_object_get (sec, "shrink");
    size_t i;
    json_t *v;
    *list = NULL;
    *min_group = tp * pp;
    if (!s)
        return 0;
    if (!json_is_array (s) || json_array_size (s) > 2)
        return fail (err, "parallel.shrink: must be a list of at most 2 of \"pp\", "
                          "\"tp\" (the dimensions a restart may reduce, in order)");
    json_array_foreach (s, i, v)
    {
        const char *d = json_string_value (v);
        if (!d || (strcmp (d, "tp") && strcmp (d, "pp")))
            return fail (err, "parallel.shrink[%zu]: must be \"tp\" or \"pp\"", i);
        if (i == 1 && !strcmp (d, json_string_value (json_array_get (s, 0))))
            return fail (err, "parallel.shrink[1]: \"%s\" is listed twice", d);
        *min_group /= !strcmp (d, "tp") ? tp : pp;
    }
    *list = json_deep_copy (s);
    return 0;
}

/* parallel: the trainer's tensor- and pipeline-parallel degrees (DT_TP,
 * DT_PP).  Every world the job may run in (nodes, and restart.min_nodes on
 * fewer nodes, times ranks_per_node) must hold whole tp x pp groups -- at
 * restart.min_nodes, the smallest group parallel.shrink allows; the
 * data-parallel degree is what remains. */
static int validate_parallel (const json_t *in, json_int_t nodes, json_int_t rpn,
                              json_t *out, dt_error_t *err)
{
    json_t *empty = json_object (), *sec, *shrink = NULL;
    json_int_t tp = 1, pp = 1, min_group;
    bool zero1 = false;
    int rc = -1;

    if (!empty)
        return fail (err, "out of memory");
    if (!(sec = get_section (in, "parallel", parallel_keys, empty, err)) ||
        dt_json_get_int (sec, "parallel", "tp", false, 1, SPEC_MAX_RANKS_PER_NODE, &tp,
                         err) < 0 ||
        dt_json_get_int (sec, "parallel", "pp", false, 1, SPEC_MAX_RANKS_PER_NODE, &pp,
                         err) < 0 ||
        dt_json_get_bool (sec, "parallel", "zero1", false, &zero1, err) < 0 ||
        validate_shrink (sec, tp, pp, &shrink, &min_group, err) < 0)
        goto done;
    json_int_t minn = json_integer_value (
      json_object_get (json_object_get (out, "restart"), "min_nodes"));
    if ((nodes * rpn) % (tp * pp) != 0) {
        fail (err,
              "parallel: nodes * ranks_per_node (%lld) is not a multiple of tp * pp "
              "(%lld)",
              (long long)(nodes * rpn), (long long)(tp * pp));
        goto done;
    }
    if (minn > 0 && (minn * rpn) < min_group) {
        fail (err,
              "parallel: restart.min_nodes * ranks_per_node (%lld) holds no tp * pp "
              "group (%lld%s)",
              (long long)(minn * rpn), (long long)min_group,
              shrink ? ", the smallest parallel.shrink allows" : "");
        goto done;
    }
    json_t *par = json_pack ("{s:I s:I}", "tp", tp, "pp", pp);
    if (shrink && json_array_size (shrink))
        json_object_set (par, "shrink", shrink);
    if (zero1)
        json_object_set_new (par, "zero1", json_true ());
    json_object_set_new (out, "parallel", par);
    rc = 0;
done:
    json_decref (shrink);
    json_decref (empty);
    return rc;
}

/* command: a non-empty array of strings, the program first. */
static int validate_command (const json_t *in, json_t *out, dt_error_t *err)
{
    json_t *a, *v;
    char path[256];

    if (dt_json_get_arr (in, "", "command", true, &a, err) < 0)
        return -1;
    if (json_array_size (a) == 0)
        return fail (err, "command: must not be empty");
    if (json_array_size (a) > SPEC_MAX_ARGS)
        return fail (err, "command: more than %d arguments", SPEC_MAX_ARGS);
    json_t *cmd = json_array ();
    json_object_set_new (out, "command", cmd);
    size_t i;
    json_array_foreach (a, i, v)
    {
        dt_json_path_index (path, sizeof (path), "command", i);
        if (!json_is_string (v))
            return fail (err, "%s: expected string", path);
        if (json_string_length (v) > SPEC_MAX_STR)
            return fail (err, "%s: longer than %d characters", path, SPEC_MAX_STR);
        if (strlen (json_string_value (v)) != json_string_length (v))
            return fail (err, "%s: contains a NUL character", path);
        if (i == 0 && json_string_length (v) == 0)
            return fail (err, "%s: the program must not be empty", path);
        json_array_append (cmd, v);
    }
    return 0;
}

static int do_validate (const json_t *in, const struct spec_defaults *d, json_t *out,
                        dt_error_t *err)
{
    const char *s;
    json_int_t nodes = 1, spares = 0, rpn = 1, tl = 0;
    json_t *v;
    char path[256];

    if (!json_is_object (in))
        return fail (err, "spec: expected a JSON object");
    if (dt_json_check_object (in, "", top_keys, err) < 0)
        return -1;

    /* name */
    s = default_name;
    if (dt_json_get_str (in, "", "name", false, SPEC_NAME_MAX, false, &s, err) < 0)
        return -1;
    if (!name_ok (s))
        return fail (err, "name: only letters, digits, '_', '.' and '-' are allowed");
    json_object_set_new (out, "name", json_string (s));

    /* sizes */
    if (dt_json_get_int (in, "", "nodes", false, 1, SPEC_MAX_NODES, &nodes, err) < 0 ||
        dt_json_get_int (in, "", "spare_nodes", false, 0, SPEC_MAX_NODES, &spares, err) <
          0 ||
        dt_json_get_int (in, "", "ranks_per_node", false, 1, SPEC_MAX_RANKS_PER_NODE,
                         &rpn, err) < 0)
        return -1;
    if (nodes * rpn > SPEC_MAX_WORLD)
        return fail (err, "ranks_per_node: nodes * ranks_per_node exceeds %d",
                     SPEC_MAX_WORLD);
    if (nodes + spares > SPEC_MAX_NODES)
        return fail (err, "spare_nodes: nodes + spare_nodes exceeds %d", SPEC_MAX_NODES);
    json_object_set_new (out, "nodes", json_integer (nodes));
    json_object_set_new (out, "spare_nodes", json_integer (spares));
    json_object_set_new (out, "ranks_per_node", json_integer (rpn));

    if (validate_command (in, out, err) < 0)
        return -1;

    /* env */
    json_t *envin = NULL, *env = json_object ();
    json_object_set_new (out, "env", env);
    if (dt_json_get_obj (in, "", "env", false, &envin, err) < 0)
        return -1;
    if (envin) {
        const char *k;
        if (json_object_size (envin) > SPEC_MAX_ENV)
            return fail (err, "env: more than %d variables", SPEC_MAX_ENV);
        json_object_foreach (envin, k, v)
        {
            dt_json_path (path, sizeof (path), "env", k);
            if (!env_key_ok (k))
                return fail (err, "%s: not a valid environment variable name", path);
            if (!strncmp (k, "DT_", 3))
                return fail (err, "%s: DT_* variables are reserved for dtctl", path);
            if (!json_is_string (v))
                return fail (err, "%s: expected string", path);
            if (json_string_length (v) > SPEC_MAX_STR ||
                strlen (json_string_value (v)) != json_string_length (v))
                return fail (err, "%s: too long or contains a NUL character", path);
            json_object_set (env, k, v);
        }
    }

    /* workdir, partition */
    s = default_workdir;
    if (dt_json_get_str (in, "", "workdir", false, SPEC_MAX_STR, false, &s, err) < 0 ||
        check_path ("workdir", s, err) < 0)
        return -1;
    json_object_set_new (out, "workdir", json_string (s));

    v = json_object_get (in, "partition");
    if (!v || json_is_null (v))
        json_object_set_new (out, "partition", json_null ());
    else {
        if (dt_json_get_str (in, "", "partition", false, 64, false, &s, err) < 0)
            return -1;
        if (!name_ok (s))
            return fail (err, "partition: not a valid partition name");
        json_object_set_new (out, "partition", json_string (s));
    }

    /* numerics: "record" (a changed identity is an event) or "strict" (a
     * node that computes otherwise is excluded) */
    s = "record";
    if (dt_json_get_str (in, "", "numerics", false, 16, false, &s, err) < 0)
        return -1;
    if (strcmp (s, "record") && strcmp (s, "strict"))
        return fail (err, "numerics: '%s' is not one of record, strict", s);
    json_object_set_new (out, "numerics", json_string (s));

    /* time_limit: seconds, or a duration in Slurm's forms */
    v = json_object_get (in, "time_limit");
    if (v && json_is_string (v)) {
        int64_t ms;
        dt_error_t e2;
        if (dt_parse_duration_ms (json_string_value (v), &ms, &e2) < 0)
            return fail (err, "time_limit: %s", e2.text);
        tl = (ms + 999) / 1000;
    }
    else if (v && json_is_integer (v)) {
        tl = json_integer_value (v);
        if (tl < 0)
            return fail (err, "time_limit: must be >= 0 seconds");
    }
    else if (v && !json_is_null (v))
        return fail (err, "time_limit: expected integer seconds or a duration string");
    if (tl > 365LL * 86400)
        return fail (err, "time_limit: longer than a year");
    json_object_set_new (out, "time_limit", json_integer (tl));

    if (validate_sections (in, d, nodes, out, err) < 0)
        return -1;
    return validate_parallel (in, nodes, rpn, out, err);
}

json_t *spec_validate (const json_t *in, const struct spec_defaults *d, dt_error_t *err)
{
    json_t *out;

    if (!(out = json_object ())) {
        errno = ENOMEM;
        errprintf (err, "out of memory");
        return NULL;
    }
    if (do_validate (in, d, out, err) < 0) {
        int e = errno ? errno : EINVAL;
        json_decref (out);
        errno = (e == ENOMEM) ? ENOMEM : EINVAL;
        return NULL;
    }
    return out;
}

char *spec_error_field (const dt_error_t *err, char *buf, size_t len)
{
    const char *sep = strstr (err->text, ": ");
    size_t n = sep ? (size_t)(sep - err->text) : 0;

    /* a field path has no spaces; anything else is a sentence */
    if (n >= len || memchr (err->text, ' ', n))
        n = 0;
    memcpy (buf, err->text, n);
    buf[n] = '\0';
    if (!strcmp (buf, "spec"))
        buf[0] = '\0';
    return buf;
}

static const json_t *sect (const json_t *spec, const char *name)
{
    return json_object_get (spec, name);
}

void spec_parse (const json_t *spec, struct job_spec *js)
{
    const json_t *c = sect (spec, "checkpoint"), *r = sect (spec, "restart"),
                 *h = sect (spec, "heartbeat"), *s = sect (spec, "straggler"),
                 *ig = sect (spec, "integrity");

    memset (js, 0, sizeof (*js));
    js->nodes = json_integer_value (json_object_get (spec, "nodes"));
    js->spare_nodes = json_integer_value (json_object_get (spec, "spare_nodes"));
    js->ranks_per_node = json_integer_value (json_object_get (spec, "ranks_per_node"));
    js->partition = json_string_value (json_object_get (spec, "partition"));
    js->time_limit_s = json_integer_value (json_object_get (spec, "time_limit"));
    js->workdir = json_string_value (json_object_get (spec, "workdir"));
    js->env = json_object_get (spec, "env");
    /* specs stored before numerics existed: record */
    js->numerics_strict =
      !strcmp (json_string_value (json_object_get (spec, "numerics")) ?: "", "strict");
    js->ckpt.dir = json_string_value (json_object_get (c, "dir"));
    js->ckpt.every_steps = json_integer_value (json_object_get (c, "every_steps"));
    js->ckpt.keep = json_integer_value (json_object_get (c, "keep"));
    js->restart.max_restarts = json_integer_value (json_object_get (r, "max_restarts"));
    js->restart.exclude_failed_nodes =
      json_is_true (json_object_get (r, "exclude_failed_nodes"));
    js->restart.min_nodes = json_integer_value (json_object_get (r, "min_nodes"));
    js->restart.reform = json_is_true (json_object_get (r, "reform"));
    js->hb.interval_ms = json_integer_value (json_object_get (h, "interval_ms"));
    js->hb.node_timeout_ms = json_integer_value (json_object_get (h, "node_timeout_ms"));
    js->hb.hang_timeout_ms = json_integer_value (json_object_get (h, "hang_timeout_ms"));
    js->hb.tree_width = json_integer_value (json_object_get (h, "tree_width"));
    js->straggler.threshold = json_number_value (json_object_get (s, "threshold"));
    js->straggler.window_steps = json_integer_value (json_object_get (s, "window_steps"));
    js->straggler.action = json_string_value (json_object_get (s, "action"));
    js->integ.every_steps = json_integer_value (json_object_get (ig, "every_steps"));
    js->integ.action = json_string_value (json_object_get (ig, "action"));
    js->integ.skip_bad_batches = json_is_true (json_object_get (ig, "skip_bad_batches"));
    js->integ.spike_k = json_number_value (json_object_get (ig, "spike_k"));
    js->integ.spike_window = json_integer_value (json_object_get (ig, "spike_window"));
    const json_t *cb = sect (spec, "comm_bound");
    js->comm_bound.threshold = json_number_value (json_object_get (cb, "threshold"));
    js->comm_bound.window_steps =
      json_integer_value (json_object_get (cb, "window_steps"));
    const json_t *p = sect (spec, "parallel");
    /* specs stored before the layout existed have none: 1 x 1 */
    js->parallel.tp = p ? (int)json_integer_value (json_object_get (p, "tp")) : 1;
    js->parallel.pp = p ? (int)json_integer_value (json_object_get (p, "pp")) : 1;
    js->parallel.zero1 = json_is_true (json_object_get (p, "zero1"));
    const json_t *sh = json_object_get (p, "shrink");
    js->parallel.nshrink = 0;
    for (size_t i = 0; i < json_array_size (sh) && i < 2; i++)
        js->parallel.shrink[js->parallel.nshrink++] =
          !strcmp (json_string_value (json_array_get (sh, i)), "tp") ? SPEC_DIM_TP
                                                                     : SPEC_DIM_PP;
}
