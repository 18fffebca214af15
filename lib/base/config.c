/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/base/config.h"
#include "lib/base/error.h"

/* The one table of every SC_* variable. docs/CONFIG.md reproduces it
 * (`sc-info --env --markdown` prints it); a test checks they agree. */
static const sc_config_var_t sc_config_vars[] = {
    {"SC_DEBUG", "WARN", "log level: NONE, WARN, INFO, TRACE (stderr, prefixed host:pid:rank)"},
    {"SC_DEBUG_SUBSYS", "ALL",
     "comma-separated subsystems to log: INIT, BOOT, NET, COLL, TUNE, SHM, ALL"},
    {"SC_TIMEOUT_MS", "300000",
     "no-progress limit in ms for any operation and for connection setup; for bootstrap too "
     "unless SC_BOOTSTRAP_TIMEOUT_MS is set"},
    {"SC_BOOTSTRAP_TIMEOUT_MS", "0",
     "limit in ms for the bootstrap at communicator creation (every rank checking in with the "
     "root, the table's delivery); 0: SC_TIMEOUT_MS. Ranks that start minutes apart (a slow "
     "scheduler, a container pull) need it longer than the operations' limit"},
    {"SC_TRANSPORT", "auto",
     /* sc-info appends the choices, from the transport registry (transport/registry.c) */
     "force a transport"},
    {"SC_ALGO", "auto",
     /* sc-info appends the names, from the algorithm registry */
     "force the dense all-reduce algorithm"},
    {"SC_TUNE", "auto",
     "alpha-beta inputs of the cost model: model (the transport's defaults), measure (a short "
     "calibration at communicator creation, rank 0's fit broadcast; across hosts also each "
     "message's CPU at its two ends), or auto (measure when the "
     "ranks span hosts or run over ucx or verbs, model on one host over shm and tcp)"},
    {"SC_BCAST_ALGO", "auto", "force the broadcast/reduce algorithm"},
    {"SC_GTOPK_ALGO", "auto",
     "sparse all-reduce of sc_gtopk_allreduce and the fusion's sparse buckets: gtopk "
     "(butterfly), tree, hier (a tree in each host, a butterfly among hosts), hitopk "
     "(HiTopKComm: reduce-scatter in each host, top-k per shard, sparse all-gather among "
     "hosts; equal ranks per host; device gradients staged through host memory, and not in the "
     "stream form), or auto (where the "
     "ranks span hosts the cost model's pick, else gtopk); every choice keeps error feedback "
     "exact"},
    {"SC_RANKS_PER_HOST", "0",
     "testing aid: 0 (the host map from the transports), or M: each M consecutive ranks count as "
     "one host in the host map (the hierarchical algorithms, hitopk and the cost model; the "
     "transports still connect as the machine is)"},
    {"SC_MSTOPK_ITERS", "20",
     "MSTopK selection (SC_SELECT_MSTOPK): threshold bisection rounds, 1..64"},
    {"SC_RS_ALGO", "auto", "force the reduce-scatter algorithm"},
    {"SC_AG_ALGO", "auto", "force the all-gather algorithm"},
    {"SC_A2A_ALGO", "auto", "force the all-to-all algorithm"},
    {"SC_GATHER_ALGO", "auto", "force the gather/scatter algorithm"},
    {"SC_AGV_ALGO", "auto", "force the uneven all-gather (sc_allgatherv) algorithm"},
    {"SC_A2AV_ALGO", "auto", "force the uneven all-to-all (sc_alltoallv) algorithm"},
    {"SC_CHUNK_BYTES", "524288", "pipelining chunk of ring, chain broadcast and chain reduce"},
    {"SC_STAGE_CHUNK_BYTES", "1048576",
     "device buffers over a transport without device support: bytes per staged chunk through "
     "pinned host memory (the same on every rank)"},
    {"SC_STAGE_SLOTS", "4", "device buffers: pinned staging slots per peer, 1..64"},
    {"SC_P3_STEP_SLICES", "1",
     "fusion P3: bytes one agreement step may send, in slices, 1..64 (the MIN over ranks)"},
    {"SC_FUSION_PIPELINE", "1",
     "fusion, PowerSGD buckets: 1 overlaps consecutive buckets on the worker (the next bucket's "
     "P round computed and sent while this one's Q is in flight), 0 runs them one at a time; the "
     "same results either way, so ranks may differ (read at sc_fusion_plan)"},
    {"SC_SOCKET_IFNAME", "",
     "interface name or prefix TCP binds and advertises (default: the one that reaches the root)"},
    {"SC_CONNECT", "lazy",
     "when a transport connects to a peer: lazy (when a schedule or a point-to-point call "
     "first uses the pair, so connections, shared-memory rings and descriptors grow with the "
     "peers a rank talks to) or eager (every pair at communicator creation)"},
    {"SC_SHM_BUDGET_BYTES", "0",
     "shared memory: ring bytes a rank's segment may hold for the peers it receives from (the "
     "pairs connected so far); a pair beyond it gets a ring of half, a quarter ... of 256 KiB, "
     "16 KiB at least. 0: an eighth of the host's memory divided by its ranks in the job"},
    {"SC_NSOCKS", "2",
     "TCP data sockets per peer; a message over 256 KiB is striped across them, smaller ones all "
     "travel on the first"},
    {"SC_SPIN_US", "50",
     "microseconds a waiting rank polls before it sleeps (futex/poll); 0 = sleep at once. The "
     "poll yields the core between looks, except while another program holds it: a yield that "
     "kept it away for over 1 ms (per rank sharing a core) makes waits sleep at once for a few "
     "milliseconds, doubling up to 100 ms while that lasts"},
    {"SC_HEARTBEAT_MS", "0",
     "liveness watch heartbeat in ms (0: min(1000, SC_TIMEOUT_MS/8); -1: no watch, a dead peer "
     "is noticed only by the ranks exchanging data with it)"},
    {"SC_WATCH_FANOUT", "8",
     "liveness watch tree: children per rank, 2..64 (rank r's parent is (r-1)/k); rank 0 and "
     "every parent hold at most k+1 watch sockets, rank 0 one more per rank whose parent died "
     "(the same on every rank)"},
    {"SC_BOARD_BYTES", "1024",
     "collectives whose post per rank (its input; the reduce-scatter's and the all-to-all's "
     "whole send buffer, the scatter root's nranks blocks) is at most this many bytes run "
     "through shared memory every rank reads, without messages, where all ranks are on one host "
     "and no algorithm is "
     "forced for the collective (0: never; at most 1024; the same on every rank)"},
    {"SC_DEVICE_ALLREDUCE", "auto",
     "auto: an all-reduce on device buffers whose ranks are all on one host (the shm "
     "transport) runs as kernels that read the peers' buffers through CUDA IPC and meet at flags "
     "in device memory, where every rank has its own GPU or MPS serves the shared one; host: "
     "always the schedule through the transport (the same on every rank)"},
    {"SC_DEVICE_ALLREDUCE_HALF_BYTES", "16777216",
     "the kernel path's staging per rank: two halves of this many bytes of device memory; a "
     "larger all-reduce runs in rounds of one half (the same on every rank)"},
    {"SC_DEVICE_ALLREDUCE_ONESHOT_BYTES", "262144",
     "the kernel path reduces an all-reduce of at most this many bytes in one step (every rank "
     "reads every input), a larger one as a reduce-scatter and an all-gather (the same on every "
     "rank)"},
    {"SC_SOCKBUF_BYTES", "4194304", "SO_SNDBUF/SO_RCVBUF of data sockets (0 = kernel default)"},
    {"SC_P2P", "1",
     "1: every communicator opens a second connection of its transport for sc_send/sc_recv "
     "and their kin; 0: none, point-to-point calls fail with SC_ERR_UNSUPPORTED"},
    {"SC_P2P_READ", "1",
     "1: a point-to-point message past the eager size offers its host buffer in its request "
     "to send, and a receiver on the same host reads it from there at once (shared memory's "
     "single copy), one hop between the ranks instead of three; 0: the receiver always asks "
     "for the data (clear to send)"},
    {"SC_P2P_UNEXPECTED_BYTES", "268435456",
     "point-to-point messages that arrived before their receive, buffered per communicator, at "
     "most this many bytes (payloads and 128 bytes per message): the message that would pass "
     "it fails every send and receive with its sender with SC_ERR_NOMEM, saying so (at least "
     "131072)"},
    {"SC_CHECK_MISMATCH", "0",
     "1: every rank also sends every other a fingerprint of each call (kind, sequence number, "
     "count, dtype, op, root) before its data moves, so every call is compared; any difference "
     "fails every rank with SC_ERR_MISMATCH. 0: a mismatch is still SC_ERR_MISMATCH on every "
     "rank, seen in a message's print or by the liveness watch"},
    {"SC_IB_HCA", "",
     "verbs: RDMA devices and ports to use, as NCCL_IB_HCA: mlx5_0:1,mlx5_1 (prefixes), =name "
     "(exact), ^name (exclude); default: the first active port, on the device nearest the "
     "rank's GPU when it uses one"},
    {"SC_IB_GID_INDEX", "-1",
     "verbs: GID table index for RoCE (-1: the RoCE v2 IPv4-mapped entry, else 0)"},
    {"SC_IB_TIMEOUT", "20", "verbs: QP local ACK timeout exponent (4.096 us * 2^n), 1..31"},
    {"SC_IB_RETRY_CNT", "7", "verbs: QP transport retry count, 0..7"},
    {"SC_IB_QPS_PER_PEER", "1", "verbs: RC queue pairs per peer; large messages are striped"},
    {"SC_IB_REG_CACHE_BYTES", "256M",
     "verbs: registered bytes kept cached while unused (LRU eviction); 0 = register per message"},
    {"SC_IB_GDR", "auto",
     "verbs: device buffers: auto (dma-buf, else peer memory, else staging), dmabuf, peermem, "
     "staging (through pinned host memory)"},
    {"SC_RANK", "", "this process's rank (sc_comm_init_env; set by sc-run)"},
    {"SC_WORLD_SIZE", "", "number of ranks (sc_comm_init_env; set by sc-run)"},
    {"SC_ROOT_ADDR", "", "host:port of rank 0's bootstrap listener (sc_comm_init_env)"},
    {"SC_AUTH_TOKEN", "",
     "shared secret every rank must present (sc_comm_init_env; sc-run makes a fresh one)"},
};

