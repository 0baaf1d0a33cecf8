/* test_cuda.c: CUDA-versus-CPU parity of every kernel, flash attention against the
 * simple path, bf16 GEMMs (skips, exit 77, without a GPU). */
#include <config.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/unit/unit.h"

static struct dt_kern_ops *cpu, *gpu;
static uint64_t rng = 0x2545F4914F6CDD1DULL;

static float urand (void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static float *rnd (size_t n, float a)
{
    float *x = malloc (n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = a * urand ();
    return x;
}

/* Device copy of a host array. */
static void *dev (const void *h, size_t bytes)
{
    void *d = gpu->alloc (bytes);
    CU_ASSERT_PTR_NOT_NULL_FATAL (d);
    CU_ASSERT_EQUAL_FATAL (gpu->upload (d, h, bytes), 0);
    return d;
}

static int parity (const char *what, const float *c, void *d, size_t n, double rtol,
                   double atol)
{
    float *g = malloc (n * 4);
    int ok = 1;
    size_t wi = 0;
    double worst = 0;
    CU_ASSERT_EQUAL_FATAL (gpu->download (g, d, n * 4), 0);
    for (size_t i = 0; i < n; i++) {
        double diff = fabs ((double)g[i] - c[i]), lim = atol + rtol * fabs (c[i]);
        if (diff / lim > worst)
            worst = diff / lim, wi = i;
        if (!(diff <= lim))
            ok = 0;
    }
    if (!ok)
        fprintf (stderr, "%s: element %zu cuda %.9g cpu %.9g\n", what, wi, g[wi], c[wi]);
    free (g);
    return ok;
}

static void test_sgemm (void)
{
    int shapes[][5] = { { 0, 0, 64, 96, 80 },
                        { 0, 1, 33, 17, 65 },
                        { 1, 0, 48, 256, 31 } };
    for (int s = 0; s < 3; s++) {
        int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3],
            K = shapes[s][4];
        int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = rnd ((size_t)M * K, 1), *B = rnd ((size_t)K * N, 1),
              *C = rnd ((size_t)M * N, 1);
        void *dA = dev (A, (size_t)M * K * 4), *dB = dev (B, (size_t)K * N * 4),
             *dC = dev (C, (size_t)M * N * 4);
        CU_ASSERT_EQUAL (cpu->sgemm (ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, N),
                         0);
        CU_ASSERT_EQUAL (
          gpu->sgemm (ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 1.0f, dC, N), 0);
        CU_ASSERT (parity ("sgemm", C, dC, (size_t)M * N, 1e-4, 1e-4));
        gpu->free (dA), gpu->free (dB), gpu->free (dC);
        free (A), free (B), free (C);
    }
}

static void test_bias_gelu (void)
{
    enum { M = 37, N = 300 };
    float *u = rnd (M * N, 3), *b = rnd (N, 1), *y = rnd (M * N, 1), *dy = rnd (M * N, 1);
    float *db = rnd (N, 1);
    float *du = malloc (M * N * 4);
    void *du_ = dev (u, M * N * 4), *db_ = dev (b, N * 4), *dy_ = dev (y, M * N * 4);
    void *ddy = dev (dy, M * N * 4), *ddb = dev (db, N * 4), *ddu = dev (u, M * N * 4);
    CU_ASSERT_EQUAL (cpu->bias_gelu_fwd (M, N, u, b, y), 0);
    CU_ASSERT_EQUAL (gpu->bias_gelu_fwd (M, N, du_, db_, dy_), 0);
    CU_ASSERT (parity ("bias_gelu_fwd u", u, du_, M * N, 1e-6, 1e-6));
    CU_ASSERT (parity ("bias_gelu_fwd y", y, dy_, M * N, 1e-5, 1e-6));
    CU_ASSERT_EQUAL (cpu->bias_gelu_bwd (M, N, u, dy, du, db), 0);
    CU_ASSERT_EQUAL (gpu->bias_gelu_bwd (M, N, du_, ddy, ddu, ddb), 0);
    CU_ASSERT (parity ("bias_gelu_bwd du", du, ddu, M * N, 1e-5, 1e-6));
    CU_ASSERT (parity ("bias_gelu_bwd db", db, ddb, N, 1e-4, 1e-5));
    CU_ASSERT_EQUAL (cpu->bias_fwd (M, N, u, b), 0);
    CU_ASSERT_EQUAL (gpu->bias_fwd (M, N, du_, db_), 0);
    CU_ASSERT (parity ("bias_fwd", u, du_, M * N, 1e-6, 1e-6));
    CU_ASSERT_EQUAL (cpu->bias_bwd (M, N, dy, db), 0);
    CU_ASSERT_EQUAL (gpu->bias_bwd (M, N, ddy, ddb), 0);
    CU_ASSERT (parity ("bias_bwd", db, ddb, N, 1e-4, 1e-5));
    gpu->free (du_), gpu->free (db_), gpu->free (dy_), gpu->free (ddy), gpu->free (ddb),
      gpu->free (ddu);
    free (u), free (b), free (y), free (dy), free (db), free (du);
}

static void test_embed (void)
{
    enum { B = 9, C = 16, E = 24 };
    uint8_t tok[B * C];
    for (int i = 0; i < B * C; i++)
        tok[i] = (uint8_t)((i * 131 + 7) % 40); /* many repeats */
    float *emb = rnd (256 * E, 1), *x = rnd (B * C * E, 1), *dx = rnd (B * C * E, 1);
    float *demb = rnd (256 * E, 1);
    void *dtok = dev (tok, sizeof (tok)), *demb_ = dev (emb, 256 * E * 4);
    void *dx_ = dev (x, B * C * E * 4), *ddx = dev (dx, B * C * E * 4),
         *ddemb = dev (demb, 256 * E * 4);
    CU_ASSERT_EQUAL (cpu->embed_fwd (B, C, E, tok, emb, x), 0);
    CU_ASSERT_EQUAL (gpu->embed_fwd (B, C, E, dtok, demb_, dx_), 0);
    CU_ASSERT (parity ("embed_fwd", x, dx_, B * C * E, 0, 1e-30));
    CU_ASSERT_EQUAL (cpu->embed_bwd (B, C, E, tok, dx, demb), 0);
    CU_ASSERT_EQUAL (gpu->embed_bwd (B, C, E, dtok, ddx, ddemb), 0);
    CU_ASSERT (parity ("embed_bwd", demb, ddemb, 256 * E, 1e-5, 1e-6));
    gpu->free (dtok), gpu->free (demb_), gpu->free (dx_), gpu->free (ddx),
      gpu->free (ddemb);
    free (emb), free (x), free (dx), free (demb);
}

static void test_softmax_ce (void)
{
    enum { M = 50, V = 256 };
    uint8_t tgt[M];
    for (int i = 0; i < M; i++)
        tgt[i] = (uint8_t)(i * 53);
    float *lg = rnd (M * V, 6), *loss = malloc (M * 4), *dl = malloc (M * V * 4);
    void *dlg = dev (lg, M * V * 4), *dtgt = dev (tgt, M), *dloss = gpu->alloc (M * 4);
    CU_ASSERT_EQUAL (cpu->softmax_ce (M, V, lg, tgt, 1.0f / 64, loss, dl), 0);
    CU_ASSERT_EQUAL (gpu->softmax_ce (M, V, dlg, dtgt, 1.0f / 64, dloss, dlg), 0);
    CU_ASSERT (parity ("softmax_ce loss", loss, dloss, M, 1e-5, 1e-5));
    CU_ASSERT (parity ("softmax_ce dlogits", dl, dlg, M * V, 1e-4, 1e-8));
    gpu->free (dlg), gpu->free (dtgt), gpu->free (dloss);
    free (lg), free (loss), free (dl);
}

static void test_adamw_sumsq (void)
{
    enum { N = 100003 };
    float *p = rnd (N, 1), *g = rnd (N, 1), *m = rnd (N, 0.1f), *v = rnd (N, 0.01f);
    for (int i = 0; i < N; i++)
        v[i] = fabsf (v[i]);
    void *dp = dev (p, N * 4), *dg = dev (g, N * 4), *dm = dev (m, N * 4),
         *dv = dev (v, N * 4);
    double sc, sg, sg2;
    CU_ASSERT_EQUAL (cpu->sumsq (N, g, &sc), 0);
    CU_ASSERT_EQUAL (gpu->sumsq (N, dg, &sg), 0);
    CU_ASSERT_EQUAL (gpu->sumsq (N, dg, &sg2), 0);
    CU_ASSERT (fabs (sc - sg) <= 1e-12 * sc);
    CU_ASSERT (sg == sg2); /* deterministic */
    CU_ASSERT_EQUAL (
      cpu->adamw (N, p, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.19f, 0.002f, 0.7f),
      0);
    CU_ASSERT_EQUAL (gpu->adamw (N, dp, dg, dm, dv, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                                 0.19f, 0.002f, 0.7f),
                     0);
    CU_ASSERT (parity ("adamw p", p, dp, N, 1e-5, 1e-6));
    CU_ASSERT (parity ("adamw m", m, dm, N, 1e-5, 1e-7));
    CU_ASSERT (parity ("adamw v", v, dv, N, 1e-5, 1e-9));
    CU_ASSERT_EQUAL (cpu->scale (N, p, 0.5f), 0);
    CU_ASSERT_EQUAL (gpu->scale (N, dp, 0.5f), 0);
    CU_ASSERT (parity ("scale", p, dp, N, 1e-5, 1e-6));
    gpu->free (dp), gpu->free (dg), gpu->free (dm), gpu->free (dv);
    free (p), free (g), free (m), free (v);
}

/* ---- transformer kernels ---- */

static void test_layernorm (void)
{
    enum { M = 70, N = 200 };
    float *x = rnd (M * N, 3), *g = rnd (N, 1), *b = rnd (N, 1), *dy = rnd (M * N, 1);
    float *y = malloc (M * N * 4), *mean = malloc (M * 4), *rstd = malloc (M * 4);
    float *dx = rnd (M * N, 1), *dg = rnd (N, 1), *db = rnd (N, 1);
    void *dx_ = dev (x, M * N * 4), *dg_ = dev (g, N * 4), *db_ = dev (b, N * 4);
    void *ddy = dev (dy, M * N * 4), *dy_ = gpu->alloc (M * N * 4),
         *dmean = gpu->alloc (M * 4);
    void *drstd = gpu->alloc (M * 4), *ddx = dev (dx, M * N * 4), *ddg = dev (dg, N * 4);
    void *ddb = dev (db, N * 4);
    CU_ASSERT_EQUAL (cpu->layernorm_fwd (M, N, x, g, b, y, mean, rstd), 0);
    CU_ASSERT_EQUAL (gpu->layernorm_fwd (M, N, dx_, dg_, db_, dy_, dmean, drstd), 0);
    CU_ASSERT (parity ("layernorm_fwd y", y, dy_, M * N, 1e-5, 1e-5));
    CU_ASSERT (parity ("layernorm_fwd rstd", rstd, drstd, M, 1e-5, 1e-7));
    CU_ASSERT_EQUAL (cpu->layernorm_bwd (M, N, x, g, mean, rstd, dy, dx, dg, db), 0);
    CU_ASSERT_EQUAL (
      gpu->layernorm_bwd (M, N, dx_, dg_, dmean, drstd, ddy, ddx, ddg, ddb), 0);
    CU_ASSERT (parity ("layernorm_bwd dx (+=)", dx, ddx, M * N, 1e-4, 1e-5));
    CU_ASSERT (parity ("layernorm_bwd dg", dg, ddg, N, 1e-4, 1e-4));
    CU_ASSERT (parity ("layernorm_bwd db", db, ddb, N, 1e-4, 1e-4));
    gpu->free (dx_), gpu->free (dg_), gpu->free (db_), gpu->free (ddy), gpu->free (dy_);
    gpu->free (dmean), gpu->free (drstd), gpu->free (ddx), gpu->free (ddg),
      gpu->free (ddb);
    free (x), free (g), free (b), free (dy), free (y), free (mean), free (rstd);
    free (dx), free (dg), free (db);
}

static void test_embed_pos (void)
{
    enum { B = 5, T = 33, E = 40 };
    uint8_t tok[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (uint8_t)((i * 97 + 3) % 50);
    float *wte = rnd (256 * E, 1), *wpe = rnd (T * E, 1), *x = malloc (B * T * E * 4);
    float *dx = rnd (B * T * E, 1), *dwte = rnd (256 * E, 1), *dwpe = rnd (T * E, 1);
    void *dtok = dev (tok, sizeof (tok)), *dwte_ = dev (wte, 256 * E * 4),
         *dwpe_ = dev (wpe, T * E * 4);
    void *dx_ = gpu->alloc (B * T * E * 4), *ddx = dev (dx, B * T * E * 4);
    void *ddwte = dev (dwte, 256 * E * 4), *ddwpe = dev (dwpe, T * E * 4);
    CU_ASSERT_EQUAL (cpu->embed_pos_fwd (B, T, E, tok, wte, wpe, x), 0);
    CU_ASSERT_EQUAL (gpu->embed_pos_fwd (B, T, E, dtok, dwte_, dwpe_, dx_), 0);
    CU_ASSERT (parity ("embed_pos_fwd", x, dx_, B * T * E, 0, 1e-30));
    CU_ASSERT_EQUAL (cpu->embed_pos_bwd (B, T, E, tok, dx, dwte, dwpe), 0);
    CU_ASSERT_EQUAL (gpu->embed_pos_bwd (B, T, E, dtok, ddx, ddwte, ddwpe), 0);
    CU_ASSERT (parity ("embed_pos_bwd dwte", dwte, ddwte, 256 * E, 1e-5, 1e-6));
    CU_ASSERT (parity ("embed_pos_bwd dwpe", dwpe, ddwpe, T * E, 1e-5, 1e-6));
    gpu->free (dtok), gpu->free (dwte_), gpu->free (dwpe_), gpu->free (dx_),
      gpu->free (ddx);
    gpu->free (ddwte), gpu->free (ddwpe);
    free (wte), free (wpe), free (x), free (dx), free (dwte), free (dwpe);
}

/* Both backends, several shapes: a head width that is not a multiple of
 * anything, a context longer than a warp, large scores. */
static void test_attention (void)
{
    int shapes[][5] = { { 2, 7, 3, 5, 1 }, { 3, 65, 4, 16, 1 }, { 1, 130, 2, 32, 8 } };
    for (int s = 0; s < 3; s++) {
        int B = shapes[s][0], T = shapes[s][1], NH = shapes[s][2], D = shapes[s][3];
        float a = (float)shapes[s][4];
        int E = NH * D;
        size_t nq = (size_t)B * T * 3 * E, no = (size_t)B * T * E,
               na = (size_t)B * NH * T * T;
        float *qkv = rnd (nq, a), *dout = rnd (no, 1), *att = malloc (na * 4),
              *out = malloc (no * 4);
        float *dqkv = malloc (nq * 4), *work = malloc (na * 4);
        void *dq = dev (qkv, nq * 4), *ddout = dev (dout, no * 4),
             *datt = gpu->alloc (na * 4);
        void *dout_ = gpu->alloc (no * 4), *ddq = gpu->alloc (nq * 4),
             *dwork = gpu->alloc (na * 4);
        CU_ASSERT_EQUAL (cpu->attn_fwd (B, T, NH, D, qkv, att, out), 0);
        CU_ASSERT_EQUAL (gpu->attn_fwd (B, T, NH, D, dq, datt, dout_), 0);
        CU_ASSERT (parity ("attn_fwd att", att, datt, na, 1e-4, 1e-6));
        CU_ASSERT (parity ("attn_fwd out", out, dout_, no, 1e-4, 1e-5));
        CU_ASSERT_EQUAL (cpu->attn_bwd (B, T, NH, D, qkv, att, dout, dqkv, work), 0);
        CU_ASSERT_EQUAL (gpu->attn_bwd (B, T, NH, D, dq, datt, ddout, ddq, dwork), 0);
        CU_ASSERT (parity ("attn_bwd dqkv", dqkv, ddq, nq, 1e-3, 1e-4 * a));
        gpu->free (dq), gpu->free (ddout), gpu->free (datt), gpu->free (dout_),
          gpu->free (ddq);
        gpu->free (dwork);
        free (qkv), free (dout), free (att), free (out), free (dqkv), free (work);
    }
}

/* The log-sum-exp of each query's scaled, masked scores, in double on the
 * host: what attn_flash_fwd keeps for backward. */
static void host_lse (int B, int T, int NH, int D, const float *qkv, float *lse)
{
    int E = NH * D, E3 = 3 * E;
    double scale = 1.0 / sqrt ((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * E3 + (size_t)h * D;
                double mx = -INFINITY, s = 0.0, sc[512];
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * E3 + E + (size_t)h * D;
                    double d = 0.0;
                    for (int c = 0; c < D; c++)
                        d += (double)q[c] * k[c];
                    sc[j] = d * scale;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j <= i; j++)
                    s += exp (sc[j] - mx);
                lse[((size_t)b * NH + h) * T + i] = (float)(mx + log (s));
            }
}

/* Flash attention against the CPU's simple path (the reference) and the
 * GPU's simple path: shapes with one partial tile, several tiles, a head
 * width of each of the kernels' four register widths (up to 128), large
 * scores; and bit-identical twice. */
static void test_attention_flash (void)
{
    int shapes[][5] = { { 2, 7, 3, 5, 1 },    { 3, 65, 4, 16, 1 }, { 1, 130, 2, 32, 8 },
                        { 2, 100, 2, 64, 1 }, { 1, 33, 2, 96, 1 }, { 1, 70, 1, 128, 2 } };
    CU_ASSERT_PTR_NOT_NULL_FATAL (gpu->attn_flash_fwd);
    CU_ASSERT_PTR_NOT_NULL_FATAL (gpu->attn_flash_bwd);
    for (int s = 0; s < 6; s++) {
        int B = shapes[s][0], T = shapes[s][1], NH = shapes[s][2], D = shapes[s][3];
        float a = (float)shapes[s][4];
        int E = NH * D;
        size_t nq = (size_t)B * T * 3 * E, no = (size_t)B * T * E,
               na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T;
        float *qkv = rnd (nq, a), *dout = rnd (no, 1), *att = malloc (na * 4),
              *out = malloc (no * 4), *dqkv = malloc (nq * 4), *work = malloc (na * 4),
              *lse = malloc (nl * 4), *g1 = malloc (nq * 4), *g2 = malloc (nq * 4);
        void *dq = dev (qkv, nq * 4), *ddout = dev (dout, no * 4);
        void *fo = gpu->alloc (no * 4), *flse = gpu->alloc (nl * 4),
             *fdq = gpu->alloc (nq * 4), *fwork = gpu->alloc (nl * 4);
        void *so = gpu->alloc (no * 4), *satt = gpu->alloc (na * 4),
             *sdq = gpu->alloc (nq * 4), *swork = gpu->alloc (na * 4);
        char what[64];

        /* CPU simple path, GPU simple path, GPU flash */
        CU_ASSERT_EQUAL (cpu->attn_fwd (B, T, NH, D, qkv, att, out), 0);
        CU_ASSERT_EQUAL (cpu->attn_bwd (B, T, NH, D, qkv, att, dout, dqkv, work), 0);
        host_lse (B, T, NH, D, qkv, lse);
        CU_ASSERT_EQUAL (gpu->attn_fwd (B, T, NH, D, dq, satt, so), 0);
        CU_ASSERT_EQUAL (gpu->attn_bwd (B, T, NH, D, dq, satt, ddout, sdq, swork), 0);
        CU_ASSERT_EQUAL (gpu->attn_flash_fwd (B, T, NH, D, dq, flse, fo), 0);
        CU_ASSERT_EQUAL (
          gpu->attn_flash_bwd (B, T, NH, D, dq, fo, flse, ddout, fdq, fwork), 0);
        snprintf (what, sizeof (what), "shape %d: flash out vs cpu", s);
        CU_ASSERT (parity (what, out, fo, no, 1e-4, 1e-5));
        snprintf (what, sizeof (what), "shape %d: flash lse vs host", s);
        CU_ASSERT (parity (what, lse, flse, nl, 1e-5, 1e-5));
        snprintf (what, sizeof (what), "shape %d: flash dqkv vs cpu", s);
        CU_ASSERT (parity (what, dqkv, fdq, nq, 1e-3, 1e-4 * a));
        /* flash against the GPU's simple path */
        CU_ASSERT_EQUAL_FATAL (gpu->download (out, so, no * 4), 0);
        CU_ASSERT_EQUAL_FATAL (gpu->download (dqkv, sdq, nq * 4), 0);
        snprintf (what, sizeof (what), "shape %d: flash out vs simple", s);
        CU_ASSERT (parity (what, out, fo, no, 1e-4, 1e-5));
        snprintf (what, sizeof (what), "shape %d: flash dqkv vs simple", s);
        CU_ASSERT (parity (what, dqkv, fdq, nq, 1e-3, 1e-4 * a));
        /* run to run: bit for bit */
        CU_ASSERT_EQUAL_FATAL (gpu->download (g1, fdq, nq * 4), 0);
        CU_ASSERT_EQUAL (gpu->attn_flash_fwd (B, T, NH, D, dq, flse, fo), 0);
        CU_ASSERT_EQUAL (
          gpu->attn_flash_bwd (B, T, NH, D, dq, fo, flse, ddout, fdq, fwork), 0);
        CU_ASSERT_EQUAL_FATAL (gpu->download (g2, fdq, nq * 4), 0);
        CU_ASSERT (memcmp (g1, g2, nq * 4) == 0);

        gpu->free (dq), gpu->free (ddout), gpu->free (fo), gpu->free (flse);
        gpu->free (fdq), gpu->free (fwork), gpu->free (so), gpu->free (satt);
        gpu->free (sdq), gpu->free (swork);
        free (qkv), free (dout), free (att), free (out), free (dqkv), free (work);
        free (lse), free (g1), free (g2);
    }
    /* a head wider than the kernels take: an error, not a wrong answer */
    CU_ASSERT_EQUAL (
      gpu->attn_flash_fwd (1, 4, 1, DT_ATTN_FLASH_MAX_D + 1, NULL, NULL, NULL), -1);
}

/* x rounded to bfloat16 (to nearest even), as __float2bfloat16. */
static float bf16_round (float x)
{
    uint32_t u;
    memcpy (&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy (&x, &u, 4);
    return x;
}

/* bf16 GEMMs: the CPU's fp32 GEMM of the bf16-rounded inputs (the products
 * of two bf16 numbers are exact in fp32, so only the summation order
 * differs), and near the unrounded fp32 product; fp32 again after. */
static void test_sgemm_bf16 (void)
{
    int shapes[][5] = { { 0, 0, 64, 96, 80 },
                        { 0, 1, 33, 17, 65 },
                        { 1, 0, 48, 256, 31 },
                        { 1, 1, 20, 40, 24 } };
    CU_ASSERT_PTR_NOT_NULL_FATAL (gpu->set_bf16);
    for (int s = 0; s < 4; s++) {
        int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3],
            K = shapes[s][4];
        int lda = ta ? M : K, ldb = tb ? K : N;
        size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
        float *A = rnd (na, 1), *B = rnd (nb, 1), *C0 = rnd (nc, 1);
        float *Ar = malloc (na * 4), *Br = malloc (nb * 4), *Cr = malloc (nc * 4),
              *Cf = malloc (nc * 4);
        for (size_t i = 0; i < na; i++)
            Ar[i] = bf16_round (A[i]);
        for (size_t i = 0; i < nb; i++)
            Br[i] = bf16_round (B[i]);
        memcpy (Cr, C0, nc * 4);
        memcpy (Cf, C0, nc * 4);
        void *dA = dev (A, na * 4), *dB = dev (B, nb * 4), *dC = dev (C0, nc * 4);
        CU_ASSERT_EQUAL (
          cpu->sgemm (ta, tb, M, N, K, 0.5f, Ar, lda, Br, ldb, 1.0f, Cr, N), 0);
        CU_ASSERT_EQUAL (cpu->sgemm (ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, Cf, N),
                         0);
        CU_ASSERT_EQUAL (gpu->set_bf16 (1), 0);
        CU_ASSERT_EQUAL (
          gpu->sgemm (ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, 1.0f, dC, N), 0);
        CU_ASSERT_EQUAL (gpu->set_bf16 (0), 0);
        CU_ASSERT (
          parity ("sgemm bf16 vs cpu on rounded inputs", Cr, dC, nc, 1e-4, 1e-4));
        CU_ASSERT (parity ("sgemm bf16 vs fp32", Cf, dC, nc, 2e-2, 5e-2));
        /* fp32 again: the fp32 answer */
        CU_ASSERT_EQUAL (gpu->upload (dC, C0, nc * 4), 0);
        CU_ASSERT_EQUAL (
          gpu->sgemm (ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, 1.0f, dC, N), 0);
        CU_ASSERT (parity ("sgemm fp32 after bf16", Cf, dC, nc, 1e-4, 1e-4));
        gpu->free (dA), gpu->free (dB), gpu->free (dC);
        free (A), free (B), free (C0), free (Ar), free (Br), free (Cr), free (Cf);
    }
}

static const struct dt_unit_test tests[] = {
    { "sgemm NN, NT, TN", test_sgemm },
    { "bias+gelu and bias forward/backward", test_bias_gelu },
    { "embedding gather and scatter-add", test_embed },
    { "fused softmax cross-entropy", test_softmax_ce },
    { "adamw, sumsq, scale", test_adamw_sumsq },
    { "layernorm forward and backward", test_layernorm },
    { "token + position embeddings", test_embed_pos },
    { "causal attention forward and backward, three shapes", test_attention },
    { "flash attention vs the simple path (CPU and GPU), six shapes",
      test_attention_flash },
    { "bf16 GEMMs: rounded inputs, fp32 accumulation", test_sgemm_bf16 },
    { NULL, NULL },
};

int main (void)
{
    char why[256] = "";
    cpu = dt_kern_cpu ();
    if (!dt_kern_cuda_available (why, sizeof (why))) {
        fprintf (stderr, "SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    gpu = dt_kern_cuda ();
    return dt_unit_run ("kernels-cuda-parity", tests);
}
