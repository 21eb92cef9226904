/*
 * test_acquire.c - sl_acquire(): the blocking check waits each refusal's
 * retry_after on the waiter's clock, gives up at once when the wait would
 * pass max_wait (consuming nothing), and decides as sl_check() does.
 * Manual time: the waiter's sleep advances the clock and logs each sleep;
 * one test runs on the real clock with waits of a few ms.
 */
#include "testutil.h"

typedef struct manual {
    sl_nanos now;
    int sleeps;
    sl_nanos slept;
    sl_store *other; /* when set, each sleep lets another caller take a unit */
    const sl_limit *limit;
} manual;

static sl_nanos manual_now(void *ctx)
{
    return ((manual *)ctx)->now;
}

static void manual_sleep(void *ctx, sl_nanos ns)
{
    manual *m = ctx;
    m->now += ns;
    m->sleeps++;
    m->slept += ns;
    if (m->other != NULL && m->sleeps == 1)
        tu_check(m->other, m->limit, "k", 1, m->now); /* a rival's call */
}

static sl_waiter waiter(manual *m)
{
    return (sl_waiter){manual_now, manual_sleep, m};
}

/* 2 per second, burst 2: two at once, then one each 500 ms. */
static void test_waits_retry_after(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 2, SEC, 2);
    manual m = {.now = 1000 * SEC};
    sl_waiter w = waiter(&m);
    sl_decision d;
    for (int i = 0; i < 2; i++) {
        expect_eq(sl_acquire(st, lim, "k", 1, 1, SEC, &w, &d), 0);
        expect_eq(d.allowed, 1);
    }
    expect_eq(m.sleeps, 0);
    expect_eq(sl_acquire(st, lim, "k", 1, 1, SEC, &w, &d), 0);
    expect_eq(d.allowed, 1);
    expect_eq(m.sleeps, 1);
    expect_eq(m.slept, 500 * MS);
    /* A max_wait of exactly the wait is enough. */
    expect_eq(sl_acquire(st, lim, "k", 1, 1, 500 * MS, &w, &d), 0);
    expect_eq(d.allowed, 1);
    expect_eq(m.slept, SEC);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* A wait longer than max_wait is not slept, and consumes nothing. */
static void test_gives_up_at_once(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 1, MINUTE, 0);
    manual m = {.now = 600 * SEC};
    sl_waiter w = waiter(&m);
    sl_decision d;
    expect_eq(sl_acquire(st, lim, "k", 1, 1, 0, &w, &d), 0);
    expect_eq(d.allowed, 1);
    expect_eq(sl_acquire(st, lim, "k", 1, 1, 59 * SEC, &w, &d), 0);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, MINUTE);
    expect_eq(m.sleeps, 0);
    /* Nothing consumed: the next window still has its one unit. */
    m.now += MINUTE;
    expect_eq(tu_check(st, lim, "k", 1, m.now).allowed, 1);
    /* A cost over the limit never fits: -1, at once, whatever max_wait. */
    expect_eq(sl_acquire(st, lim, "k", 1, 2, DAY, &w, &d), 0);
    expect_eq(d.allowed, 0);
    expect_eq(d.retry_after, -1);
    expect_eq(m.sleeps, 0);
    expect_eq(sl_acquire(st, lim, "k", 1, 1, -1, &w, &d), SL_EINVAL);
    expect_eq(sl_acquire(st, lim, "k", 1, -1, 0, &w, &d), SL_ECOST);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* A rival takes the unit while we sleep: sl_acquire() checks again and
 * waits once more, within max_wait, or gives up past it. */
static void test_rival_between_sleeps(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_GCRA, 1, SEC, 1);
    manual m = {.now = 50 * SEC, .other = st, .limit = lim};
    sl_waiter w = waiter(&m);
    sl_decision d;
    expect_eq(tu_check(st, lim, "k", 1, m.now).allowed, 1);
    expect_eq(sl_acquire(st, lim, "k", 1, 1, 2 * SEC, &w, &d), 0);
    expect_eq(d.allowed, 1);
    expect_eq(m.sleeps, 2);
    expect_eq(m.slept, 2 * SEC);

    m = (manual){.now = 80 * SEC, .other = st, .limit = lim};
    expect_eq(tu_check(st, lim, "k", 1, m.now).allowed, 1);
    expect_eq(sl_acquire(st, lim, "k", 1, 1, 1500 * MS, &w, &d), 0);
    expect_eq(d.allowed, 0);
    expect_eq(m.sleeps, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* The default waiter: real time and nanosleep, 100 per second. */
static void test_real_clock(void **state)
{
    (void)state;
    sl_store *st = tu_store();
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 100, SEC, 1);
    sl_decision d;
    for (int i = 0; i < 5; i++) {
        expect_eq(sl_acquire(st, lim, "k", 1, 1, SEC, NULL, &d), 0);
        expect_eq(d.allowed, 1);
    }
    sl_limit_free(lim);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_retry_after),
        cmocka_unit_test(test_gives_up_at_once),
        cmocka_unit_test(test_rival_between_sleeps),
        cmocka_unit_test(test_real_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
