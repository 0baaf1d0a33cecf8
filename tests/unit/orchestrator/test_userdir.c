/* test_userdir.c: the per-user output directories (orchestrator/userdir.c)
 * on a real file system: the root is made 0711 and checked; a user's
 * directory is made with its owner and mode 0700; what a user could have
 * planted (a symbolic link, a directory of another uid, a loose root) is
 * refused with an error naming it; a program path a user could replace is
 * refused.  Needs root for chown (skipped otherwise). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/userdir.h"
#include "tests/unit/unit.h"

static char top[64];
static const uid_t uid_a = 4242, uid_b = 4343;

static void path (char *buf, size_t len, const char *rel)
{
    snprintf (buf, len, "%s/%s", top, rel);
}

static void test_setup_makes_root (void)
{
    char root[128];
    struct stat st;
    dt_error_t err;
    path (root, sizeof (root), "a/users");
    CU_ASSERT_EQUAL (userdir_setup (root, &err), 0);
    CU_ASSERT_EQUAL_FATAL (lstat (root, &st), 0);
    CU_ASSERT (S_ISDIR (st.st_mode));
    CU_ASSERT_EQUAL (st.st_mode & 07777, 0711);
    CU_ASSERT_EQUAL (st.st_uid, geteuid ());
    /* Again: already there, still fine. */
    CU_ASSERT_EQUAL (userdir_setup (root, &err), 0);
}

static void test_setup_refuses_loose_root (void)
{
    char root[128], link[128];
    dt_error_t err;
    path (root, sizeof (root), "loose");
    CU_ASSERT_EQUAL_FATAL (mkdir (root, 0777), 0);
    CU_ASSERT_EQUAL_FATAL (chmod (root, 0777), 0);
    CU_ASSERT_EQUAL (userdir_setup (root, &err), -1);
    CU_ASSERT (strstr (err.text, "writable by group or others") != NULL);
    path (root, sizeof (root), "theirs");
    CU_ASSERT_EQUAL_FATAL (mkdir (root, 0755), 0);
    CU_ASSERT_EQUAL_FATAL (chown (root, uid_b, uid_b), 0);
    CU_ASSERT_EQUAL (userdir_setup (root, &err), -1);
    CU_ASSERT (strstr (err.text, "owned by uid 4343") != NULL);
    path (link, sizeof (link), "linked");
    path (root, sizeof (root), "a/users");
    CU_ASSERT_EQUAL_FATAL (symlink (root, link), 0);
    CU_ASSERT_EQUAL (userdir_setup (link, &err), -1);
    CU_ASSERT (strstr (err.text, "symbolic link") != NULL);
}

static void test_get_makes_user_dir (void)
{
    char root[128], out[256], want[256];
    struct stat st;
    dt_error_t err;
    path (root, sizeof (root), "a/users");
    CU_ASSERT_EQUAL_FATAL (userdir_get (root, uid_a, uid_a, out, sizeof (out), &err), 0);
    snprintf (want, sizeof (want), "%s/4242", root);
    CU_ASSERT_STRING_EQUAL (out, want);
    CU_ASSERT_EQUAL_FATAL (lstat (out, &st), 0);
    CU_ASSERT (S_ISDIR (st.st_mode));
    CU_ASSERT_EQUAL (st.st_uid, uid_a);
    CU_ASSERT_EQUAL (st.st_gid, uid_a);
    CU_ASSERT_EQUAL (st.st_mode & 07777, 0700);
    /* Again: found and accepted. */
    CU_ASSERT_EQUAL (userdir_get (root, uid_a, uid_a, out, sizeof (out), &err), 0);
}

static void test_get_hands_over_a_crash_leftover (void)
{
    char root[128], dir[256], out[256];
    struct stat st;
    dt_error_t err;
    path (root, sizeof (root), "a/users");
    /* mkdir done, chown not: the daemon's own directory, mode 0755. */
    snprintf (dir, sizeof (dir), "%s/5000", root);
    CU_ASSERT_EQUAL_FATAL (mkdir (dir, 0755), 0);
    CU_ASSERT_EQUAL (userdir_get (root, 5000, 5000, out, sizeof (out), &err), 0);
    CU_ASSERT_EQUAL_FATAL (lstat (dir, &st), 0);
    CU_ASSERT_EQUAL (st.st_uid, 5000);
    CU_ASSERT_EQUAL (st.st_mode & 07777, 0700);
}

