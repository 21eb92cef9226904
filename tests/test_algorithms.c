/*
 * test_algorithms.c - each algorithm on hand-computed cases with manual
 * time: exact window edges, a log entry exactly P old, cost 0 queries,
 * costs that can never fit, remaining / reset_after / retry_after values,
 * emission intervals that are not a whole number of ns (3 per second, 7
 * per minute), the largest costs, and time that runs slightly backwards.
 *
 * The first part runs the same behaviour against every algorithm (the
 * test name says which); the second has one section per algorithm.
 */
#include "testutil.h"

typedef struct fixture {
    sl_store *store;
    sl_algorithm alg; /* for the tests run once per algorithm */
} fixture;

static sl_algorithm param_algs[SL_ALGORITHM_COUNT];

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    if (*state != NULL)
        f->alg = *(const sl_algorithm *)*state;
    f->store = tu_store();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sl_store_free(f->store);
    free(f);
    return 0;
}

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA ||
           alg == SL_LEAKY_BUCKET;
}

/*
 * The limit of the per-algorithm tests: 5 per 10 s (burst 5 for the
 * buckets, 1 s steps for stepped_window).  Its numbers are small enough to
 * reason about: the buckets refill one unit every 2 s.
 */
#define G_LIMIT 5
#define G_PERIOD (10 * SEC)

static sl_limit *generic_limit(sl_algorithm alg)
{
    sl_limit_config c = {.algorithm = alg, .limit = G_LIMIT,
                         .period = G_PERIOD};
    if (alg == SL_STEPPED_WINDOW)
        c.step = SEC;
    return tu_limit_cfg(&c);
}

/* ==== the same behaviour, every algorithm ==== */

static void test_cost_zero_consumes_nothing(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t = 103 * SEC;

    tu_check(f->store, lim, "k", 3, t);
    for (int i = 0; i < 50; i++) {
        sl_decision d = tu_check(f->store, lim, "k", 0, t);
        expect_eq(d.allowed, 1);
        expect_eq(d.remaining, 2);
        expect_eq(d.retry_after, 0);
    }
    /* Exactly two units are still there. */
    expect_eq(tu_check(f->store, lim, "k", 2, t).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, t).allowed, 0);
    sl_limit_free(lim);
}

static void test_cost_zero_allowed_when_exhausted(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t = 103 * SEC;
    sl_decision d;

    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, t).allowed, 1);
    d = tu_check(f->store, lim, "k", 0, t + 1);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    expect_eq(d.retry_after, 0);
    expect_eq(tu_check(f->store, lim, "k", 1, t + 1).allowed, 0);
    sl_limit_free(lim);
}

static void test_cost_over_capacity_never_fits(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t = 103 * SEC;
    sl_decision d;

    /* On a fresh key, so nothing but the size is in the way. */
    d = tu_check(f->store, lim, "k", G_LIMIT + 1, t);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, -1);
    expect_eq(d.remaining, G_LIMIT);
    d = tu_check(f->store, lim, "k", SL_MAX_COUNT, t);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, -1);
    /* And it consumed nothing. */
    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, t).allowed, 1);
    sl_limit_free(lim);
}

static void test_cost_of_whole_capacity_fits_once(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t = 103 * SEC;
    sl_decision d;

    d = tu_check(f->store, lim, "k", G_LIMIT, t);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    expect_eq(d.retry_after, 0);
    d = tu_check(f->store, lim, "k", G_LIMIT, t);
    expect_eq(d.allowed, 0);
    expect_cmp(d.retry_after, >, 0);
    sl_limit_free(lim);
}

static void test_cost_out_of_range_is_ecost(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    sl_decision d, before;

    memset(&d, 0x33, sizeof(d));
    before = d;
    expect_eq(sl_check(f->store, lim, "k", 1, -1, SEC, &d), SL_ECOST);
    expect_eq(sl_check(f->store, lim, "k", 1, SL_MAX_COUNT + 1, SEC, &d),
              SL_ECOST);
    expect_eq(sl_check(f->store, lim, "k", 1, INT64_MIN, SEC, &d), SL_ECOST);
    /* *out is untouched on error. */
    expect_eq(memcmp(&d, &before, sizeof(d)), 0);
    /* Nothing was consumed. */
    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_fresh_key_is_initial(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    sl_decision d = tu_check(f->store, lim, "k", 0, 987654321);

    expect_eq(d.allowed, 1);
    expect_eq(d.limit, G_LIMIT);
    expect_eq(d.remaining, G_LIMIT);
    expect_eq(d.reset_after, 0);
    expect_eq(d.retry_after, 0);
    expect_eq(d.delay, 0);
    sl_limit_free(lim);
}

static void test_keys_are_independent(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t = 103 * SEC;

    expect_eq(tu_check(f->store, lim, "alice", G_LIMIT, t).allowed, 1);
    expect_eq(tu_check(f->store, lim, "alice", 1, t).allowed, 0);
    expect_eq(tu_check(f->store, lim, "bob", G_LIMIT, t).allowed, 1);
    /* The empty key is a key like any other. */
    expect_eq(tu_check(f->store, lim, "", G_LIMIT, t).allowed, 1);
    sl_limit_free(lim);
}

static void test_reset_after_returns_to_initial(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t0 = 103 * SEC, t1 = t0 + 1500 * MS + 7;
    sl_decision d, e;

    tu_check(f->store, lim, "k", 1, t0);
    d = tu_check(f->store, lim, "k", 2, t1);
    expect_cmp(d.reset_after, >, 0);
    /* One ns before the reset the state is not yet initial ... */
    e = tu_check(f->store, lim, "k", 0, t1 + d.reset_after - 1);
    expect_eq(e.reset_after, 1);
    /* ... and at the reset it is, with everything available. */
    e = tu_check(f->store, lim, "k", 0, t1 + d.reset_after);
    expect_eq(e.reset_after, 0);
    expect_eq(e.remaining, G_LIMIT);
    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, t1 + d.reset_after)
                  .allowed,
              1);
    sl_limit_free(lim);
}

