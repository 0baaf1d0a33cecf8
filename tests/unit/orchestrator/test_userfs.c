/* test_userfs.c: file system work with a job user's rights
 * (orchestrator/userfs.c), against the attacks a user can set up in a
 * directory of their own: links to root's files where the controller
 * writes or removes, FIFOs and root-only files where it reads.  Needs root
 * (it takes the rights of "nobody"); skipped otherwise. */
#define _GNU_SOURCE
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/userfs.h"
#include "tests/unit/unit.h"

static const uid_t user = 65534; /* nobody */
static const gid_t group = 65534;
static char top[64];     /* root's, 0755 */
static char udir[128];   /* the user's, 0755 */
static char victim[128]; /* root's, 0644 */
static char secret[128]; /* root's, 0600 */

static int put (const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen (path, "w");
    if (!f)
        return -1;
    fputs (text, f);
    fclose (f);
    return chmod (path, mode);
}

static char *get (const char *path)
{
    static char buf[256];
    FILE *f = fopen (path, "r");
    size_t n;
    if (!f)
        return NULL;
    n = fread (buf, 1, sizeof (buf) - 1, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

static void sub (char *buf, size_t len, const char *name)
{
    snprintf (buf, len, "%s/%s", udir, name);
}

static void as_user_mkdir (const char *path)
{
    CU_ASSERT_EQUAL (mkdir (path, 0755), 0);
    CU_ASSERT_EQUAL (chown (path, user, group), 0);
}

static void as_user_symlink (const char *target, const char *path)
{
    CU_ASSERT_EQUAL (symlink (target, path), 0);
    CU_ASSERT_EQUAL (lchown (path, user, group), 0);
}

static void test_write_atomic_through_planted_link (void)
{
    struct userfs_id id;
    dt_error_t err;
    char p[256];
    struct stat sb;

    userfs_id_init (&id, user, group);
    sub (p, sizeof (p), ".manifest.json.tmp");
    as_user_symlink (victim, p);
    CU_ASSERT_EQUAL (userfs_write_atomic (&id, udir, "manifest.json", "{}\n", 3, &err),
                     0);
    CU_ASSERT_STRING_EQUAL (get (victim), "root's\n");
    sub (p, sizeof (p), "manifest.json");
    CU_ASSERT_STRING_EQUAL (get (p), "{}\n");
    CU_ASSERT_EQUAL (lstat (p, &sb), 0);
    CU_ASSERT_EQUAL (sb.st_uid, user); /* written with the user's rights */
    sub (p, sizeof (p), ".manifest.json.tmp");
    CU_ASSERT_EQUAL (lstat (p, &sb), -1);
    /* A link in the target's place is replaced, not followed. */
    sub (p, sizeof (p), "manifest.json");
    unlink (p);
    as_user_symlink (victim, p);
    CU_ASSERT_EQUAL (userfs_write_atomic (&id, udir, "manifest.json", "{}\n", 3, &err),
                     0);
    CU_ASSERT_STRING_EQUAL (get (victim), "root's\n");
    unlink (p);
}

static void test_write_refused_where_user_may_not (void)
{
    struct userfs_id id;
    dt_error_t err;
    char p[256];

    userfs_id_init (&id, user, group);
    errno = 0;
    CU_ASSERT_EQUAL (userfs_write_atomic (&id, top, "manifest.json", "{}\n", 3, &err),
                     -1);
    CU_ASSERT_EQUAL (errno, EACCES);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, top));
    snprintf (p, sizeof (p), "%s/manifest.json", top);
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    /* The thread is root again afterwards. */
    CU_ASSERT_EQUAL ((uid_t)setfsuid ((uid_t)-1), 0);
    CU_ASSERT_EQUAL ((gid_t)setfsgid ((gid_t)-1), 0);
}

