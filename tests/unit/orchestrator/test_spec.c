/* test_spec.c: job spec validation (orchestrator/spec.c): defaults, and
 * every invalid spec refused with the path of the wrong field. */
#include <config.h>
#include <string.h>
#include <jansson.h>
#include "orchestrator/spec.h"
#include "tests/unit/unit.h"

static const struct spec_defaults defaults = {
    .checkpoint_root = "/ckpt",
    .heartbeat_interval_ms = 1000,
    .node_timeout_ms = 10000,
    .hang_timeout_ms = 0,
};

static json_t *validate (const char *text, dt_error_t *err)
{
    json_error_t jerr;
    json_t *in = json_loads (text, 0, &jerr);
    if (!in) {
        fprintf (stderr, "bad test JSON: %s: %s\n", text, jerr.text);
        return NULL;
    }
    json_t *out = spec_validate (in, &defaults, err);
    json_decref (in);
    return out;
}

static void test_defaults (void)
{
    dt_error_t err;
    json_t *s = validate ("{\"command\": [\"dttrain\", \"--steps\", \"10\"]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    int64_t nodes, spares, rpn, every, keep, maxr, minn, hb, nt, ht, win, tl;
    double thr;
    const char *name, *wd, *dir, *action;
    int excl;
    json_t *part, *env;
    CU_ASSERT_EQUAL (
      json_unpack (
        s,
        "{s:s s:I s:I s:I s:o s:s s:o s:I"
        " s:{s:s s:I s:I} s:{s:I s:b s:I} s:{s:I s:I s:I}"
        " s:{s:f s:I s:s}}",
        "name", &name, "nodes", &nodes, "spare_nodes", &spares, "ranks_per_node", &rpn,
        "env", &env, "workdir", &wd, "partition", &part, "time_limit", &tl, "checkpoint",
        "dir", &dir, "every_steps", &every, "keep", &keep, "restart", "max_restarts",
        &maxr, "exclude_failed_nodes", &excl, "min_nodes", &minn, "heartbeat",
        "interval_ms", &hb, "node_timeout_ms", &nt, "hang_timeout_ms", &ht, "straggler",
        "threshold", &thr, "window_steps", &win, "action", &action),
      0);
    CU_ASSERT_STRING_EQUAL (name, "job");
    CU_ASSERT_EQUAL (nodes, 1);
    CU_ASSERT_EQUAL (spares, 0);
    CU_ASSERT_EQUAL (rpn, 1);
    CU_ASSERT_EQUAL (json_object_size (env), 0);
    CU_ASSERT_STRING_EQUAL (wd, "/tmp");
    CU_ASSERT (json_is_null (part));
    CU_ASSERT_EQUAL (tl, 0);
    CU_ASSERT_STRING_EQUAL (dir, "/ckpt");
    CU_ASSERT_EQUAL (every, 100);
    CU_ASSERT_EQUAL (keep, 2);
    CU_ASSERT_EQUAL (maxr, 3);
    CU_ASSERT_EQUAL (excl, 1);
    CU_ASSERT_EQUAL (minn, 1);
    CU_ASSERT_EQUAL (hb, 1000);
    CU_ASSERT_EQUAL (nt, 10000);
    CU_ASSERT_EQUAL (ht, 0);
    /* no tree unless asked (the default TreeWidth is 0) */
    CU_ASSERT_EQUAL (json_integer_value (
                       json_object_get (json_object_get (s, "heartbeat"), "tree_width")),
                     0);
    CU_ASSERT_DOUBLE_EQUAL (thr, 0.75, 1e-9);
    CU_ASSERT_EQUAL (win, 20);
    CU_ASSERT_STRING_EQUAL (action, "report");
    CU_ASSERT_EQUAL (json_array_size (json_object_get (s, "command")), 3);
    struct job_spec js;
    spec_parse (s, &js);
    CU_ASSERT_EQUAL (js.parallel.tp, 1);
    CU_ASSERT_EQUAL (js.parallel.pp, 1);
    json_decref (s);
    /* a layout: 4 nodes x 2 ranks hold 2 groups of tp 2 x pp 2 */
    s = validate ("{\"command\": [\"x\"], \"nodes\": 4, \"ranks_per_node\": 2,"
                  " \"parallel\": {\"tp\": 2, \"pp\": 2}}",
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    spec_parse (s, &js);
    CU_ASSERT_EQUAL (js.parallel.tp, 2);
    CU_ASSERT_EQUAL (js.parallel.pp, 2);
    CU_ASSERT_EQUAL (js.parallel.nshrink, 0);
    CU_ASSERT_PTR_NULL (json_object_get (json_object_get (s, "parallel"), "shrink"));
    json_decref (s);
    /* parallel.shrink: pp then tp may be reduced, so min_nodes 1 (one rank)
     * holds the smallest group */
    s = validate ("{\"command\": [\"x\"], \"nodes\": 4,"
                  " \"parallel\": {\"tp\": 2, \"pp\": 2, \"shrink\": [\"pp\", \"tp\"]},"
                  " \"restart\": {\"min_nodes\": 1}}",
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    spec_parse (s, &js);
    CU_ASSERT_EQUAL (js.parallel.nshrink, 2);
    CU_ASSERT_EQUAL (js.parallel.shrink[0], SPEC_DIM_PP);
    CU_ASSERT_EQUAL (js.parallel.shrink[1], SPEC_DIM_TP);
    CU_ASSERT_EQUAL (
      json_array_size (json_object_get (json_object_get (s, "parallel"), "shrink")), 2);
    CU_ASSERT_FALSE (js.parallel.zero1);
    CU_ASSERT_PTR_NULL (json_object_get (json_object_get (s, "parallel"), "zero1"));
    json_decref (s);
    /* parallel.zero1: kept in the normalized spec only when true */
    s = validate ("{\"command\": [\"x\"], \"nodes\": 2, \"parallel\": {\"zero1\": true}}",
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    spec_parse (s, &js);
    CU_ASSERT_TRUE (js.parallel.zero1);
    CU_ASSERT_TRUE (
      json_is_true (json_object_get (json_object_get (s, "parallel"), "zero1")));
    json_decref (s);
}

static void test_full_valid (void)
{
    dt_error_t err;
    json_t *s =
      validate ("{\"name\": \"gpt-small.2\", \"nodes\": 4, \"spare_nodes\": 1,"
                " \"ranks_per_node\": 2, \"command\": [\"dttrain\"],"
                " \"env\": {\"OMP_NUM_THREADS\": \"2\"}, \"workdir\": \"/home/a\","
                " \"partition\": \"gpu\", \"time_limit\": \"1-02:00:00\","
                " \"checkpoint\": {\"dir\": \"/scratch/c\", \"every_steps\": 0,"
                " \"keep\": 5}, \"restart\": {\"max_restarts\": 0, \"min_nodes\": 2,"
                " \"exclude_failed_nodes\": false},"
                " \"heartbeat\": {\"interval_ms\": 200, \"hang_timeout_ms\": 5000,"
                " \"tree_width\": 16},"
                " \"straggler\": {\"threshold\": 1, \"window_steps\": 5,"
                " \"action\": \"exclude\"}}",
                &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (s, "time_limit")), 26 * 3600);
    json_t *hb = json_object_get (s, "heartbeat");
    /* node_timeout_ms keeps the conf default when it is >= 2 intervals */
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (hb, "node_timeout_ms")), 10000);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (hb, "interval_ms")), 200);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (hb, "tree_width")), 16);
    CU_ASSERT_STRING_EQUAL (
      json_string_value (json_object_get (json_object_get (s, "straggler"), "action")),
      "exclude");
    json_decref (s);
    s = validate ("{\"command\": [\"x\"], \"time_limit\": 90}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (s, "time_limit")), 90);
    json_decref (s);
    /* The largest job: 65,536 nodes (a fan-in tree reaches them), one
     * rank each (the world's limit). */
    s = validate ("{\"command\": [\"x\"], \"nodes\": 65536, \"heartbeat\":"
                  " {\"tree_width\": 256}}",
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    CU_ASSERT_EQUAL (json_integer_value (json_object_get (s, "nodes")), 65536);
    json_decref (s);
    s = validate ("{\"command\": [\"x\"], \"nodes\": 20000, \"spare_nodes\": 16,"
                  " \"ranks_per_node\": 2}",
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (s);
    json_decref (s);
}

/* Each invalid spec and the field path its error must name. */
static const struct {
    const char *spec;
    const char *field;
} invalid[] = {
    { "[]", "" },
    { "{}", "command" },
    { "{\"command\": []}", "command" },
    { "{\"command\": \"dttrain\"}", "command" },
    { "{\"command\": [\"dttrain\", 3]}", "command[1]" },
    { "{\"command\": [\"\"]}", "command[0]" },
    { "{\"command\": [\"x\"], \"bogus\": 1}", "bogus" },
    { "{\"command\": [\"x\"], \"name\": \"\"}", "name" },
    { "{\"command\": [\"x\"], \"name\": \"a b\"}", "name" },
    { "{\"command\": [\"x\"], \"name\": 7}", "name" },
    { "{\"command\": [\"x\"], \"nodes\": 0}", "nodes" },
    { "{\"command\": [\"x\"], \"nodes\": \"2\"}", "nodes" },
    { "{\"command\": [\"x\"], \"nodes\": 1.5}", "nodes" },
    { "{\"command\": [\"x\"], \"nodes\": 100000}", "nodes" },
    { "{\"command\": [\"x\"], \"nodes\": 65537}", "nodes" },
    { "{\"command\": [\"x\"], \"nodes\": 65536, \"spare_nodes\": 1}", "spare_nodes" },
    { "{\"command\": [\"x\"], \"nodes\": 40000, \"ranks_per_node\": 2}",
      "ranks_per_node" },
    { "{\"command\": [\"x\"], \"spare_nodes\": -1}", "spare_nodes" },
    { "{\"command\": [\"x\"], \"ranks_per_node\": 0}", "ranks_per_node" },
    { "{\"command\": [\"x\"], \"nodes\": 1000, \"ranks_per_node\": 1000}",
      "ranks_per_node" },
    { "{\"command\": [\"x\"], \"env\": []}", "env" },
    { "{\"command\": [\"x\"], \"env\": {\"A\": 1}}", "env.A" },
    { "{\"command\": [\"x\"], \"env\": {\"1A\": \"v\"}}", "env.1A" },
    { "{\"command\": [\"x\"], \"env\": {\"DT_TOKEN\": \"v\"}}", "env.DT_TOKEN" },
    { "{\"command\": [\"x\"], \"workdir\": \"relative/dir\"}", "workdir" },
    { "{\"command\": [\"x\"], \"workdir\": \"/a/../etc\"}", "workdir" },
    { "{\"command\": [\"x\"], \"partition\": \"a;b\"}", "partition" },
    { "{\"command\": [\"x\"], \"time_limit\": -5}", "time_limit" },
    { "{\"command\": [\"x\"], \"time_limit\": \"soon\"}", "time_limit" },
    { "{\"command\": [\"x\"], \"time_limit\": true}", "time_limit" },
    { "{\"command\": [\"x\"], \"checkpoint\": 5}", "checkpoint" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"every\": 5}}", "checkpoint.every" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"every_steps\": -1}}",
      "checkpoint.every_steps" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"keep\": 0}}", "checkpoint.keep" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"dir\": \"ckpt\"}}", "checkpoint.dir" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"dir\": \"/ckpt/\"}}", "checkpoint.dir" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"dir\": \"/a//b\"}}", "checkpoint.dir" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"dir\": \"/a/./b\"}}", "checkpoint.dir" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"dir\": \"/a/..\"}}", "checkpoint.dir" },
    { "{\"command\": [\"x\"], \"checkpoint\": {\"dir\": \"/a\\nb\"}}", "checkpoint.dir" },
    { "{\"command\": [\"x\"], \"restart\": {\"max_restarts\": -1}}",
      "restart.max_restarts" },
    { "{\"command\": [\"x\"], \"restart\": {\"exclude_failed_nodes\": 1}}",
      "restart.exclude_failed_nodes" },
    { "{\"command\": [\"x\"], \"nodes\": 2, \"restart\": {\"min_nodes\": 3}}",
      "restart.min_nodes" },
    { "{\"command\": [\"x\"], \"restart\": {\"reform\": 1}}", "restart.reform" },
    { "{\"command\": [\"x\"], \"heartbeat\": {\"interval_ms\": 10}}",
      "heartbeat.interval_ms" },
    { "{\"command\": [\"x\"], \"heartbeat\": {\"interval_ms\": 1000, "
      "\"node_timeout_ms\": 1500}}",
      "heartbeat.node_timeout_ms" },
    { "{\"command\": [\"x\"], \"heartbeat\": {\"hang_timeout_ms\": 10}}",
      "heartbeat.hang_timeout_ms" },
    { "{\"command\": [\"x\"], \"heartbeat\": {\"tree_width\": 4097}}",
      "heartbeat.tree_width" },
    { "{\"command\": [\"x\"], \"heartbeat\": {\"tree_width\": -1}}",
      "heartbeat.tree_width" },
    { "{\"command\": [\"x\"], \"heartbeat\": {\"tree_width\": \"wide\"}}",
      "heartbeat.tree_width" },
    { "{\"command\": [\"x\"], \"straggler\": {\"threshold\": 0}}",
      "straggler.threshold" },
    { "{\"command\": [\"x\"], \"straggler\": {\"threshold\": 1.5}}",
      "straggler.threshold" },
    { "{\"command\": [\"x\"], \"straggler\": {\"window_steps\": 1}}",
      "straggler.window_steps" },
    { "{\"command\": [\"x\"], \"straggler\": {\"action\": \"kill\"}}",
      "straggler.action" },
    { "{\"command\": [\"x\"], \"straggler\": {\"action\": \"report\", \"x\": 1}}",
      "straggler.x" },
    { "{\"command\": [\"x\"], \"parallel\": {\"tp\": 0}}", "parallel.tp" },
    { "{\"command\": [\"x\"], \"parallel\": {\"dp\": 2}}", "parallel.dp" },
    { "{\"command\": [\"x\"], \"nodes\": 3, \"parallel\": {\"tp\": 2}}", "parallel" },
    { "{\"command\": [\"x\"], \"nodes\": 4, \"parallel\": {\"tp\": 2, \"pp\": 2},"
      " \"restart\": {\"min_nodes\": 3}}",
      "parallel" },
    { "{\"command\": [\"x\"], \"parallel\": {\"shrink\": [\"dp\"]}}",
      "parallel.shrink[0]" },
    { "{\"command\": [\"x\"], \"parallel\": {\"shrink\": [\"tp\", \"tp\"]}}",
      "parallel.shrink[1]" },
    { "{\"command\": [\"x\"], \"parallel\": {\"shrink\": \"tp\"}}", "parallel.shrink" },
    { "{\"command\": [\"x\"], \"parallel\": {\"zero1\": 1}}", "parallel.zero1" },
    /* shrink [tp] leaves pp 2: one rank holds no group */
    { "{\"command\": [\"x\"], \"nodes\": 4, \"parallel\": {\"tp\": 2, \"pp\": 2,"
      " \"shrink\": [\"tp\"]}, \"restart\": {\"min_nodes\": 1}}",
      "parallel" },
};

static void test_invalid (void)
{
    size_t n = sizeof (invalid) / sizeof (invalid[0]);
    _Static_assert(sizeof (invalid) / sizeof (invalid[0]) >= 20,
                   "at least 20 invalid specs");
    for (size_t i = 0; i < n; i++) {
        dt_error_t err = { "" };
        char field[128];
        json_t *s = validate (invalid[i].spec, &err);
        if (s) {
            fprintf (stderr, "accepted: %s\n", invalid[i].spec);
            json_decref (s);
            CU_FAIL ("invalid spec accepted");
            continue;
        }
        spec_error_field (&err, field, sizeof (field));
        if (strcmp (field, invalid[i].field))
            fprintf (stderr, "%s\n  error \"%s\": field \"%s\", expected \"%s\"\n",
                     invalid[i].spec, err.text, field, invalid[i].field);
        CU_ASSERT_STRING_EQUAL (field, invalid[i].field);
        CU_ASSERT (strlen (err.text) > strlen (field));
    }
}

static const struct dt_unit_test tests[] = {
    { "defaults are filled in", test_defaults },
    { "a full valid spec, durations normalized", test_full_valid },
    { "invalid specs name their field", test_invalid },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("spec", tests);
}
