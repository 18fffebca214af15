/* SPDX-License-Identifier: BSD-3-Clause */
/* Pipelined double binary tree all-reduce (NCCL's).
 *
 * Trees. Tree 0 is NCCL's in-order binary tree over the ranks: a rank v > 0
 * whose lowest set bit is b hangs below v with bit b cleared and bit 2b set
 * (xx01[0] and xx11[0] -> xx10[0]), or below v - b when that is out of range;
 * its children are v - b/2 and v + b' with b' the largest power of two
 * <= b/2 that stays below P. Odd ranks are leaves, rank 0 is the
 * root with the single child 2^floor(log2(P-1)). Tree 1 is the same shape with
 * ranks mirrored (v -> P-1-v) when P is even, which swaps odd and even, or
 * shifted by one (v -> v+1 mod P) when P is odd; either way the ranks with
 * children in one tree are leaves in the other, so each rank forwards a full
 * half in only one tree. (Odd P leaves one exception, as in NCCL: rank 0 is
 * the root of tree 0 and has one child in tree 1.) Depths are at most
 * ceil(log2 P).
 *
 * Data. Half 0 ([0, ceil(n/2))) is reduced up tree 0 and broadcast down it,
 * half 1 the rest on tree 1, each cut into chunks of chunk_elems. A node
 * accumulates in RECV: the first child's chunk is reduced with the SEND
 * operand, the second child's with the partial in RECV, so there is no copy
 * pass and no scratch; a leaf sends its SEND chunk up unchanged. The root's
 * reduced chunk is what every rank receives, so all ranks end with the same
 * bits. The partial a node sent up is overwritten by the final value coming
 * down; the executor waits for that send first, which by then is complete.
 *
 * Order. Every message gets a slot. In a tree whose depths are at most H, the
 * chunk c message from depth d up to its parent has slot c + H - d, and the
 * chunk c message from depth d down to a child has slot c + H + d. A message
 * is only sent after the messages it depends on arrived, and those have
 * strictly smaller slots, so within a slot nothing depends on anything. Each
 * rank emits slot by slot: first all its sends of the slot (tree 0 then tree
 * 1), then all its receives (same order). Per link, both ends therefore see
 * the messages sorted by (slot, tree), with at most one per (slot, tree,
 * direction), so FIFO matching holds; and by induction on slots, once every
 * rank has finished slot s - 1 all sends of slot s get posted without waiting
 * (the memory they read is not written in slot s, and any earlier send a
 * receive overwrites belongs to an earlier, completed slot), so every receive
 * of slot s completes: no deadlock even when sends complete only on receipt.
 *
 * Pipelining. A depth-d node sends chunk c up, then while chunk c travels to
 * the root and back it sends 2d - 1 more chunks up before it needs chunk c from
 * above, so both directions of every link stay busy and the two trees
 * advance together. The last chunk reaches the deepest leaf after
 * ceil(n/2 / chunk) + 2H - 1 slots. */
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "lib/base/error.h"

/* A rank's place in one tree. */
typedef struct tree_node {
  int parent;   /* -1 at the root */
  int child[2]; /* the children are child[0..nchildren) */
  int nchildren;
  int depth;
} tree_node_t;

/* Largest power of two <= x, for x >= 1. */
static int pow2_floor(int x) {
  int b = 1;
  while (b <= x / 2) b <<= 1;
  return b;
}

/* Parent and children of v in NCCL's binary tree over ranks 0..p-1. */
static void btree_links(int p, int v, int *parent, int child[2], int *nchildren) {
  *nchildren = 0;
  if (v == 0) {
    *parent = -1;
    if (p > 1) child[(*nchildren)++] = pow2_floor(p - 1);
    return;
  }
  const int low = v & -v;
  *parent = (v ^ low) | (low << 1);
  if (*parent >= p) *parent = v ^ low;
  if (low == 1) return; /* odd ranks are leaves */
  child[(*nchildren)++] = v - low / 2;
  for (int b = low / 2; b >= 1; b >>= 1)
    if (v + b < p) {
      child[(*nchildren)++] = v + b;
      break;
    }
}

/* Tree 1 is tree 0 on renamed ranks: to_btree maps a rank to its position in
 * NCCL's binary tree, from_btree back. */
static int to_btree(int p, int tree, int v) {
  if (tree == 0) return v;
  return p % 2 == 0 ? p - 1 - v : (v - 1 + p) % p;
}

