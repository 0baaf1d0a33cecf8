/* test_tree.c: the fan-in tree's arithmetic: parents, children,
 * depths, and reattachment to the nearest live ancestor. */
#include <config.h>
#include <stdbool.h>
#include <string.h>

#include "common/tree.h"
#include "tests/unit/unit.h"

/* Width 2 over 5 nodes (the testbed's tree): the controller has 0 and 1,
 * node 0 has 2 and 3, node 1 has 4. */
static void test_width2_of_5 (void)
{
    int first;
    CU_ASSERT_EQUAL (dt_tree_parent (0, 5, 2), -1);
    CU_ASSERT_EQUAL (dt_tree_parent (1, 5, 2), -1);
    CU_ASSERT_EQUAL (dt_tree_parent (2, 5, 2), 0);
    CU_ASSERT_EQUAL (dt_tree_parent (3, 5, 2), 0);
    CU_ASSERT_EQUAL (dt_tree_parent (4, 5, 2), 1);
    CU_ASSERT_EQUAL (dt_tree_children (-1, 5, 2, &first), 2);
    CU_ASSERT_EQUAL (first, 0);
    CU_ASSERT_EQUAL (dt_tree_children (0, 5, 2, &first), 2);
    CU_ASSERT_EQUAL (first, 2);
    CU_ASSERT_EQUAL (dt_tree_children (1, 5, 2, &first), 1);
    CU_ASSERT_EQUAL (first, 4);
    for (int i = 2; i < 5; i++)
        CU_ASSERT_EQUAL (dt_tree_children (i, 5, 2, &first), 0);
    CU_ASSERT_EQUAL (dt_tree_depth (0, 5, 2), 0);
    CU_ASSERT_EQUAL (dt_tree_depth (4, 5, 2), 1);
    CU_ASSERT_EQUAL (dt_tree_height (5, 2), 2);
}

/* Every node is the child of its parent, exactly once, for many shapes. */
static void test_parent_child_agree (void)
{
    static int count[4096];
    for (int w = 1; w <= 9; w++)
        for (int n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
            memset (count, 0, sizeof (count));
            for (int p = -1; p < n; p++) {
                int first, k = dt_tree_children (p, n, w, &first);
                for (int c = first; c < first + k; c++) {
                    CU_ASSERT_EQUAL_FATAL (dt_tree_parent (c, n, w), p);
                    count[c]++;
                }
            }
            for (int i = 0; i < n; i++)
                CU_ASSERT_EQUAL_FATAL (count[i], 1);
            /* depth never decreases with the node order */
            for (int i = 1; i < n; i++)
                CU_ASSERT_FATAL (dt_tree_depth (i, n, w) >= dt_tree_depth (i - 1, n, w));
        }
}

/* Width 0 and small jobs: direct connections. */
static void test_direct (void)
{
    int first;
    for (int i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL (dt_tree_parent (i, 10, 0), -1);
        CU_ASSERT_EQUAL (dt_tree_children (i, 10, 0, &first), 0);
        CU_ASSERT_EQUAL (dt_tree_parent (i, 10, 16), -1); /* n <= w */
    }
    CU_ASSERT_EQUAL (dt_tree_children (-1, 10, 0, &first), 10);
    CU_ASSERT_EQUAL (dt_tree_height (10, 0), 1);
    CU_ASSERT_EQUAL (dt_tree_height (10, 16), 1);
    CU_ASSERT_EQUAL (dt_tree_height (0, 4), 0);
}

/* Out of range answers -2 / nothing. */
static void test_bad_input (void)
{
    int first = 7;
    CU_ASSERT_EQUAL (dt_tree_parent (5, 5, 2), -2);
    CU_ASSERT_EQUAL (dt_tree_parent (-1, 5, 2), -2);
    CU_ASSERT_EQUAL (dt_tree_parent (0, 5, -1), -2);
    CU_ASSERT_EQUAL (dt_tree_children (5, 5, 2, &first), 0);
    CU_ASSERT_EQUAL (first, 0);
    CU_ASSERT_EQUAL (dt_tree_depth (9, 5, 2), -1);
    CU_ASSERT_EQUAL (dt_tree_live_parent (9, 5, 2, NULL), -2);
}

/* 20,000 and 40,000 nodes at width 32: three and four levels, no overflow. */
static void test_large (void)
{
    int first;
    CU_ASSERT_EQUAL (dt_tree_height (20000, 32), 3);
    CU_ASSERT_EQUAL (dt_tree_height (40000, 32), 4); /* 32 + 1024 + 32768 < 40000 */
    CU_ASSERT_EQUAL (dt_tree_children (-1, 40000, 32, &first), 32);
    CU_ASSERT_EQUAL (dt_tree_parent (39999, 40000, 32), 39999 / 32 - 1);
    /* a node index whose children would start past INT_MAX */
    CU_ASSERT_EQUAL (dt_tree_children (2000000000, 2000000001, 4, &first), 0);
}

/* A dead relay's children go to the next ancestor; a dead chain goes up to
 * the controller; a dead leaf changes nobody's parent. */
static void test_reattach (void)
{
    bool alive[15];
    memset (alive, 1, sizeof (alive));
    /* width 2 over 15: 0 -> 2,3; 2 -> 6,7; 6 -> 14 */
    CU_ASSERT_EQUAL (dt_tree_live_parent (14, 15, 2, alive), 6);
    alive[6] = false;
    CU_ASSERT_EQUAL (dt_tree_live_parent (14, 15, 2, alive), 2);
    alive[2] = false;
    CU_ASSERT_EQUAL (dt_tree_live_parent (14, 15, 2, alive), 0);
    CU_ASSERT_EQUAL (dt_tree_live_parent (7, 15, 2, alive), 0);
    alive[0] = false;
    CU_ASSERT_EQUAL (dt_tree_live_parent (14, 15, 2, alive), -1);
    CU_ASSERT_EQUAL (dt_tree_live_parent (3, 15, 2, alive), -1);
    /* the testbed's tree: leaf 3 dies, 2 and 4 keep their parents */
    bool five[5] = { true, true, true, false, true };
    CU_ASSERT_EQUAL (dt_tree_live_parent (2, 5, 2, five), 0);
    CU_ASSERT_EQUAL (dt_tree_live_parent (4, 5, 2, five), 1);
    CU_ASSERT (dt_tree_is_ancestor (0, 14, 15, 2));
    CU_ASSERT (dt_tree_is_ancestor (-1, 14, 15, 2));
    CU_ASSERT (!dt_tree_is_ancestor (1, 14, 15, 2));
    CU_ASSERT (!dt_tree_is_ancestor (14, 14, 15, 2));
}

static const struct dt_unit_test tests[] = {
    { "width 2 over 5 nodes", test_width2_of_5 },
    { "parents and children agree", test_parent_child_agree },
    { "width 0 and n <= w are direct", test_direct },
    { "out-of-range input", test_bad_input },
    { "40,000 nodes at width 32", test_large },
    { "reattachment to the nearest live ancestor", test_reattach },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("tree", tests);
}
