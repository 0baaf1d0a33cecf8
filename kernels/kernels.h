/* kernels.h: the compute kernels of dttrain behind one C API, two backends.
 *
 * A backend is a table of function pointers (struct dt_kern_ops).  The CPU
 * backend (kernels/cpu.c: OpenBLAS + C loops) is always built and is the
 * reference; the CUDA backend (kernels/cuda/: cuBLAS + own kernels) is built
 * with --with-cuda and chosen at run time only when a device is present
 * (kernels/backend.c is the only file that knows whether CUDA was built).
 *
 * Memory: every float/uint8 pointer passed to a kernel is "device memory" of
 * that backend, obtained from ops->alloc (host memory for the CPU backend).
 * Move data with ops->upload / ops->download.  Matrices are row-major.
 *
 * Errors: kernels return 0, or -1 with the backend's last error text in
 * ops->last_error (a CUDA or cuBLAS error string).  The CPU kernels cannot
 * fail except alloc.
 *
 * Accumulation convention: gradient outputs marked "+=" add into the
 * destination, so micro-batches accumulate without extra buffers; the caller
 * zeroes gradients at the start of a step.
 *
 * Determinism: every kernel gives bit-identical results for identical inputs
 * and sizes on the same backend (no atomics in reductions), which the
 * bit-identical resume of dttrain relies on.
 */
#ifndef DT_KERNELS_H
#define DT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct dt_kern_ops {
    const char *name; /* "cpu" or "cuda" */
    int is_device;    /* 1: pointers are GPU memory */

    /* Memory.  alloc returns zeroed memory, 64-byte aligned; NULL on error. */
    void *(*alloc) (size_t bytes);
    void (*free) (void *p);
    int (*upload) (void *dst, const void *host_src, size_t bytes);
    int (*download) (void *host_dst, const void *src, size_t bytes);
    int (*copy) (void *dst, const void *src, size_t bytes);
    int (*zero) (void *p, size_t bytes);
    int (*sync) (void); /* wait for queued work */

    /* C[M,N] = alpha * op(A) op(B) + beta * C; op(X) = X or X^T (ta/tb). */
    int (*sgemm) (int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* u[M,N] += b[N] (row broadcast), then y = gelu(u) (tanh form).
     * u keeps the pre-activation for the backward pass. */
    int (*bias_gelu_fwd) (int M, int N, float *u, const float *b, float *y);
    /* du = dy * gelu'(u); db[N] += column sums of du.  du may alias dy. */
    int (*bias_gelu_bwd) (int M, int N, const float *u, const float *dy, float *du,
                          float *db);
    /* z[M,N] += b[N]. */
    int (*bias_fwd) (int M, int N, float *z, const float *b);
    /* db[N] += column sums of dz[M,N]. */
    int (*bias_bwd) (int M, int N, const float *dz, float *db);

    /* x[B, C*E] row b = concat of emb[tok[b*C + j], 0..E) for j < C. */
    int (*embed_fwd) (int B, int C, int E, const uint8_t *tok, const float *emb,
                      float *x);
    /* demb[256,E] += scatter of dx[B, C*E] by tok (fixed order per row). */
    int (*embed_bwd) (int B, int C, int E, const uint8_t *tok, const float *dx,
                      float *demb);

    /* Fused softmax + cross-entropy over V classes for M rows:
     * loss[m] = -log softmax(logits[m])[tgt[m]]  (natural log),
     * dlogits[m] = (softmax - onehot) * scale  (may alias logits). */
    int (*softmax_ce) (int M, int V, const float *logits, const uint8_t *tgt, float scale,
                       float *loss, float *dlogits);

    /* *out = sum of x[i]^2, accumulated in double in a fixed order
     * (out is host memory). */
    int (*sumsq) (size_t n, const float *x, double *out);
    /* x *= a */
    int (*scale) (size_t n, float *x, float a);

    /* AdamW (Loshchilov & Hutter): g' = g * gscale;
     * m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
     * p -= lr * (m / bc1 / (sqrt(v / bc2) + eps) + wd * p). */
    int (*adamw) (size_t n, float *p, const float *g, float *m, float *v, float lr,
                  float b1, float b2, float eps, float wd, float bc1, float bc2,
                  float gscale);

    /* --- transformer kernels (NULL where a backend lacks them) --- */

    /* LayerNorm over each row of x[M,N] (eps DT_LN_EPS):
     * y = (x - mean) * rstd * g + b; mean[M], rstd[M] kept for backward. */
    int (*layernorm_fwd) (int M, int N, const float *x, const float *g, const float *b,
                          float *y, float *mean, float *rstd);
    /* dx += dL/dx (so a residual stream's gradient accumulates);
     * dg += column sums of dy * xhat; db += column sums of dy. */
    int (*layernorm_bwd) (int M, int N, const float *x, const float *g, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dg,
                          float *db);

    /* x[B*T, E] row (b, t) = wte[tok[b*T + t]] + wpe[t]. */
    int (*embed_pos_fwd) (int B, int T, int E, const uint8_t *tok, const float *wte,
                          const float *wpe, float *x);
    /* dwte[256,E] += scatter of dx by tok; dwpe[T,E] += sum over b (fixed order). */
    int (*embed_pos_bwd) (int B, int T, int E, const uint8_t *tok, const float *dx,
                          float *dwte, float *dwpe);

    /* Causal multi-head self-attention, NH heads of width D (E = NH*D):
     * qkv[B*T, 3E] holds q | k | v, head h in columns h*D .. h*D+D of each;
     * att[B, NH, T, T] gets the softmax probabilities of
     * q k^T / sqrt(D) with key > query masked (0 there), kept for
     * backward; out[B*T, E] = att v (head h in columns h*D ..). */
    int (*attn_fwd) (int B, int T, int NH, int D, const float *qkv, float *att,
                     float *out);
    /* dqkv[B*T, 3E] = gradient (overwritten) given dout; work: scratch of
     * B*NH*T*T floats. */
    int (*attn_bwd) (int B, int T, int NH, int D, const float *qkv, const float *att,
                     const float *dout, float *dqkv, float *work);

    /* --- optional: flash attention, bf16 GEMMs (NULL where a backend
     * lacks them; the CPU backend does) --- */

    /* As attn_fwd, without the probabilities: tiles of q, k and v in fast
     * memory, an online softmax (running maximum and sum), so no
     * [T, T] matrix is ever stored; lse[B, NH, T] gets each query's
     * log-sum-exp of its scaled, masked scores, for backward.  Head width
     * D <= DT_ATTN_FLASH_MAX_D. */
    int (*attn_flash_fwd) (int B, int T, int NH, int D, const float *qkv, float *lse,
                           float *out);
    /* dqkv[B*T, 3E] = gradient (overwritten) given dout, recomputing the
     * probabilities tile by tile from qkv and lse; out: attn_flash_fwd's
     * output; work: scratch of B*NH*T floats. */
    int (*attn_flash_bwd) (int B, int T, int NH, int D, const float *qkv,
                           const float *out, const float *lse, const float *dout,
                           float *dqkv, float *work);

    /* on = 1: sgemm rounds A and B to bf16 (round to nearest even) and
     * multiplies on the tensor cores, accumulating in fp32 into the fp32 C;
     * on = 0: fp32 again.  0 or -1. */
    int (*set_bf16) (int on);

    char last_error[256];
};

