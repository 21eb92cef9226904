/*
 * test_limit.c - making a limit (validation, with a message naming the bad
 * field and quoting its value; normalised defaults for burst and step),
 * and the small parsers and tables of the API: sl_duration_parse,
 * sl_algorithm_parse / sl_algorithm_name, sl_strerror / sl_err_name.
 */
#include "testutil.h"

/* sl_limit_new must fail with `code` and a message holding every one of
 * the NULL-terminated strings in `want` (the field's name, the value). */
static void expect_invalid(const sl_limit_config *cfg, int code, ...)
{
    sl_limit *lim = NULL;
    char err[256];
    const char *s;
    va_list ap;
    int rc;

    memset(err, 0, sizeof(err));
    rc = sl_limit_new(cfg, &lim, err, sizeof(err));
    if (rc != code)
        fail_msg("sl_limit_new returned %s (%d), expected %s (%d); "
                 "message: '%s'",
                 sl_err_name(rc), rc, sl_err_name(code), code, err);
    if (rc == 0)
        sl_limit_free(lim);
    va_start(ap, code);
    while ((s = va_arg(ap, const char *)) != NULL) {
        if (strstr(err, s) == NULL) {
            va_end(ap);
            fail_msg("message '%s' does not mention '%s'", err, s);
        }
    }
    va_end(ap);
}

static const sl_limit_config *normalised(const sl_limit_config *cfg,
                                         sl_limit **lim)
{
    *lim = tu_limit_cfg(cfg);
    return sl_limit_get_config(*lim);
}

/* ---- validation ---- */

static void test_unknown_algorithm_is_einval(void **state)
{
    sl_limit_config c = {.algorithm = SL_ALGORITHM_COUNT, .limit = 1,
                         .period = SEC};
    (void)state;
    expect_invalid(&c, SL_EINVAL, "algorithm", "'7'", NULL);
    c.algorithm = (sl_algorithm)-1;
    expect_invalid(&c, SL_EINVAL, "algorithm", "'-1'", NULL);
}

static void test_limit_zero_is_erange(void **state)
{
    sl_limit_config c = {.algorithm = SL_FIXED_WINDOW, .limit = 0,
                         .period = SEC};
    (void)state;
    expect_invalid(&c, SL_ERANGE, "limit", "'0'", NULL);
    c.limit = -3;
    expect_invalid(&c, SL_ERANGE, "limit", "'-3'", NULL);
}

static void test_limit_above_max_count_is_erange(void **state)
{
    sl_limit_config c = {.algorithm = SL_TOKEN_BUCKET,
                         .limit = SL_MAX_COUNT + 1, .period = HOUR};
    (void)state;
    expect_invalid(&c, SL_ERANGE, "limit", "'1099511627777'", NULL);
}

static void test_limit_of_max_count_is_accepted(void **state)
{
    sl_limit_config c = {.algorithm = SL_TOKEN_BUCKET, .limit = SL_MAX_COUNT,
                         .period = HOUR};
    sl_limit *lim;
    (void)state;
    expect_eq(normalised(&c, &lim)->limit, SL_MAX_COUNT);
    sl_limit_free(lim);
}

static void test_period_zero_is_erange(void **state)
{
    sl_limit_config c = {.algorithm = SL_SLIDING_LOG, .limit = 5,
                         .period = 0};
    (void)state;
    expect_invalid(&c, SL_ERANGE, "period", "'0'", NULL);
    c.period = -SEC;
    expect_invalid(&c, SL_ERANGE, "period", "'-1000000000'", NULL);
}

static void test_burst_on_window_algorithm_is_einval(void **state)
{
    const sl_algorithm windows[4] = {SL_FIXED_WINDOW, SL_SLIDING_LOG,
                                     SL_SLIDING_WINDOW, SL_STEPPED_WINDOW};
    (void)state;
    for (int i = 0; i < 4; i++) {
        sl_limit_config c = {.algorithm = windows[i], .limit = 5,
                             .period = SEC, .burst = 3};
        expect_invalid(&c, SL_EINVAL, "burst", "'3'", NULL);
    }
}

static void test_burst_out_of_range_is_erange(void **state)
{
    sl_limit_config c = {.algorithm = SL_GCRA, .limit = 5, .period = SEC,
                         .burst = -1};
    (void)state;
    expect_invalid(&c, SL_ERANGE, "burst", "'-1'", NULL);
    c.burst = SL_MAX_COUNT + 1;
    expect_invalid(&c, SL_ERANGE, "burst", "'1099511627777'", NULL);
}

