/*
 * test_rules_match.c - which rules apply to a request descriptor: lyft's
 * order (exact, wildcard, key only), globs (a '*' anywhere), the
 * last-entry rule, nested descriptors, counter keys per distinct value,
 * several limits per node, unknown domains, and `replaces` across a
 * request's descriptors.
 */
#include "testutil.h"
#include "rules/rule_daemon.h"
#include "sluice_rules.h"

#include "rulesutil.h"

/* The single rule matched, or NULL for none. */
static const sl_rule *matched(const sl_rules *r, const char *domain,
                              const char *desc)
{
    static result res;
    size_t n = match(r, domain, desc, &res);
    if (n == 0)
        return NULL;
    expect_eq(n, 1);
    return res.m[0].rule;
}

/* Its path, or its name, or "-" for none. */
static const char *matched_path(const sl_rules *r, const char *domain,
                                const char *desc)
{
    const sl_rule *rule = matched(r, domain, desc);
    return rule ? rule->path : "-";
}

static const char *matched_name(const sl_rules *r, const char *domain,
                                const char *desc)
{
    const sl_rule *rule = matched(r, domain, desc);
    return rule ? rule->name : "-";
}

static const char *example3 =
    "domain: edge_proxy_per_ip\n"
    "descriptors:\n"
    "  - key: remote_address\n"
    "    rate_limit: {unit: second, requests_per_unit: 10}\n"
    "  - key: remote_address\n"
    "    value: 50.0.0.*\n"
    "    rate_limit: {unit: second, requests_per_unit: 5}\n"
    "  - key: remote_address\n"
    "    value: 50.0.0.5\n"
    "    rate_limit: {unit: second, requests_per_unit: 0}\n";

static void test_exact_then_wildcard_then_key_only(void **state)
{
    sl_rules *r = rules_of(example3);
    (void)state;
    /* The exact value wins although it comes last in the file. */
    assert_string_equal(matched_path(r, "edge_proxy_per_ip",
                                     "remote_address=50.0.0.5"),
                        "edge_proxy_per_ip.remote_address_50.0.0.5");
    assert_string_equal(matched_path(r, "edge_proxy_per_ip",
                                     "remote_address=50.0.0.6"),
                        "edge_proxy_per_ip.remote_address_50.0.0.*");
    assert_string_equal(matched_path(r, "edge_proxy_per_ip",
                                     "remote_address=10.0.0.1"),
                        "edge_proxy_per_ip.remote_address");
    sl_rules_free(r);
}

static void test_deny_rule_matches_as_deny(void **state)
{
    sl_rules *r = rules_of(example3);
    result res;
    (void)state;
    expect_eq(match(r, "edge_proxy_per_ip", "remote_address=50.0.0.5", &res),
              1);
    expect_eq(res.m[0].rule->action, SL_RULE_DENY);
    assert_null(res.m[0].rule->limit);
    sl_rules_free(r);
}

static void test_first_wildcard_in_file_order(void **state)
{
    sl_rules *r = rules_of("domain: d\ndescriptors:\n"
                           "  - {key: p, value: 'ab*', rate_limit: "
                           "{unit: second, requests_per_unit: 1}}\n"
                           "  - {key: p, value: 'abc*', rate_limit: "
                           "{unit: second, requests_per_unit: 2}}\n"
                           "  - {key: p, value: '*', rate_limit: "
                           "{unit: second, requests_per_unit: 3}}\n");
    (void)state;
    /* Not the longest prefix: the first in the file, as lyft. */
    assert_string_equal(matched_path(r, "d", "p=abcd"), "d.p_ab*");
    assert_string_equal(matched_path(r, "d", "p=ab"), "d.p_ab*");
    assert_string_equal(matched_path(r, "d", "p=a"), "d.p_*");
    assert_string_equal(matched_path(r, "d", "p="), "d.p_*");
    assert_string_equal(matched_path(r, "d", "q=abc"), "-");
    sl_rules_free(r);
}

