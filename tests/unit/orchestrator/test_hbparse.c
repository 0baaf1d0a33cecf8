/* test_hbparse.c: the heartbeat body parser (orchestrator/hbparse.c): its
 * fast path accepts only what the strict jansson path accepts, with the
 * same values, and every malformed body gets the 400 message (field path
 * included) that the heartbeat route has always given. */
#include <config.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/hbparse.h"
#include "tests/unit/unit.h"

static const char good[] =
  "{\"node\":\"node2\",\"ranks\":["
  "{\"rank\":2,\"local_rank\":0,\"pid\":555,\"state\":\"running\",\"client\":true,"
  "\"step\":120,\"loss\":2.31,\"samples\":64,\"compute_ms\":41.5,\"comm_ms\":3.2,"
  "\"busy\":false,\"waiting\":true,\"stopped\":false,"
  "\"dims\":[1024,0.5,0.5,0,0,0,4194304,12.25,1.5]},"
  "{\"rank\":3,\"local_rank\":1,\"pid\":556,\"state\":\"exited\",\"client\":false,"
  "\"step\":-1,\"loss\":-0.5,\"samples\":-1,\"compute_ms\":0,\"comm_ms\":1e-3,"
  "\"busy\":true,\"stopped\":true}]}";

static bool same_msg (const struct hb_msg *a, const struct hb_msg *b)
{
    if (strcmp (a->node, b->node) || a->nranks != b->nranks)
        return false;
    for (size_t i = 0; i < a->nranks; i++) {
        const struct hb_rank *x = &a->ranks[i], *y = &b->ranks[i];
        /* Bitwise for the doubles: -0.0 and 0.0 differ, as strtod's do. */
        if (x->has != y->has || x->rank != y->rank || x->local_rank != y->local_rank ||
            x->pid != y->pid || x->step != y->step || x->samples != y->samples ||
            memcmp (&x->loss, &y->loss, sizeof (double)) ||
            memcmp (&x->compute_ms, &y->compute_ms, sizeof (double)) ||
            memcmp (&x->comm_ms, &y->comm_ms, sizeof (double)) ||
            memcmp (x->dims, y->dims, sizeof (x->dims)) || x->client != y->client ||
            x->busy != y->busy || x->waiting != y->waiting || x->stopped != y->stopped ||
            strcmp (x->state, y->state))
            return false;
    }
    return true;
}

/* The invariant: whenever the fast path decodes a body, the general path
 * accepts it too, with the same values. */
static int fast_ok_general_agrees (const char *body, size_t len, int world)
{
    struct hb_msg f, g;
    dt_error_t err;
    hb_msg_init (&f);
    hb_msg_init (&g);
    int rc = hb_parse_fast (body, len, world, &f);
    if (rc == 1) {
        enum hb_result r = hb_parse_general (body, len, world, &g, &err);
        if (r != HB_OK || !same_msg (&f, &g)) {
            fprintf (stderr, "fast accepted, general %s: %.*s\n",
                     r == HB_OK ? "differs" : err.text, (int)len, body);
            rc = -2;
        }
    }
    hb_msg_free (&f);
    hb_msg_free (&g);
    return rc;
}

static void test_good (void)
{
    struct hb_msg m;
    dt_error_t err;
    hb_msg_init (&m);
    CU_ASSERT_EQUAL (hb_parse_fast (good, strlen (good), 8, &m), 1);
    CU_ASSERT_STRING_EQUAL (m.node, "node2");
    CU_ASSERT_EQUAL_FATAL (m.nranks, 2);
    CU_ASSERT_EQUAL (m.ranks[0].rank, 2);
    CU_ASSERT_EQUAL (m.ranks[0].pid, 555);
    CU_ASSERT_STRING_EQUAL (m.ranks[0].state, "running");
    CU_ASSERT (m.ranks[0].client && !m.ranks[0].busy);
    CU_ASSERT_EQUAL (m.ranks[0].step, 120);
    CU_ASSERT_EQUAL (m.ranks[0].samples, 64);
    CU_ASSERT_EQUAL (m.ranks[0].loss, 2.31);
    CU_ASSERT_EQUAL (m.ranks[0].compute_ms, 41.5);
    CU_ASSERT_EQUAL (m.ranks[0].comm_ms, 3.2);
    CU_ASSERT (m.ranks[0].waiting && !m.ranks[0].stopped);
    CU_ASSERT_EQUAL (m.ranks[0].has, 0xfff | HB_DIMS);
    CU_ASSERT_EQUAL (m.ranks[0].dims[0], 1024);
    CU_ASSERT_EQUAL (m.ranks[0].dims[7], 12.25);
    CU_ASSERT_EQUAL (m.ranks[0].dims[8], 1.5);
    CU_ASSERT_EQUAL (m.ranks[1].dims[6], 0);
    CU_ASSERT_EQUAL (m.ranks[1].step, -1);
    CU_ASSERT_EQUAL (m.ranks[1].loss, -0.5);
    CU_ASSERT_EQUAL (m.ranks[1].comm_ms, 1e-3);
    CU_ASSERT (m.ranks[1].busy && !m.ranks[1].client);
    CU_ASSERT (m.ranks[1].stopped && !m.ranks[1].waiting);
    CU_ASSERT_EQUAL (m.ranks[1].has, 0x3ff | HB_STOPPED);
    CU_ASSERT_EQUAL (fast_ok_general_agrees (good, strlen (good), 8), 1);
    CU_ASSERT_EQUAL (hb_parse (good, strlen (good), 8, &m, &err), HB_OK);
    hb_msg_free (&m);
}

