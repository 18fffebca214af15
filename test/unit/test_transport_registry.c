/* SPDX-License-Identifier: BSD-3-Clause */
/* The transport table (transport/registry.c) against what the rest of the
 * library and its documentation rely on: one row per sc_tp_id_t in id
 * order, the five SC_TRANSPORT names the README documents, each row's
 * vtable present exactly when configure found its package (config.h, read
 * here independently), look-up by name both ways, the errors of an unknown
 * name (SC_ERR_INVALID_ARG naming the valid ones) and of a transport not
 * built in (SC_ERR_UNSUPPORTED naming its package and configure option),
 * through the table and through the library's own SC_TRANSPORT parser. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "config.h"
#include "sparsecoll.h"
#include "transport/registry.h"

/* SC_TRANSPORT's values as the README and sc-info --env document them. */
static const char *const documented[] = {"auto", "tcp", "shm", "ucx", "verbs"};
#define NDOC (sizeof(documented) / sizeof(documented[0]))

static void test_ids_once_in_order(void **state) {
  (void)state;
  size_t n = 0;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  assert_int_equal(n, SC_TP_COUNT);
  int seen[SC_TP_COUNT] = {0};
  for (size_t i = 0; i < n; i++) {
    assert_true(rows[i].id >= 0 && rows[i].id < SC_TP_COUNT);
    seen[rows[i].id]++;
    assert_int_equal(rows[i].id, (int)i); /* comm->cfg.transport indexes the table */
    assert_ptr_equal(sc_tp_by_id((int)i), &rows[i]);
  }
  for (int id = 0; id < SC_TP_COUNT; id++) assert_int_equal(seen[id], 1);
  assert_null(sc_tp_by_id(-1));
  assert_null(sc_tp_by_id(SC_TP_COUNT));
}

static void test_names(void **state) {
  (void)state;
  size_t n = 0;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  assert_int_equal(n, NDOC);
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(rows[i].name, documented[i]);
    for (size_t j = i + 1; j < n; j++)
      assert_int_not_equal(strcasecmp(rows[i].name, rows[j].name), 0);
    /* The vtable names itself the same: tests compare the "ready (transport
     * NAME" log line, which prints ops->name, with SC_TRANSPORT. */
    if (rows[i].ops) assert_string_equal(rows[i].ops->name, rows[i].name);
  }
  assert_int_equal(SC_TP_AUTO, 0);
  assert_string_equal(sc_tp_by_id(SC_TP_TCP)->name, "tcp");
  assert_string_equal(sc_tp_by_id(SC_TP_SHM)->name, "shm");
  assert_string_equal(sc_tp_by_id(SC_TP_UCX)->name, "ucx");
  assert_string_equal(sc_tp_by_id(SC_TP_VERBS)->name, "verbs");
}

static void test_lookup_round_trip(void **state) {
  (void)state;
  size_t n = 0;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  for (size_t i = 0; i < n; i++) {
    const sc_tp_entry_t *e = NULL;
    assert_int_equal(sc_tp_lookup("SC_TRANSPORT", rows[i].name, &e), SC_SUCCESS);
    assert_ptr_equal(e, &rows[i]);
    char upper[32];
    snprintf(upper, sizeof(upper), "%s", rows[i].name);
    for (char *c = upper; *c; c++) *c = (char)toupper((unsigned char)*c);
    e = NULL;
    assert_int_equal(sc_tp_lookup("SC_TRANSPORT", upper, &e), SC_SUCCESS);
    assert_ptr_equal(e, &rows[i]);
    if (rows[i].ops) {
      e = NULL;
      assert_int_equal(sc_tp_select("SC_TRANSPORT", rows[i].name, &e), SC_SUCCESS);
      assert_ptr_equal(e, &rows[i]);
    }
  }
}

static void assert_names_all(const char *msg) {
  char list[128] = "";
  for (size_t i = 0; i < NDOC; i++)
    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
             documented[i]);
  if (!strstr(msg, list)) fail_msg("'%s' does not list '%s'", msg, list);
}

static void test_unknown_name(void **state) {
  (void)state;
  const char *const bad[] = {"bogus", "", "tcp ", "ucx2", "mux", "loopback", NULL};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const sc_tp_entry_t *e = NULL;
    assert_int_equal(sc_tp_lookup("SC_TRANSPORT", bad[i], &e), SC_ERR_INVALID_ARG);
    assert_null(e);
    assert_non_null(strstr(sc_last_error(), "SC_TRANSPORT"));
    assert_names_all(sc_last_error());
    assert_int_equal(sc_tp_select("SC_TRANSPORT", bad[i], &e), SC_ERR_INVALID_ARG);
    assert_null(e);
  }
}

static void assert_unsupported_message(const sc_tp_entry_t *row) {
  const char *msg = sc_last_error();
  char var[64];
  snprintf(var, sizeof(var), "SC_TRANSPORT=%s", row->name);
  if (!strstr(msg, var) || !strstr(msg, row->package) || !strstr(msg, row->configure_opt))
    fail_msg("'%s' does not name %s, %s and %s", msg, var, row->package, row->configure_opt);
}

/* Built in exactly when configure found the package, and what the table
 * says provides it is that package. */
