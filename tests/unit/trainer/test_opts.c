/* test_opts.c: dttrain's option parsing (trainer/opts.c): every option
 * reaches its field, bad values are refused naming the option, the world
 * comes from the environment, and the text form a checkpoint keeps round
 * trips (the same options compare equal, one changed field is named);
 * options win over the agent's DT_* variables, and a conflict with what
 * the controller needs is an error. */
#include <config.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/opts.h"
#include "tests/unit/unit.h"

#define NARGS(a) ((int)(sizeof (a) / sizeof ((a)[0])))

static void clear_env (void)
{
    const char *vars[] = { "WORLD_SIZE",
                           "RANK",
                           "LOCAL_RANK",
                           "DT_CHECKPOINT_DIR",
                           "DT_JOB",
                           "DT_RESUME_STEP",
                           "DT_RESUME_DIR",
                           "DT_CHECKPOINT_EVERY",
                           "DT_INTEGRITY_EVERY",
                           "DT_INTEGRITY_SPIKE_K",
                           "DT_INTEGRITY_SPIKE_WINDOW",
                           "DT_SKIP_STEPS",
                           "DT_PARALLEL" };
    for (size_t i = 0; i < sizeof (vars) / sizeof (vars[0]); i++)
        unsetenv (vars[i]);
}

static void test_fields (void)
{
    char *argv[] = { "dttrain", "--model",
                     "mlp",     "--data",
                     "/d.txt",  "--steps",
                     "77",      "--global-batch",
                     "48",      "--context",
                     "24",      "--embed",
                     "12",      "--hidden",
                     "96",      "--layers",
                     "3",       "--lr",
                     "0.25",    "--seed",
                     "9",       "--parallel",
                     "zero1",   "--micro-batch",
                     "5",       "--inject-crash",
                     "1:25",    "--inject-slow",
                     "2:3.5",   "--checkpoint-every",
                     "10" };
    struct train_opts o;
    dt_error_t err = { "" };

    clear_env ();
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o, NARGS (argv), argv, &err), 0);
    CU_ASSERT_STRING_EQUAL (o.data, "/d.txt");
    CU_ASSERT_EQUAL (o.steps, 77);
    CU_ASSERT_EQUAL (o.global_batch, 48);
    CU_ASSERT_EQUAL (o.context, 24);
    CU_ASSERT_EQUAL (o.embed, 12);
    CU_ASSERT_EQUAL (o.hidden, 96);
    CU_ASSERT_EQUAL (o.layers, 3);
    CU_ASSERT_DOUBLE_EQUAL (o.lr, 0.25, 0);
    CU_ASSERT_EQUAL (o.seed, 9);
    CU_ASSERT_EQUAL (o.parallel, PAR_ZERO1);
    CU_ASSERT_EQUAL (o.micro_batch, 5);
    CU_ASSERT_EQUAL (o.crash_rank, 1);
    CU_ASSERT_EQUAL (o.crash_step, 25);
    CU_ASSERT_EQUAL (o.slow_rank, 2);
    CU_ASSERT_DOUBLE_EQUAL (o.slow_factor, 3.5, 0);
    CU_ASSERT_EQUAL (o.checkpoint_every, 10);
    CU_ASSERT_EQUAL (o.world, 1);
    CU_ASSERT_EQUAL (o.rank, 0);
}

/* The transformer is the default model, with its own context; the MLP
 * keeps its; attention and precision parse. */
