/* test_provenance.c: the provenance of an attempt (orchestrator/
 * provenance.c): how command[0] is resolved (as execvp would: a path
 * relative to the workdir, else the first executable file of PATH), which
 * commands are interpreters whose script is the trainer, and a file's
 * entry (size, sha256, or the error).  provenance.c is compiled into the
 * test for its static resolvers. */
#include "orchestrator/provenance.c"

#include "tests/unit/unit.h"

static char dir[] = "/tmp/test_provenance.XXXXXX";

static void put (const char *name, const char *text, mode_t mode)
{
    char p[512];
    snprintf (p, sizeof (p), "%s/%s", dir, name);
    FILE *f = fopen (p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL (f);
    fputs (text, f);
    fclose (f);
    CU_ASSERT_EQUAL (chmod (p, mode), 0);
}

static void test_interpreters (void)
{
    CU_ASSERT_TRUE (is_interpreter ("sh"));
    CU_ASSERT_TRUE (is_interpreter ("/usr/bin/python3"));
    CU_ASSERT_TRUE (is_interpreter ("python3.11"));
    CU_ASSERT_TRUE (is_interpreter ("/opt/conda/bin/torchrun"));
    CU_ASSERT_FALSE (is_interpreter ("shx"));
    CU_ASSERT_FALSE (is_interpreter ("pythonic"));
    CU_ASSERT_FALSE (is_interpreter ("/usr/bin/dttrain"));
    CU_ASSERT_FALSE (is_interpreter ("/bin/sh/x"));
}

static void test_resolve_command (void)
{
    char out[1024], want[600], sub[600];

    put ("prog", "#!/bin/sh\n", 0755);
    put ("data.txt", "not executable\n", 0644);
    snprintf (sub, sizeof (sub), "%s/bin", dir);
    CU_ASSERT_EQUAL_FATAL (mkdir (sub, 0755), 0);
    put ("bin/tool", "#!/bin/sh\n", 0755);
    put ("bin/data.txt", "#!/bin/sh\n", 0755);

    /* A path: relative to the workdir, and it must be a file. */
    CU_ASSERT_TRUE (resolve_command ("./prog", dir, NULL, out, sizeof (out)));
    snprintf (want, sizeof (want), "%s/./prog", dir);
    CU_ASSERT_STRING_EQUAL (out, want);
    snprintf (want, sizeof (want), "%s/prog", dir);
    CU_ASSERT_TRUE (resolve_command (want, "/elsewhere", NULL, out, sizeof (out)));
    CU_ASSERT_STRING_EQUAL (out, want);
    CU_ASSERT_FALSE (resolve_command ("./absent", dir, NULL, out, sizeof (out)));
    CU_ASSERT_FALSE (
      resolve_command ("bin", dir, ".", out, sizeof (out))); /* a directory */

    /* A name: the first executable file of the job's PATH, relative
     * elements (and an empty one, ".") taken from the workdir. */
    char path[1200];
    snprintf (path, sizeof (path), "/nonexistent:%s:bin", dir);
    CU_ASSERT_TRUE (resolve_command ("tool", dir, path, out, sizeof (out)));
    snprintf (want, sizeof (want), "%s/bin/tool", dir);
    CU_ASSERT_STRING_EQUAL (out, want);
    /* data.txt in the workdir is not executable: the one in bin is taken */
    CU_ASSERT_TRUE (resolve_command ("data.txt", dir, path, out, sizeof (out)));
    snprintf (want, sizeof (want), "%s/bin/data.txt", dir);
    CU_ASSERT_STRING_EQUAL (out, want);
    CU_ASSERT_TRUE (
      resolve_command ("prog", dir, "/nonexistent::/usr/bin", out, sizeof (out)));
    snprintf (want, sizeof (want), "%s/./prog", dir);
    CU_ASSERT_STRING_EQUAL (out, want);
    CU_ASSERT_FALSE (resolve_command ("tool", dir, "/nonexistent", out, sizeof (out)));
    /* Without a PATH in the job's env: the default one. */
    CU_ASSERT_TRUE (resolve_command ("sh", NULL, NULL, out, sizeof (out)));
    CU_ASSERT (!strcmp (out, "/usr/local/bin/sh") || !strcmp (out, "/usr/bin/sh") ||
               !strcmp (out, "/bin/sh"));
    /* A result that does not fit is no result. */
    char tiny[5];
    CU_ASSERT_FALSE (resolve_command ("sh", NULL, NULL, tiny, sizeof (tiny)));
}

static void test_file_entry (void)
{
    char p[512];
    put ("abc", "abc", 0644);
    snprintf (p, sizeof (p), "%s/abc", dir);
    json_t *e = provenance_file ("--data=abc", p);
    CU_ASSERT_PTR_NOT_NULL_FATAL (e);
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (e, "arg")), "--data=abc");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (e, "path")), p);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (e, "bytes")), 3);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (e, "sha256")),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (e, "hash")), "sha256");
    const char *mt = json_string_value (json_object_get (e, "mtime"));
    CU_ASSERT (mt && strlen (mt) == 24 && mt[23] == 'Z');
    CU_ASSERT_PTR_NULL (json_object_get (e, "error"));
    json_decref (e);
    put ("empty", "", 0644);
    snprintf (p, sizeof (p), "%s/empty", dir);
    e = provenance_file ("empty", p);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (e, "sha256")),
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    json_decref (e);
    e = provenance_file ("x", "/nonexistent/x");
    CU_ASSERT_STRING_EQUAL (json_string_value (json_object_get (e, "error")),
                            strerror (ENOENT));
    CU_ASSERT_PTR_NULL (json_object_get (e, "sha256"));
    json_decref (e);
}

static const struct dt_unit_test tests[] = {
    { "interpreters: by base name, python3.11 as python3", test_interpreters },
    { "command[0] resolved as execvp would, from the workdir", test_resolve_command },
    { "a file's entry: size, mtime, sha256; or its error", test_file_entry },
    { NULL, NULL },
};

int main (void)
{
    if (!mkdtemp (dir)) {
        perror (dir);
        return 99;
    }
    int rc = dt_unit_run ("provenance", tests);
    char cmd[600];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", dir);
    return rc;
}
