/* test_ckpt.c: checkpoint shards - round trip, resharding, checksum and config errors. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/client/dtclient.h"
#include "kernels/kernels.h"
#include "tests/unit/unit.h"
#include "trainer/ckpt.h"
#include "trainer/opts.h"

enum { N = 1001, W = 3 };
static char root[] = "/tmp/test_ckpt.XXXXXX";
static const char *cfg = "model=byte-mlp-v1\ncontext=8\nhidden=16\nlr=0.001\n";
static float P[N], M[N], V[N];

static void save_all (int64_t step)
{
    dtclient_t *c = dtclient_open ();
    struct dt_kern_ops *k = dt_kern_cpu ();
    for (int r = 0; r < W; r++) {
        struct ckpt_writer *w = ckpt_writer_create (c);
        struct ckpt_done d;
        dt_error_t err;
        double stall = -1;
        size_t lo = (size_t)N * r / W, hi = (size_t)N * (r + 1) / W;
        struct ckpt_meta meta = {
            .root = root, .job = "unit", .step = step, .rank = r, .world = W, .parallel = 1,
            .nparams = N, .lo = lo, .hi = hi, .seed = 5, .data_cursor = step * 64, .config = cfg,
        };
        CU_ASSERT_EQUAL_FATAL (ckpt_save_async (w, k, &meta, P + lo, M + lo, V + lo, &stall, &err), 0);
        CU_ASSERT (stall >= 0);
        ckpt_wait (w);
        ckpt_last_done (w, &d);
        CU_ASSERT_EQUAL (d.step, step);
        CU_ASSERT_FALSE (d.failed);
        CU_ASSERT (d.bytes > (hi - lo) * 12);
        ckpt_writer_destroy (w);
    }
    dtclient_close (c);
}

static void test_roundtrip (void)
{
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;
    dt_error_t err;
    char dir[512];

    for (int i = 0; i < N; i++)
        P[i] = i * 0.5f, M[i] = -i * 0.25f, V[i] = i * 1e-3f;
    save_all (7);
    snprintf (dir, sizeof (dir), "%s/step-7", root);
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), 0);
    CU_ASSERT_EQUAL (step, 7);
    CU_ASSERT_EQUAL (world, W);
    CU_ASSERT_EQUAL (par, 1);
    CU_ASSERT (memcmp (p, P, sizeof (p)) == 0);
    CU_ASSERT (memcmp (m, M, sizeof (m)) == 0);
    CU_ASSERT (memcmp (v, V, sizeof (v)) == 0);
}

static void test_find_latest_committed (void)
{
    char dir[512];
    dt_error_t err;
    uint64_t bytes[W] = { 1, 2, 3 };
    uint32_t crc[W] = { 4, 5, 6 };

    save_all (9);  /* not committed: no manifest */
    CU_ASSERT_EQUAL (ckpt_find (root, dir, sizeof (dir), &err), 1);
    CU_ASSERT_EQUAL (ckpt_write_manifest (root, "unit", 7, W, 1, bytes, crc, &err), 0);
    CU_ASSERT_EQUAL (ckpt_find (root, dir, sizeof (dir), &err), 0);
    CU_ASSERT_PTR_NOT_NULL (strstr (dir, "step-7"));
    /* a step directory is taken as it is */
    char sd[600];
    snprintf (sd, sizeof (sd), "%s/step-9", root);
    CU_ASSERT_EQUAL (ckpt_find (sd, dir, sizeof (dir), &err), 0);
    CU_ASSERT_STRING_EQUAL (dir, sd);
}

static void test_config_mismatch (void)
{
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;
    dt_error_t err;
    char dir[512];
    const char *other = "model=byte-mlp-v1\ncontext=8\nhidden=32\nlr=0.001\n";

    snprintf (dir, sizeof (dir), "%s/step-7", root);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_load (dir, other, N, p, m, v, &step, &world, &par, &err), -1);
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "'hidden'"));
    CU_ASSERT_EQUAL (opts_compare (cfg, cfg, &err), 0);
}

static void test_corrupt_shard (void)
{
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;
    dt_error_t err;
    char dir[512], path[600];

    snprintf (dir, sizeof (dir), "%s/step-7", root);
    snprintf (path, sizeof (path), "%s/rank-1.ckpt", dir);
    FILE *f = fopen (path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    fseek (f, -5, SEEK_END);     /* inside adam_v */
    int c = fgetc (f);
    fseek (f, -5, SEEK_END);
    fputc (c ^ 0x40, f);
    fclose (f);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "rank-1.ckpt"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "adam_v"));
}

static const struct dt_unit_test tests[] = {
    { "3 shards round trip", test_roundtrip },
    { "latest committed checkpoint is found", test_find_latest_committed },
    { "config mismatch names the field", test_config_mismatch },
    { "corrupt shard names the shard and tensor", test_corrupt_shard },
    { NULL, NULL },
};

int main (void)
{
    unsetenv ("DT_AGENT_SOCKET");
    if (!mkdtemp (root))
        return 99;
    int rc = dt_unit_run ("ckpt", tests);
    char cmd[600];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", root);
    if (system (cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
