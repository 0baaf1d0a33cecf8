/* test_launcher_slurm.c: the pure parts of the Slurm launcher
 * (orchestrator/launcher_slurm.c), reachable otherwise only through the
 * root Slurm testbed: hostlist expansion, SlurmExtraArgs, sbatch memory
 * sizes, handles and step names, shell quoting, %n substitution, and the
 * map from a Slurm job state to the attempt's cause.  The launcher's files
 * are compiled into this test (as tests/system/slurm-launch-drive does) so
 * their static functions are tested as they are. */
#include "orchestrator/launcher_slurm.c"
#include "orchestrator/slurm_alloc.c"
#include "orchestrator/slurm_script.c"
#include "orchestrator/slurm_watch.c"

#include "tests/unit/unit.h"

static void test_hostlist (void)
{
    int n = -1;
    char **v = expand_hostlist ("node[1-3,7],gpu[01-02],login", &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    CU_ASSERT_EQUAL_FATAL (n, 7);
    const char *want[] = {
        "node1", "node2", "node3", "node7", "gpu01", "gpu02", "login"
    };
    for (int i = 0; i < 7; i++)
        CU_ASSERT_STRING_EQUAL (v[i], want[i]);
    CU_ASSERT_PTR_NULL (v[7]);
    char *j = join_names (v, n);
    CU_ASSERT_STRING_EQUAL (j, "node1,node2,node3,node7,gpu01,gpu02,login");
    free (j);
    CU_ASSERT_TRUE (name_in ("gpu02", (const char *const *)v));
    CU_ASSERT_FALSE (name_in ("gpu2", (const char *const *)v));
    free_names (v);
    /* empty: an empty list, not NULL */
    v = expand_hostlist ("", &n);
    CU_ASSERT_PTR_NOT_NULL (v);
    CU_ASSERT_EQUAL (n, 0);
    CU_ASSERT_PTR_NULL (v ? v[0] : NULL);
    free_names (v);
}

static void test_mem (void)
{
    uint64_t mb = 0;
    CU_ASSERT_EQUAL (parse_mem_mb ("4096", &mb), 0);
    CU_ASSERT_EQUAL (mb, 4096);
    CU_ASSERT_EQUAL (parse_mem_mb ("16G", &mb), 0);
    CU_ASSERT_EQUAL (mb, 16384);
    CU_ASSERT_EQUAL (parse_mem_mb ("2t", &mb), 0);
    CU_ASSERT_EQUAL (mb, 2 * 1024 * 1024);
    CU_ASSERT_EQUAL (parse_mem_mb ("512m", &mb), 0);
    CU_ASSERT_EQUAL (mb, 512);
    CU_ASSERT_EQUAL (parse_mem_mb ("1500K", &mb), 0);
    CU_ASSERT_EQUAL (mb, 2); /* rounded up */
    mb = 77;
    const char *bad[] = { "", "G", "0", "12X", "1.5G", "-3", "10GB" };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
        CU_ASSERT_EQUAL (parse_mem_mb (bad[i], &mb), -1);
    CU_ASSERT_EQUAL (mb, 77); /* untouched */
}

static void test_extra_args (void)
{
    struct slurm_launcher sl;
    dt_error_t err = { "" };

    memset (&sl, 0, sizeof (sl));
    CU_ASSERT_EQUAL_FATAL (
      parse_extra_args (&sl,
                        "--exclusive --gres=gpu:8,nic:1 -C ib --mem 16G "
                        "--cpus-per-task=4 --reservation=r1 -q high -A acct -p batch",
                        &err),
      0);
    CU_ASSERT_TRUE (sl.exclusive);
    CU_ASSERT_STRING_EQUAL (sl.gres, "gres:gpu:8,gres:nic:1");
    CU_ASSERT_STRING_EQUAL (sl.features, "ib");
    CU_ASSERT_EQUAL (sl.mem_mb, 16384);
    CU_ASSERT_EQUAL (sl.cpus_per_task, 4);
    CU_ASSERT_STRING_EQUAL (sl.reservation, "r1");
    CU_ASSERT_STRING_EQUAL (sl.qos, "high");
    CU_ASSERT_STRING_EQUAL (sl.account, "acct");
    CU_ASSERT_STRING_EQUAL (sl.partition, "batch");
    CU_ASSERT_EQUAL (parse_extra_args (&sl, "--oversubscribe --gres=gres:gpu:2", &err),
                     0);
    CU_ASSERT_FALSE (sl.exclusive);
    CU_ASSERT_STRING_EQUAL (sl.gres, "gres:gpu:2");

    struct {
        const char *args, *needle;
    } bad[] = {
        { "--mem", "needs a value" },
        { "--mem=lots", "--mem" },
        { "--cpus-per-task=0", "--cpus-per-task" },
        { "-c 70000", "-c" },
        { "--time=10", "unsupported option '--time'" },
        { "--nodes 2", "unsupported" },
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        err.text[0] = '\0';
        CU_ASSERT_EQUAL (parse_extra_args (&sl, bad[i].args, &err), -1);
        if (!strstr (err.text, bad[i].needle)) {
            fprintf (stderr, "'%s': error '%s' does not name '%s'\n", bad[i].args,
                     err.text, bad[i].needle);
            CU_FAIL ("the error names the option");
        }
    }
    free (sl.gres), free (sl.features), free (sl.reservation), free (sl.qos);
    free (sl.account), free (sl.partition);
}

static void test_handle (void)
{
    uint32_t j = 0;
    int a = -1;
    dt_error_t err = { "" };
    long long job = 0;
    int att = 0;

    CU_ASSERT_EQUAL (parse_handle ("1234", &j, &a, &err), 0);
    CU_ASSERT_EQUAL (j, 1234);
    CU_ASSERT_EQUAL (a, 0);
    CU_ASSERT_EQUAL (parse_handle ("1234:3", &j, &a, &err), 0);
    CU_ASSERT_EQUAL (j, 1234);
    CU_ASSERT_EQUAL (a, 3);
    CU_ASSERT_EQUAL (parse_handle ("4294967295", &j, NULL, &err), 0);
    CU_ASSERT_EQUAL (j, UINT32_MAX);
    const char *bad[] = { "",     "0",  "abc",        "12x", "12:",  "12:0",
                          "12:x", ":3", "4294967296", "-5",  "1:2:3" };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        j = 99;
        CU_ASSERT_EQUAL (parse_handle (bad[i], &j, &a, &err), -1);
        CU_ASSERT_EQUAL (j, 99);
        CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "bad handle"));
    }
    CU_ASSERT_EQUAL (parse_handle (NULL, &j, &a, &err), -1);

    CU_ASSERT_EQUAL (parse_step_name ("dt-17-a4", &job, &att), 0);
    CU_ASSERT_EQUAL (job, 17);
    CU_ASSERT_EQUAL (att, 4);
    CU_ASSERT_EQUAL (parse_step_name ("dt-17-a4x", &job, &att), -1);
    CU_ASSERT_EQUAL (parse_step_name ("dt-17", &job, &att), -1);
    CU_ASSERT_EQUAL (parse_step_name ("batch", &job, &att), -1);
    CU_ASSERT_EQUAL (parse_step_name (NULL, &job, &att), -1);
}