const sc_config_var_t *sc_config_table(size_t *n) {
  *n = sizeof(sc_config_vars) / sizeof(sc_config_vars[0]);
  return sc_config_vars;
}

const char *sc_config_get(const char *name) {
  for (size_t i = 0; i < sizeof(sc_config_vars) / sizeof(sc_config_vars[0]); i++) {
    if (strcmp(sc_config_vars[i].name, name) != 0) continue;
    const char *v = getenv(name);
    return (v && *v) ? v : sc_config_vars[i].default_value;
  }
  return NULL;
}

sc_result_t sc_parse_long(const char *what, const char *s, long min, long max, long *out) {
  if (!s || !*s) return SC_ERR(SC_ERR_INVALID_ARG, "%s: empty value", what);
  errno = 0;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  while (end && isspace((unsigned char)*end)) end++;
  if (errno || !end || *end)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' is not an integer", what, s);
  if (v < min || v > max)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %ld is outside [%ld, %ld]", what, v, min, max);
  *out = v;
  return SC_SUCCESS;
}

sc_result_t sc_parse_size(const char *what, const char *s, size_t min, size_t max, size_t *out) {
  if (!s || !*s) return SC_ERR(SC_ERR_INVALID_ARG, "%s: empty value", what);
  if (*s == '-') return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' is negative", what, s);
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' is not a size", what, s);
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    shift = 10;
    end++;
    break;
  case 'M':
    shift = 20;
    end++;
    break;
  case 'G':
    shift = 30;
    end++;
    break;
  default:
    break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' has a bad suffix", what, s);
  if (shift && v > (~0ULL >> shift))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' overflows", what, s);
  v <<= shift;
  if (v < min || v > max)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %llu is outside [%zu, %zu]", what, v, min, max);
  *out = (size_t)v;
  return SC_SUCCESS;
}

