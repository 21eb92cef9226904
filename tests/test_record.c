/*
 * test_record.c - sl_check_costs: a cost of its own for each item of an
 * all-or-nothing check, and SL_RECORD, which consumes a request's cost
 * whether or not it fits (the request has been sent anyway).
 *
 * Recording is checked three ways: it is a plain commit when the request
 * fits (random traces against sl_check on a second store); after a request
 * that did not fit, retry_after is exactly the wait until the same cost
 * fits (checked by deciding at that time and one nanosecond before); and
 * on hand-worked examples, windows and logs count the units recorded past
 * the limit while the buckets are only emptied.  Fixed seeds, manual time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

static const sl_algorithm all_algorithms[] = {
    SL_TOKEN_BUCKET, SL_GCRA,           SL_LEAKY_BUCKET,   SL_FIXED_WINDOW,
    SL_SLIDING_LOG,  SL_SLIDING_WINDOW, SL_STEPPED_WINDOW,
};
#define NALGS (sizeof(all_algorithms) / sizeof(all_algorithms[0]))

static sl_check_item item(const sl_limit *lim, const char *key)
{
    return (sl_check_item){lim, key, strlen(key)};
}

/* One item recorded: the decision, or the test fails. */
static sl_decision record(sl_store *st, const sl_limit *lim, const char *key,
                          int64_t cost, sl_nanos now)
{
    sl_check_item it = item(lim, key);
    sl_decision each, overall;
    int rc = sl_check_costs(st, &it, &cost, 1, now, SL_RECORD, &each, &overall);
    if (rc != 0)
        fail_msg("record('%s', cost %lld, now %lld) = %s", key, (long long)cost,
                 (long long)now, sl_err_name(rc));
    return each;
}

static void expect_same(const sl_decision *a, const sl_decision *b,
                        const char *what, long long at)
{
    expect_eq_at(a->allowed, b->allowed, "%s at %lld", what, at);
    expect_eq_at(a->limit, b->limit, "%s at %lld", what, at);
    expect_eq_at(a->remaining, b->remaining, "%s at %lld", what, at);
    expect_eq_at(a->reset_after, b->reset_after, "%s at %lld", what, at);
    expect_eq_at(a->retry_after, b->retry_after, "%s at %lld", what, at);
    expect_eq_at(a->delay, b->delay, "%s at %lld", what, at);
}

/* ---- per-item costs ---- */

/* 10 requests and 1000 bytes a minute: a 600-byte request passes, a second
 * one does not fit the byte budget and takes no request either; a 300-byte
 * one then takes from both. */
static void test_costs_per_item_all_or_nothing(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *reqs = tu_limit(SL_FIXED_WINDOW, 10, MINUTE, 0);
    sl_limit *bytes = tu_limit(SL_TOKEN_BUCKET, 1000, MINUTE, 0);
    sl_check_item items[2] = {item(reqs, "u"), item(bytes, "u")};
    sl_decision each[2], overall;

    int64_t c1[2] = {1, 600};
    expect_eq(sl_check_costs(st, items, c1, 2, 0, 0, each, &overall), 0);
    expect_eq(overall.allowed, 1);
    expect_eq(each[0].remaining, 9);
    expect_eq(each[1].remaining, 400);

    expect_eq(sl_check_costs(st, items, c1, 2, 0, 0, each, &overall), 0);
    expect_eq(overall.allowed, 0);
    expect_eq(each[0].allowed, 1); /* it would have fitted ... */
    expect_eq(each[1].allowed, 0);
    expect_eq(tu_check(st, reqs, "u", 0, 0).remaining, 9); /* ... untaken */
    expect_eq(tu_check(st, bytes, "u", 0, 0).remaining, 400);

    int64_t c2[2] = {1, 300};
    expect_eq(sl_check_costs(st, items, c2, 2, 0, 0, each, &overall), 0);
    expect_eq(overall.allowed, 1);
    expect_eq(each[0].remaining, 8);
    expect_eq(each[1].remaining, 100);
    expect_eq(overall.remaining, 8); /* the item closest to its limit */
    sl_limit_free(reqs);
    sl_limit_free(bytes);
    sl_store_free(st);
}

/* sl_check_multi is sl_check_costs with one cost for every item, and both
 * combine their items as sl_decisions_combine does. */