/* A '*' anywhere in a value (extension): each one any run of bytes. */
static const char *globs =
    "domain: d\ndescriptors:\n"
    "  - {key: path, value: '/v1/*/download', rate_limit: "
    "{name: download, unit: second, requests_per_unit: 1}}\n"
    "  - {key: path, value: '/v1/*/files/*/raw*', rate_limit: "
    "{name: raw, unit: second, requests_per_unit: 2}}\n"
    "  - {key: path, value: '*.png', rate_limit: "
    "{name: png, unit: second, requests_per_unit: 3}}\n"
    "  - {key: path, value: '/v1/**x', rate_limit: "
    "{name: double_star, unit: second, requests_per_unit: 4}}\n"
    "  - {key: path, value: '/v1/public/download', rate_limit: "
    "{name: exact, unit: second, requests_per_unit: 5}}\n"
    "  - {key: path, rate_limit: "
    "{name: any_path, unit: second, requests_per_unit: 6}}\n";

static void test_glob_star_in_the_middle(void **state)
{
    sl_rules *r = rules_of(globs);
    (void)state;
    assert_string_equal(matched_name(r, "d", "path=/v1/42/download"),
                        "download");
    /* A star matches any run, '/' included, and the empty run. */
    assert_string_equal(matched_name(r, "d", "path=/v1/a/b/download"),
                        "download");
    assert_string_equal(matched_name(r, "d", "path=/v1//download"), "download");
    /* The literal bytes around the star must all be there: these fall
     * through to the key-only rule. */
    assert_string_equal(matched_name(r, "d", "path=/v1/42/downloads"),
                        "any_path");
    assert_string_equal(matched_name(r, "d", "path=/v2/42/download"),
                        "any_path");
    assert_string_equal(matched_name(r, "d", "path=/v1/download"), "any_path");
    sl_rules_free(r);
}

static void test_glob_several_stars(void **state)
{
    sl_rules *r = rules_of(globs);
    (void)state;
    assert_string_equal(matched_name(r, "d", "path=/v1/a/files/b/raw"), "raw");
    assert_string_equal(matched_name(r, "d", "path=/v1/a/files/b/c/raw.txt"),
                        "raw");
    /* Greedy leftmost: the first "/files/" is taken, the raw after it
     * still found. */
    assert_string_equal(
        matched_name(r, "d", "path=/v1/files/files/x/files/y/raw"), "raw");
    /* Segments out of order do not match. */
    assert_string_equal(matched_name(r, "d", "path=/v1/a/raw/b/files/"),
                        "any_path");
    sl_rules_free(r);
}

static void test_glob_star_at_start_and_empty_segments(void **state)
{
    sl_rules *r = rules_of(globs);
    (void)state;
    /* A leading star: a suffix match. */
    assert_string_equal(matched_name(r, "d", "path=/img/logo.png"), "png");
    assert_string_equal(matched_name(r, "d", "path=.png"), "png");
    assert_string_equal(matched_name(r, "d", "path=/img/logo.png.gz"),
                        "any_path");
    /* "**" is one star: an empty segment between them matches nothing
     * in particular. */
    assert_string_equal(matched_name(r, "d", "path=/v1/x"), "double_star");
    assert_string_equal(matched_name(r, "d", "path=/v1/abcx"), "double_star");
    /* Head and tail may not overlap: "/v1/" then "x" needs 5 bytes. */
    assert_string_equal(matched_name(r, "d", "path=/v1x"), "any_path");
    sl_rules_free(r);
}

static void test_glob_exact_value_first(void **state)
{
    sl_rules *r = rules_of(globs);
    (void)state;
    /* As lyft orders them: the exact value before any wildcard, though
     * the glob that also fits it comes first in the file. */
    assert_string_equal(matched_name(r, "d", "path=/v1/public/download"),
                        "exact");
    sl_rules_free(r);
}

