/* test_model.c: the whole model's backward pass (trainer/model.c, CPU
 * kernels) against finite differences of its forward pass: for parameters
 * of every tensor (embedding, each hidden layer's W and b, the output
 * layer), d(loss)/d(p) from model_step matches (L(p + h) - L(p - h)) / 2h.
 * A wrong gradient in any layer trains the wrong model while every
 * bit-identical test still passes, so this is its own check. */
#include <config.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/model.h"
#include "tests/unit/unit.h"

enum { C = 6, E = 5, H = 7, L = 2, N = 4 };

static double loss_at (struct model *m, const uint8_t *ctx, const uint8_t *tgt)
{
    double s = 0;
    CU_ASSERT_EQUAL (model_eval (m, N, ctx, tgt, &s), 0);
    return s;
}

static void test_gradients (void)
{
    struct model m;
    uint8_t ctx[N * C], tgt[N];
    unsigned seed = 7;
    int checked = 0, bad = 0, nonzero = 0;

    CU_ASSERT_EQUAL_FATAL (model_create (&m, dt_kern_cpu (), C, E, H, L, N, 11), 0);
    for (int i = 0; i < N * C; i++)
        ctx[i] = (uint8_t)(rand_r (&seed) % 256);
    for (int i = 0; i < N; i++)
        tgt[i] = (uint8_t)(rand_r (&seed) % 256);
    /* Larger weights than the initialisation's, so that every gradient is
     * well above float rounding. */
    for (size_t i = 0; i < m.nparams; i++)
        m.params[i] *= 4.0f;

    memset (m.grads, 0, m.nparams * sizeof (float));
    double loss = 0;
    CU_ASSERT_EQUAL_FATAL (model_step (&m, N, ctx, tgt, 1.0f, &loss), 0);
    CU_ASSERT (loss > 0 && isfinite (loss));
    CU_ASSERT (fabs (loss - loss_at (&m, ctx, tgt)) <
               1e-4 * loss); /* step = eval forward */
    float *g = malloc (m.nparams * sizeof (float));
    CU_ASSERT_FATAL (g != NULL);
    memcpy (g, m.grads, m.nparams * sizeof (float));

    CU_ASSERT_EQUAL (m.ntensors, 2 * (L + 1) + 1);
    for (int t = 0; t < m.ntensors; t++) {
        int tbad = 0, tchecked = 0;
        for (int j = 0; j < 12; j++) {
            size_t i = m.t[t].off + (size_t)rand_r (&seed) % m.t[t].count;
            float p = m.params[i];
            const float h = 1e-2f;
            m.params[i] = p + h;
            double up = loss_at (&m, ctx, tgt);
            m.params[i] = p - h;
            double down = loss_at (&m, ctx, tgt);
            m.params[i] = p;
            double fd = (up - down) / (2.0 * h);
            double tol = 2e-2 * fmax (fabs (fd), fabs (g[i])) + 2e-3;
            tchecked++;
            nonzero += fabs (g[i]) > 1e-3;
            if (fabs (fd - g[i]) > tol) {
                tbad++;
                fprintf (stderr, "%s[%zu]: backward %.6g, finite difference %.6g\n",
                         m.t[t].name, i - m.t[t].off, g[i], fd);
            }
        }
        /* ReLU kinks can make a rare central difference straddle a corner. */
        CU_ASSERT (tbad <= 1);
        bad += tbad;
        checked += tchecked;
    }
    CU_ASSERT (nonzero > checked / 2);
    fprintf (stderr, "gradient check: %d parameters of %d tensors, %d off\n", checked,
             m.ntensors, bad);

    /* scale multiplies the gradient; a second step accumulates. */
    memset (m.grads, 0, m.nparams * sizeof (float));
    CU_ASSERT_EQUAL (model_step (&m, N, ctx, tgt, 0.5f, &loss), 0);
    CU_ASSERT_EQUAL (model_step (&m, N, ctx, tgt, 0.5f, &loss), 0);
    int off = 0;
    for (size_t i = 0; i < m.nparams; i++)
        off += fabs (m.grads[i] - g[i]) > 1e-5 + 1e-4 * fabs (g[i]);
    CU_ASSERT_EQUAL (off, 0);
    free (g);
    model_destroy (&m);
}

/* The initialisation is a pure function of the seed. */
static void test_init_deterministic (void)
{
    struct model a, b, c;
    CU_ASSERT_EQUAL_FATAL (model_create (&a, dt_kern_cpu (), C, E, H, L, N, 3), 0);
    CU_ASSERT_EQUAL_FATAL (model_create (&b, dt_kern_cpu (), C, E, H, L, N, 3), 0);
    CU_ASSERT_EQUAL_FATAL (model_create (&c, dt_kern_cpu (), C, E, H, L, N, 4), 0);
    CU_ASSERT_EQUAL (a.nparams, (size_t)256 * E + (size_t)C * E * H + H +
                                  (size_t)(L - 1) * (H * H + H) + (size_t)H * 256 + 256);
    CU_ASSERT_EQUAL (memcmp (a.params, b.params, a.nparams * sizeof (float)), 0);
    CU_ASSERT_NOT_EQUAL (memcmp (a.params, c.params, a.nparams * sizeof (float)), 0);
    model_destroy (&a);
    model_destroy (&b);
    model_destroy (&c);
}

static const struct dt_unit_test tests[] = {
    { "backward matches finite differences in every tensor", test_gradients },
    { "initialisation: a function of the seed; the layout's size",
      test_init_deterministic },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("model", tests);
}
