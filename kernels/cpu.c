/* cpu.c: the CPU backend of the kernels - OpenBLAS for GEMM, C loops for the rest.
 *
 * This is the reference the CUDA backend is tested against.  Every loop runs
 * in a fixed order, so results are bit-identical from run to run (OpenBLAS
 * is deterministic when single-threaded, which is the default here).
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/cpu_exp.h"
#include "kernels/cpu_tfm.h"
#include "kernels/kernels.h"

/* The element-wise loops are compiled at O3 and cloned for AVX-512, AVX2
 * and baseline x86-64 (chosen once at load by the CPU): each machine always
 * runs the same clone, so results stay bit-reproducible on it. */
#pragma GCC optimize("O3")
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__ ((target_clones ("avx512f", "avx2,fma", "default")))
#else
#define HOT
#endif

/* sqrt(2/pi), the constant of the tanh approximation of GELU. */
#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f

/* tanh as a 13/6 rational function on [-7.9988, 7.9988] (Eigen's ptanh
 * coefficients): within a few ulp of tanhf, and it vectorises (libm's tanhf
 * was a third of the step time).  The CUDA backend uses the same formula. */
static inline float fast_tanh (float x)
{
    const float c = 7.99881172180175781f;
    float ax = x < 0 ? -x : x;
    x = x > c ? c : (x < -c ? -c : x);
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

static inline float gelu_f (float x)
{
    float t = fast_tanh (GELU_K0 * (x + GELU_K1 * x * x * x));
    return 0.5f * x * (1.0f + t);
}

static inline float gelu_grad_f (float x)
{
    float x2 = x * x;
    float t = fast_tanh (GELU_K0 * (x + GELU_K1 * x2 * x));
    float dt = (1.0f - t * t) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * x2);
    return 0.5f * (1.0f + t) + 0.5f * x * dt;
}

float dt_gelu (float x)
{
    return gelu_f (x);
}

float dt_gelu_grad (float x)
{
    return gelu_grad_f (x);
}

static void *cpu_alloc (size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc (64, n ? n : 64);
    if (p)
        memset (p, 0, n ? n : 64);
    return p;
}

static void cpu_free (void *p)
{
    free (p);
}

static int cpu_copy (void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove (dst, src, bytes);
    return 0;
}

static int cpu_zero (void *p, size_t bytes)
{
    if (bytes)
        memset (p, 0, bytes);
    return 0;
}

static int cpu_sync (void)
{
    return 0;
}

static int cpu_sgemm (int ta, int tb, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm (CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                 tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                 ldc);
    return 0;
}

HOT static int cpu_bias_gelu_fwd (int M, int N, float *u, const float *b, float *y)
{
    for (int i = 0; i < M; i++) {
        float *ur = u + (size_t)i * N;
        float *yr = y + (size_t)i * N;
        for (int j = 0; j < N; j++) {
            float x = ur[j] + b[j];
            ur[j] = x;
            yr[j] = gelu_f (x);
        }
    }
    return 0;
}

HOT static int cpu_bias_gelu_bwd (int M, int N, const float *u, const float *dy,
                                  float *du, float *db)
{
    for (int i = 0; i < M; i++) {
        const float *ur = u + (size_t)i * N;
        const float *dyr = dy + (size_t)i * N;
        float *dur = du + (size_t)i * N;
        for (int j = 0; j < N; j++) {
            float g = dyr[j] * gelu_grad_f (ur[j]);
            dur[j] = g;
            db[j] += g;
        }
    }
    return 0;
}

HOT static int cpu_bias_fwd (int M, int N, float *z, const float *b)
{
    for (int i = 0; i < M; i++) {
        float *zr = z + (size_t)i * N;
        for (int j = 0; j < N; j++)
            zr[j] += b[j];
    }
    return 0;
}

HOT static int cpu_bias_bwd (int M, int N, const float *dz, float *db)
{
    for (int i = 0; i < M; i++) {
        const float *zr = dz + (size_t)i * N;
        for (int j = 0; j < N; j++)
            db[j] += zr[j];
    }
    return 0;
}

static int cpu_embed_fwd (int B, int C, int E, const uint8_t *tok, const float *emb,
                          float *x)
{
    for (int b = 0; b < B; b++)
        for (int j = 0; j < C; j++)
            memcpy (x + ((size_t)b * C + j) * E, emb + (size_t)tok[(size_t)b * C + j] * E,
                    sizeof (float) * E);
    return 0;
}

HOT static int cpu_embed_bwd (int B, int C, int E, const uint8_t *tok, const float *dx,
                              float *demb)
{
    for (int b = 0; b < B; b++)
        for (int j = 0; j < C; j++) {
            float *d = demb + (size_t)tok[(size_t)b * C + j] * E;
            const float *s = dx + ((size_t)b * C + j) * E;
            for (int e = 0; e < E; e++)
                d[e] += s[e];
        }
    return 0;
}

/* The exponentials are computed once, into dlogits (vectorised), then
 * summed in 16 fixed partial sums: deterministic, and a quarter of the
 * time of two passes of libm's expf. */
