/*
 * test_resp_parse.c - the Redis protocol front end's pure parts: the
 * request parser (every split of a command, quoting, each cap and
 * malformed header) and CL.THROTTLE/GCRA on sluice's GCRA, held to
 * redis-cell's own table of cases and to both commands' rounding.
 */
#include "testutil.h"

#include "resp/parse.h"
#include "resp/throttle.h"
#include "runtime/buf.h"

/* ---- the parser ---- */

typedef struct parsed {
    int rc;
    size_t argc, used;
    char args[8][64];
    const char *err;
} parsed;

/* Parses the command at the start of text[0..len) (copied: an inline
 * command is unquoted in place). */
static parsed parse(const char *text, size_t len)
{
    parsed r = {0};
    char *buf = malloc(len + 1);
    memcpy(buf, text, len);
    rp_parser p;
    rp_parser_init(&p);
    r.rc = rp_parse(&p, buf, len);
    if (r.rc == RP_DONE) {
        r.argc = p.n_args;
        r.used = p.pos;
        for (size_t i = 0; i < p.n_args && i < 8; i++)
            snprintf(r.args[i], sizeof(r.args[i]), "%.*s", (int)p.args[i].len,
                     buf + p.args[i].off);
    }
    r.err = p.err;
    rp_parser_release(&p);
    free(buf);
    return r;
}

#define PARSE(s) parse(s, sizeof(s) - 1)

static void multibulk(void **state)
{
    (void)state;
    parsed r = PARSE("*3\r\n$4\r\nECHO\r\n$0\r\n\r\n$3\r\na\nb\r\n*1\r\n");
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, 3);
    expect_eq(r.used, 29); /* the next command is not touched */
    assert_string_equal(r.args[0], "ECHO");
    assert_string_equal(r.args[1], "");
    assert_string_equal(r.args[2], "a\nb");
    /* *0 and *-1 are no command, as Redis reads them. */
    r = PARSE("*0\r\n");
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, 0);
    expect_eq(r.used, 4);
    r = PARSE("*-1\r\n");
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, 0);
}

/* Every split point: the bytes come one at a time into a buffer that
 * moves (realloc'd), and the parse is the same as in one piece. */
static void byte_by_byte(void **state)
{
    (void)state;
    static const char cmd[] =
        "*5\r\n$11\r\nCL.THROTTLE\r\n$7\r\nuser123\r\n$2\r\n15\r\n"
        "$2\r\n30\r\n$2\r\n60\r\n";
    const size_t n = sizeof(cmd) - 1;
    rp_parser p;
    rp_parser_init(&p);
    char *buf = NULL;
    for (size_t len = 1; len <= n; len++) {
        buf = realloc(buf, len);
        memcpy(buf, cmd, len);
        int rc = rp_parse(&p, buf, len);
        if (len < n)
            expect_eq_at(rc, RP_MORE, "at %zu bytes", len);
        else
            expect_eq(rc, RP_DONE);
    }
    expect_eq(p.n_args, 5);
    expect_eq(p.pos, n);
    expect_eq(p.args[1].len, 7);
    assert_memory_equal(buf + p.args[1].off, "user123", 7);
    rp_parser_next(&p);
    expect_eq(p.pos, 0);
    expect_eq(p.n_args, 0);
    rp_parser_release(&p);
    free(buf);
}

static void inline_commands(void **state)
{
    (void)state;
    parsed r = PARSE("  PING \t hello\r\nNEXT\r\n");
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, 2);
    assert_string_equal(r.args[1], "hello");
    expect_eq(r.used, 16);
    r = PARSE("SET \"a\\x41\\n\\\"q\\\\\" 'it\\'s' \"\"\n");
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, 4);
    assert_string_equal(r.args[1], "aA\n\"q\\");
    assert_string_equal(r.args[2], "it's");
    assert_string_equal(r.args[3], "");
    r = PARSE("\r\n");
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, 0);
    r = PARSE("PING"); /* no newline yet */
    expect_eq(r.rc, RP_MORE);
    r = PARSE("ECHO \"open\r\n");
    expect_eq(r.rc, RP_ERROR);
    assert_non_null(strstr(r.err, "unbalanced quotes"));
    r = PARSE("ECHO \"a\"b\r\n"); /* a closing quote must end the word */
    expect_eq(r.rc, RP_ERROR);
}

