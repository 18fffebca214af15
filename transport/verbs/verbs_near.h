/* SPDX-License-Identifier: BSD-3-Clause */
/* Which RDMA device is nearest a GPU, as NCCL ranks them: one behind the
 * same PCIe switch first (the GPU's writes then never cross the CPU's root
 * complex), else one on the GPU's NUMA node, else any. The decision is a
 * pure function of sysfs PCI paths and NUMA nodes (unit-tested); the sysfs
 * and device-runtime look-ups beside it. No ibverbs header: sc-info uses it
 * in every build. */
#ifndef SC_VERBS_NEAR_H
#define SC_VERBS_NEAR_H

#include <stddef.h>
#include <stdio.h>

/* PCI devices (bridges, switch ports: "dddd:bb:dd.f" components) that two
 * resolved sysfs device paths ("/sys/devices/pci0000:00/0000:00:01.0/...")
 * share from the root down; the host bridge "pciDDDD:BB" does not count. */
int sc_vb_pci_shared(const char *a, const char *b);
/* Closeness of a NIC to a GPU: 2 per shared PCI device, plus 1 when both are
 * on the same (known, >= 0) NUMA node; 0 when either path is unknown ("")
 * and the nodes differ. Higher is nearer. */
int sc_vb_near_score(const char *gpu, int gpu_numa, const char *nic, int nic_numa);
/* order[0..n): the NICs' indices, nearest first; ties keep list order. */
void sc_vb_near_order(const char *gpu, int gpu_numa, const char *const *nics, const int *nic_numa,
                      int n, int *order);
/* "same PCI switch", "same NUMA node" or "no affinity" for a score. */
const char *sc_vb_near_level(int score);

/* The resolved sysfs path of link (e.g. /sys/class/infiniband/mlx5_0/device)
 * and its numa_node (-1 when unknown); 0, or -1 when the link is absent. */
int sc_vb_sysfs_pci(const char *link, char *path, size_t len, int *numa);
/* The same for device `device` of the device runtime (its PCI bus id; -1:
 * the current device); -1 without a runtime, a bus id or a sysfs entry. */
int sc_vb_gpu_pci(int device, char *path, size_t len, int *numa);
/* sc-info --topo: for each GPU of the device runtime, the RDMA device it
 * would prefer; nothing without GPUs or RDMA devices. */
void sc_vb_print_near(FILE *f);

#endif
