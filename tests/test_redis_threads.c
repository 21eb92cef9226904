/*
 * test_redis_threads.c - one Redis store shared by several threads (its
 * one connection is behind a mutex): every check gets its own answer, and
 * the server, which decides each atomically, admits exactly the limit.
 * Runs under ThreadSanitizer in scripts/test.sh's third run.
 */
#include <pthread.h>

#include "testutil.h"

#include "redisutil.h"

enum { THREADS = 4, LIMIT = 500, PER_THREAD = 300 };

static sl_store *shared;
static sl_limit *limit;

static void *worker(void *arg)
{
    long *allowed = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        sl_decision d;
        /* One instant: the only order that matters is the server's. */
        if (sl_check(shared, limit, "k", 1, 1, 1700000000 * SEC, &d) != 0)
            return (void *)1;
        *allowed += d.allowed;
    }
    return NULL;
}

static void test_threads_share_one_store_exactly(void **state)
{
    sl_redis_options o = {.size = sizeof(sl_redis_options),
                          .extra_ttl_ms = 600000,
                          .key_prefix = "thr:"};
    pthread_t th[THREADS];
    long allowed[THREADS] = {0}, total = 0;
    char err[256] = "";
    (void)state;

    o.url = tu_server()->url;
    if (sl_redis_store_new(&o, &shared, err, sizeof(err)) != 0)
        fail_msg("sl_redis_store_new: %s", err);
    limit = tu_limit(SL_FIXED_WINDOW, LIMIT, HOUR, 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, &allowed[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        expect_eq((long)(intptr_t)rc, 0);
        total += allowed[i];
    }
    expect_eq(total, LIMIT);
    sl_limit_free(limit);
    sl_store_free(shared);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_share_one_store_exactly),
    };
    return cmocka_run_group_tests(tests, tu_redis_group_setup,
                                  tu_redis_group_teardown);
}
