/*
 * test_override.c - a limit's numbers changed at runtime
 * (sl_limit_override) without resetting its counters, on the memory
 * store and on a real redis-server the test starts (tests/redisutil.h):
 *
 *   - sl_limit_override's errors and the numbers it fills in;
 *   - the example of docs/algorithms.md ("Changing a limit's numbers"),
 *     every algorithm, both stores: a key that used 80 of 100 has 20 left
 *     under 100, 70 under 150, 0 (not less) under 60; for the buckets also
 *     after time has passed and with a T that is not whole;
 *   - seeded random traces whose limit changes (up, down, burst only, to
 *     0, back to the base) at random times, every algorithm, both stores:
 *     the buckets agree decision by decision with a model of units used
 *     written here (x = units used * P, decaying at the L it was last
 *     written under, rounded up to a tick and clamped to the new B * P
 *     at each change); no minted credit, checked from what was admitted
 *     (the invariant of each algorithm: check_no_minting);
 *   - retry_after after a change is the smallest wait and remaining is
 *     exact, by replaying each request's history into a fresh key;
 *   - the memory and Redis stores agree decision by decision under
 *     changes, with recorded requests and multi-item calls mixed in.
 *
 * SL_TEST_QUICK=1 (the sanitizer runs) shortens the traces.
 */
#include "testutil.h"

#include "redisutil.h"

/* sl_limit_override must fail with `code` and a message holding `want`. */
static void expect_override_fails(const sl_limit *base, int64_t limit,
                                  int64_t burst, int code, const char *want)
{
    sl_limit *lim = NULL;
    char err[256] = "";
    int rc = sl_limit_override(base, limit, burst, &lim, err, sizeof(err));
    if (rc != code)
        fail_msg("sl_limit_override(%lld, %lld) returned %s, expected %s; "
                 "message: '%s'",
                 (long long)limit, (long long)burst, sl_err_name(rc),
                 sl_err_name(code), err);
    if (rc == 0)
        sl_limit_free(lim);
    else if (strstr(err, want) == NULL)
        fail_msg("message '%s' does not mention '%s'", err, want);
}

static sl_limit * override(const sl_limit *base, int64_t limit, int64_t burst)
{
    sl_limit *lim = NULL;
    char err[256] = "";
    int rc = sl_limit_override(base, limit, burst, &lim, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_limit_override(%lld, %lld): %s (%s)", (long long)limit,
                 (long long)burst, sl_err_name(rc), err);
    return lim;
}

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA || alg == SL_LEAKY_BUCKET;
}

/* ==== sl_limit_override's errors and numbers ==== */

static void test_override_errors(void **state)
{
    sl_limit *tb = tu_limit(SL_TOKEN_BUCKET, 100, SEC, 20);
    sl_limit *fw = tu_limit(SL_FIXED_WINDOW, 100, SEC, 0);
    sl_limit *sw = tu_limit(SL_SLIDING_WINDOW, 100, SEC, 0);
    sl_limit *big = tu_limit(SL_GCRA, INT64_C(1) << 31, SEC, 0);
    sl_limit *lim = NULL;
    char err[256] = "";
    (void)state;

    expect_eq(sl_limit_override(NULL, 1, 0, &lim, err, sizeof(err)), SL_EINVAL);
    expect_eq(sl_limit_override(tb, 1, 0, NULL, err, sizeof(err)), SL_EINVAL);
    expect_override_fails(tb, -1, 0, SL_ERANGE, "limit out of range: '-1'");
    expect_override_fails(fw, SL_MAX_COUNT + 1, 0, SL_ERANGE,
                          "limit out of range: '1099511627777'");
    expect_override_fails(tb, 10, -1, SL_ERANGE, "burst out of range: '-1'");
    expect_override_fails(tb, 10, SL_MAX_COUNT + 1, SL_ERANGE,
                          "burst out of range");
    /* Windows have no burst; 0 or the limit itself is accepted. */
    expect_override_fails(fw, 10, 5, SL_EINVAL, "burst applies only to");
    lim = override(fw, 10, 10);
    expect_eq(sl_limit_get_config(lim)->burst, 10);
    sl_limit_free(lim);
    expect_override_fails(sw, (int64_t)UINT32_MAX + 1, 0, SL_ERANGE,
                          "sliding_window");
    /* The schedules' tag holds 31 bits of L. */
    expect_override_fails(big, 10, 0, SL_EINVAL,
                          "gcra limit over 2^31 - 1 cannot be overridden: "
                          "'2147483648'");
    expect_override_fails(tb, INT64_C(1) << 31, 0, SL_ERANGE,
                          "override of token_bucket: '2147483648'");
    expect_override_fails(tb, 0, 5, SL_EINVAL, "burst must be 0 with limit 0");
    /* The scaled burst past 2^40, and B * T past 2^62 ns as in
     * sl_limit_new. */
    {
        sl_limit *wide = tu_limit(SL_TOKEN_BUCKET, 1, 1000, SL_MAX_COUNT);
        expect_override_fails(wide, 2, 0, SL_ERANGE, "scaled by 2 / 1");
        sl_limit_free(wide);
    }
    {
        sl_limit *slow = tu_limit(SL_TOKEN_BUCKET, 1000, INT64_C(1) << 62, 1);
        expect_override_fails(slow, 1, 1000, SL_ERANGE, "exceeds 2^62 ns");
        sl_limit_free(slow);
    }
    /* A NULL error buffer still gives the code. */
    expect_eq(sl_limit_override(tb, -5, 0, &lim, NULL, 0), SL_ERANGE);
    sl_limit_free(tb);
    sl_limit_free(fw);
    sl_limit_free(sw);
    sl_limit_free(big);
}

