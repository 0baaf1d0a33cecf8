/* model.c: the byte-level language model - layout, initialisation, forward, backward. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/opts.h"
#include "trainer/transformer.h"

void model_add_tensor (struct model *m, const char *name, int decay, int64_t d0,
                       int64_t d1)
{
    struct model_tensor *t = &m->t[m->ntensors++];
    snprintf (t->name, sizeof (t->name), "%s", name);
    t->off = m->nparams;
    t->goff = m->nparams;
    t->vdim = 0;
    t->count = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->decay = decay;
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    m->nparams += t->count;
}

/* Uniform in [-a, a) from the counter-based hash. */
static float uniform (uint64_t seed, size_t i, float a)
{
    uint64_t h = data_hash (data_hash (seed ^ 0x5eedULL) + i);
    double u = (h >> 11) * (1.0 / 9007199254740992.0);
    return (float)((2.0 * u - 1.0) * a);
}

int model_create (struct model *m, struct dt_kern_ops *k, int C, int E, int H, int L,
                  int mb, uint64_t seed)
{
    char name[24];
    size_t in = (size_t)C * E;

    memset (m, 0, sizeof (*m));
    m->k = k;
    m->C = C, m->E = E, m->H = H, m->L = L, m->mb = mb;
    model_add_tensor (m, "embed", 0, MODEL_VOCAB, E);
    for (int l = 0; l < L; l++) {
        snprintf (name, sizeof (name), "w%d", l);
        model_add_tensor (m, name, 1, l == 0 ? (int64_t)in : H, H);
        snprintf (name, sizeof (name), "b%d", l);
        model_add_tensor (m, name, 0, H, 0);
    }
    model_add_tensor (m, "w_out", 1, H, MODEL_VOCAB);
    model_add_tensor (m, "b_out", 0, MODEL_VOCAB, 0);
    m->tokens_per_sample = 1;
    m->flops_per_sample =
      6.0 * ((double)in * H + (double)(L - 1) * H * H + (double)H * MODEL_VOCAB);

    /* Init on the host: variance 1/fan_in for matrices (uniform), small
     * output layer, unit-scale embeddings; biases zero. */
    float *h = calloc (m->nparams, sizeof (float));
    if (!h)
        return -1;
    for (int i = 0; i < m->ntensors; i++) {
        struct model_tensor *t = &m->t[i];
        float a;
        if (i == 0)
            a = 1.0f;
        else if (!t->decay)
            continue;
        else {
            size_t fan_in = t->count / (i == m->ntensors - 2 ? MODEL_VOCAB : (size_t)H);
            a = sqrtf (3.0f / (float)fan_in);
            if (i == m->ntensors - 2)
                a *= 0.5f;
        }
        for (size_t j = 0; j < t->count; j++)
            h[t->off + j] = uniform (seed, t->off + j, a);
    }
    size_t maxw = in > (size_t)H ? in : (size_t)H;
    if (!(m->params = k->alloc (m->nparams * 4)) ||
        !(m->grads = k->alloc (m->nparams * 4)) ||
        k->upload (m->params, h, m->nparams * 4) < 0 ||
        !(m->tok = k->alloc ((size_t)mb * C)) || !(m->tgt = k->alloc (mb)) ||
        !(m->x0 = k->alloc ((size_t)mb * in * 4)) ||
        !(m->u = calloc (L, sizeof (float *))) ||
        !(m->y = calloc (L, sizeof (float *))) ||
        !(m->logits = k->alloc ((size_t)mb * MODEL_VOCAB * 4)) ||
        !(m->d1 = k->alloc ((size_t)mb * maxw * 4)) ||
        !(m->d2 = k->alloc ((size_t)mb * maxw * 4)) ||
        !(m->loss = k->alloc ((size_t)mb * 4)) ||
        !(m->loss_host = calloc (mb, sizeof (float)))) {
        free (h);
        return -1;
    }
    free (h);
    for (int l = 0; l < L; l++)
        if (!(m->u[l] = k->alloc ((size_t)mb * H * 4)) ||
            !(m->y[l] = k->alloc ((size_t)mb * H * 4)))
            return -1;
    return 0;
}

int model_create_opts (struct model *m, struct dt_kern_ops *k, const struct train_opts *o,
                       int mb)
{
    int rc;
    k->last_error[0] = '\0';
    /* auto: flash where the backend has it and the heads fit it */
    int flash = o->attention == ATTN_FLASH ||
                (o->attention == ATTN_AUTO && k->attn_flash_fwd && k->attn_flash_bwd &&
                 o->width / o->heads <= DT_ATTN_FLASH_MAX_D);
    if (o->model == MODEL_TRANSFORMER)
        /* tp is innermost in the rank order (trainer/layout.h) */
        rc = tfm_create_layout (
          m, k, o->context, o->width, o->heads, o->layers, mb, o->seed,
          o->tp > 1 ? o->tp : 1, o->tp > 1 ? o->rank % o->tp : 0, o->pp > 1 ? o->pp : 1,
          o->pp > 1 ? (o->rank / (o->tp > 1 ? o->tp : 1)) % o->pp : 0, flash);
    else
        rc = model_create (m, k, o->context, o->embed, o->hidden, o->layers, mb, o->seed);
    if (rc < 0 && !k->last_error[0])
        snprintf (k->last_error, sizeof (k->last_error), "out of %s memory", k->name);
    return rc;
}

