/*
 * test_store.c - the embedded memory store (src/store/memory.c): state that
 * returns to initial is dropped, sl_store_sweep reclaims expired keys
 * incrementally, the memory cap holds (reclaim, then grow, then evict the
 * least recently used), the table's invariants survive growth, backward
 * shift deletions and eviction, and input validation of sl_check.
 *
 * Every store uses a fixed seed so that runs are reproducible; time is
 * passed by hand.  The memory store keeps time in ticks of 2^28 ns (268 ms):
 * expiry is rounded up and recency down to a tick, so the tests leave a
 * few hundred ms between "expires" and "is reclaimed", and LRU rounds are
 * spaced more than a tick apart.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "internal.h"
#include "store/key_hash.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* cmocka prints integers in hex and unsigned; these print both values in
 * signed decimal, with the expressions that produced them. */

/* ---- helpers ---- */

static sl_store *store_new(size_t max_bytes, uint64_t seed0, uint64_t seed1)
{
    sl_memory_options o = {.size = sizeof(sl_memory_options),
                           .max_bytes = max_bytes,
                           .seed0 = seed0,
                           .seed1 = seed1};
    sl_store *st = sl_memory_store_new(&o);
    assert_non_null(st);
    return st;
}

static sl_limit *limit_new(sl_algorithm alg, int64_t limit, sl_nanos period,
                           uint64_t id)
{
    sl_limit_config c = {
        .algorithm = alg, .limit = limit, .period = period, .id = id};
    sl_limit *lim = NULL;
    char err[128] = "";
    int rc = sl_limit_new(&c, &lim, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_limit_new(%s): %d %s", sl_algorithm_name(alg), rc, err);
    return lim;
}

static sl_store_stats stats_of(sl_store *st)
{
    sl_store_stats s;
    sl_store_get_stats(st, &s);
    return s;
}

/* One decision that must not fail; returns it. */
static sl_decision check(sl_store *st, const sl_limit *lim, const void *key,
                         size_t key_len, int64_t cost, sl_nanos now)
{
    sl_decision d;
    int rc = sl_check(st, lim, key, key_len, cost, now, &d);
    if (rc != 0)
        fail_msg("sl_check(cost %lld, now %lld) = %d (%s), expected 0",
                 (long long)cost, (long long)now, rc, sl_err_name(rc));
    return d;
}

static int key_of(char *buf, size_t len, const char *prefix, int i)
{
    return snprintf(buf, len, "%s%d", prefix, i);
}

/* Decides cost 1 for prefix<i>; returns allowed. */
static int take(sl_store *st, const sl_limit *lim, const char *prefix, int i,
                sl_nanos now)
{
    char k[32];
    int n = key_of(k, sizeof(k), prefix, i);
    return check(st, lim, k, (size_t)n, 1, now).allowed;
}

/* A sweep over the whole store: one call visits every shard once. */
static size_t sweep_all(sl_store *st, sl_nanos now)
{
    return sl_store_sweep(st, now, SIZE_MAX);
}

static void expect_valid(sl_store *st)
{
    expect_eq(sl__memory_check(st), 0);
}

static const sl_algorithm all_algorithms[] = {
    SL_TOKEN_BUCKET, SL_GCRA,           SL_LEAKY_BUCKET,   SL_FIXED_WINDOW,
    SL_SLIDING_LOG,  SL_SLIDING_WINDOW, SL_STEPPED_WINDOW,
};
#define NALGS (sizeof(all_algorithms) / sizeof(all_algorithms[0]))

/* ---- state that returns to initial is dropped ---- */

static void test_full_bucket_is_dropped_by_query(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 10, SEC, 0); /* T = 100 ms */
    sl_nanos t0 = 5 * SEC;

    assert_true(check(st, lim, "k", 1, 1, t0).allowed);
    expect_eq(stats_of(st).keys, 1);
    /* Half a token back: not full yet, the state stays. */
    expect_eq(check(st, lim, "k", 1, 0, t0 + 50 * MS).remaining, 9);
    expect_eq(stats_of(st).keys, 1);
    /* Full again at t0 + T: a pure query drops the key. */
    expect_eq(check(st, lim, "k", 1, 0, t0 + 100 * MS).remaining, 10);
    expect_eq(stats_of(st).keys, 0);
    expect_eq(stats_of(st).reclaimed, 0); /* dropped, not reclaimed */
    expect_valid(st);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_every_algorithm_drops_initial_state(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *st = store_new(0, 1, 2);
        sl_limit *lim = limit_new(all_algorithms[a], 4, SEC, 0);
        sl_nanos t0 = 10 * SEC + 300 * MS;

        assert_true(check(st, lim, "k", 1, 2, t0).allowed);
        assert_true(check(st, lim, "k", 1, 1, t0 + 10 * MS).allowed);
        if (stats_of(st).keys != 1)
            fail_msg("%s: keys %llu after two requests, expected 1",
                     sl_algorithm_name(all_algorithms[a]),
                     (unsigned long long)stats_of(st).keys);
        /* Three periods later every algorithm is back to initial (the
         * sliding window counter remembers two windows at most). */
        sl_decision d = check(st, lim, "k", 1, 0, t0 + 3 * SEC);
        expect_eq(d.remaining, 4);
        if (stats_of(st).keys != 0)
            fail_msg("%s: keys %llu after the state expired, expected 0",
                     sl_algorithm_name(all_algorithms[a]),
                     (unsigned long long)stats_of(st).keys);
        expect_valid(st);
        sl_limit_free(lim);
        sl_store_free(st); /* ASan: a log left behind would leak */
    }
}

