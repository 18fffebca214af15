/* SPDX-License-Identifier: BSD-3-Clause */
/* The RDMA device nearest a GPU (see verbs_near.h). */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "transport/verbs/verbs_near.h"

/* Whether [s, s + n) is a PCI address "dddd:bb:dd.f". */
static int is_bdf(const char *s, size_t n) {
  unsigned dom, bus, dev, fn;
  char tail;
  char buf[32];
  if (n == 0 || n >= sizeof(buf)) return 0;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return sscanf(buf, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

int sc_vb_pci_shared(const char *a, const char *b) {
  int shared = 0;
  while (*a && *b) {
    while (*a == '/') a++;
    while (*b == '/') b++;
    size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
    if (la == 0 || la != lb || memcmp(a, b, la) != 0) break;
    /* an endpoint is no bridge: a component both paths go on past */
    if (is_bdf(a, la) && a[la] == '/' && b[lb] == '/') shared++;
    a += la;
    b += lb;
  }
  return shared;
}

int sc_vb_near_score(const char *gpu, int gpu_numa, const char *nic, int nic_numa) {
  int s = gpu[0] && nic[0] ? 2 * sc_vb_pci_shared(gpu, nic) : 0;
  return s + (gpu_numa >= 0 && gpu_numa == nic_numa);
}

void sc_vb_near_order(const char *gpu, int gpu_numa, const char *const *nics, const int *nic_numa,
                      int n, int *order) {
  int score[64];
  for (int i = 0; i < n; i++) {
    order[i] = i;
    if (i < 64) score[i] = sc_vb_near_score(gpu, gpu_numa, nics[i], nic_numa[i]);
  }
  /* insertion sort: stable, and n is a handful */
  for (int i = 1; i < n && i < 64; i++)
    for (int j = i; j > 0 && score[order[j]] > score[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
}

const char *sc_vb_near_level(int score) {
  return score >= 2 ? "same PCI switch" : score == 1 ? "same NUMA node" : "no affinity";
}

int sc_vb_sysfs_pci(const char *link, char *path, size_t len, int *numa) {
  char real[PATH_MAX], p[PATH_MAX + 16], buf[32];
  *numa = -1;
  if (len) path[0] = '\0';
  if (!realpath(link, real)) return -1;
  snprintf(path, len, "%s", real);
  snprintf(p, sizeof(p), "%s/numa_node", real);
  FILE *f = fopen(p, "r");
  if (f) {
    if (fgets(buf, sizeof(buf), f)) *numa = atoi(buf);
    fclose(f);
  }
  return 0;
}

int sc_vb_gpu_pci(int device, char *path, size_t len, int *numa) {
  const sc_devrt_t *rt = sc_devrt();
  char id[64], link[128];
  *numa = -1;
  if (len) path[0] = '\0';
  if (rt && device < 0 && rt->device_count() > 0) device = rt->current_device();
  if (!rt || !rt->pci_bus_id || device < 0 || rt->pci_bus_id(device, id, sizeof(id)) != SC_SUCCESS)
    return -1;
  snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", id);
  return sc_vb_sysfs_pci(link, path, len, numa);
}

void sc_vb_print_near(FILE *f) {
  const sc_devrt_t *rt = sc_devrt();
  int ngpu = rt ? rt->device_count() : 0;
  char names[64][64], paths[64][256], link[128];
  const char *pp[64];
  int numa[64], order[64], n = 0;
  DIR *d = ngpu > 0 ? opendir("/sys/class/infiniband") : NULL;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < 64) {
    if (e->d_name[0] == '.') continue;
    snprintf(names[n], sizeof(names[n]), "%.63s", e->d_name);
    snprintf(link, sizeof(link), "/sys/class/infiniband/%.63s/device", e->d_name);
    if (sc_vb_sysfs_pci(link, paths[n], sizeof(paths[n]), &numa[n]) != 0) numa[n] = -1;
    pp[n] = paths[n];
    n++;
  }
  if (d) closedir(d);
  if (n == 0) return; /* nothing to choose between */
  fprintf(f, "  GPU -> RDMA device (verbs, SC_IB_HCA unset):\n");
  for (int g = 0; g < ngpu; g++) {
    char gpu[512];
    int gnuma;
    if (sc_vb_gpu_pci(g, gpu, sizeof(gpu), &gnuma) != 0) {
      fprintf(f, "    GPU %d: PCI location unknown: %s (list order)\n", g, names[0]);
      continue;
    }
    sc_vb_near_order(gpu, gnuma, pp, numa, n, order);
    fprintf(f, "    GPU %d: %s (%s)\n", g, names[order[0]],
            sc_vb_near_level(sc_vb_near_score(gpu, gnuma, pp[order[0]], numa[order[0]])));
  }
}
