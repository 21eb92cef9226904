/*
 * test_decision.c - the decision layer (src/decision/) on its own, below
 * any front end: the breaker's state, the held parts of a batch, the
 * failure policy item by item, and sd_decide() on the memory store, with
 * the breaker open, and on a real redis-server (a wait, a batch, a
 * cancelled wait, a timeout decided by the policy).
 */
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "decision/layer.h"
#include "redisutil.h"
#include "testutil.h"

/* ---- breaker.c ---- */

static void test_breaker_opens_after_threshold(void **state)
{
    (void)state;
    sd_breaker b;
    sd_breaker_init(&b, 3);
    assert_int_equal(b.state, SD_DOWN);
    assert_int_equal(sd_breaker_failure(&b), 0); /* not UP: not counted */
    sd_breaker_probing(&b);
    sd_breaker_close(&b);
    assert_int_equal(b.state, SD_UP);
    assert_int_equal(sd_breaker_failure(&b), 0);
    assert_int_equal(sd_breaker_failure(&b), 0);
    sd_breaker_success(&b); /* consecutive failures only */
    assert_int_equal(sd_breaker_failure(&b), 0);
    assert_int_equal(sd_breaker_failure(&b), 0);
    assert_int_equal(sd_breaker_failure(&b), 1);
}

static void test_breaker_backoff_doubles_to_max(void **state)
{
    (void)state;
    sd_breaker b;
    sd_breaker_init(&b, 1);
    uint64_t expect = SD_BACKOFF_MIN_MS;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sd_breaker_open(&b), expect);
        assert_int_equal(b.state, SD_DOWN);
        expect =
            expect * 2 > SD_BACKOFF_MAX_MS ? SD_BACKOFF_MAX_MS : expect * 2;
    }
    assert_int_equal(sd_breaker_open(&b), SD_BACKOFF_MAX_MS);
    sd_breaker_close(&b); /* a probe that worked starts over */
    assert_int_equal(sd_breaker_open(&b), SD_BACKOFF_MIN_MS);
}

static void test_breaker_threshold_below_one_is_one(void **state)
{
    (void)state;
    sd_breaker b;
    sd_breaker_init(&b, 0);
    sd_breaker_close(&b);
    assert_int_equal(sd_breaker_failure(&b), 1);
}

/* ---- batch.c ---- */

static int dropped;
static void count_drop(sd_part *p)
{
    (void)p;
    dropped++;
}

static void test_held_takes_in_order_up_to_a_batch(void **state)
{
    (void)state;
    enum { N = SD_MAX_BATCH + 10 };
    sd_wait w = {.owner = &w};
    sd_call calls[N];
    sd_part parts[N], *out[SD_MAX_BATCH];
    sd_held h = {0};
    for (int i = 0; i < N; i++) {
        calls[i] = (sd_call){.wait = &w, .done = i == 3};
        parts[i] = (sd_part){.c = &calls[i], .index = (size_t)i};
        assert_int_equal(sd_held_push(&h, &parts[i]), 0);
    }
    dropped = 0;
    size_t k = sd_held_take(&h, out, count_drop);
    /* A done call's part is dropped, not sent, and takes no room. */
    assert_int_equal(dropped, 1);
    assert_int_equal(k, SD_MAX_BATCH);
    for (size_t i = 0, want = 0; i < k; i++, want++) {
        if (want == 3)
            want++;
        assert_int_equal(out[i]->index, want);
    }
    assert_int_equal(h.n, N - SD_MAX_BATCH - 1);
    k = sd_held_take(&h, out, count_drop);
    assert_int_equal(k, N - SD_MAX_BATCH - 1);
    assert_int_equal(out[0]->index, SD_MAX_BATCH + 1);
    assert_int_equal(sd_held_take(&h, out, count_drop), 0);
    sd_held_release(&h);
}

