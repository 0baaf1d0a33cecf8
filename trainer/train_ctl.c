/* train_ctl.c: dttrain and its controller: the bootstrap store over
 * libdtclient's key-value service, opening the communicator, commands
 * (checkpoint at S, stop at S) and stop signals, fault injection. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/dtime.h"
#include "common/log.h"
#include "kernels/kernels.h"
#include "trainer/ckpt.h"
#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/train.h"
#include "trainer/train_int.h"

static int kv_set_cb (void *ctx, const char *key, const void *val, size_t len)
{
    return dtclient_kv_set (ctx, key, val, len) == DTCLIENT_OK ? 0 : -1;
}

static int kv_wait_cb (void *ctx, const char *key, long timeout_ms, void **val,
                       size_t *len)
{
    return dtclient_kv_wait (ctx, key, (int)timeout_ms, val, len) == DTCLIENT_OK ? 0 : -1;
}

void train_client_waiting (void *client, int waiting)
{
    dtclient_collective (client, waiting);
}

dt_comm_t *train_comm_open (struct trainer *t, dt_error_t *err)
{
    return train_comm_open_group (t, NULL, t->rank, t->world, err);
}

dt_comm_t *train_comm_open_group (struct trainer *t, const char *group, int rank,
                                  int size, dt_error_t *err)
{
    const struct train_opts *o = &t->o;
    static dt_comm_store_t store;
    char prefix[256], host[256];
    const char *attempt = getenv ("DT_ATTEMPT");
    if (!attempt)
        attempt = getenv ("TORCHELASTIC_RESTART_COUNT");
    const char *master = getenv ("MASTER_ADDR");

    if (size == 1)
        return dt_comm_self_create (err);
    /* Keys are unique per job, attempt and start step, so a restart never
     * meets the keys of the generation it replaces; a group of the layout
     * (trainer/layout.h) has keys of its own under them. */
    if (t->reform_attempt > 0) /* a re-formed group: the step is agreed on later */
        snprintf (prefix, sizeof (prefix), "dttrain/%.64s/a%" PRId64 "/reform%s%.32s",
                  o->job, t->reform_attempt, group ? "/" : "", group ? group : "");
    else
        snprintf (prefix, sizeof (prefix), "dttrain/%.64s/a%.16s/s%" PRId64 "%s%.32s",
                  o->job, attempt ? attempt : "0", t->start_step, group ? "/" : "",
                  group ? group : "");
    for (char *c = prefix; *c; c++) /* kv keys: [A-Za-z0-9_.:/-] */
        if (!isalnum ((unsigned char)*c) && !strchr ("_.:/-", *c))
            *c = '_';
    if (o->comm_host)
        snprintf (host, sizeof (host), "%s", o->comm_host);
    else if (!master || !strcmp (master, "127.0.0.1") || !strcmp (master, "localhost"))
        snprintf (host, sizeof (host), "127.0.0.1");
    else if (gethostname (host, sizeof (host)) < 0)
        snprintf (host, sizeof (host), "127.0.0.1");
    store.ctx = t->client;
    store.set = kv_set_cb;
    store.wait = kv_wait_cb;
    struct dt_comm_params p = {
        .rank = rank,
        .size = size,
        .rendezvous_dir = o->rendezvous_dir,
        .store = &store,
        .prefix = prefix,
        .host = host,
        .timeout_ms = o->comm_timeout_ms,
    };
    if (!o->rendezvous_dir && !dtclient_connected (t->client) &&
        !getenv ("DT_RENDEZVOUS_DIR")) {
        errprintf (err,
                   "WORLD_SIZE=%d needs a rendezvous: --rendezvous-dir DIR, an agent, "
                   "or DT_RENDEZVOUS_DIR",
                   t->world);
        return NULL;
    }
    if (t->k->is_device && group) { /* NCCL: train_layout_open splits the world's */
        errnoprintf (err, ENOTSUP,
                     "communicator of group %s: NCCL groups are split from the world "
                     "communicator",
                     group);
        return NULL;
    }
    if (t->k->is_device)
        return dt_comm_nccl_create (&p, err);
    return dt_comm_gloo_create (&p, err);
}

/* SIGTERM / SIGUSR1 (Slurm's warning before the time limit): stop at the
 * next step boundary with a checkpoint, like a STOP command.  One rank
 * receiving it is enough: the control allreduce tells the others.  The
 * signals are blocked in every thread (gloo's I/O threads must not see
 * EINTR) and collected here, between steps, with sigtimedwait.
 * Threads that started before main (OpenBLAS's pool) do not block them, so
 * a handler that only records the signal catches it there. */
static sigset_t stop_set;
static volatile sig_atomic_t stop_caught;

static void stop_handler (int sig)
{
    stop_caught = sig;
}

void trainer_catch_stop_signals (void)
{
    struct sigaction sa;
    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = stop_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGUSR1, &sa, NULL);
    sigemptyset (&stop_set);
    sigaddset (&stop_set, SIGTERM);
    sigaddset (&stop_set, SIGUSR1);
    pthread_sigmask (SIG_BLOCK, &stop_set, NULL);
}

static int stop_signal_pending (void)
{
    struct timespec zero = { 0, 0 };
    siginfo_t si;
    if (stop_caught)
        return stop_caught;
    if (sigisemptyset (&stop_set))
        return 0;
    return sigtimedwait (&stop_set, &si, &zero) > 0 ? si.si_signo : 0;
}

