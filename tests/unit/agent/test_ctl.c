/* test_ctl.c: the agent's pure decoding (agent/ctl.c): base64 of the kv
 * relay (RFC 4648 vectors, refusal of bad input) and the controller's
 * "ready" answer (ctl_parse_layout: defaults, every field, refusals that
 * name the field). */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ctl.h"
#include "tests/unit/unit.h"

static void test_b64_vectors (void)
{
    /* RFC 4648 section 10 */
    const char *plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    const char *enc[] = {
        "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"
    };
    for (int i = 0; i < 7; i++) {
        char *e = b64_encode (plain[i], strlen (plain[i]));
        CU_ASSERT_PTR_NOT_NULL_FATAL (e);
        CU_ASSERT_STRING_EQUAL (e, enc[i]);
        void *d = NULL;
        size_t n = 99;
        CU_ASSERT_EQUAL (b64_decode (enc[i], &d, &n), 0);
        CU_ASSERT_EQUAL (n, strlen (plain[i]));
        CU_ASSERT (d && memcmp (d, plain[i], n) == 0);
        free (d);
        free (e);
    }
}

static void test_b64_binary_roundtrip (void)
{
    unsigned char buf[300];
    for (size_t i = 0; i < sizeof (buf); i++)
        buf[i] = (unsigned char)(i * 151 + 7);
    for (size_t n = 0; n <= sizeof (buf); n += 37) {
        char *e = b64_encode (buf, n);
        void *d = NULL;
        size_t m = 0;
        CU_ASSERT_EQUAL (strlen (e), (n + 2) / 3 * 4);
        CU_ASSERT_EQUAL (b64_decode (e, &d, &m), 0);
        CU_ASSERT (m == n && memcmp (d, buf, n) == 0);
        free (d);
        free (e);
    }
}

static void test_b64_refused (void)
{
    const char *bad[] = { "Zg=",      "Zg",   "Z===",       "Zm9v!A==",
                          "Zg==Zg==", "Z=g=", "not base64!" };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        void *d = NULL;
        size_t n = 0;
        errno = 0;
        CU_ASSERT_EQUAL (b64_decode (bad[i], &d, &n), -1);
        CU_ASSERT_EQUAL (errno, EINVAL);
        CU_ASSERT_PTR_NULL (d);
    }
}

