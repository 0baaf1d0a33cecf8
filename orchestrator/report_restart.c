/* report_restart.c: the parts of the goodput report (report.h) that say
 * how each restart went: the layout and the communication per parallel
 * dimension of each attempt, the recovery time per restart path, and one
 * row per restart after a failure with its path, its layout change and
 * the time from the failure to each point of the restart that the record
 * holds.  Pure functions of the facts report.c gathers. */
#include <config.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dtime.h"
#include "orchestrator/report.h"

static const char *const dim_names[3] = { "tp", "pp", "dp" };

json_t *report_layout_json (const struct report_attempt *a)
{
    if (a->tp <= 0 || a->pp <= 0)
        return json_null ();
    return json_pack ("{s:i s:i s:i s:b}", "tp", a->tp, "pp", a->pp, "dp",
                      a->world_size / (a->tp * a->pp), "zero1", a->zero1);
}

json_t *report_comm_json (const struct report_attempt *a)
{
    if (!a->dims_sum || a->dims_steps <= 0)
        return json_null ();
    json_t *o = json_pack ("{s:I}", "steps", (json_int_t)a->dims_steps);
    double n = (double)a->dims_steps;
    for (int d = 0; o && d < 3; d++) {
        const double *x = &a->dims_sum[3 * d];
        json_object_set_new (o, dim_names[d],
                             json_pack ("{s:f s:f s:f}", "bytes", x[0] / n, "comm_ms",
                                        x[1] / n, "exposed_ms", x[2] / n));
    }
    return o;
}

json_t *report_comm_rows (const struct report_attempt *atts, int n)
{
    json_t *out = json_array ();
    for (int i = 0; out && i < n; i++) {
        const struct report_attempt *a = &atts[i];
        if (!a->dims_sum || a->dims_steps <= 0)
            continue;
        double k = (double)a->dims_steps;
        for (int d = 0; d < 3; d++) {
            const double *x = &a->dims_sum[3 * d];
            json_array_append_new (
              out, json_pack ("{s:i s:s s:I s:f s:f s:f}", "attempt", a->attempt, "dim",
                              dim_names[d], "steps", (json_int_t)a->dims_steps,
                              "bytes_per_step", x[0] / k, "comm_ms_per_step", x[1] / k,
                              "exposed_ms_per_step", x[2] / k));
        }
    }
    return out;
}

/* "tp2 pp1 dp2" (" zero1"), or NULL when the layout is not recorded. */
static const char *layout_text (const struct report_attempt *a, char *buf, size_t len)
{
    if (a->tp <= 0 || a->pp <= 0)
        return NULL;
    snprintf (buf, len, "tp%d pp%d dp%d%s", a->tp, a->pp, a->world_size / (a->tp * a->pp),
              a->zero1 ? " zero1" : "");
    return buf;
}

double report_recovery_ms (const struct report_attempt *prev,
                           const struct report_attempt *a)
{
    if (!prev || !prev->failed || prev->fail <= 0 || a->first_step_time <= 0 ||
        a->first_step_time < prev->fail)
        return NAN;
    return (double)(a->first_step_time - prev->fail);
}

json_t *report_recovery_by_path (const struct report_attempt *atts, int n)
{
    json_t *out = json_object ();
    for (int i = 1; out && i < n; i++) {
        const struct report_attempt *a = &atts[i];
        double ms = report_recovery_ms (&atts[i - 1], a);
        if (!a->restart_path || !*a->restart_path || isnan (ms))
            continue;
        json_t *p = json_object_get (out, a->restart_path);
        if (!p) {
            p = json_pack ("{s:i s:f s:f}", "count", 0, "recovery_s_total", 0.0,
                           "recovery_s_max", 0.0);
            json_object_set_new (out, a->restart_path, p);
        }
        double tot = json_real_value (json_object_get (p, "recovery_s_total"));
        double mx = json_real_value (json_object_get (p, "recovery_s_max"));
        json_object_set_new (
          p, "count",
          json_integer (json_integer_value (json_object_get (p, "count")) + 1));
        json_object_set_new (p, "recovery_s_total", json_real (tot + ms / 1000.0));
        json_object_set_new (p, "recovery_s_max",
                             json_real (ms / 1000.0 > mx ? ms / 1000.0 : mx));
    }
    return out;
}

/* Seconds from 'fail' to 't'; null when either is not recorded. */
static json_t *since (int64_t fail, int64_t t)
{
    return fail > 0 && t > 0 ? json_real ((double)(t - fail) / 1000.0) : json_null ();
}

json_t *report_restarts (const struct report_attempt *atts, int n,
                         const double *detect_ms)
{
    json_t *out = json_array ();
    for (int i = 1; out && i < n; i++) {
        const struct report_attempt *prev = &atts[i - 1], *a = &atts[i];
        char lb[2][64];
        if (!prev->failed)
            continue;
        /* The path as the attempt record says it, whatever its name. */
        const char *path = a->restart_path && *a->restart_path ? a->restart_path : NULL;
        const char *from = layout_text (prev, lb[0], sizeof (lb[0]));
        const char *to = layout_text (a, lb[1], sizeof (lb[1]));
        int64_t f = prev->fail;
        json_t *row = json_pack (
          "{s:i s:s? s:s? s:s? s:s? s:o s:o s:o s:o s:o s:o s:o s:o}", "attempt",
          a->attempt, "path", path, "after", *prev->cause ? prev->cause : NULL,
          "from_layout", from, "layout", to, "resume_step",
          a->resume_step >= 0 ? json_integer (a->resume_step) : json_null (),
          "detection_s",
          isnan (detect_ms[i - 1]) ? json_null () : json_real (detect_ms[i - 1] / 1000.0),
          "stopped_s", since (f, prev->end), "submitted_s", since (f, a->submit),
          "allocated_s", since (f, a->leave_queue), "running_s", since (f, a->running),
          "first_step_s",
          a->first_step_time >= f ? since (f, a->first_step_time) : json_null (),
          "layout_changed", json_boolean (from && to && strcmp (from, to) != 0));
        json_array_append_new (out, row);
    }
    return out;
}