static void test_retry_after_is_smallest_wait(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    const sl_nanos t0 = 103 * SEC + 250 * MS;
    const char *keys[3] = {"now", "early", "on-time"};
    sl_decision d;

    for (int k = 0; k < 3; k++) {
        tu_check(f->store, lim, keys[k], 2, t0);
        tu_check(f->store, lim, keys[k], 3, t0 + 3 * SEC);
    }
    /* The buckets have 2 units back by now, the windows none. */
    d = tu_check(f->store, lim, "now", 3, t0 + 4 * SEC);
    expect_eq(d.allowed, 0);
    expect_cmp(d.retry_after, >, 0);
    expect_eq(tu_check(f->store, lim, "early", 3,
                       t0 + 4 * SEC + d.retry_after - 1)
                  .allowed,
              0);
    expect_eq(
        tu_check(f->store, lim, "on-time", 3, t0 + 4 * SEC + d.retry_after)
            .allowed,
        1);
    sl_limit_free(lim);
}

static void test_backwards_time_grants_nothing(void **state)
{
    fixture *f = *state;
    sl_limit *lim = generic_limit(f->alg);
    /* Mid-window and mid-step, so that going back crosses edges. */
    const sl_nanos t1 = 103 * SEC + 500 * MS;
    const sl_nanos back[5] = {1, MS, 600 * MS, 4 * SEC, G_PERIOD / 2};

    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, t1).allowed, 1);
    for (int i = 0; i < 5; i++) {
        sl_decision d = tu_check(f->store, lim, "k", 1, t1 - back[i]);
        expect_eq_at(d.allowed, 0, "%lld ns back", (long long)back[i]);
        expect_cmp(d.retry_after, >, 0);
    }
    /* The state did not move: still exhausted at t1. */
    expect_eq(tu_check(f->store, lim, "k", 1, t1).allowed, 0);
    sl_limit_free(lim);
}

/*
 * Two full bursts, at the end of one window (19.999 s) and the end of the
 * next (29.999 s), which every algorithm admits; then a query stamped
 * 15 s, in the earlier window.  The docs (docs/algorithms.md): "c = 0 is a
 * pure query: always allowed", and remaining is whole units left, never
 * negative.
 */
static void test_backwards_query_allowed_and_remaining_not_negative(
    void **state)
{
    fixture *f = *state;
    sl_limit *lim;
    sl_decision d;

    lim = generic_limit(f->alg);
    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, 19999 * MS).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", G_LIMIT, 29999 * MS).allowed, 1);
    d = tu_check(f->store, lim, "k", 0, 15 * SEC);
    expect_eq(d.allowed, 1);
    expect_eq(d.retry_after, 0);
    expect_eq(d.remaining, 0);
    /* Whatever it said, a request stamped there is still refused. */
    expect_eq(tu_check(f->store, lim, "k", 1, 15 * SEC).allowed, 0);
    sl_limit_free(lim);
}

/* The last representable time, SL_MAX_TIME, decides like any other;
 * past it a now is refused.  Nothing wraps around. */
static void test_end_of_time_does_not_wrap(void **state)
{
    fixture *f = *state;
    sl_limit *lim;
    const sl_nanos t = SL_MAX_TIME - G_PERIOD / 2;
    sl_decision d;

    lim = generic_limit(f->alg);
    d = tu_check(f->store, lim, "k", G_LIMIT, t);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    d = tu_check(f->store, lim, "k", 1, t);
    expect_eq(d.allowed, 0);
    expect_cmp(d.retry_after, !=, 0);
    d = tu_check(f->store, lim, "k", 0, t);
    expect_eq(d.remaining, 0);
    expect_eq(sl_check(f->store, lim, "k", 1, 0, SL_MAX_TIME, &d), 0);
    expect_eq(sl_check(f->store, lim, "k", 1, 1, SL_MAX_TIME + 1, &d),
              SL_EINVAL);
    sl_limit_free(lim);
}

/* ==== token_bucket ==== */

static void test_token_bucket_remaining_and_reset(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 10, SEC, 10);
    sl_decision d;

    /* 10 per second: one token per 100 ms. */
    d = tu_check(f->store, lim, "k", 4, 0);
    expect_eq(d.remaining, 6);
    expect_eq(d.reset_after, 400 * MS);
    /* 250 ms later 2.5 tokens are back: 8.5, of which 8 whole. */
    d = tu_check(f->store, lim, "k", 0, 250 * MS);
    expect_eq(d.remaining, 8);
    expect_eq(d.reset_after, 150 * MS);
    /* Take 8: 0.5 left; one more needs 50 ms. */
    d = tu_check(f->store, lim, "k", 8, 250 * MS);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    expect_eq(d.reset_after, 950 * MS);
    d = tu_check(f->store, lim, "k", 1, 250 * MS);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 50 * MS);
    d = tu_check(f->store, lim, "k", 3, 250 * MS);
    expect_eq(d.retry_after, 250 * MS);
    sl_limit_free(lim);
}

