/* cmd_ui.c: dtctl ui [JOB], a link to the web page (POST /v1/ui/link). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/out.h"

enum { OPT_TTL = OPT_CMD_FIRST };

int cmd_ui (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = { CMD_COMMON_OPTS,
                                          { "ttl", required_argument, NULL, OPT_TTL },
                                          { NULL, 0, NULL, 0 } };
    const struct cmd *cmd = cmd_lookup ("ui");
    long long ttl = 0, job = 0;
    char *end;
    int c;

    while ((c = cmd_getopt (cmd, ctl, argc, argv, ":h", opts)) != -1) {
        if (c == OPT_TTL) {
            ttl = strtoll (optarg, &end, 10);
            if (!*optarg || *end || ttl < 1 || ttl > 86400)
                cmd_usage_error (
                  cmd->name, "--ttl must be a number of seconds in [1, 86400], not '%s'",
                  optarg);
        }
    }
    if (argc - optind > 1)
        cmd_usage_error (cmd->name, "at most one JOB");
    if (argc - optind == 1) {
        job = strtoll (argv[optind], &end, 10);
        if (job <= 0 || *end)
            cmd_usage_error (cmd->name,
                             "JOB must be a job id (a positive integer), not '%s'",
                             argv[optind]);
    }
    json_t *body = ttl ? json_pack ("{s:I}", "ttl_s", (json_int_t)ttl) : json_object ();
    json_t *r = ctl_call (ctl, "POST", "/v1/ui/link", body);
    json_decref (body);
    if (ctl->json) {
        out_json (r);
        json_decref (r);
        return CTL_EXIT_OK;
    }
    const char *url = json_string_value (json_object_get (r, "url"));
    const char *frag = url ? strstr (url, "/ui/#") : NULL;
    if (!frag)
        ctl_die (CTL_EXIT_SERVER, "malformed answer: no url");
    /* The job's page: the same link with job.html?id=JOB before the token. */
    if (job)
        printf ("%.*s/ui/job.html?id=%lld%s\n", (int)(frag - url), url, job, frag + 4);
    else
        printf ("%s\n", url);
    fprintf (stderr, "dtctl: the link reads as %s until %s (keep it private)\n",
             json_string_value (json_object_get (r, "user")),
             json_string_value (json_object_get (r, "expires")));
    json_decref (r);
    return CTL_EXIT_OK;
}
