/* transformer.c: the decoder-only byte transformer - layout, initialisation, forward,
 * backward. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/data.h"
#include "trainer/layout.h"
#include "trainer/transformer.h"

/* Tensors per block, and the index of block l's first. */
#define TFM_PER_BLOCK 12
#define BLK(l) (m->blk0 + TFM_PER_BLOCK * (l)) /* l: this stage's block index */
enum { LN1G, LN1B, WQKV, BQKV, WO, BO, LN2G, LN2B, W1, B1, W2, B2 };

/* Activations of one micro-batch (backend memory, carved from one block). */
struct tfm_act {
    void *block;
    int n;              /* samples of the forward pass that filled it */
    uint8_t *tok, *tgt; /* backend: tokens, targets [mb*C] */
    uint8_t *tgt_host;
    float *loss_host;
    float **res;                /* L + 1 residual streams [M, E]: res[l] enters block l */
    float **mid;                /* after block l's attention [M, E] */
    float **ln1, **ln2, **yatt; /* [M, E] */
    float **mean1, **rstd1, **mean2, **rstd2; /* [M] */
    float **qkv;                              /* [M, 3E] */
    float **att;    /* [mb, NH, C, C]; flash: the log-sum-exps [mb, NH, C] */
    float **u, **g; /* MLP pre-activation and GELU output [M, 4E] */
    float *lnf, *meanf, *rstdf, *logits, *loss;
    float *dres, *dln, *dyatt, *dqkv, *dg, *work;
    float *gin; /* a pipeline stage's output gradient as received */
};

/* Uniform in [-a, a) from the counter-based hash (as model.c). */
static float uniform (uint64_t seed, size_t i, float a)
{
    uint64_t h = data_hash (data_hash (seed ^ 0x7f3aULL) + i);
    double u = (h >> 11) * (1.0 / 9007199254740992.0);
    return (float)((2.0 * u - 1.0) * a);
}

/* The whole model on one rank, or this rank's tp slice (layout.h). */
static void layout (struct model *m)
{
    layout_tfm (m, m->C, m->E, m->L, m->tp > 1 ? m->tp : 1, m->tpr, m->pp_l0, m->pp_l1,
                m->pp_first, m->pp_last);
}

/* GPT-2's initialisation, with a uniform of the same standard deviation:
 * 0.02 for embeddings and matrices, 0.02 / sqrt(2 L) for the two
 * projections into the residual stream; LayerNorm gains 1; biases 0.
 * Each value is a function of its index in the one-rank layout, so a
 * tensor-parallel slice holds the same values as the whole tensor. */
static void init (struct model *m, float *h, uint64_t seed)
{
    const float s3 = sqrtf (3.0f);
    for (int i = 0; i < m->ntensors; i++) {
        const struct model_tensor *t = &m->t[i];
        const char *dot = strrchr (t->name, '.');
        float sd = 0.0f;
        if (dot && !strcmp (dot, ".g")) {
            for (size_t j = 0; j < t->count; j++)
                h[t->off + j] = 1.0f;
            continue;
        }
        if (t->ndim == 2)
            sd = 0.02f;
        if (strstr (t->name, "attn.wo") || strstr (t->name, "mlp.w2"))
            sd = 0.02f / sqrtf (2.0f * m->L);
        for (size_t j = 0; sd > 0 && j < t->count; j++)
            h[t->off + j] = uniform (seed, t->goff + layout_global_index (t, j), sd * s3);
    }
}

/* Carve n floats from the block (64-byte aligned); with base NULL only
 * count the size. */
static float *carve (char *base, size_t *at, size_t n)
{
    float *p = base ? (float *)(base + *at) : NULL;
    *at += (n * 4 + 63) & ~(size_t)63;
    return p;
}

