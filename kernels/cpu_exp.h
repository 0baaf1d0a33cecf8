/* cpu_exp.h: a vectorisable expf for the CPU kernels' softmax loops.
 *
 * libm's expf is a scalar call: in the 256-way softmax of every position
 * it was a third of a small transformer's step.  This is Cephes' expf
 * (range reduction x = n ln2 + r with ln2 in two parts, a degree-5
 * polynomial on |r| <= ln2/2): within 2 ulp of expf on [-87.3, 88], 0
 * below (where expf is below 1.2e-38, nothing a softmax sum notices).
 * Plain arithmetic and a bit cast, so GCC vectorises the loops that call
 * it; each machine runs one clone, so results stay bit-reproducible. */
#ifndef DT_KERNELS_CPU_EXP_H
#define DT_KERNELS_CPU_EXP_H

#include <stdint.h>
#include <string.h>

static inline float dt_fast_exp (float x)
{
    const float lo = -87.33654475f, hi = 88.0f; /* n stays in [-126, 127] */
    float xc = x < lo ? lo : (x > hi ? hi : x);
    /* n = round (x / ln2), by adding and subtracting 1.5 * 2^23 */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float s;
    memcpy (&s, &e, sizeof (s));
    return x < lo ? 0.0f : p * s;
}

#endif
