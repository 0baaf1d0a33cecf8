/* tree.c: the fan-in tree's arithmetic (see tree.h). */
#include <config.h>

#include "common/tree.h"

int dt_tree_parent (int i, int n, int w)
{
    if (i < 0 || i >= n || w < 0)
        return -2;
    if (w == 0 || i < w)
        return -1;
    return i / w - 1;
}

int dt_tree_children (int i, int n, int w, int *first)
{
    long lo, hi;
    *first = 0;
    if (i < -1 || i >= n || w < 0)
        return 0;
    if (w == 0) {
        if (i != -1)
            return 0;
        return n; /* direct: every node is the controller's */
    }
    /* long: w * (i + 1) may pass INT_MAX for wide trees of many nodes */
    lo = (long)w * ((long)i + 1);
    hi = lo + w; /* exclusive */
    if (lo >= n)
        return 0;
    if (hi > n)
        hi = n;
    *first = (int)lo;
    return (int)(hi - lo);
}

int dt_tree_depth (int i, int n, int w)
{
    int d = 0;
    if (i < 0 || i >= n || w < 0)
        return -1;
    while ((i = dt_tree_parent (i, n, w)) >= 0)
        d++;
    return d;
}

int dt_tree_height (int n, int w)
{
    if (n <= 0)
        return 0;
    /* The last node is among the deepest (depth never decreases with i). */
    return dt_tree_depth (n - 1, n, w) + 1;
}

int dt_tree_live_parent (int i, int n, int w, const bool *alive)
{
    int p = dt_tree_parent (i, n, w);
    if (p == -2)
        return -2;
    while (p >= 0 && !alive[p])
        p = dt_tree_parent (p, n, w);
    return p;
}

bool dt_tree_is_ancestor (int a, int i, int n, int w)
{
    if (i < 0 || i >= n)
        return false;
    if (a == -1)
        return true;
    for (int p = dt_tree_parent (i, n, w); p >= 0; p = dt_tree_parent (p, n, w))
        if (p == a)
            return true;
    return false;
}