void train_poll_commands (struct trainer *t)
{
    dtclient_cmd_t cmd;

    int sig = stop_signal_pending ();
    if (sig && !t->my_stop_req) {
        dt_log (LOG_NOTICE,
                "rank %d: %s: stopping after step %" PRId64 " with a checkpoint", t->rank,
                strsignal (sig), t->step + 1);
        t->my_stop_req = t->step + 1;
    }
    while (dtclient_poll (t->client, &cmd)) {
        switch (cmd.kind) {
        case DTCLIENT_CMD_CHECKPOINT:
            if (cmd.step > t->my_ckpt_req)
                t->my_ckpt_req = cmd.step;
            break;
        case DTCLIENT_CMD_STOP:
            t->my_stop_req = cmd.step > 0 ? cmd.step : t->step + 1;
            /* A negative step: the attempt ended with a peer's loss (the
             * next collective fails, or is woken by train_rwatch.c). */
            if (cmd.step < 0)
                __atomic_store_n (&t->peer_lost, 1, __ATOMIC_RELAXED);
            break;
        case DTCLIENT_CMD_ABORT:
            dt_log (LOG_NOTICE,
                    "rank %d: abort requested by the controller at step %" PRId64,
                    t->rank, t->step);
            exit (EXIT_TRAIN_ERR);
        case DTCLIENT_CMD_REFORM:
            /* The controller decided before this rank's own collective
             * failed (it completed a step the lost peer had sent its share
             * of): kept for the wait that follows the failure. */
            if (cmd.step > t->reform_attempt && cmd.step > t->reform_pending)
                t->reform_pending = cmd.step;
            break;
        default: break;
        }
    }
}

void train_inject (struct trainer *t)
{
    const struct train_opts *o = &t->o;
    integ_before_step (t); /* --inject-bitflip */
    if (o->crash_rank == t->rank && o->crash_step == t->step) {
        fprintf (stderr, "dttrain: rank %d: injected crash at step %" PRId64 "\n",
                 t->rank, t->step);
        fflush (stderr);
        _exit (EXIT_INJECTED);
    }
    if (o->hang_rank == t->rank && o->hang_step == t->step) {
        fprintf (stderr, "dttrain: rank %d: injected hang at step %" PRId64 "\n", t->rank,
                 t->step);
        fflush (stderr);
        for (;;)
            pause ();
    }
}

/* The peak FLOP/s of this rank, measured once: the best of a few SGEMMs of
 * a fixed size on the rank's backend (OpenBLAS with its threads on the CPU,
 * cuBLAS on a GPU, in the precision the GEMMs of the step run in).  0 when
 * memory is short. */
static double perf_measure_peak (struct trainer *t, const char **src)
{
    struct dt_kern_ops *k = t->k;
    /* the best of several: a busy machine slows some of them */
    const int n = k->is_device ? 4096 : 512, reps = 8;
    size_t bytes = (size_t)n * n * sizeof (float);
    float *a = k->alloc (bytes), *b = k->alloc (bytes), *c = k->alloc (bytes);
    double best = 0;

    *src = k->is_device ? "sgemm4096" : "sgemm512";
    for (int i = 0; a && b && c && i < reps; i++) {
        int64_t t0 = dt_mono_ns ();
        if (k->sgemm (0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) < 0 || k->sync () < 0)
            break;
        double s = (dt_mono_ns () - t0) / 1e9;
        if (i > 0 && s > 0 && 2.0 * n * n * n / s > best) /* the first warms up */
            best = 2.0 * n * n * n / s;
    }
    if (a)
        k->free (a);
    if (b)
        k->free (b);
    if (c)
        k->free (c);
    return best;
}

void train_perf_report (struct trainer *t)
{
    const struct train_opts *o = &t->o;
    const char *src = o->peak_from_env ? "env" : "option";
    double peak = o->peak_flops;

    if (!dtclient_connected (t->client))
        return;
    /* The model FLOPs of one step of the job (model.h's flops_per_sample,
     * dttrain(1)), this rank's share: the controller sums the ranks. */
    double step = t->model.flops_per_sample * o->global_batch / t->world;
    /* On a GPU its data-sheet peak in the step's precision (kernels.h);
     * else, or for a part not known, a measured one. */
    if (t->perf_known) { /* measured once (or given by a re-formed group) */
        peak = t->perf_peak;
        src = t->perf_src;
    }
    if (peak <= 0 && !t->perf_known && t->k->is_device &&
        (peak = dt_kern_cuda_peak_flops (o->precision == PREC_BF16, NULL, 0)) > 0)
        src = "datasheet";
    if (peak <= 0 && !t->perf_known)
        peak = perf_measure_peak (t, &src);
    t->perf_known = 1, t->perf_peak = peak, t->perf_src = src;
    if (t->rank == 0)
        dt_log (LOG_INFO,
                "model %.3g FLOP per step (%.3g per rank), peak %.3g FLOP/s (%s)",
                step * t->world, step, peak, peak > 0 ? src : "unknown");
    dtclient_err_t e = dtclient_perf (t->client, step, peak, peak > 0 ? src : NULL);
    if (e != DTCLIENT_OK && t->rank == 0)
        dt_log (LOG_WARNING, "rank %d: FLOP report not taken: %s", t->rank,
                dtclient_strerror (e));
}
