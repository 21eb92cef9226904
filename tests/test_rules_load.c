/*
 * test_rules_load.c - loading rules: every valid fixture (lyft's README
 * examples unchanged, our extensions, the shipped example config) loads;
 * every invalid fixture fails with exactly the "file:line:column: message"
 * written on its first line ("# expect: ..."); directories, caps, the
 * content version, and the identity of limits across loads.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "testutil.h"
#include "rules/rule_daemon.h"
#include "sluice_rules.h"

/* The source tree, found from this file's path (CMake compiles it by its
 * absolute name), so the test runs from any directory. */
static char srcdir[1024];

static void find_srcdir(void)
{
    const char *f = __FILE__;
    const char *slash = strrchr(f, '/');
    size_t n = slash ? (size_t)(slash - f) : 1;
    if (!slash)
        f = ".";
    snprintf(srcdir, sizeof(srcdir), "%.*s", (int)n, f);
}

static const char *at(const char *rel)
{
    static char buf[4][1280];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof(buf[i]), "%s/%s", srcdir, rel);
    return buf[i];
}

static sl_rules *load_ok(const char *path)
{
    sl_rules *r = NULL;
    char err[1024] = "";
    int rc = sl_rules_load(path, NULL, &r, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s: %s: %s", path, sl_err_name(rc), err);
    assert_non_null(r);
    return r;
}

/* Names of the *.yaml files of a directory, sorted; NULL-terminated. */
static char **list_yaml(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = calloc(256, sizeof(*v));
    *n = 0;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".yaml") == 0 && *n < 255)
            v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < *n; i++)
        for (size_t j = i + 1; j < *n; j++)
            if (strcmp(v[i], v[j]) > 0) {
                char *t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void test_every_valid_fixture_loads(void **state)
{
    size_t n;
    char **v = list_yaml(at("rules/valid"), &n);
    (void)state;
    expect_ge(n, 11);
    for (size_t i = 0; i < n; i++) {
        char path[1536];
        snprintf(path, sizeof(path), "%s/%s", at("rules/valid"), v[i]);
        sl_rules *r = load_ok(path);
        expect_eq(sl_rules_domain_count(r), 1);
        expect_ge(sl_rules_rule_count(r), 1);
        sl_rules_free(r);
    }
    free_list(v, n);
}

static void test_every_invalid_fixture_fails_exactly(void **state)
{
    size_t n;
    char **v = list_yaml(at("rules/invalid"), &n);
    (void)state;
    expect_ge(n, 30);
    for (size_t i = 0; i < n; i++) {
        char path[1536], want[2048], got[1024] = "", line[512] = "";
        sl_rules *r = NULL;
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", at("rules/invalid"), v[i]);
        f = fopen(path, "r");
        assert_non_null(f);
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "# expect: ", 10) != 0)
            fail_msg("%s: first line is not '# expect: ...'", path);
        snprintf(want, sizeof(want), "%s:%s", path, line + 10);
        int rc = sl_rules_load(path, NULL, &r, got, sizeof(got));
        if (rc == 0) {
            sl_rules_free(r);
            fail_msg("%s: loaded, expected '%s'", path, want);
        }
        expect_eq(r == NULL, 1);
        if (rc != SL_EINVAL && rc != SL_ERANGE)
            fail_msg("%s: returned %s", path, sl_err_name(rc));
        if (strcmp(got, want) != 0)
            fail_msg("%s:\n  expected '%s'\n  got      '%s'", v[i], want,
                     got);
    }
    free_list(v, n);
}

static void test_example_config_loads(void **state)
{
    sl_rules *r = load_ok(at("../examples/rules"));
    (void)state;
    expect_eq(sl_rules_domain_count(r), 1);
    assert_string_equal(sl_rules_domain_name(r, 0), "api");
    expect_eq(sl_rules_rule_count(r), 8);
    sl_rules_free(r);
}

static void test_directory_loads_yaml_and_yml_sorted(void **state)
{
    sl_rules *r = load_ok(at("rules/dir_ok"));
    (void)state;
    /* README.txt and .hidden.yaml are skipped. */
    expect_eq(sl_rules_domain_count(r), 2);
    assert_string_equal(sl_rules_domain_name(r, 0), "orders");
    assert_string_equal(sl_rules_domain_name(r, 1), "users");
    /* Rules are listed in file order: 10-users before 20-orders. */
    assert_string_equal(sl_rules_rule(r, 0)->path, "users.user");
    assert_string_equal(sl_rules_rule(r, 1)->path, "orders.order");
    assert_null(sl_rules_rule(r, 2));
    sl_rules_free(r);
}

