/* SPDX-License-Identifier: BSD-3-Clause */
/* main() of the plain (non-libFuzzer) build of a fuzz target: replays files
 * and directories (not recursive), so the corpus and every crash found by
 * tools/fuzz.sh run in `make check` as regression inputs. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test/fuzz/fuzz_common.h"

#define FUZZ_MAX_INPUT (1 << 20)

static int run_file(const char *path, long *count) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  static uint8_t buf[FUZZ_MAX_INPUT];
  size_t n = fread(buf, 1, sizeof(buf), f);
  int too_big = !feof(f);
  fclose(f);
  if (too_big) {
    fprintf(stderr, "%s: larger than %d bytes\n", path, FUZZ_MAX_INPUT);
    return 1;
  }
  /* An exact-size heap copy, so that a read past the input is caught under ASan. */
  uint8_t *copy = malloc(n ? n : 1);
  if (!copy) return 1;
  memcpy(copy, buf, n);
  LLVMFuzzerTestOneInput(copy, n);
  free(copy);
  (*count)++;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path, long *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) return run_file(path, count);
  DIR *d = opendir(path);
  if (!d) {
    perror(path);
    return 1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof(*nn));
      if (!nn) {
        rc = 1;
        break;
      }
      names = nn;
    }
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    names[n] = malloc(len);
    if (!names[n]) {
      rc = 1;
      break;
    }
    snprintf(names[n++], len, "%s/%s", path, e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof(*names), cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) rc = run_file(names[i], count);
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  long count = 0;
  int rc = 0;
  if (argc > 1) {
    for (int i = 1; i < argc && rc == 0; i++) rc = run_path(argv[i], &count);
  } else {
    const char *top = getenv("top_srcdir");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/test/fuzz/corpus/%s", top ? top : ".", fuzz_target_name);
    rc = run_path(dir, &count);
  }
  printf("%s: %ld inputs replayed%s\n", fuzz_target_name, count, rc ? ", FAILED" : "");
  /* An empty corpus would make this test pass without checking anything. */
  if (rc == 0 && count == 0) {
    fprintf(stderr, "%s: no inputs found\n", fuzz_target_name);
    rc = 1;
  }
  return rc;
}
