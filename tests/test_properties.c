/*
 * test_properties.c - every algorithm on long seeded random traces
 * (several keys, bursts, idle gaps, requests landing exactly on window
 * edges and exactly P after earlier ones, costs from 0 to past the limit):
 *
 *   - decision for decision, the library agrees with a reference model
 *     written straight from the specification in this file: tokens as an
 *     exact fraction in 128 bits, the sliding log as a plain array of
 *     timestamps, the sliding window with exact integer floors and a
 *     binary search for retry_after, the stepped window with the paper's
 *     loop "while the usage does not fit: t += k";
 *   - the limit itself holds on what was admitted, checked from the
 *     admitted requests alone: no window (t - P, t] of a sliding log holds
 *     more than L, no fixed window or window of P / k steps more than L,
 *     the buckets admit at most B + (t1 - t0) L / P over any [t0, t1]
 *     (exactly, in integers), the sliding window's estimate plus cost never
 *     exceeds L at admission;
 *   - retry_after is the smallest wait (replaying the same history into a
 *     fresh key, the request passes at t + r and not at t + r - 1) and
 *     remaining is exact (that many unit requests pass, one more does
 *     not), on shorter traces since each check replays the history;
 *   - requests stamped a little in the past gain nothing: stamped with the
 *     latest time the key had admitted, the admitted requests still obey
 *     the limit.
 *
 * SL_TEST_QUICK=1 (the sanitizer runs) shortens the traces.
 */
#include "testutil.h"

#define NKEYS 5

static const char *const key_names[NKEYS] = {"k0", "k1", "k2", "k3", "k4"};

typedef struct config {
    const char *name;
    sl_algorithm alg;
    int64_t limit;
    sl_nanos period;
    int64_t burst;  /* 0: L */
    sl_nanos step;  /* stepped_window; 0: the default */
    unsigned flags;
} config;

typedef struct req {
    int key;
    sl_nanos t;
    int64_t cost;
} req;

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA ||
           alg == SL_LEAKY_BUCKET;
}

/* The largest cost that can ever pass. */
static int64_t capacity(const sl_limit_config *c)
{
    return is_bucket(c->algorithm) ? c->burst : c->limit;
}

static size_t trace_len(size_t normal, size_t quick)
{
    return tu_quick() ? quick : normal;
}

/* ==== random traces ==== */

enum { TRACE_PLAIN = 0, TRACE_JITTER = 1 };

/*
 * n requests over nkeys keys, times non-decreasing (TRACE_PLAIN).  Gaps are
 * mostly 0 to P / L per key, so that every window fills up and requests
 * are refused, with now and then a long idle gap, a jump to the next
 * window or step edge, or a jump to exactly P (or P - 1 ns) after one of
 * the key's recent requests.  Costs: 0 (queries), 1, up to the capacity,
 * and now and then past it.
 *
 * TRACE_JITTER stamps 15% of the requests up to P / 3 in the past, and
 * keeps costs in 1 .. capacity: a query or a never-fitting request at a
 * later time erases state (a known bug, test_algorithms.c), which this
 * property is not about.
 */
static void gen_trace(const sl_limit_config *c, uint64_t seed, req *out,
                      size_t n, int nkeys, int mode)
{
    uint64_t s = seed * UINT64_C(0x2545f4914f6cdd1d) + 12345;
    const int64_t cap = capacity(c);
    const sl_nanos P = c->period;
    const sl_nanos unit = c->algorithm == SL_STEPPED_WINDOW ? c->step : P;
    /* Gaps are per key: nkeys keys share the trace. */
    const sl_nanos g = P / (2 * c->limit * nkeys) > 1
                           ? P / (2 * c->limit * nkeys)
                           : 1;
    const sl_nanos half = P / (2 * nkeys) + 1;
    sl_nanos recent[NKEYS][8];
    int nrecent[NKEYS] = {0};
    sl_nanos t = tu_below(&s, 3 * P);

    for (size_t i = 0; i < n; i++) {
        int key = (int)tu_below(&s, nkeys);
        int64_t r = tu_below(&s, 100), cost;
        sl_nanos stamp;

        if (r < 40) {
            /* same time */
        } else if (r < 90) {
            t += tu_range(&s, 1, 2 * g);
        } else if (r < 97) {
            t += tu_range(&s, 1, half);
        } else if (r < 99) {
            t += tu_range(&s, P / 2, 3 * P);
        } else {
            int64_t how = tu_below(&s, 4);
            if (how == 0) {
                t = (t / unit + 1) * unit;
            } else if (how == 1) {
                t = (t / P + 1) * P;
            } else if (nrecent[key] > 0) {
                int m = nrecent[key] < 8 ? nrecent[key] : 8;
                sl_nanos x = recent[key][tu_below(&s, m)] + P - (how == 3);
                if (x > t)
                    t = x;
            }
        }

        r = tu_below(&s, 100);
        if (r < 10)
            cost = 0;
        else if (r < 62)
            cost = 1;
        else if (r < 82)
            cost = tu_range(&s, 1, cap / 3 > 1 ? cap / 3 : 1);
        else if (r < 97)
            cost = tu_range(&s, 1, cap);
        else
            cost = cap + tu_range(&s, 1, 3);
        if (cost > SL_MAX_COUNT)
            cost = SL_MAX_COUNT;

        stamp = t;
        if (mode == TRACE_JITTER) {
            if (cost == 0)
                cost = 1;
            if (cost > cap)
                cost = cap;
            if (tu_below(&s, 100) < 15) {
                stamp = t - tu_range(&s, 0, P / 3);
                if (stamp < 0)
                    stamp = 0;
            }
        }
        out[i] = (req){key, stamp, cost};
        recent[key][nrecent[key]++ % 8] = t;
    }
}