static void test_burst_times_interval_over_2_62_is_erange(void **state)
{
    /* B * P / L = 2^40 * 2^23 ns = 2^63 ns: the bucket would keep a time
     * 292 years ahead. */
    sl_limit_config c = {.algorithm = SL_LEAKY_BUCKET, .limit = 1,
                         .period = INT64_C(1) << 23,
                         .burst = SL_MAX_COUNT};
    (void)state;
    expect_invalid(&c, SL_ERANGE, "burst", NULL);
}

static void test_sliding_window_limit_over_2_32_is_erange(void **state)
{
    sl_limit_config c = {.algorithm = SL_SLIDING_WINDOW,
                         .limit = INT64_C(1) << 32, .period = SEC};
    sl_limit *lim;
    (void)state;
    expect_invalid(&c, SL_ERANGE, "limit", "'4294967296'", NULL);
    c.limit = UINT32_MAX;
    expect_eq(normalised(&c, &lim)->limit, UINT32_MAX);
    sl_limit_free(lim);
}

static void test_step_not_dividing_period_is_einval(void **state)
{
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = 5,
                         .period = SEC, .step = 300 * MS};
    (void)state;
    expect_invalid(&c, SL_EINVAL, "step", "'300000000'", NULL);
    c.step = 2 * SEC; /* longer than the period */
    expect_invalid(&c, SL_EINVAL, "step", "'2000000000'", NULL);
    c.step = -100 * MS;
    expect_invalid(&c, SL_EINVAL, "step", "'-100000000'", NULL);
}

static void test_step_on_other_algorithm_is_einval(void **state)
{
    sl_limit_config c = {.algorithm = SL_FIXED_WINDOW, .limit = 5,
                         .period = SEC, .step = 100 * MS};
    (void)state;
    expect_invalid(&c, SL_EINVAL, "step", "'100000000'", NULL);
}

static void test_log_rejected_flag_on_other_algorithm_is_einval(void **state)
{
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        sl_limit_config c = {.algorithm = (sl_algorithm)a, .limit = 5,
                             .period = SEC, .flags = SL_LOG_REJECTED};
        if (a == SL_SLIDING_LOG)
            continue;
        expect_invalid(&c, SL_EINVAL, "flags", sl_algorithm_name(a), "0x1",
                       NULL);
    }
}

static void test_unknown_flag_is_einval(void **state)
{
    sl_limit_config c = {.algorithm = SL_SLIDING_LOG, .limit = 5,
                         .period = SEC, .flags = SL_LOG_REJECTED | 0x10u};
    (void)state;
    expect_invalid(&c, SL_EINVAL, "flags", "0x11", NULL);
}

static void test_null_errbuf_still_returns_code(void **state)
{
    sl_limit_config c = {.algorithm = SL_FIXED_WINDOW, .limit = 0,
                         .period = SEC};
    sl_limit *lim = NULL;
    (void)state;
    expect_eq(sl_limit_new(&c, &lim, NULL, 0), SL_ERANGE);
    expect_eq(sl_limit_new(&c, &lim, NULL, 64), SL_ERANGE);
}

static void test_short_errbuf_is_truncated_and_terminated(void **state)
{
    sl_limit_config c = {.algorithm = SL_FIXED_WINDOW, .limit = 0,
                         .period = SEC};
    sl_limit *lim = NULL;
    char err[8];
    (void)state;
    memset(err, 'x', sizeof(err));
    expect_eq(sl_limit_new(&c, &lim, err, 6), SL_ERANGE);
    expect_eq(strlen(err), 5);
    expect_eq(memcmp(err, "limit", 5), 0);
    expect_eq(err[6], 'x'); /* nothing written past errlen */
}

/* ---- normalised defaults ---- */

static void test_burst_defaults_to_limit(void **state)
{
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        sl_limit_config c = {.algorithm = (sl_algorithm)a, .limit = 7,
                             .period = MINUTE};
        sl_limit *lim;
        expect_eq(normalised(&c, &lim)->burst, 7);
        sl_limit_free(lim);
    }
}

static void test_burst_equal_to_limit_allowed_on_windows(void **state)
{
    sl_limit_config c = {.algorithm = SL_FIXED_WINDOW, .limit = 7,
                         .period = MINUTE, .burst = 7};
    sl_limit *lim;
    (void)state;
    expect_eq(normalised(&c, &lim)->burst, 7);
    sl_limit_free(lim);
}

