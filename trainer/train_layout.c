/* train_layout.c: dttrain under a tensor-parallel layout (layout.h) - the
 * communicators of the layout's groups, the tp all-reduce the transformer
 * calls, the gradient norm that counts replicated tensors once, the peer a
 * failed collective names, and the parameters in the one-rank layout
 * (params_crc32c, --dump-params), so that runs in different layouts
 * compare directly. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/dtime.h"
#include "common/log.h"
#include "trainer/layout.h"
#include "trainer/train_int.h"

/* model.h's tp_allreduce: the sum over the tp group.  The error goes to
 * k->last_error, where the step's error text comes from ("gloo ..." marks
 * it a lost peer). */
static int tp_allreduce_cb (void *arg, float *buf, size_t n)
{
    struct trainer *t = arg;
    dt_error_t err;
    int64_t t0 = dt_mono_ns ();
    if (dt_comm_allreduce (t->tp_comm, buf, n, DT_F32, DT_SUM, &err) < 0) {
        snprintf (t->k->last_error, sizeof (t->k->last_error), "tensor-parallel %s",
                  err.text);
        return -1;
    }
    t->tp_bytes += n * 4.0;
    t->tp_s += (dt_mono_ns () - t0) / 1e9;
    return 0;
}

/* The communicator of this rank's group along d (name, ranks[size], this
 * rank's index me): on CPUs a gloo context over keys of its own; on CUDA
 * split from the world's NCCL communicator by the group's number (a
 * collective over the world), ranked like the CPU path's; p2p: the
 * pipeline's sends and receives too. */
static dt_comm_t *open_group (struct trainer *t, enum layout_dim d, const char *name,
                              const int *ranks, int me, int size, int p2p,
                              dt_error_t *err)
{
    if (!t->k->is_device)
        return train_comm_open_group (t, name, me, size, err);
    return dt_comm_nccl_split (t->comm, layout_group_id (&t->ly, d), me, ranks, size, p2p,
                               err);
}

int train_layout_open (struct trainer *t, dt_error_t *err)
{
    struct layout *ly = &t->ly;
    char name[48];
    int me;

    if (!(t->tp_ranks = calloc (ly->tp, sizeof (int))) ||
        !(t->dp_ranks = calloc (ly->dp, sizeof (int))) ||
        !(t->pp_ranks = calloc (ly->pp, sizeof (int))))
        return errprintf (err, "out of memory");
    layout_group (ly, LAYOUT_TP, t->tp_ranks, &me);
    layout_group (ly, LAYOUT_DP, t->dp_ranks, &me);
    layout_group (ly, LAYOUT_PP, t->pp_ranks, &me);
    /* Every rank opens its groups in the same order (tp, pp, dp), each
     * group over keys of its own (gloo) or as one split of the world
     * (NCCL), so no rank waits on a group that its peers open later. */
    if (ly->tp > 1) {
        snprintf (name, sizeof (name), "tp%d", layout_group_id (ly, LAYOUT_TP));
        if (!(t->tp_comm =
                open_group (t, LAYOUT_TP, name, t->tp_ranks, ly->tpr, ly->tp, 0, err)))
            return -1;
        t->model.tp_allreduce = tp_allreduce_cb;
        t->model.tp_arg = t;
    }
    if (ly->pp > 1) {
        snprintf (name, sizeof (name), "pp%d", layout_group_id (ly, LAYOUT_PP));
        if (!(t->pp_comm =
                open_group (t, LAYOUT_PP, name, t->pp_ranks, ly->ppr, ly->pp, 1, err)))
            return -1;
    }
    if (ly->dp == ly->world)
        t->dp_comm = t->comm;
    else if (ly->dp > 1) {
        snprintf (name, sizeof (name), "dp%d", layout_group_id (ly, LAYOUT_DP));
        if (!(t->dp_comm =
                open_group (t, LAYOUT_DP, name, t->dp_ranks, ly->dpr, ly->dp, 0, err)))
            return -1;
    }
    if (t->rank == 0 && ly->tp * ly->pp > 1)
        dt_log (LOG_INFO, "layout: tp %d x pp %d x dp %d (%zu parameters per rank)",
                ly->tp, ly->pp, ly->dp, t->model.nparams);
    if (dtclient_connected (t->client)) {
        if (t->tp_comm)
            dt_comm_set_wait_hook (t->tp_comm, train_client_waiting, t->client);
        if (t->pp_comm)
            dt_comm_set_wait_hook (t->pp_comm, train_client_waiting, t->client);
        if (t->dp_comm && t->dp_comm != t->comm)
            dt_comm_set_wait_hook (t->dp_comm, train_client_waiting, t->client);
    }
    return 0;
}

