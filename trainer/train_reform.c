/* train_reform.c: re-forming the group in place after a peer's loss.
 *
 * A surviving rank keeps its state in memory and waits, for a bounded
 * time, for the agent's word: DTCLIENT_CMD_REFORM (the controller made a
 * new attempt of the same processes, the lost rank being restarted with
 * DT_REFORM_JOIN=1) or a stop (the controller took the ordinary path: the
 * caller then writes its just-in-time checkpoint and exits as before).  On
 * a re-form every member of the new attempt opens a new communicator under
 * the new attempt's key prefix, agrees on the newest completed step, takes
 * the whole state from the lowest rank holding it, and checks that every
 * rank holds the same state before the next step.  Under tensor or
 * pipeline parallelism a rank holds its (tp, pp) position's slice, which
 * every member of its data-parallel group holds too: the slice comes from
 * the lowest member of that group at the newest step.  dp >= 2, not
 * zero1 (its optimizer state is sharded).
 *
 * The same on both backends: gloo on CPUs, NCCL on GPUs (the new world
 * communicator from a new unique id published under the new attempt's
 * key prefix, the groups split from it again; the state stays in device
 * memory and is broadcast device to device with ncclBroadcast).  The NCCL
 * path is written and compiled but has not yet run on a GPU.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"
#include "common/dtime.h"
#include "common/log.h"
#include "trainer/train_int.h"

/* How long a survivor waits for the controller's word before it falls
 * back to its just-in-time checkpoint: the controller decides at the
 * rank exit's report, and its command reaches every agent within a
 * heartbeat interval; the just-in-time window (5 s) must still be open
 * after this wait. */
static const int64_t reform_wait_ms = 3000;

int train_reform_init (struct trainer *t)
{
    const char *on = getenv ("DT_REFORM"), *join = getenv ("DT_REFORM_JOIN");
    const char *att = getenv ("DT_ATTEMPT");

    t->reform_ok = on && !strcmp (on, "1") && t->world >= 2 && t->ly.dp >= 2 &&
                   t->o.parallel == PAR_DP && dtclient_connected (t->client);
    if (t->reform_ok && join && !strcmp (join, "1") && att && atoll (att) > 0)
        t->reform_attempt = atoll (att);
    return t->reform_attempt > 0;
}

void train_reform_declare (struct trainer *t)
{
    if (!t->reform_ok)
        return;
    dtclient_err_t e = dtclient_declare (t->client, DTCLIENT_CAP_REFORM);
    if (e != DTCLIENT_OK) {
        dt_log (LOG_WARNING, "rank %d: re-form capability not declared: %s", t->rank,
                dtclient_strerror (e));
        t->reform_ok = 0;
    }
    else
        train_rwatch_start (t);
}

/* The state every member must hold identically: a CRC over the
 * parameters and both optimizer moments, with the step.  On a device the
 * tensors are copied to the host first.  0 or -1 with err. */
static int state_crc (struct trainer *t, uint32_t *out, dt_error_t *err)
{
    size_t n = t->model.nparams;
    const float *tensors[3] = { t->model.params, t->m, t->v };
    float *host = NULL;
    uint32_t crc = 0;
    if (t->k->is_device && !(host = malloc (n > 0 ? n * 4 : 1)))
        return errprintf (err, "re-form: out of memory");
    for (int i = 0; i < 3; i++) {
        const float *p = tensors[i];
        if (host) {
            if (t->k->download (host, p, n * 4) < 0) {
                free (host);
                return errprintf (err, "re-form: reading the state: %s",
                                  t->k->last_error);
            }
            p = host;
        }
        crc = dt_crc32c (crc, p, n * 4);
    }
    free (host);
    *out = dt_crc32c (crc, &t->step, sizeof (t->step));
    return 0;
}

