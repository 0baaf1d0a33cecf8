/* dump.c: --dump-tensors - named tensors for oracle tests. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer/dump.h"

static FILE *open_in (const char *dir, const char *file, const char *mode,
                      dt_error_t *err)
{
    char path[1100];
    snprintf (path, sizeof (path), "%s/%s", dir, file);
    FILE *f = fopen (path, mode);
    if (!f)
        errprintf (err, "--dump-tensors %s: %s", path, strerror (errno));
    return f;
}

static int close_checked (FILE *f, const char *dir, const char *file, dt_error_t *err)
{
    if (fclose (f) != 0)
        return errprintf (err, "--dump-tensors %s/%s: %s", dir, file, strerror (errno));
    return 0;
}

int dump_table (const struct model *m, const char *dir, dt_error_t *err)
{
    if (mkdir (dir, 0755) < 0 && errno != EEXIST)
        return errprintf (err, "--dump-tensors %s: %s", dir, strerror (errno));
    FILE *f = open_in (dir, "tensors.txt", "w", err);
    if (!f)
        return -1;
    for (int i = 0; i < m->ntensors; i++) {
        const struct model_tensor *t = &m->t[i];
        fprintf (f, "%s %zu %zu %d %d %lld", t->name, t->off, t->count, t->decay, t->ndim,
                 (long long)t->shape[0]);
        if (t->ndim == 2)
            fprintf (f, " %lld", (long long)t->shape[1]);
        fputc ('\n', f);
    }
    return close_checked (f, dir, "tensors.txt", err);
}

int dump_vector (const struct model *m, const char *dir, const char *file,
                 const float *vec, dt_error_t *err)
{
    size_t n = m->nparams;
    float *h = malloc (n * 4);
    if (!h)
        return errprintf (err, "--dump-tensors: out of memory");
    if (m->k->download (h, vec, n * 4) < 0) {
        free (h);
        return errprintf (err, "--dump-tensors: %s", m->k->last_error);
    }
    FILE *f = open_in (dir, file, "wb", err);
    if (!f) {
        free (h);
        return -1;
    }
    size_t w = fwrite (h, 4, n, f);
    free (h);
    if (w != n) {
        fclose (f);
        return errprintf (err, "--dump-tensors %s/%s: short write", dir, file);
    }
    return close_checked (f, dir, file, err);
}

int dump_text (const char *dir, const char *file, const char *text, dt_error_t *err)
{
    FILE *f = open_in (dir, file, "w", err);
    if (!f)
        return -1;
    fputs (text, f);
    return close_checked (f, dir, file, err);
}
