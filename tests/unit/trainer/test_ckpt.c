/* test_ckpt.c: checkpoint shards - round trip, resharding, checksum and config errors. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/client/dtclient.h"
#include "common/crc32c.h"
#include "kernels/kernels.h"
#include "tests/unit/unit.h"
#include "trainer/ckpt.h"
#include "trainer/opts.h"

enum { N = 1001, W = 3 };
static char root[] = "/tmp/test_ckpt.XXXXXX";
static const char *cfg = "model=byte-mlp-v1\ncontext=8\nhidden=16\nlr=0.001\n";
static float P[N], M[N], V[N];

static char *slurp (const char *path, size_t *len);

/* The reported size and CRC32C are the file's. */
static void check_file (const struct ckpt_done *d)
{
    size_t len = 0;
    char *x = slurp (d->path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL (x);
    CU_ASSERT_EQUAL (len, d->bytes);
    CU_ASSERT_EQUAL (dt_crc32c (0, x, len), d->crc);
    free (x);
}

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
            .root = root,
            .job = "unit",
            .step = step,
            .rank = r,
            .world = W,
            .parallel = 1,
            .nparams = N,
            .lo = lo,
            .hi = hi,
            .seed = 5,
            .data_cursor = step * 64,
            .config = cfg,
        };
        CU_ASSERT_EQUAL_FATAL (
          ckpt_save_async (w, k, &meta, P + lo, M + lo, V + lo, &stall, &err), 0);
        CU_ASSERT (stall >= 0);
        ckpt_wait (w);
        ckpt_last_done (w, &d);
        CU_ASSERT_EQUAL (d.step, step);
        CU_ASSERT_FALSE (d.failed);
        CU_ASSERT (d.bytes > (hi - lo) * 12);
        check_file (&d);
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

static int jit_calls;
static void jit_cb (void *arg, int shard_rank, const struct ckpt_done *d)
{
    (void)arg;
    CU_ASSERT_EQUAL (shard_rank, jit_calls);
    CU_ASSERT_EQUAL (d->step, 11);
    CU_ASSERT_FALSE (d->failed);
    jit_calls++;
}

static char *slurp (const char *path, size_t *len)
{
    FILE *f = fopen (path, "rb");
    char *buf = NULL;
    if (f && fseek (f, 0, SEEK_END) == 0) {
        long n = ftell (f);
        rewind (f);
        if (n >= 0 && (buf = malloc ((size_t)n + 1)) &&
            fread (buf, 1, (size_t)n, f) != (size_t)n) {
            free (buf);
            buf = NULL;
        }
        *len = (size_t)n;
    }
    if (f)
        fclose (f);
    return buf;
}

/* A just-in-time checkpoint: one rank writes every shard from
 * the full state; each file is byte-identical to the shard its rank writes
 * itself, and the set loads back to the full state. */
static void test_jit_all_shards (void)
{
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;
    dt_error_t err;
    char dir[512], a[600], b[600];

    for (int i = 0; i < N; i++)
        P[i] = i * 0.75f, M[i] = i * 0.125f, V[i] = i * 2e-3f;
    save_all (11);
    struct ckpt_meta meta = {
        .root = root,
        .job = "unit",
        .step = 11,
        .rank = 99,
        .world = W,
        .parallel = 1,
        .nparams = N,
        .seed = 5,
        .data_cursor = 11 * 64,
        .config = cfg,
    };
    snprintf (dir, sizeof (dir), "%s/jit-11-r0", root);
    jit_calls = 0;
    CU_ASSERT_EQUAL_FATAL (ckpt_save_jit (&meta, dir, P, M, V, jit_cb, NULL, &err), 0);
    CU_ASSERT_EQUAL (jit_calls, W);
    for (int r = 0; r < W; r++) {
        size_t la = 0, lb = 0;
        snprintf (a, sizeof (a), "%s/step-11/rank-%d.ckpt", root, r);
        snprintf (b, sizeof (b), "%s/rank-%d.ckpt", dir, r);
        char *x = slurp (a, &la), *y = slurp (b, &lb);
        CU_ASSERT_PTR_NOT_NULL (x);
        CU_ASSERT_PTR_NOT_NULL (y);
        CU_ASSERT (x && y && la == lb && memcmp (x, y, la) == 0);
        free (x);
        free (y);
    }
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), 0);
    CU_ASSERT_EQUAL (step, 11);
    CU_ASSERT_EQUAL (world, W);
    CU_ASSERT (memcmp (p, P, sizeof (p)) == 0);
    CU_ASSERT (memcmp (m, M, sizeof (m)) == 0);
    CU_ASSERT (memcmp (v, V, sizeof (v)) == 0);
}

