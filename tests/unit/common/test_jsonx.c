/* test_jsonx.c: strict JSON decoding with field paths. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonx.h"
#include "tests/unit/unit.h"

static json_t *parse (const char *s)
{
    dt_error_t err = { "" };
    json_t *v = dt_json_parse (s, strlen (s), &err);
    if (!v)
        fprintf (stderr, "parse failed: %s\n", err.text);
    return v;
}

static void expect_err (int rc, int errnum, const dt_error_t *err, const char *want)
{
    CU_ASSERT_EQUAL (rc, -1);
    CU_ASSERT_EQUAL (errno, errnum);
    if (strcmp (err->text, want) != 0)
        fprintf (stderr, "expected '%s', got '%s'\n", want, err->text);
    CU_ASSERT_STRING_EQUAL (err->text, want);
}

static void test_parse_bad (void)
{
    const char *bad[] = {
        "",                                /* empty */
        "{",                               /* truncated */
        "{\"a\":1",                        /* truncated */
        "{\"a\":}",                        /* malformed */
        "{\"a\":1,}",                      /* trailing comma */
        "{'a':1}",                         /* single quotes */
        "{\"a\":1} junk",                  /* trailing data */
        "{\"a\":1}{\"b\":2}",              /* two documents */
        "{\"a\":1,\"a\":2}",               /* duplicate key */
        "[1,2",                            /* truncated array */
        "\"unterminated",                  /* truncated string */
        "{\"a\":99999999999999999999999}", /* integer overflow */
        "{\"a\":NaN}",
        "\xff\xfe",      /* not UTF-8 */
        "\"a\\u0000b\"", /* NUL inside a string */
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        dt_error_t err = { "" };
        errno = 0;
        json_t *v = dt_json_parse (bad[i], strlen (bad[i]), &err);
        CU_ASSERT_PTR_NULL (v);
        CU_ASSERT_EQUAL (errno, EPROTO);
        CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "invalid JSON at line"));
        json_decref (v);
    }
    /* a length shorter than the text truncates it */
    dt_error_t err = { "" };
    const char *s = "{\"a\":123}";
    CU_ASSERT_PTR_NULL (dt_json_parse (s, 5, &err));
    /* NULL buffer */
    CU_ASSERT_PTR_NULL (dt_json_parse (NULL, 0, &err));
    CU_ASSERT_EQUAL (errno, EPROTO);
}

