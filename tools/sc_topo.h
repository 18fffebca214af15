/* SPDX-License-Identifier: BSD-3-Clause */
/* The host's topology for the tools: the CPUs this process may use, their
 * cores and NUMA nodes, and (with hwloc) GPUs and NICs with the NUMA node
 * nearest to them. sc-info --topo prints it; sc-run --bind places ranks with
 * it. Built with hwloc when configure found it (SC_HAVE_HWLOC); without,
 * from sysconf, sched_getaffinity and /sys, which know CPUs and NUMA nodes
 * but not cores or devices. The library itself uses none of this: a rank's
 * progress thread is created after sc-run bound the rank, and a thread
 * inherits the CPU set of the thread that creates it. */
#ifndef SC_TOOLS_TOPO_H
#define SC_TOOLS_TOPO_H

#include <sched.h> /* cpu_set_t: config.h, included first, defines _GNU_SOURCE */
#include <stdio.h>

#define SC_TOPO_MAX_NUMA 64
#define SC_TOPO_MAX_DEV  64

typedef struct sc_topo_dev {
  char kind[8];  /* "GPU", "NIC" */
  char name[64]; /* OS name: eth0, cuda0, card0 */
  int numa;      /* nearest NUMA node, -1: unknown */
} sc_topo_dev_t;

typedef struct sc_topo {
  int hwloc;     /* 1: read through hwloc */
  int online;    /* CPUs online on the host */
  int ncpus;     /* CPUs this process may use (its affinity) */
  int ncores;    /* cores among them; 0: unknown (no hwloc) */
  int npackages; /* 0: unknown */
  int *order;    /* [ncpus] the CPUs in the order --bind core hands them out */
  int nnuma;     /* NUMA nodes with usable CPUs (at least 1) */
  int numa_id[SC_TOPO_MAX_NUMA];
  cpu_set_t numa_cpus[SC_TOPO_MAX_NUMA]; /* usable CPUs of each node */
  double numa_bytes[SC_TOPO_MAX_NUMA];   /* memory of the node, 0: unknown */
  int ndev;
  sc_topo_dev_t dev[SC_TOPO_MAX_DEV];
} sc_topo_t;

/* 0, or -1 with a reason in err. with_io: also the GPUs and NICs (dev[]);
 * binding needs only the CPUs and NUMA nodes. */
int sc_topo_load(sc_topo_t *t, int with_io, char *err, size_t errlen);
void sc_topo_free(sc_topo_t *t);
/* The human-readable summary of sc-info --topo. */
void sc_topo_print(const sc_topo_t *t, FILE *f);
/* "0-3,8" */
void sc_topo_cpulist(const cpu_set_t *set, char *buf, size_t len);

#endif
