/* Parts of docs/API.md that later releases implement. Each answers
 * SC_ERR_UNSUPPORTED with a detail that says so, and touches nothing. */
#include "lib/base/error.h"

#define SC_NOT_YET(fn, what)                                                                       \
  SC_ERR(SC_ERR_UNSUPPORTED, "%s: %s is not implemented in libsparsecoll %d.%d.%d yet", fn, what,  \
         SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH)

/* Nothing is pending at the moment: every function of docs/API.md is implemented. */
