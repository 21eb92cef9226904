/*
 * internal.h - declarations shared inside libsluice, never installed.
 *
 * Three tiers of names, as in libuv: sl_ is the public API (sluice.h),
 * sl__ is shared between the library's files (here), and everything else
 * is static to its file.
 */
#ifndef SL_INTERNAL_H
#define SL_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "sluice.h"

/* 128-bit arithmetic keeps every product of a count and a duration exact
 * (2^40 * 2^63 < 2^127).  gcc and clang provide it on 64-bit targets. */
__extension__ typedef __int128 sl__i128;

#define SL__MIN(a, b) ((a) < (b) ? (a) : (b))
#define SL__MAX(a, b) ((a) > (b) ? (a) : (b))

/*
 * The state one key holds for one limit: two 64-bit words whose meaning
 * each algorithm defines at the top of its file.  Algorithms with a
 * variable-size state (the logs) keep a pointer to the heap in word 0.
 * All-zero is the initial state of every algorithm.
 */
typedef struct sl__state {
    int64_t w[2];
} sl__state;

/*
 * How an algorithm applies a request to a state.  PEEK decides without
 * changing anything that matters (it may drop what time has erased and
 * reserve room, so that a later COMMIT cannot fail).  COMMIT consumes the
 * cost if the request fits.  REFUSE records a request that was rejected by
 * another limit of the same call: it consumes nothing, but a sliding_log
 * with SL_LOG_REJECTED logs the attempt.  RECORD (SL_RECORD) consumes the
 * cost whether or not it fits, because the request has happened anyway:
 * windows and logs count every unit, and the buckets are left empty rather
 * than in debt beyond their capacity (docs/algorithms.md, "Recording").
 * The decision still says whether the request fitted, and a request that
 * did not is told when the same cost would fit after being recorded.
 */
typedef enum sl__mode { SL__PEEK, SL__COMMIT, SL__REFUSE, SL__RECORD } sl__mode;

/* One request as an algorithm sees it. */
typedef struct sl__call {
    int64_t cost;
    sl_nanos now;
    sl__mode mode;
    size_t max_heap; /* most bytes a heap state may grow to */
} sl__call;

/*
 * An algorithm: a small const vtable.  check() fills *d, and returns 0 or a
 * negative SL_E* code (only logs can fail, when they cannot grow).
 * *expires is when the state will be back to its initial value if nothing
 * else arrives; expires <= now means the state is initial and can be
 * dropped.  `heap` is set for the algorithms whose state is an event log
 * (eventlog.h), on the heap (word 0) once it holds more than one event,
 * which a store frees with sl__heap_release().
 */
typedef struct sl__algo {
    sl_algorithm id;
    const char *name;
    int (*check)(const sl_limit *lim, sl__state *st, const sl__call *call,
                 sl_decision *d, sl_nanos *expires);
    int heap;
    /* check() on a state packed in one word (core/narrow.h), in place,
     * for a store's narrow slots: returns 0 with *word, *d and *expires
     * written if the new state surely packs, else 1 with nothing written
     * (the store then decides with check()).  NULL: not offered. */
    int (*check_word)(const sl_limit *lim, uint64_t *word, const sl__call *call,
                      sl_decision *d, sl_nanos *expires);
} sl__algo;

/* What a heap state (an event log, eventlog.h) holds, and freeing it. */
size_t sl__heap_bytes(const sl__state *st);
void sl__heap_release(sl__state *st);
/* 0 if a heap state's invariants hold (eventlog.h), -1 if not. */
int sl__heap_check(const sl__state *st);

extern const sl__algo sl__token_bucket;
extern const sl__algo sl__gcra;
extern const sl__algo sl__leaky_bucket;
extern const sl__algo sl__fixed_window;
extern const sl__algo sl__sliding_log;
extern const sl__algo sl__sliding_window;
extern const sl__algo sl__stepped_window;
/* The buckets' checks for an override (its states carry a tag,
 * schedule.h), and a bucket overridden to L = 0 (schedule.c). */
