/* SPDX-License-Identifier: BSD-3-Clause */
/* The device all-reduce's kernel path (lib/core/dev_allreduce.h).
 *
 * Setup, at the first all-reduce that may take the path (every rank reaches
 * it at the same call): each rank makes its region (kernels/
 * ipc_allreduce_plan.h's layout, flags zeroed) and a pinned pair of words
 * (the abort word the kernel polls, the status read back), then the ranks
 * exchange, through the board, the region's IPC handle, the device (its PCI
 * address), whether MPS serves it and the launch geometry. From the same
 * table every rank decides alike: the path is off when some rank has no
 * region, or two ranks share a device that MPS does not serve (their
 * spinning kernels would take turns on it instead of running at once). Each
 * rank then maps the peers' regions, and a second exchange tells whether
 * every mapping succeeded. Blocks per launch: the fewest any rank affords
 * (a block that waits holds its SM, so the ranks sharing a device divide it).
 *
 * A call enqueues on the device executor's stream, per round of at most one
 * half: the copy of the round's input into the rank's own half, then the
 * kernel; after the last, the status word's copy to the host; then it waits.
 * Barrier values and halves advance alike on every rank, since every rank
 * makes the same calls. While it waits the host heeds an abort, a failure the
 * liveness watch reports and its own deadline: it then raises the abort word
 * so that the kernels stop waiting, and lets the stream drain. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/devrt.h"
#include "kernels/ipc_allreduce_plan.h"
#include "lib/base/clock.h"
#include "lib/base/config.h"
#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/core/board.h"
#include "lib/core/dev_allreduce.h"
#include "lib/core/device.h"
#include "lib/core/exec_device.h"

typedef struct sc_devar sc_devar_t;

enum { DEVAR_UNTRIED = 0, DEVAR_ON = 1, DEVAR_OFF = 2 };

/* What a rank tells the others at setup. */
typedef struct devar_info {
  sc_dev_ipc_handle_t h;
  int64_t pid;
  uint64_t base, size; /* the region in its owner's address space */
  char bus[32];        /* the device: its PCI address, or the runtime's index */
  int32_t ok;          /* a region was made */
  int32_t mps;
  int32_t sms, blocks_per_sm;
} devar_info_t;

struct sc_devar {
  _Atomic int state;  /* read by a stream form's caller, set by the progress thread */
  int wanted;         /* SC_DEVICE_ALLREDUCE=auto */
  size_t half_bytes;  /* SC_DEVICE_ALLREDUCE_HALF_BYTES */
  size_t oneshot_max; /* SC_DEVICE_ALLREDUCE_ONESHOT_BYTES */
  const sc_devrt_t *rt;
  int device;
  sc_ipcar_layout_t lay;
  uint8_t *region;                   /* this rank's, device memory */
  volatile uint32_t *pinned;         /* [0] the abort word, [1] the status read back */
  void *event;                       /* the zeroing's and each call's end */
  uint8_t *peer[SC_IPCAR_MAX_RANKS]; /* every region as mapped here ([rank]: region) */
  sc_dev_ipc_handle_t handle[SC_IPCAR_MAX_RANKS];
  int nranks, nblocks;
  uint32_t epoch;       /* barrier values used so far */
  unsigned half;        /* the half the next launch writes */
  pthread_mutex_t lock; /* region: the reserving caller and the progress thread */
};

/* ---- state ---- */

