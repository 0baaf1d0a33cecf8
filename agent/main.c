/* main.c: dtagent, the per-node agent of dtctl: registers with the
 * controller, starts this node's trainer ranks, watches them, relays
 * heartbeats, events, commands and rendezvous kv.
 *
 *   dtagent --controller URL [--node NAME] [--node-order N] [--state-dir DIR]
 *
 * The attempt's token comes in DT_TOKEN; DT_CONTROLLER stands in for
 * --controller.  Under Slurm the node name and order come from
 * SLURMD_NODENAME and SLURM_NODEID. */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/log.h"
#include "common/version.h"
#include "agent.h"
#include "reaper.h"
#include "ctl.h"
#include "node.h"
#include "relay.h"

static const int64_t default_register_timeout_ms = 10 * 60 * 1000;
static const int64_t default_stop_grace_ms = 20000;
static const int64_t default_kill_grace_ms = 3000;

static void usage (FILE *f)
{
    fprintf (
      f,
      "Usage: dtagent --controller URL [OPTIONS]\n"
      "  -c, --controller URL      controller (default: $DT_CONTROLLER)\n"
      "  -n, --node NAME           node name (default: $SLURMD_NODENAME, hostname)\n"
      "  -o, --node-order N        node order (default: $SLURM_NODEID, 0)\n"
      "  -s, --state-dir DIR       where the attempt directory goes (default: workdir)\n"
      "  -r, --register-timeout T  give up registering after T (default 10m)\n"
      "  -g, --stop-grace T        after a stop request, before SIGKILL (default 20s)\n"
      "  -k, --kill-grace T        after SIGTERM of a hung rank, before SIGKILL (default "
      "3s)\n"
      "  -l, --log-level LEVEL     debug, info, notice, warning, error (default info)\n"
      "  -V, --version             print the version\n"
      "  -h, --help                this text\n"
      "The attempt token is read from $DT_TOKEN.\n");
}

static int parse_ms (const char *opt, const char *s, int64_t *out)
{
    dt_error_t err;
    if (dt_parse_duration_ms (s, out, &err) < 0) {
        fprintf (stderr, "dtagent: %s: %s\n", opt, err.text);
        return -1;
    }
    return 0;
}

