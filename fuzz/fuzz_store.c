/*
 * fuzz_store.c - libFuzzer target for the decision path: limit
 * configurations, keys, costs and times decoded from the input drive
 * sl_limit_new(), sl_check(), sl_check_multi(), sl_store_sweep() and
 * sl_store_get_stats() on a small memory store (so that it grows, sweeps
 * and evicts), and the store's invariants are checked at the end.
 *
 * Besides crashes and undefined behaviour, every answer is checked:
 *   - errors are exactly the documented ones (SL_EINVAL for now past
 *     SL_MAX_TIME or a duplicate item, SL_ECOST for a bad cost, SL_EKEYLEN
 *     past the key cap, SL_EFULL only when a log would outgrow its share);
 *   - a decision is possible (allowed in {0, 1}; retry_after 0 when
 *     allowed, -1 exactly when the cost exceeds the capacity; remaining in
 *     [0, capacity]; delay only for leaky_bucket);
 *   - a cost-0 query right after a decision reports the same remaining
 *     ("whole units left after this request"), for each item of a multi
 *     call too, which checks that a rejected multi call consumed nothing;
 *   - the overall decision of a multi call combines the items' as
 *     documented;
 *   - overrides (sl_limit_override) of the decoded limits, with any
 *     numbers, fail only as documented, and share their base's state:
 *     right after a decision that leaves r of capacity c (time not
 *     stepping back), a query under a limit of the same identity with
 *     capacity c' reports c' - (c - r) left (0 if less), or at most
 *     c' - c when r is 0 (a count may then be past c).
 *
 * SL_FUZZ_TRACE=1 in the environment prints the decoded limits and calls,
 * which turns a crash file into a reproduction:
 *   SL_FUZZ_TRACE=1 ./fuzz_store crash-...
 *
 * Time mostly stays within 0..SL_MAX_TIME, sometimes steps back a little
 * (clocks read out of order), and sometimes goes past SL_MAX_TIME, where
 * SL_EINVAL is the expected answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LIMITS 4
#define MAX_MULTI 5

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t bytes(reader *r, int k)
{
    uint64_t v = 0;
    for (int i = 0; i < k; i++)
        v |= (uint64_t)u8(r) << (8 * i);
    return v;
}

static int tracing(void)
{
    static int on = -1;
    if (on < 0)
        on = getenv("SL_FUZZ_TRACE") != NULL;
    return on;
}

static void print_decision(const char *what, const sl_decision *d)
{
    if (tracing())
        fprintf(stderr,
                "    %s: allowed %d limit %lld remaining %lld reset_after "
                "%lld retry_after %lld delay %lld\n",
                what, d->allowed, (long long)d->limit,
                (long long)d->remaining, (long long)d->reset_after,
                (long long)d->retry_after, (long long)d->delay);
}

static void broken(const char *what, long long a, long long b)
{
    fprintf(stderr, "fuzz_store: %s (%lld, %lld)\n", what, a, b);
    abort();
}

static int is_bucket(sl_algorithm a)
{
    return a == SL_TOKEN_BUCKET || a == SL_GCRA || a == SL_LEAKY_BUCKET;
}

/* Most units one request may ever take. */
static int64_t capacity(const sl_limit *lim)
{
    const sl_limit_config *c = sl_limit_get_config(lim);
    return is_bucket(c->algorithm) ? c->burst : c->limit;
}

