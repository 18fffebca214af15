/* SPDX-License-Identifier: BSD-3-Clause */
/* A process whose SC_DEVRT_STANDIN names no loadable module has no device
 * runtime (even where CUDA and a GPU exist: the variable asks for the
 * stand-in and nothing else): device queries answer "none", and the buffer
 * verdicts say host memory without asking anything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kernels/devrt.h"
#include "lib/core/device.h"

static void test_no_runtime(void **state) {
  (void)state;
  assert_null(sc_devrt());
  assert_null(sc_devrt()); /* decided once */
  assert_int_equal(sc_device_count(), 0);
  assert_int_equal(sc_current_device(), -1);
  assert_int_equal(sc_cuda_available(), 0);
  /* An address no runtime knows: host memory, never dereferenced. */
  const void *p[2] = {(const void *)(uintptr_t)0x1000, NULL};
  const char *names[2] = {"sendbuf", "recvbuf"};
  sc_mem_kind_t kind = SC_MEM_DEVICE;
  assert_int_equal(sc_buffers_kind("t", 2, p, names, &kind), SC_SUCCESS);
  assert_int_equal(kind, SC_MEM_HOST);
  assert_int_equal(sc_mem_type_of(p[0]).kind, SC_MEM_HOST);
  assert_int_equal(sc_buffers_classify("t", SC_PATH_HOST, 2, p, names, &kind), SC_SUCCESS);
}

int main(void) {
  setenv("SC_DEVRT_STANDIN", "/nonexistent/libsc_devfake.so", 1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_runtime)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
