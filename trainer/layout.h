/* layout.h: dttrain's parallel layout - the tensor (tp), pipeline (pp) and
 * data (dp) parallel degrees, this rank's place in them, the checks that
 * a layout fits the world and the model, and the transformer's tensors as
 * a rank of a layout holds them.
 *
 * Ranks: rank = (dp_rank * pp + pp_rank) * tp + tp_rank.  tp is innermost
 * (a tp group is tp adjacent ranks, so one node when tp divides the ranks
 * per node: its all-reduces are on the critical path of every block),
 * then pp, then dp.
 *
 * Tensor parallelism (Megatron-LM's split): in every block, the attention
 * heads are divided among the tp ranks (attn.wqkv and attn.bqkv by
 * columns, head by head; attn.wo by rows), and the MLP's hidden units
 * (mlp.w1 and mlp.b1 by columns, mlp.w2 by rows).  The embeddings, the
 * LayerNorms, attn.bo, mlp.b2 and the head are replicated: every tp rank
 * holds them whole and computes the same gradient for them.
 *
 * A rank's slice of a tensor is a block of a row-major view of the whole
 * tensor (struct model_tensor: vdim, vshape, boff, bext), e.g. attn.wqkv
 * [E, 3E] seen as [E, 3, E] with the block [0:E, 0:3, j E/T : (j+1) E/T]
 * on tp rank j, which is exactly its local [E, 3 E/T] matrix q | k | v.
 * Checkpoints record these blocks, so a loader can place any saved slice
 * into any other layout's (trainer/ckpt_table.h). */
#ifndef DT_TRAINER_LAYOUT_H
#define DT_TRAINER_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"
#include "trainer/model.h"

struct train_opts;

struct layout {
    int world, rank;
    int tp, pp, dp;    /* degrees: tp * pp * dp = world */
    int tpr, ppr, dpr; /* this rank's coordinates */
};

enum layout_dim { LAYOUT_TP = 0, LAYOUT_PP = 1, LAYOUT_DP = 2 };

/* Fill ly for rank of world under o->tp, o->pp, checking that the layout
 * fits the world and the model (the error names what does not fit).
 * 0 or -1 with err. */
int layout_init (struct layout *ly, const struct train_opts *o, int world, int rank,
                 dt_error_t *err);

/* The rank at coordinates (dpr, ppr, tpr). */
int layout_rank (const struct layout *ly, int dpr, int ppr, int tpr);

/* This rank's group along dimension d: its members in order (ranks[n],
 * n = the degree of d, room for it given) and this rank's index in it.
 * Returns n. */
int layout_group (const struct layout *ly, enum layout_dim d, int *ranks, int *me);

/* A group's number among the groups along d (0 .. world / degree - 1). */
int layout_group_id (const struct layout *ly, enum layout_dim d);

/* Lay out the transformer's tensors (trainer/transformer.h's order) as tp
 * rank tpr of tp holds them, blocks l0 .. l1 - 1, with the embeddings when
 * first and the final LayerNorm and head when last: appends to m->t and
 * grows m->nparams.  goff of each tensor is its offset in the one-rank
 * layout (which initialisation, dumps and params_crc32c use). */
void layout_tfm (struct model *m, int C, int E, int L, int tp, int tpr, int l0, int l1,
                 int first, int last);

/* The element of the whole tensor (row-major index) that element i of a
 * rank's slice of t is. */
size_t layout_global_index (const struct model_tensor *t, size_t i);

/* Copy every tensor of the layout t[0..nt) (a rank's slice, flat vector
 * src) into its place in the one-rank layout g[0..ng) (flat vector dst),
 * matching by name.  0, or -1 if a name is missing from g. */
int layout_to_global (const struct model_tensor *t, int nt, const float *src,
                      const struct model_tensor *g, int ng, float *dst);

/* The reverse: fill a rank's slice dst (layout t) from the one-rank
 * vector src (layout g).  0 or -1. */
int layout_from_global (const struct model_tensor *t, int nt, float *dst,
                        const struct model_tensor *g, int ng, const float *src);

#endif
