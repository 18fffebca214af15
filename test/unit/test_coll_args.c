/* SPDX-License-Identifier: BSD-3-Clause */
/* Every form of a collective refuses the same bad arguments alike: each
 * dense collective's blocking, non-blocking (sc_i*) and stream
 * (sc_*_on_stream) form (the all-to-alls, gather, scatter and the uneven
 * all-gather among them), and gTop-k's blocking and stream form, are driven
 * with the same bad arguments and must return the code include/sparsecoll.h
 * documents (SC_ERR_INVALID_ARG for what the caller passed wrong,
 * SC_ERR_UNSUPPORTED for a stream form without a device) and the same
 * detail past the function's name, down to the place in the library that
 * found the error: one check for every form. Where the forms are documented to differ
 * (a stream form takes device buffers only), each form's own answer is
 * asserted. On the device stand-in (test/devfake/, when built) mixed host and
 * device buffers and a buffer of another device are refused by every form;
 * without it, the stream forms say that no device is there. Valid calls in
 * place (include/sparsecoll.h's conventions) still run in every form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "sparsecoll.h"

enum { AR, RS, AG, BC, RD, A2A, A2AV, GA, SC, AGV, NCOLL };
enum { BLOCKING, NONBLOCKING, STREAM, NFORM };

static const char *const fn_name[NCOLL][NFORM] = {
    {"sc_allreduce", "sc_iallreduce", "sc_allreduce_on_stream"},
    {"sc_reduce_scatter", "sc_ireduce_scatter", "sc_reduce_scatter_on_stream"},
    {"sc_allgather", "sc_iallgather", "sc_allgather_on_stream"},
    {"sc_broadcast", "sc_ibroadcast", "sc_broadcast_on_stream"},
    {"sc_reduce", "sc_ireduce", "sc_reduce_on_stream"},
    {"sc_alltoall", "sc_ialltoall", "sc_alltoall_on_stream"},
    {"sc_alltoallv", "sc_ialltoallv", "sc_alltoallv_on_stream"},
    {"sc_gather", "sc_igather", "sc_gather_on_stream"},
    {"sc_scatter", "sc_iscatter", "sc_scatter_on_stream"},
    {"sc_allgatherv", "sc_iallgatherv", "sc_allgatherv_on_stream"},
};

static void expect_detail(const char *want) {
  if (!strstr(sc_last_error(), want)) fail_msg("detail \"%s\" lacks \"%s\"", sc_last_error(), want);
}

static int has_op(int c) {
  return c == AR || c == RS || c == RD;
}

static int has_root(int c) {
  return c == BC || c == RD || c == GA || c == SC;
}

/* Off the root these buffers are not used, and the details say so. */
static const char *send_name(int c) {
  return c == BC || c == SC ? "sendbuf (on the root)" : "sendbuf";
}
static const char *recv_name(int c) {
  return c == RD || c == GA ? "recvbuf (on the root)" : "recvbuf";
}

static sc_comm_t *comm;
static const sc_devrt_t *rt; /* the stand-in, or NULL when it is not built */
static void *stream;         /* a stream of rt */

enum { SCOUNTS, SDISPLS, RCOUNTS, RDISPLS };

typedef struct call {
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  sc_dtype_t dtype;
  sc_redop_t op;
  int root;
  sc_comm_t *comm;
  /* The v collectives' arrays of one rank (the all-gather's: RCOUNTS and
   * RDISPLS); bit i of vnull passes array i as NULL. */
  size_t v[4];
  unsigned vnull;
} call_t;

static call_t valid(const void *sendbuf, void *recvbuf) {
  call_t a = {sendbuf, recvbuf, 4, SC_FLOAT32, SC_SUM, 0, comm, {4, 0, 4, 0}, 0};
  return a;
}

/* A count of n elements, for the v collectives too. */
static void set_count(call_t *a, size_t n) {
  a->count = a->v[SCOUNTS] = a->v[RCOUNTS] = n;
}

