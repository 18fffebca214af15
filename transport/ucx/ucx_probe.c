/* SPDX-License-Identifier: BSD-3-Clause */
/* Is there RDMA for UCX here? The cheap look (sysfs) and the real one (the
 * resources a UCP context opened), shared by SC_TRANSPORT=auto (the UCX
 * row's opener), sc-info and the choice of the transport's lanes. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "transport/ucx/ucx_auto.h"
#include "transport/ucx/ucx_internal.h"

int sc_ucx_rdma_devices_listed(void) {
  DIR *d = opendir("/sys/class/infiniband");
  if (!d) return 0;
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(d)) != NULL;) found = e->d_name[0] != '.';
  closedir(d);
  return found;
}

int sc_ucx_info_has_rdma(const char *info) {
  /* Resource lines read "#      resource 1  :  md 1  dev 1  flags -- rc_mlx5/mlx5_0:1". */
  for (const char *line = info; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *res = strstr(line, "resource");
    const char *tl = res && res < line + len ? strstr(res, "-- ") : NULL;
    if (tl && tl + 5 <= line + len &&
        (!strncmp(tl + 3, "rc", 2) || !strncmp(tl + 3, "ud", 2) || !strncmp(tl + 3, "dc", 2)))
      return 1;
    line = end ? end + 1 : NULL;
  }
  return 0;
}

int sc_ucx_context_has_rdma(ucp_context_h ctx) {
  if (!ctx) return 0;
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return 0;
  ucp_context_print_info(ctx, mem);
  fclose(mem);
  int rdma = sc_ucx_info_has_rdma(text);
  free(text);
  return rdma;
}

int sc_ucx_tp_has_rdma(sc_transport_t *tp) {
  sc_ucx_transport_t *u = (sc_ucx_transport_t *)tp;
  return u ? sc_ucx_context_has_rdma(u->lane[0].ctx) : 0;
}

int sc_ucx_context_has_cuda(ucp_context_h ctx) {
  ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
  if (!ctx || ucp_context_query(ctx, &attr) != UCS_OK) return 0;
  return (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

sc_result_t sc_ucx_auto_open(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                             size_t room, size_t *addrlen) {
  *tp = NULL;
  if (!sc_ucx_rdma_devices_listed()) return SC_SUCCESS;
  sc_transport_t *u = NULL;
  SC_CHECK(sc_ucx_create_in(cfg, &u, addr, room, addrlen));
  if (!sc_ucx_tp_has_rdma(u)) {
    sc_ucx_transport.destroy(u);
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "UCX opened no RDMA transport (see UCX_TLS, UCX_NET_DEVICES)");
  }
  *tp = u;
  return SC_SUCCESS;
}