static void test_multi_is_costs_with_one_cost(void **state)
{
    (void)state;
    sl_store *a = tu_store(), *b = tu_store();
    sl_limit *l1 = tu_limit(SL_GCRA, 5, SEC, 0);
    sl_limit *l2 = tu_limit(SL_SLIDING_LOG, 7, SEC, 0);
    sl_check_item items[2] = {item(l1, "k"), item(l2, "k")};
    uint64_t seed = 7;
    sl_nanos now = 0;

    for (int i = 0; i < 2000; i++) {
        int64_t cost = tu_range(&seed, 0, 3), costs[2] = {cost, cost};
        sl_decision ea[2], eb[2], oa, ob;
        now += tu_range(&seed, 0, 300 * MS);
        expect_eq(sl_check_multi(a, items, 2, cost, now, ea, &oa), 0);
        expect_eq(sl_check_costs(b, items, costs, 2, now, 0, eb, &ob), 0);
        expect_same(&oa, &ob, "overall", now);
        expect_same(&ea[0], &eb[0], "item 0", now);
        expect_same(&ea[1], &eb[1], "item 1", now);
        /* The public combination is the one the calls use. */
        sl_decision combined;
        sl_decisions_combine(ea, 2, &combined);
        expect_same(&combined, &oa, "sl_decisions_combine", now);
    }
    sl_limit_free(l1);
    sl_limit_free(l2);
    sl_store_free(a);
    sl_store_free(b);
}

static void test_costs_bad_input_consumes_nothing(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 10, MINUTE, 0);
    sl_check_item items[2] = {item(lim, "a"), item(lim, "b")};
    sl_decision overall;
    int64_t neg[2] = {1, -1}, big[2] = {SL_MAX_COUNT + 1, 1}, ok[2] = {1, 1};

    expect_eq(sl_check_costs(st, items, NULL, 2, 0, 0, NULL, &overall),
              SL_EINVAL);
    expect_eq(sl_check_costs(st, items, neg, 2, 0, 0, NULL, &overall),
              SL_ECOST);
    expect_eq(sl_check_costs(st, items, big, 2, 0, SL_RECORD, NULL, &overall),
              SL_ECOST);
    expect_eq(sl_check_costs(st, items, ok, 2, 0, 0x2, NULL, &overall),
              SL_EINVAL);
    expect_eq(sl_check_costs(st, items, ok, 2, 0, 0, NULL, NULL), SL_EINVAL);
    expect_eq(sl_check_costs(st, items, ok, 0, 0, 0, NULL, &overall),
              SL_EINVAL);
    expect_eq(tu_check(st, lim, "a", 0, 0).remaining, 10);
    expect_eq(tu_check(st, lim, "b", 0, 0).remaining, 10);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* ---- recording ---- */

/* A request that fits is recorded exactly as sl_check commits it. */
static void test_record_is_commit_when_it_fits(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *x = tu_store(), *y = tu_store();
        sl_limit *lim = tu_limit(all_algorithms[a], 7, 2 * SEC, 0);
        uint64_t seed = 100 + a;
        sl_nanos now = 1000 * SEC;
        int steps = tu_quick() ? 3000 : 30000;
        char key[8];

        for (int i = 0; i < steps; i++) {
            snprintf(key, sizeof(key), "k%d", (int)tu_below(&seed, 4));
            int64_t cost = tu_range(&seed, 0, 4);
            now += tu_below(&seed, 5) == 0 ? 0 : tu_range(&seed, 1, 700 * MS);
            sl_decision dx = tu_check(x, lim, key, cost, now);
            if (!dx.allowed)
                continue; /* consumed nothing in x; y is not told */
            sl_decision dy = record(y, lim, key, cost, now);
            expect_same(&dx, &dy, sl_algorithm_name(all_algorithms[a]), now);
        }
        sl_limit_free(lim);
        sl_store_free(x);
        sl_store_free(y);
    }
}

/*
 * After a request that did not fit is recorded, retry_after is the exact
 * wait until the same cost fits: a check one nanosecond earlier is refused,
 * one at that time passes.  A check right after the record sees the same
 * decision (a refused check consumes nothing).
 */