int train_reform_sync (struct trainer *t, dt_error_t *err)
{
    size_t n = t->model.nparams;
    int64_t t0 = dt_mono_ns ();
    /* The newest completed step, and the lowest rank holding it. */
    int64_t mine = t->reform_joining ? -1 : t->step;
    int64_t smax = mine, src;
    if (dt_comm_allreduce (t->comm, &smax, 1, DT_I64, DT_MAX, err) < 0)
        return -1;
    if (smax < 0)
        return errprintf (err, "re-form: no member holds the state");
    src = -(int64_t)(mine == smax ? t->rank : t->world); /* the minimum: max of -x */
    if (dt_comm_allreduce (t->comm, &src, 1, DT_I64, DT_MAX, err) < 0)
        return -1;
    src = -src;
    /* The tensors: from the lowest member of this rank's data-parallel
     * group (the same (tp, pp) slice) at the newest step; the whole world
     * in plain dp.  Every group holds one: a lost peer's group has
     * survivors (dp >= 2), and nobody completes a step a peer lost. */
    int64_t gsrc = -(int64_t)(mine == smax ? t->ly.dpr : t->ly.dp);
    if (dt_comm_allreduce (t->dp_comm, &gsrc, 1, DT_I64, DT_MAX, err) < 0)
        return -1;
    gsrc = -gsrc;
    if (gsrc >= t->ly.dp)
        return errprintf (
          err, "re-form: no member of data-parallel group %d holds step %" PRId64,
          layout_group_id (&t->ly, LAYOUT_DP), smax);
    /* What exact resume needs besides the tensors: the step (the data
     * order and the schedule are functions of it) and the checkpoint
     * bookkeeping that decides collectively when to write. */
    int64_t misc[5] = { t->step, t->ckpt_req_done, t->my_ckpt_req, t->last_saved, 0 };
    memcpy (&misc[4], &t->perf_peak, sizeof (double)); /* (0 unless known) */
    if (dt_comm_broadcast (t->comm, misc, sizeof (misc), (int)src, err) < 0 ||
        dt_comm_broadcast (t->dp_comm, t->model.params, n * 4, (int)gsrc, err) < 0 ||
        dt_comm_broadcast (t->dp_comm, t->m, n * 4, (int)gsrc, err) < 0 ||
        dt_comm_broadcast (t->dp_comm, t->v, n * 4, (int)gsrc, err) < 0)
        return -1;
    int64_t behind = smax - mine;
    t->step = misc[0];
    t->ckpt_req_done = misc[1];
    t->my_ckpt_req = misc[2];
    t->last_saved = misc[3];
    if (!t->perf_known) { /* the replacement reports its source's peak */
        memcpy (&t->perf_peak, &misc[4], sizeof (double));
        t->perf_src = "peer";
        t->perf_known = t->perf_peak > 0;
    }
    if (t->reform_joining)
        t->start_step = t->step;
    /* A periodic checkpoint of the old attempt that was not committed
     * stays uncommitted: the new attempt writes its own. */
    t->pending_commit = 0;
    if (t->ov.on) { /* the comm thread's failure was the old group's */
        pthread_mutex_lock (&t->ov.lock);
        t->ov.failed = 0;
        pthread_mutex_unlock (&t->ov.lock);
    }
    int64_t t1 = dt_mono_ns ();
    uint32_t crc = 0;
    if (state_crc (t, &crc, err) < 0)
        return -1;
    int64_t mm[2] = { crc, -(int64_t)crc };
    if (dt_comm_allreduce (t->dp_comm, mm, 2, DT_I64, DT_MAX, err) < 0)
        return -1;
    if (mm[0] != -mm[1])
        return errprintf (err,
                          "re-form: the members' states differ after the transfer "
                          "(crc %08x here, %08x..%08x)",
                          crc, (uint32_t)-mm[1], (uint32_t)mm[0]);
    t->reform_transfer_ms = (t1 - t0) / 1e6;
    t->reform_first = t->step + 1;
    dt_log (LOG_NOTICE,
            "rank %d: re-formed as attempt %" PRId64 " at step %" PRId64
            " (state from rank %d%s, %.1f MB in %.1f ms, fingerprint %08x checked in "
            "%.1f ms)",
            t->rank, t->reform_attempt, t->step, t->dp_ranks[gsrc],
            t->reform_joining ? "; joined"
            : behind > 0      ? "; was behind"
                              : "",
            3.0 * n * 4 / 1e6, (t1 - t0) / 1e6, crc, (dt_mono_ns () - t1) / 1e6);
    t->reform_joining = 0;
    return 0;
}