/* The widest head attn_flash_* take. */
#define DT_ATTN_FLASH_MAX_D 128

/* LayerNorm's epsilon (PyTorch's default). */
#define DT_LN_EPS 1e-5f

/* The CPU backend (always available).  Borrowed, static. */
struct dt_kern_ops *dt_kern_cpu (void);

/* Select a backend: "auto" (CUDA if built and a device is present, else
 * CPU), "cpu" or "cuda" (error if unavailable).  On error returns NULL and
 * writes why into err.  Borrowed, static. */
struct dt_kern_ops *dt_kern_select (const char *want, char *err, size_t errlen);

/* 1 if the CUDA backend is built and a device is present.  Fills why
 * (when non-NULL) with the reason it is not. */
int dt_kern_cuda_available (char *why, size_t whylen);

/* The CUDA backend, or NULL when not built or no device.  Borrowed. */
struct dt_kern_ops *dt_kern_cuda (void);

/* The data-sheet peak FLOP/s of the CUDA device this rank uses, dense, of
 * fp32 GEMMs on its CUDA cores (bf16 0) or bf16 GEMMs on its tensor cores
 * (bf16 1): from a table of known parts by name (H100, H200, A100, L40S),
 * else from its properties (SMs x peak clock x FLOPs per SM and clock of
 * its compute capability).  Writes the device's name into name (may be
 * NULL).  0 when CUDA is not built, there is no device, or the
 * architecture is not known. */
double dt_kern_cuda_peak_flops (int bf16, char *name, size_t namelen);

/* CPU backend: number of OpenBLAS threads (default 1: two ranks on two
 * cores must not oversubscribe). */
void dt_kern_cpu_set_threads (int n);

/* OpenBLAS 0.3.21's DYNAMIC_ARCH does not recognise some recent CPUs (seen:
 * a Sapphire-Rapids-class VM reporting "Intel(R) Xeon(R) Processor") and
 * falls back to its Prescott (SSE3) kernels, 4-5x slower.  Returns the
 * OPENBLAS_CORETYPE to use instead ("SkylakeX" with AVX-512, "Haswell" with
 * AVX2+FMA), or NULL when the detected core is fine or the user set
 * OPENBLAS_CORETYPE.  The variable is read when OpenBLAS loads, so the
 * caller must re-exec itself to apply it. */
const char *dt_kern_cpu_better_coretype (void);

/* OpenBLAS's core name ("SkylakeX", "Haswell", ...): results are bit-
 * reproducible only on the same core type.  Static storage. */
const char *dt_kern_cpu_corename (void);

/* The numerics identity of a backend: what a bit-identical resume depends
 * on.  Each writes a JSON object's members (no braces) into buf, e.g.
 * "\"blas\": \"OpenBLAS\", \"blas_version\": \"0.3.21\", ...", and
 * returns 0, or -1 when buf is too small.  CPU: the BLAS library, its
 * version, its core type (OpenBLAS's kernels) and threads.  CUDA: the
 * device's name and compute capability, the driver's and runtime's CUDA
 * versions, cuBLAS's and NCCL's (-1 when the backend is not built or no
 * device is used). */
int dt_kern_cpu_identity (char *buf, size_t len);
int dt_kern_cuda_identity (char *buf, size_t len);

/* The tanh-form GELU used by every backend (for reference code and tests). */
float dt_gelu (float x);
float dt_gelu_grad (float x);

#ifdef __cplusplus
}
#endif
#endif
