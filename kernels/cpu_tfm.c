/* cpu_tfm.c: the CPU backend's transformer kernels - LayerNorm, causal attention, embeddings.
 *
 * Attention is a loop over (sample, head) of OpenBLAS GEMMs on strided
 * views of the packed q|k|v rows (OpenBLAS 0.3.21 has no batched GEMM),
 * with a numerically stable masked softmax between them.  Every loop runs
 * in a fixed order, so results are bit-identical from run to run.
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu_tfm.h"
#include "kernels/kernels.h"

#pragma GCC optimize ("O3")
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__ ((target_clones ("avx512f", "avx2,fma", "default")))
#else
#define HOT
#endif

/* Row statistics in double: E is at most a few thousand, and the mean and
 * variance then do not depend on the vector width of the clone. */
HOT int cpu_layernorm_fwd (int M, int N, const float *x, const float *g, const float *b,
                           float *y, float *mean, float *rstd)
{
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * N;
        float *yr = y + (size_t)i * N;
        double s = 0, v = 0;
        for (int j = 0; j < N; j++)
            s += xr[j];
        double mu = s / N;
        for (int j = 0; j < N; j++)
            v += (xr[j] - mu) * (xr[j] - mu);
        float m = (float)mu;
        float r = (float)(1.0 / sqrt (v / N + DT_LN_EPS));
        mean[i] = m;
        rstd[i] = r;
        for (int j = 0; j < N; j++)
            yr[j] = (xr[j] - m) * r * g[j] + b[j];
    }
    return 0;
}

/* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g. */
HOT int cpu_layernorm_bwd (int M, int N, const float *x, const float *g, const float *mean,
                           const float *rstd, const float *dy, float *dx, float *dg, float *db)
{
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * N, *dyr = dy + (size_t)i * N;
        float *dxr = dx + (size_t)i * N;
        float m = mean[i], r = rstd[i];
        double s1 = 0, s2 = 0;
        for (int j = 0; j < N; j++) {
            float xh = (xr[j] - m) * r;
            float dxh = dyr[j] * g[j];
            s1 += dxh;
            s2 += (double)dxh * xh;
            dg[j] += dyr[j] * xh;
            db[j] += dyr[j];
        }
        float a = (float)(s1 / N), c = (float)(s2 / N);
        for (int j = 0; j < N; j++) {
            float xh = (xr[j] - m) * r;
            dxr[j] += r * (dyr[j] * g[j] - a - xh * c);
        }
    }
    return 0;
}

HOT int cpu_embed_pos_fwd (int B, int T, int E, const uint8_t *tok, const float *wte,
                           const float *wpe, float *x)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *te = wte + (size_t)tok[(size_t)b * T + t] * E, *pe = wpe + (size_t)t * E;
            float *xr = x + ((size_t)b * T + t) * E;
            for (int e = 0; e < E; e++)
                xr[e] = te[e] + pe[e];
        }
    return 0;
}

HOT int cpu_embed_pos_bwd (int B, int T, int E, const uint8_t *tok, const float *dx,
                           float *dwte, float *dwpe)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *te = dwte + (size_t)tok[(size_t)b * T + t] * E, *pe = dwpe + (size_t)t * E;
            const float *d = dx + ((size_t)b * T + t) * E;
            for (int e = 0; e < E; e++) {
                te[e] += d[e];
                pe[e] += d[e];
            }
        }
    return 0;
}

/* Row i of the causal softmax: columns 0..i hold the scores (already
 * scaled); the maximum is subtracted before exp, so no overflow; columns
 * past i become exactly 0. */
HOT static void masked_softmax (int T, float *S)
{
    for (int i = 0; i < T; i++) {
        float *row = S + (size_t)i * T;
        float mx = row[0];
        for (int j = 1; j <= i; j++)
            if (row[j] > mx)
                mx = row[j];
        float sum = 0.0f;
        for (int j = 0; j <= i; j++) {
            row[j] = expf (row[j] - mx);
            sum += row[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j <= i; j++)
            row[j] *= inv;
        for (int j = i + 1; j < T; j++)
            row[j] = 0.0f;
    }
}

int cpu_attn_fwd (int B, int T, int NH, int D, const float *qkv, float *att, float *out)
{
    int E = NH * D, E3 = 3 * E;
    float scale = 1.0f / sqrtf ((float)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * E3 + (size_t)h * D;
            const float *k = q + E, *v = q + 2 * E;
            float *S = att + ((size_t)b * NH + h) * T * T;
            float *o = out + (size_t)b * T * E + (size_t)h * D;
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q, E3, k, E3,
                         0.0f, S, T);
            masked_softmax (T, S);
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, S, T, v, E3,
                         0.0f, o, E);
        }
    return 0;
}

/* dS = P .* (dP - rowsum(P .* dP)) on the causal part, 0 above it. */
HOT static void softmax_bwd (int T, const float *P, float *dP)
{
    for (int i = 0; i < T; i++) {
        const float *p = P + (size_t)i * T;
        float *d = dP + (size_t)i * T;
        float s = 0.0f;
        for (int j = 0; j <= i; j++)
            s += p[j] * d[j];
        for (int j = 0; j <= i; j++)
            d[j] = p[j] * (d[j] - s);
        for (int j = i + 1; j < T; j++)
            d[j] = 0.0f;
    }
}

int cpu_attn_bwd (int B, int T, int NH, int D, const float *qkv, const float *att,
                  const float *dout, float *dqkv, float *work)
{
    int E = NH * D, E3 = 3 * E;
    float scale = 1.0f / sqrtf ((float)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)b * T * E3 + (size_t)h * D;
            const float *q = qkv + qo, *k = q + E, *v = q + 2 * E;
            float *dq = dqkv + qo, *dk = dq + E, *dv = dq + 2 * E;
            const float *P = att + ((size_t)b * NH + h) * T * T;
            float *dS = work + ((size_t)b * NH + h) * T * T;
            const float *dO = dout + (size_t)b * T * E + (size_t)h * D;
            /* dP = dO v^T; dv = P^T dO */
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, dO, E, v, E3,
                         0.0f, dS, T);
            cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, P, T, dO, E,
                         0.0f, dv, E3);
            softmax_bwd (T, P, dS);
            /* dq = scale dS k; dk = scale dS^T q */
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, scale, dS, T, k, E3,
                         0.0f, dq, E3);
            cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, scale, dS, T, q, E3,
                         0.0f, dk, E3);
        }
    return 0;
}