static sl_limit *decode_limit(reader *r)
{
    static const sl_nanos periods[] = {
        1, 3, 1000, SL_NS_PER_MS, SL_NS_PER_SEC, 60 * SL_NS_PER_SEC,
        3600 * SL_NS_PER_SEC, 86400 * SL_NS_PER_SEC, (sl_nanos)1 << 40, 0};
    sl_limit_config c = {0};
    uint8_t sel;
    char err[200];
    sl_limit *lim = NULL;
    int rc;

    c.algorithm = (sl_algorithm)(u8(r) % SL_ALGORITHM_COUNT);
    sel = u8(r);
    switch (sel & 3) {
    case 0: c.limit = 1 + u8(r) % 4; break;
    case 1: c.limit = 1 + u8(r); break;
    case 2: c.limit = 1 + (int64_t)bytes(r, 3); break;
    default: c.limit = (int64_t)(bytes(r, 6) % (uint64_t)SL_MAX_COUNT) + 1; break;
    }
    if (sel & 0x80)
        c.limit = (int64_t)bytes(r, 8); /* anything: validation's turn */
    c.period = periods[u8(r) % 10];
    if (c.period == 0)
        c.period = (sl_nanos)bytes(r, 8);
    switch ((sel >> 2) & 3) {
    case 0: c.burst = 0; break;
    case 1: c.burst = 1 + u8(r) % 8; break;
    case 2: c.burst = c.limit; break;
    default: c.burst = (int64_t)bytes(r, 8); break;
    }
    if ((sel & 0x10) && c.period > 0)
        c.step = c.period / (1 + u8(r) % 16); /* may not divide */
    if (sel & 0x20)
        c.flags = SL_LOG_REJECTED;
    c.id = u8(r) % 3;

    err[0] = '\0';
    rc = sl_limit_new(&c, &lim, err, sizeof(err));
    if (tracing())
        fprintf(stderr,
                "limit: %s limit %lld period %lld burst %lld step %lld "
                "flags %u id %llu -> %s%s%s\n",
                sl_algorithm_name(c.algorithm) ? sl_algorithm_name(c.algorithm) : "?",
                (long long)c.limit, (long long)c.period, (long long)c.burst,
                (long long)c.step, c.flags, (unsigned long long)c.id,
                sl_err_name(rc), rc ? ": " : "", rc ? err : "");
    if (rc == 0) {
        const sl_limit_config *n = sl_limit_get_config(lim);
        if (n->burst < 1 || n->burst > SL_MAX_COUNT || n->limit < 1 ||
            n->limit > SL_MAX_COUNT || n->period < 1)
            broken("a limit out of range was accepted", n->limit, n->burst);
        if (n->algorithm == SL_STEPPED_WINDOW &&
            (n->step < 1 || n->period % n->step != 0))
            broken("stepped_window step does not divide the period",
                   n->step, n->period);
        return lim;
    }
    if (rc != SL_EINVAL && rc != SL_ERANGE)
        broken("sl_limit_new: unexpected error", rc, 0);
    if (err[0] == '\0')
        broken("sl_limit_new failed without a message", rc, 0);
    return NULL;
}

/* An override of `base` with decoded numbers, or NULL where
 * sl_limit_override refuses them (as documented). */
static sl_limit *decode_override(reader *r, const sl_limit *base)
{
    const sl_limit_config *b = sl_limit_get_config(base);
    uint8_t sel = u8(r);
    int64_t limit, burst;
    char err[200];
    sl_limit *lim = NULL;
    int rc;

    switch (sel & 3) {
    case 0:
        limit = 0;
        break;
    case 1:
        limit = u8(r) % 8;
        break;
    case 2:
        limit = b->limit + (int64_t)(int8_t)u8(r);
        break;
    default:
        limit = (int64_t)bytes(r, 8);
        break;
    }
    switch ((sel >> 2) & 3) {
    case 0:
        burst = 0;
        break;
    case 1:
        burst = 1 + u8(r) % 8;
        break;
    case 2:
        burst = limit;
        break;
    default:
        burst = (int64_t)bytes(r, 8);
        break;
    }
    err[0] = '\0';
    rc = sl_limit_override(base, limit, burst, &lim, err, sizeof(err));
    if (tracing())
        fprintf(stderr, "override: limit %lld burst %lld -> %s%s%s\n",
                (long long)limit, (long long)burst, sl_err_name(rc),
                rc ? ": " : "", rc ? err : "");
    if (rc == 0) {
        const sl_limit_config *n = sl_limit_get_config(lim);
        if (n->limit != limit || n->period != b->period ||
            n->algorithm != b->algorithm || n->step != b->step ||
            lim->ident != base->ident)
            broken("an override changed more than L and B", n->limit, limit);
        if (n->burst < 0 || n->burst > SL_MAX_COUNT ||
            (is_bucket(n->algorithm) ? (burst != 0 && n->burst != burst) ||
                                           (limit > 0) != (n->burst > 0)
                                     : n->burst != limit))
            broken("an override's burst is not the one asked for", n->burst,
                   burst);
        return lim;
    }
    if (rc != SL_EINVAL && rc != SL_ERANGE)
        broken("sl_limit_override: unexpected error", rc, 0);
    if (err[0] == '\0')
        broken("sl_limit_override failed without a message", rc, 0);
    return NULL;
}

