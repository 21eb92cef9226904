/*
 * test_override.c - a limit's numbers changed at runtime
 * (sl_limit_override) without resetting its counters, on the memory
 * store and on a real redis-server the test starts (tests/redisutil.h):
 *
 *   - sl_limit_override's errors and the numbers it fills in;
 *   - the example of docs/algorithms.md ("Changing a limit's numbers"),
 *     every algorithm, both stores: a key that used 80 of 100 has 20 left
 *     under 100, 70 under 150, 0 (not less) under 60; for the buckets also
 *     after time has passed and with a T that is not whole;
 *   - seeded random traces whose limit changes (up, down, burst only, to
 *     0, back to the base) at random times, every algorithm, both stores:
 *     the buckets agree decision by decision with a model of units used
 *     written here (x = units used * P, decaying at the L it was last
 *     written under, rounded up to a tick and clamped to the new B * P
 *     at each change); no minted credit, checked from what was admitted
 *     (the invariant of each algorithm: check_no_minting);
 *   - retry_after after a change is the smallest wait and remaining is
 *     exact, by replaying each request's history into a fresh key;
 *   - the memory and Redis stores agree decision by decision under
 *     changes, with recorded requests and multi-item calls mixed in.
 *
 * SL_TEST_QUICK=1 (the sanitizer runs) shortens the traces;
 * SL_TEST_FILTER=pattern runs only the tests it matches ("*_redis").
 */
#include "testutil.h"

#include "redisutil.h"

/* sl_limit_override must fail with `code` and a message holding `want`. */
static void expect_override_fails(const sl_limit *base, int64_t limit,
                                  int64_t burst, int code, const char *want)
{
    sl_limit *lim = NULL;
    char err[256] = "";
    int rc = sl_limit_override(base, limit, burst, &lim, err, sizeof(err));
    if (rc != code)
        fail_msg("sl_limit_override(%lld, %lld) returned %s, expected %s; "
                 "message: '%s'",
                 (long long)limit, (long long)burst, sl_err_name(rc),
                 sl_err_name(code), err);
    if (rc == 0)
        sl_limit_free(lim);
    else if (strstr(err, want) == NULL)
        fail_msg("message '%s' does not mention '%s'", err, want);
}

static sl_limit * override(const sl_limit *base, int64_t limit, int64_t burst)
{
    sl_limit *lim = NULL;
    char err[256] = "";
    int rc = sl_limit_override(base, limit, burst, &lim, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_limit_override(%lld, %lld): %s (%s)", (long long)limit,
                 (long long)burst, sl_err_name(rc), err);
    return lim;
}

#define MAX64(a, b) ((a) > (b) ? (a) : (b))
#define MIN64(a, b) ((a) < (b) ? (a) : (b))

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA || alg == SL_LEAKY_BUCKET;
}

/* ==== sl_limit_override's errors and numbers ==== */

static void test_override_errors(void **state)
{
    sl_limit *tb = tu_limit(SL_TOKEN_BUCKET, 100, SEC, 20);
    sl_limit *fw = tu_limit(SL_FIXED_WINDOW, 100, SEC, 0);
    sl_limit *sw = tu_limit(SL_SLIDING_WINDOW, 100, SEC, 0);
    sl_limit *big = tu_limit(SL_GCRA, INT64_C(1) << 31, SEC, 0);
    sl_limit *lim = NULL;
    char err[256] = "";
    (void)state;

    expect_eq(sl_limit_override(NULL, 1, 0, &lim, err, sizeof(err)), SL_EINVAL);
    expect_eq(sl_limit_override(tb, 1, 0, NULL, err, sizeof(err)), SL_EINVAL);
    expect_override_fails(tb, -1, 0, SL_ERANGE, "limit out of range: '-1'");
    expect_override_fails(fw, SL_MAX_COUNT + 1, 0, SL_ERANGE,
                          "limit out of range: '1099511627777'");
    expect_override_fails(tb, 10, -1, SL_ERANGE, "burst out of range: '-1'");
    expect_override_fails(tb, 10, SL_MAX_COUNT + 1, SL_ERANGE,
                          "burst out of range");
    /* Windows have no burst; 0 or the limit itself is accepted. */
    expect_override_fails(fw, 10, 5, SL_EINVAL, "burst applies only to");
    lim = override(fw, 10, 10);
    expect_eq(sl_limit_get_config(lim)->burst, 10);
    sl_limit_free(lim);
    expect_override_fails(sw, (int64_t)UINT32_MAX + 1, 0, SL_ERANGE,
                          "sliding_window");
    /* The schedules' tag holds 31 bits of L. */
    expect_override_fails(big, 10, 0, SL_EINVAL,
                          "gcra limit over 2^31 - 1 cannot be overridden: "
                          "'2147483648'");
    expect_override_fails(tb, INT64_C(1) << 31, 0, SL_ERANGE,
                          "override of token_bucket: '2147483648'");
    expect_override_fails(tb, 0, 5, SL_EINVAL, "burst must be 0 with limit 0");
    /* The scaled burst past 2^40, and B * T past 2^62 ns as in
     * sl_limit_new. */
    {
        sl_limit *wide = tu_limit(SL_TOKEN_BUCKET, 1, 1000, SL_MAX_COUNT);
        expect_override_fails(wide, 2, 0, SL_ERANGE, "scaled by 2 / 1");
        sl_limit_free(wide);
    }
    {
        sl_limit *slow = tu_limit(SL_TOKEN_BUCKET, 1000, INT64_C(1) << 62, 1);
        expect_override_fails(slow, 1, 1000, SL_ERANGE, "exceeds 2^62 ns");
        sl_limit_free(slow);
    }
    /* A NULL error buffer still gives the code. */
    expect_eq(sl_limit_override(tb, -5, 0, &lim, NULL, 0), SL_ERANGE);
    sl_limit_free(tb);
    sl_limit_free(fw);
    sl_limit_free(sw);
    sl_limit_free(big);
}