static void test_override_numbers(void **state)
{
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW,
                         .limit = 100,
                         .period = SEC,
                         .step = 100 * MS,
                         .id = 42};
    sl_limit *sw = tu_limit_cfg(&c), *tb = tu_limit(SL_GCRA, 100, SEC, 30);
    sl_limit *a, *b;
    const sl_limit_config *x;
    (void)state;

    /* Only L and B change; the rest, and the base, are base's. */
    a = override(sw, 150, 0);
    x = sl_limit_get_config(a);
    expect_eq(x->limit, 150);
    expect_eq(x->burst, 150);
    expect_eq(x->step, 100 * MS);
    expect_eq(x->id, 42);
    expect_eq(sl_limit_base_config(a)->limit, 100);
    expect_eq(sl_limit_base_config(sw)->limit, 100);
    sl_limit_free(a);

    /* burst 0 scales base's: 30 * 150 / 100 = 45; 30 * 7 / 100 = 2.1 -> 3;
     * 30 * 1 / 100 -> at least 1; limit 0 -> 0. */
    a = override(tb, 150, 0);
    expect_eq(sl_limit_get_config(a)->burst, 45);
    sl_limit_free(a);
    a = override(tb, 7, 0);
    expect_eq(sl_limit_get_config(a)->burst, 3);
    /* An override of an override scales its base's numbers (7, 3) and
     * keeps the first base. */
    b = override(a, 70, 0);
    expect_eq(sl_limit_get_config(b)->burst, 30);
    expect_eq(sl_limit_base_config(b)->limit, 100);
    expect_eq(sl_limit_base_config(b)->burst, 30);
    sl_limit_free(b);
    sl_limit_free(a);
    a = override(tb, 1, 0);
    expect_eq(sl_limit_get_config(a)->burst, 1);
    sl_limit_free(a);
    a = override(tb, 0, 0);
    expect_eq(sl_limit_get_config(a)->limit, 0);
    expect_eq(sl_limit_get_config(a)->burst, 0);
    sl_limit_free(a);
    a = override(tb, 100, 7);
    expect_eq(sl_limit_get_config(a)->burst, 7);
    sl_limit_free(a);
    sl_limit_free(sw);
    sl_limit_free(tb);
}

/* The base may be freed before its override. */
static void test_base_freed_first(void **state)
{
    sl_limit *base = tu_limit(SL_TOKEN_BUCKET, 10, SEC, 0);
    sl_limit *o = override(base, 20, 0);
    sl_store *st = tu_store();
    (void)state;

    expect_eq(tu_check(st, base, "k", 4, SEC).remaining, 6);
    sl_limit_free(base);
    expect_eq(tu_check(st, o, "k", 0, SEC).remaining, 16);
    sl_limit_free(o);
    sl_store_free(st);
}

