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
void tfm_destroy (struct model *m);

/* As model_step / model_eval: loss_sum is the sum over the n samples of
 * each sample's mean loss over its C positions (nats). */
int tfm_step (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt, float scale,
              double *loss_sum);
int tfm_eval (struct model *m, int n, const uint8_t *ctx, const uint8_t *tgt,
              double *loss_sum);

#endif
