/* SPDX-License-Identifier: BSD-3-Clause */
/* Hierarchical all-to-all (DeepSpeed-MoE's and Tutel's two-dimensional
 * exchange): each rank sends one message to each other host instead of one
 * to each rank there. Ranks are (host, local rank) as in hier_map.h; a host
 * of L ranks, H hosts.
 *
 * Channels. The blocks host x sends host y travel on L_x channels, channel l
 * from rank (x, l) to rank (y, (l + o) mod L_y), o = 0 unless L_x < L_y (then
 * the number of ranks on the hosts before x, mod L_y, so that the small
 * hosts' channels end at different ranks of a large one). The block of
 * (x, a) for (y, t) takes channel
 *   L_x <= L_y: l = ((t - o) mod L_y) mod L_x (every source's block for t on
 *               one channel);
 *   L_x >  L_y: l = t + L_y * ((a / L_y) mod c), where c = the number of
 *               channels l < L_x with l = t mod L_y (the sources of x share
 *               the c channels that end at t, (x, a) its own when a = t mod
 *               L_y).
 * On even hosts both read l = t: rank (y, t) receives its blocks itself. On
 * uneven ones a channel's receiver is t itself, except when L_x < L_y and
 * (t - o) mod L_y >= L_x: then the receiver forwards it to t. Every channel
 * carries at least one block, so each rank sends exactly H - 1 messages
 * across hosts, and receives those of the channels that end at it.
 *
 * Phases, each posting all its sends before its receives:
 *   1. inside host x, rank a sends every host-mate q its own block (straight
 *      to its place in RECV) and one message of the blocks of channel q (in
 *      order: host y, then t), and copies its own channel's blocks into O.
 *      The owner puts each source's part into O, which holds, per other host
 *      y, the message of its channel to y: blocks ordered by source a, then
 *      destination t;
 *   2. each rank sends O's message for host y to its channel's receiver
 *      there and takes the messages of the channels that end at it: its own
 *      blocks go to RECV, forwarded ones to FW, one region per host-mate t,
 *      ordered by host, then source;
 *   3. each rank sends FW's regions to their host-mates and receives its
 *      forwarded blocks into RECV.
 * A message whose blocks lie back to back at either end is sent or received
 * in place (even hosts of consecutive ranks: phase 2 lands in RECV);
 * otherwise it is packed with one COPY per run of adjacent blocks, or
 * received into a staging region and unpacked.
 *
 * Order and deadlock freedom: on every ordered pair of ranks both ends list
 * their messages in the same order (phase 1's two, then phase 3's; phase 2's
 * pairs are across hosts and carry one). Receives wait only for sends that
 * every rank posts before its first receive of the phase. A write waits for
 * the sends that read its memory: phase 1's, whose receivers take them in
 * phase 1 (their receives wait for no send), never one of the same phase.
 *
 * In place (SEND == RECV), a receive must not wait for a send of its own
 * phase (that is the cycle above), so the blocks for host-mates and phase
 * 2's messages, whose receives land on the same blocks in the same phase,
 * leave from copies in SCRATCH, made before the first write to RECV. Phase
 * 1's channel messages may still leave from SEND: they hold blocks for
 * other hosts, which only phases 2 and 3 overwrite.
 *
 * SCRATCH: O, then phase 1's packs and staging (and the in-place copies of
 * the host-mates' blocks), reused by phases 2 and 3 for FW and their
 * staging. It never exceeds 4 L P blocks (each block in it starts or ends
 * on this host; O and phase 1 hold a block once at most, phases 2 and 3
 * three times). Even hosts need P - L blocks for O, and phase 1 up to
 * (L-1)/L of that for its packs and as much for its staging: below
 * 3(P - L) in all (phase 1 needs none with two hosts, phases 2 and 3 none
 * when a host's ranks are consecutive); uneven maps stay below 4P (the test
 * checks its maps). O is
 * left out for a message that is this rank's own blocks back to back (one
 * rank per host, out of place): it leaves from SEND.
 *
 * Channels are enumerated in closed form, never by trying every pair of
 * ranks: the cost model generates every rank's schedule, so generating one
 * should cost about as much as its steps.
 *
 * With one host (or no host map) this is the pairwise all-to-all. */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/hier_map.h"
