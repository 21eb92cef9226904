/*
 * memory_decide.c - the memory store's calls, as sl__store_type has
 * them, and its constructor: the hot path, sl_check on one item with the
 * paths that decide on a slot in place, sl_check_batch, which prefetches
 * the keys ahead, and several items, handed to memory.c's atomic call
 * unless there is only one.
 *
 * Above memory.c, which keeps what the tables hold (room, reclaiming,
 * eviction) and the general path these calls fall back on
 * (sl__memory_check_general) for a new key, a log, or a state that
 * changes table.  The common case, a key already in a table, is decided
 * here without leaving this file: the lookup (memory_table.h), the key's
 * hash and the store's clock (memory_store.h) are inline.
 */
#include <stdlib.h>
#include <string.h>

#include "core/narrow.h"
#include "core/schedule.h"
#include "store/memory_store.h"

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
decide_packed(sl__memory_store *ms, sl__shard *sh, const sl_limit *lim,
              uint64_t hash, int64_t cost, sl_nanos now, sl_decision *out)
{
    sl__table *t = &sh->t[SL__TABLE_NARROW];
    unsigned char *p = sl__table_find(t, SL__TABLE_NARROW, hash);
    unsigned fb = lim->frac_bits;
    int64_t epoch, origin;
    sl__state st;
    sl_nanos expires;

    if (p == NULL)
        return 1;
    sl__nslot *s = (sl__nslot *)p;
    epoch = sl__memory_epoch(ms);
    origin = sl__origin_at(epoch);
    sl__narrow_unpack_schedule(fb, s->word, origin, &st);
    if ((uint64_t)st.w[1] >= lim->own_span || now < origin ||
        (uint64_t)(now - origin) >
            (UINT64_MAX >> fb) - (uint64_t)lim->most_ns - 1)
        return 1;
    const sl__call call = {cost, now, SL__COMMIT, 0};
    sl__sched_fast(lim, &st, &call, out, &expires);
    if (sl__is_initial(expires, now)) {
        sl__table_remove(t, SL__TABLE_NARROW,
                         sl__table_index(t, SL__TABLE_NARROW, p));
    } else {
        s->word = (uint64_t)(st.w[0] - origin) << fb | (uint64_t)st.w[1];
        s->st.expires = sl__expiry_at(epoch, expires);
        s->st.used = (uint32_t)sl__ticks_at(epoch, now) & ~SL__HEAP_FLAG;
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
 * Everything else (a new key, a log) goes through the general path.  A
 * key in a table means the epoch is set (sl__memory_start): its insert set
 * it before taking this lock.
 */
__attribute__((always_inline)) static inline int
decide_locked(sl__memory_store *ms, const sl_check_item *item,
              sl__item_ref *ref, int64_t cost, sl_nanos now, sl__mode mode,
              sl_decision *out)
{
    const sl_limit *lim = item->limit;
    sl__shard *sh = ref->sh;
    sl_nanos expires;
    unsigned char *p;

    if (lim->algo->heap)
        return sl__memory_check_general(ms, item, ref, cost, now, mode, out);
    sl__call call = {cost, now, mode, 0};
    if (lim->narrow != SL__NARROW_NONE &&
        (p = sl__table_find(&sh->t[SL__TABLE_NARROW], SL__TABLE_NARROW,
                            ref->hash)) != NULL) {
        sl__table *t = &sh->t[SL__TABLE_NARROW];
        int64_t origin = sl__memory_origin(ms);
        sl__state st;
        sl_decision d;
        uint64_t word;
        if (lim->algo->check_word != NULL) {
            /* The windows decide on the word itself, straight into *out. */
            sl__nslot *s = (sl__nslot *)p;
            if (lim->algo->check_word(lim, &s->word, &call, out, &expires))
                return sl__memory_check_general(ms, item, ref, cost, now, mode,
                                                out);
            if (sl__is_initial(expires, now)) {
                sl__table_remove(t, SL__TABLE_NARROW,
                                 sl__table_index(t, SL__TABLE_NARROW, p));
            } else {
                s->st.expires = sl__memory_expiry(ms, expires);
                s->st.used =
                    (uint32_t)sl__memory_ticks(ms, now) & ~SL__HEAP_FLAG;
            }
            return 0;
        }
        sl__narrow_unpack(lim, ((sl__nslot *)p)->word, origin, &st);
        (void)lim->algo->check(lim, &st, &call, &d, &expires);
        if (sl__is_initial(expires, now)) {
            sl__table_remove(t, SL__TABLE_NARROW,
                             sl__table_index(t, SL__TABLE_NARROW, p));
        } else if (sl__narrow_pack(lim, &st, origin, &word)) {
            sl__nslot *s = (sl__nslot *)p;
            s->word = word;
            s->st.expires = sl__memory_expiry(ms, expires);
            s->st.used = (uint32_t)sl__memory_ticks(ms, now) & ~SL__HEAP_FLAG;
        } else {
            return sl__memory_check_general(ms, item, ref, cost, now, mode,
                                            out);
        }
        *out = d;
        return 0;
    }
    if (sh->t[SL__TABLE_WIDE].count == 0 ||
        (p = sl__table_find(&sh->t[SL__TABLE_WIDE], SL__TABLE_WIDE,
                            ref->hash)) == NULL)
        return sl__memory_check_general(ms, item, ref, cost, now, mode, out);
    sl__slot *s = (sl__slot *)p;
    (void)lim->algo->check(lim, &s->state, &call, out, &expires);
    if (sl__is_initial(expires, now)) {
        sl__table_remove(
            &sh->t[SL__TABLE_WIDE], SL__TABLE_WIDE,
            sl__table_index(&sh->t[SL__TABLE_WIDE], SL__TABLE_WIDE, p));
    } else {
        s->st.expires = sl__memory_expiry(ms, expires);
        s->st.used = (uint32_t)sl__memory_ticks(ms, now) & ~SL__HEAP_FLAG;
    }
    return 0;
}

/*
 * sl_check: one item, *out written only on success.  The buckets' common
 * case and every other have a function each, so that neither pays for the
 * other's registers: check_one only picks one (a tail call).
 */
__attribute__((noinline)) static int
check_one_packed(sl__memory_store *ms, const sl_limit *lim, const void *key,
                 size_t key_len, int64_t cost, sl_nanos now, sl_decision *out)
{
    sl__item_ref ref = sl__memory_ref_of_key(ms, lim, key, key_len);
    int err = 0;

    sl__shard_lock(ref.sh);
    if (decide_packed(ms, ref.sh, lim, ref.hash, cost, now, out) != 0) {
        const sl_check_item item = {lim, key, key_len};
        err = sl__memory_check_general(ms, &item, &ref, cost, now, SL__COMMIT,
                                       out);
    }
    sl__shard_unlock(ref.sh);
    return err;
}

static int check_other(sl__memory_store *ms, const sl_check_item *item,
                       int64_t cost, sl_nanos now, sl__mode mode,
                       sl_decision *out)
{
    sl__item_ref ref = sl__memory_ref_of(ms, item);
    int err;

    sl__shard_lock(ref.sh);
    err = decide_locked(ms, item, &ref, cost, now, mode, out);
    sl__shard_unlock(ref.sh);
    return err;
}

__attribute__((noinline)) static int
check_one_committed(sl__memory_store *ms, const sl_limit *lim, const void *key,
                    size_t key_len, int64_t cost, sl_nanos now,
                    sl_decision *out)
{
    const sl_check_item item = {lim, key, key_len};
    return check_other(ms, &item, cost, now, SL__COMMIT, out);
}

static int check_one(sl_store *base, const sl_limit *lim, const void *key,
                     size_t key_len, int64_t cost, sl_nanos now,
                     sl_decision *out)
{
    sl__memory_store *ms = (sl__memory_store *)base;

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

static int check_batch(sl_store *base, const sl_limit *limit,
                       const sl_key *keys, size_t n, int64_t cost,
                       sl_nanos now, sl_decision *out)
{
    sl__memory_store *ms = (sl__memory_store *)base;
    sl__item_ref ring[BATCH_AHEAD];
    sl_check_item items[BATCH_AHEAD];
    int w =
        limit->narrow != SL__NARROW_NONE ? SL__TABLE_NARROW : SL__TABLE_WIDE;
    int fast = limit->packed_fast && cost <= limit->cfg.burst;

    sl__memory_start(ms, now);
    for (size_t i = 0; i < n + BATCH_AHEAD; i++) {
        if (i >= BATCH_AHEAD) {
            size_t j = i - BATCH_AHEAD, r = j % BATCH_AHEAD;
            int err;
            sl__shard_lock(ring[r].sh);
            if (!fast || decide_packed(ms, ring[r].sh, limit, ring[r].hash,
                                       cost, now, &out[j]) != 0)
                err = decide_locked(ms, &items[r], &ring[r], cost, now,
                                    SL__COMMIT, &out[j]);
            else
                err = 0;
            sl__shard_unlock(ring[r].sh);
            if (err)
                return err;
        }
        if (i < n) {
            size_t r = i % BATCH_AHEAD;
            sl__table *t;
            items[r] = (sl_check_item){limit, keys[i].data, keys[i].len};
            ring[r] = sl__memory_ref_of(ms, &items[r]);
            t = &ring[r].sh->t[w];
            uint64_t cap = __atomic_load_n(&t->cap, __ATOMIC_RELAXED);
            unsigned char *slots = __atomic_load_n(&t->slots, __ATOMIC_RELAXED);
            __builtin_prefetch(slots +
                                   (((ring[r].hash & UINT32_MAX) * cap) >> 32) *
                                       sl__stride_of[w],
                               1);
        }
    }
    return 0;
}

/* Several items: one alone takes the one-item paths, without the
 * bookkeeping of an atomic call (memory.c's). */
static int check_multi(sl_store *base, const sl_check_item *items,
                       const int64_t *costs, size_t n, sl_nanos now,
                       int record, sl_decision *each)
{
    if (n == 1 && !record)
        return check_one(base, items[0].limit, items[0].key,
                         items[0].key_len, costs[0], now, each);
    if (n == 1)
        return check_other((sl__memory_store *)base, items, costs[0], now,
                           SL__RECORD, each);
    return sl__memory_check_all(base, items, costs, n, now, record, each);
}

static const sl__store_type memory_type = {
    .check_one = check_one,
    .check_multi = check_multi,
    .check_batch = check_batch,
    .sweep = sl__memory_sweep,
    .stats = sl__memory_stats,
    .destroy = sl__memory_destroy,
};

sl_store *sl_memory_store_new(const sl_memory_options *opts)
{
    return sl__memory_store_make(opts, &memory_type);
}
