/* SPDX-License-Identifier: BSD-3-Clause */
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
  if (r->time_us < 0) { /* the collective has no such form */
    fprintf(f, "null");
    return;
  }
  fprintf(f,
          "{\"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, \"wrong\": ", r->time_us,
          r->algbw, r->busbw);
  if (r->wrong < 0)
    fprintf(f, "null}");
  else
    fprintf(f, "%lld}", (long long)r->wrong);
}

/* From "minbytes" to the "ranks" array, without a trailing comma. */
static void json_settings_and_ranks(FILE *f, const perf_args_t *a, int nranks,
                                    const perf_rank_desc_t *ranks) {
  fprintf(f,
          ",\n  \"minbytes\": %zu,\n  \"maxbytes\": %zu,\n  \"stepfactor\": %ld,\n"
          "  \"stepbytes\": %zu,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"check\": %d,\n"
          "  \"mem\": \"%s\",\n  \"ranks\": [",
          a->minbytes, a->maxbytes, a->stepfactor, a->stepbytes, a->iters, a->warmup, a->check,
          perf_mem_name(a->mem));
  for (int r = 0; r < nranks; r++) {
    fprintf(f, "%s\n    {\"rank\": %d, \"pid\": %d, \"device\": %d, \"host\": ", r ? "," : "", r,
            (int)ranks[r].pid, (int)ranks[r].device);
    json_string(f, ranks[r].host);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]");
}

static FILE *json_open(const perf_coll_t *coll, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "%s: cannot write %s: %s\n", coll->binary, path, strerror(errno));
  return f;
}

static int json_close(const perf_coll_t *coll, const char *path, FILE *f) {
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "%s: error writing %s\n", coll->binary, path);
    return -1;
  }
  return 0;
}

int perf_write_json(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                    const perf_rank_desc_t *ranks, const perf_row_t *rows, size_t nrows,
                    int64_t total_wrong, double avg_busbw) {
  FILE *f = json_open(coll, a->json_path);
  if (!f) return -1;
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
  json_settings_and_ranks(f, a, nranks, ranks);
  if (coll->describe) coll->describe(f, 1, nranks);
  fprintf(f, ",\n  \"rows\": [");
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
  return json_close(coll, a->json_path, f);
}

static void print_settings(const perf_args_t *a) {
  printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
         "agg iters: 1 validation: %d graph: 0\n",
         a->minbytes, a->maxbytes, a->stepfactor > 1 ? (size_t)a->stepfactor : a->stepbytes,
         a->stepfactor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->check);
}

static void print_library(const perf_coll_t *coll, int nranks) {
  int v = sc_get_version();
  printf("# libsparsecoll %d.%d.%d  %s  nranks %d", v / 10000, (v / 100) % 100, v % 100, coll->name,
         nranks);
}

static void print_devices(int nranks, const perf_rank_desc_t *ranks) {
  printf("#\n# Using devices\n");
  for (int r = 0; r < nranks; r++)
    if (ranks[r].device >= 0) /* --mem device: the buffers' device */
      printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s]\n", r, 0, (int)ranks[r].pid,
             ranks[r].host, (int)ranks[r].device, perf_mem_runtime_name());
    else
      printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] CPU\n", r, 0,
             (int)ranks[r].pid, ranks[r].host, -1);
  printf("#\n");
}

