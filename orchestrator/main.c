/* main.c: dtctld, the dtctl controller daemon: startup, event loop, shutdown. */
#include <config.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtime.h"
#include "common/log.h"
#include "common/version.h"
#include "orchestrator/agentapi.h"
#include "orchestrator/relayapi.h"
#include "orchestrator/api.h"
#include "orchestrator/ctldconf.h"
#include "orchestrator/ctld.h"
#include "orchestrator/userdir.h"
#include "orchestrator/daemon.h"
#include "orchestrator/gate.h"
#include "orchestrator/jobs.h"
#include "orchestrator/provenance.h"
#include "orchestrator/metrics.h"
#include "orchestrator/report.h"
#include "orchestrator/ui.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

/* The supervision tick: timeouts, launcher polls, the batched flush. */
static const int tick_ms = 100;

static const char *usage_text =
  "Usage: dtctld [OPTIONS]\n"
  "  -c, --config=FILE        dtctld.conf (default " SYSCONFDIR
  "/dtctld/dtctld.conf if it exists)\n"
  "  -f, --foreground         stay in the foreground, log to stderr\n"
  "  -l, --listen=ADDR        ListenAddress\n"
  "  -p, --port=PORT          ListenPort (0: any free port)\n"
  "  -d, --database=FILE      DatabasePath\n"
  "  -s, --state-dir=DIR      StateDir\n"
  "  -L, --launcher=NAME      Launcher (local | slurm | external)\n"
  "  -a, --auth=TYPE          AuthType (munge | none)\n"
  "  -v, --log-level=LEVEL    LogLevel (debug, info, notice, warning, error)\n"
  "  -P, --pid-file=FILE      PidFile\n"
  "      --dtagent=PATH       DtagentPath\n"
  "      --port-file=FILE     write the port actually bound to FILE (tests)\n"
  "  -V, --version            print the version and exit\n"
  "  -h, --help               this text\n";

