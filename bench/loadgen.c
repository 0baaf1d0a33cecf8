/* loadgen.c: heartbeat load generator for dtctld (bench/run, "controller ingest").
 *
 * Simulates A agents of one attempt, each with R ranks, each sending one
 * POST /v1/agent/heartbeat per period over its own keep-alive connection,
 * as real agents do.  Open loop: every agent's sends are scheduled at fixed
 * times, and latency is measured from the scheduled time to the complete
 * answer, so a slow controller cannot hide its queueing (no coordinated
 * omission).  Agents register first (POST /v1/agent/register, retried
 * while the answer is "waiting", backing off from 100 ms to 1 s as dtagent
 * does; like dtagent, each asks the controller to hold its request up to
 * 10 s until the rendezvous completes, "wait_ms") so the controller treats them as the
 * attempt's nodes; the clock of the heartbeat schedule, the warm-up and the measurement
 * start once every agent is registered (or --register-timeout passed).
 *
 * Output: one JSON object on stdout with the offered and achieved rates and
 * the latency percentiles.
 *
 * --tree-width W (W > 0): the agents form dtctl's fan-in tree (common/tree.h)
 * and the generator plays relays and leaves: every agent registers directly
 * (connections are opened when needed and closed when the controller says
 * "Connection: close", as on a 503 at its connection limit), then only the
 * controller's children (the first W nodes of each attempt) keep a
 * connection; each sends POST /v1/agent/relay with the heartbeats of its
 * subtree, one line per node, as the real relays forward them: a relay
 * with children --relay-sends times a period, each request with the lines
 * of a share of its subtree (its own once a period).  Latency is then per
 * relay request, and the achieved rate counts every node's line.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#else
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct agent {
    int fd;
    int idx;           /* index among all simulated agents */
    int local;         /* index among the agents of its attempt */
    const char *token; /* its attempt's token */
    char *req;         /* the current request, fully formatted */
    size_t req_len;
    size_t req_off;
    char resp[4096];
    size_t resp_len;
    int64_t sched_ns; /* when the in-flight request was due */
    int64_t next_ns;  /* when the next one is due */
    int busy;
    int registered;
    int want_out;      /* EPOLLOUT armed: a request is partly written */
    int64_t reg_delay; /* register retry delay (ns), backing off */
    int gone;          /* 410: its attempt has ended; it stops, as dtagent does */
    int keep;          /* sends heartbeats itself (direct mode, or a top relay) */
    int64_t sent_ns;   /* when the request in flight was sent */
    int nlines;        /* heartbeats in the request in flight */
    int close_after;   /* a registration sent without waiting: close after it */
    int parts, slot;   /* a relay with children sends parts requests a period,
                        * this one the slot-th (see --relay-sends) */
};

static struct agent *all_agents;
static int opt_tree = 0; /* --tree-width */
/* --relay-sends: requests a period of a relay that has children.  A
 * dtagent relay sends its children's lines when the oldest is a quarter
 * interval old; with its children beating at phases of their own, that is
 * about 4 requests an interval, each with a quarter of its subtree. */
static int opt_relay_sends = 4;

/* The agents' due times, earliest first: a binary heap of (time, agent)
 * with lazy deletion (an entry whose agent is busy, gone, or now due at
 * another time is dropped when it comes up).  A linear scan of every
 * agent whenever one was due cost 40,000 checks per send at 40,000 agents
 * through a tree (1,280 relay sends a second): most of the generator's
 * CPU, on cores it shares with the controller under test. */
struct due {
    int64_t t;
    int idx;
};
static struct due *lg_heap;
static size_t lg_nheap, lg_heapcap;

