/* ckpt_table.c: what a checkpoint's shards hold - the named tensor table of a
 * shard, and the checks that the shards cover a layout (see ckpt_table.h). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "trainer/ckpt_table.h"
#include "trainer/layout.h"

const char *const ckpt_kind_names[CKPT_KINDS] = { "params", "adam_m", "adam_v" };

size_t ckpt_table_build (const struct model_tensor *t, int nt, uint64_t lo, uint64_t hi,
                         const size_t koff[CKPT_KINDS], struct ckpt_named *out)
{
    size_t n = 0;
    for (int k = 0; k < CKPT_KINDS; k++)
        for (int i = 0; i < nt; i++) {
            uint64_t a = t[i].off, b = t[i].off + t[i].count;
            if (a < lo)
                a = lo;
            if (b > hi)
                b = hi;
            if (a >= b)
                continue;
            if (out) {
                struct ckpt_named *e = &out[n];
                memset (e, 0, sizeof (*e));
                snprintf (e->name, sizeof (e->name), "%s/%s", ckpt_kind_names[k],
                          t[i].name);
                e->ndim = (uint32_t)t[i].ndim;
                e->dtype = 0;
                for (int d = 0; d < t[i].ndim && d < 4; d++)
                    e->shape[d] = (uint64_t)t[i].shape[d];
                e->first = a - t[i].off;
                e->count = b - a;
                e->offset = koff[k] + (a - lo) * 4;
                e->vdim = (uint32_t)t[i].vdim;
                e->flags = t[i].replica ? CKPT_NAMED_REPLICA : 0;
                for (int d = 0; d < t[i].vdim && d < 3; d++) {
                    e->vshape[d] = (uint64_t)t[i].vshape[d];
                    e->boff[d] = (uint64_t)t[i].boff[d];
                    e->bext[d] = (uint64_t)t[i].bext[d];
                }
            }
            n++;
        }
    return n;
}

static int find_kind (const char *name, size_t *len)
{
    for (int k = 0; k < CKPT_KINDS; k++) {
        size_t l = strlen (ckpt_kind_names[k]);
        if (!strncmp (name, ckpt_kind_names[k], l) && name[l] == '/') {
            *len = l + 1;
            return k;
        }
    }
    return -1;
}

static void shape_text (char *buf, size_t len, uint32_t ndim, const uint64_t *shape)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t d = 0; d < ndim && d < 4 && at < len; d++)
        at += snprintf (buf + at, len - at, "%s%" PRIu64, d ? "x" : "", shape[d]);
}

/* The entry's block as a model_tensor-like slice (layout.h's terms), or
 * -1 when it does not describe a block of a tensor of 'whole' elements. */
static int entry_block (const struct ckpt_named *e, uint64_t whole,
                        struct model_tensor *b)
{
    uint64_t vn = 1, bn = 1;
    memset (b, 0, sizeof (*b));
    if (e->vdim == 0) {
        b->count = whole;
        return 0;
    }
    if (e->vdim > 3)
        return -1;
    b->vdim = (int)e->vdim;
    for (uint32_t d = 0; d < e->vdim; d++) {
        if (e->vshape[d] == 0 || e->bext[d] == 0 || e->boff[d] > e->vshape[d] ||
            e->bext[d] > e->vshape[d] - e->boff[d])
            return -1;
        b->vshape[d] = (int64_t)e->vshape[d];
        b->boff[d] = (int64_t)e->boff[d];
        b->bext[d] = (int64_t)e->bext[d];
        vn *= e->vshape[d];
        bn *= e->bext[d];
    }
    if (vn != whole)
        return -1;
    b->count = bn;
    return 0;
}

/* The model slice's element that element g of the whole tensor is, or -1
 * when the slice does not hold it. */
static ssize_t local_index (const struct model_tensor *t, size_t g)
{
    if (t->vdim == 0)
        return (ssize_t)g;
    int64_t idx[3];
    for (int d = t->vdim - 1; d >= 0; d--) {
        idx[d] = (int64_t)(g % (size_t)t->vshape[d]);
        g /= (size_t)t->vshape[d];
    }
    size_t i = 0;
    for (int d = 0; d < t->vdim; d++) {
        if (idx[d] < t->boff[d] || idx[d] >= t->boff[d] + t->bext[d])
            return -1;
        i = i * (size_t)t->bext[d] + (size_t)(idx[d] - t->boff[d]);
    }
    return (ssize_t)i;
}