static int parse (const char *json, struct layout *l, dt_error_t *err)
{
    json_error_t jerr;
    json_t *d = json_loads (json, 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL (d);
    int rc = ctl_parse_layout (d, l, err);
    json_decref (d);
    return rc;
}

static void test_layout_minimal (void)
{
    struct layout l;
    dt_error_t err = { "" };
    CU_ASSERT_EQUAL_FATAL (
      parse ("{\"job\": 4, \"attempt\": 2, \"command\": [\"a\", \"b c\"]}", &l, &err), 0);
    CU_ASSERT_EQUAL (l.job, 4);
    CU_ASSERT_EQUAL (l.attempt, 2);
    CU_ASSERT_STRING_EQUAL (l.run_id, "dt-4-a2");
    CU_ASSERT_STRING_EQUAL (l.master_addr, "127.0.0.1");
    CU_ASSERT_EQUAL (l.num_nodes, 1);
    CU_ASSERT_EQUAL (l.ranks_per_node, 1);
    CU_ASSERT_EQUAL (l.world_size, 1);
    CU_ASSERT_EQUAL (l.resume_step, -1);
    CU_ASSERT_EQUAL (l.heartbeat_interval_ms, 1000);
    CU_ASSERT_EQUAL (l.hang_timeout_ms, 30000);
    CU_ASSERT_EQUAL (l.node_timeout_ms, 10000);
    CU_ASSERT_FALSE (l.spare);
    CU_ASSERT_STRING_EQUAL (l.command[0], "a");
    CU_ASSERT_STRING_EQUAL (l.command[1], "b c");
    CU_ASSERT_PTR_NULL (l.command[2]);
    CU_ASSERT_PTR_NULL (l.env[0]);
    CU_ASSERT_PTR_NULL (l.workdir);
    layout_clear (&l);
}

static void test_layout_full (void)
{
    struct layout l;
    dt_error_t err = { "" };
    const char *j =
      "{\"job\": 9, \"attempt\": 3, \"run_id\": \"r\", \"node_rank\": 1, \"num_nodes\": "
      "2,"
      " \"ranks_per_node\": 4, \"world_size\": 8, \"master_addr\": \"10.0.0.1\","
      " \"master_port\": 29500, \"restart_count\": 2, \"max_restarts\": 5,"
      " \"command\": [\"t\"], \"env\": {\"K\": \"V\"}, \"workdir\": \"/w\","
      " \"checkpoint_dir\": \"/ck\", \"resume\": {\"step\": 40, \"dir\": "
      "\"/ck/step-40\"},"
      " \"heartbeat_interval_ms\": 200, \"hang_timeout_ms\": 4000, \"node_timeout_ms\": "
      "2500,"
      " \"checkpoint_every_steps\": 20, \"future_field\": true}";
    CU_ASSERT_EQUAL_FATAL (parse (j, &l, &err), 0);
    CU_ASSERT_STRING_EQUAL (l.run_id, "r");
    CU_ASSERT_EQUAL (l.node_rank, 1);
    CU_ASSERT_EQUAL (l.num_nodes, 2);
    CU_ASSERT_EQUAL (l.ranks_per_node, 4);
    CU_ASSERT_EQUAL (l.world_size, 8);
    CU_ASSERT_STRING_EQUAL (l.master_addr, "10.0.0.1");
    CU_ASSERT_EQUAL (l.master_port, 29500);
    CU_ASSERT_EQUAL (l.restart_count, 2);
    CU_ASSERT_EQUAL (l.max_restarts, 5);
    CU_ASSERT_STRING_EQUAL (l.env[0], "K=V");
    CU_ASSERT_PTR_NULL (l.env[1]);
    CU_ASSERT_STRING_EQUAL (l.workdir, "/w");
    CU_ASSERT_STRING_EQUAL (l.checkpoint_dir, "/ck");
    CU_ASSERT_EQUAL (l.resume_step, 40);
    CU_ASSERT_STRING_EQUAL (l.resume_dir, "/ck/step-40");
    CU_ASSERT_EQUAL (l.heartbeat_interval_ms, 200);
    CU_ASSERT_EQUAL (l.hang_timeout_ms, 4000);
    CU_ASSERT_EQUAL (l.node_timeout_ms, 2500);
    CU_ASSERT_EQUAL (l.checkpoint_every_steps, 20);
    layout_clear (&l);
    /* A spare needs no command. */
    CU_ASSERT_EQUAL (
      parse ("{\"job\": 1, \"attempt\": 1, \"spare\": true, \"node_rank\": -1}", &l,
             &err),
      0);
    CU_ASSERT_TRUE (l.spare);
    CU_ASSERT_PTR_NULL (l.command);
    layout_clear (&l);
}

static void test_layout_refused (void)
{
    struct {
        const char *json, *needle;
    } bad[] = {
        { "{\"attempt\": 1, \"command\": [\"a\"]}", "job" },
        { "{\"job\": 1, \"command\": [\"a\"]}", "attempt" },
        { "{\"job\": 1, \"attempt\": 1}", "command" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": []}", "command" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\", 2]}", "command[1]" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"env\": {\"K\": 1}}",
          "env.K" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"master_port\": 70000}",
          "master_port" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"heartbeat_interval_ms\": "
          "1}",
          "heartbeat_interval_ms" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"resume\": 5}", "resume" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"resume\": {\"dir\": "
          "\"/x\"}}",
          "step" },
        { "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"world_size\": 0}",
          "world_size" },
        { "{\"job\": \"1\", \"attempt\": 1, \"command\": [\"a\"]}", "job" },
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        struct layout l;
        dt_error_t err = { "" };
        memset (&l, 0x5a, sizeof (l));
        CU_ASSERT_EQUAL (parse (bad[i].json, &l, &err), -1);
        if (!strstr (err.text, bad[i].needle)) {
            fprintf (stderr, "%s: error '%s' does not name '%s'\n", bad[i].json, err.text,
                     bad[i].needle);
            CU_FAIL ("the error names the field");
        }
        CU_ASSERT_PTR_NULL (l.command); /* cleared: nothing to free */
        CU_ASSERT_PTR_NULL (l.run_id);
    }
}

/* The fan-in tree: null or absent is direct; an object names the width
 * and the ancestors, nearest first; a malformed one is refused. */
static void test_layout_tree (void)
{
    struct layout l;
    dt_error_t err = { "" };
    CU_ASSERT_EQUAL_FATAL (
      parse ("{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"tree\": null}", &l,
             &err),
      0);
    CU_ASSERT_EQUAL (l.tree_width, 0);
    CU_ASSERT_PTR_NULL (l.ancestors);
    layout_clear (&l);
    CU_ASSERT_EQUAL_FATAL (
      parse ("{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"tree\": {\"width\": 2,"
             " \"ancestors\": [\"http://10.0.0.2:4000\", \"http://10.0.0.1:4001\"],"
             " \"children\": 1}}",
             &l, &err),
      0);
    CU_ASSERT_EQUAL (l.tree_width, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL (l.ancestors);
    CU_ASSERT_STRING_EQUAL (l.ancestors[0], "http://10.0.0.2:4000");
    CU_ASSERT_STRING_EQUAL (l.ancestors[1], "http://10.0.0.1:4001");
    CU_ASSERT_PTR_NULL (l.ancestors[2]);
    layout_clear (&l);
    static const char *const bad[][2] = {
        { "{\"width\": 0, \"ancestors\": [\"http://x:1\"]}", "data.tree" },
        { "{\"width\": 2, \"ancestors\": []}", "data.tree.ancestors" },
        { "{\"width\": 2, \"ancestors\": [7]}", "data.tree.ancestors[0]" },
        { "{\"width\": 2}", "data.tree.ancestors" },
        { "\"wide\"", "data.tree" },
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        char j[512];
        snprintf (j, sizeof (j),
                  "{\"job\": 1, \"attempt\": 1, \"command\": [\"a\"], \"tree\": %s}",
                  bad[i][0]);
        err.text[0] = '\0';
        CU_ASSERT_EQUAL (parse (j, &l, &err), -1);
        if (!strstr (err.text, bad[i][1]))
            fprintf (stderr, "tree %s: error '%s' does not name %s\n", bad[i][0],
                     err.text, bad[i][1]);
        CU_ASSERT_PTR_NOT_NULL (strstr (err.text, bad[i][1]));
    }
}

static const struct dt_unit_test tests[] = {
    { "base64: RFC 4648 vectors", test_b64_vectors },
    { "base64: binary round trip", test_b64_binary_roundtrip },
    { "base64: bad input refused (EINVAL)", test_b64_refused },
    { "layout: defaults of a minimal answer", test_layout_minimal },
    { "layout: every field; a spare without a command", test_layout_full },
    { "layout: bad answers refused naming the field", test_layout_refused },
    { "layout: the fan-in tree", test_layout_tree },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("ctl", tests);
}
