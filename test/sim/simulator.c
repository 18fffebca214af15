/* SPDX-License-Identifier: BSD-3-Clause */
/* See simulator.h. Its own message passing and ordering, independent of
 * lib/core/executor.c on purpose: it checks the schedules against the executor's
 * rules as written, not as implemented. What a step computes once its data
 * is at hand is not re-implemented: sc_step_apply / sc_sched_finish
 * (lib/schedule/step.h) and sc_sparse_apply are the executor's own, and
 * test/sim/sim_executor.c compares the two end to end. */
#include "test/sim/simulator.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/schedule/step.h"

typedef struct sim_msg {
  struct sim_msg *next;
  size_t count, bytes;
  const unsigned char *src; /* rendezvous: the sender's memory, read on delivery */
  unsigned char *data;      /* eager: a copy made at the SEND */
  int from;
  size_t from_step;
  int sparse; /* a sparse set: data = its parts (sc_sparse_send_parts) back to back */
  size_t set; /* the set it was sent from (rendezvous bookkeeping) */
  int nparts;
  size_t part_len[SC_SPARSE_PARTS];
} sim_msg_t;

typedef struct sim_mailbox {
  sim_msg_t *head, *tail;
} sim_mailbox_t;

/* Rendezvous: a rank's buffers merged into disjoint address ranges (SEND and
 * RECV may alias), each with a count per element of the undelivered SENDs
 * reading it. Keeps the write check proportional to the bytes written. */
typedef struct sim_arena {
  unsigned char *lo, *hi;
  uint16_t *readers;
} sim_arena_t;

typedef struct sim_rank {
  size_t pc;
  unsigned char *base[3];
  size_t cap[3];     /* elements */
  sc_step_mem_t mem; /* base[] as sc_step_apply takes it */
  unsigned char *own_scratch;
  sim_arena_t arena[3];
  int narenas;
  uint32_t *set_readers; /* rendezvous: undelivered sparse sends per set */
} sim_rank_t;

typedef struct sim {
  const sc_sim_config_t *cfg;
  const sc_sim_rank_t *in;
  sim_rank_t *rk;
  sim_mailbox_t *box; /* [src * nranks + dst] */
  sc_sim_stats_t stats;
  int trace;
  char *err;
  size_t errlen;
} sim_t;

enum { STEP_DONE, STEP_BLOCKED, STEP_FAILED };

static const char *const kind_names[] = {"SEND",         "RECV",        "RECV_REDUCE",
                                         "COPY",         "SPARSE_SEND", "SPARSE_RECV",
                                         "SPARSE_MERGE", "SPARSE_SUM"};
static const char *const buf_names[] = {"SEND", "RECV", "SCRATCH"};

static const char *kind_name(unsigned k) {
  return k < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[k] : "?";
}
static const char *buf_name(unsigned b) {
  return b < 3 ? buf_names[b] : "?";
}