static void test_token_bucket_never_exceeds_burst(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 10, SEC, 3);
    sl_decision d;

    /* An hour of idling refills 36000 tokens' worth, capped at 3. */
    d = tu_check(f->store, lim, "k", 0, HOUR);
    expect_eq(d.remaining, 3);
    expect_eq(tu_check(f->store, lim, "k", 3, HOUR).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, HOUR).allowed, 0);
    sl_limit_free(lim);
}

static void test_token_bucket_seven_per_minute(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 7, MINUTE, 7);
    sl_decision d;

    /* T = 60 s / 7 = 8,571,428,571.43 ns. */
    d = tu_check(f->store, lim, "k", 7, 0);
    expect_eq(d.reset_after, MINUTE); /* 7 T = 60 s exactly */
    d = tu_check(f->store, lim, "k", 1, 0);
    expect_eq(d.retry_after, INT64_C(8571428572));
    /* At 30 s: 3.5 tokens. */
    d = tu_check(f->store, lim, "k", 0, 30 * SEC);
    expect_eq(d.remaining, 3);
    expect_eq(d.reset_after, 30 * SEC);
    expect_eq(tu_check(f->store, lim, "k", 3, 30 * SEC).allowed, 1);
    /* 0.5 token left: a whole one is T/2 = 4,285,714,285.71 ns away. */
    d = tu_check(f->store, lim, "k", 1, 30 * SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, INT64_C(4285714286));
    expect_eq(d.reset_after, INT64_C(55714285715)); /* 6.5 T */
    sl_limit_free(lim);
}

/* ==== the three schedule algorithms: exactness ==== */

/*
 * 3 per second, burst 3: T = 333,333,333 1/3 ns.  After the bucket is
 * emptied at 0, request k (k = 1, 2, ...) can pass from k T on: at
 * ceil(k T) it passes, one ns earlier it is refused with retry_after 1.
 * A T rounded down lets the early ones through after a few thousand
 * requests; one rounded up refuses the on-time ones.
 */
static void test_schedule_three_per_second_no_drift(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(f->alg, 3, SEC, 3);
    const int n = 3000;

    expect_eq(tu_check(f->store, lim, "k", 3, 0).allowed, 1);
    for (int64_t k = 1; k <= n; k++) {
        sl_nanos due = (sl_nanos)((k * SEC + 2) / 3); /* ceil(k T) */
        sl_decision early = tu_check(f->store, lim, "k", 1, due - 1);
        sl_decision on_time = tu_check(f->store, lim, "k", 1, due);
        expect_eq_at(early.allowed, 0, "request %lld", (long long)k);
        expect_eq_at(early.retry_after, 1, "request %lld", (long long)k);
        expect_eq_at(on_time.allowed, 1, "request %lld", (long long)k);
    }
    sl_limit_free(lim);
}

static void test_schedule_seven_per_minute_no_drift(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(f->alg, 7, MINUTE, 2);
    const int n = 700;

    /* Burst 2: empty it at 0; request k is due at ceil(k * 60 s / 7). */
    expect_eq(tu_check(f->store, lim, "k", 2, 0).allowed, 1);
    for (int64_t k = 1; k <= n; k++) {
        sl_nanos due = (sl_nanos)((k * MINUTE + 6) / 7);
        sl_decision early = tu_check(f->store, lim, "k", 1, due - 1);
        sl_decision on_time = tu_check(f->store, lim, "k", 1, due);
        expect_eq_at(early.allowed, 0, "request %lld", (long long)k);
        expect_eq_at(early.retry_after, 1, "request %lld", (long long)k);
        expect_eq_at(on_time.allowed, 1, "request %lld", (long long)k);
        expect_eq_at(on_time.remaining, 0, "request %lld", (long long)k);
    }
    sl_limit_free(lim);
}

/* 2^40 per hour with burst 2^40: T = 3.6e12 / 2^40 = 3.274 ns. */
static void test_schedule_largest_cost(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(f->alg, SL_MAX_COUNT, HOUR, SL_MAX_COUNT);
    const sl_nanos t = 5 * SEC;
    sl_decision d;

    d = tu_check(f->store, lim, "k", SL_MAX_COUNT, t);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    expect_eq(d.reset_after, HOUR);
    d = tu_check(f->store, lim, "k", 1, t);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 4);
    expect_eq(tu_check(f->store, lim, "k", 1, t + 3).allowed, 0);
    expect_eq(tu_check(f->store, lim, "k", 1, t + 4).allowed, 1);
    /* Half an hour later half the bucket is back: the unit taken at
     * t + 4 was due 0.73 ns earlier, so 2^39 + 0.22 units, 2^39 whole. */
    d = tu_check(f->store, lim, "k", 0, t + 4 + HOUR / 2);
    expect_eq(d.remaining, SL_MAX_COUNT / 2);
    sl_limit_free(lim);
}

/* ==== gcra ==== */

static void test_gcra_burst_one_spaces_requests_by_t(void **state)
{
    fixture *f = *state;
    /* redis-cell's max_burst 0: one request per T = 250 ms, no bunching. */
    sl_limit *lim = tu_limit(SL_GCRA, 4, SEC, 1);
    sl_decision d;

    expect_eq(tu_check(f->store, lim, "k", 1, 0).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 100 * MS);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 150 * MS);
    expect_eq(d.reset_after, 150 * MS);
    expect_eq(tu_check(f->store, lim, "k", 1, 250 * MS).allowed, 1);
    /* Late by 1 s: no credit was saved beyond the burst of 1. */
    expect_eq(tu_check(f->store, lim, "k", 1, 1250 * MS).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 1250 * MS).allowed, 0);
    sl_limit_free(lim);
}

