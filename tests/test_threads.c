/*
 * test_threads.c - one memory store shared by several threads: the number
 * of requests allowed is exactly the single-threaded answer, for every
 * algorithm, on the same keys and on different keys; sl_check_multi stays
 * atomic and cannot deadlock when calls share shards in any order; and
 * sl_store_sweep, sl_store_get_stats and sl__memory_check may run while
 * other threads decide.
 *
 * Time is fixed per phase (threads meet at a barrier between phases), so
 * every total is known in advance whatever the interleaving.  CI also runs
 * this program under ThreadSanitizer; SL_TEST_QUICK=1 makes it shorter.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "testutil.h"


enum { NTHREADS = 4 }; /* twice the cores of the CI machine */

/* cmocka prints integers in unsigned hex; these print both values in
 * signed decimal, with the expressions that produced them. */

/* Errors inside worker threads are counted and checked by the main thread
 * (cmocka's assertions may only fail on the test's own thread). */
static atomic_int thread_errors;

static void thread_error(const char *what, int rc)
{
    fprintf(stderr, "worker: %s failed: %s\n", what, sl_err_name(rc));
    atomic_fetch_add(&thread_errors, 1);
}

static sl_store *store_new(void)
{
    sl_memory_options o = {
        .size = sizeof(sl_memory_options), .seed0 = 21, .seed1 = 22};
    sl_store *st = sl_memory_store_new(&o);
    assert_non_null(st);
    return st;
}

static sl_limit *limit_cfg(sl_limit_config c)
{
    return tu_limit_cfg(&c);
}

static sl_limit *limit_new(sl_algorithm alg, int64_t limit, sl_nanos period)
{
    return limit_cfg((sl_limit_config){.algorithm = alg, .limit = limit,
                                       .period = period});
}

/* Decides cost 1; returns allowed, or 0 after counting an error. */
static int take(sl_store *st, const sl_limit *lim, const char *key,
                sl_nanos now)
{
    sl_decision d;
    int rc = sl_check(st, lim, key, strlen(key), 1, now, &d);
    if (rc != 0) {
        thread_error("sl_check", rc);
        return 0;
    }
    return d.allowed;
}

