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

/* A descriptor's `metadata` (envoyproxy/ratelimit's key): any YAML
 * value, kept as protobuf's google.protobuf.Struct holds it, for the
 * answers to return (rules_meta.c reads it; docs/rules.md).  A plain
 * scalar is null, a boolean or a number when YAML 1.1 reads it so, else
 * a string. */
typedef enum sl__meta_kind {
    SL__META_NULL,
    SL__META_NUMBER,
    SL__META_STRING,
    SL__META_BOOL,
    SL__META_STRUCT,
    SL__META_LIST
} sl__meta_kind;

typedef struct sl__meta {
    sl__meta_kind kind;
    char *name; /* its field's name in a struct; NULL in a list */
    size_t name_len;
    char *text; /* a string's bytes, NUL-terminated; NULL otherwise */
    size_t len;
    double number;
    int boolean;
    struct sl__meta *kids; /* a struct's fields or a list's values */
    size_t n;
} sl__meta;

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
    /* The controller's thresholds (docs/adaptive.md, "Settings"), as
     * fractions; 0: the default.  adaptive_relax_after: 0 or whole
     * seconds. */
    double adaptive_raise_step, adaptive_raise_max, adaptive_capacity_share,
        adaptive_error_rate;
    sl_nanos adaptive_relax_after;
    /* rate_limit.max_hits: the most hits one report of sent requests
     * (serve's POST /v1/increment) may carry; 0 when not given, and then
     * the limit's capacity (its burst, or requests_per_unit) is. */
    int64_t max_hits;
    /* The descriptor's quota_mode: over its limit, it alone does not
     * make the request OVER_LIMIT (decide.c, "Quota mode"). */
    int quota_mode;
    /* value_to_metric on a level of the rule's path, or share_threshold:
     * the metrics series is ratelimit's key for the request
     * (sl__rules_metric_text), not the rule's one series. */
    int value_to_metric;
    int shared;
    /* The descriptor's metadata, a SL__META_STRUCT; NULL when none.
     * Owned by the rules. */
    const sl__meta *metadata;
    /* rate_limit.sync: {mode: lease} (rules_sync.c): on Redis, a node
     * may decide this limit's keys from leases (src/decision/lease.c).
     * The most of the limit one lease takes, in parts per million, and
     * the longest a lease lives; lease_share_ppm 0: every decision on
     * the store (the default). */
    uint32_t lease_share_ppm;
    sl_nanos lease_max;
} sl__rule_daemon;

/*
 * The daemon fields of r, a rule of rules or a copy of one (the same
 * index).  A rule of no set, such as a request's limit override (index
 * SIZE_MAX), has all fields zero.  Owned by rules, valid until
 * sl_rules_free().
 */
const sl__rule_daemon *sl__rule_daemon_of(const sl_rules *rules,
                                          const sl_rule *r);

/*
 * Whether the Redis store decides r, a rule of rules, exactly: its limit,
 * and its limit raised to adaptive.max, fit a tick of its own numbers
 * (src/redis/call.c, "Ticks").  `sluice serve --store redis://` refuses a
 * set with a rule that does not, `sluice validate` warns of it.  0, or
 * -1 with why.
 */
int sl__rule_redis_fits(const sl_rules *rules, const sl_rule *r, char *why,
                        size_t whylen);

/* What the load found questionable but accepted, as ratelimit accepts
 * it (a key it ignores at that place, a missing requests_per_unit):
 * "file:line:column: message", in file order; `sluice validate` prints
 * them.  Owned by rules. */
size_t sl__rules_warning_count(const sl_rules *rules);
const char *sl__rules_warning(const sl_rules *rules, size_t i);

/*
 * The descriptor part of envoyproxy/ratelimit's metric key for a request
 * descriptor of domain that a rule of `r`'s daemon fields matched
 * (value_to_metric or share_threshold or detailed): "key_value.key"...,
 * each level written as ratelimit writes it (docs/server.md, "Metrics").
 * Written to buf (cap bytes, not NUL-terminated), its length to *len.
 * Returns 0, or SL_EKEYLEN when it does not fit or nothing matches.
 */
int sl__rules_metric_text(const sl_rules *rules, const char *domain,
                          size_t domain_len, const sl_rules_entry *entries,
                          size_t n_entries, int detailed, char *buf, size_t cap,
                          size_t *len);

#endif /* SL_RULE_DAEMON_H */
