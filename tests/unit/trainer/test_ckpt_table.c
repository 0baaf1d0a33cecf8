/* test_ckpt_table.c: the named tensor table of checkpoint shards - entries for a
 * slice, placement by name into another flat layout, refusals naming the tensor. */
#include <config.h>
#include <errno.h>
#include <string.h>

#include "tests/unit/unit.h"
#include "trainer/ckpt_table.h"

/* Layout A: x [2, 3] then y [4]; layout B: the same tensors in the other order. */
static struct model a_model, b_model;

static void layouts (void)
{
    memset (&a_model, 0, sizeof (a_model));
    memset (&b_model, 0, sizeof (b_model));
    model_add_tensor (&a_model, "x", 1, 2, 3);
    model_add_tensor (&a_model, "y", 0, 4, 0);
    model_add_tensor (&b_model, "y", 0, 4, 0);
    model_add_tensor (&b_model, "x", 1, 2, 3);
}

static void test_build (void)
{
    struct ckpt_named e[8];
    size_t koff[CKPT_KINDS] = { 1000, 2000, 3000 };

    layouts ();
    /* Slice [4, 8) of A: x's elements 4, 5 and y's 0, 1; per kind. */
    size_t n = ckpt_table_build (a_model.t, a_model.ntensors, 4, 8, koff, NULL);
    CU_ASSERT_EQUAL (n, 6);
    CU_ASSERT_EQUAL (ckpt_table_build (a_model.t, a_model.ntensors, 4, 8, koff, e), 6);
    CU_ASSERT_STRING_EQUAL (e[0].name, "params/x");
    CU_ASSERT_EQUAL (e[0].ndim, 2);
    CU_ASSERT_EQUAL (e[0].shape[0], 2);
    CU_ASSERT_EQUAL (e[0].shape[1], 3);
    CU_ASSERT_EQUAL (e[0].first, 4);
    CU_ASSERT_EQUAL (e[0].count, 2);
    CU_ASSERT_EQUAL (e[0].offset, 1000);
    CU_ASSERT_STRING_EQUAL (e[1].name, "params/y");
    CU_ASSERT_EQUAL (e[1].first, 0);
    CU_ASSERT_EQUAL (e[1].count, 2);
    CU_ASSERT_EQUAL (e[1].offset, 1008);
    CU_ASSERT_STRING_EQUAL (e[5].name, "adam_v/y");
    CU_ASSERT_EQUAL (e[5].offset, 3008);
    /* A slice inside one tensor: one entry per kind. */
    CU_ASSERT_EQUAL (ckpt_table_build (a_model.t, a_model.ntensors, 1, 3, koff, NULL), 3);
}

/* Two shards of layout A (slices [0, 5) and [5, 10)) placed by name into
 * layout B: every element lands at its tensor's place in B. */
static void test_place_other_layout (void)
{
    float full[CKPT_KINDS][10], got[CKPT_KINDS][10];
    float *out[CKPT_KINDS] = { got[0], got[1], got[2] };
    dt_error_t err;

    layouts ();
    for (int k = 0; k < CKPT_KINDS; k++)
        for (int i = 0; i < 10; i++)
            full[k][i] = 100.0f * k + i; /* A: x = 0..5, y = 6..9 */
    memset (got, 0, sizeof (got));
    for (int s = 0; s < 2; s++) {
        size_t lo = 5 * s, hi = lo + 5, koff[CKPT_KINDS] = { 64, 64 + 20, 64 + 40 };
        struct ckpt_named e[8];
        size_t n = ckpt_table_build (a_model.t, a_model.ntensors, lo, hi, koff, e);
        const float *slice[CKPT_KINDS] = { full[0] + lo, full[1] + lo, full[2] + lo };
        CU_ASSERT_EQUAL (ckpt_table_place ("shard", e, n, b_model.t, b_model.ntensors,
                                           koff, slice, 5, out, &err),
                         0);
    }
    /* B: y = 0..3, x = 4..9 */
    for (int k = 0; k < CKPT_KINDS; k++) {
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL (got[k][i], 100.0f * k + 6 + i);
        for (int i = 0; i < 6; i++)
            CU_ASSERT_EQUAL (got[k][4 + i], 100.0f * k + i);
    }
}

static void test_refusals (void)
{
    struct model other;
    struct ckpt_named e[8];
    size_t koff[CKPT_KINDS] = { 0, 40, 80 };
    float buf[10] = { 0 }, dst[CKPT_KINDS][10];
    const float *slice[CKPT_KINDS] = { buf, buf, buf };
    float *out[CKPT_KINDS] = { dst[0], dst[1], dst[2] };
    dt_error_t err;

    layouts ();
    size_t n = ckpt_table_build (a_model.t, a_model.ntensors, 0, 10, koff, e);
    /* x is [3, 2] in the other model: refused, naming the tensor and shapes. */
    memset (&other, 0, sizeof (other));
    model_add_tensor (&other, "x", 1, 3, 2);
    model_add_tensor (&other, "y", 0, 4, 0);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_table_place ("s.ckpt", e, n, other.t, other.ntensors, koff,
                                       slice, 10, out, &err),
                     -1);
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (err.text, "tensor 'x' has shape 2x3, this model 3x2"));
    /* A tensor the model lacks. */
    memset (&other, 0, sizeof (other));
    model_add_tensor (&other, "x", 1, 2, 3);
    model_add_tensor (&other, "z", 0, 4, 0);
    CU_ASSERT_EQUAL (ckpt_table_place ("s.ckpt", e, n, other.t, other.ntensors, koff,
                                       slice, 10, out, &err),
                     -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "tensor 'y' is not in this model"));
    /* An entry pointing past its slice is malformed (EBADMSG). */
    e[1].count = 40;
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_table_place ("s.ckpt", e, n, a_model.t, a_model.ntensors, koff,
                                       slice, 10, out, &err),
                     -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    /* A table that leaves part of the slice unnamed. */
    n = ckpt_table_build (a_model.t, a_model.ntensors, 0, 10, koff, e);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_table_place ("s.ckpt", e, n - 1, a_model.t, a_model.ntensors,
                                       koff, slice, 10, out, &err),
                     -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "names 6 of the 10 adam_v values"));
    /* An unknown kind. */
    n = ckpt_table_build (a_model.t, a_model.ntensors, 0, 10, koff, e);
    memcpy (e[0].name, "grads/x", 8);
    CU_ASSERT_EQUAL (ckpt_table_place ("s.ckpt", e, n, a_model.t, a_model.ntensors, koff,
                                       slice, 10, out, &err),
                     -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "malformed"));
}

static const struct dt_unit_test tests[] = {
    { "table entries for a slice: names, shapes, ranges, offsets", test_build },
    { "two shards placed by name into another flat layout", test_place_other_layout },
    { "wrong shape, unknown tensor, out-of-slice entry, unknown kind: refused",
      test_refusals },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("ckpt-table", tests);
}
