/*
 * test_serve_buf.c - the server's decision answers are written by hand
 * (src/runtime/buf.c) instead of dumped by jansson: these tests hold the
 * hand-written strings and integers to jansson's compact output and
 * printf's, byte for byte, so the bytes on the wire stay what they were;
 * and the durations they carry are rounded without overflow.
 */
#include <limits.h>

#include <jansson.h>

#include "runtime/decide.h"
#include "http/respond.h"
#include "testutil.h"

/* s (len bytes) as sv_buf_add_json_string writes it and as jansson
 * dumps it must be the same text. */
static void expect_as_jansson(const char *s, size_t len)
{
    sv_buf b = {0};
    sv_buf_add_json_string(&b, s, len);
    json_t *j = json_stringn(s, len);
    assert_non_null(j);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(want);
    assert_false(b.failed);
    assert_string_equal(b.data, want);
    free(want);
    json_decref(j);
    sv_buf_release(&b);
}

static void json_string_every_ascii_byte(void **state)
{
    (void)state;
    for (int c = 0; c < 0x80; c++) {
        char s[3] = {'a', (char)c, 'z'};
        expect_as_jansson(s, sizeof(s));
    }
}

static void json_string_utf8_and_runs(void **state)
{
    (void)state;
    static const char *cases[] = {
        "",
        "per_user",
        "q\"b\\s/t\tn\x01\x7f",
        "\xc3\xa9\xe2\x98\x83\xf0\x9d\x84\x9e",
        "\"\"\\\\\n\n",
        "plain run, then an escape at the end\x1f",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_as_jansson(cases[i], strlen(cases[i]));
}

/* v as sv_buf_add_int writes it and as printf does must be the same. */
static void expect_int(long long v)
{
    char want[32];
    snprintf(want, sizeof(want), "%lld", v);
    sv_buf b = {0};
    sv_buf_add_int(&b, v);
    assert_string_equal(b.data, want);
    sv_buf_release(&b);
}

static void expect_uint(unsigned long long v)
{
    char want[32];
    snprintf(want, sizeof(want), "%llu", v);
    sv_buf b = {0};
    sv_buf_add_uint(&b, v);
    assert_string_equal(b.data, want);
    sv_buf_release(&b);
}

static void add_int_as_printf(void **state)
{
    (void)state;
    static const long long cases[] = {LLONG_MAX, LLONG_MIN, -LLONG_MAX};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_int(cases[i]);
    /* Every value of at most five digits, then the powers of ten and
     * their neighbours. */
    for (long long v = -100000; v <= 100000; v++)
        expect_int(v);
    for (long long p = 100000; p <= LLONG_MAX / 10; p *= 10) {
        expect_int(p - 1);
        expect_int(p);
        expect_int(-p - 1);
    }
}

static void add_uint_as_printf(void **state)
{
    (void)state;
    unsigned long long v = 1;
    for (int i = 0; i < 20; i++, v *= 10) {
        expect_uint(v - 1);
        expect_uint(v);
        expect_uint(v + 1);
        expect_uint(ULLONG_MAX - v);
    }
}

/* The IETF fields quote the rule's label as a Structured Field String:
 * '"' and '\\' escaped, bytes outside printable ASCII left out. */
static void rate_headers_quote_the_label(void **state)
{
    (void)state;
    sl_rule rule = {.domain = "d",
                    .path = "d.k",
                    .name = "a \"b\" \\c\x01\xc3\xa9"
                            "d",
                    .action = SL_RULE_LIMIT,
                    .period = 60 * SL_NS_PER_SEC};
    sv_buf sf = {0};
    sv_buf_add_sf_string(&sf, sv_rule_label(&rule));
    assert_string_equal(sf.data, "\"a \\\"b\\\" \\\\cd\"");
    sv_rule_text text = {.sf = sf.data, .sf_len = sf.len};
    sv_dec_status st = {
        .rule = &rule,
        .text = &text,
        .d = {.limit = 5, .remaining = 2, .reset_after = 1500 * SL_NS_PER_MS}};
    sv_dec_result res = {.closest = &st, .status = &st};
    sv_buf b = {0};
    sv_rate_headers(&res, &b);
    assert_string_equal(b.data,
                        "X-RateLimit-Limit: 5\r\n"
                        "X-RateLimit-Remaining: 2\r\n"
                        "X-RateLimit-Reset: 2\r\n"
                        "RateLimit-Policy: \"a \\\"b\\\" \\\\cd\";q=5;w=60\r\n"
                        "RateLimit: \"a \\\"b\\\" \\\\cd\";r=2;t=2\r\n");
    sv_buf_release(&b);
    sv_buf_release(&sf);
}

/* The 429 is written with its body's length counted beforehand: the
 * Content-Length must be the body's, whatever the label and the wait. */
static void limited_body_length_is_counted(void **state)
{
    (void)state;
    static const struct {
        const char *json; /* the label as JSON chars */
        sl_nanos retry_after;
        const char *body;
    } cases[] = {
        {"a \\\"b\\\"", 1,
         "{\"error\":{\"code\":\"rate_limited\",\"message\":"
         "\"rate limit exceeded: a \\\"b\\\"\",\"retry_after_ms\":1}}\n"},
        {"k", 12345678 * SL_NS_PER_MS,
         "{\"error\":{\"code\":\"rate_limited\",\"message\":"
         "\"rate limit exceeded: k\",\"retry_after_ms\":12345678}}\n"},
        {"never", -1,
         "{\"error\":{\"code\":\"rate_limited\",\"message\":"
         "\"rate limit exceeded: never\",\"retry_after_ms\":null}}\n"},
        {NULL, 0,
         "{\"error\":{\"code\":\"rate_limited\",\"message\":"
         "\"rate limit exceeded: denied\",\"retry_after_ms\":null}}\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sl_rule rule = {.domain = "d", .path = "d.k", .name = ""};
        sv_rule_text text = {.json = (char *)cases[i].json,
                             .json_len =
                                 cases[i].json ? strlen(cases[i].json) : 0};
        sv_dec_status st = {.rule = &rule,
                            .text = &text,
                            .d = {.retry_after = cases[i].retry_after}};
        sv_dec_result res = {
            .over = 1, .closest = cases[i].json ? &st : NULL, .status = &st};
        static const char rate[] = "Retry-After: 1\r\n";
        sv_buf out = {0};
        sv_respond_limited(&res, rate, sizeof(rate) - 1, 0, &out, 1);
        char want[512];
        snprintf(want, sizeof(want),
                 "HTTP/1.1 429 Too Many Requests\r\n"
                 "Content-Type: application/json\r\n"
                 "Content-Length: %zu\r\n"
                 "Connection: keep-alive\r\n"
                 "%s\r\n%s",
                 strlen(cases[i].body), rate, cases[i].body);
        assert_string_equal(out.data, want);
        sv_buf_release(&out);
    }
}

/* Durations round up to ms and s for the headers and bodies, without
 * overflow however far a store's reply puts them (a reset of INT64_MAX
 * ns from Redis overflowed ns + 999999). */
static void durations_round_up_without_overflow(void **state)
{
    (void)state;
    expect_eq(sv_ms_up(-1), -1);
    expect_eq(sv_ms_up(0), 0);
    expect_eq(sv_ms_up(1), 1);
    expect_eq(sv_ms_up(SL_NS_PER_MS), 1);
    expect_eq(sv_ms_up(SL_NS_PER_MS + 1), 2);
    expect_eq(sv_ms_up(INT64_MAX), INT64_MAX / SL_NS_PER_MS + 1);
    expect_eq(sv_sec_up(-5), 0);
    expect_eq(sv_sec_up(0), 0);
    expect_eq(sv_sec_up(1), 1);
    expect_eq(sv_sec_up(SL_NS_PER_SEC), 1);
    expect_eq(sv_sec_up(SL_NS_PER_SEC + 1), 2);
    expect_eq(sv_sec_up(INT64_MAX), INT64_MAX / SL_NS_PER_SEC + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_string_every_ascii_byte),
        cmocka_unit_test(json_string_utf8_and_runs),
        cmocka_unit_test(add_int_as_printf),
        cmocka_unit_test(add_uint_as_printf),
        cmocka_unit_test(rate_headers_quote_the_label),
        cmocka_unit_test(limited_body_length_is_counted),
        cmocka_unit_test(durations_round_up_without_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
