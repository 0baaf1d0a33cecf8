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
#include <float.h>
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

/* 16 floats as one value (GCC's vector extension): each clone compiles it
 * to its widest registers.  Loads and stores through memcpy, unaligned;
 * macros, not functions (a vector argument's ABI differs between clones). */
typedef float v16 __attribute__ ((vector_size (64)));
#define ld16(p)                                                                          \
    (__extension__({                                                                     \
        v16 v_;                                                                          \
        memcpy (&v_, (p), sizeof (v_));                                                  \
        v_;                                                                              \
    }))
#define st16(p, v)                                                                       \
    do {                                                                                 \
        v16 w_ = (v);                                                                    \
        memcpy ((p), &w_, sizeof (w_));                                                  \
    } while (0)

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

/* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g.
 * Whole 16-float chunks through GCC's vector extension (the plain loops
 * were auto-vectorised across the partial sums with permutes, 6x slower
 * than the forward pass); 16 partial sums in a fixed order. */
HOT int cpu_layernorm_bwd (int M, int N, const float *x, const float *g,
                           const float *mean, const float *rstd, const float *dy,
                           float *dx, float *dg, float *db)
{
    int N16 = N / NPART * NPART;
    for (int i = 0; i < M; i++) {
        const float *xr = x + (size_t)i * N, *dyr = dy + (size_t)i * N;
        float *dxr = dx + (size_t)i * N;
        float m = mean[i], r = rstd[i];
        v16 s1 = { 0 }, s2 = { 0 };
        for (int j = 0; j < N16; j += NPART) {
            v16 xh = (ld16 (xr + j) - m) * r, dxh = ld16 (dyr + j) * ld16 (g + j);
            s1 += dxh;
            s2 += dxh * xh;
        }
        float p1[NPART], p2[NPART];
        st16 (p1, s1);
        st16 (p2, s2);
        for (int k = 0; N16 + k < N; k++) {
            int j = N16 + k;
            float xh = (xr[j] - m) * r, dxh = dyr[j] * g[j];
            p1[k] += dxh;
            p2[k] += dxh * xh;
        }
        float a = tree16 (p1) / N, c = tree16 (p2) / N;
        for (int j = 0; j < N16; j += NPART) {
            v16 dyv = ld16 (dyr + j), xh = (ld16 (xr + j) - m) * r;
            st16 (dg + j, ld16 (dg + j) + dyv * xh);
            st16 (db + j, ld16 (db + j) + dyv);
            st16 (dxr + j, ld16 (dxr + j) + r * (dyv * ld16 (g + j) - a - xh * c));
        }
        for (int j = N16; j < N; j++) {
            float xh = (xr[j] - m) * r;
            dg[j] += dyr[j] * xh;
            db[j] += dyr[j];
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
 * past i become exactly 0.  Maximum and sum in 16 fixed partials
 * (vectorised, deterministic).  With T a multiple of 16 the row is walked
 * in whole 16-column chunks, the columns past i masked (-FLT_MAX for the
 * maximum, 0 for the sum): no scalar tail loops, which dominated the short
 * rows; the partials see the same values in the same order, plus zeros. */
HOT static void masked_softmax (int T, float *S)
{
    for (int i = 0; i < T; i++) {
        float *row = S + (size_t)i * T;
        int n = i + 1, j = 0;
        float pm[NPART], mx = row[0], p[NPART] = { 0 };
        for (int k = 0; k < NPART; k++)
            pm[k] = row[0];
        if (T % NPART == 0) {
            for (; j < n; j += NPART)
                for (int k = 0; k < NPART; k++) {
                    float v = j + k < n ? row[j + k] : -FLT_MAX;
                    pm[k] = v > pm[k] ? v : pm[k];
                }
            for (int k = 0; k < NPART; k++)
                mx = pm[k] > mx ? pm[k] : mx;
            for (j = 0; j < n; j += NPART)
                for (int k = 0; k < NPART; k++) {
                    float e = j + k < n ? dt_fast_exp (row[j + k] - mx) : 0.0f;
                    row[j + k] = e;
                    p[k] += e;
                }
        }
        else {
            for (; j + NPART <= n; j += NPART)
                for (int k = 0; k < NPART; k++)
                    pm[k] = row[j + k] > pm[k] ? row[j + k] : pm[k];
            for (int k = 0; k < NPART; k++)
                mx = pm[k] > mx ? pm[k] : mx;
            for (; j < n; j++)
                mx = row[j] > mx ? row[j] : mx;
            for (j = 0; j < n; j++)
                row[j] = dt_fast_exp (row[j] - mx);
            for (j = 0; j + NPART <= n; j += NPART)
                for (int k = 0; k < NPART; k++)
                    p[k] += row[j + k];
            for (int k = 0; j + k < n; k++)
                p[k] += row[j + k];
        }
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

/* dS = P .* (dP - rowsum(P .* dP)) on the causal part, 0 above it (where
 * P is exactly 0).  With T a multiple of 16, whole 16-column chunks: the
 * row sum over the chunks that reach column i (P's zeros past i add
 * nothing) in 16 fixed partials, then one pass over the full row. */
HOT static void softmax_bwd (int T, const float *P, float *dP)
{
    for (int i = 0; i < T; i++) {
        const float *p = P + (size_t)i * T;
        float *d = dP + (size_t)i * T;
        if (T % NPART == 0) {
            float ps[NPART] = { 0 };
            for (int j = 0; j <= i; j += NPART)
                for (int k = 0; k < NPART; k++)
                    ps[k] += p[j + k] * d[j + k];
            float s = tree16 (ps);
            for (int j = 0; j <= i; j++)
                d[j] = p[j] * (d[j] - s);
            for (int j = i + 1; j < T; j++)
                d[j] = 0.0f;
            continue;
        }
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
