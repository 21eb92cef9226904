/*
 * memory.c - the embedded store: every key's state in this process.
 *
 * Layout.  256 shards, each behind its own spinlock and holding two
 * Robin Hood tables (memory_table.h): a narrow one of 24-byte slots for
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
 * the shard, the low 32 the home slot in its table.
 *
 * This file is the store: what its tables hold and when it goes, the
 * general path of a decision (read, decide, write back) and the atomic
 * multi-item call on it, sweeps, stats, and the store made.  The tables
 * themselves are memory_table.c's; the calls as libsluice makes them,
 * with the hot path (one item or a batch on keys already in a table) and
 * the store's type, are memory_decide.c's, which calls this file.
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
 * Invariants (sl__memory_check): each table keeps its own
 * (sl__table_check); a key sits in its own shard; no hash is in both
 * tables of a shard, and narrow slots own no heap.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/narrow.h"
#include "store/memory_store.h"

enum {
    EVICT_SAMPLE = 16,
};

/* ---- the shards' tables ---- */

static size_t heap_of(const sl__slot *s)
{
    return (s->st.used & SL__HEAP_FLAG) ? sl__heap_bytes(&s->state) : 0;
}

/* Frees what a slot's state holds and removes it. */
static void drop_at(sl__shard *sh, int w, uint32_t i)
{
    sl__table *t = &sh->t[w];
    sl__slot *s = (sl__slot *)sl__table_slot(t, w, i);
    if (w == SL__TABLE_WIDE && (s->st.used & SL__HEAP_FLAG)) {
        sh->heap_bytes -= sl__heap_bytes(&s->state);
        sl__heap_release(&s->state);
    }
    sl__table_remove(t, w, i);
}

static int protected(uint64_t hash, const sl__item_ref *keep, size_t nkeep)
{
    for (size_t k = 0; k < nkeep; k++)
        if (keep[k].hash == hash)
            return 1;
    return 0;
}