void train_layout_close (struct trainer *t)
{
    dt_comm_destroy (t->tp_comm);
    dt_comm_destroy (t->pp_comm);
    if (t->dp_comm != t->comm)
        dt_comm_destroy (t->dp_comm);
    t->tp_comm = t->dp_comm = t->pp_comm = NULL;
    free (t->tp_ranks);
    free (t->dp_ranks);
    free (t->pp_ranks);
    t->tp_ranks = t->dp_ranks = t->pp_ranks = NULL;
}

/* The squared norm of this rank's share of the gradient [lo, hi): a
 * replicated tensor (held whole by every tp rank, with the same gradient)
 * counts on tp rank 0 only, so the sum over all ranks is the norm of the
 * one-rank model's gradient.  On the other tp ranks it adds 0 x its sum:
 * nothing when finite, NaN when not, so a non-finite value there is seen
 * (the step skipped) like any other. */
int train_layout_sumsq (struct trainer *t, double *sumsq)
{
    struct model *m = &t->model;
    if (t->ly.tp == 1)
        return t->k->sumsq (t->hi - t->lo, m->grads + t->lo, sumsq);
    *sumsq = 0;
    for (int i = 0; i < m->ntensors; i++) {
        size_t a = m->t[i].off, b = a + m->t[i].count;
        double s = 0;
        if (a < t->lo)
            a = t->lo;
        if (b > t->hi)
            b = t->hi;
        if (a >= b)
            continue;
        if (t->k->sumsq (b - a, m->grads + a, &s) < 0)
            return -1;
        *sumsq += m->t[i].replica ? 0.0 * s : s;
    }
    return 0;
}

/* The world rank of the peer a failed collective's error names: the world
 * communicator's own, or a group's (mapped to the world), or -1. */
int train_layout_peer (struct trainer *t, const char *errtext)
{
    int who = dt_comm_peer_of (t->comm, errtext);
    if (who >= 0)
        return who;
    if (t->tp_comm && (who = dt_comm_peer_of (t->tp_comm, errtext)) >= 0)
        return t->tp_ranks[who];
    if (t->dp_comm && t->dp_comm != t->comm &&
        (who = dt_comm_peer_of (t->dp_comm, errtext)) >= 0)
        return t->dp_ranks[who];
    if (t->pp_comm && (who = dt_comm_peer_of (t->pp_comm, errtext)) >= 0)
        return t->pp_ranks[who];
    /* A tp group of two: the other one (gloo does not always name the
     * address). */
    if (t->ly.tp == 2 && strstr (errtext, "tensor-parallel"))
        return t->tp_ranks[1 - t->ly.tpr];
    return -1;
}

/* The tensors every tp rank holds whole (embeddings, LayerNorms, output
 * biases, head) must be the same bits on all of them: their gradients
 * are computed from all-reduced values, never exchanged.  0, 1 when they
 * differ (logged), -1 when the comparison failed (err). */