void perf_print_header(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                       const perf_rank_desc_t *ranks) {
  print_settings(a);
  print_library(coll, nranks);
  if (coll->algo_env) {
    const char *val = getenv(coll->algo_env);
    printf("  %s=%s", coll->algo_env, val && *val ? val : "auto");
  }
  printf("\n");
  if (coll->describe) coll->describe(stdout, 0, nranks);
  print_devices(nranks, ranks);
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

static void format_time(char *out, size_t len, double us) {
  if (us >= 10000.0)
    snprintf(out, len, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(out, len, "%7.1f", us);
  else
    snprintf(out, len, "%7.2f", us);
}

void perf_print_row(const perf_row_t *row) {
  printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, row->type, row->redop, row->root);
  for (int p = 0; p < 2; p++) {
    const perf_result_t *r = &row->res[p];
    char time_str[32];
    format_time(time_str, sizeof(time_str), r->time_us);
    if (r->time_us < 0)
      printf("  %7s  %6s  %6s  %5s", "n/a", "n/a", "n/a", "N/A");
    else if (r->wrong >= 0)
      printf("  %7s  %6.2f  %6.2f  %5lld", time_str, r->algbw, r->busbw, (long long)r->wrong);
    else
      printf("  %7s  %6.2f  %6.2f  %5s", time_str, r->algbw, r->busbw, "N/A");
  }
  printf("\n");
  fflush(stdout);
}

/* ---- -a compare ---- */

static int algo_width(const char *name) {
  int len = (int)strlen(name);
  return len > 8 ? len : 8;
}

void perf_print_compare_header(const perf_world_t *w, const perf_compare_run_t *run) {
  print_settings(w->a);
  print_library(w->coll, w->nranks);
  printf("  %s=compare (", w->coll->algo_env);
  for (int i = 0; i < run->nalgos; i++) printf("%s%s", i ? " " : "", run->names[i]);
  printf(")  type %s  redop %s\n", run->type, run->redop);
  if (w->coll->describe) w->coll->describe(stdout, 0, w->nranks);
  print_devices(w->nranks, w->ranks);
  fflush(stdout);
}

void perf_print_compare_columns(const perf_compare_run_t *run) {
  printf("# time: out of place, per operation, slowest rank. best: the fastest correct forced "
         "algorithm;\n"
         "# auto-pick: what auto chooses for the size; auto/best: median over the rounds of\n"
         "# auto's time / best's time in the same round (the rounds alternate the algorithms).\n");
  printf("# %10s  %12s", "size", "count");
  for (int i = 0; i < run->nalgos; i++) printf("  %*s", algo_width(run->names[i]), run->names[i]);
  printf("  %12s  %12s  %9s\n", "best", "auto-pick", "auto/best");
  printf("# %10s  %12s", "(B)", "(elements)");
  for (int i = 0; i < run->nalgos; i++) printf("  %*s", algo_width(run->names[i]), "(us)");
  printf("\n");
  fflush(stdout);
}

void perf_print_compare_note(const perf_compare_run_t *run, const perf_compare_note_t *note) {
  char where[48];
  if (note->at < 0)
    snprintf(where, sizeof(where), "creating its communicator");
  else
    snprintf(where, sizeof(where), "at %lld B", note->at);
  printf("# %s %s (%s): %s\n", note->code == SC_ERR_UNSUPPORTED ? "n/a" : "FAILED",
         run->names[note->algo], where, note->text);
  fflush(stdout);
}

void perf_print_compare_row(const perf_compare_run_t *run, const perf_compare_row_t *row) {
  printf("%12zu  %12zu", row->bytes, row->count);
  for (int i = 0; i < run->nalgos; i++) {
    char time_str[32] = "n/a";
    if (row->time_us[i] >= 0) format_time(time_str, sizeof(time_str), row->time_us[i]);
    printf("  %*s", algo_width(run->names[i]), time_str);
  }
  char ratio[32] = "n/a";
  if (row->auto_ratio >= 0) snprintf(ratio, sizeof(ratio), "%.2f", row->auto_ratio);
  printf("  %12s  %12s  %9s\n", row->best >= 0 ? run->names[row->best] : "n/a",
         row->auto_pick ? row->auto_pick : "n/a", ratio);
  fflush(stdout);
}

void perf_print_compare_footer(const perf_compare_run_t *run) {
  printf("# Out of bounds values : %lld %s\n", (long long)run->total_wrong,
         run->total_wrong ? "FAILED" : "OK");
  printf("# auto within 10%% of the best at %d of %d sizes\n", run->within, run->compared);
  if (run->failed) printf("# FAILED: an algorithm failed other than as unsupported (see above)\n");
  printf("#\n");
  fflush(stdout);
}

static void json_name_or_null(FILE *f, const char *s) {
  if (s)
    json_string(f, s);
  else
    fprintf(f, "null");
}

int perf_write_compare_json(const perf_world_t *w, const perf_compare_run_t *run) {
  const perf_coll_t *coll = w->coll;
  const perf_args_t *a = w->a;
  FILE *f = json_open(coll, a->json_path);
  if (!f) return -1;
  int v = sc_get_version();
  fprintf(f, "{\n  \"binary\": ");
  json_string(f, coll->binary);
  fprintf(f, ",\n  \"collective\": ");
  json_string(f, coll->name);
  fprintf(f, ",\n  \"version\": \"%d.%d.%d\",\n  \"nranks\": %d,\n  \"mode\": \"compare\",\n",
          v / 10000, (v / 100) % 100, v % 100, w->nranks);
  fprintf(f, "  \"dtype\": [");
  json_string(f, run->type);
  fprintf(f, "],\n  \"op\": [");
  json_string(f, run->redop);
  fprintf(f, "],\n  \"root\": %d,\n  \"algo\": {\"variable\": ", coll->has_root ? a->root : -1);
  json_string(f, coll->algo_env);
  fprintf(f, ", \"value\": \"compare\"},\n  \"algorithms\": [");
  for (int i = 0; i < run->nalgos; i++) {
    fprintf(f, "%s", i ? ", " : "");
    json_string(f, run->names[i]);
  }
  fprintf(f, "]");
  json_settings_and_ranks(f, a, w->nranks, w->ranks);
  if (coll->describe) coll->describe(f, 1, w->nranks);
  fprintf(f, ",\n  \"notes\": [");
  for (size_t k = 0; k < run->nnotes; k++) {
    const perf_compare_note_t *n = &run->notes[k];
    fprintf(f, "%s\n    {\"algo\": ", k ? "," : "");
    json_string(f, run->names[n->algo]);
    if (n->at < 0)
      fprintf(f, ", \"size\": null");
    else
      fprintf(f, ", \"size\": %lld", n->at);
    fprintf(f,
            ", \"unsupported\": %s, \"error\": ", n->code == SC_ERR_UNSUPPORTED ? "true" : "false");
    json_string(f, n->text);
    fprintf(f, "}");
  }
  fprintf(f, "%s],\n  \"rows\": [", run->nnotes ? "\n  " : "");
  for (size_t k = 0; k < run->nrows; k++) {
    const perf_compare_row_t *row = &run->rows[k];
    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu,\n     \"time_us\": {", k ? "," : "",
            row->bytes, row->count);
    for (int i = 0; i < run->nalgos; i++) {
      fprintf(f, "%s", i ? ", " : "");
      json_string(f, run->names[i]);
      if (row->time_us[i] >= 0)
        fprintf(f, ": %.6g", row->time_us[i]);
      else
        fprintf(f, ": null");
    }
    fprintf(f, "},\n     \"wrong\": {");
    for (int i = 0; i < run->nalgos; i++) {
      fprintf(f, "%s", i ? ", " : "");
      json_string(f, run->names[i]);
      if (row->wrong[i] >= 0)
        fprintf(f, ": %lld", (long long)row->wrong[i]);
      else
        fprintf(f, ": null");
    }
    fprintf(f, "},\n     \"best\": ");
    json_name_or_null(f, row->best >= 0 ? run->names[row->best] : NULL);
    fprintf(f, ", \"auto_pick\": ");
    json_name_or_null(f, row->auto_pick);
    if (row->auto_ratio >= 0)
      fprintf(f, ", \"auto_over_best\": %.6g}", row->auto_ratio);
    else
      fprintf(f, ", \"auto_over_best\": null}");
  }
  fprintf(f,
          "\n  ],\n  \"out_of_bounds\": %lld,\n  \"auto_within_10pct\": %d,\n"
          "  \"sizes_compared\": %d,\n  \"failed\": %s\n}\n",
          (long long)run->total_wrong, run->within, run->compared, run->failed ? "true" : "false");
  return json_close(coll, a->json_path, f);
}
