/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the fuzz targets. Each target defines LLVMFuzzerTestOneInput; the
 * libFuzzer build (tools/fuzz.sh) links libFuzzer's main, the plain build
 * (make check, SC_FUZZ_REPLAY defined) links fuzz_replay.c's main, which runs
 * every file of the given files or directories (default: the target's corpus
 * under $top_srcdir/test/fuzz/corpus/) through the target once. */
#ifndef SC_FUZZ_COMMON_H
#define SC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Corpus directory name of this target (test/fuzz/corpus/NAME). */
extern const char *const fuzz_target_name;

/* A property the target checks does not hold: report and crash, so that
 * libFuzzer saves the input and the replay run fails. */
#define FUZZ_REQUIRE(cond, ...)                                                                    \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond);                  \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      __builtin_trap();                                                                            \
    }                                                                                              \
  } while (0)

#endif
