/*
 * memory.c - the embedded store: every key's state in this process.
 *
 * Layout.  256 shards, each an open-addressing Robin Hood table of 32-byte
 * slots (tables 64-byte aligned, so a slot sits in one cache line)
 * behind its own spinlock.  A key is identified by a 64-bit keyed hash
 * (key_hash.h) of (limit identity, key bytes) under a per-store random
 * seed; the key bytes themselves are not kept, which is what makes a key
 * cost 32 bytes of slot (plus the table's free fraction) whatever its
 * length.  Two distinct keys share state only if their 64-bit hashes
 * collide: probability about n^2 / 2^65 for n live keys (3e-6 at ten
 * million), and the seed keeps an attacker from aiming at it.  The top 8
 * hash bits pick the shard, the low 32 the home slot (by multiply-shift,
 * so a table may have any size and can grow by a quarter instead of
 * doubling).
 *
 * Policy (docs/stores.md).  State that is back to its initial value is
 * never kept: a decision that leaves it initial deletes the slot, and when
 * a shard needs room it first sweeps out keys whose state has expired by
 * now.  Otherwise it grows by 25% while that stays under its share of the
 * memory cap; at the cap it evicts, Redis-style, the least recently used
 * of the (at most) 16 slots starting at the new key's home slot, preferring
 * any expired one.  An evicted key restarts from its initial state.
 *
 * Invariants (sl__memory_check): a slot is empty iff its hash is 0; a key
 * sits in its own shard, at or after its home slot with no empty slot in
 * between (Robin Hood order: a key's distance from home is at most one
 * more than its predecessor's); count is the number of full slots and
 * count <= cap * 7/8, which keeps probe runs short.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "internal.h"
#include "store/key_hash.h"

enum {
    SHARD_BITS = 8,
    NSHARDS = 1 << SHARD_BITS,
    MIN_CAP = 16,
    EVICT_SAMPLE = 16,
    /* Ticks of 2^28 ns (268 ms) keep expiry and recency in 32 bits:
     * expired state is reclaimed at most 268 ms late. */
    TICK_SHIFT = 28,
};

#define HEAP_FLAG 0x80000000u /* in slot.used: the state owns heap memory */

typedef struct slot {
    uint64_t hash; /* 0: empty */
    sl__state state;
    uint32_t expires; /* tick at which the state is initial, rounded up */
    uint32_t used;    /* tick of the last decision | HEAP_FLAG */
} slot;

typedef struct shard {
    atomic_int lock;
    uint32_t cap;         /* slots */
    uint32_t count;       /* full slots */
    uint32_t since_sweep; /* inserts since the last full sweep */
    slot *slots;
    size_t heap_bytes; /* held by logs */
    uint64_t reclaimed, evicted;
} __attribute__((aligned(64))) shard;

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