/* Waits for everything enqueued on the test's stream. */
static sc_result_t drain(void) {
  void *ev = NULL;
  sc_result_t r = rt->event_create(&ev);
  if (r == SC_SUCCESS) r = rt->event_record(ev, stream);
  if (r == SC_SUCCESS) r = sc_dev_event_wait(rt, ev, 30000, "the test's stream");
  if (ev) rt->event_destroy(ev);
  return r;
}

/* One call of collective c in one form; a request is waited for. */
static sc_result_t run(int c, int form, const call_t *a) {
  sc_request_t *req = NULL;
  sc_result_t r = SC_ERR_INTERNAL;
  const void *s = a->sendbuf;
  void *d = a->recvbuf;
  const size_t *v[4];
  for (int i = 0; i < 4; i++) v[i] = a->vnull >> i & 1 ? NULL : &a->v[i];
  switch (c) {
  case AR:
    r = form == BLOCKING ? sc_allreduce(s, d, a->count, a->dtype, a->op, a->comm)
        : form == NONBLOCKING
            ? sc_iallreduce(s, d, a->count, a->dtype, a->op, a->comm, &req)
            : sc_allreduce_on_stream(s, d, a->count, a->dtype, a->op, a->comm, stream);
    break;
  case RS:
    r = form == BLOCKING ? sc_reduce_scatter(s, d, a->count, a->dtype, a->op, a->comm)
        : form == NONBLOCKING
            ? sc_ireduce_scatter(s, d, a->count, a->dtype, a->op, a->comm, &req)
            : sc_reduce_scatter_on_stream(s, d, a->count, a->dtype, a->op, a->comm, stream);
    break;
  case AG:
    r = form == BLOCKING      ? sc_allgather(s, d, a->count, a->dtype, a->comm)
        : form == NONBLOCKING ? sc_iallgather(s, d, a->count, a->dtype, a->comm, &req)
                              : sc_allgather_on_stream(s, d, a->count, a->dtype, a->comm, stream);
    break;
  case BC:
    r = form == BLOCKING ? sc_broadcast(s, d, a->count, a->dtype, a->root, a->comm)
        : form == NONBLOCKING
            ? sc_ibroadcast(s, d, a->count, a->dtype, a->root, a->comm, &req)
            : sc_broadcast_on_stream(s, d, a->count, a->dtype, a->root, a->comm, stream);
    break;
  case RD:
    r = form == BLOCKING ? sc_reduce(s, d, a->count, a->dtype, a->op, a->root, a->comm)
        : form == NONBLOCKING
            ? sc_ireduce(s, d, a->count, a->dtype, a->op, a->root, a->comm, &req)
            : sc_reduce_on_stream(s, d, a->count, a->dtype, a->op, a->root, a->comm, stream);
    break;
  case A2A:
    r = form == BLOCKING      ? sc_alltoall(s, d, a->count, a->dtype, a->comm)
        : form == NONBLOCKING ? sc_ialltoall(s, d, a->count, a->dtype, a->comm, &req)
                              : sc_alltoall_on_stream(s, d, a->count, a->dtype, a->comm, stream);
    break;
  case A2AV:
    r = form == BLOCKING ? sc_alltoallv(s, v[0], v[1], d, v[2], v[3], a->dtype, a->comm)
        : form == NONBLOCKING
            ? sc_ialltoallv(s, v[0], v[1], d, v[2], v[3], a->dtype, a->comm, &req)
            : sc_alltoallv_on_stream(s, v[0], v[1], d, v[2], v[3], a->dtype, a->comm, stream);
    break;
  case GA:
    r = form == BLOCKING ? sc_gather(s, d, a->count, a->dtype, a->root, a->comm)
        : form == NONBLOCKING
            ? sc_igather(s, d, a->count, a->dtype, a->root, a->comm, &req)
            : sc_gather_on_stream(s, d, a->count, a->dtype, a->root, a->comm, stream);
    break;
  case SC:
    r = form == BLOCKING ? sc_scatter(s, d, a->count, a->dtype, a->root, a->comm)
        : form == NONBLOCKING
            ? sc_iscatter(s, d, a->count, a->dtype, a->root, a->comm, &req)
            : sc_scatter_on_stream(s, d, a->count, a->dtype, a->root, a->comm, stream);
    break;
  case AGV:
    r = form == BLOCKING ? sc_allgatherv(s, a->count, d, v[2], v[3], a->dtype, a->comm)
        : form == NONBLOCKING
            ? sc_iallgatherv(s, a->count, d, v[2], v[3], a->dtype, a->comm, &req)
            : sc_allgatherv_on_stream(s, a->count, d, v[2], v[3], a->dtype, a->comm, stream);
    break;
  }
  if (r != SC_SUCCESS && req) fail_msg("%s failed but handed out a request", fn_name[c][form]);
  if (r == SC_SUCCESS && form == NONBLOCKING) r = sc_wait(&req);
  if (r == SC_SUCCESS && form == STREAM) r = drain();
  return r;
}