/* ==== the reference models ==== */

typedef struct ev {
    sl_nanos at;
    int64_t cost;
} ev;

typedef struct ref_key {
    /* token_bucket: tokens * P; gcra: TAT * L; leaky_bucket: level * P.
     * All exact: every quantity is a whole multiple of 1/P or 1/L. */
    i128 x;
    sl_nanos last;
    int started;
    /* The windows: the requests that count (admitted ones, and logged
     * rejections for SL_LOG_REJECTED), oldest first, from ev[head]. */
    ev *ev;
    size_t head, len, cap;
} ref_key;

typedef struct ref {
    sl_limit_config c; /* normalised: burst and step filled in */
    int64_t nsteps;
    ref_key keys[NKEYS];
} ref;

static void ref_init(ref *r, const sl_limit *lim)
{
    memset(r, 0, sizeof(*r));
    r->c = *sl_limit_get_config(lim);
    if (r->c.algorithm == SL_STEPPED_WINDOW)
        r->nsteps = r->c.period / r->c.step;
}

static void ref_release(ref *r)
{
    for (int k = 0; k < NKEYS; k++)
        free(r->keys[k].ev);
}

static ev *ev_at(ref_key *k, size_t i)
{
    return &k->ev[k->head + i];
}

static void ev_push(ref_key *k, sl_nanos at, int64_t cost)
{
    if (k->head + k->len == k->cap) {
        if (k->head > 0) {
            memmove(k->ev, k->ev + k->head, k->len * sizeof(ev));
            k->head = 0;
        }
        if (k->len == k->cap) {
            k->cap = k->cap ? 2 * k->cap : 64;
            k->ev = realloc(k->ev, k->cap * sizeof(ev));
            assert_non_null(k->ev);
        }
    }
    k->ev[k->head + k->len++] = (ev){at, cost};
}

/* Forgets events at or before `upto`: none of the windows reaches that
 * far back. */
static void ev_forget(ref_key *k, sl_nanos upto)
{
    while (k->len > 0 && ev_at(k, 0)->at <= upto) {
        k->head++;
        k->len--;
    }
}

static void ref_token_bucket(ref *r, ref_key *k, int64_t c, sl_nanos t,
                             sl_decision *d)
{
    const i128 P = r->c.period, L = r->c.limit, B = r->c.burst;
    const i128 full = B * P;

    /* tokens = min(B, tokens + (t - t_last) L / P), starting full. */
    if (!k->started)
        k->x = full;
    else if ((k->x += (i128)(t - k->last) * L) > full)
        k->x = full;
    k->started = 1;
    k->last = t;
    d->allowed = k->x >= c * P;
    if (d->allowed)
        k->x -= c * P;
    d->remaining = (int64_t)tu_floor_div(k->x, P);
    d->reset_after = (sl_nanos)tu_ceil_div(full - k->x, L);
    d->retry_after = d->allowed ? 0
                     : c > B    ? -1
                                : (sl_nanos)tu_ceil_div(c * P - k->x, L);
    d->delay = 0;
}

static void ref_gcra(ref *r, ref_key *k, int64_t c, sl_nanos t,
                     sl_decision *d)
{
    const i128 P = r->c.period, L = r->c.limit, B = r->c.burst;
    const i128 tl = (i128)t * L; /* times in units of 1/L ns */
    i128 tat, nw, ahead;

    /* new = max(TAT, t) + c T; allowed iff new - t <= B T. */
    tat = k->x > tl ? k->x : tl;
    nw = tat + c * P;
    d->allowed = nw - tl <= B * P;
    if (d->allowed)
        k->x = nw;
    ahead = k->x > tl ? k->x - tl : 0;
    d->remaining = (int64_t)tu_floor_div(B * P - ahead, P);
    d->reset_after = (sl_nanos)tu_ceil_div(ahead, L);
    d->retry_after = d->allowed ? 0
                     : c > B    ? -1
                                : (sl_nanos)tu_ceil_div(nw - tl - B * P, L);
    d->delay = 0;
}

static void ref_leaky_bucket(ref *r, ref_key *k, int64_t c, sl_nanos t,
                             sl_decision *d)
{
    const i128 P = r->c.period, L = r->c.limit, B = r->c.burst;

    /* level = (level - (t - t_last) L / P)+; allowed iff level + c <= B,
     * delay = level P / L. */
    if (k->started && (k->x -= (i128)(t - k->last) * L) < 0)
        k->x = 0;
    k->started = 1;
    k->last = t;
    d->allowed = k->x + c * P <= B * P;
    d->delay = d->allowed ? (sl_nanos)tu_ceil_div(k->x, L) : 0;
    if (d->allowed)
        k->x += c * P;
    d->remaining = (int64_t)tu_floor_div(B * P - k->x, P);
    d->reset_after = (sl_nanos)tu_ceil_div(k->x, L);
    d->retry_after =
        d->allowed ? 0
        : c > B    ? -1
                   : (sl_nanos)tu_ceil_div(k->x + c * P - B * P, L);
}

static void ref_fixed_window(ref *r, ref_key *k, int64_t c, sl_nanos t,
                             sl_decision *d)
{
    const sl_nanos P = r->c.period;
    const int64_t L = r->c.limit, w = t / P;
    int64_t count = 0;

    ev_forget(k, t - 3 * P);
    for (size_t i = 0; i < k->len; i++)
        if (ev_at(k, i)->at / P == w)
            count += ev_at(k, i)->cost;
    d->allowed = count + c <= L;
    if (d->allowed && c > 0) {
        ev_push(k, t, c);
        count += c;
    }
    d->remaining = L - count;
    d->reset_after = count > 0 ? (w + 1) * P - t : 0;
    d->retry_after = d->allowed ? 0 : c > L ? -1 : (w + 1) * P - t;
    d->delay = 0;
}

