/*
 * negative_cache.h - a thread's memory of what Redis refused and until
 * when (negative_cache.c; the proof that it never changes a decision is
 * docs/stores.md, "The negative cache").
 */
#ifndef SD_NEGATIVE_CACHE_H
#define SD_NEGATIVE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "decision/decision.h"

typedef struct sd_negcache sd_negcache;

/* The key bytes an entry holds: a longer key is never cached.  The least
 * budget, SD_NEGCACHE_MIN_BYTES (decision.h), is one bucket of entries. */
#define SD_NEGCACHE_KEY_MAX 166

/* A cache of at most bytes (its table, allocated now and never grown),
 * counting into stats (borrowed, outlives the cache): NULL when bytes is
 * below SD_NEGCACHE_MIN_BYTES (no cache) or out of memory. */
sd_negcache *sd_negcache_new(size_t bytes, sd_stats *stats);
void sd_negcache_free(sd_negcache *nc); /* NULL: no-op */

/* Whether a refusal that Redis answered covers item at cost, at now: 1
 * with *d the answer (its times counted down from the refusal's to now),
 * or 0: Redis must decide.  A cost of 0 is never covered. */
int sd_negcache_find(sd_negcache *nc, const sl_check_item *item, int64_t cost,
                     sl_nanos now, sl_decision *d);

/* Redis refused item at cost with d, for a call asked at asked_at (on the
 * clock of later finds; no later than Redis decided it): remembered when
 * the refusal lasts (sl__redis_refusal_lasts) and its key fits. */
void sd_negcache_put(sd_negcache *nc, const sl_check_item *item, int64_t cost,
                     sl_nanos asked_at, const sl_decision *d);

/* The whole check answered from refusals, when every item of it is
 * covered and it does not record: 1 with check's results set (rc 0,
 * cached 1), or 0. */
int sd_negcache_answer(sd_negcache *nc, sd_check *check, sl_nanos now);
/* What Redis answered check (each: its items' decisions), asked at
 * asked_at: its refused items remembered, unless it recorded. */
void sd_negcache_learn(sd_negcache *nc, const sd_check *check,
                       const sl_decision *each, sl_nanos asked_at);

/* Forgets everything: the numbers of some limit changed. */
void sd_negcache_clear(sd_negcache *nc);

/* Debug check of the invariants (the comment above struct sd_refusal):
 * 0, or -1. */
int sd_negcache_check(const sd_negcache *nc);

#endif
