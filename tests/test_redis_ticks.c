/*
 * test_redis_ticks.c - limits whose times in ns would pass 2^52 (a
 * period over ~52 days: lyft's month and year units) decide on a real
 * redis-server (tests/redisutil.h) in ticks of 10^k ns (src/redis/call.c,
 * main.lua "Ticks"): every algorithm counts and decides as the memory
 * store does, its durations within two ticks of memory's, at whole
 * seconds and between ticks alike; a limit no tick fits is still
 * refused.
 */
#include "testutil.h"

#include "internal.h"
#include "redisutil.h"

static sl_store *redis_store(void)
{
    return tu_redis_store("k:");
}

#define YEAR (365 * DAY)

/* Durations of r are m's to within two ticks: now is counted from its
 * tick's start, a duration is rounded up to whole ticks, and a bucket's
 * state is moved on at tick times; -1 (never) is the same. */
static void expect_close(const char *what, int i, sl_nanos m, sl_nanos r,
                         sl_nanos tick)
{
    if ((m < 0 || r < 0) ? m != r : (r - m >= 2 * tick || m - r >= 2 * tick))
        fail_msg("%s: request %d: memory %lld, redis %lld (tick %lld)", what,
                 i, (long long)m, (long long)r, (long long)tick);
}

/* A trace of cfg on both stores, at times jittered by up to `jitter`
 * ns. */
static void run(const sl_limit_config *cfg, const char *what, sl_nanos tick,
                sl_nanos jitter)
{
    sl_store *mem = tu_store(), *red = redis_store();
    sl_limit *lim = tu_limit_cfg(cfg);
    uint64_t seed = 0x7469636b;
    /* A wall-clock-sized start, a whole number of ticks. */
    sl_nanos t = INT64_C(1785000000) * SEC;
    int allowed = 0, refused = 0;
    for (int i = 0; i < 60; i++) {
        int64_t cost = tu_range(&seed, 0, 3);
        sl_nanos at = t + (jitter ? tu_range(&seed, 0, jitter) : 0);
        sl_decision m = tu_check(mem, lim, what, cost, at);
        sl_decision r = tu_check(red, lim, what, cost, at);
        if (m.allowed != r.allowed || m.remaining != r.remaining ||
            m.limit != r.limit)
            fail_msg("%s: request %d (cost %lld): memory allowed %d "
                     "remaining %lld, redis allowed %d remaining %lld",
                     what, i, (long long)cost, m.allowed,
                     (long long)m.remaining, r.allowed,
                     (long long)r.remaining);
        expect_close(what, i, m.reset_after, r.reset_after, tick);
        expect_close(what, i, m.retry_after, r.retry_after, tick);
        expect_close(what, i, m.delay, r.delay, tick);
        allowed += cost > 0 && m.allowed;
        refused += !m.allowed;
        /* Steps of a few days to a quarter period, in whole ticks. */
        t += (cfg->period / 4 / (sl_nanos)tu_range(&seed, 1, 24)) / SEC * SEC;
    }
    if (allowed == 0 || refused == 0)
        fail_msg("%s: %d allowed, %d refused: the trace tests too little",
                 what, allowed, refused);
    sl_limit_free(lim);
    sl_store_free(mem);
    sl_store_free(red);
}

/* Each with its tick: 10 ns up to 2^52 * 10 ns (521 days), 1 us for
 * 20 years. */
static const struct {
    sl_limit_config cfg;
    const char *what;
    sl_nanos tick;
} long_limits[] = {
    {{.algorithm = SL_FIXED_WINDOW, .limit = 5, .period = YEAR}, "5/year", 10},
    {{.algorithm = SL_FIXED_WINDOW, .limit = 3, .period = 30 * DAY * 3},
     "3/3 months",
     10},
    {{.algorithm = SL_SLIDING_WINDOW, .limit = 7, .period = YEAR},
     "sliding 7/year",
     10},
    {{.algorithm = SL_SLIDING_LOG, .limit = 4, .period = YEAR},
     "log 4/year",
     10},
    {{.algorithm = SL_STEPPED_WINDOW,
      .limit = 6,
      .period = YEAR,
      .step = 73 * DAY},
     "stepped 6/year",
     10},
    {{.algorithm = SL_TOKEN_BUCKET, .limit = 5, .period = YEAR, .burst = 5},
     "token bucket 5/year",
     10},
    /* B * T in 10 ns ticks passes 2^52: 100 ns ticks. */
    {{.algorithm = SL_GCRA, .limit = 7, .period = YEAR, .burst = 3},
     "gcra 7/year",
     100},
    {{.algorithm = SL_LEAKY_BUCKET, .limit = 4, .period = YEAR, .burst = 4},
     "leaky 4/year",
     10},
    {{.algorithm = SL_FIXED_WINDOW, .limit = 9, .period = 20 * YEAR},
     "9/20 years",
     1000},
};
#define N_LONG (sizeof(long_limits) / sizeof(long_limits[0]))

