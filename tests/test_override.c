/*
 * test_override.c - a limit's numbers changed at runtime
 * (sl_limit_override) without resetting its counters: the errors of
 * sl_limit_override, and the example of docs/algorithms.md ("Changing a
 * limit's numbers") for every algorithm: a key that used 80 of 100 has 20
 * left under 100, 70 under 150 and 0 (not less) under 60.
 */
#include "testutil.h"

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

/* ==== the example ==== */

static sl_limit *example_base(sl_algorithm alg)
{
    sl_limit_config c = {.algorithm = alg, .limit = 100, .period = SEC};
    if (alg == SL_STEPPED_WINDOW)
        c.step = 100 * MS;
    return tu_limit_cfg(&c);
}

/* 80 used of 100: 20 left under 100, 70 under 150, 0 under 60, and under
 * each the next unit passes exactly when its numbers say. */
static void example_on(sl_store *st, sl_algorithm alg)
{
    sl_limit *base = example_base(alg);
    sl_limit *up = override(base, 150, 0), *down = override(base, 60, 0);
    const sl_nanos t = 1000 * SEC + 300 * MS;
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    d = tu_check(st, base, "k", 80, t);
    expect_eq_at(d.allowed, 1, "%s", name);
    expect_eq_at(d.remaining, 20, "%s", name);
    expect_eq_at(tu_check(st, base, "k", 0, t).remaining, 20, "%s", name);
    d = tu_check(st, up, "k", 0, t);
    expect_eq_at(d.remaining, 70, "%s", name);
    expect_eq_at(d.limit, 150, "%s", name);
    /* 70 more pass under 150, and then nothing: 150 in all. */
    d = tu_check(st, up, "k", 70, t);
    expect_eq_at(d.allowed, 1, "%s", name);
    expect_eq_at(d.remaining, 0, "%s", name);
    expect_eq_at(tu_check(st, up, "k", 1, t).allowed, 0, "%s", name);
    /* Back to 100: 150 used is more than 100, so 0 left. */
    expect_eq_at(tu_check(st, base, "k", 0, t).remaining, 0, "%s", name);
    sl_limit_free(up);
    sl_limit_free(down);
    sl_limit_free(base);
}

/* The same, going down: 80 used is 0 left of 60, never less, and the
 * buckets refill from empty at the new rate (T = 1/60 s). */
static void example_down(sl_store *st, sl_algorithm alg)
{
    sl_limit *base = example_base(alg), *down = override(base, 60, 0);
    const sl_nanos t = 1000 * SEC + 300 * MS;
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    tu_check(st, base, "k2", 80, t);
    d = tu_check(st, down, "k2", 0, t);
    expect_eq_at(d.allowed, 1, "%s", name);
    expect_eq_at(d.remaining, 0, "%s", name);
    expect_eq_at(d.limit, 60, "%s", name);
    d = tu_check(st, down, "k2", 1, t);
    expect_eq_at(d.allowed, 0, "%s", name);
    if (is_bucket(alg)) {
        /* Empty under 60 per s: one unit after ceil(1e9 / 60) ns. */
        expect_eq_at(d.retry_after, 16666667, "%s", name);
        expect_eq_at(tu_check(st, down, "k2", 1, t + 16666666).allowed, 0, "%s",
                     name);
        expect_eq_at(tu_check(st, down, "k2", 1, t + 16666667).allowed, 1, "%s",
                     name);
    } else if (alg == SL_FIXED_WINDOW || alg == SL_SLIDING_LOG) {
        /* The 80 leave with the window (t is 300 ms into it). */
        expect_eq_at(d.retry_after, alg == SL_FIXED_WINDOW ? 700 * MS : SEC,
                     "%s", name);
    }
    sl_limit_free(down);
    sl_limit_free(base);
}

static void test_example_memory(void **state)
{
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        sl_store *st = tu_store();
        example_on(st, (sl_algorithm)a);
        example_down(st, (sl_algorithm)a);
        sl_store_free(st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_override_numbers),
        cmocka_unit_test(test_base_freed_first),
        cmocka_unit_test(test_example_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