/* Valid bodies: each decodes (through either path) to what jansson says. */
static void test_valid_variants (void)
{
    static const struct {
        const char *body;
        int fast; /* 1: the fast path takes it, 0: the general path does */
    } cases[] = {
        { "{\"node\":\"n\",\"ranks\":[]}", 1 },
        { " \t\r\n{ \"ranks\" : [ ] , \"node\" : \"n\" } \n", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"busy\":true,\"rank\":7}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":null,\"state\":null,\"step\":"
          "null}]}",
          1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":-0,\"compute_ms\":12,\"comm_"
          "ms\":0.0}]}",
          1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":-0.0}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":123456789012345678}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":0.30000000000000004}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":2.3100000000000001}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":1E+2,\"comm_ms\":5e-324}]}",
          1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":1.7976931348623157e308}]}",
          1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"step\":9223372036854775807}]}", 0 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"compute_ms\":1000000000000}]}", 1 },
        { "{\"node\":\"n\\u0031\",\"ranks\":[]}", 0 },
        { "{\"node\":\"n\\u00e9\",\"ranks\":[]}", 0 },
        { "{\"node\":\"n\xc3\xa9\",\"ranks\":[]}", 0 },
        { "{\"n\\u006fde\":\"n\",\"ranks\":[]}", 0 },
        { "{\"node\":\"123456789012345678901234567890123456789012345678901234567890123\","
          "\"ranks\":[]}",
          1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"state\":\"123456789012345\"}]}", 1 },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"local_rank\":1048576,\"pid\":"
          "2147483647}]}",
          1 },
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        const char *b = cases[i].body;
        struct hb_msg m;
        dt_error_t err;
        hb_msg_init (&m);
        int f = fast_ok_general_agrees (b, strlen (b), 8);
        enum hb_result r = hb_parse (b, strlen (b), 8, &m, &err);
        if (f != cases[i].fast || r != HB_OK)
            fprintf (stderr, "case %zu: fast %d, result %d (%s): %s\n", i, f, r,
                     r == HB_OK ? "" : err.text, b);
        CU_ASSERT_EQUAL (f, cases[i].fast);
        CU_ASSERT_EQUAL (r, HB_OK);
        hb_msg_free (&m);
    }
}

/* Malformed bodies: the fast path leaves them all to the general one, and
 * the answer is today's (the heartbeat route's 400, with its field path). */