static void test_glob_and_prefix_in_file_order(void **state)
{
    sl_rules *r = rules_of("domain: d\ndescriptors:\n"
                           "  - {key: p, value: 'a*c', rate_limit: "
                           "{name: glob, unit: second, requests_per_unit: 1}}\n"
                           "  - {key: p, value: 'ab*', rate_limit: "
                           "{name: prefix, unit: second, "
                           "requests_per_unit: 2}}\n");
    (void)state;
    /* Globs and lyft's prefixes are wildcards alike: the first that
     * matches in file order wins. */
    assert_string_equal(matched_name(r, "d", "p=abc"), "glob");
    assert_string_equal(matched_name(r, "d", "p=abd"), "prefix");
    assert_string_equal(matched_name(r, "d", "p=xbc"), "-");
    sl_rules_free(r);
    /* The same glob twice at one level is a duplicate, as lyft's
     * composite keys would be. */
    static const char dup[] = "domain: d\ndescriptors:\n"
                              "  - {key: p, value: 'a*c'}\n"
                              "  - {key: p, value: 'a*c'}\n";
    char err[256] = "";
    r = NULL;
    expect_eq(sl_rules_load_buffer("t.yaml", dup, sizeof(dup) - 1, NULL, &r,
                                   err, sizeof(err)),
              SL_EINVAL);
    assert_string_equal(err, "t.yaml:4:5: duplicate descriptor: 'd.p_a*c'");
}

static void test_glob_value_with_nul_and_long_value(void **state)
{
    sl_rules *r = rules_of(globs);
    result res;
    (void)state;
    /* Bytes, not C strings: a NUL in the middle run is fine. */
    static const char v[] = "/v1/a\0b/download";
    sl_rules_entry e = {"path", 4, v, sizeof(v) - 1};
    assert_int_equal(sl_rules_match(r, "d", 1, &e, 1, 0, res.m,
                                    SL_RULES_MAX_LIMITS_PER_NODE, &res.n,
                                    res.key, sizeof(res.key)),
                     0);
    expect_eq(res.n, 1);
    assert_string_equal(res.m[0].rule->name, "download");
    sl_rules_free(r);
    /* A long value that almost matches a pattern of many stars: one pass
     * (a backtracking matcher tries each split of the value among the
     * stars, and would not finish). */
    r = rules_of("domain: d\ndescriptors:\n"
                 "  - {key: k, value: '*a*a*a*a*a*a*a*a*a*a*b', rate_limit: "
                 "{unit: second, requests_per_unit: 1}}\n");
    size_t len = 1 << 20;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, 'a', len);
    e = (sl_rules_entry){"k", 1, big, len};
    assert_int_equal(sl_rules_match(r, "d", 1, &e, 1, 0, res.m,
                                    SL_RULES_MAX_LIMITS_PER_NODE, &res.n,
                                    res.key, sizeof(res.key)),
                     0);
    expect_eq(res.n, 0);
    big[len - 1] = 'b';
    assert_int_equal(sl_rules_match(r, "d", 1, &e, 1, 0, res.m,
                                    SL_RULES_MAX_LIMITS_PER_NODE, &res.n,
                                    res.key, sizeof(res.key)),
                     SL_EKEYLEN); /* matched: its key does not fit res.key */
    free(big);
    sl_rules_free(r);
}

/* The reference: a glob by dynamic programming over every split, slow
 * and plainly right. */
static int glob_reference(const char *p, const char *v)
{
    size_t pl = strlen(p), vl = strlen(v);
    unsigned char ok[16][16] = {{0}}; /* ok[i][j]: p[i..] matches v[j..] */
    assert_true(pl < 16 && vl < 16);
    ok[pl][vl] = 1;
    for (size_t i = pl; i-- > 0;)
        for (size_t j = vl + 1; j-- > 0;)
            ok[i][j] = p[i] == '*' ? ok[i + 1][j] || (j < vl && ok[i][j + 1])
                                   : j < vl && p[i] == v[j] && ok[i + 1][j + 1];
    return ok[0][0];
}