static void malformed(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"*x\r\n", "invalid multibulk length"},
        {"*\r\n", "invalid multibulk length"},
        {"*-\r\n", "invalid multibulk length"},
        {"*1025\r\n", "invalid multibulk length"}, /* RP_MAX_ARGS */
        {"*99999999999999999999999\r\n", "invalid multibulk length"},
        {"*1\r\n+PING\r\n", "expected '$'"},
        {"*1\r\n$x\r\n", "invalid bulk length"},
        {"*1\r\n$-1\r\n", "invalid bulk length"},
        {"*1\r\n$65537\r\n", "invalid bulk length"}, /* RP_MAX_BULK */
        {"*1\r\n$4\r\nPINGxx", "expected CRLF"},
        {"*1\r\n$1\nabc\r\n", "invalid bulk length"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        parsed r = parse(cases[i].text, strlen(cases[i].text));
        expect_eq_at(r.rc, RP_ERROR, "case %zu", i);
        if (strstr(r.err, cases[i].why) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, r.err, cases[i].why);
    }
    /* A header with no CR yet: more is needed, unless it is longer than
     * any number could be. */
    expect_eq(PARSE("*12").rc, RP_MORE);
    expect_eq(PARSE("*1\r\n$12").rc, RP_MORE);
    expect_eq(PARSE("*1\r\n$1\n").rc, RP_MORE); /* a header ends at CR */
    expect_eq(PARSE("*1111111111111111111111111111").rc, RP_ERROR);
}

static void caps(void **state)
{
    (void)state;
    /* An inline line longer than RP_MAX_INLINE, with or without its end. */
    size_t n = RP_MAX_INLINE + 10;
    char *big = malloc(n + 2);
    memset(big, 'a', n);
    parsed r = parse(big, n);
    expect_eq(r.rc, RP_ERROR);
    assert_non_null(strstr(r.err, "too big inline"));
    memcpy(big + n, "\r\n", 2);
    r = parse(big, n + 2);
    expect_eq(r.rc, RP_ERROR);
    free(big);
    /* Arguments that fit one by one but not together: RP_MAX_COMMAND. */
    sv_buf b = {0};
    sv_buf_printf(&b, "*10\r\n");
    for (int i = 0; i < 10; i++) {
        sv_buf_printf(&b, "$%d\r\n", RP_MAX_BULK);
        for (int k = 0; k < RP_MAX_BULK; k++)
            sv_buf_add(&b, "y", 1);
        sv_buf_add(&b, "\r\n", 2);
    }
    r = parse(b.data, b.len);
    expect_eq(r.rc, RP_ERROR);
    assert_non_null(strstr(r.err, "command too long"));
    sv_buf_release(&b);
    /* RP_MAX_ARGS arguments exactly are fine. */
    sv_buf_printf(&b, "*%d\r\n", RP_MAX_ARGS);
    for (int i = 0; i < RP_MAX_ARGS; i++)
        sv_buf_addstr(&b, "$1\r\nz\r\n");
    r = parse(b.data, b.len);
    expect_eq(r.rc, RP_DONE);
    expect_eq(r.argc, RP_MAX_ARGS);
    sv_buf_release(&b);
}

/* ---- CL.THROTTLE and GCRA ---- */

static int read_words(rp_throttle_kind kind, const char *line, rp_throttle *t,
                      char *err, size_t errlen)
{
    static char copy[256];
    rp_str argv[16];
    size_t argc = 0;
    snprintf(copy, sizeof(copy), "%s", line);
    for (char *w = strtok(copy, " "); w && argc < 16; w = strtok(NULL, " "))
        argv[argc++] = (rp_str){w, strlen(w)};
    return rp_throttle_read(kind, argv, argc, t, err, errlen);
}

/* The reply's five integers. */
static void reply_ints(const rp_throttle *t, const sl_decision *d,
                       long long out[5])
{
    sv_buf b = {0};
    rp_throttle_reply(t, d, &b);
    assert_int_equal(strncmp(b.data, "*5\r\n", 4), 0);
    const char *s = b.data + 4;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(*s, ':');
        out[i] = strtoll(s + 1, (char **)&s, 10);
        s += 2;
    }
    sv_buf_release(&b);
}