/* The sum of the events in (t - P, t]. */
static int64_t log_sum(ref_key *k, sl_nanos t, sl_nanos P, size_t *entries)
{
    int64_t sum = 0;
    size_t n = 0;
    for (size_t i = k->len; i-- > 0 && ev_at(k, i)->at > t - P;) {
        sum += ev_at(k, i)->cost;
        n++;
    }
    if (entries != NULL)
        *entries = n;
    return sum;
}

static void ref_sliding_log(ref *r, ref_key *k, int64_t c, sl_nanos t,
                            sl_decision *d)
{
    const sl_nanos P = r->c.period;
    const int64_t L = r->c.limit;
    const int log_rejected = (r->c.flags & SL_LOG_REJECTED) != 0;
    size_t entries;
    int64_t sum;

    ev_forget(k, t - P);
    sum = log_sum(k, t, P, &entries);
    d->allowed = c == 0 || sum + c <= L; /* a query always passes */
    if (c > 0 && (d->allowed || log_rejected)) {
        /* Equal times are one entry.  With SL_LOG_REJECTED the log holds
         * at most 2L + 16 entries: past that an attempt joins the newest
         * entry, which takes its (later) time (docs/algorithms.md). */
        if (entries > 0 && (ev_at(k, k->len - 1)->at == t ||
                            (int64_t)entries >= 2 * L + 16)) {
            ev_at(k, k->len - 1)->at = t;
            ev_at(k, k->len - 1)->cost += c;
        } else {
            ev_push(k, t, c);
        }
        sum += c;
    }
    d->remaining = L - sum > 0 ? L - sum : 0;
    d->reset_after = sum > 0 ? ev_at(k, k->len - 1)->at + P - t : 0;
    d->delay = 0;
    if (d->allowed) {
        d->retry_after = 0;
    } else if (c > L) {
        d->retry_after = -1;
    } else {
        /* The oldest entries leave first; the request fits once enough
         * of them are gone. */
        size_t i = 0; /* everything before t - P is forgotten */
        int64_t left = sum;
        while (left + c > L)
            left -= ev_at(k, i++)->cost;
        d->retry_after = ev_at(k, i - 1)->at + P - t;
    }
}

/* The sliding window counter's estimate at t, given the counts of the
 * windows w - 1 and w (w = the window of `now`, counts frozen). */
static int64_t sw_estimate(sl_nanos P, int64_t w, int64_t prev, int64_t cur,
                           sl_nanos t)
{
    int64_t tw = t / P;
    sl_nanos e = t - tw * P;
    if (tw == w)
        return (int64_t)((i128)prev * (P - e) / P) + cur;
    if (tw == w + 1)
        return (int64_t)((i128)cur * (P - e) / P);
    return 0;
}

static void ref_sliding_window(ref *r, ref_key *k, int64_t c, sl_nanos t,
                               sl_decision *d)
{
    const sl_nanos P = r->c.period;
    const int64_t L = r->c.limit, w = t / P;
    int64_t prev = 0, cur = 0, est;

    ev_forget(k, t - 3 * P);
    for (size_t i = 0; i < k->len; i++) {
        int64_t ew = ev_at(k, i)->at / P;
        if (ew == w - 1)
            prev += ev_at(k, i)->cost;
        else if (ew == w)
            cur += ev_at(k, i)->cost;
    }
    est = sw_estimate(P, w, prev, cur, t);
    d->allowed = est + c <= L;
    if (d->allowed && c > 0) {
        ev_push(k, t, c);
        cur += c;
        est += c;
    }
    d->remaining = L - est;
    d->reset_after = cur > 0    ? (w + 2) * P - t
                     : prev > 0 ? (w + 1) * P - t
                                : 0;
    d->delay = 0;
    if (d->allowed) {
        d->retry_after = 0;
    } else if (c > L) {
        d->retry_after = -1;
    } else {
        /* The smallest t' in (t, (w + 2) P] where it fits: the estimate
         * never grows with time, so bisect. */
        sl_nanos lo = t, hi = (w + 2) * P;
        while (hi - lo > 1) {
            sl_nanos mid = lo + (hi - lo) / 2;
            if (sw_estimate(P, w, prev, cur, mid) + c <= L)
                hi = mid;
            else
                lo = mid;
        }
        d->retry_after = hi - t;
    }
}

/* The usage of the window of step s: steps s - n + 1 .. s. */
static int64_t step_usage(ref_key *k, sl_nanos step, int64_t n, int64_t s)
{
    int64_t sum = 0;
    for (size_t i = k->len; i-- > 0;) {
        int64_t es = ev_at(k, i)->at / step;
        if (es <= s - n)
            break;
        if (es <= s)
            sum += ev_at(k, i)->cost;
    }
    return sum;
}

static void ref_stepped_window(ref *r, ref_key *k, int64_t c, sl_nanos t,
                               sl_decision *d)
{
    const sl_nanos step = r->c.step;
    const int64_t L = r->c.limit, n = r->nsteps, s = t / step;
    int64_t usage;

    ev_forget(k, t - 3 * r->c.period);
    usage = step_usage(k, step, n, s);
    d->allowed = usage + c <= L;
    if (d->allowed && c > 0) {
        ev_push(k, t, c);
        usage += c;
    }
    d->remaining = L - usage;
    d->reset_after =
        usage > 0 ? (ev_at(k, k->len - 1)->at / step + n) * step - t : 0;
    d->delay = 0;
    if (d->allowed) {
        d->retry_after = 0;
    } else if (c > L) {
        d->retry_after = -1;
    } else {
        /* The paper: move t forward a step at a time until the usage
         * fits; the wait is to the start of that step. */
        sl_nanos tt = t;
        while (step_usage(k, step, n, tt / step) + c > L)
            tt += step;
        d->retry_after = (tt / step) * step - t;
    }
}

