/* bench_dtclient.c: cost of one dtclient_step call (the training loop's
 * per-step report), against a real agent socket and shared page.
 *
 *   bench_dtclient [CALLS_PER_RUN [RUNS]]      (default 5000000 x 7)
 *
 * A child process plays the agent's side with the real agent/chan.c (it
 * answers the hello and owns the page); the parent opens libdtclient from
 * the environment exactly as a trainer does and times dtclient_step.
 * Prints one line per measurement: "name median_ns min_ns max_ns". */
#include <config.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/chan.h"
#include "agent/client/dtclient.h"
#include "agent/client/dtproto.h"

static double now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void hello_ok (const struct dtproto_msg *m, int *conn_rank,
                      struct dtproto_buf *reply, void *arg)
{
    *conn_rank = (int)m->i[DTPROTO_T_RANK];
    chan_reply_status (reply, DTCLIENT_OK, NULL);
}

/* The agent side: serve the socket and read the page every 100 ms, as
 * dtagent does, until killed. */
static void agent_main (const char *sock, volatile struct dtshm_page *page)
{
    dt_error_t err;
    chan_t *c = chan_create (sock, hello_ok, NULL, &err);
    if (!c) {
        fprintf (stderr, "bench agent: %s\n", err.text);
        _exit (1);
    }
    for (;;) {
        struct pollfd pfd[8];
        struct dtshm_report rep;
        int n = chan_pollfds (c, pfd, 8);
        if (poll (pfd, (nfds_t)n, 100) > 0)
            chan_process (c, pfd, n);
        dtshm_read_report (page, &rep);
    }
}

static void measure (const char *name, dtclient_t *c, long calls, int runs)
{
    double *ns = calloc ((size_t)runs, sizeof (double));
    for (int r = 0; r < runs; r++) {
        double t0 = now_ns ();
        for (long i = 0; i < calls; i++)
            dtclient_step (c, i, 1.0 / (double)(i + 1), 256, 0.04, 0.002);
        ns[r] = (now_ns () - t0) / (double)calls;
    }
    qsort (ns, (size_t)runs, sizeof (double), cmp_double);
    printf ("%s median_ns %.2f min_ns %.2f max_ns %.2f calls %ld runs %d\n", name,
            ns[runs / 2], ns[0], ns[runs - 1], calls, runs);
    free (ns);
}

int main (int argc, char **argv)
{
    long calls = argc > 1 ? atol (argv[1]) : 5000000;
    int runs = argc > 2 ? atoi (argv[2]) : 7;
    char dir[] = "/tmp/bench_dtclient.XXXXXX", sock[128], shm[128];
    if (calls < 1 || runs < 1 || !mkdtemp (dir)) {
        fprintf (stderr, "usage: bench_dtclient [CALLS_PER_RUN [RUNS]]\n");
        return 2;
    }
    snprintf (sock, sizeof (sock), "%s/agent.sock", dir);
    snprintf (shm, sizeof (shm), "%s/rank-0.shm", dir);

    int fd = open (shm, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate (fd, DTSHM_SIZE) < 0)
        return 1;
    struct dtshm_page *page =
      mmap (NULL, DTSHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close (fd);
    if (page == MAP_FAILED)
        return 1;
    page->version = DTPROTO_VERSION;
    page->magic = DTSHM_MAGIC;

    pid_t agent = fork ();
    if (agent == 0)
        agent_main (sock, page);
    /* Wait for the socket to appear. */
    for (int i = 0; i < 200 && access (sock, F_OK) != 0; i++)
        usleep (10000);

    setenv ("DT_AGENT_SOCKET", sock, 1);
    setenv ("DT_AGENT_SHM", shm, 1);
    setenv ("RANK", "0", 1);
    dtclient_t *c = dtclient_open ();
    int rc = 0;
    if (!dtclient_connected (c)) {
        fprintf (stderr, "bench_dtclient: could not connect to the bench agent\n");
        rc = 1;
    }
    else {
        measure ("dtclient_step(agent)", c, calls, runs);
        dtclient_cmd_t cmd;
        double t0 = now_ns ();
        for (long i = 0; i < calls; i++)
            dtclient_poll (c, &cmd);
        printf ("dtclient_poll(agent) ns_per_call %.2f calls %ld\n",
                (now_ns () - t0) / (double)calls, calls);
    }
    dtclient_close (c);

    unsetenv ("DT_AGENT_SOCKET");
    c = dtclient_open ();
    measure ("dtclient_step(no-agent)", c, calls, runs);
    dtclient_close (c);

    kill (agent, SIGKILL);
    waitpid (agent, NULL, 0);
    unlink (sock);
    unlink (shm);
    rmdir (dir);
    return rc;
}