static void test_glob_against_a_reference(void **state)
{
    /* Random patterns over {a, b, *} and values over {a, b}: the linear
     * matcher agrees with the reference on every pair (exact values and
     * prefixes are globs too, of no star and one trailing star). */
    uint64_t seed = 13;
    (void)state;
    for (int t = 0; t < 400; t++) {
        char pat[12], text[256];
        size_t pl = (size_t)tu_range(&seed, 1, sizeof(pat) - 1);
        for (size_t i = 0; i < pl; i++)
            pat[i] = "ab*"[tu_below(&seed, 3)];
        pat[pl] = '\0';
        snprintf(text, sizeof(text),
                 "domain: d\ndescriptors:\n  - {key: k, value: '%s', "
                 "rate_limit: {unit: second, requests_per_unit: 1}}\n",
                 pat);
        sl_rules *r = rules_of(text);
        for (int u = 0; u < 40; u++) {
            char desc[32] = "k=", *v = desc + 2;
            size_t vl = (size_t)tu_below(&seed, 12);
            for (size_t i = 0; i < vl; i++)
                v[i] = "ab"[tu_below(&seed, 2)];
            v[vl] = '\0';
            result res;
            if (match(r, "d", desc, &res) != (size_t)glob_reference(pat, v))
                fail_msg("pattern '%s', value '%s': matched %zu, reference "
                         "%d",
                         pat, v, res.n, glob_reference(pat, v));
        }
        sl_rules_free(r);
    }
}

static void test_glob_counts_each_value_apart(void **state)
{
    sl_rules *r = rules_of(globs);
    result a, b;
    (void)state;
    expect_eq(match(r, "d", "path=/v1/1/download", &a), 1);
    expect_eq(match(r, "d", "path=/v1/2/download", &b), 1);
    assert_ptr_equal(a.m[0].rule, b.m[0].rule);
    /* As lyft's prefix wildcards: one counter per distinct value. */
    assert_false(a.m[0].key_len == b.m[0].key_len &&
                 memcmp(a.m[0].key, b.m[0].key, a.m[0].key_len) == 0);
    sl_rules_free(r);
}

static const char *example2 =
    "domain: messaging\n"
    "descriptors:\n"
    "  - key: message_type\n"
    "    value: marketing\n"
    "    descriptors:\n"
    "      - key: to_number\n"
    "        rate_limit: {unit: day, requests_per_unit: 5}\n"
    "  - key: to_number\n"
    "    rate_limit: {unit: day, requests_per_unit: 100}\n";

static void test_nested_descriptors(void **state)
{
    sl_rules *r = rules_of(example2);
    (void)state;
    assert_string_equal(matched_path(r, "messaging",
                                     "message_type=marketing,to_number=206"),
                        "messaging.message_type_marketing.to_number");
    assert_string_equal(matched_path(r, "messaging", "to_number=206"),
                        "messaging.to_number");
    /* Another message type has no nested rules. */
    assert_string_equal(matched_path(r, "messaging",
                                     "message_type=other,to_number=206"),
                        "-");
    sl_rules_free(r);
}

static void test_limit_applies_only_at_last_entry(void **state)
{
    sl_rules *r = rules_of("domain: example4\ndescriptors:\n"
                           "  - key: key\n    value: value\n"
                           "    rate_limit: {unit: second, "
                           "requests_per_unit: 300}\n");
    (void)state;
    assert_string_equal(matched_path(r, "example4", "key=value"),
                        "example4.key_value");
    /* lyft's example 4: a deeper request does not match a shallower rule. */
    assert_string_equal(matched_path(r, "example4",
                                     "key=value,subkey=subvalue"),
                        "-");
    sl_rules_free(r);
    r = rules_of(example2);
    /* A shorter request does not match a deeper rule either. */
    assert_string_equal(matched_path(r, "messaging", "message_type=marketing"),
                        "-");
    sl_rules_free(r);
}

static void test_no_backtracking_from_exact_to_key_only(void **state)
{
    /* lyft picks one node per level and never revisits the choice: the
     * exact entry has no children, so the key-only one is not tried. */
    sl_rules *r = rules_of("domain: d\ndescriptors:\n"
                           "  - key: a\n    value: x\n"
                           "    rate_limit: {unit: second, "
                           "requests_per_unit: 1}\n"
                           "  - key: a\n    descriptors:\n"
                           "      - key: b\n        rate_limit: {unit: "
                           "second, requests_per_unit: 2}\n");
    (void)state;
    assert_string_equal(matched_path(r, "d", "a=y,b=1"), "d.a.b");
    assert_string_equal(matched_path(r, "d", "a=x,b=1"), "-");
    sl_rules_free(r);
}

