/* tfm.cu: the CUDA backend's transformer kernels - LayerNorm, causal attention,
 * embeddings.
 *
 * Attention is the simple path: per head, cuBLAS strided batched GEMMs over
 * the samples on strided views of the packed q|k|v rows, the full
 * [B, heads, C, C] probabilities kept for backward, and a masked softmax
 * of one warp per row.  (A tiled kernel with an online softmax that never
 * stores the scores is the next step for long contexts; this path is its
 * parity reference.)  Reductions are fixed warp trees and in-order loops,
 * no atomics: bit-identical from run to run on one GPU model.
 */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/cuda_internal.h"

#define ROWS_PER_BLOCK 4 /* one warp per row */

__device__ static float warp_sum (float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max (float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
    return v;
}

static unsigned row_blocks (size_t rows)
{
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

/* Scratch for LayerNorm backward's dy * xhat (grown on demand). */
static float *scratch;
static size_t scratch_n;

static int scratch_reserve (size_t n)
{
    if (n <= scratch_n)
        return 0;
    if (scratch)
        CK (cudaFree (scratch));
    scratch = NULL;
    scratch_n = 0;
    CK (cudaMalloc ((void **)&scratch, n * sizeof (float)));
    scratch_n = n;
    return 0;
}

/* ---- LayerNorm ---- */

__global__ static void k_ln_fwd (int M, int N, const float *x, const float *g,
                                 const float *b, float *y, float *mean, float *rstd)
{
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= M)
        return;
    const float *xr = x + (size_t)row * N;
    float *yr = y + (size_t)row * N;
    float s = 0.0f;
    for (int j = lane; j < N; j += 32)
        s += xr[j];
    float mu = warp_sum (s) / N;
    float v = 0.0f;
    for (int j = lane; j < N; j += 32)
        v += (xr[j] - mu) * (xr[j] - mu);
    float r = 1.0f / sqrtf (warp_sum (v) / N + DT_LN_EPS);
    if (lane == 0)
        mean[row] = mu, rstd[row] = r;
    for (int j = lane; j < N; j += 32)
        yr[j] = (xr[j] - mu) * r * g[j] + b[j];
}

static int cu_layernorm_fwd (int M, int N, const float *x, const float *g, const float *b,
                             float *y, float *mean, float *rstd)
{
    if (M <= 0)
        return 0;
    k_ln_fwd<<<row_blocks (M), 32 * ROWS_PER_BLOCK>>> (M, N, x, g, b, y, mean, rstd);
    CKLAUNCH (ln_fwd);
    return 0;
}

__global__ static void k_ln_bwd (int M, int N, const float *x, const float *g,
                                 const float *mean, const float *rstd, const float *dy,
                                 float *dx, float *dyxh)
{
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= M)
        return;
    size_t o = (size_t)row * N;
    float m = mean[row], r = rstd[row], s1 = 0.0f, s2 = 0.0f;
    for (int j = lane; j < N; j += 32) {
        float xh = (x[o + j] - m) * r, dxh = dy[o + j] * g[j];
        s1 += dxh;
        s2 += dxh * xh;
        dyxh[o + j] = dy[o + j] * xh;
    }
    float a = warp_sum (s1) / N, c = warp_sum (s2) / N;
    for (int j = lane; j < N; j += 32) {
        float xh = (x[o + j] - m) * r;
        dx[o + j] += r * (dy[o + j] * g[j] - a - xh * c);
    }
}

static int cu_layernorm_bwd (int M, int N, const float *x, const float *g,
                             const float *mean, const float *rstd, const float *dy,
                             float *dx, float *dg, float *db)
{
    if (M <= 0)
        return 0;
    if (scratch_reserve ((size_t)M * N) < 0)
        return -1;
    k_ln_bwd<<<row_blocks (M), 32 * ROWS_PER_BLOCK>>> (M, N, x, g, mean, rstd, dy, dx,
                                                       scratch);
    CKLAUNCH (ln_bwd);
    if (colsum_add (M, N, scratch, dg) < 0 || colsum_add (M, N, dy, db) < 0)
        return -1;
    return 0;
}