/* The detail past "fn: " (sc_last_error: "<code>: fn: <what> (<file>:<line>)"):
 * what was wrong and where it was found, which must be the same for every
 * form of a call. */
static const char *past_name(const char *detail, const char *fn) {
  char key[128];
  snprintf(key, sizeof key, ": %s: ", fn);
  const char *at = strstr(detail, key);
  if (!at) fail_msg("detail \"%s\" does not name \"%s\"", detail, fn);
  return at + strlen(key);
}

/* Collective c in every form on a: the blocking and non-blocking forms must
 * return want with a detail containing detail, the stream form want_stream
 * and detail_stream. The forms whose expectations are the same must agree
 * on the detail word for word past their names. */
static void expect_forms(int c, const call_t *a, sc_result_t want, const char *detail,
                         sc_result_t want_stream, const char *detail_stream) {
  char got[NFORM][SC_ERRMSG_MAX];
  for (int f = 0; f < NFORM; f++) {
    const int st = f == STREAM;
    sc_result_t r = run(c, f, a);
    sc_result_t w = st ? want_stream : want;
    const char *sub = st ? detail_stream : detail;
    if (r != w)
      fail_msg("%s: %s (%s), want %s", fn_name[c][f], sc_strerror(r), sc_last_error(),
               sc_strerror(w));
    if (w == SC_SUCCESS) {
      got[f][0] = '\0';
      continue;
    }
    snprintf(got[f], sizeof got[f], "%s", past_name(sc_last_error(), fn_name[c][f]));
    if (sub && !strstr(got[f], sub))
      fail_msg("%s: detail \"%s\" lacks \"%s\"", fn_name[c][f], got[f], sub);
  }
  if (strcmp(got[BLOCKING], got[NONBLOCKING]) != 0)
    fail_msg("%s and %s differ: \"%s\" / \"%s\"", fn_name[c][BLOCKING], fn_name[c][NONBLOCKING],
             got[BLOCKING], got[NONBLOCKING]);
  if (want_stream == want && detail_stream == detail && strcmp(got[BLOCKING], got[STREAM]) != 0)
    fail_msg("%s and %s differ: \"%s\" / \"%s\"", fn_name[c][BLOCKING], fn_name[c][STREAM],
             got[BLOCKING], got[STREAM]);
}

/* Every form alike. */
static void expect_all(int c, const call_t *a, sc_result_t want, const char *detail) {
  expect_forms(c, a, want, detail, want, detail);
}