/* redis-cell's own test of its limiter (RateLimiter::rate_limit):
 * limit 5 (max_burst 4), one per second, with its times to the ms. */
static void redis_cell_cases(void **state)
{
    (void)state;
    static const struct {
        int64_t at_ms, volume, remaining, reset_ms, retry_ms;
        int limited;
    } cases[] = {
        {0, 6, 5, 0, -1, 1}, /* larger than the capacity: never */
        {0, 1, 4, 1000, -1, 0},    {0, 1, 3, 2000, -1, 0},
        {0, 1, 2, 3000, -1, 0},    {0, 1, 1, 4000, -1, 0},
        {0, 1, 0, 5000, -1, 0},    {0, 1, 0, 5000, 1000, 1},
        {3000, 1, 2, 3000, -1, 0}, {3100, 1, 1, 3900, -1, 0},
        {4000, 1, 1, 4000, -1, 0}, {8000, 1, 4, 1000, -1, 0},
        {9500, 1, 4, 1000, -1, 0}, {9500, 0, 4, 1000, -1, 0},
        {9500, 2, 2, 3000, -1, 0}, {9500, 5, 2, 3000, 3000, 1},
    };
    rp_throttle t;
    char err[256];
    sl_store *st = tu_store();
    const sl_nanos start = 1700000000 * SEC;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char line[64];
        snprintf(line, sizeof(line), "cl.throttle foo 4 1 1 %lld",
                 (long long)cases[i].volume);
        expect_eq(read_words(RP_CELL, line, &t, err, sizeof(err)), 0);
        sl_limit *lim = tu_limit_cfg(&t.cfg);
        sl_decision d;
        expect_eq(sl_check(st, lim, "foo", 3, t.cost,
                           start + cases[i].at_ms * MS, &d),
                  0);
        long long r[5];
        reply_ints(&t, &d, r);
        expect_eq_at(r[0], cases[i].limited, "case %zu", i);
        expect_eq_at(r[1], 5, "case %zu", i);
        expect_eq_at(r[2], cases[i].remaining, "case %zu", i);
        expect_eq_at(d.reset_after, cases[i].reset_ms * MS, "case %zu", i);
        if (cases[i].limited)
            expect_eq_at(cases[i].retry_ms < 0 ? -1 : d.retry_after,
                         cases[i].retry_ms < 0 ? -1 : cases[i].retry_ms * MS,
                         "case %zu", i);
        /* Seconds: whole, plus one for a millisecond or more left over. */
        expect_eq_at(r[4], (cases[i].reset_ms + 999) / 1000, "case %zu", i);
        expect_eq_at(
            r[3], cases[i].retry_ms < 0 ? -1 : (cases[i].retry_ms + 999) / 1000,
            "case %zu", i);
        sl_limit_free(lim);
    }
    sl_store_free(st);
}

/* The README example, and the two commands' rounding of the seconds. */
static void rounding(void **state)
{
    (void)state;
    rp_throttle t;
    char err[256];
    long long r[5];
    expect_eq(read_words(RP_CELL, "cl.throttle user123 15 30 60", &t, err,
                         sizeof(err)),
              0);
    expect_eq(t.cfg.period, 2 * SEC);
    expect_eq(t.cfg.burst, 16);
    sl_decision d = {.allowed = 1, .remaining = 15, .reset_after = 2 * SEC};
    reply_ints(&t, &d, r);
    long long want[5] = {0, 16, 15, -1, 2};
    assert_memory_equal(r, want, sizeof(want));
    /* redis-cell rounds up only a millisecond or more; Redis's GCRA
     * rounds any fraction up (ceil). */
    d = (sl_decision){.allowed = 0,
                      .reset_after = 2 * SEC + 500 * SL_NS_PER_US,
                      .retry_after = 1 * SEC + 999 * SL_NS_PER_US};
    reply_ints(&t, &d, r);
    expect_eq(r[3], 1);
    expect_eq(r[4], 2);
    expect_eq(read_words(RP_GCRA, "gcra k 15 30 60", &t, err, sizeof(err)), 0);
    reply_ints(&t, &d, r);
    expect_eq(r[3], 2);
    expect_eq(r[4], 3);
    /* GCRA's T: the fractional period over the count, whole us, >= 1. */
    expect_eq(read_words(RP_GCRA, "gcra k 0 3 1", &t, err, sizeof(err)), 0);
    expect_eq(t.cfg.period, 333333 * SL_NS_PER_US);
    expect_eq(read_words(RP_GCRA, "gcra k 0 6 1", &t, err, sizeof(err)), 0);
    expect_eq(t.cfg.period, 166667 * SL_NS_PER_US);
    expect_eq(
        read_words(RP_GCRA, "gcra k 0 1000000000 0.5", &t, err, sizeof(err)),
        0);
    expect_eq(t.cfg.period, SL_NS_PER_US);
    expect_eq(
        read_words(RP_GCRA, "gcra k 2 1 1.5 TOKENS 3", &t, err, sizeof(err)),
        0);
    expect_eq(t.cost, 3);
    expect_eq(t.cfg.burst, 3);
    /* redis-cell's T: whole seconds over the count, truncated to ns. */
    expect_eq(read_words(RP_CELL, "cl.throttle k 0 3 1", &t, err, sizeof(err)),
              0);
    expect_eq(t.cfg.period, 333333333);
}

