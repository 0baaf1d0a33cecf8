/* model.h: the byte-level language models - layout of the flat parameter vector, forward,
 * backward.
 *
 * Two models share this interface (--model): the fixed-window MLP
 * (model.c: embedding, then W_l, b_l per hidden layer, then W_out, b_out)
 * and the decoder-only transformer (transformer.c).  Parameters live in
 * one flat float vector in a fixed order, so that buckets, ZeRO-1 shards,
 * checkpoints and params_crc32c are all slices of it; the tensor table
 * (name, offset, shape) names every piece of it. */
#ifndef DT_TRAINER_MODEL_H
#define DT_TRAINER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define MODEL_VOCAB 256
/* The transformer: 2 embeddings + 12 tensors per block (at most 256) + 3. */
#define MODEL_MAX_TENSORS (12 * 256 + 8)

enum model_kind { MODEL_MLP = 0, MODEL_TRANSFORMER = 1 };

struct train_opts;
struct tfm_act;

/* Called during the backward pass when every gradient at flat offset >= off
 * is final for this micro-batch (so the trainer can start reducing it). */
typedef void (*model_ready_f) (void *arg, size_t off);
/* Called by the forward pass before it reads the parameters below flat
 * offset off (the trainer may still be gathering them); 0, or -1 with
 * the error in k->last_error. */
typedef int (*model_need_f) (void *arg, size_t off);

struct model_tensor {
    char name[24];
    size_t off, count;
    int decay;        /* weight decay applies (matrices) */
    int ndim;         /* 1 or 2 */
    int64_t shape[2]; /* row-major [in, out] for matrices */
    /* The slice a rank holds under tensor parallelism (trainer/layout.h):
     * the block boff .. boff + bext of the tensor seen as the row-major
     * view vshape[0..vdim), stored row-major; count is the block's size.
     * vdim 0: the whole tensor.  goff: the tensor's offset in the
     * one-rank layout. */
    int vdim;
    int64_t vshape[3], boff[3], bext[3];
    size_t goff;
    int replica; /* a replicated tensor on a tp rank other than 0: another
                  * rank's copy is the one that counts (gradient norm,
                  * checkpoints) */
};

struct model {
    struct dt_kern_ops *k;
    enum model_kind kind;
    int C, E, H, L, mb; /* mb: largest micro-batch; transformer: E
                         * width, H heads, L blocks, C context */
    struct tfm_act *tf; /* the transformer's activations */
    int flash;          /* transformer: attention by k->attn_flash_* */
    size_t nparams;
    int ntensors;
    struct model_tensor t[MODEL_MAX_TENSORS];
    float *params, *grads; /* backend memory, nparams each */
    /* activations for one micro-batch (backend memory) */
    uint8_t *tok, *tgt;
    float *x0, **u, **y, *logits, *d1, *d2, *loss;
    float *loss_host;
    double flops_per_sample; /* forward + backward GEMM flops */
    int tokens_per_sample;   /* predictions per sample: 1 (mlp), C (transformer) */
    model_ready_f ready_cb;
    void *ready_arg;
    model_need_f need_cb;
    void *need_arg;
    /* Tensor parallelism (trainer/layout.h): this rank is tpr of tp; the
     * sum over the tp group of n floats in place (0, or -1 with the error
     * in k->last_error).  tp 0 or 1: none. */
    int tp, tpr;
    int (*tp_allreduce) (void *arg, float *buf, size_t n);
    void *tp_arg;
    /* Pipeline parallelism (trainer/layout.h): this stage holds blocks
     * pp_l0 .. pp_l1 - 1, the embeddings when pp_first, the final
     * LayerNorm and head when pp_last; its tensors' indices start at blk0
     * for block pp_l0.  ntf activation sets (micro-batches in flight). */
    int pp_l0, pp_l1, pp_first, pp_last, blk0;
    struct tfm_act *tfs;
    int ntf;
};

/* Lay out and allocate; parameters initialised from seed (pure function of
 * seed and index: every rank gets the same bits).  0 or -1. */
int model_create (struct model *m, struct dt_kern_ops *k, int C, int E, int H, int L,
                  int mb, uint64_t seed);
void model_destroy (struct model *m);

/* The model the options name (--model, and its sizes): model_create or
 * tfm_create.  0 or -1 (out of memory, or a backend without the kernels:
 * k->last_error says which). */
int model_create_opts (struct model *m, struct dt_kern_ops *k, const struct train_opts *o,
                       int mb);

/* Append a tensor to the layout (for the model files). */
void model_add_tensor (struct model *m, const char *name, int decay, int64_t d0,
                       int64_t d1);

/* Forward + backward on n <= mb windows (host ctx[n*C], tgt[n]); gradients
 * accumulate into m->grads with scale (1 / global batch).  *loss_sum gets
 * the sum of the n losses (nats), summed in order in double. */
int model_step (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
                float scale, double *loss_sum);

/* Set (or clear, cb NULL) the backward-progress callback. */
void model_set_ready_cb (struct model *m, model_ready_f cb, void *arg);

/* Gradients from tensor i on are final: tell the trainer (after the queued
 * kernels are done, for a device backend).  0 or -1. */
int model_ready (struct model *m, int i);

/* Set (or clear, cb NULL) the parameters-needed callback. */
void model_set_need_cb (struct model *m, model_need_f cb, void *arg);

/* The forward pass is about to read the parameters of tensors 0 .. i - 1
 * (i = ntensors: all): wait for them if the trainer says so.  0 or -1. */
int model_need (struct model *m, int i);

/* Forward only (validation). */
int model_eval (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
                double *loss_sum);

#endif