sc_result_t sc_parse_hostport(const char *what, const char *s, char *host, size_t hostlen,
                              uint16_t *port) {
  if (!s || !*s) return SC_ERR(SC_ERR_INVALID_ARG, "%s: empty address", what);
  const char *colon;
  const char *hstart = s;
  size_t hlen;
  if (*s == '[') {
    const char *close = strchr(s, ']');
    if (!close || close[1] != ':')
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' is not [v6addr]:port", what, s);
    hstart = s + 1;
    hlen = (size_t)(close - hstart);
    colon = close + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon) return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' has no :port", what, s);
    if (strchr(s, ':') != colon)
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s': write IPv6 as [addr]:port", what, s);
    hlen = (size_t)(colon - s);
  }
  if (hlen == 0 || hlen >= hostlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' has an empty or too long host", what, s);
  long p;
  SC_CHECK(sc_parse_long(what, colon + 1, 1, 65535, &p));
  memcpy(host, hstart, hlen);
  host[hlen] = '\0';
  *port = (uint16_t)p;
  return SC_SUCCESS;
}

sc_result_t sc_parse_choice(const char *what, const char *s, const char *const *choices,
                            int nchoices, int *out) {
  for (int i = 0; i < nchoices; i++)
    if (s && !strcasecmp(s, choices[i])) {
      *out = i;
      return SC_SUCCESS;
    }
  char list[256] = "";
  size_t used = 0;
  for (int i = 0; i < nchoices && used < sizeof(list); i++)
    used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", choices[i]);
  return SC_ERR(SC_ERR_INVALID_ARG, "%s: '%s' is not one of: %s", what, s ? s : "(null)", list);
}

sc_result_t sc_config_long(const char *name, long min, long max, long *out) {
  const char *v = sc_config_get(name);
  if (!v) return SC_ERR(SC_ERR_INTERNAL, "unknown configuration variable %s", name);
  return sc_parse_long(name, v, min, max, out);
}

sc_result_t sc_config_size(const char *name, size_t min, size_t max, size_t *out) {
  const char *v = sc_config_get(name);
  if (!v) return SC_ERR(SC_ERR_INTERNAL, "unknown configuration variable %s", name);
  return sc_parse_size(name, v, min, max, out);
}
