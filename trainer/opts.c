/* opts.c: dttrain's command line and environment. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/version.h"
#include "trainer/model.h"
#include "trainer/layout.h"
#include "trainer/opts.h"

/* Defaults that train sensibly on any text file in seconds on one core.
 * The transformer's (context 8, width 32, 2 heads, 2 blocks: 42k
 * parameters, 512 predictions a step) take about as long a step as the
 * MLP's (context 32: 1.2x on one core), and reach a lower validation loss
 * in 200 steps; its work per sample grows with the context (a prediction
 * at every position), the MLP's does not.  --context 0 here means "the
 * model's". */
#define MLP_CONTEXT 32
#define TFM_CONTEXT 8
static const struct train_opts defaults = {
    .steps = 200,
    .global_batch = 64,
    .model = MODEL_TRANSFORMER,
    .context = 0,
    .width = 32,
    .heads = 2,
    .embed = 16,
    .hidden = 256,
    .layers = 2,
    .lr = 3e-3,
    .lr_ref_batch = 64,
    .warmup_steps = 20,
    .min_lr_frac = 0.1,
    .weight_decay = 0.01,
    .clip = 1.0,
    .beta1 = 0.9,
    .beta2 = 0.999,
    .eps = 1e-8,
    .seed = 1234,
    .val_frac = 0.1,
    .val_samples = 512,
    .parallel = PAR_DP,
    .tp = 1,
    .pp = 1,
    .val_every = 0,
    .backend = "auto",
    .attention = ATTN_AUTO,
    .precision = PREC_FP32,
    .threads = 1,
    .bucket_mb = 4.0,
    .comm_timeout_ms = 60000,
    .job = "dttrain",
    .integrity_every = 50,
    .spike_k = 8.0,
    .spike_window = 32,
    .bitflip_rank = -1,
    .nan_rank = -1,
    .crash_rank = -1,
    .hang_rank = -1,
    .slow_rank = -1,
    .slow_factor = 1.0,
    .overlap = -1,
    .jit = 1,
    .resume_step = -1,
};

