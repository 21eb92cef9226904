/*
 * metrics.h - per-thread counters, and /metrics in Prometheus's text format.
 */
#ifndef SL_SRV_METRICS_H
#define SL_SRV_METRICS_H

#include "server/worker.h"

/* metrics.c */
void sl_metrics_rule(sl_srv_worker *w, const sl_rule *rule,
                     const sl_rules_entry *entries, size_t n_entries,
                     int allowed, int shadow_pass, uint64_t near_hits);
/* The thread adopted another rules set: forget what was cached of the
 * old one's rules. */
void sl_metrics_rules_changed(sl_srv_worker *w);
/* lyft's near_limit: of `hits` allowed by d, those past 80% of the limit. */
uint64_t sl_metrics_near_hits(const sl_decision *d, int64_t hits);
void sl_metrics_latency(sl_srv_worker *w, sl_nanos ns);
void sl_metrics_render(sl_server *s, sl_buf *out);
/* "up", "down" (no thread can reach Redis) or "degraded" (some can);
 * always "up" for the memory store. */
const char *sl_metrics_store_status(sl_server *s);
void sl_metrics_release(sl_srv_worker *w);

#endif
