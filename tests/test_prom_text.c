/*
 * test_prom_text.c - the Prometheus text reader (src/adaptive/prom_text.c):
 * samples by name, comments and blank lines skipped, label values found
 * and unescaped, matchers, NaN and infinities, malformed lines named by
 * their number, and text that is not NUL-terminated.
 */
#include "adaptive/prom_text.h"
#include "testutil.h"

#include <math.h>

static const char text[] =
    "# HELP sluice_rule_hits_total decisions that matched the rule\n"
    "# TYPE sluice_rule_hits_total counter\n"
    "\n"
    "sluice_rule_hits_total{domain=\"lab\",rule=\"z\"} 12\n"
    "sluice_rule_hits_total_other{domain=\"lab\"} 99\n"
    "  sluice_rule_hits_total { rule = \"a\\\"b\\\\c\\n\" , } 3.5e2 "
    "1700000000000\r\n"
    "sluice_rule_hits_total 7";

/* The samples of a name, in order, with their lines. */
static void samples_by_name(void **state)
{
    (void)state;
    pt_reader r;
    pt_sample s;
    pt_reader_init(&r, text, strlen(text));
    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 1);
    expect_eq(s.line, 4);
    assert_true(s.value == 12);
    assert_int_equal(s.name_len, strlen("sluice_rule_hits_total"));
    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 1);
    expect_eq(s.line, 6);
    assert_true(s.value == 350);
    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 1);
    expect_eq(s.line, 7);
    assert_true(s.value == 7);
    assert_int_equal(s.labels_len, 0);
    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 0);
    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 0);

    /* Of any name: the other metric too, comments and blanks never. */
    size_t n = 0;
    pt_reader_init(&r, text, strlen(text));
    while (pt_next(&r, NULL, &s) == 1)
        n++;
    expect_eq(n, 4);

    pt_reader_init(&r, text, strlen(text));
    assert_int_equal(pt_next(&r, "sluice_missing_total", &s), 0);
    pt_reader_init(&r, "", 0);
    assert_int_equal(pt_next(&r, NULL, &s), 0);
}

static void labels_unescaped(void **state)
{
    (void)state;
    pt_reader r;
    pt_sample s;
    const char *v;
    size_t len;
    char out[64];
    pt_reader_init(&r, text, strlen(text));
    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 1);
    assert_int_equal(pt_label(&s, "rule", &v, &len), 1);
    assert_int_equal(len, 1);
    assert_memory_equal(v, "z", 1);
    assert_int_equal(pt_label(&s, "descriptor", &v, &len), 0);
    assert_int_equal(pt_label(&s, "rul", &v, &len), 0);

    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 1);
    assert_int_equal(pt_label(&s, "rule", &v, &len), 1);
    len = pt_unescape(v, len, out);
    assert_int_equal(len, 6);
    assert_memory_equal(out, "a\"b\\c\n", 6);
    assert_int_equal(pt_label(&s, "domain", &v, &len), 0);

    assert_int_equal(pt_next(&r, "sluice_rule_hits_total", &s), 1);
    assert_int_equal(pt_label(&s, "rule", &v, &len), 0);
}

static void find_by_matchers(void **state)
{
    (void)state;
    const char *t =
        "sluice_limit_requests_per_unit{domain=\"lab\",rule=\"global\","
        "limit=\"base\"} 100\n"
        "sluice_limit_requests_per_unit{domain=\"lab\",rule=\"global\\n\","
        "limit=\"effective\"} 1\n"
        "sluice_limit_requests_per_unit{domain=\"lab\",rule=\"glob\","
        "limit=\"effective\"} 2\n"
        "sluice_limit_requests_per_unit{limit=\"effective\",domain=\"lab\","
        "rule=\"global\",source=\"advisor\"} 179\n";
    const pt_matcher global[] = {{"rule", "global"}, {"limit", "effective"}};
    const pt_matcher escaped[] = {{"rule", "global\n"}};
    const pt_matcher none[] = {{"rule", "nothing"}};
    double v = 0;
    size_t len = strlen(t);
    assert_int_equal(
        pt_find(t, len, "sluice_limit_requests_per_unit", global, 2, &v), 1);
    assert_true(v == 179);
    assert_int_equal(
        pt_find(t, len, "sluice_limit_requests_per_unit", escaped, 1, &v), 1);
    assert_true(v == 1);
    assert_int_equal(
        pt_find(t, len, "sluice_limit_requests_per_unit", NULL, 0, &v), 1);
    assert_true(v == 100);
    assert_int_equal(
        pt_find(t, len, "sluice_limit_requests_per_unit", none, 1, &v), 0);
    assert_int_equal(pt_find(t, len, "sluice_missing", NULL, 0, &v), 0);

    const char *broken = "m{a=\"1\"} 1 2 3\nm{a=\"2\"} 5\n";
    const pt_matcher a2[] = {{"a", "2"}};
    assert_int_equal(pt_find(broken, strlen(broken), "m", a2, 1, &v), -1);
}

