/* SPDX-License-Identifier: BSD-3-Clause */
/* The fusion engine's state, shared by its files: api.c (registration and
 * the collective plan step), check.c (cross-rank agreement and calibration),
 * runtime.c (ready / wait / launch), worker.c (buckets run off the caller's
 * thread), compress.c (what those buckets travel as), p3.c (P3). */
#ifndef SC_FUSION_H
#define SC_FUSION_H

#include <pthread.h>

#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/core/comm.h"
#include "sparsecoll.h"

typedef enum sc_fb_state {
  SC_FB_IDLE,    /* no round in progress: results (if any) delivered */
  SC_FB_FILLING, /* some tensors of this round are ready */
  SC_FB_READY,   /* all tensors ready, waiting for an earlier bucket to launch */
  SC_FB_INFLIGHT /* collective(s) launched */
} sc_fb_state_t;

typedef struct sc_ftensor {
  void *buf;
  size_t count, bytes;
  sc_dtype_t dtype;
  double bw_us;
  int bucket;
  size_t offset;     /* bytes from the start of the bucket's buffer */
  int ready;         /* readied or skipped, round not delivered yet */
  size_t rows, cols; /* sc_fusion_add_matrix's shape; 0 for a vector */
} sc_ftensor_t;

typedef struct sc_fbucket {
  size_t first, last; /* tensors [first, last) */
  size_t count;       /* elements of the tensors */
  size_t padded;      /* elements in the collective (DeAR: a multiple of P) */
  sc_dtype_t dtype;
  char *buf;     /* the fused buffer, or the caller's memory when zero_copy */
  int zero_copy; /* the tensors are already one contiguous run */
  size_t nready;
  sc_fb_state_t state;
  sc_request_t *req;  /* all-reduce, or DeAR's reduce-scatter */
  sc_request_t *req2; /* DeAR's all-gather (queued after the last reduce-scatter) */
  int waiting;        /* a thread is blocked on this bucket's requests */
  /* Buckets run by the worker (worker.c): gTop-k and the compressed modes. */
  sc_compress_t comp; /* what the bucket travels as (compress.c) */
  sc_ef_t *ef;
  size_t k;
  sc_onebit_t *ob;    /* SC_COMPRESS_ONEBIT */
  sc_lowrank_t **lr;  /* low rank: per tensor of the bucket, NULL for a vector */
  char *dense;        /* low rank: the bucket's vectors gathered into one run */
  char *fbuf;         /* low rank: every matrix's factor of a round, summed in one all-reduce */
  size_t dense_count; /* elements of dense */
  /* Low rank in flight (lowrank.c): the factors' all-reduce of round
   * lr_round, and the vectors'. */
  sc_request_t *lr_req, *lr_dreq;
  int lr_round;
  int sparse_done;
  sc_result_t sparse_res;
  char *errmsg;
  double pred_start, pred_end; /* modelled, us from the start of backward */
} sc_fbucket_t;

typedef struct sc_p3 sc_p3_t; /* p3.c */

/* Buckets AUTO's trial times each mode on at most (auto_trial.c). */
#define SC_AUTO_TRIAL_POINTS 3

struct sc_fusion {
  sc_comm_t *comm;
  sc_fusion_config_t cfg;
  int rank, nranks;
  int timeout_ms;
  sc_ftensor_t *t;
  size_t nt, cap;
  sc_fbucket_t *b;
  size_t nb;
  int planned;
  int worker_mode; /* gTop-k or compression: buckets run on the worker thread */
  /* SC_COMPRESS_AUTO (auto.c): the compression's own work, measured at plan
   * time on rank 0: us per element (fp16 wire), per element and unit of
   * rank (ACP-SGD); gTop-k's model with density > 0. */
  double auto_half_us, auto_lowrank_us, auto_sparse_alpha, auto_sparse_beta;
  /* The trial's points of each mode (dense, fp16, top-k, ACP-SGD):
   * (modelled, measured) at its buckets of rising size, as
   * sc_fplan_trial_cost takes them; zeros without a trial. */
  double auto_pts[4][2 * SC_AUTO_TRIAL_POINTS];
  int auto_any_device;               /* some rank's tensors are device memory: no trial */
  double alpha_us, beta_us_per_byte; /* the model the plan used (sparse: the sparse cost) */
  size_t next_launch;                /* plan order; wraps to 0 for the next round */
  pthread_mutex_t lock;
  pthread_cond_t cv;  /* bucket state changes */
  sc_result_t failed; /* sticky: the first failure of a collective */
  char failmsg[SC_ERRMSG_MAX];
  /* Sparse worker: gTop-k is blocking, so it runs buckets off the caller's thread. */
  pthread_t worker;
  int worker_started, worker_stop;
  pthread_cond_t wcv;
  size_t *wq; /* ring of bucket indices, nb entries */
  size_t wq_head, wq_len;
  sc_p3_t *p3; /* SC_FUSE_P3: the slice scheduler */
  /* Device tensors (device.c): all tensors are one memory kind, the first
   * one's; with device tensors the fused buffers are device memory too. */
  int device;
  const sc_devrt_t *rt;
  void *dstream;         /* copies into and out of fused buffers */
  void *dev_in;          /* recorded on the legacy default stream: the gradients */
  void *dev_done;        /* recorded on dstream: the copies */
  pthread_mutex_t dlock; /* dstream's events serve one thread at a time */
  int dlock_init;
  int lr_pipeline; /* PowerSGD buckets overlap (worker.c); SC_FUSION_PIPELINE=0: one at a time */
  char *hstage;    /* host image of a compressed bucket, for the worker (compress.c) */
  size_t hstage_bytes;
};

