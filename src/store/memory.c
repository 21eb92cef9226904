/*
 * memory.c - the embedded store: every key's state in this process.
 *
 * Layout.  256 shards, each behind its own spinlock and holding two
 * open-addressing Robin Hood tables: a narrow one of 24-byte slots for
 * keys whose state fits one word (core/narrow.h: the buckets, gcra and
 * the two window counters, nearly always) and a wide one of 32-byte slots
 * for the rest (the logs, an override's tagged states, a state out of the
 * word's range, and the keys of multi-item calls).  A key is in at most
 * one of them.  It is identified in both by a 64-bit keyed hash
 * (key_hash.h) of (limit identity, key bytes) under a per-store random
 * seed; the key bytes themselves are not kept, which is what makes a key
 * cost one slot (plus the table's free fraction) whatever its length.
 * Two distinct keys share state only if their 64-bit hashes collide:
 * probability about n^2 / 2^65 for n live keys (3e-6 at ten million), and
 * the seed keeps an attacker from aiming at it.  The top 8 hash bits pick
 * the shard, the low 32 the home slot (by multiply-shift, so a table may
 * have any size and can grow by a quarter instead of doubling).  Tables
 * are 64-byte aligned: a wide slot sits in one cache line, a narrow one
 * in one or (a quarter of them) two.
 *
 * Where a key lives.  A limit whose states pack (lim->narrow) looks in the
 * narrow table first and the wide one only if that holds any key; other
 * limits the other way round.  A decided state is written back where the
 * key is, except that a narrow key whose new state does not pack moves to
 * the wide table (room is made there first; if none can be made the
 * decision fails with SL_EFULL and the key keeps its old state), and so
 * does every key of a multi-item call, whose first phase reserves wide
 * slots so that its second cannot fail.  New keys go where their limit
 * prefers if their state packs.  A wide key stays wide until its state is
 * initial again.
 *
 * Policy (docs/stores.md).  State that is back to its initial value is
 * never kept: a decision that leaves it initial deletes the slot, and when
 * a table needs room its shard first sweeps out keys whose state has
 * expired by now.  Otherwise the table grows by 25% while the shard's
 * tables and logs stay under its share of the memory cap; at the cap it
 * evicts, Redis-style, the least recently used of the (at most) 16 slots
 * of that table starting at the new key's home slot, preferring any
 * expired one.  An evicted key restarts from its initial state.
 *
 * Invariants (sl__memory_check), for each table: a slot is empty iff its
 * hash is 0; a key sits in its own shard, at or after its home slot with
 * no empty slot in between (Robin Hood order: a key's distance from home
 * is at most one more than its predecessor's); count is the number of
 * full slots and count <= cap * 7/8, which keeps probe runs short.  No
 * hash is in both tables of a shard, and narrow slots own no heap.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/narrow.h"
#include "core/schedule.h"
#include "internal.h"
#include "store/key_hash.h"
#include "store/spinlock.h"

enum {
    SHARD_BITS = 8,
    NSHARDS = 1 << SHARD_BITS,
    MIN_CAP = 16,
    EVICT_SAMPLE = 16,
    /* Ticks of 2^28 ns (268 ms) keep expiry and recency in 32 bits:
     * expired state is reclaimed at most 268 ms late. */
    TICK_SHIFT = 28,
    NARROW = 0, /* the tables of a shard */
    WIDE = 1,
};

#define HEAP_FLAG 0x80000000u /* in a wide slot's used: it owns heap memory */

/* Every slot ends with these; the hash comes first. */
typedef struct stamps {
    uint32_t expires; /* tick at which the state is initial, rounded up */
    uint32_t used;    /* tick of the last decision | HEAP_FLAG */
} stamps;

typedef struct slot {
    uint64_t hash; /* 0: empty */
    sl__state state;
    stamps st;
} slot;

typedef struct nslot {
    uint64_t hash; /* 0: empty */
    uint64_t word; /* the state, packed (narrow.h) */
    stamps st;
} nslot;

/* Slot sizes by table, NARROW and WIDE. */
static const uint32_t stride_of[2] = {sizeof(nslot), sizeof(slot)};

typedef struct table {
    unsigned char *slots; /* cap slots of stride_of[] bytes */
    uint32_t cap;         /* slots */
    uint32_t count;       /* full slots */
} table;

/* A decision touches only the first cache line: the lock and the tables
 * (and lock_waits when it had to wait). */
typedef struct shard {
    sl__spinlock lock;
    table t[2];           /* NARROW, WIDE */
    uint32_t since_sweep; /* inserts since the last full sweep */
    size_t heap_bytes;    /* held by logs */
    uint64_t lock_waits;
    uint64_t reclaimed, evicted;
} __attribute__((aligned(64))) shard;

static inline void shard_lock(shard *sh)
{
    if (sl__spin_lock(&sh->lock))
        sh->lock_waits++;
}

static inline void shard_unlock(shard *sh)
{
    sl__spin_unlock(&sh->lock);
}

/* What every decision reads (base, hasher, epoch) shares the first cache
 * line; the store is allocated 64-aligned. */
typedef struct memory_store {
    sl_store base;
    sl__key_hasher hasher; /* from the seed: key_hash.h */
    _Atomic int64_t epoch; /* ns of tick 0; INT64_MIN until first use */
    size_t max_bytes, shard_max_bytes;
    atomic_size_t cursor; /* sl_store_sweep's position, in slots */
    shard shards[NSHARDS];
} memory_store;

