/*
 * test_advice.c - the advisor protocol's answer parser and clamp
 * (src/adaptive/advice.c): a valid answer read field by field, then each
 * kind of wrong answer refused with the field named; the clamp's steps,
 * rounding and bounds.
 */
#include "adaptive/advice.h"
#include "testutil.h"

#define GOOD                                                                   \
    "{\"protocol\":\"sluice-advisor/1\",\"computed_at_ms\":1795306693000,"     \
    "\"valid_for_ms\":30000,\"recommendations\":[{\"limit\":"                  \
    "\"lab.generic_key_global\",\"requests_per_unit\":160,\"burst\":32,"       \
    "\"reason\":\"forecast\",\"forecast\":{\"at_ms\":1795306753000,"           \
    "\"yhat\":140,\"upper\":152.5}},{\"limit\":\"per_user#2\","                \
    "\"requests_per_unit\":0}]}"

static void parses_the_example(void **state)
{
    (void)state;
    ad_advice a;
    char err[256] = "";
    assert_int_equal(ad_advice_parse(GOOD, strlen(GOOD), &a, err, sizeof(err)),
                     0);
    expect_cmp(a.computed_at_ms, ==, 1795306693000LL);
    expect_cmp(a.valid_for_ms, ==, 30000);
    assert_int_equal(a.n_recs, 2);
    const ad_recommendation *r = &a.recs[0];
    assert_string_equal(r->limit, "lab.generic_key_global");
    expect_cmp(r->requests_per_unit, ==, 160);
    expect_cmp(r->burst, ==, 32);
    assert_string_equal(r->reason, "forecast");
    assert_true(r->has_forecast);
    expect_cmp(r->forecast_at_ms, ==, 1795306753000LL);
    assert_true(r->forecast_yhat == 140.0);
    assert_true(r->forecast_upper == 152.5);
    r = &a.recs[1];
    assert_string_equal(r->limit, "per_user#2");
    expect_cmp(r->requests_per_unit, ==, 0);
    expect_cmp(r->burst, ==, -1);
    assert_string_equal(r->reason, "");
    assert_false(r->has_forecast);
    ad_advice_release(&a);
    ad_advice_release(&a); /* released twice is harmless */
}

static void empty_and_unknown_keys(void **state)
{
    (void)state;
    const char *j = "{\"recommendations\":[],\"valid_for_ms\":1000,"
                    "\"computed_at_ms\":0,\"protocol\":\"sluice-advisor/1\","
                    "\"later\":{\"x\":[1,2]}}";
    ad_advice a;
    char err[256];
    assert_int_equal(ad_advice_parse(j, strlen(j), &a, err, sizeof(err)), 0);
    assert_int_equal(a.n_recs, 0);
    ad_advice_release(&a);
    /* Not NUL-terminated: only len bytes are read. */
    char buf[512];
    memcpy(buf, GOOD, strlen(GOOD));
    memset(buf + strlen(GOOD), '}', sizeof(buf) - strlen(GOOD));
    assert_int_equal(ad_advice_parse(buf, strlen(GOOD), &a, err, sizeof(err)),
                     0);
    ad_advice_release(&a);
}

/* text (whole answer) must be refused with want in the message. */
static void refuse(const char *text, const char *want)
{
    ad_advice a;
    char err[256] = "";
    int rc = ad_advice_parse(text, strlen(text), &a, err, sizeof(err));
    if (rc != -1 || strstr(err, want) == NULL)
        fail_msg("answer %s: got %d '%s', want -1 and '%s'", text, rc, err,
                 want);
    assert_int_equal(a.n_recs, 0);
    assert_null(a.recs);
}

#define HEAD "{\"protocol\":\"sluice-advisor/1\",\"computed_at_ms\":1,"
#define ONE(rec) HEAD "\"valid_for_ms\":30000,\"recommendations\":[" rec "]}"

static void garbage(void **state)
{
    (void)state;
    refuse("", "invalid JSON");
    refuse("not json", "invalid JSON: 1:");
    refuse("\x00\xff\xfe", "invalid JSON");
    refuse("[1,2]", "answer: must be a JSON object");
    refuse("\"sluice-advisor/1\"", "invalid JSON"); /* jansson: no bare */
    refuse("{\"protocol\":\"sluice-advisor/1\"", "invalid JSON");
    refuse(GOOD "x", "invalid JSON");
    refuse("{\"protocol\":\"a\",\"protocol\":\"b\"}", "duplicate");
}