static void test_distinct_counter_keys_per_value(void **state)
{
    sl_rules *r = rules_of(example2);
    result a, b, c;
    (void)state;
    match(r, "messaging", "to_number=2061111111", &a);
    match(r, "messaging", "to_number=2062222222", &b);
    match(r, "messaging", "to_number=2061111111", &c);
    assert_ptr_equal(a.m[0].rule, b.m[0].rule);
    assert_false(a.m[0].key_len == b.m[0].key_len &&
                 memcmp(a.m[0].key, b.m[0].key, a.m[0].key_len) == 0);
    expect_eq(a.m[0].key_len, c.m[0].key_len);
    assert_memory_equal(a.m[0].key, c.m[0].key, a.m[0].key_len);
    assert_int_equal(a.m[0].key_len, strlen("9:messaging,9:to_number=10:"
                                            "2061111111"));
    assert_memory_equal(a.m[0].key, "9:messaging,9:to_number=10:2061111111",
                        a.m[0].key_len);
    sl_rules_free(r);
}

static void test_counter_keys_count_apart_in_store(void **state)
{
    sl_rules *r = rules_of("domain: d\ndescriptors:\n  - key: user\n"
                           "    rate_limit: {unit: minute, "
                           "requests_per_unit: 1}\n");
    sl_store *st = tu_store();
    result a, b;
    sl_decision d;
    (void)state;
    match(r, "d", "user=alice", &a);
    match(r, "d", "user=bob", &b);
    assert_int_equal(sl_check(st, a.m[0].rule->limit, a.m[0].key,
                              a.m[0].key_len, 1, 0, &d), 0);
    expect_eq(d.allowed, 1);
    assert_int_equal(sl_check(st, a.m[0].rule->limit, a.m[0].key,
                              a.m[0].key_len, 1, 0, &d), 0);
    expect_eq(d.allowed, 0);
    assert_int_equal(sl_check(st, b.m[0].rule->limit, b.m[0].key,
                              b.m[0].key_len, 1, 0, &d), 0);
    expect_eq(d.allowed, 1);
    sl_store_free(st);
    sl_rules_free(r);
}

static void test_counter_key_is_unambiguous(void **state)
{
    /* lyft's "key_value" would give the same text for both. */
    sl_rules *r = rules_of("domain: d\ndescriptors:\n"
                           "  - key: a\n    rate_limit: {unit: second, "
                           "requests_per_unit: 1}\n"
                           "  - key: a_b\n    rate_limit: {unit: second, "
                           "requests_per_unit: 1}\n");
    result x, y;
    (void)state;
    match(r, "d", "a=b_c", &x);
    match(r, "d", "a_b=c", &y);
    assert_false(x.m[0].key_len == y.m[0].key_len &&
                 memcmp(x.m[0].key, y.m[0].key, x.m[0].key_len) == 0);
    sl_rules_free(r);
}

static void test_key_buffer_too_small(void **state)
{
    sl_rules *r = rules_of(example2);
    sl_rule_match m[SL_RULES_MAX_LIMITS_PER_NODE];
    sl_rules_entry e = {"to_number", 9, "2061111111", 10};
    char key[16];
    size_t n = 99;
    (void)state;
    expect_eq(sl_rules_match(r, "messaging", 9, &e, 1, 0, m,
                             SL_RULES_MAX_LIMITS_PER_NODE, &n, key,
                             sizeof(key)),
              SL_EKEYLEN);
    expect_eq(n, 0);
    expect_eq(sl_rules_match(r, "messaging", 9, &e, 0, 0, m,
                             SL_RULES_MAX_LIMITS_PER_NODE, &n, key,
                             sizeof(key)),
              SL_EINVAL);
    expect_eq(sl_rules_match(r, "messaging", 9, &e, 1, 0, m, 1, &n, key,
                             sizeof(key)),
              SL_EINVAL);
    sl_rules_free(r);
}

static void test_unknown_domain_matches_nothing(void **state)
{
    sl_rules *r = rules_of(example2);
    (void)state;
    assert_string_equal(matched_path(r, "messagin", "to_number=1"), "-");
    assert_string_equal(matched_path(r, "messaging2", "to_number=1"), "-");
    assert_string_equal(matched_path(r, "", "to_number=1"), "-");
    sl_rules_free(r);
}

