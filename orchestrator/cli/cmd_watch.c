/* cmd_watch.c: dtctl watch JOB, a refreshing per-rank view of a job. */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/dtime.h"
#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

/* The straggler threshold when the spec does not say (the spec default,
 * orchestrator/spec.c). */
static const double straggler_threshold_default = 0.75;

static bool ended (const json_t *job)
{
    const char *s = json_string_value (jget (job, "state"));
    return s && (!strcmp (s, "completed") || !strcmp (s, "failed") ||
                 !strcmp (s, "cancelled"));
}

static void render (const json_t *job, const json_t *ranks, bool tty)
{
    static const char *const hdr[] = {
        "RANK",    "NODE",       "STATE",   "STEP",      "LOSS",
        "STEP_MS", "COMPUTE_MS", "COMM_MS", "STRAGGLER", "LAST_SEEN",
    };
    double thr = straggler_threshold_default;
    char b[9][128];
    struct table *t;
    size_t i;
    json_t *r;
    time_t now = time (NULL);
    struct tm tm;
    char clock[32];

    if (jget (job, "spec.straggler.threshold"))
        thr = json_number_value (jget (job, "spec.straggler.threshold"));
    gmtime_r (&now, &tm);
    strftime (clock, sizeof (clock), "%H:%M:%SZ", &tm);
    if (tty)
        fputs ("\033[H\033[2J", stdout); /* home + clear: one frame per screen */
    printf ("Job %s %s  state=%s  attempt=%s  restarts=%s  step=%s  loss=%s  "
            "%s samples/s  checkpoint=%s  [%s]\n",
            jtext (job, "id", b[0], sizeof (b[0])),
            jtext (job, "name", b[1], sizeof (b[1])),
            jtext (job, "state", b[2], sizeof (b[2])),
            jtext (job, "attempt", b[3], sizeof (b[3])),
            jtext (job, "restarts", b[4], sizeof (b[4])),
            jtext (job, "step", b[5], sizeof (b[5])),
            jfmt (jget (job, "loss"), "%.4f", b[6], sizeof (b[6])),
            jfmt (jget (job, "throughput"), "%.1f", b[7], sizeof (b[7])),
            jtext (job, "last_checkpoint", b[8], sizeof (b[8])), clock);
    t = table_create (10, hdr);
    json_array_foreach (ranks, i, r)
    {
        char c[10][128];
        json_t *cm = jget (r, "compute_ms"), *co = jget (r, "comm_ms");
        json_t *score = jget (r, "straggler_score");
        int64_t seen = jtime_ms (jget (r, "last_seen"));
        char age[32];
        if (cm || co)
            snprintf (c[5], sizeof (c[5]), "%.1f",
                      (cm ? json_number_value (cm) : 0) +
                        (co ? json_number_value (co) : 0));
        else
            snprintf (c[5], sizeof (c[5]), "-");
        if (score)
            snprintf (c[8], sizeof (c[8]), "%.2f%s", json_number_value (score),
                      json_number_value (score) < thr ? " *" : "");
        else
            snprintf (c[8], sizeof (c[8]), "-");
        if (seen >= 0)
            snprintf (c[9], sizeof (c[9]), "%s ago",
                      fmt_age (now_ms () - seen, age, sizeof (age)));
        else
            snprintf (c[9], sizeof (c[9]), "-");
        const char *row[] = {
            jtext (r, "rank", c[0], sizeof (c[0])),
            jtext (r, "node", c[1], sizeof (c[1])),
            jtext (r, "state", c[2], sizeof (c[2])),
            jtext (r, "step", c[3], sizeof (c[3])),
            jfmt (jget (r, "loss"), "%.4f", c[4], sizeof (c[4])),
            c[5],
            jfmt (cm, "%.1f", c[6], sizeof (c[6])),
            jfmt (co, "%.1f", c[7], sizeof (c[7])),
            c[8],
            c[9],
        };
        table_add (t, row);
    }
    if (json_array_size (ranks) > 0)
        table_print (t, stdout, 0);
    else {
        table_print (t, stdout, 0);
        printf ("(no ranks reporting yet)\n");
    }
    if (ended (job)) {
        const char *reason = json_string_value (jget (job, "reason"));
        printf ("Job %s ended: %s%s%s\n", jtext (job, "id", b[0], sizeof (b[0])),
                jtext (job, "state", b[1], sizeof (b[1])), reason ? " - " : "",
                reason ? reason : "");
    }
    else if (!tty)
        printf ("\n");
    fflush (stdout);
}

int cmd_watch (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        CMD_COMMON_OPTS,
        { "interval", required_argument, NULL, 'i' },
        { "count", required_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    const struct cmd *cmd = cmd_lookup ("watch");
    int64_t interval_ms = 1000;
    long count = 0; /* 0: until the job ends */
    bool tty = isatty (STDOUT_FILENO);
    char jpath[256], rpath[256];
    const char *id;
    char *end;
    int c;

    while ((c = cmd_getopt (cmd, ctl, argc, argv, ":hi:c:", opts)) != -1) {
        switch (c) {
        case 'i': {
            dt_error_t err;
            if (dt_parse_duration_ms (optarg, &interval_ms, &err) < 0)
                cmd_usage_error (cmd->name, "--interval: %s", err.text);
            if (interval_ms < 100)
                cmd_usage_error (cmd->name, "--interval: at least 100ms, not '%s'",
                                 optarg);
            break;
        }
        case 'c':
            count = strtol (optarg, &end, 10);
            if (*end || end == optarg || count < 1)
                cmd_usage_error (
                  cmd->name, "--count: expected a positive integer, not '%s'", optarg);
            break;
        }
    }
    cmd_need_args (cmd, argc - optind, argv + optind, 1, "JOB (a job id)");
    id = argv[optind];
    if (strtoll (id, &end, 10) <= 0 || *end)
        cmd_usage_error (cmd->name, "JOB must be a job id (a positive integer), not '%s'",
                         id);
    ctl_path (jpath, sizeof (jpath), "/v1/jobs/", id, NULL);
    ctl_path (rpath, sizeof (rpath), "/v1/jobs/", id, "/ranks");

    for (long n = 1;; n++) {
        json_t *job = ctl_call (ctl, "GET", jpath, NULL);
        json_t *ranks = ctl_call (ctl, "GET", rpath, NULL);
        bool done = ended (job);

        if (ctl->json) {
            /* One line per refresh, for jq --stream-like consumers. */
            json_t *frame = json_pack ("{s:O s:O}", "job", job, "ranks", ranks);
            json_dumpf (frame, stdout, JSON_COMPACT);
            fputc ('\n', stdout);
            fflush (stdout);
            json_decref (frame);
        }
        else
            render (job, ranks, tty);
        json_decref (job);
        json_decref (ranks);
        if (done || (count > 0 && n >= count))
            break;
        struct timespec ts = { interval_ms / 1000,
                               (long)(interval_ms % 1000) * 1000000L };
        nanosleep (&ts, NULL);
    }
    return CTL_EXIT_OK;
}