__attribute__((always_inline)) static inline void shard_lock(shard *sh)
{
    unsigned spins = 0;
    while (atomic_exchange_explicit(&sh->lock, 1, memory_order_acquire)) {
        while (atomic_load_explicit(&sh->lock, memory_order_relaxed)) {
            /* On two cores the holder may be descheduled: yield rather
             * than burn its time slice. */
            if (++spins > 64)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
    }
}

static void shard_unlock(shard *sh)
{
    atomic_store_explicit(&sh->lock, 0, memory_order_release);
}

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

/* Ticks since the epoch, negative before it (floor). */
static int64_t ticks(const memory_store *ms, sl_nanos t)
{
    int64_t epoch = atomic_load_explicit(&ms->epoch, memory_order_relaxed);
    /* now <= 2^62 and epoch >= -2^59: the difference fits. */
    return (t - epoch) >> TICK_SHIFT;
}

/* An expiry tick, rounded up, clamped to [0, UINT32_MAX]. */
static uint32_t expiry_tick(const memory_store *ms, sl_nanos t)
{
    int64_t epoch = atomic_load_explicit(&ms->epoch, memory_order_relaxed);
    int64_t d;
    if (__builtin_sub_overflow(t, epoch, &d) ||
        d > ((int64_t)UINT32_MAX << TICK_SHIFT))
        return UINT32_MAX; /* (also: a saturated expiry, INT64_MAX) */
    if (d <= 0)
        return 0;
    return (uint32_t)((d + ((int64_t)1 << TICK_SHIFT) - 1) >> TICK_SHIFT);
}

/* Has a slot's state expired at tick `now`? */
static int expired_at(const slot *s, int64_t now)
{
    return s->expires != UINT32_MAX && (int64_t)s->expires <= now;
}

/* Recency wraps every 2^31 ticks (18 years): ages, not stamps, compare. */
static uint32_t age_of(const slot *s, int64_t now)
{
    return ((uint32_t)now - (s->used & ~HEAP_FLAG)) & ~HEAP_FLAG;
}

/* A state is initial once its expiry has passed; INT64_MAX is "at the end
 * of time", which a saturated clock reaches but never passes. */
static int is_initial(sl_nanos expires, sl_nanos now)
{
    return expires <= now && expires != INT64_MAX;
}

/* ---- the table ---- */

static uint32_t home_of(const shard *sh, uint64_t hash)
{
    return (uint32_t)(((hash & UINT32_MAX) * sh->cap) >> 32);
}

static uint32_t next_of(const shard *sh, uint32_t i)
{
    return i + 1 == sh->cap ? 0 : i + 1;
}

static uint32_t dist_of(const shard *sh, uint32_t i, uint64_t hash)
{
    uint32_t home = home_of(sh, hash);
    return i >= home ? i - home : i + sh->cap - home;
}

__attribute__((always_inline)) static inline slot *find(shard *sh,
                                                        uint64_t hash)
{
    uint32_t i = home_of(sh, hash);
    for (uint32_t d = 0;; d++) {
        slot *s = &sh->slots[i];
        if (s->hash == hash)
            return s;
        /* Robin Hood: a richer slot than us means we are not here. */
        if (s->hash == 0 || dist_of(sh, i, s->hash) < d)
            return NULL;
        i = next_of(sh, i);
    }
}

/* Places e, which is not in the table; the table has a free slot. */
static void place(shard *sh, slot e)
{
    uint32_t i = home_of(sh, e.hash);
    for (uint32_t d = 0;; d++) {
        slot *s = &sh->slots[i];
        if (s->hash == 0) {
            *s = e;
            sh->count++;
            return;
        }
        uint32_t sd = dist_of(sh, i, s->hash);
        if (sd < d) {
            slot t = *s;
            *s = e;
            e = t;
            d = sd;
        }
        i = next_of(sh, i);
    }
}

/* Removes slot i by shifting its run back: no tombstones to clean up. */
static void remove_at(shard *sh, uint32_t i)
{
    for (;;) {
        uint32_t j = next_of(sh, i);
        slot *n = &sh->slots[j];
        if (n->hash == 0 || dist_of(sh, j, n->hash) == 0)
            break;
        sh->slots[i] = *n;
        i = j;
    }
    memset(&sh->slots[i], 0, sizeof(slot));
    sh->count--;
}

static size_t heap_of(const slot *s)
{
    return (s->used & HEAP_FLAG) ? sl__heap_bytes(&s->state) : 0;
}

/* Frees what a slot's state holds and removes it. */
static void drop_at(shard *sh, uint32_t i)
{
    slot *s = &sh->slots[i];
    if (s->used & HEAP_FLAG) {
        sh->heap_bytes -= sl__heap_bytes(&s->state);
        sl__heap_release(&s->state);
    }
    remove_at(sh, i);
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
    for (uint32_t i = 0; i < sh->cap;) {
        slot *s = &sh->slots[i];
        if (s->hash != 0 && expired_at(s, now_tick) &&
            !protected(s->hash, keep, nkeep)) {
            drop_at(sh, i); /* the next key moved into i: look again */
            sh->reclaimed++;
        } else {
            i++;
        }
    }
    sh->since_sweep = 0;
}

/* Evicts one key near hash's home: expired first, else least recently
 * used.  0 if nothing there may go. */
static int evict_near(shard *sh, uint64_t hash, int64_t now_tick,
                      const item_ref *keep, size_t nkeep)
{
    uint32_t i = home_of(sh, hash), victim = UINT32_MAX, oldest = 0;
    int expired = 0;

    for (int k = 0; k < EVICT_SAMPLE && k < (int)sh->cap;
         k++, i = next_of(sh, i)) {
        slot *s = &sh->slots[i];
        if (s->hash == 0 || protected(s->hash, keep, nkeep))
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
    drop_at(sh, victim);
    if (expired)
        sh->reclaimed++;
    else
        sh->evicted++;
    return 1;
}

static size_t table_bytes(uint32_t cap)
{
    return (size_t)cap * sizeof(slot);
}

/* A zeroed table of cap slots on a cache-line boundary, so that no slot
 * straddles two lines: a decision then touches one line of the table
 * (malloc's 16-byte alignment would split every other 32-byte slot). */
static slot *table_new(uint32_t cap)
{
    size_t bytes = (table_bytes(cap) + 63) & ~(size_t)63;
    slot *t = aligned_alloc(64, bytes);
    if (t != NULL)
        memset(t, 0, bytes);
    return t;
}

static int grow(shard *sh, uint32_t new_cap)
{
    slot *old = sh->slots;
    uint32_t old_cap = sh->cap;
    slot *n = table_new(new_cap);
    if (n == NULL)
        return SL_ENOMEM;
    /* Atomic stores: sl_check_batch reads both without the lock, only to
     * prefetch (a stale pair prefetches a wrong line, harmlessly). */
    __atomic_store_n(&sh->slots, n, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->cap, new_cap, __ATOMIC_RELAXED);
    sh->count = 0;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].hash != 0)
            place(sh, old[i]);
    free(old);
    return 0;
}