#include "lib/base/error.h"

typedef struct a2a {
  const sc_coll_args_t *a;
  const sc_hier_map_t *m;
  sc_sched_t *s;
  size_t n, chunk;
  /* The message being described: where each of its k blocks is (sender:
   * taken from; receiver: put to). */
  int k, cap, overflow;
  uint8_t *buf;
  size_t *off;
} a2a_t;

/* Where on host y channel 0 of host x ends (L_x < L_y only: x's channels
 * reach L_x of y's ranks, and the smaller hosts' start at different ones). */
static int a2a_rot(const sc_hier_map_t *m, int x, int y) {
  const int lx = sc_hier_size(m, x), ly = sc_hier_size(m, y);
  return lx < ly ? m->start[x] % ly : 0;
}

/* The local rank on host y that receives channel l of host x. */
static int a2a_receiver(const sc_hier_map_t *m, int x, int l, int y) {
  return (l + a2a_rot(m, x, y)) % sc_hier_size(m, y);
}

/* The channel (local rank on host x) of the block of (x, from) for (y, to). */
static int a2a_channel(const sc_hier_map_t *m, int x, int from, int y, int to) {
  const int lx = sc_hier_size(m, x), ly = sc_hier_size(m, y);
  if (lx <= ly) return (to - a2a_rot(m, x, y) + ly) % ly % lx;
  const int c = (lx - 1 - to) / ly + 1;
  return to + ly * ((from / ly) % c);
}

/* How many blocks of (x, from) for host y take channel l. */
static int a2a_channel_count(const sc_hier_map_t *m, int x, int from, int y, int l) {
  const int lx = sc_hier_size(m, x), ly = sc_hier_size(m, y);
  if (lx <= ly) return (ly - 1 - l) / lx + 1;
  const int t = l % ly, c = (lx - 1 - t) / ly + 1;
  return (from / ly) % c == l / ly;
}

/* How many blocks of the sources (x, 0 .. below-1) for host y take channel
 * l, in closed form: below = L_x gives the whole channel. */
static size_t a2a_channel_prefix(const sc_hier_map_t *m, int x, int below, int y, int l) {
  const int lx = sc_hier_size(m, x), ly = sc_hier_size(m, y);
  if (lx <= ly) return (size_t)below * (size_t)a2a_channel_count(m, x, 0, y, l);
  /* Sources come in groups of ly (a / ly); group q is on channel l when
   * q mod c == l / ly. */
  const int c = (lx - 1 - l % ly) / ly + 1, j = l / ly, g = below / ly;
  return (size_t)ly * (size_t)(g / c + (g % c > j)) + (g % c == j ? (size_t)(below % ly) : 0);
}

/* The destinations on host x of channel l of host y, ascending, into dl
 * (L_x entries at most); returns how many. */
static int a2a_channel_dests(const sc_hier_map_t *m, int y, int l, int x, int *dl) {
  const int ly = sc_hier_size(m, y), lx = sc_hier_size(m, x), o = a2a_rot(m, y, x);
  int k = 0;
  if (ly > lx) {
    dl[0] = l % lx;
    return 1;
  }
  /* (d - o) mod L_x runs over l, l + L_y, ...: the ones that wrap past L_x
   * are the smaller destinations. */
  for (int e = l; e < lx; e += ly)
    if (e + o >= lx) dl[k++] = e + o - lx;
  for (int e = l; e < lx; e += ly)
    if (e + o < lx) dl[k++] = e + o;
  return k;
}

static size_t a2a_block(const a2a_t *t, int host, int local) {
  return (size_t)sc_hier_member(t->m, host, local) * t->n;
}