static void test_duplicate_domain_across_files(void **state)
{
    sl_rules *r = NULL;
    char err[1024], want[2048];
    (void)state;
    expect_eq(sl_rules_load(at("rules/dir_dup"), NULL, &r, err, sizeof(err)),
              SL_EINVAL);
    snprintf(want, sizeof(want),
             "%s/b.yaml:3:9: duplicate domain: 'shared' (first in "
             "%s/a.yaml:1:9)",
             at("rules/dir_dup"), at("rules/dir_dup"));
    assert_string_equal(err, want);
}

static void test_missing_path_is_io_error(void **state)
{
    sl_rules *r = NULL;
    char err[1024];
    (void)state;
    expect_eq(sl_rules_load("/nonexistent/rules.yaml", NULL, &r, err,
                            sizeof(err)),
              SL_EINVAL);
    assert_string_equal(err, "/nonexistent/rules.yaml: cannot open: "
                             "No such file or directory");
}

static void test_file_size_cap(void **state)
{
    sl_rules_options o = {.size = sizeof(sl_rules_options),
                          .max_file_bytes = 64};
    sl_rules *r = NULL;
    char err[1024], want[2048];
    const char *p = at("rules/valid/lyft_example1.yaml");
    (void)state;
    expect_eq(sl_rules_load(p, &o, &r, err, sizeof(err)), SL_ERANGE);
    snprintf(want, sizeof(want),
             "%s:1:1: file too large: '65' bytes (at most 64)", p);
    /* The loader reads one byte past the cap, no more. */
    assert_string_equal(err, want);
}

static void test_descriptor_count_cap(void **state)
{
    sl_rules_options o = {.size = sizeof(sl_rules_options),
                          .max_descriptors = 2};
    sl_rules *r = NULL;
    char err[1024];
    const char *text = "domain: d\ndescriptors:\n  - key: a\n  - key: b\n"
                       "  - key: c\n";
    (void)state;
    expect_eq(sl_rules_load_buffer("m.yaml", text, strlen(text), &o, &r, err,
                                   sizeof(err)),
              SL_ERANGE);
    assert_string_equal(err, "m.yaml:5:5: too many descriptors: '3' (at "
                             "most 2)");
}

static void test_depth_cap_option(void **state)
{
    sl_rules_options o = {.size = sizeof(sl_rules_options), .max_depth = 1};
    sl_rules *r = NULL;
    char err[1024];
    const char *text = "domain: d\ndescriptors:\n  - key: a\n"
                       "    descriptors:\n      - key: b\n";
    (void)state;
    expect_eq(sl_rules_load_buffer("m.yaml", text, strlen(text), &o, &r, err,
                                   sizeof(err)),
              SL_ERANGE);
    assert_string_equal(err, "m.yaml:5:7: descriptors nested too deep: '2' "
                             "levels (at most 1)");
}

static void test_yaml_nesting_cap(void **state)
{
    /* Deep flow nesting anywhere is refused by the YAML reader before any
     * tree is built (a stack-depth guard for hostile input). */
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof(text), "domain: d\nx: ");
    sl_rules *r = NULL;
    char err[1024];
    (void)state;
    for (int i = 0; i < 1000; i++)
        text[n++] = '[';
    expect_eq(sl_rules_load_buffer("deep.yaml", text, n, NULL, &r, err,
                                   sizeof(err)),
              SL_ERANGE);
    assert_string_equal(err, "deep.yaml:2:59: yaml nested too deep: '57' "
                             "levels (at most 56)");
}

static void test_buffer_with_nul_bytes_is_an_error(void **state)
{
    const char text[] = "domain: d\0\ndescriptors: []\n";
    sl_rules *r = NULL;
    char err[1024] = "";
    (void)state;
    assert_int_not_equal(sl_rules_load_buffer("nul.yaml", text,
                                              sizeof(text) - 1, NULL, &r,
                                              err, sizeof(err)),
                         0);
    assert_true(strncmp(err, "nul.yaml:1:", 11) == 0);
}

