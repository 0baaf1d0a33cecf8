/* transformer.h: the decoder-only byte transformer behind model.h's interface.
 *
 * GPT-2's block structure over bytes: token and position embeddings;
 * L blocks of pre-LayerNorm causal multi-head self-attention and
 * pre-LayerNorm 4x GELU (tanh form) MLP, each with a residual; a final
 * LayerNorm; an output projection to 256 logits that is NOT tied to the
 * token embedding (no bias); cross-entropy at every position.
 *
 * Flat layout, in this order (matrices row-major [in, out], so y = x W):
 *   wte [256, E], wpe [C, E],
 *   per block l: h<l>.ln1.g [E], h<l>.ln1.b [E], h<l>.attn.wqkv [E, 3E],
 *     h<l>.attn.bqkv [3E], h<l>.attn.wo [E, E], h<l>.attn.bo [E],
 *     h<l>.ln2.g [E], h<l>.ln2.b [E], h<l>.mlp.w1 [E, 4E], h<l>.mlp.b1 [4E],
 *     h<l>.mlp.w2 [4E, E], h<l>.mlp.b2 [E],
 *   lnf.g [E], lnf.b [E], head.w [E, 256].
 * The columns of wqkv are q | k | v, head h at h*D .. h*D+D of each
 * (D = E / heads).  Weight decay applies to the five matrices kinds.
 *
 * A training sample is the window of context + 1 bytes that data.c draws:
 * position j predicts byte j + 1, so each sample gives C predictions; its
 * loss is their mean. */
#ifndef DT_TRAINER_TRANSFORMER_H
#define DT_TRAINER_TRANSFORMER_H

#include <stdint.h>

#include "trainer/model.h"

/* Lay out, initialise from seed (a pure function of seed and index) and
 * allocate activations for mb samples.  E must be a multiple of NH.
 * 0 or -1 (k->last_error set). */
int tfm_create (struct model *m, struct dt_kern_ops *k, int C, int E, int NH, int L,
                int mb, uint64_t seed);
/* As tfm_create; flash = 1: attention by the backend's attn_flash_*
 * kernels (only B * heads * C log-sum-exps kept per block, no score
 * matrix), which must exist. */
int tfm_create_attn (struct model *m, struct dt_kern_ops *k, int C, int E, int NH, int L,
                     int mb, uint64_t seed, int flash);
/* tfm_create for tp rank tpr of tp (trainer/layout.h): this rank's slices
 * of the split tensors, its NH / tp heads; the caller sets
 * m->tp_allreduce before the first step. */
int tfm_create_tp (struct model *m, struct dt_kern_ops *k, int C, int E, int NH, int L,
                   int mb, uint64_t seed, int tp, int tpr);
/* tfm_create_tp for stage ppr of pp as well (blocks L / pp * ppr ...,
 * the embeddings on the first stage, the final LayerNorm and the head on
 * the last), with pp sets of activations (micro-batches in flight), and
 * the attention of tfm_create_attn. */
int tfm_create_layout (struct model *m, struct dt_kern_ops *k, int C, int E, int NH,
                       int L, int mb, uint64_t seed, int tp, int tpr, int pp, int ppr,
                       int flash);
void tfm_destroy (struct model *m);

/* A pipeline stage's passes on activation set 'set' (0 .. pp - 1): the
 * forward pass of n samples (loss_sum: the last stage's, else 0), and the
 * backward pass of that same forward pass.  Between stages the trainer
 * moves TFM_STAGE_OUT of one stage into TFM_STAGE_IN of the next before
 * its forward pass, and TFM_STAGE_DRES (the gradient of a stage's input
 * after its backward pass) into the previous stage's TFM_STAGE_DRES (the
 * gradient of its output) before its backward pass; each is n * context
 * * width floats.  TFM_STAGE_GIN (a stage other than the last, in a
 * pipeline): room to receive the gradient of the output into ahead of
 * the backward pass (the trainer copies it into TFM_STAGE_DRES then, as
 * DRES may still be on its way to the previous stage). */
enum tfm_stage_buf { TFM_STAGE_IN, TFM_STAGE_OUT, TFM_STAGE_DRES, TFM_STAGE_GIN };
int tfm_stage_forward (struct model *m, int set, int n, const uint8_t *ctx,
                       const uint8_t *tgt, float scale, double *loss_sum);
int tfm_stage_backward (struct model *m, int set);
float *tfm_stage_buf (struct model *m, int set, enum tfm_stage_buf which);

/* As model_step / model_eval: loss_sum is the sum over the n samples of
 * each sample's mean loss over its C positions (nats). */
int tfm_step (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt, float scale,
              double *loss_sum);
int tfm_eval (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
              double *loss_sum);

#endif
