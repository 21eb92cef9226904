/*
 * test_negative_cache.c - the negative cache (src/decision/negative_cache.c)
 * never changes a decision.  Random traces per algorithm are decided
 * twice: by a store alone (the exact path), and by a second store behind
 * the cache, which answers what it covers and learns every refusal of the
 * store; the two must allow the same requests, and a cached answer must
 * say no later a retry than the exact one.  Then the rules of use: a
 * smaller cost, a query, a recording, a limit whose refusals consume,
 * other numbers of the same limit, a forgotten cache, a full one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "decision/layer.h"
#include "testutil.h"

static sl_limit *limit_of(sl_algorithm alg, int64_t l, sl_nanos period,
                          int64_t burst, unsigned flags)
{
    period -= period % 4; /* whole steps, for stepped_window */
    sl_limit_config cfg = {.algorithm = alg,
                           .limit = l,
                           .period = period,
                           .burst = burst,
                           .flags = flags};
    if (alg == SL_STEPPED_WINDOW)
        cfg.step = period / 4;
    sl_limit *lim = NULL;
    char err[128];
    assert_int_equal(sl_limit_new(&cfg, &lim, err, sizeof(err)), 0);
    return lim;
}

/* One request on both paths: the exact store, and the cache in front of
 * the other.  Returns whether the cache answered. */
static int both(sl_store *exact, sl_store *behind, sd_negcache *nc,
                const sl_check_item *items, const int64_t *costs, size_t n,
                unsigned flags, sl_nanos now)
{
    sl_decision each_x[SL_MAX_ITEMS], each_c[SL_MAX_ITEMS], over_x;
    sd_check k = {
        .items = items, .costs = costs, .n = n, .flags = flags, .each = each_c};
    assert_int_equal(
        sl_check_costs(exact, items, costs, n, now, flags, each_x, &over_x), 0);
    int cached = sd_negcache_answer(nc, &k, now);
    if (!cached) {
        assert_int_equal(sl_check_costs(behind, items, costs, n, now, flags,
                                        each_c, &k.overall),
                         0);
        if (!k.overall.allowed)
            sd_negcache_learn(nc, &k, each_c, now);
    }
    assert_int_equal(sd_negcache_check(nc), 0);
    expect_eq_at(k.overall.allowed, over_x.allowed,
                 "allowed at %lld (cached %d)\n", (long long)now, cached);
    if (cached) {
        if (over_x.retry_after < 0)
            expect_eq(k.overall.retry_after, -1);
        else
            expect_le(k.overall.retry_after, over_x.retry_after);
        expect_cmp(k.overall.retry_after, !=, 0);
        if (over_x.reset_after > 0)
            expect_le(k.overall.reset_after, over_x.reset_after);
    }
    return cached;
}

static const sl_algorithm algs[] = {
    SL_TOKEN_BUCKET, SL_GCRA,           SL_LEAKY_BUCKET,  SL_FIXED_WINDOW,
    SL_SLIDING_LOG,  SL_SLIDING_WINDOW, SL_STEPPED_WINDOW};

/* Random traces: a few keys, two limits (sometimes both in one check),
 * costs 0..4, recordings, time moving by up to half a period. */
static void trace(sl_algorithm alg, uint64_t seed, size_t cache_bytes,
                  long *hits)
{
    uint64_t rng = seed;
    sl_nanos period = tu_range(&rng, 1000, 2000000000);
    int64_t l = tu_range(&rng, 1, 6);
    sl_limit *lims[2] = {limit_of(alg, l, period, 0, 0),
                         limit_of(algs[tu_below(&rng, 7)], tu_range(&rng, 2, 9),
                                  tu_range(&rng, 1000, 2000000000), 0, 0)};
    sl_store *exact = tu_store(), *behind = tu_store();
    sd_stats stats = {0};
    sd_negcache *nc = sd_negcache_new(cache_bytes, &stats);
    assert_non_null(nc);
    static const char *const keys[] = {"a", "b", "c", ""};
    sl_nanos now = 1000000000000LL + tu_below(&rng, period);
    int steps = tu_quick() ? 300 : 3000;
    for (int i = 0; i < steps; i++) {
        sl_check_item items[2];
        int64_t costs[2];
        size_t n = tu_below(&rng, 8) == 0 ? 2 : 1;
        for (size_t j = 0; j < n; j++) {
            const char *key = keys[tu_below(&rng, 4)];
            items[j] = (sl_check_item){lims[j], key, strlen(key)};
            costs[j] = tu_below(&rng, 10) == 0 ? 0 : tu_range(&rng, 1, 4);
        }
        unsigned flags = tu_below(&rng, 40) == 0 ? SL_RECORD : 0;
        *hits += both(exact, behind, nc, items, costs, n, flags, now);
        int64_t r = tu_below(&rng, 4);
        now += r == 0   ? 0
               : r == 1 ? tu_below(&rng, 1000)
                        : tu_below(&rng, period / (4 * l) + 1);
    }
    sd_negcache_free(nc);
    sl_store_free(exact);
    sl_store_free(behind);
    sl_limit_free(lims[0]);
    sl_limit_free(lims[1]);
}

static void test_traces_decide_as_the_exact_path(void **state)
{
    (void)state;
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        long hits = 0;
        for (uint64_t seed = 1; seed <= 12; seed++)
            trace(algs[a], seed * 7919 + a, 1 << 16, &hits);
        /* Every algorithm's refusals are cached and answered: a test
         * that never hit would prove nothing. */
        if (hits == 0)
            fail_msg("%s: the cache answered nothing",
                     sl_algorithm_name(algs[a]));
    }
}

