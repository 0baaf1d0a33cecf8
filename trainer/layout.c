/* layout.c: dttrain's parallel layout - degrees, coordinates, checks, and the
 * transformer's tensors as a rank holds them (see layout.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "trainer/layout.h"
#include "trainer/opts.h"

int layout_init (struct layout *ly, const struct train_opts *o, int world, int rank,
                 dt_error_t *err)
{
    int tp = o->tp > 0 ? o->tp : 1, pp = o->pp > 0 ? o->pp : 1;

    memset (ly, 0, sizeof (*ly));
    if ((tp > 1 || pp > 1) && o->model != MODEL_TRANSFORMER)
        return errprintf (err,
                          "--tp %d --pp %d: tensor and pipeline parallelism need "
                          "--model transformer (the MLP is data-parallel only)",
                          tp, pp);
    if (o->model == MODEL_TRANSFORMER && o->heads % tp != 0)
        return errprintf (err,
                          "--tp %d does not divide --heads %d (tensor parallelism "
                          "splits the attention heads)",
                          tp, o->heads);
    if (o->model == MODEL_TRANSFORMER && o->layers % pp != 0)
        return errprintf (err,
                          "--pp %d does not divide --layers %d (pipeline stages hold "
                          "equal numbers of blocks)",
                          pp, o->layers);
    if (world % (tp * pp) != 0)
        return errprintf (err,
                          "WORLD_SIZE=%d is not a multiple of --tp %d x --pp %d = %d "
                          "(the data-parallel degree is WORLD_SIZE / (tp x pp))",
                          world, tp, pp, tp * pp);
    ly->world = world;
    ly->rank = rank;
    ly->tp = tp;
    ly->pp = pp;
    ly->dp = world / (tp * pp);
    ly->tpr = rank % tp;
    ly->ppr = (rank / tp) % pp;
    ly->dpr = rank / (tp * pp);
    return 0;
}

int layout_rank (const struct layout *ly, int dpr, int ppr, int tpr)
{
    return (dpr * ly->pp + ppr) * ly->tp + tpr;
}

int layout_group (const struct layout *ly, enum layout_dim d, int *ranks, int *me)
{
    int n = d == LAYOUT_TP ? ly->tp : d == LAYOUT_PP ? ly->pp : ly->dp;
    for (int i = 0; i < n; i++)
        ranks[i] = d == LAYOUT_TP   ? layout_rank (ly, ly->dpr, ly->ppr, i)
                   : d == LAYOUT_PP ? layout_rank (ly, ly->dpr, i, ly->tpr)
                                    : layout_rank (ly, i, ly->ppr, ly->tpr);
    *me = d == LAYOUT_TP ? ly->tpr : d == LAYOUT_PP ? ly->ppr : ly->dpr;
    return n;
}

int layout_group_id (const struct layout *ly, enum layout_dim d)
{
    if (d == LAYOUT_TP)
        return ly->dpr * ly->pp + ly->ppr;
    if (d == LAYOUT_PP)
        return ly->dpr * ly->tp + ly->tpr;
    return ly->ppr * ly->tp + ly->tpr;
}

/* Append tensor name [d0, d1] (d1 0: a vector), split when tp > 1 along
 * dimension sdim of the view v[0..vdim) into tp equal parts (part tpr);
 * sdim -1: replicated.  *goff: the tensor's offset in the one-rank layout
 * (advanced past it); held: whether this rank holds the tensor at all. */
static void add (struct model *m, size_t *goff, int held, const char *name, int decay,
                 int64_t d0, int64_t d1, int vdim, const int64_t *v, int sdim, int tp,
                 int tpr)
{
    size_t whole = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    if (held) {
        struct model_tensor *t = &m->t[m->ntensors++];
        memset (t, 0, sizeof (*t));
        snprintf (t->name, sizeof (t->name), "%s", name);
        t->off = m->nparams;
        t->goff = *goff;
        t->decay = decay;
        t->ndim = d1 > 0 ? 2 : 1;
        t->shape[0] = d0;
        t->shape[1] = d1 > 0 ? d1 : 0;
        t->count = whole;
        t->replica = tp > 1 && sdim < 0 && tpr != 0;
        if (tp > 1 && sdim >= 0) {
            t->vdim = vdim;
            for (int i = 0; i < vdim; i++) {
                t->vshape[i] = v[i];
                t->boff[i] = 0;
                t->bext[i] = v[i];
            }
            t->bext[sdim] = v[sdim] / tp;
            t->boff[sdim] = t->bext[sdim] * tpr;
            t->count = whole / tp;
        }
        m->nparams += t->count;
    }
    *goff += whole;
}

