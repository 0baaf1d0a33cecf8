/* bench_gloo.c: bare gloo allreduce through trainer/comm.h (benchmark 3's reference).
 *
 * Usage: RANK=r WORLD_SIZE=w bench_gloo --rendezvous-dir DIR [--floats N]
 *        [--bucket-floats B] [--reps R]
 * Allreduces N floats in buckets of B (one bucket = B >= N), R times after
 * one warm-up, and prints (rank 0) the median time and the algorithm
 * bandwidth N*4/time. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"
#include "trainer/comm.h"

static int cmp (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main (int argc, char **argv)
{
    const char *dir = NULL;
    size_t n = 1 << 20, bucket = 0;
    int reps = 11;
    dt_error_t err;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp (argv[i], "--rendezvous-dir"))
            dir = argv[i + 1];
        else if (!strcmp (argv[i], "--floats"))
            n = strtoull (argv[i + 1], NULL, 10);
        else if (!strcmp (argv[i], "--bucket-floats"))
            bucket = strtoull (argv[i + 1], NULL, 10);
        else if (!strcmp (argv[i], "--reps"))
            reps = atoi (argv[i + 1]);
    }
    const char *rs = getenv ("RANK"), *ws = getenv ("WORLD_SIZE");
    int rank = rs ? atoi (rs) : 0, world = ws ? atoi (ws) : 1;
    if (!dir || world < 2 || reps < 1) {
        fprintf (stderr, "usage: RANK=r WORLD_SIZE=w>1 bench_gloo --rendezvous-dir DIR "
                         "[--floats N] [--bucket-floats B] [--reps R]\n");
        return 2;
    }
    if (bucket == 0 || bucket > n)
        bucket = n;
    struct dt_comm_params p = {
        .rank = rank,
        .size = world,
        .rendezvous_dir = dir,
        .prefix = "bench_gloo",
        .host = "127.0.0.1",
        .timeout_ms = 60000,
    };
    dt_comm_t *c = dt_comm_gloo_create (&p, &err);
    if (!c) {
        fprintf (stderr, "bench_gloo: %s\n", err.text);
        return 1;
    }
    float *buf = calloc (n, sizeof (float));
    double *t = calloc (reps, sizeof (double));
    for (int r = -1; r < reps; r++) {
        int64_t t0 = dt_mono_ns ();
        for (size_t off = 0; off < n; off += bucket) {
            size_t len = n - off < bucket ? n - off : bucket;
            if (dt_comm_allreduce (c, buf + off, len, DT_F32, DT_SUM, &err) < 0) {
                fprintf (stderr, "bench_gloo: %s\n", err.text);
                return 1;
            }
        }
        if (r >= 0)
            t[r] = (dt_mono_ns () - t0) / 1e9;
    }
    qsort (t, reps, sizeof (double), cmp);
    if (rank == 0)
        printf ("{\"world_size\": %d, \"floats\": %zu, \"bucket_floats\": %zu, "
                "\"median_ms\": %.3f, \"algbw_gbps\": %.3f}\n",
                world, n, bucket, t[reps / 2] * 1e3, n * 4.0 / t[reps / 2] / 1e9);
    dt_comm_destroy (c);
    free (buf);
    free (t);
    return 0;
}
