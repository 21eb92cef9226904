/*
 * test_multi.c - sl_check_multi: a request that must pass several limits
 * (per-user and global, say) is allowed only if all allow, and then
 * consumes from all; otherwise from none.  Checks the combined decision's
 * fields, the per-item decisions, input errors (which consume nothing),
 * and sliding_log's SL_LOG_REJECTED, which logs a request that another
 * limit of the same call rejected.
 *
 * What a limit holds afterwards is read with cost-0 queries, which consume
 * nothing.  Fixed seeds, manual time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "testutil.h"


/* cmocka prints integers in unsigned hex; these print both values in
 * signed decimal, with the expressions that produced them. */

/*
 * A malloc that fails on demand, for the one test of running out of memory
 * half-way through a call.  Off unless malloc_budget >= 0; not built under
 * the sanitizers, which bring their own malloc.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SL_SANITIZED 1
#endif
#endif
#ifdef SL_SANITIZED
#define SL_FAILING_MALLOC 0
#else
#define SL_FAILING_MALLOC 1
static int malloc_budget = -1; /* allocations that may still succeed */
extern void *__libc_malloc(size_t size);
void *malloc(size_t size);
void *malloc(size_t size)
{
    if (malloc_budget == 0)
        return NULL;
    if (malloc_budget > 0)
        malloc_budget--;
    return __libc_malloc(size);
}
#endif

/* ---- helpers ---- */

static sl_store *store_new(void)
{
    sl_memory_options o = {
        .size = sizeof(sl_memory_options), .seed0 = 11, .seed1 = 12};
    sl_store *st = sl_memory_store_new(&o);
    assert_non_null(st);
    return st;
}

static sl_limit *limit_cfg(sl_limit_config c)
{
    return tu_limit_cfg(&c);
}

static sl_limit *limit_new(sl_algorithm alg, int64_t limit, sl_nanos period,
                           int64_t burst)
{
    return limit_cfg((sl_limit_config){.algorithm = alg, .limit = limit,
                                       .period = period, .burst = burst});
}

static sl_check_item item(const sl_limit *lim, const char *key)
{
    return (sl_check_item){lim, key, strlen(key)};
}

static sl_decision check(sl_store *st, const sl_limit *lim, const char *key,
                         int64_t cost, sl_nanos now)
{
    sl_decision d;
    int rc = sl_check(st, lim, key, strlen(key), cost, now, &d);
    if (rc != 0)
        fail_msg("sl_check('%s', cost %lld) = %s", key, (long long)cost,
                 sl_err_name(rc));
    return d;
}

/* What the limit has left for key at now, consuming nothing. */
static int64_t remaining(sl_store *st, const sl_limit *lim, const char *key,
                         sl_nanos now)
{
    return check(st, lim, key, 0, now).remaining;
}

/* A multi check that must not fail; fills each (n entries) and returns the
 * overall decision. */
static sl_decision multi(sl_store *st, const sl_check_item *items, size_t n,
                         int64_t cost, sl_nanos now, sl_decision *each)
{
    sl_decision overall;
    int rc;
    memset(&overall, 0x5a, sizeof(overall));
    if (each != NULL)
        memset(each, 0x5a, n * sizeof(*each));
    rc = sl_check_multi(st, items, n, cost, now, each, &overall);
    if (rc != 0)
        fail_msg("sl_check_multi(n %zu, cost %lld) = %s", n, (long long)cost,
                 sl_err_name(rc));
    return overall;
}

static void expect_decision(const sl_decision *d, int allowed, int64_t limit,
                            int64_t remaining, sl_nanos reset_after,
                            sl_nanos retry_after, sl_nanos delay)
{
    expect_eq(d->allowed, allowed);
    expect_eq(d->limit, limit);
    expect_eq(d->remaining, remaining);
    expect_eq(d->reset_after, reset_after);
    expect_eq(d->retry_after, retry_after);
    expect_eq(d->delay, delay);
}

static void expect_same(const sl_decision *a, const sl_decision *b)
{
    expect_decision(a, b->allowed, b->limit, b->remaining, b->reset_after,
                    b->retry_after, b->delay);
}