/* The command line (see usage). */
static const struct option longopts[] = {
    { "controller", required_argument, NULL, 'c' },
    { "node", required_argument, NULL, 'n' },
    { "node-order", required_argument, NULL, 'o' },
    { "state-dir", required_argument, NULL, 's' },
    { "register-timeout", required_argument, NULL, 'r' },
    { "stop-grace", required_argument, NULL, 'g' },
    { "kill-grace", required_argument, NULL, 'k' },
    { "log-level", required_argument, NULL, 'l' },
    { "version", no_argument, NULL, 'V' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Every signal the agent handles, blocked and read from one signalfd in
 * the event loop (returned; -1 with errno). */
static int signals_init (void)
{
    sigset_t mask;

    sigemptyset (&mask);
    sigaddset (&mask, SIGCHLD);
    sigaddset (&mask, SIGTERM);
    sigaddset (&mask, SIGUSR1);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGHUP);
    if (sigprocmask (SIG_BLOCK, &mask, NULL) < 0)
        return -1;
    signal (SIGPIPE, SIG_IGN);
    return signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* The listener for children in a fan-in tree; its port goes with the
 * registration.  NULL (logged): this node heartbeats directly. */
static relay_t *relay_start (struct node_info *ni)
{
    dt_error_t err;
    relay_t *relay = relay_create (ni->addr, getenv ("DT_TOKEN"), &err);
    if (!relay)
        dt_log (LOG_WARNING, "no relay listener (%s): heartbeats go directly", err.text);
    else
        ni->relay_port = relay_port (relay);
    return relay;
}

/* The agent's place in the tree, from the registration answer. */
static void relay_join (relay_t *relay, agent_t *agent, const struct layout *l)
{
    if (!relay)
        return;
    relay_set_ancestors (relay, l->ancestors);
    relay_set_interval (relay, l->heartbeat_interval_ms);
    agent_set_relay (agent, relay);
    if (l->ancestors)
        dt_log (LOG_INFO, "fan-in tree of width %d: heartbeats go through %s",
                l->tree_width, l->ancestors[0]);
}

int main (int argc, char **argv)
{
    const char *controller = getenv ("DT_CONTROLLER");
    const char *node_name = NULL;
    int node_order = -1;
    int64_t register_timeout_ms = default_register_timeout_ms;
    struct agent_opts opts = {
        .state_dir = NULL,
        .stop_grace_ms = default_stop_grace_ms,
        .kill_grace_ms = default_kill_grace_ms,
    };
    int level = LOG_INFO;
    int c, exit_code = 3;
    char *end;
    dt_error_t err;
    struct node_info ni;
    struct layout layout = { 0 };
    ctl_t *ctl = NULL;
    agent_t *agent = NULL;
    relay_t *relay = NULL;
    int sigfd = -1;

    /* ---- options ---- */
    while ((c = getopt_long (argc, argv, "c:n:o:s:r:g:k:l:Vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': controller = optarg; break;
        case 'n': node_name = optarg; break;
        case 'o':
            errno = 0;
            node_order = (int)strtol (optarg, &end, 10);
            if (errno || *end || node_order < 0) {
                fprintf (stderr, "dtagent: --node-order %s: not a non-negative integer\n",
                         optarg);
                return 3;
            }
            break;
        case 's': opts.state_dir = optarg; break;
        case 'r':
            if (parse_ms ("--register-timeout", optarg, &register_timeout_ms) < 0)
                return 3;
            break;
        case 'g':
            if (parse_ms ("--stop-grace", optarg, &opts.stop_grace_ms) < 0)
                return 3;
            break;
        case 'k':
            if (parse_ms ("--kill-grace", optarg, &opts.kill_grace_ms) < 0)
                return 3;
            break;
        case 'l':
            if ((level = dt_log_level_parse (optarg)) < 0) {
                fprintf (stderr, "dtagent: --log-level %s: unknown level\n", optarg);
                return 3;
            }
            break;
        case 'V': printf ("dtagent: %s\n", dt_version_string ()); return 0;
        case 'h': usage (stdout); return 0;
        default: usage (stderr); return 3;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "dtagent: unexpected argument '%s'\n", argv[optind]);
        return 3;
    }
    if (!controller || !*controller) {
        fprintf (stderr,
                 "dtagent: no controller: give --controller URL or set DT_CONTROLLER\n");
        return 3;
    }
    dt_log_init ("dtagent", DT_LOG_STDERR, level);

    /* ---- the ranks' orphans come to us, so that none outlives the attempt ---- */
    if (reaper_init () < 0)
        dt_log_errno (LOG_WARNING,
                      "PR_SET_CHILD_SUBREAPER (a rank's orphans go to init)");

    /* ---- signals: all through one signalfd in the event loop ---- */
    if ((sigfd = signals_init ()) < 0) {
        dt_log_errno (LOG_ERR, "signalfd");
        goto cleanup;
    }

    /* ---- who this node is ---- */
    if (node_detect (&ni, node_name, node_order, &err) < 0) {
        dt_log (LOG_ERR, "%s", err.text);
        goto cleanup;
    }
    dt_log (LOG_INFO, "%s: node %s (order %d), address %s, port %d", dt_version_string (),
            ni.name, ni.order, ni.addr, ni.port);
    relay = relay_start (&ni); /* children's listener in a fan-in tree */

    /* ---- the controller: register until the attempt is ready ---- */
    if (!(ctl = ctl_create (controller, getenv ("DT_TOKEN"), &err))) {
        dt_log (LOG_ERR, "%s", err.text);
        goto cleanup;
    }
    if (ctl_register (ctl, &ni, register_timeout_ms, sigfd, &layout, &err) < 0) {
        dt_log (LOG_ERR, "%s", err.text);
        exit_code = errno == ESTALE ? 2 : 3;
        goto cleanup;
    }

    /* ---- the agent: ranks, socket, loop ---- */
    if (!(agent = agent_create (ctl, &ni, &layout, sigfd, &opts, &err))) {
        dt_log (LOG_ERR, "%s", err.text);
        goto cleanup;
    }
    relay_join (relay, agent, &layout);
    exit_code = agent_run (agent);
    dt_log (LOG_INFO, "exiting with code %d", exit_code);

cleanup:
    agent_destroy (agent); /* kills any rank still running: every exit path */
    relay_destroy (relay);
    layout_clear (&layout);
    ctl_destroy (ctl);
    if (sigfd >= 0)
        close (sigfd);
    return exit_code;
}
