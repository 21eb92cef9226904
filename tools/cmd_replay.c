/*
 * replay.c - `sluice replay`: decides a trace read on stdin, one output
 * line per request.  This is how exactness is checked at scale: a trace
 * and its expected answers can be produced by any independent model and
 * compared line by line.
 *
 * input:  t_ns key [cost]          (blank lines and '#' comments skipped)
 * output: allowed remaining retry_after_ns reset_after_ns delay_ns
 *
 * Throughput matters (tens of millions of lines), so input is read in
 * large blocks and output is formatted by hand into one buffer.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "sluice.h"

static const char replay_usage[] =
    "usage: sluice replay --algorithm NAME --limit L --period DURATION\n"
    "                     [--burst B] [--step DURATION] [--log-rejected]\n"
    "                     [--memory BYTES]\n"
    "\n"
    "Reads lines 't_ns key [cost]' on stdin (cost defaults to 1) and writes\n"
    "one line per request: 'allowed remaining retry_after_ns reset_after_ns\n"
    "delay_ns' (retry_after_ns is -1 when the request can never pass).\n"
    "Algorithms: token_bucket gcra leaky_bucket fixed_window sliding_log\n"
    "sliding_window stepped_window.  Durations: 1500 (ns), 500ms, 1s, 1m,\n"
    "1h, 1d.  --memory caps the store (default 4 GiB); evictions are\n"
    "reported on stderr because they change decisions.\n"
    "Exit status: 0 ok, 1 store failure, 2 bad arguments or input.\n"
    "With --adaptive it replays the adaptive controller's signals instead\n"
    "(sluice replay --adaptive --help).\n";

void cmd_replay_usage(FILE *to)
{
    fputs(replay_usage, to);
}

enum { OUT_FLUSH = 1 << 16 };

/* How much of a bad token an error message quotes. */
#define SHOWN(len) ((int)((len) > 64 ? 64 : (len)))

typedef struct out_buf {
    char data[OUT_FLUSH + 128];
    size_t len;
} out_buf;

static int out_flush(out_buf *o)
{
    size_t off = 0;
    while (off < o->len) {
        ssize_t w = write(STDOUT_FILENO, o->data + off, o->len - off);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    o->len = 0;
    return 0;
}

static void out_int(out_buf *o, int64_t v, char sep)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        o->data[o->len++] = '-';
    while (n > 0)
        o->data[o->len++] = tmp[--n];
    o->data[o->len++] = sep;
}

/* A whole non-negative decimal number, the whole token. */
static int parse_uint(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;
    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, s[i] - '0', &v))
            return -1;
    }
    *out = v;
    return 0;
}

static int bad_arg(const char *what, const char *value, const char *why)
{
    fprintf(stderr, "sluice replay: invalid %s: '%s'%s%s\n", what, value,
            why ? ": " : "", why ? why : "");
    return 2;
}

/* Splits a line into whitespace-separated tokens, keeping the first 4;
 * returns how many there are in all. */
static int tokenize(const char *line, size_t len, const char **tok,
                    size_t *tlen)
{
    int n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len &&
               (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
            i++;
        if (i == len)
            break;
        const char *start = line + i;
        while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            i++;
        if (n < 4) {
            tok[n] = start;
            tlen[n] = (size_t)(line + i - start);
        }
        n++;
    }
    return n;
}

static int replay_line(sl_store *store, const sl_limit *limit, const char *line,
                       size_t len, uint64_t lineno, out_buf *out)
{
    const char *tok[4];
    size_t tlen[4];
    int64_t t, cost = 1;
    sl_decision d;
    int n = tokenize(line, len, tok, tlen), err;

    if (n == 0 || tok[0][0] == '#')
        return 0;
    if (n < 2 || n > 3) {
        fprintf(stderr,
                "sluice replay: line %llu: expected 't_ns key [cost]', got "
                "%d field%s\n",
                (unsigned long long)lineno, n, n == 1 ? "" : "s");
        return 2;
    }
    if (parse_uint(tok[0], tlen[0], &t) != 0 || t > SL_MAX_TIME) {
        fprintf(stderr,
                "sluice replay: line %llu: invalid time: '%.*s' (a whole "
                "number of ns, 0 to 2^62)\n",
                (unsigned long long)lineno, SHOWN(tlen[0]), tok[0]);
        return 2;
    }
    if (n == 3 &&
        (parse_uint(tok[2], tlen[2], &cost) != 0 || cost > SL_MAX_COUNT)) {
        fprintf(stderr,
                "sluice replay: line %llu: invalid cost: '%.*s' (0 to "
                "2^40)\n",
                (unsigned long long)lineno, SHOWN(tlen[2]), tok[2]);
        return 2;
    }
    err = sl_check(store, limit, tok[1], tlen[1], cost, t, &d);
    if (err == SL_EKEYLEN) {
        fprintf(stderr, "sluice replay: line %llu: key too long (%zu bytes)\n",
                (unsigned long long)lineno, tlen[1]);
        return 2;
    }
    if (err != 0) {
        fprintf(stderr, "sluice replay: line %llu: %s\n",
                (unsigned long long)lineno, sl_strerror(err));
        return 1;
    }
    out_int(out, d.allowed, ' ');
    out_int(out, d.remaining, ' ');
    out_int(out, d.retry_after, ' ');
    out_int(out, d.reset_after, ' ');
    out_int(out, d.delay, '\n');
    if (out->len >= OUT_FLUSH && out_flush(out) != 0)
        return 1;
    return 0;
}