static void test_built_as_configured(void **state) {
  (void)state;
  const sc_tp_entry_t *ucx = sc_tp_by_id(SC_TP_UCX), *verbs = sc_tp_by_id(SC_TP_VERBS);
  assert_ptr_equal(sc_tp_by_id(SC_TP_AUTO)->ops, &sc_mux_transport);
  assert_ptr_equal(sc_tp_by_id(SC_TP_TCP)->ops, &sc_tcp_transport);
  assert_ptr_equal(sc_tp_by_id(SC_TP_SHM)->ops, &sc_shm_transport);
  assert_string_equal(ucx->package, "libucx-dev");
  assert_string_equal(ucx->configure_opt, "--with-ucx");
  assert_string_equal(verbs->package, "libibverbs-dev");
  assert_string_equal(verbs->configure_opt, "--with-verbs");
  const sc_tp_entry_t *e = NULL;
#ifdef SC_HAVE_UCX
  assert_ptr_equal(ucx->ops, &sc_ucx_transport);
  assert_non_null(ucx->auto_open);
#else
  assert_null(ucx->ops);
  assert_null(ucx->auto_open);
  assert_int_equal(sc_tp_select("SC_TRANSPORT", "ucx", &e), SC_ERR_UNSUPPORTED);
  assert_null(e);
  assert_unsupported_message(ucx);
#endif
#ifdef SC_HAVE_VERBS
  assert_ptr_equal(verbs->ops, &sc_verbs_transport);
#else
  assert_null(verbs->ops);
  assert_int_equal(sc_tp_select("SC_TRANSPORT", "verbs", &e), SC_ERR_UNSUPPORTED);
  assert_null(e);
  assert_unsupported_message(verbs);
#endif
  (void)e;
}

/* Every optional row, as a build without it has it. */
static void test_not_built_in(void **state) {
  (void)state;
  size_t n = 0;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  int optional = 0;
  for (size_t i = 0; i < n; i++) {
    if (!rows[i].package) {
      assert_non_null(rows[i].ops); /* always built: nothing could say how to get it */
      assert_int_equal(sc_tp_require("SC_TRANSPORT", &rows[i]), SC_SUCCESS);
      continue;
    }
    optional++;
    assert_non_null(rows[i].configure_opt);
    sc_tp_entry_t absent = rows[i];
    absent.ops = NULL;
    assert_int_equal(sc_tp_require("SC_TRANSPORT", &absent), SC_ERR_UNSUPPORTED);
    assert_unsupported_message(&absent);
  }
  assert_int_equal(optional, 2); /* ucx, verbs */
}

static void test_auto_roles(void **state) {
  (void)state;
  size_t n = 0;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  int mux = 0, sw = 0;
  for (size_t i = 0; i < n; i++) {
    switch (rows[i].auto_role) {
    case SC_TP_AUTO_MUX:
      mux++;
      assert_int_equal(rows[i].id, SC_TP_AUTO);
      break;
    case SC_TP_AUTO_SWITCH:
      sw++;
      assert_ptr_equal(sc_tp_auto_switch(), &rows[i]);
      /* one bit, so that a rank's caps word can carry several */
      assert_true(rows[i].auto_cap && !(rows[i].auto_cap & (rows[i].auto_cap - 1)));
      assert_non_null(rows[i].auto_when);
      assert_int_equal(!!rows[i].auto_open, !!rows[i].ops);
      break;
    default:
      assert_null(rows[i].auto_open);
      assert_int_equal(rows[i].auto_cap, 0);
    }
  }
  assert_int_equal(mux, 1);
  assert_true(sw <= 1); /* the record has one address slot (SC_TP_AUTO_ALT_OFF) for it */
  assert_int_equal(sc_tp_by_id(SC_TP_UCX)->auto_role, SC_TP_AUTO_SWITCH);
  assert_int_equal(sc_tp_by_id(SC_TP_VERBS)->auto_role, SC_TP_AUTO_NEVER);
  /* The mux's children (transport/mux.c): tcp and shm. */
  char muxed[32];
  sc_tp_muxed_names(muxed, sizeof(muxed));
  assert_string_equal(muxed, "tcp/shm");
  sc_tp_muxed_names(muxed, 4);
  assert_string_equal(muxed, "tcp");
}

/* The library's own SC_TRANSPORT parser (lib/core/comm.c, reached through
 * sc_get_unique_id, which reads the configuration first) answers from the
 * table. */
static void test_parser_reads_table(void **state) {
  (void)state;
  sc_unique_id_t id;
  setenv("SC_TRANSPORT", "nosuch", 1);
  assert_int_equal(sc_get_unique_id(&id), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "'nosuch'"));
  assert_names_all(sc_last_error());
  size_t n = 0;
  const sc_tp_entry_t *rows = sc_tp_registry(&n);
  for (size_t i = 0; i < n; i++) {
    if (rows[i].ops) continue;
    setenv("SC_TRANSPORT", rows[i].name, 1);
    assert_int_equal(sc_get_unique_id(&id), SC_ERR_UNSUPPORTED);
    assert_unsupported_message(&rows[i]);
  }
  unsetenv("SC_TRANSPORT");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ids_once_in_order),   cmocka_unit_test(test_names),
      cmocka_unit_test(test_lookup_round_trip),   cmocka_unit_test(test_unknown_name),
      cmocka_unit_test(test_built_as_configured), cmocka_unit_test(test_not_built_in),
      cmocka_unit_test(test_auto_roles),          cmocka_unit_test(test_parser_reads_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