/* The key of one item of a call, hashed, with its shard. */
typedef struct item_ref {
    uint64_t hash;
    shard *sh;
} item_ref;

/* ---- time ---- */

/*
 * Slots keep coarse 32-bit ticks of 2^28 ns (268 ms) from an epoch set
 * 2^31 ticks (18 years) before the store's first decision, so that times
 * from 18 years before to 18 years after it are representable.  Later,
 * expiry ticks saturate (such state is then only evicted, never reclaimed
 * as expired) and recency ticks wrap, which is harmless because ages, not
 * stamps, are compared.
 */
static void store_start(memory_store *ms, sl_nanos now)
{
    if (atomic_load_explicit(&ms->epoch, memory_order_relaxed) == INT64_MIN) {
        int64_t unset = INT64_MIN;
        atomic_compare_exchange_strong(&ms->epoch, &unset,
                                       now - ((int64_t)1 << (31 + TICK_SHIFT)));
    }
}

static int64_t epoch_of(const memory_store *ms)
{
    return atomic_load_explicit(&ms->epoch, memory_order_relaxed);
}

/* Ticks since the epoch, negative before it (floor). */
static int64_t ticks_at(int64_t epoch, sl_nanos t)
{
    /* now <= 2^62 and epoch >= -2^59: the difference fits. */
    return (t - epoch) >> TICK_SHIFT;
}

static int64_t ticks(const memory_store *ms, sl_nanos t)
{
    return ticks_at(epoch_of(ms), t);
}

/* The origin of packed schedules (narrow.h): 2^40 ns (18 minutes) before
 * the first decision, so that a clock read a little out of order still
 * packs, and S has 2^(64 - frac_bits) - 2^40 ns after it to run. */
static int64_t origin_at(int64_t epoch)
{
    return epoch + ((int64_t)1 << (31 + TICK_SHIFT)) - ((int64_t)1 << 40);
}

static int64_t origin_of(const memory_store *ms)
{
    return origin_at(epoch_of(ms));
}

/* An expiry tick, rounded up, clamped to [0, UINT32_MAX]. */
static uint32_t expiry_at(int64_t epoch, sl_nanos t)
{
    int64_t d;
    if (__builtin_sub_overflow(t, epoch, &d) ||
        d > ((int64_t)UINT32_MAX << TICK_SHIFT))
        return UINT32_MAX; /* (also: a saturated expiry, INT64_MAX) */
    if (d <= 0)
        return 0;
    return (uint32_t)((d + ((int64_t)1 << TICK_SHIFT) - 1) >> TICK_SHIFT);
}

static uint32_t expiry_tick(const memory_store *ms, sl_nanos t)
{
    return expiry_at(epoch_of(ms), t);
}

/* Has a slot's state expired at tick `now`? */
static int expired_at(const stamps *s, int64_t now)
{
    return s->expires != UINT32_MAX && (int64_t)s->expires <= now;
}

/* Recency wraps every 2^31 ticks (18 years): ages, not stamps, compare. */
static uint32_t age_of(const stamps *s, int64_t now)
{
    return ((uint32_t)now - (s->used & ~HEAP_FLAG)) & ~HEAP_FLAG;
}

/* A state is initial once its expiry has passed; INT64_MAX is "at the end
 * of time", which a saturated clock reaches but never passes. */
static int is_initial(sl_nanos expires, sl_nanos now)
{
    return expires <= now && expires != INT64_MAX;
}

/* ---- the tables ---- */

__attribute__((always_inline)) static inline unsigned char *
slot_at(const table *t, int w, uint32_t i)
{
    return t->slots + (size_t)i * stride_of[w];
}

static inline uint64_t hash_at(const table *t, int w, uint32_t i)
{
    return *(const uint64_t *)slot_at(t, w, i);
}

static inline stamps *stamps_of(unsigned char *p, int w)
{
    return (stamps *)(p + stride_of[w] - sizeof(stamps));
}

static uint32_t home_of(const table *t, uint64_t hash)
{
    return (uint32_t)(((hash & UINT32_MAX) * t->cap) >> 32);
}

static uint32_t next_of(const table *t, uint32_t i)
{
    return i + 1 == t->cap ? 0 : i + 1;
}

static uint32_t dist_of(const table *t, uint32_t i, uint64_t hash)
{
    uint32_t home = home_of(t, hash);
    return i >= home ? i - home : i + t->cap - home;
}

/* hash's slot in table w, or NULL. */
__attribute__((always_inline)) static inline unsigned char *
find(const table *t, int w, uint64_t hash)
{
    uint32_t i = home_of(t, hash);
    for (uint32_t d = 0;; d++) {
        unsigned char *p = slot_at(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == hash)
            return p;
        /* Robin Hood: a richer slot than us means we are not here. */
        if (h == 0 || dist_of(t, i, h) < d)
            return NULL;
        i = next_of(t, i);
    }
}

/* Places the slot at e (stride_of[w] bytes), whose key is not in the
 * table; the table has a free slot.  (Inlined per table below, so that
 * each copy is of a constant size, not a call to memcpy.) */