static void test_record_retry_after_is_exact(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        const char *name = sl_algorithm_name(all_algorithms[a]);
        sl_store *st = tu_store();
        sl_limit *lim = tu_limit(all_algorithms[a], 5, 3 * SEC, 0);
        uint64_t seed = 900 + a;
        sl_nanos now = 5000 * SEC;
        int steps = tu_quick() ? 2000 : 20000, refused = 0;

        for (int i = 0; i < steps; i++) {
            int64_t cost = tu_range(&seed, 1, 6);
            now += tu_below(&seed, 3) == 0 ? 0 : tu_range(&seed, 1, 900 * MS);
            sl_decision d = record(st, lim, "k", cost, now);
            if (d.allowed || d.retry_after < 0) {
                expect_eq_at(d.retry_after, cost > 5 ? -1 : 0, "%s at %lld",
                             name, (long long)now);
                continue;
            }
            refused++;
            expect_cmp(d.retry_after, >, 0);
            sl_decision again = tu_check(st, lim, "k", cost, now);
            expect_eq_at(again.allowed, 0, "%s at %lld", name, (long long)now);
            expect_eq_at(again.retry_after, d.retry_after, "%s at %lld", name,
                         (long long)now);
            expect_eq_at(again.remaining, d.remaining, "%s at %lld", name,
                         (long long)now);
            sl_decision before =
                tu_check(st, lim, "k", cost, now + d.retry_after - 1);
            expect_eq_at(before.allowed, 0, "%s: 1 ns before retry, at %lld",
                         name, (long long)now);
            now += d.retry_after;
            expect_eq_at(tu_check(st, lim, "k", cost, now).allowed, 1,
                         "%s: at retry, %lld", name, (long long)now);
        }
        expect_cmp(refused, >, steps / 20); /* the trace did exercise it */
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* Fixed window, 5 a minute: 3 and then 5 recorded (8 in all) leave
 * nothing for the rest of the minute; the next window starts afresh. */
static void test_record_fixed_window(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, MINUTE, 0);
    expect_eq(record(st, lim, "k", 3, 0).allowed, 1);
    sl_decision d = record(st, lim, "k", 5, 0);
    expect_eq(d.allowed, 0);
    expect_eq(d.remaining, 0);
    expect_eq(d.retry_after, MINUTE);
    expect_eq(tu_check(st, lim, "k", 0, 0).allowed, 1); /* a query passes */
    expect_eq(tu_check(st, lim, "k", 1, MINUTE - 1).allowed, 0);
    expect_eq(tu_check(st, lim, "k", 5, MINUTE).allowed, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* The Databox paper's stepped window, 10 per 10 s in 1 s steps: 6 at 0 s
 * and 6 more recorded at 1 s (over the limit, sent anyway).  When step 0
 * leaves the window at 10 s, the 6 of step 1 still count, so 5 do not fit
 * until 11 s.  Had the second 6 been refused, 10 would fit at 10 s. */
static void test_record_stepped_window_counts_the_excess(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW,
                         .limit = 10,
                         .period = 10 * SEC,
                         .step = SEC};
    sl_limit *lim = tu_limit_cfg(&c);
    expect_eq(record(st, lim, "k", 6, 0).allowed, 1);
    sl_decision d = record(st, lim, "k", 6, SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.remaining, 0);
    expect_eq(d.retry_after, 10 * SEC); /* until both steps have left */
    expect_eq(tu_check(st, lim, "k", 0, SEC).allowed, 1); /* a query passes */
    expect_eq(tu_check(st, lim, "k", 5, 10 * SEC).allowed, 0);
    expect_eq(tu_check(st, lim, "k", 4, 10 * SEC).allowed, 1);
    expect_eq(tu_check(st, lim, "k", 5, 11 * SEC).allowed, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* The seed's sliding log, 2 a minute, with the third request recorded:
 * at 1:00.5 the window (0:00.5, 1:00.5] holds 0:01 and 0:02. */
static void test_record_sliding_log(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_SLIDING_LOG, 2, MINUTE, 0);
    expect_eq(record(st, lim, "k", 1, 0).allowed, 1);
    expect_eq(record(st, lim, "k", 1, SEC).allowed, 1);
    sl_decision d = record(st, lim, "k", 1, 2 * SEC);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, MINUTE - SEC); /* when 0:01 leaves */
    expect_eq(tu_check(st, lim, "k", 1, MINUTE + 500 * MS).allowed, 0);
    expect_eq(tu_check(st, lim, "k", 1, MINUTE + SEC).allowed, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* Sliding window counter, 5 a minute: 3 and 5 recorded in window 0 weigh
 * in window 1 as floor(8 * 0.5) = 4 at its middle, leaving room for 1. */
static void test_record_sliding_window(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 5, MINUTE, 0);
    expect_eq(record(st, lim, "k", 3, 0).allowed, 1);
    expect_eq(record(st, lim, "k", 5, 0).allowed, 0);
    sl_nanos mid = MINUTE + MINUTE / 2;
    expect_eq(tu_check(st, lim, "k", 2, mid).allowed, 0);
    expect_eq(tu_check(st, lim, "k", 1, mid).allowed, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* Buckets, 2 a minute (one token each 30 s): a request recorded past an
 * empty bucket leaves it empty, not in debt, so a token is back 30 s
 * later; the leaky bucket gives such a request no delay. */
static void test_record_buckets_are_left_empty(void **state)
{
    (void)state;
    const sl_algorithm buckets[] = {SL_TOKEN_BUCKET, SL_GCRA, SL_LEAKY_BUCKET};
    for (size_t a = 0; a < 3; a++) {
        sl_store *st = tu_store();
        sl_limit *lim = tu_limit(buckets[a], 2, MINUTE, 0);
        expect_eq(record(st, lim, "k", 2, 0).allowed, 1);
        sl_decision d = record(st, lim, "k", 2, 0);
        expect_eq(d.allowed, 0);
        expect_eq(d.delay, 0);
        expect_eq(d.remaining, 0);
        expect_eq(d.reset_after, MINUTE);
        expect_eq(d.retry_after, MINUTE);
        expect_eq(record(st, lim, "k", 2, 0).retry_after, MINUTE);
        expect_eq(tu_check(st, lim, "k", 1, 30 * SEC - 1).allowed, 0);
        expect_eq(tu_check(st, lim, "k", 1, 30 * SEC).allowed, 1);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* A stepped window of 1 ns steps whose period reaches past the end of
 * time, recorded into at the last accepted now: the step arithmetic must
 * not overflow (UBSan, found by fuzz_store) and saturates instead. */
static void test_record_stepped_window_at_the_end_of_time(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = 1,
                         .period = INT64_C(7161677205458871139), .step = 1};
    sl_limit *lim = tu_limit_cfg(&c);
    sl_decision d = record(st, lim, "k", 1, SL_MAX_TIME);
    expect_eq(d.allowed, 1);
    expect_eq(d.reset_after, INT64_MAX - SL_MAX_TIME);
    d = record(st, lim, "k", 1, SL_MAX_TIME);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, c.period); /* exact: it fits in 64 bits */
    sl_limit_free(lim);
    sl_store_free(st);
}

/* Several items are all recorded, whichever fit. */
static void test_record_multi_consumes_from_all(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *small = tu_limit(SL_FIXED_WINDOW, 1, MINUTE, 0);
    sl_limit *large = tu_limit(SL_FIXED_WINDOW, 100, MINUTE, 0);
    sl_check_item items[2] = {item(small, "k"), item(large, "k")};
    int64_t costs[2] = {1, 1};
    sl_decision each[2], overall;

    for (int i = 0; i < 3; i++)
        expect_eq(
            sl_check_costs(st, items, costs, 2, 0, SL_RECORD, each, &overall),
            0);
    expect_eq(overall.allowed, 0);
    expect_eq(each[0].allowed, 0);
    expect_eq(each[1].allowed, 1);
    expect_eq(tu_check(st, large, "k", 0, 0).remaining, 97);
    sl_limit_free(small);
    sl_limit_free(large);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_costs_per_item_all_or_nothing),
        cmocka_unit_test(test_multi_is_costs_with_one_cost),
        cmocka_unit_test(test_costs_bad_input_consumes_nothing),
        cmocka_unit_test(test_record_is_commit_when_it_fits),
        cmocka_unit_test(test_record_retry_after_is_exact),
        cmocka_unit_test(test_record_fixed_window),
        cmocka_unit_test(test_record_stepped_window_counts_the_excess),
        cmocka_unit_test(test_record_sliding_log),
        cmocka_unit_test(test_record_sliding_window),
        cmocka_unit_test(test_record_buckets_are_left_empty),
        cmocka_unit_test(test_record_stepped_window_at_the_end_of_time),
        cmocka_unit_test(test_record_multi_consumes_from_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
