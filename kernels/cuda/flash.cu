/* flash.cu: the CUDA backend's flash attention - causal multi-head attention that
 * never stores a [T, T] score matrix in GPU memory.
 *
 * The FlashAttention idea (Dao et al. 2022) in fp32, without tensor cores:
 * a block takes 32 queries of one (sample, head), walks the keys in tiles
 * of 32 staged in shared memory with the queries, and keeps for each
 * query a running maximum m, a running sum l of exp(s - m) and an output
 * accumulator rescaled by exp(m_old - m_new) whenever the maximum grows
 * (the online softmax).  Only each query's log-sum-exp m + log l is kept
 * for backward.  The backward pass recomputes the probabilities tile by
 * tile from q, k and that log-sum-exp: one kernel per key tile
 * accumulates dk and dv over the query tiles, one per query tile
 * accumulates dq over the key tiles, so every gradient element is summed
 * by one thread in a fixed order (no atomics): bit-identical run to run
 * on one GPU model, as the rest of the backend.
 *
 * Threads: 4 warps; in the forward pass and the dq pass a warp owns 8
 * queries and its lanes are the 32 keys of the tile (scores), then the
 * head's dimensions (the output, strided by 32: up to 4 per lane, so
 * heads of at most DT_ATTN_FLASH_MAX_D = 128); in the dk/dv pass a warp
 * owns 8 keys and its lanes are the 32 queries of the tile.  Shared rows
 * have an odd stride, so lanes reading one column of different rows hit
 * different banks.
 */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/cuda_internal.h"

#define FT 32 /* queries and keys per tile */
#define FW 4  /* warps per block */
#define FR 8  /* queries (or keys) per warp: FT / FW */
#define FULL_MASK 0xffffffffu

__device__ static float f_warp_sum (float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (FULL_MASK, v, o);
    return v;
}

__device__ static float f_warp_max (float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf (v, __shfl_xor_sync (FULL_MASK, v, o));
    return v;
}

/* Rows r0 .. r0+FT of the [T, ld] matrix at src (columns 0..D) into
 * dst[FT][S]; rows past T are zero. */
__device__ static void f_load (float *dst, int S, const float *src, size_t ld, int r0,
                               int T, int D)
{
    for (int i = threadIdx.x; i < FT * D; i += blockDim.x) {
        int r = i / D, d = i % D;
        dst[r * S + d] = r0 + r < T ? src[(size_t)(r0 + r) * ld + d] : 0.0f;
    }
}

__device__ static float f_dot (const float *a, const float *b, int D)
{
    float s = 0.0f;
    for (int d = 0; d < D; d++)
        s += a[d] * b[d];
    return s;
}