static const sl_algorithm all_algorithms[] = {
    SL_TOKEN_BUCKET, SL_GCRA, SL_LEAKY_BUCKET, SL_FIXED_WINDOW,
    SL_SLIDING_LOG, SL_SLIDING_WINDOW, SL_STEPPED_WINDOW,
};
#define NALGS (sizeof(all_algorithms) / sizeof(all_algorithms[0]))

/* ---- all or nothing ---- */

/* 3 per user and 5 in total per minute: alice takes 3 and is refused a
 * fourth without touching the global count; bob takes the last 2 global
 * units and is then refused by the global limit without touching his. */
static void test_user_and_global_limits_all_or_nothing(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *user = limit_new(SL_FIXED_WINDOW, 3, 60 * SEC, 0);
    sl_limit *global = limit_new(SL_TOKEN_BUCKET, 5, 60 * SEC, 0);
    sl_check_item alice[] = {item(user, "alice"), item(global, "all")};
    sl_check_item bob[] = {item(user, "bob"), item(global, "all")};
    sl_nanos now = 10 * SEC;

    for (int i = 0; i < 3; i++)
        expect_eq(multi(st, alice, 2, 1, now, NULL).allowed, 1);
    expect_eq(multi(st, alice, 2, 1, now, NULL).allowed, 0);
    expect_eq(remaining(st, global, "all", now), 2);
    expect_eq(remaining(st, user, "alice", now), 0);

    expect_eq(multi(st, bob, 2, 1, now, NULL).allowed, 1);
    expect_eq(multi(st, bob, 2, 1, now, NULL).allowed, 1);
    expect_eq(multi(st, bob, 2, 1, now, NULL).allowed, 0);
    expect_eq(remaining(st, global, "all", now), 0);
    expect_eq(remaining(st, user, "bob", now), 1);
    sl_limit_free(user);
    sl_limit_free(global);
    sl_store_free(st);
}

/* Every algorithm, as the limit that would allow, paired with one that
 * rejects: it must hold exactly what it held before the call. */
static void test_rejected_request_consumes_from_none(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *st = store_new();
        sl_limit *lim = limit_new(all_algorithms[a], 4, SEC, 0);
        sl_limit *full = limit_new(SL_FIXED_WINDOW, 1, 60 * SEC, 0);
        sl_check_item items[] = {item(lim, "k"), item(full, "k")};
        sl_nanos now = 5 * SEC;

        check(st, lim, "k", 1, now);
        check(st, full, "k", 1, now);
        for (int i = 0; i < 5; i++) {
            sl_decision each[2];
            sl_decision o = multi(st, items, 2, 1, now + i * MS, each);
            expect_eq(o.allowed, 0);
            /* Each item has its own verdict: this one would have passed. */
            expect_eq(each[0].allowed, 1);
            expect_eq(each[1].allowed, 0);
            if (remaining(st, lim, "k", now + i * MS) != 3)
                fail_msg("%s: remaining %lld after refused request %d, "
                         "expected 3",
                         sl_algorithm_name(all_algorithms[a]),
                         (long long)remaining(st, lim, "k", now + i * MS), i);
        }
        expect_eq(sl__memory_check(st), 0);
        sl_limit_free(lim);
        sl_limit_free(full);
        sl_store_free(st);
    }
}

/* Limits of 2..8 of the seven algorithms at one instant: the call passes
 * exactly twice, and afterwards each holds L - 2. */
static void test_mixed_algorithms_pass_together(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *lims[NALGS];
    sl_check_item items[NALGS];
    sl_decision each[NALGS];
    sl_nanos now = 3 * SEC;

    for (size_t a = 0; a < NALGS; a++) {
        lims[a] = limit_new(all_algorithms[a], (int64_t)(8 - a), SEC, 0);
        items[a] = item(lims[a], "user");
    }
    expect_eq(multi(st, items, NALGS, 1, now, each).allowed, 1);
    expect_eq(multi(st, items, NALGS, 1, now, each).allowed, 1);
    sl_decision o = multi(st, items, NALGS, 1, now, each);
    expect_eq(o.allowed, 0);
    expect_eq(each[NALGS - 1].allowed, 0); /* the limit of 2 */
    for (size_t a = 0; a < NALGS; a++) {
        int64_t left = remaining(st, lims[a], "user", now);
        if (left != (int64_t)(8 - a) - 2)
            fail_msg("%s: remaining %lld, expected %lld",
                     sl_algorithm_name(all_algorithms[a]), (long long)left,
                     (long long)(8 - a) - 2);
    }
    for (size_t a = 0; a < NALGS; a++)
        sl_limit_free(lims[a]);
    sl_store_free(st);
}

