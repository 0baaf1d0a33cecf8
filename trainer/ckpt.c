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
#include "common/dtime.h"
#include "trainer/ckpt.h"
#include "trainer/opts.h"

#define CKPT_MAGIC "DTCKPT\r\n"
#define CKPT_VERSION 1
#define CKPT_NT 3

struct ckpt_hdr {
    char magic[8];
    uint32_t version;
    uint32_t hdr_bytes;
    int64_t step;
    uint32_t rank, world;
    uint32_t parallel, ntensors;
    uint64_t nparams, lo, hi, seed, data_cursor, config_bytes;
    char job[128];
    uint32_t hdr_crc;           /* over the bytes before this field */
    uint32_t pad;
};

struct ckpt_tent {
    char name[32];
    uint64_t offset, count;
    uint32_t dtype, crc;
    uint64_t reserved;
};

static const char *tensor_names[CKPT_NT] = { "params", "adam_m", "adam_v" };

struct ckpt_writer {
    dtclient_t *client;
    pthread_t thread;
    int running;
    /* the snapshot, owned by the thread while running */
    struct ckpt_meta meta;
    char *config, *root, *job;
    float *buf[CKPT_NT];
    size_t cap;
    /* results */
    pthread_mutex_t lock;
    struct ckpt_done done;
};

struct ckpt_writer *ckpt_writer_create (dtclient_t *client)
{
    struct ckpt_writer *w = calloc (1, sizeof (*w));
    if (!w)
        return NULL;
    w->client = client;
    pthread_mutex_init (&w->lock, NULL);
    return w;
}

void ckpt_wait (struct ckpt_writer *w)
{
    if (w && w->running) {
        pthread_join (w->thread, NULL);
        w->running = 0;
    }
}

void ckpt_writer_destroy (struct ckpt_writer *w)
{
    if (!w)
        return;
    ckpt_wait (w);
    for (int i = 0; i < CKPT_NT; i++)
        free (w->buf[i]);
    free (w->config);
    free (w->root);
    free (w->job);
    pthread_mutex_destroy (&w->lock);
    free (w);
}

void ckpt_last_done (struct ckpt_writer *w, struct ckpt_done *out)
{
    pthread_mutex_lock (&w->lock);
    *out = w->done;
    pthread_mutex_unlock (&w->lock);
}