/* ---- token + position embeddings ---- */

__global__ static void k_embed_pos_fwd (size_t n, int T, int E, const uint8_t *tok,
                                        const float *wte, const float *wpe, float *x)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / E;
        int e = (int)(i % E), t = (int)(row % T);
        x[i] = wte[(size_t)tok[row] * E + e] + wpe[(size_t)t * E + e];
    }
}

static int cu_embed_pos_fwd (int B, int T, int E, const uint8_t *tok, const float *wte,
                             const float *wpe, float *x)
{
    size_t n = (size_t)B * T * E;
    if (n == 0)
        return 0;
    size_t g = (n + 255) / 256;
    k_embed_pos_fwd<<<(unsigned)(g > 65535u * 16u ? 65535u * 16u : g), 256>>> (
      n, T, E, tok, wte, wpe, x);
    CKLAUNCH (embed_pos_fwd);
    return 0;
}

/* Block v, threads over e: each (v, e) sums its positions in order. */
__global__ static void k_embed_tok_bwd (int npos, int E, const uint8_t *tok,
                                        const float *dx, float *dwte)
{
    int v = blockIdx.x;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        float s = 0.0f;
        for (int p = 0; p < npos; p++)
            if (tok[p] == v)
                s += dx[(size_t)p * E + e];
        dwte[(size_t)v * E + e] += s;
    }
}

/* Thread (t, e): the sum over samples in order. */
__global__ static void k_embed_pos_bwd (int B, int T, int E, const float *dx, float *dwpe)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)T * E)
        return;
    size_t t = i / E, e = i % E;
    float s = 0.0f;
    for (int b = 0; b < B; b++)
        s += dx[((size_t)b * T + t) * E + e];
    dwpe[i] += s;
}

static int cu_embed_pos_bwd (int B, int T, int E, const uint8_t *tok, const float *dx,
                             float *dwte, float *dwpe)
{
    if ((size_t)B * T * E == 0)
        return 0;
    /* A warp per 32 columns, whole warps, at most 256 threads. */
    const int threads = E < 256 ? 32 * ((E + 31) / 32) : 256;
    k_embed_tok_bwd<<<256, threads>>> (B * T, E, tok, dx, dwte);
    CKLAUNCH (embed_tok_bwd);
    k_embed_pos_bwd<<<(unsigned)(((size_t)T * E + 255) / 256), 256>>> (B, T, E, dx, dwpe);
    CKLAUNCH (embed_pos_bwd);
    return 0;
}

/* ---- causal attention ---- */

/* Row-major C = op(A) op(B) for 'batch' matrices at fixed strides
 * (column-major C^T = op(B)^T op(A)^T, as cu_sgemm). */
static int gemm_sb (int ta, int tb, int M, int N, int K, float alpha, const float *A,
                    int lda, long long sA, const float *B, int ldb, long long sB,
                    float beta, float *C, int ldc, long long sC, int batch)
{
    CKB (cublasSgemmStridedBatched (cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                                    ldb, sB, A, lda, sA, &beta, C, ldc, sC, batch));
    return 0;
}

/* Row r of the [rows, T] scores is query i = r % T: softmax over keys
 * 0..i after subtracting the maximum; keys past i get exactly 0. */
__global__ static void k_causal_softmax (size_t rows, int T, float *S)
{
    size_t r = blockIdx.x * (size_t)ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    float *row = S + r * T;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32)
        mx = fmaxf (mx, row[j]);
    mx = warp_max (mx);
    float s = 0.0f;
    for (int j = lane; j <= i; j += 32) {
        float e = expf (row[j] - mx);
        row[j] = e;
        s += e;
    }
    float inv = 1.0f / warp_sum (s);
    for (int j = lane; j < T; j += 32)
        row[j] = j <= i ? row[j] * inv : 0.0f;
}