static void ref_check(ref *r, int key, int64_t c, sl_nanos t, sl_decision *d)
{
    ref_key *k = &r->keys[key];
    d->limit = r->c.limit;
    switch (r->c.algorithm) {
    case SL_TOKEN_BUCKET:
        ref_token_bucket(r, k, c, t, d);
        break;
    case SL_GCRA:
        ref_gcra(r, k, c, t, d);
        break;
    case SL_LEAKY_BUCKET:
        ref_leaky_bucket(r, k, c, t, d);
        break;
    case SL_FIXED_WINDOW:
        ref_fixed_window(r, k, c, t, d);
        break;
    case SL_SLIDING_LOG:
        ref_sliding_log(r, k, c, t, d);
        break;
    case SL_SLIDING_WINDOW:
        ref_sliding_window(r, k, c, t, d);
        break;
    case SL_STEPPED_WINDOW:
        ref_stepped_window(r, k, c, t, d);
        break;
    default:
        fail_msg("no reference for algorithm %d", (int)r->c.algorithm);
    }
}

/* ==== the limit, checked from the admitted requests alone ==== */

typedef struct admitted {
    ev *ev;
    size_t len, cap;
} admitted;

static void admit(admitted *a, sl_nanos at, int64_t cost)
{
    if (a->len == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->ev = realloc(a->ev, a->cap * sizeof(ev));
        assert_non_null(a->ev);
    }
    a->ev[a->len++] = (ev){at, cost};
}

/* Why the last check failed. */
static char bound_msg[512];

/* Over any [t0, t1], admitted <= B + (t1 - t0) L / P, i.e. for events
 * j <= i: (A_i - A_{j-1}) P <= B P + (t_i - t_j) L.  With `least` the
 * least A_{j-1} P - t_j L over j <= i, one pass checks every interval. */
static int check_bucket_bound(const sl_limit_config *c, const admitted *a)
{
    const i128 P = c->period, L = c->limit, B = c->burst;
    i128 before = 0, least = 0; /* A_{j-1} */
    for (size_t i = 0; i < a->len; i++) {
        i128 m = before * P - (i128)a->ev[i].at * L, after;
        if (i == 0 || m < least)
            least = m;
        after = before + a->ev[i].cost;
        if (after * P - (i128)a->ev[i].at * L > B * P + least) {
            snprintf(bound_msg, sizeof(bound_msg),
                     "admitted more than B + (t1 - t0) L / P by the "
                     "request at %lld (event %zu)",
                     (long long)a->ev[i].at, i);
            return -1;
        }
        before = after;
    }
    return 0;
}

/* No window (t - P, t] holds more than L: the fullest windows end at an
 * admitted request. */
static int check_log_bound(const sl_limit_config *c, const admitted *a)
{
    int64_t sum = 0;
    size_t j = 0;
    for (size_t i = 0; i < a->len; i++) {
        sum += a->ev[i].cost;
        while (a->ev[j].at <= a->ev[i].at - c->period)
            sum -= a->ev[j++].cost;
        if (sum > c->limit) {
            snprintf(bound_msg, sizeof(bound_msg),
                     "the window ending at %lld holds %lld > L = %lld",
                     (long long)a->ev[i].at, (long long)sum,
                     (long long)c->limit);
            return -1;
        }
    }
    return 0;
}

/* No `span` consecutive units of time (fixed window: 1 period; stepped:
 * n steps) hold more than L. */
static int check_unit_bound(const sl_limit_config *c, const admitted *a,
                            sl_nanos unit, int64_t span)
{
    int64_t sum = 0;
    size_t j = 0;
    for (size_t i = 0; i < a->len; i++) {
        int64_t u = a->ev[i].at / unit;
        sum += a->ev[i].cost;
        while (a->ev[j].at / unit <= u - span)
            sum -= a->ev[j++].cost;
        if (sum > c->limit) {
            snprintf(bound_msg, sizeof(bound_msg),
                     "%lld units of %lld ns ending with unit %lld hold "
                     "%lld > L = %lld",
                     (long long)span, (long long)unit, (long long)u,
                     (long long)sum, (long long)c->limit);
            return -1;
        }
    }
    return 0;
}

/* At each admission floor(prev (P - e) / P) + cur + c <= L, with prev and
 * cur counted from the admitted requests before it. */
static int check_estimate_bound(const sl_limit_config *c, const admitted *a)
{
    const sl_nanos P = c->period;
    int64_t w = -2, prev = 0, cur = 0;
    for (size_t i = 0; i < a->len; i++) {
        int64_t aw = a->ev[i].at / P;
        sl_nanos e = a->ev[i].at - aw * P;
        if (aw != w) {
            prev = aw == w + 1 ? cur : 0;
            cur = 0;
            w = aw;
        }
        if ((int64_t)((i128)prev * (P - e) / P) + cur + a->ev[i].cost >
            c->limit) {
            snprintf(bound_msg, sizeof(bound_msg),
                     "admitted at %lld with prev %lld, cur %lld, cost %lld "
                     "over L = %lld",
                     (long long)a->ev[i].at, (long long)prev, (long long)cur,
                     (long long)a->ev[i].cost, (long long)c->limit);
            return -1;
        }
        cur += a->ev[i].cost;
    }
    return 0;
}