/* The writer thread takes the snapshot after ckpt_save_async returns;
 * once ckpt_snapshot_wait returns, the sources may change and the shard
 * still holds the state of the call.  A shard of several copy and write
 * pieces (2 x 16 MiB of image) whose size is not a multiple of the block
 * size. */
static void test_snapshot_then_change (void)
{
    enum { BN = 2500001 }; /* 30 MB of tensors, an odd count */
    float *p = malloc (BN * 4), *m = malloc (BN * 4), *v = malloc (BN * 4);
    float *lp = malloc (BN * 4), *lm = malloc (BN * 4), *lv = malloc (BN * 4);
    float *ep = malloc (BN * 4);
    dtclient_t *c = dtclient_open ();
    struct ckpt_writer *w = ckpt_writer_create (c);
    struct ckpt_done d;
    dt_error_t err;
    double stall = -1;
    int64_t step;
    int world, par;
    char dir[512];

    CU_ASSERT_FATAL (p && m && v && lp && lm && lv && ep && w);
    for (int i = 0; i < BN; i++)
        p[i] = i * 0.5f, m[i] = -i * 0.25f, v[i] = i * 1e-3f;
    memcpy (ep, p, BN * 4);
    struct ckpt_meta meta = {
        .root = root,
        .job = "unit",
        .step = 21,
        .rank = 0,
        .world = 1,
        .parallel = 0,
        .nparams = BN,
        .lo = 0,
        .hi = BN,
        .seed = 5,
        .data_cursor = 21 * 64,
        .config = cfg,
    };
    CU_ASSERT_EQUAL_FATAL (
      ckpt_save_async (w, dt_kern_cpu (), &meta, p, m, v, &stall, &err), 0);
    CU_ASSERT (stall >= 0);
    stall = -1; /* set by the wait */
    CU_ASSERT_EQUAL (ckpt_snapshot_wait (w, &stall), 1);
    CU_ASSERT (stall >= 0);
    CU_ASSERT_EQUAL (ckpt_snapshot_wait (w, &stall), 0); /* once */
    for (int i = 0; i < BN; i++)
        p[i] = -1.0f, m[i] = -2.0f, v[i] = -3.0f; /* the next update */
    ckpt_wait (w);
    ckpt_last_done (w, &d);
    CU_ASSERT_FALSE (d.failed);
    CU_ASSERT_EQUAL (d.step, 21);
    CU_ASSERT (d.bytes > (uint64_t)BN * 12 && d.bytes % 4096 != 0);
    check_file (&d);
    ckpt_writer_destroy (w);
    dtclient_close (c);
    snprintf (dir, sizeof (dir), "%s/step-21", root);
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, BN, lp, lm, lv, &step, &world, &par, &err), 0);
    CU_ASSERT_EQUAL (step, 21);
    CU_ASSERT (memcmp (lp, ep, BN * 4) == 0);
    for (int i = 0; i < BN; i++)
        if (lm[i] != -i * 0.25f || lv[i] != i * 1e-3f) {
            CU_FAIL ("moments of the snapshot");
            break;
        }
    free (p), free (m), free (v), free (lp), free (lm), free (lv), free (ep);
}

/* tmpfs (where a checkpoint dir may live, and where older kernels refuse
 * O_DIRECT): the shard is written and loads back. */
static void test_tmpfs (void)
{
    char shm[] = "/dev/shm/test_ckpt.XXXXXX", dir[512], cmd[600];
    dtclient_t *c;
    struct ckpt_writer *w;
    struct ckpt_done d;
    dt_error_t err;
    double stall;
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;

    if (access ("/dev/shm", W_OK) != 0 || !mkdtemp (shm))
        return;
    c = dtclient_open ();
    w = ckpt_writer_create (c);
    for (int i = 0; i < N; i++)
        P[i] = i * 3.0f, M[i] = i * 5.0f, V[i] = i * 7.0f;
    struct ckpt_meta meta = {
        .root = shm,
        .job = "unit",
        .step = 3,
        .rank = 0,
        .world = 1,
        .parallel = 0,
        .nparams = N,
        .lo = 0,
        .hi = N,
        .seed = 5,
        .data_cursor = 3 * 64,
        .config = cfg,
    };
    CU_ASSERT_EQUAL (ckpt_save_async (w, dt_kern_cpu (), &meta, P, M, V, &stall, &err),
                     0);
    ckpt_wait (w);
    ckpt_last_done (w, &d);
    CU_ASSERT_FALSE (d.failed);
    check_file (&d);
    ckpt_writer_destroy (w);
    dtclient_close (c);
    snprintf (dir, sizeof (dir), "%s/step-3", shm);
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), 0);
    CU_ASSERT (memcmp (p, P, sizeof (p)) == 0 && memcmp (v, V, sizeof (v)) == 0);
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", shm);
    CU_ASSERT_EQUAL (system (cmd), 0);
}