static void test_explicit_burst_is_kept(void **state)
{
    sl_limit_config c = {.algorithm = SL_TOKEN_BUCKET, .limit = 7,
                         .period = MINUTE, .burst = 20, .id = 99};
    sl_limit *lim;
    const sl_limit_config *n;
    (void)state;
    n = normalised(&c, &lim);
    expect_eq(n->burst, 20);
    expect_eq(n->limit, 7);
    expect_eq(n->period, MINUTE);
    expect_eq(n->step, 0);
    expect_eq(n->id, 99);
    sl_limit_free(lim);
}

static const struct {
    sl_nanos period, step;
} step_table[] = {
    /* The five examples, then both sides of every boundary. */
    {SEC, 10 * MS},          {30 * SEC, 100 * MS}, {10 * MINUTE, SEC},
    {2 * HOUR, MINUTE},      {2 * DAY, HOUR},      {1, 10 * MS},
    {10 * SEC, 10 * MS},     {10 * SEC + 1, 100 * MS},
    {60 * SEC, 100 * MS},    {60 * SEC + 1, SEC},  {HOUR, SEC},
    {HOUR + 1, MINUTE},      {DAY, MINUTE},        {DAY + 1, HOUR},
    {INT64_MAX, HOUR},
};

static void test_default_step_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(step_table) / sizeof(step_table[0]); i++)
        expect_eq_at(sl_default_step(step_table[i].period),
                     step_table[i].step, "period %lld ns",
                     (long long)step_table[i].period);
}

static void test_default_step_fills_config(void **state)
{
    (void)state;
    for (size_t i = 0; i < 5; i++) {
        sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = 10,
                             .period = step_table[i].period};
        sl_limit *lim;
        expect_eq_at(normalised(&c, &lim)->step, step_table[i].step,
                     "period %lld ns", (long long)c.period);
        sl_limit_free(lim);
    }
}

static void test_default_step_divides_odd_period(void **state)
{
    /* 1500 us: the table says 10 ms, which is longer than the period; the
     * step is gcd(1.5 ms, 10 ms) = 500 us, three steps per window. */
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = 10,
                         .period = 1500 * SL_NS_PER_US};
    sl_limit *lim;
    (void)state;
    expect_eq(normalised(&c, &lim)->step, 500 * SL_NS_PER_US);
    sl_limit_free(lim);
    /* 25 s: table step 100 ms divides it and is kept. */
    c.period = 25 * SEC;
    expect_eq(normalised(&c, &lim)->step, 100 * MS);
    sl_limit_free(lim);
}

static void test_explicit_step_is_kept(void **state)
{
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW, .limit = 10,
                         .period = 4 * SEC, .step = SEC};
    sl_limit *lim;
    (void)state;
    expect_eq(normalised(&c, &lim)->step, SEC);
    sl_limit_free(lim);
    c.step = c.period; /* one step: a fixed window */
    expect_eq(normalised(&c, &lim)->step, 4 * SEC);
    sl_limit_free(lim);
}

static void test_limit_free_null_is_noop(void **state)
{
    (void)state;
    sl_limit_free(NULL);
}

/* ---- sl_duration_parse ---- */

static void expect_duration(const char *text, sl_nanos want)
{
    sl_nanos got = -12345;
    int rc = sl_duration_parse(text, strlen(text), &got);
    if (rc != 0)
        fail_msg("sl_duration_parse('%s') = %s, expected %lld", text,
                 sl_err_name(rc), (long long)want);
    if (got != want)
        fail_msg("sl_duration_parse('%s') = %lld, expected %lld", text,
                 (long long)got, (long long)want);
}

static void expect_duration_error(const char *text, size_t len, int code)
{
    sl_nanos got = -12345;
    int rc = sl_duration_parse(text, len, &got);
    if (rc != code)
        fail_msg("sl_duration_parse('%.*s') = %s (%d), expected %s; "
                 "value %lld",
                 (int)len, text, sl_err_name(rc), rc, sl_err_name(code),
                 (long long)got);
}

static void test_duration_every_unit(void **state)
{
    (void)state;
    expect_duration("7ns", 7);
    expect_duration("7us", 7 * SL_NS_PER_US);
    expect_duration("7ms", 7 * MS);
    expect_duration("7s", 7 * SEC);
    expect_duration("7m", 7 * MINUTE);
    expect_duration("7min", 7 * MINUTE);
    expect_duration("7h", 7 * HOUR);
    expect_duration("7d", 7 * DAY);
}