static sc_result_t devar_get(sc_comm_t *comm, sc_devar_t **out) {
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = SC_SUCCESS;
  if (!comm->ex.devar) {
    sc_devar_t *v = calloc(1, sizeof(*v));
    static const char *const modes[] = {"auto", "host"};
    int mode = 0;
    if (!v) r = SC_ERR(SC_ERR_NOMEM, "device all-reduce state");
    if (r == SC_SUCCESS)
      r = sc_parse_choice("SC_DEVICE_ALLREDUCE", sc_config_get("SC_DEVICE_ALLREDUCE"), modes, 2,
                          &mode);
    if (r == SC_SUCCESS)
      r = sc_parse_size("SC_DEVICE_ALLREDUCE_HALF_BYTES",
                        sc_config_get("SC_DEVICE_ALLREDUCE_HALF_BYTES"),
                        (size_t)SC_IPCAR_VEC * SC_IPCAR_MAX_RANKS, (size_t)1 << 34, &v->half_bytes);
    if (r == SC_SUCCESS)
      r = sc_parse_size("SC_DEVICE_ALLREDUCE_ONESHOT_BYTES",
                        sc_config_get("SC_DEVICE_ALLREDUCE_ONESHOT_BYTES"), 0, (size_t)1 << 34,
                        &v->oneshot_max);
    if (r == SC_SUCCESS) {
      v->wanted = mode == 0;
      v->state = v->wanted ? DEVAR_UNTRIED : DEVAR_OFF;
      v->device = -1;
      v->lay = sc_ipcar_layout(v->half_bytes);
      pthread_mutex_init(&v->lock, NULL);
      __atomic_store_n(&comm->ex.devar, v, __ATOMIC_RELEASE);
    } else {
      free(v);
    }
  }
  *out = comm->ex.devar;
  pthread_mutex_unlock(&comm->lock);
  return r;
}

int sc_devar_takes(sc_comm_t *comm, const sc_op_t *op) {
  if (op->coll != SC_COLL_ALLREDUCE || !op->device || op->sparse || op->gen || op->job ||
      op->count == 0 || comm->cfg.algo >= 0 || comm->nranks < 2 ||
      comm->nranks > SC_IPCAR_MAX_RANKS)
    return 0;
  const sc_devar_t *v = __atomic_load_n(&comm->ex.devar, __ATOMIC_ACQUIRE);
  if (v && atomic_load(&v->state) == DEVAR_OFF) return 0;
  if (sc_board_room(comm) < sizeof(devar_info_t)) return 0;
  if (!v) {
    sc_devar_t *made;
    /* Settings that do not parse fail the call at sc_devar_run. */
    if (devar_get(comm, &made) != SC_SUCCESS) return 1;
    return made->state != DEVAR_OFF;
  }
  return 1;
}

/* The region and the pinned words, flags zeroed. Caller holds v->lock. */
static sc_result_t devar_alloc(sc_devar_t *v, const sc_devrt_t *rt, int device) {
  if (v->region) return SC_SUCCESS;
  v->rt = rt;
  v->device = device;
  void *p = NULL, *w = NULL;
  SC_CHECK(rt->malloc_device(&p, v->lay.total));
  sc_result_t r = rt->malloc_pinned(&w, 2 * sizeof(uint32_t));
  if (r == SC_SUCCESS && !v->event) r = rt->event_create(&v->event);
  if (r == SC_SUCCESS) {
    memset(w, 0, 2 * sizeof(uint32_t));
    /* The legacy default stream: the zeroing precedes every later launch. */
    r = rt->memset_async(p, 0, v->lay.half_off[0], NULL);
  }
  if (r == SC_SUCCESS) r = rt->event_record(v->event, NULL);
  if (r == SC_SUCCESS) r = sc_dev_event_wait(rt, v->event, 60000, "zeroing the all-reduce flags");
  if (r != SC_SUCCESS) {
    if (w) rt->free_pinned(w);
    rt->free_device(p);
    return r;
  }
  v->region = p;
  v->pinned = w;
  return SC_SUCCESS;
}

sc_result_t sc_devar_reserve(sc_comm_t *comm, const sc_op_t *op) {
  if (!sc_devar_takes(comm, op)) return SC_SUCCESS;
  sc_devar_t *v;
  SC_CHECK(devar_get(comm, &v));
  const sc_devrt_t *rt = sc_devrt();
  const void *bufs[2] = {op->recvbuf, op->sendbuf};
  int device = sc_buffers_device(2, bufs);
  if (!rt || device < 0) return SC_SUCCESS;
  pthread_mutex_lock(&v->lock);
  sc_result_t r = v->state == DEVAR_UNTRIED ? devar_alloc(v, rt, device) : SC_SUCCESS;
  pthread_mutex_unlock(&v->lock);
  /* A rank without memory says so at setup, where every rank learns it. */
  if (r != SC_SUCCESS)
    SC_INFO(SC_SUBSYS_COLL, "device all-reduce: no region (%s): setup will turn the path off",
            sc_last_error());
  return SC_SUCCESS;
}