static void test_malformed (void)
{
    static const struct {
        const char *body;
        enum hb_result rc;
        bool node_set; /* top level valid, a rank entry at fault */
        const char *text;
    } cases[] = {
        { "", HB_ERR_BODY, false, "expected a JSON object" },
        { "[]", HB_ERR_BODY, false, "expected a JSON object" },
        { "\"node\"", HB_ERR_BODY, false, "expected a JSON object" },
        { "{", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 1: "
          "string or '}' expected near end of file" },
        { "{\"node\":\"n\",\"ranks\":[]} x", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 25: end of file expected near 'x'" },
        { "{\"node\":\"n\",\"node\":\"m\",\"ranks\":[]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 18: duplicate object key near '\"node\"'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":01}]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 30: invalid token near '0'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":1.}]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 31: invalid token near '1.'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"step\":99999999999999999999}]}",
          HB_ERR_BODY, false,
          "invalid JSON at line 1 column 58: too big integer near "
          "'99999999999999999999'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":1e999}]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 43: real number overflow near '1e999'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,}]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 32: string or '}' expected near '}'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"rank\":1}]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 37: duplicate object key near '\"rank\"'" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":tru}]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 32: invalid token near 'tru'" },
        { "{}", HB_ERR_FIELD, false, "node: required field missing" },
        { "{\"node\":\"n\"}", HB_ERR_FIELD, false, "ranks: required field missing" },
        { "{\"ranks\":[]}", HB_ERR_FIELD, false, "node: required field missing" },
        { "{\"node\":\"n\",\"ranks\":[],\"x\":1}", HB_ERR_FIELD, false,
          "x: unknown field" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":{}}", HB_ERR_FIELD, false,
          "unheard: expected an array of at most 64 objects" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":[{\"node\":\"m\"}]}", HB_ERR_FIELD,
          false, "unheard[0].ms: required field missing" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":[{\"ms\":5}]}", HB_ERR_FIELD, false,
          "unheard[0]: expected exactly one of node and relay" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":[{\"node\":\"m\",\"ms\":-1}]}",
          HB_ERR_FIELD, false,
          "unheard[0].ms: -1 out of range [0, 9223372036854775807]" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":[{\"node\":\"m\",\"ms\":1,\"y\":2}]}",
          HB_ERR_FIELD, false, "unheard[0].y: unknown field" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":[{\"node\":\"m\",\"ms\":1,"
          "\"closed\":1}]}",
          HB_ERR_FIELD, false, "unheard[0].closed: expected boolean" },
        { "{\"node\":\"n\",\"ranks\":[],\"unheard\":[{\"relay\":\"http://a:1\","
          "\"ms\":1,\"closed\":true}]}",
          HB_ERR_FIELD, false, "unheard[0].closed: only a child (node) can be closed" },
        { "{\"node\":\"\",\"ranks\":[]}", HB_ERR_FIELD, false,
          "node: must not be empty" },
        { "{\"node\":null,\"ranks\":[]}", HB_ERR_FIELD, false, "node: expected string" },
        { "{\"node\":7,\"ranks\":[]}", HB_ERR_FIELD, false, "node: expected string" },
        { "{\"node\":"
          "\"1234567890123456789012345678901234567890123456789012345678901234\","
          "\"ranks\":[]}",
          HB_ERR_FIELD, false, "node: longer than 63 characters" },
        { "{\"node\":\"n\\u0000\",\"ranks\":[]}", HB_ERR_BODY, false,
          "invalid JSON at line 1 column 17: \\u0000 is not allowed without "
          "JSON_ALLOW_NUL "
          "near '\"n\\u0000\"'" },
        { "{\"node\":\"n\",\"ranks\":{}}", HB_ERR_FIELD, false, "ranks: expected array" },
        { "{\"node\":\"n\",\"ranks\":null}", HB_ERR_FIELD, false,
          "ranks: expected array" },
        { "{\"node\":\"n\",\"ranks\":[1]}", HB_ERR_FIELD, true,
          "ranks[0]: expected object" },
        { "{\"node\":\"n\",\"ranks\":[{}]}", HB_ERR_FIELD, true,
          "ranks[0].rank: required field missing" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0},{\"rank\":null}]}", HB_ERR_FIELD, true,
          "ranks[1].rank: expected integer" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":8}]}", HB_ERR_FIELD, true,
          "ranks[0].rank: 8 out of range [0, 7]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":-1}]}", HB_ERR_FIELD, true,
          "ranks[0].rank: -1 out of range [0, 7]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":1.0}]}", HB_ERR_FIELD, true,
          "ranks[0].rank: expected integer" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":\"1\"}]}", HB_ERR_FIELD, true,
          "ranks[0].rank: expected integer" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"extra\":1}]}", HB_ERR_FIELD, true,
          "ranks[0].extra: unknown field" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"local_rank\":1048577}]}",
          HB_ERR_FIELD, true, "ranks[0].local_rank: 1048577 out of range [0, 1048576]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"pid\":-2}]}", HB_ERR_FIELD, true,
          "ranks[0].pid: -2 out of range [0, 2147483647]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"state\":\"\"}]}", HB_ERR_FIELD, true,
          "ranks[0].state: must not be empty" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"state\":\"1234567890123456\"}]}",
          HB_ERR_FIELD, true, "ranks[0].state: longer than 15 characters" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"state\":1}]}", HB_ERR_FIELD, true,
          "ranks[0].state: expected string" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"client\":1}]}", HB_ERR_FIELD, true,
          "ranks[0].client: expected boolean" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"busy\":\"true\"}]}", HB_ERR_FIELD,
          true, "ranks[0].busy: expected boolean" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"step\":-2}]}", HB_ERR_FIELD, true,
          "ranks[0].step: -2 out of range [-1, 9223372036854775807]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"samples\":1e3}]}", HB_ERR_FIELD, true,
          "ranks[0].samples: expected integer" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"loss\":\"x\"}]}", HB_ERR_FIELD, true,
          "ranks[0].loss: expected number" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"compute_ms\":-0.5}]}", HB_ERR_FIELD,
          true, "ranks[0].compute_ms: -0.5 out of range [0, 1e+12]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"comm_ms\":1e13}]}", HB_ERR_FIELD,
          true, "ranks[0].comm_ms: 1e+13 out of range [0, 1e+12]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"dims\":[1,2,3]}]}", HB_ERR_FIELD,
          true, "ranks[0].dims: expected an array of 9 numbers" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0,\"dims\":[0,0,0,0,-1,0,0,0,0]}]}",
          HB_ERR_FIELD, true, "ranks[0].dims[4]: expected a number in [0, 1e+12]" },
        { "{\"node\":\"n\",\"ranks\":[{\"rank\":0},{\"rank\":1},{\"rank\":2,\"pid\":true}"
          "]}",
          HB_ERR_FIELD, true, "ranks[2].pid: expected integer" },
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        const char *b = cases[i].body;
        size_t len = strlen (b);
        struct hb_msg m;
        dt_error_t err = { "" };
        hb_msg_init (&m);
        CU_ASSERT_EQUAL (fast_ok_general_agrees (b, len, 8), 0);
        enum hb_result r = hb_parse (b, len, 8, &m, &err);
        bool ok = r == cases[i].rc && (m.node[0] != '\0') == cases[i].node_set &&
                  !strcmp (err.text, cases[i].text);
        if (!ok)
            fprintf (stderr, "case %zu: result %d node '%s' text '%s': %s\n", i, r,
                     m.node, err.text, b);
        CU_ASSERT (ok);
        hb_msg_free (&m);
    }
}

