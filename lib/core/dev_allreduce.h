/* SPDX-License-Identifier: BSD-3-Clause */
/* The device all-reduce's kernel path (lib/core/dev_allreduce.c): where every
 * rank of the communicator is on this host and the buffers are device memory,
 * an all-reduce runs as kernels that read the peers' memory through IPC
 * mappings and meet at flags in device memory (kernels/ipc_allreduce_plan.h),
 * instead of a schedule's messages through the transport and a host thread.
 * Every other collective, and the all-reduce where the path does not apply,
 * runs the schedule (lib/core/exec_device.c). */
#ifndef SC_CORE_DEV_ALLREDUCE_H
#define SC_CORE_DEV_ALLREDUCE_H

#include "lib/core/comm.h"

struct sc_devar;

/* Whether op may take the path: an all-reduce on device buffers, no
 * algorithm forced (SC_ALGO), SC_DEVICE_ALLREDUCE=auto, 2 to 16 ranks all on
 * this host (the shared-memory transport's board reaches them), and the
 * path not found unavailable before. Reads only op, the settings and what
 * every rank agreed, so every rank answers alike. */
int sc_devar_takes(sc_comm_t *comm, const sc_op_t *op);

/* Runs op (sc_devar_takes said yes) on the kernel path and returns when the
 * result is in op->recvbuf. The first such call sets the path up with every
 * rank (a collective exchange through the board: each rank's region, its
 * device and whether MPS runs there); when any rank cannot take it (no
 * memory, a device shared without MPS, a mapping refused), every rank learns
 * so, the path stays off for the communicator, *ran is 0 and the caller runs
 * the schedule. */
sc_result_t sc_devar_run(sc_comm_t *comm, const sc_op_t *op, int *ran);

/* For a stream form, on the caller's thread before its stream waits: makes
 * the path's device memory now, so that the progress thread allocates nothing
 * while that stream waits (lib/core/stream.c). */
sc_result_t sc_devar_reserve(sc_comm_t *comm, const sc_op_t *op);

/* Closes the peers' mappings and frees the region (comm teardown). */
void sc_devar_free(struct sc_devar *v);

#endif