static void test_remove_dir_never_follows (void)
{
    struct userfs_id id;
    dt_error_t err;
    char p[256], q[300];

    userfs_id_init (&id, user, group);
    /* jit-5-r0 holds a link to root's file: the link goes, the file stays. */
    sub (p, sizeof (p), "jit-5-r0");
    as_user_mkdir (p);
    snprintf (q, sizeof (q), "%s/rank-0.ckpt", p);
    as_user_symlink (victim, q);
    CU_ASSERT_EQUAL (userfs_remove_dir (&id, udir, "jit-5-r0", NULL, &err), 0);
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    CU_ASSERT_STRING_EQUAL (get (victim), "root's\n");
    /* .partial-step-5-a1 is itself a link to root's directory. */
    sub (p, sizeof (p), ".partial-step-5-a1");
    as_user_symlink (top, p);
    CU_ASSERT_EQUAL (userfs_remove_dir (&id, udir, ".partial-step-5-a1", NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL (get (victim), "root's\n");
    CU_ASSERT_EQUAL (access (top, F_OK), 0);
}

static bool pick_jit (const char *name)
{
    return !strncmp (name, "jit-", 4);
}

static void test_remove_dirs (void)
{
    struct userfs_id id;
    dt_error_t err;
    char p[256], q[300];

    userfs_id_init (&id, user, group);
    sub (p, sizeof (p), "jit-7-r1");
    as_user_mkdir (p);
    snprintf (q, sizeof (q), "%s/rank-1.ckpt", p);
    CU_ASSERT_EQUAL (put (q, "x", 0644), 0);
    CU_ASSERT_EQUAL (chown (q, user, group), 0);
    sub (p, sizeof (p), "jit-8-r1");
    as_user_symlink (top, p);
    CU_ASSERT_EQUAL (userfs_remove_dirs (&id, udir, pick_jit, &err), 0);
    sub (p, sizeof (p), "jit-7-r1");
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    sub (p, sizeof (p), "jit-8-r1");
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    CU_ASSERT_STRING_EQUAL (get (victim), "root's\n");
}

static void test_read_refuses_fifo_and_root_only (void)
{
    struct userfs_id id;
    dt_error_t err;
    struct stat sb;
    char p[256];

    userfs_id_init (&id, user, group);
    sub (p, sizeof (p), "fifo");
    CU_ASSERT_EQUAL (mkfifo (p, 0644), 0);
    errno = 0;
    CU_ASSERT_EQUAL (userfs_open_regular (&id, p, &sb, &err), -1); /* no hang */
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "not a regular file"));
    errno = 0;
    CU_ASSERT_PTR_NULL (userfs_read_file (&id, secret, 1024, NULL, &err));
    CU_ASSERT_EQUAL (errno, EACCES);
    /* Readable ones are read, through a link too. */
    char *t = userfs_read_file (&id, victim, 1024, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL (t);
    if (t)
        CU_ASSERT_STRING_EQUAL (t, "root's\n");
    free (t);
    sub (p, sizeof (p), "link");
    as_user_symlink (victim, p);
    t = userfs_read_file (&id, p, 1024, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL (t);
    free (t);
    errno = 0;
    CU_ASSERT_PTR_NULL (userfs_read_file (&id, victim, 3, NULL, &err));
    CU_ASSERT_EQUAL (errno, EFBIG);
}

static void test_job_dir (void)
{
    struct userfs_id id;
    dt_error_t err;
    char p[256];
    struct stat sb;

    userfs_id_init (&id, user, group);
    /* In the admin's directory: created by root, given to the user. */
    CU_ASSERT_EQUAL (userfs_job_dir (&id, top, "41", top, &err), 0);
    snprintf (p, sizeof (p), "%s/41", top);
    CU_ASSERT_EQUAL (lstat (p, &sb), 0);
    CU_ASSERT_EQUAL (sb.st_uid, user);
    CU_ASSERT_TRUE (S_ISDIR (sb.st_mode));
    /* A link there (planted by someone) is refused, not followed. */
    snprintf (p, sizeof (p), "%s/42", top);
    CU_ASSERT_EQUAL (symlink (udir, p), 0);
    CU_ASSERT_EQUAL (userfs_job_dir (&id, top, "42", top, &err), -1);
    /* An admin's directory reached through a directory a user owns (or
     * a link a user planted) is refused: root creates nothing there. */
    sub (p, sizeof (p), "trusted");
    errno = 0;
    CU_ASSERT_EQUAL (userfs_job_dir (&id, p, "45", p, &err), -1);
    CU_ASSERT_EQUAL (errno, EPERM);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "owned by uid 65534"));
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    char link[300];
    snprintf (link, sizeof (link), "%s/planted", top);
    CU_ASSERT_EQUAL (symlink (udir, link), 0);
    CU_ASSERT_EQUAL (lchown (link, user, group), 0);
    snprintf (p, sizeof (p), "%s/planted/ckpt", top);
    errno = 0;
    CU_ASSERT_EQUAL (userfs_job_dir (&id, p, "46", p, &err), -1);
    CU_ASSERT_EQUAL (errno, EPERM);
    sub (p, sizeof (p), "ckpt");
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    /* A link of root's is followed (an admin's /shared -> /lustre). */
    snprintf (link, sizeof (link), "%s/adminlink", top);
    CU_ASSERT_EQUAL (symlink (top, link), 0);
    CU_ASSERT_EQUAL (userfs_job_dir (&id, link, "47", link, &err), 0);
    snprintf (p, sizeof (p), "%s/47", top);
    CU_ASSERT_EQUAL (lstat (p, &sb), 0);
    CU_ASSERT_EQUAL (sb.st_uid, user);
    /* Anywhere else: only where the user may create it. */
    snprintf (p, sizeof (p), "%s/elsewhere", top);
    errno = 0;
    CU_ASSERT_EQUAL (userfs_job_dir (&id, p, "43", top, &err), -1);
    CU_ASSERT_EQUAL (errno, EACCES);
    CU_ASSERT_EQUAL (access (p, F_OK), -1);
    sub (p, sizeof (p), "mine/ckpt");
    CU_ASSERT_EQUAL (userfs_job_dir (&id, p, "44", top, &err), 0);
    sub (p, sizeof (p), "mine/ckpt/44");
    CU_ASSERT_EQUAL (lstat (p, &sb), 0);
    CU_ASSERT_EQUAL (sb.st_uid, user);
}

