/*
 * test_examples.c - the seed documents' worked examples, one test each:
 * the design chapter's token bucket figures 4-4 and 4-6, its leaking
 * bucket queue, fixed window doubling at the boundary, sliding log with and
 * without logged rejections, the sliding window counter at 30%, and the
 * Databox paper's stepped window "next free time".
 *
 * `sluice demo` (tools/cmd_demo.c) narrates the same scenes; the tests named
 * *_demo_scene replay its requests exactly and check every number it
 * prints, so the demo and this file cannot disagree.
 */
#include "testutil.h"

typedef struct fixture {
    sl_store *store;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
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

/* One request: checks the verdict, remaining and retry_after. */
#define expect_request(d, want_allowed, want_remaining, want_retry)          \
    do {                                                                     \
        sl_decision d_ = (d);                                                \
        expect_eq(d_.allowed, want_allowed);                                 \
        expect_eq(d_.remaining, want_remaining);                             \
        expect_eq(d_.retry_after, want_retry);                               \
    } while (0)

/* ---- token bucket, figure 4-4: capacity 4, refilled 2 per second ---- */

static void test_token_bucket_fig_4_4_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 2, SEC, 4);

    /* Four pass at once; the fifth finds the bucket empty.  One token
     * comes back every 500 ms. */
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 3, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 2, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 1, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 0, 0, 500 * MS);
    expect_request(tu_check(f->store, lim, "k", 1, 500 * MS), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 500 * MS), 0, 0, 500 * MS);
    sl_limit_free(lim);
}

static void test_token_bucket_fig_4_4_empty_bucket_resets_in_2s(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 2, SEC, 4);
    sl_decision d;

    for (int i = 0; i < 3; i++)
        tu_check(f->store, lim, "k", 1, 0);
    d = tu_check(f->store, lim, "k", 1, 0);
    /* 4 tokens at 2 per second: full again after 2 s. */
    expect_eq(d.reset_after, 2 * SEC);
    sl_limit_free(lim);
}

static void test_token_bucket_fig_4_4_refills_to_capacity(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 2, SEC, 4);

    for (int i = 0; i < 4; i++)
        tu_check(f->store, lim, "k", 1, 0);
    /* 1.5 s later three tokens are back, not four. */
    expect_request(tu_check(f->store, lim, "k", 0, 1500 * MS), 1, 3, 0);
    /* Ten seconds later the bucket is full, and never fuller: four pass,
     * the fifth does not. */
    for (int i = 3; i >= 0; i--)
        expect_request(tu_check(f->store, lim, "k", 1, 10 * SEC), 1, i, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 10 * SEC), 0, 0, 500 * MS);
    sl_limit_free(lim);
}

/* ---- token bucket, figure 4-6: capacity 4, refilled 4 per minute ---- */

static void test_token_bucket_fig_4_6_one_token_per_15s(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 4, MINUTE, 4);
    const sl_nanos t0 = HOUR; /* 1:00:00 */

    for (int i = 3; i >= 0; i--)
        expect_request(tu_check(f->store, lim, "k", 1, t0), 1, i, 0);
    /* Refilled at 4 per minute: the next token is 15 s away. */
    expect_request(tu_check(f->store, lim, "k", 1, t0), 0, 0, 15 * SEC);
    expect_request(tu_check(f->store, lim, "k", 1, t0 + 15 * SEC - 1), 0, 0,
                   1);
    expect_request(tu_check(f->store, lim, "k", 1, t0 + 15 * SEC), 1, 0, 0);
    sl_limit_free(lim);
}

static void test_token_bucket_fig_4_6_full_after_a_minute(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 4, MINUTE, 4);
    const sl_nanos t0 = HOUR;
    sl_decision d;

    for (int i = 0; i < 4; i++)
        d = tu_check(f->store, lim, "k", 1, t0);
    expect_eq(d.reset_after, MINUTE);
    /* 1:00:30: two tokens back. */
    expect_request(tu_check(f->store, lim, "k", 2, t0 + 30 * SEC), 1, 0, 0);
    /* 1:01:30, a minute after the bucket was last emptied: full. */
    d = tu_check(f->store, lim, "k", 0, t0 + 90 * SEC);
    expect_eq(d.remaining, 4);
    expect_eq(d.reset_after, 0);
    expect_request(tu_check(f->store, lim, "k", 4, t0 + 90 * SEC), 1, 0, 0);
    sl_limit_free(lim);
}

/* ---- gcra: the same figure, the same answers ---- */

static void test_gcra_fig_4_4_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_GCRA, 2, SEC, 4);

    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 3, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 2, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 1, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 0), 0, 0, 500 * MS);
    expect_request(tu_check(f->store, lim, "k", 1, 500 * MS), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 500 * MS), 0, 0, 500 * MS);
    sl_limit_free(lim);
}