void model_destroy (struct model *m)
{
    struct dt_kern_ops *k = m->k;
    if (!k)
        return;
    if (m->kind == MODEL_TRANSFORMER) {
        tfm_destroy (m);
        return;
    }
    k->free (m->params);
    k->free (m->grads);
    k->free (m->tok);
    k->free (m->tgt);
    k->free (m->x0);
    for (int l = 0; l < m->L; l++) {
        if (m->u)
            k->free (m->u[l]);
        if (m->y)
            k->free (m->y[l]);
    }
    free (m->u);
    free (m->y);
    k->free (m->logits);
    k->free (m->d1);
    k->free (m->d2);
    k->free (m->loss);
    free (m->loss_host);
    memset (m, 0, sizeof (*m));
}

#define P(i) (m->params + m->t[i].off)
#define G(i) (m->grads + m->t[i].off)

static int forward (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
                    float scale, double *loss_sum)
{
    struct dt_kern_ops *k = m->k;
    int C = m->C, E = m->E, H = m->H, L = m->L;
    int in = C * E;
    int o = 1 + 2 * L; /* index of w_out */

    if (model_need (m, m->ntensors) < 0 || k->upload (m->tok, ctx, (size_t)n * C) < 0 ||
        k->upload (m->tgt, tgt, n) < 0 ||
        k->embed_fwd (n, C, E, m->tok, P (0), m->x0) < 0)
        return -1;
    const float *x = m->x0;
    int xw = in;
    for (int l = 0; l < L; l++) {
        if (k->sgemm (0, 0, n, H, xw, 1.0f, x, xw, P (1 + 2 * l), H, 0.0f, m->u[l], H) <
              0 ||
            k->bias_gelu_fwd (n, H, m->u[l], P (2 + 2 * l), m->y[l]) < 0)
            return -1;
        x = m->y[l];
        xw = H;
    }
    if (k->sgemm (0, 0, n, MODEL_VOCAB, H, 1.0f, x, H, P (o), MODEL_VOCAB, 0.0f,
                  m->logits, MODEL_VOCAB) < 0 ||
        k->bias_fwd (n, MODEL_VOCAB, m->logits, P (o + 1)) < 0 ||
        k->softmax_ce (n, MODEL_VOCAB, m->logits, m->tgt, scale, m->loss, m->logits) <
          0 ||
        k->download (m->loss_host, m->loss, (size_t)n * 4) < 0)
        return -1;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += m->loss_host[i];
    *loss_sum = s;
    return 0;
}

int model_eval (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
                double *loss_sum)
{
    if (m->kind == MODEL_TRANSFORMER)
        return tfm_eval (m, n, ctx, tgt, loss_sum);
    return forward (m, n, ctx, tgt, 0.0f, loss_sum);
}

void model_set_ready_cb (struct model *m, model_ready_f cb, void *arg)
{
    m->ready_cb = cb;
    m->ready_arg = arg;
}

int model_ready (struct model *m, int i)
{
    if (!m->ready_cb)
        return 0;
    if (m->k->sync () < 0)
        return -1;
    m->ready_cb (m->ready_arg, m->t[i].off);
    return 0;
}

void model_set_need_cb (struct model *m, model_need_f cb, void *arg)
{
    m->need_cb = cb;
    m->need_arg = arg;
}

int model_need (struct model *m, int i)
{
    if (!m->need_cb)
        return 0;
    return m->need_cb (m->need_arg, i < m->ntensors ? m->t[i].off : m->nparams);
}

int model_step (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
                float scale, double *loss_sum)
{
    struct dt_kern_ops *k = m->k;
    int C = m->C, E = m->E, H = m->H, L = m->L;
    int in = C * E;
    int o = 1 + 2 * L;

    if (m->kind == MODEL_TRANSFORMER)
        return tfm_step (m, n, ctx, tgt, scale, loss_sum);
    if (forward (m, n, ctx, tgt, scale, loss_sum) < 0)
        return -1;
    /* m->logits now holds dlogits. */
    const float *xl = L > 0 ? m->y[L - 1] : m->x0;
    if (k->sgemm (1, 0, H, MODEL_VOCAB, n, 1.0f, xl, H, m->logits, MODEL_VOCAB, 1.0f,
                  G (o), MODEL_VOCAB) < 0 ||
        k->bias_bwd (n, MODEL_VOCAB, m->logits, G (o + 1)) < 0 ||
        k->sgemm (0, 1, n, H, MODEL_VOCAB, 1.0f, m->logits, MODEL_VOCAB, P (o),
                  MODEL_VOCAB, 0.0f, m->d1, H) < 0 ||
        model_ready (m, o) < 0)
        return -1;
    float *dy = m->d1, *dx = m->d2;
    for (int l = L - 1; l >= 0; l--) {
        const float *xin = l > 0 ? m->y[l - 1] : m->x0;
        int xw = l > 0 ? H : in;
        /* du overwrites dy in place */
        if (k->bias_gelu_bwd (n, H, m->u[l], dy, dy, G (2 + 2 * l)) < 0 ||
            k->sgemm (1, 0, xw, H, n, 1.0f, xin, xw, dy, H, 1.0f, G (1 + 2 * l), H) < 0 ||
            k->sgemm (0, 1, n, xw, H, 1.0f, dy, H, P (1 + 2 * l), H, 0.0f, dx, xw) < 0 ||
            model_ready (m, 1 + 2 * l) < 0)
            return -1;
        float *t = dy;
        dy = dx;
        dx = t;
    }
    /* dy is d x0 */
    if (k->embed_bwd (n, C, E, m->tok, dy, G (0)) < 0)
        return -1;
    return model_ready (m, 0);
}