static void heap_push (int64_t t, int idx)
{
    if (lg_nheap == lg_heapcap) {
        lg_heapcap = lg_heapcap ? 2 * lg_heapcap : 1024;
        lg_heap = realloc (lg_heap, lg_heapcap * sizeof (*lg_heap));
        if (!lg_heap) {
            perror ("loadgen");
            exit (1);
        }
    }
    size_t i = lg_nheap++;
    while (i > 0 && lg_heap[(i - 1) / 2].t > t) {
        lg_heap[i] = lg_heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    lg_heap[i] = (struct due){ t, idx };
}

static void heap_pop (void)
{
    struct due last = lg_heap[--lg_nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= lg_nheap)
            break;
        if (c + 1 < lg_nheap && lg_heap[c + 1].t < lg_heap[c].t)
            c++;
        if (lg_heap[c].t >= last.t)
            break;
        lg_heap[i] = lg_heap[c];
        i = c;
    }
    if (lg_nheap > 0)
        lg_heap[i] = last;
}

static void due_at (struct agent *a, int64_t t)
{
    a->next_ns = t;
    if (t != INT64_MAX)
        heap_push (t, a->idx);
}

/* The generator's CPU time (s), all threads. */
static double cpu_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *opt_host = "127.0.0.1";
static int opt_port = 6830;
static int opt_agents = 100;
static int opt_ranks = 8;
static double opt_hz = 1.0;
static double opt_duration = 10.0;
static double opt_warmup = 2.0;
static double opt_register_timeout = 120.0;
static const char *opt_mark = NULL; /* created when the measurement starts */
static const char *opt_token = NULL;
static char **tokens; /* opt_token split at commas */
static int ntokens;
static const char *opt_prefix = "lg";
static int opt_register_wait = 10000; /* wait_ms of a registration, as dtagent's */

/* Connections open, and how many this process may open.  Real agents each
 * hold one connection on their own host; the generator holds them all in
 * one process, under one descriptor limit (20,000 on the shared machine,
 * where it cannot be raised).  Once half of them are open, a registration
 * asks not to be held (wait_ms 0) and its connection is closed after the
 * answer: registrations held 10 s each had taken every descriptor, and the
 * last agents of 40,000 could not connect, so no attempt completed its
 * rendezvous (a limit of the simulation, not of the controller). */
static long lg_nopen, lg_fd_budget = 1L << 30;

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

/* Agent 'idx''s connection.  To a loopback controller each agent comes
 * from its own source address (127.64.0.0 + idx + 1), as real agents come
 * from their own hosts: tens of thousands of connections from one address
 * to one port make the kernel search for a free source port at every
 * connect (most of a core at 20,000 agents, which the controller needs). */
static int connect_one (int idx)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (opt_port) };
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;

    if (fd < 0)
        return -1;
    inet_pton (AF_INET, opt_host, &sa.sin_addr);
    if ((ntohl (sa.sin_addr.s_addr) >> 24) == 127 && idx >= 0 && idx < 0x3ffffe) {
        struct sockaddr_in src = { .sin_family = AF_INET };
        src.sin_addr.s_addr = htonl (0x7f400000u + (uint32_t)idx + 1);
        setsockopt (fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof (one));
        bind (fd, (struct sockaddr *)&src, sizeof (src)); /* else: the default */
    }
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    if (connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 && errno != EINPROGRESS) {
        close (fd);
        return -1;
    }
    return fd;
}

/* The part of a rank's entry that is the same for every rank of a step
 * (but for its compute time, one of three), formatted once a step: with
 * snprintf of every field for every rank, the generator spent about a
 * microsecond per rank-heartbeat, a fifth of a core at 160,000/s, on a
 * machine whose cores the controller under test shares. */
static char rank_tail[3][256];
static size_t rank_tail_len[3];
static int64_t rank_tail_step = -1;

static void rank_tails (int64_t step)
{
    if (step == rank_tail_step)
        return;
    for (int k = 0; k < 3; k++)
        rank_tail_len[k] =
          (size_t)snprintf (rank_tail[k], sizeof (rank_tail[k]),
                            ",\"state\":\"running\",\"client\":true,\"step\":%" PRId64
                            ",\"loss\":%.4f,\"samples\":%" PRId64
                            ",\"compute_ms\":%.2f,\"comm_ms\":%.2f,\"busy\":false}",
                            step, 3.0 - step * 1e-4, step * 64, 40.0 + k, 2.0);
    rank_tail_step = step;
}