static void test_version_is_stable_and_tracks_content(void **state)
{
    const char *a = "domain: d\ndescriptors:\n  - key: k\n"
                    "    rate_limit: {unit: second, requests_per_unit: 1}\n";
    const char *b = "domain: d\ndescriptors:\n  - key: k\n"
                    "    rate_limit: {unit: second, requests_per_unit: 2}\n";
    sl_rules *r1, *r2, *r3;
    char err[256];
    (void)state;
    assert_int_equal(sl_rules_load_buffer("x.yaml", a, strlen(a), NULL, &r1,
                                          err, sizeof(err)), 0);
    assert_int_equal(sl_rules_load_buffer("x.yaml", a, strlen(a), NULL, &r2,
                                          err, sizeof(err)), 0);
    assert_int_equal(sl_rules_load_buffer("x.yaml", b, strlen(b), NULL, &r3,
                                          err, sizeof(err)), 0);
    expect_eq(strlen(sl_rules_version(r1)), 16);
    assert_string_equal(sl_rules_version(r1), sl_rules_version(r2));
    assert_string_not_equal(sl_rules_version(r1), sl_rules_version(r3));
    sl_rules_free(r1);
    sl_rules_free(r2);
    sl_rules_free(r3);
}

/* A reload of an unchanged rule must find the same state in the store:
 * decisions through the first load's limit are seen through the second's. */
static void test_identity_survives_reload(void **state)
{
    sl_rules *r1 = load_ok(at("../examples/rules"));
    sl_rules *r2 = load_ok(at("../examples/rules"));
    sl_store *st = tu_store();
    (void)state;
    expect_eq(sl_rules_rule_count(r1), sl_rules_rule_count(r2));
    for (size_t i = 0; i < sl_rules_rule_count(r1); i++) {
        const sl_rule *a = sl_rules_rule(r1, i), *b = sl_rules_rule(r2, i);
        if (a->action != SL_RULE_LIMIT)
            continue;
        assert_ptr_not_equal(a->limit, b->limit);
        expect_eq(sl_limit_get_config(a->limit)->id,
                  sl_limit_get_config(b->limit)->id);
        int64_t L = sl_limit_get_config(a->limit)->burst;
        sl_decision d;
        assert_int_equal(sl_check(st, a->limit, "k", 1, L, 0, &d), 0);
        expect_eq(d.allowed, 1);
        assert_int_equal(sl_check(st, b->limit, "k", 1, 1, 0, &d), 0);
        expect_eq(d.allowed, 0);
    }
    sl_store_free(st);
    sl_rules_free(r1);
    sl_rules_free(r2);
}

/* Limits with equal parameters at different paths keep separate state. */
static void test_identity_differs_by_path_and_domain(void **state)
{
    const char *text = "domain: d\ndescriptors:\n"
                       "  - key: a\n"
                       "    rate_limit: {unit: second, requests_per_unit: 1}\n"
                       "  - key: a\n    value: x\n"
                       "    rate_limit: {unit: second, requests_per_unit: 1}\n";
    const char *text2 = "domain: e\ndescriptors:\n"
                        "  - key: a\n"
                        "    rate_limit: {unit: second, requests_per_unit: 1}\n";
    sl_rules *r, *r2;
    char err[256];
    (void)state;
    assert_int_equal(sl_rules_load_buffer("x.yaml", text, strlen(text), NULL,
                                          &r, err, sizeof(err)), 0);
    assert_int_equal(sl_rules_load_buffer("y.yaml", text2, strlen(text2),
                                          NULL, &r2, err, sizeof(err)), 0);
    uint64_t id0 = sl_limit_get_config(sl_rules_rule(r, 0)->limit)->id;
    uint64_t id1 = sl_limit_get_config(sl_rules_rule(r, 1)->limit)->id;
    uint64_t id2 = sl_limit_get_config(sl_rules_rule(r2, 0)->limit)->id;
    assert_true(id0 != id1);
    assert_true(id0 != id2);
    sl_rules_free(r);
    sl_rules_free(r2);
}