static int64_t decode_cost(reader *r)
{
    uint8_t b = u8(r);
    switch (b % 16) {
    case 12: return SL_MAX_COUNT;
    case 13: return SL_MAX_COUNT + 1;
    case 14: return -1 - (int64_t)(b >> 4);
    case 15: return (int64_t)bytes(r, 5);
    default: return b % 4 + (b % 16 >= 8 ? 4 : 0);
    }
}

static sl_nanos advance(reader *r, sl_nanos now)
{
    uint8_t b = u8(r);
    sl_nanos dt = (sl_nanos)(b & 15) << (2 * (b >> 4 & 7)) << (b >> 7 ? 16 : 0);
    if ((b & 0x0f) == 0x0f) /* a clock read a little out of order */
        return now > dt ? now - dt : 0;
    if (b == 0xfe) /* past the end of time: SL_EINVAL */
        return SL_MAX_TIME + 1 + (sl_nanos)(b & 1);
    if (now > SL_MAX_TIME)
        now = SL_MAX_TIME - dt;
    return now + dt <= SL_MAX_TIME ? now + dt : SL_MAX_TIME;
}

static size_t decode_key(reader *r, char *key)
{
    size_t len = u8(r) % 20;
    for (size_t i = 0; i < len; i++)
        key[i] = (char)(u8(r) % 4 + 'a'); /* few keys, so they meet again */
    return len;
}

static void check_decision(const sl_decision *d, const sl_limit *lim,
                           int64_t cost)
{
    const sl_limit_config *c = sl_limit_get_config(lim);
    int64_t cap = capacity(lim);

    if (d->allowed != 0 && d->allowed != 1)
        broken("allowed is not 0 or 1", d->allowed, 0);
    if (d->limit != c->limit)
        broken("limit differs from the configuration", d->limit, c->limit);
    if (d->allowed && d->retry_after != 0)
        broken("allowed with a retry_after", d->retry_after, cost);
    if (!d->allowed && d->retry_after == 0)
        broken("rejected with retry_after 0", cost, c->algorithm);
    if (d->retry_after < -1)
        broken("retry_after below -1", d->retry_after, cost);
    if ((d->retry_after == -1) != (cost > cap))
        broken("retry_after -1 but for a cost over the capacity",
               d->retry_after, cost);
    if (d->reset_after < 0 || d->delay < 0)
        broken("negative reset_after or delay", d->reset_after, d->delay);
    if (d->delay > 0 && (c->algorithm != SL_LEAKY_BUCKET || !d->allowed))
        broken("delay outside an allowed leaky_bucket request", d->delay,
               c->algorithm);
    if (d->remaining < 0 || d->remaining > cap)
        broken("remaining outside [0, capacity]", d->remaining, cap);
    if (cost == 0 && !d->allowed)
        broken("a query was rejected", c->algorithm, 0);
}

/* The latest now the input has used: a sibling's query is compared only
 * when time has not stepped back (a bucket judges a stale stamp at its
 * latest admission, which its sibling's conversion does not). */
static sl_nanos latest;

/* Whether this input's store has a small cap (it may then evict). */
static int small_cap;

static uint64_t evictions(sl_store *st)
{
    sl_store_stats s;
    if (!small_cap)
        return 0; /* 256 MiB: far more than an input can fill */
    sl_store_get_stats(st, &s);
    return s.evicted;
}

/*
 * A query at the same instant must see what the decision left, unless the
 * key was evicted in between: at a small cap a shard can stay over its
 * share while the keys of a call are protected, and the next call (the
 * query of another item, say) evicts.  evicted_before is the count when
 * the decision returned.
 */
static void check_query(sl_store *st, const sl_limit *lim, const char *key,
                        size_t len, sl_nanos now, const sl_decision *d,
                        uint64_t evicted_before)
{
    sl_decision q;
    int rc;
    if (evictions(st) != evicted_before)
        return;
    rc = sl_check(st, lim, key, len, 0, now, &q);
    if (rc != 0)
        broken("query failed", rc, 0);
    print_decision("query", &q);
    check_decision(&q, lim, 0);
    if (q.remaining != d->remaining)
        broken("a query right after the decision disagrees on remaining",
               q.remaining, d->remaining);
}

/* What a query under a limit of the same identity (an override, or the
 * base of one) sees right after a decision: the same units used. */
