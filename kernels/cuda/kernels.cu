/* kernels.cu: the CUDA backend of the kernels - cuBLAS for GEMM, own kernels for the
 * rest.
 *
 * Every reduction uses a fixed launch shape and a fixed tree (no atomics),
 * so results are bit-identical from run to run on one GPU model.  Every
 * CUDA and cuBLAS call is checked; a failure is returned as -1 with the
 * error text in ops.last_error.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_internal.h"

struct dt_kern_ops cuda_ops;
cublasHandle_t cublas;
static int probed, usable, fatal;
static char probe_why[200];

#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f

static unsigned grid_for (size_t n, unsigned threads)
{
    size_t g = (n + threads - 1) / threads;
    if (g > 65535u * 16u)
        g = 65535u * 16u;
    return g ? (unsigned)g : 1u;
}

static void *cu_alloc (size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    cudaError_t e = cudaMalloc (&p, bytes);
    if (e != cudaSuccess) {
        snprintf (cuda_ops.last_error, sizeof (cuda_ops.last_error),
                  "cudaMalloc(%zu): %s", bytes, cudaGetErrorString (e));
        return NULL;
    }
    e = cudaMemset (p, 0, bytes);
    if (e != cudaSuccess) {
        snprintf (cuda_ops.last_error, sizeof (cuda_ops.last_error), "cudaMemset: %s",
                  cudaGetErrorString (e));
        cudaFree (p);
        return NULL;
    }
    return p;
}

static void cu_free (void *p)
{
    if (p)
        (void)cudaFree (p);
}

static int cu_upload (void *dst, const void *src, size_t bytes)
{
    CK (cudaMemcpy (dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

static int cu_download (void *dst, const void *src, size_t bytes)
{
    CK (cudaMemcpy (dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

static int cu_copy (void *dst, const void *src, size_t bytes)
{
    CK (cudaMemcpy (dst, src, bytes, cudaMemcpyDeviceToDevice));
    return 0;
}

static int cu_zero (void *p, size_t bytes)
{
    CK (cudaMemset (p, 0, bytes));
    return 0;
}

/* The kernels' queued work: they all run on the legacy default stream.
 * Not the device's: NCCL's streams (comm_nccl*.c) carry sends that wait
 * for a peer, which a device-wide synchronisation would wait for too. */