/* A NUL byte inside the body (in a string, after the object): refused by
 * jansson, never decoded by the fast path. */
static void test_nul (void)
{
    static const char in_string[] = "{\"node\":\"n\0\",\"ranks\":[]}";
    static const char after[] = "{\"node\":\"n\",\"ranks\":[]}\0";
    struct hb_msg m;
    dt_error_t err;
    hb_msg_init (&m);
    CU_ASSERT_EQUAL (fast_ok_general_agrees (in_string, sizeof (in_string) - 1, 8), 0);
    CU_ASSERT_EQUAL (hb_parse (in_string, sizeof (in_string) - 1, 8, &m, &err),
                     HB_ERR_BODY);
    CU_ASSERT_EQUAL (fast_ok_general_agrees (after, sizeof (after) - 1, 8), 0);
    CU_ASSERT_EQUAL (hb_parse (after, sizeof (after) - 1, 8, &m, &err), HB_ERR_BODY);
    hb_msg_free (&m);
}

/* Every truncation, deletion and one-byte change of a valid body: the fast
 * path never accepts what the general path refuses, nor decodes anything
 * to other values. */
static void test_mutations (void)
{
    static const char repl[] = "{}[],:\"\\ 0123456789-+.eEtfnulx\x01\x7f\xc3";
    char buf[sizeof (good) + 8];
    size_t n = strlen (good);
    long bad = 0, fast = 0, tried = 0;

    for (size_t cut = 0; cut <= n; cut++) {
        tried++;
        int rc = fast_ok_general_agrees (good, cut, 8);
        bad += rc == -2;
        fast += rc == 1;
    }
    for (size_t at = 0; at < n; at++) {
        memcpy (buf, good, at);
        memcpy (buf + at, good + at + 1, n - at - 1);
        tried++;
        int rc = fast_ok_general_agrees (buf, n - 1, 8);
        bad += rc == -2;
        fast += rc == 1;
        for (size_t k = 0; k < sizeof (repl) - 1; k++) {
            memcpy (buf, good, n);
            buf[at] = repl[k];
            tried++;
            rc = fast_ok_general_agrees (buf, n, 8);
            bad += rc == -2;
            fast += rc == 1;
        }
    }
    fprintf (stderr, "%ld mutated bodies, %ld decoded by the fast path\n", tried, fast);
    CU_ASSERT_EQUAL (bad, 0);
    CU_ASSERT (fast > 0);
}