static int over_load(const shard *sh, uint32_t count)
{
    return (uint64_t)count * 8 > (uint64_t)sh->cap * 7;
}

/* Makes room for one more key: reclaim, grow, or evict, in that order. */
static int make_room(memory_store *ms, shard *sh, uint64_t hash,
                     int64_t now_tick, const item_ref *keep, size_t nkeep)
{
    if (!over_load(sh, sh->count + 1))
        return 0;
    /* A full sweep costs a pass over the shard; doing it at most once per
     * cap/8 inserts keeps it O(1) amortised under churn at the cap. */
    if (sh->since_sweep >= sh->cap / 8) {
        sweep_shard(sh, now_tick, keep, nkeep);
        if (!over_load(sh, sh->count + 1))
            return 0;
    }
    uint32_t new_cap = sh->cap + sh->cap / 4;
    if (table_bytes(new_cap) + sh->heap_bytes <= ms->shard_max_bytes &&
        grow(sh, new_cap) == 0)
        return 0;
    while (over_load(sh, sh->count + 1))
        if (!evict_near(sh, hash, now_tick, keep, nkeep))
            return SL_EFULL;
    return 0;
}

/* ---- decisions ---- */

/* Copies hash's state (all-zero if absent) and what it holds on the
 * heap; returns its slot, valid until the table next changes. */
static slot *get_state(shard *sh, uint64_t hash, sl__state *st,
                       size_t *heap_bytes)
{
    slot *s = find(sh, hash);
    if (s == NULL) {
        memset(st, 0, sizeof(*st));
        *heap_bytes = 0;
    } else {
        *st = s->state;
        *heap_bytes = heap_of(s);
    }
    return s;
}

/*
 * Writes a decided state back.  Initial state is deleted, unless
 * keep_initial: the first phase of a multi-item call keeps a slot for
 * every item, so that its second phase never needs room and so cannot
 * fail half-way.  s is the key's slot as get_state() found it (NULL if
 * absent) and old_heap what the state held before the decision (which may
 * have reallocated it).
 */
static int put_state(memory_store *ms, shard *sh, slot *s, uint64_t hash,
                     int heap, sl__state *st, size_t old_heap, sl_nanos expires,
                     sl_nanos now, int keep_initial, const item_ref *refs,
                     size_t nrefs)
{
    int64_t now_tick = ticks(ms, now);
    int err;

    if (is_initial(expires, now) && !keep_initial) {
        if (heap)
            sl__heap_release(st);
        sh->heap_bytes -= old_heap;
        if (s != NULL)
            remove_at(sh, (uint32_t)(s - sh->slots));
        return 0;
    }
    if (s == NULL) {
        err = make_room(ms, sh, hash, now_tick, refs, nrefs);
        if (err) {
            if (heap)
                sl__heap_release(st);
            return err;
        }
        place(sh, (slot){.hash = hash});
        sh->since_sweep++;
        s = find(sh, hash);
    }
    s->state = *st;
    s->expires = expiry_tick(ms, expires);
    s->used = ((uint32_t)now_tick & ~HEAP_FLAG) |
              (heap && sl__heap_bytes(st) != 0 ? HEAP_FLAG : 0);
    sh->heap_bytes += (heap ? sl__heap_bytes(st) : 0) - old_heap;
    /* Logs grow after the fact; bring the shard back under its cap. */
    while (table_bytes(sh->cap) + sh->heap_bytes > ms->shard_max_bytes &&
           evict_near(sh, hash, now_tick, refs, nrefs))
        ;
    return 0;
}