static int alloc_act (struct model *m, struct tfm_act *a)
{
    struct dt_kern_ops *k = m->k;
    int L = m->pp_l1 - m->pp_l0, C = m->C, E = m->E, T = m->tp > 1 ? m->tp : 1,
        NH = m->H / T;
    int EA = E / T, F = 4 * E / T; /* this rank's attention and MLP widths */
    size_t M = (size_t)m->mb * C, att = (size_t)m->mb * NH * C * (m->flash ? 1 : C);

    if (!(a->res = calloc (L + 1, sizeof (float *))) ||
        !(a->mid = calloc (L, sizeof (float *))) ||
        !(a->ln1 = calloc (L, sizeof (float *))) ||
        !(a->ln2 = calloc (L, sizeof (float *))) ||
        !(a->yatt = calloc (L, sizeof (float *))) ||
        !(a->mean1 = calloc (L, sizeof (float *))) ||
        !(a->rstd1 = calloc (L, sizeof (float *))) ||
        !(a->mean2 = calloc (L, sizeof (float *))) ||
        !(a->rstd2 = calloc (L, sizeof (float *))) ||
        !(a->qkv = calloc (L, sizeof (float *))) ||
        !(a->att = calloc (L, sizeof (float *))) ||
        !(a->u = calloc (L, sizeof (float *))) ||
        !(a->g = calloc (L, sizeof (float *))) || !(a->tgt_host = malloc (M)) ||
        !(a->loss_host = malloc (M * 4))) {
        snprintf (k->last_error, sizeof (k->last_error), "out of host memory");
        return -1;
    }
    /* Two passes: size, then carve. */
    for (int pass = 0; pass < 2; pass++) {
        char *b = pass ? a->block : NULL;
        size_t at = 0;
        a->res[0] = carve (b, &at, M * E);
        for (int l = 0; l < L; l++) {
            a->res[l + 1] = carve (b, &at, M * E);
            a->mid[l] = carve (b, &at, M * E);
            a->ln1[l] = carve (b, &at, M * E);
            a->ln2[l] = carve (b, &at, M * E);
            a->yatt[l] = carve (b, &at, M * EA);
            a->mean1[l] = carve (b, &at, M);
            a->rstd1[l] = carve (b, &at, M);
            a->mean2[l] = carve (b, &at, M);
            a->rstd2[l] = carve (b, &at, M);
            a->qkv[l] = carve (b, &at, M * 3 * EA);
            a->att[l] = carve (b, &at, att);
            a->u[l] = carve (b, &at, M * F);
            a->g[l] = carve (b, &at, M * F);
        }
        a->lnf = carve (b, &at, M * E);
        a->meanf = carve (b, &at, M);
        a->rstdf = carve (b, &at, M);
        a->logits = carve (b, &at, M * MODEL_VOCAB);
        a->loss = carve (b, &at, M);
        a->dres = carve (b, &at, M * E);
        a->gin = m->ntf > 1 && !m->pp_last ? carve (b, &at, M * E) : NULL;
        a->dln = carve (b, &at, M * E);
        a->dyatt = carve (b, &at, M * EA);
        a->dqkv = carve (b, &at, M * 3 * EA);
        a->dg = carve (b, &at, M * F);
        a->work = carve (b, &at, att);
        a->tok = (uint8_t *)carve (b, &at, (M + 3) / 4);
        a->tgt = (uint8_t *)carve (b, &at, (M + 3) / 4);
        if (!pass && !(a->block = k->alloc (at)))
            return -1;
    }
    return 0;
}

int tfm_create (struct model *m, struct dt_kern_ops *k, int C, int E, int NH, int L,
                int mb, uint64_t seed)
{
    return tfm_create_layout (m, k, C, E, NH, L, mb, seed, 1, 0, 1, 0, 0);
}

int tfm_create_attn (struct model *m, struct dt_kern_ops *k, int C, int E, int NH, int L,
                     int mb, uint64_t seed, int flash)
{
    return tfm_create_layout (m, k, C, E, NH, L, mb, seed, 1, 0, 1, 0, flash);
}

int tfm_create_tp (struct model *m, struct dt_kern_ops *k, int C, int E, int NH, int L,
                   int mb, uint64_t seed, int tp, int tpr)
{
    return tfm_create_layout (m, k, C, E, NH, L, mb, seed, tp, tpr, 1, 0, 0);
}

