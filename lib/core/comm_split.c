/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_comm_split: MPI_Comm_split semantics over the parent's collectives.
 * Every rank all-gathers (color, key); the lowest parent rank of each color
 * becomes the new group's leader, makes a unique id, and the ids are
 * all-gathered so members can bootstrap the new communicator. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/core/comm.h"

typedef struct sc_split_entry {
  int32_t color, key;
} sc_split_entry_t;

sc_result_t sc_comm_split(sc_comm_t *comm, int color, int key, sc_comm_t **newcomm) {
  if (!comm || !newcomm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_split: NULL argument");
  *newcomm = NULL;
  int p = comm->nranks, me = comm->rank;
  sc_split_entry_t mine = {.color = color < 0 ? -1 : color, .key = key};
  sc_split_entry_t *all = calloc((size_t)p, sizeof(*all));
  sc_unique_id_t *ids = calloc((size_t)p, sizeof(*ids));
  sc_result_t r = SC_SUCCESS;
  if (!all || !ids) {
    r = SC_ERR(SC_ERR_NOMEM, "sc_comm_split tables for %d ranks", p);
    goto done;
  }
  SC_CHECK_GOTO(sc_allgather(&mine, all, 2, SC_INT32, comm), r, done);
  /* Leader = lowest parent rank with my color; new rank = position by (key, parent rank). */
  int leader = -1, newrank = 0, newsize = 0;
  for (int i = 0; i < p; i++) {
    if (mine.color < 0 || all[i].color != mine.color) continue;
    if (leader < 0) leader = i;
    newsize++;
    if (all[i].key < key || (all[i].key == key && i < me)) newrank++;
  }
  sc_unique_id_t myid;
  memset(&myid, 0, sizeof(myid));
  if (leader == me) SC_CHECK_GOTO(sc_get_unique_id(&myid), r, done);
  /* Every rank takes part even with a negative color, so the all-gather matches. */
  SC_CHECK_GOTO(sc_allgather(&myid, ids, sizeof(myid), SC_UINT8, comm), r, done);
  if (mine.color < 0) goto done;
  SC_INFO(SC_SUBSYS_INIT, "split: color %d key %d -> rank %d of %d", color, key, newrank, newsize);
  r = sc_comm_create_child(newcomm, newsize, newrank, &ids[leader], comm);
done:
  free(all);
  free(ids);
  return r;
}
