/*
 * test_equivalence.c - the three schedule algorithms are one admission
 * rule (docs/algorithms.md): gcra decides exactly as token_bucket does,
 * field for field, and leaky_bucket admits exactly what token_bucket
 * admits, its delay being the time the token bucket would need to be full
 * again.  Checked on long seeded random traces with random costs, on
 * fixed configurations (T whole, T = P/3, T = 7/3 ns, the largest counts)
 * and on random ones, where T is almost never a whole number of ns.
 *
 * The three limits share one store and the same key names: their state
 * must stay apart, since the limits differ in algorithm.
 */
#include "testutil.h"

#define NKEYS 4

static const char *const key_names[NKEYS] = {"a", "b", "c", "d"};

typedef struct bucket_config {
    int64_t limit;
    sl_nanos period;
    int64_t burst;
} bucket_config;

static const bucket_config fixed_configs[] = {
    {10, SEC, 10},
    {3, SEC, 5},
    {7, MINUTE, 3},
    {1000, SEC, 50},
    {3, 7, 4},
    {1, SEC, 1},
    {13, SEC + 7, 9},
    {SL_MAX_COUNT, HOUR, SL_MAX_COUNT},
    {SL_MAX_COUNT, SEC, 1},
};

#define NFIXED (sizeof(fixed_configs) / sizeof(fixed_configs[0]))

typedef struct req {
    int key;
    sl_nanos t;
    int64_t cost;
} req;

static size_t trace_len(void)
{
    return tu_quick() ? 15000 : 100000;
}

/* Bursts at one instant, gaps around the emission interval, now and then
 * an idle stretch; costs 0 .. B + 2 (past B: never fits). */
static void gen_trace(const bucket_config *bc, uint64_t seed, req *out,
                      size_t n)
{
    uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + 99;
    const sl_nanos T = bc->period / bc->limit > 1
                           ? bc->period / bc->limit
                           : 1;
    const int64_t b = bc->burst;
    sl_nanos t = tu_below(&s, 2 * bc->period);

    for (size_t i = 0; i < n; i++) {
        int64_t r = tu_below(&s, 100), cost;
        if (r < 40)
            ; /* same instant */
        else if (r < 85)
            t += tu_range(&s, 1, 2 * T);
        else if (r < 97)
            t += tu_range(&s, 1, bc->period / 2 + 1);
        else
            t += tu_range(&s, bc->period / 2, 2 * bc->period);
        r = tu_below(&s, 100);
        if (r < 10)
            cost = 0;
        else if (r < 60)
            cost = 1;
        else if (r < 97)
            cost = tu_range(&s, 1, b);
        else
            cost = b + tu_range(&s, 1, 2);
        if (cost > SL_MAX_COUNT)
            cost = SL_MAX_COUNT;
        out[i] = (req){(int)tu_below(&s, NKEYS), t, cost};
    }
}

/* A random bucket: L in 1 .. 2000, P in 1 ns .. 100 s, B in 1 .. 2L. */
static bucket_config random_config(uint64_t *s)
{
    bucket_config bc;
    bc.limit = tu_range(s, 1, 2000);
    switch (tu_below(s, 3)) {
    case 0:
        bc.period = tu_range(s, 1, 1000);
        break;
    case 1:
        bc.period = tu_range(s, 1, 100 * SEC);
        break;
    default:
        bc.period = tu_range(s, 1, 100) * SEC + tu_range(s, 0, 999);
        break;
    }
    bc.burst = tu_range(s, 1, 2 * bc.limit);
    return bc;
}

static sl_limit *bucket_limit(sl_algorithm alg, const bucket_config *bc)
{
    return tu_limit(alg, bc->limit, bc->period, bc->burst);
}

static void fail_pair(const char *what, const bucket_config *bc,
                      uint64_t seed, size_t i, const req *q,
                      const sl_decision *a, const sl_decision *b)
{
    fail_msg("%s: L %lld P %lld B %lld, seed %llu, request %zu (key %s, "
             "t %lld, cost %lld):\n"
             "  token_bucket: allowed %d remaining %lld reset_after %lld "
             "retry_after %lld delay %lld\n"
             "  other:        allowed %d remaining %lld reset_after %lld "
             "retry_after %lld delay %lld",
             what, (long long)bc->limit, (long long)bc->period,
             (long long)bc->burst, (unsigned long long)seed, i,
             key_names[q->key], (long long)q->t, (long long)q->cost,
             a->allowed, (long long)a->remaining, (long long)a->reset_after,
             (long long)a->retry_after, (long long)a->delay, b->allowed,
             (long long)b->remaining, (long long)b->reset_after,
             (long long)b->retry_after, (long long)b->delay);
}

/*
 * Runs one trace through token_bucket, gcra and leaky_bucket with the
 * same parameters, in one store.  gcra must equal token_bucket in every
 * field.  leaky_bucket must admit the same requests with the same
 * remaining, reset_after and retry_after, and an admitted request's delay
 * must be the token bucket's reset_after just before it (the time the
 * work already queued needs to drain).  Returns how many were admitted.
 */