static const struct option longopts[] = {
    { "config", required_argument, NULL, 'c' },
    { "foreground", no_argument, NULL, 'f' },
    { "listen", required_argument, NULL, 'l' },
    { "port", required_argument, NULL, 'p' },
    { "database", required_argument, NULL, 'd' },
    { "state-dir", required_argument, NULL, 's' },
    { "launcher", required_argument, NULL, 'L' },
    { "auth", required_argument, NULL, 'a' },
    { "log-level", required_argument, NULL, 'v' },
    { "pid-file", required_argument, NULL, 'P' },
    { "dtagent", required_argument, NULL, 'A' },
    { "port-file", required_argument, NULL, 'F' },
    { "version", no_argument, NULL, 'V' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Startup failure: to the terminal that started us, then exit 1. */
static void die (const char *fmt, ...) __attribute__ ((format (printf, 1, 2), noreturn));
static void die (const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (buf, sizeof (buf), fmt, ap);
    va_end (ap);
    dt_log (LOG_ERR, "%s", buf);
    char line[600];
    snprintf (line, sizeof (line), "dtctld: %s", buf);
    daemon_fail (line);
    exit (1);
}

/* DtagentPath, else dtagent next to this binary, in ../agent (build tree),
 * or in PATH. */
static char *find_dtagent (const char *configured)
{
    char exe[PATH_MAX], cand[PATH_MAX + 32];
    ssize_t n;

    if (configured)
        return strdup (configured);
    if ((n = readlink ("/proc/self/exe", exe, sizeof (exe) - 1)) > 0) {
        exe[n] = '\0';
        char *dir = dirname (exe);
        snprintf (cand, sizeof (cand), "%s/dtagent", dir);
        if (access (cand, X_OK) == 0)
            return strdup (cand);
        snprintf (cand, sizeof (cand), "%s/../agent/dtagent", dir);
        if (access (cand, X_OK) == 0)
            return realpath (cand, NULL);
    }
    const char *path = getenv ("PATH");
    if (path) {
        char *copy = strdup (path), *save = NULL;
        for (char *d = copy ? strtok_r (copy, ":", &save) : NULL; d;
             d = strtok_r (NULL, ":", &save)) {
            snprintf (cand, sizeof (cand), "%s/dtagent", d);
            if (access (cand, X_OK) == 0) {
                free (copy);
                return strdup (cand);
            }
        }
        free (copy);
    }
    return strdup ("dtagent");
}

static void controller_url (struct ctld *ctx)
{
    const char *host = ctx->cfg->listen_address;
    char hn[256];

    if (ctx->cfg->controller_url[0]) {
        snprintf (ctx->url, sizeof (ctx->url), "%s", ctx->cfg->controller_url);
        return;
    }
    if (!strcmp (host, "0.0.0.0") || !strcmp (host, "::") || !*host) {
        if (gethostname (hn, sizeof (hn)) == 0)
            host = hn;
        else
            host = "127.0.0.1";
    }
    /* Agents dial their own listener (gate.h). */
    snprintf (ctx->url, sizeof (ctx->url),
              strchr (host, ':') ? "http://[%s]:%d" : "http://%s:%d", host,
              dt_httpd_listener_port (ctx->httpd, GATE_CLASS_AGENT));
}

/* SIGHUP: parse again; keep the old config if the new one is bad. */
static void reload (struct ctld *ctx, const char *path, const struct config_overrides *ov)
{
    dt_error_t err;
    struct ctld_config *cfg = config_load (path, ov, &err);

    if (!cfg) {
        dt_log (LOG_ERR, "reload: %s; keeping the running configuration", err.text);
        ctx->reloads[1]++;
        return;
    }
    /* A new UserDir is made and checked like at startup, or refused. */
    if (strcmp (cfg->user_dir, ctx->cfg->user_dir) &&
        userdir_setup (cfg->user_dir, &err) < 0) {
        dt_log (LOG_ERR, "reload: %s; keeping the running configuration", err.text);
        config_destroy (cfg);
        ctx->reloads[1]++;
        return;
    }
    if (strcmp (cfg->listen_address, ctx->cfg->listen_address) ||
        cfg->listen_port != ctx->cfg->listen_port ||
        cfg->agent_port != ctx->cfg->agent_port ||
        strcmp (cfg->database_path, ctx->cfg->database_path) ||
        strcmp (cfg->launcher, ctx->cfg->launcher))
        dt_log (LOG_WARNING,
                "reload: ListenAddress, ListenPort, AgentPort, DatabasePath and "
                "Launcher take effect only at restart");
    /* Keep what the running daemon is bound to. */
    free (cfg->listen_address);
    cfg->listen_address = strdup (ctx->cfg->listen_address);
    cfg->listen_port = ctx->cfg->listen_port;
    cfg->agent_port = ctx->cfg->agent_port;
    free (cfg->database_path);
    cfg->database_path = strdup (ctx->cfg->database_path);
    free (cfg->launcher);
    cfg->launcher = strdup (ctx->cfg->launcher);
    free (cfg->pid_file);
    cfg->pid_file = strdup (ctx->cfg->pid_file);
    config_destroy (ctx->cfg);
    ctx->cfg = cfg;
    dt_log_set_level (cfg->log_level);
    dt_log (LOG_NOTICE, "configuration reloaded from %s", path ? path : "(defaults)");
    ctx->reloads[0]++;
}

/* The configuration at startup, or NULL with the error on stderr.  A
 * missing file gets a hint: make install puts only the example next to
 * where the systemd unit looks. */
static struct ctld_config *startup_config (const char *path,
                                           const struct config_overrides *ov)
{
    dt_error_t err;
    struct ctld_config *cfg = config_load (path, ov, &err);
    if (!cfg) {
        int e = errno;
        fprintf (stderr, "dtctld: %s\n", err.text);
        if (e == ENOENT && path)
            fprintf (stderr,
                     "dtctld: start from the example: cp %s/dtctld/dtctld.conf.example "
                     "%s and edit it (see dtctld.conf(5))\n",
                     SYSCONFDIR, path);
    }
    return cfg;
}

/* Parse the command line: -1 to go on, else the exit code (--help,
 * --version, a usage error). */
static int options (int argc, char **argv, struct config_overrides *ov,
                    const char **conf_path, const char **port_file, bool *foreground)
{
    int opt;
    while ((opt = getopt_long (argc, argv, "c:fl:p:d:s:L:a:v:P:Vh", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'c': *conf_path = optarg; break;
        case 'f': *foreground = true; break;
        case 'l': config_override (ov, "ListenAddress", optarg); break;
        case 'p': config_override (ov, "ListenPort", optarg); break;
        case 'd': config_override (ov, "DatabasePath", optarg); break;
        case 's': config_override (ov, "StateDir", optarg); break;
        case 'L': config_override (ov, "Launcher", optarg); break;
        case 'a': config_override (ov, "AuthType", optarg); break;
        case 'v': config_override (ov, "LogLevel", optarg); break;
        case 'P': config_override (ov, "PidFile", optarg); break;
        case 'A': config_override (ov, "DtagentPath", optarg); break;
        case 'F': *port_file = optarg; break;
        case 'V': printf ("%s\n", dt_version_string ()); return 0;
        case 'h': fputs (usage_text, stdout); return 0;
        default: fputs (usage_text, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "dtctld: unexpected argument '%s'\n%s", argv[optind],
                 usage_text);
        return 2;
    }
    if (!*conf_path && access (SYSCONFDIR "/dtctld/dtctld.conf", R_OK) == 0)
        *conf_path = SYSCONFDIR "/dtctld/dtctld.conf";
    return -1;
}

/* The longest pass of the event loop so far (nothing else is heard
 * meanwhile): each new longest one over loop_stall_log_ms is logged, so a
 * stall shows in the log with its size (bench/run reads it). */
static const int64_t loop_stall_log_ms = 50;
/* The thread's CPU time (ms): a pass that took long with little of it
 * waited for the CPU (a loaded machine) or the disk, not for its work. */
static double thread_cpu_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
/* Where a pass spent its CPU time (ms): the HTTP requests (and how many
 * were handled), the registrations' transaction, the job manager's tick,
 * the provenance and report ticks; logged with a long pass. */
struct loop_phases {
    double http, reg, jobs, other;
    size_t requests;
};
static void loop_stall_note (int64_t ms, double cpu_ms, const struct loop_phases *ph)
{
    static int64_t longest;
    if (ms <= longest)
        return;
    longest = ms;
    if (ms >= loop_stall_log_ms)
        dt_log (ms >= 200 ? LOG_WARNING : LOG_NOTICE,
                "event loop: a pass took %lld ms (%.0f ms of CPU), the longest so far "
                "(CPU ms: %zu requests %.1f, registrations %.1f, jobs tick %.1f, "
                "other ticks %.1f)",
                (long long)ms, cpu_ms, ph->requests, ph->http, ph->reg, ph->jobs,
                ph->other);
}

/* Until a signal asks to stop: HTTP requests, signals (SIGHUP reloads
 * the configuration), and the supervision tick every tick_ms (the job
 * manager's sooner when it asks: an attempt ending, a restart due). */
static void event_loop (struct ctld *ctx, int sfd, const char *conf_path,
                        struct config_overrides *ov)
{
    int64_t next_tick = dt_mono_ms ();
    int64_t next_jobs = next_tick; /* the job manager's tick, sooner when it asks */
    while (!ctx->stop) {
        struct pollfd pfd[2] = {
            { .fd = dt_httpd_fd (ctx->httpd), .events = POLLIN },
            { .fd = sfd, .events = POLLIN },
        };
        int64_t now = dt_mono_ms ();
        int64_t due = next_jobs < next_tick ? next_jobs : next_tick;
        int timeout = due > now ? (int)(due - now) : 0;
        int ht = dt_httpd_timeout_ms (ctx->httpd);
        if (ht >= 0 && ht < timeout)
            timeout = ht;
        if (poll (pfd, 2, timeout) < 0 && errno != EINTR) {
            dt_log_errno (LOG_ERR, "poll");
            break;
        }
        int64_t busy_from = dt_mono_ms ();
        double cpu_from = thread_cpu_ms (), t;
        struct loop_phases ph = { 0 };
        if (dt_httpd_run (ctx->httpd) < 0)
            dt_log (LOG_ERR, "httpd: run failed");
        ph.requests = dt_httpd_last_run_requests (ctx->httpd);
        t = thread_cpu_ms ();
        ph.http = t - cpu_from;
        /* The registrations of this pass, in one transaction. */
        jobs_flush_registrations (ctx->jobs);
        /* (a user's request that came meanwhile is answered before the
         * next phase: each may take some ms of a loaded machine) */
        dt_httpd_run_urgent (ctx->httpd);
        ph.reg = thread_cpu_ms () - t;
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read (sfd, &si, sizeof (si)) == sizeof (si)) {
                if (si.ssi_signo == SIGHUP)
                    reload (ctx, conf_path, ov);
                else {
                    dt_log (LOG_NOTICE, "signal %d: shutting down", (int)si.ssi_signo);
                    ctx->stop = true;
                }
            }
        }
        now = dt_mono_ms ();
        if (now >= next_tick || now >= next_jobs) {
            t = thread_cpu_ms ();
            int64_t want = jobs_tick (ctx->jobs);
            dt_httpd_run_urgent (ctx->httpd);
            jobs_flush_tick (ctx->jobs);
            ph.jobs = thread_cpu_ms () - t;
            dt_httpd_run_urgent (ctx->httpd);
            if (now >= next_tick) {
                t = thread_cpu_ms ();
                provenance_tick (ctx->jobs);
                report_tick (ctx->report);
                dt_httpd_run_urgent (ctx->httpd);
                api_tick (ctx);
                ph.other = thread_cpu_ms () - t;
                next_tick = dt_mono_ms () + tick_ms;
            }
            next_jobs = dt_mono_ms () + (want < tick_ms ? want : tick_ms);
        }
        loop_stall_note (dt_mono_ms () - busy_from, thread_cpu_ms () - cpu_from, &ph);
    }
}

/* The HTTP server: the users' listener (index GATE_CLASS_USER), then the
 * agents' (GATE_CLASS_AGENT), each with its connection limits. */
static void start_listeners (struct ctld *ctx)
{
    dt_error_t err;
    struct dt_httpd_conf hconf = {
        .max_body = ctx->cfg->max_body,
        .body_budget = ctx->cfg->max_body_buffer,
        .request_timeout_ms = ctx->cfg->request_timeout_ms,
    };
    struct dt_httpd_listen users = {
        .addr = ctx->cfg->listen_address,
        .port = ctx->cfg->listen_port,
        .cls = GATE_CLASS_USER,
        .max_connections = ctx->cfg->max_connections,
        .per_address = ctx->cfg->max_conn_per_address,
    };
    struct dt_httpd_listen agents = {
        .addr = ctx->cfg->listen_address,
        .port = ctx->cfg->agent_port,
        .cls = GATE_CLASS_AGENT,
        .max_connections = ctx->cfg->max_agent_connections,
        .per_address = ctx->cfg->max_agent_conn_per_address,
    };
    if (!(ctx->httpd = dt_httpd_new (&hconf, &err)))
        die ("HTTP server: %s", err.text);
    if (dt_httpd_listen (ctx->httpd, &users, &err) < 0)
        die ("listen on %s:%d: %s", ctx->cfg->listen_address, ctx->cfg->listen_port,
             err.text);
    /* Users' requests (a status poll) go before the agents' heartbeats,
     * and between the loop's own phases (event_loop). */
    dt_httpd_set_urgent (ctx->httpd, GATE_CLASS_USER);
    if (dt_httpd_listen (ctx->httpd, &agents, &err) < 0) {
        /* ListenPort + 1 taken by someone else: any free port will do
         * when nobody chose it (agents are given the URL). */
        agents.port = 0;
        if (errno != EADDRINUSE || ctx->cfg->agent_port_set ||
            dt_httpd_listen (ctx->httpd, &agents, &err) < 0)
            die ("AgentPort: %s", err.text);
        dt_log (LOG_WARNING,
                "AgentPort %d (ListenPort + 1) is in use: agents' listener on "
                "port %d",
                ctx->cfg->agent_port, dt_httpd_listener_port (ctx->httpd, 1));
    }
}

/* The launcher of the configuration, with the dtagent every job runs
 * (returned, malloc'ed). */
static char *start_launcher (struct ctld *ctx)
{
    dt_error_t err;
    char *dtagent;

    if (!(ctx->lops = launcher_lookup (ctx->cfg->launcher)))
        die ("Launcher=%s is not available in this build", ctx->cfg->launcher);
    if (!(dtagent = find_dtagent (ctx->cfg->dtagent_path)))
        die ("out of memory");
    /* Every user's jobs run it, as themselves: no user may be able to
     * replace it. */
    if (dtagent[0] == '/' && userdir_check_program (dtagent, &err) < 0)
        die ("DtagentPath: %s", err.text);
    struct launcher_conf lconf = {
        .controller_url = ctx->url,
        .dtagent_path = dtagent,
        .state_dir = ctx->cfg->state_dir,
        .conf = ctx->cfg->conf,
    };
    if (!(ctx->launcher = ctx->lops->create (&lconf, &err)))
        die ("launcher %s: %s", ctx->lops->name, err.text);
    return dtagent;
}

/* The users' port, for a caller that asked dtctld for any free one. */
static void write_port_file (const char *path, int port)
{
    FILE *f = fopen (path, "w");
    if (!f || fprintf (f, "%d\n", port) < 0 || fclose (f) != 0)
        die ("%s: %s", path, strerror (errno));
}

int main (int argc, char **argv)
{
    struct ctld ctx = { 0 };
    struct config_overrides ov = { 0 };
    const char *conf_path = NULL, *port_file = NULL;
    bool foreground = false;
    char *dtagent = NULL;
    dt_error_t err;
    int sfd = -1, rc;
    sigset_t sigs;

    /* Options: the config file, then flags that override its keys. */
    if ((rc = options (argc, argv, &ov, &conf_path, &port_file, &foreground)) >= 0)
        return rc;
    rc = 1;

    /* Nothing dtctld creates is for other users unless it says so (the
     * database, logs, state); children get the usual 022 back. */
    umask (077);

    /* Configuration (errors go to the terminal: not daemonized yet). */
    dt_log_init ("dtctld", DT_LOG_STDERR, LOG_INFO);
    if (!(ctx.cfg = startup_config (conf_path, &ov)))
        return 1;
    dt_log_set_level (ctx.cfg->log_level);

    /* Daemonize; from here on, startup errors travel through the pipe. */
    if (!foreground) {
        if (daemon_start (&err) < 0) {
            fprintf (stderr, "dtctld: %s\n", err.text);
            goto cleanup;
        }
        dt_log_init ("dtctld", DT_LOG_SYSLOG, ctx.cfg->log_level);
    }

    /* Signals, through a signalfd polled with everything else. */
    sigemptyset (&sigs);
    sigaddset (&sigs, SIGTERM);
    sigaddset (&sigs, SIGINT);
    sigaddset (&sigs, SIGHUP);
    sigprocmask (SIG_BLOCK, &sigs, NULL);
    signal (SIGPIPE, SIG_IGN);
    if ((sfd = signalfd (-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
        die ("signalfd: %s", strerror (errno));

    /* State directory (private: the database holds every job's spec and
     * the agents' token hashes) and PID file. */
    if (daemon_state_dir (ctx.cfg->state_dir, &err) < 0 ||
        daemon_pidfile_write (ctx.cfg->pid_file, &err) < 0)
        die ("%s", err.text);
    /* The parent of the per-user output directories (jobs' processes
     * write there as their users; never under the StateDir). */
    if (userdir_setup (ctx.cfg->user_dir, &err) < 0)
        die ("%s", err.text);

    /* CheckpointRoot: users reach their own job's directory through it. */
    if (daemon_shared_dir (ctx.cfg->checkpoint_root, &err) < 0)
        dt_log (LOG_WARNING, "CheckpointRoot %s", err.text);

    /* Store: open, migrate (the file readable by dtctld's user only). */
    if (daemon_private_file (ctx.cfg->database_path, &err) < 0)
        die ("database %s", err.text);
    if (!(ctx.store = store_open (ctx.cfg->database_path, &err)))
        die ("database %s: %s", ctx.cfg->database_path, err.text);

    /* HTTP server: both listeners, and the gate that admits requests at
     * header time. */
    start_listeners (&ctx);
    gate_install (&ctx);
    if (ctx.cfg->auth == AUTH_NONE)
        dt_log (LOG_WARNING,
                "AuthType=none: every request acts as this daemon's user (uid %ld)",
                (long)getuid ());
    controller_url (&ctx);

    /* Launcher. */
    dtagent = start_launcher (&ctx);

    /* Metrics, jobs (reloads live jobs from the store), routes. */
    if (!(ctx.metrics = metrics_create (&ctx, &err)) ||
        !(ctx.jobs = jobs_create (&ctx, &err)) ||
        !(ctx.report = report_create (ctx.store, &err)) ||
        api_register_routes (&ctx, &err) < 0 ||
        agentapi_register_routes (&ctx, &err) < 0 ||
        relayapi_register_routes (&ctx, &err) < 0 || ui_register_routes (&ctx, &err) < 0)
        die ("%s", err.text);

    if (port_file)
        write_port_file (port_file, dt_httpd_port (ctx.httpd));
    dt_log (LOG_NOTICE, "%s listening on %s:%d, agents at %s (launcher %s, agent %s)",
            dt_version_string (), ctx.cfg->listen_address, dt_httpd_port (ctx.httpd),
            ctx.url, ctx.lops->name, dtagent);
    daemon_ready ();

    /* The event loop: HTTP, signals, the tick. */
    event_loop (&ctx, sfd, conf_path, &ov);
    jobs_flush (ctx.jobs);
    report_flush (ctx.report);
    rc = 0;

cleanup:
    /* Reverse order.  Running attempts are left running: a restarted
     * dtctld picks them up again. */
    report_destroy (ctx.report);
    provenance_shutdown ();
    jobs_destroy (ctx.jobs);
    metrics_destroy (ctx.metrics);
    if (ctx.lops && ctx.launcher)
        ctx.lops->destroy (ctx.launcher);
    dt_httpd_destroy (ctx.httpd);
    store_close (ctx.store);
    if (ctx.cfg && rc == 0)
        daemon_pidfile_remove (ctx.cfg->pid_file);
    config_destroy (ctx.cfg);
    free (dtagent);
    if (sfd >= 0)
        close (sfd);
    return rc;
}
