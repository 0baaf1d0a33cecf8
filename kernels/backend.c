/* backend.c: chooses the kernel backend - the only file that knows whether CUDA was
 * built.
 *
 * CUDA is used only when it was built (HAVE_CUDA) and cudaGetDeviceCount
 * finds a device at run time; otherwise the CPU backend runs. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kernels/kernels.h"
#if HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

double dt_kern_cuda_peak_flops (int bf16, char *name, size_t namelen)
{
#if HAVE_CUDA
    if (dt_kern_cuda_probe (NULL, 0))
        return dt_kern_cuda_peak (bf16, name, namelen);
#else
    (void)bf16;
#endif
    if (name && namelen)
        name[0] = '\0';
    return 0;
}

int dt_kern_cuda_identity (char *buf, size_t len)
{
#if HAVE_CUDA
    if (dt_kern_cuda_probe (NULL, 0))
        return dt_kern_cuda_ident (buf, len);
#endif
    (void)buf;
    (void)len;
    return -1;
}

struct dt_kern_ops *dt_kern_cuda (void)
{
#if HAVE_CUDA
    return dt_kern_cuda_probe (NULL, 0);
#else
    return NULL;
#endif
}

int dt_kern_cuda_available (char *why, size_t whylen)
{
#if HAVE_CUDA
    return dt_kern_cuda_probe (why, whylen) != NULL;
#else
    if (why)
        snprintf (why, whylen, "built without CUDA (configure --with-cuda)");
    return 0;
#endif
}

struct dt_kern_ops *dt_kern_select (const char *want, char *err, size_t errlen)
{
    char why[200] = "";

    if (!want || !strcasecmp (want, "auto")) {
        if (dt_kern_cuda_available (why, sizeof (why)))
            return dt_kern_cuda ();
#if HAVE_CUDA
        /* GPUs present but not one for this rank: an error, not a silent
         * run on the CPU. */
        if (dt_kern_cuda_fatal ()) {
            snprintf (err, errlen, "%s", why);
            return NULL;
        }
#endif
        return dt_kern_cpu ();
    }
    if (!strcasecmp (want, "cpu"))
        return dt_kern_cpu ();
    if (!strcasecmp (want, "cuda")) {
        if (dt_kern_cuda_available (why, sizeof (why)))
            return dt_kern_cuda ();
        snprintf (err, errlen, "CUDA backend unavailable: %s", why);
        return NULL;
    }
    snprintf (err, errlen, "unknown kernel backend '%s' (auto, cpu or cuda)", want);
    return NULL;
}
