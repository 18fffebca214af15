/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests on the device stand-in (test/devfake/): point SC_DEVRT_STANDIN
 * at the module of this build before the first sc_devrt() call, or skip
 * (exit 77) when the module is not built. The _cuda builds of the same
 * tests take the CUDA runtime instead. */
#ifndef SC_TEST_UNIT_DEVRT_STANDIN_H
#define SC_TEST_UNIT_DEVRT_STANDIN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/devrt.h"

static inline const sc_devrt_t *standin_load(void) {
  const char *top = getenv("top_builddir");
  char path[4096];
  snprintf(path, sizeof path, "%s/test/devfake/.libs/libsc_devfake.so", top ? top : ".");
  if (access(path, R_OK) != 0) {
    printf("skipped: the device stand-in %s is not built\n", path);
    exit(77);
  }
  setenv("SC_DEVRT_STANDIN", path, 1);
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) {
    printf("the device stand-in %s did not load\n", path);
    exit(1);
  }
  return rt;
}

/* The same tests on the CUDA runtime: skipped without a device. */
static inline const sc_devrt_t *cuda_runtime_load(void) {
  unsetenv("SC_DEVRT_STANDIN");
  const sc_devrt_t *rt = sc_devrt();
  if (!rt || strcmp(rt->name, "cuda") != 0) {
    printf("skipped: no CUDA device\n");
    exit(77);
  }
  return rt;
}

#endif