static void test_model_defaults (void)
{
    char *a1[] = { "dttrain", "--data", "/d" };
    char *a2[] = { "dttrain", "--data", "/d", "--model", "mlp" };
    char *a3[] = { "dttrain",     "--data", "/d",        "--attention", "flash",
                   "--precision", "bf16",   "--context", "64" };
    struct train_opts o;
    dt_error_t err = { "" };

    clear_env ();
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o, NARGS (a1), a1, &err), 0);
    CU_ASSERT_EQUAL (o.model, 1); /* MODEL_TRANSFORMER */
    CU_ASSERT_EQUAL (o.context, 8);
    CU_ASSERT_EQUAL (o.width, 32);
    CU_ASSERT_EQUAL (o.heads, 2);
    CU_ASSERT_EQUAL (o.layers, 2);
    CU_ASSERT_EQUAL (o.attention, ATTN_AUTO);
    CU_ASSERT_EQUAL (o.precision, PREC_FP32);
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o, NARGS (a2), a2, &err), 0);
    CU_ASSERT_EQUAL (o.model, 0); /* MODEL_MLP */
    CU_ASSERT_EQUAL (o.context, 32);
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o, NARGS (a3), a3, &err), 0);
    CU_ASSERT_EQUAL (o.attention, ATTN_FLASH);
    CU_ASSERT_EQUAL (o.precision, PREC_BF16);
    CU_ASSERT_EQUAL (o.context, 64);
}

/* The torchrun environment and the agent's DT_* variables. */
static void test_environment (void)
{
    char *argv[] = { "dttrain", "--data", "/d.txt" };
    struct train_opts o;
    dt_error_t err = { "" };

    clear_env ();
    setenv ("WORLD_SIZE", "4", 1);
    setenv ("RANK", "3", 1);
    setenv ("LOCAL_RANK", "1", 1);
    setenv ("DT_CHECKPOINT_DIR", "/ck", 1);
    setenv ("DT_RESUME_STEP", "40", 1);
    setenv ("DT_CHECKPOINT_EVERY", "20", 1);
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o, NARGS (argv), argv, &err), 0);
    CU_ASSERT_EQUAL (o.world, 4);
    CU_ASSERT_EQUAL (o.rank, 3);
    CU_ASSERT_EQUAL (o.local_rank, 1);
    CU_ASSERT_STRING_EQUAL (o.checkpoint_dir, "/ck");
    CU_ASSERT_EQUAL (o.resume_step, 40);
    CU_ASSERT_EQUAL (o.checkpoint_every, 20);

    setenv ("RANK", "4", 1); /* not below WORLD_SIZE */
    CU_ASSERT_EQUAL (opts_parse (&o, NARGS (argv), argv, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "RANK=4"));
    setenv ("RANK", "3", 1);

    /* The job spec's parallel.zero1: DT_PARALLEL; the same --parallel is
     * fine, another is refused naming both. */
    setenv ("DT_PARALLEL", "zero1", 1);
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o, NARGS (argv), argv, &err), 0);
    CU_ASSERT_EQUAL (o.parallel, PAR_ZERO1);
    char *same[] = { "dttrain", "--data", "/d.txt", "--parallel", "zero1" };
    CU_ASSERT_EQUAL (opts_parse (&o, NARGS (same), same, &err), 0);
    char *other[] = { "dttrain", "--data", "/d.txt", "--parallel", "dp" };
    CU_ASSERT_EQUAL (opts_parse (&o, NARGS (other), other, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (
      strstr (err.text, "--parallel dp conflicts with DT_PARALLEL"));
    setenv ("DT_PARALLEL", "tp", 1);
    CU_ASSERT_EQUAL (opts_parse (&o, NARGS (argv), argv, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "DT_PARALLEL"));
    clear_env ();
}

/* Each bad command line is refused with the option (or value) named. */
static void test_refused (void)
{
    struct {
        char *argv[8];
        int argc;
        const char *needle;
    } bad[] = {
        { { "dttrain", "--steps", "5" }, 3, "--data" },
        { { "dttrain", "--data", "x", "--steps", "-1" }, 5, "--steps" },
        { { "dttrain", "--data", "x", "--global-batch", "0" }, 5, "--global-batch" },
        { { "dttrain", "--data", "x", "--layers", "1000" }, 5, "--layers" },
        { { "dttrain", "--data", "x", "--lr", "abc" }, 5, "--lr" },
        { { "dttrain", "--data", "x", "--parallel", "tp" }, 5, "tp" },
        { { "dttrain", "--data", "x", "--inject-crash", "3" }, 5, "RANK:STEP" },
        { { "dttrain", "--data", "x", "--inject-slow", "1:0.5" }, 5, "--inject-slow" },
        { { "dttrain", "--data", "x", "--bogus" }, 4, "--bogus" },
        { { "dttrain", "--data", "x", "extra" }, 4, "extra" },
        { { "dttrain", "--data", "x", "--min-lr-frac", "2" }, 5, "--min-lr-frac" },
        { { "dttrain", "--data", "x", "--inject-bitflip", "1:5:w0" },
          5,
          "RANK:STEP:TENSOR:INDEX" },
        { { "dttrain", "--data", "x", "--inject-bitflip", "1:0:w0:3" },
          5,
          "--inject-bitflip" },
        { { "dttrain", "--data", "x", "--inject-nan", "1" }, 5, "RANK:STEP" },
        { { "dttrain", "--data", "x", "--skip-steps", "3,x" }, 5, "--skip-steps" },
        { { "dttrain", "--data", "x", "--skip-steps", "0" }, 5, "--skip-steps" },
        { { "dttrain", "--data", "x", "--spike-window", "2" }, 5, "--spike-window" },
        { { "dttrain", "--data", "x", "--spike-k", "-1" }, 5, "--spike-k" },
        { { "dttrain", "--data", "x", "--attention", "fast" }, 5, "fast" },
        { { "dttrain", "--data", "x", "--precision", "fp16" }, 5, "fp16" },
        { { "dttrain", "--data", "x", "--model", "mlp", "--attention", "flash" },
          7,
          "--attention" },
        { { "dttrain", "--data", "x", "--hidden", "64" },
          5,
          "--hidden sizes --model mlp" },
    };
    clear_env ();
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        struct train_opts o;
        dt_error_t err = { "" };
        CU_ASSERT_EQUAL (opts_parse (&o, bad[i].argc, bad[i].argv, &err), -1);
        if (!strstr (err.text, bad[i].needle)) {
            fprintf (stderr, "case %zu: error '%s' does not name '%s'\n", i, err.text,
                     bad[i].needle);
            CU_FAIL ("error names the option");
        }
    }
}