/* write() all of buf, extending *crc. */
static int write_all (int fd, const void *buf, size_t len, uint32_t *crc)
{
    const char *p = buf;
    *crc = dt_crc32c (*crc, buf, len);
    while (len > 0) {
        ssize_t n = write (fd, p, len > (1 << 24) ? (1 << 24) : len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

static int fsync_dir (const char *dir)
{
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync (fd);
    int e = errno;
    close (fd);
    errno = e;
    return rc;
}

static int mkdir_p (const char *path)
{
    char buf[1024];
    snprintf (buf, sizeof (buf), "%s", path);
    for (char *s = buf + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir (buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    }
    if (mkdir (buf, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static size_t align64 (size_t x)
{
    return (x + 63) & ~(size_t)63;
}

/* Write one shard (slice [m->lo, m->hi) of the three tensors in buf) to
 * dir/rank-<m->rank>.ckpt; fills d.  Runs on the writer thread, or on the
 * main thread for a just-in-time checkpoint. */
static int write_shard_in (const struct ckpt_meta *m, const char *dir, float *const buf[CKPT_NT],
                           struct ckpt_done *d)
{
    char tmp[1100];
    struct ckpt_hdr h;
    struct ckpt_tent t[CKPT_NT];
    size_t count = m->hi - m->lo;
    size_t cfg = strlen (m->config);
    uint32_t crc = 0;
    int fd = -1;
    int64_t t0 = dt_mono_ns ();
    static const char zeros[64];

    snprintf (d->path, sizeof (d->path), "%s/rank-%d.ckpt", dir, m->rank);
    snprintf (tmp, sizeof (tmp), "%s.tmp.%d", d->path, (int)getpid ());
    if (mkdir_p (dir) < 0) {
        snprintf (d->error, sizeof (d->error), "mkdir %.100s: %s", dir, strerror (errno));
        return -1;
    }
    memset (&h, 0, sizeof (h));
    memcpy (h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.hdr_bytes = sizeof (h);
    h.step = m->step;
    h.rank = m->rank;
    h.world = m->world;
    h.parallel = m->parallel;
    h.ntensors = CKPT_NT;
    h.nparams = m->nparams;
    h.lo = m->lo;
    h.hi = m->hi;
    h.seed = m->seed;
    h.data_cursor = m->data_cursor;
    h.config_bytes = cfg;
    snprintf (h.job, sizeof (h.job), "%s", m->job);
    h.hdr_crc = dt_crc32c (0, &h, offsetof (struct ckpt_hdr, hdr_crc));

    size_t off = align64 (sizeof (h) + sizeof (t) + cfg);
    memset (t, 0, sizeof (t));
    for (int i = 0; i < CKPT_NT; i++) {
        snprintf (t[i].name, sizeof (t[i].name), "%s", tensor_names[i]);
        t[i].offset = off;
        t[i].count = count;
        t[i].dtype = 0; /* float32 */
        t[i].crc = dt_crc32c (0, buf[i], count * 4);
        off = align64 (off + count * 4);
    }
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        goto io_error;
    size_t pos = sizeof (h) + sizeof (t) + cfg;
    if (write_all (fd, &h, sizeof (h), &crc) < 0 || write_all (fd, t, sizeof (t), &crc) < 0
        || write_all (fd, m->config, cfg, &crc) < 0)
        goto io_error;
    for (int i = 0; i < CKPT_NT; i++) {
        if (write_all (fd, zeros, t[i].offset - pos, &crc) < 0
            || write_all (fd, buf[i], count * 4, &crc) < 0)
            goto io_error;
        pos = t[i].offset + count * 4;
    }
    if (fsync (fd) < 0 || close (fd) < 0) {
        fd = -1;
        goto io_error;
    }
    fd = -1;
    if (rename (tmp, d->path) < 0 || fsync_dir (dir) < 0)
        goto io_error;
    d->bytes = pos;
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

static int write_shard (struct ckpt_writer *w, struct ckpt_done *d)
{
    char dir[900];
    snprintf (dir, sizeof (dir), "%s/step-%" PRId64, w->root, w->meta.step);
    return write_shard_in (&w->meta, dir, w->buf, d);
}

static void *writer_thread (void *arg)
{
    struct ckpt_writer *w = arg;
    struct ckpt_done d;

    memset (&d, 0, sizeof (d));
    d.step = w->meta.step;
    if (write_shard (w, &d) < 0) {
        d.failed = 1;
        dtclient_shard_failed (w->client, d.step, d.error);
    } else
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

int ckpt_save_async (struct ckpt_writer *w, struct dt_kern_ops *k, const struct ckpt_meta *meta,
                     const float *params, const float *m, const float *v,
                     double *stall_s, dt_error_t *err)
{
    int64_t t0 = dt_mono_ns ();
    size_t count = meta->hi - meta->lo;
    const float *src[CKPT_NT] = { params, m, v };

    ckpt_wait (w);
    if (count > w->cap) {
        for (int i = 0; i < CKPT_NT; i++) {
            free (w->buf[i]);
            if (!(w->buf[i] = malloc (count * 4 + 4))) {
                w->cap = 0;
                return errprintf (err, "checkpoint snapshot: out of memory");
            }
        }
        w->cap = count;
    }
    for (int i = 0; i < CKPT_NT; i++)
        if (count && k->download (w->buf[i], src[i], count * 4) < 0)
            return errprintf (err, "checkpoint snapshot: %s", k->last_error);
    w->meta = *meta;
    if (!xstrdup_into (&w->config, meta->config) || !xstrdup_into (&w->root, meta->root)
        || !xstrdup_into (&w->job, meta->job))
        return errprintf (err, "checkpoint snapshot: out of memory");
    w->meta.config = w->config;
    w->meta.root = w->root;
    w->meta.job = w->job;
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
    while ((n = read (fd, buf, sizeof (buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close (fd);
            errno = e;
            return -1;
        }
        *crc = dt_crc32c (*crc, buf, (size_t)n);
        *bytes += (uint64_t)n;
    }
    close (fd);
    return 0;
}

int ckpt_save_jit (const struct ckpt_meta *meta, const char *dir, const float *params,
                   const float *m, const float *v, ckpt_jit_f cb, void *arg, dt_error_t *err)
{
    const float *full[CKPT_NT] = { params, m, v };
    uint64_t n = meta->nparams;

    if (mkdir_p (dir) < 0)
        return errprintf (err, "just-in-time checkpoint: mkdir %s: %s", dir, strerror (errno));
    for (int k = 0; k < meta->world; k++) {
        struct ckpt_meta sm = *meta;
        struct ckpt_done d;
        float *buf[CKPT_NT];
        uint32_t crc;
        uint64_t bytes;

        sm.rank = k;
        sm.lo = n * (uint64_t)k / (uint64_t)meta->world;
        sm.hi = n * (uint64_t)(k + 1) / (uint64_t)meta->world;
        for (int i = 0; i < CKPT_NT; i++)
            buf[i] = (float *)full[i] + sm.lo;   /* only read */
        memset (&d, 0, sizeof (d));
        d.step = meta->step;
        if (write_shard_in (&sm, dir, buf, &d) < 0)
            return errprintf (err, "just-in-time checkpoint: %s", d.error);
        /* Verified as written: what is on disk is what will be loaded. */
        if (file_crc (d.path, &crc, &bytes) < 0)
            return errprintf (err, "just-in-time checkpoint: reading back %s: %s", d.path,
                              strerror (errno));
        if (crc != d.crc || bytes != d.bytes)
            return errprintf (err, "just-in-time checkpoint: %s reads back as %" PRIu64
                              " bytes CRC32C %08x, wrote %" PRIu64 " bytes %08x", d.path,
                              bytes, crc, d.bytes, d.crc);
        /* write_shard_in fsync'd the directory: the shard is durable.
         * The controller may move the directory once the last one is
         * reported, so nothing here touches it after that. */
        if (cb)
            cb (arg, k, &d);
    }
    return 0;
}

int ckpt_write_manifest (const char *root, const char *job, int64_t step, int world,
                         int parallel, const uint64_t *bytes, const uint32_t *crc,
                         dt_error_t *err)
{
    char dir[900], path[1000], tmp[1100];
    FILE *f;

    snprintf (dir, sizeof (dir), "%s/step-%" PRId64, root, step);
    snprintf (path, sizeof (path), "%s/manifest.json", dir);
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    if (!(f = fopen (tmp, "w")))
        return errprintf (err, "%s: %s", tmp, strerror (errno));
    fprintf (f, "{\"job\": \"%s\", \"step\": %" PRId64 ", \"world_size\": %d, "
             "\"parallel\": \"%s\", \"committed_by\": \"dttrain\", \"shards\": [",
             job, step, world, parallel ? "zero1" : "dp");
    for (int r = 0; r < world; r++)
        fprintf (f, "%s{\"rank\": %d, \"path\": \"rank-%d.ckpt\", \"bytes\": %" PRIu64
                 ", \"crc32c\": \"%08x\"}", r ? ", " : "", r, r, bytes[r], crc[r]);
    fprintf (f, "]}\n");
    if (fflush (f) != 0 || fsync (fileno (f)) < 0) {
        int e = errno;
        fclose (f);
        return errprintf (err, "%s: %s", tmp, strerror (e));
    }
    if (fclose (f) != 0 || rename (tmp, path) < 0 || fsync_dir (dir) < 0)
        return errprintf (err, "%s: %s", path, strerror (errno));
    return 0;
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

static int load_shard (const char *path, int rank_expect, const char *config, uint64_t nparams,
                       float *out[CKPT_NT], struct ckpt_hdr *h, dt_error_t *err)
{
    struct ckpt_tent t[CKPT_NT];
    char *cfg = NULL;
    int fd = open (path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return errprintf (err, "checkpoint shard %s: %s", path, strerror (errno));
    if (read_at (fd, h, sizeof (*h), 0) < 0 || memcmp (h->magic, CKPT_MAGIC, 8) != 0) {
        close (fd);
        return errnoprintf (err, EBADMSG, "checkpoint shard %s: not a dttrain shard (bad magic)", path);
    }
    if (dt_crc32c (0, h, offsetof (struct ckpt_hdr, hdr_crc)) != h->hdr_crc) {
        close (fd);
        return errnoprintf (err, EBADMSG, "checkpoint shard %s: header checksum mismatch", path);
    }
    if (h->version != CKPT_VERSION || h->ntensors != CKPT_NT || h->hdr_bytes != sizeof (*h)) {
        close (fd);
        return errnoprintf (err, EBADMSG, "checkpoint shard %s: unsupported version %u", path,
                            h->version);
    }
    if (read_at (fd, t, sizeof (t), sizeof (*h)) < 0 || !(cfg = calloc (1, h->config_bytes + 1))
        || read_at (fd, cfg, h->config_bytes, sizeof (*h) + sizeof (t)) < 0) {
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
    /* After the config check, so a changed size names the field. */
    if ((int)h->rank != rank_expect || h->nparams != nparams || h->lo > h->hi || h->hi > nparams) {
        close (fd);
        if (h->nparams != nparams)
            return errnoprintf (err, EINVAL, "checkpoint shard %s: %" PRIu64
                                " parameters, this model has %" PRIu64, path, h->nparams, nparams);
        return errnoprintf (err, EBADMSG, "checkpoint shard %s: inconsistent rank or slice", path);
    }
    size_t count = h->hi - h->lo;
    for (int i = 0; i < CKPT_NT; i++) {
        if (strncmp (t[i].name, tensor_names[i], sizeof (t[i].name)) || t[i].count != count
            || read_at (fd, out[i] + h->lo, count * 4, t[i].offset) < 0) {
            close (fd);
            return errnoprintf (err, EBADMSG, "checkpoint shard %s: tensor %s truncated or missing",
                                path, tensor_names[i]);
        }
        if (dt_crc32c (0, out[i] + h->lo, count * 4) != t[i].crc) {
            close (fd);
            return errnoprintf (err, EBADMSG, "checkpoint shard %s: tensor %s fails its CRC32C",
                                path, tensor_names[i]);
        }
    }
    close (fd);
    return 0;
}

int ckpt_load (const char *stepdir, const char *config, uint64_t nparams,
               float *params, float *m, float *v, int64_t *step, int *world,
               int *parallel, dt_error_t *err)
{
    float *out[CKPT_NT] = { params, m, v };
    struct ckpt_hdr h0, h;
    char path[1100];
    uint64_t covered = 0;

    snprintf (path, sizeof (path), "%s/rank-0.ckpt", stepdir);
    if (load_shard (path, 0, config, nparams, out, &h0, err) < 0)
        return -1;
    covered += h0.hi - h0.lo;
    for (uint32_t r = 1; r < h0.world; r++) {
        snprintf (path, sizeof (path), "%s/rank-%u.ckpt", stepdir, r);
        if (load_shard (path, r, config, nparams, out, &h, err) < 0)
            return -1;
        if (h.step != h0.step || h.world != h0.world)
            return errnoprintf (err, EBADMSG, "checkpoint shard %s: step %" PRId64
                                " world %u, rank 0 has step %" PRId64 " world %u",
                                path, h.step, h.world, h0.step, h0.world);
        covered += h.hi - h.lo;
    }
    if (covered != nparams)
        return errnoprintf (err, EBADMSG, "checkpoint %s: shards cover %" PRIu64 " of %" PRIu64
                            " parameters", stepdir, covered, nparams);
    *step = h0.step;
    *world = h0.world;
    *parallel = h0.parallel;
    return 0;
}
