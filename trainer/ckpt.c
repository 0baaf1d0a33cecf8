/* ckpt.c: checkpoint shards - asynchronous writer and loader (format in ckpt.h). */
#include "config.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fsutil.h"
#include "common/dtime.h"
#include "trainer/ckpt.h"
#include "trainer/ckpt_table.h"
#include "trainer/opts.h"

#define CKPT_MAGIC "DTCKPT\r\n"
/* Version 2 adds the named tensor table (ckpt_table.h) as a fourth
 * table entry after the three slices; version 1 shards (no table) still
 * load, by flat offset.  Version 3 adds each entry's block (the slice of
 * the tensor its writer held under a tensor-parallel layout) and the
 * layout in the header's parallel field (ckpt.h). */
#define CKPT_VERSION 3
#define CKPT_NT 3                /* the slices: params, adam_m, adam_v */
#define CKPT_NTENT (CKPT_NT + 1) /* and the tensor table (version 2) */

struct ckpt_hdr {
    char magic[8];
    uint32_t version;
    uint32_t hdr_bytes;
    int64_t step;
    uint32_t rank, world;
    uint32_t parallel, ntensors;
    uint64_t nparams, lo, hi, seed, data_cursor, config_bytes;
    char job[128];
    uint32_t hdr_crc; /* over the bytes before this field */
    uint32_t pad;
};

struct ckpt_tent {
    char name[32];
    uint64_t offset, count;
    uint32_t dtype, crc;
    uint64_t reserved;
};

static const char *tensor_names[CKPT_NTENT] = { "params", "adam_m", "adam_v",
                                                "tensor_table" };

/* The most config text a shard header may announce: the options are a few
 * hundred bytes; a larger value is a corrupt or forged header (and
 * UINT64_MAX would wrap the allocation's size). */
static const uint64_t ckpt_config_max = (uint64_t)1 << 20;

/* The snapshot is the shard's file image: header, tensor table, config
 * and the three slices, each at its file offset, in one buffer aligned for
 * O_DIRECT.  Copying the state straight into it costs no more than copying
 * it into separate arrays, and the write is then a few large O_DIRECT
 * writes from one buffer, with no page-cache copy (on this project's
 * virtio ext4 disk: buffered + fsync 250-360 MB/s, O_DIRECT 1.3-1.5 GB/s
 * for a 66 MB shard). */
struct ckpt_image {
    char *buf; /* CKPT_ALIGN-aligned, cap bytes */
    size_t cap;
};

/* Alignment of O_DIRECT buffers, file offsets and lengths: the logical
 * block size of the device, 512 or 4096 bytes; 4096 serves both. */
#define CKPT_ALIGN 4096
/* Bytes per write call: 4, 16 and 64 MiB measured within noise of each
 * other and of dd bs=4M (1.3-1.5 GB/s); more writers in parallel gained
 * nothing.  16 MiB: few calls, and the buffer of a small shard is one. */
#define CKPT_IO_CHUNK ((size_t)16 << 20)

struct ckpt_writer {
    dtclient_t *client;
    pthread_t thread;
    int running;   /* a thread to join (main thread only) */
    int snap_seen; /* ckpt_snapshot_wait returned for it (main thread only) */
    /* the job, owned by the thread while running */
    struct ckpt_meta meta;
    char *config, *root, *job;
    struct dt_kern_ops *k;
    const float *src[CKPT_NT]; /* borrowed until the snapshot is taken */
    int copied;                /* the image was filled before the thread started */
    double copy_s;             /* the copy's time then */
    struct ckpt_image img;
    /* results */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int snapped; /* the thread no longer reads src */
    struct ckpt_done done;
};

struct ckpt_writer *ckpt_writer_create (dtclient_t *client)
{
    struct ckpt_writer *w = calloc (1, sizeof (*w));
    if (!w)
        return NULL;
    w->client = client;
    pthread_mutex_init (&w->lock, NULL);
    pthread_cond_init (&w->cond, NULL);
    return w;
}

void ckpt_wait (struct ckpt_writer *w)
{
    if (w && w->running) {
        pthread_join (w->thread, NULL);
        w->running = 0;
        w->snap_seen = 1;
    }
}

int ckpt_snapshot_wait (struct ckpt_writer *w, double *stall_s)
{
    *stall_s = 0;
    if (!w || !w->running || w->snap_seen)
        return 0;
    int64_t t0 = dt_mono_ns ();
    pthread_mutex_lock (&w->lock);
    while (!w->snapped)
        pthread_cond_wait (&w->cond, &w->lock);
    pthread_mutex_unlock (&w->lock);
    w->snap_seen = 1;
    *stall_s = (dt_mono_ns () - t0) / 1e9;
    return 1;
}

void ckpt_writer_destroy (struct ckpt_writer *w)
{
    if (!w)
        return;
    ckpt_wait (w);
    free (w->img.buf);
    free (w->config);
    free (w->root);
    free (w->job);
    pthread_cond_destroy (&w->cond);
    pthread_mutex_destroy (&w->lock);
    free (w);
}