static int limit_holds(const sl_limit_config *c, const admitted *a)
{
    switch (c->algorithm) {
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
    case SL_LEAKY_BUCKET:
        return check_bucket_bound(c, a);
    case SL_FIXED_WINDOW:
        return check_unit_bound(c, a, c->period, 1);
    case SL_SLIDING_LOG:
        return check_log_bound(c, a);
    case SL_SLIDING_WINDOW:
        return check_estimate_bound(c, a);
    case SL_STEPPED_WINDOW:
        return check_unit_bound(c, a, c->step, c->period / c->step);
    default:
        snprintf(bound_msg, sizeof(bound_msg), "no bound for algorithm %d",
                 (int)c->algorithm);
        return -1;
    }
}

static void check_limit_holds(const sl_limit_config *c, const admitted *a,
                              const char *what, uint64_t seed, int key)
{
    if (limit_holds(c, a) != 0)
        fail_msg("%s, seed %llu, key %d: %s", what,
                 (unsigned long long)seed, key, bound_msg);
}

/* ==== the configurations ==== */

#define CFG(alg, l, p, b, st, fl) {#alg " " #l "/" #p " B" #b " k" #st " f" #fl, alg, l, p, b, st, fl}

static const config configs[] = {
    /* Buckets: whole T, T = 333,333,333.3 ns, T = 8.57 s with B < L,
     * T = 1 ms with B << L, T = 7/3 ns, and the largest counts. */
    CFG(SL_TOKEN_BUCKET, 10, SEC, 10, 0, 0),
    CFG(SL_TOKEN_BUCKET, 3, SEC, 5, 0, 0),
    CFG(SL_TOKEN_BUCKET, 7, MINUTE, 3, 0, 0),
    CFG(SL_TOKEN_BUCKET, 1000, SEC, 50, 0, 0),
    CFG(SL_TOKEN_BUCKET, 3, 7, 4, 0, 0),
    CFG(SL_TOKEN_BUCKET, SL_MAX_COUNT, HOUR, SL_MAX_COUNT, 0, 0),
    CFG(SL_GCRA, 10, SEC, 10, 0, 0),
    CFG(SL_GCRA, 3, SEC, 5, 0, 0),
    CFG(SL_GCRA, 7, MINUTE, 3, 0, 0),
    CFG(SL_GCRA, 1000, SEC, 50, 0, 0),
    CFG(SL_GCRA, 3, 7, 4, 0, 0),
    CFG(SL_GCRA, SL_MAX_COUNT, HOUR, SL_MAX_COUNT, 0, 0),
    CFG(SL_LEAKY_BUCKET, 10, SEC, 10, 0, 0),
    CFG(SL_LEAKY_BUCKET, 3, SEC, 5, 0, 0),
    CFG(SL_LEAKY_BUCKET, 7, MINUTE, 3, 0, 0),
    CFG(SL_LEAKY_BUCKET, 1000, SEC, 50, 0, 0),
    CFG(SL_LEAKY_BUCKET, 3, 7, 4, 0, 0),
    CFG(SL_LEAKY_BUCKET, SL_MAX_COUNT, HOUR, SL_MAX_COUNT, 0, 0),
    CFG(SL_FIXED_WINDOW, 5, SEC, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 7, MINUTE, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 1, 10, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 100, SEC, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, SL_MAX_COUNT, SEC, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 5, SEC, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 3, MINUTE, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 20, 7, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 5, SEC, 0, 0, SL_LOG_REJECTED),
    CFG(SL_SLIDING_LOG, 2, MINUTE, 0, 0, SL_LOG_REJECTED),
    CFG(SL_SLIDING_LOG, SL_MAX_COUNT, SEC, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 7, MINUTE, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 5, SEC, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 3, 7, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 100, SEC, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, UINT32_MAX, SEC, 0, 0, 0),
    CFG(SL_STEPPED_WINDOW, 10, 4 * SEC, 0, SEC, 0),
    CFG(SL_STEPPED_WINDOW, 5, SEC, 0, 100 * MS, 0),
    CFG(SL_STEPPED_WINDOW, 7, SEC, 0, 0, 0), /* 10 ms steps: n = 100 */
    CFG(SL_STEPPED_WINDOW, 3, 12, 0, 4, 0),
    CFG(SL_STEPPED_WINDOW, 10, SEC, 0, SEC, 0), /* n = 1 */
    CFG(SL_STEPPED_WINDOW, SL_MAX_COUNT, MINUTE, 0, SEC, 0),
};

#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

static sl_limit *config_limit(const config *cf)
{
    sl_limit_config c = {.algorithm = cf->alg, .limit = cf->limit,
                         .period = cf->period, .burst = cf->burst,
                         .step = cf->step, .flags = cf->flags};
    return tu_limit_cfg(&c);
}

static const uint64_t seeds[] = {1, 2, 3};

/* ==== the properties ==== */

static void fail_decisions(const char *what, uint64_t seed, size_t i,
                           const req *rq, const sl_decision *lib,
                           const sl_decision *want)
{
    fail_msg("%s, seed %llu, request %zu (key %d, t %lld, cost %lld):\n"
             "  library:   allowed %d remaining %lld reset_after %lld "
             "retry_after %lld delay %lld limit %lld\n"
             "  reference: allowed %d remaining %lld reset_after %lld "
             "retry_after %lld delay %lld limit %lld",
             what, (unsigned long long)seed, i, rq->key, (long long)rq->t,
             (long long)rq->cost, lib->allowed, (long long)lib->remaining,
             (long long)lib->reset_after, (long long)lib->retry_after,
             (long long)lib->delay, (long long)lib->limit, want->allowed,
             (long long)want->remaining, (long long)want->reset_after,
             (long long)want->retry_after, (long long)want->delay,
             (long long)want->limit);
}

static int same_decision(const sl_decision *a, const sl_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining && a->reset_after == b->reset_after &&
           a->retry_after == b->retry_after && a->delay == b->delay;
}

