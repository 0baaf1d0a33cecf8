/* integrity.c: dttrain's silent-error guards (see integrity.h): parameter
 * fingerprints, non-finite values, loss spikes, fingerprints in
 * checkpoints, and their fault injection.
 *
 * Fingerprint: one CRC32C per model tensor over its float32 bits, and the
 * CRC32C of those CRCs (little-endian u32s, in table order) as the
 * summary.  Replicas of one parameter position hold bit-identical
 * parameters (the update is a deterministic function of the reduced
 * gradient), so any difference is an error; per tensor, so the evidence
 * names where.  Parameters, not optimizer state: under zero1 each rank's
 * moments are a different shard.
 *
 * Loss spike rule: the step's loss L (the global batch mean) is a spike
 * when the window holds at least min(W, 8) earlier losses and
 * L > median + k * max(MAD, 1e-3 |median|), where median and MAD (median
 * absolute deviation) are those of the last W (--spike-window) losses that
 * were neither spikes nor skipped.  Only upward jumps count (a falling
 * loss is progress).  The floor on the MAD keeps a flat window from
 * calling noise a spike.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/dtime.h"
#include "common/log.h"
#include "trainer/integrity.h"
#include "trainer/train_int.h"

/* A rank judges a loss once it holds this many (or W, if fewer). */
static const int spike_min_samples = 8;
/* Positions of a bad batch's samples listed in its report (the rest are
 * a pure function of seed and step: data_train_pos). */
static const int positions_max = 64;
/* Per-tensor CRCs are reported by name up to this many tensors (the
 * message stays far below the protocol's 64 KiB of JSON). */
static const int named_tensors_max = 1024;
/* The bit --inject-bitflip flips: a mantissa bit, a change small enough
 * to go unnoticed by the loss, as a real memory error would. */
static const int bitflip_bit = 20;

struct integ {
    float *host; /* a device backend's parameters, copied for the CRCs */
    uint32_t *crcs;
    int64_t *skip;
    size_t nskip;
    double *win, *tmp; /* spike window (ring) and a scratch copy */
    int nwin, win_pos;
    int local_bad; /* this step's own gradient holds NaN or Inf */
    int nan_now;   /* --inject-nan fires in this step */
    int skipped;
    int first_attempt;
    int flip_tensor;     /* -1: no bitflip */
    double fp_s, scan_s; /* time in fingerprints, in gradient scans */
    char group[32];      /* integ_group's name of this rank's replica group */
    int fp_count;
};

struct integ *integ_create (struct trainer *t, dt_error_t *err)
{
    const struct train_opts *o = &t->o;
    struct integ *g = calloc (1, sizeof (*g));
    const char *att = getenv ("DT_ATTEMPT");

    if (!g)
        goto nomem;
    g->first_attempt = !att || !*att || atoi (att) <= 1;
    g->flip_tensor = -1;
    if (!(g->crcs = calloc (t->model.ntensors + 1, sizeof (uint32_t))) ||
        !(g->win = calloc (o->spike_window, sizeof (double))) ||
        !(g->tmp = calloc (o->spike_window, sizeof (double))))
        goto nomem;
    if (t->k->is_device && !(g->host = malloc (t->model.nparams * 4)))
        goto nomem;
    /* --skip-steps (checked by opts_parse) */
    for (const char *p = o->skip_steps; p && *p;) {
        char *end;
        int64_t *n = realloc (g->skip, (g->nskip + 1) * sizeof (int64_t));
        if (!n)
            goto nomem;
        g->skip = n;
        g->skip[g->nskip++] = strtoll (p, &end, 10);
        p = *end ? end + 1 : end;
    }
    /* The rank that flips checks the tensor: under pipeline parallelism
     * the other stages hold other tensors. */
    if (o->bitflip_rank >= 0 && o->bitflip_rank == t->rank) {
        char *end;
        long idx = strtol (o->bitflip_tensor, &end, 10);
        for (int i = 0; i < t->model.ntensors; i++)
            if (!strcmp (t->model.t[i].name, o->bitflip_tensor))
                g->flip_tensor = i;
        if (g->flip_tensor < 0 && !*end && idx >= 0 && idx < t->model.ntensors)
            g->flip_tensor = (int)idx;
        if (g->flip_tensor < 0) {
            errprintf (
              err, "--inject-bitflip: no tensor '%s' in rank %d's part of the model%s",
              o->bitflip_tensor, t->rank, t->ly.pp > 1 ? " (its pipeline stage)" : "");
            integ_destroy (g);
            return NULL;
        }
        if ((size_t)o->bitflip_index >= t->model.t[g->flip_tensor].count) {
            errprintf (err,
                       "--inject-bitflip: tensor %s has %zu elements, no index %" PRId64,
                       t->model.t[g->flip_tensor].name, t->model.t[g->flip_tensor].count,
                       o->bitflip_index);
            integ_destroy (g);
            return NULL;
        }
    }
    return g;
nomem:
    integ_destroy (g);
    errprintf (err, "out of memory");
    return NULL;
}