void ckpt_last_done (struct ckpt_writer *w, struct ckpt_done *out)
{
    pthread_mutex_lock (&w->lock);
    *out = w->done;
    pthread_mutex_unlock (&w->lock);
}

/* CRC32C of A||B from crc(A), crc(B) and |B| (zlib's crc32_combine, for
 * the Castagnoli polynomial): the file's CRC follows from the tensors'
 * without a second pass over the data.  multmodp: a * b modulo P. */
static uint32_t multmodp (uint32_t a, uint32_t b)
{
    uint32_t m = (uint32_t)1 << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

static uint32_t crc32c_combine (uint32_t crc1, uint32_t crc2, uint64_t len2)
{
    uint32_t x2k = (uint32_t)1 << 23; /* x^8 (bit 31 - j is x^j): one byte */
    uint32_t p = (uint32_t)1 << 31;   /* x^0 */
    for (; len2; len2 >>= 1) {        /* p = x^(8 len2) mod P */
        if (len2 & 1)
            p = multmodp (x2k, p);
        x2k = multmodp (x2k, x2k);
    }
    return multmodp (p, crc1) ^ crc2;
}

static size_t align64 (size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static size_t align_io (size_t x)
{
    return (x + CKPT_ALIGN - 1) & ~(size_t)(CKPT_ALIGN - 1);
}

/* File offsets of the three slices of a shard of count floats each and of
 * its tensor table (ntab entries), and the file size (every part 64-byte
 * aligned). */
static size_t shard_layout (size_t count, size_t cfg, size_t ntab, size_t off[CKPT_NTENT])
{
    size_t o =
      align64 (sizeof (struct ckpt_hdr) + sizeof (struct ckpt_tent[CKPT_NTENT]) + cfg);
    for (int i = 0; i < CKPT_NT; i++) {
        off[i] = o;
        o = align64 (o + count * 4);
    }
    /* An empty table adds nothing: the file ends with adam_v. */
    off[CKPT_NT] = ntab ? o : off[CKPT_NT - 1] + count * 4;
    return off[CKPT_NT] + ntab * sizeof (struct ckpt_named);
}

/* Length in bytes of part i of a shard laid out by shard_layout. */
static size_t part_bytes (int i, size_t count, size_t ntab)
{
    return i < CKPT_NT ? count * 4 : ntab * sizeof (struct ckpt_named);
}

/* shard_layout for meta's slice; *ntab: its table's entries. */
static size_t meta_layout (const struct ckpt_meta *m, size_t off[CKPT_NTENT],
                           size_t *ntab)
{
    *ntab = ckpt_table_build (m->tensors, m->ntensors, m->lo, m->hi, NULL, NULL);
    return shard_layout (m->hi - m->lo, strlen (m->config), *ntab, off);
}

/* Room for a shard of 'bytes' plus the padding to the next block. */
static int image_reserve (struct ckpt_image *img, size_t bytes)
{
    size_t need = align_io (bytes);
    if (need <= img->cap)
        return 0;
    free (img->buf);
    img->buf = NULL;
    img->cap = 0;
    if (posix_memalign ((void **)&img->buf, CKPT_ALIGN, need) != 0) {
        img->buf = NULL;
        errno = ENOMEM;
        return -1;
    }
    img->cap = need;
    return 0;
}

typedef int (*copy_f) (void *dst, const void *src, size_t bytes);

static int host_copy (void *dst, const void *src, size_t bytes)
{
    memcpy (dst, src, bytes);
    return 0;
}

/* Copy shard m's slices (src, copied with copy) to their places in img,
 * which image_reserve sized.  This is all the step loop waits for.  0, or
 * -1 with error (the copy failed). */
static int image_copy (struct ckpt_image *img, const struct ckpt_meta *m,
                       const float *const src[CKPT_NT], copy_f copy,
                       const char *copy_error, char *error, size_t errlen)
{
    size_t count = m->hi - m->lo, off[CKPT_NTENT], ntab;

    meta_layout (m, off, &ntab);
    for (int i = 0; i < CKPT_NT; i++)
        if (count && copy (img->buf + off[i], src[i], count * 4) < 0) {
            snprintf (error, errlen, "checkpoint snapshot: %s", copy_error);
            return -1;
        }
    return 0;
}

/* Complete the image that image_copy filled: tensor CRC32Cs, header,
 * table, config, zero gaps.  *bytes: the file size, *crc: its CRC32C. */
static void image_seal (struct ckpt_image *img, const struct ckpt_meta *m, size_t *bytes,
                        uint32_t *crc)
{
    size_t count = m->hi - m->lo, cfg = strlen (m->config), off[CKPT_NTENT], ntab;
    size_t total = meta_layout (m, off, &ntab);
    struct ckpt_hdr h;
    struct ckpt_tent t[CKPT_NTENT];
    char *b = img->buf;

    ckpt_table_build (m->tensors, m->ntensors, m->lo, m->hi, off,
                      (struct ckpt_named *)(b + off[CKPT_NT]));
    memset (t, 0, sizeof (t));
    for (int i = 0; i < CKPT_NTENT; i++) {
        snprintf (t[i].name, sizeof (t[i].name), "%s", tensor_names[i]);
        t[i].offset = off[i];
        t[i].count = i < CKPT_NT ? count : ntab;
        t[i].dtype = i < CKPT_NT ? 0 : 1; /* float32; table entries */
        t[i].crc = dt_crc32c (0, b + off[i], part_bytes (i, count, ntab));
    }
    memset (&h, 0, sizeof (h));
    memcpy (h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.hdr_bytes = sizeof (h);
    h.step = m->step;
    h.rank = m->rank;
    h.world = m->world;
    h.parallel = m->parallel;
    h.ntensors = CKPT_NTENT;
    h.nparams = m->nparams;
    h.lo = m->lo;
    h.hi = m->hi;
    h.seed = m->seed;
    h.data_cursor = m->data_cursor;
    h.config_bytes = cfg;
    snprintf (h.job, sizeof (h.job), "%s", m->job);
    h.hdr_crc = dt_crc32c (0, &h, offsetof (struct ckpt_hdr, hdr_crc));
    memcpy (b, &h, sizeof (h));
    memcpy (b + sizeof (h), t, sizeof (t));
    memcpy (b + sizeof (h) + sizeof (t), m->config, cfg);
    /* The gaps are zeros: between the config and each tensor, and after
     * the last one up to the block the O_DIRECT write ends on. */
    size_t gap = sizeof (h) + sizeof (t) + cfg;
    for (int i = 0; i < CKPT_NTENT; i++) {
        memset (b + gap, 0, off[i] - gap);
        gap = off[i] + part_bytes (i, count, ntab);
    }
    memset (b + total, 0, align_io (total) - total);
    /* The file's CRC32C: the head, then each tensor's (already known)
     * combined, then the gap after it. */
    uint32_t c = dt_crc32c (0, b, off[0]);
    for (int i = 0; i < CKPT_NTENT; i++) {
        size_t len = part_bytes (i, count, ntab);
        c = crc32c_combine (c, t[i].crc, (uint64_t)len);
        size_t end = off[i] + len, next = i + 1 < CKPT_NTENT ? off[i + 1] : total;
        c = dt_crc32c (c, b + end, next - end);
    }
    *bytes = total;
    *crc = c;
}

/* Write the first 'bytes' of buf (CKPT_ALIGN-aligned, zero-padded to the
 * next block) to fd from offset 0.  O_DIRECT writes whole blocks; the
 * caller truncates to 'bytes' (*past: the file ends beyond it).  A file
 * system that refuses O_DIRECT on write (EINVAL) gets buffered writes. */
static int write_image (int fd, const char *buf, size_t bytes, int direct, int *past)
{
    size_t pos = 0;
    *past = 0;
    while (pos < bytes) {
        size_t end = direct ? align_io (bytes) : bytes;
        size_t len = end - pos < CKPT_IO_CHUNK ? end - pos : CKPT_IO_CHUNK;
        ssize_t n = pwrite (fd, buf + pos, len, (off_t)pos);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EINVAL && direct) {
                int fl = fcntl (fd, F_GETFL);
                if (fl < 0 || fcntl (fd, F_SETFL, fl & ~O_DIRECT) < 0)
                    return -1;
                direct = 0;
                continue;
            }
            return -1;
        }
        /* A short O_DIRECT write ends on a block boundary (ENOSPC next). */
        pos += (size_t)n;
    }
    *past = pos > bytes;
    return 0;
}

/* Write the image (bytes long) as dir/rank-<rank>.ckpt: temporary name,
 * written, fsync'd, renamed, directory fsync'd.  Fills d's path, bytes,
 * crc and write_s (this I/O only).  Runs on the writer thread, or on the
 * main thread for a just-in-time checkpoint. */
static int image_write (const struct ckpt_image *img, size_t bytes, uint32_t crc,
                        int rank, const char *dir, struct ckpt_done *d)
{
    char tmp[1100];
    int fd = -1, past;
    int64_t t0 = dt_mono_ns ();

    if (dt_pathf (d->path, sizeof (d->path), "%s/rank-%d.ckpt", dir, rank) < 0 ||
        dt_pathf (tmp, sizeof (tmp), "%s.tmp.%d", d->path, (int)getpid ()) < 0) {
        snprintf (d->error, sizeof (d->error), "checkpoint path too long: %.100s", dir);
        return -1;
    }
    if (dt_mkdir_p (dir, 0755) < 0) {
        snprintf (d->error, sizeof (d->error), "mkdir %.100s: %s", dir, strerror (errno));
        return -1;
    }
    /* O_DIRECT: the data goes from the image to the device, without a copy
     * into the page cache and its write-back at fsync.  Refused at open
     * (EINVAL) by file systems without it: buffered then. */
    int direct = 1;
    fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) {
        direct = 0;
        fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        goto io_error;
    if (write_image (fd, img->buf, bytes, direct, &past) < 0)
        goto io_error;
    /* One fsync for the data, the size and the extents. */
    if ((past && ftruncate (fd, (off_t)bytes) < 0) || fsync (fd) < 0)
        goto io_error;
    if (close (fd) < 0) {
        fd = -1;
        goto io_error;
    }
    fd = -1;
    if (rename (tmp, d->path) < 0 || dt_fsync_dir (dir) < 0)
        goto io_error;
    d->bytes = bytes;
    d->crc = crc;
    d->write_s = (dt_mono_ns () - t0) / 1e9;
    return 0;
io_error:
    snprintf (d->error, sizeof (d->error), "writing %.100s: %s", tmp, strerror (errno));
    if (fd >= 0)
        close (fd);
    unlink (tmp);
    return -1;
}

static void *writer_thread (void *arg)
{
    struct ckpt_writer *w = arg;
    struct ckpt_done d;
    char dir[900];
    size_t bytes = 0;
    uint32_t crc = 0;
    int rc = 0;

    memset (&d, 0, sizeof (d));
    d.step = w->meta.step;
    /* The snapshot: until it is taken the step loop must not change the
     * state (ckpt_snapshot_wait before the optimizer update), so only the
     * copy comes before the signal; the CRC32Cs after it.  A device
     * backend's copy was made by ckpt_save_async. */
    int64_t t0 = dt_mono_ns ();
    if (!w->copied)
        rc = image_copy (&w->img, &w->meta, w->src, w->k->download, w->k->last_error,
                         d.error, sizeof (d.error));
    pthread_mutex_lock (&w->lock);
    w->snapped = 1;
    pthread_cond_broadcast (&w->cond);
    pthread_mutex_unlock (&w->lock);
    if (rc == 0)
        image_seal (&w->img, &w->meta, &bytes, &crc);
    d.snapshot_s = (dt_mono_ns () - t0) / 1e9 + (w->copied ? w->copy_s : 0);

    snprintf (dir, sizeof (dir), "%s/step-%" PRId64, w->root, w->meta.step);
    if (rc < 0 || image_write (&w->img, bytes, crc, w->meta.rank, dir, &d) < 0) {
        d.failed = 1;
        dtclient_shard_failed (w->client, d.step, d.error);
    }
    else
        dtclient_shard_written (w->client, d.step, d.path, d.bytes, d.crc);
    pthread_mutex_lock (&w->lock);
    w->done = d;
    pthread_mutex_unlock (&w->lock);
    return NULL;
}

static char *xstrdup_into (char **slot, const char *s)
{
    free (*slot);
    return *slot = strdup (s ? s : "");
}

int ckpt_save_async (struct ckpt_writer *w, struct dt_kern_ops *k,
                     const struct ckpt_meta *meta, const float *params, const float *m,
                     const float *v, double *stall_s, dt_error_t *err)
{
    int64_t t0 = dt_mono_ns ();
    size_t off[CKPT_NTENT], ntab;

    ckpt_wait (w);
    if (!xstrdup_into (&w->config, meta->config) ||
        !xstrdup_into (&w->root, meta->root) || !xstrdup_into (&w->job, meta->job))
        return errprintf (err, "checkpoint snapshot: out of memory");
    w->meta = *meta;
    w->meta.config = w->config;
    w->meta.root = w->root;
    w->meta.job = w->job;
    if (image_reserve (&w->img, meta_layout (&w->meta, off, &ntab)) < 0)
        return errprintf (err, "checkpoint snapshot: out of memory");
    w->k = k;
    w->src[0] = params;
    w->src[1] = m;
    w->src[2] = v;
    w->snapped = 0;
    w->snap_seen = 0;
    w->copied = 0;
    /* A device backend's download runs on the main thread: its context and
     * current device belong to this thread (cudaSetDevice (LOCAL_RANK)),
     * and another thread would use device 0.  The copy is the stall there,
     * as before; the CRC32Cs and the write still run in the background. */
    if (k->is_device) {
        char e[160];
        int64_t t1 = dt_mono_ns ();
        if (image_copy (&w->img, &w->meta, w->src, k->download, k->last_error, e,
                        sizeof (e)) < 0)
            return errprintf (err, "%s", e);
        w->copy_s = (dt_mono_ns () - t1) / 1e9;
        w->copied = 1;
    }
    if (pthread_create (&w->thread, NULL, writer_thread, w) != 0)
        return errprintf (err, "checkpoint writer thread: %s", strerror (errno));
    w->running = 1;
    *stall_s = (dt_mono_ns () - t0) / 1e9;
    return 0;
}

/* CRC32C of the whole file at path into *crc, *bytes its size. */
static int file_crc (const char *path, uint32_t *crc, uint64_t *bytes)
{
    char buf[1 << 16];
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    if (fd < 0)
        return -1;
    *crc = 0;
    *bytes = 0;
    while ((n = read (fd, buf, sizeof (buf))) != 0 && (n > 0 || errno == EINTR)) {
        if (n > 0)
            *crc = dt_crc32c (*crc, buf, (size_t)n), *bytes += (uint64_t)n;
    }
    int e = errno;
    close (fd);
    errno = e;
    return n < 0 ? -1 : 0;
}

int ckpt_save_jit (const struct ckpt_meta *meta, const char *dir, const float *params,
                   const float *m, const float *v, ckpt_jit_f cb, void *arg,
                   dt_error_t *err)
{
    const float *full[CKPT_NT] = { params, m, v };
    uint64_t n = meta->nparams;
    struct ckpt_image img = { NULL, 0 };
    size_t off[CKPT_NTENT];
    int rc = -1;

    /* Training has stopped: synchronous, through the same image and O_DIRECT
     * writer as the periodic shards (the same bytes), one image sized for the
     * largest slice (a slice meets at most ntensors entries per kind).  The
     * shards of this rank's dp group: ranks k = rank mod tp pp + j tp pp, the
     * j-th holding [n j / dp, n (j + 1) / dp) of the position's slice. */
    int T = CKPT_PAR_TP (meta->parallel) * CKPT_PAR_PP (meta->parallel);
    int dp = meta->world / T;
    if (dt_mkdir_p (dir, 0755) < 0)
        return errprintf (err, "just-in-time checkpoint: mkdir %s: %s", dir,
                          strerror (errno));
    if (image_reserve (&img, shard_layout ((n + dp - 1) / dp, strlen (meta->config),
                                           (size_t)meta->ntensors * CKPT_NT, off)) < 0)
        return errprintf (err, "just-in-time checkpoint: out of memory");
    for (int j = 0, k; j < dp; j++) {
        struct ckpt_meta sm = *meta;
        struct ckpt_done d;
        const float *src[CKPT_NT];
        uint32_t crc;
        uint64_t bytes;
        size_t len;

        sm.rank = k = meta->rank % T + j * T;
        sm.lo = n * (uint64_t)j / (uint64_t)dp;
        sm.hi = n * (uint64_t)(j + 1) / (uint64_t)dp;
        for (int i = 0; i < CKPT_NT; i++)
            src[i] = full[i] + sm.lo;
        memset (&d, 0, sizeof (d));
        d.step = meta->step;
        image_copy (&img, &sm, src, host_copy, "", d.error, sizeof (d.error));
        image_seal (&img, &sm, &len, &crc);
        if (image_write (&img, len, crc, k, dir, &d) < 0) {
            errprintf (err, "just-in-time checkpoint: %s", d.error);
            goto out;
        }
        /* Verified as written: what is on disk is what will be loaded. */
        if (file_crc (d.path, &crc, &bytes) < 0) {
            errprintf (err, "just-in-time checkpoint: reading back %s: %s", d.path,
                       strerror (errno));
            goto out;
        }
        if (crc != d.crc || bytes != d.bytes) {
            errprintf (err,
                       "just-in-time checkpoint: %s reads back as %" PRIu64
                       " bytes CRC32C %08x, wrote %" PRIu64 " bytes %08x",
                       d.path, bytes, crc, d.bytes, d.crc);
            goto out;
        }
        /* image_write fsync'd the directory: the shard is durable.
         * The controller may move the directory once the last one is
         * reported, so nothing here touches it after that. */
        if (cb)
            cb (arg, k, &d);
    }
    rc = 0;
out:
    free (img.buf);
    return rc;
}

int ckpt_write_manifest (const char *root, const char *job, int64_t step, int world,
                         int parallel, const uint64_t *bytes, const uint32_t *crc,
                         dt_error_t *err)
{
    char dir[900];
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (dt_pathf (dir, sizeof (dir), "%s/step-%" PRId64, root, step) < 0)
        return errprintf (err, "%s: checkpoint path too long", root);
    if (!(f = open_memstream (&text, &len)))
        return errprintf (err, "manifest: %s", strerror (errno));
    int tp = CKPT_PAR_TP (parallel), pp = CKPT_PAR_PP (parallel);
    fprintf (f,
             "{\"job\": \"%s\", \"step\": %" PRId64 ", \"world_size\": %d, "
             "\"parallel\": \"%s\", \"layout\": {\"tp\": %d, \"pp\": %d, \"dp\": %d}, "
             "\"committed_by\": \"dttrain\", \"shards\": [",
             job, step, world, CKPT_PAR_MODE (parallel) ? "zero1" : "dp", tp, pp,
             world / (tp * pp));
    for (int r = 0; r < world; r++)
        fprintf (f,
                 "%s{\"rank\": %d, \"path\": \"rank-%d.ckpt\", \"bytes\": %" PRIu64
                 ", \"crc32c\": \"%08x\"}",
                 r ? ", " : "", r, r, bytes[r], crc[r]);
    fprintf (f, "]}\n");
    if (fclose (f) != 0) {
        free (text);
        return errprintf (err, "manifest: %s", strerror (errno));
    }
    /* temporary, fsync, rename, directory fsync */
    int rc = dt_write_atomic (dir, "manifest.json", text, len, err);
    free (text);
    return rc;
}

int ckpt_find (const char *dir, char *stepdir, size_t len, dt_error_t *err)
{
    char p[1100];
    struct stat st;
    DIR *d;
    struct dirent *e;
    int64_t best = -1;

    snprintf (p, sizeof (p), "%s/rank-0.ckpt", dir);
    if (stat (p, &st) == 0) {
        snprintf (stepdir, len, "%s", dir);
        return 0;
    }
    if (!(d = opendir (dir))) {
        if (errno == ENOENT)
            return 1;
        return errprintf (err, "resume directory %s: %s", dir, strerror (errno));
    }
    while ((e = readdir (d))) {
        char *end;
        if (strncmp (e->d_name, "step-", 5) != 0)
            continue;
        long long s = strtoll (e->d_name + 5, &end, 10);
        if (*end || s <= best)
            continue;
        snprintf (p, sizeof (p), "%s/%s/manifest.json", dir, e->d_name);
        if (stat (p, &st) == 0)
            best = s;
    }
    closedir (d);
    if (best < 0)
        return 1;
    snprintf (stepdir, len, "%s/step-%" PRId64, dir, (int64_t)best);
    return 0;
}

static int read_at (int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = pread (fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= n;
        off += n;
    }
    return 0;
}

/* Read part i (n elements of size bytes) into a new buffer and check its
 * CRC32C.  NULL with err (EBADMSG) on failure. */
static void *read_part (int fd, const char *path, const struct ckpt_tent *t, int i,
                        size_t size, dt_error_t *err)
{
    void *p = NULL;
    if (strncmp (t->name, tensor_names[i], sizeof (t->name)) ||
        !(p = malloc (t->count * size + 1)) ||
        read_at (fd, p, t->count * size, t->offset) < 0) {
        free (p);
        errnoprintf (err, EBADMSG, "checkpoint shard %s: tensor %s truncated or missing",
                     path, tensor_names[i]);
        return NULL;
    }
    if (dt_crc32c (0, p, t->count * size) != t->crc) {
        free (p);
        errnoprintf (err, EBADMSG, "checkpoint shard %s: tensor %s fails its CRC32C",
                     path, tensor_names[i]);
        return NULL;
    }
    return p;
}

/* Read and check a shard's header: magic, checksum, version, config
 * size.  0 or -1 with err (EBADMSG). */
static int read_header (int fd, const char *path, struct ckpt_hdr *h, dt_error_t *err)
{
    if (read_at (fd, h, sizeof (*h), 0) < 0 || memcmp (h->magic, CKPT_MAGIC, 8) != 0)
        return errnoprintf (err, EBADMSG,
                            "checkpoint shard %s: not a dttrain shard (bad magic)", path);
    if (dt_crc32c (0, h, offsetof (struct ckpt_hdr, hdr_crc)) != h->hdr_crc)
        return errnoprintf (err, EBADMSG, "checkpoint shard %s: header checksum mismatch",
                            path);
    if (!((h->version == 1 && h->ntensors == CKPT_NT) ||
          (h->version >= 2 && h->version <= CKPT_VERSION && h->ntensors == CKPT_NTENT)) ||
        h->hdr_bytes != sizeof (*h))
        return errnoprintf (err, EBADMSG,
                            "checkpoint shard %s: unsupported version %u "
                            "(this dttrain reads versions 1 to %d)",
                            path, h->version, CKPT_VERSION);
    if (h->config_bytes > ckpt_config_max)
        return errnoprintf (err, EBADMSG,
                            "checkpoint shard %s: header announces %" PRIu64
                            " bytes of config (at most %" PRIu64 ")",
                            path, h->config_bytes, ckpt_config_max);
    return 0;
}

/* Widen a version 2 table (n entries of CKPT_NAMED_V2_BYTES) in place to
 * struct ckpt_named entries: whole tensors.  0 or -1 with err. */
static int widen_v2 (void **table, uint64_t n, dt_error_t *err)
{
    struct ckpt_named *w = calloc (n ? n : 1, sizeof (*w));
    if (!w)
        return errnoprintf (err, ENOMEM, "out of memory");
    for (uint64_t j = 0; j < n; j++)
        memcpy (&w[j], (char *)*table + j * CKPT_NAMED_V2_BYTES, CKPT_NAMED_V2_BYTES);
    free (*table);
    *table = w;
    return 0;
}

/* Whether the layout mt is a rank's part of the model (a tp slice of a
 * tensor, or a pipeline stage's tensors: all given): flat offsets do not
 * apply to it. */
static int sliced (const struct model_tensor *mt, int nmt, const struct model_tensor *all)
{
    int s = all != NULL;
    for (int i = 0; mt && i < nmt; i++)
        s |= mt[i].vdim > 0;
    return s;
}

/* Load one shard into out (full arrays).  With the model's tensors (mt),
 * a version 2 shard is placed by the names in its tensor table; without
 * them, for version 1, or for a shard written without a layout (an empty
 * table), by flat offset.  1 placed by name, 0 by offset, -1 with err. */
static int load_shard (const char *path, int rank_expect, const char *config,
                       uint64_t nparams, const struct model_tensor *mt, int nmt,
                       const struct model_tensor *all, int nall, float *out[CKPT_NT],
                       uint8_t *cover, struct ckpt_hdr *h, dt_error_t *err)
{
    struct ckpt_tent t[CKPT_NTENT];
    char *cfg = NULL;
    int fd = open (path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return errprintf (err, "checkpoint shard %s: %s", path, strerror (errno));
    if (read_header (fd, path, h, err) < 0) {
        close (fd);
        return -1;
    }
    size_t tbytes = h->ntensors * sizeof (struct ckpt_tent);
    if (read_at (fd, t, tbytes, sizeof (*h)) < 0 ||
        !(cfg = calloc (1, h->config_bytes + 1)) ||
        read_at (fd, cfg, h->config_bytes, sizeof (*h) + tbytes) < 0) {
        free (cfg);
        close (fd);
        return errnoprintf (err, EBADMSG, "checkpoint shard %s: truncated", path);
    }
    if (opts_compare (cfg, config, err) < 0) {
        char msg[160];
        snprintf (msg, sizeof (msg), "%s", err ? err->text : "");
        free (cfg);
        close (fd);
        return errnoprintf (err, EINVAL, "checkpoint %s: %s", path, msg);
    }
    free (cfg);
    /* After the config check, so a changed size names the field.  A shard
     * placed by name may hold a slice of another layout: its size need
     * not be ours (the names place it; the caller checks the coverage). */
    int other_layout = h->version >= 2 && mt && t[CKPT_NT].count > 0;
    if (!other_layout && sliced (mt, nmt, all)) {
        close (fd);
        return errnoprintf (err, EINVAL,
                            "checkpoint shard %s: no tensor table, so it loads only in "
                            "the one-rank layout (no --tp, --pp)",
                            path);
    }
    if ((int)h->rank != rank_expect || (h->nparams != nparams && !other_layout) ||
        h->lo > h->hi || h->hi > h->nparams) {
        close (fd);
        if (h->nparams != nparams)
            return errnoprintf (err, EINVAL,
                                "checkpoint shard %s: %" PRIu64
                                " parameters, this model has %" PRIu64,
                                path, h->nparams, nparams);
        return errnoprintf (err, EBADMSG,
                            "checkpoint shard %s: inconsistent rank or slice", path);
    }
    size_t count = h->hi - h->lo;
    int rc = -1;
    if (h->version >= 2 && mt && t[CKPT_NT].count > 0) {
        /* By name: the slices and the table, each checked, then placed. */
        void *part[CKPT_NTENT] = { NULL, NULL, NULL, NULL };
        size_t koff[CKPT_NT];
        if (t[CKPT_NT].count > (uint64_t)CKPT_NT * MODEL_MAX_TENSORS) {
            errnoprintf (err, EBADMSG,
                         "checkpoint shard %s: tensor table of %" PRIu64 " entries", path,
                         t[CKPT_NT].count);
            goto named_out;
        }
        /* The table first: a shard with nothing for this rank's slices
         * (another stage's, another tp rank's) is not read further. */
        for (int o = 0; o < CKPT_NTENT; o++) {
            int i = (o + CKPT_NT) % CKPT_NTENT;
            if (i == 0) {
                if (h->version < 3 &&
                    widen_v2 (&part[CKPT_NT], t[CKPT_NT].count, err) < 0)
                    goto named_out;
                if (!ckpt_table_needed (part[CKPT_NT], t[CKPT_NT].count, mt, nmt)) {
                    rc = 0;
                    goto named_out;
                }
            }
            if (i < CKPT_NT && t[i].count != count) {
                errnoprintf (err, EBADMSG,
                             "checkpoint shard %s: tensor %s truncated or missing", path,
                             tensor_names[i]);
                goto named_out;
            }
            size_t esize =
              h->version >= 3 ? sizeof (struct ckpt_named) : CKPT_NAMED_V2_BYTES;
            if (!(part[i] = read_part (fd, path, &t[i], i, i < CKPT_NT ? 4 : esize, err)))
                goto named_out;
            if (i < CKPT_NT)
                koff[i] = t[i].offset;
        }
        const float *slice[CKPT_NT] = { part[0], part[1], part[2] };
        rc = ckpt_table_place_cover (path, part[CKPT_NT], t[CKPT_NT].count, mt, nmt, all,
                                     nall, koff, slice, count, out, cover, err);
    named_out:
        for (int i = 0; i < CKPT_NTENT; i++)
            free (part[i]);
        close (fd);
        return rc < 0 ? -1 : 1;
    }
    for (int i = 0; i < CKPT_NT; i++) {
        if (strncmp (t[i].name, tensor_names[i], sizeof (t[i].name)) ||
            t[i].count != count ||
            read_at (fd, out[i] + h->lo, count * 4, t[i].offset) < 0) {
            close (fd);
            return errnoprintf (err, EBADMSG,
                                "checkpoint shard %s: tensor %s truncated or missing",
                                path, tensor_names[i]);
        }
        if (dt_crc32c (0, out[i] + h->lo, count * 4) != t[i].crc) {
            close (fd);
            return errnoprintf (err, EBADMSG,
                                "checkpoint shard %s: tensor %s fails its CRC32C", path,
                                tensor_names[i]);
        }
    }
    close (fd);
    return 0;
}

int ckpt_load (const char *stepdir, const char *config, uint64_t nparams, float *params,
               float *m, float *v, int64_t *step, int *world, int *parallel,
               dt_error_t *err)
{
    return ckpt_load_named (stepdir, config, NULL, 0, nparams, params, m, v, step, world,
                            parallel, err);
}

int ckpt_load_named (const char *stepdir, const char *config,
                     const struct model_tensor *mt, int nmt, uint64_t nparams,
                     float *params, float *m, float *v, int64_t *step, int *world,
                     int *parallel, dt_error_t *err)
{
    return ckpt_load_layout (stepdir, config, mt, nmt, NULL, 0, nparams, params, m, v,
                             step, world, parallel, err);
}

int ckpt_load_layout (const char *stepdir, const char *config,
                      const struct model_tensor *mt, int nmt,
                      const struct model_tensor *all, int nall, uint64_t nparams,
                      float *params, float *m, float *v, int64_t *step, int *world,
                      int *parallel, dt_error_t *err)
{
    float *out[CKPT_NT] = { params, m, v };
    struct ckpt_hdr h0, h;
    char path[1100];
    struct ckpt_slice *sl = NULL;
    size_t nsl = 0, cap = 0;
    int rc = -1;

    snprintf (path, sizeof (path), "%s/rank-0.ckpt", stepdir);
    /* Placed by name, every element of ours must come from exactly one
     * shard (a shard of another layout may hold any part of it). */
    uint8_t *cover = mt ? calloc (nparams ? nparams : 1, 1) : NULL;
    if (mt && !cover)
        return errnoprintf (err, ENOMEM, "out of memory");
    int named =
      load_shard (path, 0, config, nparams, mt, nmt, all, nall, out, cover, &h0, err);
    if (named < 0) {
        free (cover);
        return -1;
    }
    for (uint32_t r = 0; r < h0.world; r++) {
        if (r > 0) {
            snprintf (path, sizeof (path), "%s/rank-%u.ckpt", stepdir, r);
            int nr = load_shard (path, r, config, nparams, mt, nmt, all, nall, out, cover,
                                 &h, err);
            if (nr < 0)
                goto done;
            named &= nr;
            if (h.step != h0.step || h.world != h0.world) {
                errnoprintf (err, EBADMSG,
                             "checkpoint shard %s: step %" PRId64
                             " world %u, rank 0 has step %" PRId64 " world %u",
                             path, h.step, h.world, h0.step, h0.world);
                goto done;
            }
        }
        else
            h = h0;
        if (nsl == cap) {
            struct ckpt_slice *n =
              realloc (sl, (cap = cap ? 2 * cap : 16) * sizeof (*sl));
            if (!n) {
                errnoprintf (err, ENOMEM, "out of memory");
                goto done;
            }
            sl = n;
        }
        sl[nsl++] = (struct ckpt_slice){ h.lo, h.hi, r };
    }
    /* Placed by name: every element of ours from exactly one shard. */
    if (mt && named) {
        if (ckpt_table_check_cover (stepdir, cover, mt, nmt, err) < 0)
            goto done;
    }
    else if (ckpt_slices_tile (stepdir, sl, nsl, nparams, err) < 0)
        goto done;
    rc = 0;
done:
    free (sl);
    free (cover);
    if (rc < 0)
        return -1;
    *step = h0.step;
    *world = h0.world;
    *parallel = h0.parallel;
    return 0;
}

char *ckpt_shard_config (const char *path, dt_error_t *err)
{
    struct ckpt_hdr h;
    char *cfg = NULL;
    int fd = open (path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return errprintf (err, "checkpoint shard %s: %s", path, strerror (errno)), NULL;
    if (read_at (fd, &h, sizeof (h), 0) < 0 || memcmp (h.magic, CKPT_MAGIC, 8) != 0 ||
        dt_crc32c (0, &h, offsetof (struct ckpt_hdr, hdr_crc)) != h.hdr_crc ||
        h.config_bytes > ckpt_config_max || h.ntensors > CKPT_NTENT ||
        !(cfg = calloc (1, h.config_bytes + 1)) ||
        read_at (fd, cfg, h.config_bytes,
                 sizeof (h) + h.ntensors * sizeof (struct ckpt_tent)) < 0) {
        free (cfg);
        close (fd);
        errnoprintf (err, EBADMSG, "checkpoint shard %s: unreadable header or config",
                     path);
        return NULL;
    }
    close (fd);
    return cfg;
}
