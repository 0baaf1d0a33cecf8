/* cmd.c: dtctl's command table and shared option handling. */
#include <config.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cli/cmd.h"

#define COMMON_HELP                                                                      \
    "      --json             print the answer's data as JSON\n"                         \
    "      --controller URL   controller to talk to (default: $DTCTL_CONTROLLER,\n"      \
    "                         the config file, or " CTL_DEFAULT_URL ")\n"                \
    "  -h, --help             show this help\n"

const struct cmd dtctl_cmds[] = {
    { "submit", cmd_submit, "[OPTIONS] [JOB.json|-] [-- COMMAND [ARGS...]]",
      "submit a job from a JSON spec and/or flags; print its id",
      "  -J, --name NAME            job name\n"
      "  -N, --nodes N              nodes that run ranks\n"
      "      --spare-nodes N        idle spare nodes kept in the allocation\n"
      "  -n, --ranks-per-node N     trainer processes per node\n"
      "  -p, --partition NAME       Slurm partition\n"
      "  -t, --time-limit TIME      time limit as sbatch: a bare number is minutes; "
      "MM:SS,\n"
      "                             HH:MM:SS, D-HH[:MM[:SS]], or 90s, 2h, 1d\n"
      "  -D, --workdir DIR          working directory (default: the current one)\n"
      "  -e, --env KEY=VALUE        environment for the trainers (repeatable)\n"
      "      --checkpoint-dir DIR   where checkpoints are written\n"
      "      --checkpoint-every N   checkpoint every N steps\n"
      "      --checkpoint-keep N    committed checkpoints to keep\n"
      "      --max-restarts N       automatic restarts before giving up\n"
      "      --min-nodes N          fewest nodes a restart may run on\n"
      "      --straggler-action A   report or exclude\n"
      "      --tp T, --pp P         the trainer's tensor- and pipeline-parallel degrees\n"
      "      --shrink LIST          what a restart on too few nodes may reduce once no\n"
      "                             data-parallel replica is left to drop: tp, pp,\n"
      "                             tp,pp or pp,tp (in order), or none\n"
      "      --zero1                the trainer shards its optimizer state (ZeRO-1)\n"
      "Flags override the same fields of JOB.json; the trainer command follows '--'.\n" },
    { "list", cmd_list, "[--state STATE] [--user USER] [--name NAME]",
      "list jobs, newest first",
      "  -s, --state STATE   pending, running, restarting, completed, failed or "
      "cancelled\n"
      "  -u, --user USER     user name or uid\n"
      "      --name NAME     job name\n"
      "      --limit N       at most N jobs\n" },
    { "show", cmd_show, "JOB",
      "show a job: attempts, failures, checkpoints, stragglers, result, provenance", "" },
    { "history", cmd_history, "[--user USER] [--state STATE] [--limit N]",
      "all attempts of all jobs, newest first, with their causes",
      "  -u, --user USER     only jobs of USER\n"
      "  -s, --state STATE   only jobs in STATE\n"
      "      --limit N       look at the N newest jobs (default 100)\n" },
    { "events", cmd_events, "JOB", "the events of a job, oldest first", "" },
    { "cancel", cmd_cancel, "JOB", "cancel a job (its owner or an admin)", "" },
    { "resubmit", cmd_resubmit, "JOB [--exclude NODES] [--from-scratch]",
      "start a failed or cancelled job again from its last committed checkpoint",
      "  -x, --exclude NODES   comma-separated nodes never to use for this job\n"
      "      --from-scratch    start from step 0, ignoring checkpoints\n" },
    { "checkpoint", cmd_checkpoint, "JOB",
      "ask a running job to checkpoint now; print the step", "" },
    { "nodes", cmd_nodes, "[NODE [--limit N] | clear NODE | suspect NODE]",
      "node health: all nodes, one NODE's failure history, 'clear NODE' or 'suspect "
      "NODE' "
      "(admins)",
      "      --limit N   at most N history rows of NODE (default 100)\n" },
    { "watch", cmd_watch, "JOB [--interval TIME] [--count N]",
      "refresh a per-rank view of a job until it ends",
      "  -i, --interval TIME   refresh period (default 1s; e.g. 500ms, 2s)\n"
      "  -c, --count N         stop after N refreshes\n" },
    { "report", cmd_report, "JOB",
      "goodput report of a job: ETTR, where the time went, failures, step times", "" },
    { "ui", cmd_ui, "[JOB] [--ttl SECONDS]",
      "print a link to the web page (of JOB), valid for a while, that reads as you",
      "      --ttl SECONDS   how long the link works (default 3600, at most 86400)\n" },
    { NULL, NULL, NULL, NULL, NULL },
};

const struct cmd *cmd_lookup (const char *name)
{
    for (const struct cmd *c = dtctl_cmds; c->name; c++)
        if (strcmp (c->name, name) == 0)
            return c;
    return NULL;
}

void cmd_help (const struct cmd *cmd)
{
    printf ("Usage: dtctl %s %s\n%s.\n\nOptions:\n%s" COMMON_HELP, cmd->name, cmd->args,
            cmd->summary, cmd->help);
}

void cmd_usage_error (const char *name, const char *fmt, ...)
{
    va_list ap;

    fprintf (stderr, "dtctl: %s: ", name);
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fprintf (stderr, "\nTry 'dtctl %s --help'.\n", name);
    exit (CTL_EXIT_USAGE);
}

int cmd_getopt (const struct cmd *cmd, struct ctl *ctl, int argc, char **argv,
                const char *shortopts, const struct option *longopts)
{
    int c;

    opterr = 0;
    while ((c = getopt_long (argc, argv, shortopts, longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: ctl->json = true; break;
        case OPT_CONTROLLER: ctl->controller_flag = optarg; break;
        case 'h': cmd_help (cmd); exit (CTL_EXIT_OK);
        case '?':
            if (optopt)
                cmd_usage_error (cmd->name, "unknown option '-%c'", optopt);
            cmd_usage_error (cmd->name, "unknown option '%s'", argv[optind - 1]);
        case ':':
            cmd_usage_error (cmd->name, "option '%s' needs a value", argv[optind - 1]);
        default: return c;
        }
    }
    return -1;
}

void cmd_need_args (const struct cmd *cmd, int argc, char **argv, int n, const char *what)
{
    if (argc < n)
        cmd_usage_error (cmd->name, "missing %s", what);
    if (argc > n)
        cmd_usage_error (cmd->name, "unexpected argument '%s'", argv[n]);
}