/* Applies one item in one mode: read, decide, write back. */
static int apply(memory_store *ms, const sl_check_item *item,
                 const item_ref *ref, int64_t cost, sl_nanos now, sl__mode mode,
                 int keep_initial, const item_ref *refs, size_t nrefs,
                 sl_decision *d)
{
    const sl__algo *algo = item->limit->algo;
    sl__state st;
    size_t old_heap;
    sl_nanos expires = 0;
    int err, put;

    /* One log may take at most half of its shard's share of the cap, so
     * that a single huge key cannot push out everything else. */
    sl__call call = {cost, now, mode, ms->shard_max_bytes / 2};
    slot *s = get_state(ref->sh, ref->hash, &st, &old_heap);
    err = algo->check(item->limit, &st, &call, d, &expires);
    /* Even a failed check may have moved a log: always write it back. */
    put = put_state(ms, ref->sh, s, ref->hash, algo->heap, &st, old_heap,
                    expires, now, keep_initial, refs, nrefs);
    return err ? err : put;
}

static int cmp_shard(const void *a, const void *b)
{
    const shard *x = *(shard *const *)a, *y = *(shard *const *)b;
    return (x > y) - (x < y);
}

__attribute__((always_inline)) static inline item_ref
ref_of(memory_store *ms, const sl_check_item *item)
{
    item_ref r;
    r.hash =
        sl__key_hash(&ms->hasher, item->limit->ident, item->key, item->key_len);
    r.hash += r.hash == 0; /* 0 marks an empty slot */
    r.sh = &ms->shards[r.hash >> (64 - SHARD_BITS)];
    return r;
}

/* A new key or a log: the general path, under the caller's lock. */
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
 * One decision under the caller's lock of ref's shard; *out written only
 * on success.
 *
 * The common case gets a path of its own: a key already in the table
 * under an algorithm without a heap state.  Such a check cannot fail
 * (only logs can), so it decides on the slot's state in place, into *out,
 * and then only stamps the slot or, if the state is back to initial,
 * removes it.  Everything else (a new key, a log) goes through apply().
 * A key in the table means the epoch is set (store_start): its insert
 * set it before taking this lock.
 */
__attribute__((always_inline)) static inline int
decide_locked(memory_store *ms, const sl_check_item *item, item_ref *ref,
              int64_t cost, sl_nanos now, sl__mode mode, sl_decision *out)
{
    const sl_limit *lim = item->limit;
    slot *s;

    if (lim->algo->heap || (s = find(ref->sh, ref->hash)) == NULL)
        return check_one_apply(ms, item, ref, cost, now, mode, out);
    sl__call call = {cost, now, mode, 0};
    sl_nanos expires;
    (void)lim->algo->check(lim, &s->state, &call, out, &expires);
    if (is_initial(expires, now)) {
        remove_at(ref->sh, (uint32_t)(s - ref->sh->slots));
    } else {
        s->expires = expiry_tick(ms, expires);
        s->used = (uint32_t)ticks(ms, now) & ~HEAP_FLAG;
    }
    return 0;
}

