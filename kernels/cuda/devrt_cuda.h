/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA runtime's table of kernels/devrt.h (kernels/cuda/devrt_cuda.c,
 * built when configure finds CUDA). */
#ifndef SC_KERNELS_CUDA_DEVRT_CUDA_H
#define SC_KERNELS_CUDA_DEVRT_CUDA_H

#include "kernels/devrt.h"

/* The table when the CUDA runtime sees a device, else NULL (no driver, no
 * GPU). Asks once per process. */
const sc_devrt_t *sc_devrt_cuda(void);

/* A driver function by name as of CUDA `version` (12040 for 12.4), NULL
 * where the driver lacks it. */
void *sc_cuda_driver_entry(const char *name, unsigned version);

/* kernels/cuda/preload.c: every kernel of the library loaded on the current
 * device (once per device; nothing to do under eager loading). */
sc_result_t sc_cuda_preload_kernels(void);

/* The library's kernels on the current device: how many, and how many are
 * not loaded (for the GPU test of the above). SC_ERR_UNSUPPORTED where the
 * driver cannot enumerate a module (before CUDA 12.4). */
sc_result_t sc_cuda_kernels_unloaded(unsigned *nfunc, unsigned *unloaded);

#endif