int train_layout_replicas_differ (struct trainer *t, dt_error_t *err)
{
    struct model *m = &t->model;
    uint32_t crc = 0;

    if (t->ly.tp == 1)
        return 0;
    float *h = malloc (m->nparams * 4 + 4);
    if (!h || t->k->download (h, m->params, m->nparams * 4) < 0) {
        free (h);
        return errprintf (err, "out of memory");
    }
    for (int i = 0; i < m->ntensors; i++)
        if (m->t[i].vdim == 0)
            crc = dt_crc32c (crc, h + m->t[i].off, m->t[i].count * 4);
    free (h);
    int64_t mm[2] = { crc, -(int64_t)crc };
    if (dt_comm_allreduce (t->tp_comm, mm, 2, DT_I64, DT_MAX, err) < 0)
        return -1;
    if (mm[0] == -mm[1])
        return 0;
    dt_log (LOG_ERR,
            "rank %d: tensor-parallel replicas diverged: replicated tensors' CRC32C "
            "%08x here, the tp group's range %08x..%08x",
            t->rank, crc, (uint32_t)-mm[1], (uint32_t)mm[0]);
    return 1;
}

/* Rank r's tensors (its tp slice of its stage's): m's tensor table,
 * nothing allocated. */
static void rank_layout (const struct trainer *t, struct model *m, int r)
{
    const struct train_opts *o = &t->o;
    int tpr = r % t->ly.tp, ppr = (r / t->ly.tp) % t->ly.pp, per = o->layers / t->ly.pp;
    memset (m, 0, sizeof (*m));
    layout_tfm (m, o->context, o->width, o->layers, t->ly.tp, tpr, per * ppr,
                per * (ppr + 1), ppr == 0, ppr == t->ly.pp - 1);
}

/* The parameters in the one-rank layout: every rank's slice gathered
 * (all-gather over the world), the slices of dp replica 0 placed by name.
 * Returns their CRC32C (what params_crc32c of a one-rank run is); rank 0
 * writes them for --dump-params.  A collective over the world: every rank
 * calls it.  *ok 0 on failure (logged). */
uint32_t train_layout_global_crc (struct trainer *t, int *ok)
{
    const struct layout *ly = &t->ly;
    struct model *g = calloc (1, sizeof (*g)), *r = calloc (1, sizeof (*r));
    size_t *counts = calloc (ly->world, sizeof (size_t)), total = 0;
    float *all = NULL, *whole = NULL;
    uint32_t crc = 0;
    dt_error_t err;

    *ok = 0;
    if (!g || !r || !counts)
        goto out;
    for (int i = 0; i < ly->world; i++) {
        rank_layout (t, r, i);
        counts[i] = r->nparams;
        total += r->nparams;
    }
    /* The one-rank layout: tp 1 */
    memset (g, 0, sizeof (*g));
    layout_tfm (g, t->o.context, t->o.width, t->o.layers, 1, 0, 0, t->o.layers, 1, 1);
    if (!(all = malloc (total * 4)) || !(whole = calloc (g->nparams, 4)))
        goto out;
    size_t at = 0;
    for (int i = 0; i < ly->rank; i++)
        at += counts[i];
    if (t->k->download (all + at, t->model.params, t->model.nparams * 4) < 0)
        goto out;
    if (dt_comm_allgather (t->comm, all + at, all, counts, &err) < 0) {
        dt_log (LOG_ERR, "rank %d: gathering the parameters: %s", t->rank, err.text);
        goto out;
    }
    at = 0;
    for (int i = 0; i < ly->world; i++) {
        if (i < ly->tp * ly->pp) { /* dp replica 0 */
            rank_layout (t, r, i);
            if (layout_to_global (r->t, r->ntensors, all + at, g->t, g->ntensors, whole) <
                0)
                goto out;
        }
        at += counts[i];
    }
    crc = dt_crc32c (0, whole, g->nparams * 4);
    *ok = 1;
    if (t->o.dump_params && t->rank == 0) {
        FILE *f = fopen (t->o.dump_params, "wb");
        if (!f || fwrite (whole, 4, g->nparams, f) != g->nparams || fclose (f) != 0)
            dt_log (LOG_ERR, "--dump-params %s: %s", t->o.dump_params, strerror (errno));
    }
out:
    free (g);
    free (r);
    free (counts);
    free (all);
    free (whole);
    return crc;
}