/* What shell_quote makes, sh reads back as the same word. */
static void test_shell_quote (void)
{
    const char *in[] = { "plain", "", "it's", "a b\tc", "$HOME `x` \"q\" \\ ;|&", "''" };
    const char *want[] = {
        "'plain'",     "''", "'it'\\''s'", "'a b\tc'", "'$HOME `x` \"q\" \\ ;|&'",
        "''\\'''\\'''"
    };
    for (size_t i = 0; i < sizeof (in) / sizeof (in[0]); i++) {
        char *q = shell_quote (in[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL (q);
        CU_ASSERT_STRING_EQUAL (q, want[i]);
        /* printf %s of the quoted word through sh gives the input back */
        char cmd[512], out[256] = "";
        snprintf (cmd, sizeof (cmd), "printf '%%s' %s", q);
        FILE *f = popen (cmd, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL (f);
        size_t n = fread (out, 1, sizeof (out) - 1, f);
        out[n] = '\0';
        CU_ASSERT_EQUAL (pclose (f), 0);
        CU_ASSERT_STRING_EQUAL (out, in[i]);
        free (q);
    }
}

static void test_subst_node (void)
{
    char *s = subst_node ("/scratch/%n/ckpt-%n", "node7");
    CU_ASSERT_STRING_EQUAL (s, "/scratch/node7/ckpt-node7");
    free (s);
    s = subst_node ("/plain/%x/100%", "n1");
    CU_ASSERT_STRING_EQUAL (s, "/plain/%x/100%");
    free (s);
}

/* Each ending state of a Slurm job and the cause the attempt records. */
static void test_state_to_cause (void)
{
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_COMPLETE, 0), "completed");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_COMPLETE, 1), "failed");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_CANCELLED, 0), "cancelled");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_NODE_FAIL, 0), "slurm_node_fail");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_TIMEOUT, 0), "time_limit");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_DEADLINE, 0), "time_limit");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_PREEMPTED, 0), "preempted");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_BOOT_FAIL, 0), "launch_failed");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_FAILED, 0), "failed");
    CU_ASSERT_STRING_EQUAL (cause_of (JOB_OOM, 0), "failed");
    CU_ASSERT_STRING_EQUAL (state_name (JOB_RUNNING), "RUNNING");
    CU_ASSERT_STRING_EQUAL (state_name (JOB_OOM), "OUT_OF_MEMORY");
    CU_ASSERT_STRING_EQUAL (state_name (JOB_END + 7), "UNKNOWN");
    /* Slurm's wait status word */
    CU_ASSERT_EQUAL (exit_code_of (0), 0);
    CU_ASSERT_EQUAL (exit_code_of (3 << 8), 3);
    CU_ASSERT_EQUAL (exit_code_of (SIGKILL), 128 + SIGKILL);
}

static const struct dt_unit_test tests[] = {
    { "hostlist expressions expand in order", test_hostlist },
    { "sbatch memory sizes", test_mem },
    { "SlurmExtraArgs: each option, and refusals naming it", test_extra_args },
    { "handles J and J:N, step names dt-J-aN", test_handle },
    { "shell_quote: sh reads the word back", test_shell_quote },
    { "%n substitution", test_subst_node },
    { "Slurm job state -> cause, state names, exit codes", test_state_to_cause },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("launcher_slurm", tests);
}