void layout_tfm (struct model *m, int C, int E, int L, int tp, int tpr, int l0, int l1,
                 int first, int last)
{
    char name[24];
    size_t goff = 0;
    int64_t E_ = E;
    /* The views the tp splits cut: by columns of q | k | v head by head
     * ([E, 3, E], [3, E]), by columns ([E, 4E], [4E]) or by rows. */
    const int64_t v_wqkv[3] = { E_, 3, E_ }, v_bqkv[2] = { 3, E_ };
    const int64_t v_wo[2] = { E_, E_ }, v_w1[2] = { E_, 4 * E_ }, v_b1[1] = { 4 * E_ };
    const int64_t v_w2[2] = { 4 * E_, E_ };

    add (m, &goff, first, "wte", 0, MODEL_VOCAB, E, 0, NULL, -1, tp, tpr);
    add (m, &goff, first, "wpe", 0, C, E, 0, NULL, -1, tp, tpr);
    for (int l = 0; l < L; l++) {
        int h = l >= l0 && l < l1;
#define BLK_ADD(suffix, decay, d0, d1, vdim, v, sdim)                                    \
    do {                                                                                 \
        snprintf (name, sizeof (name), "h%d.%s", l, suffix);                             \
        add (m, &goff, h, name, decay, d0, d1, vdim, v, sdim, tp, tpr);                  \
    } while (0)
        BLK_ADD ("ln1.g", 0, E_, 0, 0, NULL, -1);
        BLK_ADD ("ln1.b", 0, E_, 0, 0, NULL, -1);
        BLK_ADD ("attn.wqkv", 1, E_, 3 * E_, 3, v_wqkv, 2);
        BLK_ADD ("attn.bqkv", 0, 3 * E_, 0, 2, v_bqkv, 1);
        BLK_ADD ("attn.wo", 1, E_, E_, 2, v_wo, 0);
        BLK_ADD ("attn.bo", 0, E_, 0, 0, NULL, -1);
        BLK_ADD ("ln2.g", 0, E_, 0, 0, NULL, -1);
        BLK_ADD ("ln2.b", 0, E_, 0, 0, NULL, -1);
        BLK_ADD ("mlp.w1", 1, E_, 4 * E_, 2, v_w1, 1);
        BLK_ADD ("mlp.b1", 0, 4 * E_, 0, 1, v_b1, 0);
        BLK_ADD ("mlp.w2", 1, 4 * E_, E_, 2, v_w2, 0);
        BLK_ADD ("mlp.b2", 0, E_, 0, 0, NULL, -1);
#undef BLK_ADD
    }
    add (m, &goff, last, "lnf.g", 0, E, 0, 0, NULL, -1, tp, tpr);
    add (m, &goff, last, "lnf.b", 0, E, 0, 0, NULL, -1, tp, tpr);
    add (m, &goff, last, "head.w", 1, E, MODEL_VOCAB, 0, NULL, -1, tp, tpr);
}

size_t layout_global_index (const struct model_tensor *t, size_t i)
{
    if (t->vdim == 0)
        return i;
    int64_t idx[3];
    for (int d = t->vdim - 1; d >= 0; d--) {
        idx[d] = (int64_t)(i % (size_t)t->bext[d]) + t->boff[d];
        i /= (size_t)t->bext[d];
    }
    size_t g = 0;
    for (int d = 0; d < t->vdim; d++)
        g = g * (size_t)t->vshape[d] + (size_t)idx[d];
    return g;
}

static const struct model_tensor *find (const struct model_tensor *g, int ng,
                                        const char *name)
{
    for (int i = 0; i < ng; i++)
        if (!strcmp (g[i].name, name))
            return &g[i];
    return NULL;
}

/* Copy between a rank's slice of tensor t and the whole tensor w, in runs
 * along the innermost dimension of the block. */
static void copy_block (const struct model_tensor *t, float *local,
                        const struct model_tensor *w, float *whole, int to_whole)
{
    size_t run = t->vdim ? (size_t)t->bext[t->vdim - 1] : t->count;
    for (size_t i = 0; i < t->count; i += run) {
        size_t gi = layout_global_index (t, i);
        if (to_whole)
            memcpy (whole + w->off + gi, local + t->off + i, run * 4);
        else
            memcpy (local + t->off + i, whole + w->off + gi, run * 4);
    }
}

int layout_to_global (const struct model_tensor *t, int nt, const float *src,
                      const struct model_tensor *g, int ng, float *dst)
{
    for (int i = 0; i < nt; i++) {
        const struct model_tensor *w = find (g, ng, t[i].name);
        if (!w)
            return -1;
        copy_block (&t[i], (float *)src, w, dst, 1);
    }
    return 0;
}

int layout_from_global (const struct model_tensor *t, int nt, float *dst,
                        const struct model_tensor *g, int ng, const float *src)
{
    for (int i = 0; i < nt; i++) {
        const struct model_tensor *w = find (g, ng, t[i].name);
        if (!w)
            return -1;
        copy_block (&t[i], dst, w, (float *)src, 0);
    }
    return 0;
}
