/* cpu_tfm.c: the CPU backend's transformer kernels - LayerNorm, causal attention,
 * embeddings.
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

#include "kernels/cpu_exp.h"
#include "kernels/cpu_tfm.h"
#include "kernels/kernels.h"

#pragma GCC optimize("O3")
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__ ((target_clones ("avx512f", "avx2,fma", "default")))
#else
#define HOT
#endif

/* Row sums with 16 partial sums in a fixed order: they vectorise (a
 * plain float reduction does not, without -ffast-math) and stay
 * deterministic. */
#define NPART 16
static inline float tree16 (const float *p)
{
    float a[8];
    for (int k = 0; k < 8; k++)
        a[k] = p[k] + p[k + 8];
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

HOT int cpu_layernorm_fwd (int M, int N, const float *x, const float *g, const float *b,
                           float *y, float *mean, float *rstd)
{
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * N;
        float *yr = y + (size_t)i * N;
        float p[NPART] = { 0 }, q[NPART] = { 0 };
        int j = 0;
        for (; j + NPART <= N; j += NPART)
            for (int k = 0; k < NPART; k++)
                p[k] += xr[j + k];
        for (int k = 0; j + k < N; k++)
            p[k] += xr[j + k];
        float m = tree16 (p) / N;
        for (j = 0; j + NPART <= N; j += NPART)
            for (int k = 0; k < NPART; k++)
                q[k] += (xr[j + k] - m) * (xr[j + k] - m);
        for (int k = 0; j + k < N; k++)
            q[k] += (xr[j + k] - m) * (xr[j + k] - m);
        float r = 1.0f / sqrtf (tree16 (q) / N + DT_LN_EPS);
        mean[i] = m;
        rstd[i] = r;
        for (j = 0; j < N; j++)
            yr[j] = (xr[j] - m) * r * g[j] + b[j];
    }
    return 0;
}

/* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g. */
HOT int cpu_layernorm_bwd (int M, int N, const float *x, const float *g,
                           const float *mean, const float *rstd, const float *dy,
                           float *dx, float *dg, float *db)
{
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * N, *dyr = dy + (size_t)i * N;
        float *dxr = dx + (size_t)i * N;
        float m = mean[i], r = rstd[i];
        float p1[NPART] = { 0 }, p2[NPART] = { 0 };
        int j = 0;
        for (; j + NPART <= N; j += NPART)
            for (int k = 0; k < NPART; k++) {
                float xh = (xr[j + k] - m) * r, dxh = dyr[j + k] * g[j + k];
                p1[k] += dxh;
                p2[k] += dxh * xh;
            }
        for (int k = 0; j + k < N; k++) {
            float xh = (xr[j + k] - m) * r, dxh = dyr[j + k] * g[j + k];
            p1[k] += dxh;
            p2[k] += dxh * xh;
        }
        float a = tree16 (p1) / N, c = tree16 (p2) / N;
        /* Separate loops over distinct arrays: each vectorises. */
        float *restrict dgr = dg, *restrict dbr = db, *restrict dxo = dxr;
        for (j = 0; j < N; j++)
            dgr[j] += dyr[j] * ((xr[j] - m) * r);
        for (j = 0; j < N; j++)
            dbr[j] += dyr[j];
        for (j = 0; j < N; j++)
            dxo[j] += r * (dyr[j] * g[j] - a - (xr[j] - m) * r * c);
    }
    return 0;
}

HOT int cpu_embed_pos_fwd (int B, int T, int E, const uint8_t *tok, const float *wte,
                           const float *wpe, float *x)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *te = wte + (size_t)tok[(size_t)b * T + t] * E,
                        *pe = wpe + (size_t)t * E;
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
            float *te = dwte + (size_t)tok[(size_t)b * T + t] * E,
                  *pe = dwpe + (size_t)t * E;
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
 * past i become exactly 0.  The sum in 16 fixed partial sums (vectorised,
 * deterministic). */
HOT static void masked_softmax (int T, float *S)
{
    for (int i = 0; i < T; i++) {
        float *row = S + (size_t)i * T;
        int n = i + 1, j = 0;
        float pm[NPART], mx = row[0];
        for (int k = 0; k < NPART; k++)
            pm[k] = row[0];
        for (; j + NPART <= n; j += NPART)
            for (int k = 0; k < NPART; k++)
                pm[k] = row[j + k] > pm[k] ? row[j + k] : pm[k];
        for (int k = 0; k < NPART; k++)
            mx = pm[k] > mx ? pm[k] : mx;
        for (; j < n; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (j = 0; j < n; j++)
            row[j] = dt_fast_exp (row[j] - mx);
        float p[NPART] = { 0 };
        for (j = 0; j + NPART <= n; j += NPART)
            for (int k = 0; k < NPART; k++)
                p[k] += row[j + k];
        for (int k = 0; j + k < n; k++)
            p[k] += row[j + k];
        float inv = 1.0f / tree16 (p);
        for (j = 0; j < n; j++)
            row[j] *= inv;
        for (j = n; j < T; j++)
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
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q, E3,
                         k, E3, 0.0f, S, T);
            masked_softmax (T, S);
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, S, T,
                         v, E3, 0.0f, o, E);
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
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, dO, E, v,
                         E3, 0.0f, dS, T);
            cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, P, T, dO,
                         E, 0.0f, dv, E3);
            softmax_bwd (T, P, dS);
            /* dq = scale dS k; dk = scale dS^T q */
            cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, scale, dS, T,
                         k, E3, 0.0f, dq, E3);
            cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, scale, dS, T,
                         q, E3, 0.0f, dk, E3);
        }
    return 0;
}
