/* test_rundir.c: the agent's private run directory (agent/rundir.c) on a
 * real file system: a fresh 0700 directory with an unpredictable name, never
 * one that is there already; a base another user owns, or one others may
 * write to without the sticky bit, refused with an error naming it; a
 * socket path too long for sun_path moved to a private directory under
 * TMPDIR, never an abstract name.  The foreign-owner case needs root
 * (chown; skipped otherwise). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/rundir.h"
#include "tests/unit/unit.h"

static char top[64];

static void test_fresh_private_dir (void)
{
    dt_error_t err;
    struct stat st;
    char planted[128];
    /* The old predictable name, planted: not used. */
    snprintf (planted, sizeof (planted), "%s/dt-1-a1", top);
    CU_ASSERT_EQUAL_FATAL (mkdir (planted, 0777), 0);
    char *a = rundir_make (top, "dt-1-a1", &err);
    char *b = rundir_make (top, "dt-1-a1", &err);
    CU_ASSERT_FATAL (a != NULL && b != NULL);
    CU_ASSERT (strcmp (a, b) != 0);
    CU_ASSERT (strcmp (a, planted) != 0);
    CU_ASSERT (strncmp (a, planted, strlen (planted)) == 0 && a[strlen (planted)] == '-');
    CU_ASSERT_EQUAL_FATAL (lstat (a, &st), 0);
    CU_ASSERT (S_ISDIR (st.st_mode));
    CU_ASSERT_EQUAL (st.st_mode & 07777, 0700);
    CU_ASSERT_EQUAL (st.st_uid, geteuid ());
    free (a);
    free (b);
}

static void test_base_checks (void)
{
    dt_error_t err;
    char base[128];
    /* World-writable without the sticky bit: anyone could swap entries. */
    snprintf (base, sizeof (base), "%s/open", top);
    CU_ASSERT_EQUAL_FATAL (mkdir (base, 0777), 0);
    CU_ASSERT_EQUAL_FATAL (chmod (base, 0777), 0);
    CU_ASSERT_PTR_NULL (rundir_make (base, "dt-2-a1", &err));
    CU_ASSERT (strstr (err.text, "writable by others without the sticky bit") != NULL);
    /* With it (as /tmp): accepted. */
    CU_ASSERT_EQUAL_FATAL (chmod (base, 01777), 0);
    char *d = rundir_make (base, "dt-2-a1", &err);
    CU_ASSERT_PTR_NOT_NULL (d);
    free (d);
    /* Not a directory. */
    snprintf (base, sizeof (base), "%s/missing", top);
    CU_ASSERT_PTR_NULL (rundir_make (base, "dt-2-a1", &err));
    CU_ASSERT (strstr (err.text, "missing") != NULL);
    /* Owned by another user (not root, not us). */
    if (geteuid () == 0) {
        snprintf (base, sizeof (base), "%s/theirs", top);
        CU_ASSERT_EQUAL_FATAL (mkdir (base, 0755), 0);
        CU_ASSERT_EQUAL_FATAL (chown (base, 4343, 4343), 0);
        CU_ASSERT_PTR_NULL (rundir_make (base, "dt-2-a1", &err));
        CU_ASSERT (strstr (err.text, "owned by uid 4343") != NULL);
    }
}

static void test_socket_path (void)
{
    dt_error_t err;
    char *sockdir = NULL, deep[200];
    char *p = rundir_socket_path (top, "node1", &sockdir, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (p);
    CU_ASSERT_PTR_NULL (sockdir);
    CU_ASSERT (strncmp (p, top, strlen (top)) == 0);
    free (p);
    /* A path too long for sun_path: a private directory under TMPDIR. */
    snprintf (deep, sizeof (deep), "%s/%0120d", top, 0);
    setenv ("TMPDIR", top, 1);
    p = rundir_socket_path (deep, "node1", &sockdir, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (p);
    CU_ASSERT_PTR_NOT_NULL_FATAL (sockdir);
    CU_ASSERT (p[0] == '/');
    CU_ASSERT (strncmp (sockdir, top, strlen (top)) == 0);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL (lstat (sockdir, &st), 0);
    CU_ASSERT_EQUAL (st.st_mode & 07777, 0700);
    rmdir (sockdir);
    free (sockdir);
    free (p);
}

int main (void)
{
    static const struct dt_unit_test tests[] = {
        { "a fresh private directory, never the planted one", test_fresh_private_dir },
        { "the base is checked", test_base_checks },
        { "a long socket path goes to a private directory", test_socket_path },
        { NULL, NULL },
    };
    snprintf (top, sizeof (top), "/tmp/test_rundir.XXXXXX");
    if (!mkdtemp (top))
        return 99;
    int rc = dt_unit_run ("rundir", tests);
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", top);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", top);
    return rc;
}
