/* SPDX-License-Identifier: BSD-3-Clause */
/* The host's topology for sc-run and sc-info (tools/sc_topo.h). */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SC_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "tools/sc_topo.h"

void sc_topo_cpulist(const cpu_set_t *set, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
    if (!CPU_ISSET(c, set) || (c > 0 && CPU_ISSET(c - 1, set))) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
    if (e == c)
      used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", c);
    else
      used += (size_t)snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, e);
  }
}

/* "0-3,8" into set; 0, or -1 on a malformed list. */
static int parse_cpulist(const char *s, cpu_set_t *set) {
  CPU_ZERO(set);
  while (*s && *s != '\n') {
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s) return -1;
    if (*end == '-') {
      s = end + 1;
      b = strtol(s, &end, 10);
      if (end == s) return -1;
    }
    for (long c = a; c <= b && c < CPU_SETSIZE; c++)
      if (c >= 0) CPU_SET((int)c, set);
    s = *end == ',' ? end + 1 : end;
  }
  return 0;
}

static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  return ok ? 0 : -1;
}

/* The binding order: the CPUs of each node in turn, one node after the
 * other (round robin), so that consecutive ranks spread across NUMA nodes
 * first. per_node[n] lists node n's CPUs in their preferred order. */
static void interleave(sc_topo_t *t, int **per_node, const int *count) {
  int k = 0;
  for (int i = 0; k < t->ncpus; i++) {
    int any = 0;
    for (int n = 0; n < t->nnuma && k < t->ncpus; n++)
      if (i < count[n]) {
        t->order[k++] = per_node[n][i];
        any = 1;
      }
    if (!any) break;
  }
  t->ncpus = k;
}

#ifdef SC_HAVE_HWLOC
/* The NUMA node (OS index) nearest to an I/O object: its first non-I/O
 * ancestor's first node. */
static int io_numa(hwloc_topology_t topo, hwloc_obj_t o) {
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo, o);
  if (!a || !a->nodeset || hwloc_bitmap_iszero(a->nodeset)) return -1;
  if (hwloc_bitmap_weight(a->nodeset) == hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE))
    return -1; /* attached to the whole machine: no affinity */
  return hwloc_bitmap_first(a->nodeset);
}

