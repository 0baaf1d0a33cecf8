/* test_ckptpath.c: the checkpoint paths dtctl assigns and the check of the
 * paths trainers report (orchestrator/ckptpath.c): only the exact assigned
 * path passes; anything else (another file, a symlink-style detour, a
 * different rank or step) is refused with an error naming it. */
#include <config.h>
#include <errno.h>
#include <string.h>

#include "orchestrator/ckptpath.h"
#include "tests/unit/unit.h"

static const char jd[] = "/ckpt/4";

static void test_exact_paths_pass (void)
{
    dt_error_t err;
    CU_ASSERT_EQUAL (
      ckptpath_check_shard (jd, 130, 2, false, 0, "/ckpt/4/step-130/rank-2.ckpt", &err),
      0);
    CU_ASSERT_EQUAL (
      ckptpath_check_shard (jd, 117, 0, true, 2, "/ckpt/4/jit-117-r0/rank-2.ckpt", &err),
      0);
    CU_ASSERT_EQUAL (
      ckptpath_check_shard ("/", 1, 0, false, 0, "//step-1/rank-0.ckpt", &err), 0);
}

static void test_other_paths_refused (void)
{
    static const char *const bad[] = {
        "/etc/shadow",
        "/ckpt/4/step-130/rank-3.ckpt", /* another rank's */
        "/ckpt/4/step-131/rank-2.ckpt", /* another step's */
        "/ckpt/4/step-130/../../../etc/shadow",
        "/ckpt/4/step-130/rank-2.ckpt/",
        "/ckpt/4/step-130//rank-2.ckpt",
        "/ckpt/4/./step-130/rank-2.ckpt",
        "/ckpt/4/step-130/rank-02.ckpt",
        "/ckpt/4/step-130/rank-2.ckpt.tmp",
        "/ckpt/4/step-130/manifest.json",
        "/ckpt/5/step-130/rank-2.ckpt", /* another job's */
        "step-130/rank-2.ckpt",
        "",
        NULL,
    };
    dt_error_t err;
    for (int i = 0; bad[i]; i++) {
        errno = 0;
        CU_ASSERT_EQUAL (ckptpath_check_shard (jd, 130, 2, false, 0, bad[i], &err), -1);
        CU_ASSERT_EQUAL (errno, EINVAL);
        CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "refused"));
    }
    /* The error names the refused path and the one expected. */
    ckptpath_check_shard (jd, 130, 2, false, 0, "/etc/shadow", &err);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "'/etc/shadow'"));
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "/ckpt/4/step-130/rank-2.ckpt"));
    CU_ASSERT_EQUAL (ckptpath_check_shard (jd, 130, 2, false, 0, NULL, &err), -1);
    /* A regular path given as just-in-time, and a jit set of another writer. */
    CU_ASSERT_EQUAL (
      ckptpath_check_shard (jd, 130, 2, true, 2, "/ckpt/4/step-130/rank-2.ckpt", &err),
      -1);
    CU_ASSERT_EQUAL (
      ckptpath_check_shard (jd, 117, 0, true, 2, "/ckpt/4/jit-117-r1/rank-2.ckpt", &err),
      -1);
}

static void test_bad_jobdir_refused (void)
{
    dt_error_t err;
    CU_ASSERT_EQUAL (ckptpath_check_shard ("/ckpt/../etc", 1, 0, false, 0,
                                           "/ckpt/../etc/step-1/rank-0.ckpt", &err),
                     -1);
    CU_ASSERT_EQUAL (
      ckptpath_check_shard ("ckpt/4", 1, 0, false, 0, "ckpt/4/step-1/rank-0.ckpt", &err),
      -1);
    CU_ASSERT_EQUAL (
      ckptpath_check_shard (jd, -1, 0, false, 0, "/ckpt/4/step--1/rank-0.ckpt", &err),
      -1);
}

static void test_normal (void)
{
    CU_ASSERT_TRUE (ckptpath_is_normal ("/"));
    CU_ASSERT_TRUE (ckptpath_is_normal ("/a/b.c/..d"));
    CU_ASSERT_FALSE (ckptpath_is_normal ("a/b"));
    CU_ASSERT_FALSE (ckptpath_is_normal ("/a//b"));
    CU_ASSERT_FALSE (ckptpath_is_normal ("/a/"));
    CU_ASSERT_FALSE (ckptpath_is_normal ("/a/./b"));
    CU_ASSERT_FALSE (ckptpath_is_normal ("/a/.."));
    CU_ASSERT_FALSE (ckptpath_is_normal (""));
    CU_ASSERT_FALSE (ckptpath_is_normal (NULL));
}

static void test_classify (void)
{
    CU_ASSERT_EQUAL (ckptpath_classify ("step-0"), CKPTPATH_STEP);
    CU_ASSERT_EQUAL (ckptpath_classify ("step-130"), CKPTPATH_STEP);
    CU_ASSERT_EQUAL (ckptpath_classify ("jit-117-r3"), CKPTPATH_JIT);
    CU_ASSERT_EQUAL (ckptpath_classify (".partial-step-5-a2"), CKPTPATH_PARTIAL);
    CU_ASSERT_EQUAL (ckptpath_classify ("step-01"), CKPTPATH_OTHER);
    CU_ASSERT_EQUAL (ckptpath_classify ("step-1x"), CKPTPATH_OTHER);
    CU_ASSERT_EQUAL (ckptpath_classify ("jit-"), CKPTPATH_OTHER);
    CU_ASSERT_EQUAL (ckptpath_classify ("jit-1-r"), CKPTPATH_OTHER);
    CU_ASSERT_EQUAL (ckptpath_classify ("jit-evil"), CKPTPATH_OTHER);
    CU_ASSERT_EQUAL (ckptpath_classify ("step-99999999999999999999"), CKPTPATH_OTHER);
    CU_ASSERT_EQUAL (ckptpath_classify ("manifest.json"), CKPTPATH_OTHER);
}

static void test_ckpt_file (void)
{
    CU_ASSERT_TRUE (ckptpath_is_ckpt_file ("rank-0.ckpt"));
    CU_ASSERT_TRUE (ckptpath_is_ckpt_file ("rank-12.ckpt.tmp.4711"));
    CU_ASSERT_TRUE (ckptpath_is_ckpt_file ("manifest.json"));
    CU_ASSERT_TRUE (ckptpath_is_ckpt_file ("manifest.json.tmp"));
    CU_ASSERT_TRUE (ckptpath_is_ckpt_file (".manifest.json.tmp"));
    CU_ASSERT_FALSE (ckptpath_is_ckpt_file (".rank-0.ckpt"));
    CU_ASSERT_FALSE (ckptpath_is_ckpt_file ("rank-.ckpt"));
    CU_ASSERT_FALSE (ckptpath_is_ckpt_file ("rank-0.ckptx"));
    CU_ASSERT_FALSE (ckptpath_is_ckpt_file ("notes.txt"));
    CU_ASSERT_FALSE (ckptpath_is_ckpt_file ("manifest.jsonx"));
}

static const struct dt_unit_test tests[] = {
    { "the exact assigned paths pass", test_exact_paths_pass },
    { "any other path is refused, naming it", test_other_paths_refused },
    { "a job directory that is not normal is refused", test_bad_jobdir_refused },
    { "normal absolute paths", test_normal },
    { "checkpoint directory entries by name", test_classify },
    { "checkpoint files by name", test_ckpt_file },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("ckptpath", tests);
}
