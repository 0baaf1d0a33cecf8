/* test_comm_shm.c: the pipeline's shared-memory links (comm_shm.c) - between
 * two processes messages arrive whole and in order through a ring they
 * wrap 4 times, and a peer's exit, or its destroying the link while it
 * lives on, fails a wait at once (not at the deadline); a message other than the expected
 * one is an error naming both; a wait ends at its deadline or when aborted from another
 * thread. */
#include <config.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dtime.h"
#include "tests/unit/unit.h"
#include "trainer/comm_shm.h"

#define NMSG 60
#define MSG (300 * 1024) /* 60 x 300 KiB: the 4 MiB ring wraps 4 times */

static void fill (uint8_t *b, size_t n, int k)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 7 + k);
}

/* The child: echoes NMSG messages back, then exits (close: after
 * destroying its end of the link and waiting 1 s). */
static int child (struct shm_link *l, int close)
{
    dt_error_t e;
    uint8_t *b = malloc (MSG);
    for (int k = 0; k < NMSG; k++) {
        size_t n = MSG - (size_t)k * 1000;
        if (!b || shm_link_recv (l, b, n, (uint64_t)k, 5000, &e) < 0 ||
            shm_link_send (l, b, n, (uint64_t)k, 5000, &e) < 0)
            return 1;
    }
    if (close) {
        shm_link_destroy (l);
        sleep (1);
    }
    return 0;
}

static void two_processes (int close)
{
    int up[2], down[2];
    dt_error_t e;
    CU_ASSERT_FATAL (pipe (up) == 0 && pipe (down) == 0);
    pid_t pid = fork ();
    CU_ASSERT_FATAL (pid >= 0);
    if (pid == 0) {
        struct shm_hello mine, theirs;
        struct shm_link *l = shm_link_create (&e);
        if (!l)
            _exit (2);
        shm_link_hello (l, &mine);
        if (write (up[1], &mine, sizeof (mine)) != sizeof (mine) ||
            read (down[0], &theirs, sizeof (theirs)) != sizeof (theirs) ||
            shm_link_attach (l, &theirs, &e) < 0)
            _exit (3);
        _exit (child (l, close));
    }
    struct shm_hello mine, theirs;
    struct shm_link *l = shm_link_create (&e);
    CU_ASSERT_PTR_NOT_NULL_FATAL (l);
    shm_link_hello (l, &mine);
    CU_ASSERT_FATAL (read (up[0], &theirs, sizeof (theirs)) == sizeof (theirs));
    CU_ASSERT_FATAL (write (down[1], &mine, sizeof (mine)) == sizeof (mine));
    CU_ASSERT_EQUAL_FATAL (shm_link_attach (l, &theirs, &e), 0);

    uint8_t *out = malloc (MSG), *in = malloc (MSG);
    CU_ASSERT_PTR_NOT_NULL_FATAL (out);
    CU_ASSERT_PTR_NOT_NULL_FATAL (in);
    int same = 1;
    for (int k = 0; k < NMSG; k++) { /* one in flight each way */
        size_t n = MSG - (size_t)k * 1000;
        fill (out, n, k);
        CU_ASSERT_EQUAL_FATAL (shm_link_send (l, out, n, (uint64_t)k, 5000, &e), 0);
        memset (in, 0, n);
        CU_ASSERT_EQUAL_FATAL (shm_link_recv (l, in, n, (uint64_t)k, 5000, &e), 0);
        same &= !memcmp (in, out, n);
    }
    CU_ASSERT (same);
    int64_t t0 = dt_mono_ns ();
    int st;
    if (close) { /* the peer destroyed its end and lives on */
        CU_ASSERT_EQUAL (shm_link_recv (l, in, 8, 0, 5000, &e), -1);
        CU_ASSERT_PTR_NOT_NULL (strstr (e.text, "the peer closed the link"));
        CU_ASSERT ((dt_mono_ns () - t0) / 1e6 < 2500);
        CU_ASSERT_EQUAL (waitpid (pid, &st, 0), pid);
    }
    else { /* the peer has exited: the next wait fails at once, not in 5 s */
        CU_ASSERT_EQUAL (waitpid (pid, &st, 0), pid);
        t0 = dt_mono_ns ();
        CU_ASSERT_EQUAL (shm_link_recv (l, in, 8, 0, 5000, &e), -1);
        CU_ASSERT_PTR_NOT_NULL (strstr (e.text, "exited"));
        CU_ASSERT ((dt_mono_ns () - t0) / 1e6 < 2500);
    }
    CU_ASSERT (WIFEXITED (st) && WEXITSTATUS (st) == 0);
    shm_link_destroy (l);
    free (in);
    free (out);
}

static void test_two_processes (void)
{
    two_processes (0);
}

static void test_peer_closes (void)
{
    two_processes (1);
}

struct waiter {
    struct shm_link *l;
    int rc;
    dt_error_t e;
};

static void *wait_side (void *arg)
{
    struct waiter *w = arg;
    char b[8];
    w->rc = shm_link_recv (w->l, b, 8, 0, 5000, &w->e);
    return NULL;
}

static void test_deadline_and_abort (void)
{
    dt_error_t e;
    struct shm_hello h;
    struct shm_link *l = shm_link_create (&e); /* a link to itself */
    CU_ASSERT_PTR_NOT_NULL_FATAL (l);
    shm_link_hello (l, &h);
    CU_ASSERT_EQUAL_FATAL (shm_link_attach (l, &h, &e), 0);
    char b[8] = "message";
    CU_ASSERT_EQUAL (shm_link_recv (l, b, 8, 0, 100, &e), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (e.text, "timed out after 100 ms"));
    /* Slot 999 sent, slot 1000 expected: an error naming both. */
    CU_ASSERT_EQUAL (shm_link_send (l, b, 8, 999, 100, &e), 0);
    CU_ASSERT_EQUAL (shm_link_recv (l, b, 8, 1000, 100, &e), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (e.text, "expected slot 1000"));
    CU_ASSERT_PTR_NOT_NULL (strstr (e.text, "slot 999"));
    CU_ASSERT_EQUAL (shm_link_recv (l, b, 8, 999, 100, &e), 0);
    CU_ASSERT_STRING_EQUAL (b, "message");
    /* A wait of 5 s ends when another thread aborts the link. */
    struct waiter w = { l, 0, { "" } };
    pthread_t t;
    pthread_create (&t, NULL, wait_side, &w);
    usleep (100000);
    int64_t t0 = dt_mono_ns ();
    shm_link_abort (l);
    pthread_join (t, NULL);
    CU_ASSERT_EQUAL (w.rc, -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (w.e.text, "aborted"));
    CU_ASSERT ((dt_mono_ns () - t0) / 1e6 < 2500);
    shm_link_destroy (l);
}

static const struct dt_unit_test tests[] = {
    { "two processes: messages whole and in order, a dead peer at once",
      test_two_processes },
    { "a peer that destroys its end of the link fails the wait at once",
      test_peer_closes },
    { "a wrong message named, a wait ends at its deadline or when aborted",
      test_deadline_and_abort },
    { NULL, NULL },
};

int main (void)
{
    signal (SIGPIPE, SIG_IGN);
    return dt_unit_run ("comm_shm", tests);
}