static void refused(void **state)
{
    (void)state;
    static const struct {
        rp_throttle_kind kind;
        const char *line, *why;
    } cases[] = {
        {RP_CELL, "cl.throttle k 1 1", "Usage: cl.throttle"},
        {RP_CELL, "cl.throttle k 1 1 1 1 1", "Usage: cl.throttle"},
        {RP_CELL, "cl.throttle k 1x 1 1", "Couldn't parse as integer: 1x"},
        {RP_CELL, "cl.throttle k - 1 1", "Couldn't parse as integer: -"},
        {RP_CELL, "cl.throttle k 1 1 1 -2", "quantity must not be negative"},
        {RP_CELL, "cl.throttle k 1 0 1", "Zero rates"},
        {RP_CELL, "cl.throttle k 1 2000000000 1", "Zero rates"}, /* T < 1 ns */
        {RP_CELL, "cl.throttle k 1 1 9223372036", "period too large"},
        {RP_CELL, "cl.throttle k 1099511627776 1 1", "max_burst too large"},
        {RP_CELL, "cl.throttle k 1 1 1 1099511627777", "quantity too large"},
        /* B*T past 2^62 ns (found by fuzz_resp). */
        {RP_CELL, "cl.throttle k 1032122020 8 2041", "max_burst too large"},
        {RP_CELL, "cl.throttle k 9223372036854775808 1 1", "Couldn't parse"},
        {RP_GCRA, "gcra k 1 1", "wrong number of arguments"},
        {RP_GCRA, "gcra k 1 1 1 TOKENS 1 x", "wrong number of arguments"},
        {RP_GCRA, "gcra k x 1 1", "not an integer"},
        {RP_GCRA, "gcra k -1 1 1", "must be positive"},
        {RP_GCRA, "gcra k 1 0 1", "must between 1 and"},
        {RP_GCRA, "gcra k 1 1 nan", "not a valid float"},
        {RP_GCRA, "gcra k 1 1 1e12", "period must be > 0 and < 1e12"},
        {RP_GCRA, "gcra k 1 1 -1", "period must be > 0"},
        {RP_GCRA, "gcra k 1 1 1 TOKEN 1", "syntax error"},
        {RP_GCRA, "gcra k 1 1 1 TOKENS", "Missing TOKENS value"},
        {RP_GCRA, "gcra k 1 1 1 TOKENS 0", "must between 1 and"},
        {RP_GCRA, "gcra k 1 1 1 TOKENS 1099511627777", "TOKENS would cause"},
        {RP_GCRA, "gcra k 1099511627776 1 1", "max_burst would cause"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rp_throttle t;
        char err[256] = "";
        expect_eq_at(
            read_words(cases[i].kind, cases[i].line, &t, err, sizeof(err)), -1,
            "%s", cases[i].line);
        if (strstr(err, cases[i].why) == NULL)
            fail_msg("%s: '%s' lacks '%s'", cases[i].line, err, cases[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(multibulk),
        cmocka_unit_test(byte_by_byte),
        cmocka_unit_test(inline_commands),
        cmocka_unit_test(malformed),
        cmocka_unit_test(caps),
        cmocka_unit_test(redis_cell_cases),
        cmocka_unit_test(rounding),
        cmocka_unit_test(refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
