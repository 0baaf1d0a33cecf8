/* test_integritypolicy.c: the controller's integrity decisions
 * (orchestrator/jobs/integritypolicy.c). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "common/log.h"
#include "orchestrator/jobs/integritypolicy.h"
#include "orchestrator/store.h"
#include "tests/unit/unit.h"

static char dir[64];

static void test_vote_agree (void)
{
    uint32_t fp[4] = { 7, 7, 7, 7 }, maj = 0;
    int s[4];
    CU_ASSERT_EQUAL (integ_vote (fp, 4, s, &maj), 0);
    CU_ASSERT_EQUAL (maj, 7);
    CU_ASSERT_EQUAL (integ_vote (fp, 1, s, &maj), 0);
}

static void test_vote_majority (void)
{
    uint32_t fp[4] = { 7, 7, 9, 7 }, maj = 0;
    int s[4];
    CU_ASSERT_EQUAL (integ_vote (fp, 4, s, &maj), 1);
    CU_ASSERT_EQUAL (s[0], 2);
    CU_ASSERT_EQUAL (maj, 7);
    /* three replicas, the first one odd */
    uint32_t f3[3] = { 1, 5, 5 };
    CU_ASSERT_EQUAL (integ_vote (f3, 3, s, &maj), 1);
    CU_ASSERT_EQUAL (s[0], 0);
    CU_ASSERT_EQUAL (maj, 5);
}

static void test_vote_no_majority (void)
{
    uint32_t two[2] = { 1, 2 }, four[4] = { 1, 1, 2, 2 }, three[3] = { 1, 2, 3 }, maj;
    int s[4];
    /* two replicas that differ: both suspect */
    CU_ASSERT_EQUAL (integ_vote (two, 2, s, &maj), 2);
    CU_ASSERT_EQUAL (s[0], 0);
    CU_ASSERT_EQUAL (s[1], 1);
    /* a tie or all different: everyone */
    CU_ASSERT_EQUAL (integ_vote (four, 4, s, &maj), 4);
    CU_ASSERT_EQUAL (integ_vote (three, 3, s, &maj), 3);
}

static void test_bad_from (void)
{
    /* divergence seen at 40, fingerprints agreed at 30: from 31 */
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_DIVERGENCE, 40, 30), 31);
    /* no agreement known (no check yet, fresh start): the step itself */
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_DIVERGENCE, 40, -1), 40);
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_NONFINITE, 33, 30), 33);
    CU_ASSERT_EQUAL (integ_bad_from (INTEG_SPIKE, 60, 50), 60);
}

static void test_cause_and_action (void)
{
    CU_ASSERT_STRING_EQUAL (integ_cause (true), "data");
    CU_ASSERT_STRING_EQUAL (integ_cause (false), "hardware");
    CU_ASSERT_STRING_EQUAL (integ_kind_name (INTEG_DIVERGENCE), "replica_divergence");
    CU_ASSERT_STRING_EQUAL (integ_kind_name (INTEG_NONFINITE), "nonfinite");
    CU_ASSERT_STRING_EQUAL (integ_kind_name (INTEG_SPIKE), "loss_spike");
    CU_ASSERT_TRUE (integ_rollback ("rollback", false, false));
    CU_ASSERT_FALSE (integ_rollback ("report", false, true));
    CU_ASSERT_FALSE (integ_rollback (NULL, false, true));
    /* a reproduced fault: roll back again only to skip its batch */
    CU_ASSERT_TRUE (integ_rollback ("rollback", true, true));
    CU_ASSERT_FALSE (integ_rollback ("rollback", true, false));
}

static void test_state_roundtrip (void)
{
    struct integ_job a, b;
    memset (&a, 0, sizeof (a));
    a.pending = true;
    a.kind = INTEG_NONFINITE;
    a.step = 45;
    a.rank = 1;
    snprintf (a.node, sizeof (a.node), "local2");
    a.attempt = 1;
    a.bad_from = 45;
    a.skip[0] = 70;
    a.skip[1] = 90;
    a.nskip = 2;
    json_t *o = integ_state_encode (&a);
    CU_ASSERT_PTR_NOT_NULL_FATAL (o);
    CU_ASSERT_EQUAL (integ_state_decode (o, &b), 0);
    CU_ASSERT_TRUE (b.pending);
    CU_ASSERT_EQUAL (b.kind, INTEG_NONFINITE);
    CU_ASSERT (b.step == 45 && b.rank == 1 && b.attempt == 1 && b.bad_from == 45);
    CU_ASSERT_STRING_EQUAL (b.node, "local2");
    CU_ASSERT (b.nskip == 2 && b.skip[0] == 70 && b.skip[1] == 90);
    json_decref (o);
    /* nothing pending: no "pending" key, and nothing pending read back */
    a.pending = false;
    o = integ_state_encode (&a);
    CU_ASSERT_PTR_NULL (json_object_get (o, "pending"));
    CU_ASSERT_EQUAL (integ_state_decode (o, &b), 0);
    CU_ASSERT_FALSE (b.pending);
    CU_ASSERT_EQUAL (b.rank, -1);
    json_decref (o);
}

