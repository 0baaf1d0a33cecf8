/* agentev.c: the events agents send (POST /v1/agent/events,
 * schemas/agent-api.md): each kind's members, and their checks, made in
 * full before any event of a batch is applied so that a bad event changes
 * nothing. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/jsonx.h"
#include "orchestrator/agentev.h"
#include "orchestrator/jobs.h"

struct ev_spec {
    const char *kind;
    const char *const keys[10];
};

static const struct ev_spec ev_specs[] = {
    { "rank_exit",
      { "kind", "rank", "exit_code", "signal", "stderr_tail", "step", NULL } },
    { "hang", { "kind", "rank", "detail", NULL } },
    { "shard",
      { "kind", "rank", "step", "path", "bytes", "crc32c", "jit", "shard_rank", NULL } },
    { "shard_failed", { "kind", "rank", "step", "detail", NULL } },
    { "result", { "kind", "rank", "result", NULL } },
    { "node_failure", { "kind", "detail", NULL } },
    { "signal", { "kind", "detail", NULL } },
    { "done", { "kind", "exit_code", NULL } },
    { "integrity", { "kind", "rank", "step", "report", NULL } },
    { "perf", { "kind", "rank", "model_flops", "peak_flops", "peak_source", NULL } },
    { "caps", { "kind", "rank", "reform", "waiting", "standby", NULL } },
    { "numerics", { "kind", "rank", "numerics", NULL } },
};

/* A FLOP count or rate beyond any machine: a garbled report. */
static const double perf_flops_max = 1e24;

int agentev_check (struct attempt *att, json_t *e, const char *path, dt_error_t *err)
{
    const char *kind, *s;
    const struct ev_spec *spec = NULL;
    json_int_t i;
    json_t *o;

    if (!json_is_object (e))
        return errnoprintf (err, EINVAL, "%s: expected object", path);
    if (dt_json_get_str (e, path, "kind", true, 32, false, &kind, err) < 0)
        return -1;
    for (size_t k = 0; k < sizeof (ev_specs) / sizeof (ev_specs[0]); k++)
        if (!strcmp (ev_specs[k].kind, kind))
            spec = &ev_specs[k];
    if (!spec)
        return errnoprintf (err, EINVAL, "%s.kind: unknown event kind '%.32s'", path,
                            kind);
    if (dt_json_check_object (e, path, spec->keys, err) < 0)
        return -1;
    bool need_rank =
      strcmp (kind, "node_failure") && strcmp (kind, "signal") && strcmp (kind, "done");
    if (dt_json_get_int (e, path, "rank", need_rank, 0, att->row.world_size - 1, &i,
                         err) < 0 ||
        dt_json_get_int (e, path, "exit_code", false, -1024, 1024, &i, err) < 0 ||
        dt_json_get_int (e, path, "signal", false, 0, 128, &i, err) < 0 ||
        dt_json_get_str (e, path, "stderr_tail", false, 65536, true, &s, err) < 0 ||
        dt_json_get_str (e, path, "detail", false, 4096, true, &s, err) < 0)
        return -1;
    if (!strcmp (kind, "shard") || !strcmp (kind, "shard_failed")) {
        if (dt_json_get_int (e, path, "step", true, 0, INT64_MAX, &i, err) < 0)
            return -1;
    }
    /* rank_exit: the last step the rank reported (optional). */
    if (!strcmp (kind, "rank_exit") &&
        dt_json_get_int (e, path, "step", false, 0, INT64_MAX, &i, err) < 0)
        return -1;
    /* shard: a just-in-time shard names the rank whose shard it is. */
    if (!strcmp (kind, "shard")) {
        json_t *j = json_object_get (e, "jit");
        if (j && !json_is_boolean (j))
            return errnoprintf (err, EINVAL, "%s.jit: expected true or false", path);
        if (dt_json_get_int (e, path, "shard_rank", json_is_true (j), 0,
                             att->row.world_size - 1, &i, err) < 0)
            return -1;
        if (!json_is_true (j) && json_object_get (e, "shard_rank"))
            return errnoprintf (err, EINVAL,
                                "%s.shard_rank: only for a just-in-time shard "
                                "(\"jit\": true)",
                                path);
    }
    if (!strcmp (kind, "shard")) {
        if (dt_json_get_str (e, path, "path", true, 4096, false, &s, err) < 0 ||
            dt_json_get_int (e, path, "bytes", true, 0, INT64_MAX, &i, err) < 0 ||
            dt_json_get_str (e, path, "crc32c", true, 16, false, &s, err) < 0)
            return -1;
    }
    if (!strcmp (kind, "result") &&
        dt_json_get_obj (e, path, "result", true, &o, err) < 0)
        return -1;
    if (!strcmp (kind, "integrity") &&
        (dt_json_get_int (e, path, "step", true, 0, INT64_MAX, &i, err) < 0 ||
         dt_json_get_obj (e, path, "report", true, &o, err) < 0))
        return -1;
    /* perf: model FLOPs of the rank's step (>= 1), its peak FLOP/s (0:
     * unknown) and a word saying where the peak came from. */
    if (!strcmp (kind, "caps")) {
        for (const char *const *k =
               (const char *const[]){ "reform", "waiting", "standby", NULL };
             *k; k++) {
            json_t *b = json_object_get (e, *k);
            if (b && !json_is_boolean (b))
                return errnoprintf (err, EINVAL, "%s.%s: expected true or false", path,
                                    *k);
        }
    }
    if (!strcmp (kind, "numerics") &&
        (dt_json_get_obj (e, path, "numerics", true, &o, err) < 0 ||
         jobs_numerics_check (o, path, err) < 0))
        return -1;
    if (!strcmp (kind, "perf")) {
        double d;
        s = NULL;
        if (dt_json_get_real (e, path, "model_flops", true, 1, perf_flops_max, &d, err) <
              0 ||
            dt_json_get_real (e, path, "peak_flops", false, 0, perf_flops_max, &d, err) <
              0 ||
            dt_json_get_str (e, path, "peak_source", false, 31, false, &s, err) < 0)
            return -1;
        for (const char *c = s; c && *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                  *c == '-' || *c == '.'))
                return errnoprintf (err, EINVAL,
                                    "%s.peak_source: only [a-z0-9_.-] allowed", path);
    }
    return 0;
}