static void check_siblings(sl_store *st, sl_limit *const *lims, int nlim,
                           const sl_limit *lim, const char *key, size_t len,
                           sl_nanos now, const sl_decision *d,
                           uint64_t evicted_before)
{
    const int64_t cap = capacity(lim);
    int64_t left = d->remaining;
    if (now < latest || cap == 0)
        return;
    for (int i = 0; i < nlim; i++) {
        const sl_limit *o = lims[i];
        int64_t want = capacity(o) - (cap - left);
        sl_decision q;
        if (o == lim || o->ident != lim->ident ||
            evictions(st) != evicted_before)
            continue;
        if (sl_check(st, o, key, len, 0, now, &q) != 0)
            broken("a sibling's query failed", 0, 0);
        print_decision("sibling query", &q);
        check_decision(&q, o, 0);
        if (want < 0)
            want = 0;
        if (left > 0 ? q.remaining != want : q.remaining > want)
            broken("a sibling sees other units used", q.remaining, want);
        /* Its query may have emptied a bucket past its smaller burst:
         * what lim sees now is what the next sibling is compared with. */
        if (sl_check(st, lim, key, len, 0, now, &q) != 0)
            broken("a query after a sibling's failed", 0, 0);
        left = q.remaining;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[] = {0, 256 << 10, 1 << 20};
    static const size_t key_caps[] = {0, 4, 16};
    reader r = {data, size};
    sl_limit *lims[MAX_LIMITS];
    int nlim = 0, want = 1 + u8(&r) % MAX_LIMITS;
    uint8_t so = u8(&r);
    sl_memory_options o = {.size = sizeof(sl_memory_options),
                           .max_bytes = caps[so % 3],
                           .max_key_len = key_caps[(so / 3) % 3],
                           .seed0 = 1,
                           .seed1 = 2};
    size_t max_key = o.max_key_len ? o.max_key_len : 4096;
    sl_nanos now = (sl_nanos)bytes(&r, 5);
    sl_store *st;

    latest = 0;
    for (int i = 0; i < want; i++) {
        /* Every other limit after the first may be an override. */
        uint8_t how = i > 0 && nlim > 0 ? u8(&r) : 0;
        sl_limit *l = how & 1 ? decode_override(&r, lims[(how >> 1) % nlim])
                              : decode_limit(&r);
        if (l != NULL)
            lims[nlim++] = l;
    }
    if (nlim == 0)
        return 0;
    small_cap = o.max_bytes != 0;
    st = sl_memory_store_new(&o);
    if (st == NULL)
        abort();

    for (int op = 0; r.n > 0 && op < 4000; op++) {
        uint8_t kind = u8(&r) % 8;
        now = advance(&r, now);
        if (kind < 4) {
            const sl_limit *lim = lims[u8(&r) % nlim];
            char key[20];
            size_t len = decode_key(&r, key);
            int64_t cost = decode_cost(&r);
            sl_decision d;
            int rc = sl_check(st, lim, key, len, cost, now, &d);
            if (tracing())
                fprintf(stderr, "check: limit %d key '%.*s' cost %lld now %lld -> %s\n",
                        (int)(lim == lims[0] ? 0 : lim == lims[1] ? 1 : lim == lims[2] ? 2 : 3),
                        (int)len, key, (long long)cost, (long long)now,
                        sl_err_name(rc));
            if (rc == 0)
                print_decision("decision", &d);
            int expect = now > SL_MAX_TIME                   ? SL_EINVAL
                         : cost < 0 || cost > SL_MAX_COUNT ? SL_ECOST
                         : len > max_key                   ? SL_EKEYLEN
                                                           : 0;
            /* A log may not outgrow half its shard's share of the cap. */
            if (rc == SL_EFULL && expect == 0 && lim->algo->heap)
                continue;
            if (rc != expect)
                broken("sl_check: unexpected result", rc, expect);
            if (rc == 0) {
                check_decision(&d, lim, cost);
                check_query(st, lim, key, len, now, &d, evictions(st));
                check_siblings(st, lims, nlim, lim, key, len, now, &d,
                               evictions(st));
            }
            if (rc == 0 && now > latest)
                latest = now;
        } else if (kind < 6) {
            sl_check_item items[MAX_MULTI];
            char keys[MAX_MULTI][20];
            sl_decision each[MAX_MULTI], overall;
            size_t n = 1 + u8(&r) % MAX_MULTI;
            int64_t costs[MAX_MULTI];
            /* bit 0: a cost per item (sl_check_costs); bit 1: SL_RECORD */
            unsigned how = u8(&r) % 4, flags = how & 2 ? SL_RECORD : 0;
            int expect = 0, all = 1;
            for (size_t i = 0; i < n; i++) {
                items[i].limit = lims[u8(&r) % nlim];
                items[i].key = keys[i];
                items[i].key_len = decode_key(&r, keys[i]);
            }
            costs[0] = decode_cost(&r);
            for (size_t i = 1; i < n; i++)
                costs[i] = how & 1 ? decode_cost(&r) : costs[0];
            for (size_t i = 0; i < n && expect == 0; i++)
                for (size_t j = 0; j < i; j++)
                    if (items[i].limit->ident == items[j].limit->ident &&
                        items[i].key_len == items[j].key_len &&
                        memcmp(keys[i], keys[j], items[i].key_len) == 0)
                        expect = SL_EINVAL;
            for (size_t i = 0; i < n; i++)
                if (items[i].key_len > max_key)
                    expect = SL_EKEYLEN;
            for (size_t i = 0; i < n; i++)
                if (costs[i] < 0 || costs[i] > SL_MAX_COUNT)
                    expect = SL_ECOST;
            if (now > SL_MAX_TIME)
                expect = SL_EINVAL;
            int rc = how == 0 ? sl_check_multi(st, items, n, costs[0], now,
                                               each, &overall)
                              : sl_check_costs(st, items, costs, n, now, flags,
                                               each, &overall);
            int logs = 0;
            for (size_t i = 0; i < n; i++)
                logs |= items[i].limit->algo->heap;
            if (tracing()) {
                fprintf(stderr, "multi: how %u now %lld -> %s\n", how,
                        (long long)now, sl_err_name(rc));
                for (size_t i = 0; i < n; i++) {
                    fprintf(stderr, "  item: limit %s key '%.*s' cost %lld\n",
                            sl_algorithm_name(items[i].limit->cfg.algorithm),
                            (int)items[i].key_len, keys[i],
                            (long long)costs[i]);
                    if (rc == 0)
                        print_decision("each", &each[i]);
                }
                if (rc == 0)
                    print_decision("overall", &overall);
            }
            if (rc == SL_EFULL && expect == 0 && logs)
                continue;
            if (rc != expect)
                broken("multi check: unexpected result", rc, expect);
            if (rc != 0)
                continue;
            int64_t least = INT64_MAX;
            sl_nanos reset = 0, delay = 0;
            for (size_t i = 0; i < n; i++) {
                check_decision(&each[i], items[i].limit, costs[i]);
                all &= each[i].allowed;
                least = each[i].remaining < least ? each[i].remaining : least;
                reset = each[i].reset_after > reset ? each[i].reset_after : reset;
                delay = each[i].delay > delay ? each[i].delay : delay;
            }
            if (overall.allowed != all || overall.remaining != least ||
                overall.reset_after != reset ||
                overall.delay != (all ? delay : 0))
                broken("overall decision does not combine the items",
                       overall.allowed, all);
            uint64_t evicted = evictions(st);
            for (size_t i = 0; i < n; i++)
                check_query(st, items[i].limit, keys[i], items[i].key_len,
                            now, &each[i], evicted);
            if (now > latest)
                latest = now;
        } else if (kind == 6) {
            size_t max_slots = u8(&r);
            size_t got;
            if (max_slots == 255)
                max_slots = SIZE_MAX;
            got = sl_store_sweep(st, now, max_slots);
            if (tracing())
                fprintf(stderr, "sweep: now %lld max_slots %zu -> %zu\n",
                        (long long)now, max_slots, got);
        } else {
            sl_store_stats s;
            size_t want_cap = o.max_bytes ? o.max_bytes : (size_t)256 << 20;
            sl_store_get_stats(st, &s);
            /* Caps below the floor (about 256 KiB) are raised to it. */
            if (s.max_bytes < want_cap ||
                (s.max_bytes != want_cap && want_cap >= (320u << 10)))
                broken("stats: not the cap asked for",
                       (long long)s.max_bytes, (long long)want_cap);
            if (s.bytes > s.max_bytes)
                broken("stats: bytes over the cap between calls",
                       (long long)s.bytes, (long long)s.max_bytes);
        }
    }
    if (sl__memory_check(st) != 0)
        broken("store invariants (sl__memory_check)", 0, 0);
    sl_store_free(st);
    for (int i = 0; i < nlim; i++)
        sl_limit_free(lims[i]);
    return 0;
}