static void test_held_drops_cancelled_waits(void **state)
{
    (void)state;
    sd_wait live = {.owner = &live}, gone = {.owner = NULL};
    sd_call a = {.wait = &live}, b = {.wait = &gone};
    sd_part pa = {.c = &a}, pb = {.c = &b}, *out[SD_MAX_BATCH];
    sd_held h = {0};
    sd_held_push(&h, &pb);
    sd_held_push(&h, &pa);
    dropped = 0;
    assert_int_equal(sd_held_take(&h, out, count_drop), 1);
    assert_ptr_equal(out[0], &pa);
    assert_int_equal(dropped, 1);
    sd_held_release(&h);
}

/* ---- policy.c ---- */

/* An engine whose Redis is only parsed (nothing connects here). */
static sd_engine *redis_engine(int failure, int nodes, const char *url)
{
    sd_config cfg = {.redis_url = url,
                     .redis_timeout_ms = 50,
                     .redis_failure = failure,
                     .redis_breaker = 3,
                     .nodes = nodes};
    sd_engine *e = NULL;
    char err[256];
    if (sd_engine_new(&cfg, &e, err, sizeof(err)) != 0)
        fail_msg("sd_engine_new: %s", err);
    return e;
}

static void test_policy_open_allows_with_the_whole_limit(void **state)
{
    (void)state;
    sd_engine *e = redis_engine(SD_FAIL_OPEN, 1, "redis://127.0.0.1:1");
    sd_stats stats = {0};
    sd_thread t = {.e = e, .stats = &stats};
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, HOUR, 0);
    sl_check_item it = {lim, "k", 1};
    int64_t cost = 9;
    sl_decision each;
    sd_check c = {.items = &it, .costs = &cost, .n = 1, .each = &each};
    sd_policy_decide(&t, &c, SL_NS_PER_SEC, SD_FAIL_TIMEOUT);
    assert_int_equal(c.rc, 0);
    assert_true(c.overall.allowed);
    assert_int_equal(c.overall.limit, 5);
    assert_int_equal(c.overall.remaining, 5);
    assert_true(each.allowed);
    assert_int_equal(stats.fallbacks[SD_FAIL_OPEN], 1);
    sl_limit_free(lim);
    sd_engine_free(e);
}

static void test_policy_closed_refuses_and_names_the_reason(void **state)
{
    (void)state;
    sd_engine *e = redis_engine(SD_FAIL_OPEN, 1, "redis://127.0.0.1:1");
    sd_stats stats = {0};
    sd_thread t = {.e = e, .stats = &stats};
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, HOUR, 0);
    sl_check_item it[2] = {{lim, "a", 1}, {lim, "b", 1}};
    int64_t costs[2] = {1, 1};
    /* One item's rule says fail_closed: it outweighs the default. */
    sl__rule_failure failure[2] = {SL__RULE_FAILURE_DEFAULT,
                                  SL__RULE_FAILURE_CLOSED};
    sd_check c = {.items = it, .costs = costs, .n = 2, .failure = failure};
    sd_policy_decide(&t, &c, SL_NS_PER_SEC, SD_FAIL_BREAKER);
    assert_int_equal(c.rc, SL_ESTORE);
    assert_non_null(strstr(c.err, "breaker_open"));
    assert_non_null(strstr(c.err, "fail_closed"));
    assert_int_equal(stats.fallbacks[SD_FAIL_CLOSED], 1);
    assert_int_equal(stats.fallbacks[SD_FAIL_OPEN], 1);
    sl_limit_free(lim);
    sd_engine_free(e);
}

/* One item decided by the local policy: its decision. */
static sl_decision local_one(sd_thread *t, const sl_limit *lim, int64_t cost)
{
    sl_check_item it = {lim, "user", 4};
    sl_decision each;
    sd_check c = {.items = &it, .costs = &cost, .n = 1, .each = &each};
    sd_policy_decide(t, &c, SL_NS_PER_SEC, SD_FAIL_ERROR);
    assert_int_equal(c.rc, 0);
    return each;
}

/* An override is divided as an override of the divided base: its own
 * numbers over the nodes, on the base's local counters (what was used
 * under one is used under the other), and 0 stays 0. */