/* Moving a shard between two of the user's directories: done as the user;
 * a source directory that is a planted link to root's directory is not
 * followed, and a file the user may not move stays. */
static void test_move (void)
{
    struct userfs_id id;
    dt_error_t err;
    char a[200], b[200], l[200], p[256];

    userfs_id_init (&id, user, group);
    sub (a, sizeof (a), "jit-a");
    sub (b, sizeof (b), "step-b");
    sub (l, sizeof (l), "jit-link");
    as_user_mkdir (a);
    as_user_mkdir (b);
    snprintf (p, sizeof (p), "%s/rank-1.ckpt", a);
    CU_ASSERT_EQUAL (put (p, "shard\n", 0644), 0);
    CU_ASSERT_EQUAL (chown (p, user, group), 0);
    CU_ASSERT_EQUAL (userfs_move (&id, a, b, "rank-1.ckpt", &err), 0);
    snprintf (p, sizeof (p), "%s/rank-1.ckpt", b);
    CU_ASSERT_STRING_EQUAL (get (p), "shard\n");
    CU_ASSERT_EQUAL (userfs_move (&id, a, b, "rank-1.ckpt", &err), -1); /* gone */
    CU_ASSERT_EQUAL (errno, ENOENT);
    /* jit-link -> root's top directory: never followed */
    as_user_symlink (top, l);
    CU_ASSERT_EQUAL (userfs_move (&id, l, b, "victim", &err), -1);
    CU_ASSERT_EQUAL (access (victim, F_OK), 0);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "jit-link"));
}

static const struct dt_unit_test tests[] = {
    { "atomic write never follows a planted link",
      test_write_atomic_through_planted_link },
    { "writing where the user may not is refused",
      test_write_refused_where_user_may_not },
    { "removing never follows links", test_remove_dir_never_follows },
    { "removing the picked directories", test_remove_dirs },
    { "reading refuses FIFOs and root-only files", test_read_refuses_fifo_and_root_only },
    { "job directories", test_job_dir },
    { "moving between the user's directories", test_move },
    { NULL, NULL },
};

int main (void)
{
    int rc;
    if (geteuid () != 0) {
        fprintf (stderr, "SKIP: needs root (takes the rights of uid %u)\n",
                 (unsigned)user);
        return 77;
    }
    snprintf (top, sizeof (top), "/tmp/test_userfs.XXXXXX");
    if (!mkdtemp (top))
        return 99;
    chmod (top, 0755);
    snprintf (udir, sizeof (udir), "%s/user", top);
    snprintf (victim, sizeof (victim), "%s/victim", top);
    snprintf (secret, sizeof (secret), "%s/secret", top);
    mkdir (udir, 0755);
    if (chown (udir, user, group) < 0)
        return 99;
    if (put (victim, "root's\n", 0644) < 0 || put (secret, "root only\n", 0600) < 0)
        return 99;
    rc = dt_unit_run ("userfs", tests);
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", top);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", top);
    return rc;
}