#define SC_FUSION_DEFAULT_BUCKET_BYTES ((size_t)25 * 1024 * 1024)
/* OMGS never merges past the largest size the sparse model is measured at
 * (check.c's calibration sizes): the model is linear, but the selection is
 * not once a bucket leaves the cache (exact top-k at density 0.001 on this
 * VM: 2 ns per element up to 1M elements, 11-30 ns at 8M-32M), so a merge
 * past that size costs more than the startup it saves. */
#define SC_FUSION_OMGS_MAX_BYTES ((size_t)2 * 1024 * 1024)

/* check.c (collective) */
sc_result_t sc_fusion_check_same(sc_fusion_t *f);
sc_result_t sc_fusion_agree_times(sc_fusion_t *f);
sc_result_t sc_fusion_calibrate(sc_fusion_t *f, double *alpha_us, double *beta_us_per_byte);
sc_result_t sc_fusion_sparse_model(sc_fusion_t *f, double alpha_us, double beta_us_per_byte,
                                   double *sp_alpha, double *sp_beta);

/* runtime.c; lock held */
sc_result_t sc_fusion_launch_ready(sc_fusion_t *f);
sc_result_t sc_fusion_fail(sc_fusion_t *f, sc_result_t r);

/* compress.c. The mode cfg asks for (density > 0 with NONE: TOPK). */
sc_compress_t sc_fusion_mode(const sc_fusion_config_t *cfg);
/* " + PowerSGD" and so on, for the plan's log line ("" for dense). */
const char *sc_fusion_mode_suffix(sc_compress_t m);
/* The rank a low-rank mode reduces tensor t at: lowrank capped at its
 * sides, or 0 when t is no matrix with both sides above 1 (it goes dense). */
size_t sc_fusion_matrix_rank(const sc_fusion_t *f, const sc_ftensor_t *t);
/* Checks the compression fields of a config (sc_fusion_create). */
sc_result_t sc_fusion_compress_check(const sc_fusion_config_t *cfg, const char *fn);
/* The bytes tensor t puts on the wire under the fusion's mode: what the
 * policies plan over. */
size_t sc_fusion_wire_bytes(const sc_fusion_t *f, const sc_ftensor_t *t);
/* Plan time: bucket b's mode and its compression state; _as: as mode m
 * (AUTO's choice, or its trial of a mode on a scratch bucket). */
sc_result_t sc_fusion_compress_setup(sc_fusion_t *f, sc_fbucket_t *b, size_t i);
sc_result_t sc_fusion_compress_setup_as(sc_fusion_t *f, sc_fbucket_t *b, size_t i, sc_compress_t m);
void sc_fusion_compress_free(sc_fusion_t *f, sc_fbucket_t *b);
/* auto.c: the costs SC_COMPRESS_AUTO compares (collective: rank 0
 * measures, everyone gets its figures), then bucket b's choice, with the
 * modelled us of dense, fp16, top-k and ACP-SGD in cost (-1: not a
 * candidate). */