/* The checkpoint's config text: equal options compare equal, whatever the
 * execution options; a model field changed is named with both values. */
static void test_text_roundtrip (void)
{
    char *a1[] = { "dttrain", "--data", "/d",     "--width", "64",
                   "--lr",    "0.1",    "--seed", "3" };
    char *a2[] = { "dttrain", "--data",
                   "/d",      "--width",
                   "64",      "--lr",
                   "0.1",     "--seed",
                   "3",       "--parallel",
                   "zero1",   "--micro-batch",
                   "2",       "--checkpoint-every",
                   "9" };
    char *a3[] = { "dttrain", "--data", "/d",     "--width", "66",
                   "--lr",    "0.1",    "--seed", "3" };
    struct train_opts o1, o2, o3;
    dt_error_t err = { "" };

    clear_env ();
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o1, NARGS (a1), a1, &err), 0);
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o2, NARGS (a2), a2, &err), 0);
    CU_ASSERT_EQUAL_FATAL (opts_parse (&o3, NARGS (a3), a3, &err), 0);
    char *t1 = opts_to_text (&o1, 1000, 0xabcdef01);
    char *t2 = opts_to_text (&o2, 1000, 0xabcdef01);
    char *t3 = opts_to_text (&o3, 1000, 0xabcdef01);
    char *t4 = opts_to_text (&o1, 1001, 0xabcdef01);
    CU_ASSERT_FATAL (t1 && t2 && t3 && t4);
    CU_ASSERT_PTR_NOT_NULL (strstr (t1, "width=64\n"));
    CU_ASSERT_PTR_NOT_NULL (strstr (t1, "data_crc32c=abcdef01\n"));
    CU_ASSERT_PTR_NOT_NULL (strstr (t1, "lr=0.10000000000000001\n")); /* %.17g */
    CU_ASSERT_STRING_EQUAL (t1, t2);
    CU_ASSERT_EQUAL (opts_compare (t1, t2, &err), 0);
    CU_ASSERT_EQUAL (opts_compare (t1, t3, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "'width'"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "64"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "66"));
    CU_ASSERT_EQUAL (opts_compare (t1, t4, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "'data_bytes'"));
    /* A field the checkpoint does not have is named too. */
    CU_ASSERT_EQUAL (opts_compare ("model=byte-transformer-v1\n", t1, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "missing"));
    free (t1), free (t2), free (t3), free (t4);
}

