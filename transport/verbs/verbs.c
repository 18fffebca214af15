/* Placeholder until the verbs transport lands: SC_TRANSPORT=verbs answers
 * SC_ERR_UNSUPPORTED. */
#include "base/error.h"
#include "transport/transport.h"

static sc_result_t sc_verbs_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                                   size_t *addrlen) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "the verbs transport is not implemented yet");
}

const sc_transport_ops_t sc_verbs_transport = {.name = "verbs", .create = sc_verbs_create};
