/* Point 7 of the CUDA work (bad input), the paths that need no GPU: the
 * stream forms' argument checks and their answers without CUDA or without a
 * device; the verdicts on mixed host/device buffers, a buffer of another
 * device, device buffers before the device path exists, and a stream form
 * with host buffers (fed with memory types, so that every branch is reached
 * here); sc_cuda_available against the CUDA runtime asked directly; host
 * buffers still reduce correctly through the new boundary check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "core/device.h"
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
  assert_int_equal(sc_stream_verdict("s", 1, 2, 2, dev, names, 0), SC_ERR_UNSUPPORTED);
  expect_detail("stream-ordered execution is not implemented yet");
}

/* The check added to the collectives lets host buffers through unchanged:
 * a 1-rank all-reduce returns its input, an in-place one too. */
static void test_host_collectives_pass_the_check(void **state) {
  (void)state;
  int32_t in[5] = {3, -1, 4, 1, -5}, out[5] = {0};
  assert_int_equal(sc_check_buffers("sc_allreduce", in, out), SC_SUCCESS);
  assert_int_equal(sc_allreduce(in, out, 5, SC_INT32, SC_SUM, comm), SC_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(sc_allreduce(out, out, 5, SC_INT32, SC_MAX, comm), SC_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(sc_broadcast(NULL, out, 5, SC_INT32, 0, comm), SC_ERR_INVALID_ARG);
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
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