/* Room for one bucket of four: entries are evicted all the time, and a
 * key whose hash shares the bucket never gets another key's answer. */
static void test_a_full_cache_decides_as_the_exact_path(void **state)
{
    (void)state;
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        long hits = 0;
        for (uint64_t seed = 1; seed <= 6; seed++)
            trace(algs[a], seed * 104729 + a, SD_NEGCACHE_MIN_BYTES, &hits);
    }
}

typedef struct fixture {
    sl_store *store;
    sd_stats stats;
    sd_negcache *nc;
} fixture;

static void fixture_init(fixture *f)
{
    f->store = tu_store();
    memset(&f->stats, 0, sizeof(f->stats));
    f->nc = sd_negcache_new(1 << 16, &f->stats);
    assert_non_null(f->nc);
}

static void fixture_release(fixture *f)
{
    sd_negcache_free(f->nc);
    sl_store_free(f->store);
}

/* Decides (lim, key, cost) on f's store and teaches f's cache: allowed. */
static int decide(fixture *f, const sl_limit *lim, int64_t cost, unsigned flags,
                  sl_nanos now)
{
    sl_check_item it = {lim, "k", 1};
    sl_decision each, overall;
    sd_check k = {.items = &it, .costs = &cost, .n = 1, .flags = flags};
    assert_int_equal(
        sl_check_costs(f->store, &it, &cost, 1, now, flags, &each, &overall),
        0);
    sd_negcache_learn(f->nc, &k, &each, now);
    return overall.allowed;
}

static int answered(fixture *f, const sl_limit *lim, int64_t cost,
                    unsigned flags, sl_nanos now)
{
    sl_check_item it = {lim, "k", 1};
    sl_decision each;
    sd_check k = {
        .items = &it, .costs = &cost, .n = 1, .flags = flags, .each = &each};
    return sd_negcache_answer(f->nc, &k, now);
}

static void
test_a_smaller_cost_a_query_and_a_recording_ask_the_store(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    sl_limit *tb = limit_of(SL_TOKEN_BUCKET, 10, SL_NS_PER_SEC * 10, 0, 0);
    sl_nanos now = SL_NS_PER_SEC;
    assert_true(decide(&f, tb, 8, 0, now));
    assert_false(decide(&f, tb, 5, 0, now)); /* 2 left: learnt at cost 5 */
    assert_true(answered(&f, tb, 5, 0, now));
    assert_true(answered(&f, tb, 9, 0, now));
    assert_false(answered(&f, tb, 1, 0, now));         /* it would pass */
    assert_false(answered(&f, tb, 0, 0, now));         /* a query passes */
    assert_false(answered(&f, tb, 5, SL_RECORD, now)); /* it consumes */
    assert_true(decide(&f, tb, 1, 0, now));
    /* Three tokens are due 3 s after the refusal: then the store decides. */
    assert_true(answered(&f, tb, 5, 0, now + 3 * SL_NS_PER_SEC - 6000000));
    assert_false(answered(&f, tb, 5, 0, now + 3 * SL_NS_PER_SEC));
    assert_int_equal(f.stats.negcache_hits, 3);
    sl_limit_free(tb);
    fixture_release(&f);
}

static void test_refusals_that_consume_are_not_kept(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    sl_limit *log =
        limit_of(SL_SLIDING_LOG, 1, SL_NS_PER_SEC, 0, SL_LOG_REJECTED);
    assert_true(decide(&f, log, 1, 0, 1));
    assert_false(decide(&f, log, 1, 0, 2));
    assert_false(answered(&f, log, 1, 0, 3));
    assert_int_equal(f.stats.negcache_entries, 0);
    sl_limit_free(log);
    fixture_release(&f);
}

/* An override has its base's identity and state, other numbers: a
 * refusal under one set of numbers says nothing under the other; and a
 * cleared cache answers nothing. */
static void test_other_numbers_and_a_clear_miss(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    sl_limit *fw = limit_of(SL_FIXED_WINDOW, 2, SL_NS_PER_SEC * 60, 0, 0), *up;
    assert_int_equal(sl_limit_override(fw, 10, 0, &up, NULL, 0), 0);
    assert_true(decide(&f, fw, 2, 0, 1));
    assert_false(decide(&f, fw, 1, 0, 2));
    assert_true(answered(&f, fw, 1, 0, 3));
    assert_false(answered(&f, up, 1, 0, 3));
    assert_int_equal(f.stats.negcache_entries, 1);
    sd_negcache_clear(f.nc);
    assert_int_equal(f.stats.negcache_entries, 0);
    assert_false(answered(&f, fw, 1, 0, 3));
    sl_limit_free(up);
    sl_limit_free(fw);
    fixture_release(&f);
}

static void test_a_budget_below_one_bucket_is_no_cache(void **state)
{
    (void)state;
    sd_stats stats = {0};
    assert_null(sd_negcache_new(SD_NEGCACHE_MIN_BYTES - 1, &stats));
    assert_null(sd_negcache_new(0, &stats));
    sd_negcache *nc = sd_negcache_new(SD_NEGCACHE_MIN_BYTES, &stats);
    assert_non_null(nc);
    sd_negcache_free(nc);
    sd_negcache_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traces_decide_as_the_exact_path),
        cmocka_unit_test(test_a_full_cache_decides_as_the_exact_path),
        cmocka_unit_test(
            test_a_smaller_cost_a_query_and_a_recording_ask_the_store),
        cmocka_unit_test(test_refusals_that_consume_are_not_kept),
        cmocka_unit_test(test_other_numbers_and_a_clear_miss),
        cmocka_unit_test(test_a_budget_below_one_bucket_is_no_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