static int load_hwloc(sc_topo_t *t, const cpu_set_t *allowed, int with_io, char *err,
                      size_t errlen) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    snprintf(err, errlen, "hwloc_topology_init failed");
    return -1;
  }
  /* I/O discovery runs hwloc's PCI plugin, which leaks what it allocates
   * (LeakSanitizer fails every sc-run under ASan): only sc-info asks for it. */
  hwloc_topology_set_io_types_filter(topo, with_io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
                                                   : HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    snprintf(err, errlen, "hwloc_topology_load failed");
    return -1;
  }
  t->hwloc = 1;
  t->npackages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nn && t->nnuma < SC_TOPO_MAX_NUMA; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
    cpu_set_t set;
    CPU_ZERO(&set);
    int c;
    hwloc_bitmap_foreach_begin(c, o->cpuset) {
      if (c < CPU_SETSIZE && CPU_ISSET(c, allowed)) CPU_SET(c, &set);
    }
    hwloc_bitmap_foreach_end();
    if (CPU_COUNT(&set) == 0) continue;
    t->numa_id[t->nnuma] = (int)o->os_index;
    t->numa_cpus[t->nnuma] = set;
    t->numa_bytes[t->nnuma++] = (double)o->attr->numanode.local_memory;
  }
  /* Cores: the first usable PU of each core, node by node; then the other
   * PUs (hyperthreads) after every core has one rank. */
  int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  int **per_node = calloc((size_t)(t->nnuma ? t->nnuma : 1), sizeof(int *));
  int *count = calloc((size_t)(t->nnuma ? t->nnuma : 1), sizeof(int));
  for (int n = 0; per_node && n < t->nnuma; n++)
    per_node[n] = calloc((size_t)t->ncpus, sizeof(int));
  for (int pass = 0; pass < 8 && per_node && count; pass++)
    for (int i = 0; i < ncores; i++) {
      hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
      int c, k = 0, pu = -1;
      hwloc_bitmap_foreach_begin(c, core->cpuset) {
        if (c < CPU_SETSIZE && CPU_ISSET(c, allowed) && k++ == pass) pu = c;
      }
      hwloc_bitmap_foreach_end();
      if (pu < 0) continue;
      if (pass == 0) t->ncores++;
      int n = 0;
      for (int m = 0; m < t->nnuma; m++)
        if (CPU_ISSET(pu, &t->numa_cpus[m])) n = m;
      if (t->nnuma && count[n] < t->ncpus) per_node[n][count[n]++] = pu;
    }
  if (per_node && count && t->nnuma) interleave(t, per_node, count);
  for (int n = 0; per_node && n < t->nnuma; n++) free(per_node[n]);
  free(per_node);
  free(count);
  /* Devices: OS devices of GPUs (and CUDA/OpenCL co-processors) and NICs. */
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, NULL); o && t->ndev < SC_TOPO_MAX_DEV;
       o = hwloc_get_next_osdev(topo, o)) {
    const char *kind = NULL;
    switch (o->attr->osdev.type) {
    case HWLOC_OBJ_OSDEV_GPU:
    case HWLOC_OBJ_OSDEV_COPROC:
      kind = "GPU";
      break;
    case HWLOC_OBJ_OSDEV_NETWORK:
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      kind = "NIC";
      break;
    default:
      break;
    }
    if (!kind) continue;
    sc_topo_dev_t *d = &t->dev[t->ndev++];
    snprintf(d->kind, sizeof(d->kind), "%s", kind);
    snprintf(d->name, sizeof(d->name), "%s", o->name ? o->name : "?");
    d->numa = io_numa(topo, o);
  }
  hwloc_topology_destroy(topo);
  return 0;
}
#endif

/* Without hwloc: NUMA nodes from /sys (one node of every usable CPU when
 * /sys says nothing), CPUs in their numeric order within a node, and NICs
 * with the node /sys gives their device. */
static void load_sys(sc_topo_t *t, const cpu_set_t *allowed) {
  DIR *d = opendir("/sys/devices/system/node");
  struct dirent *e;
  while (d && (e = readdir(d)) && t->nnuma < SC_TOPO_MAX_NUMA) {
    int id;
    char path[300], buf[4096];
    if (sscanf(e->d_name, "node%d", &id) != 1) continue;
    snprintf(path, sizeof(path), "/sys/devices/system/node/%.200s/cpulist", e->d_name);
    cpu_set_t set, use;
    if (read_line(path, buf, sizeof(buf)) != 0 || parse_cpulist(buf, &set) != 0) continue;
    CPU_AND(&use, &set, allowed);
    if (CPU_COUNT(&use) == 0) continue;
    t->numa_id[t->nnuma] = id;
    t->numa_cpus[t->nnuma++] = use;
  }
  if (d) closedir(d);
  if (t->nnuma == 0) {
    t->numa_id[0] = 0;
    t->numa_cpus[t->nnuma++] = *allowed;
  }
  int *per_node[SC_TOPO_MAX_NUMA], count[SC_TOPO_MAX_NUMA] = {0};
  for (int n = 0; n < t->nnuma; n++) {
    per_node[n] = calloc((size_t)t->ncpus, sizeof(int));
    for (int c = 0; per_node[n] && c < CPU_SETSIZE && count[n] < t->ncpus; c++)
      if (CPU_ISSET(c, &t->numa_cpus[n])) per_node[n][count[n]++] = c;
  }
  interleave(t, per_node, count);
  for (int n = 0; n < t->nnuma; n++) free(per_node[n]);
  d = opendir("/sys/class/net");
  while (d && (e = readdir(d)) && t->ndev < SC_TOPO_MAX_DEV) {
    char path[300], buf[64];
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "/sys/class/net/%.200s/device", e->d_name);
    if (access(path, F_OK) != 0) continue; /* virtual: lo, veth, bridges */
    sc_topo_dev_t *dv = &t->dev[t->ndev++];
    snprintf(dv->kind, sizeof(dv->kind), "NIC");
    snprintf(dv->name, sizeof(dv->name), "%.63s", e->d_name);
    snprintf(path, sizeof(path), "/sys/class/net/%.200s/device/numa_node", e->d_name);
    dv->numa = read_line(path, buf, sizeof(buf)) == 0 ? atoi(buf) : -1;
  }
  if (d) closedir(d);
}

