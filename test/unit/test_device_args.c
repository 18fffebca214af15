/* SPDX-License-Identifier: BSD-3-Clause */
/* Point 7 of the CUDA work (bad input), the paths that need no GPU: the
 * stream forms' argument checks and their answers without CUDA or without a
 * device; the verdicts on mixed host/device buffers, a buffer of another
 * device, device buffers before the device path exists, and a stream form
 * with host buffers (fed with memory types, so that every branch is reached
 * here); sc_cuda_available against the CUDA runtime asked directly; host
 * buffers still reduce correctly through the boundary checks of the
 * collectives, sc_topk, sc_sparse_allreduce, sc_gtopk_allreduce and
 * sc_fusion_add_tensor (a device pointer there is refused when a GPU is
 * visible). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "lib/core/device.h"
#include "sparsecoll.h"
#ifdef SC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static sc_comm_t *comm;

static int setup(void **state) {
  (void)state;
  setenv("SC_TIMEOUT_MS", "60000", 1);
  sc_unique_id_t id;
  if (sc_get_unique_id(&id) != SC_SUCCESS) return -1;
  return sc_comm_init_rank(&comm, 1, id, 0) == SC_SUCCESS ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return sc_comm_destroy(comm) == SC_SUCCESS ? 0 : -1;
}

static void expect_detail(const char *want) {
  if (!strstr(sc_last_error(), want)) fail_msg("detail \"%s\" lacks \"%s\"", sc_last_error(), want);
}

/* The runtime asked here, not through the library. */
static int devices_visible(void) {
#ifdef SC_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
#else
  return 0;
#endif
}

static void test_cuda_available_matches_runtime(void **state) {
  (void)state;
  assert_int_equal(sc_cuda_available(), devices_visible() > 0);
  assert_int_equal(sc_device_count(), devices_visible());
}

static void test_memory_type_of_host_pointers(void **state) {
  (void)state;
  static char global_buf[64];
  char stack_buf[64];
  void *heap = malloc(64);
  const void *ptrs[4] = {NULL, global_buf, stack_buf, heap};
  for (int i = 0; i < 4; i++) {
    sc_mem_type_t t = sc_mem_type_of(ptrs[i]);
    assert_int_equal(t.kind, SC_MEM_HOST);
    assert_int_equal(t.device, -1);
  }
  free(heap);
}

/* Arguments are checked before anything else, naming what is wrong. */
static void test_stream_forms_argument_checks(void **state) {
  (void)state;
  float buf[4] = {0};
  assert_int_equal(sc_allreduce_on_stream(buf, buf, 4, SC_FLOAT32, SC_SUM, NULL, NULL),
                   SC_ERR_INVALID_ARG);
  expect_detail("sc_allreduce_on_stream: comm is NULL");
  assert_int_equal(sc_allreduce_on_stream(buf, buf, 4, (sc_dtype_t)99, SC_SUM, comm, NULL),
                   SC_ERR_INVALID_ARG);
  expect_detail("invalid dtype 99");
  assert_int_equal(sc_reduce_scatter_on_stream(buf, buf, 4, SC_FLOAT32, (sc_redop_t)9, comm, NULL),
                   SC_ERR_INVALID_ARG);
  expect_detail("sc_reduce_scatter_on_stream: invalid reduction op 9");
  assert_int_equal(sc_broadcast_on_stream(buf, buf, 4, SC_FLOAT32, 1, comm, NULL),
                   SC_ERR_INVALID_ARG);
  expect_detail("root 1 outside [0, 1)");
  assert_int_equal(sc_reduce_on_stream(buf, buf, 4, SC_FLOAT32, SC_SUM, -1, comm, NULL),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_allgather_on_stream(NULL, buf, 4, SC_FLOAT32, comm, NULL),
                   SC_ERR_INVALID_ARG);
  expect_detail("sc_allgather_on_stream: sendbuf is NULL");
  assert_int_equal(sc_allreduce_on_stream(buf, NULL, 4, SC_FLOAT32, SC_SUM, comm, NULL),
                   SC_ERR_INVALID_ARG);
  expect_detail("recvbuf is NULL");
  assert_int_equal(
      sc_gtopk_allreduce_on_stream(buf, 4, SC_INT32, 1, SC_SELECT_EXACT, NULL, comm, NULL),
      SC_ERR_INVALID_ARG);
  expect_detail("not a float type");
  assert_int_equal(
      sc_gtopk_allreduce_on_stream(buf, 4, SC_FLOAT32, 1, (sc_select_t)7, NULL, comm, NULL),
      SC_ERR_INVALID_ARG);
  expect_detail("invalid selection method 7");
  assert_int_equal(
      sc_gtopk_allreduce_on_stream(NULL, 4, SC_FLOAT32, 1, SC_SELECT_EXACT, NULL, comm, NULL),
      SC_ERR_INVALID_ARG);
  expect_detail("grad is NULL");
}