/* Decimal digits of v >= 0 at p; returns the end. */
static char *put_uint (char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

static char *put_str (char *p, const char *s, size_t n)
{
    memcpy (p, s, n);
    return p + n;
}
#define PUT_LIT(p, lit) put_str ((p), (lit), sizeof (lit) - 1)

/* One node's heartbeat body (no newline) at the end of *body: the same
 * text as before the tails were kept (rank, local rank, pid, then the
 * step's tail). */
static void hb_line (char **body, size_t *n, size_t *cap, int local, int64_t step)
{
    if (*cap - *n < 256 + (size_t)opt_ranks * 320) {
        *cap = *cap * 2 + 256 + (size_t)opt_ranks * 320;
        *body = realloc (*body, *cap);
    }
    rank_tails (step);
    char *p = *body + *n;
    p = PUT_LIT (p, "{\"node\":\"");
    p = put_str (p, opt_prefix, strlen (opt_prefix));
    p = put_uint (p, (uint64_t)local);
    p = PUT_LIT (p, "\",\"ranks\":[");
    for (int r = 0; r < opt_ranks; r++) {
        if (r)
            *p++ = ',';
        p = PUT_LIT (p, "{\"rank\":");
        p = put_uint (p, (uint64_t)local * opt_ranks + r);
        p = PUT_LIT (p, ",\"local_rank\":");
        p = put_uint (p, (uint64_t)r);
        p = PUT_LIT (p, ",\"pid\":");
        p = put_uint (p, (uint64_t)(1000 + r));
        p = put_str (p, rank_tail[r % 3], rank_tail_len[r % 3]);
    }
    p = PUT_LIT (p, "]}");
    *n = (size_t)(p - *body);
}

/* How many of the agents belong to attempt att (agent i to attempt
 * i % ntokens). */
static int attempt_nodes (int att)
{
    return opt_agents / ntokens + (att < opt_agents % ntokens);
}

/* The lines of node 'local' of attempt 'att' and of its subtree (width
 * opt_tree): children of i are W*(i+1) .. W*(i+1)+W-1 (common/tree.h). */
static int subtree_lines (char **body, size_t *n, size_t *cap, int local, int att,
                          int nodes, int64_t step, int parts, int slot, int top)
{
    int count = 0;
    struct agent *a = &all_agents[local * ntokens + att];
    /* The relay's own line once a period, its descendants' in the part of
     * the period their node number falls in. */
    if (a->registered && !a->gone && (top ? slot == 0 : local % parts == slot)) {
        if (*n > 0)
            (*body)[(*n)++] = '\n';
        hb_line (body, n, cap, local, step);
        count++;
    }
    for (long c = (long)opt_tree * (local + 1);
         c < (long)opt_tree * (local + 2) && c < nodes; c++)
        count += subtree_lines (body, n, cap, (int)c, att, nodes, step, parts, slot, 0);
    return count;
}

static void build_request (struct agent *a, int64_t step)
{
    size_t cap = 8192, n = 0;
    char *body = malloc (cap);
    const char *route = a->registered ? "heartbeat" : "register";

    free (a->req);
    a->nlines = 1;
    a->close_after = 0;
    if (!a->registered) {
        int wait = opt_register_wait;
        if (lg_nopen >= lg_fd_budget / 2) {
            wait = 0;
            a->close_after = 1;
        }
        n = snprintf (body, cap,
                      "{\"node\":\"%s%d\",\"node_order\":%d,\"addr\":\"127.0.0.1\","
                      "\"port\":%d,\"pid\":%d,\"slurm_job_id\":0,\"slurm_step_id\":0,"
                      "\"hostinfo\":{},\"wait_ms\":%d}",
                      opt_prefix, a->local, a->local, 20000 + a->idx % 20000, getpid (),
                      wait);
    }
    else if (opt_tree > 0) {
        int att = a->idx % ntokens;
        a->nlines = subtree_lines (&body, &n, &cap, a->local, att, attempt_nodes (att),
                                   step, a->parts, a->slot, 1);
        a->slot = (a->slot + 1) % a->parts;
        route = "relay";
    }
    else
        hb_line (&body, &n, &cap, a->local, step);
    size_t rcap = n + 512 + strlen (a->token);
    a->req = malloc (rcap);
    a->req_len = snprintf (
      a->req, rcap,
      "POST /v1/agent/%s HTTP/1.1\r\nHost: %s\r\n"
      "Authorization: Bearer %s\r\nContent-Type: %s\r\n"
      "Content-Length: %zu\r\n\r\n",
      route, opt_host, a->token,
      opt_tree > 0 && a->registered ? "application/x-ndjson" : "application/json", n);
    memcpy (a->req + a->req_len, body, n);
    a->req_len += n;
    free (body);
    a->req_off = 0;
    a->resp_len = 0;
}

/* Complete HTTP response in a->resp?  Returns status or 0 if incomplete. */
static int response_complete (struct agent *a)
{
    a->resp[a->resp_len] = '\0';
    char *hdr_end = strstr (a->resp, "\r\n\r\n");
    if (!hdr_end)
        return 0;
    char *cl = strcasestr (a->resp, "content-length:");
    size_t clen = cl ? strtoul (cl + 15, NULL, 10) : 0;
    if ((size_t)(hdr_end + 4 - a->resp) + clen > a->resp_len)
        return 0;
    return atoi (a->resp + 9);
}

/* Arm EPOLLOUT only while a write is pending: a writable socket would
 * otherwise wake epoll at once, and the generator would spin a core that
 * the controller under test needs. */
static void want_write (int ep, struct agent *a, int out)
{
    if (a->want_out == out)
        return;
    struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = a };
    epoll_ctl (ep, EPOLL_CTL_MOD, a->fd, &ev);
    a->want_out = out;
}