/* A query (cost 0) through several limits consumes nothing and leaves no
 * state behind, not even the slots the first phase reserves. */
static void test_query_keeps_no_state(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *lims[NALGS];
    sl_check_item items[NALGS];
    sl_store_stats s;

    for (size_t a = 0; a < NALGS; a++) {
        lims[a] = limit_new(all_algorithms[a], 3, SEC, 0);
        items[a] = item(lims[a], "q");
    }
    sl_decision o = multi(st, items, NALGS, 0, SEC, NULL);
    expect_eq(o.allowed, 1);
    expect_eq(o.remaining, 3);
    sl_store_get_stats(st, &s);
    expect_eq(s.keys, 0);
    /* A refused request on fresh keys leaves nothing either. */
    o = multi(st, items, NALGS, 4, SEC, NULL);
    expect_eq(o.allowed, 0);
    expect_eq(o.retry_after, -1);
    sl_store_get_stats(st, &s);
    expect_eq(s.keys, 0);
    expect_eq(sl__memory_check(st), 0);
    for (size_t a = 0; a < NALGS; a++)
        sl_limit_free(lims[a]);
    sl_store_free(st);
}

/* ---- the decisions ---- */

/*
 * At 10 s, cost 1:
 *   token_bucket 10 per 10 s, fresh:      remaining 9, reset 1 s
 *   fixed_window 5 per minute, fresh:     remaining 4, reset 50 s
 *   leaky_bucket 1/s, queue 3, 2 queued:  delay 2 s, remaining 0, reset 3 s
 * Overall: the leaky bucket has the least left (limit 1, remaining 0), the
 * window the longest reset, the queue the delay.
 */
static void test_overall_decision_when_allowed(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *tb = limit_new(SL_TOKEN_BUCKET, 10, 10 * SEC, 0);
    sl_limit *fw = limit_new(SL_FIXED_WINDOW, 5, 60 * SEC, 0);
    sl_limit *lb = limit_new(SL_LEAKY_BUCKET, 1, SEC, 3);
    sl_check_item items[] = {item(tb, "u"), item(fw, "u"), item(lb, "u")};
    sl_decision each[3];
    sl_nanos now = 10 * SEC;

    check(st, lb, "u", 2, now);
    sl_decision o = multi(st, items, 3, 1, now, each);
    expect_decision(&each[0], 1, 10, 9, 1 * SEC, 0, 0);
    expect_decision(&each[1], 1, 5, 4, 50 * SEC, 0, 0);
    expect_decision(&each[2], 1, 1, 0, 3 * SEC, 0, 2 * SEC);
    expect_decision(&o, 1, 1, 0, 50 * SEC, 0, 2 * SEC);
    sl_limit_free(tb);
    sl_limit_free(fw);
    sl_limit_free(lb);
    sl_store_free(st);
}

/*
 * At 10 s, cost 2:
 *   token_bucket 10 per 10 s, fresh:     would pass; nothing consumed
 *   fixed_window 5 per minute, 5 taken:  rejected, retry 50 s
 *   leaky_bucket 1/s, queue 3, 1 queued: would pass with delay 1 s
 * Overall: rejected, the window speaks (limit 5, remaining 0), retry and
 * reset 50 s, and no delay since nothing passes.
 */
static void test_overall_decision_when_rejected(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *tb = limit_new(SL_TOKEN_BUCKET, 10, 10 * SEC, 0);
    sl_limit *fw = limit_new(SL_FIXED_WINDOW, 5, 60 * SEC, 0);
    sl_limit *lb = limit_new(SL_LEAKY_BUCKET, 1, SEC, 3);
    sl_check_item items[] = {item(tb, "u"), item(fw, "u"), item(lb, "u")};
    sl_decision each[3];
    sl_nanos now = 10 * SEC;

    check(st, fw, "u", 5, now);
    check(st, lb, "u", 1, now);
    sl_decision o = multi(st, items, 3, 2, now, each);
    expect_decision(&each[0], 1, 10, 10, 0, 0, 0);
    expect_decision(&each[1], 0, 5, 0, 50 * SEC, 50 * SEC, 0);
    expect_decision(&each[2], 1, 1, 2, 1 * SEC, 0, 1 * SEC);
    expect_decision(&o, 0, 5, 0, 50 * SEC, 50 * SEC, 0);
    /* Nothing was consumed. */
    expect_eq(remaining(st, tb, "u", now), 10);
    expect_eq(remaining(st, lb, "u", now), 2);
    sl_limit_free(tb);
    sl_limit_free(fw);
    sl_limit_free(lb);
    sl_store_free(st);
}