void integ_destroy (struct integ *g)
{
    if (!g)
        return;
    free (g->host);
    free (g->crcs);
    free (g->skip);
    free (g->win);
    free (g->tmp);
    free (g);
}

void integ_result (const struct integ *g, char *json, size_t len)
{
    char *end = strrchr (json, '}');
    if (!g || !end)
        return;
    char add[192];
    size_t at = end - json;
    int n = snprintf (add, sizeof (add),
                      ", \"fingerprints\": %d, \"fingerprint_s\": %.6f, "
                      "\"grad_scan_s\": %.6f, \"skipped_updates\": %d}",
                      g->fp_count, g->fp_s, g->scan_s, g->skipped);
    if (n > 0 && (size_t)n < sizeof (add) && at + n < len)
        memcpy (json + at, add, n + 1);
}

void integ_before_step (struct trainer *t)
{
    const struct train_opts *o = &t->o;
    struct integ *g = t->integ;
    if (!g->first_attempt || o->bitflip_rank != t->rank || g->flip_tensor < 0 ||
        o->bitflip_step != t->step + 1)
        return;
    size_t at = t->model.t[g->flip_tensor].off + (size_t)o->bitflip_index;
    uint32_t bits;
    if (t->k->download (&bits, t->model.params + at, 4) < 0)
        return;
    bits ^= 1u << bitflip_bit;
    t->k->upload (t->model.params + at, &bits, 4);
    dt_log (LOG_NOTICE,
            "rank %d: injected bit flip (bit %d) in %s[%" PRId64 "] before step %" PRId64,
            t->rank, bitflip_bit, t->model.t[g->flip_tensor].name, o->bitflip_index,
            t->step + 1);
}

void integ_batch (struct trainer *t, uint8_t *ctx, uint8_t *tgt, int cnt)
{
    if (t->o.bad_batch_step != t->step + 1)
        return;
    memset (ctx, 0xff, (size_t)cnt * t->o.context);
    memset (tgt, 0xff, (size_t)cnt);
}

void integ_step_start (struct trainer *t)
{
    const struct train_opts *o = &t->o;
    struct integ *g = t->integ;
    g->local_bad = 0;
    g->nan_now = g->first_attempt && o->nan_rank == t->rank && o->nan_step == t->step + 1;
}

/* Any NaN or Inf in x[0..n): an exponent of all ones.  It runs on every
 * step, over this rank's whole gradient, so it is an integer test on
 * vectors of four floats (GCC and clang vector extensions; SSE2 on
 * x86-64), two at a time: memory-bound, not compute-bound. */
