/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_allreduce_compressed: an all-reduce of float32 buffers whose messages
 * travel as float16 or bfloat16 (half the bytes of a float32 all-reduce),
 * every reduction done in float32, the same bits on every rank.
 *
 * It is two of the library's dense collectives on wire-format data with the
 * float32 work between them, as a reduce-scatter followed by an all-gather:
 *   1. every rank rounds its input to the wire format (count elements, padded
 *      with zeros to nranks blocks of B = ceil(count / nranks));
 *   2. sc_alltoall: rank r receives block r of every rank's wire data;
 *   3. rank r, the owner of block r, widens the blocks to float32 and reduces
 *      them in rank order in float32, its own contribution taken from its
 *      float32 input unrounded; AVG divides the float32 sum by nranks; the
 *      result is rounded once to the wire format;
 *   4. sc_allgather of the owners' wire blocks; every rank (the owners
 *      included) widens the gathered wire data into recvbuf.
 * So an element goes through two roundings to the wire format: each other
 * rank's input once (step 1) and the reduced value once (step 3), plus the
 * float32 roundings of the nranks - 1 reductions (and of AVG's division).
 * A reduce-scatter ring that forwarded rounded partial sums would instead
 * round every element nranks times for the same bytes. Every rank's result is
 * the widening of one set of wire bits, so it is identical everywhere, and a
 * fixed order of reduction makes it the same run after run.
 *
 * The buffer goes through these steps in segments of 2^20 elements,
 * pipelined (sc_ialltoall / sc_iallgather) so that the conversions overlap
 * the neighbouring segments' transfers; the roundings are per element and
 * do not depend on the segmenting.
 *
 * The wire buffers (about 2 x count elements of 2 bytes) are the
 * communicator's, kept and grown; calls on one communicator take them one at
 * a time. Device buffers are staged through a host buffer of count float32
 * (kept likewise): the input is copied to the host, the call runs there, the
 * result is copied back; no conversion runs on the device. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/compress/compress.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"

/* Elements widened and reduced per step of the owner's loop: two float
 * arrays of this size stay in L1. */
#define HW_CHUNK 1024

/* Elements per pipelined segment (4 MiB of float32, 2 MiB on the wire):
 * large enough that a collective's fixed cost is small against its bytes. */
#ifndef SC_HALFWIRE_SEGMENT
#define SC_HALFWIRE_SEGMENT ((size_t)1 << 20)
#endif

struct sc_halfwire {
  pthread_mutex_t lock;
  uint16_t *wire; /* [2 * wire_elems]: the all-to-all's input, then its output */
  size_t wire_elems;
  float *stage; /* device calls: the host copy of the buffers */
  size_t stage_elems;
  const sc_devrt_t *rt;
  void *stream, *event;
};

static void hw_free(void *p) {
  struct sc_halfwire *s = p;
  if (!s) return;
  free(s->wire);
  free(s->stage);
  if (s->rt) {
    if (s->event) s->rt->event_destroy(s->event);
    if (s->stream) s->rt->stream_destroy(s->stream);
  }
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static void *hw_create(void) {
  struct sc_halfwire *s = calloc(1, sizeof(*s));
  if (s) pthread_mutex_init(&s->lock, NULL);
  return s;
}

/* Grows *buf to at least n elements of es bytes (contents not kept). */
static sc_result_t hw_grow(void **buf, size_t *have, size_t n, size_t es, const char *what) {
  if (*have >= n) return SC_SUCCESS;
  void *p = malloc(n * es);
  if (!p) return SC_ERR(SC_ERR_NOMEM, "sc_allreduce_compressed: %s of %zu bytes", what, n * es);
  free(*buf);
  *buf = p;
  *have = n;
  return SC_SUCCESS;
}

static void hw_narrow(sc_dtype_t wire, uint16_t *dst, const float *src, size_t n) {
  if (wire == SC_FLOAT16)
    sc_float_to_half_array(dst, src, n);
  else
    sc_float_to_bfloat16_array(dst, src, n);
}

static void hw_widen(sc_dtype_t wire, float *dst, const uint16_t *src, size_t n) {
  if (wire == SC_FLOAT16)
    sc_half_to_float_array(dst, src, n);
  else
    sc_bfloat16_to_float_array(dst, src, n);
}

/* Step 3 on this rank's block [lo, hi) of the input: blocks holds the
 * nranks wire blocks of B elements received by the all-to-all; the result
 * goes, rounded, to this rank's own block of it (whose received contents,
 * this rank's own rounded input, are never read). */
static void hw_reduce_own(const float *in, uint16_t *blocks, size_t lo, size_t hi, size_t B,
                          sc_dtype_t wire, sc_redop_t op, int rank, int nranks) {
  float acc[HW_CHUNK], tmp[HW_CHUNK];
  for (size_t c = lo; c < hi; c += HW_CHUNK) {
    const size_t m = hi - c < HW_CHUNK ? hi - c : HW_CHUNK;
    const size_t at = c - lo;
    for (int i = 0; i < nranks; i++) {
      const float *x = in + c;
      if (i != rank) {
        hw_widen(wire, tmp, blocks + (size_t)i * B + at, m);
        x = tmp;
      }
      if (i == 0)
        memcpy(acc, x, m * sizeof(float));
      else
        sc_reduce_kernel(SC_FLOAT32, op, acc, acc, x, m);
    }
    if (op == SC_AVG) sc_avg_finalize(SC_FLOAT32, acc, m, nranks);
    hw_narrow(wire, blocks + (size_t)rank * B + at, acc, m);
  }
}

/* One segment of the call: elements [off, off + len) of the buffers, laid
 * out on the wire as nranks blocks of B, its wire buffers at send and recv
 * (nranks * B elements each). */
typedef struct hw_seg {
  size_t off, len, B;
  uint16_t *send, *recv;
} hw_seg_t;

static hw_seg_t hw_seg_at(uint16_t *wire, size_t count, size_t seg_elems, int p, size_t k) {
  hw_seg_t g;
  g.off = k * seg_elems;
  g.len = count - g.off < seg_elems ? count - g.off : seg_elems;
  g.B = (g.len + (size_t)p - 1) / (size_t)p;
  /* Every earlier segment is full: seg_elems / p rounded up, times p, twice. */
  const size_t full = (seg_elems + (size_t)p - 1) / (size_t)p * (size_t)p;
  g.send = wire + 2 * k * full;
  g.recv = g.send + g.B * (size_t)p;
  return g;
}

/* Waits for *req unless it is NULL; keeps the first failure in *first. */
static void hw_wait(sc_request_t **req, sc_result_t *first) {
  if (!*req) return;
  sc_result_t r = sc_wait(req);
  if (*first == SC_SUCCESS) *first = r;
}

/* The call on host buffers (s->lock held). The buffer goes in segments of
 * SC_HALFWIRE_SEGMENT elements, software-pipelined so that the conversions
 * of one segment run on this thread while the progress thread moves the
 * neighbouring segments' data: segment k+1 is rounded and its all-to-all
 * queued before segment k is reduced, and segment k-1 is widened after
 * segment k's all-gather is queued. The collectives are queued in the same
 * order on every rank (it depends on count and nranks only). Each segment
 * reads only its own elements of in and writes only its own of out, so in
 * place is safe. */
static sc_result_t hw_host(struct sc_halfwire *s, const float *in, float *out, size_t count,
                           sc_redop_t op, sc_dtype_t wire, sc_comm_t *comm) {
  const int p = comm->nranks, r = comm->rank;
  const size_t seg = SC_HALFWIRE_SEGMENT;
  const size_t nseg = (count + seg - 1) / seg;
  const size_t full = (seg + (size_t)p - 1) / (size_t)p * (size_t)p;
  const size_t need = nseg > 1 ? 2 * (nseg - 1) * full + 2 * (count - (nseg - 1) * seg + (size_t)p)
                               : 2 * (count + (size_t)p);
  SC_CHECK(hw_grow((void **)&s->wire, &s->wire_elems, need, sizeof(uint16_t), "wire buffers"));
  sc_request_t *a2a[2] = {NULL, NULL}, *ag[2] = {NULL, NULL};
  sc_result_t first = SC_SUCCESS;
  for (size_t k = 0; k <= nseg && first == SC_SUCCESS; k++) {
    /* Segment k: rounded and sent (the first iteration also segment 0). */
    for (size_t j = k == 0 ? 0 : k + 1; j <= k + 1 && j < nseg && first == SC_SUCCESS; j++) {
      hw_seg_t g = hw_seg_at(s->wire, count, seg, p, j);
      hw_narrow(wire, g.send, in + g.off, g.len);
      memset(g.send + g.len, 0, (g.B * (size_t)p - g.len) * sizeof(uint16_t));
      first = sc_ialltoall(g.send, g.recv, g.B, wire, comm, &a2a[j & 1]);
    }
    if (first != SC_SUCCESS) break;
    if (k < nseg) { /* segment k: reduced at its owners, gathered */
      hw_seg_t g = hw_seg_at(s->wire, count, seg, p, k);
      hw_wait(&a2a[k & 1], &first);
      if (first != SC_SUCCESS) break;
      const size_t lo = (size_t)r * g.B < g.len ? (size_t)r * g.B : g.len;
      const size_t hi = lo + g.B < g.len ? lo + g.B : g.len;
      hw_reduce_own(in + g.off, g.recv, lo, hi, g.B, wire, op, r, p);
      first = sc_iallgather(g.recv + (size_t)r * g.B, g.recv, g.B, wire, comm, &ag[k & 1]);
      if (first != SC_SUCCESS) break;
    }
    if (k >= 1) { /* segment k-1: widened into out */
      hw_seg_t g = hw_seg_at(s->wire, count, seg, p, k - 1);
      hw_wait(&ag[(k - 1) & 1], &first);
      if (first == SC_SUCCESS) hw_widen(wire, out + g.off, g.recv, g.len);
    }
  }
  /* After a failure: every request still out is completed. */
  for (int i = 0; i < 2; i++) {
    hw_wait(&a2a[i], &first);
    hw_wait(&ag[i], &first);
  }
  return first;
}

/* Device buffers: staged through s->stage on the state's stream. */
static sc_result_t hw_copy(struct sc_halfwire *s, const sc_comm_t *comm, void *dst, const void *src,
                           size_t bytes) {
  SC_CHECK(s->rt->memcpy_async(dst, src, bytes, s->stream));
  SC_CHECK(s->rt->event_record(s->event, s->stream));
  return sc_dev_event_wait(s->rt, s->event, comm->cfg.timeout_ms,
                           "sc_allreduce_compressed's staging copy");
}

static sc_result_t hw_device(struct sc_halfwire *s, const void *sendbuf, void *recvbuf,
                             size_t count, sc_redop_t op, sc_dtype_t wire, sc_comm_t *comm) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "sc_allreduce_compressed: device buffers but no runtime");
  if (s->rt && s->rt != rt) {
    if (s->event) s->rt->event_destroy(s->event);
    if (s->stream) s->rt->stream_destroy(s->stream);
    s->event = s->stream = NULL;
  }
  s->rt = rt;
  if (!s->stream) SC_CHECK(rt->stream_create(&s->stream));
  if (!s->event) SC_CHECK(rt->event_create(&s->event));
  SC_CHECK(hw_grow((void **)&s->stage, &s->stage_elems, count, sizeof(float), "host staging"));
  SC_CHECK(hw_copy(s, comm, s->stage, sendbuf, count * sizeof(float)));
  SC_CHECK(hw_host(s, s->stage, s->stage, count, op, wire, comm));
  return hw_copy(s, comm, recvbuf, s->stage, count * sizeof(float));
}

