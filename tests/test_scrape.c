/*
 * test_scrape.c - what `sluice advisor` reads of a node
 * (src/adaptive/scrape.c): rule ids from GET /v1/rules (name, else path;
 * #2, #3 for later rules of one label; the rule's own limit, not an
 * override in force) and one counter's series from
 * Prometheus text, label values unescaped.
 */
#include "adaptive/scrape.h"
#include "testutil.h"

static void rule_ids(void **state)
{
    (void)state;
    const char *j =
        "{\"version\":\"v1\",\"rules\":["
        "{\"domain\":\"api\",\"path\":\"api.remote_address\",\"name\":\"\","
        "\"requests_per_unit\":100,\"period_ms\":1000},"
        "{\"domain\":\"api\",\"path\":\"api.user\",\"name\":\"dup\","
        "\"requests_per_unit\":5,\"period_ms\":60000},"
        "{\"domain\":\"b\",\"path\":\"b.user\",\"name\":\"dup\","
        "\"requests_per_unit\":0,\"period_ms\":1000},"
        "{\"domain\":\"c\",\"path\":\"c.k\",\"name\":\"dup\","
        "\"requests_per_unit\":1,\"period_ms\":1000},"
        /* An override in force (179): the base is the rule's 100. */
        "{\"domain\":\"lab\",\"path\":\"lab.generic_key_global\","
        "\"name\":\"global\",\"requests_per_unit\":179,"
        "\"base_requests_per_unit\":100,\"period_ms\":1000}]}";
    as_rules r;
    char err[256];
    assert_int_equal(as_rules_parse(j, strlen(j), &r, err, sizeof(err)), 0);
    assert_string_equal(r.version, "v1");
    assert_int_equal(r.n, 5);
    assert_string_equal(r.rules[0].id, "api.remote_address");
    assert_string_equal(r.rules[0].label, "api.remote_address");
    assert_string_equal(r.rules[1].id, "dup");
    assert_string_equal(r.rules[2].id, "dup#2");
    assert_string_equal(r.rules[2].label, "dup");
    assert_string_equal(r.rules[3].id, "dup#3");
    expect_cmp(r.rules[1].period_ms, ==, 60000);
    expect_cmp(r.rules[1].requests_per_unit, ==, 5);
    expect_cmp(r.rules[4].requests_per_unit, ==, 100);
    as_rules_release(&r);

    static const char *const bad[] = {
        "", "[]", "{\"version\":\"v\"}",
        "{\"version\":\"v\",\"rules\":[{\"domain\":\"a\"}]}",
        "{\"version\":\"v\",\"rules\":[{\"domain\":\"a\",\"path\":\"a.b\","
        "\"name\":\"\",\"requests_per_unit\":-1,\"period_ms\":1}]}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(
            as_rules_parse(bad[i], strlen(bad[i]), &r, err, sizeof(err)), -1);
        assert_null(r.rules);
    }
}

static void counter_series(void **state)
{
    (void)state;
    const char *t =
        "# HELP sluice_rule_hits_total decisions that matched the rule\n"
        "# TYPE sluice_rule_hits_total counter\n"
        "sluice_rule_hits_total{domain=\"lab\",rule=\"z\"} 12\n"
        "sluice_rule_hits_total_other{domain=\"lab\",rule=\"z\"} 99\n"
        "sluice_rule_hits_total{domain=\"lab\",rule=\"a\\\"b\\\\c\","
        "descriptor=\"user_x\\ny\"} 3.5e2\r\n"
        "sluice_rule_within_limit_total{domain=\"lab\",rule=\"z\"} 10\n"
        "sluice_rule_hits_total 7";
    as_metrics m;
    char err[256];
    assert_int_equal(as_metrics_parse(t, strlen(t), "sluice_rule_hits_total",
                                      &m, err, sizeof(err)),
                     0);
    assert_int_equal(m.n, 3);
    const as_series *s = as_metrics_find(&m, "lab", "z", "");
    assert_non_null(s);
    assert_true(s->value == 12);
    s = as_metrics_find(&m, "lab", "a\"b\\c", "user_x\ny");
    assert_non_null(s);
    assert_true(s->value == 350);
    s = as_metrics_find(&m, "", "", "");
    assert_non_null(s);
    assert_true(s->value == 7);
    assert_null(as_metrics_find(&m, "lab", "a", ""));
    as_metrics_release(&m);

    static const char *const bad[] = {
        "sluice_rule_hits_total{domain=\"a\" 1\n",
        "sluice_rule_hits_total{domain=a} 1\n",
        "sluice_rule_hits_total{domain=\"a\"}\n",
        "sluice_rule_hits_total{domain=\"a\"} x\n",
        "sluice_rule_hits_total{domain=\"a\"} NaN\n",
        "sluice_rule_hits_total{domain=\"a\"} 1\n"
        "sluice_rule_hits_total{domain=\"a\"} 2\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (as_metrics_parse(bad[i], strlen(bad[i]), "sluice_rule_hits_total",
                             &m, err, sizeof(err)) != -1)
            fail_msg("accepted: %s", bad[i]);
        assert_null(m.series);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rule_ids),
        cmocka_unit_test(counter_series),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
