/*
 * test_batch.c - sl_check_batch decides exactly as the same sequence of
 * sl_check calls would, for every algorithm, including keys repeated
 * inside one batch and batches shorter and longer than the prefetch
 * distance; bad input decides nothing; several threads batching on keys
 * that make the shards grow (the prefetch reads tables without the lock)
 * lose no update.
 */
#include <pthread.h>

#include "internal.h"
#include "testutil.h"

static void decide_same_as_single_checks(sl_algorithm alg, uint64_t seed)
{
    sl_store *a = tu_store(), *b = tu_store();
    sl_limit *lim = tu_limit(alg, 5, SEC, 0);
    enum { N = 3000, KEYS = 40 };
    uint64_t rng = seed, keyv[64];
    sl_key keys[64];
    sl_decision got[64], want;
    sl_nanos now = 0;

    for (int done = 0; done < N;) {
        size_t m = (size_t)tu_range(&rng, 1, 64); /* around BATCH_AHEAD */
        int64_t cost = tu_range(&rng, 0, 3);
        now += tu_range(&rng, 0, 300 * MS);
        for (size_t j = 0; j < m; j++) {
            keyv[j] = (uint64_t)tu_below(&rng, KEYS);
            keys[j] = (sl_key){&keyv[j], sizeof(keyv[j])};
        }
        assert_int_equal(sl_check_batch(a, lim, keys, m, cost, now, got), 0);
        for (size_t j = 0; j < m; j++) {
            assert_int_equal(
                sl_check(b, lim, &keyv[j], sizeof(keyv[j]), cost, now, &want), 0);
            expect_eq_at(got[j].allowed, want.allowed, "%s key %zu", sl_algorithm_name(alg), j);
            expect_eq_at(got[j].remaining, want.remaining, "%s key %zu", sl_algorithm_name(alg), j);
            expect_eq_at(got[j].retry_after, want.retry_after, "%s key %zu", sl_algorithm_name(alg), j);
            expect_eq_at(got[j].reset_after, want.reset_after, "%s key %zu", sl_algorithm_name(alg), j);
            expect_eq_at(got[j].delay, want.delay, "%s key %zu", sl_algorithm_name(alg), j);
        }
        done += (int)m;
    }
    assert_int_equal(sl__memory_check(a), 0);
    sl_limit_free(lim);
    sl_store_free(a);
    sl_store_free(b);
}

static void test_batch_equals_single_checks(void **state)
{
    (void)state;
    for (int alg = 0; alg < SL_ALGORITHM_COUNT; alg++)
        decide_same_as_single_checks((sl_algorithm)alg, 0x5eed + (uint64_t)alg);
}

static void test_batch_bad_input_decides_nothing(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 1, SEC, 0);
    char big[5000] = {0};
    sl_key keys[2] = {{"a", 1}, {big, sizeof(big)}};
    sl_decision d[2];
    sl_store_stats s;

    expect_eq(sl_check_batch(st, lim, keys, 2, 1, SEC, d), SL_EKEYLEN);
    keys[1] = (sl_key){NULL, 3};
    expect_eq(sl_check_batch(st, lim, keys, 2, 1, SEC, d), SL_EINVAL);
    expect_eq(sl_check_batch(st, lim, keys, 1, -1, SEC, d), SL_ECOST);
    expect_eq(sl_check_batch(st, lim, keys, 1, 1, -1, d), SL_EINVAL);
    expect_eq(sl_check_batch(st, NULL, keys, 1, 1, SEC, d), SL_EINVAL);
    expect_eq(sl_check_batch(st, lim, NULL, 1, 1, SEC, d), SL_EINVAL);
    expect_eq(sl_check_batch(st, lim, keys, 0, 1, SEC, NULL), 0);
    sl_store_get_stats(st, &s);
    expect_eq(s.keys, 0); /* nothing was decided */
    expect_eq(sl_check_batch(st, lim, keys, 1, 1, SEC, d), 0);
    expect_eq(d[0].allowed, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* Threads batch over many fresh keys (the shards grow under them) and
 * one shared key; the shared key admits exactly its limit. */
typedef struct batch_worker {
    sl_store *st;
    const sl_limit *lim;
    int id;
    long shared_allowed;
} batch_worker;

static void *batch_thread(void *arg)
{
    batch_worker *w = arg;
    enum { ROUNDS = 400, M = 50 };
    uint64_t keyv[M];
    sl_key keys[M];
    sl_decision d[M];

    for (int r = 0; r < ROUNDS; r++) {
        for (int j = 0; j < M; j++) {
            /* key 0 is shared; the rest are new for every thread/round */
            keyv[j] = j == 0 ? 0 : ((uint64_t)w->id << 40) | ((uint64_t)r << 16) | (uint64_t)j;
            keys[j] = (sl_key){&keyv[j], sizeof(keyv[j])};
        }
        if (sl_check_batch(w->st, w->lim, keys, M, 1, SEC, d) != 0)
            return NULL;
        w->shared_allowed += d[0].allowed;
    }
    return NULL;
}

static void test_batch_threads_lose_nothing(void **state)
{
    (void)state;
    enum { THREADS = 4 };
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 1000, 3600 * SEC, 0);
    pthread_t t[THREADS];
    batch_worker w[THREADS];
    long total = 0;
    sl_store_stats s;

    for (int i = 0; i < THREADS; i++) {
        w[i] = (batch_worker){st, lim, i + 1, 0};
        assert_int_equal(pthread_create(&t[i], NULL, batch_thread, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        total += w[i].shared_allowed;
    }
    expect_eq(total, 1000); /* 1600 attempts on the shared key */
    sl_store_get_stats(st, &s);
    expect_eq(s.keys, 1 + THREADS * 400 * 49);
    assert_int_equal(sl__memory_check(st), 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_equals_single_checks),
        cmocka_unit_test(test_batch_bad_input_decides_nothing),
        cmocka_unit_test(test_batch_threads_lose_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