void sc_devar_free(sc_devar_t *v) {
  if (!v) return;
  if (v->rt) {
    for (int j = 0; j < v->nranks; j++)
      if (v->peer[j] && v->peer[j] != v->region) sc_dev_ipc_close(v->rt, &v->handle[j], v->peer[j]);
    if (v->region) v->rt->free_device(v->region);
    if (v->pinned) v->rt->free_pinned((void *)(uintptr_t)v->pinned);
    if (v->event) v->rt->event_destroy(v->event);
  }
  pthread_mutex_destroy(&v->lock);
  free(v);
}

/* ---- setup ---- */

static void describe_device(const sc_devrt_t *rt, int device, char *out, size_t len) {
  if (!rt->pci_bus_id || rt->pci_bus_id(device, out, len) != SC_SUCCESS)
    snprintf(out, len, "%s:%d", rt->name, device);
}

/* Every rank's verdict from the same table; why (when off) for the log. */
static int devar_agree(const devar_info_t *all, int n, char *why, size_t len, int *nblocks) {
  uint32_t blocks = SC_IPCAR_MAX_BLOCKS;
  for (int i = 0; i < n; i++) {
    if (!all[i].ok) {
      snprintf(why, len, "rank %d has no region", i);
      return 0;
    }
    int sharing = 0;
    for (int j = 0; j < n; j++) {
      if (strncmp(all[i].bus, all[j].bus, sizeof(all[i].bus)) != 0) continue;
      sharing++;
      if (j != i && !all[i].mps) {
        snprintf(why, len, "ranks %d and %d share device %.32s, which MPS does not serve", i, j,
                 all[i].bus);
        return 0;
      }
    }
    uint32_t b = sc_ipcar_blocks(all[i].sms, all[i].blocks_per_sm, sharing);
    if (b < blocks) blocks = b;
  }
  *nblocks = (int)blocks;
  return 1;
}

static sc_result_t devar_setup(sc_comm_t *comm, sc_devar_t *v, const sc_devrt_t *rt, int device) {
  const int P = comm->nranks, me = comm->rank;
  devar_info_t mine, *all = calloc((size_t)P, sizeof(*all));
  int32_t *opened = calloc((size_t)P, sizeof(*opened));
  if (!all || !opened) {
    free(all);
    free(opened);
    return SC_ERR(SC_ERR_NOMEM, "device all-reduce setup of %d ranks", P);
  }
  memset(&mine, 0, sizeof(mine));
  pthread_mutex_lock(&v->lock);
  sc_result_t r = devar_alloc(v, rt, device);
  pthread_mutex_unlock(&v->lock);
  if (r == SC_SUCCESS) r = rt->ipc_get(v->region, &mine.h);
  if (r == SC_SUCCESS) r = sc_dev_ipcar_geometry(rt, &mine.sms, &mine.blocks_per_sm);
  if (r == SC_SUCCESS) {
    mine.ok = 1;
    mine.pid = (int64_t)getpid();
    mine.base = (uint64_t)(uintptr_t)v->region;
    mine.size = v->lay.total;
    mine.mps = rt->mps_enabled ? rt->mps_enabled(device) : 0;
    describe_device(rt, device, mine.bus, sizeof(mine.bus));
  } else {
    SC_INFO(SC_SUBSYS_COLL, "device all-reduce: rank %d cannot make its region: %s", me,
            sc_last_error());
  }
  char why[160] = "";
  int on = 0;
  r = sc_board_exchange(comm, &mine, sizeof(mine), all);
  if (r == SC_SUCCESS) on = devar_agree(all, P, why, sizeof(why), &v->nblocks);
  v->nranks = P;
  int32_t ok = on;
  for (int j = 0; j < P && r == SC_SUCCESS && on; j++) {
    if (j == me) {
      v->peer[j] = v->region;
      continue;
    }
    v->handle[j] = all[j].h;
    void *base = NULL;
    if (sc_dev_ipc_open(rt, &all[j].h, all[j].pid, all[j].base, all[j].size, &base) != SC_SUCCESS) {
      snprintf(why, sizeof(why), "rank %d cannot map rank %d's region: %s", me, j, sc_last_error());
      ok = 0;
      break;
    }
    v->peer[j] = base;
  }
  if (r == SC_SUCCESS && on) r = sc_board_exchange(comm, &ok, sizeof(ok), opened);
  for (int j = 0; j < P && r == SC_SUCCESS && on; j++)
    if (!opened[j]) {
      on = 0;
      if (!why[0]) snprintf(why, sizeof(why), "rank %d could not map a peer's region", j);
    }
  free(all);
  free(opened);
  if (r != SC_SUCCESS) return r;
  if (!on) {
    for (int j = 0; j < P; j++) {
      if (v->peer[j] && v->peer[j] != v->region) sc_dev_ipc_close(rt, &v->handle[j], v->peer[j]);
      v->peer[j] = NULL;
    }
    v->state = DEVAR_OFF;
    SC_INFO(SC_SUBSYS_COLL, "device all-reduce: the host path (%s)", why);
    return SC_SUCCESS;
  }
  v->state = DEVAR_ON;
  SC_INFO(SC_SUBSYS_COLL,
          "device all-reduce: the kernel path on %d ranks (%d blocks per launch, one-shot up to "
          "%zu bytes, two-shot above, halves of %llu bytes)",
          P, v->nblocks, v->oneshot_max, (unsigned long long)v->lay.half_bytes);
  return SC_SUCCESS;
}

