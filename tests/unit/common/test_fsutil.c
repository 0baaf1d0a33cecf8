/* test_fsutil.c: common/fsutil.c: paths that refuse to truncate, mkdir -p,
 * the atomic write (on a real temporary directory). */
#include <config.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/fsutil.h"
#include "tests/unit/unit.h"

static char base[64];

static void test_pathf (void)
{
    char buf[8];
    CU_ASSERT_EQUAL (dt_pathf (buf, sizeof (buf), "%s/%d", "ab", 12), 0);
    CU_ASSERT_STRING_EQUAL (buf, "ab/12");
    errno = 0;
    CU_ASSERT_EQUAL (dt_pathf (buf, sizeof (buf), "%s/%d", "abcd", 123),
                     -1); /* 8 + NUL */
    CU_ASSERT_EQUAL (errno, ENAMETOOLONG);
    CU_ASSERT_EQUAL (dt_pathf (buf, sizeof (buf), "%s", "1234567"), 0); /* just fits */
}

static void test_mkdir_p (void)
{
    char p[PATH_MAX];
    struct stat st;
    snprintf (p, sizeof (p), "%s/a/b/c", base);
    CU_ASSERT_EQUAL (dt_mkdir_p (p, 0755), 0);
    CU_ASSERT (stat (p, &st) == 0 && S_ISDIR (st.st_mode));
    CU_ASSERT_EQUAL (dt_mkdir_p (p, 0755), 0); /* exists: fine */
    /* A file in the way is an error. */
    char f[PATH_MAX];
    snprintf (f, sizeof (f), "%s/file", base);
    FILE *fp = fopen (f, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL (fp);
    fclose (fp);
    snprintf (p, sizeof (p), "%s/file/sub", base);
    CU_ASSERT_EQUAL (dt_mkdir_p (p, 0755), -1);
    CU_ASSERT_EQUAL (errno, ENOTDIR);
    /* Too long for PATH_MAX: ENAMETOOLONG, nothing created. */
    char *lp = malloc (PATH_MAX + 16);
    CU_ASSERT_PTR_NOT_NULL_FATAL (lp);
    memset (lp, 'x', PATH_MAX + 8);
    lp[0] = '/';
    lp[PATH_MAX + 8] = '\0';
    CU_ASSERT_EQUAL (dt_mkdir_p (lp, 0755), -1);
    CU_ASSERT_EQUAL (errno, ENAMETOOLONG);
    free (lp);
}

static void test_write_atomic (void)
{
    char p[PATH_MAX], tmp[PATH_MAX], got[64] = "";
    dt_error_t err;
    snprintf (p, sizeof (p), "%s/m.json", base);
    snprintf (tmp, sizeof (tmp), "%s/.m.json.tmp", base);
    CU_ASSERT_EQUAL (dt_write_atomic (base, "m.json", "first", 5, &err), 0);
    CU_ASSERT_EQUAL (dt_write_atomic (base, "m.json", "second", 6, &err), 0);
    FILE *f = fopen (p, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    CU_ASSERT_EQUAL (fread (got, 1, sizeof (got) - 1, f), 6);
    fclose (f);
    CU_ASSERT_STRING_EQUAL (got, "second");
    CU_ASSERT_EQUAL (access (tmp, F_OK), -1); /* no temporary left */
    /* A directory that does not exist: an error naming the path. */
    char nd[PATH_MAX];
    snprintf (nd, sizeof (nd), "%s/none", base);
    CU_ASSERT_EQUAL (dt_write_atomic (nd, "m.json", "x", 1, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "none/.m.json.tmp"));
}

static void test_fsync_dir (void)
{
    CU_ASSERT_EQUAL (dt_fsync_dir (base), 0);
    char nd[PATH_MAX];
    snprintf (nd, sizeof (nd), "%s/none", base);
    CU_ASSERT_EQUAL (dt_fsync_dir (nd), -1);
    CU_ASSERT_EQUAL (errno, ENOENT);
}

static const struct dt_unit_test tests[] = {
    { "pathf refuses to truncate", test_pathf },
    { "mkdir -p", test_mkdir_p },
    { "atomic write replaces whole files", test_write_atomic },
    { "fsync a directory", test_fsync_dir },
    { NULL, NULL },
};

int main (void)
{
    snprintf (base, sizeof (base), "/tmp/test_fsutil.XXXXXX");
    if (!mkdtemp (base))
        return 99;
    int rc = dt_unit_run ("fsutil", tests);
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", base);
    if (system (cmd) != 0)
        fprintf (stderr, "cleanup of %s failed\n", base);
    return rc;
}
