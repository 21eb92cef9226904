/*
 * metrics.h - per-thread counters, and /metrics in Prometheus's text format.
 */
#ifndef SV_METRICS_H
#define SV_METRICS_H

#include "runtime/worker.h"

/* metrics.c */
/* A decision of rule (of rules, or a request's override) on a request
 * descriptor: its series is one per rule, or one per value for a
 * detailed_metric, value_to_metric or share_threshold rule
 * (rule_daemon.h), labelled as envoyproxy/ratelimit keys its stats. */
void sv_metrics_rule(sv_worker *w, const sl_rules *rules, const sl_rule *rule,
                     const sl_rules_entry *entries, size_t n_entries,
                     int allowed, int shadow_pass, uint64_t near_hits);
/* n descriptors of a request for domain (its index in rules, or
 * SL_RULES_NO_DOMAIN) matched no rule.  Known domains are counted apart;
 * every unknown one, which the client chooses, under one series. */
void sv_metrics_unmatched(sv_worker *w, const sl_rules *rules, size_t domain,
                          uint64_t n);
/* The thread adopted another rules set: forget what was cached of the
 * old one's rules. */
void sv_metrics_rules_changed(sv_worker *w);
/* lyft's near_limit: of `hits` allowed by d, those past 80% of the limit. */
uint64_t sv_metrics_near_hits(const sl_decision *d, int64_t hits);
void sv_metrics_latency(sv_worker *w, sl_nanos ns);
void sv_metrics_render(sv_server *s, sv_buf *out);
void sv_metrics_release(sv_worker *w);

/* A counter of sv_worker.stats summed over srv's threads. */
#define SV_STATS_SUM(srv, field)                                               \
    ({                                                                         \
        uint64_t sum_ = 0;                                                     \
        for (int i_ = 0; i_ < (srv)->n_workers; i_++)                          \
            sum_ += atomic_load_explicit(&(srv)->workers[i_].stats.field,      \
                                         memory_order_relaxed);                \
        sum_;                                                                  \
    })

/* metrics_store.c: the stores' series (the memory store's size, the
 * RESP door's own store, Redis's connections and failures). */
void sv_metrics_store(sv_server *s, sv_buf *out);
/* "up", "down" (no thread can reach Redis) or "degraded" (some can);
 * always "up" for the memory store. */
const char *sv_metrics_store_status(sv_server *s);

#endif
