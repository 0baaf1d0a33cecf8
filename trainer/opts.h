/* opts.h: dttrain's configuration - command line, environment, and its text form in
 * checkpoints. */
#ifndef DT_TRAINER_OPTS_H
#define DT_TRAINER_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

enum parallel_mode { PAR_DP = 0, PAR_ZERO1 = 1 };
/* --attention: the transformer's attention kernels (auto: flash where the
 * backend has it, i.e. on a GPU). */
enum attn_mode { ATTN_AUTO = 0, ATTN_SIMPLE = 1, ATTN_FLASH = 2 };
/* --precision: GEMM inputs in fp32, or in bf16 (GPU; fp32 accumulation and
 * fp32 master weights either way). */
enum prec_mode { PREC_FP32 = 0, PREC_BF16 = 1 };

/* Exit codes (documented in --help). */
enum {
    EXIT_TRAIN_ERR = 1,     /* any other error */
    EXIT_USAGE = 2,         /* bad command line */
    EXIT_CKPT_CORRUPT = 3,  /* a checkpoint shard failed its checksum */
    EXIT_CKPT_MISMATCH = 4, /* checkpoint config differs from this run */
    EXIT_COMM = 5,          /* a collective failed (dead or hung peer) */
    EXIT_JIT = 6,       /* a collective failed; a just-in-time checkpoint was written */
    EXIT_INJECTED = 17, /* --inject-crash fired */
};

struct train_opts {
    /* model and data (must match on resume) */
    const char *data;
    int64_t steps;
    int global_batch;
    int model; /* enum model_kind (trainer/model.h) */
    int context;
    int width; /* transformer: model width */
    int heads; /* transformer: attention heads */
    int embed;
    int hidden;
    int layers;
    double lr;        /* peak LR at lr_ref_batch samples */
    int lr_ref_batch; /* linear scaling rule: peak = lr * B / ref */
    int64_t warmup_steps;
    double min_lr_frac; /* cosine decays to min_lr_frac * peak */
    double weight_decay;
    double clip;
    double beta1, beta2, eps;
    uint64_t seed;
    double val_frac;
    int val_samples;
    /* execution (may differ on resume) */
    int micro_batch; /* 0: a rank's whole share in one pass */
    enum parallel_mode parallel;
    int tp, pp; /* tensor and pipeline parallel degrees (trainer/layout.h) */
    const char *checkpoint_dir;
    int64_t checkpoint_every;
    const char *resume;
    const char *rendezvous_dir;
    int64_t val_every;
    const char *backend; /* auto, cpu, cuda */
    enum attn_mode attention;
    enum prec_mode precision;
    int threads; /* OpenBLAS threads */
    double bucket_mb;
    int overlap; /* reduce buckets during backward: -1 auto, 0, 1 */
    long comm_timeout_ms;
    const char *job;
    const char *comm_host;
    int quiet;
    int log_every;            /* rank 0's step lines: every Nth step; 0: steps/20 */
    int jit;                  /* just-in-time checkpoint on a lost peer (dp; default 1) */
    double peak_flops;        /* this rank's peak FLOP/s for the MFU; 0: found at start */
    int peak_from_env;        /* peak_flops came from DT_PEAK_FLOPS */
    const char *dump_params;  /* rank 0 writes final params (raw float32) */
    const char *dump_tensors; /* rank 0 writes the tensor table, initial
                               * params and step 1's gradients there */
    /* integrity (trainer/integrity.c) */
    int64_t integrity_every; /* parameter fingerprint every N steps, 0: off
                              * (wins over env DT_INTEGRITY_EVERY) */
    double spike_k;          /* loss spike: > median + k MAD; 0: off */
    int spike_window;        /* losses in the spike rule's window */
    const char *skip_steps;  /* "S1,S2,...": steps whose update is skipped */
    /* fault injection */
    int bitflip_rank;
    int64_t bitflip_step;
    char bitflip_tensor[24];
    int64_t bitflip_index;
    int nan_rank;
    int64_t nan_step;
    int64_t bad_batch_step;
    int crash_rank;
    int64_t crash_step;
    int hang_rank;
    int64_t hang_step;
    int slow_rank;
    double slow_factor;
    /* world, from the environment */
    int rank, world, local_rank;
    int64_t resume_step; /* DT_RESUME_STEP; 0 or -1: a fresh start */
};

/* Fill defaults, then parse argv and the environment (RANK, WORLD_SIZE,
 * LOCAL_RANK, DT_CHECKPOINT_DIR, DT_RESUME_DIR, DT_RESUME_STEP, DT_JOB,
 * DT_CHECKPOINT_EVERY); options win over the DT_* defaults.
 * Returns 0, 1 when --help/--version was printed, or -1 with err. */
int opts_parse (struct train_opts *o, int argc, char **argv, dt_error_t *err);

/* The fields that must match on resume, as "key=value\n" lines.
 * New string, caller frees. */
char *opts_to_text (const struct train_opts *o, uint64_t data_bytes, uint32_t data_crc);

/* Compare a saved config text with ours.  0 if equal, else -1 with err
 * naming the first differing field and both values. */
int opts_compare (const char *saved, const char *ours, dt_error_t *err);

#endif
