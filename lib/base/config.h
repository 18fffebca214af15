/* SPDX-License-Identifier: BSD-3-Clause */
/* Every SC_* variable: one table (name, default, meaning) that the README
 * reproduces (`sc-info --env` prints it), and validated parsers. */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

typedef struct sc_config_var {
  const char *name;
  const char *default_value; /* "" = unset */
  const char *meaning;
} sc_config_var_t;

const sc_config_var_t *sc_config_table(size_t *n);
/* The environment's value, else the table default. NULL for an unknown name. */
const char *sc_config_get(const char *name);

/* Parsers set sc_last_error naming `what` on bad input. */
sc_result_t sc_parse_long(const char *what, const char *s, long min, long max, long *out);
/* Bytes with optional K/M/G suffix (powers of 1024). */
sc_result_t sc_parse_size(const char *what, const char *s, size_t min, size_t max, size_t *out);
/* "host:port", "[v6]:port"; host may be a name. */
sc_result_t sc_parse_hostport(const char *what, const char *s, char *host, size_t hostlen,
                              uint16_t *port);
/* One of choices[] (case-insensitive); index in *out. */
sc_result_t sc_parse_choice(const char *what, const char *s, const char *const *choices,
                            int nchoices, int *out);

/* Typed getters of table variables (env or default), validated. */
sc_result_t sc_config_long(const char *name, long min, long max, long *out);
sc_result_t sc_config_size(const char *name, size_t min, size_t max, size_t *out);

#endif