static void test_override_numbers(void **state)
{
    sl_limit_config c = {.algorithm = SL_STEPPED_WINDOW,
                         .limit = 100,
                         .period = SEC,
                         .step = 100 * MS,
                         .id = 42};
    sl_limit *sw = tu_limit_cfg(&c), *tb = tu_limit(SL_GCRA, 100, SEC, 30);
    sl_limit *a, *b;
    const sl_limit_config *x;
    (void)state;

    /* Only L and B change; the rest, and the base, are base's. */
    a = override(sw, 150, 0);
    x = sl_limit_get_config(a);
    expect_eq(x->limit, 150);
    expect_eq(x->burst, 150);
    expect_eq(x->step, 100 * MS);
    expect_eq(x->id, 42);
    expect_eq(sl_limit_base_config(a)->limit, 100);
    expect_eq(sl_limit_base_config(sw)->limit, 100);
    sl_limit_free(a);

    /* burst 0 scales base's: 30 * 150 / 100 = 45; 30 * 7 / 100 = 2.1 -> 3;
     * 30 * 1 / 100 -> at least 1; limit 0 -> 0. */
    a = override(tb, 150, 0);
    expect_eq(sl_limit_get_config(a)->burst, 45);
    sl_limit_free(a);
    a = override(tb, 7, 0);
    expect_eq(sl_limit_get_config(a)->burst, 3);
    /* An override of an override scales its base's numbers (7, 3) and
     * keeps the first base. */
    b = override(a, 70, 0);
    expect_eq(sl_limit_get_config(b)->burst, 30);
    expect_eq(sl_limit_base_config(b)->limit, 100);
    expect_eq(sl_limit_base_config(b)->burst, 30);
    sl_limit_free(b);
    sl_limit_free(a);
    a = override(tb, 1, 0);
    expect_eq(sl_limit_get_config(a)->burst, 1);
    sl_limit_free(a);
    a = override(tb, 0, 0);
    expect_eq(sl_limit_get_config(a)->limit, 0);
    expect_eq(sl_limit_get_config(a)->burst, 0);
    /* From 0 there is nothing to scale: the first base's numbers are. */
    b = override(a, 50, 0);
    expect_eq(sl_limit_get_config(b)->burst, 15);
    sl_limit_free(b);
    sl_limit_free(a);
    a = override(tb, 100, 7);
    expect_eq(sl_limit_get_config(a)->burst, 7);
    sl_limit_free(a);
    sl_limit_free(sw);
    sl_limit_free(tb);
}

/* The base may be freed before its override. */
static void test_base_freed_first(void **state)
{
    sl_limit *base = tu_limit(SL_TOKEN_BUCKET, 10, SEC, 0);
    sl_limit *o = override(base, 20, 0);
    sl_store *st = tu_store();
    (void)state;

    expect_eq(tu_check(st, base, "k", 4, SEC).remaining, 6);
    sl_limit_free(base);
    expect_eq(tu_check(st, o, "k", 0, SEC).remaining, 16);
    sl_limit_free(o);
    sl_store_free(st);
}

/* ==== stores ==== */

static sl_store *redis_store(void)
{
    return tu_redis_store("o:");
}

static void flushall(void)
{
    redisContext *c = tu_redis_admin(tu_server());
    assert_non_null(c);
    tu_redis_do(c, "FLUSHALL");
    redisFree(c);
}

enum { MEMORY, REDIS, NSTORES };
static const char *const store_names[NSTORES] = {"memory", "redis"};

static sl_store *store_new(int which)
{
    if (which == MEMORY)
        return tu_store();
    flushall();
    return redis_store();
}

static sl_decision check_at(sl_store *st, const sl_limit *lim, const char *key,
                            int64_t cost, sl_nanos now, unsigned flags)
{
    sl_check_item item = {lim, key, strlen(key)};
    sl_decision d, all;
    int rc;
    memset(&d, 0x5a, sizeof(d));
    rc = sl_check_costs(st, &item, &cost, 1, now, flags, &d, &all);
    if (rc != 0) {
        char err[256];
        sl_store_last_error(st, err, sizeof(err));
        fail_msg("check (key '%s', cost %lld, now %lld, limit %lld): %s (%s)",
                 key, (long long)cost, (long long)now,
                 (long long)sl_limit_get_config(lim)->limit, sl_err_name(rc),
                 err);
    }
    return d;
}

/* ==== the example ==== */

/* Wall-clock-sized: the Redis script keeps such times as (s, ns) pairs. */
static const sl_nanos T0 = INT64_C(1700000000) * SEC + 300 * MS;

static sl_limit *example_base(sl_algorithm alg)
{
    sl_limit_config c = {.algorithm = alg, .limit = 100, .period = SEC};
    if (alg == SL_STEPPED_WINDOW)
        c.step = 100 * MS;
    return tu_limit_cfg(&c);
}

/* 80 used of 100: 20 left under 100, 70 under 150, and 70 more pass
 * under 150 and then nothing; back at 100, 0 left. */