static void test_gcra_retry_is_new_minus_tolerance(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_GCRA, 10, SEC, 5);
    sl_decision d;

    /* T = 100 ms, tolerance 500 ms.  Cost 5 at 0: TAT = 500 ms. */
    expect_eq(tu_check(f->store, lim, "k", 5, 0).allowed, 1);
    /* Cost 3 at 120 ms: new = 800 ms, new - t = 680 ms > 500 ms: wait
     * 180 ms. */
    d = tu_check(f->store, lim, "k", 3, 120 * MS);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 180 * MS);
    expect_eq(d.remaining, 1); /* 5 - ceil(380 / 100) */
    expect_eq(d.reset_after, 380 * MS);
    sl_limit_free(lim);
}

/* ==== leaky_bucket ==== */

static void test_leaky_bucket_delay_with_fractional_drain(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_LEAKY_BUCKET, 3, SEC, 3);
    sl_decision d;

    /* T = 333,333,333 1/3 ns: delays are rounded up, never early. */
    expect_eq(tu_check(f->store, lim, "k", 1, 0).delay, 0);
    expect_eq(tu_check(f->store, lim, "k", 1, 0).delay, 333333334);
    expect_eq(tu_check(f->store, lim, "k", 1, 0).delay, 666666667);
    d = tu_check(f->store, lim, "k", 1, 0);
    expect_eq(d.allowed, 0);
    expect_eq(d.delay, 0);
    expect_eq(d.retry_after, 333333334);
    sl_limit_free(lim);
}

static void test_leaky_bucket_delay_counts_only_work_ahead(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_LEAKY_BUCKET, 1, SEC, 10);
    sl_decision d;

    /* Cost 4 into an empty queue waits for nothing. */
    d = tu_check(f->store, lim, "k", 4, 0);
    expect_eq(d.delay, 0);
    expect_eq(d.remaining, 6);
    /* 1.5 s later 2.5 units are ahead: wait 2.5 s, then 7.5 queued. */
    d = tu_check(f->store, lim, "k", 5, 1500 * MS);
    expect_eq(d.allowed, 1);
    expect_eq(d.delay, 2500 * MS);
    expect_eq(d.remaining, 2);
    expect_eq(d.reset_after, 7500 * MS);
    /* The queue drains completely: no delay afterwards. */
    d = tu_check(f->store, lim, "k", 1, 9 * SEC);
    expect_eq(d.delay, 0);
    sl_limit_free(lim);
}

static void test_leaky_bucket_query_reports_queue_delay(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_LEAKY_BUCKET, 1, SEC, 10);
    sl_decision d;

    tu_check(f->store, lim, "k", 3, 0);
    d = tu_check(f->store, lim, "k", 0, 1 * SEC);
    expect_eq(d.allowed, 1);
    expect_eq(d.delay, 2 * SEC);
    /* The query queued nothing. */
    expect_eq(tu_check(f->store, lim, "k", 0, 1 * SEC).delay, 2 * SEC);
    sl_limit_free(lim);
}

/* ==== fixed_window ==== */

static void test_fixed_window_edge_at_k_times_p(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 3, 10 * SEC, 0);
    sl_decision d;

    /* Window [30 s, 40 s). */
    expect_eq(tu_check(f->store, lim, "k", 3, 30 * SEC).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 40 * SEC - 1);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 1);
    expect_eq(d.reset_after, 1);
    d = tu_check(f->store, lim, "k", 3, 40 * SEC);
    expect_eq(d.allowed, 1);
    expect_eq(d.reset_after, 10 * SEC);
    sl_limit_free(lim);
}

static void test_fixed_window_aligned_to_zero_not_first_request(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 3, 10 * SEC, 0);
    sl_decision d;

    /* The first request at 39 s is in [30 s, 40 s): its window ends 1 s
     * later, not 10 s. */
    d = tu_check(f->store, lim, "k", 3, 39 * SEC);
    expect_eq(d.reset_after, SEC);
    d = tu_check(f->store, lim, "k", 1, 39 * SEC);
    expect_eq(d.retry_after, SEC);
    expect_eq(tu_check(f->store, lim, "k", 3, 40 * SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_fixed_window_remaining_and_retry(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 10, MINUTE, 0);
    sl_decision d;

    d = tu_check(f->store, lim, "k", 4, 61 * SEC);
    expect_eq(d.remaining, 6);
    expect_eq(d.reset_after, 59 * SEC);
    d = tu_check(f->store, lim, "k", 5, 100 * SEC);
    expect_eq(d.remaining, 1);
    d = tu_check(f->store, lim, "k", 2, 100 * SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.remaining, 1);
    expect_eq(d.retry_after, 20 * SEC);
    expect_eq(tu_check(f->store, lim, "k", 1, 100 * SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_fixed_window_earlier_window_counts_in_newest(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 3, 10 * SEC, 0);

    expect_eq(tu_check(f->store, lim, "k", 2, 40 * SEC).allowed, 1);
    /* Stamped in the window before: counted in [40 s, 50 s). */
    expect_eq(tu_check(f->store, lim, "k", 1, 39 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 41 * SEC).allowed, 0);
    sl_limit_free(lim);
}

static void test_fixed_window_largest_limit(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, SL_MAX_COUNT, SEC, 0);
    sl_decision d;

    d = tu_check(f->store, lim, "k", SL_MAX_COUNT - 1, 0);
    expect_eq(d.remaining, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 1).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 2);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, SEC - 2);
    sl_limit_free(lim);
}

/* ==== sliding_log ==== */

