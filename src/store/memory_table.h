/*
 * memory_table.h - the memory store's hash table (memory_table.c): open
 * addressing with Robin Hood order, of fixed-size slots identified by a
 * 64-bit hash, and the coarse time stamps every slot carries.
 *
 * Two slot sizes, one code: a narrow slot (24 bytes) holds a state packed
 * in one word (core/narrow.h), a wide one (32 bytes) a whole sl__state.
 * Every function takes the table's kind (SL__TABLE_NARROW or
 * SL__TABLE_WIDE) next to the table; callers pass a constant where they
 * can, so that each inlined copy works on a constant stride.  The home
 * slot of a hash is picked from its low 32 bits by multiply-shift, so a
 * table may have any size and can grow by a quarter instead of doubling.
 * Tables are 64-byte aligned: a wide slot sits in one cache line, a
 * narrow one in one or (a quarter of them) two.
 *
 * Invariants (sl__table_check): a slot is empty iff its hash is 0; a key
 * sits at or after its home slot with no empty slot in between (Robin
 * Hood order: a key's distance from home is at most one more than its
 * predecessor's); count is the number of full slots and count <= cap *
 * 7/8, which keeps probe runs short.
 *
 * What is looked up on every decision (sl__table_find and the slot
 * accessors) is static inline here; what changes the table (place,
 * remove, grow) is in memory_table.c.  Not thread-safe: the caller holds
 * the table's lock (memory.c's shard lock).
 */
#ifndef SL_STORE_MEMORY_TABLE_H
#define SL_STORE_MEMORY_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

enum {
    SL__TABLE_NARROW = 0,
    SL__TABLE_WIDE = 1,
    /* Ticks of 2^28 ns (268 ms) keep expiry and recency in 32 bits:
     * expired state is reclaimed at most 268 ms late. */
    SL__TICK_SHIFT = 28,
};

#define SL__HEAP_FLAG 0x80000000u /* in a wide slot's used: it owns heap */

/* Every slot ends with these; the hash comes first. */
typedef struct sl__stamps {
    uint32_t expires; /* tick at which the state is initial, rounded up */
    uint32_t used;    /* tick of the last decision | SL__HEAP_FLAG */
} sl__stamps;

typedef struct sl__slot {
    uint64_t hash; /* 0: empty */
    sl__state state;
    sl__stamps st;
} sl__slot;

typedef struct sl__nslot {
    uint64_t hash; /* 0: empty */
    uint64_t word; /* the state, packed (narrow.h) */
    sl__stamps st;
} sl__nslot;

/* Slot sizes by table, SL__TABLE_NARROW and SL__TABLE_WIDE. */
static const uint32_t sl__stride_of[2] = {sizeof(sl__nslot), sizeof(sl__slot)};

typedef struct sl__table {
    unsigned char *slots; /* cap slots of sl__stride_of[] bytes */
    uint32_t cap;         /* slots */
    uint32_t count;       /* full slots */
} sl__table;

/* ---- stamps ---- */

/*
 * Slots keep coarse 32-bit ticks of 2^28 ns (268 ms) from an epoch the
 * store sets 2^31 ticks (18 years) before its first decision, so that
 * times from 18 years before to 18 years after it are representable.
 * Later, expiry ticks saturate (such state is then only evicted, never
 * reclaimed as expired) and recency ticks wrap, which is harmless because
 * ages, not stamps, are compared.
 */

/* Ticks since the epoch, negative before it (floor). */
static inline int64_t sl__ticks_at(int64_t epoch, sl_nanos t)
{
    /* now <= 2^62 and epoch >= -2^59: the difference fits. */
    return (t - epoch) >> SL__TICK_SHIFT;
}

/* An expiry tick, rounded up, clamped to [0, UINT32_MAX]. */
static inline uint32_t sl__expiry_at(int64_t epoch, sl_nanos t)
{
    int64_t d;
    if (__builtin_sub_overflow(t, epoch, &d) ||
        d > ((int64_t)UINT32_MAX << SL__TICK_SHIFT))
        return UINT32_MAX; /* (also: a saturated expiry, INT64_MAX) */
    if (d <= 0)
        return 0;
    return (uint32_t)((d + ((int64_t)1 << SL__TICK_SHIFT) - 1) >>
                      SL__TICK_SHIFT);
}