/* ---- leaky bucket as a queue: 3 places, drained 1 per second ---- */

static void test_leaky_bucket_delays_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_LEAKY_BUCKET, 1, SEC, 3);
    sl_decision d;

    /* Each admitted request waits for the work ahead of it. */
    d = tu_check(f->store, lim, "k", 1, 0);
    expect_request(d, 1, 2, 0);
    expect_eq(d.delay, 0);
    d = tu_check(f->store, lim, "k", 1, 0);
    expect_request(d, 1, 1, 0);
    expect_eq(d.delay, SEC);
    d = tu_check(f->store, lim, "k", 1, 0);
    expect_request(d, 1, 0, 0);
    expect_eq(d.delay, 2 * SEC);
    expect_eq(d.reset_after, 3 * SEC);
    /* The queue is full: rejected, no delay, one place frees in 1 s. */
    d = tu_check(f->store, lim, "k", 1, 0);
    expect_request(d, 0, 0, SEC);
    expect_eq(d.delay, 0);
    /* At 1 s one unit has drained: admitted behind the remaining two. */
    d = tu_check(f->store, lim, "k", 1, SEC);
    expect_request(d, 1, 0, 0);
    expect_eq(d.delay, 2 * SEC);
    sl_limit_free(lim);
}

/* ---- fixed window: 5 per minute lets 10 through in one minute ---- */

static void test_fixed_window_boundary_doubling(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, MINUTE, 0);
    /* 2:00:30 .. 2:00:59 and 2:01:00 .. 2:01:29, seconds after midnight. */
    const sl_nanos first[5] = {7230, 7240, 7250, 7255, 7259};
    const sl_nanos second[5] = {7260, 7265, 7270, 7280, 7289};
    int passed = 0;

    for (int i = 0; i < 5; i++) {
        sl_decision d = tu_check(f->store, lim, "k", 1, first[i] * SEC);
        expect_request(d, 1, 4 - i, 0);
        passed += d.allowed;
    }
    for (int i = 0; i < 5; i++) {
        sl_decision d = tu_check(f->store, lim, "k", 1, second[i] * SEC);
        expect_request(d, 1, 4 - i, 0);
        passed += d.allowed;
    }
    /* Ten requests within 2:00:30-2:01:30, twice the limit. */
    expect_eq(passed, 10);
    expect_le(second[4] - first[0], 60);
    /* The sixth of the second window waits for 2:02:00. */
    expect_request(tu_check(f->store, lim, "k", 1, 7289 * SEC), 0, 0,
                   31 * SEC);
    sl_limit_free(lim);
}

static void test_fixed_window_doubling_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, MINUTE, 0);

    expect_request(tu_check(f->store, lim, "k", 3, 7230 * SEC), 1, 2, 0);
    expect_request(tu_check(f->store, lim, "k", 2, 7259 * SEC), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 5, 7260 * SEC), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 7289 * SEC), 0, 0,
                   31 * SEC);
    sl_limit_free(lim);
}

/* ---- sliding log: 2 per minute ---- */

static sl_limit *sliding_log_2_per_minute(unsigned flags)
{
    sl_limit_config c = {.algorithm = SL_SLIDING_LOG, .limit = 2,
                         .period = MINUTE, .flags = flags};
    return tu_limit_cfg(&c);
}

/* 1:00:01, 1:00:30, 1:00:50 (rejected) and 1:01:40, in ns. */
#define T_1_00_01 (3601 * SEC)
#define T_1_00_30 (3630 * SEC)
#define T_1_00_50 (3650 * SEC)
#define T_1_01_40 (3700 * SEC)

static void test_sliding_log_rejected_logged_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = sliding_log_2_per_minute(SL_LOG_REJECTED);

    expect_request(tu_check(f->store, lim, "k", 1, T_1_00_01), 1, 1, 0);
    expect_request(tu_check(f->store, lim, "k", 1, T_1_00_30), 1, 0, 0);
    /* Rejected and logged: it passes only once 1:00:01 and 1:00:30 have
     * left, at 1:01:30, because the logged 1:00:50 still counts. */
    expect_request(tu_check(f->store, lim, "k", 1, T_1_00_50), 0, 0,
                   40 * SEC);
    /* The window (1:00:40, 1:01:40] holds the logged 1:00:50 and this. */
    expect_request(tu_check(f->store, lim, "k", 1, T_1_01_40), 1, 0, 0);
    sl_limit_free(lim);
}