/* Close agent a's connection; it reconnects when its next request is due. */
static void lg_close (int ep, struct agent *a)
{
    epoll_ctl (ep, EPOLL_CTL_DEL, a->fd, NULL);
    close (a->fd);
    a->fd = -1;
    a->want_out = 0;
    lg_nopen--;
}

static int cmp_i64 (const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

static void usage (void)
{
    fprintf (
      stderr,
      "Usage: loadgen --token TOKEN[,TOKEN...] [--host H] [--port P] [--agents N] "
      "[--ranks R]\n"
      "               [--hz F] [--duration S] [--warmup S] [--prefix NAME]\n"
      "               [--register-timeout S] [--mark FILE] [--tree-width W]\n"
      "               [--register-wait MS] [--relay-sends N]\n"
      "Simulates N agents of one attempt (node names PREFIX0..PREFIX<N-1>)\n"
      "sending heartbeats of R ranks at F Hz each, and prints latency as JSON.\n"
      "With K comma-separated tokens (K attempts, e.g. because one attempt's\n"
      "world is limited), agent i belongs to attempt i %% K, as its (i / K)-th node.\n"
      "--register-wait: how long the controller may hold a registration\n"
      "(wait_ms; default 10000, as dtagent; 0: poll as older agents did).\n"
      "--relay-sends: requests a period of a relay with children, each with\n"
      "a share of its subtree (default 4, as dtagent's relays send).\n");
    exit (1);
}

int main (int argc, char **argv)
{
    static const struct option longopts[] = {
        { "host", required_argument, 0, 'H' },
        { "port", required_argument, 0, 'p' },
        { "agents", required_argument, 0, 'a' },
        { "ranks", required_argument, 0, 'r' },
        { "hz", required_argument, 0, 'z' },
        { "duration", required_argument, 0, 'd' },
        { "warmup", required_argument, 0, 'w' },
        { "token", required_argument, 0, 't' },
        { "prefix", required_argument, 0, 'x' },
        { "help", no_argument, 0, 'h' },
        { "register-timeout", required_argument, 0, 'R' },
        { "mark", required_argument, 0, 'm' },
        { "tree-width", required_argument, 0, 'T' },
        { "register-wait", required_argument, 0, 'W' },
        { "relay-sends", required_argument, 0, 'S' },
        { 0 }
    };
    int c;

    while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'H': opt_host = optarg; break;
        case 'p': opt_port = atoi (optarg); break;
        case 'a': opt_agents = atoi (optarg); break;
        case 'r': opt_ranks = atoi (optarg); break;
        case 'z': opt_hz = atof (optarg); break;
        case 'd': opt_duration = atof (optarg); break;
        case 'w': opt_warmup = atof (optarg); break;
        case 't': opt_token = optarg; break;
        case 'x': opt_prefix = optarg; break;
        case 'R': opt_register_timeout = atof (optarg); break;
        case 'm': opt_mark = optarg; break;
        case 'T': opt_tree = atoi (optarg); break;
        case 'W': opt_register_wait = atoi (optarg); break;
        case 'S': opt_relay_sends = atoi (optarg); break;
        default: usage ();
        }
    }
    if (!opt_token || opt_agents < 1 || opt_ranks < 1 || opt_ranks > 64 || opt_hz <= 0 ||
        opt_tree < 0 || opt_relay_sends < 1)
        usage ();
    {
        char *copy = strdup (opt_token), *save = NULL;
        tokens = calloc (strlen (opt_token) + 1, sizeof (*tokens));
        for (char *t = strtok_r (copy, ",", &save); t; t = strtok_r (NULL, ",", &save))
            tokens[ntokens++] = t;
        if (ntokens == 0)
            usage ();
    }

    signal (SIGPIPE, SIG_IGN); /* a connection the controller closed: EPIPE */
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit (RLIMIT_NOFILE, &rl);
    }
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        lg_fd_budget = (long)rl.rlim_cur - 64;
    }

    /* A descriptor kept for the mark file: with 20,000 direct agents the
     * generator holds every other one, and the mark was not created (the
     * status pollers then measured after the load instead of during it). */
    int spare_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    int ep = epoll_create1 (EPOLL_CLOEXEC);
    struct agent *agents = calloc (opt_agents, sizeof (*agents));
    all_agents = agents;
    int64_t period = (int64_t)(1e9 / opt_hz);
    int64_t t0 = now_ns ();
    size_t lat_cap = (size_t)(opt_agents * opt_hz * (opt_duration + 1)) + 16, nlat = 0;
    int64_t *lat = malloc (lat_cap * sizeof (*lat));
    /* The same requests split: from the scheduled time to the send (the
     * generator's own lag: it waited for a core, or for the answer to the
     * request before) and from the send to the answer (the controller and
     * the network), so a starved generator cannot pass for a slow
     * controller. */
    int64_t *lag = malloc (lat_cap * sizeof (*lag));
    int64_t *svc = malloc (lat_cap * sizeof (*svc));
    size_t nsvc = 0;
    long errors = 0, non2xx = 0, sent = 0, done_measured = 0, refused_503 = 0;
    long connect_fail = 0, lines_measured = 0, timeouts = 0;

    for (int i = 0; i < opt_agents; i++) {
        struct agent *a = &agents[i];
        a->idx = i;
        a->local = i / ntokens;
        a->token = tokens[i % ntokens];
        a->keep = opt_tree == 0 || a->local < opt_tree;
        /* a relay with children sends its subtree in parts */
        a->parts =
          opt_tree > 0 && (long)opt_tree * (a->local + 1) < attempt_nodes (i % ntokens)
            ? opt_relay_sends
            : 1;
        /* Connected when its first request is due (below): 40,000 agents
         * need not hold 40,000 descriptors at once. */
        a->fd = -1;
        /* Registration first, all at once (as a real allocation starts). */
        due_at (a, t0);
        a->reg_delay = 100000000;
    }
    unsigned int seed = (unsigned int)getpid ();

    /* Phase 1 (registration) ends when all are registered or at the
     * timeout; then phase 2 sets the real schedule. */
    int phase2 = 0, nreg = 0, ngone = 0, marked = 0;
    double cpu_at_mark = -1; /* CPU time when the measurement began */
    double register_s = -1;
    int64_t t_measure = INT64_MAX;
    int64_t t_end = t0 + (int64_t)(opt_register_timeout * 1e9);
    struct epoll_event evs[512];
    int64_t step = 0;

    while (now_ns () < t_end) {
        int64_t now = now_ns (), next_due = t_end;
        if (!marked && now >= t_measure) {
            /* Tell the caller (bench/run's status poller) the measurement began. */
            if (spare_fd >= 0)
                close (spare_fd);
            spare_fd = -1;
            int fd =
              opt_mark ? open (opt_mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
            if (opt_mark && fd < 0)
                fprintf (stderr, "loadgen: %s: %s\n", opt_mark, strerror (errno));
            if (fd >= 0)
                close (fd);
            marked = 1;
            cpu_at_mark = cpu_s ();
        }
        if (ngone == opt_agents)
            break;
        if (!phase2 && (nreg + ngone == opt_agents || now >= t_end)) {
            phase2 = 1;
            register_s = (now - t0) / 1e9;
            t0 = now;
            t_measure = t0 + (int64_t)(opt_warmup * 1e9);
            t_end = t_measure + (int64_t)(opt_duration * 1e9);
            next_due = t_end;
            /* Each sender's heartbeats at a phase of its own, drawn
             * uniformly over one period, as dtagent draws its own after
             * registering (agent.c): agents that register together do
             * not then beat together.  (Phases spread evenly in index
             * order put a tree's relays that carry subtrees, the first
             * nodes of each attempt, all into the first eighth of the
             * period.) */
            for (int i = 0; i < opt_agents; i++)
                if (agents[i].keep && agents[i].registered)
                    due_at (&agents[i], t0 + (int64_t)((double)period * rand_r (&seed) /
                                                       ((double)RAND_MAX + 1)));
        }
        /* Start the sends that are due, earliest first. */
        while (lg_nheap > 0 && lg_heap[0].t <= now) {
            struct due e = lg_heap[0];
            struct agent *a = &agents[e.idx];
            heap_pop ();
            if (a->busy || a->gone || a->next_ns != e.t)
                continue; /* a stale entry */
            if (a->fd < 0) {
                if ((a->fd = connect_one (a->idx)) < 0) {
                    /* Out of descriptors here: try again later. */
                    connect_fail++;
                    due_at (a, now + 100000000 + rand_r (&seed) % 100000000);
                    continue;
                }
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = a };
                epoll_ctl (ep, EPOLL_CTL_ADD, a->fd, &ev);
                a->want_out = 0;
                lg_nopen++;
            }
            step = (now - t0) / period;
            build_request (a, step);
            a->sched_ns = a->next_ns;
            a->sent_ns = now;
            /* A heartbeat's successor is due one period later; a register's
             * retry is scheduled when its answer comes. */
            a->next_ns = a->registered ? a->next_ns + period / a->parts : INT64_MAX;
            a->busy = 1;
            ssize_t w = write (a->fd, a->req, a->req_len);
            if (w > 0)
                a->req_off = w;
            if (a->req_off < a->req_len)
                want_write (ep, a, 1);
            sent++;
        }
        /* Progress of a long registration, every 5 s, on stderr. */
        static int64_t last_progress;
        if (!phase2 && now - last_progress > 5000000000LL) {
            if (last_progress)
                fprintf (stderr,
                         "loadgen: %.0f s: %d of %d registered, %ld connections open "
                         "(budget %ld), %ld connect failures\n",
                         (now - t0) / 1e9, nreg, opt_agents, lg_nopen, lg_fd_budget,
                         connect_fail);
            last_progress = now;
        }
        /* A registration unanswered for 30 s is given up and sent again on a
         * new connection, as dtagent's registration times out (ctl.c): a
         * connection the controller never accepted must not stall an agent
         * for good. */
        static int64_t last_timeout_scan;
        if (!phase2 && now - last_timeout_scan > 100000000) {
            last_timeout_scan = now;
            for (int i = 0; i < opt_agents; i++) {
                struct agent *a = &agents[i];
                if (!a->busy || a->registered || now - a->sent_ns < 30000000000LL)
                    continue;
                timeouts++;
                lg_close (ep, a);
                a->busy = 0;
                due_at (a, now + a->reg_delay / 2 + rand_r (&seed) % a->reg_delay);
            }
        }
        if (lg_nheap > 0 && lg_heap[0].t < next_due)
            next_due = lg_heap[0].t;
        /* Sleep until the next send is due (ns resolution) or an answer comes. */
        int64_t wait = next_due - now_ns ();
        if (wait < 0)
            wait = 0;
        if (wait > 5000000)
            wait = 5000000;
        struct timespec ts = { .tv_sec = 0, .tv_nsec = wait };
        int n = epoll_pwait2 (ep, evs, 512, &ts, NULL);
        for (int k = 0; k < n; k++) {
            struct agent *a = evs[k].data.ptr;
            if (a->busy && a->req_off < a->req_len && (evs[k].events & EPOLLOUT)) {
                ssize_t w = write (a->fd, a->req + a->req_off, a->req_len - a->req_off);
                if (w > 0)
                    a->req_off += w;
                if (a->req_off >= a->req_len)
                    want_write (ep, a, 0);
            }
            if (evs[k].events & EPOLLIN) {
                ssize_t r =
                  read (a->fd, a->resp + a->resp_len, sizeof (a->resp) - 1 - a->resp_len);
                if (r <= 0) {
                    errors++;
                    lg_close (ep, a);
                    a->busy = 0;
                    due_at (a, a->registered ? a->next_ns : now_ns () + a->reg_delay);
                    continue;
                }
                a->resp_len += r;
                int status = response_complete (a);
                if (status) {
                    int64_t t = now_ns ();
                    /* The controller closes this connection after the
                     * answer (a 503 at its limit, a crowded "waiting"):
                     * so do we, reconnecting when needed. */
                    int closing = strcasestr (a->resp, "\r\nconnection: close") != NULL;
                    if (status == 503)
                        refused_503++;
                    if (status == 410) {
                        /* The attempt ended (e.g. the controller declared
                         * nodes lost): a real agent exits. */
                        non2xx++;
                        a->gone = 1;
                        ngone++;
                        if (a->registered)
                            nreg--;
                        a->registered = 0;
                        a->busy = 0;
                        continue;
                    }
                    if (!a->registered) {
                        /* "waiting" until every simulated agent registered. */
                        if (status == 200 && strstr (a->resp, "\"ready\"")) {
                            a->registered = 1;
                            nreg++;
                            due_at (a, phase2 && a->keep ? t : INT64_MAX);
                            /* In a tree, a non-top node talks to its relay. */
                            closing = closing || !a->keep;
                        }
                        else if (status == 503 || status == 429) {
                            /* At the controller's limit: 1-8 s, jittered,
                             * as dtagent backs off. */
                            non2xx++;
                            int64_t base =
                              a->reg_delay < 1000000000 ? 1000000000 : a->reg_delay;
                            due_at (a, t + base / 2 + rand_r (&seed) % base);
                            if (a->reg_delay < 8000000000LL)
                                a->reg_delay = base * 2;
                        }
                        else if (status == 200 && strstr (a->resp, "\"retry_ms\":")) {
                            /* "waiting": ask again when the controller says,
                             * jittered, as dtagent does (ctl.c). */
                            int64_t ms =
                              atoll (strstr (a->resp, "\"retry_ms\":") + 11) * 1000000LL;
                            if (ms < 100000000)
                                ms = 100000000;
                            due_at (a, t + ms / 2 + rand_r (&seed) % ms);
                        }
                        else {
                            if (status != 200)
                                non2xx++;
                            due_at (a, t + a->reg_delay);
                            if (a->reg_delay < 1000000000)
                                a->reg_delay = a->reg_delay * 3 / 2;
                        }
                    }
                    else {
                        if (status < 200 || status > 299)
                            non2xx++;
                        if (a->sched_ns >= t_measure && nlat < lat_cap) {
                            lat[nlat++] = t - a->sched_ns;
                            lag[nsvc] = a->sent_ns - a->sched_ns;
                            svc[nsvc++] = t - a->sent_ns;
                            done_measured++;
                            if (status >= 200 && status <= 299)
                                lines_measured += a->nlines;
                        }
                    }
                    a->busy = 0;
                    due_at (a, a->next_ns);
                    if (closing || a->close_after)
                        lg_close (ep, a);
                }
            }
        }
    }
    int reg = 0;
    long unanswered = 0;
    int64_t t_stop = now_ns ();
    /* The generator's CPU over the measurement (the mark is set on the
     * first pass past t_measure, with or without --mark). */
    double cpu_s_measured = cpu_at_mark >= 0 ? cpu_s () - cpu_at_mark : -1;
    for (int i = 0; i < opt_agents; i++) {
        struct agent *a = &agents[i];
        reg += a->registered;
        /* A request still in flight counts with the latency it has so far
         * (a lower bound): a stalled controller must not look fast. */
        if (!a->keep)
            continue; /* in a tree, its heartbeats travel in its relay's */
        if (a->registered && a->busy && a->sched_ns >= t_measure && nlat < lat_cap) {
            lat[nlat++] = t_stop - a->sched_ns;
            unanswered++;
        }
        /* Heartbeats due in the window but never sent (the connection was
         * still waiting for an earlier answer): the same lower bound. */
        for (int64_t due = a->next_ns; a->registered && phase2 && due < t_end;
             due += period / a->parts)
            if (due >= t_measure && nlat < lat_cap) {
                lat[nlat++] = t_stop - due;
                unanswered++;
            }
    }
    qsort (lat, nlat, sizeof (*lat), cmp_i64);
    qsort (lag, nsvc, sizeof (*lag), cmp_i64);
    qsort (svc, nsvc, sizeof (*svc), cmp_i64);