int ckpt_table_place (const char *path, const struct ckpt_named *e, size_t ne,
                      const struct model_tensor *t, int nt, const size_t koff[CKPT_KINDS],
                      const float *const slice[CKPT_KINDS], size_t n_slice,
                      float *const out[CKPT_KINDS], dt_error_t *err)
{
    return ckpt_table_place_cover (path, e, ne, t, nt, NULL, 0, koff, slice, n_slice, out,
                                   NULL, err);
}

int ckpt_table_place_cover (const char *path, const struct ckpt_named *e, size_t ne,
                            const struct model_tensor *t, int nt,
                            const struct model_tensor *all, int nall,
                            const size_t koff[CKPT_KINDS],
                            const float *const slice[CKPT_KINDS], size_t n_slice,
                            float *const out[CKPT_KINDS], uint8_t *cover, dt_error_t *err)
{
    size_t placed[CKPT_KINDS] = { 0, 0, 0 };
    for (size_t j = 0; j < ne; j++) {
        char name[sizeof (e[j].name) + 1];
        size_t pre;
        memcpy (name, e[j].name, sizeof (e[j].name));
        name[sizeof (e[j].name)] = '\0';
        int k = find_kind (name, &pre);
        if (k < 0 || e[j].dtype != 0 || e[j].ndim < 1 || e[j].ndim > 4)
            return errnoprintf (err, EBADMSG,
                                "checkpoint shard %s: tensor table entry %zu "
                                "('%.48s') is malformed",
                                path, j, name);
        const struct model_tensor *mt = NULL;
        int elsewhere = 0; /* a tensor of the whole model this rank lacks */
        for (int i = 0; i < nt && !mt; i++)
            if (!strcmp (t[i].name, name + pre))
                mt = &t[i];
        for (int i = 0; !mt && i < nall; i++)
            if (!strcmp (all[i].name, name + pre)) {
                mt = &all[i];
                elsewhere = 1;
            }
        if (!mt)
            return errnoprintf (err, EINVAL,
                                "checkpoint shard %s: tensor '%s' is not in "
                                "this model",
                                path, name + pre);
        uint64_t want[4] = { 0, 0, 0, 0 }, whole = 1;
        for (int d = 0; d < mt->ndim; d++) {
            want[d] = (uint64_t)mt->shape[d];
            whole *= want[d] ? want[d] : 1;
        }
        if (e[j].ndim != (uint32_t)mt->ndim ||
            memcmp (want, e[j].shape, sizeof (want)) != 0) {
            char a[64], b[64];
            shape_text (a, sizeof (a), e[j].ndim, e[j].shape);
            shape_text (b, sizeof (b), (uint32_t)mt->ndim, want);
            return errnoprintf (err, EINVAL,
                                "checkpoint shard %s: tensor '%s' has shape %s, "
                                "this model %s",
                                path, name + pre, a, b);
        }
        struct model_tensor blk;
        if (entry_block (&e[j], whole, &blk) < 0 || e[j].first > blk.count ||
            e[j].count > blk.count - e[j].first || e[j].offset < koff[k] ||
            (e[j].offset - koff[k]) % 4 != 0 || (e[j].offset - koff[k]) / 4 > n_slice ||
            e[j].count > n_slice - (e[j].offset - koff[k]) / 4)
            return errnoprintf (err, EBADMSG,
                                "checkpoint shard %s: tensor table entry '%s' "
                                "points outside its tensor or slice",
                                path, name);
        const float *src = slice[k] + (e[j].offset - koff[k]) / 4;
        placed[k] += e[j].count;
        if ((e[j].flags & CKPT_NAMED_REPLICA) || elsewhere)
            continue;
        if (blk.vdim == 0 && mt->vdim == 0) {
            /* whole tensors on both sides: the common case, one copy */
            memcpy (out[k] + mt->off + e[j].first, src, e[j].count * 4);
            if (cover && k == 0)
                for (size_t i = 0; i < e[j].count; i++)
                    cover[mt->off + e[j].first + i]++;
            continue;
        }
        for (size_t i = 0; i < e[j].count; i++) {
            ssize_t li = local_index (mt, layout_global_index (&blk, e[j].first + i));
            if (li < 0)
                continue;
            out[k][mt->off + (size_t)li] = src[i];
            if (cover && k == 0)
                cover[mt->off + (size_t)li]++;
        }
    }
    /* Entries do not overlap (each lies in its tensor, tensors in their
     * slice): the counts adding up to the slice means all of it is named. */
    for (int k = 0; k < CKPT_KINDS; k++)
        if (placed[k] != n_slice)
            return errnoprintf (err, EBADMSG,
                                "checkpoint shard %s: the tensor table names %zu "
                                "of the %zu %s values",
                                path, placed[k], n_slice, ckpt_kind_names[k]);
    return 0;
}