static void test_state_malformed (void)
{
    struct integ_job b;
    const char *bad[] = {
        "[]",
        "{\"bad_from\": -1}",
        "{\"skip\": [\"x\"]}",
        "{\"skip\": 3}",
        "{\"pending\": {\"kind\": \"gremlin\", \"step\": 1, \"rank\": 0, "
        "\"node\": \"n\", \"attempt\": 1}}",
        "{\"pending\": {\"kind\": \"nonfinite\", \"step\": 1}}",
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        json_t *o = json_loads (bad[i], JSON_DECODE_ANY, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL (o);
        CU_ASSERT_EQUAL (integ_state_decode (o, &b), -1);
        CU_ASSERT_FALSE (b.pending);
        CU_ASSERT_EQUAL (b.nskip, 0);
        json_decref (o);
    }
}

/* A fault awaiting its re-run survives the controller: written to the
 * store, closed, reopened (the migration applied once), read back. */
static void test_state_in_store (void)
{
    char path[128];
    dt_error_t err;
    struct store_job_row j;
    struct integ_job a, b;
    store_t *st;

    snprintf (path, sizeof (path), "%s/db.sqlite", dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    store_job_row_init (&j);
    snprintf (j.name, sizeof (j.name), "t");
    snprintf (j.user, sizeof (j.user), "alice");
    j.uid = j.gid = 1000;
    j.state = JOB_RUNNING;
    j.spec = json_pack ("{s:[s] s:i}", "command", "x", "nodes", 3);
    j.exclude = json_array ();
    j.submit_time = 1700000000123;
    CU_ASSERT_EQUAL_FATAL (store_job_insert (st, &j, &err), 0);
    /* none yet */
    CU_ASSERT_PTR_NULL (store_integ_get (st, j.id, &err));
    CU_ASSERT_STRING_EQUAL (err.text, "");
    memset (&a, 0, sizeof (a));
    a.pending = true;
    a.kind = INTEG_DIVERGENCE;
    a.step = 50;
    a.rank = 1;
    snprintf (a.node, sizeof (a.node), "local2");
    a.attempt = 1;
    a.bad_from = 41;
    json_t *o = integ_state_encode (&a);
    CU_ASSERT_EQUAL (store_integ_put (st, j.id, o, &err), 0);
    json_decref (o);
    /* replaced, not added */
    a.bad_from = 0;
    o = integ_state_encode (&a);
    CU_ASSERT_EQUAL (store_integ_put (st, j.id, o, &err), 0);
    json_decref (o);
    store_close (st);

    CU_ASSERT_PTR_NOT_NULL_FATAL ((st = store_open (path, &err)));
    o = store_integ_get (st, j.id, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (o);
    CU_ASSERT_EQUAL (integ_state_decode (o, &b), 0);
    json_decref (o);
    CU_ASSERT (b.pending && b.kind == INTEG_DIVERGENCE && b.step == 50 && b.rank == 1 &&
               b.attempt == 1 && b.bad_from == 0);
    CU_ASSERT_STRING_EQUAL (b.node, "local2");
    /* a job of no row: refused by the foreign key, nothing stored */
    o = integ_state_encode (&a);
    CU_ASSERT_EQUAL (store_integ_put (st, j.id + 100, o, &err), -1);
    json_decref (o);
    CU_ASSERT_PTR_NULL (store_integ_get (st, j.id + 100, &err));
    /* forgotten */
    CU_ASSERT_EQUAL (store_integ_put (st, j.id, NULL, &err), 0);
    CU_ASSERT_PTR_NULL (store_integ_get (st, j.id, &err));
    CU_ASSERT_STRING_EQUAL (err.text, "");
    store_close (st);
    store_job_row_clear (&j);
}

static const struct dt_unit_test tests[] = {
    { "replicas that agree", test_vote_agree },
    { "a strict majority names the odd replica", test_vote_majority },
    { "two replicas or no majority: all suspect", test_vote_no_majority },
    { "first suspect step", test_bad_from },
    { "cause by re-run, and when to roll back", test_cause_and_action },
    { "a job's integrity state as JSON and back", test_state_roundtrip },
    { "a malformed integrity state is refused", test_state_malformed },
    { "the integrity state survives a reopened store", test_state_in_store },
    { NULL, NULL },
};

int main (void)
{
    int rc;
    dt_log_init ("test_integritypolicy", DT_LOG_STDERR, LOG_WARNING);
    snprintf (dir, sizeof (dir), "/tmp/test_integ.XXXXXX");
    if (!mkdtemp (dir))
        return 99;
    rc = dt_unit_run ("integritypolicy", tests);
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", dir);
    return rc;
}