static void test_parse_good (void)
{
    json_t *v = parse ("{\"a\": [1, 2.5, \"x\", true, null], \"b\": {}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    CU_ASSERT_EQUAL (json_array_size (json_object_get (v, "a")), 5);
    json_decref (v);
    v = parse ("42"); /* bare values are documents */
    CU_ASSERT_PTR_NOT_NULL_FATAL (v);
    CU_ASSERT_EQUAL (json_integer_value (v), 42);
    json_decref (v);
}

static void test_check_object (void)
{
    static const char *const allowed[] = { "name", "nodes", "checkpoint", NULL };
    dt_error_t err = { "" };
    json_t *v = parse ("{\"name\":\"x\",\"nodes\":2}");
    CU_ASSERT_EQUAL (dt_json_check_object (v, "", allowed, &err), 0);
    json_decref (v);

    v = parse ("{\"name\":\"x\",\"colour\":\"red\"}");
    errno = 0;
    expect_err (dt_json_check_object (v, "", allowed, &err), EPROTO, &err,
                "colour: unknown field");
    expect_err (dt_json_check_object (v, "spec", allowed, &err), EPROTO, &err,
                "spec.colour: unknown field");
    json_decref (v);

    v = parse ("[1]");
    expect_err (dt_json_check_object (v, "checkpoint", allowed, &err), EPROTO, &err,
                "checkpoint: expected object");
    json_decref (v);
}

static void test_getters (void)
{
    dt_error_t err = { "" };
    json_t *root = parse ("{\"checkpoint\": {\"every_steps\": \"ten\", \"keep\": 3,"
                          " \"dir\": \"/ckpt\", \"empty\": \"\", \"async\": true,"
                          " \"lr\": 0.5, \"big\": 9007199254740993,"
                          " \"opt\": null},"
                          " \"command\": [\"python\", \"train.py\", 7]}");
    json_t *ck = NULL, *cmd = NULL;
    json_int_t i = -1;
    double d = -1;
    bool b = false;
    const char *s = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL (root);
    CU_ASSERT_EQUAL (dt_json_get_obj (root, "", "checkpoint", true, &ck, &err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL (ck);

    /* wrong type, with the path of the field */
    expect_err (
      dt_json_get_int (ck, "checkpoint", "every_steps", true, 1, 1000000, &i, &err),
      EPROTO, &err, "checkpoint.every_steps: expected integer");
    CU_ASSERT_EQUAL (i, -1);
    /* good values */
    CU_ASSERT_EQUAL (dt_json_get_int (ck, "checkpoint", "keep", true, 1, 100, &i, &err),
                     0);
    CU_ASSERT_EQUAL (i, 3);
    CU_ASSERT_EQUAL (dt_json_get_str (ck, "checkpoint", "dir", true, 0, false, &s, &err),
                     0);
    CU_ASSERT_STRING_EQUAL (s, "/ckpt");
    CU_ASSERT_EQUAL (dt_json_get_bool (ck, "checkpoint", "async", true, &b, &err), 0);
    CU_ASSERT_EQUAL (b, true);
    CU_ASSERT_EQUAL (dt_json_get_real (ck, "checkpoint", "lr", true, 0, 1, &d, &err), 0);
    CU_ASSERT_DOUBLE_EQUAL (d, 0.5, 1e-12);
    /* an integer is a valid real */
    CU_ASSERT_EQUAL (dt_json_get_real (ck, "checkpoint", "keep", true, 0, 10, &d, &err),
                     0);
    CU_ASSERT_DOUBLE_EQUAL (d, 3.0, 1e-12);

    /* out of range */
    i = -1;
    expect_err (dt_json_get_int (ck, "checkpoint", "keep", true, 5, 10, &i, &err), ERANGE,
                &err, "checkpoint.keep: 3 out of range [5, 10]");
    CU_ASSERT_EQUAL (i, -1);
    expect_err (dt_json_get_int (ck, "checkpoint", "big", true, 0, 1LL << 53, &i, &err),
                ERANGE, &err,
                "checkpoint.big: 9007199254740993 out of range [0, 9007199254740992]");
    expect_err (dt_json_get_real (ck, "checkpoint", "lr", true, 1, 2, &d, &err), ERANGE,
                &err, "checkpoint.lr: 0.5 out of range [1, 2]");
    /* missing required, optional absent, optional null */
    expect_err (dt_json_get_int (ck, "checkpoint", "missing", true, 0, 10, &i, &err),
                EPROTO, &err, "checkpoint.missing: required field missing");
    i = 77;
    CU_ASSERT_EQUAL (
      dt_json_get_int (ck, "checkpoint", "missing", false, 0, 10, &i, &err), 0);
    CU_ASSERT_EQUAL (i, 77);
    CU_ASSERT_EQUAL (dt_json_get_int (ck, "checkpoint", "opt", false, 0, 10, &i, &err),
                     0);
    CU_ASSERT_EQUAL (i, 77);
    expect_err (dt_json_get_int (ck, "checkpoint", "opt", true, 0, 10, &i, &err), EPROTO,
                &err, "checkpoint.opt: expected integer");
    /* strings */
    expect_err (dt_json_get_str (ck, "checkpoint", "empty", true, 0, false, &s, &err),
                EPROTO, &err, "checkpoint.empty: must not be empty");
    CU_ASSERT_EQUAL (dt_json_get_str (ck, "checkpoint", "empty", true, 0, true, &s, &err),
                     0);
    CU_ASSERT_STRING_EQUAL (s, "");
    expect_err (dt_json_get_str (ck, "checkpoint", "dir", true, 3, false, &s, &err),
                ERANGE, &err, "checkpoint.dir: longer than 3 characters");
    /* a NUL inside a string built by hand (the parser already refuses it) */
    json_object_set_new (ck, "nul", json_stringn ("a\0b", 3));
    expect_err (dt_json_get_str (ck, "checkpoint", "nul", true, 0, false, &s, &err),
                EPROTO, &err, "checkpoint.nul: contains a NUL character");
    expect_err (dt_json_get_str (ck, "checkpoint", "keep", true, 0, false, &s, &err),
                EPROTO, &err, "checkpoint.keep: expected string");
    expect_err (dt_json_get_bool (ck, "checkpoint", "keep", true, &b, &err), EPROTO, &err,
                "checkpoint.keep: expected boolean");
    expect_err (dt_json_get_real (ck, "checkpoint", "dir", true, 0, 1, &d, &err), EPROTO,
                &err, "checkpoint.dir: expected number");
    expect_err (dt_json_get_arr (ck, "checkpoint", "dir", true, &cmd, &err), EPROTO, &err,
                "checkpoint.dir: expected array");
    expect_err (dt_json_get_obj (root, "", "command", true, &ck, &err), EPROTO, &err,
                "command: expected object");

    /* array elements get [i] paths */
    CU_ASSERT_EQUAL (dt_json_get_arr (root, "", "command", true, &cmd, &err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL (cmd);
    char p[64];
    size_t idx;
    json_t *el;
    int bad = 0;
    json_array_foreach (cmd, idx, el)
    {
        if (!json_is_string (el)) {
            errprintf (&err, "%s: expected string",
                       dt_json_path_index (p, sizeof (p), "command", idx));
            bad++;
        }
    }
    CU_ASSERT_EQUAL (bad, 1);
    CU_ASSERT_STRING_EQUAL (err.text, "command[2]: expected string");

    /* getters on a non-object */
    expect_err (dt_json_get_int (cmd, "command", "x", true, 0, 1, &i, &err), EPROTO, &err,
                "command: expected object");
    json_decref (root);
}

static void test_paths_and_dumps (void)
{
    char buf[64];
    CU_ASSERT_STRING_EQUAL (dt_json_path (buf, sizeof (buf), "", "b"), "b");
    CU_ASSERT_STRING_EQUAL (dt_json_path (buf, sizeof (buf), NULL, "b"), "b");
    CU_ASSERT_STRING_EQUAL (dt_json_path (buf, sizeof (buf), "a", "b"), "a.b");
    CU_ASSERT_STRING_EQUAL (dt_json_path (buf, sizeof (buf), "a[1]", "b"), "a[1].b");
    CU_ASSERT_STRING_EQUAL (dt_json_path_index (buf, sizeof (buf), "a", 3), "a[3]");
    /* truncation stays NUL-terminated */
    CU_ASSERT_EQUAL (strlen (dt_json_path (buf, 4, "abc", "def")), 3);

    json_t *v = json_pack ("{s:i s:[s,b]}", "a", 1, "b", "x", 0);
    char *s = dt_json_dumps (v);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    CU_ASSERT_STRING_EQUAL (s, "{\"a\":1,\"b\":[\"x\",false]}");
    free (s);
    json_decref (v);
    v = json_integer (5);
    s = dt_json_dumps (v);
    CU_ASSERT_STRING_EQUAL (s, "5");
    free (s);
    json_decref (v);
}

static const struct dt_unit_test tests[] = {
    { "malformed and truncated JSON rejected", test_parse_bad },
    { "valid JSON parsed", test_parse_good },
    { "unknown fields rejected with path", test_check_object },
    { "typed getters: types, ranges, required, paths", test_getters },
    { "paths and dumps", test_paths_and_dumps },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("jsonx", tests);
}