static void test_query_of_unknown_key_keeps_nothing(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *st = store_new(0, 1, 2);
        sl_limit *lim = limit_new(all_algorithms[a], 3, SEC, 0);
        sl_store_stats before = stats_of(st);

        expect_eq(check(st, lim, "nobody", 6, 0, SEC).remaining, 3);
        /* A request that can never pass consumes nothing either. */
        sl_decision d = check(st, lim, "nobody", 6, 4, SEC);
        expect_eq(d.allowed, 0);
        expect_eq(d.retry_after, -1);
        expect_eq(stats_of(st).keys, 0);
        expect_eq(stats_of(st).bytes, before.bytes);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* ---- sl_store_sweep ---- */

static void test_sweep_reclaims_expired_keys(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 1, SEC, 0);

    for (int i = 0; i < 1000; i++)
        assert_true(take(st, lim, "k", i, 0));
    expect_eq(stats_of(st).keys, 1000);
    /* Nothing has expired yet. */
    expect_eq(sweep_all(st, 500 * MS), 0);
    expect_eq(stats_of(st).keys, 1000);
    /* One second plus rounding to the store's 268 ms ticks later. */
    expect_eq(sweep_all(st, 2 * SEC), 1000);
    sl_store_stats s = stats_of(st);
    expect_eq(s.keys, 0);
    expect_eq(s.reclaimed, 1000);
    expect_eq(s.evicted, 0);
    expect_valid(st);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_sweep_respects_max_slots(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_FIXED_WINDOW, 5, SEC, 0);
    size_t total = 0, calls = 0, slots;

    expect_eq(sl_store_sweep(st, SEC, 100), 0); /* no decision yet */
    for (int i = 0; i < 3000; i++)
        assert_true(take(st, lim, "k", i, 0));
    expect_eq(sl_store_sweep(st, 5 * SEC, 0), 0);
    expect_eq(stats_of(st).keys, 3000);
    /* Every slot is 24 (narrow) or 32 (wide) bytes, so bytes / 24 bounds
     * the slot count. */
    slots = (size_t)stats_of(st).bytes / 24;
    while (stats_of(st).keys > 0) {
        size_t got = sl_store_sweep(st, 5 * SEC, 100);
        expect_le(got, 100);
        total += got;
        calls++;
        /* A reclaimed slot is visited again for the key shifted in. */
        expect_le(calls, (slots + 3000) / 100 + 2);
        expect_eq(stats_of(st).reclaimed, total);
        expect_valid(st);
    }
    expect_eq(total, 3000);
    /* Spread over many calls: at most 100 slots per call. */
    expect_ge(calls, 30);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_sweep_keeps_live_state(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_SLIDING_WINDOW, 2, 10 * SEC, 0);

    for (int i = 0; i < 200; i++) {
        assert_true(take(st, lim, "k", i, SEC));
        assert_true(take(st, lim, "k", i, SEC));
    }
    expect_eq(sweep_all(st, 9 * SEC), 0);
    for (int i = 0; i < 200; i++)
        if (take(st, lim, "k", i, 9 * SEC))
            fail_msg("key %d lost its state to a sweep before expiry", i);
    expect_eq(stats_of(st).keys, 200);
    sl_limit_free(lim);
    sl_store_free(st);
}

/*
 * sl_store_sweep(store, now, SIZE_MAX) sweeps everything once and returns
 * (it used to go round the shards until it had visited SIZE_MAX slots).
 * The sweep runs in a thread so that a regression fails after 10 s
 * instead of hanging.
 */
typedef struct sweep_job {
    sl_store *st;
    size_t reclaimed;
} sweep_job;

static void *sweep_everything(void *arg)
{
    sweep_job *job = arg;
    job->reclaimed = sl_store_sweep(job->st, 2 * SEC, SIZE_MAX);
    return NULL;
}

static void test_sweep_with_huge_max_slots_returns(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 1, SEC, 0);
    sweep_job job = {st, 0};
    pthread_t th;
    struct timespec deadline;

    for (int i = 0; i < 10; i++)
        assert_true(take(st, lim, "k", i, 0));
    assert_int_equal(pthread_create(&th, NULL, sweep_everything, &job), 0);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    if (pthread_timedjoin_np(th, NULL, &deadline) != 0)
        fail_msg("sl_store_sweep(SIZE_MAX) still running after 10 s");
    expect_eq(job.reclaimed, 10);
    sl_limit_free(lim);
    sl_store_free(st);
}

/*
 * A key decided at a time before the store's first decision keeps its
 * state through sweeps (it used to get expiry tick 0, so that any sweep
 * reclaimed it while live).
 */