typedef uint32_t integ_u32x4 __attribute__ ((vector_size (16)));
static int any_nonfinite (const float *x, size_t n)
{
    const integ_u32x4 e = { 0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u };
    integ_u32x4 b0 = { 0, 0, 0, 0 }, b1 = { 0, 0, 0, 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        integ_u32x4 v, w;
        memcpy (&v, x + i, 16);
        memcpy (&w, x + i + 4, 16);
        b0 |= (integ_u32x4)((v & e) == e);
        b1 |= (integ_u32x4)((w & e) == e);
    }
    b0 |= b1;
    uint32_t bad = b0[0] | b0[1] | b0[2] | b0[3];
    for (; i < n; i++) {
        uint32_t u;
        memcpy (&u, x + i, 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

void integ_local_grads (struct trainer *t, size_t off, float *grads, size_t n)
{
    struct integ *g = t->integ;
    double s = 0;
    if (off == 0 && g->nan_now && n > 0) {
        float nan = NAN;
        t->k->upload (grads, &nan, 4);
        g->nan_now = 0;
        fprintf (stderr,
                 "dttrain: rank %d: injected NaN into the gradient of step %" PRId64 "\n",
                 t->rank, t->step + 1);
    }
    /* No data parallelism (one rank, or tensor and pipeline parallelism
     * alone): nothing reduces this rank's gradient, so the norm's pass
     * over it says whether it is finite (integ_local_sumsq); no scan. */
    if (t->ly.dp == 1)
        return;
    int64_t t0 = dt_mono_ns ();
    if (!t->k->is_device)
        g->local_bad |= any_nonfinite (grads, n);
    else if (t->k->sumsq (n, grads, &s) < 0 || !isfinite (s))
        g->local_bad = 1;
    g->scan_s += (dt_mono_ns () - t0) / 1e9;
}

void integ_local_sumsq (struct trainer *t, double sumsq)
{
    if (t->ly.dp == 1)
        t->integ->local_bad = !isfinite (sumsq);
}

uint32_t integ_fingerprint (struct trainer *t, const float *params, uint32_t *crcs)
{
    const struct model *m = &t->model;
    uint32_t *c = crcs ? crcs : t->integ->crcs;
    for (int i = 0; i < m->ntensors; i++)
        c[i] = dt_crc32c (0, params + m->t[i].off, m->t[i].count * 4);
    /* little-endian u32s on every platform dttrain builds for */
    return dt_crc32c (0, c, (size_t)m->ntensors * 4);
}

/* This rank's fingerprint now (per-tensor CRCs in g->crcs); 0 when a
 * device copy fails (logged). */
static uint32_t fingerprint_now (struct trainer *t)
{
    struct integ *g = t->integ;
    int64_t t0 = dt_mono_ns ();
    const float *p = t->model.params;
    if (t->k->is_device) {
        if (t->k->download (g->host, t->model.params, t->model.nparams * 4) < 0) {
            dt_log (LOG_ERR, "rank %d: fingerprint: %s", t->rank, t->k->last_error);
            return 0;
        }
        p = g->host;
    }
    uint32_t fp = integ_fingerprint (t, p, NULL);
    g->fp_s += (dt_mono_ns () - t0) / 1e9;
    g->fp_count++;
    return fp;
}

static void put_num (FILE *f, const char *key, double v)
{
    if (isfinite (v))
        fprintf (f, ", \"%s\": %.9g", key, v);
    else
        fprintf (f, ", \"%s\": \"%s\"", key, isnan (v) ? "nan" : v > 0 ? "inf" : "-inf");
}

/* The fingerprint part of a report: ", "fingerprint": ..., "tensors": {...}". */
static void put_fingerprint (struct trainer *t, FILE *f, uint32_t fp)
{
    const struct model *m = &t->model;
    fprintf (f, ", \"fingerprint\": \"%08x\"", fp);
    if (m->ntensors > named_tensors_max)
        return;
    fputs (", \"tensors\": {", f);
    for (int i = 0; i < m->ntensors; i++)
        fprintf (f, "%s\"%s\": \"%08x\"", i ? ", " : "", m->t[i].name, t->integ->crcs[i]);
    fputs ("}", f);
}

/* The batch of step s (1-based): the data positions of its first samples. */
static void put_positions (struct trainer *t, FILE *f, int64_t s)
{
    int n = t->o.global_batch < positions_max ? t->o.global_batch : positions_max;
    fprintf (f, ", \"batch\": {\"seed\": %" PRIu64 ", \"samples\": %d, \"positions\": [",
             t->o.seed, t->o.global_batch);
    for (int i = 0; i < n; i++)
        fprintf (f, "%s%zu", i ? ", " : "",
                 data_train_pos (&t->data, t->o.seed, s - 1, i));
    fputs ("]}", f);
}

/* The ranks that must hold identical parameters: the data-parallel
 * replicas of one (tp, pp) position ("dp" when every rank holds the whole
 * model).  The name lives in the trainer's integ state. */
const char *integ_group (const struct trainer *t)
{
    struct integ *g = t->integ;
    if (t->ly.tp * t->ly.pp == 1)
        return "dp";
    snprintf (g->group, sizeof (g->group), "tp%d.pp%d", t->ly.tpr, t->ly.ppr);
    return g->group;
}

/* Send one report: "{"step": s, "group": ..." + body + "}". */
static void report (struct trainer *t, int64_t s, const char *body)
{
    char head[96];
    snprintf (head, sizeof (head), "{\"step\": %" PRId64 ", \"group\": \"%s\"", s,
              integ_group (t));
    size_t n = strlen (head) + strlen (body) + 2;
    char *msg = malloc (n);
    if (!msg)
        return;
    snprintf (msg, n, "%s%s}", head, body);
    dtclient_err_t e = dtclient_integrity (t->client, msg);
    if (e != DTCLIENT_OK)
        dt_log (LOG_WARNING, "rank %d: integrity report of step %" PRId64 ": %s", t->rank,
                s, dtclient_strerror (e));
    free (msg);
}

static int cmp_dbl (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of (double *v, int n)
{
    qsort (v, n, sizeof (double), cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The spike rule on loss (see the top of the file); *med, *mad filled. */
static int is_spike (struct trainer *t, double loss, double *med, double *mad)
{
    struct integ *g = t->integ;
    int w = t->o.spike_window;
    int need = w < spike_min_samples ? w : spike_min_samples;
    if (t->o.spike_k <= 0 || g->nwin < need)
        return 0;
    memcpy (g->tmp, g->win, g->nwin * sizeof (double));
    *med = median_of (g->tmp, g->nwin);
    for (int i = 0; i < g->nwin; i++)
        g->tmp[i] = fabs (g->win[i] - *med);
    *mad = median_of (g->tmp, g->nwin);
    double floor = 1e-3 * fabs (*med);
    return loss > *med + t->o.spike_k * (*mad > floor ? *mad : floor);
}

static void window_add (struct integ *g, int w, double loss)
{
    g->win[g->win_pos] = loss;
    g->win_pos = (g->win_pos + 1) % w;
    if (g->nwin < w)
        g->nwin++;
}

int integ_judge (struct trainer *t, double loss_local, double loss, double norm2)
{
    struct integ *g = t->integ;
    int64_t s = t->step + 1;
    char *body = NULL;
    size_t len = 0;
    FILE *f;
    int skip = 0;

    for (size_t i = 0; i < g->nskip; i++)
        if (g->skip[i] == s) {
            if (t->rank == 0)
                dt_log (LOG_NOTICE,
                        "step %" PRId64 ": update skipped (--skip-steps: a bad batch)",
                        s);
            g->skipped++;
            return 1;
        }
    int finite = isfinite (loss) && isfinite (norm2);
    double med = NAN, mad = NAN;
    int spike = finite && is_spike (t, loss, &med, &mad);
    if (finite && !spike) {
        window_add (g, t->o.spike_window, loss);
        return 0;
    }
    if (!(f = open_memstream (&body, &len)))
        return !finite;
    if (!finite) {
        /* The global values are poisoned on every rank; this rank's own
         * gradient (before the reduction) and loss say whether it is the
         * source. */
        int lg = !g->local_bad;
        int ll = isfinite (loss_local);
        fputs (", \"nonfinite\": {\"skipped\": true", f);
        put_num (f, "loss", loss);
        put_num (f, "grad_norm", sqrt (norm2));
        fprintf (f, ", \"local_grad_finite\": %s, \"local_loss_finite\": %s}",
                 lg ? "true" : "false", ll ? "true" : "false");
        dt_log (LOG_WARNING,
                "rank %d: step %" PRId64 ": non-finite %s (loss %g, |g| %g; this rank's "
                "gradient %s): update skipped",
                t->rank, s, isfinite (loss) ? "gradient" : "loss", loss, sqrt (norm2),
                lg ? "finite" : "NOT finite");
        skip = 1;
        g->skipped++;
    }
    else {
        fputs (", \"loss_spike\": {", f);
        fprintf (f,
                 "\"loss\": %.9g, \"median\": %.9g, \"mad\": %.9g, \"k\": %g, "
                 "\"window\": %d}",
                 loss, med, mad, t->o.spike_k, g->nwin);
        if (t->rank == 0)
            dt_log (LOG_WARNING,
                    "step %" PRId64 ": loss spike %.4f (median %.4f, MAD %.4f, k %g)", s,
                    loss, med, mad, t->o.spike_k);
    }
    put_positions (t, f, s);
    if (fclose (f) == 0)
        report (t, s, body);
    free (body);
    return skip;
}

void integ_after_step (struct trainer *t)
{
    int64_t every = t->o.integrity_every;
    if (every <= 0 || t->step % every != 0)
        return;
    uint32_t fp = fingerprint_now (t);
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&body, &len);
    if (!f)
        return;
    put_fingerprint (t, f, fp);
    if (fclose (f) == 0)
        report (t, t->step, body);
    free (body);
}

uint32_t integ_checkpoint (struct trainer *t)
{
    int64_t every = t->o.integrity_every;
    uint32_t fp = fingerprint_now (t);
    /* A periodic report of this step says the same: send one. */
    if (every > 0 && t->step % every == 0)
        return fp;
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&body, &len);
    if (!f)
        return fp;
    put_fingerprint (t, f, fp);
    fputs (", \"checkpoint\": true", f);
    if (fclose (f) == 0 && every > 0)
        report (t, t->step, body);
    free (body);
    return fp;
}

/* "params_fingerprint=GROUP:XXXXXXXX" in a shard's config: 1 with the
 * group (up to len - 1 bytes) and *fp, 0 absent. */
static int config_fingerprint (const char *cfg, char *group, size_t len, uint32_t *fp)
{
    const char *key = "params_fingerprint=";
    for (const char *p = cfg; p && *p;
         p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        if (strncmp (p, key, strlen (key)))
            continue;
        p += strlen (key);
        size_t n = strcspn (p, ":\n");
        if (p[n] != ':' || n >= len)
            return 0;
        memcpy (group, p, n);
        group[n] = '\0';
        *fp = (uint32_t)strtoul (p + n + 1, NULL, 16);
        return 1;
    }
    return 0;
}

int integ_verify_resume (struct trainer *t, const char *stepdir, int world,
                         int same_layout, const float *params, dt_error_t *err)
{
    /* Shards of one replica group must agree (another group holds other
     * parameters: a different parameter position). */
    enum { GROUPS_MAX = 256 };
    struct {
        char name[32];
        uint32_t fp;
    } *seen = calloc (GROUPS_MAX, sizeof (*seen));
    char path[1100], group[32];
    uint32_t fp = 0, fp0 = 0;
    int groups = 0;

    if (!seen)
        return errprintf (err, "out of memory");
    for (int r = 0; r < world; r++) {
        snprintf (path, sizeof (path), "%s/rank-%d.ckpt", stepdir, r);
        char *cfg = ckpt_shard_config (path, err);
        if (!cfg) {
            free (seen);
            return -1;
        }
        int have = config_fingerprint (cfg, group, sizeof (group), &fp);
        free (cfg);
        if (!have)
            continue;
        int g = 0;
        while (g < groups && strcmp (seen[g].name, group))
            g++;
        if (g == groups && groups < GROUPS_MAX) {
            snprintf (seen[g].name, sizeof (seen[g].name), "%s", group);
            seen[g].fp = fp;
            groups++;
        }
        else if (g < groups && fp != seen[g].fp) {
            errnoprintf (err, EBADMSG,
                         "checkpoint shard %s: fingerprint %08x, not %08x: written after "
                         "replicas diverged",
                         path, fp, seen[g].fp);
            free (seen);
            return -1;
        }
    }
    /* This rank holds what its group's shards held (its slice under a
     * layout): the loaded parameters must be them.  Saved in another
     * layout, the groups hold other slices: each group's shards agreed. */
    const char *mine = integ_group (t);
    int g = 0;
    while (g < groups && strcmp (seen[g].name, mine))
        g++;
    fp0 = g < groups ? seen[g].fp : 0;
    free (seen);
    if (!same_layout || g == groups)
        return 0;
    uint32_t *crcs = calloc (t->model.ntensors + 1, sizeof (uint32_t));
    if (!crcs)
        return errprintf (err, "out of memory");
    fp = integ_fingerprint (t, params, crcs);
    free (crcs);
    if (fp != fp0) {
        snprintf (path, sizeof (path), "%s/rank-%d.ckpt", stepdir,
                  t->rank < world ? t->rank : 0);
        return errnoprintf (err, EBADMSG,
                            "checkpoint shard %s: loaded parameters have fingerprint "
                            "%08x, the shards of group %s record %08x",
                            path, fp, mine, fp0);
    }
    return 0;
}
