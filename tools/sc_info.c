/* sc-info: the library version, the SC_* configuration table and the
 * algorithms, printed from base/config.c's table and algorithms/registry.c
 * so the README and the code cannot drift. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "algorithms/registry.h"
#include "base/config.h"
#include "sparsecoll.h"

#define UNSET_TEXT "(unset)"

static void usage(FILE *f) {
  fprintf(f, "Usage: sc-info [--env [--markdown]] [--algorithms]\n"
             "Print the libsparsecoll version and build features.\n"
             "  --env        every SC_* variable with its default and meaning\n"
             "  --algorithms every collective's algorithms (the names SC_ALGO,\n"
             "               SC_BCAST_ALGO and the perf binaries' -a take)\n"
             "  --markdown   with --env: as the Markdown table the README reproduces\n"
             "  -h, --help   this text\n");
}

/* A variable's meaning; the ones that force an algorithm list the
 * registry's names. */
static const char *meaning_of(const sc_config_var_t *v, char *buf, size_t len) {
  sc_coll_t coll;
  if (!strcmp(v->name, "SC_ALGO"))
    coll = SC_COLL_ALLREDUCE;
  else if (!strcmp(v->name, "SC_BCAST_ALGO"))
    coll = SC_COLL_BROADCAST;
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
    char buf[256];
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
  char buf[256];
  for (size_t i = 0; i < n; i++)
    printf("%-*s  %-*s  %s\n", name_w, vars[i].name, def_w,
           vars[i].default_value[0] ? vars[i].default_value : UNSET_TEXT,
           meaning_of(&vars[i], buf, sizeof(buf)));
}

static void print_version(void) {
  int v = sc_get_version();
  printf("libsparsecoll %d.%d.%d (header %d.%d.%d, package %s)\n", v / 10000, (v / 100) % 100,
         v % 100, SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH, PACKAGE_VERSION);
  printf("transports: tcp\n");
  printf("optional packages found by configure (not all used yet):");
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