/*
 * One long trace: the library against the reference, decision for
 * decision, and the limit on what was admitted.  Also the fields' own
 * rules: retry_after is 0 when allowed, > 0 or -1 when not; -1 only for a
 * cost over the capacity; delay only on allowed requests.
 */
static void run_long_trace(sl_algorithm alg)
{
    const size_t n = trace_len(40000, 6000);
    req *trace = calloc(n, sizeof(req));
    size_t runs = 0;

    assert_non_null(trace);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        if (configs[ci].alg != alg)
            continue;
        for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
            sl_store *st = tu_store();
            sl_limit *lim = config_limit(&configs[ci]);
            const sl_limit_config *c = sl_limit_get_config(lim);
            admitted acc[NKEYS];
            ref r;

            memset(acc, 0, sizeof(acc));
            ref_init(&r, lim);
            gen_trace(c, seeds[si], trace, n, NKEYS, TRACE_PLAIN);
            for (size_t i = 0; i < n; i++) {
                const req *q = &trace[i];
                sl_decision lib = tu_check(st, lim, key_names[q->key],
                                           q->cost, q->t);
                sl_decision want;
                ref_check(&r, q->key, q->cost, q->t, &want);
                if (!same_decision(&lib, &want))
                    fail_decisions(configs[ci].name, seeds[si], i, q, &lib,
                                   &want);
                if (lib.allowed ? lib.retry_after != 0 || lib.remaining < 0
                                : lib.delay != 0 || lib.retry_after == 0 ||
                                      (lib.retry_after == -1) !=
                                          (q->cost > capacity(c)))
                    fail_decisions("field rules broken", seeds[si], i, q,
                                   &lib, &want);
                if (lib.allowed && q->cost > 0)
                    admit(&acc[q->key], q->t, q->cost);
            }
            for (int k = 0; k < NKEYS; k++) {
                check_limit_holds(c, &acc[k], configs[ci].name, seeds[si], k);
                free(acc[k].ev);
            }
            ref_release(&r);
            sl_limit_free(lim);
            sl_store_free(st);
            runs++;
        }
    }
    free(trace);
    expect_cmp(runs, >, 0);
}

/*
 * Replays trace[0 .. upto] into a fresh key of st (a counter makes the
 * name), so that whatever is asked next sees exactly that history.
 */
static const char *replay(sl_store *st, const sl_limit *lim,
                          const req *trace, size_t upto, unsigned *counter)
{
    static char key[32];
    snprintf(key, sizeof(key), "replay-%u", (*counter)++);
    for (size_t i = 0; i <= upto; i++)
        tu_check(st, lim, key, trace[i].cost, trace[i].t);
    return key;
}

/*
 * Shorter single-key traces on the configurations with small counts: for
 * every request, retry_after is the smallest wait and remaining is exact,
 * both checked by replaying the history into fresh keys.
 */
static void run_replays(sl_algorithm alg)
{
    const size_t n = trace_len(400, 120);
    req *trace = calloc(n, sizeof(req));
    sl_decision *ds = calloc(n, sizeof(sl_decision));
    size_t runs = 0;

    assert_non_null(trace);
    assert_non_null(ds);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        if (configs[ci].alg != alg || configs[ci].limit > 20)
            continue;
        for (size_t si = 0; si < 2; si++) {
            sl_store *st = tu_store();
            sl_limit *lim = config_limit(&configs[ci]);
            const sl_limit_config *c = sl_limit_get_config(lim);
            unsigned counter = 0;

            gen_trace(c, seeds[si] + 100, trace, n, 1, TRACE_PLAIN);
            for (size_t i = 0; i < n; i++)
                ds[i] = tu_check(st, lim, "main", trace[i].cost, trace[i].t);
            for (size_t i = 0; i < n; i++) {
                const req *q = &trace[i];
                const sl_decision *d = &ds[i];
                const char *key;
                int64_t passed = 0;

                if (d->allowed) {
                    expect_eq_at(d->retry_after, 0, "%s seed %llu request %zu",
                                 configs[ci].name,
                                 (unsigned long long)seeds[si], i);
                } else if (d->retry_after < 0) {
                    expect_eq_at(d->retry_after, -1,
                                 "%s seed %llu request %zu", configs[ci].name,
                                 (unsigned long long)seeds[si], i);
                    expect_cmp(q->cost, >, capacity(c));
                } else {
                    sl_decision e;
                    expect_cmp(d->retry_after, >, 0);
                    key = replay(st, lim, trace, i, &counter);
                    e = tu_check(st, lim, key, q->cost, q->t + d->retry_after);
                    expect_eq_at(e.allowed, 1,
                                 "%s seed %llu request %zu: not allowed at "
                                 "t + retry_after",
                                 configs[ci].name,
                                 (unsigned long long)seeds[si], i);
                    key = replay(st, lim, trace, i, &counter);
                    e = tu_check(st, lim, key, q->cost,
                                 q->t + d->retry_after - 1);
                    expect_eq_at(e.allowed, 0,
                                 "%s seed %llu request %zu: already allowed "
                                 "at t + retry_after - 1",
                                 configs[ci].name,
                                 (unsigned long long)seeds[si], i);
                }

                /* remaining unit requests pass at t, one more does not. */
                key = replay(st, lim, trace, i, &counter);
                for (int64_t u = 0; u < d->remaining; u++)
                    passed += tu_check(st, lim, key, 1, q->t).allowed;
                expect_eq_at(passed, d->remaining,
                             "%s seed %llu request %zu: unit requests "
                             "passing after it",
                             configs[ci].name, (unsigned long long)seeds[si],
                             i);
                expect_eq_at(tu_check(st, lim, key, 1, q->t).allowed, 0,
                             "%s seed %llu request %zu: one more than "
                             "remaining passed",
                             configs[ci].name, (unsigned long long)seeds[si],
                             i);
            }
            sl_limit_free(lim);
            sl_store_free(st);
            runs++;
        }
    }
    free(trace);
    free(ds);
    expect_cmp(runs, >, 0);
}

