/* Placeholder until the ucx transport lands: SC_TRANSPORT=ucx answers
 * SC_ERR_UNSUPPORTED. */
#include "base/error.h"
#include "transport/transport.h"

static sc_result_t sc_ucx_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                                 size_t *addrlen) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "the ucx transport is not implemented yet");
}

const sc_transport_ops_t sc_ucx_transport = {.name = "ucx", .create = sc_ucx_create};