int tfm_create_layout (struct model *m, struct dt_kern_ops *k, int C, int E, int NH,
                       int L, int mb, uint64_t seed, int tp, int tpr, int pp, int ppr,
                       int flash)
{
    memset (m, 0, sizeof (*m));
    m->k = k;
    m->kind = MODEL_TRANSFORMER;
    m->flash = flash;
    if (flash && (!k->attn_flash_fwd || !k->attn_flash_bwd)) {
        snprintf (k->last_error, sizeof (k->last_error),
                  "the %s backend has no flash attention", k->name);
        return -1;
    }
    m->C = C, m->E = E, m->H = NH, m->L = L, m->mb = mb;
    m->tp = tp, m->tpr = tpr;
    if (pp < 1 || L % pp != 0 || ppr < 0 || ppr >= pp)
        pp = 0; /* refused below */
    else {
        m->pp_l0 = L / pp * ppr;
        m->pp_l1 = L / pp * (ppr + 1);
        m->pp_first = ppr == 0;
        m->pp_last = ppr == pp - 1;
        m->blk0 = m->pp_first ? 2 : 0;
    }
    if (!k->layernorm_fwd || !k->layernorm_bwd || !k->attn_fwd || !k->attn_bwd ||
        !k->embed_pos_fwd || !k->embed_pos_bwd) {
        snprintf (k->last_error, sizeof (k->last_error),
                  "the %s backend has no transformer kernels", k->name);
        return -1;
    }
    if (NH < 1 || E % NH != 0 || L < 1 || 2 + TFM_PER_BLOCK * L + 3 > MODEL_MAX_TENSORS ||
        tp < 1 || NH % tp != 0 || tpr < 0 || tpr >= tp || pp < 1) {
        snprintf (k->last_error, sizeof (k->last_error),
                  "width %d, %d heads, %d layers, tp %d, pp %d: not a valid transformer "
                  "shape",
                  E, NH, L, tp, pp);
        return -1;
    }
    layout (m);
    /* Model FLOPs per sample (C tokens), the usual count: 6 per matrix
     * parameter per token, plus attention's q k^T and att v, forward and
     * backward, over the full (unmasked) C x C. */
    double nmat = (double)L * 12 * E * E + (double)E * MODEL_VOCAB;
    m->tokens_per_sample = C;
    m->flops_per_sample = (double)C * (6.0 * nmat + 12.0 * L * C * E);

    float *h = calloc (m->nparams, sizeof (float));
    /* One set of activations per micro-batch in flight: a pipeline stage
     * has at most pp + 1 (trainer/pipeline.c's 1F1B with one micro-batch
     * of slack); none in flight without a pipeline. */
    m->ntf = pp > 1 ? pp + 1 : 1;
    if (!h || !(m->tfs = calloc (m->ntf, sizeof (*m->tfs)))) {
        free (h);
        snprintf (k->last_error, sizeof (k->last_error), "out of host memory");
        return -1;
    }
    init (m, h, seed);
    int rc = -1;
    if ((m->params = k->alloc (m->nparams * 4)) &&
        (m->grads = k->alloc (m->nparams * 4)) &&
        k->upload (m->params, h, m->nparams * 4) == 0) {
        rc = 0;
        for (int i = 0; i < m->ntf && rc == 0; i++)
            rc = alloc_act (m, &m->tfs[i]);
    }
    m->tf = m->tfs;
    free (h);
    return rc;
}

void tfm_destroy (struct model *m)
{
    struct dt_kern_ops *k = m->k;
    k->free (m->params);
    k->free (m->grads);
    for (int i = 0; m->tfs && i < m->ntf; i++) {
        struct tfm_act *a = &m->tfs[i];
        k->free (a->block);
        free (a->res), free (a->mid), free (a->ln1), free (a->ln2), free (a->yatt);
        free (a->mean1), free (a->rstd1), free (a->mean2), free (a->rstd2);
        free (a->qkv), free (a->att), free (a->u), free (a->g);
        free (a->tgt_host), free (a->loss_host);
    }
    free (m->tfs);
    memset (m, 0, sizeof (*m));
}

