/* cmd_nodes.c: dtctl nodes [NODE | clear NODE | suspect NODE]: node health. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

enum { OPT_LIMIT = OPT_CMD_FIRST };

/* 'clear' or 'suspect' (admins): POST /v1/nodes/NODE/VERB. */
static int nodes_admin (struct ctl *ctl, const char *verb, const char *node)
{
    char path[512], suffix[16];
    json_t *data;

    snprintf (suffix, sizeof (suffix), "/%s", verb);
    data = ctl_call (ctl, "POST",
                     ctl_path (path, sizeof (path), "/v1/nodes/", node, suffix), NULL);
    if (ctl->json)
        out_json (data);
    else
        printf ("Node %s %s\n", node,
                strcmp (verb, "clear") ? "marked suspect" : "cleared");
    json_decref (data);
    return CTL_EXIT_OK;
}

/* "11-30 10:00:01 (3m ago)" of the time at 'path', or "-". */
static const char *when_ago (const json_t *o, const char *path, char *buf, size_t len)
{
    char w[64], ago[32];
    int64_t t = jtime_ms (jget (o, path));

    if (t < 0)
        return "-";
    snprintf (buf, len, "%s (%s ago)", fmt_when (o, path, w, sizeof (w)),
              fmt_age (now_ms () - t, ago, sizeof (ago)));
    return buf;
}

/* dtctl nodes NODE: the node and its health history, newest first. */
static int nodes_show (struct ctl *ctl, const char *node, const char *limit)
{
    static const char *const hdr[] = {
        "TIME", "EVENT", "JOB", "ATTEMPT", "CAUSE", "COUNTS", "DETAIL",
    };
    char path[512], b[8][256];
    json_t *n, *h, *c;
    struct table *t;
    size_t i;

    ctl_path (path, sizeof (path), "/v1/nodes/", node, "");
    if (limit) {
        size_t l = strlen (path);
        snprintf (path + l, sizeof (path) - l, "?limit=%s", limit);
    }
    n = ctl_call (ctl, "GET", path, NULL);
    if (ctl->json) {
        out_json (n);
        json_decref (n);
        return CTL_EXIT_OK;
    }
    printf (
      "Node %s  state=%s  failures=%s  addr=%s\n", jtext (n, "name", b[0], sizeof (b[0])),
      jtext (n, "health|state", b[1], sizeof (b[1])),
      jtext (n, "failures", b[2], sizeof (b[2])), jtext (n, "addr", b[3], sizeof (b[3])));
    printf ("  Last seen:    %s", when_ago (n, "last_seen", b[0], sizeof (b[0])));
    if (jget (n, "job"))
        printf (", job %s attempt %s", jtext (n, "job", b[1], sizeof (b[1])),
                jtext (n, "attempt", b[2], sizeof (b[2])));
    printf ("\n");
    printf ("  Last failure: %s", when_ago (n, "last_failure_time", b[0], sizeof (b[0])));
    if (jget (n, "last_cause"))
        printf (", %s", jtext (n, "last_cause", b[1], sizeof (b[1])));
    printf ("\n");
    if (jget (n, "suspect_since"))
        printf ("  Suspect since %s: %s\n",
                when_ago (n, "suspect_since", b[0], sizeof (b[0])),
                jtext (n, "note", b[1], sizeof (b[1])));
    if ((c = jget (n, "cleared"))) {
        printf ("  Last cleared: %s", when_ago (c, "time", b[0], sizeof (b[0])));
        if (jget (c, "user"))
            printf (" by %s (uid %s)", jtext (c, "user", b[1], sizeof (b[1])),
                    jtext (c, "uid", b[2], sizeof (b[2])));
        else if (jget (c, "uid"))
            printf (" by uid %s", jtext (c, "uid", b[1], sizeof (b[1])));
        printf ("\n");
    }
    else
        printf ("  Last cleared: never\n");

    h = jget (n, "history");
    if (json_array_size (h) == 0) {
        printf ("History: none (no failure was blamed on this node)\n");
        json_decref (n);
        return CTL_EXIT_OK;
    }
    printf ("History (newest first; COUNTS: the failure counts towards making the node "
            "suspect, as it came after the last clear):\n");
    t = table_create (7, hdr);
    json_array_foreach (h, i, c)
    {
        const char *kind = json_string_value (jget (c, "kind"));
        bool failure = kind && strcmp (kind, "failure") == 0;
        const char *row[] = {
            fmt_when (c, "time", b[0], sizeof (b[0])),
            jtext (c, "kind", b[1], sizeof (b[1])),
            jtext (c, "job", b[2], sizeof (b[2])),
            jtext (c, "attempt", b[3], sizeof (b[3])),
            jtext (c, "cause", b[4], sizeof (b[4])),
            failure ? jtext (c, "since_clear", b[5], sizeof (b[5])) : "-",
            jtext (c, "detail", b[6], sizeof (b[6])),
        };
        table_add (t, row);
    }
    table_print (t, stdout, 2);
    json_decref (n);
    return CTL_EXIT_OK;
}

