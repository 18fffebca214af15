/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-info: the library version, the SC_* configuration table and the
 * algorithms, printed from lib/base/config.c's table and algorithms/registry.c
 * so the README and the code cannot drift. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "algorithms/registry.h"
#include "algorithms/sparse_registry.h"
#include "kernels/devrt.h"
#include "lib/base/config.h"
#include "sparsecoll.h"
#include "tools/sc_topo.h"
#include "transport/registry.h"
#include "transport/verbs/verbs_near.h"

#define UNSET_TEXT "(unset)"

static void usage(FILE *f) {
  fprintf(f, "Usage: sc-info [--env [--markdown]] [--algorithms]\n"
             "Print the libsparsecoll version and build features.\n"
             "  --env        every SC_* variable with its default and meaning\n"
             "  --algorithms every collective's algorithms (the names SC_ALGO,\n"
             "               SC_BCAST_ALGO, SC_GTOPK_ALGO and the perf binaries' -a take)\n"
             "  --markdown   with --env: as the Markdown table docs/CONFIG.md reproduces\n"
             "  --topo       this host's CPUs, cores, NUMA nodes, GPUs and NICs (hwloc)\n"
             "               and the order sc-run --bind core hands CPUs out in\n"
             "  -h, --help   this text\n");
}

static int print_topo(void) {
  sc_topo_t t;
  char err[128];
  if (sc_topo_load(&t, 1, err, sizeof(err)) != 0) {
    fprintf(stderr, "sc-info: --topo: %s\n", err);
    return 1;
  }
  sc_topo_print(&t, stdout);
  sc_vb_print_near(stdout);
  sc_topo_free(&t);
  return 0;
}

/* SC_TRANSPORT's meaning with its choices, from the transport registry:
 * every row, built in or not (the README reproduces it). */
static const char *transport_meaning(const sc_config_var_t *v, char *buf, size_t len) {
  size_t n;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  const sc_tp_entry_t *sw = sc_tp_auto_switch();
  size_t used = (size_t)snprintf(buf, len, "%s: ", v->meaning);
  for (size_t i = 0; i < n && used < len; i++) {
    const sc_tp_entry_t *e = &rows[i];
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", e->name);
    if (used < len && e->auto_role == SC_TP_AUTO_MUX && sw)
      used += (size_t)snprintf(buf + used, len - used,
                               " (%s; %s instead when the ranks span hosts and %s)",
                               e->help ? e->help : "", sw->name, sw->auto_when);
    else if (used < len && e->help)
      used += (size_t)snprintf(buf + used, len - used, " (%s)", e->help);
  }
  return buf;
}

/* A variable's meaning; the ones that force an algorithm list the
 * registry's names, SC_TRANSPORT the transport registry's. */
static const char *meaning_of(const sc_config_var_t *v, char *buf, size_t len) {
  sc_coll_t coll;
  if (!strcmp(v->name, "SC_TRANSPORT")) return transport_meaning(v, buf, len);
  if (!strcmp(v->name, "SC_ALGO"))
    coll = SC_COLL_ALLREDUCE;
  else if (!strcmp(v->name, "SC_BCAST_ALGO"))
    coll = SC_COLL_BROADCAST;
  else if (!strcmp(v->name, "SC_RS_ALGO"))
    coll = SC_COLL_REDUCE_SCATTER;
  else if (!strcmp(v->name, "SC_AG_ALGO"))
    coll = SC_COLL_ALLGATHER;
  else if (!strcmp(v->name, "SC_A2A_ALGO"))
    coll = SC_COLL_ALLTOALL;
  else if (!strcmp(v->name, "SC_GATHER_ALGO"))
    coll = SC_COLL_GATHER;
  else if (!strcmp(v->name, "SC_AGV_ALGO"))
    coll = SC_COLL_ALLGATHERV;
  else if (!strcmp(v->name, "SC_A2AV_ALGO"))
    coll = SC_COLL_ALLTOALLV;
  else
    return v->meaning;
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  size_t used = (size_t)snprintf(buf, len, "%s: auto (cost model)", v->meaning);
  for (int i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, ", %s", c[i].name);
  return buf;
}