#define P(i) (m->params + m->t[i].off)
#define G(i) (m->grads + m->t[i].off)

/* Tensor parallelism's all-reduce (Megatron's g in the forward pass, f in
 * the backward): the sum of n floats over the tp group; nothing on one
 * rank.  A device backend syncs first (the hook reads host memory). */
static int tp_sum (struct model *m, float *buf, size_t n)
{
    if (m->tp <= 1)
        return 0;
    if (m->k->sync () < 0)
        return -1;
    return m->tp_allreduce (m->tp_arg, buf, n);
}

/* Start a row-parallel product's output: the residual on tp rank 0 (so
 * that the sum adds it once), zeros on the others. */
static int tp_residual (struct model *m, float *out, const float *res, size_t n)
{
    if (m->tp > 1 && m->tpr != 0)
        return m->k->zero (out, n * 4);
    return m->k->copy (out, res, n * 4);
}

static int forward (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
                    float scale, double *loss_sum)
{
    struct dt_kern_ops *k = m->k;
    struct tfm_act *a = m->tf;
    int C = m->C, E = m->E, L = m->pp_l1 - m->pp_l0, D = E / m->H, M = n * C;
    int T = m->tp > 1 ? m->tp : 1, NH = m->H / T, EA = E / T, F = 4 * E / T;
    int f = BLK (L);

    a->n = n;
    *loss_sum = 0;
    /* Targets: each window shifted by one byte, then the window's target. */
    for (int i = 0; i < n; i++) {
        memcpy (a->tgt_host + (size_t)i * C, ctx + (size_t)i * C + 1, C - 1);
        a->tgt_host[(size_t)i * C + C - 1] = tgt[i];
    }
    /* A later pipeline stage's input, res[0], is the previous stage's
     * output (tfm_stage_buf). */
    if (k->upload (a->tok, ctx, (size_t)M) < 0 ||
        k->upload (a->tgt, a->tgt_host, (size_t)M) < 0 ||
        (m->pp_first &&
         (model_need (m, 2) < 0 ||
          k->embed_pos_fwd (n, C, E, a->tok, P (0), P (1), a->res[0]) < 0)))
        return -1;
    /* model_need: each block's parameters just before the block (zero1
     * may still be gathering the later ones) */
    for (int l = 0; l < L; l++) {
        int b = BLK (l);
        if (model_need (m, b + TFM_PER_BLOCK) < 0 ||
            k->layernorm_fwd (M, E, a->res[l], P (b + LN1G), P (b + LN1B), a->ln1[l],
                              a->mean1[l], a->rstd1[l]) < 0 ||
            k->sgemm (0, 0, M, 3 * EA, E, 1.0f, a->ln1[l], E, P (b + WQKV), 3 * EA, 0.0f,
                      a->qkv[l], 3 * EA) < 0 ||
            k->bias_fwd (M, 3 * EA, a->qkv[l], P (b + BQKV)) < 0 ||
            (m->flash ? k->attn_flash_fwd (n, C, NH, D, a->qkv[l], a->att[l], a->yatt[l])
                      : k->attn_fwd (n, C, NH, D, a->qkv[l], a->att[l], a->yatt[l])) < 0
            /* mid = res + yatt Wo + bo (tp: the sum of the ranks' yatt Wo) */
            || tp_residual (m, a->mid[l], a->res[l], (size_t)M * E) < 0 ||
            k->sgemm (0, 0, M, E, EA, 1.0f, a->yatt[l], EA, P (b + WO), E, 1.0f,
                      a->mid[l], E) < 0 ||
            tp_sum (m, a->mid[l], (size_t)M * E) < 0 ||
            k->bias_fwd (M, E, a->mid[l], P (b + BO)) < 0 ||
            k->layernorm_fwd (M, E, a->mid[l], P (b + LN2G), P (b + LN2B), a->ln2[l],
                              a->mean2[l], a->rstd2[l]) < 0 ||
            k->sgemm (0, 0, M, F, E, 1.0f, a->ln2[l], E, P (b + W1), F, 0.0f, a->u[l],
                      F) < 0 ||
            k->bias_gelu_fwd (M, F, a->u[l], P (b + B1), a->g[l]) < 0
            /* res' = mid + gelu(u) W2 + b2 */
            || tp_residual (m, a->res[l + 1], a->mid[l], (size_t)M * E) < 0 ||
            k->sgemm (0, 0, M, E, F, 1.0f, a->g[l], F, P (b + W2), E, 1.0f, a->res[l + 1],
                      E) < 0 ||
            tp_sum (m, a->res[l + 1], (size_t)M * E) < 0 ||
            k->bias_fwd (M, E, a->res[l + 1], P (b + B2)) < 0)
            return -1;
    }
    if (!m->pp_last)
        return 0;
    if (model_need (m, m->ntensors) < 0 ||
        k->layernorm_fwd (M, E, a->res[L], P (f), P (f + 1), a->lnf, a->meanf, a->rstdf) <
          0 ||
        k->sgemm (0, 0, M, MODEL_VOCAB, E, 1.0f, a->lnf, E, P (f + 2), MODEL_VOCAB, 0.0f,
                  a->logits, MODEL_VOCAB) < 0 ||
        k->softmax_ce (M, MODEL_VOCAB, a->logits, a->tgt, scale / C, a->loss, a->logits) <
          0 ||
        k->download (a->loss_host, a->loss, (size_t)M * 4) < 0)
        return -1;
    double s = 0.0;
    for (int i = 0; i < M; i++)
        s += a->loss_host[i];
    *loss_sum = s / C;
    return 0;
}