static void example_up(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *up = override(base, 150, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    d = check_at(st, base, "k", 80, T0, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 20, "%s %s", where, name);
    expect_eq_at(check_at(st, base, "k", 0, T0, 0).remaining, 20, "%s %s",
                 where, name);
    d = check_at(st, up, "k", 0, T0, 0);
    expect_eq_at(d.remaining, 70, "%s %s", where, name);
    expect_eq_at(d.limit, 150, "%s %s", where, name);
    expect_eq_at(check_at(st, up, "k", 71, T0, 0).allowed, 0, "%s %s", where,
                 name);
    d = check_at(st, up, "k", 70, T0, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    expect_eq_at(check_at(st, up, "k", 1, T0, 0).allowed, 0, "%s %s", where,
                 name);
    d = check_at(st, base, "k", 0, T0, 0);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    expect_eq_at(d.limit, 100, "%s %s", where, name);
    sl_limit_free(up);
    sl_limit_free(base);
}

/* 80 used of 100 is 0 left of 60, never less: the buckets refill from
 * empty at the new rate (one unit after ceil(1e9 / 60) ns); the windows
 * count the 80 until they leave the window. */
static void example_down(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *down = override(base, 60, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    check_at(st, base, "k2", 80, T0, 0);
    d = check_at(st, down, "k2", 0, T0, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    expect_eq_at(d.limit, 60, "%s %s", where, name);
    d = check_at(st, down, "k2", 1, T0, 0);
    expect_eq_at(d.allowed, 0, "%s %s", where, name);
    if (is_bucket(alg)) {
        expect_eq_at(d.retry_after, 16666667, "%s %s", where, name);
        expect_eq_at(check_at(st, down, "k2", 1, T0 + 16666666, 0).allowed, 0,
                     "%s %s", where, name);
        expect_eq_at(check_at(st, down, "k2", 1, T0 + 16666667, 0).allowed, 1,
                     "%s %s", where, name);
    } else if (alg == SL_FIXED_WINDOW || alg == SL_STEPPED_WINDOW) {
        /* Fixed: the window ends 700 ms on; stepped: the 80 are in the
         * step of 300 ms and leave 1 s later. */
        expect_eq_at(d.retry_after, alg == SL_FIXED_WINDOW ? 700 * MS : SEC,
                     "%s %s", where, name);
    } else if (alg == SL_SLIDING_LOG) {
        expect_eq_at(d.retry_after, SEC, "%s %s", where, name);
    }
    sl_limit_free(down);
    sl_limit_free(base);
}

/* The buckets keep the units used, not the time: 80 used at T0 is 70 at
 * T0 + 100 ms under 100 per s, so 80 left of 150; 3 used of 3 per s (T
 * not whole) is 1.5 at T0 + 500 ms, so under 7 per s (burst scaled to 7)
 * 5 left, and a cost of 6 fits once 1.5 - 1 = 0.5 units have gone at 7
 * per s: after ceil(1e9 / 14) ns. */
static void example_elapsed(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *up = override(base, 150, 0);
    sl_limit *three = tu_limit(alg, 3, SEC, 0), *seven = override(three, 7, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    check_at(st, base, "k3", 80, T0, 0);
    expect_eq_at(check_at(st, up, "k3", 0, T0 + 100 * MS, 0).remaining, 80,
                 "%s %s", where, name);
    check_at(st, three, "k4", 3, T0, 0);
    d = check_at(st, seven, "k4", 6, T0 + 500 * MS, 0);
    expect_eq_at(d.allowed, 0, "%s %s", where, name);
    expect_eq_at(d.remaining, 5, "%s %s", where, name);
    expect_eq_at(d.retry_after, 71428572, "%s %s", where, name);
    expect_eq_at(
        check_at(st, seven, "k4", 6, T0 + 500 * MS + 71428571, 0).allowed, 0,
        "%s %s", where, name);
    expect_eq_at(
        check_at(st, seven, "k4", 6, T0 + 500 * MS + 71428572, 0).allowed, 1,
        "%s %s", where, name);
    sl_limit_free(seven);
    sl_limit_free(three);
    sl_limit_free(up);
    sl_limit_free(base);
}

/* L = 0 denies every cost and answers queries with 0 left; lifted, the
 * key has what it had: the windows their counts, the buckets their
 * state, which kept to its own numbers meanwhile. */
static void example_zero(sl_store *st, sl_algorithm alg, const char *where)
{
    sl_limit *base = example_base(alg), *zero = override(base, 0, 0);
    const char *name = sl_algorithm_name(alg);
    sl_decision d;

    check_at(st, base, "k5", 80, T0, 0);
    d = check_at(st, zero, "k5", 1, T0, 0);
    expect_eq_at(d.allowed, 0, "%s %s", where, name);
    expect_eq_at(d.retry_after, -1, "%s %s", where, name);
    expect_eq_at(d.limit, 0, "%s %s", where, name);
    d = check_at(st, zero, "k5", 0, T0 + 50 * MS, 0);
    expect_eq_at(d.allowed, 1, "%s %s", where, name);
    expect_eq_at(d.remaining, 0, "%s %s", where, name);
    /* 50 ms at 100 per s: 5 units back for the buckets. */
    expect_eq_at(check_at(st, base, "k5", 0, T0 + 50 * MS, 0).remaining,
                 is_bucket(alg) ? 25 : 20, "%s %s", where, name);
    sl_limit_free(zero);
    sl_limit_free(base);
}

static void test_example(void **state)
{
    (void)state;
    for (int w = 0; w < NSTORES; w++) {
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            sl_store *st = store_new(w);
            example_up(st, (sl_algorithm)a, store_names[w]);
            example_down(st, (sl_algorithm)a, store_names[w]);
            example_zero(st, (sl_algorithm)a, store_names[w]);
            if (is_bucket((sl_algorithm)a))
                example_elapsed(st, (sl_algorithm)a, store_names[w]);
            sl_store_free(st);
        }
    }
}

/* ==== random traces whose limit changes ==== */

#define NKEYS 3
#define MAXLIM 12

static const char *const key_names[NKEYS] = {"a", "b", "user:42"};

/* A base and its overrides: lim[0] is the base. */
typedef struct family {
    sl_limit *lim[MAXLIM];
    int n;
} family;

/*
 * The base and overrides up, down, far up, to 0, by one, and for the
 * buckets burst-only changes both ways and both at once.  With `fresh`
 * the numbers are the same but each is a limit of its own (its own
 * identity, so new counters): what the feature must not do, which
 * check_no_minting must catch.
 */
static void family_new(const sl_limit_config *c, family *f, int fresh)
{
    sl_limit *base = tu_limit_cfg(c);
    const sl_limit_config *b = sl_limit_get_config(base);
    const int64_t L = b->limit, B = b->burst;
    const int64_t half = L / 2 > 0 ? L / 2 : 1;
    const int64_t want[][2] = {
        {2 * L, 0},     {half, 0},
        {3 * L + 1, 0}, {0, 0},
        {L + 1, 0},     {L, B / 2 > 0 ? B / 2 : 1},
        {L, 2 * B},     {2 * L, 1},
        {half, 3 * B},  {L * 3 / 2 + 1, 0},
    };
    f->lim[0] = base;
    f->n = 1;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!is_bucket(b->algorithm) && want[i][1] != 0)
            continue;
        if (!fresh) {
            f->lim[f->n++] = override(base, want[i][0], want[i][1]);
        } else if (want[i][0] > 0) {
            sl_limit_config o = *b;
            o.limit = want[i][0];
            o.burst = is_bucket(b->algorithm) ? want[i][1] : 0;
            o.id = 1000 + i;
            if (o.burst == 0 && is_bucket(b->algorithm)) {
                sl_limit *tmp = override(base, want[i][0], 0);
                o.burst = sl_limit_get_config(tmp)->burst;
                sl_limit_free(tmp);
            }
            f->lim[f->n++] = tu_limit_cfg(&o);
        }
    }
}

static void family_free(family *f)
{
    for (int i = 0; i < f->n; i++)
        sl_limit_free(f->lim[i]);
}

static const sl_limit_config *cfg_of(const family *f, int li)
{
    return sl_limit_get_config(f->lim[li]);
}

/* The largest cost that can pass a limit: B or L (0 for L = 0). */
static int64_t capacity(const sl_limit_config *c)
{
    return is_bucket(c->algorithm) ? c->burst : c->limit;
}

typedef struct req {
    int key, li; /* key_names[key], family lim[li] */
    sl_nanos t;
    int64_t cost;
    int record;    /* SL_RECORD (equivalence traces only) */
    int multi;     /* with a second item (equivalence traces only) */
    int li2, key2; /* the second item */
    int64_t cost2;
} req;

enum { TRACE_PLAIN = 0, TRACE_EXTRAS = 1 };

/*
 * n requests over nkeys keys.  The limit in force changes now and then
 * (4%), to any of the family, a third of the time back to the base.
 * Times, as in test_properties.c: mostly gaps around the emission
 * interval so that the limits bind, now and then an idle gap or a jump
 * to the next window or step edge.  Costs: queries, 1, up to the current
 * capacity, now and then past it.  TRACE_EXTRAS adds recorded requests,
 * two-item calls and small steps back in time (the stores must agree on
 * those too; the models and invariants are for plain traces).
 */
static void gen_trace(const family *f, uint64_t seed, req *out, size_t n,
                      int nkeys, int mode)
{
    uint64_t s = seed * UINT64_C(0x2545f4914f6cdd1d) + 99;
    const sl_limit_config *c = cfg_of(f, 0);
    const sl_nanos P = c->period;
    const sl_nanos unit = c->algorithm == SL_STEPPED_WINDOW ? c->step : P;
    const sl_nanos g = MAX64(P / (2 * c->limit * nkeys), 1);
    const sl_nanos half = P / (2 * nkeys) + 1;
    sl_nanos t = T0 + tu_below(&s, 3 * P);
    int li = 0;

    for (size_t i = 0; i < n; i++) {
        req *q = &out[i];
        int64_t r = tu_below(&s, 100), cap;

        memset(q, 0, sizeof(*q));
        if (tu_below(&s, 100) < 4)
            li = tu_below(&s, 3) == 0 ? 0 : (int)tu_below(&s, f->n);
        if (r < 40) {
            /* same time */
        } else if (r < 90) {
            t += tu_range(&s, 1, 2 * g);
        } else if (r < 97) {
            t += tu_range(&s, 1, half);
        } else if (r < 99) {
            t += tu_range(&s, P / 2, 3 * P);
        } else {
            t = (t / unit + 1) * unit - (sl_nanos)tu_below(&s, 2);
        }
        cap = capacity(cfg_of(f, li));
        if (cap == 0)
            cap = capacity(c);
        r = tu_below(&s, 100);
        q->cost = r < 10   ? 0
                  : r < 60 ? 1
                  : r < 80 ? tu_range(&s, 1, MAX64(cap / 3, 1))
                  : r < 97 ? tu_range(&s, 1, cap)
                           : cap + tu_range(&s, 1, 3);
        q->key = (int)tu_below(&s, nkeys);
        q->li = li;
        q->t = t;
        if (mode == TRACE_EXTRAS) {
            r = tu_below(&s, 100);
            if (r < 3)
                q->t = MAX64(t - tu_range(&s, 1, MIN64(g, 5 * MS)), 0);
            else if (r < 10)
                q->record = 1;
            else if (r < 17 && nkeys > 1) {
                q->multi = 1;
                q->key2 = (q->key + 1 + (int)tu_below(&s, nkeys - 1)) % nkeys;
                q->li2 = (int)tu_below(&s, f->n);
                q->cost2 = tu_below(&s, 3);
            }
        }
    }
}

/* ---- the buckets' model: units used ---- */

/*
 * x = units used * P, an integer: it decays by (t - t_last) * L_prev, L
 * of the limit that last wrote the key; a check under L converts it,
 * rounded up to a tick of the new T (a multiple of g = gcd(P, L)) and
 * clamped to B * P; a check under L = 0 leaves the key alone.  Then the
 * token bucket's formulas in x (docs/algorithms.md), which gcra and
 * leaky_bucket share.
 */
typedef struct unit_key {
    i128 x;
    int64_t l_prev;
    sl_nanos last;
} unit_key;

static i128 gcd128(i128 a, i128 b)
{
    while (b != 0) {
        i128 r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static void unit_check(unit_key *k, const sl_limit_config *c, int64_t cost,
                       sl_nanos t, sl_decision *d)
{
    const i128 P = c->period, L = c->limit, B = c->burst;

    if (k->l_prev > 0 && (k->x -= (i128)(t - k->last) * k->l_prev) < 0)
        k->x = 0;
    k->last = t;
    memset(d, 0, sizeof(*d));
    d->limit = c->limit;
    if (L == 0) {
        d->allowed = cost == 0;
        d->retry_after = cost == 0 ? 0 : -1;
        d->reset_after =
            k->l_prev > 0 ? (sl_nanos)tu_ceil_div(k->x, k->l_prev) : 0;
        return;
    }
    {
        i128 g = gcd128(P, L);
        k->x = tu_ceil_div(k->x, g) * g;
        if (k->x > B * P)
            k->x = B * P;
        k->l_prev = c->limit;
    }
    d->allowed = cost <= c->burst && k->x + cost * P <= B * P;
    if (d->allowed && c->algorithm == SL_LEAKY_BUCKET)
        d->delay = (sl_nanos)tu_ceil_div(k->x, L);
    if (d->allowed)
        k->x += cost * P;
    d->remaining = c->burst - (int64_t)tu_ceil_div(k->x, P);
    d->reset_after = (sl_nanos)tu_ceil_div(k->x, L);
    d->retry_after = d->allowed ? 0
                     : cost > c->burst
                         ? -1
                         : (sl_nanos)tu_ceil_div(k->x - (B - cost) * P, L);
}

/* ---- no minted credit, from what was admitted ---- */

typedef struct seen {
    sl_nanos t;
    int64_t admitted; /* cost if allowed, else 0 */
    int64_t limit, burst;
} seen;

typedef struct history {
    seen *ev;
    size_t len, cap;
} history;

static void history_add(history *h, sl_nanos t, int64_t admitted,
                        const sl_limit_config *c)
{
    if (h->len == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->ev = realloc(h->ev, h->cap * sizeof(seen));
        assert_non_null(h->ev);
    }
    h->ev[h->len++] = (seen){t, admitted, c->limit, c->burst};
}

static char why[512];

/*
 * The buckets: over checks i..j of a key (those with L > 0; a check at 0
 * changes nothing), with L_k and B_k the numbers of check k,
 *
 *   admitted(i..j) <= B_j + sum_{k=i}^{j-1} (t_{k+1} - t_k) L_k / P
 *                         + sum_{k=i+1}^{j} max(0, B_{k-1} - B_k)
 *
 * the bucket's bound with the rate in force between checks and a burst
 * that may change: the units used are kept across a change, except what a
 * smaller burst forgives (0 left, never less).  In integers (times P), for
 * every i <= j in one pass with the least of the i side.
 */
static int bucket_bound(sl_nanos period, const history *h)
{
    const i128 P = period;
    i128 a = 0, rate = 0, drop = 0, least = 0;
    int64_t prev_b = -1;
    sl_nanos prev_t = 0;
    int64_t prev_l = 0;
    int started = 0;

    for (size_t k = 0; k < h->len; k++) {
        const seen *e = &h->ev[k];
        i128 side;
        if (e->limit == 0)
            continue;
        if (started) {
            rate += (i128)(e->t - prev_t) * prev_l;
            if (prev_b > e->burst)
                drop += (i128)(prev_b - e->burst) * P;
        }
        side = a * P - rate - drop; /* A_{i-1} P - R_i - Q_i */
        if (!started || side < least)
            least = side;
        a += e->admitted;
        if (a * P - (i128)e->burst * P - rate - drop > least) {
            snprintf(why, sizeof(why),
                     "admitted more than the bucket's bound by the check at "
                     "%lld (L %lld, B %lld)",
                     (long long)e->t, (long long)e->limit, (long long)e->burst);
            return -1;
        }
        started = 1;
        prev_t = e->t;
        prev_l = e->limit;
        prev_b = e->burst;
    }
    return 0;
}

/*
 * The windows: at every admission, what was admitted in the window the
 * algorithm counts, up to and with it, is at most the L of that check:
 * fixed_window its aligned window; sliding_log (t - P, t]; stepped_window
 * the n steps ending with its step; sliding_window the estimate
 * floor(prev (P - e) / P) + cur.  So no window ever holds more than the
 * limit in force when its last unit came in.
 */
static int window_bound(const sl_limit_config *c, const history *h)
{
    const sl_nanos P = c->period;
    size_t j = 0;
    int64_t sum = 0;

    for (size_t i = 0; i < h->len; i++) {
        const seen *e = &h->ev[i];
        int64_t count;
        if (e->admitted == 0)
            continue;
        sum += e->admitted;
        switch (c->algorithm) {
        case SL_FIXED_WINDOW:
            while (h->ev[j].t / P < e->t / P)
                sum -= h->ev[j++].admitted;
            count = sum;
            break;
        case SL_SLIDING_LOG:
            while (h->ev[j].t <= e->t - P)
                sum -= h->ev[j++].admitted;
            count = sum;
            break;
        case SL_STEPPED_WINDOW:
            while (h->ev[j].t / c->step <= e->t / c->step - P / c->step)
                sum -= h->ev[j++].admitted;
            count = sum;
            break;
        default: { /* SL_SLIDING_WINDOW */
            int64_t w = e->t / P, prev = 0, cur = 0;
            sl_nanos off = e->t - w * P;
            while (h->ev[j].t / P < w - 1)
                j++;
            for (size_t m = j; m <= i; m++) {
                if (h->ev[m].t / P == w - 1)
                    prev += h->ev[m].admitted;
                else
                    cur += h->ev[m].admitted;
            }
            count = (int64_t)((i128)prev * (P - off) / P) + cur;
            break;
        }
        }
        if (count > e->limit) {
            snprintf(why, sizeof(why),
                     "admitted at %lld: the window holds %lld > L %lld",
                     (long long)e->t, (long long)count, (long long)e->limit);
            return -1;
        }
    }
    return 0;
}

static int check_no_minting(const sl_limit_config *base, const history *h)
{
    return is_bucket(base->algorithm) ? bucket_bound(base->period, h)
                                      : window_bound(base, h);
}

/* ---- the configurations ---- */

typedef struct config {
    const char *name;
    sl_limit_config c;
} config;

#define CFG(alg, l, p, b, st, fl)                                              \
    {                                                                          \
#alg " " #l "/" #p " B" #b " k" #st " f" #fl,                          \
        {                                                                      \
            .algorithm = alg, .limit = l, .period = p, .burst = b, .step = st, \
            .flags = fl                                                        \
        }                                                                      \
    }

/* Whole T, T = 333,333,333.3 ns, T = 8.57 s with B < L, B << L, T = 7/3
 * ns, a period that is not a round number; the windows as in
 * test_properties.c. */
static const config configs[] = {
    CFG(SL_TOKEN_BUCKET, 10, SEC, 10, 0, 0),
    CFG(SL_TOKEN_BUCKET, 3, SEC, 5, 0, 0),
    CFG(SL_TOKEN_BUCKET, 7, MINUTE, 3, 0, 0),
    CFG(SL_TOKEN_BUCKET, 1000, SEC, 50, 0, 0),
    CFG(SL_TOKEN_BUCKET, 3, 7, 4, 0, 0),
    CFG(SL_GCRA, 10, SEC, 10, 0, 0),
    CFG(SL_GCRA, 3, SEC, 5, 0, 0),
    CFG(SL_GCRA, 7, MINUTE, 3, 0, 0),
    CFG(SL_GCRA, 13, SEC + 7, 9, 0, 0),
    CFG(SL_GCRA, 3, 7, 4, 0, 0),
    CFG(SL_LEAKY_BUCKET, 10, SEC, 10, 0, 0),
    CFG(SL_LEAKY_BUCKET, 3, SEC, 5, 0, 0),
    CFG(SL_LEAKY_BUCKET, 7, MINUTE, 3, 0, 0),
    CFG(SL_LEAKY_BUCKET, 1000, MINUTE, 100, 0, 0),
    CFG(SL_LEAKY_BUCKET, 3, 7, 4, 0, 0),
    CFG(SL_FIXED_WINDOW, 5, SEC, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 7, MINUTE, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 3, 10, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 5, SEC, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 3, MINUTE, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 20, 7, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 5, SEC, 0, 0, SL_LOG_REJECTED),
    CFG(SL_SLIDING_WINDOW, 7, MINUTE, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 5, SEC, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 3, 7, 0, 0, 0),
    CFG(SL_STEPPED_WINDOW, 10, 4 * SEC, 0, SEC, 0),
    CFG(SL_STEPPED_WINDOW, 5, SEC, 0, 100 * MS, 0),
    CFG(SL_STEPPED_WINDOW, 3, 12, 0, 4, 0),
};

#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

static const uint64_t seeds[] = {1, 2, 3};

static size_t trace_len(int which, size_t memory, size_t redis)
{
    size_t n = which == MEMORY ? memory : redis;
    return tu_quick() ? n / 5 : n;
}

static int same_decision(const sl_decision *a, const sl_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining && a->reset_after == b->reset_after &&
           a->retry_after == b->retry_after && a->delay == b->delay;
}

static void fail_decisions(const char *what, const char *side, size_t i,
                           const req *q, const family *f, const sl_decision *a,
                           const sl_decision *b)
{
    fail_msg("%s, request %zu (key %d, t %lld, cost %lld, L %lld B %lld):\n"
             "  %-9s allowed %d remaining %lld reset_after %lld retry_after "
             "%lld delay %lld limit %lld\n"
             "  %-9s allowed %d remaining %lld reset_after %lld retry_after "
             "%lld delay %lld limit %lld",
             what, i, q->key, (long long)q->t, (long long)q->cost,
             (long long)cfg_of(f, q->li)->limit,
             (long long)cfg_of(f, q->li)->burst, "library:", a->allowed,
             (long long)a->remaining, (long long)a->reset_after,
             (long long)a->retry_after, (long long)a->delay,
             (long long)a->limit, side, b->allowed, (long long)b->remaining,
             (long long)b->reset_after, (long long)b->retry_after,
             (long long)b->delay, (long long)b->limit);
}

/* ---- (a) and the buckets' model ---- */

/*
 * One trace per configuration and seed: every decision obeys the
 * fields' rules (limit is the L in force; retry_after 0 when allowed, -1
 * exactly for a cost over the capacity in force), the buckets'
 * decisions equal the units model's, and check_no_minting holds on each
 * key.  Returns how many traces failed check_no_minting, which only
 * fresh limits (the caller expects some) may.
 */
static size_t run_changes(sl_algorithm alg, int which, int fresh)
{
    const size_t n = trace_len(which, 20000, 1000);
    req *trace = calloc(n, sizeof(req));
    size_t runs = 0, broken = 0, refused = 0;

    assert_non_null(trace);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        if (configs[ci].c.algorithm != alg)
            continue;
        for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
            sl_store *st = store_new(which);
            history h[NKEYS];
            unit_key model[NKEYS];
            family f;
            char what[256];

            snprintf(what, sizeof(what), "%s%s, %s, seed %llu",
                     fresh ? "fresh limits: " : "", configs[ci].name,
                     store_names[which], (unsigned long long)seeds[si]);
            memset(h, 0, sizeof(h));
            memset(model, 0, sizeof(model));
            family_new(&configs[ci].c, &f, fresh);
            gen_trace(&f, seeds[si], trace, n, NKEYS, TRACE_PLAIN);
            for (size_t i = 0; i < n; i++) {
                const req *q = &trace[i];
                const sl_limit_config *c = cfg_of(&f, q->li);
                sl_decision d = check_at(st, f.lim[q->li], key_names[q->key],
                                         q->cost, q->t, 0),
                            want;
                if (d.limit != c->limit ||
                    (d.allowed ? d.retry_after != 0 || d.remaining < 0
                               : d.delay != 0 || d.retry_after == 0 ||
                                     (d.retry_after == -1) !=
                                         (q->cost > capacity(c))))
                    fail_decisions(what, "(rules)", i, q, &f, &d, &d);
                if (is_bucket(alg) && !fresh) {
                    unit_check(&model[q->key], c, q->cost, q->t, &want);
                    if (!same_decision(&d, &want))
                        fail_decisions(what, "model:", i, q, &f, &d, &want);
                }
                refused += !d.allowed;
                history_add(&h[q->key], q->t, d.allowed ? q->cost : 0, c);
            }
            for (int k = 0; k < NKEYS; k++) {
                if (check_no_minting(&configs[ci].c, &h[k]) != 0) {
                    if (!fresh)
                        fail_msg("%s, key %d: %s", what, k, why);
                    broken++;
                    break;
                }
            }
            for (int k = 0; k < NKEYS; k++)
                free(h[k].ev);
            family_free(&f);
            sl_store_free(st);
            runs++;
        }
    }
    free(trace);
    expect_cmp(runs, >, 0);
    expect_cmp(refused, >, 0);
    return broken;
}

/* ---- (c) retry_after and remaining, exact after a change ---- */

/* Replays trace[0 .. upto] into a fresh key, each request under its own
 * limit, so that what is asked next sees exactly that history. */
static const char *replay(sl_store *st, const family *f, const req *trace,
                          size_t upto, unsigned *counter)
{
    static char key[32];
    snprintf(key, sizeof(key), "replay-%u", (*counter)++);
    for (size_t i = 0; i <= upto; i++)
        check_at(st, f->lim[trace[i].li], key, trace[i].cost, trace[i].t, 0);
    return key;
}

/*
 * Short single-key traces on which, for every request, under the limit
 * then in force: a refused request passes at t + retry_after and not at
 * t + retry_after - 1, and `remaining` unit requests pass at t and one
 * more does not; each checked on a fresh key holding the same history.
 */
static void run_replays(sl_algorithm alg, int which)
{
    const size_t n = trace_len(which, 300, 50);
    req *trace = calloc(n, sizeof(req));
    sl_decision *ds = calloc(n, sizeof(sl_decision));
    size_t runs = 0, waits = 0;

    assert_non_null(trace);
    assert_non_null(ds);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        if (configs[ci].c.algorithm != alg || configs[ci].c.limit > 20)
            continue;
        for (size_t si = 0; si < 2; si++) {
            sl_store *st = store_new(which);
            unsigned counter = 0;
            family f;

            family_new(&configs[ci].c, &f, 0);
            gen_trace(&f, seeds[si] + 100, trace, n, 1, TRACE_PLAIN);
            for (size_t i = 0; i < n; i++)
                ds[i] = check_at(st, f.lim[trace[i].li], "main", trace[i].cost,
                                 trace[i].t, 0);
            for (size_t i = 0; i < n; i++) {
                const req *q = &trace[i];
                const sl_limit *lim = f.lim[q->li];
                const sl_decision *d = &ds[i];
                const char *key;
                int64_t passed = 0;

                if (!d->allowed && d->retry_after > 0) {
                    key = replay(st, &f, trace, i, &counter);
                    expect_eq_at(check_at(st, lim, key, q->cost,
                                          q->t + d->retry_after, 0)
                                     .allowed,
                                 1,
                                 "%s %s seed %llu request %zu: t + retry_after",
                                 configs[ci].name, store_names[which],
                                 (unsigned long long)seeds[si], i);
                    key = replay(st, &f, trace, i, &counter);
                    expect_eq_at(check_at(st, lim, key, q->cost,
                                          q->t + d->retry_after - 1, 0)
                                     .allowed,
                                 0,
                                 "%s %s seed %llu request %zu: t + "
                                 "retry_after - 1",
                                 configs[ci].name, store_names[which],
                                 (unsigned long long)seeds[si], i);
                    waits++;
                }
                key = replay(st, &f, trace, i, &counter);
                for (int64_t u = 0; u < d->remaining; u++)
                    passed += check_at(st, lim, key, 1, q->t, 0).allowed;
                expect_eq_at(passed, d->remaining,
                             "%s %s seed %llu request %zu: units passing",
                             configs[ci].name, store_names[which],
                             (unsigned long long)seeds[si], i);
                expect_eq_at(check_at(st, lim, key, 1, q->t, 0).allowed, 0,
                             "%s %s seed %llu request %zu: one more than "
                             "remaining passed",
                             configs[ci].name, store_names[which],
                             (unsigned long long)seeds[si], i);
            }
            family_free(&f);
            sl_store_free(st);
            runs++;
        }
    }
    free(trace);
    free(ds);
    expect_cmp(runs, >, 0);
    expect_cmp(waits, >, 0);
}

/* ---- (d) the memory and Redis stores agree ---- */

static void expect_same(const char *what, size_t i, const req *q,
                        const family *f, const sl_decision *m,
                        const sl_decision *r)
{
    if (!same_decision(m, r))
        fail_decisions(what, "redis:", i, q, f, m, r);
}

/* Equivalence traces: changes, recorded requests, two-item calls (the
 * second item another limit of the family on another key), small steps
 * back in time, on both stores, decision by decision. */
static void run_stores_agree(sl_algorithm alg)
{
    const size_t n = tu_quick() ? 400 : 1500;
    req *trace = calloc(n, sizeof(req));
    size_t runs = 0;

    assert_non_null(trace);
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        if (configs[ci].c.algorithm != alg)
            continue;
        for (size_t si = 0; si < 2; si++) {
            sl_store *mem = store_new(MEMORY), *red = store_new(REDIS);
            family f;
            char what[256];

            snprintf(what, sizeof(what), "%s, seed %llu", configs[ci].name,
                     (unsigned long long)seeds[si]);
            family_new(&configs[ci].c, &f, 0);
            gen_trace(&f, seeds[si] + 300, trace, n, NKEYS, TRACE_EXTRAS);
            for (size_t i = 0; i < n; i++) {
                const req *q = &trace[i];
                if (q->multi) {
                    sl_check_item items[2] = {{f.lim[q->li], key_names[q->key],
                                               strlen(key_names[q->key])},
                                              {f.lim[q->li2],
                                               key_names[q->key2],
                                               strlen(key_names[q->key2])}};
                    int64_t costs[2] = {q->cost, q->cost2};
                    sl_decision me[2], re[2], mo, ro;
                    expect_eq(
                        sl_check_costs(mem, items, costs, 2, q->t, 0, me, &mo),
                        0);
                    expect_eq(
                        sl_check_costs(red, items, costs, 2, q->t, 0, re, &ro),
                        0);
                    expect_same(what, i, q, &f, &me[0], &re[0]);
                    expect_same(what, i, q, &f, &me[1], &re[1]);
                    expect_same(what, i, q, &f, &mo, &ro);
                } else {
                    unsigned flags = q->record ? SL_RECORD : 0;
                    sl_decision m =
                        check_at(mem, f.lim[q->li], key_names[q->key], q->cost,
                                 q->t, flags);
                    sl_decision r =
                        check_at(red, f.lim[q->li], key_names[q->key], q->cost,
                                 q->t, flags);
                    expect_same(what, i, q, &f, &m, &r);
                }
            }
            family_free(&f);
            sl_store_free(mem);
            sl_store_free(red);
            runs++;
        }
    }
    free(trace);
    expect_cmp(runs, >, 0);
}