static void test_bad_arguments_alike_in_every_form(void **state) {
  (void)state;
  float x[64], y[64];
  for (int c = 0; c < NCOLL; c++) {
    call_t a = valid(x, y);
    a.comm = NULL;
    expect_all(c, &a, SC_ERR_INVALID_ARG, "comm is NULL");

    char want[160];
    a = valid(NULL, y);
    snprintf(want, sizeof want, "%s is NULL with a non-zero count", send_name(c));
    expect_all(c, &a, SC_ERR_INVALID_ARG, want);
    a = valid(x, NULL);
    snprintf(want, sizeof want, "%s is NULL with a non-zero count", recv_name(c));
    expect_all(c, &a, SC_ERR_INVALID_ARG, want);

    a = valid(x, y);
    a.dtype = (sc_dtype_t)99;
    expect_all(c, &a, SC_ERR_INVALID_ARG, "invalid dtype 99");

    if (has_op(c)) {
      a = valid(x, y);
      a.op = (sc_redop_t)9;
      expect_all(c, &a, SC_ERR_INVALID_ARG, "invalid reduction op 9");
      a.op = (sc_redop_t)-1;
      expect_all(c, &a, SC_ERR_INVALID_ARG, "invalid reduction op -1");
    }
    if (has_root(c)) {
      a = valid(x, y);
      a.root = 1; /* one rank */
      expect_all(c, &a, SC_ERR_INVALID_ARG, "root 1 outside [0, 1)");
      a.root = -1;
      expect_all(c, &a, SC_ERR_INVALID_ARG, "root -1 outside [0, 1)");
    }

    /* Checked before the buffers are looked at: no element is touched. */
    if (c == A2AV) continue; /* no count of its own: test_v_arrays_alike_in_every_form */
    a = valid(x, y);
    set_count(&a, SIZE_MAX / 2);
    expect_all(c, &a, SC_ERR_INVALID_ARG, "overflows the address space");
    set_count(&a, SIZE_MAX / 4 + 1); /* 4-byte elements: one past the address space */
    expect_all(c, &a, SC_ERR_INVALID_ARG, "x 1 overflows the address space");
  }
}

/* The uneven collectives' arrays: each one NULL, a block past the address
 * space by its count or its displacement, the all-gather's own block of
 * another length than its sendcount, the all-to-all in place. */
static void test_v_arrays_alike_in_every_form(void **state) {
  (void)state;
  float x[64], y[64];
  static const char *const a2av_names[4] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
  static const char *const agv_names[4] = {"", "", "recvcounts", "displs"};
  const int vcolls[2] = {A2AV, AGV};
  for (int k = 0; k < 2; k++) {
    const int c = vcolls[k];
    char want[160];
    for (int i = c == AGV ? RCOUNTS : SCOUNTS; i < 4; i++) {
      call_t a = valid(x, y);
      a.vnull = 1u << i;
      snprintf(want, sizeof want, "%s is NULL", c == AGV ? agv_names[i] : a2av_names[i]);
      expect_all(c, &a, SC_ERR_INVALID_ARG, want);
    }
    /* Checked before the buffers are looked at. */
    for (int i = c == AGV ? RCOUNTS : SCOUNTS; i < 4; i += 2) {
      const char *side = i == SCOUNTS ? "send" : "receive";
      call_t a = valid(x, y);
      a.v[i] = SIZE_MAX / 4 + 1; /* 4-byte elements: one past the address space */
      snprintf(want, sizeof want, "%s block 0 (%zu elements at 0) overflows", side, a.v[i]);
      expect_all(c, &a, SC_ERR_INVALID_ARG, want);
      a = valid(x, y);
      a.v[i + 1] = SIZE_MAX / 4 - 3; /* 4 elements from there: one past the address space */
      snprintf(want, sizeof want, "%s block 0 (4 elements at %zu) overflows", side, a.v[i + 1]);
      expect_all(c, &a, SC_ERR_INVALID_ARG, want);
    }
  }
  call_t a = valid(x, y);
  a.count = 3;
  expect_all(AGV, &a, SC_ERR_INVALID_ARG, "sendcount 3 differs from recvcounts[0] = 4");
  a = valid(x, x);
  expect_all(A2AV, &a, SC_ERR_INVALID_ARG,
             "sendbuf and recvbuf overlap: the uneven all-to-all has no in-place form");
  /* With nothing to send and nothing to receive no buffer is looked at. */
  a = valid(x, x);
  set_count(&a, 0);
  expect_forms(A2AV, &a, SC_SUCCESS, NULL, rt ? SC_SUCCESS : SC_ERR_UNSUPPORTED, NULL);
}

/* include/sparsecoll.h: the uneven all-to-all's sendbuf and recvbuf must not
 * overlap (SC_ERR_INVALID_ARG), not only not be equal. */
static void test_alltoallv_overlap_refused(void **state) {
  (void)state;
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i;
  call_t a = valid(x, x + 2); /* send x[0, 4), receive x[2, 6) */
  expect_all(A2AV, &a, SC_ERR_INVALID_ARG, NULL);
  a = valid(x + 2, x); /* send x[2, 6), receive x[0, 4) */
  expect_all(A2AV, &a, SC_ERR_INVALID_ARG, NULL);
}