/* Grid (query tiles, heads, samples). */
template<int DL>
__global__ static void k_flash_fwd (int T, int NH, int D, float scale, const float *qkv,
                                    float *lse, float *out)
{
    extern __shared__ float sm[];
    const int S = D | 1, E = NH * D, E3 = 3 * E;
    float *Qs = sm, *Ks = Qs + FT * S, *Vs = Ks + FT * S;
    const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * FT;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float *q = qkv + (size_t)b * T * E3 + (size_t)h * D;
    float m[FR], l[FR], o[FR][DL];

#pragma unroll
    for (int rr = 0; rr < FR; rr++) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
#pragma unroll
        for (int c = 0; c < DL; c++)
            o[rr][c] = 0.0f;
    }
    f_load (Qs, S, q, E3, q0, T, D);
    const int qlast = min (q0 + FT, T) - 1;
    for (int k0 = 0; k0 <= qlast; k0 += FT) {
        __syncthreads (); /* the previous tile is consumed */
        f_load (Ks, S, q + E, E3, k0, T, D);
        f_load (Vs, S, q + 2 * E, E3, k0, T, D);
        __syncthreads ();
#pragma unroll
        for (int rr = 0; rr < FR; rr++) {
            const int r = warp * FR + rr, i = q0 + r; /* the same for the whole warp */
            if (i >= T || k0 > i)
                continue;
            const int j = k0 + lane;
            float s = j <= i ? f_dot (Qs + r * S, Ks + lane * S, D) * scale : -INFINITY;
            const float mn = fmaxf (m[rr], f_warp_max (s));
            const float p = j <= i ? expf (s - mn) : 0.0f;
            const float corr = expf (m[rr] - mn); /* 0 on the first tile */
            l[rr] = l[rr] * corr + f_warp_sum (p);
            m[rr] = mn;
#pragma unroll
            for (int c = 0; c < DL; c++)
                o[rr][c] *= corr;
            const int jn = min (FT, i - k0 + 1);
            for (int jj = 0; jj < jn; jj++) {
                const float pj = __shfl_sync (FULL_MASK, p, jj);
#pragma unroll
                for (int c = 0; c < DL; c++) {
                    const int d = lane + 32 * c;
                    if (d < D)
                        o[rr][c] += pj * Vs[jj * S + d];
                }
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < FR; rr++) {
        const int i = q0 + warp * FR + rr;
        if (i >= T)
            continue;
        const float inv = 1.0f / l[rr];
        float *orow = out + ((size_t)b * T + i) * E + (size_t)h * D;
#pragma unroll
        for (int c = 0; c < DL; c++) {
            const int d = lane + 32 * c;
            if (d < D)
                orow[d] = o[rr][c] * inv;
        }
        if (lane == 0)
            lse[((size_t)b * NH + h) * T + i] = m[rr] + logf (l[rr]);
    }
}

/* delta[(b, h, i)] = dout_i . out_i over the head's D columns (a warp per
 * row); the softmax backward's row sum of P .* dP. */
__global__ static void k_flash_delta (int B, int T, int NH, int D, const float *out,
                                      const float *dout, float *delta)
{
    size_t row = blockIdx.x * (size_t)FW + threadIdx.x / 32;
    const int lane = threadIdx.x % 32, E = NH * D;
    if (row >= (size_t)B * NH * T)
        return;
    const int i = (int)(row % T), h = (int)(row / T % NH);
    const size_t b = row / ((size_t)T * NH);
    const size_t off = (b * T + i) * E + (size_t)h * D;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32)
        s += dout[off + d] * out[off + d];
    s = f_warp_sum (s);
    if (lane == 0)
        delta[row] = s;
}

/* dk, dv of one key tile: grid (key tiles, heads, samples).  Lanes are the
 * queries of the tile: each computes p = exp(s - lse) and
 * ds = p (dp - delta) for the warp's key; the warp then sums p dout and
 * ds q over the 32 queries, lanes over the head's columns. */
template<int DL>
__global__ static void k_flash_dkv (int T, int NH, int D, float scale, const float *qkv,
                                    const float *lse, const float *delta,
                                    const float *dout, float *dqkv)
{
    extern __shared__ float sm[];
    const int S = D | 1, E = NH * D, E3 = 3 * E;
    float *Qs = sm, *Os = Qs + FT * S, *Ks = Os + FT * S, *Vs = Ks + FT * S;
    const int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * FT;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t qoff = (size_t)b * T * E3 + (size_t)h * D;
    const float *q = qkv + qoff;
    const float *dO = dout + (size_t)b * T * E + (size_t)h * D;
    const float *L = lse + ((size_t)b * NH + h) * T,
                *Dl = delta + ((size_t)b * NH + h) * T;
    float dk[FR][DL], dv[FR][DL];

#pragma unroll
    for (int kk = 0; kk < FR; kk++)
#pragma unroll
        for (int c = 0; c < DL; c++)
            dk[kk][c] = dv[kk][c] = 0.0f;
    f_load (Ks, S, q + E, E3, k0, T, D);
    f_load (Vs, S, q + 2 * E, E3, k0, T, D);
    for (int q0 = k0; q0 < T; q0 += FT) { /* queries before k0 see none of these keys */
        __syncthreads ();
        f_load (Qs, S, q, E3, q0, T, D);
        f_load (Os, S, dO, E, q0, T, D);
        __syncthreads ();
        const int i = q0 + lane;
        const float li = i < T ? L[i] : 0.0f, di = i < T ? Dl[i] : 0.0f;
#pragma unroll
        for (int kk = 0; kk < FR; kk++) {
            const int kr = warp * FR + kk, j = k0 + kr; /* the same for the whole warp */
            if (j >= T)
                continue;
            float p = 0.0f, ds = 0.0f;
            if (i < T && i >= j) {
                p = expf (f_dot (Qs + lane * S, Ks + kr * S, D) * scale - li);
                ds = p * (f_dot (Os + lane * S, Vs + kr * S, D) - di);
            }
            for (int ii = max (0, j - q0); ii < FT; ii++) {
                const float pi = __shfl_sync (FULL_MASK, p, ii);
                const float dsi = __shfl_sync (FULL_MASK, ds, ii);
#pragma unroll
                for (int c = 0; c < DL; c++) {
                    const int d = lane + 32 * c;
                    if (d < D) {
                        dv[kk][c] += pi * Os[ii * S + d];
                        dk[kk][c] += dsi * Qs[ii * S + d];
                    }
                }
            }
        }
    }
#pragma unroll
    for (int kk = 0; kk < FR; kk++) {
        const int j = k0 + warp * FR + kk;
        if (j >= T)
            continue;
        float *row = dqkv + qoff + (size_t)j * E3;
#pragma unroll
        for (int c = 0; c < DL; c++) {
            const int d = lane + 32 * c;
            if (d < D) {
                row[E + d] = dk[kk][c] * scale;
                row[2 * E + d] = dv[kk][c];
            }
        }
    }
}

