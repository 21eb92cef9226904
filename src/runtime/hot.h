/*
 * hot.h - what the status page shows of the last minute: the hottest
 * counter keys and rules; and of the last 10 minutes: rule decisions
 * (within / over the limit) per 5 s, in all and per rule
 * (hot_history.h).
 *
 * Each thread counts its own decisions in a sv_hot: two space-saving
 * top-K tables (Metwally et al.: K entries; a key not in a full table
 * takes the place of the least counted one and inherits its count, so
 * every key counted more than N/K times is in the table, and a count is
 * over by at most the count it inherited, reported as `error`), one of
 * keys and one of rules, each in two generations of 30 s (so what is
 * reported covers the last 30 to 60 s), and a ring of 5 s buckets.  A
 * decision costs a hash of its key, an uncontended lock and a probe of an
 * index of the K entries' hashes; the memory is fixed (about 100 KiB a
 * thread, half of it the history).
 * The status endpoint locks each thread's tables in turn and merges them.
 */
#ifndef SV_HOT_H
#define SV_HOT_H

#include <jansson.h>

#include "runtime/worker.h"

typedef struct sv_hot sv_hot;

/* NULL when out of memory (the thread then counts nothing). */
sv_hot *sv_hot_new(void);
void sv_hot_free(sv_hot *h);

/* The hash of a rule's id (n bytes) that sv_hot_count() takes, made
 * once per rules set (rules_set.c), not once per decision. */
uint64_t sv_hot_hash(const char *id, size_t n);

/* One rule decision of thread w at its now: the rule's id (rule_len
 * bytes, its sv_hot_hash) and the counter key, over or within the
 * limit. */
void sv_hot_count(sv_worker *w, const char *rule, size_t rule_len,
                  uint64_t rule_hash, const char *key, size_t key_len,
                  int over);

/* {"window_s", "hot_keys": [{"key", "domain", "rule", "decisions",
 * "over_limit", "error"}...], "hot_rules": [{"rule", "decisions",
 * "over_limit", "error"}...], "history": (sv_hist_sum_json)} of every
 * thread of s, at now; n_top of each at most. */
json_t *sv_hot_report(sv_server *s, sl_nanos now, size_t n_top);

#endif