/* ---- a call ---- */

/* Waits for the call's stream work; on an abort, a watched failure or the
 * deadline, raises the abort word and lets the stream drain. */
static sc_result_t devar_wait(sc_comm_t *comm, sc_devar_t *v, void *stream, int64_t deadline_ms) {
  const sc_devrt_t *rt = v->rt;
  SC_CHECK(rt->event_record(v->event, stream));
  sc_result_t fail = SC_SUCCESS;
  int64_t failed_since = 0;
  for (unsigned polls = 0;; polls++) {
    int done = 0;
    SC_CHECK(rt->event_query(v->event, &done));
    if (done) break;
    int64_t now = sc_now_ms();
    if (atomic_load(&comm->aborted)) {
      fail = SC_ERR(SC_ERR_ABORTED, "rank %d: aborted while the all-reduce kernel ran", comm->rank);
      break;
    }
    /* As the executor: a failure elsewhere is heeded after a grace, since
     * the kernels of a call that completes may still be finishing. */
    int failed = atomic_load(&comm->error);
    if (failed != SC_SUCCESS && !failed_since) failed_since = now;
    if (failed != SC_SUCCESS && now - failed_since >= SC_EXEC_NOTICE_GRACE_MS) {
      fail = SC_ERR((sc_result_t)failed, "%s", comm->errmsg);
      break;
    }
    if (now >= deadline_ms) {
      fail = SC_ERR(SC_ERR_TIMEOUT,
                    "the device all-reduce kernels did not finish within %d ms (SC_TIMEOUT_MS)",
                    comm->cfg.timeout_ms);
      break;
    }
    int progressed = 0;
    (void)comm->tpops->progress(comm->tp, 0, &progressed);
    if (polls < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  if (fail == SC_SUCCESS) return SC_SUCCESS;
  char msg[SC_ERRMSG_MAX];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  __atomic_store_n((uint32_t *)(uintptr_t)&v->pinned[0], 1u, __ATOMIC_RELEASE);
  (void)sc_dev_event_wait(rt, v->event, comm->cfg.timeout_ms, "the stopped all-reduce kernels");
  sc_error_set_detail(msg);
  return fail;
}

static sc_result_t devar_status(const sc_comm_t *comm, const sc_devar_t *v) {
  uint32_t st = __atomic_load_n((const uint32_t *)(uintptr_t)&v->pinned[1], __ATOMIC_ACQUIRE);
  if (st == 0) return SC_SUCCESS;
  int peer = (int)(st & 0xffffu);
  const char *host = sc_comm_host(comm, peer);
  if ((st & SC_IPCAR_ST_KIND) == SC_IPCAR_ST_ABORTED)
    return SC_ERR(SC_ERR_ABORTED, "rank %d: the all-reduce kernel stopped waiting for rank %d (%s)",
                  comm->rank, peer, host);
  if ((st & SC_IPCAR_ST_KIND) == SC_IPCAR_ST_PEER)
    return SC_ERR(SC_ERR_REMOTE,
                  "rank %d: rank %d (%s)'s all-reduce kernel gave up on this call before this "
                  "rank reached it",
                  comm->rank, peer, host);
  return SC_ERR(SC_ERR_TIMEOUT,
                "rank %d: the all-reduce kernel waited %d ms (SC_TIMEOUT_MS) for rank %d (%s) to "
                "reach it",
                comm->rank, comm->cfg.timeout_ms, peer, host);
}

sc_result_t sc_devar_run(sc_comm_t *comm, const sc_op_t *op, int *ran) {
  *ran = 0;
  sc_devar_t *v;
  SC_CHECK(devar_get(comm, &v));
  struct sc_exec_dev *d = NULL;
  SC_CHECK(sc_exec_dev_of_op(comm, op, &d));
  const sc_devrt_t *rt = d->rt;
  const int device = d->device;
  if (v->state == DEVAR_UNTRIED) SC_CHECK(devar_setup(comm, v, rt, device));
  if (v->state != DEVAR_ON) return SC_SUCCESS;
  if (v->device != device)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "allreduce: buffers on device %d, but the kernel path was set up on device %d",
                  device, v->device);
  *ran = 1;
  const size_t es = sc_dtype_size(op->dtype);
  const uint64_t round = sc_ipcar_round_elems(v->lay.half_bytes, (uint32_t)es, (uint32_t)v->nranks);
  if (round == 0)
    return SC_ERR(SC_ERR_INTERNAL, "device all-reduce: halves of %llu bytes hold no round",
                  (unsigned long long)v->lay.half_bytes);
  sc_ipcar_args_t a;
  memset(&a, 0, sizeof(a));
  for (int j = 0; j < v->nranks; j++) a.region[j] = v->peer[j];
  a.timeout_ns = (uint64_t)comm->cfg.timeout_ms * 1000000ull;
  a.abort_flag = v->pinned;
  a.nranks = v->nranks;
  a.rank = comm->rank;
  a.nblocks = v->nblocks;
  a.mode = (int32_t)sc_ipcar_mode_for((uint64_t)op->count * es, v->oneshot_max);
  a.dtype = (int32_t)op->dtype;
  a.op = (int32_t)op->op;
  const uint32_t barriers = sc_ipcar_barriers((sc_ipcar_mode_t)a.mode);
  const uint8_t *src = op->sendbuf;
  uint8_t *dst = op->recvbuf;
  void *stream = d->stream;
  size_t launches = 0;
  for (size_t off = 0; off < op->count; off += round, launches++) {
    size_t n = op->count - off < round ? op->count - off : (size_t)round;
    uint8_t *half = v->region + v->lay.half_off[v->half];
    SC_CHECK(rt->memcpy_async(half, src + off * es, n * es, stream));
    a.out = dst + off * es;
    a.count = n;
    a.half_off = v->lay.half_off[v->half];
    a.epoch = v->epoch + 1;
    SC_CHECK(sc_dev_ipc_allreduce(rt, &a, stream));
    v->epoch += barriers;
    v->half ^= 1u;
  }
  SC_CHECK(rt->memcpy_async((void *)(uintptr_t)&v->pinned[1], v->region + v->lay.status_off,
                            sizeof(uint32_t), stream));
  /* Each barrier waits SC_TIMEOUT_MS at most on the device; the host gives
   * the whole call that once, plus every launch's share. */
  int64_t deadline =
      sc_now_ms() + (int64_t)comm->cfg.timeout_ms * (int64_t)(1 + launches * barriers);
  SC_CHECK(devar_wait(comm, v, stream, deadline));
  return devar_status(comm, v);
}
