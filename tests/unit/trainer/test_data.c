/* test_data.c: the sampler (trainer/data.c).  Sampling is a pure function
 * of (seed, step, index): the bit-identical resume and the same global
 * batch at any world size depend on it.  Windows stay inside the training
 * part; validation windows inside the held-out tail. */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/data.h"
#include "tests/unit/unit.h"

static char path[] = "/tmp/test_data.XXXXXX";
enum { LEN = 10007, CTX = 16 };

static int make_file (void)
{
    int fd = mkstemp (path);
    if (fd < 0)
        return -1;
    for (int i = 0; i < LEN; i++) {
        char c = (char)('a' + (i * 7) % 26);
        if (write (fd, &c, 1) != 1)
            return -1;
    }
    return close (fd);
}

static void test_open (void)
{
    struct data d;
    dt_error_t err = { "" };

    CU_ASSERT_EQUAL_FATAL (data_open (&d, path, CTX, 0.1, &err), 0);
    CU_ASSERT_EQUAL (d.len, LEN);
    CU_ASSERT_EQUAL (d.train_len + d.val_len, LEN);
    CU_ASSERT (d.val_len >= LEN / 10 - 1 && d.val_len <= LEN / 10 + 1);
    data_close (&d);
    CU_ASSERT_EQUAL (data_open (&d, "/nonexistent/x", CTX, 0.1, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "/nonexistent/x"));
    /* Too short for one window. */
    CU_ASSERT_EQUAL (data_open (&d, path, LEN, 0.1, &err), -1);
    CU_ASSERT (strlen (err.text) > 0);
}

static void test_deterministic_and_bounded (void)
{
    struct data d;
    dt_error_t err = { "" };
    int differ_step = 0, differ_seed = 0;

    CU_ASSERT_EQUAL_FATAL (data_open (&d, path, CTX, 0.1, &err), 0);
    for (int64_t step = 0; step < 50; step++)
        for (int64_t i = 0; i < 64; i++) {
            size_t p = data_train_pos (&d, 5, step, i);
            /* the same call, the same window: no hidden state */
            CU_ASSERT_EQUAL (data_train_pos (&d, 5, step, i), p);
            /* a whole window (context + target) inside the training part */
            CU_ASSERT (p + CTX + 1 <= d.train_len);
            differ_step += data_train_pos (&d, 5, step + 1, i) != p;
            differ_seed += data_train_pos (&d, 6, step, i) != p;
        }
    /* Other steps and other seeds draw other windows (almost always). */
    CU_ASSERT (differ_step > 50 * 64 * 9 / 10);
    CU_ASSERT (differ_seed > 50 * 64 * 9 / 10);
    /* Out of order (a resumed run starts at step 40): the same windows. */
    CU_ASSERT_EQUAL (data_train_pos (&d, 5, 40, 3), data_train_pos (&d, 5, 40, 3));
    data_close (&d);
    /* Another mapping of the same file: the same windows. */
    struct data d2;
    CU_ASSERT_EQUAL_FATAL (data_open (&d, path, CTX, 0.1, &err), 0);
    CU_ASSERT_EQUAL_FATAL (data_open (&d2, path, CTX, 0.1, &err), 0);
    for (int64_t i = 0; i < 100; i++)
        CU_ASSERT_EQUAL (data_train_pos (&d, 1, 7, i), data_train_pos (&d2, 1, 7, i));
    data_close (&d);
    data_close (&d2);
}

/* Windows cover the training part: every region is drawn sometimes. */
static void test_coverage (void)
{
    struct data d;
    dt_error_t err = { "" };
    int seen[10] = { 0 };

    CU_ASSERT_EQUAL_FATAL (data_open (&d, path, CTX, 0.1, &err), 0);
    for (int64_t i = 0; i < 2000; i++)
        seen[data_train_pos (&d, 1, 0, i) * 10 / d.train_len]++;
    for (int b = 0; b < 10; b++)
        CU_ASSERT (seen[b] > 100);
    data_close (&d);
}

static void test_validation_and_window (void)
{
    struct data d;
    dt_error_t err = { "" };
    uint8_t ctx[CTX], tgt;

    CU_ASSERT_EQUAL_FATAL (data_open (&d, path, CTX, 0.1, &err), 0);
    size_t prev = 0;
    for (int64_t k = 0; k < 8; k++) {
        size_t p = data_val_pos (&d, k, 8);
        CU_ASSERT (p >= d.train_len && p + CTX + 1 <= d.len);
        if (k > 0)
            CU_ASSERT (p > prev); /* evenly spaced, in order */
        prev = p;
    }
    size_t p = data_train_pos (&d, 5, 3, 2);
    data_window (&d, p, ctx, &tgt);
    CU_ASSERT_EQUAL (memcmp (ctx, d.bytes + p, CTX), 0);
    CU_ASSERT_EQUAL (tgt, d.bytes[p + CTX]);
    data_close (&d);
    /* A tail shorter than a window has no validation windows. */
    CU_ASSERT_EQUAL_FATAL (data_open (&d, path, CTX, 0.001, &err), 0);
    CU_ASSERT_EQUAL (data_val_pos (&d, 0, 1), (size_t)-1);
    data_close (&d);
}

static void test_hash (void)
{
    /* splitmix64's finaliser: known values, and no fixed point at 0..1000 */
    CU_ASSERT_NOT_EQUAL (data_hash (0), data_hash (1));
    int same = 0;
    for (uint64_t x = 0; x < 1000; x++)
        same += data_hash (x) == x;
    CU_ASSERT_EQUAL (same, 0);
}

static const struct dt_unit_test tests[] = {
    { "open holds out the validation tail", test_open },
    { "windows: a pure function of (seed, step, i), inside the training part",
      test_deterministic_and_bounded },
    { "windows cover the training part", test_coverage },
    { "validation windows in the tail; a window is context + target",
      test_validation_and_window },
    { "the hash has no fixed points", test_hash },
    { NULL, NULL },
};

int main (void)
{
    if (make_file () < 0) {
        perror (path);
        return 99;
    }
    int rc = dt_unit_run ("data", tests);
    unlink (path);
    return rc;
}