/* sl_check: one item, *out written only on success. */
static int memory_check_one(sl_store *base, const sl_check_item *item,
                            int64_t cost, sl_nanos now, int record,
                            sl_decision *out)
{
    memory_store *ms = (memory_store *)base;
    item_ref ref = ref_of(ms, item);
    int err;

    shard_lock(ref.sh);
    err = decide_locked(ms, item, &ref, cost, now,
                        record ? SL__RECORD : SL__COMMIT, out);
    shard_unlock(ref.sh);
    return err;
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

    store_start(ms, now);
    for (size_t i = 0; i < n + BATCH_AHEAD; i++) {
        if (i >= BATCH_AHEAD) {
            size_t j = i - BATCH_AHEAD, r = j % BATCH_AHEAD;
            int err;
            shard_lock(ring[r].sh);
            err = decide_locked(ms, &items[r], &ring[r], cost, now, SL__COMMIT,
                                &out[j]);
            shard_unlock(ring[r].sh);
            if (err)
                return err;
        }
        if (i < n) {
            size_t r = i % BATCH_AHEAD;
            shard *sh;
            items[r] = (sl_check_item){limit, keys[i].data, keys[i].len};
            ring[r] = ref_of(ms, &items[r]);
            sh = ring[r].sh;
            uint64_t cap = __atomic_load_n(&sh->cap, __ATOMIC_RELAXED);
            slot *slots = __atomic_load_n(&sh->slots, __ATOMIC_RELAXED);
            __builtin_prefetch(
                &slots[((ring[r].hash & UINT32_MAX) * cap) >> 32], 1);
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

    if (n == 1) /* the common case, without the bookkeeping of many */
        return memory_check_one(base, items, costs[0], now, record, each);
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

static size_t memory_sweep(sl_store *base, sl_nanos now, size_t max_slots)
{
    memory_store *ms = (memory_store *)base;
    int64_t now_tick;
    size_t cursor = atomic_load(&ms->cursor), done = 0, reclaimed = 0;

    if (atomic_load(&ms->epoch) == INT64_MIN)
        return 0; /* no decision yet, so no state */
    now_tick = ticks(ms, now);
    /* The cursor packs (shard, slot); tables may have grown since, which
     * at worst revisits or skips a few slots until the next round.  One
     * call visits each shard at most once (NSHARDS + 1 segments, as it may
     * start and end inside the same shard). */
    for (int segment = 0; segment <= NSHARDS && done < max_slots; segment++) {
        size_t si = (cursor >> 32) % NSHARDS;
        uint32_t i = (uint32_t)cursor;
        shard *sh = &ms->shards[si];

        shard_lock(sh);
        while (i < sh->cap && done < max_slots) {
            slot *s = &sh->slots[i];
            done++;
            if (s->hash != 0 && expired_at(s, now_tick)) {
                drop_at(sh, i);
                sh->reclaimed++;
                reclaimed++;
            } else {
                i++;
            }
        }
        if (i >= sh->cap)
            cursor = ((si + 1) % NSHARDS) << 32;
        else
            cursor = (si << 32) | i;
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
        out->keys += sh->count;
        out->bytes += table_bytes(sh->cap) + sh->heap_bytes;
        out->reclaimed += sh->reclaimed;
        out->evicted += sh->evicted;
        shard_unlock(sh);
    }
}

static void memory_destroy(sl_store *base)
{
    memory_store *ms = (memory_store *)base;
    for (int i = 0; i < NSHARDS; i++) {
        shard *sh = &ms->shards[i];
        for (uint32_t j = 0; j < sh->cap; j++)
            if (sh->slots[j].used & HEAP_FLAG)
                sl__heap_release(&sh->slots[j].state);
        free(sh->slots);
    }
    free(ms);
}

int sl__memory_check(sl_store *base)
{
    memory_store *ms = (memory_store *)base;
    for (int k = 0; k < NSHARDS; k++) {
        shard *sh = &ms->shards[k];
        uint32_t count = 0;
        int bad = 0;
        shard_lock(sh);
        for (uint32_t i = 0; i < sh->cap; i++) {
            slot *s = &sh->slots[i];
            if (s->hash == 0)
                continue;
            count++;
            uint32_t prev = i == 0 ? sh->cap - 1 : i - 1;
            uint32_t d = dist_of(sh, i, s->hash);
            /* Robin Hood order: a displaced key follows a key at most one
             * step less displaced, never an empty slot. */
            bad |= d > 0 && (sh->slots[prev].hash == 0 ||
                             dist_of(sh, prev, sh->slots[prev].hash) + 1 < d);
            bad |= (s->hash >> (64 - SHARD_BITS)) != (uint64_t)k;
            bad |= (s->used & HEAP_FLAG) && sl__heap_check(&s->state) != 0;
        }
        bad |= count != sh->count || over_load(sh, sh->count);
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
    /* Below this the initial tables alone would not fit. */
    const size_t floor_bytes =
        2 * (size_t)NSHARDS * MIN_CAP * sizeof(slot) + sizeof(*ms);

    if (opts != NULL)
        o = *opts;
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
        ms->shards[i].cap = MIN_CAP;
        ms->shards[i].slots = table_new(MIN_CAP);
        if (ms->shards[i].slots == NULL) {
            memory_destroy(&ms->base);
            return NULL;
        }
    }
    return &ms->base;
}