/* Every element of the layout mt placed exactly once (cover: the count
 * per element). */
int ckpt_table_check_cover (const char *stepdir, const uint8_t *cover,
                            const struct model_tensor *mt, int nmt, dt_error_t *err)
{
    for (int i = 0; i < nmt; i++)
        for (size_t j = 0; j < mt[i].count; j++)
            if (cover[mt[i].off + j] != 1)
                return errnoprintf (err, EBADMSG,
                                    "checkpoint %s: element %zu of this rank's slice of "
                                    "tensor '%s' is held by %d shards (must be 1)",
                                    stepdir, j, mt[i].name, cover[mt[i].off + j]);
    return 0;
}

int ckpt_table_needed (const struct ckpt_named *e, size_t ne,
                       const struct model_tensor *t, int nt)
{
    for (size_t j = 0; j < ne; j++) {
        char name[sizeof (e[j].name) + 1];
        size_t pre;
        if (e[j].flags & CKPT_NAMED_REPLICA)
            continue;
        memcpy (name, e[j].name, sizeof (e[j].name));
        name[sizeof (e[j].name)] = '\0';
        if (find_kind (name, &pre) < 0)
            return 1; /* malformed: let the placement say so */
        for (int i = 0; i < nt; i++) {
            if (strcmp (t[i].name, name + pre))
                continue;
            int meet = 1, same = e[j].vdim > 0 && e[j].vdim == (uint32_t)t[i].vdim &&
                                 e[j].vdim <= 3;
            for (int d = 0; same && d < t[i].vdim; d++)
                same = e[j].vshape[d] == (uint64_t)t[i].vshape[d];
            /* blocks of one view: their boxes must meet (else assume) */
            for (int d = 0; same && meet && d < t[i].vdim; d++)
                meet = e[j].boff[d] < (uint64_t)(t[i].boff[d] + t[i].bext[d]) &&
                       (uint64_t)t[i].boff[d] < e[j].boff[d] + e[j].bext[d];
            if (meet)
                return 1;
        }
    }
    return 0;
}

static int slice_cmp (const void *a, const void *b)
{
    const struct ckpt_slice *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : (x->hi > y->hi) - (x->hi < y->hi);
}

/* Sorted by start, each non-empty slice starts where the previous one
 * ended (a sum of sizes would let an overlap hide a gap). */
int ckpt_slices_tile (const char *stepdir, struct ckpt_slice *s, size_t n,
                      uint64_t nparams, dt_error_t *err)
{
    uint64_t at = 0;
    qsort (s, n, sizeof (*s), slice_cmp);
    for (size_t i = 0; i < n; i++) {
        if (s[i].lo == s[i].hi)
            continue;
        if (s[i].lo > at)
            return errnoprintf (err, EBADMSG,
                                "checkpoint %s: no shard holds parameters %" PRIu64
                                "..%" PRIu64,
                                stepdir, at, s[i].lo - 1);
        if (s[i].lo < at)
            return errnoprintf (err, EBADMSG,
                                "checkpoint %s: rank %u's slice %" PRIu64 "..%" PRIu64
                                " overlaps another shard's (up to %" PRIu64 ")",
                                stepdir, s[i].rank, s[i].lo, s[i].hi - 1, at - 1);
        at = s[i].hi;
    }
    if (at != nparams)
        return errnoprintf (
          err, EBADMSG, "checkpoint %s: no shard holds parameters %" PRIu64 "..%" PRIu64,
          stepdir, at, nparams - 1);
    return 0;
}