static void test_duration_plain_nanoseconds(void **state)
{
    (void)state;
    expect_duration("1500", 1500);
    expect_duration("0", 0);
    expect_duration("0s", 0);
    expect_duration("007ms", 7 * MS);
    expect_duration("9223372036854775807", INT64_MAX);
}

static void test_duration_largest_of_each_unit(void **state)
{
    (void)state;
    expect_duration("106751d", INT64_C(106751) * DAY);
    expect_duration("2562047h", INT64_C(2562047) * HOUR);
    expect_duration("9223372036s", INT64_C(9223372036) * SEC);
}

static void test_duration_overflow_is_erange(void **state)
{
    static const char *const too_big[] = {
        "9223372036854775808", "99999999999999999999999", "106752d",
        "2562048h", "153722868m", "9223372037s", "9223372036855ms",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(too_big) / sizeof(too_big[0]); i++)
        expect_duration_error(too_big[i], strlen(too_big[i]), SL_ERANGE);
}

static void test_duration_garbage_is_einval(void **state)
{
    static const char *const bad[] = {
        "",    "s",    "ms",  "1x",  "1.5s", " 1s", "1s ", "-1s", "+1",
        "1 s", "1S",   "1MS", "1sec", "1mins", "1h30m", "0x10", "1e3",
        "d1",  "99999999999999999999x", /* not a duration: the unit first */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_duration_error(bad[i], strlen(bad[i]), SL_EINVAL);
}

static void test_duration_reads_only_len_bytes(void **state)
{
    /* Not NUL-terminated where the length ends: "10s" out of "10sx". */
    const char buf[4] = {'1', '0', 's', 'x'};
    sl_nanos got = 0;
    (void)state;
    expect_eq(sl_duration_parse(buf, 3, &got), 0);
    expect_eq(got, 10 * SEC);
    expect_eq(sl_duration_parse(buf, 2, &got), 0);
    expect_eq(got, 10);
    expect_duration_error(buf, 4, SL_EINVAL);
    expect_duration_error(buf, 0, SL_EINVAL);
}

/* ---- algorithm names ---- */

static void test_algorithm_names(void **state)
{
    static const char *const names[SL_ALGORITHM_COUNT] = {
        [SL_TOKEN_BUCKET] = "token_bucket",
        [SL_GCRA] = "gcra",
        [SL_LEAKY_BUCKET] = "leaky_bucket",
        [SL_FIXED_WINDOW] = "fixed_window",
        [SL_SLIDING_LOG] = "sliding_log",
        [SL_SLIDING_WINDOW] = "sliding_window",
        [SL_STEPPED_WINDOW] = "stepped_window",
    };
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        assert_non_null(sl_algorithm_name((sl_algorithm)a));
        assert_string_equal(sl_algorithm_name((sl_algorithm)a), names[a]);
    }
    assert_null(sl_algorithm_name(SL_ALGORITHM_COUNT));
    assert_null(sl_algorithm_name((sl_algorithm)-1));
}

static void test_algorithm_parse_round_trip(void **state)
{
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        const char *name = sl_algorithm_name((sl_algorithm)a);
        sl_algorithm got = SL_ALGORITHM_COUNT;
        expect_eq(sl_algorithm_parse(name, strlen(name), &got), 0);
        expect_eq(got, a);
    }
}

static void test_algorithm_parse_rejects_near_misses(void **state)
{
    static const char *const bad[] = {
        "",     "gcr",   "gcra ", " gcra", "GCRA", "token", "token_bucket_",
        "token-bucket", "sliding", "window", "leaky_bucket\n",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sl_algorithm got = SL_ALGORITHM_COUNT;
        int rc = sl_algorithm_parse(bad[i], strlen(bad[i]), &got);
        if (rc != SL_EINVAL)
            fail_msg("sl_algorithm_parse('%s') = %d, expected SL_EINVAL",
                     bad[i], rc);
    }
}

static void test_algorithm_parse_reads_only_len_bytes(void **state)
{
    sl_algorithm got = SL_ALGORITHM_COUNT;
    (void)state;
    expect_eq(sl_algorithm_parse("gcra_and_more", 4, &got), 0);
    expect_eq(got, SL_GCRA);
    expect_eq(sl_algorithm_parse("gcra", 3, &got), SL_EINVAL);
}

