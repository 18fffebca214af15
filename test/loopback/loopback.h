/* SPDX-License-Identifier: BSD-3-Clause */
/* The in-process transport (test/loopback/loopback.c): every rank a
 * thread of one process. For tests that run the real executor on all ranks
 * at once; transport.h's contract holds, plus: any rank's thread may post
 * and progress concurrently with the others'. */
#ifndef SC_TRANSPORT_LOOPBACK_H
#define SC_TRANSPORT_LOOPBACK_H

#include "transport/transport.h"

extern const sc_transport_ops_t sc_loopback_transport;

#endif
