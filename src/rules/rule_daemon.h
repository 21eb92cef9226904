/*
 * rule_daemon.h - what a rule says to the daemon only: its metrics per
 * value, its policy when the shared store cannot decide, the bounds and
 * controller of an adaptive limit, and the most hits one report may carry.
 *
 * The loader reads and checks these with the rest of a rule
 * (rules_build.c), so the YAML format is one, but they are no part of
 * libsluice's API: a program that embeds the library matches descriptors
 * and checks limits, and needs none of them.  Kept out of sl_rule, the
 * daemon's features grow here without changing the library's ABI.  They
 * are reached by the rule's index, as sl_rule's `index` lets any caller
 * keep data of its own per rule, so a copy of a rule (a runtime limit's,
 * rules_set.h) reaches the same fields as the rule it copies.
 */
#ifndef SL_RULE_DAEMON_H
#define SL_RULE_DAEMON_H

#include "sluice_rules.h"

/* rate_limit.store_failure: how a server decides this limit when its
 * shared store (Redis) cannot.  DEFAULT leaves it to the server's global
 * setting (sluice serve --redis-failure). */
typedef enum sl__rule_failure {
    SL__RULE_FAILURE_DEFAULT = 0,
    SL__RULE_FAILURE_LOCAL, /* the embedded store, the limit divided */
    SL__RULE_FAILURE_OPEN,  /* allow */
    SL__RULE_FAILURE_CLOSED /* refuse the request with an error */
} sl__rule_failure;

/* The failure policies of store_failure, in sl__rule_failure's order from
 * SL__RULE_FAILURE_LOCAL (rules_build.c); --redis-failure takes the same
 * words (src/settings/table.c).  NULL-terminated. */
extern const char *const sl__failure_names[];

/* rate_limit.adaptive.controller. */
enum { SL__CONTROLLER_OFF = 0, SL__CONTROLLER_GRADIENT = 1 };

/* A rule's daemon fields; all zero when the rule gives none. */
typedef struct sl__rule_daemon {
    /* The descriptor's detailed_metric: a metrics series per value. */
    int detailed_metric;
    sl__rule_failure store_failure;
    /* rate_limit.adaptive: the bounds the runtime limits (the advisor)
     * may move requests_per_unit within; both 0 when not given, and then
     * the advisor leaves the rule alone. */
    int64_t adaptive_min, adaptive_max;
    /* adaptive.controller: SL__CONTROLLER_GRADIENT lets `sluice proxy`
     * move the limit by what it sees of its upstream (docs/adaptive.md);
     * with it, adaptive.slo_p99 (0: none), and the seasonal forecast's
     * season (0: none) and horizon (default 5 s). */
    int adaptive_controller;
    sl_nanos adaptive_slo_p99, adaptive_season, adaptive_horizon;
    /* rate_limit.max_hits: the most hits one report of sent requests
     * (serve's POST /v1/increment) may carry; 0 when not given, and then
     * the limit's capacity (its burst, or requests_per_unit) is. */
    int64_t max_hits;
} sl__rule_daemon;

/*
 * The daemon fields of r, a rule of rules or a copy of one (the same
 * index).  A rule of no set, such as a request's limit override (index
 * SIZE_MAX), has all fields zero.  Owned by rules, valid until
 * sl_rules_free().
 */
const sl__rule_daemon *sl__rule_daemon_of(const sl_rules *rules,
                                          const sl_rule *r);

#endif /* SL_RULE_DAEMON_H */
