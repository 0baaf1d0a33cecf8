/* test_metrics.c: /metrics in the Prometheus text format 0.0.4
 * (orchestrator/metrics.c), rendered from a real store (SQLite in a
 * temporary file) and the jobs module: every sample follows its HELP and
 * TYPE lines, every job and attempt state has a sample, and the heartbeat
 * histogram is cumulative with +Inf equal to the count. */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/ctld.h"
#include "orchestrator/ctldconf.h"
#include "orchestrator/fsm.h"
#include "orchestrator/jobs.h"
#include "orchestrator/metrics.h"
#include "orchestrator/store.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/test_metrics.XXXXXX";

/* The value of the sample line that starts with 'name' (name and labels). */
static double sample (const char *text, const char *name)
{
    size_t n = strlen (name);
    for (const char *p = text; p && *p;
         p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL)
        if (!strncmp (p, name, n) && p[n] == ' ')
            return strtod (p + n + 1, NULL);
    fprintf (stderr, "no sample '%s'\n", name);
    return -1;
}

static void test_render (void)
{
    struct ctld ctx;
    dt_error_t err = { "" };
    char db[600];

    memset (&ctx, 0, sizeof (ctx));
    snprintf (db, sizeof (db), "%s/dtctld.db", dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL (ctx.cfg = config_load (NULL, NULL, &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL (ctx.store = store_open (db, &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL (ctx.jobs = jobs_create (&ctx, &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL (ctx.metrics = metrics_create (&ctx, &err));

    metrics_heartbeat (ctx.metrics, 0.0003); /* in every bucket from 0.0005 */
    metrics_heartbeat (ctx.metrics, 0.002);  /* from 0.0025 */
    metrics_heartbeat (ctx.metrics, 5.0);    /* only +Inf */
    char *t = metrics_render (ctx.metrics, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (t);

    /* Every sample's metric was introduced by HELP and TYPE lines. */
    char seen[64][80];
    int nseen = 0, bad = 0;
    for (char *line = t; line && *line;
         line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL) {
        char name[80];
        if (sscanf (line, "# TYPE %79s", name) == 1 && nseen < 64)
            snprintf (seen[nseen++], sizeof (seen[0]), "%s", name);
        if (line[0] == '#')
            continue;
        size_t n = strcspn (line, "{ ");
        int ok = 0;
        for (int i = 0; i < nseen; i++) {
            size_t l = strlen (seen[i]);
            if (!strncmp (line, seen[i], l) &&
                (n == l || (n > l && (!strncmp (line + l, "_bucket", 7) ||
                                      !strncmp (line + l, "_sum", 4) ||
                                      !strncmp (line + l, "_count", 6)))))
                ok = 1;
        }
        if (!ok) {
            bad++;
            fprintf (stderr, "no TYPE before: %.*s\n", (int)strcspn (line, "\n"), line);
        }
    }
    CU_ASSERT_EQUAL (bad, 0);
    CU_ASSERT (nseen >= 9);

    for (int s = 0; s < JOB_STATE_COUNT; s++) {
        char name[128];
        snprintf (name, sizeof (name), "dtctld_jobs{state=\"%s\"}",
                  fsm_job_state_name (s));
        CU_ASSERT_EQUAL (sample (t, name), 0);
    }
    for (int s = 0; s < ATT_STATE_COUNT; s++) {
        char name[128];
        snprintf (name, sizeof (name), "dtctld_attempts{state=\"%s\"}",
                  fsm_attempt_state_name (s));
        CU_ASSERT_EQUAL (sample (t, name), 0);
    }
    CU_ASSERT_EQUAL (sample (t, "dtctld_heartbeats_received_total"), 3);
    CU_ASSERT_EQUAL (
      sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"0.0001\"}"), 0);
    CU_ASSERT_EQUAL (
      sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"0.00025\"}"), 0);
    CU_ASSERT_EQUAL (
      sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"0.0005\"}"), 1);
    CU_ASSERT_EQUAL (sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"0.001\"}"),
                     1);
    CU_ASSERT_EQUAL (
      sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"0.0025\"}"), 2);
    CU_ASSERT_EQUAL (sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"0.1\"}"),
                     2);
    CU_ASSERT_EQUAL (sample (t, "dtctld_heartbeat_handling_seconds_bucket{le=\"+Inf\"}"),
                     3);
    CU_ASSERT_EQUAL (sample (t, "dtctld_heartbeat_handling_seconds_count"), 3);
    CU_ASSERT_DOUBLE_EQUAL (sample (t, "dtctld_heartbeat_handling_seconds_sum"), 5.0023,
                            1e-9);
    CU_ASSERT_EQUAL (sample (t, "dtctld_live_attempts"), 0);
    CU_ASSERT_EQUAL (sample (t, "dtctld_checkpoints_committed"), 0);
    double start = sample (t, "dtctld_start_time_seconds");
    CU_ASSERT (start > 1.6e9 && start < 1e10);
    CU_ASSERT_EQUAL (t[strlen (t) - 1], '\n');
    free (t);

    metrics_destroy (ctx.metrics);
    jobs_destroy (ctx.jobs);
    store_close (ctx.store);
    config_destroy (ctx.cfg);
}

static const struct dt_unit_test tests[] = {
    { "the text format: HELP/TYPE, every state, a cumulative histogram", test_render },
    { NULL, NULL },
};

int main (void)
{
    if (!mkdtemp (dir)) {
        perror (dir);
        return 99;
    }
    int rc = dt_unit_run ("metrics", tests);
    char cmd[600];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", dir);
    return rc;
}