static const char usage_text[] =
  "Usage: dttrain --data FILE [OPTIONS]\n"
  "Train a byte-level language model, data-parallel over RANK/WORLD_SIZE from the\n"
  "environment: --model transformer (the default; decoder-only: pre-LayerNorm\n"
  "blocks of causal self-attention and a 4x GELU MLP, predicting every next byte of\n"
  "the window) or --model mlp (context bytes -> embeddings -> GEMM+bias+GELU\n"
  "layers -> 256-way softmax, predicting the next byte).\n"
  "\n"
  "Model and data (must match when resuming):\n"
  "  --data FILE            training text (memory-mapped; the tail is held out)\n"
  "  --steps N              optimizer steps (200)\n"
  "  --global-batch B       samples per step, independent of world size (64)\n"
  "  --model transformer|mlp  the model (transformer)\n"
  "  --context C            context bytes (transformer 8, mlp 32)\n"
  "  --layers L             mlp: hidden layers; transformer: blocks (2)\n"
  "  --embed E              mlp: embedding width per byte (16)\n"
  "  --hidden H             mlp: hidden width (256)\n"
  "  --width E              transformer: model width (32); on a GPU e.g.\n"
  "                         --width 768 --heads 12 --layers 12 --context 1024\n"
  "  --heads N              transformer: attention heads, dividing the width (2)\n"
  "  --lr LR                peak learning rate at --lr-ref-batch samples (3e-3)\n"
  "  --lr-ref-batch N       linear scaling rule: peak = LR * B / N (64)\n"
  "  --warmup-steps N       linear warmup steps, then cosine decay (20)\n"
  "  --min-lr-frac F        cosine floor as a fraction of the peak (0.1)\n"
  "  --weight-decay WD      AdamW decoupled weight decay on matrices (0.01)\n"
  "  --clip X               global gradient-norm clip, 0 = off (1.0)\n"
  "  --seed S               initialisation and sampling seed (1234)\n"
  "  --val-frac F           held-out tail of the file (0.1)\n"
  "  --val-samples N        validation windows (512)\n"
  "Execution:\n"
  "  --micro-batch M        samples per forward/backward pass (default: a rank's share;\n"
  "                         with --pp P, a share / (4 P))\n"
  "  --parallel dp|zero1    replicated or sharded (ZeRO-1) optimizer state\n"
  "                         (dp; env DT_PARALLEL)\n"
  "  --tp T                 tensor-parallel degree: the transformer's heads and MLP\n"
  "                         split over T adjacent ranks (1; env DT_TP)\n"
  "  --pp P                 pipeline-parallel degree: the blocks split into P stages,\n"
  "                         micro-batches in the 1F1B schedule (1; env DT_PP);\n"
  "                         data-parallel degree = WORLD_SIZE / (T x P)\n"
  "  --checkpoint-dir DIR   shards go to DIR/step-S/rank-R.ckpt (env DT_CHECKPOINT_DIR)\n"
  "  --checkpoint-every N   checkpoint every N steps (0 = only on stop/command;\n"
  "                         wins over env DT_CHECKPOINT_EVERY)\n"
  "  --no-jit               no just-in-time checkpoint when a peer is lost (dp: by\n"
  "                         default the survivors save the last completed step of\n"
  "                         their dp group's shards, exit 6)\n"
  "  --resume DIR           a step-S directory, or a checkpoint root (latest committed)\n"
  "  --rendezvous-dir DIR   bootstrap directory for multi-rank runs without an agent\n"
  "                         (else the agent's kv through libdtclient, which falls back\n"
  "                         to the directory in DT_RENDEZVOUS_DIR)\n"
  "  --val-every N          validate every N steps (0 = only at the end)\n"
  "  --backend auto|cpu|cuda  kernel backend (auto)\n"
  "  --attention auto|flash|simple  transformer attention: flash (tiled, online\n"
  "                         softmax, no score matrix; cuda only) or simple (the\n"
  "                         scores kept for backward); auto: flash on cuda (auto)\n"
  "  --precision fp32|bf16  GEMM inputs; bf16 (cuda only) keeps fp32 master weights,\n"
  "                         activations and accumulation (fp32)\n"
  "  --threads N            OpenBLAS threads (1)\n"
  "  --bucket-mb X          largest gradient allreduce bucket in MiB (4; whole tensors)\n"
  "  --overlap, --no-overlap  reduce gradient buckets during the backward pass, and\n"
  "                         gather zero1's parameters during the next forward pass\n"
  "                         (a comm thread), or after them; default: overlap unless\n"
  "                         the ranks' threads outnumber the cores (online CPUs >=\n"
  "                         local ranks x threads)\n"
  "  --comm-timeout SEC     collective timeout; a dead peer errors within it (60)\n"
  "  --comm-host ADDR       address this rank listens on (127.0.0.1 or hostname)\n"
  "  --job NAME             job name recorded in checkpoints (env DT_JOB)\n"
  "  --peak-flops X         peak FLOP/s of this rank for the MFU (env DT_PEAK_FLOPS;\n"
  "                         default: measured at start, see dttrain(1))\n"
  "  --quiet                no per-step lines\n"
  "  --log-every N          rank 0 logs every Nth step (default: 20 lines a run)\n"
  "Integrity (silent errors; see the INTEGRITY section of dttrain(1)):\n"
  "  --integrity-every N    report a fingerprint (CRC32C per tensor) of the parameters\n"
  "                         every N steps, 0 = off (50; wins over env "
  "DT_INTEGRITY_EVERY)\n"
  "  --spike-k K            loss spike: loss > median + K * MAD of the window, 0 = off\n"
  "                         (8; env DT_INTEGRITY_SPIKE_K)\n"
  "  --spike-window W       losses in the spike rule's window (32; env\n"
  "                         DT_INTEGRITY_SPIKE_WINDOW)\n"
  "  --skip-steps LIST      comma-separated steps whose update is skipped (bad batches;\n"
  "                         env DT_SKIP_STEPS)\n"
  "  --dump-params FILE     rank 0 writes the final parameters (raw float32) to FILE\n"
  "  --dump-tensors DIR     rank 0 writes DIR/tensors.txt (name, offset, shape of\n"
  "                         each tensor), DIR/init.f32 (initial parameters) and\n"
  "                         DIR/grads-1.f32, DIR/loss-1.txt (step 1's reduced\n"
  "                         gradients, before clipping, and loss) for oracle tests\n"
  "Fault injection (tests):\n"
  "  --inject-crash R:S     rank R exits with status 17 at step S\n"
  "  --inject-hang R:S      rank R stops making progress at step S\n"
  "  --inject-slow R:F      rank R computes F times slower\n"
  "  --inject-bitflip R:S:TENSOR:INDEX  flip bit 20 of element INDEX of tensor TENSOR\n"
  "                         (a name from --dump-tensors, or its number) in rank R's\n"
  "                         parameters before step S (the job's first attempt only)\n"
  "  --inject-nan R:S       rank R's gradient of step S is NaN (first attempt only)\n"
  "  --inject-bad-batch S   the samples of step S read corrupted bytes (every 0xff), in\n"
  "                         every attempt, as from a corrupted region of the data\n"
  "  --help, --version\n"
  "\n"
  "Exit status: 0 done, 1 error, 2 usage, 3 corrupt checkpoint shard,\n"
  "4 checkpoint config mismatch, 5 collective failure (peer lost), 6 collective\n"
  "failure after a just-in-time checkpoint was written, 17 injected crash.\n";

enum {
    O_DATA = 256,
    O_STEPS,
    O_GB,
    O_CTX,
    O_EMB,
    O_HID,
    O_LAY,
    O_LR,
    O_LRREF,
    O_WARM,
    O_MINLR,
    O_WD,
    O_CLIP,
    O_SEED,
    O_VALFRAC,
    O_VALN,
    O_MB,
    O_PAR,
    O_CKDIR,
    O_CKEV,
    O_RESUME,
    O_RDV,
    O_VALEV,
    O_BACKEND,
    O_THREADS,
    O_BUCKET,
    O_TIMEOUT,
    O_HOST,
    O_JOB,
    O_QUIET,
    O_LOGEVERY,
    O_DUMP,
    O_MODEL,
    O_WIDTH,
    O_HEADS,
    O_DUMPT,
    O_NOOV,
    O_OV,
    O_ATTN,
    O_PREC,
    O_NOJIT,
    O_CRASH,
    O_HANG,
    O_SLOW,
    O_INTEV,
    O_SPIKEK,
    O_SPIKEW,
    O_SKIP,
    O_BITFLIP,
    O_NAN,
    O_BADBATCH,
    O_HELP,
    O_VERSION,
    O_TP,
    O_PP,
    O_PEAK,
};