static void test_policy_local_divides_an_override(void **state)
{
    (void)state;
    sd_engine *e = redis_engine(SD_FAIL_LOCAL, 4, "redis://127.0.0.1:1");
    sd_stats stats = {0};
    sd_thread t = {.e = e, .stats = &stats};
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 20, HOUR, 0), *up, *zero;
    sl_decision d;
    assert_int_equal(sl_limit_override(lim, 40, 0, &up, NULL, 0), 0);
    assert_int_equal(sl_limit_override(lim, 0, 0, &zero, NULL, 0), 0);
    d = local_one(&t, lim, 3);
    assert_int_equal(d.limit, 5);
    assert_int_equal(d.remaining, 2);
    d = local_one(&t, up, 0);
    assert_int_equal(d.limit, 10);
    assert_int_equal(d.remaining, 7);
    d = local_one(&t, zero, 1);
    assert_false(d.allowed);
    assert_int_equal(d.limit, 0);
    assert_int_equal(d.retry_after, -1);
    d = local_one(&t, lim, 0);
    assert_int_equal(d.remaining, 2);
    sd_local_release(&t);
    sl_limit_free(zero);
    sl_limit_free(up);
    sl_limit_free(lim);
    sd_engine_free(e);
}

static void test_policy_local_divides_the_limit(void **state)
{
    (void)state;
    sd_engine *e = redis_engine(SD_FAIL_LOCAL, 4, "redis://127.0.0.1:1");
    sd_stats stats = {0};
    sd_thread t = {.e = e, .stats = &stats};
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 20, HOUR, 0);
    sl_limit *other = tu_limit(SL_FIXED_WINDOW, 1000, HOUR, 0);
    sl_check_item it[2] = {{lim, "user", 4}, {other, "open", 4}};
    int64_t costs[2] = {1, 1};
    sl__rule_failure failure[2] = {SL__RULE_FAILURE_DEFAULT,
                                  SL__RULE_FAILURE_OPEN};
    sl_decision each[2];
    int allowed = 0;
    for (int i = 0; i < 10; i++) {
        sd_check c = {.items = it,
                      .costs = costs,
                      .n = 2,
                      .failure = failure,
                      .each = each};
        sd_policy_decide(&t, &c, SL_NS_PER_SEC, SD_FAIL_ERROR);
        assert_int_equal(c.rc, 0);
        allowed += c.overall.allowed;
        /* The local item is its limit over 4 nodes; the open one whole. */
        assert_int_equal(each[0].limit, 5);
        assert_int_equal(each[1].limit, 1000);
        assert_int_equal(each[1].remaining, 1000);
    }
    assert_int_equal(allowed, 5);
    sd_local_release(&t);
    sl_limit_free(lim);
    sl_limit_free(other);
    sd_engine_free(e);
}

/* ---- sd_decide ---- */

static int done_calls;
static void count_done(void *owner)
{
    (void)owner;
    done_calls++;
}

static void test_decide_memory_is_at_once_and_exact(void **state)
{
    (void)state;
    sd_config cfg = {0};
    sd_engine *e;
    char err[128];
    assert_int_equal(sd_engine_new(&cfg, &e, err, sizeof(err)), 0);
    assert_false(sd_engine_uses_redis(e));
    sd_stats stats = {0};
    sd_thread *t = sd_thread_new(e, NULL, 0, &stats);
    assert_non_null(t);
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 3, HOUR, 0);
    sl_check_item it = {lim, "k", 1};
    int64_t cost = 1;
    for (int i = 0; i < 4; i++) {
        sd_check c = {.items = &it, .costs = &cost, .n = 1};
        sd_wait *w = NULL;
        assert_int_equal(
            sd_decide(t, &c, 1, SL_NS_PER_SEC, count_done, NULL, &w), 0);
        assert_null(w);
        assert_int_equal(c.rc, 0);
        assert_int_equal(c.overall.allowed, i < 3);
        assert_int_equal(c.overall.remaining, i < 3 ? 2 - i : 0);
    }
    /* A bad check is its own error, not the others'. */
    int64_t bad = -1;
    sd_check two[2] = {{.items = &it, .costs = &bad, .n = 1},
                       {.items = &it, .costs = &cost, .n = 1}};
    sd_wait *w = NULL;
    assert_int_equal(sd_decide(t, two, 2, SL_NS_PER_SEC, count_done, NULL, &w),
                     0);
    assert_int_equal(two[0].rc, SL_ECOST);
    assert_non_null(strstr(two[0].err, "store:"));
    assert_int_equal(two[1].rc, 0);
    sd_thread_stop(t);
    sd_thread_free(t);
    sl_limit_free(lim);
    sd_engine_free(e);
}

