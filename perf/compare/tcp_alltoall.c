/* SPDX-License-Identifier: BSD-3-Clause */
/* The network's own ceiling for an all-to-all: plain TCP sockets, one
 * connection per ordered pair of ranks, a thread per flow (every send and
 * every receive runs at once, the kernel interleaves them), no library in the
 * data path. libsparsecoll only starts the ranks (sc_comm_init_env: the
 * listening ports' all-gather, the barrier before the timed loop, the maximum
 * of the ranks' times), so whatever this reaches is what sockets between these
 * hosts reach, and a library's fraction of it is the library's own overhead.
 * Timed as perf/compare/alltoall_compare.sh times every library: uint8, SIZE
 * the bytes of one rank's send buffer (P blocks of SIZE / P; with --sendrecv
 * SIZE bytes to rank + 1 and from rank - 1), one checked operation, the
 * warm-up, a barrier, the timed iterations; the slowest rank's average.
 *   cc -O2 -I TOP/include -o tcp_alltoall tcp_alltoall.c -LBUILD/.libs -lsparsecoll -lpthread
 *   sc-run [--netbed=BED] -n P ./tcp_alltoall [--sendrecv] SIZE:ITERS:WARMUP ...
 * Rank 0 prints one line per size: "SIZE TIME_US", or "SIZE fail WHY". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"

typedef struct {
  uint32_t ip; /* network order */
  uint16_t port;
} endpoint_t;

typedef struct flow {
  int fd, peer, is_send;
  unsigned char *buf;
  size_t bytes;
  int err;
} flow_t;

static int rank, nranks;
static pthread_barrier_t start_bar, end_bar;
static volatile int quit;