HOT static int cpu_softmax_ce (int M, int V, const float *logits, const uint8_t *tgt,
                               float scale, float *loss, float *dlogits)
{
    for (int i = 0; i < M; i++) {
        const float *l = logits + (size_t)i * V;
        float *d = dlogits + (size_t)i * V;
        float pm[16], ps[16] = { 0 };
        int j = 0;
        for (int k = 0; k < 16; k++)
            pm[k] = l[0];
        for (; j + 16 <= V; j += 16)
            for (int k = 0; k < 16; k++)
                pm[k] = l[j + k] > pm[k] ? l[j + k] : pm[k];
        for (int k = 0; j + k < V; k++)
            pm[k] = l[j + k] > pm[k] ? l[j + k] : pm[k];
        float mx = pm[0];
        for (int k = 1; k < 16; k++)
            mx = pm[k] > mx ? pm[k] : mx;
        float lt = l[tgt[i]]; /* before d (which may alias l) is written */
        for (j = 0; j < V; j++)
            d[j] = dt_fast_exp (l[j] - mx);
        for (j = 0; j + 16 <= V; j += 16)
            for (int k = 0; k < 16; k++)
                ps[k] += d[j + k];
        for (int k = 0; j + k < V; k++)
            ps[k] += d[j + k];
        float sum = 0.0f;
        for (int k = 0; k < 16; k++)
            sum += ps[k];
        loss[i] = mx + logf (sum) - lt;
        float f = scale / sum;
        for (j = 0; j < V; j++)
            d[j] *= f;
        d[tgt[i]] -= scale;
    }
    return 0;
}

HOT static int cpu_sumsq (size_t n, const float *x, double *out)
{
    /* 8 partial sums in a fixed order: vectorises, and stays deterministic. */
    double p[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            p[j] += (double)x[i + j] * x[i + j];
    double s = 0.0;
    for (; i < n; i++)
        s += (double)x[i] * x[i];
    *out = s + (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])));
    return 0;
}

HOT static int cpu_scale (size_t n, float *x, float a)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
    return 0;
}

HOT static int cpu_adamw (size_t n, float *p, const float *g, float *m, float *v,
                          float lr, float b1, float b2, float eps, float wd, float bc1,
                          float bc2, float gscale)
{
    float ib1 = 1.0f / bc1, ib2 = 1.0f / bc2;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= lr * (mi * ib1 / (sqrtf (vi * ib2) + eps) + wd * p[i]);
    }
    return 0;
}

static struct dt_kern_ops cpu_ops = {
    .name = "cpu",
    .is_device = 0,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .sgemm = cpu_sgemm,
    .bias_gelu_fwd = cpu_bias_gelu_fwd,
    .bias_gelu_bwd = cpu_bias_gelu_bwd,
    .bias_fwd = cpu_bias_fwd,
    .bias_bwd = cpu_bias_bwd,
    .embed_fwd = cpu_embed_fwd,
    .embed_bwd = cpu_embed_bwd,
    .softmax_ce = cpu_softmax_ce,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .adamw = cpu_adamw,
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .embed_pos_fwd = cpu_embed_pos_fwd,
    .embed_pos_bwd = cpu_embed_pos_bwd,
    .attn_fwd = cpu_attn_fwd,
    .attn_bwd = cpu_attn_bwd,
};

static int cpu_threads_set;

void dt_kern_cpu_set_threads (int n)
{
    openblas_set_num_threads (n > 0 ? n : 1);
    cpu_threads_set = 1;
}

const char *dt_kern_cpu_corename (void)
{
    const char *core = openblas_get_corename ();
    return core ? core : "unknown";
}

const char *dt_kern_cpu_better_coretype (void)
{
    const char *core = openblas_get_corename ();
    if (getenv ("OPENBLAS_CORETYPE") || !core || strcasecmp (core, "prescott") != 0)
        return NULL;
    __builtin_cpu_init ();
    if (__builtin_cpu_supports ("avx512f"))
        return "SkylakeX";
    if (__builtin_cpu_supports ("avx2") && __builtin_cpu_supports ("fma"))
        return "Haswell";
    return NULL;
}

int dt_kern_cpu_identity (char *buf, size_t len)
{
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" */
    char lib[32] = "OpenBLAS", ver[32] = "unknown";
    const char *conf = openblas_get_config ();
    if (conf)
        sscanf (conf, "%31s %31s", lib, ver);
    int n = snprintf (buf, len,
                      "\"blas\": \"%s\", \"blas_version\": \"%s\", "
                      "\"blas_core\": \"%s\", \"blas_threads\": %d",
                      lib, ver, dt_kern_cpu_corename (), openblas_get_num_threads ());
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

struct dt_kern_ops *dt_kern_cpu (void)
{
    /* Single-threaded unless told otherwise: two ranks share two cores. */
    if (!cpu_threads_set)
        dt_kern_cpu_set_threads (1);
    return &cpu_ops;
}