#define PCT(p) (nlat ? lat[(size_t)((p) * (nlat - 1))] / 1e6 : -1.0)
#define PCTOF(v, p) (nsvc ? (v)[(size_t)((p) * (nsvc - 1))] / 1e6 : -1.0)
    printf (
      "{\"agents\":%d,\"ranks_per_agent\":%d,\"hz\":%g,\"duration_s\":%g,"
      "\"registered\":%d,\"register_s\":%.3f,\"offered_rank_hb_per_s\":%.0f,\"achieved_"
      "rank_hb_per_s\":%.0f,"
      "\"requests\":%ld,\"errors\":%ld,\"non2xx\":%ld,\"gone_410\":%d,\"unanswered\":%ld,"
      "\"refused_503\":%ld,\"connect_fail\":%ld,\"register_timeouts\":%ld,"
      "\"tree_width\":%d,"
      "\"lat_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f},"
      "\"send_lag_ms\":{\"p50\":%.3f,\"p99\":%.3f},\"answer_ms\":{\"p50\":%.3f,"
      "\"p99\":%.3f},\"cpu_s\":%.3f}\n",
      opt_agents, opt_ranks, opt_hz, opt_duration, reg, register_s,
      opt_agents * opt_hz * opt_ranks,
      (opt_tree > 0 ? lines_measured : done_measured) * opt_ranks / opt_duration, sent,
      errors, non2xx, ngone, unanswered, refused_503, connect_fail, timeouts, opt_tree,
      PCT (0.50), PCT (0.90), PCT (0.99), PCT (0.999), nlat ? lat[nlat - 1] / 1e6 : -1.0,
      PCTOF (lag, 0.50), PCTOF (lag, 0.99), PCTOF (svc, 0.50), PCTOF (svc, 0.99),
      cpu_s_measured);
    return 0;
}