/* dq of one query tile: grid (query tiles, heads, samples); as the
 * forward pass, lanes are the keys of a tile, then the head's columns. */
template<int DL>
__global__ static void k_flash_dq (int T, int NH, int D, float scale, const float *qkv,
                                   const float *lse, const float *delta,
                                   const float *dout, float *dqkv)
{
    extern __shared__ float sm[];
    const int S = D | 1, E = NH * D, E3 = 3 * E;
    float *Qs = sm, *Os = Qs + FT * S, *Ks = Os + FT * S, *Vs = Ks + FT * S;
    const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * FT;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t qoff = (size_t)b * T * E3 + (size_t)h * D;
    const float *q = qkv + qoff;
    const float *dO = dout + (size_t)b * T * E + (size_t)h * D;
    const float *L = lse + ((size_t)b * NH + h) * T,
                *Dl = delta + ((size_t)b * NH + h) * T;
    float dq[FR][DL];

#pragma unroll
    for (int rr = 0; rr < FR; rr++)
#pragma unroll
        for (int c = 0; c < DL; c++)
            dq[rr][c] = 0.0f;
    f_load (Qs, S, q, E3, q0, T, D);
    f_load (Os, S, dO, E, q0, T, D);
    const int qlast = min (q0 + FT, T) - 1;
    for (int k0 = 0; k0 <= qlast; k0 += FT) {
        __syncthreads ();
        f_load (Ks, S, q + E, E3, k0, T, D);
        f_load (Vs, S, q + 2 * E, E3, k0, T, D);
        __syncthreads ();
#pragma unroll
        for (int rr = 0; rr < FR; rr++) {
            const int r = warp * FR + rr, i = q0 + r; /* the same for the whole warp */
            if (i >= T || k0 > i)
                continue;
            const int j = k0 + lane;
            float ds = 0.0f;
            if (j <= i) {
                float p = expf (f_dot (Qs + r * S, Ks + lane * S, D) * scale - L[i]);
                ds = p * (f_dot (Os + r * S, Vs + lane * S, D) - Dl[i]);
            }
            const int jn = min (FT, i - k0 + 1);
            for (int jj = 0; jj < jn; jj++) {
                const float dsj = __shfl_sync (FULL_MASK, ds, jj);
#pragma unroll
                for (int c = 0; c < DL; c++) {
                    const int d = lane + 32 * c;
                    if (d < D)
                        dq[rr][c] += dsj * Ks[jj * S + d];
                }
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < FR; rr++) {
        const int i = q0 + warp * FR + rr;
        if (i >= T)
            continue;
        float *row = dqkv + qoff + (size_t)i * E3;
#pragma unroll
        for (int c = 0; c < DL; c++) {
            const int d = lane + 32 * c;
            if (d < D)
                row[d] = dq[rr][c] * scale;
        }
    }
}

/* Dynamic shared memory over the default 48 KiB must be asked for, per
 * kernel. */
template<typename K>
static int f_smem (K kernel, size_t bytes)
{
    if (bytes > 48 * 1024)
        CK (cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)bytes));
    return 0;
}