static unsigned char value(int from, size_t g) {
  return (unsigned char)(((size_t)from * 131u + g * 7u + 1u) % 251u);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int move_all(flow_t *f) {
  for (size_t done = 0; done < f->bytes;) {
    ssize_t r = f->is_send ? send(f->fd, f->buf + done, f->bytes - done, MSG_NOSIGNAL)
                           : recv(f->fd, f->buf + done, f->bytes - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

static void *flow_main(void *arg) {
  flow_t *f = arg;
  for (;;) {
    pthread_barrier_wait(&start_bar);
    if (quit) return NULL;
    if (move_all(f)) f->err = 1;
    pthread_barrier_wait(&end_bar);
  }
}

/* This rank's address as the others reach it: the one its route to the
 * launcher's root address leaves from. */
static int local_ip(uint32_t *ip) {
  const char *root = getenv("SC_ROOT_ADDR");
  char host[64] = "127.0.0.1";
  if (root) {
    snprintf(host, sizeof(host), "%s", root);
    char *colon = strrchr(host, ':');
    if (colon) *colon = 0;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  socklen_t len = sizeof(a);
  int rc = s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) ||
           getsockname(s, (struct sockaddr *)&a, &len);
  if (s >= 0) close(s);
  *ip = a.sin_addr.s_addr;
  return rc ? -1 : 0;
}

/* Every rank connects to every other (out[p]: this rank sends to p) and
 * accepts one connection from each (in[p]: from p). */
static int connect_mesh(sc_comm_t *comm, int *out, int *in) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof(a);
  endpoint_t me = {0}, *all = calloc((size_t)nranks, sizeof(*all));
  if (ls < 0 || !all || local_ip(&me.ip) || bind(ls, (struct sockaddr *)&a, sizeof(a)) ||
      listen(ls, nranks) || getsockname(ls, (struct sockaddr *)&a, &len))
    return -1;
  me.port = a.sin_port;
  if (sc_allgather(&me, all, sizeof(me), SC_UINT8, comm) != SC_SUCCESS) return -1;
  int one = 1;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = all[p].port};
    to.sin_addr.s_addr = all[p].ip;
    out[p] = socket(AF_INET, SOCK_STREAM, 0);
    if (out[p] < 0 || connect(out[p], (struct sockaddr *)&to, sizeof(to))) return -1;
    int32_t who = rank;
    if (send(out[p], &who, sizeof(who), 0) != sizeof(who)) return -1;
    setsockopt(out[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  for (int i = 0; i < nranks - 1; i++) {
    int fd = accept(ls, NULL, NULL);
    int32_t who = -1;
    if (fd < 0 || recv(fd, &who, sizeof(who), MSG_WAITALL) != sizeof(who) || who < 0 ||
        who >= nranks || who == rank)
      return -1;
    in[who] = fd;
  }
  close(ls);
  free(all);
  return 0;
}

int main(int argc, char **argv) {
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "tcp_alltoall: init: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  int a = 1, sendrecv = 0;
  if (a < argc && strcmp(argv[a], "--sendrecv") == 0) sendrecv = 1, a++;
  size_t maxsize = 0;
  for (int i = a; i < argc; i++) {
    size_t s = strtoull(argv[i], NULL, 10);
    if (s > maxsize) maxsize = s;
  }
  int *out = calloc((size_t)nranks, sizeof(int)), *in = calloc((size_t)nranks, sizeof(int));
  unsigned char *sbuf = malloc(maxsize + 1), *rbuf = malloc(maxsize + 1);
  flow_t *flows = calloc(2 * (size_t)nranks, sizeof(flow_t));
  if (!out || !in || !sbuf || !rbuf || !flows || (nranks > 1 && connect_mesh(comm, out, in))) {
    fprintf(stderr, "tcp_alltoall: rank %d: setup failed: %s\n", rank, strerror(errno));
    return 1;
  }
  /* The flows this pattern uses: every peer both ways, or the ring's two. */
  int nf = 0;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    if (!sendrecv || p == (rank + 1) % nranks)
      flows[nf++] = (flow_t){.fd = out[p], .peer = p, .is_send = 1};
    if (!sendrecv || p == (rank + nranks - 1) % nranks)
      flows[nf++] = (flow_t){.fd = in[p], .peer = p};
  }
  pthread_barrier_init(&start_bar, NULL, (unsigned)nf + 1);
  pthread_barrier_init(&end_bar, NULL, (unsigned)nf + 1);
  pthread_t *th = calloc((size_t)nf + 1, sizeof(*th));
  for (int i = 0; i < nf; i++) pthread_create(&th[i], NULL, flow_main, &flows[i]);
  int status = 0;
  for (; a < argc; a++) {
    size_t size = 0;
    int iters = 0, warm = 0;
    if (sscanf(argv[a], "%zu:%d:%d", &size, &iters, &warm) != 3 || iters < 1) {
      if (rank == 0) printf("%s fail bad SIZE:ITERS:WARMUP\n", argv[a]);
      status = 1;
      continue;
    }
    const size_t block = sendrecv ? size : size / (size_t)nranks;
    for (int f = 0; f < nf; f++) {
      flows[f].bytes = block;
      flows[f].buf =
          (flows[f].is_send ? sbuf : rbuf) + (sendrecv ? 0 : (size_t)flows[f].peer * block);
    }
    for (size_t g = 0; g < (sendrecv ? size : block * (size_t)nranks); g++)
      sbuf[g] = value(rank, g);
    /* Each block is the sender's bytes at the receiver's offset. */
    double t0 = 0, mine = 0;
    long wrong = 0;
    for (int it = -1 - warm; it < iters; it++) {
      if (it == 0) {
        sc_barrier(comm);
        t0 = now_s();
      }
      if (nf) {
        pthread_barrier_wait(&start_bar);
        pthread_barrier_wait(&end_bar);
      }
      if (it == -1 - warm)
        for (int f = 0; f < nf; f++) {
          if (flows[f].is_send) continue;
          size_t off = sendrecv ? 0 : (size_t)rank * block;
          for (size_t g = 0; g < block; g++)
            wrong += flows[f].buf[g] != value(flows[f].peer, off + g);
        }
    }
    mine = (now_s() - t0) / iters * 1e6;
    for (int f = 0; f < nf; f++) wrong += flows[f].err;
    double slowest = 0;
    long allwrong = 0;
    sc_allreduce(&mine, &slowest, 1, SC_FLOAT64, SC_MAX, comm);
    sc_allreduce(&wrong, &allwrong, 1, SC_INT64, SC_SUM, comm);
    if (rank == 0) {
      if (allwrong)
        printf("%zu fail %ld wrong bytes or failed flows\n", size, allwrong);
      else
        printf("%zu %.3f\n", size, slowest);
      fflush(stdout);
    }
    if (allwrong) status = 1;
  }
  quit = 1;
  if (nf) pthread_barrier_wait(&start_bar);
  for (int i = 0; i < nf; i++) pthread_join(th[i], NULL);
  for (int p = 0; p < nranks; p++)
    if (p != rank) close(out[p]), close(in[p]);
  sc_comm_destroy(comm);
  return status;
}