/*
 * Requests stamped up to P / 3 in the past.  Each admitted request is
 * re-stamped with the latest time its key had admitted so far (or its
 * own, if later): the stream a key with a monotonic clock would have
 * seen.  The limit must hold on that stream: a stale stamp buys nothing.
 */
static void run_jitter(sl_algorithm alg)
{
    const size_t n = trace_len(30000, 6000);
    req *trace;
    size_t runs = 0;

    trace = calloc(n, sizeof(req));

    assert_non_null(trace);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        if (configs[ci].alg != alg || configs[ci].flags != 0)
            continue;
        for (size_t si = 0; si < 2; si++) {
            sl_store *st = tu_store();
            sl_limit *lim = config_limit(&configs[ci]);
            const sl_limit_config *c = sl_limit_get_config(lim);
            admitted acc[NKEYS];
            sl_nanos latest[NKEYS];

            memset(acc, 0, sizeof(acc));
            for (int k = 0; k < NKEYS; k++)
                latest[k] = INT64_MIN;
            gen_trace(c, seeds[si] + 200, trace, n, NKEYS, TRACE_JITTER);
            for (size_t i = 0; i < n; i++) {
                const req *q = &trace[i];
                sl_decision d = tu_check(st, lim, key_names[q->key], q->cost,
                                         q->t);
                /* A key's time never runs backwards (docs/algorithms.md):
                 * a stale stamp is judged, and counted, at the latest time
                 * the key has been asked about, admitted or not. */
                if (q->t > latest[q->key])
                    latest[q->key] = q->t;
                if (d.allowed)
                    admit(&acc[q->key], latest[q->key], q->cost);
            }
            for (int k = 0; k < NKEYS; k++) {
                check_limit_holds(c, &acc[k], configs[ci].name, seeds[si], k);
                free(acc[k].ev);
            }
            sl_limit_free(lim);
            sl_store_free(st);
            runs++;
        }
    }
    free(trace);
    expect_cmp(runs, >, 0);
}

/* The reference must be able to disagree: with a limit (and burst) one
 * unit looser than the library's it admits something the library
 * refuses, on every configuration's trace. */
static void test_reference_catches_a_looser_limit(void **state)
{
    const size_t n = 3000;
    req *trace = calloc(n, sizeof(req));
    size_t eligible = 0, disagreed = 0;
    (void)state;

    assert_non_null(trace);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        const config *cf = &configs[ci];
        config loose = *cf;
        sl_store *st;
        sl_limit *lim, *loose_lim;
        ref r;

        if (cf->limit == SL_MAX_COUNT || cf->limit == UINT32_MAX)
            continue; /* one unit in 2^40 is rarely visible */
        eligible++;
        loose.limit++;
        if (loose.burst != 0)
            loose.burst++;
        st = tu_store();
        lim = config_limit(cf);
        loose_lim = config_limit(&loose);
        ref_init(&r, loose_lim);
        gen_trace(sl_limit_get_config(lim), 7, trace, n, NKEYS, TRACE_PLAIN);
        for (size_t i = 0; i < n; i++) {
            sl_decision lib = tu_check(st, lim, key_names[trace[i].key],
                                       trace[i].cost, trace[i].t);
            sl_decision want;
            ref_check(&r, trace[i].key, trace[i].cost, trace[i].t, &want);
            if (lib.allowed != want.allowed) {
                disagreed++;
                break;
            }
        }
        ref_release(&r);
        sl_limit_free(loose_lim);
        sl_limit_free(lim);
        sl_store_free(st);
    }
    free(trace);
    expect_cmp(eligible, >=, 30);
    expect_eq(disagreed, eligible);
}

/* Each bound checker passes a stream at the limit and fails one unit
 * over it. */
static void expect_bound(sl_algorithm alg, const ev *evs, size_t n,
                         int want)
{
    sl_limit_config c = {.algorithm = alg, .limit = 3, .period = 10,
                         .burst = 3, .step = 5};
    admitted a = {0};
    for (size_t i = 0; i < n; i++)
        admit(&a, evs[i].at, evs[i].cost);
    if (limit_holds(&c, &a) != want)
        fail_msg("%s: checker said %s, expected %s (%s)",
                 sl_algorithm_name(alg), want ? "holds" : "broken",
                 want ? "broken" : "holds", bound_msg);
    free(a.ev);
}

static void test_bound_checkers_catch_one_unit_over(void **state)
{
    /* L = B = 3 per 10 ns, 5 ns steps. */
    const ev bucket_ok[] = {{100, 3}, {110, 3}, {114, 1}};      /* 3+10*3/10 */
    const ev bucket_over[] = {{100, 3}, {109, 3}, {110, 1}};    /* 7 > 3+3 */
    const ev log_ok[] = {{100, 2}, {105, 1}, {110, 2}};         /* 110: 3 */
    const ev log_over[] = {{100, 2}, {105, 1}, {109, 1}};       /* 4 */
    const ev fixed_ok[] = {{100, 3}, {110, 3}};                 /* 2 windows */
    const ev fixed_over[] = {{101, 2}, {109, 2}};               /* 4 in one */
    const ev stepped_ok[] = {{100, 2}, {109, 1}, {110, 2}};     /* steps 20..22 */
    const ev stepped_over[] = {{104, 2}, {105, 1}, {109, 1}};   /* steps 20, 21 */
    const ev sw_ok[] = {{100, 3}, {115, 2}};   /* floor(3 * 5/10) = 1 */
    const ev sw_edge[] = {{100, 3}, {114, 2}}; /* floor(3 * 6/10) = 1 */
    const ev sw_over[] = {{100, 3}, {113, 2}}; /* floor(3 * 7/10) = 2 */
    (void)state;

    for (int a = 0; a < 3; a++) {
        expect_bound((sl_algorithm)a, bucket_ok, 3, 0);
        expect_bound((sl_algorithm)a, bucket_over, 3, -1);
    }
    expect_bound(SL_SLIDING_LOG, log_ok, 3, 0);
    expect_bound(SL_SLIDING_LOG, log_over, 3, -1);
    expect_bound(SL_FIXED_WINDOW, fixed_ok, 2, 0);
    expect_bound(SL_FIXED_WINDOW, fixed_over, 2, -1);
    expect_bound(SL_STEPPED_WINDOW, stepped_ok, 3, 0);
    expect_bound(SL_STEPPED_WINDOW, stepped_over, 3, -1);
    expect_bound(SL_SLIDING_WINDOW, sw_ok, 2, 0);
    expect_bound(SL_SLIDING_WINDOW, sw_edge, 2, 0);
    expect_bound(SL_SLIDING_WINDOW, sw_over, 2, -1);
}