static void a2a_add(a2a_t *t, sc_buf_t buf, size_t off) {
  if (t->k >= t->cap) {
    t->overflow = 1;
    return;
  }
  t->buf[t->k] = (uint8_t)buf;
  t->off[t->k++] = off;
}

/* The end of the run of adjacent blocks that starts at block i. */
static int a2a_run_end(const a2a_t *t, int i) {
  int j = i + 1;
  while (j < t->k && t->buf[j] == t->buf[i] && t->off[j] == t->off[j - 1] + t->n) j++;
  return j;
}

/* Packs the message's blocks into SCRATCH[at..] (pack) or unpacks them from
 * there, one COPY per run. */
static void a2a_copy(a2a_t *t, size_t at, int pack) {
  for (int i = 0, j; i < t->k; i = j) {
    j = a2a_run_end(t, i);
    const size_t len = (size_t)(j - i) * t->n, moff = at + (size_t)i * t->n;
    if (pack)
      sc_sched_copy(t->s, SC_BUF_SCRATCH, moff, (sc_buf_t)t->buf[i], t->off[i], len);
    else
      sc_sched_copy(t->s, (sc_buf_t)t->buf[i], t->off[i], SC_BUF_SCRATCH, moff, len);
  }
}

static void a2a_recv(a2a_t *t, int peer, sc_buf_t buf, size_t off, size_t len) {
  for (size_t c = 0; c < len; c += t->chunk)
    sc_sched_recv(t->s, peer, buf, off + c, len - c < t->chunk ? len - c : t->chunk);
}

/* Receives the message described from peer: in place when its blocks are
 * one run, else into SCRATCH[*at..] (advanced) and unpacked. */
static void a2a_deliver(a2a_t *t, int peer, size_t *at) {
  const size_t len = (size_t)t->k * t->n;
  if (t->k == 0) return;
  if (a2a_run_end(t, 0) == t->k) {
    a2a_recv(t, peer, (sc_buf_t)t->buf[0], t->off[0], len);
    return;
  }
  a2a_recv(t, peer, SC_BUF_SCRATCH, *at, len);
  a2a_copy(t, *at, 0);
  *at += len;
}

/* Where a phase-1 or phase-2 message lies once packed. */
typedef struct a2a_msg {
  uint8_t buf;
  size_t off, len;
} a2a_msg_t;

/* Phase 1's channel messages to each host-mate: one pass over the blocks
 * for other hosts, bucketed by channel (order: host, then destination). The
 * slice of channel q is list[first[q] .. first[q + 1]). */
static void a2a_channel_lists(a2a_t *t, size_t *list, int *first) {
  const sc_hier_map_t *m = t->m;
  const int lsz = m->lsz;
  for (int q = 0; q <= lsz; q++) first[q] = 0;
  for (int y = 0; y < m->nhosts; y++)
    for (int d = 0; y != m->host && d < sc_hier_size(m, y); d++)
      first[a2a_channel(m, m->host, m->me, y, d) + 1]++;
  for (int q = 0; q < lsz; q++) first[q + 1] += first[q];
  int *fill = first + lsz + 1;
  for (int q = 0; q < lsz; q++) fill[q] = first[q];
  for (int y = 0; y < m->nhosts; y++)
    for (int d = 0; y != m->host && d < sc_hier_size(m, y); d++)
      list[fill[a2a_channel(m, m->host, m->me, y, d)]++] = a2a_block(t, y, d);
}

/* This rank's own blocks for host y on its own channel, into t's list. */
static void a2a_own_blocks(a2a_t *t, int y) {
  const sc_hier_map_t *m = t->m;
  t->k = 0;
  for (int d = 0; d < sc_hier_size(m, y); d++)
    if (a2a_channel(m, m->host, m->me, y, d) == m->me) a2a_add(t, SC_BUF_SEND, a2a_block(t, y, d));
}

