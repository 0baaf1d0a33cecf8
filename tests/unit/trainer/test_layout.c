/* test_layout.c: parallel layouts - the checks, rank coordinates and groups, the
 * transformer's tensor-parallel slices, and checkpoints written in one layout
 * loading bit for bit in another (params and both moments). */
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
#include "trainer/ckpt_table.h"
#include "trainer/layout.h"
#include "trainer/opts.h"

enum { C = 4, E = 8, NH = 4, L = 2 };

static struct train_opts tfm_opts (int tp, int pp)
{
    struct train_opts o;
    memset (&o, 0, sizeof (o));
    o.model = MODEL_TRANSFORMER;
    o.heads = NH;
    o.layers = L;
    o.tp = tp;
    o.pp = pp;
    return o;
}

static void test_checks (void)
{
    struct layout ly;
    dt_error_t err;
    struct train_opts o = tfm_opts (2, 1);

    CU_ASSERT_EQUAL (layout_init (&ly, &o, 3, 0, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (err.text, "WORLD_SIZE=3 is not a multiple of --tp 2"));
    o = tfm_opts (3, 1);
    CU_ASSERT_EQUAL (layout_init (&ly, &o, 3, 0, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "--tp 3 does not divide --heads 4"));
    o = tfm_opts (1, 3);
    CU_ASSERT_EQUAL (layout_init (&ly, &o, 3, 0, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "--pp 3 does not divide --layers 2"));
    o = tfm_opts (2, 1);
    o.model = MODEL_MLP;
    CU_ASSERT_EQUAL (layout_init (&ly, &o, 2, 0, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "need --model transformer"));
    o = tfm_opts (1, 1);
    CU_ASSERT_EQUAL (layout_init (&ly, &o, 5, 3, &err), 0);
    CU_ASSERT_EQUAL (ly.dp, 5);
    CU_ASSERT_EQUAL (ly.dpr, 3);
    CU_ASSERT_EQUAL (ly.tpr, 0);
}

/* 8 ranks, tp 2: dp 4; tp innermost. */
static void test_coordinates (void)
{
    struct layout ly;
    dt_error_t err;
    struct train_opts o = tfm_opts (2, 1);
    int ranks[8], me;

    CU_ASSERT_EQUAL_FATAL (layout_init (&ly, &o, 8, 5, &err), 0);
    CU_ASSERT_EQUAL (ly.tp, 2);
    CU_ASSERT_EQUAL (ly.dp, 4);
    CU_ASSERT_EQUAL (ly.tpr, 1);
    CU_ASSERT_EQUAL (ly.dpr, 2);
    CU_ASSERT_EQUAL (layout_rank (&ly, ly.dpr, ly.ppr, ly.tpr), 5);
    CU_ASSERT_EQUAL (layout_group (&ly, LAYOUT_TP, ranks, &me), 2);
    CU_ASSERT (ranks[0] == 4 && ranks[1] == 5 && me == 1);
    CU_ASSERT_EQUAL (layout_group (&ly, LAYOUT_DP, ranks, &me), 4);
    CU_ASSERT (ranks[0] == 1 && ranks[1] == 3 && ranks[2] == 5 && ranks[3] == 7);
    CU_ASSERT_EQUAL (me, 2);
    CU_ASSERT_EQUAL (layout_group_id (&ly, LAYOUT_TP), 2);
    CU_ASSERT_EQUAL (layout_group_id (&ly, LAYOUT_DP), 1);
}

/* whole: one rank; part[j]: tp rank j of tp 2; stage[s][j]: tp rank j of
 * pipeline stage s of tp 2 x pp 2 (one block each). */
static struct model whole, part[2], stage[2][2];

static void layouts (void)
{
    memset (&whole, 0, sizeof (whole));
    layout_tfm (&whole, C, E, L, 1, 0, 0, L, 1, 1);
    for (int j = 0; j < 2; j++) {
        memset (&part[j], 0, sizeof (part[j]));
        layout_tfm (&part[j], C, E, L, 2, j, 0, L, 1, 1);
        for (int s = 0; s < 2; s++) {
            memset (&stage[s][j], 0, sizeof (stage[s][j]));
            layout_tfm (&stage[s][j], C, E, L, 2, j, s, s + 1, s == 0, s == 1);
        }
    }
}

static const struct model_tensor *tensor (const struct model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (!strcmp (m->t[i].name, name))
            return &m->t[i];
    return NULL;
}

/* The slices: the split tensors halved, the others whole (replicas on tp
 * rank 1); rank 1's attn.wqkv is columns E/2..E of each of q, k, v. */
static void test_slices (void)
{
    layouts ();
    size_t split =
      (size_t)L * (3 * E * E + 3 * E + E * E + 4 * E * E + 4 * E + 4 * E * E);
    CU_ASSERT_EQUAL (part[0].nparams, whole.nparams - split / 2);
    CU_ASSERT_EQUAL (part[1].nparams, part[0].nparams);
    const struct model_tensor *q = tensor (&part[1], "h1.attn.wqkv");
    CU_ASSERT_PTR_NOT_NULL_FATAL (q);
    CU_ASSERT_EQUAL (q->count, (size_t)E * 3 * E / 2);
    CU_ASSERT_EQUAL (q->goff, tensor (&whole, "h1.attn.wqkv")->off);
    /* local row 1, column E/2 + 1 (k's second column of this half):
     * global row 1, column E + E/2 + 1 */
    CU_ASSERT_EQUAL (layout_global_index (q, 1 * (3 * E / 2) + E / 2 + 1),
                     (size_t)1 * 3 * E + E + E / 2 + 1);
    CU_ASSERT_FALSE (q->replica);
    CU_ASSERT_TRUE (tensor (&part[1], "wte")->replica);
    CU_ASSERT_FALSE (tensor (&part[0], "wte")->replica);
    /* The two halves of every split tensor tile the whole tensor. */
    float *a = calloc (part[0].nparams, 4), *g = calloc (whole.nparams, 4);
    float *back = calloc (part[0].nparams, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL (a && g && back);
    for (size_t i = 0; i < whole.nparams; i++)
        g[i] = -1.0f;
    for (int j = 0; j < 2; j++) {
        for (size_t i = 0; i < part[j].nparams; i++)
            a[i] = 1.0f;
        CU_ASSERT_EQUAL (
          layout_to_global (part[j].t, part[j].ntensors, a, whole.t, whole.ntensors, g),
          0);
    }
    size_t ones = 0;
    for (size_t i = 0; i < whole.nparams; i++)
        ones += g[i] == 1.0f;
    CU_ASSERT_EQUAL (ones, whole.nparams);
    /* from the whole and back */
    for (size_t i = 0; i < whole.nparams; i++)
        g[i] = (float)i;
    CU_ASSERT_EQUAL (
      layout_from_global (part[1].t, part[1].ntensors, back, whole.t, whole.ntensors, g),
      0);
    CU_ASSERT_EQUAL (back[q->off + 1 * (3 * E / 2) + E / 2 + 1],
                     (float)(q->goff + 1 * 3 * E + E + E / 2 + 1));
    free (a), free (g), free (back);
}

/* Whether a shard holds anything for a rank: table entries of one layout
 * against another's slices. */
static int needed (const struct model *from, const struct model *to)
{
    size_t koff[CKPT_KINDS] = { 0, 0, 0 };
    size_t n = ckpt_table_build (from->t, from->ntensors, 0, from->nparams, koff, NULL);
    struct ckpt_named *e = calloc (n, sizeof (*e));
    CU_ASSERT_PTR_NOT_NULL_FATAL (e);
    ckpt_table_build (from->t, from->ntensors, 0, from->nparams, koff, e);
    int r = ckpt_table_needed (e, n, to->t, to->ntensors);
    free (e);
    return r;
}

static void test_needed (void)
{
    layouts ();
    CU_ASSERT_TRUE (needed (&whole, &part[1]));
    CU_ASSERT_TRUE (needed (&part[1], &whole));
    CU_ASSERT_TRUE (needed (&part[0], &part[0]));
    /* tp rank 1's shard: its halves and replicas only */
    CU_ASSERT_FALSE (needed (&part[1], &part[0]));
    CU_ASSERT_TRUE (needed (&part[0], &part[1])); /* rank 0 holds the replicated ones */
    /* another stage's shard */
    CU_ASSERT_FALSE (needed (&stage[0][0], &stage[1][0]));
    CU_ASSERT_FALSE (needed (&stage[1][1], &stage[0][1]));
    CU_ASSERT_TRUE (needed (&stage[1][0], &part[0]));
}

static char root[] = "/tmp/test_layout.XXXXXX";
static int no_table; /* save () writes shards without a tensor table */
static const char *cfg = "model=byte-transformer-v1\nwidth=8\n";

/* Write world shards of step: rank r holds the layout lay[r] and the
 * slice [lo, hi) of it (its dp share), its state taken from the whole
 * vectors g[3]. */
static void save (int64_t step, int world, struct model *const *lay, const size_t *lo,
                  const size_t *hi, float *const g[3], int parallel)
{
    dtclient_t *c = dtclient_open ();
    struct dt_kern_ops *k = dt_kern_cpu ();
    for (int r = 0; r < world; r++) {
        const struct model *m = lay[r];
        float *loc[3];
        for (int j = 0; j < 3; j++) {
            loc[j] = calloc (m->nparams, 4);
            CU_ASSERT_PTR_NOT_NULL_FATAL (loc[j]);
            layout_from_global (m->t, m->ntensors, loc[j], whole.t, whole.ntensors, g[j]);
        }
        struct ckpt_writer *w = ckpt_writer_create (c);
        struct ckpt_done d;
        dt_error_t err;
        double stall;
        struct ckpt_meta meta = {
            .root = root,
            .job = "unit",
            .step = step,
            .rank = r,
            .world = world,
            .parallel = parallel,
            .nparams = m->nparams,
            .lo = lo[r],
            .hi = hi[r],
            .config = cfg,
            .tensors = no_table ? NULL : m->t,
            .ntensors = no_table ? 0 : m->ntensors,
        };
        CU_ASSERT_EQUAL_FATAL (ckpt_save_async (w, k, &meta, loc[0] + lo[r],
                                                loc[1] + lo[r], loc[2] + lo[r], &stall,
                                                &err),
                               0);
        ckpt_wait (w);
        ckpt_last_done (w, &d);
        CU_ASSERT_FALSE (d.failed);
        ckpt_writer_destroy (w);
        for (int j = 0; j < 3; j++)
            free (loc[j]);
    }
    dtclient_close (c);
}

/* Load stepdir into layout m and compare, bit for bit, with the whole
 * vectors g[3] seen through m. */
static void load_check (const char *stepdir, const struct model *m, float *const g[3],
                        int want_par)
{
    float *got[3], *want[3];
    int64_t step;
    int world, par;
    dt_error_t err;
    for (int j = 0; j < 3; j++) {
        got[j] = calloc (m->nparams, 4);
        want[j] = calloc (m->nparams, 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL (got[j] && want[j]);
        layout_from_global (m->t, m->ntensors, want[j], whole.t, whole.ntensors, g[j]);
    }
    int rc =
      ckpt_load_layout (stepdir, cfg, m->t, m->ntensors, whole.t, whole.ntensors,
                        m->nparams, got[0], got[1], got[2], &step, &world, &par, &err);
    if (rc < 0)
        fprintf (stderr, "load %s: %s\n", stepdir, err.text);
    CU_ASSERT_EQUAL (rc, 0);
    CU_ASSERT_EQUAL (par, want_par);
    for (int j = 0; j < 3; j++) {
        CU_ASSERT (memcmp (got[j], want[j], m->nparams * 4) == 0);
        free (got[j]);
        free (want[j]);
    }
}

/* tp 2 x dp 2 (zero1 slices) -> 1 rank, 1 rank -> tp 2, tp 2 -> tp 2 x dp 2. */
static void test_ckpt_across_layouts (void)
{
    float *g[3];
    char dir[600];
    layouts ();
    for (int j = 0; j < 3; j++) {
        g[j] = malloc (whole.nparams * 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL (g[j]);
        for (size_t i = 0; i < whole.nparams; i++)
            g[j][i] = (float)(j * 100000 + i) * 0.5f;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL (mkdtemp (root));

    /* 4 ranks: tp 2 x dp 2; rank r is tp rank r % 2, dp rank r / 2. */
    struct model *lay4[4] = { &part[0], &part[1], &part[0], &part[1] };
    size_t lo4[4], hi4[4], n = part[0].nparams;
    for (int r = 0; r < 4; r++)
        lo4[r] = n * (r / 2) / 2, hi4[r] = n * (r / 2 + 1) / 2;
    save (10, 4, lay4, lo4, hi4, g, CKPT_PARALLEL (1, 2, 1));
    snprintf (dir, sizeof (dir), "%s/step-10", root);
    load_check (dir, &whole, g, CKPT_PARALLEL (1, 2, 1));
    load_check (dir, &part[1], g, CKPT_PARALLEL (1, 2, 1));

    /* 1 rank -> each tp half */
    struct model *lay1[1] = { &whole };
    size_t lo1[1] = { 0 }, hi1[1] = { whole.nparams };
    save (20, 1, lay1, lo1, hi1, g, 0);
    snprintf (dir, sizeof (dir), "%s/step-20", root);
    load_check (dir, &part[0], g, 0);
    load_check (dir, &part[1], g, 0);

    /* tp 2 x pp 2 -> 1 rank, and 1 rank -> each stage's tp slices */
    struct model *lay22[4] = { &stage[0][0], &stage[0][1], &stage[1][0], &stage[1][1] };
    size_t lo22[4], hi22[4];
    for (int r = 0; r < 4; r++)
        lo22[r] = 0, hi22[r] = lay22[r]->nparams;
    CU_ASSERT (stage[0][0].nparams != stage[1][0].nparams);
    save (40, 4, lay22, lo22, hi22, g, CKPT_PARALLEL (0, 2, 2));
    snprintf (dir, sizeof (dir), "%s/step-40", root);
    load_check (dir, &whole, g, CKPT_PARALLEL (0, 2, 2));
    load_check (dir, &part[0], g, CKPT_PARALLEL (0, 2, 2));
    snprintf (dir, sizeof (dir), "%s/step-20", root);
    for (int r = 0; r < 4; r++)
        load_check (dir, lay22[r], g, 0);

    /* A shard without a tensor table loads only in the one-rank layout. */
    no_table = 1;
    save (50, 1, lay1, lo1, hi1, g, 0);
    no_table = 0;
    snprintf (dir, sizeof (dir), "%s/step-50", root);
    {
        float *q[3];
        int64_t st;
        int w, pr;
        dt_error_t e;
        for (int j = 0; j < 3; j++)
            q[j] = calloc (whole.nparams, 4);
        CU_ASSERT_EQUAL (ckpt_load_named (dir, cfg, whole.t, whole.ntensors,
                                          whole.nparams, q[0], q[1], q[2], &st, &w, &pr,
                                          &e),
                         0);
        CU_ASSERT (memcmp (q[1], g[1], whole.nparams * 4) == 0);
        for (int j = 0; j < 3; j++)
            free (q[j]);
    }
    {
        float *q[3];
        int64_t st;
        int w, pr;
        dt_error_t e;
        for (int j = 0; j < 3; j++)
            q[j] = calloc (part[0].nparams, 4);
        errno = 0;
        CU_ASSERT_EQUAL (ckpt_load_layout (dir, cfg, part[0].t, part[0].ntensors, NULL, 0,
                                           part[0].nparams, q[0], q[1], q[2], &st, &w,
                                           &pr, &e),
                         -1);
        CU_ASSERT_EQUAL (errno, EINVAL);
        CU_ASSERT_PTR_NOT_NULL (
          strstr (e.text, "no tensor table, so it loads only in the one-rank layout"));
        for (int j = 0; j < 3; j++)
            free (q[j]);
    }

    /* Two shards that both hold tp rank 0's half: the other half is held
     * by no shard, and the loader says so. */
    struct model *dup[2] = { &part[0], &part[0] };
    size_t lo2[2] = { 0, 0 }, hi2[2] = { part[0].nparams, part[0].nparams };
    save (30, 2, dup, lo2, hi2, g, CKPT_PARALLEL (0, 2, 1));
    snprintf (dir, sizeof (dir), "%s/step-30", root);
    float *p = calloc (whole.nparams, 4), *m = calloc (whole.nparams, 4),
          *v = calloc (whole.nparams, 4);
    int64_t step;
    int world, par;
    dt_error_t err;
    errno = 0;
    CU_ASSERT_EQUAL (ckpt_load_named (dir, cfg, whole.t, whole.ntensors, whole.nparams, p,
                                      m, v, &step, &world, &par, &err),
                     -1);
    CU_ASSERT_EQUAL (errno, EBADMSG);
    fprintf (stderr, "(expected) %s\n", err.text);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "shards (must be 1)"));
    free (p), free (m), free (v);
    for (int j = 0; j < 3; j++)
        free (g[j]);
    char cmd[700];
    snprintf (cmd, sizeof (cmd), "rm -rf %s", root);
    CU_ASSERT_EQUAL (system (cmd), 0);
}

static const struct dt_unit_test tests[] = {
    { "invalid layouts refused, naming what does not fit", test_checks },
    { "rank coordinates and groups (tp innermost)", test_coordinates },
    { "tensor-parallel slices tile the tensors, map to the whole", test_slices },
    { "a shard with nothing for a rank's slices is not needed", test_needed },
    { "checkpoints load bit for bit across layouts (tp, pp, dp); a missing slice is "
      "named",
      test_ckpt_across_layouts },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("layout", tests);
}
