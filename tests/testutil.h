/*
 * testutil.h - what the algorithm tests share: assertions that print both
 * values in signed decimal, a fixed-seed memory store, limits made or
 * failed loudly, one decision per call, a seeded PRNG, and the marker for
 * tests that document a known library bug.
 *
 * Everything is static: each test program includes this once.
 */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sluice.h"

#define SEC SL_NS_PER_SEC
#define MS SL_NS_PER_MS
#define MINUTE (60 * SEC)
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)

/* Exact products of counts and durations (2^40 * 2^63 fits). */
__extension__ typedef __int128 i128;

/* cmocka prints integers in unsigned hex; these print both values in
 * signed decimal, with the expressions that produced them. */
#define expect_cmp(a, op, b)                                                 \
    do {                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                  \
        if (!(a_ op b_))                                                     \
            fail_msg("expected %s %s %s, got %lld and %lld", #a, #op, #b,    \
                     a_, b_);                                                \
    } while (0)
#define expect_eq(a, b) expect_cmp(a, ==, b)
#define expect_le(a, b) expect_cmp(a, <=, b)
#define expect_ge(a, b) expect_cmp(a, >=, b)

/* The same with a printf-style context (which trace, which request). */
#define expect_eq_at(a, b, ...)                                              \
    do {                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                  \
        if (a_ != b_) {                                                      \
            print_error(__VA_ARGS__);                                        \
            fail_msg(": expected %s == %s, got %lld and %lld", #a, #b, a_,   \
                     b_);                                                    \
        }                                                                    \
    } while (0)

/* Shorter random traces under sanitizers (scripts/test.sh sets it). */
static inline int tu_quick(void)
{
    const char *q = getenv("SL_TEST_QUICK");
    return q != NULL && *q != '\0' && *q != '0';
}

/* A memory store with a fixed hash seed and a cap far above what the tests
 * hold, so that nothing is ever evicted behind their back. */
static inline sl_store *tu_store(void)
{
    sl_memory_options o = {.size = sizeof(sl_memory_options),
                           .max_bytes = (size_t)1 << 30,
                           .seed0 = UINT64_C(0x5eed0f5e1ce),
                           .seed1 = UINT64_C(0x7e575111)};
    sl_store *st = sl_memory_store_new(&o);
    assert_non_null(st);
    return st;
}

static inline sl_limit *tu_limit_cfg(const sl_limit_config *cfg)
{
    sl_limit *lim = NULL;
    char err[256] = "";
    int rc = sl_limit_new(cfg, &lim, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_limit_new: %s (%s)", sl_err_name(rc), err);
    assert_non_null(lim);
    return lim;
}

/* A limit with burst (buckets; 0 = L) and nothing else set. */
static inline sl_limit *tu_limit(sl_algorithm alg, int64_t limit,
                                 sl_nanos period, int64_t burst)
{
    sl_limit_config c = {.algorithm = alg, .limit = limit, .period = period,
                         .burst = burst};
    return tu_limit_cfg(&c);
}

/* One decision for a NUL-terminated key; any error fails the test. */
static inline sl_decision tu_check(sl_store *st, const sl_limit *lim,
                                   const char *key, int64_t cost,
                                   sl_nanos now)
{
    sl_decision d;
    int rc;
    memset(&d, 0x5a, sizeof(d)); /* a field left unset shows as garbage */
    rc = sl_check(st, lim, key, strlen(key), cost, now, &d);
    if (rc != 0)
        fail_msg("sl_check(key '%s', cost %lld, now %lld): %s", key,
                 (long long)cost, (long long)now, sl_err_name(rc));
    return d;
}

/* ---- a seeded PRNG: splitmix64 ---- */

static inline uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [0, n) for n >= 1 (the modulo bias is irrelevant here). */
static inline int64_t tu_below(uint64_t *s, int64_t n)
{
    return (int64_t)(tu_rand(s) % (uint64_t)n);
}

/* Uniform in [lo, hi]. */
static inline int64_t tu_range(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + tu_below(s, hi - lo + 1);
}

/* ---- exact integer helpers ---- */

static inline i128 tu_ceil_div(i128 n, i128 d)
{
    return n >= 0 ? (n + d - 1) / d : -((-n) / d);
}

static inline i128 tu_floor_div(i128 n, i128 d)
{
    return n >= 0 ? n / d : -((-n + d - 1) / d);
}

#endif /* SL_TESTUTIL_H */