int tfm_eval (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
              double *loss_sum)
{
    return forward (m, n, ctx, tgt, 0.0f, loss_sum);
}

static int backward (struct model *m);

int tfm_step (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt, float scale,
              double *loss_sum)
{
    if (forward (m, n, ctx, tgt, scale, loss_sum) < 0)
        return -1;
    return backward (m);
}

/* The backward pass of the forward pass in m->tf.  A stage other than the
 * last starts from the gradient in dres (tfm_stage_buf); one other than
 * the first leaves the gradient of its input there. */
static int backward (struct model *m)
{
    struct dt_kern_ops *k = m->k;
    struct tfm_act *a = m->tf;
    int n = a->n;
    int C = m->C, E = m->E, L = m->pp_l1 - m->pp_l0, D = E / m->H, M = n * C;
    int T = m->tp > 1 ? m->tp : 1, NH = m->H / T, EA = E / T, F = 4 * E / T;
    int f = BLK (L), V = MODEL_VOCAB;

    /* a->logits holds dlogits.  Head, then the final LayerNorm into dres.
     * model_ready follows each group of tensors whose gradients are final
     * (the trainer's buckets are groups of whole tensors), so the
     * reduction of a block's upper tensors starts while its lower ones
     * are still being computed. */
    if (m->pp_last && (k->sgemm (1, 0, E, V, M, 1.0f, a->lnf, E, a->logits, V, 1.0f,
                                 G (f + 2), V) < 0 ||
                       model_ready (m, f + 2) < 0 ||
                       k->sgemm (0, 1, M, E, V, 1.0f, a->logits, V, P (f + 2), V, 0.0f,
                                 a->dln, E) < 0 ||
                       k->zero (a->dres, (size_t)M * E * 4) < 0 ||
                       k->layernorm_bwd (M, E, a->res[L], P (f), a->meanf, a->rstdf,
                                         a->dln, a->dres, G (f), G (f + 1)) < 0 ||
                       model_ready (m, f) < 0))
        return -1;
    for (int l = L - 1; l >= 0; l--) {
        int b = BLK (l);
        /* MLP: res[l+1] = mid + gelu(ln2 W1 + b1) W2 + b2; dres += through ln2
         * (tp: each rank's part of dln, summed) */
        if (k->sgemm (1, 0, F, E, M, 1.0f, a->g[l], F, a->dres, E, 1.0f, G (b + W2), E) <
              0 ||
            k->bias_bwd (M, E, a->dres, G (b + B2)) < 0 || model_ready (m, b + W2) < 0 ||
            k->sgemm (0, 1, M, F, E, 1.0f, a->dres, E, P (b + W2), E, 0.0f, a->dg, F) <
              0 ||
            k->bias_gelu_bwd (M, F, a->u[l], a->dg, a->dg, G (b + B1)) < 0 ||
            k->sgemm (1, 0, E, F, M, 1.0f, a->ln2[l], E, a->dg, F, 1.0f, G (b + W1), F) <
              0 ||
            model_ready (m, b + W1) < 0 ||
            k->sgemm (0, 1, M, E, F, 1.0f, a->dg, F, P (b + W1), F, 0.0f, a->dln, E) <
              0 ||
            tp_sum (m, a->dln, (size_t)M * E) < 0 ||
            k->layernorm_bwd (M, E, a->mid[l], P (b + LN2G), a->mean2[l], a->rstd2[l],
                              a->dln, a->dres, G (b + LN2G), G (b + LN2B)) < 0 ||
            model_ready (m, b + LN2G) < 0)
            return -1;
        /* Attention: mid = res + attn(ln1 Wqkv + bqkv) Wo + bo */
        if (k->sgemm (1, 0, EA, E, M, 1.0f, a->yatt[l], EA, a->dres, E, 1.0f, G (b + WO),
                      E) < 0 ||
            k->bias_bwd (M, E, a->dres, G (b + BO)) < 0 || model_ready (m, b + WO) < 0 ||
            k->sgemm (0, 1, M, EA, E, 1.0f, a->dres, E, P (b + WO), E, 0.0f, a->dyatt,
                      EA) < 0 ||
            (m->flash ? k->attn_flash_bwd (n, C, NH, D, a->qkv[l], a->yatt[l], a->att[l],
                                           a->dyatt, a->dqkv, a->work)
                      : k->attn_bwd (n, C, NH, D, a->qkv[l], a->att[l], a->dyatt, a->dqkv,
                                     a->work)) < 0 ||
            k->sgemm (1, 0, E, 3 * EA, M, 1.0f, a->ln1[l], E, a->dqkv, 3 * EA, 1.0f,
                      G (b + WQKV), 3 * EA) < 0 ||
            k->bias_bwd (M, 3 * EA, a->dqkv, G (b + BQKV)) < 0 ||
            model_ready (m, b + WQKV) < 0 ||
            k->sgemm (0, 1, M, E, 3 * EA, 1.0f, a->dqkv, 3 * EA, P (b + WQKV), 3 * EA,
                      0.0f, a->dln, E) < 0 ||
            tp_sum (m, a->dln, (size_t)M * E) < 0 ||
            k->layernorm_bwd (M, E, a->res[l], P (b + LN1G), a->mean1[l], a->rstd1[l],
                              a->dln, a->dres, G (b + LN1G), G (b + LN1B)) < 0 ||
            model_ready (m, b) < 0)
            return -1;
    }
    if (m->pp_first && k->embed_pos_bwd (n, C, E, a->tok, a->dres, G (0), G (1)) < 0)
        return -1;
    return model_ready (m, 0);
}

int tfm_stage_forward (struct model *m, int set, int n, const uint8_t *ctx,
                       const uint8_t *tgt, float scale, double *loss_sum)
{
    m->tf = &m->tfs[set];
    return forward (m, n, ctx, tgt, scale, loss_sum);
}

int tfm_stage_backward (struct model *m, int set)
{
    m->tf = &m->tfs[set];
    return backward (m);
}

float *tfm_stage_buf (struct model *m, int set, enum tfm_stage_buf which)
{
    struct tfm_act *a = &m->tfs[set];
    return which == TFM_STAGE_IN    ? a->res[0]
           : which == TFM_STAGE_OUT ? a->res[m->pp_l1 - m->pp_l0]
           : which == TFM_STAGE_GIN ? a->gin
                                    : a->dres;
}