static void test_sliding_log_entry_exactly_p_old_is_gone(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_LOG, 1, 10 * SEC, 0);
    sl_decision d;

    expect_eq(tu_check(f->store, lim, "k", 1, 7 * SEC).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 17 * SEC - 1);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 1);
    expect_eq(d.reset_after, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 17 * SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_sliding_log_retry_drops_oldest_until_fit(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_LOG, 5, 100 * SEC, 0);
    sl_decision d;

    tu_check(f->store, lim, "k", 2, 0);
    tu_check(f->store, lim, "k", 2, 10 * SEC);
    d = tu_check(f->store, lim, "k", 1, 20 * SEC);
    expect_eq(d.remaining, 0);
    expect_eq(d.reset_after, 100 * SEC);
    /* Cost 3 needs the sum down to 2: the entries at 0 and 10 s must
     * leave (4 -> 2 -> 1), so it passes at 110 s. */
    d = tu_check(f->store, lim, "k", 3, 30 * SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 80 * SEC);
    /* Cost 2 only needs the entry at 0 gone. */
    d = tu_check(f->store, lim, "k", 2, 30 * SEC);
    expect_eq(d.retry_after, 70 * SEC);
    /* At 100 s the oldest has left: 2 units free. */
    d = tu_check(f->store, lim, "k", 0, 100 * SEC);
    expect_eq(d.remaining, 2);
    expect_eq(d.reset_after, 20 * SEC);
    sl_limit_free(lim);
}

static void test_sliding_log_same_timestamp_requests(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_LOG, 4, SEC, 0);

    for (int i = 3; i >= 0; i--) {
        sl_decision d = tu_check(f->store, lim, "k", 1, 5 * SEC);
        expect_eq(d.allowed, 1);
        expect_eq(d.remaining, i);
    }
    expect_eq(tu_check(f->store, lim, "k", 1, 6 * SEC - 1).retry_after, 1);
    expect_eq(tu_check(f->store, lim, "k", 4, 6 * SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_sliding_log_largest_limit(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_LOG, SL_MAX_COUNT, MINUTE, 0);
    sl_decision d;

    tu_check(f->store, lim, "k", SL_MAX_COUNT / 2, 0);
    tu_check(f->store, lim, "k", SL_MAX_COUNT / 2, SEC);
    d = tu_check(f->store, lim, "k", 1, 2 * SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, MINUTE - 2 * SEC);
    expect_eq(tu_check(f->store, lim, "k", SL_MAX_COUNT / 2, MINUTE).allowed,
              1);
    sl_limit_free(lim);
}

static sl_limit *log_rejected_limit(int64_t limit, sl_nanos period)
{
    sl_limit_config c = {.algorithm = SL_SLIDING_LOG, .limit = limit,
                         .period = period, .flags = SL_LOG_REJECTED};
    return tu_limit_cfg(&c);
}

static void test_sliding_log_rejected_knocking_stays_limited(void **state)
{
    fixture *f = *state;
    sl_limit *lim = log_rejected_limit(2, MINUTE);
    const char *keys[3] = {"now", "early", "on-time"};
    sl_decision d;

    /* Two units at 0, then an attempt every second for 1000 s: each one
     * is logged and keeps the window full, so all of them are refused
     * (the log is capped at 2L + 16 entries; merged attempts take the
     * later time, so the cap never lets one through). */
    for (int k = 0; k < 3; k++) {
        tu_check(f->store, lim, keys[k], 2, 0);
        for (int s = 1; s <= 1000; s++) {
            d = tu_check(f->store, lim, keys[k], 1, s * SEC);
            expect_eq_at(d.allowed, 0, "attempt at %d s", s);
        }
    }
    /* Whatever the log holds, its retry_after is exact. */
    expect_cmp(d.retry_after, >, 0);
    expect_le(d.retry_after, MINUTE);
    expect_eq(tu_check(f->store, lim, "early", 1,
                       1000 * SEC + d.retry_after - 1)
                  .allowed,
              0);
    expect_eq(tu_check(f->store, lim, "on-time", 1,
                       1000 * SEC + d.retry_after)
                  .allowed,
              1);
    sl_limit_free(lim);
}

static void test_sliding_log_rejected_query_not_logged(void **state)
{
    fixture *f = *state;
    sl_limit *lim = log_rejected_limit(2, MINUTE);

    tu_check(f->store, lim, "k", 1, 0);
    /* Queries, even on a full log, are not attempts. */
    for (int i = 0; i < 100; i++)
        tu_check(f->store, lim, "k", 0, 10 * SEC + i);
    expect_eq(tu_check(f->store, lim, "k", 1, 20 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 0, 59 * SEC).remaining, 0);
    expect_eq(tu_check(f->store, lim, "k", 0, 60 * SEC).remaining, 1);
    sl_limit_free(lim);
}

static void test_sliding_log_rejected_query_on_overfull_log(void **state)
{
    fixture *f = *state;
    sl_limit *lim;
    sl_decision d;

    lim = log_rejected_limit(1, MINUTE);
    expect_eq(tu_check(f->store, lim, "k", 1, 0).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, SEC).allowed, 0); /* logged */
    d = tu_check(f->store, lim, "k", 0, 2 * SEC);
    expect_eq(d.allowed, 1);
    expect_eq(d.retry_after, 0);
    expect_eq(d.remaining, 0);
    sl_limit_free(lim);
}

/* ==== sliding_window ==== */

