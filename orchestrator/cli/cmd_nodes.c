/* cmd_nodes.c: dtctl nodes [clear NODE]. */
#include <config.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"
#include "orchestrator/cli/out.h"

static int nodes_clear (struct ctl *ctl, const char *node)
{
    char path[512];
    json_t *data;

    data = ctl_call (ctl, "POST", ctl_path (path, sizeof (path), "/v1/nodes/", node, "/clear"),
                     NULL);
    if (ctl->json)
        out_json (data);
    else
        printf ("Node %s cleared\n", node);
    json_decref (data);
    return CTL_EXIT_OK;
}

int cmd_nodes (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS, { NULL, 0, NULL, 0 } };
    static const char *const hdr[] = {
        "NAME", "STATE", "FAILURES", "JOB", "ATTEMPT", "ADDR", "LAST_SEEN", "CPUS", "MEM_MB", "GPUS",
    };
    const struct cmd *cmd = cmd_lookup ("nodes");
    json_t *nodes, *n;
    struct table *t;
    size_t i;

    while (cmd_getopt (cmd, ctl, argc, argv, ":h", opts) != -1)
        ;
    argc -= optind;
    argv += optind;
    if (argc >= 1 && strcmp (argv[0], "clear") == 0) {
        cmd_need_args (cmd, argc - 1, argv + 1, 1, "NODE (a node name)");
        return nodes_clear (ctl, argv[1]);
    }
    if (argc >= 1)
        cmd_usage_error (cmd->name, "unknown subcommand '%s' (expected 'clear NODE')", argv[0]);

    nodes = ctl_call (ctl, "GET", "/v1/nodes", NULL);
    if (ctl->json) {
        out_json (nodes);
        json_decref (nodes);
        return CTL_EXIT_OK;
    }
    t = table_create (10, hdr);
    json_array_foreach (nodes, i, n) {
        char b[10][256];
        int64_t seen = jtime_ms (jget (n, "last_seen"));
        char ago[32];
        const char *row[] = {
            jtext (n, "name", b[0], sizeof (b[0])),
            jtext (n, "state", b[1], sizeof (b[1])),
            jtext (n, "failures", b[2], sizeof (b[2])),
            jtext (n, "job", b[3], sizeof (b[3])),
            jtext (n, "attempt", b[4], sizeof (b[4])),
            jtext (n, "addr", b[5], sizeof (b[5])),
            seen < 0 ? "-" : (snprintf (b[6], sizeof (b[6]), "%s ago",
                                        fmt_age (now_ms () - seen, ago, sizeof (ago))), b[6]),
            jtext (n, "hostinfo.cores", b[7], sizeof (b[7])),
            jtext (n, "hostinfo.mem_mb", b[8], sizeof (b[8])),
            json_array_size (jget (n, "hostinfo.gpus")) > 0
                ? (snprintf (b[9], sizeof (b[9]), "%zu", json_array_size (jget (n, "hostinfo.gpus"))), b[9])
                : "0",
        };
        table_add (t, row);
    }
    table_print (t, stdout, 0);
    json_decref (nodes);
    return CTL_EXIT_OK;
}