static int cu_sync (void)
{
    CK (cudaStreamSynchronize (cudaStreamLegacy));
    return 0;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
/* bf16 GEMMs (--precision bf16): the fp32 inputs rounded into bf16
 * copies (grown on demand), multiplied on the tensor cores with fp32
 * accumulation into the fp32 output.  The fp32 tensors stay the master
 * copies. */
static int bf16_on;
static __nv_bfloat16 *bf_a, *bf_b;
static size_t bf_a_n, bf_b_n;

static int cu_set_bf16 (int on)
{
    bf16_on = on;
    return 0;
}

__global__ static void k_to_bf16 (size_t n, const float *x, __nv_bfloat16 *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16 (x[i]);
}

/* The n floats at x rounded into *buf (capacity *cap, grown). */
static int to_bf16 (const float *x, size_t n, __nv_bfloat16 **buf, size_t *cap)
{
    if (n > *cap) {
        if (*buf)
            CK (cudaFree (*buf));
        *buf = NULL;
        *cap = 0;
        CK (cudaMalloc ((void **)buf, n * sizeof (__nv_bfloat16)));
        *cap = n;
    }
    k_to_bf16<<<grid_for (n, 256), 256>>> (n, x, *buf);
    CKLAUNCH (to_bf16);
    return 0;
}

static int cu_sgemm (int ta, int tb, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (bf16_on && M > 0 && N > 0 && K > 0) {
        /* row-major op(A) [M, K], op(B) [K, N]: the elements they span */
        size_t na = (size_t)((ta ? K : M) - 1) * lda + (ta ? M : K);
        size_t nb = (size_t)((tb ? N : K) - 1) * ldb + (tb ? K : N);
        if (to_bf16 (A, na, &bf_a, &bf_a_n) < 0 || to_bf16 (B, nb, &bf_b, &bf_b_n) < 0)
            return -1;
        CKB (cublasGemmEx (cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, bf_b,
                           CUDA_R_16BF, ldb, bf_a, CUDA_R_16BF, lda, &beta, C, CUDA_R_32F,
                           ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return 0;
    }
    CKB (cublasSgemm (cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                      ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda,
                      &beta, C, ldc));
    return 0;
}

/* Same rational tanh as the CPU backend (kernels/cpu.c). */
__device__ static float d_tanh (float x)
{
    const float c = 7.99881172180175781f;
    float ax = fabsf (x);
    x = fminf (fmaxf (x, -c), c);
    float x2 = x * x;
    float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * x;
    float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    /* beyond the fit, tanh is 1 to within 2.3e-7: saturate exactly, so
     * 1 - t*t is 0 and not a rounding residue */
    return ax >= c ? (x > 0 ? 1.0f : -1.0f) : p / q;
}

__device__ static float d_gelu (float x)
{
    float t = d_tanh (GELU_K0 * (x + GELU_K1 * x * x * x));
    return 0.5f * x * (1.0f + t);
}

__device__ static float d_gelu_grad (float x)
{
    float x2 = x * x;
    float t = d_tanh (GELU_K0 * (x + GELU_K1 * x2 * x));
    float dt = (1.0f - t * t) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * x2);
    return 0.5f * (1.0f + t) + 0.5f * x * dt;
}

__global__ static void k_bias_gelu_fwd (size_t n, int N, float *u, const float *b,
                                        float *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = u[i] + b[i % N];
        u[i] = x;
        y[i] = d_gelu (x);
    }
}

static int cu_bias_gelu_fwd (int M, int N, float *u, const float *b, float *y)
{
    size_t n = (size_t)M * N;
    if (n == 0)
        return 0;
    k_bias_gelu_fwd<<<grid_for (n, 256), 256>>> (n, N, u, b, y);
    CKLAUNCH (bias_gelu_fwd);
    return 0;
}

/* Column sums db[N] += sum over rows of g[M,N], deterministic: row chunk c
 * of every column j is summed in order by one thread into part[c, j], then
 * one thread per column adds the chunks in order.  (One thread per column
 * alone leaves an H200 nearly idle: N threads.) */
#define COL_CHUNKS_MAX 64
static float *col_part;
static size_t col_part_n;

__global__ static void k_colsum_part (int M, int N, int rows, const float *g, float *part)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int c = blockIdx.y;
    if (j >= N)
        return;
    int r0 = c * rows, r1 = min (M, r0 + rows);
    float s = 0.0f;
    for (int i = r0; i < r1; i++)
        s += g[(size_t)i * N + j];
    part[(size_t)c * N + j] = s;
}

__global__ static void k_colsum_final (int N, int chunks, const float *part, float *db)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N)
        return;
    float s = 0.0f;
    for (int c = 0; c < chunks; c++)
        s += part[(size_t)c * N + j];
    db[j] += s;
}

int colsum_add (int M, int N, const float *g, float *db)
{
    int rows = 64;
    int chunks = (M + rows - 1) / rows;
    if (chunks > COL_CHUNKS_MAX) {
        chunks = COL_CHUNKS_MAX;
        rows = (M + chunks - 1) / chunks;
        chunks = (M + rows - 1) / rows;
    }
    /* (no rows or no columns: nothing to add, and a grid of 0 blocks
     * would be an invalid launch) */
    if (chunks < 1 || N < 1)
        return 0;
    size_t need = (size_t)chunks * N;
    if (need > col_part_n) {
        if (col_part)
            CK (cudaFree (col_part));
        col_part = NULL;
        col_part_n = 0;
        CK (cudaMalloc ((void **)&col_part, need * sizeof (float)));
        col_part_n = need;
    }
    dim3 grid ((N + 127) / 128, chunks);
    k_colsum_part<<<grid, 128>>> (M, N, rows, g, col_part);
    CKLAUNCH (colsum_part);
    k_colsum_final<<<(N + 127) / 128, 128>>> (N, chunks, col_part, db);
    CKLAUNCH (colsum_final);
    return 0;
}

__global__ static void k_gelu_bwd (size_t n, const float *u, const float *dy, float *du)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        du[i] = dy[i] * d_gelu_grad (u[i]);
}

static int cu_bias_gelu_bwd (int M, int N, const float *u, const float *dy, float *du,
                             float *db)
{
    size_t n = (size_t)M * N;
    if (n == 0)
        return 0;
    k_gelu_bwd<<<grid_for (n, 256), 256>>> (n, u, dy, du);
    CKLAUNCH (gelu_bwd);
    return colsum_add (M, N, du, db);
}