extern const sl__algo sl__token_bucket_override;
extern const sl__algo sl__gcra_override;
extern const sl__algo sl__leaky_bucket_override;
extern const sl__algo sl__sched_stopped;

/*
 * A limit, normalised.  The emission interval T = P / L is kept as the
 * exact fraction t_num / t_den (reduced), so the buckets never round:
 * times are kept as a whole number of ns plus a numerator over t_den.
 */
/* The one-word forms of a state (core/narrow.h); NONE: always two. */
typedef enum sl__narrow_kind {
    SL__NARROW_NONE,
    SL__NARROW_SCHEDULE,
    SL__NARROW_WINDOW,
    SL__NARROW_SLIDING
} sl__narrow_kind;

struct sl_limit {
    sl_limit_config cfg; /* burst and step filled in */
    const sl__algo *algo;
    /* How the base's states pack into one word (narrow.h): the kind, and
     * for a schedule the bits of its fraction.  From the base's numbers,
     * so an override reads the states its base packed. */
    uint8_t narrow;
    uint8_t frac_bits;
    /* A base token_bucket or gcra whose states pack and whose capacity
     * is below 2^62: a store may decide its COMMITs of cost <= B on a
     * packed state with sl__sched_fast directly (memory_decide.c). */
    uint8_t packed_fast;
    uint64_t ident; /* hash of the base's parameters and id */
    int64_t t_num;  /* T = t_num / t_den ns, gcd = 1 */
    int64_t t_den;
    int64_t steps; /* stepped_window: P / step */
    /* A bucket's capacity B * T in ticks (B * t_num) when it is below
     * 2^62, else 0, and that in whole ns (most_ticks / t_den): the bounds
     * of its 64-bit path (schedule.h, sl__sched_fast). */
    int64_t most_ticks;
    int64_t most_ns;
    /* The schedules' state tag (schedule.h): tag_bits is what this
     * limit writes above a state's fraction, 0 under the base's numbers,
     * else L << 32.  own_span is t_den for a limit that takes a state
     * whose w[1] is below it as its own (a base), 0 for an override,
     * which converts every state it reads (SL__SCHED_CHECKS). */
    uint64_t tag_bits;
    uint64_t own_span;
    /* The configuration whose state this limit shares: its own, or for
     * an override (sl_limit_override) its base's, whose identity it has. */
    sl_limit_config base;
    int override; /* cfg's numbers differ from base's */
    /* A token_bucket or gcra whose rule leases its units (sync: {mode:
     * lease}): on Redis every call of it applies its leases' floor
     * (lease_bucket.lua).  Set by the rules; an override keeps its
     * base's. */
    int leased;
};

/* The schedules record the L a state was written under in the 31 bits
 * above a 32-bit fraction (schedule.h), so only limits whose L fits are
 * overridden. */
#define SL__TAG_MAX_LIMIT ((INT64_C(1) << 31) - 1)
#define SL__FRAC_MASK UINT64_C(0xffffffff)

/* Saturating int64 addition: a clock near the end of time stays there. */
static inline int64_t sl__sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* Ceiling of a non-negative 128-bit n over positive d, clamped to int64. */
static inline int64_t sl__ceil_div128(sl__i128 n, sl__i128 d)
{
    if (d == 1)
        return n > INT64_MAX ? INT64_MAX : (int64_t)n;
    /* Nearly always both fit in 64 bits: avoid the 128-bit libcall. */
    if (n >= 0 && n <= INT64_MAX && d <= INT64_MAX) {
        uint64_t un = (uint64_t)n, ud = (uint64_t)d;
        return (int64_t)(un / ud + (un % ud != 0));
    }
    sl__i128 q = (n + d - 1) / d;
    return q > INT64_MAX ? INT64_MAX : (int64_t)q;
}