static void missing_fields(void **state)
{
    (void)state;
    refuse("{}", "protocol: missing");
    refuse("{\"protocol\":\"sluice-advisor/1\"}", "computed_at_ms: missing");
    refuse(HEAD "\"recommendations\":[]}", "valid_for_ms: missing");
    refuse(HEAD "\"valid_for_ms\":30000}", "recommendations: missing");
    refuse(ONE("{\"requests_per_unit\":1}"), "recommendations[0].limit: "
                                             "missing");
    refuse(ONE("{\"limit\":\"a\"}"),
           "recommendations[0].requests_per_unit: missing");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"forecast\":{}}"),
           "recommendations[0].forecast.at_ms: missing");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"forecast\":"
               "{\"at_ms\":1,\"yhat\":2}}"),
           "recommendations[0].forecast.upper: missing");
}

static void wrong_types(void **state)
{
    (void)state;
    refuse("{\"protocol\":1}", "protocol: must be a string");
    refuse("{\"protocol\":\"sluice-advisor/2\"}",
           "protocol: must be 'sluice-advisor/1', not 'sluice-advisor/2'");
    refuse("{\"protocol\":\"\"}", "protocol: must be a string of 1..");
    refuse("{\"protocol\":\"sluice-advisor/1\",\"computed_at_ms\":\"1\"}",
           "computed_at_ms: must be an integer");
    refuse("{\"protocol\":\"sluice-advisor/1\",\"computed_at_ms\":1.5}",
           "computed_at_ms: must be an integer");
    refuse(HEAD "\"valid_for_ms\":30000.0,\"recommendations\":[]}",
           "valid_for_ms: must be an integer");
    refuse(HEAD "\"valid_for_ms\":30000,\"recommendations\":{}}",
           "recommendations: must be an array");
    refuse(HEAD "\"valid_for_ms\":30000,\"recommendations\":null}",
           "recommendations: must be an array");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1},7"),
           "recommendations[1]: must be an object");
    refuse(ONE("{\"limit\":5,\"requests_per_unit\":1}"),
           "recommendations[0].limit: must be a string");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":\"160\"}"),
           "recommendations[0].requests_per_unit: must be an integer");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":160.0}"),
           "recommendations[0].requests_per_unit: must be an integer");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":true}"),
           "recommendations[0].requests_per_unit: must be an integer");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"burst\":null}"),
           "recommendations[0].burst: must be an integer");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"reason\":[]}"),
           "recommendations[0].reason: must be a string");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"forecast\":1}"),
           "recommendations[0].forecast: must be an object");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"forecast\":"
               "{\"at_ms\":1,\"yhat\":\"2\",\"upper\":3}}"),
           "recommendations[0].forecast.yhat: must be a number");
}

static void ranges(void **state)
{
    (void)state;
    refuse(HEAD "\"valid_for_ms\":999,\"recommendations\":[]}",
           "valid_for_ms: 999 is out of range 1000..86400000");
    refuse(HEAD "\"valid_for_ms\":86400001,\"recommendations\":[]}",
           "valid_for_ms: 86400001 is out of range");
    refuse("{\"protocol\":\"sluice-advisor/1\",\"computed_at_ms\":-1}",
           "computed_at_ms: -1 is out of range");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":-1}"),
           "recommendations[0].requests_per_unit: -1 is out of range "
           "0..1099511627776");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1099511627777}"),
           "recommendations[0].requests_per_unit: 1099511627777 is out of "
           "range");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"burst\":-1}"),
           "recommendations[0].burst: -1 is out of range");
    refuse(ONE("{\"limit\":\"\",\"requests_per_unit\":1}"),
           "recommendations[0].limit: must be a string of 1..512 bytes, "
           "not 0");
    /* Beyond int64: jansson refuses the number itself. */
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":"
               "99999999999999999999999}"),
           "invalid JSON");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1,\"forecast\":"
               "{\"at_ms\":1,\"yhat\":1e999,\"upper\":3}}"),
           "invalid JSON");
    refuse(ONE("{\"limit\":\"a\",\"requests_per_unit\":1},"
               "{\"limit\":\"b\",\"requests_per_unit\":1},"
               "{\"limit\":\"a\",\"requests_per_unit\":2}"),
           "recommendations[2].limit: duplicate limit 'a'");
    refuse(ONE("{\"limit\":\"a\\u0000b\",\"requests_per_unit\":1}"),
           "invalid JSON");

    /* The longest id is 512 bytes; the bounds themselves are accepted. */
    char id[600], text[2048];
    memset(id, 'r', sizeof(id));
    id[512] = '\0';
    snprintf(text, sizeof(text),
             ONE("{\"limit\":\"%s\",\"requests_per_unit\":1099511627776,"
                 "\"burst\":0}"),
             id);
    ad_advice a;
    char err[256];
    assert_int_equal(ad_advice_parse(text, strlen(text), &a, err, sizeof(err)),
                     0);
    expect_cmp(a.recs[0].requests_per_unit, ==, (int64_t)1 << 40);
    assert_int_equal(strlen(a.recs[0].limit), 512);
    ad_advice_release(&a);
    id[513] = '\0';
    id[512] = 'r';
    snprintf(text, sizeof(text),
             ONE("{\"limit\":\"%s\",\"requests_per_unit\":1}"), id);
    refuse(text, "recommendations[0].limit: must be a string of 1..512 "
                 "bytes, not 513");
}