static void test_sliding_window_full_previous_window_at_edge(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 4, SEC, 0);
    sl_decision d;

    /* prev = 4 filled late in window 2; at the start of window 3 it still
     * weighs 4 * (P - 0) / P = 4. */
    expect_eq(tu_check(f->store, lim, "k", 4, 3 * SEC - 1).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 3 * SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.remaining, 0);
    /* floor(4 (P - e) / P) <= 3 from e = 1 ns on. */
    expect_eq(d.retry_after, 1);
    d = tu_check(f->store, lim, "k", 1, 3 * SEC + 1);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    sl_limit_free(lim);
}

static void test_sliding_window_reset_after_two_windows(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 4, SEC, 0);
    sl_decision d;

    /* cur > 0: the count weighs on until the end of the next window. */
    d = tu_check(f->store, lim, "k", 1, 5 * SEC + 300 * MS);
    expect_eq(d.reset_after, 1700 * MS);
    /* Next window, only prev > 0: until the end of this one. */
    d = tu_check(f->store, lim, "k", 0, 6 * SEC + 100 * MS);
    expect_eq(d.reset_after, 900 * MS);
    expect_eq(d.remaining, 4); /* floor(1 * 0.9) = 0 */
    sl_limit_free(lim);
}

static void test_sliding_window_retry_in_next_window(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 4, SEC, 0);
    sl_decision d;

    /* cur = 4 at 2.5 s.  Cost 1 must wait for the next window, where
     * floor(4 (P - e) / P) <= 3 from e = 1 ns: 3 s + 1 ns. */
    expect_eq(tu_check(f->store, lim, "k", 4, 2500 * MS).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 2500 * MS);
    expect_eq(d.retry_after, 500 * MS + 1);
    /* Cost 4 needs floor(4 (P - e) / P) = 0: 4 (P - e) <= P - 1,
     * P - e <= 249,999,999, e >= 750,000,001 ns. */
    d = tu_check(f->store, lim, "k", 4, 2500 * MS);
    expect_eq(d.retry_after, 1250 * MS + 1);
    sl_limit_free(lim);
}

static void test_sliding_window_retry_two_windows_on(void **state)
{
    fixture *f = *state;
    /* P = 3 ns: in the next window floor(4 (3 - e) / 3) >= 1 for every
     * e in 0..2, so a cost of 4 waits for the window after it. */
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 4, 3, 0);
    sl_decision d;

    expect_eq(tu_check(f->store, lim, "k", 4, 30).allowed, 1);
    d = tu_check(f->store, lim, "k", 4, 31);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 5);
    expect_eq(tu_check(f->store, lim, "k", 4, 35).allowed, 0);
    expect_eq(tu_check(f->store, lim, "k", 4, 36).allowed, 1);
    sl_limit_free(lim);
}

static void test_sliding_window_three_per_second_floor(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 3, SEC, 0);
    sl_decision d;

    /* prev = 3.  Cost 2 needs floor(3 (P - e) / P) <= 1:
     * 3 (P - e) <= 2P - 1, e >= P - 666,666,666 = 333,333,334 ns.  At
     * e = 333,333,333 the weight is 3 * 666,666,667 / 1e9 = 2.000000001. */
    tu_check(f->store, lim, "k", 3, 0);
    d = tu_check(f->store, lim, "k", 2, SEC);
    expect_eq(d.retry_after, 333333334);
    expect_eq(tu_check(f->store, lim, "k", 2, SEC + 333333333).allowed, 0);
    d = tu_check(f->store, lim, "k", 2, SEC + 333333334);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    sl_limit_free(lim);
}

static void test_sliding_window_gap_clears_both_counts(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 4, SEC, 0);

    tu_check(f->store, lim, "k", 4, 2 * SEC);
    /* Two windows on, neither count is left. */
    expect_eq(tu_check(f->store, lim, "k", 0, 4 * SEC).remaining, 4);
    expect_eq(tu_check(f->store, lim, "k", 4, 4 * SEC).allowed, 1);
    sl_limit_free(lim);
}

/* ==== stepped_window ==== */

static sl_limit *stepped_limit(int64_t limit, sl_nanos period, sl_nanos step)
{
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = limit,
                         .period = period, .step = step};
    return tu_limit_cfg(&c);
}

static void test_stepped_window_request_leaves_after_n_steps(void **state)
{
    fixture *f = *state;
    sl_limit *lim = stepped_limit(1, SEC, 100 * MS);
    sl_decision d;

    /* At 0.35 s, in step 3: counted in windows of steps 3 .. 12. */
    expect_eq(tu_check(f->store, lim, "k", 1, 350 * MS).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 500 * MS);
    expect_eq(d.retry_after, 800 * MS);
    expect_eq(d.reset_after, 800 * MS);
    expect_eq(tu_check(f->store, lim, "k", 1, 1300 * MS - 1).allowed, 0);
    expect_eq(tu_check(f->store, lim, "k", 1, 1300 * MS).allowed, 1);
    sl_limit_free(lim);
}