static void test_extensions_resolve(void **state)
{
    sl_rules *r = load_ok(at("rules/valid/extensions.yaml"));
    const sl_rule *x;
    const sl__rule_daemon *d;
    const sl_limit_config *c;
    (void)state;
    expect_eq(sl_rules_rule_count(r), 6);
    x = sl_rules_rule(r, 0);
    c = sl_limit_get_config(x->limit);
    expect_eq(c->algorithm, SL_TOKEN_BUCKET);
    expect_eq(c->limit, 10);
    expect_eq(c->burst, 20);
    expect_eq(c->period, SEC);
    assert_string_equal(x->unit, "second");
    d = sl__rule_daemon_of(r, x);
    expect_eq(d->adaptive_min, 5);
    expect_eq(d->adaptive_max, 40);
    expect_eq(d->adaptive_controller, SL__CONTROLLER_GRADIENT);
    expect_eq(d->adaptive_slo_p99, 300 * MS);
    expect_eq(d->adaptive_season, DAY);
    expect_eq(d->adaptive_horizon, 5 * SEC);
    expect_eq((int64_t)(d->adaptive_raise_step * 1000 + 0.5), 25);
    expect_eq((int64_t)(d->adaptive_raise_max * 100 + 0.5), 20);
    expect_eq((int64_t)(d->adaptive_capacity_share * 100 + 0.5), 85);
    expect_eq((int64_t)(d->adaptive_error_rate * 100 + 0.5), 1);
    expect_eq(d->adaptive_relax_after, MINUTE);
    x = sl_rules_rule(r, 1);
    d = sl__rule_daemon_of(r, x);
    expect_eq(d->adaptive_controller, SL__CONTROLLER_OFF);
    expect_eq(d->adaptive_raise_step, 0); /* the controller's default */
    expect_eq(d->adaptive_max, 0);
    c = sl_limit_get_config(x->limit);
    expect_eq(c->algorithm, SL_FIXED_WINDOW); /* the default, as lyft */
    expect_eq(c->period, HOUR);
    assert_string_equal(x->path, "ext.user");
    x = sl_rules_rule(r, 2);
    assert_null(x->unit);
    expect_eq(x->period, 30 * SEC);
    expect_eq(sl_limit_get_config(x->limit)->algorithm, SL_SLIDING_WINDOW);
    x = sl_rules_rule(r, 3);
    c = sl_limit_get_config(x->limit);
    expect_eq(x->unit_multiplier, 5);
    expect_eq(c->period, 5 * MINUTE);
    expect_eq(c->step, 10 * SEC);
    x = sl_rules_rule(r, 4); /* unit: DAY, case-insensitive as lyft */
    assert_string_equal(x->unit, "day");
    expect_eq(sl__rule_daemon_of(r, x)->store_failure,
              SL__RULE_FAILURE_CLOSED);
    expect_eq(sl__rule_daemon_of(r, sl_rules_rule(r, 0))->store_failure,
              SL__RULE_FAILURE_DEFAULT);
    expect_eq(sl_limit_get_config(x->limit)->algorithm, SL_GCRA);
    x = sl_rules_rule(r, 5); /* value: 500 (an int in YAML) is text */
    assert_string_equal(x->path, "ext.nums_500");
    expect_eq(x->period, 7 * DAY);
    sl_rules_free(r);
}

static void test_lyft_flags_resolve(void **state)
{
    sl_rules *r = load_ok(at("rules/valid/lyft_example5.yaml"));
    (void)state;
    expect_eq(sl_rules_rule(r, 0)->action, SL_RULE_UNLIMITED);
    assert_null(sl_rules_rule(r, 0)->limit);
    expect_eq(sl_rules_rule(r, 1)->action, SL_RULE_LIMIT);
    sl_rules_free(r);
    r = load_ok(at("rules/valid/lyft_example3.yaml"));
    expect_eq(sl_rules_rule(r, 1)->action, SL_RULE_DENY);
    expect_eq(sl_rules_rule(r, 1)->requests_per_unit, 0);
    sl_rules_free(r);
    r = load_ok(at("rules/valid/lyft_example6.yaml"));
    expect_eq(sl_rules_rule(r, 0)->shadow_mode, 1);
    expect_eq(sl_rules_rule(r, 1)->shadow_mode, 0);
    assert_string_equal(sl_rules_rule(r, 0)->path,
                        "example6.service.user_user-a");
    sl_rules_free(r);
    r = load_ok(at("rules/valid/lyft_example7.yaml"));
    assert_string_equal(sl_rules_rule(r, 0)->name, "specific_limit");
    expect_eq(sl_rules_rule(r, 1)->n_replaces, 1);
    assert_string_equal(sl_rules_rule(r, 1)->replaces[0], "specific_limit");
    sl_rules_free(r);
    r = load_ok(at("rules/valid/lyft_example8.yaml"));
    expect_eq(sl__rule_daemon_of(r, sl_rules_rule(r, 0))->detailed_metric, 1);
    expect_eq(sl__rule_daemon_of(r, sl_rules_rule(r, 1))->detailed_metric, 0);
    sl_rules_free(r);
}

