/*
 * memory_table.c - the changes to the memory store's Robin Hood tables
 * (memory_table.h): allocation, insertion, deletion without tombstones,
 * growth, and the invariant check.
 *
 * Separate from memory.c, which decides what the tables hold (shards,
 * where a key lives, reclaiming and evicting under the memory cap): the
 * table knows only slots and hashes.  Its lookup, on every decision,
 * stays inline in the header.
 */
#include "store/memory_table.h"

#include <stdlib.h>
#include <string.h>

/* Places the slot at e in table w.  (Inlined per table below, so that
 * each copy is of a constant size, not a call to memcpy.) */
__attribute__((always_inline)) static inline void place_in(sl__table *t, int w,
                                                           const void *e)
{
    const size_t size = sl__stride_of[w];
    sl__slot carry, tmp; /* room for either size */
    uint32_t i = sl__table_home(t, *(const uint64_t *)e);

    memcpy(&carry, e, size);
    for (uint32_t d = 0;; d++) {
        unsigned char *p = sl__table_slot(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == 0) {
            memcpy(p, &carry, size);
            t->count++;
            return;
        }
        uint32_t sd = sl__table_dist(t, i, h);
        if (sd < d) {
            memcpy(&tmp, p, size);
            memcpy(p, &carry, size);
            memcpy(&carry, &tmp, size);
            d = sd;
        }
        i = sl__table_next(t, i);
    }
}

/* Removes slot i by shifting its run back: no tombstones to clean up. */
__attribute__((always_inline)) static inline void remove_in(sl__table *t, int w,
                                                            uint32_t i)
{
    for (;;) {
        uint32_t j = sl__table_next(t, i);
        uint64_t h = sl__table_hash(t, w, j);
        if (h == 0 || sl__table_dist(t, j, h) == 0)
            break;
        memcpy(sl__table_slot(t, w, i), sl__table_slot(t, w, j),
               sl__stride_of[w]);
        i = j;
    }
    memset(sl__table_slot(t, w, i), 0, sl__stride_of[w]);
    t->count--;
}

void sl__table_place(sl__table *t, int w, const void *e)
{
    if (w == SL__TABLE_NARROW)
        place_in(t, SL__TABLE_NARROW, e);
    else
        place_in(t, SL__TABLE_WIDE, e);
}

void sl__table_remove(sl__table *t, int w, uint32_t i)
{
    if (w == SL__TABLE_NARROW)
        remove_in(t, SL__TABLE_NARROW, i);
    else
        remove_in(t, SL__TABLE_WIDE, i);
}

/* Zeroed slots on a cache-line boundary, so that no wide slot straddles
 * two lines: a decision then touches one line of the table (malloc's
 * 16-byte alignment would split every other 32-byte slot). */
static unsigned char *slots_new(int w, uint32_t cap)
{
    size_t bytes = (sl__table_bytes(w, cap) + 63) & ~(size_t)63;
    unsigned char *s = aligned_alloc(64, bytes);
    if (s != NULL)
        memset(s, 0, bytes);
    return s;
}

int sl__table_init(sl__table *t, int w, uint32_t cap)
{
    t->slots = slots_new(w, cap);
    t->cap = cap;
    t->count = 0;
    return t->slots != NULL ? 0 : SL_ENOMEM;
}

void sl__table_release(sl__table *t)
{
    free(t->slots);
    t->slots = NULL;
}

int sl__table_grow(sl__table *t, int w, uint32_t new_cap)
{
    unsigned char *old = t->slots;
    uint32_t old_cap = t->cap;
    unsigned char *n = slots_new(w, new_cap);
    if (n == NULL)
        return SL_ENOMEM;
    /* Atomic stores: sl_check_batch reads both without the lock, only to
     * prefetch (a stale pair prefetches a wrong line, harmlessly). */
    __atomic_store_n(&t->slots, n, __ATOMIC_RELAXED);
    __atomic_store_n(&t->cap, new_cap, __ATOMIC_RELAXED);
    t->count = 0;
    for (uint32_t i = 0; i < old_cap; i++) {
        const unsigned char *p = old + (size_t)i * sl__stride_of[w];
        if (*(const uint64_t *)p != 0)
            sl__table_place(t, w, p);
    }
    free(old);
    return 0;
}

int sl__table_check(const sl__table *t, int w)
{
    uint32_t count = 0;
    int bad = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        unsigned char *p = sl__table_slot(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == 0)
            continue;
        count++;
        uint32_t prev = i == 0 ? t->cap - 1 : i - 1;
        uint32_t d = sl__table_dist(t, i, h);
        uint64_t ph = sl__table_hash(t, w, prev);
        /* Robin Hood order: a displaced key follows a key at most one
         * step less displaced, never an empty slot. */
        bad |= d > 0 && (ph == 0 || sl__table_dist(t, prev, ph) + 1 < d);
        bad |= sl__table_find(t, w, h) != p;
    }
    return bad || count != t->count || sl__table_over_load(t, t->count) ? -1
                                                                        : 0;
}
