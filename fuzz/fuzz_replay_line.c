/*
 * fuzz_replay_line.c - libFuzzer target for `sluice replay`'s line parser,
 * the part of the command that reads untrusted bytes.
 *
 * The parser (tokenize, parse_uint, replay_line) is static in
 * tools/cmd_replay.c, so this file includes that file whole and calls it
 * directly; its error messages go to /dev/null instead of stderr.  The
 * first two input bytes choose the limit (algorithm, L, period, burst,
 * flags); the rest is a trace, cut into lines at '\n' as replay_stream()
 * cuts them, the last line possibly without one.
 *
 * Checked for every line: the status is 0 (answered) or 2 (bad line); a
 * store failure (1) is a bug; an answered line adds exactly one output line
 * of five integers with allowed in {0, 1}, retry_after >= -1 and
 * reset_after, delay >= 0; a blank or comment line adds nothing.
 *
 * Known bug avoided: a time above SL_MAX_TIME (2^62) passes the parser and
 * then fails in sl_check, which replay reports as a store failure (status
 * 1; tests/test_replay.sh), so such lines are skipped rather than reported
 * again and again.
 */
#define _GNU_SOURCE
#include <stdio.h>

static FILE *sl_fuzz_devnull;
#undef stderr /* glibc's is a macro too */
#define stderr sl_fuzz_devnull
#include "../tools/cmd_replay.c"
#undef stderr
#define stderr stderr

#include <stdint.h>

#include "internal.h" /* sl__memory_check */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *line, size_t len, int rc)
{
    fprintf(stderr, "fuzz_replay_line: %s: rc %d, line '%.*s'\n", what, rc,
            (int)(len > 100 ? 100 : len), line);
    abort();
}

/* Is the first token a number above SL_MAX_TIME (the known bug)? */
static int near_end_of_time(const char *line, size_t len)
{
    size_t i = 0, digits = 0;
    unsigned __int128 v = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    for (; i < len && line[i] >= '0' && line[i] <= '9'; i++, digits++)
        if (v < ((unsigned __int128)1 << 64))
            v = v * 10 + (unsigned)(line[i] - '0');
    return digits > 0 && v > (unsigned __int128)SL_MAX_TIME;
}

/* Checks the one output line that [from, o->len) should hold. */
static void check_answer(const out_buf *o, size_t from, const char *line,
                         size_t len)
{
    long long v[5];
    char text[160], tail;
    size_t n = o->len - from;
    if (n == 0 || n >= sizeof(text) || o->data[o->len - 1] != '\n')
        broken("not one output line", line, len, 0);
    memcpy(text, o->data + from, n);
    text[n] = '\0';
    if (memchr(text, '\n', n - 1) != NULL ||
        sscanf(text, "%lld %lld %lld %lld %lld%c", &v[0], &v[1], &v[2], &v[3],
               &v[4], &tail) != 6 ||
        tail != '\n')
        broken("output is not five integers", line, len, 0);
    if ((v[0] != 0 && v[0] != 1) || v[2] < -1 || v[3] < 0 || v[4] < 0 ||
        (v[0] == 1 && v[2] != 0))
        broken("impossible decision", line, len, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const sl_nanos periods[] = {1, 1000, SL_NS_PER_MS, SL_NS_PER_SEC,
                                       60 * SL_NS_PER_SEC, 86400 * SL_NS_PER_SEC,
                                       7, 999999937};
    static out_buf out;
    sl_limit_config cfg = {0};
    sl_memory_options mopts = {.size = sizeof(sl_memory_options),
                               .max_bytes = 1 << 20,
                               .seed0 = 1,
                               .seed1 = 2};
    sl_limit *limit;
    sl_store *store;
    uint64_t lineno = 0;
    size_t start;

    if (sl_fuzz_devnull == NULL && (sl_fuzz_devnull = fopen("/dev/null", "w")) == NULL)
        abort();
    if (size < 2)
        return 0;
    cfg.algorithm = (sl_algorithm)(data[0] % SL_ALGORITHM_COUNT);
    cfg.limit = 1 + (data[1] & 15);
    cfg.period = periods[(data[0] >> 3) % 8];
    if ((data[1] & 0x10) && cfg.algorithm <= SL_LEAKY_BUCKET)
        cfg.burst = 1 + ((data[1] >> 5) & 7);
    if ((data[1] & 0x10) && cfg.algorithm == SL_SLIDING_LOG)
        cfg.flags = SL_LOG_REJECTED;
    if (sl_limit_new(&cfg, &limit, NULL, 0) != 0)
        return 0;
    store = sl_memory_store_new(&mopts);
    if (store == NULL)
        abort();

    data += 2;
    size -= 2;
    start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && data[i] != '\n')
            continue;
        const char *line = (const char *)data + start;
        size_t len = i - start, before = out.len;
        start = i + 1;
        if (i == size && len == 0)
            break; /* no last line after a final '\n' */
        if (near_end_of_time(line, len))
            continue;
        int rc = replay_line(store, limit, line, len, ++lineno, &out);
        if (rc == 0) {
            const char *tok[4];
            size_t tlen[4];
            int ntok = tokenize(line, len, tok, tlen);
            if (ntok == 0 || tok[0][0] == '#') {
                if (out.len != before)
                    broken("a blank or comment line was answered", line, len,
                           rc);
            } else {
                check_answer(&out, before, line, len);
            }
        } else if (rc != 2) {
            broken("store failure", line, len, rc);
        } else if (out.len != before) {
            broken("a bad line was answered", line, len, rc);
        }
        out.len = 0; /* never flush to stdout */
    }
    if (sl__memory_check(store) != 0)
        broken("store invariants", "", 0, 0);
    sl_store_free(store);
    sl_limit_free(limit);
    return 0;
}