/* Options against the agent's DT_* environment: options win, a conflict
 * with what the controller needs is an error. */
static int parse (struct train_opts *o, const char *a1, const char *a2, dt_error_t *err)
{
    char *argv[6] = { "dttrain", "--data", "x.txt", NULL, NULL, NULL };
    int argc = 3;
    if (a1)
        argv[argc++] = (char *)a1;
    if (a2)
        argv[argc++] = (char *)a2;
    return opts_parse (o, argc, argv, err);
}

/* Without an option, the environment is the default. */
static void test_env_default (void)
{
    struct train_opts o;
    dt_error_t err = { 0 };
    clear_env ();
    setenv ("DT_CHECKPOINT_DIR", "/tmp/ck", 1);
    setenv ("DT_CHECKPOINT_EVERY", "25", 1);
    setenv ("DT_JOB", "7", 1);
    CU_ASSERT_EQUAL_FATAL (parse (&o, NULL, NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL (o.checkpoint_dir, "/tmp/ck");
    CU_ASSERT_EQUAL (o.checkpoint_every, 25);
    CU_ASSERT_STRING_EQUAL (o.job, "7");
    clear_env ();
}

/* --checkpoint-every 0 turns periodic checkpoints off despite the env. */
static void test_checkpoint_every_zero_wins (void)
{
    struct train_opts o;
    dt_error_t err = { 0 };
    clear_env ();
    setenv ("DT_CHECKPOINT_EVERY", "25", 1);
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--checkpoint-every", "0", &err), 0);
    CU_ASSERT_EQUAL (o.checkpoint_every, 0);
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--checkpoint-every", "3", &err), 0);
    CU_ASSERT_EQUAL (o.checkpoint_every, 3);
    clear_env ();
}

/* The job's integrity keys come from the agent; options win. */
static void test_integrity_env (void)
{
    struct train_opts o;
    dt_error_t err = { 0 };
    clear_env ();
    CU_ASSERT_EQUAL_FATAL (parse (&o, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL (o.integrity_every, 50);
    CU_ASSERT_EQUAL (o.spike_window, 32);
    CU_ASSERT_PTR_NULL (o.skip_steps);
    setenv ("DT_INTEGRITY_EVERY", "7", 1);
    setenv ("DT_INTEGRITY_SPIKE_K", "4.5", 1);
    setenv ("DT_INTEGRITY_SPIKE_WINDOW", "16", 1);
    setenv ("DT_SKIP_STEPS", "70,90", 1);
    CU_ASSERT_EQUAL_FATAL (parse (&o, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL (o.integrity_every, 7);
    CU_ASSERT_DOUBLE_EQUAL (o.spike_k, 4.5, 1e-12);
    CU_ASSERT_EQUAL (o.spike_window, 16);
    CU_ASSERT_STRING_EQUAL (o.skip_steps, "70,90");
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--integrity-every", "0", &err), 0);
    CU_ASSERT_EQUAL (o.integrity_every, 0);
    setenv ("DT_SKIP_STEPS", "7,", 1);
    CU_ASSERT_EQUAL (parse (&o, NULL, NULL, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "DT_SKIP_STEPS"));
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--inject-bitflip", "2:9:w1:17", &err), -1);
    clear_env ();
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--inject-bitflip", "2:9:w1:17", &err), 0);
    CU_ASSERT_EQUAL (o.bitflip_rank, 2);
    CU_ASSERT_EQUAL (o.bitflip_step, 9);
    CU_ASSERT_STRING_EQUAL (o.bitflip_tensor, "w1");
    CU_ASSERT_EQUAL (o.bitflip_index, 17);
}

static void test_job_wins (void)
{
    struct train_opts o;
    dt_error_t err = { 0 };
    clear_env ();
    setenv ("DT_JOB", "7", 1);
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--job", "mine", &err), 0);
    CU_ASSERT_STRING_EQUAL (o.job, "mine");
    clear_env ();
}

/* The same checkpoint directory is fine; another one is an error that
 * names both. */
static void test_checkpoint_dir_conflict (void)
{
    struct train_opts o;
    dt_error_t err = { 0 };
    clear_env ();
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--checkpoint-dir", "/tmp/mine", &err), 0);
    CU_ASSERT_STRING_EQUAL (o.checkpoint_dir, "/tmp/mine");
    setenv ("DT_CHECKPOINT_DIR", "/tmp/ck", 1);
    CU_ASSERT_EQUAL (parse (&o, "--checkpoint-dir", "/tmp/ck", &err), 0);
    CU_ASSERT_EQUAL (parse (&o, "--checkpoint-dir", "/tmp/mine", &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "/tmp/mine"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "DT_CHECKPOINT_DIR"));
    clear_env ();
}

/* A first attempt may warm-start from elsewhere; a restart must continue
 * from the controller's step (its dir, or the checkpoint root). */
static void test_resume_conflict (void)
{
    struct train_opts o;
    dt_error_t err = { 0 };
    clear_env ();
    setenv ("DT_CHECKPOINT_DIR", "/tmp/ck", 1);
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--resume", "/tmp/old/step-5", &err), 0);
    CU_ASSERT_STRING_EQUAL (o.resume, "/tmp/old/step-5");
    setenv ("DT_RESUME_DIR", "/tmp/ck/step-40", 1);
    setenv ("DT_RESUME_STEP", "40", 1);
    CU_ASSERT_EQUAL (parse (&o, "--resume", "/tmp/old/step-5", &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "DT_RESUME_DIR"));
    CU_ASSERT_EQUAL_FATAL (parse (&o, "--resume", "/tmp/ck", &err), 0);
    CU_ASSERT_STRING_EQUAL (o.resume, "/tmp/ck/step-40");
    CU_ASSERT_EQUAL_FATAL (parse (&o, NULL, NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL (o.resume, "/tmp/ck/step-40");
    CU_ASSERT_EQUAL (o.resume_step, 40);
    clear_env ();
}

static const struct dt_unit_test tests[] = {
    { "every option reaches its field", test_fields },
    { "the transformer is the default model", test_model_defaults },
    { "the world and DT_* come from the environment", test_environment },
    { "bad command lines are refused, naming the option", test_refused },
    { "the config text round trips and names a changed field", test_text_roundtrip },
    { "the DT_* environment is the default", test_env_default },
    { "--checkpoint-every 0 wins over DT_CHECKPOINT_EVERY",
      test_checkpoint_every_zero_wins },
    { "--job wins over DT_JOB", test_job_wins },
    { "the integrity keys: DT_INTEGRITY_*, DT_SKIP_STEPS", test_integrity_env },
    { "--checkpoint-dir other than DT_CHECKPOINT_DIR is an error",
      test_checkpoint_dir_conflict },
    { "--resume other than DT_RESUME_DIR on a restart is an error",
      test_resume_conflict },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("opts", tests);
}