/* envoyproxy/ratelimit's newer descriptor keys reach the daemon fields;
 * what it accepts that looks like a mistake is loaded with a warning. */
static void test_ratelimit_keys_resolve(void **state)
{
    (void)state;
    sl_rules *r = load_ok(at("rules/valid/rl_quota_value_to_metric.yaml"));
    const sl__rule_daemon *user = sl__rule_daemon_of(r, sl_rules_rule(r, 0));
    const sl__rule_daemon *route = sl__rule_daemon_of(r, sl_rules_rule(r, 1));
    expect_eq(user->quota_mode, 1);
    expect_eq(user->value_to_metric, 1);
    expect_eq(route->quota_mode, 0);
    expect_eq(route->value_to_metric, 1); /* from the level above */
    expect_eq(sl__rules_warning_count(r), 1);
    assert_non_null(strstr(sl__rules_warning(r, 0),
                           "rl_quota_value_to_metric.yaml:16:17: quota_mode "
                           "has no effect on an unlimited rate_limit"));
    sl_rules_free(r);

    r = load_ok(at("rules/valid/rl_metadata.yaml"));
    const sl__meta *m = sl__rule_daemon_of(r, sl_rules_rule(r, 0))->metadata;
    assert_non_null(m);
    expect_eq(m->kind, SL__META_STRUCT);
    expect_eq(m->n, 7);
    assert_string_equal(m->kids[0].name, "tier");
    assert_string_equal(m->kids[0].text, "gold");
    expect_eq(m->kids[1].kind, SL__META_NUMBER);
    expect_eq(m->kids[1].number == 2.5, 1);
    expect_eq(m->kids[3].kind, SL__META_BOOL);
    expect_eq(m->kids[4].kind, SL__META_NULL);
    expect_eq(m->kids[5].kind, SL__META_LIST);
    expect_eq(m->kids[5].n, 2);
    expect_eq(m->kids[6].kind, SL__META_STRUCT);
    expect_eq(m->kids[6].kids[1].kind, SL__META_STRING); /* "yes" quoted */
    assert_null(sl__rule_daemon_of(r, sl_rules_rule(r, 1))->metadata);
    sl_rules_free(r);

    /* share_threshold beside a '*' in the key only: no effect, as in
     * ratelimit; each counts on its own exact key and value. */
    r = load_ok(at("rules/valid/rl_share_star_key.yaml"));
    expect_eq(sl__rules_warning_count(r), 2);
    assert_non_null(strstr(sl__rules_warning(r, 0),
                           ":9:22: share_threshold has no effect"));
    expect_eq(sl_rules_rule_count(r), 2);
    sl_rules_free(r);

    r = load_ok(at("rules/valid/rl_lenient.yaml"));
    expect_eq(sl__rules_warning_count(r), 4);
    expect_eq(sl_rules_rule(r, 1)->action, SL_RULE_DENY);
    expect_eq(sl_rules_rule(r, 2)->action, SL_RULE_UNLIMITED);
    assert_non_null(strstr(sl__rules_warning(r, 0),
                           ":8:5: key ignored at this place: 'unit'"));
    assert_non_null(strstr(sl__rules_warning(r, 2),
                           ":11:17: missing requests_per_unit"));
    sl_rules_free(r);
}

static void test_free_null_is_noop(void **state)
{
    (void)state;
    sl_rules_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_valid_fixture_loads),
        cmocka_unit_test(test_every_invalid_fixture_fails_exactly),
        cmocka_unit_test(test_example_config_loads),
        cmocka_unit_test(test_directory_loads_yaml_and_yml_sorted),
        cmocka_unit_test(test_duplicate_domain_across_files),
        cmocka_unit_test(test_missing_path_is_io_error),
        cmocka_unit_test(test_file_size_cap),
        cmocka_unit_test(test_descriptor_count_cap),
        cmocka_unit_test(test_depth_cap_option),
        cmocka_unit_test(test_yaml_nesting_cap),
        cmocka_unit_test(test_buffer_with_nul_bytes_is_an_error),
        cmocka_unit_test(test_version_is_stable_and_tracks_content),
        cmocka_unit_test(test_identity_survives_reload),
        cmocka_unit_test(test_identity_differs_by_path_and_domain),
        cmocka_unit_test(test_extensions_resolve),
        cmocka_unit_test(test_lyft_flags_resolve),
        cmocka_unit_test(test_ratelimit_keys_resolve),
        cmocka_unit_test(test_free_null_is_noop),
    };
    find_srcdir();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
