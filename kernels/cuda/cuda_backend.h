/* cuda_backend.h: the entry point of the CUDA kernels, in plain C (no CUDA types),
 * for kernels/backend.c.  Only built with --with-cuda. */
#ifndef DT_KERN_CUDA_BACKEND_H
#define DT_KERN_CUDA_BACKEND_H

#include <stddef.h>
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Probe for a device (cudaGetDeviceCount succeeds with n > 0), create the
 * cuBLAS handle on first use, and return the CUDA ops table; NULL with the
 * reason in why when there is no usable device.  Borrowed, static. */
struct dt_kern_ops *dt_kern_cuda_probe (char *why, size_t whylen);

/* 1 when the probe found devices this rank must not use (LOCAL_RANK at or
 * beyond the device count): "auto" must then fail, not fall back to the
 * CPU. */
int dt_kern_cuda_fatal (void);

/* dt_kern_cuda_identity (kernels.h) for the current device. */
int dt_kern_cuda_ident (char *buf, size_t len);
/* dt_kern_cuda_peak_flops (kernels.h) for the current device. */
double dt_kern_cuda_peak (int bf16, char *name, size_t namelen);

#ifdef __cplusplus
}
#endif
#endif