__global__ static void k_bias_fwd (size_t n, int N, float *z, const float *b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        z[i] += b[i % N];
}

static int cu_bias_fwd (int M, int N, float *z, const float *b)
{
    size_t n = (size_t)M * N;
    if (n == 0)
        return 0;
    k_bias_fwd<<<grid_for (n, 256), 256>>> (n, N, z, b);
    CKLAUNCH (bias_fwd);
    return 0;
}

static int cu_bias_bwd (int M, int N, const float *dz, float *db)
{
    return colsum_add (M, N, dz, db);
}

__global__ static void k_embed_fwd (size_t n, int E, const uint8_t *tok, const float *emb,
                                    float *x)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t pos = i / E;
        int e = (int)(i % E);
        x[i] = emb[(size_t)tok[pos] * E + e];
    }
}

static int cu_embed_fwd (int B, int C, int E, const uint8_t *tok, const float *emb,
                         float *x)
{
    size_t n = (size_t)B * C * E;
    if (n == 0)
        return 0;
    k_embed_fwd<<<grid_for (n, 256), 256>>> (n, E, tok, emb, x);
    CKLAUNCH (embed_fwd);
    return 0;
}

/* Block v, threads over e: each (v, e) sums its positions in order, so the
 * scatter-add is deterministic without atomics. */
__global__ static void k_embed_bwd (int npos, int E, const uint8_t *tok, const float *dx,
                                    float *demb)
{
    int v = blockIdx.x;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        float s = 0.0f;
        for (int p = 0; p < npos; p++)
            if (tok[p] == v)
                s += dx[(size_t)p * E + e];
        demb[(size_t)v * E + e] += s;
    }
}

static int cu_embed_bwd (int B, int C, int E, const uint8_t *tok, const float *dx,
                         float *demb)
{
    /* A warp per 32 columns, whole warps, at most 256 threads. */
    const int threads = E < 256 ? 32 * ((E + 31) / 32) : 256;
    k_embed_bwd<<<256, threads>>> (B * C, E, tok, dx, demb);
    CKLAUNCH (embed_bwd);
    return 0;
}

/* One block of 256 threads per row, fixed tree reductions. */
#define SMX_T 256
__global__ static void k_softmax_ce (int V, const float *logits, const uint8_t *tgt,
                                     float scale, float *loss, float *dl)
{
    __shared__ float red[SMX_T];
    int row = blockIdx.x;
    const float *l = logits + (size_t)row * V;
    float *d = dl + (size_t)row * V;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += SMX_T)
        mx = fmaxf (mx, l[j]);
    red[threadIdx.x] = mx;
    __syncthreads ();
    for (int s = SMX_T / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = fmaxf (red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads ();
    }
    mx = red[0];
    __syncthreads ();
    float sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += SMX_T)
        sum += expf (l[j] - mx);
    red[threadIdx.x] = sum;
    __syncthreads ();
    for (int s = SMX_T / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads ();
    }
    sum = red[0];
    int t = tgt[row];
    float lt = l[t];
    __syncthreads ();
    if (threadIdx.x == 0)
        loss[row] = mx + logf (sum) - lt;
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < V; j += SMX_T) {
        float p = expf (l[j] - mx) * inv * scale;
        d[j] = (j == t) ? p - scale : p;
    }
}

static int cu_softmax_ce (int M, int V, const float *logits, const uint8_t *tgt,
                          float scale, float *loss, float *dlogits)
{
    if (M == 0)
        return 0;
    k_softmax_ce<<<M, SMX_T>>> (V, logits, tgt, scale, loss, dlogits);
    CKLAUNCH (softmax_ce);
    return 0;
}

#define SQ_BLOCKS 256
#define SQ_T 256
__global__ static void k_sumsq_part (size_t n, const float *x, double *part)
{
    __shared__ double red[SQ_T];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)SQ_T + threadIdx.x; i < n;
         i += (size_t)SQ_BLOCKS * SQ_T)
        s += (double)x[i] * x[i];
    red[threadIdx.x] = s;
    __syncthreads ();
    for (int k = SQ_T / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads ();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = red[0];
}

__global__ static void k_sumsq_final (double *part)
{
    __shared__ double red[SQ_BLOCKS];
    red[threadIdx.x] = part[threadIdx.x];
    __syncthreads ();
    for (int k = SQ_BLOCKS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads ();
    }
    if (threadIdx.x == 0)
        part[0] = red[0];
}

static double *sq_part;