/* The start of source src's part of host y's message in O. */
static size_t a2a_opart(const a2a_t *t, const a2a_msg_t *omsg, int y, int src) {
  return omsg[y].off + a2a_channel_prefix(t->m, t->m->host, src, y, t->m->me) * t->n;
}

/* Where phase 2 sends each other host's message from: O in SCRATCH, or
 * SEND itself when the message is this rank's own blocks, back to back
 * (one rank per host; out of place only). Returns O's size. */
static size_t a2a_layout(a2a_t *t, a2a_msg_t *omsg) {
  const sc_hier_map_t *m = t->m;
  size_t at = 0;
  for (int y = 0; y < m->nhosts; y++) {
    if (y == m->host) continue;
    const size_t len = a2a_channel_prefix(m, m->host, m->lsz, y, m->me) * t->n;
    a2a_own_blocks(t, y);
    if (!t->a->in_place && (size_t)t->k * t->n == len && a2a_run_end(t, 0) == t->k) {
      omsg[y] = (a2a_msg_t){SC_BUF_SEND, t->off[0], len};
    } else {
      omsg[y] = (a2a_msg_t){SC_BUF_SCRATCH, at, len};
      at += len;
    }
  }
  return at;
}

/* Phase 1, into O (omsg). Returns the end of the scratch it used. */
static size_t a2a_phase1(a2a_t *t, const a2a_msg_t *omsg, size_t at) {
  const sc_hier_map_t *m = t->m;
  const int lsz = m->lsz, me = m->me, x = m->host, in_place = t->a->in_place;
  const size_t n = t->n, own = (size_t)t->a->rank * n;
  a2a_msg_t *chan = calloc((size_t)lsz, sizeof(*chan)),
            *direct = calloc((size_t)lsz, sizeof(*direct));
  int *first = malloc((2 * (size_t)lsz + 1) * sizeof(*first));
  size_t *list = malloc((size_t)t->a->nranks * sizeof(*list));
  if (!chan || !direct || !first || !list) {
    t->overflow = -1;
    goto out;
  }
  a2a_channel_lists(t, list, first);
  for (int q = 0; q < lsz; q++) {
    if (q == me) continue;
    t->k = 0;
    for (int i = first[q]; i < first[q + 1]; i++) a2a_add(t, SC_BUF_SEND, list[i]);
    chan[q].len = (size_t)t->k * n;
    if (t->k > 0 && a2a_run_end(t, 0) == t->k) {
      chan[q].buf = SC_BUF_SEND;
      chan[q].off = t->off[0];
    } else if (t->k > 0) {
      a2a_copy(t, at, 1);
      chan[q].buf = SC_BUF_SCRATCH;
      chan[q].off = at;
      at += chan[q].len;
    }
    direct[q].buf = SC_BUF_SEND;
    direct[q].off = a2a_block(t, x, q);
    if (in_place) {
      sc_sched_copy(t->s, SC_BUF_SCRATCH, at, SC_BUF_SEND, direct[q].off, n);
      direct[q].buf = SC_BUF_SCRATCH;
      direct[q].off = at;
      at += n;
    }
  }
  /* This rank's own channel: its part of each O message. */
  for (int y = 0; y < m->nhosts; y++) {
    if (y == x || omsg[y].buf != SC_BUF_SCRATCH) continue;
    a2a_own_blocks(t, y);
    a2a_copy(t, a2a_opart(t, omsg, y, me), 1);
  }
  sc_sched_copy(t->s, SC_BUF_RECV, own, SC_BUF_SEND, own, n);
  for (int i = 1; i < lsz; i++) {
    const int q = (me + i) % lsz, peer = sc_hier_member(m, x, q);
    sc_send_chunks(t->s, peer, (sc_buf_t)direct[q].buf, direct[q].off, n, t->chunk);
    if (chan[q].len)
      sc_send_chunks(t->s, peer, (sc_buf_t)chan[q].buf, chan[q].off, chan[q].len, t->chunk);
  }
  for (int i = 1; i < lsz; i++) {
    const int src = (me - i + lsz) % lsz, peer = sc_hier_member(m, x, src);
    a2a_recv(t, peer, SC_BUF_RECV, a2a_block(t, x, src), n);
    /* src's blocks of this rank's channel, host by host, into src's part of O. */
    t->k = 0;
    for (int y = 0; y < m->nhosts; y++) {
      if (y == x) continue;
      size_t pos = a2a_opart(t, omsg, y, src);
      for (int c = a2a_channel_count(m, x, src, y, me); c > 0; c--, pos += n)
        a2a_add(t, SC_BUF_SCRATCH, pos);
    }
    a2a_deliver(t, peer, &at);
  }
out:
  free(chan);
  free(direct);
  free(first);
  free(list);
  return at;
}