static const struct option longopts[] = {
    { "data", required_argument, NULL, O_DATA },
    { "steps", required_argument, NULL, O_STEPS },
    { "global-batch", required_argument, NULL, O_GB },
    { "context", required_argument, NULL, O_CTX },
    { "embed", required_argument, NULL, O_EMB },
    { "hidden", required_argument, NULL, O_HID },
    { "layers", required_argument, NULL, O_LAY },
    { "lr", required_argument, NULL, O_LR },
    { "lr-ref-batch", required_argument, NULL, O_LRREF },
    { "warmup-steps", required_argument, NULL, O_WARM },
    { "min-lr-frac", required_argument, NULL, O_MINLR },
    { "weight-decay", required_argument, NULL, O_WD },
    { "clip", required_argument, NULL, O_CLIP },
    { "seed", required_argument, NULL, O_SEED },
    { "val-frac", required_argument, NULL, O_VALFRAC },
    { "val-samples", required_argument, NULL, O_VALN },
    { "micro-batch", required_argument, NULL, O_MB },
    { "parallel", required_argument, NULL, O_PAR },
    { "checkpoint-dir", required_argument, NULL, O_CKDIR },
    { "checkpoint-every", required_argument, NULL, O_CKEV },
    { "resume", required_argument, NULL, O_RESUME },
    { "rendezvous-dir", required_argument, NULL, O_RDV },
    { "val-every", required_argument, NULL, O_VALEV },
    { "backend", required_argument, NULL, O_BACKEND },
    { "threads", required_argument, NULL, O_THREADS },
    { "bucket-mb", required_argument, NULL, O_BUCKET },
    { "comm-timeout", required_argument, NULL, O_TIMEOUT },
    { "comm-host", required_argument, NULL, O_HOST },
    { "job", required_argument, NULL, O_JOB },
    { "quiet", no_argument, NULL, O_QUIET },
    { "log-every", required_argument, NULL, O_LOGEVERY },
    { "dump-params", required_argument, NULL, O_DUMP },
    { "dump-tensors", required_argument, NULL, O_DUMPT },
    { "model", required_argument, NULL, O_MODEL },
    { "width", required_argument, NULL, O_WIDTH },
    { "heads", required_argument, NULL, O_HEADS },
    { "attention", required_argument, NULL, O_ATTN },
    { "precision", required_argument, NULL, O_PREC },
    { "no-overlap", no_argument, NULL, O_NOOV },
    { "no-jit", no_argument, NULL, O_NOJIT },
    { "peak-flops", required_argument, NULL, O_PEAK },
    { "overlap", no_argument, NULL, O_OV },
    { "inject-crash", required_argument, NULL, O_CRASH },
    { "inject-hang", required_argument, NULL, O_HANG },
    { "inject-slow", required_argument, NULL, O_SLOW },
    { "integrity-every", required_argument, NULL, O_INTEV },
    { "spike-k", required_argument, NULL, O_SPIKEK },
    { "spike-window", required_argument, NULL, O_SPIKEW },
    { "skip-steps", required_argument, NULL, O_SKIP },
    { "inject-bitflip", required_argument, NULL, O_BITFLIP },
    { "inject-nan", required_argument, NULL, O_NAN },
    { "inject-bad-batch", required_argument, NULL, O_BADBATCH },
    { "help", no_argument, NULL, O_HELP },
    { "version", no_argument, NULL, O_VERSION },
    { "tp", required_argument, NULL, O_TP },
    { "pp", required_argument, NULL, O_PP },
    { NULL, 0, NULL, 0 },
};

/* The words of the choice options, in their enums' order. */
static const char *const parallel_words[] = { "dp", "zero1", NULL };
static const char *const model_words[] = { "mlp", "transformer", NULL };
static const char *const attn_words[] = { "auto", "simple", "flash", NULL };
static const char *const prec_words[] = { "fp32", "bf16", NULL };

