/* test_conf.c: Slurm-style Key=Value config files. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "tests/unit/unit.h"

static const char *const known[] = {
    "ListenPort", "StateDir", "HeartbeatInterval", "NodeTimeout", "Debug",
    "LogLevel",   NULL,
};

static void test_parse_good (void)
{
    dt_error_t err = { "" };
    const char *text = "# dtctld.conf\n"
                       "\n"
                       "ListenPort=6830\n"
                       "  statedir =  /var/lib/dtctl   # trailing comment\n"
                       "HEARTBEATINTERVAL=5s\n"
                       "NodeTimeout = 00:01:30\n"
                       "Debug=yes\n"
                       "LogLevel=\"info level\"\n";
    dt_conf_t *c = dt_conf_parse ("t.conf", text, known, &err);
    int64_t i;
    bool b;

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    CU_ASSERT_STRING_EQUAL (dt_conf_get (c, "StateDir", NULL), "/var/lib/dtctl");
    CU_ASSERT_STRING_EQUAL (dt_conf_get (c, "statedir", NULL), "/var/lib/dtctl");
    CU_ASSERT_STRING_EQUAL (dt_conf_get (c, "LogLevel", NULL), "info level");
    CU_ASSERT_EQUAL (dt_conf_get_int (c, "ListenPort", 1, 1, 65535, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 6830);
    CU_ASSERT_EQUAL (dt_conf_get_duration_ms (c, "HeartbeatInterval", 1, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 5000);
    CU_ASSERT_EQUAL (dt_conf_get_duration_ms (c, "NodeTimeout", 1, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 90000);
    CU_ASSERT_EQUAL (dt_conf_get_bool (c, "Debug", false, &b, &err), 0);
    CU_ASSERT_EQUAL (b, true);
    dt_conf_destroy (c);
}

static void test_defaults_and_set (void)
{
    dt_error_t err = { "" };
    dt_conf_t *c = dt_conf_parse ("empty", "# nothing\n\n   \n", known, &err);
    int64_t i;
    bool b = true;

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    CU_ASSERT_STRING_EQUAL (dt_conf_get (c, "StateDir", "/dflt"), "/dflt");
    CU_ASSERT_PTR_NULL (dt_conf_get (c, "StateDir", NULL));
    CU_ASSERT_EQUAL (dt_conf_get_int (c, "ListenPort", 6830, 1, 65535, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 6830);
    CU_ASSERT_EQUAL (dt_conf_get_bool (c, "Debug", false, &b, &err), 0);
    CU_ASSERT_EQUAL (b, false);
    CU_ASSERT_EQUAL (dt_conf_get_duration_ms (c, "NodeTimeout", 60000, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 60000);

    /* command-line override */
    CU_ASSERT_EQUAL (dt_conf_set (c, "listenport", "7000", &err), 0);
    CU_ASSERT_EQUAL (dt_conf_get_int (c, "ListenPort", 6830, 1, 65535, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 7000);
    errno = 0;
    CU_ASSERT_EQUAL (dt_conf_set (c, "NoSuchKey", "1", &err), -1);
    CU_ASSERT_EQUAL (errno, EINVAL);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "NoSuchKey"));
    /* a bad value set from the command line names the key */
    CU_ASSERT_EQUAL (dt_conf_set (c, "ListenPort", "abc", &err), 0);
    CU_ASSERT_EQUAL (dt_conf_get_int (c, "ListenPort", 6830, 1, 65535, &i, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "ListenPort"));
    dt_conf_destroy (c);
}

/* Parse 'text', expect failure with errno and a message containing 'want'. */
static void parse_bad (const char *text, const char *want)
{
    dt_error_t err = { "" };
    errno = 0;
    dt_conf_t *c = dt_conf_parse ("bad.conf", text, known, &err);
    CU_ASSERT_PTR_NULL (c);
    CU_ASSERT_EQUAL (errno, EINVAL);
    if (!strstr (err.text, want))
        fprintf (stderr, "expected '%s' in '%s'\n", want, err.text);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, want));
    dt_conf_destroy (c);
}

static void test_bad_lines (void)
{
    parse_bad ("ListenPort=1\nthis is not a setting\n", "bad.conf:2: expected Key=Value");
    parse_bad ("\n\n\nFoo=bar\n", "bad.conf:4: unknown key 'Foo'");
    parse_bad ("ListenPort=1\n# c\nlistenport=2\n",
               "bad.conf:3: duplicate key 'ListenPort' (first set at line 1)");
    parse_bad ("=value\n", "bad.conf:1: invalid key ''");
    parse_bad ("List en=1\n", "bad.conf:1: invalid key 'List en'");
    parse_bad ("ListenPort\n", "bad.conf:1: expected Key=Value");
}