/* The first channel of host y that ends at this rank; the next ones follow
 * L steps apart (only when y is larger than this rank's host). */
static int a2a_first_channel(const sc_hier_map_t *m, int y) {
  return (m->me - a2a_rot(m, y, m->host) + m->lsz) % m->lsz;
}

/* Phases 2 and 3. Returns the end of the scratch they used. */
static size_t a2a_phase23(a2a_t *t, const a2a_msg_t *omsg, size_t at) {
  const sc_hier_map_t *m = t->m;
  const int lsz = m->lsz, me = m->me, x = m->host, nh = m->nhosts;
  const size_t n = t->n;
  /* fw[d]: FW region of host-mate d, fw[L + d]: its fill; dl: a channel's
   * destinations; via[y]: the host-mate that forwards y's blocks for this
   * rank (-1: none), and the hosts bucketed by it in byvia. */
  size_t *fw = calloc(2 * (size_t)lsz, sizeof(*fw));
  int *dl = malloc((size_t)lsz * sizeof(*dl)), *via = malloc((size_t)nh * sizeof(*via));
  int *byvia = malloc(((size_t)nh + 2 * (size_t)lsz + 1) * sizeof(*byvia));
  if (!fw || !dl || !via || !byvia) {
    t->overflow = -1;
    goto out;
  }
  /* FW sizes: a channel from a smaller host carries every source's block
   * for each of its destinations. */
  for (int y = 0; y < nh; y++) {
    const int ly = sc_hier_size(m, y), l = a2a_first_channel(m, y);
    if (y == x || ly > lsz || l >= ly) continue;
    for (int i = 0, k = a2a_channel_dests(m, y, l, x, dl); i < k; i++)
      if (dl[i] != me) fw[lsz + dl[i]] += (size_t)ly;
  }
  for (int d = 0; d < lsz; d++) {
    fw[d] = at;
    at += fw[lsz + d] * n;
    fw[lsz + d] = 0;
  }
  for (int i = 1; i < nh; i++) {
    const int y = (x + i) % nh;
    sc_send_chunks(t->s, sc_hier_member(m, y, a2a_receiver(m, x, me, y)), (sc_buf_t)omsg[y].buf,
                   omsg[y].off, omsg[y].len, t->chunk);
  }
  /* FW is filled in the order of arrival, host by host: receive in it. */
  for (int y = 0; y < nh; y++) {
    const int ly = sc_hier_size(m, y);
    for (int l = a2a_first_channel(m, y); y != x && l < ly; l += lsz) {
      const int k = a2a_channel_dests(m, y, l, x, dl);
      t->k = 0;
      for (int a = 0; a < ly; a++) {
        if (!a2a_channel_count(m, y, a, x, l)) continue;
        for (int i = 0; i < k; i++) {
          if (dl[i] == me)
            a2a_add(t, SC_BUF_RECV, a2a_block(t, y, a));
          else
            a2a_add(t, SC_BUF_SCRATCH, fw[dl[i]] + fw[lsz + dl[i]]++ * n);
        }
      }
      a2a_deliver(t, sc_hier_member(m, y, l), &at);
    }
  }
  for (int i = 1; i < lsz; i++) {
    const int d = (me + i) % lsz;
    if (fw[lsz + d])
      sc_send_chunks(t->s, sc_hier_member(m, x, d), SC_BUF_SCRATCH, fw[d], fw[lsz + d] * n,
                     t->chunk);
  }
  /* Forwarded to this rank: every block of a smaller host y whose channel
   * for this rank ends at a host-mate. */
  int *first = byvia + nh, *fill = first + lsz + 1;
  for (int q = 0; q <= lsz; q++) first[q] = 0;
  for (int y = 0; y < nh; y++) {
    const int ly = sc_hier_size(m, y);
    via[y] = -1;
    if (y == x || ly >= lsz) continue;
    const int r = a2a_receiver(m, y, a2a_channel(m, y, 0, x, me), x);
    if (r != me) first[(via[y] = r) + 1]++;
  }
  for (int q = 0; q < lsz; q++) first[q + 1] += first[q];
  for (int q = 0; q < lsz; q++) fill[q] = first[q];
  for (int y = 0; y < nh; y++)
    if (via[y] >= 0) byvia[fill[via[y]]++] = y;
  for (int i = 1; i < lsz; i++) {
    const int src = (me - i + lsz) % lsz;
    t->k = 0;
    for (int j = first[src]; j < first[src + 1]; j++)
      for (int a = 0; a < sc_hier_size(m, byvia[j]); a++)
        a2a_add(t, SC_BUF_RECV, a2a_block(t, byvia[j], a));
    a2a_deliver(t, sc_hier_member(m, x, src), &at);
  }
out:
  free(fw);
  free(dl);
  free(via);
  free(byvia);
  return at;
}

