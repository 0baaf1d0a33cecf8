/* test_fsm.c: every legal and every illegal transition of the job and
 * attempt state machines (orchestrator/fsm.c), against orchestrator/fsm.h. */
#include <config.h>
#include <string.h>
#include "orchestrator/fsm.h"
#include "tests/unit/unit.h"

/* The legal transitions, written out independently of fsm.c's table. */
static const char *const job_legal[] = {
    "pending>running",
    "pending>restarting",
    "pending>failed",
    "pending>cancelled",
    "running>restarting",
    "running>completed",
    "running>failed",
    "running>cancelled",
    "restarting>running",
    "restarting>failed",
    "restarting>cancelled",
    "failed>pending",
    "cancelled>pending", /* resubmit */
    NULL,
};

static const char *const attempt_legal[] = {
    "submitted>starting",
    "submitted>ending",
    "submitted>failed",
    "submitted>cancelled",
    "starting>running",
    "starting>ending",
    "starting>failed",
    "starting>cancelled",
    "running>ending",
    "ending>succeeded",
    "ending>failed",
    "ending>cancelled",
    NULL,
};

static int in (const char *const list[], const char *from, const char *to)
{
    char key[64];
    snprintf (key, sizeof (key), "%s>%s", from, to);
    for (int i = 0; list[i]; i++)
        if (!strcmp (list[i], key))
            return 1;
    return 0;
}

static void test_job_matrix (void)
{
    int legal = 0, illegal = 0;
    for (int f = 0; f < JOB_STATE_COUNT; f++) {
        for (int t = 0; t < JOB_STATE_COUNT; t++) {
            const char *fn = fsm_job_state_name (f), *tn = fsm_job_state_name (t);
            int want = in (job_legal, fn, tn);
            if (fsm_job_ok (f, t) != want)
                fprintf (stderr, "job %s -> %s: expected %s\n", fn, tn,
                         want ? "legal" : "illegal");
            CU_ASSERT_EQUAL (fsm_job_ok (f, t), want);
            want ? legal++ : illegal++;
        }
    }
    CU_ASSERT_EQUAL (legal, 13);
    CU_ASSERT_EQUAL (illegal, 36 - 13);
}

static void test_attempt_matrix (void)
{
    int legal = 0;
    for (int f = 0; f < ATT_STATE_COUNT; f++) {
        for (int t = 0; t < ATT_STATE_COUNT; t++) {
            const char *fn = fsm_attempt_state_name (f), *tn = fsm_attempt_state_name (t);
            int want = in (attempt_legal, fn, tn);
            if (fsm_attempt_ok (f, t) != want)
                fprintf (stderr, "attempt %s -> %s: expected %s\n", fn, tn,
                         want ? "legal" : "illegal");
            CU_ASSERT_EQUAL (fsm_attempt_ok (f, t), want);
            legal += want;
        }
    }
    CU_ASSERT_EQUAL (legal, 12);
}

static void test_main_lines (void)
{
    /* The main line of fsm.h, step by step. */
    CU_ASSERT (fsm_job_ok (JOB_PENDING, JOB_RUNNING));
    CU_ASSERT (fsm_job_ok (JOB_RUNNING, JOB_RESTARTING));
    CU_ASSERT (fsm_job_ok (JOB_RESTARTING, JOB_RUNNING));
    CU_ASSERT (fsm_job_ok (JOB_RUNNING, JOB_COMPLETED));
    CU_ASSERT (fsm_attempt_ok (ATT_SUBMITTED, ATT_STARTING));
    CU_ASSERT (fsm_attempt_ok (ATT_STARTING, ATT_RUNNING));
    CU_ASSERT (fsm_attempt_ok (ATT_RUNNING, ATT_ENDING));
    CU_ASSERT (fsm_attempt_ok (ATT_ENDING, ATT_SUCCEEDED));
    /* The examples of the issue: cancel a completed job, resubmit a running one. */
    CU_ASSERT (!fsm_job_ok (JOB_COMPLETED, JOB_CANCELLED));
    CU_ASSERT (!fsm_job_ok (JOB_RUNNING, JOB_PENDING));
    /* Terminal attempts never move; a running attempt never skips ending. */
    CU_ASSERT (!fsm_attempt_ok (ATT_RUNNING, ATT_FAILED));
    CU_ASSERT (!fsm_attempt_ok (ATT_SUCCEEDED, ATT_ENDING));
}

static void test_names (void)
{
    for (int s = 0; s < JOB_STATE_COUNT; s++)
        CU_ASSERT_EQUAL (fsm_job_state_parse (fsm_job_state_name (s)), s);
    for (int s = 0; s < ATT_STATE_COUNT; s++)
        CU_ASSERT_EQUAL (fsm_attempt_state_parse (fsm_attempt_state_name (s)), s);
    CU_ASSERT_EQUAL (fsm_job_state_parse ("bogus"), -1);
    CU_ASSERT_EQUAL (fsm_attempt_state_parse (NULL), -1);
    CU_ASSERT_PTR_NULL (fsm_job_state_name (JOB_STATE_COUNT));
    CU_ASSERT_PTR_NULL (fsm_attempt_state_name (-1));
    CU_ASSERT (!fsm_job_ok (-1, JOB_RUNNING));
    CU_ASSERT (!fsm_attempt_ok (ATT_RUNNING, ATT_STATE_COUNT));
    CU_ASSERT (fsm_job_terminal (JOB_CANCELLED) && !fsm_job_terminal (JOB_RESTARTING));
    CU_ASSERT (fsm_attempt_terminal (ATT_FAILED) && !fsm_attempt_terminal (ATT_ENDING));
}

static const struct dt_unit_test tests[] = {
    { "job: all 36 transitions", test_job_matrix },
    { "attempt: all 49 transitions", test_attempt_matrix },
    { "main lines and the issue's examples", test_main_lines },
    { "state names", test_names },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("fsm", tests);
}