static void test_alltoall_algo_arguments(void **state) {
  (void)state;
  const char *name = "unchanged";
  assert_int_equal(sc_alltoall_algo(NULL, 4, SC_FLOAT32, &name), SC_ERR_INVALID_ARG);
  expect_detail("sc_alltoall_algo: NULL argument");
  assert_int_equal(sc_alltoall_algo(comm, 4, SC_FLOAT32, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_alltoall_algo: NULL argument");
  assert_int_equal(sc_alltoall_algo(comm, 4, (sc_dtype_t)99, &name), SC_ERR_INVALID_ARG);
  expect_detail("sc_alltoall_algo: invalid dtype 99");
  assert_int_equal(sc_alltoall_algo(comm, 4, SC_FLOAT32, &name), SC_SUCCESS);
  if (strcmp(name, "pairwise") && strcmp(name, "bruck") && strcmp(name, "hier"))
    fail_msg("sc_alltoall_algo names \"%s\", none of the all-to-all's algorithms", name);
}

/* Valid arguments, host buffers: the blocking forms run, the stream forms
 * refuse host memory (with a device runtime) or say there is no device. */
static void test_host_buffers(void **state) {
  (void)state;
  float x[4] = {1, -2, 3.5f, 8}, y[4];
  const char *why = rt ? "sendbuf is host memory: stream forms take device buffers only"
#ifdef SC_HAVE_CUDA
                       : "no CUDA device visible: stream forms need one";
#else
                       : "built without CUDA: stream forms need CUDA";
#endif
  for (int c = 0; c < NCOLL; c++) {
    call_t a = valid(x, y);
    memset(y, 0, sizeof y);
    expect_forms(c, &a, SC_SUCCESS, NULL, rt ? SC_ERR_INVALID_ARG : SC_ERR_UNSUPPORTED,
                 (c == BC || c == SC) && rt ? "sendbuf (on the root) is host memory" : why);
    /* One rank: every collective hands its input back. */
    assert_memory_equal(x, y, sizeof y);
    /* A zero count looks at no buffer, in any form but for the runtime. */
    a = valid(NULL, NULL);
    set_count(&a, 0);
    expect_forms(c, &a, SC_SUCCESS, NULL, rt ? SC_SUCCESS : SC_ERR_UNSUPPORTED, rt ? NULL : why);
  }
}

static void test_nonblocking_without_req(void **state) {
  (void)state;
  float x[4] = {0}, y[4];
  assert_int_equal(sc_iallreduce(x, y, 4, SC_FLOAT32, SC_SUM, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_iallreduce: req is NULL");
  assert_int_equal(sc_ireduce_scatter(x, y, 4, SC_FLOAT32, SC_SUM, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_ireduce_scatter: req is NULL");
  assert_int_equal(sc_iallgather(x, y, 4, SC_FLOAT32, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_iallgather: req is NULL");
  assert_int_equal(sc_ibroadcast(x, y, 4, SC_FLOAT32, 0, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_ibroadcast: req is NULL");
  assert_int_equal(sc_ireduce(x, y, 4, SC_FLOAT32, SC_SUM, 0, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_ireduce: req is NULL");
  assert_int_equal(sc_ialltoall(x, y, 4, SC_FLOAT32, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_ialltoall: req is NULL");
  const size_t n4[1] = {4}, z[1] = {0};
  assert_int_equal(sc_ialltoallv(x, n4, z, y, n4, z, SC_FLOAT32, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_ialltoallv: req is NULL");
  assert_int_equal(sc_igather(x, y, 4, SC_FLOAT32, 0, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_igather: req is NULL");
  assert_int_equal(sc_iscatter(x, y, 4, SC_FLOAT32, 0, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_iscatter: req is NULL");
  assert_int_equal(sc_iallgatherv(x, 4, y, n4, z, SC_FLOAT32, comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_iallgatherv: req is NULL");
  assert_int_equal(sc_ibarrier(comm, NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_ibarrier: req is NULL");
  assert_int_equal(sc_barrier(NULL), SC_ERR_INVALID_ARG);
  expect_detail("sc_barrier: comm is NULL");
  sc_request_t *req = (sc_request_t *)&req; /* set to NULL on refusal */
  assert_int_equal(sc_ibarrier(NULL, &req), SC_ERR_INVALID_ARG);
  expect_detail("sc_ibarrier: comm is NULL");
  assert_null(req);
}

/* On the stand-in: a call's buffers are one memory kind of the
 * communicator's device, in every form. */
static void test_mixed_and_foreign_device_buffers(void **state) {
  (void)state;
  if (!rt) skip();
  float h[64];
  void *d0 = NULL, *d1 = NULL;
  assert_int_equal(rt->set_device(0), SC_SUCCESS);
  assert_int_equal(rt->malloc_device(&d0, 256), SC_SUCCESS);
  assert_int_equal(rt->set_device(1), SC_SUCCESS);
  assert_int_equal(rt->malloc_device(&d1, 256), SC_SUCCESS);
  assert_int_equal(rt->set_device(0), SC_SUCCESS);
  for (int c = 0; c < NCOLL; c++) {
    const char *send = send_name(c);
    const char *recv = recv_name(c);
    char mixed[256], host_recv[256], host_send[256], foreign[256];
    snprintf(mixed, sizeof mixed,
             "%s is CUDA device memory but %s is host memory: one call's buffers must all be "
             "host memory or all on the communicator's device",
             send, recv);
    snprintf(host_recv, sizeof host_recv,
             "%s is host memory: stream forms take device buffers only", recv);
    snprintf(host_send, sizeof host_send,
             "%s is host memory: stream forms take device buffers only", send);
    snprintf(foreign, sizeof foreign,
             "%s is memory of CUDA device 1, not of the communicator's device 0", recv);

    call_t a = valid(d0, h);
    expect_forms(c, &a, SC_ERR_INVALID_ARG, mixed, SC_ERR_INVALID_ARG, host_recv);
    a = valid(h, d0);
    expect_forms(c, &a, SC_ERR_INVALID_ARG, "is host memory but", SC_ERR_INVALID_ARG, host_send);
    a = valid(d0, d1);
    expect_all(c, &a, SC_ERR_INVALID_ARG, foreign);
  }
  assert_int_equal(rt->free_device(d0), SC_SUCCESS);
  assert_int_equal(rt->free_device(d1), SC_SUCCESS);
}

/* In place by the conventions of include/sparsecoll.h (one rank: all of
 * them are sendbuf == recvbuf), on host buffers and on the stand-in's device
 * buffers, in every form that takes them. The uneven all-to-all has none. */
static void test_in_place_in_every_form(void **state) {
  (void)state;
  const float in[4] = {1.5f, -2, 0.25f, 7};
  float h[4];
  void *d = NULL;
  if (rt) assert_int_equal(rt->malloc_device(&d, sizeof h), SC_SUCCESS);
  const int colls[] = {RS, AG, A2A, GA, SC, AGV};
  for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++) {
    for (int f = 0; f < NFORM; f++) {
      if (f != STREAM) {
        memcpy(h, in, sizeof h);
        call_t a = valid(h, h);
        assert_int_equal(run(colls[i], f, &a), SC_SUCCESS);
        assert_memory_equal(h, in, sizeof h);
      }
      if (!rt) continue;
      assert_int_equal(rt->memcpy_async(d, in, sizeof in, stream), SC_SUCCESS);
      assert_int_equal(drain(), SC_SUCCESS);
      call_t a = valid(d, d);
      sc_result_t r = run(colls[i], f, &a);
      if (r != SC_SUCCESS) fail_msg("%s in place: %s", fn_name[colls[i]][f], sc_last_error());
      memset(h, 0, sizeof h);
      assert_int_equal(rt->memcpy_async(h, d, sizeof h, stream), SC_SUCCESS);
      assert_int_equal(drain(), SC_SUCCESS);
      assert_memory_equal(h, in, sizeof h);
    }
  }
  if (d) assert_int_equal(rt->free_device(d), SC_SUCCESS);
}

/* gTop-k's blocking and stream form: one check. */
static void expect_gtopk(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                         sc_ef_t *ef, sc_comm_t *c, sc_result_t want, const char *detail) {
  char got[2][SC_ERRMSG_MAX];
  const char *fn[2] = {"sc_gtopk_allreduce", "sc_gtopk_allreduce_on_stream"};
  for (int f = 0; f < 2; f++) {
    sc_result_t r = f ? sc_gtopk_allreduce_on_stream(grad, n, dtype, k, method, ef, c, stream)
                      : sc_gtopk_allreduce(grad, n, dtype, k, method, ef, c);
    if (r != want)
      fail_msg("%s: %s (%s), want %s", fn[f], sc_strerror(r), sc_last_error(), sc_strerror(want));
    snprintf(got[f], sizeof got[f], "%s", past_name(sc_last_error(), fn[f]));
    if (!strstr(got[f], detail)) fail_msg("%s: detail \"%s\" lacks \"%s\"", fn[f], got[f], detail);
  }
  assert_string_equal(got[0], got[1]);
}

static void test_gtopk_bad_arguments_alike(void **state) {
  (void)state;
  float g[8] = {0};
  expect_gtopk(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, NULL, SC_ERR_INVALID_ARG,
               "comm is NULL");
  char want[128];
  snprintf(want, sizeof want, "dtype %d is not a float type", (int)SC_INT32);
  expect_gtopk(g, 8, SC_INT32, 2, SC_SELECT_EXACT, NULL, comm, SC_ERR_INVALID_ARG, want);
  expect_gtopk(g, 8, SC_FLOAT32, 2, (sc_select_t)7, NULL, comm, SC_ERR_INVALID_ARG,
               "invalid selection method 7");
  expect_gtopk(NULL, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, comm, SC_ERR_INVALID_ARG,
               "grad is NULL with n 8");
  /* The limit is the local top-k's (sc_topk: n <= UINT32_MAX), 2^32 included. */
  expect_gtopk(g, (size_t)UINT32_MAX + 1, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, comm,
               SC_ERR_INVALID_ARG, "exceeds 4294967295");
  sc_ef_t *ef = NULL;
  assert_int_equal(sc_ef_create(6, SC_FLOAT32, &ef), SC_SUCCESS);
  snprintf(want, sizeof want, "the error-feedback state is for 6 elements of dtype %d, not 8 of %d",
           (int)SC_FLOAT32, (int)SC_FLOAT32);
  expect_gtopk(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm, SC_ERR_INVALID_ARG, want);
  assert_int_equal(sc_ef_destroy(ef), SC_SUCCESS);
}

/* Where the two gTop-k forms are documented to differ: a host gradient. */
static void test_gtopk_memory_kinds(void **state) {
  (void)state;
  float g[8] = {0.5f, -4, 1, 3, -0.25f, 2, -1.5f, 0.75f};
  const float want[8] = {0, -4, 0, 3, 0, 0, 0, 0};
  sc_ef_t *ef = NULL;
  assert_int_equal(sc_ef_create(8, SC_FLOAT32, &ef), SC_SUCCESS);
  assert_int_equal(sc_gtopk_allreduce(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm), SC_SUCCESS);
  assert_memory_equal(g, want, sizeof g);
  sc_result_t r =
      sc_gtopk_allreduce_on_stream(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm, stream);
  if (!rt) {
    assert_int_equal(r, SC_ERR_UNSUPPORTED);
    assert_int_equal(sc_ef_destroy(ef), SC_SUCCESS);
    return;
  }
  assert_int_equal(r, SC_ERR_INVALID_ARG);
  expect_detail("sc_gtopk_allreduce_on_stream: grad is host memory: stream forms take device "
                "buffers only");
  /* A device gradient with an sc_ef_t bound to host gradients: both forms. */
  void *d = NULL;
  assert_int_equal(rt->malloc_device(&d, sizeof g), SC_SUCCESS);
  expect_gtopk(d, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm, SC_ERR_INVALID_ARG,
               "grad is device memory, but this error-feedback state keeps its residual in host "
               "memory");
  assert_int_equal(sc_ef_destroy(ef), SC_SUCCESS);
  /* And the other way round: bound to the device by its first use. */
  assert_int_equal(sc_ef_create(8, SC_FLOAT32, &ef), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(d, g, sizeof g, stream), SC_SUCCESS);
  assert_int_equal(drain(), SC_SUCCESS);
  assert_int_equal(sc_gtopk_allreduce(d, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm), SC_SUCCESS);
  assert_int_equal(sc_gtopk_allreduce(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm),
                   SC_ERR_INVALID_ARG);
  expect_detail("sc_gtopk_allreduce: grad is host memory, but this error-feedback state keeps its "
                "residual on device 0 (its first use was with device gradients): use one sc_ef_t "
                "per memory kind");
  assert_int_equal(sc_ef_destroy(ef), SC_SUCCESS);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
}

/* A stream gTop-k of no elements (grad NULL, n = 0) with an sc_ef_t still
 * takes part in the collective and leaves the communicator healthy: the job
 * must not classify the NULL gradient again as host memory. */
static void test_gtopk_stream_empty(void **state) {
  (void)state;
  if (!rt) skip();
  sc_ef_t *ef = NULL;
  assert_int_equal(sc_ef_create(0, SC_FLOAT32, &ef), SC_SUCCESS);
  assert_int_equal(
      sc_gtopk_allreduce_on_stream(NULL, 0, SC_FLOAT32, 4, SC_SELECT_EXACT, ef, comm, stream),
      SC_SUCCESS);
  assert_int_equal(drain(), SC_SUCCESS);
  float x = 2.0f;
  assert_int_equal(sc_allreduce(&x, &x, 1, SC_FLOAT32, SC_SUM, comm), SC_SUCCESS);
  sc_result_t async = SC_ERR_INTERNAL;
  assert_int_equal(sc_comm_get_async_error(comm, &async), SC_SUCCESS);
  assert_int_equal(async, SC_SUCCESS);
  assert_true(x == 2.0f);
  assert_int_equal(sc_ef_destroy(ef), SC_SUCCESS);
}

static int setup(void **state) {
  (void)state;
  setenv("SC_TIMEOUT_MS", "60000", 1);
  sc_unique_id_t id;
  if (sc_get_unique_id(&id) != SC_SUCCESS) return -1;
  return sc_comm_init_rank(&comm, 1, id, 0) == SC_SUCCESS ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  if (stream) rt->stream_destroy(stream);
  return sc_comm_destroy(comm) == SC_SUCCESS ? 0 : -1;
}

int main(void) {
  /* The stand-in when this build has it; the pure argument checks run
   * either way. */
  const char *top = getenv("top_builddir");
  char path[4096];
  snprintf(path, sizeof path, "%s/test/devfake/.libs/libsc_devfake.so", top ? top : ".");
  if (access(path, R_OK) == 0) {
    setenv("SC_DEVRT_STANDIN", path, 1);
    setenv("SC_DEVFAKE_DEVICES", "2", 1); /* a buffer of another device */
    rt = sc_devrt();
    if (!rt || rt->stream_create(&stream) != SC_SUCCESS) {
      printf("the device stand-in %s did not load\n", path);
      return 1;
    }
  } else {
    unsetenv("SC_DEVRT_STANDIN");
    printf("no device stand-in at %s: the device cases are skipped\n", path);
    /* A GPU would answer differently from the expectations without one. */
    if (sc_devrt()) {
      printf("skipped: a device runtime other than the stand-in\n");
      return 77;
    }
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_arguments_alike_in_every_form),
      cmocka_unit_test(test_v_arrays_alike_in_every_form),
      cmocka_unit_test(test_alltoallv_overlap_refused),
      cmocka_unit_test(test_alltoall_algo_arguments),
      cmocka_unit_test(test_host_buffers),
      cmocka_unit_test(test_nonblocking_without_req),
      cmocka_unit_test(test_mixed_and_foreign_device_buffers),
      cmocka_unit_test(test_in_place_in_every_form),
      cmocka_unit_test(test_gtopk_bad_arguments_alike),
      cmocka_unit_test(test_gtopk_memory_kinds),
      cmocka_unit_test(test_gtopk_stream_empty),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