static void test_domain_find(void **state)
{
    sl_rules *r = rules_of(example2);
    (void)state;
    expect_eq(sl_rules_domain_find(r, "messaging", 9), 0);
    assert_string_equal(sl_rules_domain_name(r, 0), "messaging");
    /* (pointer, length): a longer buffer's prefix is the name. */
    expect_eq(sl_rules_domain_find(r, "messagingX", 9), 0);
    expect_eq(sl_rules_domain_find(r, "messagingX", 10), SL_RULES_NO_DOMAIN);
    expect_eq(sl_rules_domain_find(r, "messag", 6), SL_RULES_NO_DOMAIN);
    expect_eq(sl_rules_domain_find(r, "", 0), SL_RULES_NO_DOMAIN);
    sl_rules_free(r);
}

static void test_counter_key_without_a_match(void **state)
{
    sl_rules *r = rules_of(example2);
    result res;
    req q;
    char key[64];
    size_t len = 0;
    (void)state;
    /* The key a match gets, and the same bytes for a caller that counts
     * a descriptor no rule matches (a request's limit override). */
    expect_eq(match(r, "messaging", "to_number=2061111111", &res), 1);
    parse_req(&q, "to_number=2061111111");
    assert_int_equal(
        sl_rules_counter_key("messaging", 9, q.e, q.n, key, sizeof(key), &len),
        0);
    expect_eq(len, res.m[0].key_len);
    assert_memory_equal(key, res.m[0].key, len);
    parse_req(&q, "nothing=x");
    assert_int_equal(
        sl_rules_counter_key("messaging", 9, q.e, q.n, key, sizeof(key), &len),
        0);
    assert_memory_equal(key, "9:messaging,7:nothing=1:x", len);
    expect_eq(len, 25);
    assert_int_equal(
        sl_rules_counter_key("messaging", 9, q.e, q.n, key, 24, &len),
        SL_EKEYLEN);
    sl_rules_free(r);
}

static void test_entries_are_not_nul_terminated(void **state)
{
    sl_rules *r = rules_of(example2);
    const char raw[] = "to_numberXXX2061111111YYY";
    sl_rules_entry e = {raw, 9, raw + 12, 10};
    sl_rule_match m[SL_RULES_MAX_LIMITS_PER_NODE];
    char key[128];
    size_t n;
    (void)state;
    assert_int_equal(sl_rules_match(r, "messagingZZZ", 9, &e, 1, 3, m,
                                    SL_RULES_MAX_LIMITS_PER_NODE, &n, key,
                                    sizeof(key)), 0);
    expect_eq(n, 1);
    expect_eq(m[0].descriptor, 3);
    assert_memory_equal(m[0].key, "9:messaging,9:to_number=10:2061111111",
                        m[0].key_len);
    sl_rules_free(r);
}

static void test_several_limits_per_node(void **state)
{
    sl_rules *r = rules_of("domain: d\ndescriptors:\n  - key: user\n"
                           "    rate_limit:\n"
                           "      - {algorithm: token_bucket, unit: second, "
                           "requests_per_unit: 10, burst: 20}\n"
                           "      - {unit: hour, requests_per_unit: 1000}\n");
    result res;
    sl_store *st = tu_store();
    sl_check_item items[2];
    sl_decision each[2], all;
    (void)state;
    expect_eq(match(r, "d", "user=42", &res), 2);
    expect_eq(sl_limit_get_config(res.m[0].rule->limit)->burst, 20);
    expect_eq(sl_limit_get_config(res.m[1].rule->limit)->period, HOUR);
    assert_ptr_equal(res.m[0].key, res.m[1].key);
    /* Both limits share the counter key yet keep separate state. */
    for (int i = 0; i < 2; i++) {
        items[i].limit = res.m[i].rule->limit;
        items[i].key = res.m[i].key;
        items[i].key_len = res.m[i].key_len;
    }
    assert_int_equal(sl_check_multi(st, items, 2, 20, 0, each, &all), 0);
    expect_eq(all.allowed, 1);
    expect_eq(each[0].remaining, 0);
    expect_eq(each[1].remaining, 980);
    sl_store_free(st);
    sl_rules_free(r);
}

