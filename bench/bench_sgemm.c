/* bench_sgemm.c: OpenBLAS SGEMM rate on the shapes of a dttrain model (the roofline for
 * benchmark 1).
 *
 * Usage: bench_sgemm [--threads T] [--reps R] M N K [M N K ...]
 * Runs C = A B (row-major, NN), then NT and TN of the same flop count,
 * one warm-up and R timed repetitions each; prints one JSON line per shape
 * and a total line with the flop-weighted rate. */
#include "config.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtime.h"

int main (int argc, char **argv)
{
    int threads = 1, reps = 5, i = 1;
    double tot_flops = 0, tot_s = 0;

    while (i < argc && !strncmp (argv[i], "--", 2)) {
        if (!strcmp (argv[i], "--threads") && i + 1 < argc)
            threads = atoi (argv[i + 1]);
        else if (!strcmp (argv[i], "--reps") && i + 1 < argc)
            reps = atoi (argv[i + 1]);
        else {
            fprintf (stderr, "usage: bench_sgemm [--threads T] [--reps R] M N K ...\n");
            return 2;
        }
        i += 2;
    }
    if (argc - i < 3 || (argc - i) % 3) {
        fprintf (stderr, "usage: bench_sgemm [--threads T] [--reps R] M N K ...\n");
        return 2;
    }
    openblas_set_num_threads (threads);
    for (; i < argc; i += 3) {
        int M = atoi (argv[i]), N = atoi (argv[i + 1]), K = atoi (argv[i + 2]);
        size_t big = (size_t)M * K + (size_t)K * N + (size_t)M * N;
        float *buf = aligned_alloc (64, ((big * 4 + 63) / 64) * 64);
        float *A = buf, *B = A + (size_t)M * K, *C = B + (size_t)K * N;
        for (size_t j = 0; j < big; j++)
            buf[j] = (float)((j * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (int pass = 0; pass < 3; pass++) {
            /* the three GEMMs of a layer: Y = X W (NN), dX = dY W^T (NT), dW = X^T dY
             * (TN) */
            int ta = pass == 2, tb = pass == 1;
            int m = pass == 0 ? M : pass == 1 ? M : K;
            int n = pass == 0 ? N : pass == 1 ? K : N;
            int k = pass == 0 ? K : pass == 1 ? N : M;
            const float *a = pass == 2 ? A : pass == 1 ? C : A;
            const float *b = pass == 1 ? B : pass == 2 ? C : B;
            float *c = pass == 0 ? C : pass == 1 ? A : B;
            int lda = ta ? m : k, ldb = tb ? k : n;
            cblas_sgemm (CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                         tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
                         0.0f, c, n);
            int64_t t0 = dt_mono_ns ();
            for (int r = 0; r < reps; r++)
                cblas_sgemm (CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                             tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
                             ldb, 0.0f, c, n);
            double s = (dt_mono_ns () - t0) / 1e9;
            double fl = 2.0 * m * n * k * reps;
            tot_flops += fl;
            tot_s += s;
            printf ("{\"shape\": \"%s%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"gflops\": "
                    "%.2f}\n",
                    ta ? "T" : "N", tb ? "T" : "N", m, n, k, fl / s / 1e9);
        }
        free (buf);
    }
    printf ("{\"threads\": %d, \"sgemm_gflops\": %.2f}\n", threads,
            tot_flops / tot_s / 1e9);
    return 0;
}