static void special_values(void **state)
{
    (void)state;
    const char *t = "a +Inf\nb -Inf\nc NaN\nd -0.5e-3\ne 0x10\n";
    pt_reader r;
    pt_sample s;
    pt_reader_init(&r, t, strlen(t));
    assert_int_equal(pt_next(&r, NULL, &s), 1);
    assert_true(isinf(s.value) && s.value > 0);
    assert_int_equal(pt_next(&r, NULL, &s), 1);
    assert_true(isinf(s.value) && s.value < 0);
    assert_int_equal(pt_next(&r, NULL, &s), 1);
    assert_true(isnan(s.value));
    assert_int_equal(pt_next(&r, NULL, &s), 1);
    assert_true(s.value == -0.5e-3);
    assert_int_equal(pt_next(&r, NULL, &s), 1);
    assert_true(s.value == 16);
}

/* Each line is malformed; the reader says which and goes on. */
static void bad_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "m{a=\"1\" 1",          /* no '}' */
        "m{a=1} 1",             /* unquoted */
        "m{a=\"1\"}",           /* no value */
        "m{a=\"1\"}1",          /* no blank before the value */
        "m x",                  /* not a number */
        "m 1x",                 /* not all a number */
        "m nan(1)",             /* strtod's extension */
        "m  \v1",               /* white space strtod would skip */
        "m 1 2 3",              /* more than a timestamp */
        "m 1 1.5",              /* a timestamp not an integer */
        "m{a=\"\\t\"} 1",       /* an escape the format has not */
        "m{a=\"1\\\"} 1",       /* the quote escaped */
        "m{a=\"1\",a=\"2\"} 1", /* a label twice */
        "m{a=\"1\" b=\"2\"} 1", /* no comma */
        "m{,} 1",
        "m{9a=\"1\"} 1",  /* a label name starting with a digit */
        "m{a:b=\"1\"} 1", /* a colon in a label name */
        "9m 1",           /* a metric name starting with a digit */
        "{a=\"1\"} 1",    /* no name */
        "m 1234567890123456789012345678901234567890123456789012345678901234",
    };
    pt_reader r;
    pt_sample s;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char t[256];
        int n = snprintf(t, sizeof(t), "# a comment\n%s\nm 4\n", bad[i]);
        pt_reader_init(&r, t, (size_t)n);
        if (pt_next(&r, NULL, &s) != -1)
            fail_msg("accepted: %s", bad[i]);
        expect_eq(s.line, 2);
        assert_int_equal(pt_next(&r, NULL, &s), 1);
        assert_true(s.value == 4);
    }

    /* PT_MAX_LABELS labels, and one more. */
    char t[2048];
    size_t n = 0;
    for (int i = 0; i <= PT_MAX_LABELS; i++) {
        n += (size_t)snprintf(t + n, sizeof(t) - n, "%sl%d=\"\"",
                              i == 0 ? "m{" : ",", i);
        if (i == PT_MAX_LABELS - 1) {
            memcpy(t + n, "} 1", 3);
            pt_reader_init(&r, t, n + 3);
            assert_int_equal(pt_next(&r, NULL, &s), 1);
        }
    }
    memcpy(t + n, "} 1", 3);
    pt_reader_init(&r, t, n + 3);
    assert_int_equal(pt_next(&r, NULL, &s), -1);
}

/* The text's length is its end: bytes after it are never read, a NUL
 * inside it is a byte like another. */
static void bounded_by_length(void **state)
{
    (void)state;
    const char t[] = "m{a=\"x\"} 12345";
    pt_reader r;
    pt_sample s;
    pt_reader_init(&r, t, strlen(t) - 3);
    assert_int_equal(pt_next(&r, "m", &s), 1);
    assert_true(s.value == 12);

    pt_reader_init(&r, t, 6); /* inside the label value */
    assert_int_equal(pt_next(&r, "m", &s), -1);

    const char nul[] = "m{a=\"x\0y\"} 1\nm 2\0";
    const char *v;
    size_t len;
    pt_reader_init(&r, nul, sizeof(nul) - 1);
    assert_int_equal(pt_next(&r, "m", &s), 1);
    assert_int_equal(pt_label(&s, "a", &v, &len), 1);
    assert_int_equal(len, 3);
    assert_int_equal(pt_next(&r, "m", &s), -1); /* "2\0" */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_by_name),  cmocka_unit_test(labels_unescaped),
        cmocka_unit_test(find_by_matchers), cmocka_unit_test(special_values),
        cmocka_unit_test(bad_lines),        cmocka_unit_test(bounded_by_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