static void test_find_latest_committed (void)
{
    char dir[512];
    dt_error_t err;
    uint64_t bytes[W] = { 1, 2, 3 };
    uint32_t crc[W] = { 4, 5, 6 };

    save_all (9); /* not committed: no manifest */
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
    fseek (f, -5, SEEK_END); /* inside adam_v */
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

/* Write shards of 'step' whose slices are lo[r]..hi[r] (not necessarily a
 * tiling: the loader must notice). */
static void save_slices (int64_t step, const size_t lo[W], const size_t hi[W])
{
    dtclient_t *c = dtclient_open ();
    struct dt_kern_ops *k = dt_kern_cpu ();
    for (int r = 0; r < W; r++) {
        struct ckpt_writer *w = ckpt_writer_create (c);
        struct ckpt_done d;
        dt_error_t err;
        double stall = -1;
        struct ckpt_meta meta = {
            .root = root,
            .job = "unit",
            .step = step,
            .rank = r,
            .world = W,
            .parallel = 1,
            .nparams = N,
            .lo = lo[r],
            .hi = hi[r],
            .seed = 5,
            .data_cursor = 0,
            .config = cfg,
        };
        CU_ASSERT_EQUAL_FATAL (
          ckpt_save_async (w, k, &meta, P + lo[r], M + lo[r], V + lo[r], &stall, &err),
          0);
        ckpt_wait (w);
        ckpt_last_done (w, &d);
        CU_ASSERT_FALSE (d.failed);
        ckpt_writer_destroy (w);
    }
    dtclient_close (c);
}

/* Slices whose sizes add up to the model's but overlap (and so leave a
 * gap) are refused, naming the problem. */
static void test_overlap_and_gap (void)
{
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;
    dt_error_t err;
    char dir[512];
    const size_t lo[W] = { 0, 200, 667 }, hi[W] = { 334, 533, N };   /* 334+333+334 */
    const size_t lo2[W] = { 0, 334, 700 }, hi2[W] = { 334, 667, N }; /* a gap only */

    save_slices (41, lo, hi);
    snprintf (dir, sizeof (dir), "%s/step-41", root);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "overlaps"));
    save_slices (42, lo2, hi2);
    snprintf (dir, sizeof (dir), "%s/step-42", root);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "667..699"));
}

/* A header (with a valid checksum) announcing UINT64_MAX bytes of config:
 * a clean error, no allocation of a wrapped size. */
static void test_huge_config_bytes (void)
{
    float p[N], m[N], v[N];
    int64_t step;
    int world, par;
    dt_error_t err;
    char dir[512], path[600];
    unsigned char hdr[220];
    const uint64_t huge = UINT64_MAX;
    enum { CONFIG_BYTES_AT = 80, HDR_CRC_AT = 216 }; /* struct ckpt_hdr's layout */

    save_all (43);
    snprintf (dir, sizeof (dir), "%s/step-43", root);
    snprintf (path, sizeof (path), "%s/rank-0.ckpt", dir);
    FILE *f = fopen (path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    CU_ASSERT_EQUAL_FATAL (fread (hdr, 1, sizeof (hdr), f), sizeof (hdr));
    memcpy (hdr + CONFIG_BYTES_AT, &huge, sizeof (huge));
    uint32_t crc = dt_crc32c (0, hdr, HDR_CRC_AT);
    memcpy (hdr + HDR_CRC_AT, &crc, sizeof (crc));
    rewind (f);
    CU_ASSERT_EQUAL (fwrite (hdr, 1, sizeof (hdr), f), sizeof (hdr));
    fclose (f);
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_load (dir, cfg, N, p, m, v, &step, &world, &par, &err), -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "rank-0.ckpt"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "18446744073709551615 bytes of config"));
}

static const struct dt_unit_test tests[] = {
    { "3 shards round trip", test_roundtrip },
    { "just-in-time: one rank writes every shard, identical", test_jit_all_shards },
    { "snapshot taken, then the state changes: the shard holds the old",
      test_snapshot_then_change },
    { "tmpfs checkpoint dir", test_tmpfs },
    { "latest committed checkpoint is found", test_find_latest_committed },
    { "config mismatch names the field", test_config_mismatch },
    { "corrupt shard names the shard and tensor", test_corrupt_shard },
    { "overlapping or missing slices are refused", test_overlap_and_gap },
    { "a header's huge config size is refused", test_huge_config_bytes },
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