__attribute__((always_inline)) static inline void place_in(table *t, int w,
                                                           const void *e)
{
    const size_t size = stride_of[w];
    slot carry, tmp; /* room for either size */
    uint32_t i = home_of(t, *(const uint64_t *)e);

    memcpy(&carry, e, size);
    for (uint32_t d = 0;; d++) {
        unsigned char *p = slot_at(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == 0) {
            memcpy(p, &carry, size);
            t->count++;
            return;
        }
        uint32_t sd = dist_of(t, i, h);
        if (sd < d) {
            memcpy(&tmp, p, size);
            memcpy(p, &carry, size);
            memcpy(&carry, &tmp, size);
            d = sd;
        }
        i = next_of(t, i);
    }
}

/* Removes slot i by shifting its run back: no tombstones to clean up. */
__attribute__((always_inline)) static inline void remove_in(table *t, int w,
                                                            uint32_t i)
{
    for (;;) {
        uint32_t j = next_of(t, i);
        uint64_t h = hash_at(t, w, j);
        if (h == 0 || dist_of(t, j, h) == 0)
            break;
        memcpy(slot_at(t, w, i), slot_at(t, w, j), stride_of[w]);
        i = j;
    }
    memset(slot_at(t, w, i), 0, stride_of[w]);
    t->count--;
}

static void place(table *t, int w, const void *e)
{
    if (w == NARROW)
        place_in(t, NARROW, e);
    else
        place_in(t, WIDE, e);
}

static void remove_at(table *t, int w, uint32_t i)
{
    if (w == NARROW)
        remove_in(t, NARROW, i);
    else
        remove_in(t, WIDE, i);
}

static uint32_t index_of(const table *t, int w, const unsigned char *p)
{
    return (uint32_t)((size_t)(p - t->slots) / stride_of[w]);
}

static size_t heap_of(const slot *s)
{
    return (s->st.used & HEAP_FLAG) ? sl__heap_bytes(&s->state) : 0;
}

/* Frees what a slot's state holds and removes it. */
static void drop_at(shard *sh, int w, uint32_t i)
{
    table *t = &sh->t[w];
    slot *s = (slot *)slot_at(t, w, i);
    if (w == WIDE && (s->st.used & HEAP_FLAG)) {
        sh->heap_bytes -= sl__heap_bytes(&s->state);
        sl__heap_release(&s->state);
    }
    remove_at(t, w, i);
}

static int protected(uint64_t hash, const item_ref *keep, size_t nkeep)
{
    for (size_t k = 0; k < nkeep; k++)
        if (keep[k].hash == hash)
            return 1;
    return 0;
}

/* Removes every key of the shard whose state is initial by now. */
static void sweep_shard(shard *sh, int64_t now_tick, const item_ref *keep,
                        size_t nkeep)
{
    for (int w = NARROW; w <= WIDE; w++) {
        table *t = &sh->t[w];
        for (uint32_t i = 0; i < t->cap;) {
            unsigned char *p = slot_at(t, w, i);
            uint64_t h = *(const uint64_t *)p;
            if (h != 0 && expired_at(stamps_of(p, w), now_tick) &&
                !protected(h, keep, nkeep)) {
                drop_at(sh, w, i); /* the next key moved into i: look again */
                sh->reclaimed++;
            } else {
                i++;
            }
        }
    }
    sh->since_sweep = 0;
}

/* Evicts one key of table w near hash's home: expired first, else least
 * recently used.  0 if nothing there may go. */