/* retry_after is -1 if any item can never pass, wherever it stands. */
static void test_overall_retry_never(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *fw = limit_new(SL_FIXED_WINDOW, 5, 60 * SEC, 0);
    sl_limit *lb = limit_new(SL_LEAKY_BUCKET, 1, SEC, 3);
    sl_check_item first[] = {item(lb, "u"), item(fw, "u")};
    sl_check_item last[] = {item(fw, "u"), item(lb, "u")};
    sl_decision each[2];
    sl_nanos now = 10 * SEC;

    check(st, fw, "u", 5, now); /* the window's own retry is 50 s */
    sl_decision o = multi(st, first, 2, 4, now, each);
    expect_eq(each[0].retry_after, -1);
    expect_eq(each[1].retry_after, 50 * SEC);
    expect_eq(o.allowed, 0);
    expect_eq(o.retry_after, -1);
    o = multi(st, last, 2, 4, now, each);
    expect_eq(o.retry_after, -1);
    sl_limit_free(fw);
    sl_limit_free(lb);
    sl_store_free(st);
}

/* One item is sl_check. */
static void test_one_item_is_a_plain_check(void **state)
{
    (void)state;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *one = store_new(), *many = store_new();
        sl_limit *lim = limit_new(all_algorithms[a], 3, SEC, 0);
        sl_check_item it = item(lim, "k");

        for (int i = 0; i < 6; i++) {
            sl_nanos now = SEC + i * 100 * MS;
            sl_decision d = check(one, lim, "k", 1, now), each;
            sl_decision o = multi(many, &it, 1, 1, now, &each);
            expect_same(&o, &d);
            expect_same(&each, &d);
        }
        sl_limit_free(lim);
        sl_store_free(one);
        sl_store_free(many);
    }
}

static void test_each_may_be_null(void **state)
{
    (void)state;
    sl_store *a = store_new(), *b = store_new();
    sl_limit *tb = limit_new(SL_TOKEN_BUCKET, 2, SEC, 0);
    sl_limit *sw = limit_new(SL_SLIDING_WINDOW, 3, SEC, 0);
    sl_check_item items[] = {item(tb, "k"), item(sw, "k")};
    sl_decision each[2];

    for (int i = 0; i < 4; i++) {
        sl_decision with = multi(a, items, 2, 1, SEC, each);
        sl_decision without = multi(b, items, 2, 1, SEC, NULL);
        expect_same(&without, &with);
    }
    sl_limit_free(tb);
    sl_limit_free(sw);
    sl_store_free(a);
    sl_store_free(b);
}

/* ---- sliding_log and SL_LOG_REJECTED ---- */

/* A request refused by another limit is logged by a sliding_log with
 * SL_LOG_REJECTED (src/core/sliding_log.c), and only with it. */
static void test_log_rejected_logs_requests_refused_elsewhere(void **state)
{
    (void)state;
    for (int flagged = 0; flagged < 2; flagged++) {
        sl_store *st = store_new();
        sl_limit *log = limit_cfg((sl_limit_config){
            .algorithm = SL_SLIDING_LOG, .limit = 3, .period = 60 * SEC,
            .flags = flagged ? SL_LOG_REJECTED : 0});
        sl_limit *fw = limit_new(SL_FIXED_WINDOW, 1, 60 * SEC, 0);
        sl_check_item items[] = {item(log, "k"), item(fw, "k")};
        sl_decision each[2];

        expect_eq(multi(st, items, 2, 1, SEC, each).allowed, 1);
        expect_eq(remaining(st, log, "k", SEC), 2);
        /* The window refuses; the log would allow. */
        sl_decision o = multi(st, items, 2, 1, 2 * SEC, each);
        expect_eq(o.allowed, 0);
        expect_eq(each[0].allowed, 1);
        expect_eq(remaining(st, log, "k", 2 * SEC), flagged ? 1 : 2);
        /* The refused attempt keeps the log limited for a full period. */
        if (flagged)
            expect_eq(remaining(st, log, "k", 61 * SEC), 2);
        sl_limit_free(log);
        sl_limit_free(fw);
        sl_store_free(st);
    }
}