#define PER_ALG(name, runner, alg)                                           \
    static void test_##name(void **state)                                    \
    {                                                                        \
        (void)state;                                                         \
        runner(alg);                                                         \
    }

PER_ALG(token_bucket_matches_reference_and_bound, run_long_trace,
        SL_TOKEN_BUCKET)
PER_ALG(gcra_matches_reference_and_bound, run_long_trace, SL_GCRA)
PER_ALG(leaky_bucket_matches_reference_and_bound, run_long_trace,
        SL_LEAKY_BUCKET)
PER_ALG(fixed_window_matches_reference_and_bound, run_long_trace,
        SL_FIXED_WINDOW)
PER_ALG(sliding_log_matches_reference_and_bound, run_long_trace,
        SL_SLIDING_LOG)
PER_ALG(sliding_window_matches_reference_and_bound, run_long_trace,
        SL_SLIDING_WINDOW)
PER_ALG(stepped_window_matches_reference_and_bound, run_long_trace,
        SL_STEPPED_WINDOW)
PER_ALG(token_bucket_retry_after_minimal_remaining_exact, run_replays,
        SL_TOKEN_BUCKET)
PER_ALG(gcra_retry_after_minimal_remaining_exact, run_replays, SL_GCRA)
PER_ALG(leaky_bucket_retry_after_minimal_remaining_exact, run_replays,
        SL_LEAKY_BUCKET)
PER_ALG(fixed_window_retry_after_minimal_remaining_exact, run_replays,
        SL_FIXED_WINDOW)
PER_ALG(sliding_log_retry_after_minimal_remaining_exact, run_replays,
        SL_SLIDING_LOG)
PER_ALG(sliding_window_retry_after_minimal_remaining_exact, run_replays,
        SL_SLIDING_WINDOW)
PER_ALG(stepped_window_retry_after_minimal_remaining_exact, run_replays,
        SL_STEPPED_WINDOW)
PER_ALG(token_bucket_stale_stamps_gain_nothing, run_jitter, SL_TOKEN_BUCKET)
PER_ALG(gcra_stale_stamps_gain_nothing, run_jitter, SL_GCRA)
PER_ALG(leaky_bucket_stale_stamps_gain_nothing, run_jitter, SL_LEAKY_BUCKET)
PER_ALG(fixed_window_stale_stamps_gain_nothing, run_jitter, SL_FIXED_WINDOW)
PER_ALG(sliding_log_stale_stamps_gain_nothing, run_jitter, SL_SLIDING_LOG)
PER_ALG(sliding_window_stale_stamps_gain_nothing, run_jitter,
        SL_SLIDING_WINDOW)
PER_ALG(stepped_window_stale_stamps_gain_nothing, run_jitter,
        SL_STEPPED_WINDOW)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_catches_a_looser_limit),
        cmocka_unit_test(test_bound_checkers_catch_one_unit_over),
        cmocka_unit_test(test_token_bucket_matches_reference_and_bound),
        cmocka_unit_test(test_gcra_matches_reference_and_bound),
        cmocka_unit_test(test_leaky_bucket_matches_reference_and_bound),
        cmocka_unit_test(test_fixed_window_matches_reference_and_bound),
        cmocka_unit_test(test_sliding_log_matches_reference_and_bound),
        cmocka_unit_test(test_sliding_window_matches_reference_and_bound),
        cmocka_unit_test(test_stepped_window_matches_reference_and_bound),
        cmocka_unit_test(
            test_token_bucket_retry_after_minimal_remaining_exact),
        cmocka_unit_test(test_gcra_retry_after_minimal_remaining_exact),
        cmocka_unit_test(
            test_leaky_bucket_retry_after_minimal_remaining_exact),
        cmocka_unit_test(
            test_fixed_window_retry_after_minimal_remaining_exact),
        cmocka_unit_test(test_sliding_log_retry_after_minimal_remaining_exact),
        cmocka_unit_test(
            test_sliding_window_retry_after_minimal_remaining_exact),
        cmocka_unit_test(
            test_stepped_window_retry_after_minimal_remaining_exact),
        cmocka_unit_test(test_token_bucket_stale_stamps_gain_nothing),
        cmocka_unit_test(test_gcra_stale_stamps_gain_nothing),
        cmocka_unit_test(test_leaky_bucket_stale_stamps_gain_nothing),
        cmocka_unit_test(test_fixed_window_stale_stamps_gain_nothing),
        cmocka_unit_test(test_sliding_log_stale_stamps_gain_nothing),
        cmocka_unit_test(test_sliding_window_stale_stamps_gain_nothing),
        cmocka_unit_test(test_stepped_window_stale_stamps_gain_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