static void print_algorithms(void) {
  for (int coll = 0; coll < SC_COLL_COUNT_; coll++) {
    int n;
    const sc_algo_entry_t *c = sc_algo_candidates((sc_coll_t)coll, &n);
    printf("%s:\n", sc_coll_name((sc_coll_t)coll));
    for (int i = 0; i < n; i++) printf("  %-20s %s\n", c[i].name, c[i].about);
  }
  /* sc_gtopk_allreduce's (and sc_sparse_allreduce's) exchanges: SC_GTOPK_ALGO's names. */
  int n;
  const sc_sparse_algo_entry_t *s = sc_sparse_algos(&n);
  printf("sparse (SC_GTOPK_ALGO, sc_sparse_allreduce):\n");
  for (int i = 0; i < n; i++) printf("  %-20s %s\n", s[i].name, s[i].about);
}

/* Markdown cells must not contain a bare '|'. */
static void print_md_cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

static void print_env_markdown(const sc_config_var_t *vars, size_t n) {
  printf("| variable | default | meaning |\n");
  printf("| --- | --- | --- |\n");
  for (size_t i = 0; i < n; i++) {
    printf("| `%s` | ", vars[i].name);
    if (vars[i].default_value[0])
      printf("`%s`", vars[i].default_value);
    else
      printf("%s", UNSET_TEXT);
    printf(" | ");
    char buf[512];
    print_md_cell(meaning_of(&vars[i], buf, sizeof(buf)));
    printf(" |\n");
  }
}

static void print_env_text(const sc_config_var_t *vars, size_t n) {
  int name_w = (int)strlen("variable"), def_w = (int)strlen("default");
  for (size_t i = 0; i < n; i++) {
    int nl = (int)strlen(vars[i].name);
    int dl =
        vars[i].default_value[0] ? (int)strlen(vars[i].default_value) : (int)strlen(UNSET_TEXT);
    if (nl > name_w) name_w = nl;
    if (dl > def_w) def_w = dl;
  }
  printf("%-*s  %-*s  %s\n", name_w, "variable", def_w, "default", "meaning");
  char buf[512];
  for (size_t i = 0; i < n; i++)
    printf("%-*s  %-*s  %s\n", name_w, vars[i].name, def_w,
           vars[i].default_value[0] ? vars[i].default_value : UNSET_TEXT,
           meaning_of(&vars[i], buf, sizeof(buf)));
}

#ifdef SC_HAVE_UCX
#include <stdlib.h>
#include <ucp/api/ucp.h>

#include "transport/ucx/ucx_auto.h"
#include "transport/ucx/ucx_internal.h"

/* The UCX version and the transport resources a UCP context opens here
 * (what SC_TRANSPORT=ucx can use, after UCX_TLS and UCX_NET_DEVICES),
 * taken from UCX's own context report. */
static void print_ucx(void) {
  printf("ucx: version %s, transports:", ucp_get_version_string());
  ucp_config_t *config = NULL;
  ucp_context_h ctx = NULL;
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
  char *text = NULL;
  size_t len = 0;
  FILE *mem = NULL;
  if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
    printf(" (UCX_* settings unreadable)\n");
    return;
  }
  ucs_status_t st = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (st != UCS_OK) {
    printf(" none (ucp_init: %s)\n", ucs_status_string(st));
    return;
  }
  if ((mem = open_memstream(&text, &len)) != NULL) {
    ucp_context_print_info(ctx, mem);
    fclose(mem);
  }
  /* The same reading of the report as SC_TRANSPORT=auto's (before strtok_r cuts it up). */
  const int rdma = text ? sc_ucx_info_has_rdma(text) : 0;
  /* Lines "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0". */
  for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line;
       line = strtok_r(NULL, "\n", &save)) {
    const char *tl = strstr(line, "resource") ? strstr(line, "-- ") : NULL;
    if (!tl) continue;
    printf(" %s", tl + 3);
  }
  printf("\nucx: RDMA transports: %s\n", rdma ? "yes" : "none");
  /* What the UCX transport's create reads for its device flag. */
  printf("ucx: CUDA memory: %s\n",
         sc_ucx_context_has_cuda(ctx)
             ? "yes (device buffers go to UCX directly when the device runtime is CUDA)"
             : "no (device buffers over SC_TRANSPORT=ucx are staged through pinned host memory)");
  free(text);
  ucp_cleanup(ctx);
}
#endif

#ifdef SC_HAVE_VERBS
#include "transport/verbs/verbs_api.h"
#endif

/* The device runtime the library would use and its devices. With CUDA, also
 * whether an MPS control daemon listens: without one, ranks that share a GPU
 * take turns on it, and device copies between them cost 0.2-0.3 ms each
 * (docs/CUDA.md). A daemon holds its control FIFO open for reading, so a
 * non-blocking open for writing succeeds only while one runs. */