/* Valid arguments on this machine: no CUDA or no device, said as such. */
static void test_stream_forms_without_device(void **state) {
  (void)state;
  if (devices_visible() > 0) skip();
#ifdef SC_HAVE_CUDA
  const char *why = "no CUDA device visible";
#else
  const char *why = "built without CUDA";
#endif
  float a[4] = {1, 2, 3, 4}, b[4];
  sc_result_t r[6];
  r[0] = sc_allreduce_on_stream(a, b, 4, SC_FLOAT32, SC_SUM, comm, NULL);
  r[1] = sc_reduce_scatter_on_stream(a, b, 4, SC_FLOAT32, SC_MAX, comm, NULL);
  r[2] = sc_allgather_on_stream(a, b, 4, SC_FLOAT32, comm, NULL);
  r[3] = sc_broadcast_on_stream(a, b, 4, SC_FLOAT32, 0, comm, NULL);
  r[4] = sc_reduce_on_stream(a, b, 0, SC_FLOAT32, SC_SUM, 0, comm, NULL);
  r[5] = sc_gtopk_allreduce_on_stream(a, 4, SC_FLOAT32, 2, SC_SELECT_GAUSSIAN, NULL, comm, NULL);
  for (int i = 0; i < 6; i++) assert_int_equal(r[i], SC_ERR_UNSUPPORTED);
  expect_detail("sc_gtopk_allreduce_on_stream");
  expect_detail(why);
  /* Nothing was written. */
  assert_true(a[0] == 1 && a[3] == 4);
}

static const sc_mem_type_t HOST = {SC_MEM_HOST, -1}, DEV0 = {SC_MEM_DEVICE, 0},
                           DEV1 = {SC_MEM_DEVICE, 1};

static void test_buffer_verdicts(void **state) {
  (void)state;
  const char *names[2] = {"sendbuf", "recvbuf"};
  sc_mem_type_t t[2] = {HOST, HOST};
  assert_int_equal(sc_buffers_verdict("f", 2, t, names, -1, 0), SC_SUCCESS);
  t[1] = DEV0;
  assert_int_equal(sc_buffers_verdict("sc_allreduce", 2, t, names, 0, 0), SC_ERR_INVALID_ARG);
  expect_detail("sc_allreduce: sendbuf is host memory but recvbuf is CUDA device memory");
  t[0] = DEV0;
  t[1] = HOST;
  assert_int_equal(sc_buffers_verdict("g", 2, t, names, 0, 1), SC_ERR_INVALID_ARG);
  expect_detail("sendbuf is CUDA device memory but recvbuf is host memory");
  t[1] = DEV1;
  assert_int_equal(sc_buffers_verdict("g", 2, t, names, 0, 1), SC_ERR_INVALID_ARG);
  expect_detail("recvbuf is memory of CUDA device 1, not of the communicator's device 0");
  t[1] = DEV0;
  assert_int_equal(sc_buffers_verdict("g", 2, t, names, 0, 0), SC_ERR_UNSUPPORTED);
  expect_detail("g: sendbuf is CUDA device memory: device buffers are not implemented yet");
  assert_int_equal(sc_buffers_verdict("g", 2, t, names, 0, 1), SC_SUCCESS);
  /* An absent buffer (NULL name) is not compared. */
  const char *one[2] = {NULL, "recvbuf"};
  t[0] = HOST;
  assert_int_equal(sc_buffers_verdict("g", 2, t, one, 0, 1), SC_SUCCESS);
}

static void test_stream_verdicts(void **state) {
  (void)state;
  const char *names[2] = {"sendbuf", "recvbuf"};
  sc_mem_type_t dev[2] = {DEV0, DEV0}, host[2] = {HOST, HOST}, mixed[2] = {DEV0, DEV1};
  assert_int_equal(sc_stream_verdict("s", 0, 1, 2, dev, names, 0), SC_ERR_UNSUPPORTED);
  expect_detail("s: built without CUDA");
  assert_int_equal(sc_stream_verdict("s", 1, 0, 2, dev, names, 0), SC_ERR_UNSUPPORTED);
  expect_detail("s: no CUDA device visible");
  assert_int_equal(sc_stream_verdict("s", 1, 2, 2, host, names, 0), SC_ERR_INVALID_ARG);
  expect_detail("s: sendbuf is host memory: stream forms take device buffers only");
  host[0] = DEV0;
  assert_int_equal(sc_stream_verdict("s", 1, 2, 2, host, names, 0), SC_ERR_INVALID_ARG);
  expect_detail("recvbuf is host memory");
  assert_int_equal(sc_stream_verdict("s", 1, 2, 2, mixed, names, 0), SC_ERR_INVALID_ARG);
  expect_detail("not of the communicator's device 0");
  /* Device buffers of the communicator's device: the stream path takes them;
   * an absent buffer (NULL name) is not looked at, a host one there included. */
  assert_int_equal(sc_stream_verdict("s", 1, 2, 2, dev, names, 0), SC_SUCCESS);
  const char *only_recv[2] = {NULL, "recvbuf"};
  sc_mem_type_t host_send[2] = {HOST, DEV0};
  assert_int_equal(sc_stream_verdict("s", 1, 1, 2, host_send, only_recv, 0), SC_SUCCESS);
  assert_int_equal(sc_stream_verdict("s", 1, 1, 2, host_send, names, 0), SC_ERR_INVALID_ARG);
  expect_detail("s: sendbuf is host memory");
}

