/* test_opts.c: dttrain's options against the agent's DT_* environment -
 * options win, a conflict with what the controller needs is an error. */
#include <config.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/unit.h"
#include "trainer/opts.h"

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

static void clear_env (void)
{
    unsetenv ("DT_CHECKPOINT_DIR");
    unsetenv ("DT_CHECKPOINT_EVERY");
    unsetenv ("DT_RESUME_DIR");
    unsetenv ("DT_RESUME_STEP");
    unsetenv ("DT_JOB");
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
    { "the DT_* environment is the default", test_env_default },
    { "--checkpoint-every 0 wins over DT_CHECKPOINT_EVERY", test_checkpoint_every_zero_wins },
    { "--job wins over DT_JOB", test_job_wins },
    { "--checkpoint-dir other than DT_CHECKPOINT_DIR is an error", test_checkpoint_dir_conflict },
    { "--resume other than DT_RESUME_DIR on a restart is an error", test_resume_conflict },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("opts", tests);
}