static int evict_near(shard *sh, int w, uint64_t hash, int64_t now_tick,
                      const item_ref *keep, size_t nkeep)
{
    table *t = &sh->t[w];
    uint32_t i = home_of(t, hash), victim = UINT32_MAX, oldest = 0;
    int expired = 0;

    for (int k = 0; k < EVICT_SAMPLE && k < (int)t->cap;
         k++, i = next_of(t, i)) {
        unsigned char *p = slot_at(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        const stamps *s = stamps_of(p, w);
        if (h == 0 || protected(h, keep, nkeep))
            continue;
        if (expired_at(s, now_tick)) {
            victim = i;
            expired = 1;
            break;
        }
        if (victim == UINT32_MAX || age_of(s, now_tick) > oldest) {
            oldest = age_of(s, now_tick);
            victim = i;
        }
    }
    if (victim == UINT32_MAX)
        return 0;
    drop_at(sh, w, victim);
    if (expired)
        sh->reclaimed++;
    else
        sh->evicted++;
    return 1;
}

static size_t table_bytes(int w, uint32_t cap)
{
    return (size_t)cap * stride_of[w];
}

/* What a shard holds, counted against its share of the cap. */
static size_t shard_bytes(const shard *sh)
{
    return table_bytes(NARROW, sh->t[NARROW].cap) +
           table_bytes(WIDE, sh->t[WIDE].cap) + sh->heap_bytes;
}

/* A zeroed table of cap slots on a cache-line boundary, so that no wide
 * slot straddles two lines: a decision then touches one line of the table
 * (malloc's 16-byte alignment would split every other 32-byte slot). */
static unsigned char *table_new(int w, uint32_t cap)
{
    size_t bytes = (table_bytes(w, cap) + 63) & ~(size_t)63;
    unsigned char *t = aligned_alloc(64, bytes);
    if (t != NULL)
        memset(t, 0, bytes);
    return t;
}

static int grow(table *t, int w, uint32_t new_cap)
{
    unsigned char *old = t->slots;
    uint32_t old_cap = t->cap;
    unsigned char *n = table_new(w, new_cap);
    if (n == NULL)
        return SL_ENOMEM;
    /* Atomic stores: sl_check_batch reads both without the lock, only to
     * prefetch (a stale pair prefetches a wrong line, harmlessly). */
    __atomic_store_n(&t->slots, n, __ATOMIC_RELAXED);
    __atomic_store_n(&t->cap, new_cap, __ATOMIC_RELAXED);
    t->count = 0;
    for (uint32_t i = 0; i < old_cap; i++) {
        const unsigned char *p = old + (size_t)i * stride_of[w];
        if (*(const uint64_t *)p != 0)
            place(t, w, p);
    }
    free(old);
    return 0;
}

static int over_load(const table *t, uint32_t count)
{
    return (uint64_t)count * 8 > (uint64_t)t->cap * 7;
}

/* Makes room in table w for one more key: reclaim, grow, or evict, in
 * that order.  Slots of both tables may move. */
static int make_room(memory_store *ms, shard *sh, int w, uint64_t hash,
                     int64_t now_tick, const item_ref *keep, size_t nkeep)
{
    table *t = &sh->t[w];
    if (!over_load(t, t->count + 1))
        return 0;
    /* A full sweep costs a pass over the shard; doing it at most once per
     * cap/8 inserts keeps it O(1) amortised under churn at the cap. */
    if (sh->since_sweep >= (sh->t[NARROW].cap + sh->t[WIDE].cap) / 8) {
        sweep_shard(sh, now_tick, keep, nkeep);
        if (!over_load(t, t->count + 1))
            return 0;
    }
    uint32_t new_cap = t->cap + t->cap / 4;
    if (shard_bytes(sh) + table_bytes(w, new_cap) - table_bytes(w, t->cap) <=
            ms->shard_max_bytes &&
        grow(t, w, new_cap) == 0)
        return 0;
    while (over_load(t, t->count + 1))
        if (!evict_near(sh, w, hash, now_tick, keep, nkeep))
            return SL_EFULL;
    return 0;
}

/* ---- decisions ---- */

/* Where a key is: table w's slot p, or p NULL if in neither. */
typedef struct place_ref {
    int w;
    unsigned char *p;
} place_ref;

/* Finds hash where lim's keys live first, then in the other table if it
 * holds any key. */
static place_ref locate(shard *sh, const sl_limit *lim, uint64_t hash)
{
    place_ref r;
    r.w = lim->narrow != SL__NARROW_NONE ? NARROW : WIDE;
    r.p = find(&sh->t[r.w], r.w, hash);
    if (r.p == NULL && sh->t[!r.w].count != 0) {
        r.w = !r.w;
        r.p = find(&sh->t[r.w], r.w, hash);
    }
    return r;
}

/* Copies hash's state (all-zero if absent) and what it holds on the
 * heap; returns where it is, valid until the table next changes. */
static place_ref get_state(memory_store *ms, shard *sh, const sl_limit *lim,
                           uint64_t hash, sl__state *st, size_t *heap_bytes)
{
    place_ref r = locate(sh, lim, hash);
    *heap_bytes = 0;
    if (r.p == NULL) {
        memset(st, 0, sizeof(*st));
    } else if (r.w == NARROW) {
        sl__narrow_unpack(lim, ((nslot *)r.p)->word, origin_of(ms), st);
    } else {
        *st = ((slot *)r.p)->state;
        *heap_bytes = heap_of((slot *)r.p);
    }
    return r;
}

/*
 * Writes a decided state back.  Initial state is deleted, unless
 * keep_initial: the first phase of a multi-item call keeps a wide slot for
 * every item, so that its second phase never needs room and so cannot
 * fail half-way.  at is where get_state() found the key and old_heap what
 * the state held before the decision (which may have reallocated it).
 */
static int put_state(memory_store *ms, shard *sh, place_ref at,
                     const sl_limit *lim, uint64_t hash, sl__state *st,
                     size_t old_heap, sl_nanos expires, sl_nanos now,
                     int keep_initial, const item_ref *refs, size_t nrefs)
{
    int64_t now_tick = ticks(ms, now);
    int heap = lim->algo->heap, w = WIDE, err;
    size_t new_heap = heap ? sl__heap_bytes(st) : 0;
    uint64_t word = 0;

    if (is_initial(expires, now) && !keep_initial) {
        if (heap)
            sl__heap_release(st);
        sh->heap_bytes -= old_heap;
        if (at.p != NULL)
            remove_at(&sh->t[at.w], at.w, index_of(&sh->t[at.w], at.w, at.p));
        return 0;
    }
    if (!keep_initial && new_heap == 0 && (at.p == NULL || at.w == NARROW) &&
        sl__narrow_pack(lim, st, origin_of(ms), &word))
        w = NARROW;
    if (at.p == NULL || at.w != w) {
        /* A new key, or a narrow one whose state no longer packs. */
        err = make_room(ms, sh, w, hash, now_tick, refs, nrefs);
        if (err) {
            if (heap)
                sl__heap_release(st);
            return err;
        }
        if (at.p != NULL) { /* make_room may have moved it */
            table *from = &sh->t[at.w];
            remove_at(from, at.w, index_of(from, at.w, find(from, at.w, hash)));
        }
        slot e = {.hash = hash};
        place(&sh->t[w], w, &e);
        sh->since_sweep++;
        at.w = w;
        at.p = find(&sh->t[w], w, hash);
    }
    stamps *stm = stamps_of(at.p, w);
    if (w == NARROW) {
        ((nslot *)at.p)->word = word;
    } else {
        ((slot *)at.p)->state = *st;
    }
    stm->expires = expiry_tick(ms, expires);
    stm->used =
        ((uint32_t)now_tick & ~HEAP_FLAG) | (new_heap != 0 ? HEAP_FLAG : 0);
    sh->heap_bytes += new_heap - old_heap;
    /* Logs grow after the fact; bring the shard back under its cap. */
    while (shard_bytes(sh) > ms->shard_max_bytes &&
           evict_near(sh, WIDE, hash, now_tick, refs, nrefs))
        ;
    return 0;
}

/* Applies one item in one mode: read, decide, write back. */
static int apply(memory_store *ms, const sl_check_item *item,
                 const item_ref *ref, int64_t cost, sl_nanos now, sl__mode mode,
                 int keep_initial, const item_ref *refs, size_t nrefs,
                 sl_decision *d)
{
    const sl_limit *lim = item->limit;
    sl__state st;
    size_t old_heap;
    sl_nanos expires = 0;
    int err, put;

    /* One log may take at most half of its shard's share of the cap, so
     * that a single huge key cannot push out everything else. */
    sl__call call = {cost, now, mode, ms->shard_max_bytes / 2};
    place_ref at = get_state(ms, ref->sh, lim, ref->hash, &st, &old_heap);
    err = lim->algo->check(lim, &st, &call, d, &expires);
    /* Even a failed check may have moved a log: always write it back. */
    put = put_state(ms, ref->sh, at, lim, ref->hash, &st, old_heap, expires,
                    now, keep_initial, refs, nrefs);
    return err ? err : put;
}

static int cmp_shard(const void *a, const void *b)
{
    const shard *x = *(shard *const *)a, *y = *(shard *const *)b;
    return (x > y) - (x < y);
}

__attribute__((always_inline)) static inline item_ref
ref_of_key(memory_store *ms, const sl_limit *lim, const void *key,
           size_t key_len)
{
    item_ref r;
    r.hash = sl__key_hash(&ms->hasher, lim->ident, key, key_len);
    r.hash += r.hash == 0; /* 0 marks an empty slot */
    r.sh = &ms->shards[r.hash >> (64 - SHARD_BITS)];
    return r;
}

__attribute__((always_inline)) static inline item_ref
ref_of(memory_store *ms, const sl_check_item *item)
{
    return ref_of_key(ms, item->limit, item->key, item->key_len);
}

/* A new key, a log, or a state that changes table: the general path,
 * under the caller's lock. */
__attribute__((noinline)) static int
check_one_apply(memory_store *ms, const sl_check_item *item, item_ref *ref,
                int64_t cost, sl_nanos now, sl__mode mode, sl_decision *out)
{
    sl_decision d;
    int err;

    store_start(ms, now);
    err = apply(ms, item, ref, cost, now, mode, 0, ref, 1, &d);
    if (err == 0)
        *out = d;
    return err;
}

/*
 * The buckets' common decision, a COMMIT of cost <= B by a base
 * token_bucket or gcra (lim->packed_fast) on a key in the narrow table,
 * all of it inlined (schedule.h, sl__sched_fast) with nothing else live,
 * under the caller's lock.  A packed schedule is always the base's own (a
 * tagged one does not pack), which own_span checks anyway.  Returns 0
 * with *out written, or 1 if the general path must decide: the key is not
 * there, or its new state might not pack.
 *
 * Whether it packs is known before deciding, so the decision goes
 * straight into *out: the new S is the old one (which packed) or at most
 * most_ns + 1 ns after now (sl__sched_fast admits at most B * T ahead),
 * and not before now; its fraction stays below t_den <= 2^frac_bits.
 */
__attribute__((always_inline)) static inline int
decide_packed(memory_store *ms, shard *sh, const sl_limit *lim, uint64_t hash,
              int64_t cost, sl_nanos now, sl_decision *out)
{
    table *t = &sh->t[NARROW];
    unsigned char *p = find(t, NARROW, hash);
    unsigned fb = lim->frac_bits;
    int64_t epoch, origin;
    sl__state st;
    sl_nanos expires;

    if (p == NULL)
        return 1;
    nslot *s = (nslot *)p;
    epoch = epoch_of(ms);
    origin = origin_at(epoch);
    sl__narrow_unpack_schedule(fb, s->word, origin, &st);
    if ((uint64_t)st.w[1] >= lim->own_span || now < origin ||
        (uint64_t)(now - origin) >
            (UINT64_MAX >> fb) - (uint64_t)lim->most_ns - 1)
        return 1;
    const sl__call call = {cost, now, SL__COMMIT, 0};
    sl__sched_fast(lim, &st, &call, out, &expires);
    if (is_initial(expires, now)) {
        remove_at(t, NARROW, index_of(t, NARROW, p));
    } else {
        s->word = (uint64_t)(st.w[0] - origin) << fb | (uint64_t)st.w[1];
        s->st.expires = expiry_at(epoch, expires);
        s->st.used = (uint32_t)ticks_at(epoch, now) & ~HEAP_FLAG;
    }
    return 0;
}

/*
 * One decision under the caller's lock of ref's shard; *out written only
 * on success.
 *
 * The common case gets a path of its own: a key already in a table, under
 * an algorithm without a heap state.  Such a check cannot fail (only logs
 * can), so it decides on the slot's state (in place in a wide slot; in a
 * narrow one on the word itself with the algorithm's check_word, else on
 * an unpacked copy), into *out, and then only stamps the slot or, if the
 * state is back to initial, removes it.  A narrow state that would not
 * pack is decided again by the general path, which moves it (a check is
 * a function of the stored state, so the second decision is the first).
 * Everything else (a new key, a log) goes through apply().  A key in a
 * table means the epoch is set (store_start): its insert set it before
 * taking this lock.
 */
__attribute__((always_inline)) static inline int
decide_locked(memory_store *ms, const sl_check_item *item, item_ref *ref,
              int64_t cost, sl_nanos now, sl__mode mode, sl_decision *out)
{
    const sl_limit *lim = item->limit;
    shard *sh = ref->sh;
    sl_nanos expires;
    unsigned char *p;

    if (lim->algo->heap)
        return check_one_apply(ms, item, ref, cost, now, mode, out);
    sl__call call = {cost, now, mode, 0};
    if (lim->narrow != SL__NARROW_NONE &&
        (p = find(&sh->t[NARROW], NARROW, ref->hash)) != NULL) {
        table *t = &sh->t[NARROW];
        int64_t origin = origin_of(ms);
        sl__state st;
        sl_decision d;
        uint64_t word;
        if (lim->algo->check_word != NULL) {
            /* The windows decide on the word itself, straight into *out. */
            nslot *s = (nslot *)p;
            if (lim->algo->check_word(lim, &s->word, &call, out, &expires))
                return check_one_apply(ms, item, ref, cost, now, mode, out);
            if (is_initial(expires, now)) {
                remove_at(t, NARROW, index_of(t, NARROW, p));
            } else {
                s->st.expires = expiry_tick(ms, expires);
                s->st.used = (uint32_t)ticks(ms, now) & ~HEAP_FLAG;
            }
            return 0;
        }
        sl__narrow_unpack(lim, ((nslot *)p)->word, origin, &st);
        (void)lim->algo->check(lim, &st, &call, &d, &expires);
        if (is_initial(expires, now)) {
            remove_at(t, NARROW, index_of(t, NARROW, p));
        } else if (sl__narrow_pack(lim, &st, origin, &word)) {
            nslot *s = (nslot *)p;
            s->word = word;
            s->st.expires = expiry_tick(ms, expires);
            s->st.used = (uint32_t)ticks(ms, now) & ~HEAP_FLAG;
        } else {
            return check_one_apply(ms, item, ref, cost, now, mode, out);
        }
        *out = d;
        return 0;
    }
    if (sh->t[WIDE].count == 0 ||
        (p = find(&sh->t[WIDE], WIDE, ref->hash)) == NULL)
        return check_one_apply(ms, item, ref, cost, now, mode, out);
    slot *s = (slot *)p;
    (void)lim->algo->check(lim, &s->state, &call, out, &expires);
    if (is_initial(expires, now)) {
        remove_at(&sh->t[WIDE], WIDE, index_of(&sh->t[WIDE], WIDE, p));
    } else {
        s->st.expires = expiry_tick(ms, expires);
        s->st.used = (uint32_t)ticks(ms, now) & ~HEAP_FLAG;
    }
    return 0;
}

/*
 * sl_check: one item, *out written only on success.  The buckets' common
 * case and every other have a function each, so that neither pays for the
 * other's registers: memory_check_one only picks one (a tail call).
 */
__attribute__((noinline)) static int
check_one_packed(memory_store *ms, const sl_limit *lim, const void *key,
                 size_t key_len, int64_t cost, sl_nanos now, sl_decision *out)
{
    item_ref ref = ref_of_key(ms, lim, key, key_len);
    int err = 0;

    shard_lock(ref.sh);
    if (decide_packed(ms, ref.sh, lim, ref.hash, cost, now, out) != 0) {
        const sl_check_item item = {lim, key, key_len};
        err = check_one_apply(ms, &item, &ref, cost, now, SL__COMMIT, out);
    }
    shard_unlock(ref.sh);
    return err;
}

__attribute__((noinline)) static int
check_one_other(memory_store *ms, const sl_check_item *item, int64_t cost,
                sl_nanos now, sl__mode mode, sl_decision *out)
{
    item_ref ref = ref_of(ms, item);
    int err;

    shard_lock(ref.sh);
    err = decide_locked(ms, item, &ref, cost, now, mode, out);
    shard_unlock(ref.sh);
    return err;
}

__attribute__((noinline)) static int
check_one_committed(memory_store *ms, const sl_limit *lim, const void *key,
                    size_t key_len, int64_t cost, sl_nanos now,
                    sl_decision *out)
{
    const sl_check_item item = {lim, key, key_len};
    return check_one_other(ms, &item, cost, now, SL__COMMIT, out);
}

static int memory_check_one(sl_store *base, const sl_limit *lim,
                            const void *key, size_t key_len, int64_t cost,
                            sl_nanos now, sl_decision *out)
{
    memory_store *ms = (memory_store *)base;

    if (lim->packed_fast && cost <= lim->cfg.burst)
        return check_one_packed(ms, lim, key, key_len, cost, now, out);
    return check_one_committed(ms, lim, key, key_len, cost, now, out);
}

/*
 * Many independent decisions on one limit.  A decision on a cold key waits
 * for one cache miss on its slot; hashing the keys a few decisions ahead
 * and prefetching their home slots lets those misses overlap.
 */
enum { BATCH_AHEAD = 8 };

static int memory_check_batch(sl_store *base, const sl_limit *limit,
                              const sl_key *keys, size_t n, int64_t cost,
                              sl_nanos now, sl_decision *out)
{
    memory_store *ms = (memory_store *)base;
    item_ref ring[BATCH_AHEAD];
    sl_check_item items[BATCH_AHEAD];
    int w = limit->narrow != SL__NARROW_NONE ? NARROW : WIDE;
    int fast = limit->packed_fast && cost <= limit->cfg.burst;

    store_start(ms, now);
    for (size_t i = 0; i < n + BATCH_AHEAD; i++) {
        if (i >= BATCH_AHEAD) {
            size_t j = i - BATCH_AHEAD, r = j % BATCH_AHEAD;
            int err;
            shard_lock(ring[r].sh);
            if (!fast || decide_packed(ms, ring[r].sh, limit, ring[r].hash,
                                       cost, now, &out[j]) != 0)
                err = decide_locked(ms, &items[r], &ring[r], cost, now,
                                    SL__COMMIT, &out[j]);
            else
                err = 0;
            shard_unlock(ring[r].sh);
            if (err)
                return err;
        }
        if (i < n) {
            size_t r = i % BATCH_AHEAD;
            table *t;
            items[r] = (sl_check_item){limit, keys[i].data, keys[i].len};
            ring[r] = ref_of(ms, &items[r]);
            t = &ring[r].sh->t[w];
            uint64_t cap = __atomic_load_n(&t->cap, __ATOMIC_RELAXED);
            unsigned char *slots = __atomic_load_n(&t->slots, __ATOMIC_RELAXED);
            __builtin_prefetch(slots +
                                   (((ring[r].hash & UINT32_MAX) * cap) >> 32) *
                                       stride_of[w],
                               1);
        }
    }
    return 0;
}

static int memory_check_multi(sl_store *base, const sl_check_item *items,
                              const int64_t *costs, size_t n, sl_nanos now,
                              int record, sl_decision *each)
{
    memory_store *ms = (memory_store *)base;
    item_ref refs[SL_MAX_ITEMS];
    shard *locks[SL_MAX_ITEMS];
    size_t nlocks = 0;
    int err = 0, all = 1;

    if (n == 1 && !record) /* the common case, without the bookkeeping */
        return memory_check_one(base, items[0].limit, items[0].key,
                                items[0].key_len, costs[0], now, each);
    if (n == 1)
        return check_one_other(ms, items, costs[0], now, SL__RECORD, each);
    for (size_t i = 0; i < n; i++) {
        refs[i] = ref_of(ms, &items[i]);
        for (size_t j = 0; j < i; j++)
            if (refs[j].hash == refs[i].hash)
                return SL_EINVAL; /* the same limit and key twice */
        locks[nlocks++] = refs[i].sh;
    }
    store_start(ms, now);
    /* Lock every shard involved, in address order, each once: two calls
     * that share shards cannot deadlock, and the call is atomic. */
    if (nlocks > 1)
        qsort(locks, nlocks, sizeof(locks[0]), cmp_shard);
    for (size_t i = 0; i < nlocks; i++)
        if (i == 0 || locks[i] != locks[i - 1])
            shard_lock(locks[i]);

    /* The first pass decides and reserves the room every log will need,
     * so that the second cannot fail half-way, recording included. */
    for (size_t i = 0; i < n && !err; i++) {
        err = apply(ms, &items[i], &refs[i], costs[i], now, SL__PEEK, 1, refs,
                    n, &each[i]);
        all &= each[i].allowed;
    }
    for (size_t i = 0; i < n && !err; i++)
        err = apply(ms, &items[i], &refs[i], costs[i], now,
                    record ? SL__RECORD
                    : all  ? SL__COMMIT
                           : SL__REFUSE,
                    0, refs, n, &each[i]);

    for (size_t i = nlocks; i-- > 0;)
        if (i == 0 || locks[i] != locks[i - 1])
            shard_unlock(locks[i]);
    return err;
}

/* sl_store_sweep walks each shard's narrow slots, then its wide ones: a
 * position in a shard counts both, narrow first. */
static size_t memory_sweep(sl_store *base, sl_nanos now, size_t max_slots)
{
    memory_store *ms = (memory_store *)base;
    int64_t now_tick;
    size_t cursor = atomic_load(&ms->cursor), done = 0, reclaimed = 0;

    if (atomic_load(&ms->epoch) == INT64_MIN)
        return 0; /* no decision yet, so no state */
    now_tick = ticks(ms, now);
    /* The cursor packs (shard, position); tables may have grown since,
     * which at worst revisits or skips a few slots until the next round.
     * One call visits each shard at most once (NSHARDS + 1 segments, as it
     * may start and end inside the same shard). */
    for (int segment = 0; segment <= NSHARDS && done < max_slots; segment++) {
        size_t si = (cursor >> 32) % NSHARDS;
        uint32_t pos = (uint32_t)cursor;
        shard *sh = &ms->shards[si];

        shard_lock(sh);
        uint32_t ncap = sh->t[NARROW].cap, end = ncap + sh->t[WIDE].cap;
        while (pos < end && done < max_slots) {
            int w = pos < ncap ? NARROW : WIDE;
            uint32_t i = w == NARROW ? pos : pos - ncap;
            unsigned char *p = slot_at(&sh->t[w], w, i);
            done++;
            if (*(const uint64_t *)p != 0 &&
                expired_at(stamps_of(p, w), now_tick)) {
                drop_at(sh, w, i);
                sh->reclaimed++;
                reclaimed++;
            } else {
                pos++;
            }
        }
        if (pos >= end)
            cursor = ((si + 1) % NSHARDS) << 32;
        else
            cursor = (si << 32) | pos;
        shard_unlock(sh);
    }
    atomic_store(&ms->cursor, cursor);
    return reclaimed;
}

static void memory_stats(sl_store *base, sl_store_stats *out)
{
    memory_store *ms = (memory_store *)base;
    memset(out, 0, sizeof(*out));
    out->max_bytes = ms->max_bytes;
    out->bytes = sizeof(*ms);
    for (int i = 0; i < NSHARDS; i++) {
        shard *sh = &ms->shards[i];
        shard_lock(sh);
        out->keys += sh->t[NARROW].count + sh->t[WIDE].count;
        out->bytes += shard_bytes(sh);
        out->reclaimed += sh->reclaimed;
        out->evicted += sh->evicted;
        out->lock_waits += sh->lock_waits;
        shard_unlock(sh);
    }
}

static void memory_destroy(sl_store *base)
{
    memory_store *ms = (memory_store *)base;
    for (int i = 0; i < NSHARDS; i++) {
        shard *sh = &ms->shards[i];
        table *t = &sh->t[WIDE];
        for (uint32_t j = 0; t->slots != NULL && j < t->cap; j++) {
            slot *s = (slot *)slot_at(t, WIDE, j);
            if (s->st.used & HEAP_FLAG)
                sl__heap_release(&s->state);
        }
        free(sh->t[NARROW].slots);
        free(t->slots);
    }
    free(ms);
}

/* 0 if table w of shard k keeps the invariants above. */
static int table_check(shard *sh, int k, int w)
{
    table *t = &sh->t[w];
    uint32_t count = 0;
    int bad = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        unsigned char *p = slot_at(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == 0)
            continue;
        count++;
        uint32_t prev = i == 0 ? t->cap - 1 : i - 1;
        uint32_t d = dist_of(t, i, h);
        uint64_t ph = hash_at(t, w, prev);
        /* Robin Hood order: a displaced key follows a key at most one
         * step less displaced, never an empty slot. */
        bad |= d > 0 && (ph == 0 || dist_of(t, prev, ph) + 1 < d);
        bad |= (h >> (64 - SHARD_BITS)) != (uint64_t)k;
        bad |= find(t, w, h) != p;
        if (w == WIDE)
            bad |= (stamps_of(p, w)->used & HEAP_FLAG) &&
                   sl__heap_check(&((slot *)p)->state) != 0;
        else
            bad |= (stamps_of(p, w)->used & HEAP_FLAG) != 0 ||
                   find(&sh->t[WIDE], WIDE, h) != NULL;
    }
    return bad || count != t->count || over_load(t, t->count);
}