static int parse_i64 (const char *name, const char *s, int64_t lo, int64_t hi,
                      int64_t *out, dt_error_t *err)
{
    char *end;
    errno = 0;
    long long v = strtoll (s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return errprintf (err, "%s: '%s' is not an integer in [%" PRId64 ", %" PRId64 "]",
                          name, s, lo, hi);
    *out = v;
    return 0;
}

static int parse_int (const char *name, const char *s, int lo, int hi, int *out,
                      dt_error_t *err)
{
    int64_t v;
    if (parse_i64 (name, s, lo, hi, &v, err) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_dbl (const char *name, const char *s, double lo, double hi, double *out,
                      dt_error_t *err)
{
    char *end;
    errno = 0;
    double v = strtod (s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return errprintf (err, "%s: '%s' is not a number in [%g, %g]", name, s, lo, hi);
    *out = v;
    return 0;
}

/* a: one of words[] (NULL-terminated); *out: its index. */
static int parse_word (const char *name, const char *a, const char *const *words,
                       int *out, dt_error_t *err)
{
    char list[96] = "";
    size_t n = 0;
    for (int i = 0; words[i]; i++) {
        if (!strcmp (a, words[i])) {
            *out = i;
            return 0;
        }
        n += snprintf (list + n, n < sizeof (list) ? sizeof (list) - n : 0, "%s%s",
                       i == 0         ? ""
                       : words[i + 1] ? ", "
                                      : " or ",
                       words[i]);
    }
    return errprintf (err, "%s: '%s' is not %s", name, a, list);
}

/* "R:S" */
static int parse_pair (const char *name, const char *s, int *rank, int64_t *step,
                       dt_error_t *err)
{
    const char *c = strchr (s, ':');
    char buf[32];
    if (!c || (size_t)(c - s) >= sizeof (buf))
        return errprintf (err, "%s: '%s' is not RANK:STEP", name, s);
    memcpy (buf, s, c - s);
    buf[c - s] = '\0';
    if (parse_int (name, buf, 0, 1 << 20, rank, err) < 0 ||
        parse_i64 (name, c + 1, 0, INT64_MAX, step, err) < 0)
        return -1;
    return 0;
}

static int env_int (const char *name, int lo, int hi, int *out, dt_error_t *err)
{
    const char *s = getenv (name);
    if (!s || !*s)
        return 0;
    return parse_int (name, s, lo, hi, out, err);
}

/* Two paths name the same directory (textually, or once resolved). */
static int same_dir (const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (!strcmp (a, b))
        return 1;
    return realpath (a, ra) && realpath (b, rb) && !strcmp (ra, rb);
}

/* The agent's DT_* variables (agent/ranks.c) are defaults: an option given
 * on the command line wins, and where the controller depends on the value
 * (it reads and commits shards in DT_CHECKPOINT_DIR; a restart continues
 * from the step in DT_RESUME_DIR) a different option is an error rather
 * than silently ignored. */
static int opts_env (struct train_opts *o, int ckev_set, int job_set, int integ_set,
                     dt_error_t *err)
{
    const char *s;
    if ((s = getenv ("DT_CHECKPOINT_DIR")) && *s) {
        if (o->checkpoint_dir && !same_dir (o->checkpoint_dir, s))
            return errprintf (err,
                              "--checkpoint-dir %s conflicts with DT_CHECKPOINT_DIR=%s "
                              "(the controller keeps the job's checkpoints there)",
                              o->checkpoint_dir, s);
        o->checkpoint_dir = s;
        /* The controller made it this user's; a directory of another
         * user's at that name (planted in a shared checkpoint root) would
         * let that user read and replace this job's shards. */
        struct stat sb;
        if (lstat (s, &sb) == 0 && (!S_ISDIR (sb.st_mode) || sb.st_uid != geteuid ()))
            return errprintf (err,
                              "DT_CHECKPOINT_DIR %s is %s of uid %ld, not a directory "
                              "of this user (uid %ld): no checkpoint is written there",
                              s, S_ISDIR (sb.st_mode) ? "a directory" : "not a directory",
                              (long)sb.st_uid, (long)geteuid ());
    }
    if (!job_set && (s = getenv ("DT_JOB")) && *s)
        o->job = s;
    if ((s = getenv ("DT_RESUME_STEP")) && *s &&
        parse_i64 ("DT_RESUME_STEP", s, 0, INT64_MAX, &o->resume_step, err) < 0)
        return -1;
    if ((s = getenv ("DT_RESUME_DIR")) && *s) {
        if (o->resume && !same_dir (o->resume, s) &&
            !(o->checkpoint_dir && same_dir (o->resume, o->checkpoint_dir)))
            return errprintf (err,
                              "--resume %s conflicts with DT_RESUME_DIR=%s (a restart "
                              "continues from the controller's checkpoint)",
                              o->resume, s);
        o->resume = s;
    }
    /* The job's checkpoint.every_steps; --checkpoint-every wins, even 0. */
    if (!ckev_set && (s = getenv ("DT_CHECKPOINT_EVERY")) && *s &&
        parse_i64 ("DT_CHECKPOINT_EVERY", s, 0, INT64_MAX / 2, &o->checkpoint_every,
                   err) < 0)
        return -1;
    /* The job's integrity keys; an option given wins (bit per option). */
    if (!(integ_set & 1) && (s = getenv ("DT_INTEGRITY_EVERY")) && *s &&
        parse_i64 ("DT_INTEGRITY_EVERY", s, 0, INT64_MAX / 2, &o->integrity_every, err) <
          0)
        return -1;
    if (!(integ_set & 2) && (s = getenv ("DT_INTEGRITY_SPIKE_K")) && *s &&
        parse_dbl ("DT_INTEGRITY_SPIKE_K", s, 0, 1e6, &o->spike_k, err) < 0)
        return -1;
    if (!(integ_set & 4) && (s = getenv ("DT_INTEGRITY_SPIKE_WINDOW")) && *s &&
        parse_int ("DT_INTEGRITY_SPIKE_WINDOW", s, 4, 4096, &o->spike_window, err) < 0)
        return -1;
    if (!(integ_set & 8) && (s = getenv ("DT_SKIP_STEPS")) && *s)
        o->skip_steps = s;
    /* The peak FLOP/s the MFU is measured against; --peak-flops wins. */
    if (o->peak_flops == 0 && (s = getenv ("DT_PEAK_FLOPS")) && *s) {
        if (parse_dbl ("DT_PEAK_FLOPS", s, 0, 1e24, &o->peak_flops, err) < 0)
            return -1;
        o->peak_from_env = o->peak_flops > 0;
    }
    return 0;
}

/* --skip-steps: a comma-separated list of steps >= 1. */
static int check_steps_list (const char *name, const char *s, dt_error_t *err)
{
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll (p, &end, 10);
        if (errno || end == p || v < 1 || (*end && *end != ',') ||
            (*end == ',' && !end[1]))
            return errprintf (err, "%s: '%s' is not a comma-separated list of steps",
                              name, s);
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* --inject-bitflip R:S:TENSOR:INDEX */
static int parse_bitflip (struct train_opts *o, const char *a, dt_error_t *err)
{
    char buf[128], *f[4], *save = NULL;
    int n = 0;
    if (strlen (a) >= sizeof (buf))
        return errprintf (err, "--inject-bitflip: '%s' is too long", a);
    snprintf (buf, sizeof (buf), "%s", a);
    for (char *tok = strtok_r (buf, ":", &save); tok && n < 4;
         tok = strtok_r (NULL, ":", &save))
        f[n++] = tok;
    if (n != 4 || strtok_r (NULL, ":", &save) ||
        strlen (f[2]) >= sizeof (o->bitflip_tensor))
        return errprintf (err, "--inject-bitflip: '%s' is not RANK:STEP:TENSOR:INDEX", a);
    if (parse_int ("--inject-bitflip", f[0], 0, 1 << 20, &o->bitflip_rank, err) < 0 ||
        parse_i64 ("--inject-bitflip", f[1], 1, INT64_MAX, &o->bitflip_step, err) < 0 ||
        parse_i64 ("--inject-bitflip", f[3], 0, INT64_MAX, &o->bitflip_index, err) < 0)
        return -1;
    snprintf (o->bitflip_tensor, sizeof (o->bitflip_tensor), "%s", f[2]);
    return 0;
}

/* The numeric options: each parsed into its field of struct train_opts,
 * within its range; 'model' names the one model an option sizes (-1:
 * both). */
enum num_kind { NUM_INT, NUM_I64, NUM_DBL };
struct num_opt {
    int id;
    const char *name;
    enum num_kind kind;
    int64_t lo, hi;  /* NUM_INT, NUM_I64 */
    double dlo, dhi; /* NUM_DBL */
    size_t off;
    int model;
};
static const struct num_opt num_opts[] = {
    { O_STEPS, "--steps", NUM_I64, 0, INT64_MAX / 2, 0, 0,
      offsetof (struct train_opts, steps), -1 },
    { O_GB, "--global-batch", NUM_INT, 1, 1 << 24, 0, 0,
      offsetof (struct train_opts, global_batch), -1 },
    { O_CTX, "--context", NUM_INT, 1, 1 << 16, 0, 0,
      offsetof (struct train_opts, context), -1 },
    { O_EMB, "--embed", NUM_INT, 1, 1 << 14, 0, 0, offsetof (struct train_opts, embed),
      MODEL_MLP },
    { O_HID, "--hidden", NUM_INT, 1, 1 << 16, 0, 0, offsetof (struct train_opts, hidden),
      MODEL_MLP },
    { O_LAY, "--layers", NUM_INT, 1, 256, 0, 0, offsetof (struct train_opts, layers),
      -1 },
    { O_LR, "--lr", NUM_DBL, 0, 0, 0, 100, offsetof (struct train_opts, lr), -1 },
    { O_LRREF, "--lr-ref-batch", NUM_INT, 1, 1 << 24, 0, 0,
      offsetof (struct train_opts, lr_ref_batch), -1 },
    { O_WARM, "--warmup-steps", NUM_I64, 0, INT64_MAX / 2, 0, 0,
      offsetof (struct train_opts, warmup_steps), -1 },
    { O_MINLR, "--min-lr-frac", NUM_DBL, 0, 0, 0, 1,
      offsetof (struct train_opts, min_lr_frac), -1 },
    { O_WD, "--weight-decay", NUM_DBL, 0, 0, 0, 10,
      offsetof (struct train_opts, weight_decay), -1 },
    { O_CLIP, "--clip", NUM_DBL, 0, 0, 0, 1e9, offsetof (struct train_opts, clip), -1 },
    { O_VALFRAC, "--val-frac", NUM_DBL, 0, 0, 0, 0.9,
      offsetof (struct train_opts, val_frac), -1 },
    { O_VALN, "--val-samples", NUM_INT, 0, 1 << 24, 0, 0,
      offsetof (struct train_opts, val_samples), -1 },
    { O_MB, "--micro-batch", NUM_INT, 1, 1 << 24, 0, 0,
      offsetof (struct train_opts, micro_batch), -1 },
    { O_VALEV, "--val-every", NUM_I64, 0, INT64_MAX / 2, 0, 0,
      offsetof (struct train_opts, val_every), -1 },
    { O_THREADS, "--threads", NUM_INT, 1, 256, 0, 0,
      offsetof (struct train_opts, threads), -1 },
    { O_BUCKET, "--bucket-mb", NUM_DBL, 0, 0, 0.001, 4096,
      offsetof (struct train_opts, bucket_mb), -1 },
    { O_LOGEVERY, "--log-every", NUM_INT, 1, 1 << 30, 0, 0,
      offsetof (struct train_opts, log_every), -1 },
    { O_WIDTH, "--width", NUM_INT, 1, 1 << 14, 0, 0, offsetof (struct train_opts, width),
      MODEL_TRANSFORMER },
    { O_HEADS, "--heads", NUM_INT, 1, 1024, 0, 0, offsetof (struct train_opts, heads),
      MODEL_TRANSFORMER },
    { O_TP, "--tp", NUM_INT, 1, 1024, 0, 0, offsetof (struct train_opts, tp), -1 },
    { O_PP, "--pp", NUM_INT, 1, 1024, 0, 0, offsetof (struct train_opts, pp), -1 },
    { O_PEAK, "--peak-flops", NUM_DBL, 0, 0, 0, 1e24,
      offsetof (struct train_opts, peak_flops), -1 },
};

/* Parse option id 'c' when it is a numeric one: 1 (parsed, *model_only set
 * to the option's name when it sizes one model), 0 (not numeric), -1. */
static int parse_num_opt (struct train_opts *o, int c, const char *a,
                          const char **mlp_only, const char **tfm_only, dt_error_t *err)
{
    for (size_t i = 0; i < sizeof (num_opts) / sizeof (num_opts[0]); i++) {
        const struct num_opt *n = &num_opts[i];
        char *field = (char *)o + n->off;
        int rc;
        if (n->id != c)
            continue;
        if (n->kind == NUM_INT)
            rc = parse_int (n->name, a, (int)n->lo, (int)n->hi, (int *)field, err);
        else if (n->kind == NUM_I64)
            rc = parse_i64 (n->name, a, n->lo, n->hi, (int64_t *)field, err);
        else
            rc = parse_dbl (n->name, a, n->dlo, n->dhi, (double *)field, err);
        if (rc)
            return -1;
        if (n->model == MODEL_MLP)
            *mlp_only = n->name;
        else if (n->model == MODEL_TRANSFORMER)
            *tfm_only = n->name;
        return 1;
    }
    return 0;
}

/* Parse option id 'c' when it is an integrity option: 1 (parsed; the bit
 * of an option the environment must not override set in *integ_set), 0
 * (not one), -1. */
static int parse_integ_opt (struct train_opts *o, int c, const char *a, int *integ_set,
                            dt_error_t *err)
{
    switch (c) {
    case O_INTEV:
        if (parse_i64 ("--integrity-every", a, 0, INT64_MAX / 2, &o->integrity_every,
                       err))
            return -1;
        *integ_set |= 1;
        return 1;
    case O_SPIKEK:
        if (parse_dbl ("--spike-k", a, 0, 1e6, &o->spike_k, err))
            return -1;
        *integ_set |= 2;
        return 1;
    case O_SPIKEW:
        if (parse_int ("--spike-window", a, 4, 4096, &o->spike_window, err))
            return -1;
        *integ_set |= 4;
        return 1;
    case O_SKIP:
        o->skip_steps = a;
        *integ_set |= 8;
        return 1;
    case O_BITFLIP:
        if (parse_bitflip (o, a, err) < 0)
            return -1;
        return 1;
    case O_NAN:
        if (parse_pair ("--inject-nan", a, &o->nan_rank, &o->nan_step, err))
            return -1;
        return 1;
    case O_BADBATCH:
        if (parse_i64 ("--inject-bad-batch", a, 1, INT64_MAX, &o->bad_batch_step, err))
            return -1;
        return 1;
    default: return 0;
    }
}

/* What no single option can say wrong: the options taken together.
 * mlp_only, tfm_only: the last size option given of each model, or NULL. */
static int opts_check (const struct train_opts *o, const char *mlp_only,
                       const char *tfm_only, dt_error_t *err)
{
    if (!o->data)
        return errprintf (err, "--data FILE is required (see --help)");
    if (o->min_lr_frac > 1)
        return errprintf (err, "--min-lr-frac must be at most 1");
    if (o->model == MODEL_TRANSFORMER && mlp_only)
        return errprintf (err,
                          "%s sizes --model mlp; the transformer's are --width, --heads, "
                          "--layers",
                          mlp_only);
    if (o->model == MODEL_MLP && tfm_only)
        return errprintf (
          err,
          "%s sizes --model transformer; the MLP's are --embed, --hidden, "
          "--layers",
          tfm_only);
    if (o->model == MODEL_MLP && o->attention != ATTN_AUTO)
        return errprintf (err, "--attention is the transformer's; the MLP has none");
    if (o->model == MODEL_TRANSFORMER && o->width % o->heads != 0)
        return errprintf (err, "--width %d is not a multiple of --heads %d", o->width,
                          o->heads);
    return 0;
}

/* After the options: defaults that depend on the model, the world and
 * the agent's environment (explicit flags win, the *_set flags say which
 * were given), then the checks of the whole.  0 or -1 with err. */
static int opts_finish (struct train_opts *o, int ckev_set, int job_set, int integ_set,
                        int tp_set, int pp_set, const char *mlp_only,
                        const char *tfm_only, dt_error_t *err)
{
    if (!o->context)
        o->context = o->model == MODEL_MLP ? MLP_CONTEXT : TFM_CONTEXT;

    /* The world, torchrun style, from the agent (or 1 rank standalone). */
    if (env_int ("WORLD_SIZE", 1, 1 << 20, &o->world, err) < 0 ||
        env_int ("RANK", 0, 1 << 20, &o->rank, err) < 0 ||
        env_int ("LOCAL_RANK", 0, 1 << 20, &o->local_rank, err) < 0)
        return -1;
    if (o->rank >= o->world)
        return errprintf (err, "RANK=%d is not below WORLD_SIZE=%d", o->rank, o->world);
    if (opts_env (o, ckev_set, job_set, integ_set, err) < 0)
        return -1;
    if (o->skip_steps &&
        check_steps_list ((integ_set & 8) ? "--skip-steps" : "DT_SKIP_STEPS",
                          o->skip_steps, err) < 0)
        return -1;
    /* The job spec's layout (parallel: {tp, pp}) comes as DT_TP, DT_PP;
     * --tp and --pp win. */
    if ((!tp_set && env_int ("DT_TP", 1, 1024, &o->tp, err) < 0) ||
        (!pp_set && env_int ("DT_PP", 1, 1024, &o->pp, err) < 0))
        return -1;
    if (opts_check (o, mlp_only, tfm_only, err) < 0)
        return -1;
    /* The pipeline's transport between stages on one node (comm_gloo.cc
     * reads it at the first send or receive): checked here, at start. */
    static const char *const transports[] = { "shm", "gloo", NULL };
    const char *pt = getenv ("DT_PP_TRANSPORT");
    int tw;
    if (pt && *pt && parse_word ("DT_PP_TRANSPORT", pt, transports, &tw, err) < 0)
        return -1;
    struct layout ly;
    return layout_init (&ly, o, o->world, o->rank, err);
}

/* The job spec's parallel.zero1 comes as DT_PARALLEL=zero1; the controller
 * relies on it (it expects no just-in-time checkpoint), so a different
 * --parallel (par_set: one was given) is an error rather than ignored. */
static int opts_env_parallel (struct train_opts *o, int par_set, dt_error_t *err)
{
    const char *pe = getenv ("DT_PARALLEL");
    int w;
    if (!pe || !*pe)
        return 0;
    if (parse_word ("DT_PARALLEL", pe, parallel_words, &w, err) < 0)
        return -1;
    if (par_set && w != (int)o->parallel)
        return errprintf (err,
                          "--parallel %s conflicts with DT_PARALLEL=%s (the job "
                          "spec's parallel.zero1)",
                          parallel_words[o->parallel], pe);
    o->parallel = (enum parallel_mode)w;
    return 0;
}

int opts_parse (struct train_opts *o, int argc, char **argv, dt_error_t *err)
{
    int c, ckev_set = 0, job_set = 0, integ_set = 0, tp_set = 0, pp_set = 0, w;
    int par_set = 0;
    int64_t v;
    double d;
    const char *mlp_only = NULL, *tfm_only = NULL; /* a size option of one model */

    *o = defaults;
    o->world = 1;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
        const char *a = optarg;
        int num = parse_num_opt (o, c, a, &mlp_only, &tfm_only, err);
        if (num < 0)
            return -1;
        if (num > 0) {
            tp_set |= c == O_TP;
            pp_set |= c == O_PP;
            continue;
        }
        if ((num = parse_integ_opt (o, c, a, &integ_set, err)) < 0)
            return -1;
        if (num > 0)
            continue;
        switch (c) {
        case O_DATA: o->data = a; break;
        case O_SEED:
            if (parse_i64 ("--seed", a, 0, INT64_MAX, &v, err))
                return -1;
            o->seed = (uint64_t)v;
            break;
        case O_PAR:
            if (parse_word ("--parallel", a, parallel_words, &w, err) < 0)
                return -1;
            o->parallel = (enum parallel_mode)w;
            par_set = 1;
            break;
        case O_CKDIR: o->checkpoint_dir = a; break;
        case O_CKEV:
            if (parse_i64 ("--checkpoint-every", a, 0, INT64_MAX / 2,
                           &o->checkpoint_every, err))
                return -1;
            ckev_set = 1;
            break;
        case O_RESUME: o->resume = a; break;
        case O_RDV: o->rendezvous_dir = a; break;
        case O_BACKEND: o->backend = a; break;
        case O_TIMEOUT:
            if (parse_dbl ("--comm-timeout", a, 0.1, 86400, &d, err))
                return -1;
            o->comm_timeout_ms = (long)(d * 1000);
            break;
        case O_HOST: o->comm_host = a; break;
        case O_JOB:
            o->job = a;
            job_set = 1;
            break;
        case O_QUIET: o->quiet = 1; break;
        case O_DUMP: o->dump_params = a; break;
        case O_DUMPT: o->dump_tensors = a; break;
        case O_MODEL:
            if (parse_word ("--model", a, model_words, &o->model, err) < 0)
                return -1;
            break;
        case O_ATTN:
            if (parse_word ("--attention", a, attn_words, &w, err) < 0)
                return -1;
            o->attention = (enum attn_mode)w;
            break;
        case O_PREC:
            if (parse_word ("--precision", a, prec_words, &w, err) < 0)
                return -1;
            o->precision = (enum prec_mode)w;
            break;
        case O_NOOV: o->overlap = 0; break;
        case O_OV: o->overlap = 1; break;
        case O_NOJIT: o->jit = 0; break;
        case O_CRASH:
            if (parse_pair ("--inject-crash", a, &o->crash_rank, &o->crash_step, err))
                return -1;
            break;
        case O_HANG:
            if (parse_pair ("--inject-hang", a, &o->hang_rank, &o->hang_step, err))
                return -1;
            break;
        case O_SLOW: {
            const char *col = strchr (a, ':');
            char buf[32];
            if (!col || (size_t)(col - a) >= sizeof (buf))
                return errprintf (err, "--inject-slow: '%s' is not RANK:FACTOR", a);
            memcpy (buf, a, col - a);
            buf[col - a] = '\0';
            if (parse_int ("--inject-slow", buf, 0, 1 << 20, &o->slow_rank, err) ||
                parse_dbl ("--inject-slow", col + 1, 1, 1000, &o->slow_factor, err))
                return -1;
            break;
        }
        case O_HELP: fputs (usage_text, stdout); return 1;
        case O_VERSION: printf ("dttrain: %s\n", dt_version_string ()); return 1;
        case ':': return errprintf (err, "%s needs an argument", argv[optind - 1]);
        default:
            return errprintf (err, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return errprintf (err, "unexpected argument '%s' (see --help)", argv[optind]);
    if (opts_env_parallel (o, par_set, err) < 0)
        return -1;
    return opts_finish (o, ckev_set, job_set, integ_set, tp_set, pp_set, mlp_only,
                        tfm_only, err);
}

char *opts_to_text (const struct train_opts *o, uint64_t data_bytes, uint32_t data_crc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    if (!f)
        return NULL;
    /* %.17g round-trips doubles exactly. */
    /* The MLP's lines are those of the first format, so its older
     * checkpoints still resume. */
    fprintf (f, "model=%s\n",
             o->model == MODEL_TRANSFORMER ? "byte-transformer-v1" : "byte-mlp-v1");
    fprintf (f, "data_bytes=%" PRIu64 "\n", data_bytes);
    fprintf (f, "data_crc32c=%08x\n", data_crc);
    fprintf (f, "steps=%" PRId64 "\n", o->steps);
    fprintf (f, "global_batch=%d\n", o->global_batch);
    fprintf (f, "context=%d\n", o->context);
    if (o->model == MODEL_TRANSFORMER) {
        fprintf (f, "width=%d\n", o->width);
        fprintf (f, "heads=%d\n", o->heads);
    }
    else {
        fprintf (f, "embed=%d\n", o->embed);
        fprintf (f, "hidden=%d\n", o->hidden);
    }
    fprintf (f, "layers=%d\n", o->layers);
    fprintf (f, "lr=%.17g\n", o->lr);
    fprintf (f, "lr_ref_batch=%d\n", o->lr_ref_batch);
    fprintf (f, "warmup_steps=%" PRId64 "\n", o->warmup_steps);
    fprintf (f, "min_lr_frac=%.17g\n", o->min_lr_frac);
    fprintf (f, "weight_decay=%.17g\n", o->weight_decay);
    fprintf (f, "clip=%.17g\n", o->clip);
    fprintf (f, "beta1=%.17g\n", o->beta1);
    fprintf (f, "beta2=%.17g\n", o->beta2);
    fprintf (f, "eps=%.17g\n", o->eps);
    fprintf (f, "seed=%" PRIu64 "\n", o->seed);
    fprintf (f, "val_frac=%.17g\n", o->val_frac);
    if (fclose (f) != 0) {
        free (buf);
        return NULL;
    }
    return buf;
}

/* Find "key=" at a line start in text; copy the value into val. */
static int lookup (const char *text, const char *key, char *val, size_t len)
{
    size_t kl = strlen (key);
    for (const char *p = text; p && *p;
         p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        if (!strncmp (p, key, kl) && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn (v, "\n");
            if (n >= len)
                n = len - 1;
            memcpy (val, v, n);
            val[n] = '\0';
            return 0;
        }
    }
    return -1;
}

int opts_compare (const char *saved, const char *ours, dt_error_t *err)
{
    for (const char *p = ours; p && *p;
         p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        char key[64], a[128], b[128];
        size_t kl = strcspn (p, "=");
        if (kl == 0 || kl >= sizeof (key))
            continue;
        memcpy (key, p, kl);
        key[kl] = '\0';
        lookup (ours, key, b, sizeof (b));
        if (lookup (saved, key, a, sizeof (a)) < 0)
            return errprintf (err, "config field '%s' missing from the checkpoint", key);
        if (strcmp (a, b) != 0)
            return errprintf (err,
                              "config field '%s' differs: checkpoint has %s, this run %s",
                              key, a, b);
    }
    return 0;
}
