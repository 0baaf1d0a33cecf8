/* test_cpu.c: the CPU kernels - forward against float64 references, every backward
 * kernel against central finite differences of a float64 reference forward. */
#include <config.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/unit/unit.h"

static struct dt_kern_ops *k;
static uint64_t rng = 88172645463325252ULL;

static double urand (void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static void fill (float *x, size_t n, double a)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(a * urand ());
}

/* |got - want| <= atol + rtol * |want| everywhere; prints the worst. */
static int close_enough (const char *what, const float *got, const double *want, size_t n,
                         double rtol, double atol)
{
    double worst = 0;
    size_t wi = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs (got[i] - want[i]);
        double lim = atol + rtol * fabs (want[i]);
        if (d / lim > worst)
            worst = d / lim, wi = i;
        if (!(d <= lim))
            ok = 0;
    }
    if (!ok)
        fprintf (stderr, "%s: element %zu got %.9g want %.9g\n", what, wi, got[wi],
                 want[wi]);
    return ok;
}

/* float64 references */
static double gelu_d (double x)
{
    return 0.5 * x * (1.0 + tanh (0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

#define H_FD 1e-6

/* ---- GELU and bias+GELU ---- */

static void test_gelu_grad_fd (void)
{
    for (double x = -6; x <= 6; x += 0.173) {
        double fd = (gelu_d (x + H_FD) - gelu_d (x - H_FD)) / (2 * H_FD);
        CU_ASSERT (fabs (dt_gelu_grad ((float)x) - fd) < 2e-6 + 1e-5 * fabs (fd));
        CU_ASSERT (fabs (dt_gelu ((float)x) - gelu_d (x)) < 1e-6 + 1e-6 * fabs (x));
    }
}

/* L = sum r .* gelu(u + b): dL/du and dL/db by the kernel vs FD. */
static void test_bias_gelu (void)
{
    enum { M = 7, N = 13 };
    float u[M * N], b[N], y[M * N], r[M * N], du[M * N], db[N];
    double u0[M * N], want_du[M * N], want_db[N], want_y[M * N];

    fill (u, M * N, 2.0);
    fill (b, N, 0.5);
    fill (r, M * N, 1.0);
    for (int i = 0; i < M * N; i++)
        u0[i] = u[i];
    for (int i = 0; i < M * N; i++)
        want_y[i] = gelu_d (u0[i] + b[i % N]);
    CU_ASSERT_EQUAL (k->bias_gelu_fwd (M, N, u, b, y), 0);
    CU_ASSERT (close_enough ("bias_gelu_fwd", y, want_y, M * N, 1e-5, 1e-6));
    /* u now holds u0 + b (pre-activation) */
    memset (db, 0, sizeof (db));
    CU_ASSERT_EQUAL (k->bias_gelu_bwd (M, N, u, r, du, db), 0);
    for (int i = 0; i < M * N; i++) {
        double x = u0[i] + b[i % N];
        want_du[i] = r[i] * (gelu_d (x + H_FD) - gelu_d (x - H_FD)) / (2 * H_FD);
    }
    for (int j = 0; j < N; j++) {
        double lp = 0, lm = 0;
        for (int i = 0; i < M; i++) {
            lp += r[i * N + j] * gelu_d (u0[i * N + j] + b[j] + H_FD);
            lm += r[i * N + j] * gelu_d (u0[i * N + j] + b[j] - H_FD);
        }
        want_db[j] = (lp - lm) / (2 * H_FD);
    }
    CU_ASSERT (close_enough ("bias_gelu_bwd du", du, want_du, M * N, 1e-4, 1e-5));
    CU_ASSERT (close_enough ("bias_gelu_bwd db", db, want_db, N, 1e-4, 1e-5));
    /* db accumulates */
    CU_ASSERT_EQUAL (k->bias_gelu_bwd (M, N, u, r, du, db), 0);
    for (int j = 0; j < N; j++)
        want_db[j] *= 2;
    CU_ASSERT (close_enough ("bias_gelu_bwd db +=", db, want_db, N, 1e-4, 1e-5));
}

/* L = sum r .* (z + b): dL/db = column sums of r. */
static void test_bias (void)
{
    enum { M = 5, N = 9 };
    float z[M * N], b[N], r[M * N], db[N];
    double want[M * N], wdb[N];
    fill (z, M * N, 1);
    fill (b, N, 1);
    fill (r, M * N, 1);
    for (int i = 0; i < M * N; i++)
        want[i] = (double)z[i] + b[i % N];
    CU_ASSERT_EQUAL (k->bias_fwd (M, N, z, b), 0);
    CU_ASSERT (close_enough ("bias_fwd", z, want, M * N, 1e-6, 1e-7));
    memset (db, 0, sizeof (db));
    CU_ASSERT_EQUAL (k->bias_bwd (M, N, r, db), 0);
    for (int j = 0; j < N; j++) {
        double lp = 0, lm = 0;
        for (int i = 0; i < M; i++) {
            lp += r[i * N + j] * ((double)z[i * N + j] + H_FD);
            lm += r[i * N + j] * ((double)z[i * N + j] - H_FD);
        }
        wdb[j] = (lp - lm) / (2 * H_FD);
    }
    CU_ASSERT (close_enough ("bias_bwd", db, wdb, N, 1e-5, 1e-6));
}

/* ---- GEMM: Y = X W, and the two backward GEMMs the model uses ---- */

static double gemm_loss (const double *X, const double *W, const float *R, int M, int K,
                         int N)
{
    double l = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += X[i * K + p] * W[p * N + j];
            l += R[i * N + j] * s;
        }
    return l;
}

static void test_sgemm (void)
{
    enum { M = 6, K = 11, N = 5 };
    float X[M * K], W[K * N], Y[M * N], R[M * N], dX[M * K], dW[K * N];
    double Xd[M * K], Wd[K * N], want[M * K > K * N ? M * K : K * N];

    fill (X, M * K, 1);
    fill (W, K * N, 1);
    fill (R, M * N, 1);
    for (int i = 0; i < M * K; i++)
        Xd[i] = X[i];
    for (int i = 0; i < K * N; i++)
        Wd[i] = W[i];
    /* forward */
    CU_ASSERT_EQUAL (k->sgemm (0, 0, M, N, K, 1.0f, X, K, W, N, 0.0f, Y, N), 0);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += Xd[i * K + p] * Wd[p * N + j];
            want[i * N + j] = s;
        }
    CU_ASSERT (close_enough ("sgemm NN", Y, want, M * N, 1e-5, 1e-6));
    /* dX = R W^T (NT) vs FD */
    CU_ASSERT_EQUAL (k->sgemm (0, 1, M, K, N, 1.0f, R, N, W, N, 0.0f, dX, K), 0);
    for (int i = 0; i < M * K; i++) {
        double s = Xd[i];
        Xd[i] = s + H_FD;
        double lp = gemm_loss (Xd, Wd, R, M, K, N);
        Xd[i] = s - H_FD;
        double lm = gemm_loss (Xd, Wd, R, M, K, N);
        Xd[i] = s;
        want[i] = (lp - lm) / (2 * H_FD);
    }
    CU_ASSERT (close_enough ("sgemm dX (NT)", dX, want, M * K, 1e-4, 1e-5));
    /* dW += X^T R (TN, beta 1 accumulates) vs FD */
    memset (dW, 0, sizeof (dW));
    CU_ASSERT_EQUAL (k->sgemm (1, 0, K, N, M, 1.0f, X, K, R, N, 1.0f, dW, N), 0);
    CU_ASSERT_EQUAL (k->sgemm (1, 0, K, N, M, 1.0f, X, K, R, N, 1.0f, dW, N), 0);
    for (int i = 0; i < K * N; i++) {
        double s = Wd[i];
        Wd[i] = s + H_FD;
        double lp = gemm_loss (Xd, Wd, R, M, K, N);
        Wd[i] = s - H_FD;
        double lm = gemm_loss (Xd, Wd, R, M, K, N);
        Wd[i] = s;
        want[i] = 2 * (lp - lm) / (2 * H_FD);
    }
    CU_ASSERT (close_enough ("sgemm dW (TN, accumulate)", dW, want, K * N, 1e-4, 1e-5));
}

/* ---- embedding ---- */

static void test_embed (void)
{
    enum { B = 4, C = 5, E = 3 };
    uint8_t tok[B * C];
    float emb[256 * E], x[B * C * E], r[B * C * E], demb[256 * E];
    double want[256 * E];

    for (int i = 0; i < B * C; i++)
        tok[i] = (uint8_t)(i % 3 == 0 ? 7 : (i * 37) & 255); /* repeats */
    fill (emb, 256 * E, 1);
    fill (r, B * C * E, 1);
    CU_ASSERT_EQUAL (k->embed_fwd (B, C, E, tok, emb, x), 0);
    for (int p = 0; p < B * C; p++)
        for (int e = 0; e < E; e++)
            CU_ASSERT_EQUAL (x[p * E + e], emb[tok[p] * E + e]);
    /* L = sum r .* x; dL/demb[v,e] by FD on a float64 copy */
    memset (demb, 0, sizeof (demb));
    CU_ASSERT_EQUAL (k->embed_bwd (B, C, E, tok, r, demb), 0);
    for (int v = 0; v < 256; v++)
        for (int e = 0; e < E; e++) {
            double lp = 0, lm = 0;
            for (int p = 0; p < B * C; p++) {
                double val = emb[tok[p] * E + e];
                double d = tok[p] == v ? H_FD : 0;
                lp += r[p * E + e] * (val + d);
                lm += r[p * E + e] * (val - d);
            }
            want[v * E + e] = (lp - lm) / (2 * H_FD);
        }
    CU_ASSERT (close_enough ("embed_bwd", demb, want, 256 * E, 1e-5, 1e-6));
}

/* ---- softmax cross-entropy ---- */

static double ce_d (const double *l, int V, int t)
{
    double mx = l[0], s = 0;
    for (int j = 1; j < V; j++)
        if (l[j] > mx)
            mx = l[j];
    for (int j = 0; j < V; j++)
        s += exp (l[j] - mx);
    return mx + log (s) - l[t];
}

static void test_softmax_ce (void)
{
    enum { M = 5, V = 256 };
    float lg[M * V], loss[M], dl[M * V];
    uint8_t tgt[M] = { 0, 255, 17, 17, 128 };
    double ld[V], want[M * V], wl[M];
    const float scale = 0.25f;

    fill (lg, M * V, 4);
    lg[2 * V + 17] = 30; /* a confident row */
    CU_ASSERT_EQUAL (k->softmax_ce (M, V, lg, tgt, scale, loss, dl), 0);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < V; j++)
            ld[j] = lg[i * V + j];
        wl[i] = ce_d (ld, V, tgt[i]);
        for (int j = 0; j < V; j++) {
            double s = ld[j];
            ld[j] = s + H_FD;
            double lp = ce_d (ld, V, tgt[i]);
            ld[j] = s - H_FD;
            double lm = ce_d (ld, V, tgt[i]);
            ld[j] = s;
            want[i * V + j] = scale * (lp - lm) / (2 * H_FD);
        }
    }
    CU_ASSERT (close_enough ("softmax_ce loss", loss, wl, M, 1e-5, 1e-6));
    CU_ASSERT (close_enough ("softmax_ce dlogits", dl, want, M * V, 1e-4, 1e-7));
    /* in place (dlogits aliasing logits), as the model calls it */
    CU_ASSERT_EQUAL (k->softmax_ce (M, V, lg, tgt, scale, loss, lg), 0);
    CU_ASSERT (close_enough ("softmax_ce in place", lg, want, M * V, 1e-4, 1e-7));
}