/* ==== stores ==== */

/* A Redis store on the test's server; extra TTL so that state outlives
 * the gap between the traces' manual clock and real time. */
static sl_store *redis_store(void)
{
    sl_redis_options o = {
        .url = tu_server()->url, .extra_ttl_ms = 600000, .key_prefix = "o:"};
    sl_store *st = NULL;
    char err[256] = "";
    int rc = sl_redis_store_new(&o, &st, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_redis_store_new: %s (%s)", sl_err_name(rc), err);
    return st;
}

static void flushall(void)
{
    redisContext *c = tu_redis_admin(tu_server());
    assert_non_null(c);
    tu_redis_do(c, "FLUSHALL");
    redisFree(c);
}

enum { MEMORY, REDIS, NSTORES };
static const char *const store_names[NSTORES] = {"memory", "redis"};

static sl_store *store_new(int which)
{
    if (which == MEMORY)
        return tu_store();
    flushall();
    return redis_store();
}

static sl_decision check_at(sl_store *st, const sl_limit *lim, const char *key,
                            int64_t cost, sl_nanos now, unsigned flags)
{
    sl_check_item item = {lim, key, strlen(key)};
    sl_decision d, all;
    int rc;
    memset(&d, 0x5a, sizeof(d));
    rc = sl_check_costs(st, &item, &cost, 1, now, flags, &d, &all);
    if (rc != 0) {
        char err[256];
        sl_store_last_error(st, err, sizeof(err));
        fail_msg("check (key '%s', cost %lld, now %lld, limit %lld): %s (%s)",
                 key, (long long)cost, (long long)now,
                 (long long)sl_limit_get_config(lim)->limit, sl_err_name(rc),
                 err);
    }
    return d;
}

/* ==== the example ==== */

/* Wall-clock-sized: the Redis script keeps such times as (s, ns) pairs. */
static const sl_nanos T0 = INT64_C(1700000000) * SEC + 300 * MS;

static sl_limit *example_base(sl_algorithm alg)
{
    sl_limit_config c = {.algorithm = alg, .limit = 100, .period = SEC};
    if (alg == SL_STEPPED_WINDOW)
        c.step = 100 * MS;
    return tu_limit_cfg(&c);
}

/* 80 used of 100: 20 left under 100, 70 under 150, and 70 more pass
 * under 150 and then nothing; back at 100, 0 left. */
static void example_up(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *up = override(base, 150, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    d = check_at(st, base, "k", 80, T0, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 20, "%s %s", where, name);
    expect_eq_at(check_at(st, base, "k", 0, T0, 0).remaining, 20, "%s %s",
                 where, name);
    d = check_at(st, up, "k", 0, T0, 0);
    expect_eq_at(d.remaining, 70, "%s %s", where, name);
    expect_eq_at(d.limit, 150, "%s %s", where, name);
    expect_eq_at(check_at(st, up, "k", 71, T0, 0).allowed, 0, "%s %s", where,
                 name);
    d = check_at(st, up, "k", 70, T0, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    expect_eq_at(check_at(st, up, "k", 1, T0, 0).allowed, 0, "%s %s", where,
                 name);
    d = check_at(st, base, "k", 0, T0, 0);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    expect_eq_at(d.limit, 100, "%s %s", where, name);
    sl_limit_free(up);
    sl_limit_free(base);
}

/* 80 used of 100 is 0 left of 60, never less: the buckets refill from
 * empty at the new rate (one unit after ceil(1e9 / 60) ns); the windows
 * count the 80 until they leave the window. */
static void example_down(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *down = override(base, 60, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    check_at(st, base, "k2", 80, T0, 0);
    d = check_at(st, down, "k2", 0, T0, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    expect_eq_at(d.limit, 60, "%s %s", where, name);
    d = check_at(st, down, "k2", 1, T0, 0);
    expect_eq_at(d.allowed, 0, "%s %s", where, name);
    if (is_bucket(alg)) {
        expect_eq_at(d.retry_after, 16666667, "%s %s", where, name);
        expect_eq_at(check_at(st, down, "k2", 1, T0 + 16666666, 0).allowed, 0,
                     "%s %s", where, name);
        expect_eq_at(check_at(st, down, "k2", 1, T0 + 16666667, 0).allowed, 1,
                     "%s %s", where, name);
    } else if (alg == SL_FIXED_WINDOW || alg == SL_STEPPED_WINDOW) {
        /* Fixed: the window ends 700 ms on; stepped: the 80 are in the
         * step of 300 ms and leave 1 s later. */
        expect_eq_at(d.retry_after, alg == SL_FIXED_WINDOW ? 700 * MS : SEC,
                     "%s %s", where, name);
    } else if (alg == SL_SLIDING_LOG) {
        expect_eq_at(d.retry_after, SEC, "%s %s", where, name);
    }
    sl_limit_free(down);
    sl_limit_free(base);
}

/* The buckets keep the units used, not the time: 80 used at T0 is 70 at
 * T0 + 100 ms under 100 per s, so 80 left of 150; 3 used of 3 per s (T
 * not whole) is 1.5 at T0 + 500 ms, so under 7 per s (burst scaled to 7)
 * 5 left, and a cost of 6 fits once 1.5 - 1 = 0.5 units have gone at 7
 * per s: after ceil(1e9 / 14) ns. */
static void example_elapsed(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *up = override(base, 150, 0);
    sl_limit *three = tu_limit(alg, 3, SEC, 0), *seven = override(three, 7, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    check_at(st, base, "k3", 80, T0, 0);
    expect_eq_at(check_at(st, up, "k3", 0, T0 + 100 * MS, 0).remaining, 80,
                 "%s %s", where, name);
    check_at(st, three, "k4", 3, T0, 0);
    d = check_at(st, seven, "k4", 6, T0 + 500 * MS, 0);
    expect_eq_at(d.allowed, 0, "%s %s", where, name);
    expect_eq_at(d.remaining, 5, "%s %s", where, name);
    expect_eq_at(d.retry_after, 71428572, "%s %s", where, name);
    expect_eq_at(
        check_at(st, seven, "k4", 6, T0 + 500 * MS + 71428571, 0).allowed, 0,
        "%s %s", where, name);
    expect_eq_at(
        check_at(st, seven, "k4", 6, T0 + 500 * MS + 71428572, 0).allowed, 1,
        "%s %s", where, name);
    sl_limit_free(seven);
    sl_limit_free(three);
    sl_limit_free(up);
    sl_limit_free(base);
}

/* L = 0 denies every cost and answers queries with 0 left; lifted, the
 * key has what it had: the windows their counts, the buckets their
 * state, which kept to its own numbers meanwhile. */
static void example_zero(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *zero = override(base, 0, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    check_at(st, base, "k5", 80, T0, 0);
    d = check_at(st, zero, "k5", 1, T0, 0);
    expect_eq_at(d.allowed, 0, "%s %s", where, name);
    expect_eq_at(d.retry_after, -1, "%s %s", where, name);
    expect_eq_at(d.limit, 0, "%s %s", where, name);
    d = check_at(st, zero, "k5", 0, T0 + 50 * MS, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    /* 50 ms at 100 per s: 5 units back for the buckets. */
    expect_eq_at(check_at(st, base, "k5", 0, T0 + 50 * MS, 0).remaining,
                 is_bucket(alg) ? 25 : 20, "%s %s", where, name);
    sl_limit_free(zero);
    sl_limit_free(base);
}

static void test_example(void **state)
{
    (void)state;
    for (int w = 0; w < NSTORES; w++) {
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            sl_store *st = store_new(w);
            example_up(st, (sl_algorithm)a, store_names[w]);
            example_down(st, (sl_algorithm)a, store_names[w]);
            example_zero(st, (sl_algorithm)a, store_names[w]);
            if (is_bucket((sl_algorithm)a))
                example_elapsed(st, (sl_algorithm)a, store_names[w]);
            sl_store_free(st);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_override_numbers),
        cmocka_unit_test(test_base_freed_first),
        cmocka_unit_test(test_example),
    };
    return cmocka_run_group_tests(tests, tu_redis_group_setup,
                                  tu_redis_group_teardown);
}
