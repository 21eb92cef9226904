/*
 * narrow.h - a state in one 64-bit word, for stores that hold many keys.
 *
 * Most algorithms' state is two words (internal.h) only so that every
 * value it can take has a place; the values a live key holds nearly
 * always fit in one.  The memory store keeps such keys in 24-byte slots
 * instead of 32 (memory.c), which is what brings a key under 32 bytes.
 * Packing is exact or refused: sl__narrow_pack() fails for a state the
 * word cannot hold, and the store then keeps that key in a full slot.
 * The formats, by the limit's kind (lim->narrow, set in limit.c from the
 * base configuration, so that an override reads its base's states):
 *
 *   SCHEDULE (token_bucket, gcra, leaky_bucket; schedule.h): S as
 *     (w[0] - origin) << frac_bits | w[1], frac_bits the bits of the
 *     base's fraction (t_den - 1), at most SL__NARROW_MAX_FRAC.  A tagged
 *     state (an override's, w[1] >= 2^32) never fits.  origin is the
 *     store's choice (the memory store: 2^40 ns before its first
 *     decision), so S must lie in [origin, origin + 2^(64 - frac_bits)).
 *   WINDOW (fixed_window): k << 32 | count, k and count below 2^32 (a
 *     window index on the wall clock fits until 2106 for P >= 1 s).
 *   SLIDING (sliding_window): k << 32 | prev << 16 | cur, k below 2^32
 *     and both counts below 2^16.
 *
 * The all-zero state is never stored (a store drops initial state), so no
 * word needs to mean "absent".
 */
#ifndef SL_NARROW_H
#define SL_NARROW_H

#include "internal.h"

/* 2^(64 - 16) ns is 3.2 days of S past origin: more fraction bits would
 * leave too little room for time to be worth a slot of their own. */
#define SL__NARROW_MAX_FRAC 16

/* The SCHEDULE form (above) with frac_bits fb: 1 and *word set if st
 * fits, else 0. */
static inline int sl__narrow_pack_schedule(unsigned fb, const sl__state *st,
                                           int64_t origin, uint64_t *word)
{
    uint64_t w1 = (uint64_t)st->w[1], most = UINT64_MAX >> fb;
    /* S >= origin, so the unsigned difference is exact; it must leave fb
     * bits free. */
    uint64_t d = (uint64_t)st->w[0] - (uint64_t)origin;
    if (st->w[0] < origin || d > most || w1 >> fb != 0)
        return 0;
    *word = d << fb | w1;
    return 1;
}

static inline void sl__narrow_unpack_schedule(unsigned fb, uint64_t word,
                                              int64_t origin, sl__state *st)
{
    st->w[0] = (int64_t)((uint64_t)origin + (word >> fb));
    st->w[1] = (int64_t)(word & ((UINT64_C(1) << fb) - 1));
}

/* The WINDOW and SLIDING forms (above), for states known to fit. */
static inline uint64_t sl__narrow_pack_window(const sl__state *st)
{
    return (uint64_t)st->w[0] << 32 | (uint64_t)st->w[1];
}

static inline void sl__narrow_unpack_window(uint64_t word, sl__state *st)
{
    st->w[0] = (int64_t)(word >> 32);
    st->w[1] = (int64_t)(word & UINT32_MAX);
}

static inline uint64_t sl__narrow_pack_sliding(const sl__state *st)
{
    uint64_t w1 = (uint64_t)st->w[1];
    return (uint64_t)st->w[0] << 32 | (w1 >> 32) << 16 | (w1 & 0xffff);
}

static inline void sl__narrow_unpack_sliding(uint64_t word, sl__state *st)
{
    st->w[0] = (int64_t)(word >> 32);
    st->w[1] = (int64_t)((word >> 16 & 0xffff) << 32 | (word & 0xffff));
}

/* 1 and *word set if st fits one word, else 0. */
static inline int sl__narrow_pack(const sl_limit *lim, const sl__state *st,
                                  int64_t origin, uint64_t *word)
{
    uint64_t w0 = (uint64_t)st->w[0], w1 = (uint64_t)st->w[1];
    switch (lim->narrow) {
    case SL__NARROW_SCHEDULE:
        return sl__narrow_pack_schedule(lim->frac_bits, st, origin, word);
    case SL__NARROW_WINDOW:
        if ((w0 | w1) >> 32 != 0)
            return 0;
        *word = sl__narrow_pack_window(st);
        return 1;
    case SL__NARROW_SLIDING:
        if (w0 >> 32 != 0 || (w1 & UINT64_C(0xffff0000ffff0000)) != 0)
            return 0;
        *word = sl__narrow_pack_sliding(st);
        return 1;
    default:
        return 0;
    }
}

/* The state sl__narrow_pack() packed into word, for the same kind of
 * limit and origin (a kind other than NONE: every limit that shares a
 * state has its base's kind). */
static inline void sl__narrow_unpack(const sl_limit *lim, uint64_t word,
                                     int64_t origin, sl__state *st)
{
    switch (lim->narrow) {
    case SL__NARROW_SCHEDULE:
        sl__narrow_unpack_schedule(lim->frac_bits, word, origin, st);
        break;
    case SL__NARROW_WINDOW:
        sl__narrow_unpack_window(word, st);
        break;
    default: /* SL__NARROW_SLIDING */
        sl__narrow_unpack_sliding(word, st);
        break;
    }
}

#endif /* SL_NARROW_H */