/* ---- AdamW and the norm ---- */

static void test_adamw (void)
{
    enum { N = 33 };
    float p[N], g[N], m[N], v[N];
    double pd[N], md[N], vd[N], want[N];
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1, gs = 0.5;

    fill (p, N, 1);
    fill (g, N, 1);
    fill (m, N, 0.1);
    for (int i = 0; i < N; i++)
        v[i] = (float)fabs (0.01 * urand ());
    for (int i = 0; i < N; i++)
        pd[i] = p[i], md[i] = m[i], vd[i] = v[i];
    double bc1 = 1 - pow (b1, 3), bc2 = 1 - pow (b2, 3);
    CU_ASSERT_EQUAL (k->adamw (N, p, g, m, v, lr, b1, b2, eps, wd, bc1, bc2, gs), 0);
    for (int i = 0; i < N; i++) {
        double gi = g[i] * gs;
        md[i] = b1 * md[i] + (1 - b1) * gi;
        vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
        want[i] = pd[i] - lr * (md[i] / bc1 / (sqrt (vd[i] / bc2) + eps) + wd * pd[i]);
    }
    CU_ASSERT (close_enough ("adamw p", p, want, N, 1e-5, 1e-6));
    CU_ASSERT (close_enough ("adamw m", m, md, N, 1e-5, 1e-7));
    CU_ASSERT (close_enough ("adamw v", v, vd, N, 1e-5, 1e-9));
}