static void test_shadow_mode_and_unlimited_flags(void **state)
{
    sl_rules *r = rules_of("domain: d\ndescriptors:\n"
                           "  - key: a\n    shadow_mode: true\n"
                           "    rate_limit: {unit: second, "
                           "requests_per_unit: 1}\n"
                           "  - key: b\n    rate_limit: {unlimited: true}\n"
                           "  - key: c\n");
    result res;
    (void)state;
    expect_eq(match(r, "d", "a=1", &res), 1);
    expect_eq(res.m[0].rule->shadow_mode, 1);
    expect_eq(match(r, "d", "b=1", &res), 1);
    expect_eq(res.m[0].rule->action, SL_RULE_UNLIMITED);
    /* A descriptor without rate_limit matches but has no rule. */
    expect_eq(match(r, "d", "c=1", &res), 0);
    sl_rules_free(r);
}

static const char *example7 =
    "domain: example7\n"
    "descriptors:\n"
    "  - key: key_1\n    value: value_1\n    descriptors:\n"
    "      - key: user\n        value: bkthomps\n        rate_limit:\n"
    "          name: specific_limit\n          requests_per_unit: 5\n"
    "          unit: second\n"
    "  - key: key_2\n    value: value_2\n    descriptors:\n"
    "      - key: user\n        value: bkthomps\n        rate_limit:\n"
    "          replaces:\n            - name: specific_limit\n"
    "          requests_per_unit: 10\n          unit: second\n";

/* Matches every descriptor of a request, as a server would. */
static size_t match_request(const sl_rules *r, const char *domain,
                            const char *const *descs, size_t nd,
                            sl_rule_match *all, char keys[][256])
{
    size_t total = 0;
    for (size_t i = 0; i < nd; i++) {
        req q;
        size_t n;
        parse_req(&q, descs[i]);
        assert_int_equal(sl_rules_match(r, domain, strlen(domain), q.e, q.n,
                                        i, all + total,
                                        SL_RULES_MAX_LIMITS_PER_NODE, &n,
                                        keys[i], 256), 0);
        total += n;
    }
    return total;
}

static void test_replaces_as_lyft_example7(void **state)
{
    sl_rules *r = rules_of(example7);
    sl_rule_match m[4 * SL_RULES_MAX_LIMITS_PER_NODE];
    char keys[4][256];
    const char *both[] = {"key_1=value_1,user=bkthomps",
                          "key_2=value_2,user=bkthomps"};
    size_t n;
    (void)state;
    /* Alone, each applies. */
    n = match_request(r, "example7", both, 1, m, keys);
    assert_int_equal(sl_rules_drop_replaced(m, &n), 0);
    expect_eq(n, 1);
    expect_eq(m[0].rule->requests_per_unit, 5);
    /* Together, the 10/s rule replaces the 5/s one, in either order. */
    n = match_request(r, "example7", both, 2, m, keys);
    expect_eq(n, 2);
    assert_int_equal(sl_rules_drop_replaced(m, &n), 0);
    expect_eq(n, 1);
    expect_eq(m[0].rule->requests_per_unit, 10);
    expect_eq(m[0].descriptor, 1);
    const char *rev[] = {both[1], both[0]};
    n = match_request(r, "example7", rev, 2, m, keys);
    assert_int_equal(sl_rules_drop_replaced(m, &n), 0);
    expect_eq(n, 1);
    expect_eq(m[0].rule->requests_per_unit, 10);
    expect_eq(m[0].descriptor, 0);
    sl_rules_free(r);
}