sc_result_t sc_fusion_auto_costs(sc_fusion_t *f, double alpha_us, double beta_us_per_byte);
sc_compress_t sc_fusion_auto_choose(const sc_fusion_t *f, const sc_fbucket_t *b, double cost[4]);
/* The modes AUTO compares, in the order of its cost[] and auto_pts. */
extern const sc_compress_t sc_fusion_auto_modes[4];
/* auto_trial.c: with a calibrated model, once the buckets are formed and
 * before their modes are chosen, every candidate timed for real on scratch
 * copies of some of its buckets (collective), and each mode's modelled cost
 * corrected through its measured points (f->auto_pts, by
 * sc_fplan_trial_cost). */
sc_result_t sc_fusion_auto_trial(sc_fusion_t *f);
/* The worker: one round of bucket b, blocking; _at: in buf (its fused
 * buffer, that buffer's host image, or the trial's scratch). */
sc_result_t sc_fusion_bucket_reduce(sc_fusion_t *f, sc_fbucket_t *b);
sc_result_t sc_fusion_reduce_at(sc_fusion_t *f, sc_fbucket_t *b, char *buf);
/* Whether the worker may overlap bucket b with its neighbours: a PowerSGD
 * bucket of host memory (a staged one shares the one host image). */
int sc_fusion_bucket_pipelined(const sc_fusion_t *f, const sc_fbucket_t *b);

/* lowrank.c: a low-rank bucket's round of buf (its fused buffer or host
 * image) in three steps, each blocking only on its own bucket's requests:
 * issue starts round 0 and the vectors' all-reduce, next runs the later
 * rounds (PowerSGD's Q: waits for P), finish waits for the last and writes
 * the results. On failure a step leaves nothing in flight. */
sc_result_t sc_fusion_lr_issue(sc_fusion_t *f, sc_fbucket_t *b, char *buf);
sc_result_t sc_fusion_lr_next(sc_fusion_t *f, sc_fbucket_t *b, char *buf);
sc_result_t sc_fusion_lr_finish(sc_fusion_t *f, sc_fbucket_t *b, char *buf);

/* worker.c */
sc_result_t sc_fusion_worker_start(sc_fusion_t *f);
void sc_fusion_worker_stop(sc_fusion_t *f);
/* Lock held. */
void sc_fusion_worker_push(sc_fusion_t *f, size_t b);

/* p3.c: SC_FUSE_P3. start is collective (sc_fusion_plan); stop is collective
 * too (every rank's scheduler leaves after the same agreement step). */
/* slice_bytes 0: the default, from the model and a measured scheduler step. */
sc_result_t sc_fusion_p3_start(sc_fusion_t *f, size_t slice_bytes, double alpha_us,
                               double beta_us_per_byte);
sc_result_t sc_fusion_p3_stop(sc_fusion_t *f);
sc_result_t sc_fusion_p3_mark(sc_fusion_t *f, int id, int skip, const char *fn);
sc_result_t sc_fusion_p3_wait(sc_fusion_t *f, int id, const char *fn);
sc_result_t sc_fusion_p3_wait_all(sc_fusion_t *f);

/* device.c. The memory kind of tensor buf (the first tensor fixes it). */
sc_result_t sc_fusion_dev_kind(sc_fusion_t *f, void *buf, const char *fn);
/* Plan time, device tensors: the runtime, stream and events. */
sc_result_t sc_fusion_dev_start(sc_fusion_t *f);
void sc_fusion_dev_stop(sc_fusion_t *f);
/* A fused buffer of bytes on the device, zeroed (padding adds nothing). */
sc_result_t sc_fusion_dev_alloc(sc_fusion_t *f, size_t bytes, char **buf);
void sc_fusion_dev_free(sc_fusion_t *f, void *buf);
/* Device tensors: after the caller's work on the legacy default stream so
 * far (a gradient made ready), bytes of src go to dst (src NULL: zeros;
 * bytes 0: only that ordering), and the call returns when they are there,
 * so a collective launched next reads them. Bounded by the fusion's timeout. */
sc_result_t sc_fusion_dev_fill(sc_fusion_t *f, void *dst, const void *src, size_t bytes);
/* Device tensors: bucket b's results from its fused buffer into the tensors. */
sc_result_t sc_fusion_dev_out(sc_fusion_t *f, const sc_fbucket_t *b);
/* Plan time: the host image (hstage) holds at least bytes. */
sc_result_t sc_fusion_dev_stage(sc_fusion_t *f, size_t bytes);
/* Device tensors: bytes from src to dst (host or device) on the fusion's
 * stream, returning when they are there (bounded by the fusion's timeout). */
sc_result_t sc_fusion_dev_copy(sc_fusion_t *f, void *dst, const void *src, size_t bytes,
                               const char *what);

double sc_fusion_now_us(void);

#endif