static void test_sumsq_scale (void)
{
    enum { N = 1000 };
    float x[N];
    double s, want = 0;
    fill (x, N, 3);
    for (int i = 0; i < N; i++)
        want += (double)x[i] * x[i];
    CU_ASSERT_EQUAL (k->sumsq (N, x, &s), 0);
    CU_ASSERT (fabs (s - want) <= 1e-12 * want);
    CU_ASSERT_EQUAL (k->scale (N, x, 0.5f), 0);
    CU_ASSERT_EQUAL (k->sumsq (N, x, &s), 0);
    CU_ASSERT (fabs (s - want / 4) <= 1e-12 * want);
}

static void test_select (void)
{
    char err[200] = "";
    CU_ASSERT_PTR_EQUAL (dt_kern_select ("cpu", err, sizeof (err)), dt_kern_cpu ());
    CU_ASSERT_PTR_NOT_NULL (dt_kern_select ("auto", err, sizeof (err)));
    CU_ASSERT_PTR_NULL (dt_kern_select ("tpu", err, sizeof (err)));
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "tpu"));
    if (!dt_kern_cuda_available (NULL, 0)) {
        CU_ASSERT_PTR_NULL (dt_kern_select ("cuda", err, sizeof (err)));
        CU_ASSERT_PTR_NOT_NULL (strstr (err, "CUDA"));
    }
}

static const struct dt_unit_test tests[] = {
    { "gelu and gelu' vs float64 finite differences", test_gelu_grad_fd },
    { "bias+gelu forward and backward vs FD", test_bias_gelu },
    { "bias forward and backward vs FD", test_bias },
    { "sgemm forward and both backward GEMMs vs FD", test_sgemm },
    { "embedding gather and scatter-add vs FD", test_embed },
    { "fused softmax cross-entropy vs FD", test_softmax_ce },
    { "adamw vs float64 reference", test_adamw },
    { "sumsq and scale", test_sumsq_scale },
    { "backend selection", test_select },
    { NULL, NULL },
};

int main (void)
{
    k = dt_kern_cpu ();
    return dt_unit_run ("kernels-cpu", tests);
}