/* ---- running out of memory ---- */

/*
 * sl_check_multi cannot fail half-way (docs/stores.md): the first phase
 * reserves log space for a fresh sliding_log/stepped_window key, so that
 * the commit needs no allocation.  With every allocation after that
 * reservation failing, the call must succeed, or fail having consumed
 * nothing.  (The commit used to free the empty reserved log and allocate
 * again: SL_ENOMEM, with the fixed window charged 1 of 5.)
 */
static void test_out_of_memory_consumes_nothing(void **state)
{
    (void)state;
#if !SL_FAILING_MALLOC
    skip(); /* the sanitizers own malloc */
#else
    sl_algorithm logs[] = {SL_SLIDING_LOG, SL_STEPPED_WINDOW};
    for (int a = 0; a < 2; a++) {
        sl_store *st = store_new();
        sl_limit *fw = limit_new(SL_FIXED_WINDOW, 5, 60 * SEC, 0);
        sl_limit *log = limit_new(logs[a], 5, 60 * SEC, 0);
        sl_check_item items[] = {item(fw, "k"), item(log, "k")};
        sl_decision o, each[2];
        int rc;

        malloc_budget = 1; /* the reservation succeeds, the next fails */
        rc = sl_check_multi(st, items, 2, 1, SEC, each, &o);
        malloc_budget = -1;
        if (rc != 0 && remaining(st, fw, "k", SEC) != 5)
            fail_msg("%s: sl_check_multi failed with %s but the fixed "
                     "window was charged: remaining %lld, expected 5",
                     sl_algorithm_name(logs[a]), sl_err_name(rc),
                     (long long)remaining(st, fw, "k", SEC));
        sl_limit_free(fw);
        sl_limit_free(log);
        sl_store_free(st);
    }
#endif
}

/* ---- input errors ---- */

