/* Placeholder until the selection benchmark lands (helper C replaces this file). */
#include <stdio.h>

#include "perf/gtopk_select.h"

int sc_gtopk_select_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "sc_gtopk_perf --select: not built yet\n");
  return 2;
}
