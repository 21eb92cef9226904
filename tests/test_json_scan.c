/*
 * test_json_scan.c - the decision requests' JSON scanner
 * (src/api/json_scan.c): what it accepts and refuses, where it says
 * the error is, its tokens and lookups, and decoded strings.  fuzz_json
 * holds it to jansson on random input; these are the cases named.
 */
#include "testutil.h"

#include "api/json_scan.h"

static sv_json j;

static int scan(const char *text)
{
    return sv_json_scan(&j, text, strlen(text));
}

static void accepted(void **state)
{
    (void)state;
    const char *ok[] = {
        "{}",
        "[]",
        " \t\r\n{ } ",
        "[1,-0,0.5,-1.5e+3,2E-2,1e999]",
        "[true,false,null]",
        "{\"a\":{\"b\":[{}]}}",
        "[\"\\u00e9\\ud83d\\ude00\"]",
        "[\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac\"]",
        "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
        "[123456789012345678901234567890]", /* jansson: too big */
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (scan(ok[i]) != 0)
            fail_msg("refused %s: %s", ok[i], j.err);
}

static void refused(void **state)
{
    (void)state;
    struct {
        const char *text, *err;
    } bad[] = {
        {"", "'[' or '{' expected (line 1, column 1)"},
        {"\"a\"", "'[' or '{' expected"},
        {"1", "'[' or '{' expected"},
        {"{} {}", "end of input expected (line 1, column 4)"},
        {"[1 2]", "',' or ']' expected"},
        {"{\"a\" 1}", "':' expected"},
        {"{\"a\"}", "':' expected"},
        {"{\"a\":1,}", "a string key expected"},
        {"[1,]", "unexpected character"},
        {"[,1]", "unexpected character"},
        {"{1:2}", "a string key expected"},
        {"[01]", "invalid number"},
        {"[1.]", "invalid number"},
        {"[.5]", "unexpected character"},
        {"[-]", "invalid number"},
        {"[1e]", "invalid number"},
        {"[+1]", "unexpected character"},
        {"[tru]", "invalid literal"},
        {"[truex]", "invalid literal"},
        {"[nul]", "invalid literal"},
        {"[\"a]", "unexpected end of input in a string"},
        {"[\"a\tb\"]", "control character in a string"},
        {"[\"\\x\"]", "invalid escape"},
        {"[\"\\u12g4\"]", "invalid \\u escape"},
        {"[\"\\u0000\"]", "\\u0000 is not allowed"},
        {"[\"\\ud800\"]", "a lone high surrogate"},
        {"[\"\\ud800\\u0041\"]", "a lone high surrogate"},
        {"[\"\\udc00\"]", "a lone low surrogate"},
        {"[\"\xc0\xaf\"]", "invalid UTF-8"},         /* overlong '/' */
        {"[\"\xed\xa0\x80\"]", "invalid UTF-8"},     /* a surrogate */
        {"[\"\xf4\x90\x80\x80\"]", "invalid UTF-8"}, /* past U+10FFFF */
        {"[\"\xe2\x82\"]", "invalid UTF-8"},         /* cut short */
        {"[\"\xff\"]", "invalid UTF-8"},
        {"{\"a\":1,\"a\":2}", "duplicate object key (line 1, column 1)"},
        {"{\"a\":1,\"\\u0061\":2}", "duplicate object key"},
        {"[1,\n {\"b\":[],\n  \"b\":0}]",
         "duplicate object key (line 2, column 2)"},
        {"{\"a\":[1}", "',' or ']' expected"},
        {"[{]", "a string key expected"},
        {"[1\0]", "invalid number"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = strlen(bad[i].text);
        if (strcmp(bad[i].text, "[1") == 0)
            len = 4; /* "[1\0]": the NUL is part of the text */
        if (sv_json_scan(&j, bad[i].text, len) != -1)
            fail_msg("accepted %s", bad[i].text);
        if (strstr(j.err, bad[i].err) == NULL)
            fail_msg("%s: said \"%s\", not \"%s\"", bad[i].text, j.err,
                     bad[i].err);
    }
}

/* 2048 levels (jansson's cap) are taken, 2049 refused; and refusing
 * them costs no C stack. */
static void depth(void **state)
{
    (void)state;
    char doc[2 * 2049 + 1];
    for (int levels = 2048; levels <= 2049; levels++) {
        memset(doc, '[', (size_t)levels);
        memset(doc + levels, ']', (size_t)levels);
        expect_eq(sv_json_scan(&j, doc, 2 * (size_t)levels),
                  levels == 2048 ? 0 : -1);
    }
    expect_eq(strstr(j.err, "maximum nesting depth") != NULL, 1);
}

/* An object larger than the pairwise comparison's reach is sorted: a
 * duplicate at its two ends is found, and distinct keys pass. */
static void many_keys(void **state)
{
    (void)state;
    char doc[64 * 1024];
    size_t n = 0;
    n += (size_t)sprintf(doc + n, "{");
    for (int k = 0; k < 1000; k++)
        n += (size_t)sprintf(doc + n, "%s\"k%d\":%d", k ? "," : "", k, k);
    size_t open_end = n;
    n += (size_t)sprintf(doc + n, "}");
    expect_eq(sv_json_scan(&j, doc, n), 0);
    expect_eq(j.tok[0].size, 1000);
    int v = sv_json_get(&j, 0, "k999");
    expect_eq(v >= 0, 1);
    expect_eq(memcmp(j.text + j.tok[v].start, "999", 3), 0);
    sprintf(doc + open_end, ",\"\\u006b0\":1}");
    expect_eq(scan(doc), -1);
    expect_eq(strstr(j.err, "duplicate object key") != NULL, 1);
}

static void tokens(void **state)
{
    (void)state;
    const char *doc =
        "{\"domain\":\"api\",\"hits\":2,\"descriptors\":[{\"entries\":"
        "[{\"key\":\"k\\u00e9\",\"value\":\"a\\\"b\\ud83d\\ude00\"}]}"
        ",[]],\"z\":null}";
    expect_eq(scan(doc), 0);
    expect_eq(j.tok[0].type, SV_JSON_OBJECT);
    expect_eq(j.tok[0].size, 4);
    expect_eq(j.tok[0].next, j.n);
    int d = sv_json_get(&j, 0, "domain");
    expect_eq(j.tok[d].type, SV_JSON_STRING);
    int h = sv_json_get(&j, 0, "hits");
    expect_eq(j.tok[h].type, SV_JSON_NUMBER);
    expect_eq(j.tok[h].integral, 1);
    expect_eq(sv_json_get(&j, 0, "nope"), -1);
    expect_eq(sv_json_get(&j, h, "x"), -1); /* not an object */
    int z = sv_json_get(&j, 0, "z");
    expect_eq(j.tok[z].type, SV_JSON_NULL);
    int arr = sv_json_get(&j, 0, "descriptors");
    expect_eq(j.tok[arr].size, 2);
    int first = arr + 1, second = (int)j.tok[first].next;
    expect_eq(j.tok[second].type, SV_JSON_ARRAY);
    expect_eq(j.tok[second].size, 0);
    int entries = sv_json_get(&j, first, "entries");
    int e = entries + 1;
    char out[64];
    const char *s;
    size_t n = sv_json_str(&j, sv_json_get(&j, e, "key"), out, &s);
    expect_eq(n, 3);
    expect_eq(memcmp(s, "k\xc3\xa9", 3), 0);
    n = sv_json_str(&j, sv_json_get(&j, e, "value"), out, &s);
    expect_eq(n, 7);
    expect_eq(memcmp(s, "a\"b\xf0\x9f\x98\x80", 7), 0);
    /* An unescaped string is the text itself. */
    n = sv_json_str(&j, d, NULL, &s);
    expect_eq(n, 3);
    expect_eq(s == doc + j.tok[d].start, 1);
    /* A key found by its decoded name. */
    expect_eq(scan("{\"\\u0064omain\":\"x\"}"), 0);
    expect_eq(sv_json_get(&j, 0, "domain"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepted), cmocka_unit_test(refused),
        cmocka_unit_test(depth),    cmocka_unit_test(many_keys),
        cmocka_unit_test(tokens),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sv_json_release(&j);
    return rc;
}
