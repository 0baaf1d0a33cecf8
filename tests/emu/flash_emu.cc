/* flash_emu.cc: kernels/cuda/flash.cu's kernels run on the CPU, against the CPU
 * backend's simple attention (the reference), for machines without a GPU.
 *
 * scripts/flash-emu cuts the kernels out of flash.cu (everything before
 * the host-side launch code) into flash_kernels.inc and compiles this
 * file around it: every CUDA thread of a block is an OS thread,
 * __syncthreads is a barrier of the block, a warp shuffle is a store, a
 * barrier of the warp, a load and a barrier again, and blocks run one
 * after another.  It checks the indexing, the tiling, the masking and the
 * online softmax; not speed, and not what only a GPU can show (memory
 * model, occupancy).  The shapes are test_kernels_cuda's. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

extern "C" {
#include "kernels/kernels.h"
}

using std::max;
using std::min;

struct dim3e {
    unsigned x, y, z;
};
static thread_local dim3e threadIdx, blockIdx;
static dim3e blockDim, gridDim;
static pthread_barrier_t block_bar, warp_bar[4];
static float slot[128];
static float smem_buf[1 << 16];

#define __global__
#define __device__
#define __shared__
#define sm smem_buf

static void __syncthreads ()
{
    pthread_barrier_wait (&block_bar);
}

static float __shfl_sync (unsigned, float v, int src)
{
    int t = threadIdx.x, w = t / 32;
    slot[t] = v;
    pthread_barrier_wait (&warp_bar[w]);
    float r = slot[w * 32 + src];
    pthread_barrier_wait (&warp_bar[w]);
    return r;
}

static float __shfl_xor_sync (unsigned m, float v, int x)
{
    return __shfl_sync (m, v, (threadIdx.x % 32) ^ x);
}

#include "flash_kernels.inc"

static void launch (dim3e grid, unsigned threads, std::function<void ()> f)
{
    blockDim = { threads, 1, 1 };
    gridDim = grid;
    pthread_barrier_init (&block_bar, NULL, threads);
    for (unsigned w = 0; w < threads / 32; w++)
        pthread_barrier_init (&warp_bar[w], NULL, 32);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                memset (smem_buf, 0xff, sizeof (smem_buf)); /* NaNs: stale data shows */
                std::vector<std::thread> th;
                for (unsigned t = 0; t < threads; t++)
                    th.emplace_back ([=] () {
                        threadIdx = { t, 0, 0 };
                        blockIdx = { x, y, z };
                        f ();
                    });
                for (auto &j : th)
                    j.join ();
            }
}

/* attn_flash_fwd, then attn_flash_bwd, as flash.cu launches them. */
template<int DL>
static void flash (int B, int T, int NH, int D, const float *qkv, float *lse, float *out,
                   const float *dout, float *dqkv, float *work)
{
    const float scale = 1.0f / sqrtf ((float)D);
    const dim3e grid = { (unsigned)((T + FT - 1) / FT), (unsigned)NH, (unsigned)B };
    const size_t rows = (size_t)B * NH * T;
    launch (grid, 32 * FW, [=] () { k_flash_fwd<DL> (T, NH, D, scale, qkv, lse, out); });
    launch ({ (unsigned)((rows + FW - 1) / FW), 1, 1 }, 32 * FW,
            [=] () { k_flash_delta (B, T, NH, D, out, dout, work); });
    launch (grid, 32 * FW,
            [=] () { k_flash_dkv<DL> (T, NH, D, scale, qkv, lse, work, dout, dqkv); });
    launch (grid, 32 * FW,
            [=] () { k_flash_dq<DL> (T, NH, D, scale, qkv, lse, work, dout, dqkv); });
}

static uint64_t rng = 0x2545F4914F6CDD1DULL;

static float urand ()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static int close_to (const char *what, const float *want, const float *got, size_t n,
                     double rtol, double atol)
{
    double worst = 0;
    size_t wi = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs ((double)want[i] - got[i]), lim = atol + rtol * fabs (want[i]);
        if (!(d <= lim))
            ok = 0;
        if (!(d / lim <= worst))
            worst = d / lim, wi = i;
    }
    printf ("%s %s: worst %.3g of the tolerance (element %zu: %.7g, want %.7g)\n",
            ok ? "ok" : "FAIL", what, worst, wi, got[wi], want[wi]);
    return ok;
}

int main ()
{
    struct dt_kern_ops *cpu = dt_kern_cpu ();
    const int shapes[][5] = { { 2, 7, 3, 5, 1 },    { 3, 65, 4, 16, 1 },
                              { 1, 130, 2, 32, 8 }, { 2, 100, 2, 64, 1 },
                              { 1, 33, 2, 96, 1 },  { 1, 70, 1, 128, 2 } };
    int bad = 0;
    for (const auto &s : shapes) {
        const int B = s[0], T = s[1], NH = s[2], D = s[3], E = NH * D;
        const float a = (float)s[4];
        const size_t nq = (size_t)B * T * 3 * E, no = (size_t)B * T * E,
                     na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T;
        std::vector<float> qkv (nq), dout (no), att (na), out (no), dqkv (nq), work (na),
          fo (no, NAN), fl (nl), fdq (nq, NAN), fw (nl);
        char what[96];
        for (auto &x : qkv)
            x = a * urand ();
        for (auto &x : dout)
            x = urand ();
        cpu->attn_fwd (B, T, NH, D, qkv.data (), att.data (), out.data ());
        cpu->attn_bwd (B, T, NH, D, qkv.data (), att.data (), dout.data (), dqkv.data (),
                       work.data ());
        auto f = flash<4>;
        switch ((D + 31) / 32) {
        case 1: f = flash<1>; break;
        case 2: f = flash<2>; break;
        case 3: f = flash<3>; break;
        }
        f (B, T, NH, D, qkv.data (), fl.data (), fo.data (), dout.data (), fdq.data (),
           fw.data ());
        snprintf (what, sizeof (what), "B %d T %d heads %d of %d, scores x%g: out", B, T,
                  NH, D, a);
        bad += !close_to (what, out.data (), fo.data (), no, 1e-4, 1e-5);
        snprintf (what, sizeof (what), "B %d T %d heads %d of %d, scores x%g: dqkv", B, T,
                  NH, D, a);
        bad += !close_to (what, dqkv.data (), fdq.data (), nq, 1e-3, 1e-4 * a);
    }
    printf ("flash-emu: %s\n", bad ? "FAILED" : "the flash kernels match the CPU");
    return bad != 0;
}