/* At whole seconds, the memory store's counts and decisions. */
static void test_long_periods_decide_as_memory(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_LONG; i++)
        run(&long_limits[i].cfg, long_limits[i].what, long_limits[i].tick, 0);
}

/* Between ticks the same (a year's tick is 10 ns; 20 years' 1 us). */
static void test_between_ticks_durations_round_up(void **state)
{
    (void)state;
    run(&long_limits[0].cfg, "5/year, any ns", 10, 999);
    run(&long_limits[5].cfg, "token bucket 5/year, any ns", 10, 999);
    run(&long_limits[N_LONG - 1].cfg, "9/20 years, any ns", 1000, 99999);
}

/* A ticked limit beside one in ns in one call (the script's multi-item
 * path, each item at its own scale): all or nothing as on memory; and
 * its key's TTL is the window's rest in ms (plus the store's extra),
 * not a tenth of it. */
static void test_ticked_items_in_one_call_and_ttl(void **state)
{
    (void)state;
    sl_store *mem = tu_store(), *red = redis_store();
    sl_limit *year = tu_limit(SL_FIXED_WINDOW, 3, YEAR, 0);
    sl_limit *minute = tu_limit(SL_FIXED_WINDOW, 5, 60 * SEC, 0);
    sl_check_item items[2] = {{year, "multi", 5}, {minute, "multi", 5}};
    sl_nanos t = INT64_C(1785000000) * SEC + 123456789, year_rest = 0;
    for (int i = 0; i < 8; i++) {
        sl_decision me[2], re[2], mo, ro;
        expect_eq(sl_check_multi(mem, items, 2, 1, t, me, &mo), 0);
        expect_eq(sl_check_multi(red, items, 2, 1, t, re, &ro), 0);
        if (mo.allowed != ro.allowed || me[0].remaining != re[0].remaining ||
            me[1].remaining != re[1].remaining)
            fail_msg("call %d: memory %d (%lld, %lld), redis %d (%lld, %lld)",
                     i, mo.allowed, (long long)me[0].remaining,
                     (long long)me[1].remaining, ro.allowed,
                     (long long)re[0].remaining, (long long)re[1].remaining);
        year_rest = re[0].reset_after;
        t += 7 * SEC;
    }
    redisContext *c = tu_redis_admin(tu_server());
    redisReply *keys = redisCommand(c, "KEYS k:*multi*");
    assert_non_null(keys);
    long long longest = 0;
    for (size_t i = 0; i < keys->elements; i++) {
        long long ttl = tu_redis_int(c, "PTTL %s", keys->element[i]->str);
        longest = ttl > longest ? ttl : longest;
    }
    freeReplyObject(keys);
    redisFree(c);
    /* The rest of the year's window as the last call answered it, plus
     * the store's 600 s extra; the test's clock and Redis's agree to
     * within the few seconds it took. */
    long long want = year_rest / SL_NS_PER_MS + 600000;
    if (year_rest < 30LL * 86400 * SEC || longest < want - 60000 ||
        longest > want + 60000)
        fail_msg("the year's key expires in %lld ms, want about %lld",
                 longest, want);
    sl_limit_free(year);
    sl_limit_free(minute);
    sl_store_free(mem);
    sl_store_free(red);
}

/* A period no power of ten divides into 2^52 ticks is refused, and says
 * why. */
static void test_no_tick_fits_is_erange(void **state)
{
    (void)state;
    sl_store *red = redis_store();
    sl_limit *odd = tu_limit(SL_FIXED_WINDOW, 10, (INT64_C(1) << 52) + 1, 0);
    sl_decision d;
    char err[256];
    expect_eq(sl_check(red, odd, "k", 1, 1, SEC, &d), SL_ERANGE);
    sl_store_last_error(red, err, sizeof(err));
    if (strstr(err, "out of range for the redis store") == NULL)
        fail_msg("unclear message: '%s'", err);
    sl_limit_free(odd);
    sl_store_free(red);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_periods_decide_as_memory),
        cmocka_unit_test(test_between_ticks_durations_round_up),
        cmocka_unit_test(test_ticked_items_in_one_call_and_ttl),
        cmocka_unit_test(test_no_tick_fits_is_erange),
    };
    return cmocka_run_group_tests(tests, tu_redis_group_setup,
                                  tu_redis_group_teardown);
}