static int fail(sim_t *sim, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(sim_t *sim, int rank, const char *fmt, ...) {
  size_t used = 0;
  if (rank >= 0) {
    const sc_sched_t *s = sim->in[rank].sched;
    size_t pc = sim->rk[rank].pc;
    int w;
    if (pc < s->nsteps)
      w = snprintf(sim->err, sim->errlen, "rank %d step %zu/%zu (%s): ", rank, pc, s->nsteps,
                   kind_name(s->steps[pc].kind));
    else
      w = snprintf(sim->err, sim->errlen, "rank %d: ", rank);
    used = w > 0 && (size_t)w < sim->errlen ? (size_t)w : 0;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sim->err + used, sim->errlen - used, fmt, ap);
  va_end(ap);
  return STEP_FAILED;
}

/* Resolves (buf, off, count) of rank r to memory, checking it lies inside the
 * buffer the test passed; NULL buffers are fine only for empty ranges. */
static int region(sim_t *sim, int r, unsigned buf, size_t off, size_t count, unsigned char **p) {
  sim_rank_t *rk = &sim->rk[r];
  if (buf > SC_BUF_SCRATCH) return fail(sim, r, "invalid buffer id %u", buf);
  if (off > rk->cap[buf] || count > rk->cap[buf] - off)
    return fail(sim, r, "%s[%zu..%zu) outside the buffer of %zu elements", buf_name(buf), off,
                off + count, rk->cap[buf]);
  if (count > 0 && !rk->base[buf])
    return fail(sim, r, "%s[%zu..%zu) but that buffer is NULL", buf_name(buf), off, off + count);
  *p = rk->base[buf] ? rk->base[buf] + off * sim->cfg->elem_size : NULL;
  return STEP_DONE;
}

static int valid_peer(sim_t *sim, int r, int peer) {
  if (peer < 0 || peer >= sim->cfg->nranks)
    return fail(sim, r, "peer %d outside [0, %d)", peer, sim->cfg->nranks);
  if (peer == r) return fail(sim, r, "peer is the rank itself");
  return STEP_DONE;
}

static int overlaps(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen) {
  return alen && blen && a < b + blen && b < a + alen;
}

/* The arena holding [p, p + bytes) and the element counters it spans. */
static sim_arena_t *arena_span(sim_t *sim, int r, const unsigned char *p, size_t bytes,
                               size_t *first, size_t *end) {
  sim_rank_t *rk = &sim->rk[r];
  const size_t es = sim->cfg->elem_size;
  for (int i = 0; i < rk->narenas; i++) {
    sim_arena_t *a = &rk->arena[i];
    if (p >= a->lo && p + bytes <= a->hi) {
      *first = (size_t)(p - a->lo) / es;
      *end = ((size_t)(p - a->lo) + bytes + es - 1) / es;
      return a;
    }
  }
  return NULL;
}

/* Rendezvous: a write into memory an undelivered SEND still reads waits. */
static int write_blocked(sim_t *sim, int r, const unsigned char *p, size_t bytes) {
  size_t first, end;
  sim_arena_t *a = bytes ? arena_span(sim, r, p, bytes, &first, &end) : NULL;
  if (!a) return 0;
  for (size_t i = first; i < end; i++)
    if (a->readers[i]) return 1;
  return 0;
}

static int add_readers(sim_t *sim, int r, const unsigned char *p, size_t bytes, int delta) {
  size_t first, end;
  sim_arena_t *a = bytes ? arena_span(sim, r, p, bytes, &first, &end) : NULL;
  if (!a) return STEP_DONE;
  for (size_t i = first; i < end; i++) {
    if (delta > 0 && a->readers[i] == UINT16_MAX)
      return fail(sim, r, "over 65535 undelivered sends read one element");
    a->readers[i] = (uint16_t)(a->readers[i] + delta);
  }
  return STEP_DONE;
}

static int do_send(sim_t *sim, int r, const sc_step_t *st) {
  unsigned char *p;
  if (valid_peer(sim, r, st->peer) != STEP_DONE) return STEP_FAILED;
  if (region(sim, r, st->buf, st->off, st->count, &p) != STEP_DONE) return STEP_FAILED;
  sim_msg_t *m = calloc(1, sizeof(*m));
  if (!m) return fail(sim, r, "out of memory");
  m->count = st->count;
  m->bytes = st->count * sim->cfg->elem_size;
  m->from = r;
  m->from_step = sim->rk[r].pc;
  if (sim->cfg->model == SC_SIM_EAGER) {
    if (m->bytes) {
      m->data = malloc(m->bytes);
      if (!m->data) {
        free(m);
        return fail(sim, r, "out of memory");
      }
      memcpy(m->data, p, m->bytes);
    }
  } else {
    if (add_readers(sim, r, p, m->bytes, 1) != STEP_DONE) {
      free(m);
      return STEP_FAILED;
    }
    m->src = p;
  }
  sim_mailbox_t *b = &sim->box[(size_t)r * (size_t)sim->cfg->nranks + (size_t)st->peer];
  if (b->tail)
    b->tail->next = m;
  else
    b->head = m;
  b->tail = m;
  return STEP_DONE;
}

static void release(sim_t *sim, sim_msg_t *m) {
  sim->stats.messages++;
  sim->stats.bytes += m->bytes;
  if (m->src) add_readers(sim, m->from, m->src, m->bytes, -1);
  if (m->sparse && sim->rk[m->from].set_readers) sim->rk[m->from].set_readers[m->set]--;
  free(m->data);
  free(m);
}

static int do_recv(sim_t *sim, int r, const sc_step_t *st) {
  const size_t es = sim->cfg->elem_size;
  unsigned char *dst, *local = NULL;
  if (valid_peer(sim, r, st->peer) != STEP_DONE) return STEP_FAILED;
  if (region(sim, r, st->buf, st->off, st->count, &dst) != STEP_DONE) return STEP_FAILED;
  if (st->kind == SC_STEP_RECV_REDUCE) {
    if (region(sim, r, st->src_buf, st->src_off, st->count, &local) != STEP_DONE)
      return STEP_FAILED;
    if (dst != local && overlaps(dst, st->count * es, local, st->count * es))
      return fail(sim, r, "%s[%zu..) partly overlaps its operand %s[%zu..)", buf_name(st->buf),
                  st->off, buf_name(st->src_buf), st->src_off);
  }
  sim_mailbox_t *b = &sim->box[(size_t)st->peer * (size_t)sim->cfg->nranks + (size_t)r];
  if (!b->head) return STEP_BLOCKED;
  if (sim->cfg->model == SC_SIM_RENDEZVOUS && write_blocked(sim, r, dst, st->count * es))
    return STEP_BLOCKED;
  sim_msg_t *m = b->head;
  if (m->sparse)
    return fail(sim, r, "dense receive, but peer %d's message (its step %zu) is a sparse set",
                st->peer, m->from_step);
  if (m->count != st->count)
    return fail(sim, r, "expects %zu elements from peer %d, whose message (its step %zu) has %zu",
                st->count, st->peer, m->from_step, m->count);
  b->head = m->next;
  if (!b->head) b->tail = NULL;
  const unsigned char *data = sim->cfg->model == SC_SIM_EAGER ? m->data : m->src;
  sc_step_apply(&sim->rk[r].mem, st, data);
  release(sim, m);
  return STEP_DONE;
}

static int do_copy(sim_t *sim, int r, const sc_step_t *st) {
  unsigned char *dst, *src;
  if (region(sim, r, st->buf, st->off, st->count, &dst) != STEP_DONE) return STEP_FAILED;
  if (region(sim, r, st->src_buf, st->src_off, st->count, &src) != STEP_DONE) return STEP_FAILED;
  size_t len = sc_step_dst(&sim->rk[r].mem, st, &dst);
  if (len == 0) return STEP_DONE;
  if (sim->cfg->model == SC_SIM_RENDEZVOUS && write_blocked(sim, r, dst, len)) return STEP_BLOCKED;
  sc_step_apply(&sim->rk[r].mem, st, NULL);
  return STEP_DONE;
}

static void mailbox_push(sim_t *sim, int from, int to, sim_msg_t *m) {
  sim_mailbox_t *b = &sim->box[(size_t)from * (size_t)sim->cfg->nranks + (size_t)to];
  if (b->tail)
    b->tail->next = m;
  else
    b->head = m;
  b->tail = m;
}

static int sparse_state(sim_t *sim, int r, sc_sparse_state_t **sp) {
  *sp = sim->in[r].sparse;
  if (!*sp) return fail(sim, r, "sparse step but the rank has no sparse state");
  return STEP_DONE;
}

static int sparse_set(sim_t *sim, int r, sc_sparse_state_t *sp, size_t id, sc_spset_t **set) {
  if (id >= sp->nsets) return fail(sim, r, "set %zu outside the %zu sets", id, sp->nsets);
  *set = &sp->sets[id];
  return STEP_DONE;
}

static int sparse_write_blocked(sim_t *sim, int r, size_t set) {
  return sim->cfg->model == SC_SIM_RENDEZVOUS && sim->rk[r].set_readers &&
         sim->rk[r].set_readers[set] > 0;
}

static int do_sparse_send(sim_t *sim, int r, const sc_step_t *st) {
  sc_sparse_state_t *sp = NULL;
  sc_spset_t *set = NULL;
  if (valid_peer(sim, r, st->peer) != STEP_DONE || sparse_state(sim, r, &sp) != STEP_DONE ||
      sparse_set(sim, r, sp, st->off, &set) != STEP_DONE)
    return STEP_FAILED;
  sc_sparse_part_t parts[SC_SPARSE_PARTS];
  const int nparts = sc_sparse_send_parts(sp, st, set, parts);
  size_t payload = 0;
  for (int i = 0; i < nparts; i++) payload += parts[i].len;
  sim_msg_t *m = calloc(1, sizeof(*m));
  if (!m || !(m->data = malloc(payload ? payload : 1))) {
    free(m);
    return fail(sim, r, "out of memory");
  }
  for (size_t i = 0, at = 0; i < (size_t)nparts; at += parts[i++].len) {
    memcpy(m->data + at, parts[i].p, parts[i].len);
    m->part_len[i] = parts[i].len;
  }
  m->nparts = nparts;
  m->sparse = 1;
  m->set = st->off;
  m->count = set->n;
  m->bytes = 8 + payload;
  m->from = r;
  m->from_step = sim->rk[r].pc;
  if (sim->cfg->model == SC_SIM_RENDEZVOUS) {
    if (!sim->rk[r].set_readers && !(sim->rk[r].set_readers = calloc(sp->nsets, 4))) {
      free(m->data);
      free(m);
      return fail(sim, r, "out of memory");
    }
    sim->rk[r].set_readers[st->off]++;
  }
  mailbox_push(sim, r, st->peer, m);
  return STEP_DONE;
}

static int do_sparse_recv(sim_t *sim, int r, const sc_step_t *st) {
  sc_sparse_state_t *sp = NULL;
  sc_spset_t *dst = NULL;
  if (valid_peer(sim, r, st->peer) != STEP_DONE || sparse_state(sim, r, &sp) != STEP_DONE ||
      sparse_set(sim, r, sp, st->off, &dst) != STEP_DONE)
    return STEP_FAILED;
  sim_mailbox_t *b = &sim->box[(size_t)st->peer * (size_t)sim->cfg->nranks + (size_t)r];
  if (!b->head) return STEP_BLOCKED;
  if (sparse_write_blocked(sim, r, st->off)) return STEP_BLOCKED;
  sim_msg_t *m = b->head;
  if (!m->sparse)
    return fail(sim, r, "sparse receive, but peer %d's message (its step %zu) is dense", st->peer,
                m->from_step);
  if (sc_sparse_check_count(sp, st->peer, m->count, st->count) != SC_SUCCESS)
    return fail(sim, r, "%s", sc_last_error());
  sp->in.n = m->count;
  sc_sparse_part_t parts[SC_SPARSE_PARTS];
  const int nparts = sc_sparse_recv_parts(sp, st, parts);
  for (int i = 0; i < nparts || i < m->nparts; i++) {
    size_t want = i < nparts ? parts[i].len : 0, got = i < m->nparts ? m->part_len[i] : 0;
    if (want != got)
      return fail(sim, r,
                  "expects part %d of %zu bytes from peer %d, whose message (its step %zu) "
                  "has %zu (a mask the sender did not send, or the reverse)",
                  i, want, st->peer, m->from_step, got);
  }
  b->head = m->next;
  if (!b->head) b->tail = NULL;
  for (size_t i = 0, at = 0; i < (size_t)nparts; at += parts[i++].len)
    memcpy(parts[i].p, m->data + at, parts[i].len);
  release(sim, m);
  if (sc_sparse_apply(sp, st) != SC_SUCCESS) return fail(sim, r, "%s", sc_last_error());
  return STEP_DONE;
}

static int do_sparse_sum(sim_t *sim, int r, const sc_step_t *st) {
  sc_sparse_state_t *sp = NULL;
  sc_spset_t *dst = NULL;
  if (sparse_state(sim, r, &sp) != STEP_DONE || sparse_set(sim, r, sp, st->off, &dst) != STEP_DONE)
    return STEP_FAILED;
  if (sparse_write_blocked(sim, r, st->off)) return STEP_BLOCKED;
  if (sc_sparse_apply(sp, st) != SC_SUCCESS) return fail(sim, r, "%s", sc_last_error());
  return STEP_DONE;
}

static int step(sim_t *sim, int r) {
  const sc_step_t *st = &sim->in[r].sched->steps[sim->rk[r].pc];
  if (sim->trace)
    fprintf(stderr, "sim: rank %d step %zu %s peer %d %s[%zu] <- %s[%zu] count %zu\n", r,
            sim->rk[r].pc, kind_name(st->kind), st->peer, buf_name(st->buf), st->off,
            buf_name(st->src_buf), st->src_off, st->count);
  switch (st->kind) {
  case SC_STEP_SEND:
    return do_send(sim, r, st);
  case SC_STEP_RECV:
  case SC_STEP_RECV_REDUCE:
    return do_recv(sim, r, st);
  case SC_STEP_COPY:
    return do_copy(sim, r, st);
  case SC_STEP_SPARSE_SEND:
    return do_sparse_send(sim, r, st);
  case SC_STEP_SPARSE_RECV:
  case SC_STEP_SPARSE_RECV_MERGE:
    return do_sparse_recv(sim, r, st);
  case SC_STEP_SPARSE_SUM:
    return do_sparse_sum(sim, r, st);
  default:
    return fail(sim, r, "unknown step kind %u", st->kind);
  }
}

static void describe_blocked(sim_t *sim, int r, char *out, size_t len) {
  const sc_step_t *st = &sim->in[r].sched->steps[sim->rk[r].pc];
  const sim_mailbox_t *b =
      st->peer >= 0 ? &sim->box[(size_t)st->peer * (size_t)sim->cfg->nranks + (size_t)r] : NULL;
  if ((st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE ||
       st->kind == SC_STEP_SPARSE_RECV || st->kind == SC_STEP_SPARSE_RECV_MERGE) &&
      b && !b->head)
    snprintf(out, len, " [rank %d step %zu: %s of %zu from %d, nothing sent]", r, sim->rk[r].pc,
             kind_name(st->kind), st->count, st->peer);
  else
    snprintf(out, len, " [rank %d step %zu: %s waits for its own undelivered send]", r,
             sim->rk[r].pc, kind_name(st->kind));
}

static int check_leftovers(sim_t *sim) {
  const int p = sim->cfg->nranks;
  for (int s = 0; s < p; s++)
    for (int d = 0; d < p; d++) {
      const sim_msg_t *m = sim->box[(size_t)s * (size_t)p + (size_t)d].head;
      if (m)
        return fail(sim, -1,
                    "message from rank %d (its step %zu, %zu elements) to rank %d never "
                    "received",
                    s, m->from_step, m->count, d);
    }
  return STEP_DONE;
}

static int finalize_avg(sim_t *sim) {
  for (int r = 0; r < sim->cfg->nranks; r++) {
    const sc_sched_t *s = sim->in[r].sched;
    unsigned char *p;
    if (s->avg_count == 0) continue;
    if (region(sim, r, s->avg_buf, s->avg_off, s->avg_count, &p) != STEP_DONE) return STEP_FAILED;
    sc_sched_finish(&sim->rk[r].mem, s, sim->cfg->nranks);
  }
  return STEP_DONE;
}

static int setup_arenas(sim_t *sim, int r) {
  sim_rank_t *rk = &sim->rk[r];
  const size_t es = sim->cfg->elem_size;
  for (int b = 0; b < 3; b++) {
    if (!rk->base[b] || !rk->cap[b]) continue;
    unsigned char *lo = rk->base[b], *hi = lo + rk->cap[b] * es;
    /* Absorb every arena this range touches, then add the union. */
    for (int i = 0; i < rk->narenas;) {
      sim_arena_t *a = &rk->arena[i];
      if (a->lo <= hi && lo <= a->hi) {
        lo = a->lo < lo ? a->lo : lo;
        hi = a->hi > hi ? a->hi : hi;
        *a = rk->arena[--rk->narenas];
      } else {
        i++;
      }
    }
    rk->arena[rk->narenas++] = (sim_arena_t){lo, hi, NULL};
  }
  for (int i = 0; i < rk->narenas; i++) {
    sim_arena_t *a = &rk->arena[i];
    a->readers = calloc(((size_t)(a->hi - a->lo) + es - 1) / es, sizeof(uint16_t));
    if (!a->readers) return fail(sim, -1, "out of memory for rank %d's send tracking", r);
  }
  return STEP_DONE;
}

static int setup(sim_t *sim) {
  const int p = sim->cfg->nranks;
  for (int r = 0; r < p; r++) {
    const sc_sim_rank_t *in = &sim->in[r];
    sim_rank_t *rk = &sim->rk[r];
    if (!in->sched) return fail(sim, -1, "rank %d has no schedule", r);
    if (in->sched->status != SC_SUCCESS)
      return fail(sim, -1, "rank %d's schedule carries error %d", r, in->sched->status);
    rk->base[SC_BUF_SEND] = in->send;
    rk->cap[SC_BUF_SEND] = in->send_count;
    rk->base[SC_BUF_RECV] = in->recv;
    rk->cap[SC_BUF_RECV] = in->recv_count;
    /* Scratch beyond what the schedule declared would not exist in the executor. */
    size_t declared = in->sched->scratch_count;
    if (in->scratch) {
      rk->base[SC_BUF_SCRATCH] = in->scratch;
      rk->cap[SC_BUF_SCRATCH] = in->scratch_count < declared ? in->scratch_count : declared;
    } else if (declared) {
      rk->own_scratch = malloc(declared * sim->cfg->elem_size);
      if (!rk->own_scratch) return fail(sim, -1, "out of memory for scratch");
      /* All-ones bytes: NaN for floats, -1 for integers, so stale reads show. */
      memset(rk->own_scratch, 0xff, declared * sim->cfg->elem_size);
      rk->base[SC_BUF_SCRATCH] = rk->own_scratch;
      rk->cap[SC_BUF_SCRATCH] = declared;
    }
    for (int b = 0; b < 3; b++) rk->mem.base[b] = rk->base[b];
    rk->mem.elem_size = sim->cfg->elem_size;
    rk->mem.dtype = sim->cfg->dtype;
    rk->mem.op = sim->cfg->op;
    if (sim->cfg->model == SC_SIM_RENDEZVOUS && setup_arenas(sim, r) != STEP_DONE)
      return STEP_FAILED;
  }
  return STEP_DONE;
}

static int run(sim_t *sim) {
  const int p = sim->cfg->nranks;
  if (setup(sim) != STEP_DONE) return STEP_FAILED;
  for (;;) {
    int unfinished = 0, advanced = 0;
    sim->stats.rounds++;
    for (int r = 0; r < p; r++) {
      sim_rank_t *rk = &sim->rk[r];
      const size_t nsteps = sim->in[r].sched->nsteps;
      while (rk->pc < nsteps) {
        int res = step(sim, r);
        if (res == STEP_FAILED) return STEP_FAILED;
        if (res == STEP_BLOCKED) break;
        rk->pc++;
        advanced = 1;
      }
      if (rk->pc < nsteps) unfinished++;
    }
    if (!unfinished) break;
    if (!advanced) {
      int w = snprintf(sim->err, sim->errlen, "deadlock: %d of %d ranks blocked:", unfinished, p);
      size_t used = w > 0 && (size_t)w < sim->errlen ? (size_t)w : sim->errlen;
      int shown = 0;
      for (int r = 0; r < p && shown < 6; r++) {
        if (sim->rk[r].pc >= sim->in[r].sched->nsteps) continue;
        if (used < sim->errlen) describe_blocked(sim, r, sim->err + used, sim->errlen - used);
        used += strlen(sim->err + used);
        shown++;
      }
      return STEP_FAILED;
    }
  }
  if (check_leftovers(sim) != STEP_DONE) return STEP_FAILED;
  return finalize_avg(sim);
}

static void cleanup(sim_t *sim) {
  const int p = sim->cfg->nranks;
  for (size_t i = 0; i < (size_t)p * (size_t)p; i++) {
    sim_msg_t *m = sim->box[i].head;
    while (m) {
      sim_msg_t *next = m->next;
      free(m->data);
      free(m);
      m = next;
    }
  }
  for (int r = 0; r < p; r++) {
    for (int i = 0; i < sim->rk[r].narenas; i++) free(sim->rk[r].arena[i].readers);
    free(sim->rk[r].set_readers);
    free(sim->rk[r].own_scratch);
  }
  free(sim->rk);
  free(sim->box);
}

int sc_sim_run(const sc_sim_config_t *cfg, const sc_sim_rank_t *ranks, sc_sim_stats_t *stats,
               char *err, size_t errlen) {
  char dummy[1];
  sim_t sim = {.cfg = cfg, .in = ranks, .err = err ? err : dummy, .errlen = err ? errlen : 1};
  const char *trace = getenv("SC_SIM_TRACE");
  sim.trace = trace && *trace && *trace != '0';
  if (sim.errlen) sim.err[0] = '\0';
  if (cfg->nranks < 1 || cfg->elem_size == 0) {
    snprintf(sim.err, sim.errlen, "bad config: nranks %d, elem_size %zu", cfg->nranks,
             cfg->elem_size);
    return -1;
  }
  const size_t p = (size_t)cfg->nranks;
  sim.rk = calloc(p, sizeof(*sim.rk));
  sim.box = calloc(p * p, sizeof(*sim.box));
  int res = STEP_FAILED;
  if (!sim.rk || !sim.box)
    snprintf(sim.err, sim.errlen, "out of memory");
  else
    res = run(&sim);
  if (sim.rk && sim.box)
    cleanup(&sim);
  else {
    free(sim.rk);
    free(sim.box);
  }
  if (stats) *stats = sim.stats;
  return res == STEP_DONE ? 0 : -1;
}
