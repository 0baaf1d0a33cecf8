/* test_log.c: log levels, stderr lines, errno preservation, *_exit helpers,
 * the error convention (errprintf) and the version string. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/errprintf.h"
#include "common/log.h"
#include "common/version.h"
#include "tests/unit/unit.h"

static char tmpdir[] = "/tmp/test_log.XXXXXX";

/* Run fn with stderr redirected to a file; return what it wrote (static). */
static const char *capture (void (*fn) (void))
{
    static char buf[4096];
    char path[128];
    int fd, saved;
    ssize_t n;

    snprintf (path, sizeof (path), "%s/stderr", tmpdir);
    fd = open (path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL (fd >= 0);
    fflush (stderr);
    saved = dup (2);
    dup2 (fd, 2);
    fn ();
    dup2 (saved, 2);
    close (saved);
    lseek (fd, 0, SEEK_SET);
    n = read (fd, buf, sizeof (buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close (fd);
    unlink (path);
    return buf;
}

static int evaluated;
static int side_effect (void)
{
    evaluated++;
    return 1;
}

static void log_levels (void)
{
    dt_log_init ("/usr/sbin/dtctld", DT_LOG_STDERR, LOG_NOTICE);
    dt_log (LOG_INFO, "hidden %d", side_effect ());
    dt_log (LOG_NOTICE, "shown %d", 1);
    dt_log (LOG_WARNING, "careful");
    dt_log (LOG_ERR, "broken");
    dt_log (LOG_DEBUG, "debug hidden");
    dt_log_set_level (LOG_DEBUG);
    dt_log (LOG_DEBUG, "now %s", "visible");
    errno = ENOENT;
    dt_log_errno (LOG_ERR, "open %s", "/x");
}

static void test_levels (void)
{
    evaluated = 0;
    const char *out = capture (log_levels);
    CU_ASSERT_STRING_EQUAL (out, "dtctld: shown 1\n"
                                 "dtctld: warning: careful\n"
                                 "dtctld: error: broken\n"
                                 "dtctld: debug: now visible\n"
                                 "dtctld: error: open /x: No such file or directory\n");
    /* the level is checked before the arguments are evaluated */
    CU_ASSERT_EQUAL (evaluated, 0);
    CU_ASSERT_EQUAL (dt_log_get_level (), LOG_DEBUG);
}

static void test_level_parse (void)
{
    CU_ASSERT_EQUAL (dt_log_level_parse ("debug"), LOG_DEBUG);
    CU_ASSERT_EQUAL (dt_log_level_parse ("INFO"), LOG_INFO);
    CU_ASSERT_EQUAL (dt_log_level_parse ("Notice"), LOG_NOTICE);
    CU_ASSERT_EQUAL (dt_log_level_parse ("warning"), LOG_WARNING);
    CU_ASSERT_EQUAL (dt_log_level_parse ("error"), LOG_ERR);
    CU_ASSERT_EQUAL (dt_log_level_parse ("loud"), -1);
    CU_ASSERT_EQUAL (dt_log_level_parse (""), -1);
    CU_ASSERT_EQUAL (dt_log_level_parse (NULL), -1);
}

static void test_errno_preserved (void)
{
    dt_log_init ("t", DT_LOG_STDERR, LOG_DEBUG);
    int fd = open ("/dev/null", O_WRONLY), saved = dup (2);
    dup2 (fd, 2);
    errno = EXDEV;
    dt_log_msg (LOG_INFO, "x");
    CU_ASSERT_EQUAL (errno, EXDEV);
    dt_log_errno_msg (LOG_INFO, "x");
    CU_ASSERT_EQUAL (errno, EXDEV);
    dup2 (saved, 2);
    close (saved);
    close (fd);
}

static void long_line (void)
{
    char big[5000];
    memset (big, 'a', sizeof (big) - 1);
    big[sizeof (big) - 1] = '\0';
    dt_log_msg (LOG_ERR, "%s", big);
}

static void test_long_line (void)
{
    dt_log_init ("t", DT_LOG_STDERR, LOG_INFO);
    const char *out = capture (long_line);
    size_t n = strlen (out);
    /* truncated but still one complete line */
    CU_ASSERT (n > 1000 && n <= 2048);
    CU_ASSERT_EQUAL (out[n - 1], '\n');
    CU_ASSERT_PTR_EQUAL (strchr (out, '\n'), out + n - 1);
}

static void test_exit_helpers (void)
{
    int p[2], status;
    char buf[256] = "";
    pid_t pid;

    CU_ASSERT_FATAL (pipe (p) == 0);
    pid = fork ();
    CU_ASSERT_FATAL (pid >= 0);
    if (pid == 0) {
        dup2 (p[1], 2);
        dt_log_init ("dtctl", DT_LOG_STDERR, LOG_INFO);
        errno = EACCES;
        log_err_exit ("cannot read %s", "job.json");
    }
    close (p[1]);
    ssize_t n = read (p[0], buf, sizeof (buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close (p[0]);
    waitpid (pid, &status, 0);
    CU_ASSERT (WIFEXITED (status) && WEXITSTATUS (status) == 1);
    CU_ASSERT_STRING_EQUAL (buf, "dtctl: cannot read job.json: Permission denied\n");

    CU_ASSERT_FATAL (pipe (p) == 0);
    pid = fork ();
    if (pid == 0) {
        dup2 (p[1], 2);
        dt_log_init ("dtctl", DT_LOG_SYSLOG, LOG_INFO); /* *_exit: stderr anyway */
        log_msg_exit ("bad option '%s'", "--x");
    }
    close (p[1]);
    n = read (p[0], buf, sizeof (buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close (p[0]);
    waitpid (pid, &status, 0);
    CU_ASSERT (WIFEXITED (status) && WEXITSTATUS (status) == 1);
    CU_ASSERT_STRING_EQUAL (buf, "dtctl: bad option '--x'\n");
}

static void test_errprintf (void)
{
    dt_error_t err = { "" };
    errno = EAGAIN;
    CU_ASSERT_EQUAL (errprintf (&err, "%s:%d: bad", "f.conf", 3), -1);
    CU_ASSERT_EQUAL (errno, EAGAIN);
    CU_ASSERT_STRING_EQUAL (err.text, "f.conf:3: bad");
    CU_ASSERT_EQUAL (errnoprintf (&err, EPROTO, "x%d", 1), -1);
    CU_ASSERT_EQUAL (errno, EPROTO);
    CU_ASSERT_STRING_EQUAL (err.text, "x1");
    CU_ASSERT_EQUAL (errprintf (NULL, "ignored"), -1); /* NULL err is allowed */
    /* long text is truncated, not overflowed */
    char big[400];
    memset (big, 'b', sizeof (big) - 1);
    big[sizeof (big) - 1] = '\0';
    errprintf (&err, "%s", big);
    CU_ASSERT_EQUAL (strlen (err.text), sizeof (err.text) - 1);
}

static void test_version (void)
{
    const char *v = dt_version_string ();
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    CU_ASSERT_EQUAL (
      strncmp (v, "dtctl " PACKAGE_VERSION " (git ", 12 + strlen (PACKAGE_VERSION)), 0);
    CU_ASSERT_EQUAL (v[strlen (v) - 1], ')');
}

static const struct dt_unit_test tests[] = {
    { "levels filter lines, lazy arguments", test_levels },
    { "level names", test_level_parse },
    { "errno preserved", test_errno_preserved },
    { "long lines truncated", test_long_line },
    { "log_err_exit / log_msg_exit", test_exit_helpers },
    { "errprintf convention", test_errprintf },
    { "version string", test_version },
    { NULL, NULL },
};

int main (void)
{
    int rc;
    if (!mkdtemp (tmpdir))
        return 99;
    rc = dt_unit_run ("log", tests);
    rmdir (tmpdir);
    return rc;
}
