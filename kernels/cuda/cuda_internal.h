/* cuda_internal.h: what the CUDA backend's translation units share (nvcc only).
 *
 * kernels.cu owns the ops table, the cuBLAS handle and the deterministic
 * column sum; tfm.cu adds the transformer kernels to the table, flash.cu
 * the flash attention kernels. */
#ifndef DT_KERN_CUDA_INTERNAL_H
#define DT_KERN_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels/kernels.h"

extern struct dt_kern_ops cuda_ops;
extern cublasHandle_t cublas;

/* db[N] += column sums of g[M, N] in a fixed order (no atomics).  0 or -1. */
int colsum_add (int M, int N, const float *g, float *db);

/* Fill the transformer entries of ops (tfm.cu), the flash attention
 * entries (flash.cu). */
void dt_cuda_tfm_install (struct dt_kern_ops *ops);
void dt_cuda_flash_install (struct dt_kern_ops *ops);

#define CK(call)                                                                         \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            snprintf (cuda_ops.last_error, sizeof (cuda_ops.last_error), "%s: %s (%d)",  \
                      #call, cudaGetErrorString (e_), (int)e_);                          \
            return -1;                                                                   \
        }                                                                                \
    } while (0)

#define CKLAUNCH(name) CK (cudaGetLastError ())

#define CKB(call)                                                                        \
    do {                                                                                 \
        cublasStatus_t s_ = (call);                                                      \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
            snprintf (cuda_ops.last_error, sizeof (cuda_ops.last_error),                 \
                      "%s: cuBLAS status %d", #call, (int)s_);                           \
            return -1;                                                                   \
        }                                                                                \
    } while (0)

#endif