/* Removes every key of the shard whose state is initial by now. */
static void sweep_shard(sl__shard *sh, int64_t now_tick,
                        const sl__item_ref *keep, size_t nkeep)
{
    for (int w = SL__TABLE_NARROW; w <= SL__TABLE_WIDE; w++) {
        sl__table *t = &sh->t[w];
        for (uint32_t i = 0; i < t->cap;) {
            unsigned char *p = sl__table_slot(t, w, i);
            uint64_t h = *(const uint64_t *)p;
            if (h != 0 && sl__expired_at(sl__stamps_of(p, w), now_tick) &&
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
static int evict_near(sl__shard *sh, int w, uint64_t hash, int64_t now_tick,
                      const sl__item_ref *keep, size_t nkeep)
{
    sl__table *t = &sh->t[w];
    uint32_t i = sl__table_home(t, hash), victim = UINT32_MAX, oldest = 0;
    int expired = 0;

    for (int k = 0; k < EVICT_SAMPLE && k < (int)t->cap;
         k++, i = sl__table_next(t, i)) {
        unsigned char *p = sl__table_slot(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        const sl__stamps *s = sl__stamps_of(p, w);
        if (h == 0 || protected(h, keep, nkeep))
            continue;
        if (sl__expired_at(s, now_tick)) {
            victim = i;
            expired = 1;
            break;
        }
        if (victim == UINT32_MAX || sl__age_of(s, now_tick) > oldest) {
            oldest = sl__age_of(s, now_tick);
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

/* Makes room in table w for one more key: reclaim, grow, or evict, in
 * that order.  Slots of both tables may move. */
static int make_room(sl__memory_store *ms, sl__shard *sh, int w, uint64_t hash,
                     int64_t now_tick, const sl__item_ref *keep, size_t nkeep)
{
    sl__table *t = &sh->t[w];
    if (!sl__table_over_load(t, t->count + 1))
        return 0;
    /* A full sweep costs a pass over the shard; doing it at most once per
     * cap/8 inserts keeps it O(1) amortised under churn at the cap. */
    if (sh->since_sweep >=
        (sh->t[SL__TABLE_NARROW].cap + sh->t[SL__TABLE_WIDE].cap) / 8) {
        sweep_shard(sh, now_tick, keep, nkeep);
        if (!sl__table_over_load(t, t->count + 1))
            return 0;
    }
    uint32_t new_cap = t->cap + t->cap / 4;
    if (sl__shard_bytes(sh) + sl__table_bytes(w, new_cap) -
                sl__table_bytes(w, t->cap) <=
            ms->shard_max_bytes &&
        sl__table_grow(t, w, new_cap) == 0)
        return 0;
    while (sl__table_over_load(t, t->count + 1))
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
static place_ref locate(sl__shard *sh, const sl_limit *lim, uint64_t hash)
{
    place_ref r;
    r.w = lim->narrow != SL__NARROW_NONE ? SL__TABLE_NARROW : SL__TABLE_WIDE;
    r.p = sl__table_find(&sh->t[r.w], r.w, hash);
    if (r.p == NULL && sh->t[!r.w].count != 0) {
        r.w = !r.w;
        r.p = sl__table_find(&sh->t[r.w], r.w, hash);
    }
    return r;
}

/* Copies hash's state (all-zero if absent) and what it holds on the
 * heap; returns where it is, valid until the table next changes. */
static place_ref get_state(sl__memory_store *ms, sl__shard *sh,
                           const sl_limit *lim, uint64_t hash, sl__state *st,
                           size_t *heap_bytes)
{
    place_ref r = locate(sh, lim, hash);
    *heap_bytes = 0;
    if (r.p == NULL) {
        memset(st, 0, sizeof(*st));
    } else if (r.w == SL__TABLE_NARROW) {
        sl__narrow_unpack(lim, ((sl__nslot *)r.p)->word, sl__memory_origin(ms),
                          st);
    } else {
        *st = ((sl__slot *)r.p)->state;
        *heap_bytes = heap_of((sl__slot *)r.p);
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
static int put_state(sl__memory_store *ms, sl__shard *sh, place_ref at,
                     const sl_limit *lim, uint64_t hash, sl__state *st,
                     size_t old_heap, sl_nanos expires, sl_nanos now,
                     int keep_initial, const sl__item_ref *refs, size_t nrefs)
{
    int64_t now_tick = sl__memory_ticks(ms, now);
    int heap = lim->algo->heap, w = SL__TABLE_WIDE, err;
    size_t new_heap = heap ? sl__heap_bytes(st) : 0;
    uint64_t word = 0;

    if (sl__is_initial(expires, now) && !keep_initial) {
        if (heap)
            sl__heap_release(st);
        sh->heap_bytes -= old_heap;
        if (at.p != NULL)
            sl__table_remove(&sh->t[at.w], at.w,
                             sl__table_index(&sh->t[at.w], at.w, at.p));
        return 0;
    }
    if (!keep_initial && new_heap == 0 &&
        (at.p == NULL || at.w == SL__TABLE_NARROW) &&
        sl__narrow_pack(lim, st, sl__memory_origin(ms), &word))
        w = SL__TABLE_NARROW;
    if (at.p == NULL || at.w != w) {
        /* A new key, or a narrow one whose state no longer packs. */
        err = make_room(ms, sh, w, hash, now_tick, refs, nrefs);
        if (err) {
            if (heap)
                sl__heap_release(st);
            return err;
        }
        if (at.p != NULL) { /* make_room may have moved it */
            sl__table *from = &sh->t[at.w];
            sl__table_remove(
                from, at.w,
                sl__table_index(from, at.w, sl__table_find(from, at.w, hash)));
        }
        sl__slot e = {.hash = hash};
        sl__table_place(&sh->t[w], w, &e);
        sh->since_sweep++;
        at.w = w;
        at.p = sl__table_find(&sh->t[w], w, hash);
    }
    sl__stamps *stm = sl__stamps_of(at.p, w);
    if (w == SL__TABLE_NARROW) {
        ((sl__nslot *)at.p)->word = word;
    } else {
        ((sl__slot *)at.p)->state = *st;
    }
    stm->expires = sl__memory_expiry(ms, expires);
    stm->used = ((uint32_t)now_tick & ~SL__HEAP_FLAG) |
                (new_heap != 0 ? SL__HEAP_FLAG : 0);
    sh->heap_bytes += new_heap - old_heap;
    /* Logs grow after the fact; bring the shard back under its cap. */
    while (sl__shard_bytes(sh) > ms->shard_max_bytes &&
           evict_near(sh, SL__TABLE_WIDE, hash, now_tick, refs, nrefs))
        ;
    return 0;
}

static int apply(sl__memory_store *ms, const sl_check_item *item,
                 const sl__item_ref *ref, int64_t cost, sl_nanos now,
                 sl__mode mode, int keep_initial, const sl__item_ref *refs,
                 size_t nrefs, sl_decision *d)
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

/* A new key, a log, or a state that changes table: the general path,
 * under the caller's lock. */
int sl__memory_check_general(sl__memory_store *ms, const sl_check_item *item,
                             sl__item_ref *ref, int64_t cost, sl_nanos now,
                             sl__mode mode, sl_decision *out)
{
    sl_decision d;
    int err;

    sl__memory_start(ms, now);
    err = apply(ms, item, ref, cost, now, mode, 0, ref, 1, &d);
    if (err == 0)
        *out = d;
    return err;
}

static int cmp_shard(const void *a, const void *b)
{
    const sl__shard *x = *(sl__shard *const *)a, *y = *(sl__shard *const *)b;
    return (x > y) - (x < y);
}

int sl__memory_check_all(sl_store *base, const sl_check_item *items,
                         const int64_t *costs, size_t n, sl_nanos now,
                         int record, sl_decision *each)
{
    sl__memory_store *ms = (sl__memory_store *)base;
    sl__item_ref refs[SL_MAX_ITEMS];
    sl__shard *locks[SL_MAX_ITEMS];
    size_t nlocks = 0;
    int err = 0, all = 1;

    for (size_t i = 0; i < n; i++) {
        refs[i] = sl__memory_ref_of(ms, &items[i]);
        for (size_t j = 0; j < i; j++)
            if (refs[j].hash == refs[i].hash)
                return SL_EINVAL; /* the same limit and key twice */
        locks[nlocks++] = refs[i].sh;
    }
    sl__memory_start(ms, now);
    /* Lock every shard involved, in address order, each once: two calls
     * that share shards cannot deadlock, and the call is atomic. */
    if (nlocks > 1)
        qsort(locks, nlocks, sizeof(locks[0]), cmp_shard);
    for (size_t i = 0; i < nlocks; i++)
        if (i == 0 || locks[i] != locks[i - 1])
            sl__shard_lock(locks[i]);

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
            sl__shard_unlock(locks[i]);
    return err;
}

/* sl_store_sweep walks each shard's narrow slots, then its wide ones: a
 * position in a shard counts both, narrow first. */
size_t sl__memory_sweep(sl_store *base, sl_nanos now, size_t max_slots)
{
    sl__memory_store *ms = (sl__memory_store *)base;
    int64_t now_tick;
    size_t cursor = atomic_load(&ms->cursor), done = 0, reclaimed = 0;

    if (atomic_load(&ms->epoch) == INT64_MIN)
        return 0; /* no decision yet, so no state */
    now_tick = sl__memory_ticks(ms, now);
    /* The cursor packs (shard, position); tables may have grown since,
     * which at worst revisits or skips a few slots until the next round.
     * One call visits each shard at most once (SL__NSHARDS + 1 segments, as it
     * may start and end inside the same shard). */
    for (int segment = 0; segment <= SL__NSHARDS && done < max_slots;
         segment++) {
        size_t si = (cursor >> 32) % SL__NSHARDS;
        uint32_t pos = (uint32_t)cursor;
        sl__shard *sh = &ms->shards[si];

        sl__shard_lock(sh);
        uint32_t ncap = sh->t[SL__TABLE_NARROW].cap,
                 end = ncap + sh->t[SL__TABLE_WIDE].cap;
        while (pos < end && done < max_slots) {
            int w = pos < ncap ? SL__TABLE_NARROW : SL__TABLE_WIDE;
            uint32_t i = w == SL__TABLE_NARROW ? pos : pos - ncap;
            unsigned char *p = sl__table_slot(&sh->t[w], w, i);
            done++;
            if (*(const uint64_t *)p != 0 &&
                sl__expired_at(sl__stamps_of(p, w), now_tick)) {
                drop_at(sh, w, i);
                sh->reclaimed++;
                reclaimed++;
            } else {
                pos++;
            }
        }
        if (pos >= end)
            cursor = ((si + 1) % SL__NSHARDS) << 32;
        else
            cursor = (si << 32) | pos;
        sl__shard_unlock(sh);
    }
    atomic_store(&ms->cursor, cursor);
    return reclaimed;
}

void sl__memory_stats(sl_store *base, sl_store_stats *out)
{
    sl__memory_store *ms = (sl__memory_store *)base;
    memset(out, 0, sizeof(*out));
    out->max_bytes = ms->max_bytes;
    out->bytes = sizeof(*ms);
    for (int i = 0; i < SL__NSHARDS; i++) {
        sl__shard *sh = &ms->shards[i];
        sl__shard_lock(sh);
        out->keys +=
            sh->t[SL__TABLE_NARROW].count + sh->t[SL__TABLE_WIDE].count;
        out->bytes += sl__shard_bytes(sh);
        out->reclaimed += sh->reclaimed;
        out->evicted += sh->evicted;
        out->lock_waits += sh->lock_waits;
        sl__shard_unlock(sh);
    }
}

void sl__memory_destroy(sl_store *base)
{
    sl__memory_store *ms = (sl__memory_store *)base;
    for (int i = 0; i < SL__NSHARDS; i++) {
        sl__shard *sh = &ms->shards[i];
        sl__table *t = &sh->t[SL__TABLE_WIDE];
        for (uint32_t j = 0; t->slots != NULL && j < t->cap; j++) {
            sl__slot *s = (sl__slot *)sl__table_slot(t, SL__TABLE_WIDE, j);
            if (s->st.used & SL__HEAP_FLAG)
                sl__heap_release(&s->state);
        }
        sl__table_release(&sh->t[SL__TABLE_NARROW]);
        sl__table_release(t);
    }
    free(ms);
}

/* 0 if table w of shard k keeps the invariants above. */
static int table_check(sl__shard *sh, int k, int w)
{
    sl__table *t = &sh->t[w];
    int bad = sl__table_check(t, w) != 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        unsigned char *p = sl__table_slot(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == 0)
            continue;
        bad |= (h >> (64 - SL__SHARD_BITS)) != (uint64_t)k;
        if (w == SL__TABLE_WIDE)
            bad |= (sl__stamps_of(p, w)->used & SL__HEAP_FLAG) &&
                   sl__heap_check(&((sl__slot *)p)->state) != 0;
        else
            bad |= (sl__stamps_of(p, w)->used & SL__HEAP_FLAG) != 0 ||
                   sl__table_find(&sh->t[SL__TABLE_WIDE], SL__TABLE_WIDE, h) !=
                       NULL;
    }
    return bad;
}

int sl__memory_check(sl_store *base)
{
    sl__memory_store *ms = (sl__memory_store *)base;
    for (int k = 0; k < SL__NSHARDS; k++) {
        sl__shard *sh = &ms->shards[k];
        int bad;
        sl__shard_lock(sh);
        bad = table_check(sh, k, SL__TABLE_NARROW) ||
              table_check(sh, k, SL__TABLE_WIDE);
        sl__shard_unlock(sh);
        if (bad)
            return -1;
    }
    return 0;
}

sl_store *sl__memory_store_make(const sl_memory_options *opts,
                                const sl__store_type *type)
{
    sl_memory_options o = {0};
    sl__memory_store *ms;
    /* The initial tables (224 KiB) and a little room: 256 KiB, as
     * documented. */
    const size_t floor_bytes =
        2 * (size_t)SL__NSHARDS * SL__TABLE_MIN_CAP * sizeof(sl__slot) +
        sizeof(*ms);

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
    ms->base.type = type;
    ms->max_bytes = o.max_bytes ? o.max_bytes : (size_t)256 << 20;
    if (ms->max_bytes < floor_bytes)
        ms->max_bytes = floor_bytes;
    ms->shard_max_bytes = (ms->max_bytes - sizeof(*ms)) / SL__NSHARDS;
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
    for (int i = 0; i < SL__NSHARDS; i++) {
        for (int w = SL__TABLE_NARROW; w <= SL__TABLE_WIDE; w++) {
            if (sl__table_init(&ms->shards[i].t[w], w, SL__TABLE_MIN_CAP) !=
                0) {
                sl__memory_destroy(&ms->base);
                return NULL;
            }
        }
    }
    return &ms->base;
}