template<int DL>
static int f_fwd (dim3 grid, int T, int NH, int D, float scale, const float *qkv,
                  float *lse, float *out)
{
    const size_t smem = (size_t)3 * FT * (D | 1) * sizeof (float);
    const unsigned threads = 32 * FW;
    if (f_smem (k_flash_fwd<DL>, smem) < 0)
        return -1;
    k_flash_fwd<DL><<<grid, threads, smem>>> (T, NH, D, scale, qkv, lse, out);
    CKLAUNCH (flash_fwd);
    return 0;
}

template<int DL>
static int f_bwd (dim3 g, int T, int NH, int D, float scale, const float *qkv,
                  const float *lse, const float *delta, const float *dout, float *dqkv)
{
    const size_t sb = (size_t)4 * FT * (D | 1) * sizeof (float);
    const unsigned nt = 32 * FW;
    if (f_smem (k_flash_dkv<DL>, sb) < 0 || f_smem (k_flash_dq<DL>, sb) < 0)
        return -1;
    k_flash_dkv<DL><<<g, nt, sb>>> (T, NH, D, scale, qkv, lse, delta, dout, dqkv);
    CKLAUNCH (flash_dkv);
    k_flash_dq<DL><<<g, nt, sb>>> (T, NH, D, scale, qkv, lse, delta, dout, dqkv);
    CKLAUNCH (flash_dq);
    return 0;
}

static int f_check (int B, int T, int NH, int D)
{
    if (D < 1 || D > DT_ATTN_FLASH_MAX_D || NH > 65535 || B > 65535) {
        snprintf (cuda_ops.last_error, sizeof (cuda_ops.last_error),
                  "flash attention: %d samples, %d heads of width %d (at most 65535, "
                  "65535 and %d)",
                  B, NH, D, DT_ATTN_FLASH_MAX_D);
        return -1;
    }
    return 0;
}

static int cu_attn_flash_fwd (int B, int T, int NH, int D, const float *qkv, float *lse,
                              float *out)
{
    if ((size_t)B * T * NH == 0)
        return 0;
    if (f_check (B, T, NH, D) < 0)
        return -1;
    dim3 grid ((T + FT - 1) / FT, NH, B);
    const float scale = 1.0f / sqrtf ((float)D);
    switch ((D + 31) / 32) {
    case 1: return f_fwd<1> (grid, T, NH, D, scale, qkv, lse, out);
    case 2: return f_fwd<2> (grid, T, NH, D, scale, qkv, lse, out);
    case 3: return f_fwd<3> (grid, T, NH, D, scale, qkv, lse, out);
    default: return f_fwd<4> (grid, T, NH, D, scale, qkv, lse, out);
    }
}

static int cu_attn_flash_bwd (int B, int T, int NH, int D, const float *qkv,
                              const float *out, const float *lse, const float *dout,
                              float *dqkv, float *work)
{
    const size_t rows = (size_t)B * NH * T;
    if (rows == 0)
        return 0;
    if (f_check (B, T, NH, D) < 0)
        return -1;
    const unsigned threads = 32 * FW, blocks = (unsigned)((rows + FW - 1) / FW);
    k_flash_delta<<<blocks, threads>>> (B, T, NH, D, out, dout, work);
    CKLAUNCH (flash_delta);
    dim3 grid ((T + FT - 1) / FT, NH, B);
    const float scale = 1.0f / sqrtf ((float)D);
    switch ((D + 31) / 32) {
    case 1: return f_bwd<1> (grid, T, NH, D, scale, qkv, lse, work, dout, dqkv);
    case 2: return f_bwd<2> (grid, T, NH, D, scale, qkv, lse, work, dout, dqkv);
    case 3: return f_bwd<3> (grid, T, NH, D, scale, qkv, lse, work, dout, dqkv);
    default: return f_bwd<4> (grid, T, NH, D, scale, qkv, lse, work, dout, dqkv);
    }
}

void dt_cuda_flash_install (struct dt_kern_ops *ops)
{
    ops->attn_flash_fwd = cu_attn_flash_fwd;
    ops->attn_flash_bwd = cu_attn_flash_bwd;
}