static void test_sliding_log_rejected_logged_retry_is_exact(void **state)
{
    fixture *f = *state;
    sl_limit *lim = sliding_log_2_per_minute(SL_LOG_REJECTED);
    const char *keys[2] = {"early", "on-time"};
    const sl_nanos retry_at = T_1_00_50 + 40 * SEC; /* 1:01:30 */

    for (int k = 0; k < 2; k++) {
        tu_check(f->store, lim, keys[k], 1, T_1_00_01);
        tu_check(f->store, lim, keys[k], 1, T_1_00_30);
        tu_check(f->store, lim, keys[k], 1, T_1_00_50);
    }
    /* One ns early the window still holds 1:00:30 and 1:00:50. */
    expect_eq(tu_check(f->store, lim, "early", 1, retry_at - 1).allowed, 0);
    expect_eq(tu_check(f->store, lim, "on-time", 1, retry_at).allowed, 1);
    sl_limit_free(lim);
}

static void test_sliding_log_without_flag(void **state)
{
    fixture *f = *state;
    sl_limit *lim = sliding_log_2_per_minute(0);

    expect_request(tu_check(f->store, lim, "k", 1, T_1_00_01), 1, 1, 0);
    expect_request(tu_check(f->store, lim, "k", 1, T_1_00_30), 1, 0, 0);
    /* Not logged: it passes as soon as 1:00:01 leaves, at 1:01:01. */
    expect_request(tu_check(f->store, lim, "k", 1, T_1_00_50), 0, 0,
                   11 * SEC);
    /* (1:00:40, 1:01:40] is empty: one unit is left after this one. */
    expect_request(tu_check(f->store, lim, "k", 1, T_1_01_40), 1, 1, 0);
    sl_limit_free(lim);
}

static void test_sliding_log_without_flag_retry_is_exact(void **state)
{
    fixture *f = *state;
    sl_limit *lim = sliding_log_2_per_minute(0);
    const char *keys[2] = {"early", "on-time"};

    for (int k = 0; k < 2; k++) {
        tu_check(f->store, lim, keys[k], 1, T_1_00_01);
        tu_check(f->store, lim, keys[k], 1, T_1_00_30);
        tu_check(f->store, lim, keys[k], 1, T_1_00_50);
    }
    expect_eq(tu_check(f->store, lim, "early", 1, 3661 * SEC - 1).allowed,
              0);
    expect_eq(tu_check(f->store, lim, "on-time", 1, 3661 * SEC).allowed, 1);
    sl_limit_free(lim);
}

/* ---- sliding window counter: 7 per minute, prev 5, cur 3, at 30% ---- */

/*
 * The previous minute [0, 60 s) holds 5, the current one [60 s, 120 s)
 * holds 3 (taken at 65 s, when the estimate was floor(5 * 55/60) + 0 = 4,
 * and 4 + 3 <= 7).  At 78 s, 30% into the window:
 *   estimate = floor(5 * 0.7) + 3 = floor(3.5) + 3 = 6, and 6 + 1 <= 7:
 * allowed, cur = 4, remaining 7 - 7 = 0.  The next request sees 3 + 4 = 7
 * and is rejected.  It fits once floor(5 * (P - e) / P) <= 7 - 1 - 4 = 2,
 * i.e. 5 (P - e) <= 3P - 1, P - e <= floor((3P - 1) / 5) = 35,999,999,999
 * for P = 60e9 ns: e >= 24,000,000,001 ns.  At e = 24 s exactly,
 * 5 * 36e9 / 60e9 = 3.0, still too much.  So retry_after =
 * 24,000,000,001 - 18e9 = 6,000,000,001 ns, not a round 6 s.
 */
static void test_sliding_window_30_percent_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 7, MINUTE, 0);

    expect_request(tu_check(f->store, lim, "k", 5, 10 * SEC), 1, 2, 0);
    expect_request(tu_check(f->store, lim, "k", 3, 65 * SEC), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 78 * SEC), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 78 * SEC), 0, 0,
                   INT64_C(6000000001));
    sl_limit_free(lim);
}

static void test_sliding_window_30_percent_estimate_is_6(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 7, MINUTE, 0);

    tu_check(f->store, lim, "k", 5, 10 * SEC);
    tu_check(f->store, lim, "k", 3, 65 * SEC);
    /* A query at 30% reports 7 - 6 = 1 unit left. */
    expect_request(tu_check(f->store, lim, "k", 0, 78 * SEC), 1, 1, 0);
    sl_limit_free(lim);
}

