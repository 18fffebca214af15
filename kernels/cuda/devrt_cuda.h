/* The CUDA runtime's table of kernels/devrt.h (kernels/cuda/devrt_cuda.c,
 * built when configure finds CUDA). */
#ifndef SC_KERNELS_CUDA_DEVRT_CUDA_H
#define SC_KERNELS_CUDA_DEVRT_CUDA_H

#include "kernels/devrt.h"

/* The table when the CUDA runtime sees a device, else NULL (no driver, no
 * GPU). Asks once per process. */
const sc_devrt_t *sc_devrt_cuda(void);

#endif