static void test_get_refuses_what_is_planted (void)
{
    char root[128], dir[256], out[256], target[128];
    struct stat st;
    dt_error_t err;
    path (root, sizeof (root), "a/users");
    /* Another user's directory under this uid's name. */
    snprintf (dir, sizeof (dir), "%s/6000", root);
    CU_ASSERT_EQUAL_FATAL (mkdir (dir, 0700), 0);
    CU_ASSERT_EQUAL_FATAL (chown (dir, uid_b, uid_b), 0);
    CU_ASSERT_EQUAL (userdir_get (root, 6000, 6000, out, sizeof (out), &err), -1);
    CU_ASSERT (strstr (err.text, "owned by uid 4343, not by the job's uid 6000") != NULL);
    CU_ASSERT_EQUAL_FATAL (lstat (dir, &st), 0);
    CU_ASSERT_EQUAL (st.st_uid, uid_b); /* untouched */
    /* A symbolic link to somewhere else: never followed, never chowned. */
    path (target, sizeof (target), "target");
    CU_ASSERT_EQUAL_FATAL (mkdir (target, 0755), 0);
    snprintf (dir, sizeof (dir), "%s/7000", root);
    CU_ASSERT_EQUAL_FATAL (symlink (target, dir), 0);
    CU_ASSERT_EQUAL (userdir_get (root, 7000, 7000, out, sizeof (out), &err), -1);
    CU_ASSERT (strstr (err.text, "not a directory") != NULL);
    CU_ASSERT_EQUAL_FATAL (stat (target, &st), 0);
    CU_ASSERT_EQUAL (st.st_uid, geteuid ());
    CU_ASSERT_EQUAL (st.st_mode & 07777, 0755);
    /* A file. */
    snprintf (dir, sizeof (dir), "%s/8000", root);
    int fd = open (dir, O_CREAT | O_WRONLY, 0600);
    CU_ASSERT_FATAL (fd >= 0);
    close (fd);
    CU_ASSERT_EQUAL (userdir_get (root, 8000, 8000, out, sizeof (out), &err), -1);
    CU_ASSERT (strstr (err.text, "not a directory") != NULL);
}

static void test_check_program (void)
{
    char bin[128], prog[160];
    dt_error_t err;
    path (bin, sizeof (bin), "bin");
    CU_ASSERT_EQUAL_FATAL (mkdir (bin, 0755), 0);
    snprintf (prog, sizeof (prog), "%s/dtagent", bin);
    int fd = open (prog, O_CREAT | O_WRONLY, 0755);
    CU_ASSERT_FATAL (fd >= 0);
    close (fd);
    CU_ASSERT_EQUAL_FATAL (chmod (prog, 0755), 0);
    CU_ASSERT_EQUAL (userdir_check_program (prog, &err), 0);
    /* A directory above it that a user owns. */
    CU_ASSERT_EQUAL_FATAL (chown (bin, uid_b, uid_b), 0);
    CU_ASSERT_EQUAL (userdir_check_program (prog, &err), -1);
    CU_ASSERT (strstr (err.text, "is owned by uid 4343") != NULL);
    CU_ASSERT_EQUAL_FATAL (chown (bin, 0, 0), 0);
    /* The file writable by others. */
    CU_ASSERT_EQUAL_FATAL (chmod (prog, 0757), 0);
    CU_ASSERT_EQUAL (userdir_check_program (prog, &err), -1);
    CU_ASSERT (strstr (err.text, "writable by group or others") != NULL);
    /* Not executable by others. */
    CU_ASSERT_EQUAL_FATAL (chmod (prog, 0750), 0);
    CU_ASSERT_EQUAL (userdir_check_program (prog, &err), -1);
    CU_ASSERT (strstr (err.text, "not executable by others") != NULL);
}

int main (void)
{
    static const struct dt_unit_test tests[] = {
        { "setup makes the root 0711", test_setup_makes_root },
        { "setup refuses a loose, foreign or linked root",
          test_setup_refuses_loose_root },
        { "get makes the user's directory 0700", test_get_makes_user_dir },
        { "get hands over a directory left by a crash",
          test_get_hands_over_a_crash_leftover },
        { "get refuses what a user planted", test_get_refuses_what_is_planted },
        { "check_program refuses what a user could replace", test_check_program },
        { NULL, NULL },
    };
    if (geteuid () != 0) {
        dt_unit_skip ("needs root (chown)");
        return 77;
    }
    snprintf (top, sizeof (top), "/tmp/test_userdir.XXXXXX");
    if (!mkdtemp (top))
        return 99;
    chmod (top, 0755);
    int rc = dt_unit_run ("userdir", tests);
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", top);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", top);
    return rc;
}
