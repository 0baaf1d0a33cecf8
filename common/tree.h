/* tree.h: the arithmetic of the heartbeat fan-in tree of one attempt.
 *
 * The n nodes of an attempt, numbered 0..n-1 in the allocation's node order
 * (the order of node ranks), form a tree of width w under the controller,
 * the root (-1): the controller's children are nodes 0..w-1, and the
 * children of node i are w*(i+1) .. w*(i+1)+w-1 (those below n).  So the
 * parent of i is -1 for i < w, else i/w - 1; node i sits at depth
 * (levels under the controller) log_w-ish of i; a job of n <= w nodes is
 * exactly today's direct connections.  Width 0 means no tree: every node's
 * parent is the controller.
 *
 * When nodes die, a node reattaches to its nearest live ancestor (the
 * controller at worst), and a live node serves the orphans whose nearest
 * live ancestor it is, besides its own live children.  Pure functions, no
 * allocation: the controller, the agents and the tests agree on them.
 */
#ifndef DT_TREE_H
#define DT_TREE_H

#include <stdbool.h>

/* Parent of node i in a tree of n nodes and width w: a node index, or -1
 * for the controller.  -2 when i is not in 0..n-1 or w < 0. */
int dt_tree_parent (int i, int n, int w);

/* Children of node i (i == -1: the controller's): their count, with the
 * first in *first (they are *first .. *first + count - 1).  0 for a leaf,
 * and for every node when w == 0 (the controller then has all n). */
int dt_tree_children (int i, int n, int w, int *first);

/* Levels between node i and the controller (0: a child of the
 * controller), or -1 when i is out of range. */
int dt_tree_depth (int i, int n, int w);

/* Levels of the whole tree (the deepest node's depth + 1); 0 for n == 0. */
int dt_tree_height (int n, int w);

/* Where node i sends its heartbeats when alive[j] says which nodes are
 * alive: its nearest live ancestor, or -1 (the controller).  -2 when i is
 * out of range. */
int dt_tree_live_parent (int i, int n, int w, const bool *alive);

/* Is 'a' an ancestor of i (the controller, -1, is everyone's)? */
bool dt_tree_is_ancestor (int a, int i, int n, int w);

#endif