sc_result_t sc_hier_alltoall_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  if (a->count == 0) return s->status;
  sc_hier_map_t m;
  sc_result_t res = sc_hier_map_init(a, &m);
  if (res == SC_SUCCESS && m.nhosts == 1) {
    sc_hier_map_free(&m);
    return sc_pairwise_alltoall_schedule(a, s);
  }
  /* SCRATCH holds at most 4 L P blocks (see above): offsets must not wrap. */
  const size_t up = (size_t)a->nranks, lsz = res == SC_SUCCESS ? (size_t)m.lsz : 1;
  if (res == SC_SUCCESS && (lsz > SIZE_MAX / 4 / up || a->count > SIZE_MAX / (4 * lsz * up)))
    res = SC_ERR(SC_ERR_INVALID_ARG,
                 "hier all-to-all: scratch for %zu elements per block overflows", a->count);
  a2a_t t = {.a = a, .m = &m, .s = s, .n = a->count, .chunk = a->chunk_elems, .cap = a->nranks};
  a2a_msg_t *omsg = NULL;
  if (res == SC_SUCCESS) {
    t.buf = malloc((size_t)t.cap);
    t.off = malloc((size_t)t.cap * sizeof(*t.off));
    omsg = calloc((size_t)m.nhosts, sizeof(*omsg));
    if (!t.buf || !t.off || !omsg) res = SC_ERR(SC_ERR_NOMEM, "hier all-to-all: block lists");
  }
  if (res == SC_SUCCESS) {
    const size_t osz = a2a_layout(&t, omsg);
    const size_t end1 = t.overflow ? osz : a2a_phase1(&t, omsg, osz);
    const size_t end23 = t.overflow ? osz : a2a_phase23(&t, omsg, osz);
    sc_sched_need_scratch(s, end1 > end23 ? end1 : end23);
    if (t.overflow < 0)
      res = SC_ERR(SC_ERR_NOMEM, "hier all-to-all: block lists");
    else if (t.overflow)
      res = SC_ERR(SC_ERR_INTERNAL, "hier all-to-all: a message of more than %d blocks", t.cap);
    else
      res = s->status;
  }
  free(t.buf);
  free(t.off);
  free(omsg);
  sc_hier_map_free(&m);
  return res;
}
