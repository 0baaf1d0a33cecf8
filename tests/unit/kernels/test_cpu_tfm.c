/* test_cpu_tfm.c: the CPU transformer kernels - LayerNorm, causal attention, token +
 * position embeddings: forward against float64 references, backward against
 * central finite differences of the float64 reference forward. */
#include <config.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/unit/unit.h"

static struct dt_kern_ops *k;
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

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

static void widen (const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
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

#define H_FD 1e-6

/* A float64 function of one input vector (the others fixed): the loss
 * sum r .* f(x) whose gradient the kernel computes. */
typedef double (*loss_f) (const double *x, void *arg);

/* Central differences of f at x (n elements) into g. */
static void fd_grad (loss_f f, void *arg, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + H_FD;
        double lp = f (x, arg);
        x[i] = x0 - H_FD;
        double lm = f (x, arg);
        x[i] = x0;
        g[i] = (lp - lm) / (2 * H_FD);
    }
}

/* ---- LayerNorm ---- */

/* Rows of 11 (all in the kernels' scalar tails) and of 37 (two whole
 * 16-float chunks and a tail). */
enum { LM = 6, LNMAX = 37 };
static int LN;
struct ln_arg {
    double x[LM * LNMAX], g[LNMAX], b[LNMAX], r[LM * LNMAX];
    int which; /* 0: x varies, 1: g, 2: b */
};

static void ln_ref (const double *x, const double *g, const double *b, double *y)
{
    for (int i = 0; i < LM; i++) {
        double mu = 0, var = 0;
        for (int j = 0; j < LN; j++)
            mu += x[i * LN + j];
        mu /= LN;
        for (int j = 0; j < LN; j++)
            var += (x[i * LN + j] - mu) * (x[i * LN + j] - mu);
        var /= LN;
        for (int j = 0; j < LN; j++)
            y[i * LN + j] = (x[i * LN + j] - mu) / sqrt (var + DT_LN_EPS) * g[j] + b[j];
    }
}

static double ln_loss (const double *v, void *arg)
{
    struct ln_arg *a = arg;
    double y[LM * LNMAX], l = 0;
    ln_ref (a->which == 0 ? v : a->x, a->which == 1 ? v : a->g, a->which == 2 ? v : a->b,
            y);
    for (int i = 0; i < LM * LN; i++)
        l += a->r[i] * y[i];
    return l;
}

static void ln_case (int n)
{
    static struct ln_arg a;
    float x[LM * LNMAX], g[LNMAX], b[LNMAX], r[LM * LNMAX], y[LM * LNMAX], mean[LM],
      rstd[LM];
    float dx[LM * LNMAX], dg[LNMAX], db[LNMAX];
    double want[LM * LNMAX], gx[LM * LNMAX], gg[LNMAX], gb[LNMAX];

    LN = n;

    fill (x, LM * LN, 3.0);
    for (int j = 0; j < LM * LN; j++)
        x[j] += 2.0f; /* a non-zero mean */
    fill (g, LN, 1.0);
    fill (b, LN, 0.5);
    fill (r, LM * LN, 1.0);
    widen (x, a.x, LM * LN), widen (g, a.g, LN), widen (b, a.b, LN),
      widen (r, a.r, LM * LN);
    ln_ref (a.x, a.g, a.b, want);
    CU_ASSERT_EQUAL (k->layernorm_fwd (LM, LN, x, g, b, y, mean, rstd), 0);
    CU_ASSERT (close_enough ("layernorm_fwd", y, want, LM * LN, 1e-5, 1e-6));

    /* dx accumulates: start from 0.25 everywhere. */
    for (int i = 0; i < LM * LN; i++)
        dx[i] = 0.25f;
    memset (dg, 0, sizeof (dg));
    memset (db, 0, sizeof (db));
    CU_ASSERT_EQUAL (k->layernorm_bwd (LM, LN, x, g, mean, rstd, r, dx, dg, db), 0);
    a.which = 0;
    fd_grad (ln_loss, &a, a.x, LM * LN, gx);
    for (int i = 0; i < LM * LN; i++)
        gx[i] += 0.25;
    a.which = 1;
    fd_grad (ln_loss, &a, a.g, LN, gg);
    a.which = 2;
    fd_grad (ln_loss, &a, a.b, LN, gb);
    CU_ASSERT (close_enough ("layernorm_bwd dx (+=)", dx, gx, LM * LN, 1e-4, 1e-5));
    CU_ASSERT (close_enough ("layernorm_bwd dg", dg, gg, LN, 1e-4, 1e-5));
    CU_ASSERT (close_enough ("layernorm_bwd db", db, gb, LN, 1e-4, 1e-5));
}

static void test_layernorm (void)
{
    ln_case (11);
    ln_case (37);
}

/* ---- causal attention ---- */

/* Contexts of 5 (the softmaxes' general path) and of 32 (a multiple of
 * 16: whole 16-column chunks, masked). */
enum { AB = 2, ATMAX = 32, AH = 2, AD = 3, AE = AH * AD };
static int AT;
struct at_arg {
    double r[AB * ATMAX * AE];
};

static void attn_ref (const double *qkv, double *out)
{
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < AT; i++) {
                const double *q = qkv + ((size_t)b * AT + i) * 3 * AE + h * AD;
                double s[ATMAX], mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *kk = qkv + ((size_t)b * AT + j) * 3 * AE + AE + h * AD;
                    s[j] = 0;
                    for (int d = 0; d < AD; d++)
                        s[j] += q[d] * kk[d];
                    s[j] /= sqrt ((double)AD);
                    if (s[j] > mx)
                        mx = s[j];
                }
                for (int j = 0; j <= i; j++)
                    sum += s[j] = exp (s[j] - mx);
                double *o = out + ((size_t)b * AT + i) * AE + h * AD;
                for (int d = 0; d < AD; d++) {
                    o[d] = 0;
                    for (int j = 0; j <= i; j++)
                        o[d] += s[j] / sum *
                                qkv[((size_t)b * AT + j) * 3 * AE + 2 * AE + h * AD + d];
                }
            }
}