/* Many ranks: the buffer grows and is kept. */
static void test_many_ranks (void)
{
    static char b[1 << 16];
    size_t n = snprintf (b, sizeof (b), "{\"node\":\"n\",\"ranks\":[");
    for (int r = 0; r < 500; r++)
        n +=
          snprintf (b + n, sizeof (b) - n, "%s{\"rank\":%d,\"step\":%d,\"loss\":%d.25}",
                    r ? "," : "", r, r * 3, r);
    n += snprintf (b + n, sizeof (b) - n, "]}");
    struct hb_msg m;
    dt_error_t err;
    hb_msg_init (&m);
    CU_ASSERT_EQUAL (hb_parse (b, n, 500, &m, &err), HB_OK);
    CU_ASSERT_EQUAL_FATAL (m.nranks, 500);
    CU_ASSERT_EQUAL (m.ranks[499].rank, 499);
    CU_ASSERT_EQUAL (m.ranks[499].step, 1497);
    CU_ASSERT_EQUAL (m.ranks[499].loss, 499.25);
    CU_ASSERT (m.cap >= 500);
    CU_ASSERT_EQUAL (fast_ok_general_agrees (b, n, 500), 1);
    /* One rank too many for the attempt: the last entry is at fault. */
    CU_ASSERT_EQUAL (hb_parse (b, n, 499, &m, &err), HB_ERR_FIELD);
    CU_ASSERT_STRING_EQUAL (err.text, "ranks[499].rank: 499 out of range [0, 498]");
    hb_msg_free (&m);
}

/* "unheard": a relay's silent children and a child's lost relay. */
static void test_unheard (void)
{
    static const char body[] =
      "{\"node\":\"r\",\"ranks\":[{\"rank\":0}],\"unheard\":["
      "{\"node\":\"c1\",\"ms\":1400},{\"relay\":\"http://10.0.0.1:4000\",\"ms\":0},"
      "{\"node\":\"c2\",\"ms\":30,\"closed\":true}]}";
    struct hb_msg m;
    dt_error_t err;
    hb_msg_init (&m);
    CU_ASSERT_EQUAL_FATAL (hb_parse (body, strlen (body), 4, &m, &err), HB_OK);
    CU_ASSERT_STRING_EQUAL (m.node, "r");
    CU_ASSERT_EQUAL (m.nranks, 1);
    CU_ASSERT_EQUAL_FATAL (m.nunheard, 3);
    CU_ASSERT_STRING_EQUAL (m.unheard[0].node, "c1");
    CU_ASSERT_STRING_EQUAL (m.unheard[0].relay, "");
    CU_ASSERT_EQUAL (m.unheard[0].ms, 1400);
    CU_ASSERT_FALSE (m.unheard[0].closed);
    CU_ASSERT_STRING_EQUAL (m.unheard[1].node, "");
    CU_ASSERT_STRING_EQUAL (m.unheard[1].relay, "http://10.0.0.1:4000");
    CU_ASSERT_STRING_EQUAL (m.unheard[2].node, "c2");
    CU_ASSERT_TRUE (m.unheard[2].closed);
    /* The next heartbeat without it has none. */
    CU_ASSERT_EQUAL (hb_parse (good, strlen (good), 8, &m, &err), HB_OK);
    CU_ASSERT_EQUAL (m.nunheard, 0);
    hb_msg_free (&m);
}

int main (void)
{
    static const struct dt_unit_test tests[] = {
        { "a well-formed heartbeat", test_good },
        { "valid variants decode as jansson does", test_valid_variants },
        { "malformed bodies keep their 400 messages", test_malformed },
        { "NUL bytes", test_nul },
        { "mutations never pass the fast path alone", test_mutations },
        { "many ranks", test_many_ranks },
        { "unheard neighbours", test_unheard },
        { NULL, NULL },
    };
    return dt_unit_run ("hbparse", tests);
}