static void test_sweep_keeps_state_decided_before_first_decision(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 1, 60 * SEC, 0);

    assert_true(check(st, lim, "first", 5, 1, 1000 * SEC).allowed);
    assert_true(check(st, lim, "early", 5, 1, 1 * SEC).allowed);
    expect_eq(sweep_all(st, 1 * SEC), 0);
    expect_eq(check(st, lim, "early", 5, 1, 2 * SEC).allowed, 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

/*
 * Sweeps still reclaim years after the store's first decision (its ticks
 * used to saturate after 4.56 years, after which nothing expired).  The
 * store's ticks cover 18 years either side of its first decision.
 */
static void test_sweep_works_years_after_first_decision(void **state)
{
    (void)state;
    const sl_nanos year = 365 * 86400 * SEC;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 1, 60 * SEC, 0);

    assert_true(check(st, lim, "a", 1, 1, 0).allowed);
    assert_true(check(st, lim, "b", 1, 1, 5 * year).allowed);
    expect_eq(sweep_all(st, 5 * year + 3600 * SEC), 2);
    assert_true(check(st, lim, "c", 1, 1, 17 * year).allowed);
    expect_eq(sweep_all(st, 17 * year + 30 * SEC), 0); /* still live */
    expect_eq(sweep_all(st, 17 * year + 3600 * SEC), 1);
    expect_eq(stats_of(st).keys, 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- the memory cap ---- */

static void test_cap_never_fails_nor_exceeded(void **state)
{
    (void)state;
    sl_store *st = store_new(MIB, 1, 2);
    /* Long-lived state: nothing expires, so only eviction makes room. */
    sl_limit *lim = limit_new(SL_GCRA, 10, 3600 * SEC, 0);
    const int n = 200000;
    sl_store_stats s;

    for (int i = 0; i < n; i++) {
        char k[32];
        int len = key_of(k, sizeof(k), "key-", i);
        sl_decision d;
        int rc = sl_check(st, lim, k, (size_t)len, 1,
                          SEC + (i / 1000) * 100 * MS, &d);
        if (rc != 0)
            fail_msg("insert %d failed: %d (%s)", i, rc, sl_err_name(rc));
        if (i % 10000 == 9999) {
            s = stats_of(st);
            expect_le(s.bytes, s.max_bytes);
            expect_valid(st);
        }
    }
    s = stats_of(st);
    expect_eq(s.max_bytes, MIB);
    expect_le(s.bytes, MIB);
    expect_eq(s.reclaimed, 0);
    /* Each distinct key was inserted once: it is held or was evicted. */
    expect_eq(s.keys + s.evicted, n);
    /* The cap holds tens of thousands of 32-byte slots. */
    expect_ge(s.keys, 20000);
    print_message("cap 1 MiB: %llu keys held, %llu evicted, %llu bytes\n",
                  (unsigned long long)s.keys, (unsigned long long)s.evicted,
                  (unsigned long long)s.bytes);
    expect_valid(st);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_expired_reclaimed_before_live_evicted(void **state)
{
    (void)state;
    sl_store *st = store_new(MIB, 1, 2);
    sl_limit *short_lim = limit_new(SL_TOKEN_BUCKET, 1, SEC, 0);
    sl_limit *long_lim = limit_new(SL_TOKEN_BUCKET, 1, 3600 * SEC, 0);
    const int old_keys = 15000, new_keys = 15000;
    sl_store_stats s;

    /* 15000 keys fit under 1 MiB without eviction: 59 per shard on
     * average, where a shard holds 98 (7/8 of its 112 slots). */
    for (int i = 0; i < old_keys; i++)
        assert_true(take(st, short_lim, "old", i, 0));
    s = stats_of(st);
    expect_eq(s.keys, old_keys);
    expect_eq(s.evicted, 0);
    expect_valid(st);

    /* Two seconds on, every old key has expired.  The new keys do not
     * fit beside them (30000 > ~25000): room must come from the old. */
    for (int i = 0; i < new_keys; i++)
        assert_true(take(st, long_lim, "new", i, 2 * SEC));
    s = stats_of(st);
    expect_eq(s.evicted, 0);
    /* At most 256 shards * 98 keys (7/8 of 112 slots) are held. */
    expect_ge(s.reclaimed, old_keys + new_keys - 256 * 98);
    expect_eq(s.keys + s.reclaimed, old_keys + new_keys);
    expect_valid(st);
    print_message("expired first: %llu reclaimed, %llu evicted\n",
                  (unsigned long long)s.reclaimed,
                  (unsigned long long)s.evicted);
    /* And every new key kept its state. */
    for (int i = 0; i < new_keys; i++)
        if (take(st, long_lim, "new", i, 2 * SEC))
            fail_msg("new key %d lost its state", i);
    sl_limit_free(short_lim);
    sl_limit_free(long_lim);
    sl_store_free(st);
}

/*
 * Approximate LRU.  The store evicts the least recently used of 16 slots
 * near the new key's home, so a key survives unless all 15 others it is
 * sampled with are at least as recent.  2000 hot keys are touched every
 * round (rounds 300 ms apart, more than a 268 ms tick) while 2000 new cold
 * keys per round stream through a table that holds ~25000: the slots as
 * recent as a hot key are the 4000 of the current round, about 16%, and
 * the chance that 16 sampled slots are all that recent is about 0.16^16.
 * So we require 99% of the hot keys to keep their state (we expect all),
 * and the 2000 keys last used at the start to be nearly all gone (at most
 * 5% left), which a policy that ignored recency would not achieve either
 * way round.
 */
static void test_recently_used_keys_survive_eviction(void **state)
{
    (void)state;
    sl_store *st = store_new(MIB, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 5, 3600 * SEC, 0);
    enum { HOT = 2000, STALE = 2000, ROUNDS = 100, COLD_PER_ROUND = 2000 };
    static char lost[HOT];
    int hot_kept = 0, stale_kept = 0, cold = 0;
    sl_nanos now = SEC;

    memset(lost, 0, sizeof(lost));
    for (int i = 0; i < HOT; i++)
        for (int r = 0; r < 5; r++)
            assert_true(take(st, lim, "hot", i, now));
    for (int i = 0; i < STALE; i++)
        for (int r = 0; r < 5; r++)
            assert_true(take(st, lim, "stale", i, now));

    for (int round = 1; round <= ROUNDS; round++) {
        now += 300 * MS;
        for (int i = 0; i < HOT; i++)
            if (take(st, lim, "hot", i, now))
                lost[i] = 1; /* allowed again: its state was evicted */
        for (int c = 0; c < COLD_PER_ROUND; c++)
            assert_true(take(st, lim, "cold", cold++, now));
    }
    for (int i = 0; i < HOT; i++)
        hot_kept += !lost[i];
    now += 300 * MS;
    for (int i = 0; i < STALE; i++)
        stale_kept += !take(st, lim, "stale", i, now);

    sl_store_stats s = stats_of(st);
    print_message("LRU: %d/%d hot keys kept, %d/%d stale keys kept, "
                  "%llu evicted\n",
                  hot_kept, HOT, stale_kept, STALE,
                  (unsigned long long)s.evicted);
    expect_ge(s.evicted, 150000);
    expect_ge(hot_kept, HOT * 99 / 100);
    expect_le(stale_kept, STALE * 5 / 100);
    expect_valid(st);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- table invariants ---- */

static void test_invariants_through_growth_and_deletion(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 2, SEC, 0); /* T = 500 ms */
    const int n = 50000;

    /* Growth: 50000 keys from 16 slots per shard. */
    for (int i = 0; i < n; i++) {
        assert_true(take(st, lim, "g", i, 0));
        if (i % 5000 == 0)
            expect_valid(st);
    }
    expect_eq(stats_of(st).keys, n);
    expect_valid(st);
    /* The odd keys take a second token: full again only at 1 s. */
    for (int i = 1; i < n; i += 2)
        assert_true(take(st, lim, "g", i, 0));
    /* Deletion by backward shift: at 500 ms the even keys are full again
     * and a query drops them; the odd keys, shifted around, keep state. */
    for (int i = 0; i < n; i += 2) {
        char k[32];
        int len = key_of(k, sizeof(k), "g", i);
        expect_eq(check(st, lim, k, (size_t)len, 0, 500 * MS).remaining, 2);
        if (i % 5000 == 0)
            expect_valid(st);
    }
    expect_eq(stats_of(st).keys, n / 2);
    expect_valid(st);
    for (int i = 1; i < n; i += 2) {
        char k[32];
        int len = key_of(k, sizeof(k), "g", i);
        sl_decision d = check(st, lim, k, (size_t)len, 0, 500 * MS);
        if (d.remaining != 1)
            fail_msg("key %d: remaining %lld after its neighbours were "
                     "deleted, expected 1",
                     i, (long long)d.remaining);
    }
    expect_valid(st);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- input validation ---- */

static void test_key_length_cap(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_FIXED_WINDOW, 5, SEC, 0);
    char *big = calloc(1, 4097);
    sl_decision d;

    assert_non_null(big);
    expect_eq(sl_check(st, lim, big, 4096, 1, 0, &d), 0);
    expect_eq(sl_check(st, lim, big, 4097, 1, 0, &d), SL_EKEYLEN);
    sl_store_free(st);

    sl_memory_options o = {.size = sizeof(sl_memory_options),
                           .max_key_len = 8,
                           .seed0 = 1,
                           .seed1 = 2};
    st = sl_memory_store_new(&o);
    assert_non_null(st);
    expect_eq(sl_check(st, lim, "12345678", 8, 1, 0, &d), 0);
    expect_eq(sl_check(st, lim, "123456789", 9, 1, 0, &d), SL_EKEYLEN);
    expect_eq(stats_of(st).keys, 1);
    free(big);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_cost_out_of_range(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 5, SEC, 0);
    sl_decision d, untouched;

    memset(&d, 0x5a, sizeof(d));
    untouched = d;
    expect_eq(sl_check(st, lim, "k", 1, -1, 0, &d), SL_ECOST);
    expect_eq(sl_check(st, lim, "k", 1, INT64_MIN, 0, &d), SL_ECOST);
    expect_eq(sl_check(st, lim, "k", 1, SL_MAX_COUNT + 1, 0, &d), SL_ECOST);
    expect_eq(sl_check(st, lim, "k", 1, INT64_MAX, 0, &d), SL_ECOST);
    assert_memory_equal(&d, &untouched, sizeof(d)); /* *out untouched */
    /* The largest cost is valid input: a decision that never passes. */
    expect_eq(sl_check(st, lim, "k", 1, SL_MAX_COUNT, 0, &d), 0);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, -1);
    expect_eq(stats_of(st).keys, 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_negative_now_is_einval(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_GCRA, 5, SEC, 0);
    sl_decision d;

    expect_eq(sl_check(st, lim, "k", 1, 1, -1, &d), SL_EINVAL);
    expect_eq(sl_check(st, lim, "k", 1, 1, INT64_MIN, &d), SL_EINVAL);
    expect_eq(sl_check(st, lim, "k", 1, 1, 0, &d), 0);
    expect_eq(stats_of(st).keys, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/*
 * now is accepted up to SL_MAX_TIME (2^62 ns), and state decided there is
 * kept (the buckets used to overflow within a period of INT64_MAX, and
 * the other algorithms to drop the state of an allowed request there).
 */
static void test_time_up_to_sl_max_time(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *st = store_new(0, 1, 2);
        sl_limit *lim = limit_new(all_algorithms[a], 5, SEC, 0);
        sl_decision d;

        expect_eq(sl_check(st, lim, "k", 1, 1, SL_MAX_TIME + 1, &d), SL_EINVAL);
        expect_eq(sl_check(st, lim, "k", 1, 1, INT64_MAX, &d), SL_EINVAL);
        check(st, lim, "k", 1, 1, SL_MAX_TIME);
        d = check(st, lim, "k", 1, 0, SL_MAX_TIME);
        if (d.remaining != 4)
            fail_msg("%s: remaining %lld after one request at SL_MAX_TIME, "
                     "expected 4",
                     sl_algorithm_name(all_algorithms[a]),
                     (long long)d.remaining);
        expect_eq(stats_of(st).keys, 1);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/*
 * A clock read out of order never gives a negative remaining.  A bucket
 * (token_bucket, gcra, leaky_bucket) emptied at 10 s and asked at
 * 10 s - 1 ns (another thread's clock, read a moment earlier) used to
 * report remaining -1 and refuse even a cost-0 query; sliding_window, with
 * 10 requests at 0.5 s and 9 at 1.9 s, reported -9 to a query at 0.9 s.
 */
static void test_clock_read_out_of_order(void **state)
{
    (void)state;
    sl_algorithm buckets[] = {SL_TOKEN_BUCKET, SL_GCRA, SL_LEAKY_BUCKET};
    for (size_t a = 0; a < 3; a++) {
        sl_store *st = store_new(0, 1, 2);
        sl_limit *lim = limit_new(buckets[a], 10, SEC, 0);
        assert_true(check(st, lim, "k", 1, 10, 10 * SEC).allowed);
        sl_decision d = check(st, lim, "k", 1, 0, 10 * SEC - 1);
        if (d.remaining < 0 || !d.allowed)
            fail_msg("%s: query 1 ns before the last request: allowed %d, "
                     "remaining %lld, expected allowed 1, remaining 0",
                     sl_algorithm_name(buckets[a]), d.allowed,
                     (long long)d.remaining);
        sl_limit_free(lim);
        sl_store_free(st);
    }
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_SLIDING_WINDOW, 10, SEC, 0);
    for (int i = 0; i < 10; i++)
        assert_true(check(st, lim, "k", 1, 1, 500 * MS).allowed);
    for (int i = 0; i < 9; i++)
        assert_true(check(st, lim, "k", 1, 1, 1900 * MS).allowed);
    expect_ge(check(st, lim, "k", 1, 0, 900 * MS).remaining, 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_null_arguments_are_einval(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_GCRA, 5, SEC, 0);
    sl_decision d;

    expect_eq(sl_check(NULL, lim, "k", 1, 1, 0, &d), SL_EINVAL);
    expect_eq(sl_check(st, NULL, "k", 1, 1, 0, &d), SL_EINVAL);
    expect_eq(sl_check(st, lim, NULL, 1, 1, 0, &d), SL_EINVAL);
    expect_eq(sl_check(st, lim, "k", 1, 1, 0, NULL), SL_EINVAL);
    expect_eq(stats_of(st).keys, 0);
    /* An empty key is a key: (NULL, 0) and ("", 0) are the same one. */
    expect_eq(sl_check(st, lim, NULL, 0, 5, 0, &d), 0);
    expect_eq(d.allowed, 1);
    expect_eq(sl_check(st, lim, "", 0, 1, 0, &d), 0);
    expect_eq(d.allowed, 0);
    sl_store_free(NULL); /* a no-op */
    sl_limit_free(NULL);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- keys and limits ---- */

static void test_same_key_under_two_limits_is_independent(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *a = limit_new(SL_FIXED_WINDOW, 2, 60 * SEC, 0);
    sl_limit *b = limit_new(SL_FIXED_WINDOW, 3, 60 * SEC, 0);

    expect_eq(check(st, a, "user", 4, 2, SEC).remaining, 0);
    expect_eq(check(st, a, "user", 4, 1, SEC).allowed, 0);
    expect_eq(check(st, b, "user", 4, 0, SEC).remaining, 3);
    expect_eq(check(st, b, "user", 4, 3, SEC).allowed, 1);
    expect_eq(stats_of(st).keys, 2);
    sl_limit_free(a);
    sl_limit_free(b);
    sl_store_free(st);
}

static void test_same_key_under_two_ids_is_independent(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *a = limit_new(SL_SLIDING_LOG, 2, 60 * SEC, 7);
    sl_limit *b = limit_new(SL_SLIDING_LOG, 2, 60 * SEC, 8);

    expect_eq(check(st, a, "user", 4, 2, SEC).remaining, 0);
    expect_eq(check(st, b, "user", 4, 0, SEC).remaining, 2);
    expect_eq(check(st, b, "user", 4, 1, SEC).remaining, 1);
    expect_eq(check(st, a, "user", 4, 0, SEC).remaining, 0);
    sl_limit_free(a);
    sl_limit_free(b);
    sl_store_free(st);
}

/* The header: state is kept per (limit parameters, id, key), so two limit
 * objects made from the same configuration are the same limit. */
static void test_equal_limits_share_state(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *a = limit_new(SL_GCRA, 3, 60 * SEC, 5);
    sl_limit *b = limit_new(SL_GCRA, 3, 60 * SEC, 5);

    expect_eq(check(st, a, "user", 4, 2, SEC).remaining, 1);
    expect_eq(check(st, b, "user", 4, 0, SEC).remaining, 1);
    expect_eq(stats_of(st).keys, 1);
    sl_limit_free(a);
    sl_limit_free(b);
    sl_store_free(st);
}

static void test_binary_keys_with_nul_bytes(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 1, 60 * SEC, 0);
    static const char k1[] = {'a', 0, 'b'}, k2[] = {'a', 0, 'c'},
                      k3[] = {'a', 0}, k4[] = {0, 0, 0, 0};

    assert_true(check(st, lim, k1, 3, 1, SEC).allowed);
    assert_false(check(st, lim, k1, 3, 1, SEC).allowed);
    /* Bytes after a NUL and the length both matter. */
    assert_true(check(st, lim, k2, 3, 1, SEC).allowed);
    assert_true(check(st, lim, k3, 2, 1, SEC).allowed);
    assert_true(check(st, lim, "a", 1, 1, SEC).allowed);
    assert_true(check(st, lim, k4, 4, 1, SEC).allowed);
    assert_true(check(st, lim, k4, 3, 1, SEC).allowed);
    assert_false(check(st, lim, k4, 4, 1, SEC).allowed);
    expect_eq(stats_of(st).keys, 6);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- logs on the heap ---- */

static void test_log_bytes_grow_and_shrink(void **state)
{
    (void)state;
    sl_algorithm logs[] = {SL_SLIDING_LOG, SL_STEPPED_WINDOW};
    for (size_t a = 0; a < 2; a++) {
        sl_store *st = store_new(0, 1, 2);
        sl_limit_config c = {.algorithm = logs[a],
                             .limit = 100,
                             .period = SEC,
                             .step = a ? 10 * MS : 0};
        sl_limit *lim;
        uint64_t empty, one, many;

        assert_int_equal(sl_limit_new(&c, &lim, NULL, 0), 0);
        empty = stats_of(st).bytes;
        assert_true(check(st, lim, "k", 1, 1, 0).allowed);
        one = stats_of(st).bytes;
        /* A key's first event is inline in its slot (eventlog.h): no
         * heap until the second. */
        expect_eq(one, empty);
        assert_true(check(st, lim, "k", 1, 1, 10 * MS).allowed);
        expect_ge(stats_of(st).bytes, empty + 1);
        /* 64 events at distinct times (distinct steps) need a bigger log. */
        for (int i = 2; i < 64; i++)
            assert_true(check(st, lim, "k", 1, 1, i * 10 * MS).allowed);
        many = stats_of(st).bytes;
        expect_ge(many, empty + 64 * 16);
        /* Most events leave the window: the ring halves. */
        check(st, lim, "k", 1, 0, SEC + 600 * MS);
        expect_le(stats_of(st).bytes, many - 1);
        expect_ge(stats_of(st).bytes, one);
        /* All gone: back to the empty store's bytes. */
        check(st, lim, "k", 1, 0, 3 * SEC);
        expect_eq(stats_of(st).bytes, empty);
        expect_eq(stats_of(st).keys, 0);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* Logs freed by sweep, by eviction, by store free: ASan checks the leaks,
 * the stats check the accounting. */
static void test_logs_freed_by_sweep_eviction_and_free(void **state)
{
    (void)state;
    sl_algorithm logs[] = {SL_SLIDING_LOG, SL_STEPPED_WINDOW};
    for (size_t a = 0; a < 2; a++) {
        sl_store *st = store_new(MIB, 1, 2);
        sl_limit *lim = limit_new(logs[a], 8, SEC, 0);
        uint64_t empty = stats_of(st).bytes;
        sl_store_stats s;

        /* Swept. */
        for (int i = 0; i < 1000; i++)
            for (int r = 0; r < 4; r++)
                assert_true(take(st, lim, "swept", i, r * 20 * MS));
        expect_ge(stats_of(st).bytes, empty + 1000 * 24);
        expect_eq(sweep_all(st, 3 * SEC), 1000);
        expect_eq(stats_of(st).bytes, empty);

        /* Evicted: 8 events at 8 distinct times per key, far beyond 1 MiB. */
        for (int i = 0; i < 20000; i++)
            for (int r = 0; r < 8; r++)
                assert_true(take(st, lim, "ev", i, 4 * SEC + r * 20 * MS));
        s = stats_of(st);
        expect_ge(s.evicted, 1);
        expect_le(s.bytes, s.max_bytes);
        expect_eq(s.keys + s.evicted, 20000);
        expect_valid(st);
        print_message("%s logs at 1 MiB: %llu keys, %llu evicted, %llu "
                      "bytes\n",
                      sl_algorithm_name(logs[a]), (unsigned long long)s.keys,
                      (unsigned long long)s.evicted,
                      (unsigned long long)s.bytes);
        /* Freed with the store while live. */
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/*
 * A single key's log is bounded: it may take half its shard's share of the
 * cap, and a request that would grow it further fails with SL_EFULL.  (One
 * sliding_log key with L = 100000 and distinct timestamps used to hold
 * 2.2 MB in a store capped at 1 MiB.)
 */
static void test_single_log_respects_cap(void **state)
{
    (void)state;
    sl_store *st = store_new(MIB, 1, 2);
    sl_limit *lim = limit_new(SL_SLIDING_LOG, 100000, 3600 * SEC, 0);
    int full = 0;

    for (int i = 0; i < 100000; i++) {
        sl_decision d;
        int rc = sl_check(st, lim, "big", 3, 1, i + 1, &d);
        if (rc != 0 && rc != SL_EFULL)
            fail_msg("request %d: %s, expected OK or EFULL", i,
                     sl_err_name(rc));
        full += rc == SL_EFULL;
    }
    expect_le(stats_of(st).bytes, MIB);
    expect_ge(full, 1);
    expect_eq(stats_of(st).keys, 1);
    expect_valid(st);
    sl_limit_free(lim);
    sl_store_free(st);
}

/*
 * stats.bytes stays within max_bytes between calls, the store's own
 * struct included (it used to be counted in bytes but not in the cap:
 * 1,048,640 bytes with one-event sliding_log keys at 1 MiB).
 */
static void test_log_store_stays_under_cap_at_rest(void **state)
{
    (void)state;
    sl_store *st = store_new(MIB, 1, 2);
    sl_limit *lim = limit_new(SL_SLIDING_LOG, 1, 3600 * SEC, 0);
    uint64_t worst = 0;

    for (int i = 0; i < 60000; i++) {
        take(st, lim, "k", i, SEC + i);
        if (i % 1000 == 0 && stats_of(st).bytes > worst)
            worst = stats_of(st).bytes;
    }
    expect_le(worst, MIB);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- seeded hashing ---- */

/* The store's own mapping (memory_store.h): its keyed hash (key_hash.h) of
 * (limit identity, key) under the seed, top 8 bits for the shard.  Used
 * only to build keys that an attacker who knew seed (1, 2) would send. */
static int shard_under(uint64_t s0, uint64_t s1, const sl_limit *lim,
                       const char *key, size_t len)
{
    sl__key_hasher hasher;
    sl__key_hasher_init(&hasher, s0, s1);
    uint64_t h = sl__key_hash(&hasher, lim->ident, key, len);
    h += h == 0;
    return (int)(h >> 56);
}

/*
 * Keys that all land in one shard under a known seed fill that shard and
 * force evictions at a 1 MiB cap (122 keys per shard: a narrow table of
 * 140 24-byte slots beside the empty wide one) while the rest of the
 * store is empty; under any other seed the same keys spread over all 256
 * shards (about 8 each) and nothing is evicted.  So flooding needs the
 * seed, and a store with a random seed resists keys aimed at a fixed one.
 */
static void test_seed_defeats_keys_aimed_at_one_shard(void **state)
{
    (void)state;
    enum { N = 2000 };
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 1, 3600 * SEC, 0);
    static char keys[N][16];
    static size_t lens[N];
    int found = 0;

    for (uint32_t c = 0; found < N; c++) {
        char k[16];
        int len = snprintf(k, sizeof(k), "x%u", c);
        if (shard_under(1, 2, lim, k, (size_t)len) == 0) {
            memcpy(keys[found], k, (size_t)len);
            lens[found++] = (size_t)len;
        }
    }
    struct {
        uint64_t s0, s1;
    } seeds[] = {{1, 2}, {1, 2}, {3, 4}, {0, 0} /* random */};
    uint64_t evicted[4];
    for (int s = 0; s < 4; s++) {
        sl_store *st = store_new(MIB, seeds[s].s0, seeds[s].s1);
        for (int i = 0; i < N; i++)
            check(st, lim, keys[i], lens[i], 1, SEC);
        evicted[s] = stats_of(st).evicted;
        expect_valid(st);
        sl_store_free(st);
    }
    print_message("keys aimed at one shard: evicted %llu (aimed seed), %llu "
                  "(other seed), %llu (random seed)\n",
                  (unsigned long long)evicted[0],
                  (unsigned long long)evicted[2],
                  (unsigned long long)evicted[3]);
    expect_ge(evicted[0], N - 122);    /* one shard holds at most 122 */
    expect_eq(evicted[1], evicted[0]); /* a fixed seed is reproducible */
    expect_eq(evicted[2], 0);
    expect_eq(evicted[3], 0);
    sl_limit_free(lim);
}

/*
 * A key whose state packs into one word lives in a 24-byte narrow slot
 * (core/narrow.h); once its state does not pack (here a sliding_window
 * count past 2^16, a fixed_window's index past 2^32) it moves to a wide
 * slot with that state: the decisions are those of the state, and the
 * store stays valid.
 */
static void test_state_that_stops_packing_moves_wide(void **state)
{
    (void)state;
    sl_store *st = store_new(0, 1, 2);
    sl_limit *sw = limit_new(SL_SLIDING_WINDOW, 200000, SEC, 0);
    sl_limit *fw = limit_new(SL_FIXED_WINDOW, 5, 1000, 0);
    sl_nanos t = 10 * SEC, late = (sl_nanos)1 << 45; /* window 2^35 */
    sl_decision d;

    d = check(st, sw, "k", 1, 60000, t); /* cur 60000: packs */
    expect_eq(d.remaining, 140000);
    d = check(st, sw, "k", 1, 10000, t); /* cur 70000: moves wide */
    expect_eq(d.remaining, 130000);
    expect_valid(st);
    d = check(st, sw, "k", 1, 40000, t);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 90000);
    d = check(st, sw, "k", 1, 100000, t);
    expect_eq(d.allowed, 0);
    expect_eq(d.remaining, 90000);
    expect_eq(stats_of(st).keys, 1);
    expect_eq(check(st, fw, "k", 1, 1, t).allowed, 1); /* window 10^7 */
    for (int i = 0; i < 5; i++)
        expect_eq(check(st, fw, "k", 1, 1, late).allowed, 1);
    d = check(st, fw, "k", 1, 1, late);
    expect_eq(d.allowed, 0);
    expect_eq(d.remaining, 0);
    expect_eq(stats_of(st).keys, 2);
    expect_valid(st);
    sl_limit_free(sw);
    sl_limit_free(fw);
    sl_store_free(st);
}

/*
 * Where a key's state is kept must not change a decision.  Store A's
 * first decision is at time 0, store B's at 2^61, so the same times fall
 * inside the packed range of one store and outside the other's (before
 * B's origin, or too far past A's for a fraction of 3 bits): the keys
 * move between the narrow and wide tables at different points, and every
 * decision must still agree, field by field.
 */
static void test_packing_does_not_change_decisions(void **state)
{
    (void)state;
    const sl_algorithm algs[] = {SL_GCRA, SL_TOKEN_BUCKET, SL_LEAKY_BUCKET,
                                 SL_FIXED_WINDOW, SL_SLIDING_WINDOW};
    const sl_nanos far = (sl_nanos)1 << 61;
    const sl_nanos times[] = {
        0,          SEC / 3,       5 * SEC,         (sl_nanos)1 << 50,
        far - 1000, far + SEC / 7, far + 3 * SEC,   SL_MAX_TIME - SEC,
        SEC,        SL_MAX_TIME,   far + 100 * SEC, 2 * SEC};
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        sl_limit *lim = limit_new(algs[a], 7, SEC, 0);
        sl_store *sa = store_new(0, 1, 2), *sb = store_new(0, 1, 2);
        check(sa, lim, "warm", 4, 1, 0);
        check(sb, lim, "warm", 4, 1, far);
        for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
            /* A few decisions close enough in time to see each other's
             * state, costs 0 included (which may leave it initial). */
            for (int rep = 0; rep < 3; rep++) {
                for (int c = 0; c < 4; c++) {
                    const int64_t cost = (int64_t[]){1, 2, 0, 3}[c];
                    sl_nanos t = times[i] + rep * (SEC / 50);
                    if (t > SL_MAX_TIME)
                        t = SL_MAX_TIME;
                    sl_decision x = check(sa, lim, "k", 1, cost, t);
                    sl_decision y = check(sb, lim, "k", 1, cost, t);
                    expect_eq_at(x.allowed, y.allowed, "%s t %lld cost %lld",
                                 sl_algorithm_name(algs[a]), (long long)t,
                                 (long long)cost);
                    expect_eq(x.remaining, y.remaining);
                    expect_eq(x.reset_after, y.reset_after);
                    expect_eq(x.retry_after, y.retry_after);
                    expect_eq(x.delay, y.delay);
                }
            }
        }
        expect_valid(sa);
        expect_valid(sb);
        sl_store_free(sa);
        sl_store_free(sb);
        sl_limit_free(lim);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * The key hash (key_hash.h) is a key's identity in the table, so inputs
 * its short-key paths pack alike must still differ: every key of 0 to 5
 * bytes over {0, 1, 'a'} (so "ab" and "abb", "a" and "a\0" ...), 8-byte
 * integers, and the same keys under a second limit identity, 91,000
 * hashes without a collision; and their shards (the top 8 bits) even.
 */
static void test_key_hash_distinguishes_short_keys(void **state)
{
    (void)state;
    enum { SHORT = 364, INTS = 45000, N = 2 * (SHORT + INTS) };
    static uint64_t h[N];
    size_t shard_count[256] = {0}, n = 0;
    sl__key_hasher hasher;
    const unsigned char alphabet[] = {0, 1, 'a'};

    sl__key_hasher_init(&hasher, 1, 2);
    for (uint64_t ident = 7; ident <= 8; ident++) {
        for (size_t len = 0, count = 1; len <= 5; count *= 3, len++) {
            for (size_t c = 0; c < count; c++) {
                unsigned char k[5];
                for (size_t i = 0, v = c; i < len; i++, v /= 3)
                    k[i] = alphabet[v % 3];
                h[n++] = sl__key_hash(&hasher, ident, k, len);
            }
        }
        for (uint64_t i = 0; i < INTS; i++)
            h[n++] = sl__key_hash(&hasher, ident, &i, sizeof(i));
    }
    expect_eq(n, N);
    for (size_t i = 0; i < n; i++)
        shard_count[h[i] >> 56]++;
    qsort(h, n, sizeof(h[0]), cmp_u64);
    for (size_t i = 1; i < n; i++)
        if (h[i] == h[i - 1])
            fail_msg("two inputs hash alike: %llx", (unsigned long long)h[i]);
    /* 355 a shard on average; a fair hash stays well within 250..460. */
    for (int i = 0; i < 256; i++) {
        expect_ge(shard_count[i], 250);
        expect_le(shard_count[i], 460);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_bucket_is_dropped_by_query),
        cmocka_unit_test(test_every_algorithm_drops_initial_state),
        cmocka_unit_test(test_query_of_unknown_key_keeps_nothing),
        cmocka_unit_test(test_sweep_reclaims_expired_keys),
        cmocka_unit_test(test_sweep_respects_max_slots),
        cmocka_unit_test(test_sweep_keeps_live_state),
        cmocka_unit_test(test_sweep_with_huge_max_slots_returns),
        cmocka_unit_test(test_sweep_keeps_state_decided_before_first_decision),
        cmocka_unit_test(test_sweep_works_years_after_first_decision),
        cmocka_unit_test(test_cap_never_fails_nor_exceeded),
        cmocka_unit_test(test_expired_reclaimed_before_live_evicted),
        cmocka_unit_test(test_recently_used_keys_survive_eviction),
        cmocka_unit_test(test_invariants_through_growth_and_deletion),
        cmocka_unit_test(test_key_length_cap),
        cmocka_unit_test(test_cost_out_of_range),
        cmocka_unit_test(test_negative_now_is_einval),
        cmocka_unit_test(test_time_up_to_sl_max_time),
        cmocka_unit_test(test_clock_read_out_of_order),
        cmocka_unit_test(test_null_arguments_are_einval),
        cmocka_unit_test(test_same_key_under_two_limits_is_independent),
        cmocka_unit_test(test_same_key_under_two_ids_is_independent),
        cmocka_unit_test(test_equal_limits_share_state),
        cmocka_unit_test(test_binary_keys_with_nul_bytes),
        cmocka_unit_test(test_log_bytes_grow_and_shrink),
        cmocka_unit_test(test_logs_freed_by_sweep_eviction_and_free),
        cmocka_unit_test(test_single_log_respects_cap),
        cmocka_unit_test(test_log_store_stays_under_cap_at_rest),
        cmocka_unit_test(test_seed_defeats_keys_aimed_at_one_shard),
        cmocka_unit_test(test_state_that_stops_packing_moves_wide),
        cmocka_unit_test(test_packing_does_not_change_decisions),
        cmocka_unit_test(test_key_hash_distinguishes_short_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
