/* cpu_tfm.h: the CPU backend's transformer kernels (kernels/cpu_tfm.c), for
 * cpu.c's table of operations.  Contracts in kernels/kernels.h. */
#ifndef DT_KERNELS_CPU_TFM_H
#define DT_KERNELS_CPU_TFM_H

#include <stdint.h>

int cpu_layernorm_fwd (int M, int N, const float *x, const float *g, const float *b,
                       float *y, float *mean, float *rstd);
int cpu_layernorm_bwd (int M, int N, const float *x, const float *g, const float *mean,
                       const float *rstd, const float *dy, float *dx, float *dg,
                       float *db);
int cpu_embed_pos_fwd (int B, int T, int E, const uint8_t *tok, const float *wte,
                       const float *wpe, float *x);
int cpu_embed_pos_bwd (int B, int T, int E, const uint8_t *tok, const float *dx,
                       float *dwte, float *dwpe);
int cpu_attn_fwd (int B, int T, int NH, int D, const float *qkv, float *att, float *out);
int cpu_attn_bwd (int B, int T, int NH, int D, const float *qkv, const float *att,
                  const float *dout, float *dqkv, float *work);

#endif