/* ---- error names and messages ---- */

static void test_error_names_and_messages(void **state)
{
    static const struct {
        int code;
        const char *name, *text;
    } table[] = {
        {SL_OK, "OK", "success"},
        {SL_EINVAL, "EINVAL", "invalid argument"},
        {SL_ENOMEM, "ENOMEM", "out of memory"},
        {SL_ERANGE, "ERANGE", "value out of range"},
        {SL_ECOST, "ECOST", "cost out of range"},
        {SL_EKEYLEN, "EKEYLEN", "key too long"},
        {SL_EFULL, "EFULL",
         "store full: memory cap reached and nothing evictable"},
        {SL_ESTORE, "ESTORE", "store unavailable"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        assert_string_equal(sl_err_name(table[i].code), table[i].name);
        assert_string_equal(sl_strerror(table[i].code), table[i].text);
    }
}

static void test_error_codes_are_distinct_negatives(void **state)
{
    static const int codes[] = {SL_EINVAL, SL_ENOMEM, SL_ERANGE, SL_ECOST,
                                SL_EKEYLEN, SL_EFULL, SL_ESTORE};
    const size_t n = sizeof(codes) / sizeof(codes[0]);
    (void)state;
    for (size_t i = 0; i < n; i++) {
        expect_cmp(codes[i], <, 0);
        for (size_t j = 0; j < i; j++)
            expect_cmp(codes[i], !=, codes[j]);
    }
}

static void test_unknown_error_code(void **state)
{
    static const int unknown[] = {1, -8, -100, INT32_MIN, INT32_MAX};
    (void)state;
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        const char *name = sl_err_name(unknown[i]);
        assert_string_equal(sl_strerror(unknown[i]), "unknown error");
        assert_non_null(name);
        /* Not mistaken for a real code. */
        for (int c = 0; c >= SL_ESTORE; c--)
            assert_string_not_equal(name, sl_err_name(c));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_algorithm_is_einval),
        cmocka_unit_test(test_limit_zero_is_erange),
        cmocka_unit_test(test_limit_above_max_count_is_erange),
        cmocka_unit_test(test_limit_of_max_count_is_accepted),
        cmocka_unit_test(test_period_zero_is_erange),
        cmocka_unit_test(test_burst_on_window_algorithm_is_einval),
        cmocka_unit_test(test_burst_out_of_range_is_erange),
        cmocka_unit_test(test_burst_times_interval_over_2_62_is_erange),
        cmocka_unit_test(test_sliding_window_limit_over_2_32_is_erange),
        cmocka_unit_test(test_step_not_dividing_period_is_einval),
        cmocka_unit_test(test_step_on_other_algorithm_is_einval),
        cmocka_unit_test(test_log_rejected_flag_on_other_algorithm_is_einval),
        cmocka_unit_test(test_unknown_flag_is_einval),
        cmocka_unit_test(test_null_errbuf_still_returns_code),
        cmocka_unit_test(test_short_errbuf_is_truncated_and_terminated),
        cmocka_unit_test(test_burst_defaults_to_limit),
        cmocka_unit_test(test_burst_equal_to_limit_allowed_on_windows),
        cmocka_unit_test(test_explicit_burst_is_kept),
        cmocka_unit_test(test_default_step_table),
        cmocka_unit_test(test_default_step_fills_config),
        cmocka_unit_test(test_default_step_divides_odd_period),
        cmocka_unit_test(test_explicit_step_is_kept),
        cmocka_unit_test(test_limit_free_null_is_noop),
        cmocka_unit_test(test_duration_every_unit),
        cmocka_unit_test(test_duration_plain_nanoseconds),
        cmocka_unit_test(test_duration_largest_of_each_unit),
        cmocka_unit_test(test_duration_overflow_is_erange),
        cmocka_unit_test(test_duration_garbage_is_einval),
        cmocka_unit_test(test_duration_reads_only_len_bytes),
        cmocka_unit_test(test_algorithm_names),
        cmocka_unit_test(test_algorithm_parse_round_trip),
        cmocka_unit_test(test_algorithm_parse_rejects_near_misses),
        cmocka_unit_test(test_algorithm_parse_reads_only_len_bytes),
        cmocka_unit_test(test_error_names_and_messages),
        cmocka_unit_test(test_error_codes_are_distinct_negatives),
        cmocka_unit_test(test_unknown_error_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
