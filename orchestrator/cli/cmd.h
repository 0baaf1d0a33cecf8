/* cmd.h: the subcommands of dtctl and their shared option handling.
 *
 * Each command is one function taking its own argv (argv[0] is the
 * command name) and returning the process exit code.  Every command
 * accepts --json, --controller URL and --help in addition to its own
 * options; errors from the controller end the process in ctl_call.
 */
#ifndef DTCTL_CMD_H
#define DTCTL_CMD_H

#include <getopt.h>
#include <stdbool.h>
#include "orchestrator/cli/ctl.h"

struct cmd {
    const char *name;
    int (*fn) (struct ctl *ctl, int argc, char **argv);
    const char *args;    /* synopsis after the name */
    const char *summary; /* one line for dtctl --help */
    const char *help;    /* option list for dtctl CMD --help */
};

/* The table, terminated by a zeroed entry (main.c walks it). */
extern const struct cmd dtctl_cmds[];
const struct cmd *cmd_lookup (const char *name);

/* Print "usage: dtctl NAME ARGS" + summary + help on stdout. */
void cmd_help (const struct cmd *cmd);

/* Print "dtctl: NAME: msg" and "Try 'dtctl NAME --help'." on stderr and
 * exit 1. */
void cmd_usage_error (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3), noreturn));

/* Long options every command takes; use as the first entries of a
 * command's struct option array. */
enum { OPT_JSON = 0x100, OPT_CONTROLLER, OPT_HELP, OPT_CMD_FIRST };
#define CMD_COMMON_OPTS                                                                  \
    { "json", no_argument, NULL, OPT_JSON },                                             \
      { "controller", required_argument, NULL, OPT_CONTROLLER },                         \
    {                                                                                    \
        "help", no_argument, NULL, 'h'                                                   \
    }

/* Run getopt_long over argv and handle the common options.  Returns the
 * next command-specific option (like getopt_long) or -1 at the end; exits
 * on --help and on an unknown option.  'shortopts' should begin with '+'
 * when the command takes a trailing command line. */
int cmd_getopt (const struct cmd *cmd, struct ctl *ctl, int argc, char **argv,
                const char *shortopts, const struct option *longopts);

/* Require exactly 'n' positional arguments (argc/argv: what is left after
 * option parsing); 'what' names them in the error ("JOB"). */
void cmd_need_args (const struct cmd *cmd, int argc, char **argv, int n,
                    const char *what);

/* Helpers of the job commands (cmd_jobs.c): the JOB argument, checked to
 * be a job id (a usage error otherwise); a job's user name, or its uid
 * when the controller knows no name. */
const char *cmd_job_arg (const struct cmd *cmd, int argc, char **argv);
const char *cmd_user_of (const json_t *job, char *buf, size_t len);

/* The commands. */
int cmd_submit (struct ctl *ctl, int argc, char **argv);
int cmd_list (struct ctl *ctl, int argc, char **argv);
int cmd_show (struct ctl *ctl, int argc, char **argv);
int cmd_history (struct ctl *ctl, int argc, char **argv);
int cmd_events (struct ctl *ctl, int argc, char **argv);
int cmd_cancel (struct ctl *ctl, int argc, char **argv);
int cmd_resubmit (struct ctl *ctl, int argc, char **argv);
int cmd_checkpoint (struct ctl *ctl, int argc, char **argv);
int cmd_nodes (struct ctl *ctl, int argc, char **argv);
int cmd_watch (struct ctl *ctl, int argc, char **argv);
int cmd_report (struct ctl *ctl, int argc, char **argv);
int cmd_ui (struct ctl *ctl, int argc, char **argv);

#endif