static int from_btree(int p, int tree, int u) {
  if (tree == 0 || u < 0) return u;
  return p % 2 == 0 ? p - 1 - u : (u + 1) % p;
}

static void tree_links(int p, int tree, int v, int *parent, int child[2], int *nchildren) {
  btree_links(p, to_btree(p, tree, v), parent, child, nchildren);
  *parent = from_btree(p, tree, *parent);
  for (int i = 0; i < *nchildren; i++) child[i] = from_btree(p, tree, child[i]);
}

static void tree_node(int p, int tree, int v, tree_node_t *node) {
  tree_links(p, tree, v, &node->parent, node->child, &node->nchildren);
  node->depth = 0;
  int up = node->parent, unused_child[2], unused_n;
  while (up >= 0) {
    node->depth++;
    tree_links(p, tree, up, &up, unused_child, &unused_n);
  }
}

/* One half of the data and how it is cut. */
typedef struct tree_half {
  size_t off, len, nchunks;
  tree_node_t node;
} tree_half_t;

/* Elements [*off, *off + *len) of chunk c of the half, or 0 if c is not a
 * chunk of it. */
static int chunk_of(const tree_half_t *h, size_t chunk_elems, int64_t c, size_t *off, size_t *len) {
  if (c < 0 || (uint64_t)c >= h->nchunks) return 0;
  size_t start = (size_t)c * chunk_elems;
  *off = h->off + start;
  *len = h->len - start < chunk_elems ? h->len - start : chunk_elems;
  return 1;
}

/* The sends of one tree in slot s: the partial (or, at a leaf, the input)
 * chunk up, and the final chunk down to each child. */
static void emit_sends(sc_sched_t *s, const tree_half_t *h, size_t chunk_elems, int height,
                       int64_t slot) {
  const tree_node_t *nd = &h->node;
  size_t off, len;
  if (nd->parent >= 0 && chunk_of(h, chunk_elems, slot - height + nd->depth, &off, &len))
    sc_sched_send(s, nd->parent, nd->nchildren ? SC_BUF_RECV : SC_BUF_SEND, off, len);
  if (nd->nchildren && chunk_of(h, chunk_elems, slot - height - nd->depth, &off, &len))
    for (int i = 0; i < nd->nchildren; i++) sc_sched_send(s, nd->child[i], SC_BUF_RECV, off, len);
}

/* The receives of one tree in slot s: the children's partials of the chunk
 * sent up next slot, and the final chunk from the parent. */
static void emit_recvs(sc_sched_t *s, const tree_half_t *h, size_t chunk_elems, int height,
                       int64_t slot) {
  const tree_node_t *nd = &h->node;
  size_t off, len;
  if (nd->nchildren && chunk_of(h, chunk_elems, slot - height + nd->depth + 1, &off, &len))
    for (int i = 0; i < nd->nchildren; i++)
      sc_sched_recv_reduce(s, nd->child[i], SC_BUF_RECV, off, i == 0 ? SC_BUF_SEND : SC_BUF_RECV,
                           off, len);
  if (nd->parent >= 0 && chunk_of(h, chunk_elems, slot - height - nd->depth + 1, &off, &len))
    sc_sched_recv(s, nd->parent, SC_BUF_RECV, off, len);
}

sc_result_t sc_tree_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (sc_coll_trivial(a, s)) return s->status;
  int height = 0; /* ceil(log2 p): no node is deeper */
  while (height < 31 && (1 << height) < p) height++;

  tree_half_t half[2];
  half[0].off = 0;
  half[0].len = n - n / 2;
  half[1].off = half[0].len;
  half[1].len = n / 2;
  size_t max_chunks = 0;
  for (int t = 0; t < 2; t++) {
    half[t].nchunks = half[t].len ? (half[t].len - 1) / chunk + 1 : 0;
    if (half[t].nchunks > max_chunks) max_chunks = half[t].nchunks;
    tree_node(p, t, a->rank, &half[t].node);
  }
  /* The first up message is in slot 0 (a leaf at depth height), the last
   * down message reaches depth height in slot max_chunks - 1 + 2 height - 1. */
  const int64_t nslots = (int64_t)max_chunks + 2 * (int64_t)height - 1;
  for (int64_t slot = 0; slot < nslots && s->status == SC_SUCCESS; slot++) {
    for (int t = 0; t < 2; t++) emit_sends(s, &half[t], chunk, height, slot);
    for (int t = 0; t < 2; t++) emit_recvs(s, &half[t], chunk, height, slot);
  }
  return s->status;
}