/* Has a slot's state expired at tick `now`? */
static inline int sl__expired_at(const sl__stamps *s, int64_t now)
{
    return s->expires != UINT32_MAX && (int64_t)s->expires <= now;
}

/* Recency wraps every 2^31 ticks (18 years): ages, not stamps, compare. */
static inline uint32_t sl__age_of(const sl__stamps *s, int64_t now)
{
    return ((uint32_t)now - (s->used & ~SL__HEAP_FLAG)) & ~SL__HEAP_FLAG;
}

/* ---- slots ---- */

__attribute__((always_inline)) static inline unsigned char *
sl__table_slot(const sl__table *t, int w, uint32_t i)
{
    return t->slots + (size_t)i * sl__stride_of[w];
}

static inline uint64_t sl__table_hash(const sl__table *t, int w, uint32_t i)
{
    return *(const uint64_t *)sl__table_slot(t, w, i);
}

static inline sl__stamps *sl__stamps_of(unsigned char *p, int w)
{
    return (sl__stamps *)(p + sl__stride_of[w] - sizeof(sl__stamps));
}

static inline uint32_t sl__table_index(const sl__table *t, int w,
                                       const unsigned char *p)
{
    return (uint32_t)((size_t)(p - t->slots) / sl__stride_of[w]);
}

static inline uint32_t sl__table_home(const sl__table *t, uint64_t hash)
{
    return (uint32_t)(((hash & UINT32_MAX) * t->cap) >> 32);
}

static inline uint32_t sl__table_next(const sl__table *t, uint32_t i)
{
    return i + 1 == t->cap ? 0 : i + 1;
}

/* How far slot i is from hash's home. */
static inline uint32_t sl__table_dist(const sl__table *t, uint32_t i,
                                      uint64_t hash)
{
    uint32_t home = sl__table_home(t, hash);
    return i >= home ? i - home : i + t->cap - home;
}

/* hash's slot in table w, or NULL. */
__attribute__((always_inline)) static inline unsigned char *
sl__table_find(const sl__table *t, int w, uint64_t hash)
{
    uint32_t i = sl__table_home(t, hash);
    for (uint32_t d = 0;; d++) {
        unsigned char *p = sl__table_slot(t, w, i);
        uint64_t h = *(const uint64_t *)p;
        if (h == hash)
            return p;
        /* Robin Hood: a richer slot than us means we are not here. */
        if (h == 0 || sl__table_dist(t, i, h) < d)
            return NULL;
        i = sl__table_next(t, i);
    }
}

/* ---- size ---- */

static inline size_t sl__table_bytes(int w, uint32_t cap)
{
    return (size_t)cap * sl__stride_of[w];
}

/* Would count keys break the 7/8 load bound? */
static inline int sl__table_over_load(const sl__table *t, uint32_t count)
{
    return (uint64_t)count * 8 > (uint64_t)t->cap * 7;
}

/* ---- changes (memory_table.c) ---- */

/* An empty table of cap slots: 0, or SL_ENOMEM. */
int sl__table_init(sl__table *t, int w, uint32_t cap);
/* Frees the slots (not what wide slots' states hold: the caller's). */
void sl__table_release(sl__table *t);

/* Places the slot at e (sl__stride_of[w] bytes), whose key is not in the
 * table; the table has a free slot.  Other slots may move. */
void sl__table_place(sl__table *t, int w, const void *e);
/* Removes slot i (without freeing what it holds); other slots may move. */
void sl__table_remove(sl__table *t, int w, uint32_t i);
/* Moves every slot into a table of new_cap slots: 0, or SL_ENOMEM with
 * the table unchanged. */
int sl__table_grow(sl__table *t, int w, uint32_t new_cap);

/* 0 if table w keeps the invariants above, else -1. */
int sl__table_check(const sl__table *t, int w);

#endif