static size_t run_three(const bucket_config *bc, uint64_t seed, req *trace,
                        size_t n)
{
    sl_store *st = tu_store();
    sl_limit *tb = bucket_limit(SL_TOKEN_BUCKET, bc);
    sl_limit *gcra = bucket_limit(SL_GCRA, bc);
    sl_limit *lb = bucket_limit(SL_LEAKY_BUCKET, bc);
    size_t admitted = 0;

    gen_trace(bc, seed, trace, n);
    for (size_t i = 0; i < n; i++) {
        const req *q = &trace[i];
        const char *key = key_names[q->key];
        sl_decision before = tu_check(st, tb, key, 0, q->t);
        sl_decision t = tu_check(st, tb, key, q->cost, q->t);
        sl_decision g = tu_check(st, gcra, key, q->cost, q->t);
        sl_decision l = tu_check(st, lb, key, q->cost, q->t);

        if (g.allowed != t.allowed || g.remaining != t.remaining ||
            g.reset_after != t.reset_after ||
            g.retry_after != t.retry_after || g.delay != 0 ||
            g.limit != t.limit)
            fail_pair("gcra differs from token_bucket", bc, seed, i, q, &t,
                      &g);
        if (l.allowed != t.allowed || l.remaining != t.remaining ||
            l.reset_after != t.reset_after ||
            l.retry_after != t.retry_after)
            fail_pair("leaky_bucket differs from token_bucket", bc, seed, i,
                      q, &t, &l);
        if (l.delay != (l.allowed ? before.reset_after : 0))
            fail_pair("leaky_bucket delay is not the token bucket's time "
                      "to full",
                      bc, seed, i, q, &before, &l);
        admitted += t.allowed && q->cost > 0;
    }
    sl_limit_free(tb);
    sl_limit_free(gcra);
    sl_limit_free(lb);
    sl_store_free(st);
    return admitted;
}

static void test_equivalent_on_fixed_configs(void **state)
{
    const size_t n = trace_len();
    req *trace = calloc(n, sizeof(req));
    (void)state;

    assert_non_null(trace);
    for (size_t ci = 0; ci < NFIXED; ci++) {
        for (uint64_t seed = 1; seed <= 2; seed++) {
            size_t admitted = run_three(&fixed_configs[ci], seed, trace, n);
            /* The traces exercise both answers. */
            expect_cmp(admitted, >, n / 10);
            expect_cmp(admitted, <, n - n / 10);
        }
    }
    free(trace);
}

static void test_equivalent_on_random_configs(void **state)
{
    const size_t n = trace_len() / 10;
    const int nconfigs = tu_quick() ? 20 : 60;
    req *trace = calloc(n, sizeof(req));
    uint64_t s = 2024;
    int fractional = 0;
    (void)state;

    assert_non_null(trace);
    for (int i = 0; i < nconfigs; i++) {
        bucket_config bc = random_config(&s);
        fractional += bc.period % bc.limit != 0;
        run_three(&bc, (uint64_t)i + 10, trace, n);
    }
    /* Most random configurations have a non-integral T. */
    expect_cmp(fractional, >, nconfigs / 2);
    free(trace);
}

/* The comparison itself can fail: a token bucket one unit deeper is told
 * apart from gcra on every fixed configuration's trace. */
static void test_comparison_sees_a_different_burst(void **state)
{
    const size_t n = 5000;
    req *trace = calloc(n, sizeof(req));
    size_t told_apart = 0;
    (void)state;

    assert_non_null(trace);
    for (size_t ci = 0; ci < NFIXED; ci++) {
        bucket_config deeper = fixed_configs[ci];
        sl_store *st = tu_store();
        sl_limit *gcra, *tb;

        if (deeper.burst == SL_MAX_COUNT) {
            sl_store_free(st);
            told_apart++; /* cannot be deeper; counted as seen */
            continue;
        }
        deeper.burst++;
        gcra = bucket_limit(SL_GCRA, &fixed_configs[ci]);
        tb = bucket_limit(SL_TOKEN_BUCKET, &deeper);
        gen_trace(&fixed_configs[ci], 5, trace, n);
        for (size_t i = 0; i < n; i++) {
            const char *key = key_names[trace[i].key];
            sl_decision g = tu_check(st, gcra, key, trace[i].cost, trace[i].t);
            sl_decision t = tu_check(st, tb, key, trace[i].cost, trace[i].t);
            if (g.allowed != t.allowed || g.remaining != t.remaining) {
                told_apart++;
                break;
            }
        }
        sl_limit_free(gcra);
        sl_limit_free(tb);
        sl_store_free(st);
    }
    free(trace);
    expect_eq(told_apart, NFIXED);
}

/* Equal parameters but different algorithms or ids: separate state. */
static void test_same_key_different_limits_are_separate(void **state)
{
    const bucket_config bc = {2, SEC, 2};
    sl_store *st = tu_store();
    sl_limit *tb = bucket_limit(SL_TOKEN_BUCKET, &bc);
    sl_limit *gcra = bucket_limit(SL_GCRA, &bc);
    sl_limit_config c = {.algorithm = SL_TOKEN_BUCKET, .limit = 2,
                         .period = SEC, .burst = 2, .id = 7};
    sl_limit *tb7 = tu_limit_cfg(&c);
    (void)state;

    expect_eq(tu_check(st, tb, "k", 2, SEC).allowed, 1);
    expect_eq(tu_check(st, tb, "k", 1, SEC).allowed, 0);
    expect_eq(tu_check(st, gcra, "k", 2, SEC).allowed, 1);
    expect_eq(tu_check(st, tb7, "k", 2, SEC).allowed, 1);
    sl_limit_free(tb);
    sl_limit_free(gcra);
    sl_limit_free(tb7);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equivalent_on_fixed_configs),
        cmocka_unit_test(test_equivalent_on_random_configs),
        cmocka_unit_test(test_comparison_sees_a_different_burst),
        cmocka_unit_test(test_same_key_different_limits_are_separate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