/* Greatest common divisor of a >= 1 and b >= 0. */
static inline int64_t sl__gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* A 128-bit intermediate as int64, saturating. */
static inline int64_t sl__clamp64(sl__i128 v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* Fills the fields every algorithm reports the same way. */
static inline void sl__decision_init(sl_decision *d, const sl_limit *lim)
{
    d->allowed = 0;
    d->limit = lim->cfg.limit;
    d->remaining = 0;
    d->reset_after = 0;
    d->retry_after = 0;
    d->delay = 0;
}

/* SipHash-1-3 of an 8-byte prefix followed by data, keyed by k0, k1. */
uint64_t sl__siphash13(uint64_t k0, uint64_t k1, uint64_t prefix,
                       const void *data, size_t len);

/*
 * Stores are a small vtable.  check_multi() decides n items atomically,
 * item i costing costs[i]: n == 1 is a plain check.  With `record` every
 * item is applied in RECORD mode; otherwise all items are committed or
 * none.  The public calls have validated every argument.  last_error may
 * be NULL (a store whose failures need no explanation beyond their code).
 * Stores: memory.c, redis.c.
 */
typedef struct sl__store_type {
    /* sl_check, committed, without the bookkeeping of many items: its
     * own arguments, so that sl_check ends in a jump to it; *out is
     * written only on success.  May be NULL: check_multi then decides. */
    int (*check_one)(sl_store *st, const sl_limit *limit, const void *key,
                     size_t key_len, int64_t cost, sl_nanos now,
                     sl_decision *out);
    int (*check_multi)(sl_store *st, const sl_check_item *items,
                       const int64_t *costs, size_t n, sl_nanos now, int record,
                       sl_decision *each);
    int (*check_batch)(sl_store *st, const sl_limit *limit, const sl_key *keys,
                       size_t n, int64_t cost, sl_nanos now, sl_decision *out);
    size_t (*sweep)(sl_store *st, sl_nanos now, size_t max_slots);
    void (*stats)(sl_store *st, sl_store_stats *out);
    void (*destroy)(sl_store *st);
    void (*last_error)(sl_store *st, char *buf, size_t len);
} sl__store_type;

struct sl_store {
    const sl__store_type *type;
    size_t max_key_len;
};

/* The input checks of every decision call, on a store or a Redis call
 * whose keys may be max_key_len bytes long (decision.c): 0 or SL_E*. */
int sl__check_input(size_t max_key_len, const sl_check_item *items, size_t n,
                    const int64_t *costs, sl_nanos now);

/* Writes a message into a caller's error buffer, unless it is NULL or
 * empty (error.c). */
__attribute__((format(printf, 3, 4))) void sl__set_err(char *buf, size_t len,
                                                       const char *fmt, ...);

/* A whole decimal number of at most 9 digits in [lo, hi] spanning
 * exactly [s, s + n): 0, or -1 (Redis URLs and redirections). */
static inline int sl__parse_int(const char *s, size_t n, long lo, long hi,
                                int *out)
{
    long v = 0;
    if (n == 0 || n > 9)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/*
 * A caller's options struct (sl_memory_options, sl_redis_options,
 * sl_rules_options), whose leading size_t says how many bytes it has,
 * copied into dst, `known` bytes of this library's layout
 * (options.c): the caller's fields within both sizes, the rest zero (each
 * field's default).  Sizes below `first`, the end of the struct's first
 * layout, are refused, and so are bytes past `known` that are not zero: a
 * newer caller asking for something this library cannot do.  0 or
 * SL_EINVAL (dst then untouched, and a message naming the struct `name`
 * in errbuf unless it is NULL).
 */
int sl__options_copy(void *dst, size_t known, size_t first, const void *src,
                     const char *name, char *errbuf, size_t errlen);

/* Asserts the memory store's invariants (tests): 0 or -1. */
int sl__memory_check(sl_store *store);

#endif /* SL_INTERNAL_H */