static void test_decide_breaker_open_uses_the_policy_at_once(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", tu_free_port());
    sd_engine *e = redis_engine(SD_FAIL_OPEN, 1, url);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sd_stats stats = {0};
    sd_thread *t = sd_thread_new(e, &loop, 0, &stats);
    assert_non_null(t);
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 2, HOUR, 0);
    sl_check_item it = {lim, "k", 1};
    int64_t cost = 1;
    sd_check c = {.items = &it, .costs = &cost, .n = 1};
    sd_wait *w = NULL;
    /* Nothing listens: the connection is not up, no I/O is waited on. */
    assert_int_equal(sd_decide(t, &c, 1, SL_NS_PER_SEC, count_done, NULL, &w),
                     0);
    assert_int_equal(c.rc, 0);
    assert_true(c.overall.allowed);
    assert_int_equal(c.overall.remaining, 2);
    assert_int_equal(stats.failures[SD_FAIL_BREAKER], 1);
    assert_int_equal(stats.fallbacks[SD_FAIL_OPEN], 1);
    assert_int_equal(stats.up, 0);
    sd_thread_stop(t);
    uv_run(&loop, UV_RUN_DEFAULT);
    sd_thread_free(t);
    assert_int_equal(uv_loop_close(&loop), 0);
    sl_limit_free(lim);
    sd_engine_free(e);
}

/* Runs the loop until cond() or about 5 s. */
static void run_until(uv_loop_t *loop, int (*cond)(void *), void *arg)
{
    uint64_t until = uv_now(loop) + 5000;
    while (!cond(arg) && uv_now(loop) < until) {
        uv_run(loop, UV_RUN_NOWAIT);
        tu_sleep_ms(1);
        uv_update_time(loop);
    }
    assert_true(cond(arg));
}

static int is_up(void *arg)
{
    return atomic_load(&((sd_stats *)arg)->up) == 1;
}

static int done_reaches(void *arg)
{
    return done_calls >= *(int *)arg;
}

typedef struct fixture {
    uv_loop_t loop;
    sd_engine *e;
    sd_stats stats;
    sd_thread *t;
    sl_limit *lim;
} fixture;

static void fixture_up(fixture *f, int failure, uint64_t timeout_ms)
{
    sd_config cfg = {.redis_url = tu_server()->url,
                     .redis_timeout_ms = timeout_ms,
                     .redis_failure = failure,
                     .redis_breaker = 1000,
                     .nodes = 1};
    char err[256];
    memset(f, 0, sizeof(*f));
    if (sd_engine_new(&cfg, &f->e, err, sizeof(err)) != 0)
        fail_msg("sd_engine_new: %s", err);
    uv_loop_init(&f->loop);
    f->t = sd_thread_new(f->e, &f->loop, 0, &f->stats);
    assert_non_null(f->t);
    run_until(&f->loop, is_up, &f->stats);
    f->lim = tu_limit(SL_FIXED_WINDOW, 5, HOUR, 0);
    done_calls = 0;
}

static void fixture_down(fixture *f)
{
    sd_thread_stop(f->t);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    sd_thread_free(f->t);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    sl_limit_free(f->lim);
    sd_engine_free(f->e);
}