static void test_sliding_window_30_percent_retry_is_exact(void **state)
{
    fixture *f = *state;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 7, MINUTE, 0);
    const char *keys[2] = {"early", "on-time"};
    const sl_nanos retry_at = 78 * SEC + INT64_C(6000000001);

    for (int k = 0; k < 2; k++) {
        tu_check(f->store, lim, keys[k], 5, 10 * SEC);
        tu_check(f->store, lim, keys[k], 3, 65 * SEC);
        tu_check(f->store, lim, keys[k], 1, 78 * SEC);
    }
    expect_eq(tu_check(f->store, lim, "early", 1, retry_at - 1).allowed, 0);
    expect_eq(tu_check(f->store, lim, "on-time", 1, retry_at).allowed, 1);
    sl_limit_free(lim);
}

/* ---- stepped window: the Databox paper's next free time ---- */

/*
 * 10 per 4 steps.  Step counters 0, 6, 2, 2 for steps s-3 .. s: the usage
 * in step s is 10, so a request is rejected; in step s+1 the window is
 * s-2 .. s+1, still 6 + 2 + 2 = 10; in step s+2 it is 2 + 2 = 4.  The next
 * free time is the start of step s+2: retry_after = (s + 2) k - t.
 */
static sl_limit *stepped_10_per_4_steps(sl_nanos step)
{
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = 10,
                         .period = 4 * step, .step = step};
    return tu_limit_cfg(&c);
}

static void fill_paper_steps(fixture *f, const sl_limit *lim,
                             const char *key, sl_nanos step, int64_t s)
{
    /* Step s-3 stays empty. */
    tu_check(f->store, lim, key, 6, (s - 2) * step);
    tu_check(f->store, lim, key, 2, (s - 1) * step + step / 2);
    tu_check(f->store, lim, key, 2, s * step);
}

static void test_stepped_window_next_free_time_demo_scene(void **state)
{
    fixture *f = *state;
    sl_limit *lim = stepped_10_per_4_steps(SEC);

    /* s = 3, k = 1 s, t = 3.5 s: retry_after = 5 s - 3.5 s. */
    expect_request(tu_check(f->store, lim, "k", 6, 1 * SEC), 1, 4, 0);
    expect_request(tu_check(f->store, lim, "k", 2, 2 * SEC), 1, 2, 0);
    expect_request(tu_check(f->store, lim, "k", 2, 3 * SEC), 1, 0, 0);
    expect_request(tu_check(f->store, lim, "k", 1, 3 * SEC + SEC / 2), 0, 0,
                   SEC + SEC / 2);
    sl_limit_free(lim);
}

static void test_stepped_window_next_free_time_anywhere_in_step(void **state)
{
    fixture *f = *state;
    const sl_nanos step = 250 * MS;
    const int64_t s = 17;
    sl_limit *lim = stepped_10_per_4_steps(step);
    /* From the first to the last ns of step s. */
    const sl_nanos offsets[5] = {0, 1, step / 3, step / 2, step - 1};

    for (int i = 0; i < 5; i++) {
        char key[16];
        sl_nanos t = s * step + offsets[i];
        snprintf(key, sizeof(key), "k%d", i);
        fill_paper_steps(f, lim, key, step, s);
        expect_request(tu_check(f->store, lim, key, 1, t), 0, 0,
                       (s + 2) * step - t);
    }
    sl_limit_free(lim);
}

static void test_stepped_window_usage_per_step(void **state)
{
    fixture *f = *state;
    const sl_nanos step = SEC;
    const int64_t s = 3;
    sl_limit *lim = stepped_10_per_4_steps(step);

    fill_paper_steps(f, lim, "k", step, s);
    /* Step s+1 (the last ns before s+2): usage still 10. */
    expect_request(tu_check(f->store, lim, "k", 0, (s + 2) * step - 1), 1, 0,
                   0);
    expect_request(tu_check(f->store, lim, "k", 1, (s + 2) * step - 1), 0, 0,
                   1);
    /* Step s+2: usage 4, so 6 are left, 5 after this request. */
    expect_request(tu_check(f->store, lim, "k", 1, (s + 2) * step), 1, 5, 0);
    sl_limit_free(lim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_token_bucket_fig_4_4_demo_scene,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_token_bucket_fig_4_4_empty_bucket_resets_in_2s, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_token_bucket_fig_4_4_refills_to_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_token_bucket_fig_4_6_one_token_per_15s, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_token_bucket_fig_4_6_full_after_a_minute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gcra_fig_4_4_demo_scene, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_leaky_bucket_delays_demo_scene,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_window_boundary_doubling,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_window_doubling_demo_scene,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_sliding_log_rejected_logged_demo_scene, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_sliding_log_rejected_logged_retry_is_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sliding_log_without_flag, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_sliding_log_without_flag_retry_is_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_sliding_window_30_percent_demo_scene, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_sliding_window_30_percent_estimate_is_6, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_sliding_window_30_percent_retry_is_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_stepped_window_next_free_time_demo_scene, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_stepped_window_next_free_time_anywhere_in_step, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_stepped_window_usage_per_step,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