static void test_replaces_keeps_unlimited_and_unnamed(void **state)
{
    sl_rules *r = rules_of("domain: d\ndescriptors:\n"
                           "  - key: a\n    rate_limit: {name: x, "
                           "unlimited: true}\n"
                           "  - key: b\n    rate_limit: {unit: second, "
                           "requests_per_unit: 1, replaces: [{name: x}]}\n"
                           "  - key: c\n    rate_limit: {unit: second, "
                           "requests_per_unit: 2}\n");
    sl_rule_match m[3 * SL_RULES_MAX_LIMITS_PER_NODE];
    char keys[3][256];
    const char *descs[] = {"a=1", "b=1", "c=1"};
    size_t n = match_request(r, "d", descs, 3, m, keys);
    (void)state;
    expect_eq(n, 3);
    assert_int_equal(sl_rules_drop_replaced(m, &n), 0);
    expect_eq(n, 3);
    n = SL_RULES_MAX_MATCHES + 1;
    expect_eq(sl_rules_drop_replaced(m, &n), SL_EINVAL);
    sl_rules_free(r);
}

static void test_example_config_scenarios(void **state)
{
    sl_rules *r = NULL;
    char err[512], path[1280];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    sl_rule_match m[2 * SL_RULES_MAX_LIMITS_PER_NODE];
    char keys[2][256];
    (void)state;
    snprintf(path, sizeof(path), "%.*s/../examples/rules/api.yaml",
             (int)(slash - f), f);
    assert_int_equal(sl_rules_load(path, NULL, &r, err, sizeof(err)), 0);
    const char *svc[] = {"tenant=internal,user=svc-billing"};
    size_t n = match_request(r, "api", svc, 1, m, keys);
    expect_eq(n, 1);
    expect_eq(m[0].rule->action, SL_RULE_UNLIMITED);
    const char *req2[] = {"tenant=acme,user=42", "endpoint=/search,user=42"};
    n = match_request(r, "api", req2, 2, m, keys);
    expect_eq(n, 3);
    assert_int_equal(sl_rules_drop_replaced(m, &n), 0);
    expect_eq(n, 2);
    assert_string_equal(m[0].rule->name, "user_burst");
    assert_string_equal(m[1].rule->name, "search_hourly");
    const char *up[] = {"endpoint=/upload/big"};
    n = match_request(r, "api", up, 1, m, keys);
    expect_eq(n, 1);
    expect_eq(m[0].rule->shadow_mode, 1);
    expect_eq(sl__rule_daemon_of(r, m[0].rule)->detailed_metric, 1);
    const char *dl[] = {"path=/v1/reports/download"};
    n = match_request(r, "api", dl, 1, m, keys);
    expect_eq(n, 1);
    assert_string_equal(m[0].rule->name, "downloads");
    sl_rules_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_then_wildcard_then_key_only),
        cmocka_unit_test(test_deny_rule_matches_as_deny),
        cmocka_unit_test(test_first_wildcard_in_file_order),
        cmocka_unit_test(test_glob_star_in_the_middle),
        cmocka_unit_test(test_glob_several_stars),
        cmocka_unit_test(test_glob_star_at_start_and_empty_segments),
        cmocka_unit_test(test_glob_exact_value_first),
        cmocka_unit_test(test_glob_and_prefix_in_file_order),
        cmocka_unit_test(test_glob_value_with_nul_and_long_value),
        cmocka_unit_test(test_glob_counts_each_value_apart),
        cmocka_unit_test(test_glob_against_a_reference),
        cmocka_unit_test(test_nested_descriptors),
        cmocka_unit_test(test_limit_applies_only_at_last_entry),
        cmocka_unit_test(test_no_backtracking_from_exact_to_key_only),
        cmocka_unit_test(test_distinct_counter_keys_per_value),
        cmocka_unit_test(test_counter_keys_count_apart_in_store),
        cmocka_unit_test(test_counter_key_is_unambiguous),
        cmocka_unit_test(test_key_buffer_too_small),
        cmocka_unit_test(test_unknown_domain_matches_nothing),
        cmocka_unit_test(test_domain_find),
        cmocka_unit_test(test_counter_key_without_a_match),
        cmocka_unit_test(test_entries_are_not_nul_terminated),
        cmocka_unit_test(test_several_limits_per_node),
        cmocka_unit_test(test_shadow_mode_and_unlimited_flags),
        cmocka_unit_test(test_replaces_as_lyft_example7),
        cmocka_unit_test(test_replaces_keeps_unlimited_and_unnamed),
        cmocka_unit_test(test_example_config_scenarios),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
