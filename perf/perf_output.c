/* nccl-tests' table rows and the JSON record of a run (rank 0 only). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_internal.h"

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void json_result(FILE *f, const perf_result_t *r) {
  fprintf(f,
          "{\"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, \"wrong\": ", r->time_us,
          r->algbw, r->busbw);
  if (r->wrong < 0)
    fprintf(f, "null}");
  else
    fprintf(f, "%lld}", (long long)r->wrong);
}

int perf_write_json(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                    const perf_rank_desc_t *ranks, const perf_row_t *rows, size_t nrows,
                    int64_t total_wrong, double avg_busbw) {
  FILE *f = fopen(a->json_path, "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", coll->binary, a->json_path, strerror(errno));
    return -1;
  }
  int v = sc_get_version();
  fprintf(f, "{\n  \"binary\": ");
  json_string(f, coll->binary);
  fprintf(f, ",\n  \"collective\": ");
  json_string(f, coll->name);
  fprintf(f, ",\n  \"version\": \"%d.%d.%d\",\n  \"nranks\": %d,\n  \"dtype\": [", v / 10000,
          (v / 100) % 100, v % 100, nranks);
  for (int i = 0; i < a->ndtypes; i++)
    fprintf(f, "%s\"%s\"", i ? ", " : "", perf_dtype_infos[a->dtypes[i]].name);
  fprintf(f, "],\n  \"op\": [");
  for (int i = 0; i < a->nops; i++)
    fprintf(f, "%s\"%s\"", i ? ", " : "", coll->has_op ? perf_op_names[a->ops[i]] : "none");
  fprintf(f, "],\n  \"root\": %d,\n  \"algo\": ", coll->has_root ? a->root : -1);
  if (coll->algo_env) {
    const char *val = getenv(coll->algo_env);
    fprintf(f, "{\"variable\": ");
    json_string(f, coll->algo_env);
    fprintf(f, ", \"value\": ");
    json_string(f, val && *val ? val : "auto");
    fprintf(f, "}");
  } else {
    fprintf(f, "null");
  }
  fprintf(f,
          ",\n  \"minbytes\": %zu,\n  \"maxbytes\": %zu,\n  \"stepfactor\": %ld,\n"
          "  \"stepbytes\": %zu,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"check\": %d,\n"
          "  \"ranks\": [",
          a->minbytes, a->maxbytes, a->stepfactor, a->stepbytes, a->iters, a->warmup, a->check);
  for (int r = 0; r < nranks; r++) {
    fprintf(f, "%s\n    {\"rank\": %d, \"pid\": %d, \"host\": ", r ? "," : "", r,
            (int)ranks[r].pid);
    json_string(f, ranks[r].host);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"rows\": [");
  for (size_t i = 0; i < nrows; i++) {
    const perf_row_t *row = &rows[i];
    fprintf(f,
            "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
            "\"root\": %d,\n     \"out_of_place\": ",
            i ? "," : "", row->bytes, row->count, row->type, row->redop, row->root);
    json_result(f, &row->res[0]);
    fprintf(f, ",\n     \"in_place\": ");
    json_result(f, &row->res[1]);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"out_of_bounds\": %lld,\n  \"avg_busbw_GBps\": %.6g\n}\n",
          (long long)total_wrong, avg_busbw);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "%s: error writing %s\n", coll->binary, a->json_path);
    return -1;
  }
  return 0;
}

void perf_print_header(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                       const perf_rank_desc_t *ranks) {
  printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
         "agg iters: 1 validation: %d graph: 0\n",
         a->minbytes, a->maxbytes, a->stepfactor > 1 ? (size_t)a->stepfactor : a->stepbytes,
         a->stepfactor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->check);
  int v = sc_get_version();
  printf("# libsparsecoll %d.%d.%d  %s  nranks %d", v / 10000, (v / 100) % 100, v % 100, coll->name,
         nranks);
  if (coll->algo_env) {
    const char *val = getenv(coll->algo_env);
    printf("  %s=%s", coll->algo_env, val && *val ? val : "auto");
  }
  printf("\n#\n# Using devices\n");
  for (int r = 0; r < nranks; r++)
    printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] CPU\n", r, 0, (int)ranks[r].pid,
           ranks[r].host, -1);
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place      "
         "    \n",
         "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
         "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

void perf_print_row(const perf_row_t *row) {
  printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, row->type, row->redop, row->root);
  for (int p = 0; p < 2; p++) {
    const perf_result_t *r = &row->res[p];
    char time_str[32];
    if (r->time_us >= 10000.0)
      snprintf(time_str, sizeof(time_str), "%7.0f", r->time_us);
    else if (r->time_us >= 100.0)
      snprintf(time_str, sizeof(time_str), "%7.1f", r->time_us);
    else
      snprintf(time_str, sizeof(time_str), "%7.2f", r->time_us);
    if (r->wrong >= 0)
      printf("  %7s  %6.2f  %6.2f  %5lld", time_str, r->algbw, r->busbw, (long long)r->wrong);
    else
      printf("  %7s  %6.2f  %6.2f  %5s", time_str, r->algbw, r->busbw, "N/A");
  }
  printf("\n");
  fflush(stdout);
}