static void test_redis_waits_batches_and_decides_exactly(void **state)
{
    (void)state;
    enum { N = 12 };
    fixture f;
    fixture_up(&f, SD_FAIL_OPEN, 2000);
    sl_check_item it = {f.lim, "batch-key", 9};
    int64_t cost = 1;
    sd_check c[N];
    sd_wait *w[N];
    /* All asked in one loop iteration: the first goes at once, the rest
     * are held while it is out and go as one batch. */
    for (int i = 0; i < N; i++) {
        c[i] = (sd_check){.items = &it, .costs = &cost, .n = 1};
        assert_int_equal(
            sd_decide(f.t, &c[i], 1, SL_NS_PER_SEC, count_done, &c[i], &w[i]),
            SD_AGAIN);
    }
    sd_flush(f.t);
    int want = N;
    run_until(&f.loop, done_reaches, &want);
    assert_int_equal(done_calls, N);
    int allowed = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(c[i].rc, 0);
        allowed += c[i].overall.allowed;
        assert_int_equal(c[i].overall.allowed, i < 5);
    }
    assert_int_equal(allowed, 5);
    assert_int_equal(f.stats.calls, N);
    assert_int_equal(f.stats.commands, 2);
    assert_int_equal(
        f.stats.failures[SD_FAIL_TIMEOUT] + f.stats.failures[SD_FAIL_ERROR], 0);
    fixture_down(&f);
}

static void test_redis_cancelled_wait_never_calls_back(void **state)
{
    (void)state;
    fixture f;
    fixture_up(&f, SD_FAIL_OPEN, 2000);
    sl_check_item it = {f.lim, "cancel-key", 10};
    int64_t cost = 1;
    sd_check a = {.items = &it, .costs = &cost, .n = 1};
    sd_check b = a;
    sd_wait *wa, *wb;
    assert_int_equal(sd_decide(f.t, &a, 1, 0, count_done, &a, &wa), SD_AGAIN);
    assert_int_equal(sd_decide(f.t, &b, 1, 0, count_done, &b, &wb), SD_AGAIN);
    sd_cancel(wb); /* held for the batch: dropped unsent */
    sd_cancel(wa); /* sent: its reply is read and dropped */
    for (int i = 0; i < 100; i++) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        tu_sleep_ms(2);
    }
    assert_int_equal(done_calls, 0);
    /* Only the sent one reached Redis. */
    assert_int_equal(f.stats.calls, 1);
    fixture_down(&f);
}

static void test_redis_timeout_is_decided_by_the_policy(void **state)
{
    (void)state;
    fixture f;
    fixture_up(&f, SD_FAIL_CLOSED, 100);
    sl_check_item it = {f.lim, "slow-key", 8};
    int64_t cost = 1;
    sd_check c = {.items = &it, .costs = &cost, .n = 1};
    sd_wait *w;
    kill(tu_server()->pid, SIGSTOP); /* Redis hangs: no reply comes */
    assert_int_equal(sd_decide(f.t, &c, 1, 0, count_done, &c, &w), SD_AGAIN);
    sd_flush(f.t);
    int want = 1;
    run_until(&f.loop, done_reaches, &want);
    kill(tu_server()->pid, SIGCONT);
    assert_int_equal(c.rc, SL_ESTORE);
    assert_non_null(strstr(c.err, "timeout"));
    assert_int_equal(f.stats.failures[SD_FAIL_TIMEOUT], 1);
    assert_int_equal(f.stats.fallbacks[SD_FAIL_CLOSED], 1);
    fixture_down(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_breaker_opens_after_threshold),
        cmocka_unit_test(test_breaker_backoff_doubles_to_max),
        cmocka_unit_test(test_breaker_threshold_below_one_is_one),
        cmocka_unit_test(test_held_takes_in_order_up_to_a_batch),
        cmocka_unit_test(test_held_drops_cancelled_waits),
        cmocka_unit_test(test_policy_open_allows_with_the_whole_limit),
        cmocka_unit_test(test_policy_closed_refuses_and_names_the_reason),
        cmocka_unit_test(test_policy_local_divides_the_limit),
        cmocka_unit_test(test_policy_local_divides_an_override),
        cmocka_unit_test(test_decide_memory_is_at_once_and_exact),
        cmocka_unit_test(test_decide_breaker_open_uses_the_policy_at_once),
        cmocka_unit_test(test_redis_waits_batches_and_decides_exactly),
        cmocka_unit_test(test_redis_cancelled_wait_never_calls_back),
        cmocka_unit_test(test_redis_timeout_is_decided_by_the_policy),
    };
    return cmocka_run_group_tests(tests, tu_redis_group_setup,
                                  tu_redis_group_teardown);
}