/* Open the new attempt's communicators.  The broken ones are destroyed:
 * that closes their sockets, so that a survivor still blocked in an old
 * collective on this rank (a ring or pipeline neighbour, not the lost
 * peer) fails at once and re-forms too.  With two ranks on gloo nobody
 * can be blocked on this one, and the broken context is abandoned
 * instead: tearing down a gloo context whose peer died may wait for its
 * pending operations; its sockets and threads stay until the process
 * ends.  NCCL communicators are always destroyed: every one of them is
 * aborted first (ncclCommAbort: the kernels waiting for the lost peer
 * quit, and nothing waits for the peers), which frees their GPU memory
 * and lets the device's memory be freed without waiting for them. */
static int reopen (struct trainer *t, int64_t attempt, dt_error_t *err)
{
    train_rwatch_lock (t); /* (it may abort the old communicators) */
    if (t->world > 2 || t->k->is_device) {
        train_layout_close (t);
        dt_comm_destroy (t->comm);
    }
    else {
        free (t->tp_ranks), free (t->dp_ranks), free (t->pp_ranks);
        t->tp_ranks = t->dp_ranks = t->pp_ranks = NULL;
        t->tp_comm = t->dp_comm = t->pp_comm = NULL;
    }
    t->comm = NULL;
    t->reform_attempt = attempt;
    train_rwatch_unlock (t);
    if (!(t->comm = train_comm_open (t, err)) || train_layout_open (t, err) < 0)
        return -1;
    dt_comm_set_wait_hook (t->comm, train_client_waiting, t->client);
    return 0;
}

int train_reform_survivor (struct trainer *t)
{
    dt_error_t err;
    dtclient_cmd_t cmd;
    struct timespec tick = { 0, 2 * 1000 * 1000 };

    if (!t->reform_ok)
        return -1;
    int64_t t0 = dt_mono_ms ();
    dt_log (LOG_NOTICE,
            "rank %d: peer lost after step %" PRId64
            ": keeping the state, waiting up to %lld ms to re-form",
            t->rank, t->step, (long long)reform_wait_ms);
    /* (the agent then asks the controller at once and often) */
    dtclient_declare (t->client, DTCLIENT_CAP_REFORM | DTCLIENT_REFORM_WAITING);
    ckpt_wait (t->writer); /* a periodic write in flight finishes first */
    while (dt_mono_ms () - t0 < reform_wait_ms) {
        /* (a re-form command the step loop read comes first) */
        int got = t->reform_pending > t->reform_attempt;
        if (got) {
            cmd.kind = DTCLIENT_CMD_REFORM;
            cmd.step = t->reform_pending;
        }
        else
            got = dtclient_poll (t->client, &cmd);
        t->reform_pending = 0;
        for (; got; got = dtclient_poll (t->client, &cmd)) {
            if (cmd.kind == DTCLIENT_CMD_STOP || cmd.kind == DTCLIENT_CMD_ABORT) {
                dt_log (LOG_NOTICE, "rank %d: %s while waiting to re-form", t->rank,
                        cmd.kind == DTCLIENT_CMD_STOP ? "stop" : "abort");
                if (cmd.kind == DTCLIENT_CMD_ABORT)
                    exit (EXIT_TRAIN_ERR);
                return -1;
            }
            if (cmd.kind != DTCLIENT_CMD_REFORM || cmd.step <= t->reform_attempt)
                continue;
            int64_t t1 = dt_mono_ms ();
            if (reopen (t, cmd.step, &err) < 0 || train_reform_sync (t, &err) < 0) {
                dt_log (LOG_ERR, "rank %d: re-form as attempt %" PRId64 " failed: %s",
                        t->rank, cmd.step, err.text);
                return -1;
            }
            train_perf_report (t); /* the new attempt's figures (known: no measuring) */
            dt_log (LOG_INFO,
                    "rank %d: waited %lld ms for the re-form command, re-formed in "
                    "%lld ms",
                    t->rank, (long long)(t1 - t0), (long long)(dt_mono_ms () - t1));
            return 0;
        }
        nanosleep (&tick, NULL);
    }
    dt_log (LOG_NOTICE, "rank %d: no re-form command within %lld ms", t->rank,
            (long long)reform_wait_ms);
    return -1;
}