static int64_t remaining(sl_store *st, const sl_limit *lim, const char *key,
                         sl_nanos now)
{
    sl_decision d;
    int rc = sl_check(st, lim, key, strlen(key), 0, now, &d);
    if (rc != 0)
        fail_msg("query of '%s' failed: %s", key, sl_err_name(rc));
    return d.remaining;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Runs fn(arg of thread i) on n threads and waits for all of them. */
static void run_threads(int n, void *(*fn)(void *), void *args,
                        size_t arg_size)
{
    pthread_t th[16];
    atomic_store(&thread_errors, 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(
            pthread_create(&th[i], NULL, fn, (char *)args + i * arg_size), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    expect_eq(atomic_load(&thread_errors), 0);
}

static const sl_algorithm all_algorithms[] = {
    SL_TOKEN_BUCKET, SL_GCRA, SL_LEAKY_BUCKET, SL_FIXED_WINDOW,
    SL_SLIDING_LOG, SL_SLIDING_WINDOW, SL_STEPPED_WINDOW,
};
#define NALGS (sizeof(all_algorithms) / sizeof(all_algorithms[0]))

/* ---- one key, one instant ---- */

typedef struct hammer {
    sl_store *st;
    const sl_limit *lim;
    pthread_barrier_t *start;
    int attempts;
    int allowed; /* out */
} hammer;

static void *hammer_one_key(void *arg)
{
    hammer *h = arg;
    pthread_barrier_wait(h->start);
    for (int i = 0; i < h->attempts; i++)
        h->allowed += take(h->st, h->lim, "the-key", 7 * SEC);
    return NULL;
}

/* Limit L at one instant: exactly L pass in total, whoever gets them. */
static void test_same_key_one_instant_every_algorithm(void **state)
{
    (void)state;
    const int limit = tu_quick() ? 200 : 1000;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *st = store_new();
        sl_limit *lim = limit_new(all_algorithms[a], limit, SEC);
        pthread_barrier_t start;
        hammer h[NTHREADS];
        int total = 0;

        pthread_barrier_init(&start, NULL, NTHREADS);
        for (int t = 0; t < NTHREADS; t++)
            h[t] = (hammer){st, lim, &start, limit * 3 / 4, 0};
        run_threads(NTHREADS, hammer_one_key, h, sizeof(h[0]));
        for (int t = 0; t < NTHREADS; t++)
            total += h[t].allowed;
        if (total != limit)
            fail_msg("%s: %d allowed by %d threads, expected %d",
                     sl_algorithm_name(all_algorithms[a]), total, NTHREADS,
                     limit);
        expect_eq(remaining(st, lim, "the-key", 7 * SEC), 0);
        expect_eq(sl__memory_check(st), 0);
        pthread_barrier_destroy(&start);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* ---- many keys, shared and private ---- */

enum { SHARED_KEYS = 64, SHARED_LIMIT = 5, SHARED_ROUNDS = 3 };

typedef struct spread {
    sl_store *st;
    const sl_limit *lim;
    pthread_barrier_t *start;
    int id, private_keys;
    int shared_allowed, private_allowed; /* out */
} spread;

static void *hammer_many_keys(void *arg)
{
    spread *s = arg;
    char key[32];
    pthread_barrier_wait(s->start);
    /* Shared keys, each thread starting at a different one. */
    for (int r = 0; r < SHARED_ROUNDS; r++)
        for (int k = 0; k < SHARED_KEYS; k++) {
            snprintf(key, sizeof(key), "shared-%d",
                     (k + s->id * SHARED_KEYS / NTHREADS) % SHARED_KEYS);
            for (int c = 0; c < 2; c++)
                s->shared_allowed += take(s->st, s->lim, key, 3 * SEC);
        }
    /* Private keys: enough to make the shards grow under the others. */
    for (int k = 0; k < s->private_keys; k++) {
        snprintf(key, sizeof(key), "t%d-%d", s->id, k);
        s->private_allowed += take(s->st, s->lim, key, 3 * SEC);
        s->private_allowed += take(s->st, s->lim, key, 3 * SEC);
    }
    return NULL;
}

/* Each shared key is tried 2 * 3 * 4 = 24 times and passes exactly L = 5
 * times; each private key is tried twice and passes twice (L = 5). */
static void test_many_keys_every_algorithm(void **state)
{
    (void)state;
    const int private_keys = tu_quick() ? 1000 : 10000;
    for (size_t a = 0; a < NALGS; a++) {
        sl_store *st = store_new();
        sl_limit *lim = limit_new(all_algorithms[a], SHARED_LIMIT, SEC);
        pthread_barrier_t start;
        spread s[NTHREADS];
        int shared = 0, priv = 0;
        sl_store_stats stats;

        pthread_barrier_init(&start, NULL, NTHREADS);
        for (int t = 0; t < NTHREADS; t++)
            s[t] = (spread){st, lim, &start, t, private_keys, 0, 0};
        run_threads(NTHREADS, hammer_many_keys, s, sizeof(s[0]));
        for (int t = 0; t < NTHREADS; t++) {
            shared += s[t].shared_allowed;
            priv += s[t].private_allowed;
        }
        if (shared != SHARED_KEYS * SHARED_LIMIT)
            fail_msg("%s: %d allowed on the shared keys, expected %d",
                     sl_algorithm_name(all_algorithms[a]), shared,
                     SHARED_KEYS * SHARED_LIMIT);
        expect_eq(priv, NTHREADS * private_keys * 2);
        sl_store_get_stats(st, &stats);
        expect_eq(stats.keys, SHARED_KEYS + NTHREADS * private_keys);
        expect_eq(stats.evicted, 0);
        expect_eq(sl__memory_check(st), 0);
        pthread_barrier_destroy(&start);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* ---- phases: time moves between barriers ---- */

enum { MAX_PHASES = 5 };

typedef struct phase_plan {
    sl_algorithm algorithm;
    sl_nanos step;
    sl_nanos at[MAX_PHASES];     /* ns */
    int expected[MAX_PHASES];    /* allowed in each phase, all threads */
} phase_plan;

/* L = 100 per second; every phase offers 4 * 80 = 320 requests. */
static const phase_plan plans[] = {
    /* Refill: half the bucket in 500 ms, a quarter in 250 ms, full. */
    {SL_TOKEN_BUCKET, 0, {0, 500 * MS, 750 * MS, 10 * SEC, 10 * SEC + 10 * MS},
     {100, 50, 25, 100, 1}},
    {SL_GCRA, 0, {0, 500 * MS, 750 * MS, 10 * SEC, 10 * SEC + 10 * MS},
     {100, 50, 25, 100, 1}},
    {SL_LEAKY_BUCKET, 0, {0, 500 * MS, 750 * MS, 10 * SEC, 10 * SEC + 10 * MS},
     {100, 50, 25, 100, 1}},
    /* Windows [k s, (k + 1) s). */
    {SL_FIXED_WINDOW, 0, {0, 500 * MS, SEC, 1999 * MS, 2 * SEC},
     {100, 0, 100, 0, 100}},
    /* The window (t - 1 s, t]: events at 0 are gone at 1 s. */
    {SL_SLIDING_LOG, 0, {0, 500 * MS, SEC, 1500 * MS, 2100 * MS},
     {100, 0, 100, 0, 100}},
    /* 100 in window 0; at 1.5 s they weigh 50, at 1.75 s 25 (+50). */
    {SL_SLIDING_WINDOW, 0, {0, 1500 * MS, 1750 * MS, 3 * SEC, 3500 * MS},
     {100, 50, 25, 100, 0}},
    /* Steps of 100 ms: step 0 leaves the window at 1 s. */
    {SL_STEPPED_WINDOW, 100 * MS, {0, 500 * MS, SEC, 1050 * MS, 2500 * MS},
     {100, 0, 100, 0, 100}},
};

typedef struct phaser {
    sl_store *st;
    const sl_limit *lim;
    const phase_plan *plan;
    pthread_barrier_t *between;
    int allowed[MAX_PHASES]; /* out */
} phaser;

static void *run_phases(void *arg)
{
    phaser *p = arg;
    for (int ph = 0; ph < MAX_PHASES; ph++) {
        pthread_barrier_wait(p->between);
        for (int i = 0; i < 80; i++)
            p->allowed[ph] += take(p->st, p->lim, "phased", p->plan->at[ph]);
    }
    return NULL;
}

static void test_phases_every_algorithm(void **state)
{
    (void)state;
    for (size_t a = 0; a < sizeof(plans) / sizeof(plans[0]); a++) {
        const phase_plan *plan = &plans[a];
        sl_store *st = store_new();
        sl_limit *lim = limit_cfg((sl_limit_config){
            .algorithm = plan->algorithm, .limit = 100, .period = SEC,
            .step = plan->step});
        pthread_barrier_t between;
        phaser p[NTHREADS];

        pthread_barrier_init(&between, NULL, NTHREADS);
        memset(p, 0, sizeof(p));
        for (int t = 0; t < NTHREADS; t++) {
            p[t].st = st;
            p[t].lim = lim;
            p[t].plan = plan;
            p[t].between = &between;
        }
        run_threads(NTHREADS, run_phases, p, sizeof(p[0]));
        for (int ph = 0; ph < MAX_PHASES; ph++) {
            int total = 0;
            for (int t = 0; t < NTHREADS; t++)
                total += p[t].allowed[ph];
            if (total != plan->expected[ph])
                fail_msg("%s, phase %d at %lld ns: %d allowed, expected %d",
                         sl_algorithm_name(plan->algorithm), ph,
                         (long long)plan->at[ph], total, plan->expected[ph]);
        }
        pthread_barrier_destroy(&between);
        sl_limit_free(lim);
        sl_store_free(st);
    }
}

/* ---- sl_check_multi across threads ---- */

enum { NOISE = 6 };

typedef struct multi_user {
    sl_store *st;
    const sl_limit *user, *global, *noise;
    pthread_barrier_t *start;
    int id, attempts;
    int allowed; /* out */
} multi_user;

/* Each call: the thread's user key, the global key and six keys every
 * thread shares, in an order shuffled per call, so that calls lock
 * overlapping sets of shards in every order. */
static void *multi_worker(void *arg)
{
    multi_user *u = arg;
    static const char *noise_keys[NOISE] = {"n0", "n1", "n2", "n3", "n4",
                                            "n5"};
    char user_key[16];
    uint64_t seed = (uint64_t)u->id * 7919 + 1;
    sl_check_item items[NOISE + 2];

    snprintf(user_key, sizeof(user_key), "user-%d", u->id);
    pthread_barrier_wait(u->start);
    for (int i = 0; i < u->attempts; i++) {
        sl_decision overall;
        items[0] = (sl_check_item){u->user, user_key, strlen(user_key)};
        items[1] = (sl_check_item){u->global, "global", 6};
        for (int k = 0; k < NOISE; k++)
            items[2 + k] = (sl_check_item){u->noise, noise_keys[k], 2};
        for (int k = NOISE + 1; k > 0; k--) {
            int j = (int)(splitmix(&seed) % (uint64_t)(k + 1));
            sl_check_item tmp = items[k];
            items[k] = items[j];
            items[j] = tmp;
        }
        int rc = sl_check_multi(u->st, items, NOISE + 2, 1, 5 * SEC, NULL,
                                &overall);
        if (rc != 0)
            thread_error("sl_check_multi", rc);
        else
            u->allowed += overall.allowed;
    }
    return NULL;
}

static void on_alarm(int sig)
{
    static const char msg[] = "test_threads: still running after the "
                              "watchdog's limit: deadlock?\n";
    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
        _exit(3);
    _exit(2);
}

/*
 * 100 per user, 250 in total, 4 users trying 300 times each: the global
 * limit binds, so exactly 250 pass, no user more than 100.  The shared
 * noise keys (limit 10000) were charged by exactly the calls that passed:
 * a call that consumed from some items and not others would show.
 */
static void test_multi_threads_atomic_without_deadlock(void **state)
{
    (void)state;
    sl_store *st = store_new();
    sl_limit *user = limit_new(SL_FIXED_WINDOW, 100, 60 * SEC);
    sl_limit *global = limit_new(SL_TOKEN_BUCKET, 250, 60 * SEC);
    sl_limit *noise = limit_new(SL_SLIDING_LOG, 10000, 60 * SEC);
    pthread_barrier_t start;
    multi_user u[NTHREADS];
    int total = 0;

    signal(SIGALRM, on_alarm);
    alarm(120);
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int t = 0; t < NTHREADS; t++)
        u[t] = (multi_user){st, user, global, noise, &start, t, 300, 0};
    run_threads(NTHREADS, multi_worker, u, sizeof(u[0]));
    alarm(0);
    for (int t = 0; t < NTHREADS; t++) {
        char key[16];
        snprintf(key, sizeof(key), "user-%d", t);
        expect_le(u[t].allowed, 100);
        expect_eq(remaining(st, user, key, 5 * SEC), 100 - u[t].allowed);
        total += u[t].allowed;
    }
    expect_eq(total, 250);
    expect_eq(remaining(st, global, "global", 5 * SEC), 0);
    for (int k = 0; k < NOISE; k++) {
        char key[4] = {'n', (char)('0' + k), 0};
        expect_eq(remaining(st, noise, key, 5 * SEC), 10000 - 250);
    }
    expect_eq(sl__memory_check(st), 0);
    pthread_barrier_destroy(&start);
    sl_limit_free(user);
    sl_limit_free(global);
    sl_limit_free(noise);
    sl_store_free(st);
}

/* ---- sweeping and stats while others decide ---- */

typedef struct sweeper {
    sl_store *st;
    atomic_int *running;
    size_t reclaimed;  /* out */
    int bad_checks;    /* out: sl__memory_check failures */
    uint64_t max_keys; /* out: most keys seen by get_stats */
} sweeper;

static void *sweep_worker(void *arg)
{
    sweeper *s = arg;
    while (atomic_load(s->running) > 0) {
        sl_store_stats stats;
        s->reclaimed += sl_store_sweep(s->st, 10 * SEC, 64);
        sl_store_get_stats(s->st, &stats);
        if (stats.keys > s->max_keys)
            s->max_keys = stats.keys;
        if (sl__memory_check(s->st) != 0)
            s->bad_checks++;
    }
    return NULL;
}

typedef struct checker {
    sl_store *st;
    const sl_limit *lim;
    atomic_int *running;
    int id, keys;
    sl_nanos now;
    const char *prefix;
    int shared;  /* all threads use the same keys */
    int allowed; /* out */
} checker;

static void *check_worker(void *arg)
{
    checker *c = arg;
    char key[32];
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < c->keys; k++) {
            snprintf(key, sizeof(key), "%s-%d", c->prefix,
                     c->shared ? k : c->id * c->keys + k);
            c->allowed += take(c->st, c->lim, key, c->now);
        }
    if (c->running != NULL)
        atomic_fetch_sub(c->running, 1);
    return NULL;
}

/* Runs NTHREADS checkers and, if sweep, one sweeper until they finish. */
static void run_checkers(checker *c, sweeper *sw)
{
    pthread_t th[NTHREADS + 1];
    atomic_store(&thread_errors, 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, check_worker, &c[i]),
                         0);
    if (sw != NULL)
        assert_int_equal(
            pthread_create(&th[NTHREADS], NULL, sweep_worker, sw), 0);
    for (int i = 0; i < NTHREADS + (sw != NULL); i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    expect_eq(atomic_load(&thread_errors), 0);
}

/*
 * Phase A at 0 s: each thread takes 2 of 2 per second from its own keys.
 * Phase B at 10 s, when all of those have expired: the threads share a new
 * set of keys (3 per hour, 8 attempts each) while a fifth thread sweeps at
 * 10 s, reads the stats and checks the invariants.  Exactly 3 pass per new
 * key, every old key is reclaimed (by the sweeper or by a shard making
 * room), no new key is, and nothing is evicted.
 */
static void test_sweep_and_stats_during_checks(void **state)
{
    (void)state;
    const int old_keys = tu_quick() ? 500 : 4000, new_keys = tu_quick() ? 300 : 2000;
    sl_store *st = store_new();
    sl_limit *fast = limit_new(SL_TOKEN_BUCKET, 2, SEC);
    sl_limit *slow = limit_new(SL_SLIDING_WINDOW, 3, 3600 * SEC);
    atomic_int running;
    checker c[NTHREADS];
    sweeper sw = {st, &running, 0, 0, 0};
    sl_store_stats s;
    int allowed = 0;

    for (int t = 0; t < NTHREADS; t++)
        c[t] = (checker){st, fast, NULL, t, old_keys, 0, "old", 0, 0};
    run_checkers(c, NULL);
    for (int t = 0; t < NTHREADS; t++)
        allowed += c[t].allowed;
    expect_eq(allowed, NTHREADS * old_keys * 2);

    atomic_store(&running, NTHREADS);
    for (int t = 0; t < NTHREADS; t++)
        c[t] = (checker){st, slow, &running, t, new_keys, 10 * SEC, "new", 1,
                         0};
    run_checkers(c, &sw);
    allowed = 0;
    for (int t = 0; t < NTHREADS; t++)
        allowed += c[t].allowed;
    expect_eq(allowed, new_keys * 3);
    expect_eq(sw.bad_checks, 0);
    expect_le(sw.max_keys, (uint64_t)(NTHREADS * old_keys + new_keys));

    /* Finish the sweep: two passes' worth of slots. */
    sl_store_get_stats(st, &s);
    sw.reclaimed += sl_store_sweep(st, 10 * SEC, (size_t)s.bytes / 16);
    sl_store_get_stats(st, &s);
    print_message("sweeper reclaimed %zu of %d old keys while others "
                  "decided\n",
                  sw.reclaimed, NTHREADS * old_keys);
    expect_eq(s.keys, new_keys);
    expect_eq(s.reclaimed, NTHREADS * old_keys);
    expect_eq(s.evicted, 0);
    expect_le(sw.reclaimed, s.reclaimed);
    for (int k = 0; k < new_keys; k += 97) {
        char key[32];
        snprintf(key, sizeof(key), "new-%d", k);
        expect_eq(remaining(st, slow, key, 10 * SEC), 0);
    }
    expect_eq(sl__memory_check(st), 0);
    sl_limit_free(fast);
    sl_limit_free(slow);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_key_one_instant_every_algorithm),
        cmocka_unit_test(test_many_keys_every_algorithm),
        cmocka_unit_test(test_phases_every_algorithm),
        cmocka_unit_test(test_multi_threads_atomic_without_deadlock),
        cmocka_unit_test(test_sweep_and_stats_during_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