static int cu_sumsq (size_t n, const float *x, double *out)
{
    if (!sq_part)
        CK (cudaMalloc ((void **)&sq_part, sizeof (double) * SQ_BLOCKS));
    k_sumsq_part<<<SQ_BLOCKS, SQ_T>>> (n, x, sq_part);
    CKLAUNCH (sumsq_part);
    k_sumsq_final<<<1, SQ_BLOCKS>>> (sq_part);
    CKLAUNCH (sumsq_final);
    CK (cudaMemcpy (out, sq_part, sizeof (double), cudaMemcpyDeviceToHost));
    return 0;
}

__global__ static void k_scale (size_t n, float *x, float a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= a;
}

static int cu_scale (size_t n, float *x, float a)
{
    if (n == 0)
        return 0;
    k_scale<<<grid_for (n, 256), 256>>> (n, x, a);
    CKLAUNCH (scale);
    return 0;
}

__global__ static void k_adamw (size_t n, float *p, const float *g, float *m, float *v,
                                float lr, float b1, float b2, float eps, float wd,
                                float ib1, float ib2, float gscale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] * gscale;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= lr * (mi * ib1 / (sqrtf (vi * ib2) + eps) + wd * p[i]);
    }
}

static int cu_adamw (size_t n, float *p, const float *g, float *m, float *v, float lr,
                     float b1, float b2, float eps, float wd, float bc1, float bc2,
                     float gscale)
{
    if (n == 0)
        return 0;
    k_adamw<<<grid_for (n, 256), 256>>> (n, p, g, m, v, lr, b1, b2, eps, wd, 1.0f / bc1,
                                         1.0f / bc2, gscale);
    CKLAUNCH (adamw);
    return 0;
}

/* Data-sheet peaks of known parts (NVIDIA's, dense: no sparsity), FLOP/s
 * of fp32 on the CUDA cores and of bf16 on the tensor cores; the first
 * name that is part of the device's name wins. */
static const struct {
    const char *name;
    double fp32, bf16;
} cu_known_peaks[] = {
    { "H200 NVL", 60e12, 835e12 },  { "H200", 67e12, 989.4e12 },
    { "H100 NVL", 60e12, 835e12 },  { "H100 PCIe", 51.2e12, 756.5e12 },
    { "H100", 67e12, 989.4e12 },    { "A100", 19.5e12, 312e12 },
    { "L40S", 91.6e12, 362.05e12 },
};

extern "C" double dt_kern_cuda_peak (int bf16, char *name, size_t namelen)
{
    cudaDeviceProp p;
    int dev = 0, khz = 0;
    if (cudaGetDevice (&dev) != cudaSuccess ||
        cudaGetDeviceProperties (&p, dev) != cudaSuccess ||
        cudaDeviceGetAttribute (&khz, cudaDevAttrClockRate, dev) != cudaSuccess)
        return 0;
    if (name && namelen)
        snprintf (name, namelen, "%s", p.name);
    for (size_t i = 0; i < sizeof (cu_known_peaks) / sizeof (cu_known_peaks[0]); i++)
        if (strstr (p.name, cu_known_peaks[i].name))
            return bf16 ? cu_known_peaks[i].bf16 : cu_known_peaks[i].fp32;
    /* Else from the properties: FLOPs per SM per clock of the compute
     * capability (an FMA counts two), times SMs, times the peak clock. */
    int cc = p.major * 10 + p.minor;
    double per_sm = bf16 ? (cc == 80              ? 2048
                            : cc == 89            ? 1024
                            : cc == 90            ? 4096
                            : cc >= 86 && cc < 90 ? 512
                                                  : 0)
                         : (cc >= 70 && cc <= 80 ? 128
                            : cc > 80            ? 256
                                                 : 0);
    return per_sm * p.multiProcessorCount * (khz * 1e3);
}

