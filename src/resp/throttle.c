/*
 * throttle.c - CL.THROTTLE (redis-cell) and GCRA (Redis 8.8) on sluice's
 * GCRA (throttle.h).
 *
 * Both commands define a GCRA by an emission interval T and a capacity
 * B = max_burst + 1: a request of cost c is allowed when
 * max(TAT, now) + c*T - now <= B*T.  sluice's gcra with limit 1 per
 * period T and burst B is exactly that, so each command's T is computed
 * as the command computes it (redis-cell: period in whole seconds over
 * count, truncated to ns; Redis: a fractional period over the count,
 * rounded to whole microseconds) and the decision itself is sluice's,
 * exact in ns.  What differs between the two is only the wording of
 * errors and the rounding of the reply, both kept here.
 *
 * Each command's limits are their own (the limit's id), so a key used by
 * CL.THROTTLE, GCRA and the rules never shares a counter by accident.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "resp/resp_reply.h"
#include "resp/throttle.h"

/* The limits' ids: "cl.throt" and "gcra" in ASCII. */
#define CELL_LIMIT_ID UINT64_C(0x636c2e7468726f74)
#define GCRA_LIMIT_ID UINT64_C(0x67637261)

#define CELL_USAGE                                                             \
    "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> "     \
    "<period> [<quantity>]"

/* The error reply's text: msg, then the first 64 bytes of arg if any. */
static int fail(char *err, size_t errlen, const char *msg, const rp_str *arg)
{
    int n = arg ? (int)(arg->len < 64 ? arg->len : 64) : 0;
    snprintf(err, errlen, "%s%.*s", msg, n, arg ? arg->p : "");
    /* Keep the reply one line whatever the client sent. */
    for (char *s = err; *s; s++)
        if ((unsigned char)*s < 0x20)
            *s = '?';
    return -1;
}

/* A signed decimal integer as Rust's i64 parse and Redis's string2ll
 * read it (an optional sign, digits, nothing else): 0, or -1. */
