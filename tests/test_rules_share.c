/*
 * test_rules_share.c - envoyproxy/ratelimit's share_threshold and
 * value_to_metric in matching: every value a shared wildcard matches has
 * one counter key, at its level and below it, where a plain wildcard
 * keeps one per value; and ratelimit's metric key for a request
 * (sl__rules_metric_text): the pattern for a shared level, the value for
 * value_to_metric, the pattern for a plain wildcard.
 */
#define _GNU_SOURCE /* memmem */
#include "testutil.h"
#include "rules/rule_daemon.h"
#include "rulesutil.h"

/* sl__rules_metric_text() of a descriptor of domain "d" is want. */
static void expect_metric(const sl_rules *r, const char *desc, int detailed,
                          const char *want)
{
    char text[128];
    size_t len = 0;
    req q;
    parse_req(&q, desc);
    expect_eq(sl__rules_metric_text(r, "d", 1, q.e, q.n, detailed, text,
                                    sizeof(text), &len),
              0);
    if (len != strlen(want) || memcmp(text, want, len) != 0)
        fail_msg("metric text of %s: '%.*s', want '%s'", desc, (int)len, text,
                 want);
}

/* share_threshold: every value a wildcard matches has one counter key
 * (the pattern's), where without it each value has its own. */
static void test_share_threshold_keys(void **state)
{
    (void)state;
    sl_rules *r = rules_of("domain: d\n"
                           "descriptors:\n"
                           "  - key: path\n"
                           "    value: /files/*\n"
                           "    share_threshold: true\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "  - key: path\n"
                           "    value: /own/*\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "  - key: t\n"
                           "    value: a*b*\n"
                           "    share_threshold: true\n"
                           "    descriptors:\n"
                           "      - key: m\n"
                           "        rate_limit: {unit: day, requests_per_unit: 9}\n");
    result a, b;
    expect_eq(match(r, "d", "path=/files/x.pdf", &a), 1);
    expect_eq(match(r, "d", "path=/files/y.csv", &b), 1);
    expect_eq(a.m[0].key_len, b.m[0].key_len);
    expect_eq(memcmp(a.m[0].key, b.m[0].key, a.m[0].key_len), 0);
    assert_non_null(memmem(a.m[0].key, a.m[0].key_len, "8:/files/*", 10));
    expect_eq(match(r, "d", "path=/own/x.pdf", &a), 1);
    expect_eq(match(r, "d", "path=/own/y.csv", &b), 1);
    expect_eq(a.m[0].key_len == b.m[0].key_len &&
                  memcmp(a.m[0].key, b.m[0].key, a.m[0].key_len) == 0,
              0);
    /* A shared level above, its own value below. */
    expect_eq(match(r, "d", "t=a1b2,m=GET", &a), 1);
    expect_eq(match(r, "d", "t=aXXbYY,m=GET", &b), 1);
    expect_eq(memcmp(a.m[0].key, b.m[0].key, a.m[0].key_len), 0);
    expect_eq(match(r, "d", "t=aXXbYY,m=PUT", &b), 1);
    expect_eq(a.m[0].key_len == b.m[0].key_len &&
                  memcmp(a.m[0].key, b.m[0].key, a.m[0].key_len) == 0,
              0);

    /* ratelimit's metric keys: the pattern for a shared level, the
     * value for value_to_metric, the pattern for a plain wildcard. */
    expect_metric(r, "path=/files/x.pdf", 0, "path_/files/*");
    expect_metric(r, "path=/own/x.pdf", 0, "path_/own/*");
    expect_metric(r, "path=/own/x.pdf", 1, "path_/own/x.pdf");
    expect_metric(r, "t=a1b2,m=GET", 0, "t_a*b*.m");
    /* detailed_metric below a shared level: an empty value is the key
     * alone, as ratelimit writes it. */
    expect_metric(r, "t=a1b2,m=", 1, "t_a*b*.m");
    expect_metric(r, "t=a1b2,m=GET", 1, "t_a*b*.m_GET");
    sl_rules_free(r);

    r = rules_of("domain: d\n"
                 "descriptors:\n"
                 "  - key: route\n"
                 "    value_to_metric: true\n"
                 "    descriptors:\n"
                 "      - key: method\n"
                 "        rate_limit: {unit: day, requests_per_unit: 9}\n");
    expect_metric(r, "route=/a,method=GET", 0, "route_/a.method");
    sl_rules_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_threshold_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