/* Typed getter on "Key=value" expecting failure with 'want' in err. */
static void get_bad (const char *line, int which, int errnum, const char *want)
{
    dt_error_t err = { "" };
    dt_conf_t *c = dt_conf_parse ("typed.conf", line, known, &err);
    int64_t i = 17;
    bool b = true;
    int rc;

    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    errno = 0;
    if (which == 0)
        rc = dt_conf_get_int (c, "ListenPort", 1, 1, 65535, &i, &err);
    else if (which == 1)
        rc = dt_conf_get_bool (c, "Debug", false, &b, &err);
    else
        rc = dt_conf_get_duration_ms (c, "NodeTimeout", 1, &i, &err);
    CU_ASSERT_EQUAL (rc, -1);
    CU_ASSERT_EQUAL (errno, errnum);
    CU_ASSERT_EQUAL (i, 17);
    CU_ASSERT_EQUAL (b, true);
    if (!strstr (err.text, want))
        fprintf (stderr, "expected '%s' in '%s'\n", want, err.text);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, want));
    dt_conf_destroy (c);
}

static void test_bad_values (void)
{
    get_bad ("ListenPort=abc", 0, EINVAL,
             "typed.conf:1: ListenPort: 'abc' is not an integer");
    get_bad ("ListenPort=12abc", 0, EINVAL, "not an integer");
    get_bad ("ListenPort=", 0, EINVAL, "not an integer");
    get_bad ("ListenPort=0", 0, ERANGE,
             "typed.conf:1: ListenPort: 0 is out of range [1, 65535]");
    get_bad ("ListenPort=65536", 0, ERANGE, "out of range");
    get_bad ("ListenPort=-1", 0, ERANGE, "out of range");
    get_bad ("ListenPort=99999999999999999999999", 0, ERANGE, "out of range");
    get_bad ("Debug=maybe", 1, EINVAL, "typed.conf:1: Debug: 'maybe' is not a boolean");
    get_bad ("NodeTimeout=5 minutes", 2, EINVAL, "typed.conf:1: NodeTimeout:");
    get_bad ("NodeTimeout=-5s", 2, EINVAL, "negative");
    get_bad ("NodeTimeout=99999999999999999999s", 2, ERANGE, "out of range");
}

static void test_load_file (void)
{
    char dir[] = "/tmp/test_conf.XXXXXX";
    char path[128];
    dt_error_t err = { "" };
    FILE *f;
    dt_conf_t *c;

    CU_ASSERT_PTR_NOT_NULL_FATAL (mkdtemp (dir));
    snprintf (path, sizeof (path), "%s/dtctld.conf", dir);

    /* missing file names the path and keeps errno */
    errno = 0;
    CU_ASSERT_PTR_NULL (dt_conf_load (path, known, &err));
    CU_ASSERT_EQUAL (errno, ENOENT);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, path));

    f = fopen (path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    fprintf (f, "StateDir=/x\nBogus=1\n");
    fclose (f);
    c = dt_conf_load (path, known, &err);
    CU_ASSERT_PTR_NULL (c);
    char want[200];
    snprintf (want, sizeof (want), "%s:2: unknown key 'Bogus'", path);
    CU_ASSERT_STRING_EQUAL (err.text, want);

    f = fopen (path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    fprintf (f, "StateDir=/x\r\nListenPort=1\r\n"); /* DOS line endings */
    fclose (f);
    c = dt_conf_load (path, known, &err);
    CU_ASSERT_PTR_NOT_NULL (c);
    CU_ASSERT_STRING_EQUAL (dt_conf_get (c, "StateDir", ""), "/x");
    dt_conf_destroy (c);

    /* binary junk is refused */
    f = fopen (path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    fwrite ("A=1\0\0\0", 1, 6, f);
    fclose (f);
    errno = 0;
    CU_ASSERT_PTR_NULL (dt_conf_load (path, known, &err));
    CU_ASSERT_EQUAL (errno, EINVAL);

    unlink (path);
    rmdir (dir);
}

static const struct dt_unit_test tests[] = {
    { "parse a good file", test_parse_good },
    { "defaults and command-line set", test_defaults_and_set },
    { "bad lines, unknown and duplicate keys", test_bad_lines },
    { "bad typed values, overflow", test_bad_values },
    { "load from file", test_load_file },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("conf", tests);
}
