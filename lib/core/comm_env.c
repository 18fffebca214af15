/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_comm_init_env: rank, size and root address from the environment of
 * sc-run, torchrun, Slurm or Open MPI's mpirun. Rank 0 hosts the bootstrap
 * root service at the root address. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/config.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "lib/core/comm.h"

typedef struct sc_env_source {
  const char *rank_var, *size_var;
  const char *addr_var; /* host:port in one variable, or NULL */
  const char *host_var, *port_var;
} sc_env_source_t;

static const sc_env_source_t sc_env_sources[] = {
    {"SC_RANK", "SC_WORLD_SIZE", "SC_ROOT_ADDR", NULL, NULL},
    {"RANK", "WORLD_SIZE", NULL, "MASTER_ADDR", "MASTER_PORT"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SC_ROOT_ADDR", NULL, NULL},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SC_ROOT_ADDR", NULL, NULL},
};

static int sc_env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

/* The secret every rank derives from SC_AUTH_TOKEN: 64 hex digits are taken
 * as the 32 bytes; any other token is hashed (FNV-1a in four lanes). */
sc_result_t sc_secret_from_token(const char *token, uint8_t secret[SC_SECRET_LEN]) {
  memset(secret, 0, SC_SECRET_LEN);
  if (!token || !*token) return SC_SUCCESS;
  size_t n = strlen(token);
  if (n == 2 * SC_SECRET_LEN) {
    int ok = 1;
    for (size_t i = 0; i < SC_SECRET_LEN && ok; i++) {
      unsigned byte;
      char pair[3] = {token[2 * i], token[2 * i + 1], 0};
      char *end;
      byte = (unsigned)strtoul(pair, &end, 16);
      if (*end) ok = 0;
      secret[i] = (uint8_t)byte;
    }
    if (ok) return SC_SUCCESS;
  }
  for (int lane = 0; lane < 4; lane++) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(lane + 1) * 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < n; i++) {
      h ^= (uint8_t)token[i];
      h *= 1099511628211ULL;
    }
    memcpy(secret + 8 * lane, &h, 8);
  }
  return SC_SUCCESS;
}

sc_result_t sc_comm_init_env(sc_comm_t **comm) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_env: comm is NULL");
  *comm = NULL;
  const sc_env_source_t *src = NULL;
  for (size_t i = 0; i < sizeof(sc_env_sources) / sizeof(sc_env_sources[0]); i++)
    if (sc_env_set(sc_env_sources[i].rank_var) && sc_env_set(sc_env_sources[i].size_var)) {
      src = &sc_env_sources[i];
      break;
    }
  if (!src)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "sc_comm_init_env: no rank/size in the environment (set SC_RANK and "
                  "SC_WORLD_SIZE, or run under sc-run, torchrun, Slurm or mpirun)");
  long rank, size;
  SC_CHECK(sc_parse_long(src->rank_var, getenv(src->rank_var), 0, SC_RANKS_MAX - 1, &rank));
  SC_CHECK(sc_parse_long(src->size_var, getenv(src->size_var), 1, SC_RANKS_MAX, &size));
  if (rank >= size)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_env: %s=%ld is not below %s=%ld", src->rank_var,
                  rank, src->size_var, size);
  char host[256];
  uint16_t port;
  /* SC_ROOT_ADDR wins over MASTER_ADDR/MASTER_PORT: under torchrun the store
   * of torch.distributed already listens on MASTER_PORT, so a script that
   * also uses this library needs a way to put the root elsewhere. */
  const char *addr_var = src->addr_var;
  if (!addr_var && sc_env_set("SC_ROOT_ADDR")) addr_var = "SC_ROOT_ADDR";
  if (addr_var) {
    if (!sc_env_set(addr_var))
      return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_env: %s and %s are set but %s is not",
                    src->rank_var, src->size_var, addr_var);
    SC_CHECK(sc_parse_hostport(addr_var, getenv(addr_var), host, sizeof(host), &port));
  } else {
    if (!sc_env_set(src->host_var) || !sc_env_set(src->port_var))
      return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_env: %s and %s must be set with %s",
                    src->host_var, src->port_var, src->rank_var);
    snprintf(host, sizeof(host), "%s", getenv(src->host_var));
    long p;
    SC_CHECK(sc_parse_long(src->port_var, getenv(src->port_var), 1, 65535, &p));
    port = (uint16_t)p;
  }
  int timeout;
  SC_CHECK(sc_comm_boot_timeout(&timeout));
  uint8_t secret[SC_SECRET_LEN];
  const char *token = sc_config_get("SC_AUTH_TOKEN");
  SC_CHECK(sc_secret_from_token(token, secret));
  if (!token || !*token)
    SC_INFO(SC_SUBSYS_BOOT, "no SC_AUTH_TOKEN: bootstrap connections are not authenticated");
  sc_sockaddr_t root;
  SC_CHECK(sc_socket_resolve(host, port, &root));
  if (rank == 0) {
    sc_sockaddr_t bound;
    sc_result_t br = sc_bootstrap_root_start(&root, secret, timeout, &bound);
    if (br != SC_SUCCESS) {
      /* A bare "Address already in use" does not say that the port is the
       * launcher's choice, nor what else may hold it. */
      char detail[SC_ERRMSG_MAX - 256];
      sc_error_get_detail(detail, sizeof(detail));
      /* The detail starts with the code's phrase, which SC_ERR adds again. */
      const char *what = detail, *phrase = sc_strerror(br);
      size_t plen = strlen(phrase);
      if (strncmp(what, phrase, plen) == 0 && strncmp(what + plen, ": ", 2) == 0) what += plen + 2;
      const char *port_var = addr_var ? addr_var : src->port_var;
      const char *hint = "";
      if (!addr_var)
        hint = " (torchrun's store may hold it: set SC_ROOT_ADDR=host:otherport or use "
               "sparsecoll.torch)";
      return SC_ERR(br, "%s; the port came from %s%s", what, port_var, hint);
    }
  }
  sc_unique_id_t id;
  SC_CHECK(sc_unique_id_encode(&root, secret, &id));
  SC_INFO(SC_SUBSYS_INIT, "init from %s/%s: rank %ld of %ld, root %s:%u", src->rank_var,
          src->size_var, rank, size, host, port);
  sc_result_t r = sc_comm_create(comm, (int)size, (int)rank, &id);
  /* The root lives in this process: an application exits when init fails,
   * and the root with it, before it has told the other ranks why (e.g. a
   * wrong SC_WORLD_SIZE), leaving them a bare closed connection. */
  if (r != SC_SUCCESS && rank == 0) sc_bootstrap_root_drain(1000);
  return r;
}