/* The invariants can fail: limits with the overrides' numbers but
 * counters of their own (what resetting on a change would do) break
 * them on some trace of every algorithm. */
static void test_fresh_counters_are_caught(void **state)
{
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        if (run_changes((sl_algorithm)a, MEMORY, 1) == 0)
            fail_msg("%s: fresh counters on a change went unnoticed",
                     sl_algorithm_name((sl_algorithm)a));
}

#define PER_ALG(alg)                                                           \
    static void test_##alg##_changes_memory(void **state)                      \
    {                                                                          \
        (void)state;                                                           \
        run_changes(SL_##alg, MEMORY, 0);                                      \
    }                                                                          \
    static void test_##alg##_changes_redis(void **state)                       \
    {                                                                          \
        (void)state;                                                           \
        run_changes(SL_##alg, REDIS, 0);                                       \
    }                                                                          \
    static void test_##alg##_replays_memory(void **state)                      \
    {                                                                          \
        (void)state;                                                           \
        run_replays(SL_##alg, MEMORY);                                         \
    }                                                                          \
    static void test_##alg##_replays_redis(void **state)                       \
    {                                                                          \
        (void)state;                                                           \
        run_replays(SL_##alg, REDIS);                                          \
    }                                                                          \
    static void test_##alg##_stores_agree(void **state)                        \
    {                                                                          \
        (void)state;                                                           \
        run_stores_agree(SL_##alg);                                            \
    }

PER_ALG(TOKEN_BUCKET)
PER_ALG(GCRA)
PER_ALG(LEAKY_BUCKET)
PER_ALG(FIXED_WINDOW)
PER_ALG(SLIDING_LOG)
PER_ALG(SLIDING_WINDOW)
PER_ALG(STEPPED_WINDOW)

#define PER_ALG_TESTS(alg)                                                     \
    cmocka_unit_test(test_##alg##_changes_memory),                             \
        cmocka_unit_test(test_##alg##_changes_redis),                          \
        cmocka_unit_test(test_##alg##_replays_memory),                         \
        cmocka_unit_test(test_##alg##_replays_redis),                          \
        cmocka_unit_test(test_##alg##_stores_agree)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_override_numbers),
        cmocka_unit_test(test_base_freed_first),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_fresh_counters_are_caught),
        PER_ALG_TESTS(TOKEN_BUCKET),
        PER_ALG_TESTS(GCRA),
        PER_ALG_TESTS(LEAKY_BUCKET),
        PER_ALG_TESTS(FIXED_WINDOW),
        PER_ALG_TESTS(SLIDING_LOG),
        PER_ALG_TESTS(SLIDING_WINDOW),
        PER_ALG_TESTS(STEPPED_WINDOW),
    };
    /* SL_TEST_FILTER=pattern runs the matching tests only ("*redis*"). */
    if (getenv("SL_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("SL_TEST_FILTER"));
    return cmocka_run_group_tests(tests, tu_redis_group_setup,
                                  tu_redis_group_teardown);
}
