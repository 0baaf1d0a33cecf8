/* main.c: dtctl, the command line of dtctl: talks to dtctld over HTTP.
 *
 *   dtctl [--controller URL] [--json] COMMAND [OPTIONS] [ARGS]
 *
 * main() only parses the global options, finds the command and runs it;
 * each command lives in cmd_*.c, the connection to the controller in
 * ctl.c.  Exit codes are listed in ctl.h and dtctl(1).
 */
#include <config.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/version.h"
#include "orchestrator/cli/cmd.h"
#include "orchestrator/cli/ctl.h"

static void usage (FILE *f)
{
    fprintf (f, "Usage: dtctl [--controller URL] [--json] COMMAND [OPTIONS] [ARGS]\n\n"
                "Commands:\n");
    for (const struct cmd *c = dtctl_cmds; c->name; c++)
        fprintf (f, "  %-11s %s\n", c->name, c->summary);
    fprintf (
      f,
      "\nGlobal options:\n"
      "      --controller URL  controller to talk to (also $DTCTL_CONTROLLER,\n"
      "                        ControllerURL in the config file; default %s)\n"
      "      --json            print the answer's data as JSON\n"
      "  -h, --help            show this help ('dtctl COMMAND --help' for a command)\n"
      "  -V, --version         print the version\n"
      "\nExit status: 0 ok, 1 usage or bad input, 2 controller unreachable,\n"
      "3 not found, 4 permission denied, 5 illegal in the job's state,\n"
      "6 controller error.  See dtctl(1).\n",
      CTL_DEFAULT_URL);
}

int main (int argc, char **argv)
{
    static const struct option opts[] = {
        { "controller", required_argument, NULL, 'C' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct ctl ctl = { 0 };
    const struct cmd *cmd;
    int c, rc;

    dt_log_init ("dtctl", DT_LOG_STDERR, LOG_WARNING);

    /* Global options stop at the command name ('+'). */
    opterr = 0;
    while ((c = getopt_long (argc, argv, "+:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'C': ctl.controller_flag = optarg; break;
        case 'j': ctl.json = true; break;
        case 'h': usage (stdout); return CTL_EXIT_OK;
        case 'V': printf ("%s\n", dt_version_string ()); return CTL_EXIT_OK;
        case ':':
            fprintf (stderr, "dtctl: option '%s' needs a value\n", argv[optind - 1]);
            return CTL_EXIT_USAGE;
        default:
            fprintf (stderr, "dtctl: unknown option '%s'\nTry 'dtctl --help'.\n",
                     argv[optind - 1]);
            return CTL_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage (stderr);
        return CTL_EXIT_USAGE;
    }

    /* "dtctl help [COMMAND]" is the same as --help. */
    if (strcmp (argv[optind], "help") == 0) {
        if (optind + 1 < argc && (cmd = cmd_lookup (argv[optind + 1]))) {
            cmd_help (cmd);
            return CTL_EXIT_OK;
        }
        usage (stdout);
        return CTL_EXIT_OK;
    }
    if (!(cmd = cmd_lookup (argv[optind]))) {
        fprintf (stderr, "dtctl: unknown command '%s'\nTry 'dtctl --help'.\n",
                 argv[optind]);
        return CTL_EXIT_USAGE;
    }

    /* The command parses its own argv from scratch (optind 0 resets GNU
     * getopt's internal state). */
    argc -= optind;
    argv += optind;
    optind = 0;
    rc = cmd->fn (&ctl, argc, argv);

    ctl_fini (&ctl);
    return rc;
}