static void print_devices(void) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) {
    printf("device runtime: none (host memory only)\n");
  } else {
    int n = rt->device_count();
    printf("device runtime: %s, %d device%s", rt->name, n, n == 1 ? "" : "s");
    for (int d = 0; d < n && d < 16 && rt->pci_bus_id; d++) {
      char id[32];
      if (rt->pci_bus_id(d, id, sizeof id) == SC_SUCCESS) printf(" %s", id);
    }
    printf("\n");
    const char *mode = sc_config_get("SC_DEVICE_ALLREDUCE");
    if (mode && strcmp(mode, "host") == 0)
      printf("device all-reduce (SC_DEVICE_ALLREDUCE=host): the schedule through the transport");
    else
      printf(
          "device all-reduce (SC_DEVICE_ALLREDUCE=auto): kernels over IPC where all ranks are on "
          "one host, each with its own GPU or sharing one under MPS; else the schedule");
    if (n > 0 && rt->mps_enabled)
      printf("; device 0 %s MPS", rt->mps_enabled(0) ? "runs under" : "does not run under");
    printf("\n");
  }
#ifdef SC_HAVE_CUDA
  const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (!dir || !*dir) dir = "/tmp/nvidia-mps";
  char path[4096];
  snprintf(path, sizeof path, "%s/control", dir);
  struct stat st;
  int fd = stat(path, &st) == 0 && S_ISFIFO(st.st_mode) ? open(path, O_WRONLY | O_NONBLOCK) : -1;
  if (fd >= 0) {
    close(fd);
    printf("CUDA MPS: a control daemon listens at %s (ranks sharing a GPU run at once)\n", dir);
  } else {
    printf("CUDA MPS: no control daemon at %s (ranks sharing a GPU take turns on it; "
           "nvidia-cuda-mps-control -d starts one)\n",
           dir);
  }
#endif
}

/* The transports built in (SC_TRANSPORT's choices but auto, the mux of
 * them), then the ones not, with what provides them. */
static void print_transports(void) {
  size_t n;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  int missing = 0;
  printf("transports:");
  for (size_t i = 0; i < n; i++) {
    if (rows[i].ops && rows[i].auto_role != SC_TP_AUTO_MUX) printf(" %s", rows[i].name);
    missing += !rows[i].ops;
  }
  printf("\n");
  if (!missing) return;
  printf("transports not built in:");
  for (size_t i = 0, k = 0; i < n; i++)
    if (!rows[i].ops)
      printf("%s %s (install %s, then configure %s)", k++ ? "," : "", rows[i].name,
             rows[i].package ? rows[i].package : "what provides it",
             rows[i].configure_opt ? rows[i].configure_opt : "again");
  printf("\n");
}

static void print_version(void) {
  int v = sc_get_version();
  printf("libsparsecoll %d.%d.%d (header %d.%d.%d, package %s)\n", v / 10000, (v / 100) % 100,
         v % 100, SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH, PACKAGE_VERSION);
  print_transports();
  printf("optional packages found by configure:");
#ifdef SC_HAVE_CUDA
  printf(" cuda");
#endif
#ifdef SC_HAVE_UCX
  printf(" ucx");
#endif
#ifdef SC_HAVE_VERBS
  printf(" verbs");
#endif
#ifdef SC_HAVE_HWLOC
  printf(" hwloc");
#endif
  printf("\n");
#ifdef SC_HAVE_UCX
  print_ucx();
#endif
#ifdef SC_HAVE_VERBS
  sc_vb_print_devices(stdout); /* devices, ports, link layers, speeds; or "no RDMA devices" */
#else
  printf("RDMA devices: not listed (built without the ibverbs headers)\n");
#endif
  print_devices();
}

int main(int argc, char **argv) {
  int env = 0, markdown = 0, algorithms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--env"))
      env = 1;
    else if (!strcmp(argv[i], "--algorithms"))
      algorithms = 1;
    else if (!strcmp(argv[i], "--markdown"))
      markdown = 1;
    else if (!strcmp(argv[i], "--topo"))
      return print_topo();
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "sc-info: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (markdown && !env) {
    fprintf(stderr, "sc-info: --markdown needs --env\n");
    return 2;
  }
  if (algorithms) {
    print_algorithms();
    if (!env) return 0;
  }
  if (!env) {
    print_version();
    return 0;
  }
  size_t n;
  const sc_config_var_t *vars = sc_config_table(&n);
  if (markdown)
    print_env_markdown(vars, n);
  else
    print_env_text(vars, n);
  return 0;
}