static double attn_loss (const double *qkv, void *arg)
{
    struct at_arg *a = arg;
    double out[AB * ATMAX * AE], l = 0;
    attn_ref (qkv, out);
    for (int i = 0; i < AB * AT * AE; i++)
        l += a->r[i] * out[i];
    return l;
}

static void attn_case (int t, double scale, double rtol)
{
    static struct at_arg a;
    enum {
        NQMAX = AB * ATMAX * 3 * AE,
        NOMAX = AB * ATMAX * AE,
        NAMAX = AB * AH * ATMAX * ATMAX
    };
    static float qkv[NQMAX], att[NAMAX], out[NOMAX], r[NOMAX], dqkv[NQMAX], work[NAMAX];
    static double q64[NQMAX], want[NOMAX], g[NQMAX];
    AT = t;
    int NQ = AB * AT * 3 * AE, NO = AB * AT * AE;

    fill (qkv, NQ, scale);
    fill (r, NO, 1.0);
    widen (qkv, q64, NQ);
    widen (r, a.r, NO);
    attn_ref (q64, want);
    CU_ASSERT_EQUAL (k->attn_fwd (AB, AT, AH, AD, qkv, att, out), 0);
    CU_ASSERT (close_enough ("attn_fwd", out, want, NO, rtol, 1e-6));
    /* probabilities: rows sum to 1, exactly 0 above the diagonal, finite */
    for (int bh = 0; bh < AB * AH; bh++)
        for (int i = 0; i < AT; i++) {
            double s = 0;
            for (int j = 0; j < AT; j++) {
                float p = att[((size_t)bh * AT + i) * AT + j];
                CU_ASSERT (isfinite (p));
                if (j > i)
                    CU_ASSERT_EQUAL (p, 0.0f);
                s += p;
            }
            CU_ASSERT (fabs (s - 1.0) < 1e-6);
        }
    CU_ASSERT_EQUAL (k->attn_bwd (AB, AT, AH, AD, qkv, att, r, dqkv, work), 0);
    fd_grad (attn_loss, &a, q64, NQ, g);
    CU_ASSERT (close_enough ("attn_bwd dqkv", dqkv, g, NQ, 1e-3 * (scale > 2 ? 10 : 1),
                             1e-5 * scale));
}

static void test_attention (void)
{
    attn_case (5, 1.0, 1e-5);
    attn_case (32, 1.0, 1e-5);
}

/* Scores of several hundred: a softmax that did not subtract the row
 * maximum would overflow expf to inf and give NaN. */
static void test_attention_large_scores (void)
{
    attn_case (5, 30.0, 1e-4);
    /* scores up to ~1500: float32's rounding of each (~1e-4 absolute) is
     * that much relative error in its exponential, over 32 columns */
    attn_case (32, 30.0, 1e-3);
}

/* ---- token + position embeddings ---- */

static void test_embed_pos (void)
{
    enum { B = 3, T = 4, E = 5 };
    uint8_t tok[B * T] = { 7, 0, 255, 7, 7, 1, 2, 3, 255, 255, 0, 9 };
    float wte[256 * E], wpe[T * E], x[B * T * E], dx[B * T * E], dwte[256 * E],
      dwpe[T * E];
    double wx[B * T * E], wdte[256 * E], wdpe[T * E];

    fill (wte, 256 * E, 1.0);
    fill (wpe, T * E, 1.0);
    fill (dx, B * T * E, 1.0);
    CU_ASSERT_EQUAL (k->embed_pos_fwd (B, T, E, tok, wte, wpe, x), 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int e = 0; e < E; e++)
                wx[(b * T + t) * E + e] =
                  (double)wte[tok[b * T + t] * E + e] + wpe[t * E + e];
    CU_ASSERT (close_enough ("embed_pos_fwd", x, wx, B * T * E, 1e-7, 0));
    /* The loss sum dx .* x is linear: its gradient is exact, by FD too. */
    for (int i = 0; i < 256 * E; i++)
        dwte[i] = 0.5f, wdte[i] = 0.5;
    for (int i = 0; i < T * E; i++)
        dwpe[i] = -0.5f, wdpe[i] = -0.5;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int e = 0; e < E; e++) {
                double d = dx[(b * T + t) * E + e];
                wdte[tok[b * T + t] * E + e] +=
                  ((d * (1 + H_FD)) - (d * (1 - H_FD))) / (2 * H_FD);
                wdpe[t * E + e] += d;
            }
    CU_ASSERT_EQUAL (k->embed_pos_bwd (B, T, E, tok, dx, dwte, dwpe), 0);
    CU_ASSERT (close_enough ("embed_pos_bwd dwte (+=)", dwte, wdte, 256 * E, 1e-6, 1e-6));
    CU_ASSERT (close_enough ("embed_pos_bwd dwpe (+=)", dwpe, wdpe, T * E, 1e-6, 1e-6));
}

static const struct dt_unit_test tests[] = {
    { "layernorm forward vs float64, backward (dx +=, dg, db) vs FD", test_layernorm },
    { "causal attention forward vs float64, backward vs FD", test_attention },
    { "causal attention with large scores: stable, still matches",
      test_attention_large_scores },
    { "token + position embeddings: gather, scatter-add", test_embed_pos },
    { NULL, NULL },
};

int main (void)
{
    k = dt_kern_cpu ();
    return dt_unit_run ("kernels-cpu-tfm", tests);
}