static void test_stepped_window_default_step(void **state)
{
    fixture *f = *state;
    /* 1 s: 10 ms steps.  A request at 5 ms (step 0) leaves at 1 s. */
    sl_limit *lim = tu_limit(SL_STEPPED_WINDOW, 1, SEC, 0);
    sl_decision d;

    expect_eq(tu_check(f->store, lim, "k", 1, 5 * MS).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 5 * MS);
    expect_eq(d.retry_after, SEC - 5 * MS);
    expect_eq(tu_check(f->store, lim, "k", 1, SEC - 1).allowed, 0);
    expect_eq(tu_check(f->store, lim, "k", 1, SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_stepped_window_one_step_is_fixed_window(void **state)
{
    fixture *f = *state;
    sl_limit *lim = stepped_limit(3, 10 * SEC, 10 * SEC);
    sl_decision d;

    expect_eq(tu_check(f->store, lim, "k", 3, 39 * SEC).allowed, 1);
    d = tu_check(f->store, lim, "k", 1, 39 * SEC);
    expect_eq(d.retry_after, SEC);
    expect_eq(d.reset_after, SEC);
    expect_eq(tu_check(f->store, lim, "k", 3, 40 * SEC).allowed, 1);
    sl_limit_free(lim);
}

static void test_stepped_window_retry_skips_steps(void **state)
{
    fixture *f = *state;
    sl_limit *lim = stepped_limit(10, 5 * SEC, SEC);
    sl_decision d;

    /* Steps 10..14 hold 1, 3, 0, 4, 2; at 14.2 s the usage is 10. */
    tu_check(f->store, lim, "k", 1, 10 * SEC);
    tu_check(f->store, lim, "k", 3, 11 * SEC + 999 * MS);
    tu_check(f->store, lim, "k", 4, 13 * SEC);
    tu_check(f->store, lim, "k", 2, 14 * SEC);
    d = tu_check(f->store, lim, "k", 0, 14200 * MS);
    expect_eq(d.remaining, 0);
    expect_eq(d.reset_after, 4800 * MS); /* newest step 14 leaves at 19 s */
    /* Cost 1: step 10 leaving (at 15 s) is enough. */
    expect_eq(tu_check(f->store, lim, "k", 1, 14200 * MS).retry_after,
              800 * MS);
    /* Cost 4: steps 10 and 11 must leave: 16 s. */
    expect_eq(tu_check(f->store, lim, "k", 4, 14200 * MS).retry_after,
              1800 * MS);
    /* Cost 5: step 13 too (12 is empty): 18 s. */
    expect_eq(tu_check(f->store, lim, "k", 5, 14200 * MS).retry_after,
              3800 * MS);
    sl_limit_free(lim);
}

static void test_stepped_window_earlier_step_counts_in_newest(void **state)
{
    fixture *f = *state;
    sl_limit *lim = stepped_limit(2, 4 * SEC, SEC);

    expect_eq(tu_check(f->store, lim, "k", 1, 10 * SEC).allowed, 1);
    /* Stamped 3 s earlier (step 7), counted in step 10: it still weighs
     * at 13.5 s, where a request in step 7 would have left. */
    expect_eq(tu_check(f->store, lim, "k", 1, 7 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 13500 * MS).allowed, 0);
    expect_eq(tu_check(f->store, lim, "k", 2, 14 * SEC).allowed, 1);
    sl_limit_free(lim);
}

/*
 * 2 per 10 s, admitted at 1 s and 5 s.  A cost-2 request at 11.5 s is
 * refused (5 s is still in its window) and moves the key's time to 11.5 s,
 * dropping the entry at 1 s.  A request stamped 10.5 s (a clock 1 s
 * behind) is judged at 11.5 s, never at a time the key has left behind:
 * the window (1.5 s, 11.5 s] holds 5 s only, so it passes and is logged
 * at 11.5 s; then the window is full until 5 s leaves at 15 s.
 */
static void test_sliding_log_stale_request_judged_at_key_time(void **state)
{
    fixture *f = *state;
    sl_limit *lim;
    sl_decision d;

    lim = tu_limit(SL_SLIDING_LOG, 2, 10 * SEC, 0);
    expect_eq(tu_check(f->store, lim, "k", 1, 1 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 5 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 2, 11500 * MS).allowed, 0);
    d = tu_check(f->store, lim, "k", 1, 10500 * MS);
    expect_eq(d.allowed, 1);
    expect_eq(d.remaining, 0);
    expect_eq(d.reset_after, 11 * SEC); /* 11.5 s + 10 s - 10.5 s */
    d = tu_check(f->store, lim, "k", 1, 11500 * MS);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 3500 * MS); /* 5 s leaves at 15 s */
    sl_limit_free(lim);
}

/* The same with steps: 2 per 10 steps of 1 s, steps 1 and 5 hold one
 * each; a refused cost-2 request in step 11 moves the key to step 11 and
 * drops step 1; a request stamped in step 10 is judged in step 11
 * (window 2 .. 11, usage 1): it passes and counts in step 11. */
static void test_stepped_window_stale_request_judged_at_key_step(
    void **state)
{
    fixture *f = *state;
    sl_limit *lim;
    sl_decision d;

    lim = stepped_limit(2, 10 * SEC, SEC);
    expect_eq(tu_check(f->store, lim, "k", 1, 1 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 1, 5 * SEC).allowed, 1);
    expect_eq(tu_check(f->store, lim, "k", 2, 11500 * MS).allowed, 0);
    d = tu_check(f->store, lim, "k", 1, 10500 * MS);
    expect_eq(d.allowed, 1);
    expect_eq(d.reset_after, 21 * SEC - 10500 * MS); /* step 11 + 10 */
    d = tu_check(f->store, lim, "k", 1, 11500 * MS);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, 15 * SEC - 11500 * MS); /* step 5 leaves */
    sl_limit_free(lim);
}

/* ==== the store and time ==== */

static void test_sweep_before_first_decision_time_keeps_state(void **state)
{
    fixture *f = *state;
    sl_limit *lim;

    lim = tu_limit(SL_FIXED_WINDOW, 1, SEC, 0);
    /* The store's first decision is at 100 s, for another key. */
    tu_check(f->store, lim, "a", 1, 100 * SEC);
    /* Key b lives at 10 s: its window [10 s, 11 s) is full. */
    expect_eq(tu_check(f->store, lim, "b", 1, 10 * SEC).allowed, 1);
    /* Sweeping at 10 s must keep b: its state expires at 11 s. */
    expect_eq(sl_store_sweep(f->store, 10 * SEC, 1u << 20), 0);
    expect_eq(tu_check(f->store, lim, "b", 1, 10 * SEC).allowed, 0);
    sl_limit_free(lim);
}

/* ---- registration ---- */

typedef void (*test_fn)(void **);

static const struct {
    const char *name;
    test_fn fn;
    int buckets_only; /* the schedule algorithms only */
} per_algorithm[] = {
    {"cost_zero_consumes_nothing", test_cost_zero_consumes_nothing, 0},
    {"cost_zero_allowed_when_exhausted",
     test_cost_zero_allowed_when_exhausted, 0},
    {"cost_over_capacity_never_fits", test_cost_over_capacity_never_fits, 0},
    {"cost_of_whole_capacity_fits_once",
     test_cost_of_whole_capacity_fits_once, 0},
    {"cost_out_of_range_is_ecost", test_cost_out_of_range_is_ecost, 0},
    {"fresh_key_is_initial", test_fresh_key_is_initial, 0},
    {"keys_are_independent", test_keys_are_independent, 0},
    {"reset_after_returns_to_initial", test_reset_after_returns_to_initial,
     0},
    {"retry_after_is_smallest_wait", test_retry_after_is_smallest_wait, 0},
    {"backwards_time_grants_nothing", test_backwards_time_grants_nothing, 0},
    {"backwards_query_allowed_and_remaining_not_negative",
     test_backwards_query_allowed_and_remaining_not_negative, 0},
    {"end_of_time_does_not_wrap", test_end_of_time_does_not_wrap, 0},
    {"schedule_three_per_second_no_drift",
     test_schedule_three_per_second_no_drift, 1},
    {"schedule_seven_per_minute_no_drift",
     test_schedule_seven_per_minute_no_drift, 1},
    {"schedule_largest_cost", test_schedule_largest_cost, 1},
};

#define NPER (sizeof(per_algorithm) / sizeof(per_algorithm[0]))

#define SINGLE(f) {#f, f, setup, teardown, NULL}

static const struct CMUnitTest singles[] = {
    SINGLE(test_token_bucket_remaining_and_reset),
    SINGLE(test_token_bucket_never_exceeds_burst),
    SINGLE(test_token_bucket_seven_per_minute),
    SINGLE(test_gcra_burst_one_spaces_requests_by_t),
    SINGLE(test_gcra_retry_is_new_minus_tolerance),
    SINGLE(test_leaky_bucket_delay_with_fractional_drain),
    SINGLE(test_leaky_bucket_delay_counts_only_work_ahead),
    SINGLE(test_leaky_bucket_query_reports_queue_delay),
    SINGLE(test_fixed_window_edge_at_k_times_p),
    SINGLE(test_fixed_window_aligned_to_zero_not_first_request),
    SINGLE(test_fixed_window_remaining_and_retry),
    SINGLE(test_fixed_window_earlier_window_counts_in_newest),
    SINGLE(test_fixed_window_largest_limit),
    SINGLE(test_sliding_log_entry_exactly_p_old_is_gone),
    SINGLE(test_sliding_log_retry_drops_oldest_until_fit),
    SINGLE(test_sliding_log_same_timestamp_requests),
    SINGLE(test_sliding_log_largest_limit),
    SINGLE(test_sliding_log_rejected_knocking_stays_limited),
    SINGLE(test_sliding_log_rejected_query_not_logged),
    SINGLE(test_sliding_log_rejected_query_on_overfull_log),
    SINGLE(test_sliding_window_full_previous_window_at_edge),
    SINGLE(test_sliding_window_reset_after_two_windows),
    SINGLE(test_sliding_window_retry_in_next_window),
    SINGLE(test_sliding_window_retry_two_windows_on),
    SINGLE(test_sliding_window_three_per_second_floor),
    SINGLE(test_sliding_window_gap_clears_both_counts),
    SINGLE(test_stepped_window_request_leaves_after_n_steps),
    SINGLE(test_stepped_window_default_step),
    SINGLE(test_stepped_window_one_step_is_fixed_window),
    SINGLE(test_stepped_window_retry_skips_steps),
    SINGLE(test_stepped_window_earlier_step_counts_in_newest),
    SINGLE(test_sliding_log_stale_request_judged_at_key_time),
    SINGLE(test_stepped_window_stale_request_judged_at_key_step),
    SINGLE(test_sweep_before_first_decision_time_keeps_state),
};

#define NSINGLE (sizeof(singles) / sizeof(singles[0]))

int main(void)
{
    static struct CMUnitTest tests[NPER * SL_ALGORITHM_COUNT + NSINGLE];
    static char names[NPER * SL_ALGORITHM_COUNT][96];
    size_t n = 0;

    for (size_t i = 0; i < NPER; i++) {
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            param_algs[a] = (sl_algorithm)a;
            if (per_algorithm[i].buckets_only && !is_bucket((sl_algorithm)a))
                continue;
            snprintf(names[n], sizeof(names[n]), "%s/%s",
                     per_algorithm[i].name, sl_algorithm_name(a));
            tests[n] = (struct CMUnitTest){names[n], per_algorithm[i].fn,
                                           setup, teardown, &param_algs[a]};
            n++;
        }
    }
    for (size_t i = 0; i < NSINGLE; i++)
        tests[n++] = singles[i];
    return _cmocka_run_group_tests("test_algorithms", tests, n, NULL, NULL);
}