extern "C" int dt_kern_cuda_ident (char *buf, size_t len)
{
    cudaDeviceProp p;
    int dev = 0, drv = 0, rt = 0, cbmaj = 0, cbmin = 0, cbpatch = 0;
    if (cudaGetDevice (&dev) != cudaSuccess ||
        cudaGetDeviceProperties (&p, dev) != cudaSuccess)
        return -1;
    cudaDriverGetVersion (&drv);
    cudaRuntimeGetVersion (&rt);
    cublasGetProperty (MAJOR_VERSION, &cbmaj);
    cublasGetProperty (MINOR_VERSION, &cbmin);
    cublasGetProperty (PATCH_LEVEL, &cbpatch);
    /* (a failed query leaves "not ready"-style status behind: clear it,
     * the kernel wrappers check cudaGetLastError after each launch) */
    cudaGetLastError ();
    char name[sizeof (p.name) + 1];
    size_t k = 0;
    for (const char *c = p.name; *c && k + 1 < sizeof (name); c++)
        if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
            name[k++] = *c;
    name[k] = '\0';
    int n = snprintf (buf, len,
                      "\"device\": \"%s\", \"compute_capability\": \"%d.%d\", "
                      "\"cuda_driver\": \"%d.%d\", \"cuda_runtime\": \"%d.%d\", "
                      "\"cublas\": \"%d.%d.%d\"",
                      name, p.major, p.minor, drv / 1000, drv % 1000 / 10, rt / 1000,
                      rt % 1000 / 10, cbmaj, cbmin, cbpatch);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

extern "C" int dt_kern_cuda_fatal (void)
{
    return fatal;
}

extern "C" struct dt_kern_ops *dt_kern_cuda_probe (char *why, size_t whylen)
{
    if (!probed) {
        int n = 0; /* left unchanged by cudaGetDeviceCount on failure */
        cudaError_t e = cudaGetDeviceCount (&n);
        probed = 1;
        if (e != cudaSuccess)
            snprintf (probe_why, sizeof (probe_why), "cudaGetDeviceCount: %s (%d)",
                      cudaGetErrorString (e), (int)e);
        else if (n <= 0)
            snprintf (probe_why, sizeof (probe_why), "no CUDA device");
        else {
            /* One device per local rank, before the cuBLAS handle binds
             * to the current device (LOCAL_RANK is set by dtagent). */
            const char *lr = getenv ("LOCAL_RANK");
            int dev = lr ? atoi (lr) : 0;
            if (dev < 0 || dev >= n) {
                /* Two ranks on one GPU would both use it, and NCCL refuses
                 * a communicator with two ranks on one device: say so
                 * now, naming the counts. */
                snprintf (
                  probe_why, sizeof (probe_why),
                  "LOCAL_RANK=%d but this node has %d "
                  "CUDA device%s (one GPU per local rank: start at most %d rank%s "
                  "per node, or use --backend cpu)",
                  dev, n, n == 1 ? "" : "s", n, n == 1 ? "" : "s");
                fatal = 1;
                goto out;
            }
            cudaError_t se = cudaSetDevice (dev < 0 ? 0 : dev);
            if (se != cudaSuccess) {
                snprintf (probe_why, sizeof (probe_why), "cudaSetDevice(%d): %s", dev,
                          cudaGetErrorString (se));
                goto out;
            }
            cublasStatus_t s = cublasCreate (&cublas);
            if (s != CUBLAS_STATUS_SUCCESS)
                snprintf (probe_why, sizeof (probe_why), "cublasCreate: status %d",
                          (int)s);
            else {
                usable = 1;
                cuda_ops.name = "cuda";
                cuda_ops.is_device = 1;
                cuda_ops.alloc = cu_alloc;
                cuda_ops.free = cu_free;
                cuda_ops.upload = cu_upload;
                cuda_ops.download = cu_download;
                cuda_ops.copy = cu_copy;
                cuda_ops.zero = cu_zero;
                cuda_ops.sync = cu_sync;
                cuda_ops.sgemm = cu_sgemm;
                cuda_ops.bias_gelu_fwd = cu_bias_gelu_fwd;
                cuda_ops.bias_gelu_bwd = cu_bias_gelu_bwd;
                cuda_ops.bias_fwd = cu_bias_fwd;
                cuda_ops.bias_bwd = cu_bias_bwd;
                cuda_ops.embed_fwd = cu_embed_fwd;
                cuda_ops.embed_bwd = cu_embed_bwd;
                cuda_ops.softmax_ce = cu_softmax_ce;
                cuda_ops.sumsq = cu_sumsq;
                cuda_ops.scale = cu_scale;
                cuda_ops.adamw = cu_adamw;
                cuda_ops.set_bf16 = cu_set_bf16;
                dt_cuda_tfm_install (&cuda_ops);
                dt_cuda_flash_install (&cuda_ops);
            }
        }
    }
out:
    if (!usable) {
        if (why)
            snprintf (why, whylen, "%s", probe_why);
        return NULL;
    }
    return &cuda_ops;
}