/* Text of n recommendations with distinct ids. */
static char *many(size_t n)
{
    size_t cap = 128 + n * 64, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    len += (size_t)snprintf(s, cap,
                            HEAD "\"valid_for_ms\":30000,"
                                 "\"recommendations\":[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"limit\":\"r%zu\",\"requests_per_unit\":"
                                "%zu}",
                                i ? "," : "", i, i);
    snprintf(s + len, cap - len, "]}");
    return s;
}

static void count_cap(void **state)
{
    (void)state;
    char *s = many(AD_MAX_RECOMMENDATIONS);
    ad_advice a;
    char err[256];
    assert_int_equal(ad_advice_parse(s, strlen(s), &a, err, sizeof(err)), 0);
    assert_int_equal(a.n_recs, AD_MAX_RECOMMENDATIONS);
    assert_string_equal(a.recs[9999].limit, "r9999");
    ad_advice_release(&a);
    free(s);
    s = many(AD_MAX_RECOMMENDATIONS + 1);
    refuse(s, "recommendations: 10001 entries, more than the 10000 allowed");
    free(s);
}

static void clamp(void **state)
{
    (void)state;
    /* Within a step and the bounds: as recommended. */
    expect_cmp(ad_clamp(160, 100, 25, 250), ==, 160);
    /* At most twice the limit in force, at least half of it (rounded
     * up). */
    expect_cmp(ad_clamp(1000, 100, 1, 10000), ==, 200);
    expect_cmp(ad_clamp(10, 100, 1, 10000), ==, 50);
    expect_cmp(ad_clamp(0, 101, 0, 10000), ==, 51);
    expect_cmp(ad_clamp(0, 3, 0, 100), ==, 2);
    expect_cmp(ad_clamp(0, 1, 0, 100), ==, 1);
    expect_cmp(ad_clamp(5, 1, 0, 100), ==, 2);
    /* The configured bounds win over the step rule. */
    expect_cmp(ad_clamp(1000, 100, 1, 150), ==, 150);
    expect_cmp(ad_clamp(10, 100, 80, 1000), ==, 80);
    expect_cmp(ad_clamp(10, 10, 30, 1000), ==, 30);
    expect_cmp(ad_clamp(10, 1000, 1, 200), ==, 200);
    /* No limit known: only the bounds. */
    expect_cmp(ad_clamp(1000, 0, 1, 5000), ==, 1000);
    expect_cmp(ad_clamp(1000, -5, 1, 500), ==, 500);
    /* Negative recommendations are 0; min > max: max. */
    expect_cmp(ad_clamp(-7, 0, 0, 100), ==, 0);
    expect_cmp(ad_clamp(50, 0, 100, 10), ==, 10);
    /* Saturation. */
    expect_cmp(ad_clamp(INT64_MAX, INT64_MAX, 0, INT64_MAX), ==, INT64_MAX);
    expect_cmp(ad_clamp(INT64_MAX, INT64_MAX / 2 + 1, 0, INT64_MAX), ==,
               INT64_MAX);
    expect_cmp(ad_clamp(0, INT64_MAX, 0, INT64_MAX), ==, INT64_MAX / 2 + 1);
    expect_cmp(ad_clamp(INT64_MIN, 10, INT64_MIN, INT64_MAX), ==, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_the_example),
        cmocka_unit_test(empty_and_unknown_keys),
        cmocka_unit_test(garbage),
        cmocka_unit_test(missing_fields),
        cmocka_unit_test(wrong_types),
        cmocka_unit_test(ranges),
        cmocka_unit_test(count_cap),
        cmocka_unit_test(clamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
