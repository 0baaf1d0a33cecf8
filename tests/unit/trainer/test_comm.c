/* test_comm.c: the gloo communicator's abort - a collective waiting on a
 * peer that will never take part fails as aborted (not at its timeout),
 * and every later collective of that communicator fails at once. */
#include <config.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/unit.h"
#include "trainer/comm.h"

struct side {
    struct dt_comm_params p;
    dt_comm_t *c;
    dt_error_t err;
    int rc;
    double buf[4];
};

static void *open_side (void *arg)
{
    struct side *s = arg;
    s->c = dt_comm_gloo_create (&s->p, &s->err);
    return NULL;
}

static void *allreduce_side (void *arg)
{
    struct side *s = arg;
    s->rc = dt_comm_allreduce (s->c, s->buf, 4, DT_F64, DT_SUM, &s->err);
    return NULL;
}

static void test_abort (void)
{
    char dir[] = "/tmp/dt-test-comm.XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL (mkdtemp (dir));
    struct side a, b;
    memset (&a, 0, sizeof (a));
    memset (&b, 0, sizeof (b));
    /* Without the abort the wait would end at the timeout, with another
     * error. */
    a.p = (struct dt_comm_params){
        .rank = 0, .size = 2, .rendezvous_dir = dir, .prefix = "t", .timeout_ms = 5000
    };
    b.p = a.p;
    b.p.rank = 1;
    pthread_t ta, tb;
    pthread_create (&ta, NULL, open_side, &a);
    pthread_create (&tb, NULL, open_side, &b);
    pthread_join (ta, NULL);
    pthread_join (tb, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL (a.c);
    CU_ASSERT_PTR_NOT_NULL_FATAL (b.c);

    /* Both take part: the sum. */
    for (int i = 0; i < 4; i++)
        a.buf[i] = i, b.buf[i] = 10 * i;
    pthread_create (&ta, NULL, allreduce_side, &a);
    pthread_create (&tb, NULL, allreduce_side, &b);
    pthread_join (ta, NULL);
    pthread_join (tb, NULL);
    CU_ASSERT (a.rc == 0 && b.rc == 0 && a.buf[3] == 33 && b.buf[3] == 33);

    /* Rank 1 never comes: rank 0 waits until aborted from another thread. */
    pthread_create (&ta, NULL, allreduce_side, &a);
    usleep (100 * 1000);
    dt_comm_abort (a.c);
    pthread_join (ta, NULL);
    CU_ASSERT_EQUAL (a.rc, -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (a.err.text, "aborted"));
    /* Later collectives fail at once. */
    CU_ASSERT_EQUAL (dt_comm_barrier (a.c, &a.err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (a.err.text, "aborted"));

    dt_comm_destroy (a.c);
    dt_comm_destroy (b.c);
    char cmd[64];
    snprintf (cmd, sizeof (cmd), "rm -rf %s", dir);
    CU_ASSERT_EQUAL (system (cmd), 0);
}

static const struct dt_unit_test tests[] = {
    { "an aborted collective fails at once, and so do the next ones", test_abort },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("comm", tests);
}
