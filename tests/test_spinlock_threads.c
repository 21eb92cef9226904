/*
 * test_spinlock_threads.c - the memory store's shard lock (src/store/
 * spinlock.c): it excludes, a waiter waits for the holder and hands on a
 * longer back-off, the back-off is forgotten once the heat is old, and
 * the store counts the decisions that waited (sl_store_stats.lock_waits).
 *
 * CI also runs this program under ThreadSanitizer (its name matches the
 * "threads" of scripts/test.sh); SL_TEST_QUICK=1 makes it shorter.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "store/spinlock.h"
#include "testutil.h"

/* ---- exclusion ---- */

typedef struct counting {
    sl__spinlock lock;
    long counter; /* guarded by lock; a plain long, so a race is lost */
    long rounds;
} counting;

static void *count_up(void *arg)
{
    counting *c = arg;
    for (long i = 0; i < c->rounds; i++) {
        sl__spin_lock(&c->lock);
        c->counter++;
        sl__spin_unlock(&c->lock);
    }
    return NULL;
}

static void test_excludes(void **state)
{
    (void)state;
    counting c = {.rounds = tu_quick() ? 50000 : 500000};
    pthread_t t[2];

    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, count_up, &c), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    expect_eq(c.counter, 2 * c.rounds);
}

/* ---- one waiter ---- */

typedef struct waiter {
    sl__spinlock *lock;
    atomic_int started, inside;
    int waited;
} waiter;

static void *take(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->started, 1);
    w->waited = sl__spin_lock(w->lock);
    atomic_store(&w->inside, 1);
    sl__spin_unlock(w->lock);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The lock is held for 20 ms, far past the first pause at any level, so
 * the waiter looks more than once and hands on one level more. */
static unsigned contended_level(unsigned heat)
{
    sl__spinlock l = {0};
    waiter w = {.lock = &l};
    pthread_t t;

    atomic_store(&l.heat, heat);
    assert_int_equal(sl__spin_lock(&l), 0); /* uncontended */
    assert_int_equal(pthread_create(&t, NULL, take, &w), 0);
    while (!atomic_load(&w.started))
        sleep_ms(1);
    sleep_ms(20);
    expect_eq(atomic_load(&w.inside), 0);
    sl__spin_unlock(&l);
    pthread_join(t, NULL);
    expect_eq(atomic_load(&w.inside), 1);
    expect_eq(w.waited, 1);

    unsigned after = atomic_load(&l.heat);
    /* Stamped when the waiter took the lock: within the last second
     * (sanitizer builds take a while to join a thread). */
    expect_le((sl__spin_tick() - (after >> 4)) & 0x0fffffffu,
              1000000000u / 4096);
    return after & 15;
}

static void test_waiter_waits_and_hands_on_more(void **state)
{
    (void)state;
    /* A cold lock: the waiter starts at level 0 and hands on 1. */
    expect_eq(contended_level(0), 1);
    /* Heat at level 7, stamped 0.9 s ago: forgotten. */
    unsigned old = (sl__spin_tick() - 900000000u / 4096) & 0x0fffffffu;
    expect_eq(contended_level(old << 4 | 7), 1);
}

static void test_start_level(void **state)
{
    (void)state;
    unsigned now = 0x12345678u;
    unsigned stamp = now & 0x0fffffffu;

    expect_eq(sl__spin_start_level(stamp << 4 | 9, now), 9);
    expect_eq(sl__spin_start_level((stamp - SL__SPIN_HOT_TICKS) << 4 | 9, now),
              9);
    expect_eq(
        sl__spin_start_level((stamp - SL__SPIN_HOT_TICKS - 1) << 4 | 9, now),
        0);
    /* A stamp from the future (another core's clock a tick ahead) is not
     * recent: the waiter starts at 0, the safe side. */
    expect_eq(sl__spin_start_level((stamp + 1) << 4 | 9, now), 0);
    /* The 28-bit stamp wraps: taken just before the wrap, read after. */
    unsigned before = 0x0ffffffeu, after = 0x10000003u;
    expect_eq(sl__spin_start_level(before << 4 | 4, after), 4);
    expect_eq(sl__spin_start_level(0u << 4 | 10, 0), 10);
}

/* ---- the store's count ---- */

typedef struct deciding {
    sl_store *st;
    sl_limit *lim;
    atomic_int stop;
    atomic_long errors;
} deciding;

static void *decide_one_key(void *arg)
{
    deciding *d = arg;
    sl_decision out;
    for (long i = 0; !atomic_load_explicit(&d->stop, memory_order_relaxed); i++)
        if (sl_check(d->st, d->lim, "hot", 3, 1, i, &out) != 0)
            atomic_fetch_add(&d->errors, 1);
    return NULL;
}

static void test_store_counts_lock_waits(void **state)
{
    (void)state;
    deciding d = {.st = tu_store(),
                  .lim = tu_limit(SL_GCRA, 1000000000, SEC, 0)};
    sl_store_stats s;
    sl_decision out;
    pthread_t t[2];

    /* One thread never waits. */
    for (int i = 0; i < 100000; i++)
        assert_int_equal(sl_check(d.st, d.lim, "hot", 3, 1, i, &out), 0);
    sl_store_get_stats(d.st, &s);
    expect_eq(s.lock_waits, 0);

    /* Two threads on one key meet at its shard's lock, within a few
     * milliseconds on two cores; the test gives them 20 seconds. */
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, decide_one_key, &d), 0);
    for (int ms = 0; ms < 20000; ms += 5) {
        sleep_ms(5);
        sl_store_get_stats(d.st, &s);
        if (s.lock_waits > 0)
            break;
    }
    atomic_store(&d.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    expect_eq(atomic_load(&d.errors), 0);
    expect_ge(s.lock_waits, 1);
    sl_limit_free(d.lim);
    sl_store_free(d.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_excludes),
        cmocka_unit_test(test_waiter_waits_and_hands_on_more),
        cmocka_unit_test(test_start_level),
        cmocka_unit_test(test_store_counts_lock_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
