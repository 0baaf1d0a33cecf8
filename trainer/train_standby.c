/* train_standby.c: a hot spare's standby process.
 *
 * The agent of a spare node of a job with restart.reform starts its
 * trainer processes ahead of time with DT_STANDBY=1 and no rank of their
 * own (RANK is the local index).  Such a process loads what does not
 * depend on a rank (the process and its libraries, the kernels, the data
 * file, a model of the job's shape, so that every page and library is
 * warm), declares that it can re-form, and waits.  When a node is lost,
 * the controller makes the spare take its place in a re-formed group: the
 * agent writes the rank this process takes over into its page and sends
 * DTCLIENT_CMD_REFORM with the new attempt.  The process then becomes
 * that rank's replacement exactly as a rank restarted in place does
 * (DT_REFORM_JOIN=1, train_reform.c): it opens a new client with its rank
 * and joins the group, receiving the state from a survivor.  A stop (or
 * SIGTERM) ends it with status 0.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dtime.h"
#include "common/log.h"
#include "kernels/kernels.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/train.h"
#include "trainer/train_int.h"

/* How often a standby looks at its page: the join waits at most this. */
static const long standby_tick_ns = 2 * 1000 * 1000;

/* The model built while warming up, kept for the replacement's
 * trainer_create (plain data parallelism: every rank's model is the same
 * one; its parameters are overwritten by the state transfer anyway). */
static struct model warm_model;
static bool warm_model_kept;

bool train_standby_requested (void)
{
    const char *s = getenv ("DT_STANDBY");
    return s && !strcmp (s, "1");
}

/* Touch what a start costs and no rank changes: the kernels, the data
 * file and a model of the job's shape (kept for trainer_create in plain
 * data parallelism, else freed again: the pages stay warm). */
static int warm_up (const struct train_opts *o, dt_error_t *err)
{
    struct data d;
    struct model m;
    char why[256];
    struct dt_kern_ops *k;
    int64_t t0 = dt_mono_ns ();

    if (data_open (&d, o->data, o->context, o->val_frac, err) < 0)
        return -1;
    data_close (&d);
    if (!(k = dt_kern_select (o->backend, why, sizeof (why)))) {
        errprintf (err, "--backend: %s", why);
        return -1;
    }
    if (!k->is_device)
        dt_kern_cpu_set_threads (o->threads);
    int group = o->tp * o->pp > 0 ? o->tp * o->pp : 1;
    int dp = o->world / group > 0 ? o->world / group : 1;
    int mb = o->micro_batch ? o->micro_batch : (o->global_batch + dp - 1) / dp;
    memset (&m, 0, sizeof (m));
    if (model_create_opts (&m, k, o, mb < 1 ? 1 : mb) < 0) {
        errprintf (err, "model: %s (%s backend)", k->last_error, k->name);
        return -1;
    }
    if (o->tp <= 1 && o->pp <= 1) {
        warm_model = m;
        warm_model_kept = true;
    }
    else
        model_destroy (&m);
    dt_log (LOG_INFO, "standby: warm (data, %s kernels, model%s) in %.1f ms", k->name,
            warm_model_kept ? " kept" : "", (dt_mono_ns () - t0) / 1e6);
    return 0;
}

bool train_standby_take_model (struct model *m, const struct dt_kern_ops *k, int mb)
{
    if (!warm_model_kept)
        return false;
    warm_model_kept = false;
    if (warm_model.k != k || warm_model.mb != mb) {
        model_destroy (&warm_model);
        return false;
    }
    *m = warm_model;
    memset (&warm_model, 0, sizeof (warm_model));
    return true;
}

static bool stop_signalled (void)
{
    sigset_t set;
    siginfo_t si;
    struct timespec zero = { 0, 0 };
    sigemptyset (&set);
    sigaddset (&set, SIGTERM);
    sigaddset (&set, SIGUSR1);
    return sigtimedwait (&set, &si, &zero) > 0;
}

int train_standby_wait (struct train_opts *o, dtclient_t **client, dt_error_t *err)
{
    struct timespec tick = { 0, standby_tick_ns };
    dtclient_cmd_t cmd;
    char buf[32];

    if (!dtclient_connected (*client))
        return errprintf (err, "DT_STANDBY=1 needs an agent (DT_AGENT_SOCKET)");
    if (warm_up (o, err) < 0)
        return -1;
    /* Ready: the agent may now hand this process a rank. */
    if (dtclient_declare (*client, DTCLIENT_CAP_REFORM) != DTCLIENT_OK)
        return errprintf (err, "standby: the agent did not take the declaration");
    int64_t t0 = dt_mono_ms ();
    for (;;) {
        if (stop_signalled ())
            return 1;
        if (!dtclient_poll (*client, &cmd)) {
            nanosleep (&tick, NULL);
            continue;
        }
        if (cmd.kind == DTCLIENT_CMD_STOP || cmd.kind == DTCLIENT_CMD_ABORT)
            return 1;
        if (cmd.kind != DTCLIENT_CMD_REFORM || cmd.step <= 0)
            continue;
        int rank = dtclient_assigned_rank (*client);
        if (rank < 0 || rank >= o->world)
            return errprintf (err,
                              "standby: joining attempt %" PRId64
                              " with rank %d (world %d): not a rank",
                              cmd.step, rank, o->world);
        dt_log (LOG_NOTICE,
                "standby: takes over rank %d in attempt %" PRId64 " after %.1f s ready",
                rank, cmd.step, (dt_mono_ms () - t0) / 1e3);
        /* From here on this process is that rank's replacement. */
        o->rank = rank;
        snprintf (buf, sizeof (buf), "%d", rank);
        setenv ("RANK", buf, 1);
        setenv ("ROLE_RANK", buf, 1);
        snprintf (buf, sizeof (buf), "%" PRId64, cmd.step);
        setenv ("DT_ATTEMPT", buf, 1);
        setenv ("DT_REFORM_JOIN", "1", 1);
        unsetenv ("DT_STANDBY");
        dtclient_close (*client);
        if (!(*client = dtclient_open ()))
            return errprintf (err, "out of memory");
        if (!dtclient_connected (*client))
            return errprintf (err, "standby: cannot reconnect to the agent as rank %d",
                              rank);
        return 0;
    }
}