int sl__memory_check(sl_store *base)
{
    memory_store *ms = (memory_store *)base;
    for (int k = 0; k < NSHARDS; k++) {
        shard *sh = &ms->shards[k];
        int bad;
        shard_lock(sh);
        bad = table_check(sh, k, NARROW) || table_check(sh, k, WIDE);
        shard_unlock(sh);
        if (bad)
            return -1;
    }
    return 0;
}

static const sl__store_type memory_type = {
    .check_one = memory_check_one,
    .check_multi = memory_check_multi,
    .check_batch = memory_check_batch,
    .sweep = memory_sweep,
    .stats = memory_stats,
    .destroy = memory_destroy,
};

sl_store *sl_memory_store_new(const sl_memory_options *opts)
{
    sl_memory_options o = {0};
    memory_store *ms;
    /* The initial tables (224 KiB) and a little room: 256 KiB, as
     * documented. */
    const size_t floor_bytes =
        2 * (size_t)NSHARDS * MIN_CAP * sizeof(slot) + sizeof(*ms);

    /* The end of sl_memory_options' first layout: max_key_len. */
    if (opts != NULL &&
        sl__options_copy(&o, sizeof(o),
                         offsetof(sl_memory_options, max_key_len) +
                             sizeof(o.max_key_len),
                         opts, "sl_memory_options", NULL, 0) != 0)
        return NULL;
    ms = aligned_alloc(64, (sizeof(*ms) + 63) & ~(size_t)63);
    if (ms == NULL)
        return NULL;
    memset(ms, 0, sizeof(*ms));
    ms->base.type = &memory_type;
    ms->max_bytes = o.max_bytes ? o.max_bytes : (size_t)256 << 20;
    if (ms->max_bytes < floor_bytes)
        ms->max_bytes = floor_bytes;
    ms->shard_max_bytes = (ms->max_bytes - sizeof(*ms)) / NSHARDS;
    ms->base.max_key_len = o.max_key_len ? o.max_key_len : 4096;
    if (o.seed0 == 0 && o.seed1 == 0) {
        uint64_t seed[2];
        if (getrandom(seed, sizeof(seed), 0) != sizeof(seed)) {
            free(ms);
            return NULL;
        }
        o.seed0 = seed[0];
        o.seed1 = seed[1];
    }
    sl__key_hasher_init(&ms->hasher, o.seed0, o.seed1);
    atomic_init(&ms->epoch, INT64_MIN);
    for (int i = 0; i < NSHARDS; i++) {
        for (int w = NARROW; w <= WIDE; w++) {
            ms->shards[i].t[w].cap = MIN_CAP;
            ms->shards[i].t[w].slots = table_new(w, MIN_CAP);
            if (ms->shards[i].t[w].slots == NULL) {
                memory_destroy(&ms->base);
                return NULL;
            }
        }
    }
    return &ms->base;
}