/* Reads stdin in blocks and replays each complete line. */
static int replay_stream(sl_store *store, const sl_limit *limit)
{
    size_t cap = 1 << 20, have = 0;
    char *buf = malloc(cap);
    out_buf *out = malloc(sizeof(*out));
    uint64_t lineno = 0;
    int rc = 0;

    if (buf == NULL || out == NULL) {
        free(buf);
        free(out);
        fprintf(stderr, "sluice replay: out of memory\n");
        return 1;
    }
    out->len = 0;
    for (;;) {
        ssize_t r = read(STDIN_FILENO, buf + have, cap - have);
        if (r < 0) {
            perror("sluice replay: stdin");
            rc = 1;
            break;
        }
        size_t end = have + (size_t)r, start = 0;
        for (size_t i = have; i < end && rc == 0; i++) {
            if (buf[i] != '\n')
                continue;
            rc = replay_line(store, limit, buf + start, i - start, ++lineno,
                             out);
            start = i + 1;
        }
        if (rc != 0)
            break;
        if (r == 0) { /* end of input: a last line without '\n' */
            if (start < end)
                rc = replay_line(store, limit, buf + start, end - start,
                                 ++lineno, out);
            break;
        }
        memmove(buf, buf + start, end - start);
        have = end - start;
        if (have == cap) { /* one line longer than the buffer */
            char *bigger = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
            if (bigger == NULL) {
                fprintf(stderr, "sluice replay: line %llu: line too long\n",
                        (unsigned long long)lineno + 1);
                rc = 2;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (out_flush(out) != 0 && rc == 0) {
        perror("sluice replay: stdout");
        rc = 1;
    }
    free(buf);
    free(out);
    return rc;
}

int cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"algorithm", required_argument, NULL, 'a'},
        {"limit", required_argument, NULL, 'l'},
        {"period", required_argument, NULL, 'p'},
        {"burst", required_argument, NULL, 'b'},
        {"step", required_argument, NULL, 's'},
        {"log-rejected", no_argument, NULL, 'r'},
        {"memory", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    sl_limit_config cfg = {0};
    sl_memory_options mopts = {.size = sizeof(sl_memory_options),
                               .max_bytes = (size_t)4 << 30};
    int have_alg = 0, have_limit = 0, have_period = 0, c, rc;
    char err[160];
    sl_limit *limit;
    sl_store *store;
    int64_t v;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--adaptive") == 0)
            return cmd_replay_adaptive(argc, argv);
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            if (sl_algorithm_parse(optarg, strlen(optarg), &cfg.algorithm))
                return bad_arg("algorithm", optarg, NULL);
            have_alg = 1;
            break;
        case 'l':
        case 'b':
            if (parse_uint(optarg, strlen(optarg), &v) != 0)
                return bad_arg(c == 'l' ? "limit" : "burst", optarg,
                               "a whole number");
            *(c == 'l' ? &cfg.limit : &cfg.burst) = v;
            have_limit |= c == 'l';
            break;
        case 'p':
        case 's':
            if (sl_duration_parse(optarg, strlen(optarg), &v) != 0)
                return bad_arg(c == 'p' ? "period" : "step", optarg,
                               "a duration like 500ms, 1s, 1m");
            *(c == 'p' ? &cfg.period : &cfg.step) = v;
            have_period |= c == 'p';
            break;
        case 'r':
            cfg.flags |= SL_LOG_REJECTED;
            break;
        case 'm':
            if (parse_uint(optarg, strlen(optarg), &v) != 0 || v == 0)
                return bad_arg("memory", optarg, "a number of bytes");
            mopts.max_bytes = (size_t)v;
            break;
        case 'h':
            fputs(replay_usage, stdout);
            return 0;
        default:
            fprintf(stderr,
                    "sluice replay: unknown or incomplete option: '%s'\n\n%s",
                    argv[optind - 1], replay_usage);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice replay: unexpected argument: '%s'\n",
                argv[optind]);
        return 2;
    }
    if (!have_alg || !have_limit || !have_period) {
        fprintf(stderr, "sluice replay: missing %s\n\n%s",
                !have_alg     ? "--algorithm"
                : !have_limit ? "--limit"
                              : "--period",
                replay_usage);
        return 2;
    }
    if ((rc = sl_limit_new(&cfg, &limit, err, sizeof(err))) != 0) {
        fprintf(stderr, "sluice replay: %s\n", err);
        return 2;
    }
    store = sl_memory_store_new(&mopts);
    if (store == NULL) {
        sl_limit_free(limit);
        fprintf(stderr, "sluice replay: out of memory\n");
        return 1;
    }
    rc = replay_stream(store, limit);
    {
        sl_store_stats st;
        sl_store_get_stats(store, &st);
        if (st.evicted > 0)
            fprintf(stderr,
                    "sluice replay: warning: the memory cap evicted %llu keys; "
                    "their decisions restarted from the initial state "
                    "(raise --memory)\n",
                    (unsigned long long)st.evicted);
    }
    sl_store_free(store);
    sl_limit_free(limit);
    return rc;
}