static void test_duplicate_item_is_einval(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *a = limit_new(SL_GCRA, 5, SEC, 0);
    sl_limit *a2 = limit_new(SL_GCRA, 5, SEC, 0); /* the same limit */
    sl_limit *b = limit_new(SL_GCRA, 6, SEC, 0);
    sl_check_item same[] = {item(a, "k"), item(b, "x"), item(a, "k")};
    sl_check_item equal[] = {item(a, "k"), item(a2, "k")};
    sl_check_item fine[] = {item(a, "k"), item(b, "k"), item(a, "k2")};
    sl_decision o, each[3];

    expect_eq(sl_check_multi(st, same, 3, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(sl_check_multi(st, equal, 2, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(remaining(st, a, "k", SEC), 5);
    expect_eq(remaining(st, b, "x", SEC), 6);
    /* The same key under another limit, another key: not duplicates. */
    expect_eq(sl_check_multi(st, fine, 3, 1, SEC, each, &o), 0);
    expect_eq(o.allowed, 1);
    expect_eq(remaining(st, a, "k", SEC), 4);
    expect_eq(remaining(st, b, "k", SEC), 5);
    sl_limit_free(a);
    sl_limit_free(a2);
    sl_limit_free(b);
    sl_store_free(st);
}

static void test_item_count_bounds(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *lim = limit_new(SL_FIXED_WINDOW, 1, 60 * SEC, 0);
    static char keys[SL_MAX_ITEMS + 1][8];
    sl_check_item items[SL_MAX_ITEMS + 1];
    sl_decision o, each[SL_MAX_ITEMS + 1];

    for (int i = 0; i <= SL_MAX_ITEMS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        items[i] = item(lim, keys[i]);
    }
    expect_eq(sl_check_multi(st, items, 0, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(sl_check_multi(st, items, SL_MAX_ITEMS + 1, 1, SEC, each, &o),
              SL_EINVAL);
    expect_eq(remaining(st, lim, keys[0], SEC), 1);
    /* 64 keys, spread over many shards, in one atomic call. */
    expect_eq(sl_check_multi(st, items, SL_MAX_ITEMS, 1, SEC, each, &o), 0);
    expect_eq(o.allowed, 1);
    expect_eq(sl_check_multi(st, items + 1, SL_MAX_ITEMS, 1, SEC, each, &o),
              0);
    expect_eq(o.allowed, 0); /* key 64 is fresh, the 63 others are full */
    expect_eq(each[SL_MAX_ITEMS - 1].allowed, 1);
    expect_eq(remaining(st, lim, keys[SL_MAX_ITEMS], SEC), 1);
    expect_eq(sl__memory_check(st), 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_null_arguments_are_einval(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *lim = limit_new(SL_TOKEN_BUCKET, 5, SEC, 0);
    sl_check_item items[] = {item(lim, "a"), item(lim, "b")};
    sl_check_item no_limit[] = {item(lim, "a"), {NULL, "b", 1}};
    sl_check_item no_key[] = {item(lim, "a"), {lim, NULL, 1}};
    sl_decision o, each[2];

    expect_eq(sl_check_multi(NULL, items, 2, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(sl_check_multi(st, NULL, 2, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(sl_check_multi(st, items, 2, 1, SEC, each, NULL), SL_EINVAL);
    expect_eq(sl_check_multi(st, no_limit, 2, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(sl_check_multi(st, no_key, 2, 1, SEC, each, &o), SL_EINVAL);
    expect_eq(remaining(st, lim, "a", SEC), 5);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* Bad cost, time or key length in any item: an error, nothing consumed,
 * and the caller's decisions untouched. */
static void test_input_errors_consume_nothing(void **state)
{
    (void)state;
    sl_memory_options opts = {.size = sizeof(sl_memory_options),
                              .seed0 = 1,
                              .seed1 = 2,
                              .max_key_len = 4};
    sl_store *st = sl_memory_store_new(&opts);
    sl_limit *lim = limit_new(SL_SLIDING_LOG, 5, SEC, 0);
    sl_check_item long_key[] = {item(lim, "a"), item(lim, "12345")};
    sl_check_item items[] = {item(lim, "a"), item(lim, "b")};
    sl_decision o, each[2], o0, each0[2];

    assert_non_null(st);
    memset(&o, 0x5a, sizeof(o));
    memset(each, 0x5a, sizeof(each));
    o0 = o;
    memcpy(each0, each, sizeof(each));
    expect_eq(sl_check_multi(st, long_key, 2, 1, SEC, each, &o), SL_EKEYLEN);
    expect_eq(sl_check_multi(st, items, 2, -1, SEC, each, &o), SL_ECOST);
    expect_eq(sl_check_multi(st, items, 2, SL_MAX_COUNT + 1, SEC, each, &o),
              SL_ECOST);
    expect_eq(sl_check_multi(st, items, 2, 1, -1, each, &o), SL_EINVAL);
    assert_memory_equal(&o, &o0, sizeof(o));
    assert_memory_equal(each, each0, sizeof(each));
    expect_eq(remaining(st, lim, "a", SEC), 5);
    expect_eq(remaining(st, lim, "b", SEC), 5);
    sl_store_stats s;
    sl_store_get_stats(st, &s);
    expect_eq(s.keys, 0);
    sl_limit_free(lim);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_and_global_limits_all_or_nothing),
        cmocka_unit_test(test_rejected_request_consumes_from_none),
        cmocka_unit_test(test_mixed_algorithms_pass_together),
        cmocka_unit_test(test_query_keeps_no_state),
        cmocka_unit_test(test_overall_decision_when_allowed),
        cmocka_unit_test(test_overall_decision_when_rejected),
        cmocka_unit_test(test_overall_retry_never),
        cmocka_unit_test(test_one_item_is_a_plain_check),
        cmocka_unit_test(test_each_may_be_null),
        cmocka_unit_test(test_log_rejected_logs_requests_refused_elsewhere),
        cmocka_unit_test(test_out_of_memory_consumes_nothing),
        cmocka_unit_test(test_duplicate_item_is_einval),
        cmocka_unit_test(test_item_count_bounds),
        cmocka_unit_test(test_null_arguments_are_einval),
        cmocka_unit_test(test_input_errors_consume_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