int sc_topo_load(sc_topo_t *t, int with_io, char *err, size_t errlen) {
  memset(t, 0, sizeof(*t));
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    snprintf(err, errlen, "sched_getaffinity failed");
    return -1;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  t->online = online > 0 ? (int)online : 1;
  t->ncpus = CPU_COUNT(&allowed);
  t->order = calloc((size_t)(t->ncpus > 0 ? t->ncpus : 1), sizeof(int));
  if (!t->order) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
#ifdef SC_HAVE_HWLOC
  if (load_hwloc(t, &allowed, with_io, err, errlen) == 0 && t->ncpus > 0 && t->nnuma > 0) return 0;
  /* hwloc failed (a container hiding /sys, say): the /sys view below. */
  int keep = CPU_COUNT(&allowed);
  memset(t->numa_id, 0, sizeof(t->numa_id));
  t->hwloc = t->nnuma = t->ncores = t->npackages = t->ndev = 0;
  t->ncpus = keep;
#endif
  load_sys(t, &allowed);
  return 0;
}

void sc_topo_free(sc_topo_t *t) {
  free(t->order);
  t->order = NULL;
}

void sc_topo_print(const sc_topo_t *t, FILE *f) {
  char list[1024];
  if (t->hwloc) {
#ifdef SC_HAVE_HWLOC
    unsigned v = hwloc_get_api_version();
    fprintf(f, "topology (hwloc, API %u.%u):\n", v >> 16, (v >> 8) & 0xff);
#endif
  } else {
    fprintf(f, "topology (hwloc not built: from sysconf, sched_getaffinity and /sys; cores\n"
               "  and GPUs unknown; sc-run --bind core hands out CPUs in numeric order,\n"
               "  NUMA nodes taking turns):\n");
  }
  fprintf(f, "  CPUs:        %d usable of %d online", t->ncpus, t->online);
  if (t->ncores) fprintf(f, ", %d core%s", t->ncores, t->ncores == 1 ? "" : "s");
  if (t->npackages) fprintf(f, ", %d package%s", t->npackages, t->npackages == 1 ? "" : "s");
  fprintf(f, "\n");
  for (int n = 0; n < t->nnuma; n++) {
    sc_topo_cpulist(&t->numa_cpus[n], list, sizeof(list));
    fprintf(f, "  NUMA node %d: CPUs %s", t->numa_id[n], list);
    if (t->numa_bytes[n] > 0) fprintf(f, ", %.1f GiB", t->numa_bytes[n] / (1 << 30));
    fprintf(f, "\n");
  }
  int gpus = 0, nics = 0;
  for (int i = 0; i < t->ndev; i++) {
    const sc_topo_dev_t *d = &t->dev[i];
    gpus += !strcmp(d->kind, "GPU");
    nics += !strcmp(d->kind, "NIC");
    if (d->numa >= 0)
      fprintf(f, "  %-3s %-8s NUMA node %d\n", d->kind, d->name, d->numa);
    else
      fprintf(f, "  %-3s %-8s no NUMA affinity\n", d->kind, d->name);
  }
  if (!gpus) fprintf(f, "  GPUs:        none found\n");
  if (!nics) fprintf(f, "  NICs:        none found (virtual interfaces are not listed)\n");
  fprintf(f, "  sc-run --bind core order:");
  for (int i = 0; i < t->ncpus; i++) fprintf(f, " %d", t->order[i]);
  fprintf(f, "\n");
}