/* dS = P .* (dP - rowsum(P .* dP)) on the causal part, 0 above it. */
__global__ static void k_causal_softmax_bwd (size_t rows, int T, const float *P,
                                             float *dP)
{
    size_t r = blockIdx.x * (size_t)ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int i = (int)(r % T);
    const float *p = P + r * T;
    float *d = dP + r * T;
    float s = 0.0f;
    for (int j = lane; j <= i; j += 32)
        s += p[j] * d[j];
    s = warp_sum (s);
    for (int j = lane; j < T; j += 32)
        d[j] = j <= i ? p[j] * (d[j] - s) : 0.0f;
}

static int cu_attn_fwd (int B, int T, int NH, int D, const float *qkv, float *att,
                        float *out)
{
    int E = NH * D, E3 = 3 * E;
    long long sq = (long long)T * E3, sa = (long long)NH * T * T, so = (long long)T * E;
    float scale = 1.0f / sqrtf ((float)D);
    size_t rows = (size_t)B * NH * T;
    if (rows == 0)
        return 0;
    for (int h = 0; h < NH; h++) {
        const float *q = qkv + (size_t)h * D;
        if (gemm_sb (0, 1, T, T, D, scale, q, E3, sq, q + E, E3, sq, 0.0f,
                     att + (size_t)h * T * T, T, sa, B) < 0)
            return -1;
    }
    k_causal_softmax<<<row_blocks (rows), 32 * ROWS_PER_BLOCK>>> (rows, T, att);
    CKLAUNCH (causal_softmax);
    for (int h = 0; h < NH; h++) {
        const float *v = qkv + (size_t)h * D + 2 * E;
        if (gemm_sb (0, 0, T, D, T, 1.0f, att + (size_t)h * T * T, T, sa, v, E3, sq, 0.0f,
                     out + (size_t)h * D, E, so, B) < 0)
            return -1;
    }
    return 0;
}

static int cu_attn_bwd (int B, int T, int NH, int D, const float *qkv, const float *att,
                        const float *dout, float *dqkv, float *work)
{
    int E = NH * D, E3 = 3 * E;
    long long sq = (long long)T * E3, sa = (long long)NH * T * T, so = (long long)T * E;
    float scale = 1.0f / sqrtf ((float)D);
    size_t rows = (size_t)B * NH * T;
    if (rows == 0)
        return 0;
    for (int h = 0; h < NH; h++) {
        const float *v = qkv + (size_t)h * D + 2 * E, *dO = dout + (size_t)h * D;
        const float *P = att + (size_t)h * T * T;
        /* dP = dO v^T; dv = P^T dO */
        if (gemm_sb (0, 1, T, T, D, 1.0f, dO, E, so, v, E3, sq, 0.0f,
                     work + (size_t)h * T * T, T, sa, B) < 0 ||
            gemm_sb (1, 0, T, D, T, 1.0f, P, T, sa, dO, E, so, 0.0f,
                     dqkv + (size_t)h * D + 2 * E, E3, sq, B) < 0)
            return -1;
    }
    k_causal_softmax_bwd<<<row_blocks (rows), 32 * ROWS_PER_BLOCK>>> (rows, T, att, work);
    CKLAUNCH (causal_softmax_bwd);
    for (int h = 0; h < NH; h++) {
        const float *q = qkv + (size_t)h * D, *dS = work + (size_t)h * T * T;
        /* dq = scale dS k; dk = scale dS^T q */
        if (gemm_sb (0, 0, T, D, T, scale, dS, T, sa, q + E, E3, sq, 0.0f,
                     dqkv + (size_t)h * D, E3, sq, B) < 0 ||
            gemm_sb (1, 0, T, D, T, scale, dS, T, sa, q, E3, sq, 0.0f,
                     dqkv + (size_t)h * D + E, E3, sq, B) < 0)
            return -1;
    }
    return 0;
}

void dt_cuda_tfm_install (struct dt_kern_ops *ops)
{
    ops->layernorm_fwd = cu_layernorm_fwd;
    ops->layernorm_bwd = cu_layernorm_bwd;
    ops->embed_pos_fwd = cu_embed_pos_fwd;
    ops->embed_pos_bwd = cu_embed_pos_bwd;
    ops->attn_fwd = cu_attn_fwd;
    ops->attn_bwd = cu_attn_bwd;
}
