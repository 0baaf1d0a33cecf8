/* data.c: the training text, memory-mapped read-only, and the sampling of windows. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "trainer/data.h"

int data_open (struct data *d, const char *path, int context, double val_frac,
               dt_error_t *err)
{
    struct stat st;
    int fd;

    memset (d, 0, sizeof (*d));
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return errprintf (err, "--data %s: %s", path, strerror (errno));
    if (fstat (fd, &st) < 0) {
        int e = errno;
        close (fd);
        return errprintf (err, "--data %s: %s", path, strerror (e));
    }
    if (!S_ISREG (st.st_mode) || st.st_size < context + 2) {
        close (fd);
        return errprintf (
          err, "--data %s: need a regular file of at least %d bytes (context + 2)", path,
          context + 2);
    }
    void *p = mmap (NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close (fd);
    if (p == MAP_FAILED)
        return errprintf (err, "--data %s: mmap: %s", path, strerror (errno));
    d->bytes = p;
    d->len = st.st_size;
    d->context = context;
    d->val_len = (size_t)(d->len * val_frac);
    if (d->len - d->val_len < (size_t)context + 2)
        d->val_len = 0;
    d->train_len = d->len - d->val_len;
    d->crc = dt_crc32c (0, d->bytes, d->len);
    return 0;
}

void data_close (struct data *d)
{
    if (d->bytes)
        munmap ((void *)d->bytes, d->len);
    d->bytes = NULL;
}

uint64_t data_hash (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

size_t data_train_pos (const struct data *d, uint64_t seed, int64_t step, int64_t i)
{
    uint64_t h = data_hash (data_hash (data_hash (seed) ^ (uint64_t)step) ^ (uint64_t)i);
    size_t nwin = d->train_len - d->context; /* windows of context+1 bytes */
    return (size_t)(h % nwin);
}

size_t data_val_pos (const struct data *d, int64_t k, int64_t n)
{
    if (d->val_len < (size_t)d->context + 1 || n <= 0)
        return (size_t)-1;
    size_t nwin = d->val_len - d->context;
    return d->train_len + (size_t)((unsigned __int128)k * nwin / n);
}

void data_window (const struct data *d, size_t pos, uint8_t *ctx, uint8_t *tgt)
{
    memcpy (ctx, d->bytes + pos, d->context);
    *tgt = d->bytes[pos + d->context];
}