sc_result_t sc_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count,
                                    sc_dtype_t dtype, sc_redop_t op, sc_dtype_t wire,
                                    sc_comm_t *comm) {
  static const char fn[] = "sc_allreduce_compressed";
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (dtype != SC_FLOAT32)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: dtype %d is not SC_FLOAT32 (the buffers are float32; "
                  "the wire format is the wire argument)",
                  fn, (int)dtype);
  if (wire != SC_FLOAT16 && wire != SC_BFLOAT16)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: wire %d is neither SC_FLOAT16 nor SC_BFLOAT16", fn,
                  (int)wire);
  if ((unsigned)op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)op);
  /* The padded wire buffers: 2 * nranks * ceil(count / nranks) elements. */
  if (count > (SIZE_MAX / sizeof(float) - (size_t)comm->nranks) / 2)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu overflows the address space", fn, count);
  if (count && (!sendbuf || !recvbuf))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with count = %zu", fn,
                  sendbuf ? "recvbuf" : "sendbuf", count);
  const void *bufs[2] = {sendbuf, recvbuf};
  const char *names[2] = {"sendbuf", "recvbuf"};
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_buffers_kind(fn, 2, bufs, names, &kind));
  SC_CHECK(sc_comm_check_usable(comm));
  if (count == 0) return SC_SUCCESS;
  struct sc_halfwire *s = sc_comm_ext(comm, SC_EXT_HALFWIRE, hw_create, hw_free);
  if (!s) return SC_ERR(SC_ERR_NOMEM, "%s: the communicator's state", fn);
  pthread_mutex_lock(&s->lock);
  sc_result_t r = kind == SC_MEM_HOST ? hw_host(s, sendbuf, recvbuf, count, op, wire, comm)
                                      : hw_device(s, sendbuf, recvbuf, count, op, wire, comm);
  pthread_mutex_unlock(&s->lock);
  return r;
}
