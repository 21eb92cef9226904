/*
 * memory_store.h - the memory store's object (memory.c, memory_decide.c):
 * its shards, each a lock and two tables (memory_table.h), and its clock
 * of coarse ticks from an epoch set at the first decision.
 *
 * Internal to the store's two units: memory.c holds the store (its
 * room, reclaiming and eviction, the general path of a decision, the
 * multi-item call, sweeps, stats, the vtable), memory_decide.c the hot
 * path (one item with its fast paths, a batch).  What a decision reads is
 * static inline here so that the hot path stays one function.
 */
#ifndef SL_STORE_MEMORY_STORE_H
#define SL_STORE_MEMORY_STORE_H

#include <stdatomic.h>

#include "internal.h"
#include "store/key_hash.h"
#include "store/memory_table.h"
#include "store/spinlock.h"

enum {
    SL__SHARD_BITS = 8,
    SL__NSHARDS = 1 << SL__SHARD_BITS,
    SL__TABLE_MIN_CAP = 16, /* a table's slots when the store is made */
};

/* A decision touches only the first cache line: the lock and the tables
 * (and lock_waits when it had to wait). */
typedef struct sl__shard {
    sl__spinlock lock;
    sl__table t[2];       /* SL__TABLE_NARROW, SL__TABLE_WIDE */
    uint32_t since_sweep; /* inserts since the last full sweep */
    size_t heap_bytes;    /* held by logs */
    uint64_t lock_waits;
    uint64_t reclaimed, evicted;
} __attribute__((aligned(64))) sl__shard;

static inline void sl__shard_lock(sl__shard *sh)
{
    if (sl__spin_lock(&sh->lock))
        sh->lock_waits++;
}

static inline void sl__shard_unlock(sl__shard *sh)
{
    sl__spin_unlock(&sh->lock);
}

/* What every decision reads (base, hasher, epoch) shares the first cache
 * line; the store is allocated 64-aligned. */
typedef struct sl__memory_store {
    sl_store base;
    sl__key_hasher hasher; /* from the seed: key_hash.h */
    _Atomic int64_t epoch; /* ns of tick 0; INT64_MIN until first use */
    size_t max_bytes, shard_max_bytes;
    atomic_size_t cursor; /* sl_store_sweep's position, in slots */
    sl__shard shards[SL__NSHARDS];
} sl__memory_store;

/* What a shard holds, counted against its share of the cap. */
static inline size_t sl__shard_bytes(const sl__shard *sh)
{
    return sl__table_bytes(SL__TABLE_NARROW, sh->t[SL__TABLE_NARROW].cap) +
           sl__table_bytes(SL__TABLE_WIDE, sh->t[SL__TABLE_WIDE].cap) +
           sh->heap_bytes;
}

/* The key of one item of a call, hashed, with its shard. */
typedef struct sl__item_ref {
    uint64_t hash;
    sl__shard *sh;
} sl__item_ref;

/* ---- time (the stamps' ticks: memory_table.h) ---- */

/* Sets the epoch at the first decision. */
static inline void sl__memory_start(sl__memory_store *ms, sl_nanos now)
{
    if (atomic_load_explicit(&ms->epoch, memory_order_relaxed) == INT64_MIN) {
        int64_t unset = INT64_MIN;
        atomic_compare_exchange_strong(
            &ms->epoch, &unset, now - ((int64_t)1 << (31 + SL__TICK_SHIFT)));
    }
}

static inline int64_t sl__memory_epoch(const sl__memory_store *ms)
{
    return atomic_load_explicit(&ms->epoch, memory_order_relaxed);
}

static inline int64_t sl__memory_ticks(const sl__memory_store *ms, sl_nanos t)
{
    return sl__ticks_at(sl__memory_epoch(ms), t);
}

/* The origin of packed schedules (narrow.h): 2^40 ns (18 minutes) before
 * the first decision, so that a clock read a little out of order still
 * packs, and S has 2^(64 - frac_bits) - 2^40 ns after it to run. */
static inline int64_t sl__origin_at(int64_t epoch)
{
    return epoch + ((int64_t)1 << (31 + SL__TICK_SHIFT)) - ((int64_t)1 << 40);
}

static inline int64_t sl__memory_origin(const sl__memory_store *ms)
{
    return sl__origin_at(sl__memory_epoch(ms));
}

static inline uint32_t sl__memory_expiry(const sl__memory_store *ms, sl_nanos t)
{
    return sl__expiry_at(sl__memory_epoch(ms), t);
}

/* A state is initial once its expiry has passed; INT64_MAX is "at the end
 * of time", which a saturated clock reaches but never passes. */
static inline int sl__is_initial(sl_nanos expires, sl_nanos now)
{
    return expires <= now && expires != INT64_MAX;
}

/* The key of an item hashed, and its shard. */
__attribute__((always_inline)) static inline sl__item_ref
sl__memory_ref_of_key(sl__memory_store *ms, const sl_limit *lim,
                      const void *key, size_t key_len)
{
    sl__item_ref r;
    r.hash = sl__key_hash(&ms->hasher, lim->ident, key, key_len);
    r.hash += r.hash == 0; /* 0 marks an empty slot */
    r.sh = &ms->shards[r.hash >> (64 - SL__SHARD_BITS)];
    return r;
}

__attribute__((always_inline)) static inline sl__item_ref
sl__memory_ref_of(sl__memory_store *ms, const sl_check_item *item)
{
    return sl__memory_ref_of_key(ms, item->limit, item->key, item->key_len);
}

/* ---- memory.c, for memory_decide.c, which calls it and not the other
 * way round ---- */

/* The general path of one item, under its shard's lock: read, decide,
 * write back, making room for a new key, a log, or a state that changes
 * table.  *out written only on success. */
int sl__memory_check_general(sl__memory_store *ms, const sl_check_item *item,
                             sl__item_ref *ref, int64_t cost, sl_nanos now,
                             sl__mode mode, sl_decision *out);
/* Several items atomically: every shard involved locked, each decided
 * twice (reserve, then act). */
int sl__memory_check_all(sl_store *base, const sl_check_item *items,
                         const int64_t *costs, size_t n, sl_nanos now,
                         int record, sl_decision *each);
/* The rest of sl__store_type, and a store of that type made (NULL when
 * opts are refused or memory is short). */
size_t sl__memory_sweep(sl_store *base, sl_nanos now, size_t max_slots);
void sl__memory_stats(sl_store *base, sl_store_stats *out);
void sl__memory_destroy(sl_store *base);
sl_store *sl__memory_store_make(const sl_memory_options *opts,
                                const sl__store_type *type);

#endif