static int read_i64(const rp_str *a, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (a->len == 0 || a->len > 20)
        return -1;
    if (a->p[0] == '-' || a->p[0] == '+') {
        neg = a->p[0] == '-';
        if (++i == a->len)
            return -1;
    }
    uint64_t v = 0;
    for (; i < a->len; i++) {
        if (a->p[i] < '0' || a->p[i] > '9')
            return -1;
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(a->p[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* redis-cell: every argument an i64 (a negative one is refused here,
 * where redis-cell would compute with it); T = period s / count,
 * truncated to whole ns as its f64 division does. */
static int read_cell(const rp_str *argv, size_t argc, rp_throttle *t, char *err,
                     size_t errlen)
{
    int64_t v[4] = {0, 0, 0, 1};
    static const char *const names[] = {"max_burst", "count per period",
                                        "period", "quantity"};
    if (argc != 5 && argc != 6)
        return fail(err, errlen, CELL_USAGE, NULL);
    for (size_t i = 0; i + 2 < argc; i++) {
        if (read_i64(&argv[i + 2], &v[i]) != 0)
            return fail(err, errlen, "Cell error: Couldn't parse as integer: ",
                        &argv[i + 2]);
        if (v[i] < 0) {
            char msg[64];
            snprintf(msg, sizeof(msg),
                     "Cell error: %s must not be negative: ", names[i]);
            return fail(err, errlen, msg, &argv[i + 2]);
        }
    }
    int64_t max_burst = v[0], count = v[1], period = v[2];
    if (period > SL_MAX_TIME / SL_NS_PER_SEC)
        return fail(err, errlen, "Cell error: period too large: ", &argv[4]);
    double ns = (double)(period * SL_NS_PER_SEC);
    sl_nanos interval = count == 0 ? 0 : (sl_nanos)(ns / (double)count);
    if (interval == 0)
        return fail(err, errlen, "Cell error: Zero rates are not supported",
                    NULL);
    /* sluice's bounds: 2^40 units, and B*T (the longest the schedule
     * runs ahead) within 2^62 ns. */
    if (max_burst >= SL_MAX_COUNT || max_burst + 1 > SL_MAX_TIME / interval)
        return fail(err, errlen, "Cell error: max_burst too large: ", &argv[2]);
    if (v[3] > SL_MAX_COUNT)
        return fail(err, errlen, "Cell error: quantity too large: ", &argv[5]);
    t->cfg = (sl_limit_config){.algorithm = SL_GCRA,
                               .limit = 1,
                               .period = interval,
                               .burst = max_burst + 1,
                               .id = CELL_LIMIT_ID};
    t->cost = v[3];
    return 0;
}

static int read_long(const rp_str *a, int64_t min, int64_t *out, char *err,
                     size_t errlen)
{
    if (read_i64(a, out) != 0)
        return fail(err, errlen, "ERR value is not an integer or out of range",
                    NULL);
    if (*out < min) {
        if (min == 0)
            return fail(err, errlen,
                        "ERR value is out of range, must be positive", NULL);
        return fail(err, errlen,
                    "ERR value is out of range, value must between 1 and "
                    "9223372036854775807",
                    NULL);
    }
    return 0;
}

/* A float as Redis's getDoubleFromObject reads one: strtod over the
 * whole argument, no spaces, not NaN. */
static int read_double(const rp_str *a, double *out)
{
    char text[64];
    if (a->len == 0 || a->len >= sizeof(text))
        return -1;
    memcpy(text, a->p, a->len);
    text[a->len] = '\0';
    if (text[0] == ' ' || text[0] == '\t')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end != text + a->len || errno == ERANGE || isnan(v))
        return -1;
    *out = v;
    return 0;
}

/* Redis's GCRA: T = period * 1e6 / tokens_per_period, rounded to whole
 * microseconds, at least one. */
static int read_gcra(const rp_str *argv, size_t argc, rp_throttle *t, char *err,
                     size_t errlen)
{
    int64_t max_burst, per_period, tokens = 1;
    double period;
    if (argc < 5 || argc > 7)
        return fail(err, errlen,
                    "ERR wrong number of arguments for 'gcra' command", NULL);
    if (read_long(&argv[2], 0, &max_burst, err, errlen) != 0 ||
        read_long(&argv[3], 1, &per_period, err, errlen) != 0)
        return -1;
    if (read_double(&argv[4], &period) != 0)
        return fail(err, errlen, "ERR value is not a valid float", NULL);
    if (!(period > 0) || period >= 1e12)
        return fail(err, errlen, "ERR period must be > 0 and < 1e12", NULL);
    if (argc >= 6) {
        if (argv[5].len != 6 || strncasecmp(argv[5].p, "tokens", 6) != 0)
            return fail(err, errlen, "ERR syntax error", NULL);
        if (argc == 6)
            return fail(err, errlen, "ERR Missing TOKENS value", NULL);
        if (read_long(&argv[6], 1, &tokens, err, errlen) != 0)
            return -1;
    }
    long long us = (long long)(period * 1e6 / (double)per_period + 0.5);
    if (us == 0)
        us = 1;
    /* Redis refuses what overflows its microseconds; sluice's bounds
     * (2^40 units, B*T within 2^62 ns) are narrower, and worded alike. */
    if (us > SL_MAX_TIME / SL_NS_PER_US || max_burst >= SL_MAX_COUNT ||
        (sl_nanos)us * SL_NS_PER_US > SL_MAX_TIME / (max_burst + 1))
        return fail(err, errlen,
                    "ERR GCRA limiting uses microsecond accuracy. Combination "
                    "of period, tokens_per_period and max_burst would cause "
                    "an overflow",
                    NULL);
    if (tokens > SL_MAX_COUNT)
        return fail(err, errlen,
                    "ERR GCRA limiting uses microsecond accuracy. Combination "
                    "of period, tokens_per_period and TOKENS would cause an "
                    "overflow",
                    NULL);
    t->cfg = (sl_limit_config){.algorithm = SL_GCRA,
                               .limit = 1,
                               .period = (sl_nanos)us * SL_NS_PER_US,
                               .burst = max_burst + 1,
                               .id = GCRA_LIMIT_ID};
    t->cost = tokens;
    return 0;
}

int rp_throttle_read(rp_throttle_kind kind, const rp_str *argv, size_t argc,
                     rp_throttle *t, char *err, size_t errlen)
{
    t->kind = kind;
    return kind == RP_CELL ? read_cell(argv, argc, t, err, errlen)
                           : read_gcra(argv, argc, t, err, errlen);
}

/* redis-cell: whole seconds, plus one when at least a millisecond is
 * left over (so a fraction under 1 ms rounds down, as it does there). */
static long long cell_seconds(sl_nanos ns)
{
    long long s = ns / SL_NS_PER_SEC;
    return s + ((ns % SL_NS_PER_SEC) / SL_NS_PER_MS > 0);
}

/* Redis: ceil() of the seconds. */
static long long ceil_seconds(sl_nanos ns)
{
    return ns / SL_NS_PER_SEC + (ns % SL_NS_PER_SEC > 0);
}

void rp_throttle_reply(const rp_throttle *t, const sl_decision *d, sv_buf *out)
{
    int64_t capacity = t->cfg.burst;
    sl_nanos interval = t->cfg.period;
    /* The time until the schedule is empty again: the lead of the TAT
     * over now, after the request when it passed. */
    sl_nanos ttl = d->reset_after;
    int64_t remaining = d->remaining;
    long long retry, reset;
    if (t->kind == RP_CELL) {
        /* redis-cell divides whole microseconds as f64 and truncates; a
         * division by zero microseconds saturates as Rust's cast does. */
        int64_t next_us = (capacity * interval - ttl) / SL_NS_PER_US;
        int64_t t_us = interval / SL_NS_PER_US;
        if (capacity * interval - ttl <= -interval)
            remaining = 0;
        else if (t_us == 0)
            remaining = next_us > 0 ? INT64_MAX : 0;
        else
            remaining = (int64_t)((double)next_us / (double)t_us);
        retry = d->allowed || d->retry_after < 0 ? -1
                                                 : cell_seconds(d->retry_after);
        reset = cell_seconds(ttl);
    } else {
        retry = d->allowed || d->retry_after < 0 ? -1
                                                 : ceil_seconds(d->retry_after);
        reset = ceil_seconds(ttl);
    }
    rp_add_array(out, 5);
    rp_add_int(out, !d->allowed);
    rp_add_int(out, capacity);
    rp_add_int(out, remaining);
    rp_add_int(out, retry);
    rp_add_int(out, reset);
}