/* The check added to the collectives lets host buffers through unchanged:
 * a 1-rank all-reduce returns its input, an in-place one too. */
static void test_host_collectives_pass_the_check(void **state) {
  (void)state;
  int32_t in[5] = {3, -1, 4, 1, -5}, out[5] = {0};
  const void *bufs[2] = {in, out};
  static const char *const bnames[2] = {"sendbuf", "recvbuf"};
  sc_mem_kind_t kind = SC_MEM_DEVICE;
  assert_int_equal(sc_buffers_classify("sc_allreduce", SC_PATH_HOST, 2, bufs, bnames, &kind),
                   SC_SUCCESS);
  assert_int_equal(kind, SC_MEM_HOST);
  assert_int_equal(sc_allreduce(in, out, 5, SC_INT32, SC_SUM, comm), SC_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(sc_allreduce(out, out, 5, SC_INT32, SC_MAX, comm), SC_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(sc_broadcast(NULL, out, 5, SC_INT32, 0, comm), SC_ERR_INVALID_ARG);
}

/* The other entries that hand buffers to host code: host buffers pass the
 * check and the results are what an independent reference says. */
static void test_host_buffer_list(void **state) {
  (void)state;
  char a[8], b[8];
  void *heap = malloc(8);
  const void *p[4] = {a, NULL, heap, b};
  static const char *const names[4] = {"w", "x", "y", "z"};
  sc_mem_kind_t kind;
  for (int n = 0; n <= 4; n++)
    assert_int_equal(sc_buffers_classify("f", SC_PATH_HOST, n, p, names, &kind), SC_SUCCESS);
  free(heap);
}

/* Index of the largest |x[i]| not yet taken (distinct magnitudes). */
static int largest_untaken(const float *x, int n, const int *taken) {
  int best = -1;
  for (int i = 0; i < n; i++)
    if (!taken[i] && (best < 0 || fabsf(x[i]) > fabsf(x[best]))) best = i;
  return best;
}

static void test_host_sparse_entries_pass_the_check(void **state) {
  (void)state;
  enum { N = 9, K = 3 };
  const float x[N] = {0.5f, -7, 2, -1.5f, 9, 0.25f, -3, 1, 6};
  int taken[N] = {0};
  for (int j = 0; j < K; j++) taken[largest_untaken(x, N, taken)] = 1;
  uint32_t ref_idx[K];
  float ref_val[K];
  int m = 0;
  for (int i = 0; i < N; i++)
    if (taken[i]) ref_idx[m] = (uint32_t)i, ref_val[m++] = x[i];

  uint32_t idx[2 * K];
  float val[2 * K];
  size_t nnz = 0;
  assert_int_equal(sc_topk(x, N, SC_FLOAT32, K, SC_SELECT_EXACT, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, K);
  assert_memory_equal(idx, ref_idx, sizeof ref_idx);
  assert_memory_equal(val, ref_val, sizeof ref_val);

  /* One rank: the sparse all-reduce returns its own set. */
  uint32_t out_idx[K];
  float out_val[K];
  size_t out_nnz = 0;
  assert_int_equal(sc_sparse_allreduce(ref_idx, ref_val, K, N, K, SC_FLOAT32, SC_SPARSE_GTOPK,
                                       out_idx, out_val, &out_nnz, comm),
                   SC_SUCCESS);
  assert_int_equal(out_nnz, K);
  assert_memory_equal(out_idx, ref_idx, sizeof ref_idx);
  assert_memory_equal(out_val, ref_val, sizeof ref_val);

  /* One rank, no error feedback: the top K stay, the rest become 0. */
  float grad[N];
  memcpy(grad, x, sizeof grad);
  assert_int_equal(sc_gtopk_allreduce(grad, N, SC_FLOAT32, K, SC_SELECT_EXACT, NULL, comm),
                   SC_SUCCESS);
  for (int i = 0; i < N; i++) assert_true(grad[i] == (taken[i] ? x[i] : 0.0f));

  /* A fusion tensor in host memory is accepted and averaged (1 rank: kept). */
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.alpha_us = 10;
  cfg.beta_us_per_byte = 0.001;
  sc_fusion_t *f = NULL;
  assert_int_equal(sc_fusion_create(comm, &cfg, &f), SC_SUCCESS);
  float t[N];
  memcpy(t, x, sizeof t);
  int tid = -1;
  assert_int_equal(sc_fusion_add_tensor(f, t, N, SC_FLOAT32, 1, &tid), SC_SUCCESS);
  assert_int_equal(tid, 0);
  assert_int_equal(sc_fusion_plan(f), SC_SUCCESS);
  assert_int_equal(sc_fusion_ready(f, tid), SC_SUCCESS);
  assert_int_equal(sc_fusion_wait_all(f), SC_SUCCESS);
  assert_memory_equal(t, x, sizeof t);
  assert_int_equal(sc_fusion_destroy(f), SC_SUCCESS);
}

/* With a device: mixed host and device buffers are refused before host code
 * touches them, naming the buffers; calls with all their buffers on the
 * device run there. */
static void test_device_pointers_at_the_sparse_entries(void **state) {
  (void)state;
  if (devices_visible() == 0) skip();
#ifdef SC_HAVE_CUDA
  void *d = NULL;
  assert_int_equal(cudaMalloc(&d, 4096), cudaSuccess);
  uint32_t idx[8];
  float val[8];
  size_t nnz;
  assert_int_equal(sc_topk(d, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, idx, val, &nnz),
                   SC_ERR_INVALID_ARG);
  expect_detail("sc_topk: dense is CUDA device memory but indices is host memory");
  assert_int_equal(
      sc_sparse_allreduce(idx, d, 2, 8, 2, SC_FLOAT32, SC_SPARSE_GTOPK, idx, val, &nnz, comm),
      SC_ERR_INVALID_ARG);
  expect_detail("sc_sparse_allreduce: indices is host memory but values is CUDA device memory");
  /* A whole call on the device is taken: gTop-k of a device gradient on one
   * rank keeps the two largest magnitudes (placed by hand) and zeroes the
   * rest, as the same call on a host copy does. */
  float g[8] = {0.5f, -4.0f, 1.0f, 3.0f, -0.25f, 2.0f, -1.5f, 0.75f}, got[8];
  const float want[8] = {0, -4.0f, 0, 3.0f, 0, 0, 0, 0};
  assert_int_equal(cudaMemcpy(d, g, sizeof g, cudaMemcpyHostToDevice), cudaSuccess);
  assert_int_equal(sc_gtopk_allreduce(d, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, comm),
                   SC_SUCCESS);
  assert_int_equal(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(got, want, sizeof got);
  assert_int_equal(sc_gtopk_allreduce(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, comm),
                   SC_SUCCESS);
  assert_memory_equal(g, want, sizeof g);
  /* Fusion takes a device tensor: averaged over one rank, it is kept. */
  const float t0[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  assert_int_equal(cudaMemcpy(d, t0, sizeof t0, cudaMemcpyHostToDevice), cudaSuccess);
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  sc_fusion_t *f = NULL;
  int tid;
  assert_int_equal(sc_fusion_create(comm, &cfg, &f), SC_SUCCESS);
  assert_int_equal(sc_fusion_add_tensor(f, d, 8, SC_FLOAT32, 1, &tid), SC_SUCCESS);
  assert_int_equal(sc_fusion_plan(f), SC_SUCCESS);
  assert_int_equal(sc_fusion_ready(f, tid), SC_SUCCESS);
  assert_int_equal(sc_fusion_wait_all(f), SC_SUCCESS);
  assert_int_equal(sc_fusion_destroy(f), SC_SUCCESS);
  assert_int_equal(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(got, t0, sizeof got);
  cudaFree(d);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_available_matches_runtime),
      cmocka_unit_test(test_memory_type_of_host_pointers),
      cmocka_unit_test(test_stream_forms_argument_checks),
      cmocka_unit_test(test_stream_forms_without_device),
      cmocka_unit_test(test_buffer_verdicts),
      cmocka_unit_test(test_stream_verdicts),
      cmocka_unit_test(test_host_collectives_pass_the_check),
      cmocka_unit_test(test_host_buffer_list),
      cmocka_unit_test(test_host_sparse_entries_pass_the_check),
      cmocka_unit_test(test_device_pointers_at_the_sparse_entries),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