/* dtctl nodes: every node with its health. */
static int nodes_list (struct ctl *ctl)
{
    static const char *const hdr[] = {
        "NAME",    "STATE", "FAILURES",  "LAST_FAILURE", "CAUSE",  "JOB",
        "ATTEMPT", "ADDR",  "LAST_SEEN", "CPUS",         "MEM_MB", "GPUS",
    };
    json_t *nodes, *n;
    struct table *t;
    size_t i;

    nodes = ctl_call (ctl, "GET", "/v1/nodes", NULL);
    if (ctl->json) {
        out_json (nodes);
        json_decref (nodes);
        return CTL_EXIT_OK;
    }
    t = table_create (12, hdr);
    json_array_foreach (nodes, i, n)
    {
        char b[12][256];
        int64_t seen = jtime_ms (jget (n, "last_seen"));
        char ago[32];
        const char *row[] = {
            jtext (n, "name", b[0], sizeof (b[0])),
            jtext (n, "health|state", b[1], sizeof (b[1])),
            jtext (n, "failures", b[2], sizeof (b[2])),
            fmt_when (n, "last_failure_time", b[3], sizeof (b[3])),
            jtext (n, "last_cause", b[4], sizeof (b[4])),
            jtext (n, "job", b[5], sizeof (b[5])),
            jtext (n, "attempt", b[6], sizeof (b[6])),
            jtext (n, "addr", b[7], sizeof (b[7])),
            seen < 0 ? "-"
                     : (snprintf (b[8], sizeof (b[8]), "%s ago",
                                  fmt_age (now_ms () - seen, ago, sizeof (ago))),
                        b[8]),
            jtext (n, "hostinfo.cores", b[9], sizeof (b[9])),
            jtext (n, "hostinfo.mem_mb", b[10], sizeof (b[10])),
            json_array_size (jget (n, "hostinfo.gpus")) > 0
              ? (snprintf (b[11], sizeof (b[11]), "%zu",
                           json_array_size (jget (n, "hostinfo.gpus"))),
                 b[11])
              : "0",
        };
        table_add (t, row);
    }
    table_print (t, stdout, 0);
    json_decref (nodes);
    return CTL_EXIT_OK;
}

int cmd_nodes (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        CMD_COMMON_OPTS,
        { "limit", required_argument, NULL, OPT_LIMIT },
        { NULL, 0, NULL, 0 },
    };
    const struct cmd *cmd = cmd_lookup ("nodes");
    const char *limit = NULL;
    int c;

    while ((c = cmd_getopt (cmd, ctl, argc, argv, ":h", opts)) != -1) {
        if (c == OPT_LIMIT) {
            char *end;
            long v;
            errno = 0;
            v = strtol (optarg, &end, 10);
            if (end == optarg || *end || errno || v < 1)
                cmd_usage_error (cmd->name, "--limit: expected an integer >= 1, not '%s'",
                                 optarg);
            limit = optarg;
        }
    }
    argc -= optind;
    argv += optind;
    if (argc >= 1 && (!strcmp (argv[0], "clear") || !strcmp (argv[0], "suspect"))) {
        cmd_need_args (cmd, argc - 1, argv + 1, 1, "NODE (a node name)");
        return nodes_admin (ctl, argv[0], argv[1]);
    }
    if (argc > 1)
        cmd_usage_error (cmd->name,
                         "expected at most one NODE, 'clear NODE' or 'suspect NODE'");
    if (argc == 1)
        return nodes_show (ctl, argv[0], limit);
    if (limit)
        cmd_usage_error (cmd->name, "--limit applies to the history of one NODE");
    return nodes_list (ctl);
}
