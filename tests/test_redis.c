/*
 * test_redis.c - the Redis store against a real redis-server that the test
 * starts itself (tests/redisutil.h): every algorithm decides exactly as
 * the memory store does, field for field, on long seeded random traces
 * (wall-clock-sized times, irregular steps, equal and slightly backward
 * times, costs 0 .. past the limit, some requests recorded with
 * SL_RECORD); multi-item calls with a cost per item are all-or-nothing
 * and equal too, alone and in batches (several calls in one script
 * call); the script survives SCRIPT FLUSH; a dead or paused Redis
 * gives SL_ESTORE within the timeout and a restarted one is used again by
 * the same store; keys carry a TTL and go when their state is initial;
 * bad options and limits outside the exact bound are refused clearly.
 */
#include "testutil.h"

#include "internal.h"
#include "redis/redis_proto.h"
#include "store/redis_store.h"
#include "redisutil.h"

static tu_redis server;

static int group_setup(void **state)
{
    (void)state;
    if (tu_redis_start(&server) != 0) {
        fprintf(stderr, "cannot start redis-server (scripts/deps.sh "
                        "installs it)\n");
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_redis_cleanup(&server);
    return 0;
}

static redisContext *admin(void)
{
    redisContext *c = tu_redis_admin(&server);
    if (c == NULL)
        fail_msg("no admin connection to redis on port %d", server.port);
    return c;
}

/* A Redis store on the test server; extra TTL so that state outlives the
 * gap between the traces' manual clock and real time. */
static sl_store *redis_store_opts(sl_redis_options o)
{
    sl_store *st = NULL;
    char err[256] = "";
    int rc;
    o.size = sizeof(o); /* the callers' literals leave it to here */
    if (o.url == NULL && o.unix_path == NULL)
        o.url = server.url;
    rc = sl_redis_store_new(&o, &st, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_redis_store_new: %s (%s)", sl_err_name(rc), err);
    return st;
}

static sl_store *redis_store(void)
{
    return redis_store_opts(
        (sl_redis_options){.extra_ttl_ms = 600000, .key_prefix = "t:"});
}

static void flushall(void)
{
    redisContext *c = admin();
    tu_redis_do(c, "FLUSHALL");
    redisFree(c);
}

/* ---- equivalence on random traces ---- */

typedef struct trace_cfg {
    sl_limit_config cfg;
    const char *what;
    int flood; /* requests 64 times as dense: logs reach their caps */
} trace_cfg;

#define CFG(alg, l, p, b, s, f)                                                \
    {                                                                          \
        {.algorithm = alg,                                                     \
         .limit = l,                                                           \
         .period = p,                                                          \
         .burst = b,                                                           \
         .step = s,                                                            \
         .flags = f},                                                          \
            #alg " " #l "/" #p " burst " #b " step " #s " flags " #f, 0        \
    }
#define FLOOD(alg, l, p, f)                                                    \
    {                                                                          \
        {.algorithm = alg, .limit = l, .period = p, .flags = f},               \
            "flood of " #alg " " #l "/" #p " flags " #f, 1                     \
    }

static const trace_cfg configs[] = {
    CFG(SL_TOKEN_BUCKET, 10, SEC, 10, 0, 0),
    CFG(SL_TOKEN_BUCKET, 3, SEC, 5, 0, 0),
    CFG(SL_TOKEN_BUCKET, 13, SEC + 7, 9, 0, 0),
    CFG(SL_TOKEN_BUCKET, 3, 7, 4, 0, 0),
    /* At the bound: B * t_num = 2^52 exactly. */
    CFG(SL_TOKEN_BUCKET, 1, INT64_C(1) << 52, 1, 0, 0),
    CFG(SL_TOKEN_BUCKET, SL_MAX_COUNT, 4096, SL_MAX_COUNT, 0, 0),
    CFG(SL_GCRA, 7, MINUTE, 3, 0, 0),
    CFG(SL_GCRA, 1000, SEC, 50, 0, 0),
    CFG(SL_GCRA, 1000003, DAY, 1, 0, 0),
    CFG(SL_GCRA, 3, 7, 4, 0, 0),
    CFG(SL_LEAKY_BUCKET, 3, SEC, 3, 0, 0),
    CFG(SL_LEAKY_BUCKET, 13, SEC + 7, 9, 0, 0),
    CFG(SL_LEAKY_BUCKET, 1000, MINUTE, 100, 0, 0),
    CFG(SL_FIXED_WINDOW, 10, SEC, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 5, 7, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 3, 1, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, SL_MAX_COUNT, HOUR, 0, 0, 0),
    CFG(SL_FIXED_WINDOW, 100, INT64_C(1) << 52, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 7, MINUTE, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 10, SEC + 3, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 5, 7, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 4294967295, INT64_C(1) << 52, 0, 0, 0),
    CFG(SL_SLIDING_WINDOW, 1000, 999999937, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 10, SEC, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 5, 7, 0, 0, 0),
    CFG(SL_SLIDING_LOG, 3, MINUTE, 0, 0, SL_LOG_REJECTED),
    CFG(SL_SLIDING_LOG, 2, SEC, 0, 0, SL_LOG_REJECTED),
    CFG(SL_STEPPED_WINDOW, 10, SEC, 0, 0, 0),
    CFG(SL_STEPPED_WINDOW, 10, 4 * SEC, 0, SEC, 0),
    CFG(SL_STEPPED_WINDOW, 7, 12, 0, 3, 0),
    CFG(SL_STEPPED_WINDOW, 100, MINUTE, 0, 0, 0),
    FLOOD(SL_SLIDING_LOG, 3, SEC, SL_LOG_REJECTED),
    FLOOD(SL_SLIDING_LOG, 20, SEC, 0),
    FLOOD(SL_STEPPED_WINDOW, 50, SEC, 0),
    FLOOD(SL_SLIDING_WINDOW, 10, SEC, 0),
};

#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))
#define NKEYS 4

static const char *const key_names[NKEYS] = {"a", "b", "", "user:42"};

static size_t trace_len(void)
{
    return tu_quick() ? 800 : 4000;
}

/* The next time of a trace: often the same instant, gaps around the
 * emission interval, now and then a period or more, and sometimes a step
 * back (threads that read the clock out of order). */
static sl_nanos next_time(uint64_t *s, sl_nanos t, const trace_cfg *tc)
{
    const sl_limit_config *c = &tc->cfg;
    sl_nanos T = c->period / c->limit > 1 ? c->period / c->limit : 1;
    sl_nanos p = c->period;
    int64_t r = tu_below(s, 100);
    if (p > 1000 * SEC) /* 2^52 ns periods: stay within reach */
        p = 1000 * SEC;
    T = SL__MIN(T, p);
    if (tc->flood) {
        T = SL__MAX(T / 64, 1);
        p = SL__MAX(p / 64, 1);
    }
    if (r < 30)
        return t;
    if (r < 70)
        return t + tu_range(s, 1, 2 * T);
    if (r < 88)
        return t + tu_range(s, 1, p / 2 + 1);
    if (r < 95)
        return t + tu_range(s, p / 2, 2 * p);
    return t - tu_range(s, 1, SL__MIN(T, 5 * MS));
}

static int64_t next_cost(uint64_t *s, const sl_limit_config *c)
{
    int64_t cap = c->burst ? c->burst : c->limit, r = tu_below(s, 100);
    if (r < 10)
        return 0;
    if (r < 55)
        return 1;
    if (r < 96)
        return tu_range(s, 1, cap);
    return SL__MIN(cap + tu_range(s, 1, 2), SL_MAX_COUNT);
}

static void expect_same(const char *what, size_t i, const char *key,
                        int64_t cost, sl_nanos t, const sl_decision *m,
                        const sl_decision *r)
{
    if (m->allowed != r->allowed || m->limit != r->limit ||
        m->remaining != r->remaining || m->reset_after != r->reset_after ||
        m->retry_after != r->retry_after || m->delay != r->delay)
        fail_msg("%s: request %zu (key '%s', cost %lld, t %lld):\n"
                 "  memory: allowed %d limit %lld remaining %lld reset_after "
                 "%lld retry_after %lld delay %lld\n"
                 "  redis:  allowed %d limit %lld remaining %lld reset_after "
                 "%lld retry_after %lld delay %lld",
                 what, i, key, (long long)cost, (long long)t, m->allowed,
                 (long long)m->limit, (long long)m->remaining,
                 (long long)m->reset_after, (long long)m->retry_after,
                 (long long)m->delay, r->allowed, (long long)r->limit,
                 (long long)r->remaining, (long long)r->reset_after,
                 (long long)r->retry_after, (long long)r->delay);
}

static sl_decision check_or_fail(sl_store *st, const sl_limit *lim,
                                 const char *key, int64_t cost, sl_nanos t)
{
    sl_decision d;
    int rc = sl_check(st, lim, key, strlen(key), cost, t, &d);
    if (rc != 0) {
        char err[256];
        sl_store_last_error(st, err, sizeof(err));
        fail_msg("sl_check(key '%s', cost %lld, t %lld): %s (%s)", key,
                 (long long)cost, (long long)t, sl_err_name(rc), err);
    }
    return d;
}

/* A request that has happened anyway (SL_RECORD). */
static sl_decision record_or_fail(sl_store *st, const sl_limit *lim,
                                  const char *key, int64_t cost, sl_nanos t)
{
    sl_check_item item = {lim, key, strlen(key)};
    sl_decision d, all;
    int rc = sl_check_costs(st, &item, &cost, 1, t, SL_RECORD, &d, &all);
    if (rc != 0) {
        char err[256];
        sl_store_last_error(st, err, sizeof(err));
        fail_msg("sl_check_costs(SL_RECORD, key '%s', cost %lld, t %lld): "
                 "%s (%s)",
                 key, (long long)cost, (long long)t, sl_err_name(rc), err);
    }
    return d;
}

/*
 * The invariants of the logs' lists (src/redis/lua/eventlog.lua), read
 * back from Redis: element 0 is "sum s n", then at least one event
 * "s n cost" with cost > 0 and times strictly increasing; sum is their
 * total; every key has a TTL.  Returns the number of lists checked.
 */
static int check_lists(const char *pattern)
{
    redisContext *c = admin();
    redisReply *keys = redisCommand(c, "KEYS %s", pattern);
    int lists = 0;

    assert_non_null(keys);
    for (size_t k = 0; k < keys->elements; k++) {
        const char *key = keys->element[k]->str;
        redisReply *l = redisCommand(c, "LRANGE %s 0 -1", key);
        long long sum = 0, total = 0, ps = -1, pn = -1;

        if (l == NULL || l->type != REDIS_REPLY_ARRAY) {
            if (l)
                freeReplyObject(l);
            continue; /* a string state */
        }
        lists++;
        if (l->elements < 2 || sscanf(l->element[0]->str, "%lld", &sum) != 1)
            fail_msg("list '%s': no meta or no event", key);
        for (size_t i = 1; i < l->elements; i++) {
            long long es, en, cost;
            if (sscanf(l->element[i]->str, "%lld %lld %lld", &es, &en, &cost) !=
                    3 ||
                cost <= 0 || en < 0 || en >= SEC || es < ps ||
                (es == ps && en <= pn))
                fail_msg("list '%s': bad event %zu '%s'", key, i,
                         l->element[i]->str);
            total += cost;
            ps = es;
            pn = en;
        }
        expect_eq(total, sum);
        expect_cmp(tu_redis_int(c, "PTTL %s", key), >, 0);
        freeReplyObject(l);
    }
    freeReplyObject(keys);
    redisFree(c);
    return lists;
}

/* Runs one seeded trace through both stores; returns how many requests
 * (of cost > 0) were allowed. */
static size_t run_trace(const trace_cfg *tc, uint64_t seed, sl_store *mem,
                        sl_store *red)
{
    sl_limit *lim = tu_limit_cfg(&tc->cfg);
    uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + 7;
    /* Wall-clock-sized times (2023 onwards) with a random ns part: the
     * script must be exact where a double alone is not. */
    sl_nanos t = INT64_C(1700000000) * SEC + tu_below(&s, 1000 * SEC);
    size_t n = trace_len(), allowed = 0;

    for (size_t i = 0; i < n; i++) {
        const char *key = key_names[tu_below(&s, NKEYS)];
        int64_t cost = next_cost(&s, &tc->cfg);
        sl_decision m, r;
        /* One request in ten has happened anyway: recorded. */
        int record = tu_below(&s, 10) == 0;
        t = next_time(&s, t, tc);
        m = (record ? record_or_fail : check_or_fail)(mem, lim, key, cost, t);
        r = (record ? record_or_fail : check_or_fail)(red, lim, key, cost, t);
        if (record) {
            char what[200];
            snprintf(what, sizeof(what), "%s, recorded", tc->what);
            expect_same(what, i, key, cost, t, &m, &r);
        } else {
            expect_same(tc->what, i, key, cost, t, &m, &r);
        }
        allowed += m.allowed && cost > 0;
    }
    sl_limit_free(lim);
    return allowed;
}

static void test_every_algorithm_decides_as_memory(void **state)
{
    int seen[SL_ALGORITHM_COUNT] = {0}, lists = 0;
    (void)state;
    flushall();
    for (size_t ci = 0; ci < NCONFIGS; ci++) {
        sl_store *mem = tu_store(), *red = redis_store();
        size_t allowed = run_trace(&configs[ci], ci + 1, mem, red);
        /* The traces exercise both answers. */
        if (allowed == 0 || allowed >= trace_len())
            fail_msg("%s: %zu of %zu allowed", configs[ci].what, allowed,
                     trace_len());
        seen[configs[ci].cfg.algorithm]++;
        if (configs[ci].cfg.algorithm == SL_SLIDING_LOG ||
            configs[ci].cfg.algorithm == SL_STEPPED_WINDOW)
            lists += check_lists("t:*");
        flushall();
        sl_store_free(mem);
        sl_store_free(red);
    }
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        expect_cmp(seen[a], >, 0);
    expect_cmp(lists, >, 0);
}

/* The windows' start: a period of whole seconds or dividing a second is
 * computed without muldivmod() (prelude.lua, window_start()); one that is
 * neither with it.  All decide as the memory store. */
static void test_windows_whole_and_sub_second_decide_as_memory(void **state)
{
    static const trace_cfg windows[] = {
        CFG(SL_FIXED_WINDOW, 4, 250 * MS, 0, 0, 0),
        CFG(SL_FIXED_WINDOW, 20, 3 * SEC, 0, 0, 0),
        CFG(SL_FIXED_WINDOW, 6, 2500 * MS, 0, 0, 0),
        CFG(SL_SLIDING_WINDOW, 4, 250 * MS, 0, 0, 0),
        CFG(SL_SLIDING_WINDOW, 20, 3 * SEC, 0, 0, 0),
        CFG(SL_STEPPED_WINDOW, 8, SEC, 0, 250 * MS, 0),
        CFG(SL_STEPPED_WINDOW, 30, 6 * SEC, 0, 2 * SEC, 0),
    };
    (void)state;
    flushall();
    for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++) {
        sl_store *mem = tu_store(), *red = redis_store();
        size_t allowed = run_trace(&windows[i], 100 + i, mem, red);
        if (allowed == 0 || allowed >= trace_len())
            fail_msg("%s: %zu of %zu allowed", windows[i].what, allowed,
                     trace_len());
        flushall();
        sl_store_free(mem);
        sl_store_free(red);
    }
}

/* x^-1 mod m (gcd 1), or 0 when there is none. */
static int64_t inverse_mod(int64_t x, int64_t m)
{
    int64_t a = m, b = x % m, u = 0, v = 1;
    while (b != 0) {
        int64_t q = a / b, t = a - q * b;
        a = b;
        b = t;
        t = u - q * v;
        u = v;
        v = t;
    }
    return a != 1 ? 0 : (u % m + m) % m;
}

/* sliding_window's weighted previous count floor(prev (P - e) / P) is
 * one division below 2^53 and muldivmod() above (sliding_window.lua's
 * fast path): at offsets e where prev (P - e) is one less than a
 * multiple of P, a product rounded to a double would floor one too
 * high.  Decided as the memory store does. */
static void test_sliding_window_weighted_count_is_exact(void **state)
{
    const int64_t P = (INT64_C(1) << 40) + 15;
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, UINT32_MAX, P, 0);
    sl_store *mem = tu_store(), *red = redis_store();
    sl_nanos t0 = INT64_C(1700000000) * SEC / P * P; /* a window's start */
    int tried = 0;
    (void)state;

    flushall();
    for (int i = 0; i < 40; i++) {
        int64_t prev = (INT64_C(1) << 31) + 2 * i + 1, e = inverse_mod(prev, P);
        sl_decision m, r;
        char key[16];
        if (e == 0)
            continue;
        snprintf(key, sizeof(key), "w%d", i);
        /* prev in one window, then its weight at offset e in the next */
        m = check_or_fail(mem, lim, key, prev, t0);
        r = check_or_fail(red, lim, key, prev, t0);
        expect_same("fill", (size_t)i, key, prev, t0, &m, &r);
        m = check_or_fail(mem, lim, key, 0, t0 + P + e);
        r = check_or_fail(red, lim, key, 0, t0 + P + e);
        expect_same("weighted", (size_t)i, key, 0, t0 + P + e, &m, &r);
        tried++;
    }
    expect_cmp(tried, >, 20);
    sl_limit_free(lim);
    sl_store_free(mem);
    sl_store_free(red);
}

/* The comparison itself can fail: a Redis store deciding a limit one unit
 * larger is told apart on every algorithm's first trace. */
static void test_comparison_sees_a_different_limit(void **state)
{
    (void)state;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        size_t ci = 0;
        while (configs[ci].cfg.algorithm != (sl_algorithm)a)
            ci++;
        sl_limit_config c = configs[ci].cfg;
        sl_limit_config bigger = c;
        bigger.limit++;
        if (bigger.burst)
            bigger.burst++;
        sl_limit *lim = tu_limit_cfg(&c), *big = tu_limit_cfg(&bigger);
        sl_store *mem = tu_store(), *red = redis_store();
        uint64_t s = 3;
        sl_nanos t = INT64_C(1700000000) * SEC;
        int differ = 0;
        flushall();
        for (size_t i = 0; i < 2000 && !differ; i++) {
            int64_t cost = next_cost(&s, &c);
            t = next_time(&s, t, &configs[ci]);
            sl_decision m = check_or_fail(mem, lim, "k", cost, t);
            sl_decision r = check_or_fail(red, big, "k", cost, t);
            differ = m.allowed != r.allowed || m.remaining != r.remaining;
        }
        if (!differ)
            fail_msg("%s: a limit of %lld was not told from %lld",
                     configs[ci].what, (long long)bigger.limit,
                     (long long)c.limit);
        sl_limit_free(lim);
        sl_limit_free(big);
        sl_store_free(mem);
        sl_store_free(red);
    }
}

/* ---- several limits in one call ---- */

/* Two items (keys "u1", "u2") per picked config: the pool the multi-item
 * traces draw from.  lims[i] must be freed by the caller. */
static void make_pool(const size_t *picks, size_t npick, sl_limit **lims,
                      sl_check_item *pool)
{
    for (size_t i = 0; i < npick; i++) {
        lims[i] = tu_limit_cfg(&configs[picks[i]].cfg);
        pool[2 * i] = (sl_check_item){lims[i], "u1", 2};
        pool[2 * i + 1] = (sl_check_item){lims[i], "u2", 2};
    }
}

/* k distinct items of the pool (k <= pool_n <= 64), in random order, each
 * with its own cost: 0 one time in five, else 1 to 3. */
static void pick_items(uint64_t *s, const sl_check_item *pool, size_t pool_n,
                       size_t k, sl_check_item *items, int64_t *costs)
{
    int taken[64] = {0};
    for (size_t j = 0; j < k; j++) {
        size_t p;
        do
            p = (size_t)tu_below(s, (int64_t)pool_n);
        while (taken[p]);
        taken[p] = 1;
        items[j] = pool[p];
        costs[j] = tu_below(s, 10) < 2 ? 0 : tu_range(s, 1, 3);
    }
}

static void test_multi_is_all_or_nothing_as_memory(void **state)
{
    /* A pool of (limit, key) items across algorithms; each call takes a
     * random subset of distinct items, in random order, each with its own
     * cost, and one call in ten records (SL_RECORD). */
    static const size_t picks[] = {1, 4, 7, 11, 13, 15, 19, 21, 23, 26, 28, 29};
    enum { NPICK = sizeof(picks) / sizeof(picks[0]), POOL = NPICK * 2 };
    sl_limit *lims[NPICK];
    sl_check_item pool[POOL];
    sl_store *mem = tu_store(), *red = redis_store();
    uint64_t s = 77;
    sl_nanos t = INT64_C(1750000000) * SEC + 123456789;
    size_t n = tu_quick() ? 600 : 3000, all_allowed = 0, some_refused = 0;
    (void)state;

    flushall();
    make_pool(picks, NPICK, lims, pool);
    for (size_t i = 0; i < n; i++) {
        sl_check_item items[6];
        size_t k = (size_t)tu_range(&s, 2, 6);
        sl_decision me[6], re[6], mo, ro;
        int64_t costs[6];
        unsigned flags = tu_below(&s, 10) == 0 ? SL_RECORD : 0;
        int rm, rr;

        pick_items(&s, pool, POOL, k, items, costs);
        t += tu_below(&s, 4) == 0 ? 0 : tu_range(&s, 1, 200 * MS);
        rm = sl_check_costs(mem, items, costs, k, t, flags, me, &mo);
        rr = sl_check_costs(red, items, costs, k, t, flags, re, &ro);
        expect_eq(rm, 0);
        expect_eq(rr, 0);
        for (size_t j = 0; j < k; j++) {
            char what[64];
            snprintf(what, sizeof(what), "multi item %zu (%s)", j,
                     sl_algorithm_name(items[j].limit->cfg.algorithm));
            expect_same(what, i, items[j].key, costs[j], t, &me[j], &re[j]);
        }
        expect_same("multi overall", i, "", costs[0], t, &mo, &ro);
        all_allowed += mo.allowed && !flags;
        some_refused += !mo.allowed;
    }
    expect_cmp(all_allowed, >, 0);
    expect_cmp(some_refused, >, 0);
    for (size_t i = 0; i < NPICK; i++)
        sl_limit_free(lims[i]);
    sl_store_free(mem);
    sl_store_free(red);
}

/* One key name of the store (the only one with its prefix). */
static void only_key(redisContext *c, const char *pattern, char *out,
                     size_t len)
{
    redisReply *r = redisCommand(c, "KEYS %s", pattern);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 1)
        fail_msg("expected one key matching '%s'", pattern);
    snprintf(out, len, "%s", r->element[0]->str);
    freeReplyObject(r);
}

/* Sends a built call on a plain hiredis connection, as an event loop
 * would on its own; follows a NOSCRIPT once.  Returns read()'s code. */
static int send_call(redisContext *c, sl__redis_call *call, sl_decision *each,
                     sl_decision *overall, int *noscripts)
{
    for (;;) {
        const char *const *argv;
        const size_t *lens;
        char err[256];
        int argc = sl__redis_call_argv(call, &argv, &lens);
        redisReply *r = redisCommandArgv(c, argc, (const char **)argv, lens);
        int rc = sl__redis_call_read(call, r, each, overall, err, sizeof(err));
        freeReplyObject(r);
        if (rc != 1)
            return rc;
        ++*noscripts;
        sl__redis_call_use_eval(call);
    }
}

/* sl__redis_call_* (the event-loop interface) decides as the memory store
 * on random multi-item traces, EVALSHA and EVAL after a SCRIPT FLUSH. */
static void test_async_calls_decide_as_memory(void **state)
{
    static const size_t picks[] = {1, 4, 7, 11, 13, 15, 19, 21};
    enum { NPICK = sizeof(picks) / sizeof(picks[0]), POOL = NPICK * 2 };
    sl_limit *lims[NPICK];
    sl_check_item pool[POOL];
    sl_store *mem = tu_store(), *red;
    sl__redis_keyspace ks;
    redisContext *c = admin();
    uint64_t s = 99;
    sl_nanos t = INT64_C(1750000000) * SEC + 987654321;
    size_t n = tu_quick() ? 300 : 1500;
    int noscripts = 0;
    char sha[41];
    (void)state;

    red = redis_store_opts((sl_redis_options){
        .extra_ttl_ms = 600000, .key_prefix = "a:", .lazy_connect = 1});
    expect_eq(sl__redis_store_keyspace(red, &ks), 0);
    flushall();
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", sl__redis_script);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    make_pool(picks, NPICK, lims, pool);
    for (size_t i = 0; i < n; i++) {
        sl_check_item items[4];
        size_t k = (size_t)tu_range(&s, 1, 4);
        sl_decision me[4], re[4], mo, ro;
        int64_t costs[4];
        unsigned flags = tu_below(&s, 10) == 0 ? SL_RECORD : 0;
        sl__redis_call *call;
        char err[256];

        pick_items(&s, pool, POOL, k, items, costs);
        t += tu_below(&s, 4) == 0 ? 0 : tu_range(&s, 1, 200 * MS);
        if (i == n / 2)
            expect_eq(tu_redis_do(c, "SCRIPT FLUSH"), 0);
        expect_eq(sl_check_costs(mem, items, costs, k, t, flags, me, &mo), 0);
        expect_eq(sl__redis_call_new(&ks, items, costs, k, t, flags,
                                     i % 7 == 3 && i != n / 2 ? NULL : sha,
                                     &call, err, sizeof(err)),
                  0);
        expect_eq(send_call(c, call, re, &ro, &noscripts), 0);
        sl__redis_call_free(call);
        for (size_t j = 0; j < k; j++)
            expect_same("async item", i, items[j].key, costs[j], t, &me[j],
                        &re[j]);
        expect_same("async overall", i, "", costs[0], t, &mo, &ro);
    }
    expect_eq(noscripts, 1); /* the first EVALSHA after the flush */
    /* Refused before any I/O: no key space (not a Redis store), out of
     * the exact bound. */
    {
        sl__redis_call *call = NULL;
        char err[256];
        int64_t one = 1;
        /* No tick but 1 ns divides the period, and B * T passes 2^52. */
        sl_limit_config big = {.algorithm = SL_TOKEN_BUCKET,
                               .limit = 1000003,
                               .period = 86400 * SEC + 7};
        sl_limit *bl = tu_limit_cfg(&big);
        sl_check_item it = {bl, "k", 1};
        sl__redis_keyspace none;
        expect_eq(sl__redis_store_keyspace(mem, &none), SL_EINVAL);
        expect_eq(sl__redis_call_new(NULL, &it, &one, 1, t, 0, NULL, &call, err,
                                     sizeof(err)),
                  SL_EINVAL);
        expect_eq(sl__redis_call_new(&ks, &it, &one, 1, t, 0, NULL, &call, err,
                                     sizeof(err)),
                  SL_ERANGE);
        expect_cmp(strstr(err, "out of range"), !=, NULL);
        sl_limit_free(bl);
    }
    for (size_t i = 0; i < NPICK; i++)
        sl_limit_free(lims[i]);
    redisFree(c);
    sl_store_free(mem);
    sl_store_free(red);
}

/* Sends calls[0..n) as one batch (sl__redis_batch_format), following a
 * NOSCRIPT once with the batch again as EVAL; rcs[i] is read()'s code of
 * call i. */
static void send_batch(redisContext *c, sl__redis_call **calls, size_t n,
                       const char *sha, sl_decision (*each)[4],
                       sl_decision *overall, int *rcs, int *noscripts)
{
    for (;;) {
        redisReply *r = NULL;
        char *cmd, err[256];
        size_t len;
        int again = 0;
        expect_eq(sl__redis_batch_format(calls, n, sha, &cmd, &len), 0);
        if (redisAppendFormattedCommand(c, cmd, len) != REDIS_OK ||
            redisGetReply(c, (void **)&r) != REDIS_OK)
            fail_msg("batch: %s", c->errstr);
        free(cmd);
        for (size_t i = 0; i < n; i++) {
            rcs[i] =
                sl__redis_call_read(calls[i], sl__redis_batch_reply(r, n, i),
                                    each[i], &overall[i], err, sizeof(err));
            again |= rcs[i] == 1;
        }
        freeReplyObject(r);
        if (!again)
            return;
        ++*noscripts;
        sha = NULL;
    }
}

/* Calls sent together in one script call (sl__redis_batch_*) decide as
 * the memory store deciding them one by one, in order: multi-item,
 * recorded, repeated keys within a batch; a call on a key holding another
 * type fails alone (SL_ESTORE) and its neighbours decide as if it were
 * not there; a batch after SCRIPT FLUSH is NOSCRIPT for every call and
 * goes again as EVAL. */
static void test_batches_decide_as_memory(void **state)
{
    static const size_t picks[] = {0, 3, 6, 9, 12, 16, 20, 22};
    enum { NPICK = sizeof(picks) / sizeof(picks[0]), POOL = NPICK * 2 };
    enum { MAXB = 12 };
    sl_limit *lims[NPICK];
    sl_check_item pool[POOL];
    sl_store *mem = tu_store(), *red;
    sl__redis_keyspace ks;
    redisContext *c = admin();
    uint64_t s = 7;
    sl_nanos t = INT64_C(1760000000) * SEC + 123456789;
    size_t rounds = tu_quick() ? 60 : 300, wrongs = 0;
    int noscripts = 0;
    sl_limit *wl = tu_limit(SL_FIXED_WINDOW, 10, SEC, 0);
    sl_check_item wrong = {wl, "wrong", 5};
    int64_t one = 1;
    char sha[41], name[256], *cmd;
    size_t len;
    (void)state;

    red = redis_store_opts((sl_redis_options){
        .extra_ttl_ms = 600000, .key_prefix = "b:", .lazy_connect = 1});
    expect_eq(sl__redis_store_keyspace(red, &ks), 0);
    flushall();
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", sl__redis_script);
    assert_non_null(r);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    make_pool(picks, NPICK, lims, pool);

    /* The wrong key: made by a call, then replaced by a list. */
    {
        sl__redis_call *call;
        sl_decision d[4], o;
        expect_eq(
            sl__redis_call_new(&ks, &wrong, &one, 1, t, 0, sha, &call, NULL, 0),
            0);
        expect_eq(send_call(c, call, d, &o, &noscripts), 0);
        sl__redis_call_free(call);
        only_key(c, "b:*wrong*", name, sizeof(name));
        expect_eq(tu_redis_do(c, "DEL %s", name), 0);
        expect_eq(tu_redis_do(c, "RPUSH %s x", name), 0);
    }
    expect_eq(sl__redis_batch_format(NULL, 0, sha, &cmd, &len), SL_EINVAL);

    for (size_t round = 0; round < rounds; round++) {
        sl__redis_call *calls[MAXB];
        sl_check_item items[MAXB][4];
        int64_t costs[MAXB][4];
        size_t k[MAXB], m = (size_t)tu_range(&s, 1, MAXB);
        sl_decision me[MAXB][4], re[MAXB][4], mo[MAXB], ro[MAXB];
        int rcs[MAXB], is_wrong[MAXB];

        for (size_t j = 0; j < m; j++) {
            unsigned flags = tu_below(&s, 10) == 0 ? SL_RECORD : 0;
            is_wrong[j] = tu_below(&s, 15) == 0;
            t += tu_below(&s, 3) == 0 ? 0 : tu_range(&s, 1, 100 * MS);
            if (is_wrong[j]) {
                k[j] = 1;
                items[j][0] = wrong;
                costs[j][0] = 1;
                wrongs++;
            } else {
                k[j] = (size_t)tu_range(&s, 1, 4);
                pick_items(&s, pool, POOL, k[j], items[j], costs[j]);
                expect_eq(sl_check_costs(mem, items[j], costs[j], k[j], t,
                                         flags, me[j], &mo[j]),
                          0);
            }
            expect_eq(sl__redis_call_new(&ks, items[j], costs[j], k[j], t,
                                         flags, sha, &calls[j], NULL, 0),
                      0);
        }
        if (round == rounds / 2)
            expect_eq(tu_redis_do(c, "SCRIPT FLUSH"), 0);
        send_batch(c, calls, m, sha, re, ro, rcs, &noscripts);
        for (size_t j = 0; j < m; j++) {
            sl__redis_call_free(calls[j]);
            if (is_wrong[j]) {
                expect_eq(rcs[j], SL_ESTORE);
                continue;
            }
            expect_eq(rcs[j], 0);
            for (size_t i = 0; i < k[j]; i++)
                expect_same("batched item", round, items[j][i].key, costs[j][i],
                            t, &me[j][i], &re[j][i]);
            expect_same("batched overall", round, "", costs[j][0], t, &mo[j],
                        &ro[j]);
        }
        if (round == rounds / 2) {
            /* The flush's batch went again as EVAL, which cached it. */
            expect_eq(noscripts, 1);
            redisReply *e = redisCommand(c, "SCRIPT EXISTS %s", sha);
            assert_non_null(e);
            expect_eq(e->element[0]->integer, 1);
            freeReplyObject(e);
        }
    }
    expect_eq(noscripts, 1);
    expect_cmp(wrongs, >, 0);
    sl_limit_free(wl);
    for (size_t i = 0; i < NPICK; i++)
        sl_limit_free(lims[i]);
    redisFree(c);
    sl_store_free(mem);
    sl_store_free(red);
}

/* A refused multi call consumes nothing from the items that fit. */
static void test_multi_refused_consumes_nothing(void **state)
{
    sl_limit *roomy = tu_limit(SL_FIXED_WINDOW, 10, MINUTE, 0);
    sl_limit *tight = tu_limit(SL_TOKEN_BUCKET, 1, MINUTE, 1);
    sl_store *red = redis_store();
    sl_check_item items[2] = {{roomy, "k", 1}, {tight, "k", 1}};
    sl_decision each[2], all;
    sl_nanos t = INT64_C(1700000000) * SEC;
    (void)state;

    flushall();
    expect_eq(sl_check_multi(red, items, 2, 1, t, each, &all), 0);
    expect_eq(all.allowed, 1);
    expect_eq(sl_check_multi(red, items, 2, 1, t, each, &all), 0);
    expect_eq(all.allowed, 0);
    expect_eq(each[0].allowed, 1);   /* fits on its own ... */
    expect_eq(each[0].remaining, 9); /* ... but nothing was taken */
    expect_eq(check_or_fail(red, roomy, "k", 0, t).remaining, 9);
    /* The same limit and key twice is an input error. */
    items[1] = items[0];
    expect_eq(sl_check_multi(red, items, 2, 1, t, each, &all), SL_EINVAL);
    sl_limit_free(roomy);
    sl_limit_free(tight);
    sl_store_free(red);
}

/* sl_check_batch decides as the memory store's, binary keys included
 * (NUL bytes, braces that end the hash tag early, the empty key). */
static void test_batch_and_binary_keys_decide_as_memory(void **state)
{
    static const char raw[][6] = {"a\0b", "a\0c", "}{", "{x}", "", "a"};
    enum { NRAW = sizeof(raw) / sizeof(raw[0]), N = 40 };
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 3, SEC, 0);
    sl_store *mem = tu_store(), *red = redis_store();
    sl_key keys[N];
    sl_decision m[N], r[N];
    uint64_t s = 5;
    sl_nanos t = INT64_C(1700000000) * SEC;
    (void)state;

    flushall();
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++) {
            int k = (int)tu_below(&s, NRAW);
            keys[i] = (sl_key){raw[k], k < 2 ? 3 : strlen(raw[k])};
        }
        t += tu_range(&s, 0, 400 * MS);
        expect_eq(sl_check_batch(mem, lim, keys, N, 1, t, m), 0);
        expect_eq(sl_check_batch(red, lim, keys, N, 1, t, r), 0);
        for (int i = 0; i < N; i++)
            expect_same("batch", (size_t)(round * N + i), "(binary)", 1, t,
                        &m[i], &r[i]);
    }
    sl_limit_free(lim);
    sl_store_free(mem);
    sl_store_free(red);
}

/* ---- the script and the server ---- */

static void test_script_reloads_after_flush(void **state)
{
    sl_limit *lim = tu_limit(SL_GCRA, 5, SEC, 5);
    sl_store *mem = tu_store(), *red = redis_store();
    redisContext *c = admin();
    sl_nanos t = INT64_C(1700000000) * SEC;
    (void)state;

    for (int i = 0; i < 8; i++) {
        sl_decision m, r;
        if (i == 3 || i == 6)
            expect_eq(tu_redis_do(c, "SCRIPT FLUSH"), 0);
        m = check_or_fail(mem, lim, "k", 1, t);
        r = check_or_fail(red, lim, "k", 1, t);
        expect_same("after SCRIPT FLUSH", (size_t)i, "k", 1, t, &m, &r);
    }
    redisFree(c);
    sl_limit_free(lim);
    sl_store_free(mem);
    sl_store_free(red);
}

/* Checks on the store and the memory store decide alike, i from `from`. */
static void decide_alike(sl_store *mem, sl_store *red, const sl_limit *lim,
                         int from, int n, sl_nanos t, const char *what)
{
    for (int i = from; i < from + n; i++) {
        sl_decision m = check_or_fail(mem, lim, "k", 1, t);
        sl_decision r = check_or_fail(red, lim, "k", 1, t);
        expect_same(what, (size_t)i, "k", 1, t, &m, &r);
    }
}

/* On Redis 7 calls are FCALLs of the library, which the store loads at
 * its first connect.  A FUNCTION FLUSH (which also goes with a restart)
 * costs one call sent again as EVAL after the library is loaded again;
 * the calls after it are FCALLs again.  SCRIPT FLUSH does not matter to
 * them, FLUSHALL keeps the library. */
static void test_calls_are_fcalls_and_the_library_reloads(void **state)
{
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 5, SEC, 5);
    sl_store *mem = tu_store(), *red;
    redisContext *c = admin();
    sl_nanos t = INT64_C(1700000000) * SEC;
    (void)state;

    expect_eq(tu_redis_do(c, "FUNCTION FLUSH"), 0);
    expect_eq(tu_redis_do(c, "CONFIG RESETSTAT"), 0);
    red = redis_store();
    decide_alike(mem, red, lim, 0, 3, t, "fcall");
    expect_eq(tu_redis_calls(c, "fcall"), 3);
    expect_eq(tu_redis_calls(c, "evalsha") + tu_redis_calls(c, "eval"), 0);
    expect_eq(tu_redis_has_library(c, sl__redis_function), 1);

    expect_eq(tu_redis_do(c, "FUNCTION FLUSH"), 0);
    expect_eq(tu_redis_has_library(c, sl__redis_function), 0);
    decide_alike(mem, red, lim, 3, 3, t, "after FUNCTION FLUSH");
    expect_eq(tu_redis_has_library(c, sl__redis_function), 1);
    /* The refused FCALL, then two: one EVAL between them. */
    expect_eq(tu_redis_calls(c, "fcall"), 3 + 3);
    expect_eq(tu_redis_calls(c, "eval"), 1);

    expect_eq(tu_redis_do(c, "SCRIPT FLUSH"), 0);
    decide_alike(mem, red, lim, 6, 2, t, "after SCRIPT FLUSH");
    expect_eq(tu_redis_calls(c, "fcall"), 6 + 2);
    expect_eq(tu_redis_calls(c, "eval"), 1);

    /* Another store finds the library there ("already exists"): FCALLs. */
    sl_store_free(red);
    red = redis_store();
    decide_alike(mem, red, lim, 8, 2, t, "a second store");
    expect_eq(tu_redis_calls(c, "fcall"), 8 + 2);
    expect_eq(tu_redis_calls(c, "eval"), 1);

    redisFree(c);
    sl_limit_free(lim);
    sl_store_free(mem);
    sl_store_free(red);
}

/* A server without Redis Functions (Redis 6; here FUNCTION renamed
 * away): the store calls EVALSHA, decides the same, and after a SCRIPT
 * FLUSH sends the script again as before. */
static void test_servers_without_functions_get_evalsha(void **state)
{
    tu_redis old = {.no_functions = 1};
    sl_limit *lim = tu_limit(SL_SLIDING_WINDOW, 4, SEC, 0);
    sl_store *mem = tu_store(), *red;
    redisContext *c;
    sl_nanos t = INT64_C(1700000000) * SEC;
    (void)state;

    assert_int_equal(tu_redis_start(&old), 0);
    c = tu_redis_admin(&old);
    assert_non_null(c);
    red = redis_store_opts(
        (sl_redis_options){.url = old.url, .extra_ttl_ms = 600000});
    decide_alike(mem, red, lim, 0, 4, t, "evalsha");
    expect_eq(tu_redis_calls(c, "evalsha"), 4);
    expect_eq(tu_redis_calls(c, "fcall"), 0);
    expect_eq(tu_redis_do(c, "SCRIPT FLUSH"), 0);
    decide_alike(mem, red, lim, 4, 3, t + SEC, "evalsha after SCRIPT FLUSH");
    expect_eq(tu_redis_calls(c, "eval"), 1);
    expect_eq(tu_redis_calls(c, "evalsha"), 4 + 3);

    redisFree(c);
    sl_store_free(red);
    tu_redis_cleanup(&old);
    sl_limit_free(lim);
    sl_store_free(mem);
}

static double elapsed_ms(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e3 +
           (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

static int check_rc(sl_store *st, const sl_limit *lim, sl_nanos t)
{
    sl_decision d;
    return sl_check(st, lim, "k", 1, 1, t, &d);
}

static void test_dead_redis_is_estore_then_recovers(void **state)
{
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 100, MINUTE, 0);
    sl_store *red = redis_store_opts((sl_redis_options){.timeout_ms = 300});
    sl_nanos t = INT64_C(1700000000) * SEC;
    struct timespec start;
    char err[256];
    int rc = 0;
    (void)state;

    expect_eq(check_rc(red, lim, t), 0);

    /* Killed: refused connections, an error at once. */
    tu_redis_stop(&server, SIGKILL);
    clock_gettime(CLOCK_MONOTONIC, &start);
    expect_eq(check_rc(red, lim, t), SL_ESTORE);
    expect_eq(check_rc(red, lim, t), SL_ESTORE);
    expect_le(elapsed_ms(&start), 2 * 3 * 300 + 500);
    sl_store_last_error(red, err, sizeof(err));
    if (strstr(err, "redis") == NULL)
        fail_msg("last error does not name redis: '%s'", err);

    /* Restarted on the same port: the same store works again (the
     * library is gone with the old server: "Function not found", the
     * library loaded again, then EVAL; then FCALLs). */
    assert_int_equal(tu_redis_start(&server), 0);
    for (int i = 0; i < 3 && (rc = check_rc(red, lim, t)) != 0; i++)
        ;
    expect_eq(rc, 0);
    {
        redisContext *c = admin();
        expect_eq(tu_redis_has_library(c, sl__redis_function), 1);
        expect_eq(check_rc(red, lim, t), 0);
        expect_eq(tu_redis_calls(c, "fcall"), 2);
        expect_eq(tu_redis_calls(c, "eval"), 1);
        redisFree(c);
    }

    /* Paused (SIGSTOP): no answer at all; the timeout bounds the wait. */
    kill(server.pid, SIGSTOP);
    clock_gettime(CLOCK_MONOTONIC, &start);
    rc = check_rc(red, lim, t);
    double waited = elapsed_ms(&start);
    kill(server.pid, SIGCONT);
    expect_eq(rc, SL_ESTORE);
    expect_ge(waited, 250);
    expect_le(waited, 3 * 300 + 500);
    for (int i = 0; i < 3 && (rc = check_rc(red, lim, t)) != 0; i++)
        ;
    expect_eq(rc, 0);

    sl_limit_free(lim);
    sl_store_free(red);
}

/* ---- keys and their TTLs ---- */

static long long count_keys(redisContext *c, const char *pattern)
{
    redisReply *r = redisCommand(c, "KEYS %s", pattern);
    long long n =
        r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

static void test_keys_have_ttl_and_vanish_when_initial(void **state)
{
    redisContext *c = admin();
    sl_store *red = redis_store_opts((sl_redis_options){.key_prefix = "ttl:"});
    sl_nanos now = sl_clock_realtime();
    char key[256];
    (void)state;

    flushall();
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        sl_limit_config cfg = {
            .algorithm = (sl_algorithm)a, .limit = 10, .period = 2 * SEC};
        sl_limit *lim = tu_limit_cfg(&cfg);
        long long pttl;

        /* A query on an unknown key writes nothing. */
        check_or_fail(red, lim, "q", 0, now);
        expect_eq(count_keys(c, "ttl:*"), 0);
        /* A request leaves a key that expires within the period (two for
         * sliding_window, whose count lingers one more window). */
        check_or_fail(red, lim, "q", 1, now);
        only_key(c, "ttl:*", key, sizeof(key));
        if (strstr(key, ":{q}") == NULL)
            fail_msg("key '%s' does not end in the hash tag '{q}'", key);
        pttl = tu_redis_int(c, "PTTL %s", key);
        expect_cmp(pttl, >, 0);
        expect_le(pttl, a == SL_SLIDING_WINDOW ? 4000 : 2000);
        /* A decision when the state is back to initial deletes it. */
        check_or_fail(red, lim, "q", 0, now + 5 * SEC);
        expect_eq(count_keys(c, "ttl:*"), 0);
        sl_limit_free(lim);
    }

    /* And Redis drops it by itself once the time has passed. */
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 10, 100 * MS, 10);
    check_or_fail(red, lim, "gone", 1, sl_clock_realtime());
    expect_eq(count_keys(c, "ttl:*"), 1);
    tu_sleep_ms(150);
    expect_eq(count_keys(c, "ttl:*"), 0);
    sl_limit_free(lim);
    sl_store_free(red);
    redisFree(c);
}

/* ---- options, clocks and bounds ---- */

static void expect_new_fails(sl_redis_options o, int want, const char *says)
{
    sl_store *st = NULL;
    char err[256] = "";
    int rc;
    o.size = sizeof(o); /* the callers' literals leave it to here */
    rc = sl_redis_store_new(&o, &st, err, sizeof(err));
    if (rc != want || st != NULL || strstr(err, says) == NULL)
        fail_msg("options (url '%s'): got %s '%s', want %s with '%s'",
                 o.url ? o.url : "(null)", sl_err_name(rc), err,
                 sl_err_name(want), says);
}

static void test_bad_options_are_refused_clearly(void **state)
{
    char url[64];
    (void)state;
    expect_new_fails((sl_redis_options){.url = "http://localhost"}, SL_EINVAL,
                     "invalid redis url");
    expect_new_fails((sl_redis_options){.url = "redis://host:0"}, SL_EINVAL,
                     "bad port");
    expect_new_fails((sl_redis_options){.url = "redis://host:99999"}, SL_EINVAL,
                     "bad port");
    expect_new_fails((sl_redis_options){.url = "redis://host:1/x"}, SL_EINVAL,
                     "bad db");
    expect_new_fails((sl_redis_options){.url = "unix:relative.sock"}, SL_EINVAL,
                     "absolute");
    expect_new_fails((sl_redis_options){.url = server.url, .key_prefix = "a{b"},
                     SL_EINVAL, "hash tag");
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", tu_free_port());
    expect_new_fails((sl_redis_options){.url = url, .timeout_ms = 200},
                     SL_ESTORE, "cannot connect");
    expect_new_fails((sl_redis_options){.url = "unix:/nonexistent/sock"},
                     SL_ESTORE, "cannot connect");
}

static void test_limits_outside_the_exact_bound_are_erange(void **state)
{
    sl_store *red = redis_store();
    /* No tick of 10^k ns divides HOUR + 7 ns but 1 ns, in which B * T
     * passes 2^52 (test_redis_ticks.c has the limits ticks fit). */
    sl_limit *wide_bucket =
        tu_limit(SL_TOKEN_BUCKET, SL_MAX_COUNT, HOUR + 7, SL_MAX_COUNT);
    sl_limit *long_window =
        tu_limit(SL_FIXED_WINDOW, 10, (INT64_C(1) << 52) + 1, 0);
    sl_limit *ok = tu_limit(SL_FIXED_WINDOW, 10, SEC, 0);
    sl_check_item items[2] = {{ok, "k", 1}, {wide_bucket, "k", 1}};
    sl_decision d, each[2];
    char err[256];
    (void)state;

    expect_eq(sl_check(red, wide_bucket, "k", 1, 1, SEC, &d), SL_ERANGE);
    sl_store_last_error(red, err, sizeof(err));
    if (strstr(err, "out of range for the redis store") == NULL)
        fail_msg("unclear message: '%s'", err);
    expect_eq(sl_check(red, long_window, "k", 1, 1, SEC, &d), SL_ERANGE);
    /* A call with one such item decides nothing. */
    flushall();
    expect_eq(sl_check_multi(red, items, 2, 1, SEC, each, &d), SL_ERANGE);
    expect_eq(check_or_fail(red, ok, "k", 0, SEC).remaining, 10);
    sl_limit_free(wide_bucket);
    sl_limit_free(long_window);
    sl_limit_free(ok);
    sl_store_free(red);
}

/* token_bucket and gcra decide a lone commit in fast.lua, everything else
 * (a record, an override's state) in the general path: the two share
 * keys, so each must read what the other wrote.  Times months apart
 * (beyond the 2^23 s the script computes a difference for) and a state
 * months ahead of now (cost 0 fits and rewrites it, cost 1 waits) are
 * decided as the memory store does. */
static void test_buckets_fast_and_general_paths_share_states(void **state)
{
    static const struct {
        int64_t cost, record;
        sl_nanos step;
    } steps[] = {
        {1, 0, 0},          {2, 0, 3},  {0, 0, 0},         {1, 1, 5 * MS},
        {1, 0, 0},          {9, 1, 1},  {1, 0, 7},         {1, 0, 200 * DAY},
        {0, 0, -400 * DAY}, {1, 0, 0},  {1, 1, 0},         {1, 0, 400 * DAY},
        {3, 0, SEC + 1},    {0, 1, 0},  {1, 0, 100 * DAY}, {1, 0, -200 * DAY},
        {99, 0, 0},         {99, 1, 0}, {1, 0, 1},
    };
    const sl_algorithm algs[] = {SL_TOKEN_BUCKET, SL_GCRA};
    (void)state;

    flushall();
    for (size_t a = 0; a < 2; a++) {
        sl_store *mem = tu_store(), *red = redis_store();
        sl_limit *lim = tu_limit(algs[a], 3, SEC + 7, 5);
        sl_nanos t = INT64_C(1700000000) * SEC + 123456789;
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            sl_decision m, r;
            t += steps[i].step;
            m = (steps[i].record ? record_or_fail : check_or_fail)(
                mem, lim, "k", steps[i].cost, t);
            r = (steps[i].record ? record_or_fail : check_or_fail)(
                red, lim, "k", steps[i].cost, t);
            expect_same(sl_algorithm_name(algs[a]), i, "k", steps[i].cost, t,
                        &m, &r);
        }
        sl_limit_free(lim);
        sl_store_free(mem);
        sl_store_free(red);
        flushall();
    }
}

/* A count that recordings took to 2^53 cannot grow exactly in doubles:
 * a further request is refused as out of range (fast.lua leaves it to
 * the general path, which raises), and nothing is written. */
static void test_fixed_window_count_past_2_53_is_erange(void **state)
{
    sl_store *red = redis_store();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 1, HOUR, 0);
    sl_nanos t = INT64_C(1700000000) * SEC;
    sl_decision d;
    (void)state;

    flushall();
    for (int i = 0; i < 8192; i++) /* 2^13 recordings of 2^40: 2^53 */
        record_or_fail(red, lim, "k", SL_MAX_COUNT, t);
    /* 2^53 + 2: 2^53 + 1 is no double, and rounds to 2^53. */
    expect_eq(sl_check(red, lim, "k", 1, 2, t, &d), SL_ERANGE);
    expect_eq(sl_check(red, lim, "k", 1, 0, t, &d), 0);
    expect_eq(d.remaining, 0);
    sl_limit_free(lim);
    sl_store_free(red);
}

/* A request stamped months before the key's state cannot be computed
 * exactly in doubles: refused, and nothing is written. */
static void test_far_backwards_now_is_erange(void **state)
{
    sl_store *red = redis_store();
    sl_limit *lim = tu_limit(SL_SLIDING_LOG, 10, SEC, 0);
    sl_nanos t = INT64_C(1700000000) * SEC;
    sl_decision d;
    (void)state;

    flushall();
    check_or_fail(red, lim, "k", 1, t);
    expect_eq(sl_check(red, lim, "k", 1, 1, t - 200 * DAY, &d), SL_ERANGE);
    expect_eq(check_or_fail(red, lim, "k", 0, t).remaining, 9);
    sl_limit_free(lim);
    sl_store_free(red);
}

static void test_server_time_unix_socket_password_and_db(void **state)
{
    redisContext *c = admin();
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 2, HOUR, 0);
    sl_store *red;
    char url[256];
    (void)state;

    flushall();
    /* The server's clock decides: the passed now is ignored. */
    red = redis_store_opts((sl_redis_options){.use_server_time = 1});
    expect_eq(check_or_fail(red, lim, "st", 1, 0).allowed, 1);
    expect_eq(check_or_fail(red, lim, "st", 1, 5 * DAY).allowed, 1);
    sl_decision d = check_or_fail(red, lim, "st", 1, 9 * DAY);
    expect_eq(d.allowed, 0);
    expect_cmp(d.retry_after, >, 0);
    expect_le(d.retry_after, HOUR);
    sl_store_free(red);

    /* A unix socket, a password and a db number. */
    expect_eq(tu_redis_do(c, "CONFIG SET requirepass s3cret"), 0);
    snprintf(url, sizeof(url), "unix:%s?db=3", server.sock);
    expect_new_fails((sl_redis_options){.url = url}, SL_ESTORE, "NOAUTH");
    red = redis_store_opts((sl_redis_options){.unix_path = server.sock,
                                              .db = 3,
                                              .password = "s3cret",
                                              .key_prefix = "db3:"});
    expect_eq(check_or_fail(red, lim, "k", 1, SEC).allowed, 1);
    sl_store_free(red);
    snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d/3", server.port);
    red =
        redis_store_opts((sl_redis_options){.url = url, .key_prefix = "db3:"});
    expect_eq(check_or_fail(red, lim, "k", 1, SEC).remaining, 0);
    sl_store_free(red);
    expect_eq(tu_redis_do(c, "SELECT 3"), 0);
    expect_eq(count_keys(c, "db3:*"), 1);
    expect_eq(tu_redis_do(c, "CONFIG SET requirepass %s", ""), 0);
    redisFree(c);
    sl_limit_free(lim);
}

/* Batches on the server's clock, whose one-item bucket calls main.lua's
 * batch loop sends to the fast path itself, decide as the memory store:
 * a batch runs at one instant, so buckets on fresh keys, and the calls
 * after them on the same keys, decide the same whatever that instant
 * is.  A key holding a state the fast path leaves to the general path
 * (four fields, long past) decides as a fresh one too. */
static void test_server_clock_batches_decide_as_memory(void **state)
{
    enum { N = 40 };
    static const char *const names[] = {"a", "b", "c", "old"};
    sl_limit *lims[2] = {tu_limit(SL_TOKEN_BUCKET, 10, SEC, 0),
                         tu_limit(SL_GCRA, 5, 3 * SEC, 0)};
    sl_store *mem = tu_store(), *red;
    sl__redis_keyspace ks;
    redisContext *c = admin();
    uint64_t s = 5;
    sl_nanos t = INT64_C(1770000000) * SEC;
    sl__redis_call *calls[N];
    sl_decision me[N], re[N][4], ro[N], mo;
    int rcs[N], noscripts = 0;
    (void)state;

    red = redis_store_opts((sl_redis_options){
        .use_server_time = 1, .key_prefix = "sc:", .lazy_connect = 1});
    expect_eq(sl__redis_store_keyspace(red, &ks), 0);
    flushall();
    for (size_t l = 0; l < 2; l++) {
        /* "old": a state of four fields, at 1 s past the epoch. */
        sl_check_item it = {lims[l], "old", 3};
        int64_t one = 1;
        const char *const *argv;
        const size_t *lens;
        expect_eq(sl__redis_call_new(&ks, &it, &one, 1, 0, 0, NULL, &calls[0],
                                     NULL, 0),
                  0);
        sl__redis_call_argv(calls[0], &argv, &lens);
        redisReply *r =
            redisCommand(c, "SET %b %s", argv[3], lens[3], "1 0 0 7");
        freeReplyObject(r);
        sl__redis_call_free(calls[0]);
    }
    for (size_t j = 0; j < N; j++) {
        const char *key = names[tu_below(&s, 4)];
        sl_check_item it = {lims[tu_below(&s, 2)], key, strlen(key)};
        int64_t cost = (int64_t)tu_below(&s, 4);
        expect_eq(sl_check_costs(mem, &it, &cost, 1, t, 0, &me[j], &mo), 0);
        expect_eq(sl__redis_call_new(&ks, &it, &cost, 1, 0, 0, NULL, &calls[j],
                                     NULL, 0),
                  0);
    }
    send_batch(c, calls, N, NULL, re, ro, rcs, &noscripts);
    for (size_t j = 0; j < N; j++) {
        expect_eq(rcs[j], 0);
        expect_same("server clock", j, "", 0, t, &me[j], &re[j][0]);
        sl__redis_call_free(calls[j]);
    }
    sl_limit_free(lims[0]);
    sl_limit_free(lims[1]);
    redisFree(c);
    sl_store_free(mem);
    sl_store_free(red);
}

/* EVAL of the script with argv[0..argc) after it (numkeys first), each
 * a C string but the last, of last_len bytes. */
static redisReply *eval_args(redisContext *c, int argc, const char **argv,
                             size_t last_len)
{
    const char *all[24];
    size_t lens[24];
    all[0] = "EVAL";
    all[1] = sl__redis_script;
    for (int i = 0; i < argc; i++)
        all[2 + i] = argv[i];
    for (int i = 0; i < argc + 2; i++)
        lens[i] = strlen(all[i]);
    lens[argc + 1] = last_len;
    redisReply *r = redisCommandArgv(c, argc + 2, all, lens);
    assert_non_null(r);
    return r;
}

/* An integer command's reply (DBSIZE, EXISTS). */
static long long int_of(redisContext *c, const char *cmd)
{
    redisReply *r = redisCommand(c, cmd);
    long long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

static int is_error(const redisReply *r, const char *start)
{
    return r->type == REDIS_REPLY_ERROR &&
           strncmp(r->str, start, strlen(start)) == 0;
}

/* A call's head (main.lua's "ttl,record,spec,cost...") that the script
 * cannot read is refused (EINVAL), as is a head of more or fewer items
 * than the call's keys.  In a batch, a call whose head is unreadable
 * fails with every call after it (where their keys start is unknown),
 * the calls before it stand; a call that fails after its head was read
 * fails alone. */
static void test_unreadable_calls_are_refused(void **state)
{
    redisContext *c = admin();
    const char *spec = "0,0,0 10 1000000000 10 0 0 100000000 1,1";
    (void)state;

    flushall();
    const char *none[] = {"1", "k", "", "", "0,0"};
    redisReply *r = eval_args(c, 5, none, 3);
    expect_eq(is_error(r, "EINVAL malformed call"), 1);
    freeReplyObject(r);
    const char *two_keys[] = {"2", "k", "j", "", "", spec};
    r = eval_args(c, 6, two_keys, strlen(spec));
    expect_eq(is_error(r, "EINVAL 2 keys for 1 items"), 1);
    freeReplyObject(r);
    const char *bad_cost[] = {"1", "k", "", "", "0,0,0 10 1 10 0 0 1 1,x"};
    r = eval_args(c, 5, bad_cost, strlen(bad_cost[4]));
    expect_eq(is_error(r, "EINVAL malformed call"), 1);
    freeReplyObject(r);
    expect_eq(int_of(c, "DBSIZE"), 0);

    /* a, then b of another type (fails alone), then c, then d with an
     * unreadable head: d and e fail, the others decide.  The map: calls
     * 0, 0, 0, 1, 0 (the second triple is d's). */
    expect_eq(tu_redis_do(c, "RPUSH b x"), 0);
    const char *batch[] = {"5", "a", "b", "c",  "d", "e", "B",  "5",
                           "2", "",  "",  spec, "",  "",  "0,", "\0\0\0\1\0"};
    r = eval_args(c, 16, batch, 5);
    expect_eq(r->type, REDIS_REPLY_ARRAY);
    expect_eq(r->elements, 5);
    for (size_t i = 0; i < 5 && r->elements == 5; i++) {
        const redisReply *e = r->element[i];
        if (i == 0 || i == 2) {
            /* A full bucket less 1: a lead of T = 1e8 ticks (fast.lua's
             * one integer). */
            expect_eq(e->type, REDIS_REPLY_INTEGER);
            expect_eq(e->integer, 100000000);
        } else if (i == 1) {
            expect_eq(is_error(e, "WRONGTYPE"), 1);
        } else {
            expect_eq(is_error(e, "EINVAL malformed call"), 1);
        }
    }
    freeReplyObject(r);
    /* The keys written: a and c (and b, the list). */
    expect_eq(int_of(c, "DBSIZE"), 3);
    expect_eq(int_of(c, "EXISTS a c"), 2);
    redisFree(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_algorithm_decides_as_memory),
        cmocka_unit_test(test_comparison_sees_a_different_limit),
        cmocka_unit_test(test_multi_is_all_or_nothing_as_memory),
        cmocka_unit_test(test_multi_refused_consumes_nothing),
        cmocka_unit_test(test_async_calls_decide_as_memory),
        cmocka_unit_test(test_batches_decide_as_memory),
        cmocka_unit_test(test_batch_and_binary_keys_decide_as_memory),
        cmocka_unit_test(test_unreadable_calls_are_refused),
        cmocka_unit_test(test_server_clock_batches_decide_as_memory),
        cmocka_unit_test(test_script_reloads_after_flush),
        cmocka_unit_test(test_calls_are_fcalls_and_the_library_reloads),
        cmocka_unit_test(test_servers_without_functions_get_evalsha),
        cmocka_unit_test(test_keys_have_ttl_and_vanish_when_initial),
        cmocka_unit_test(test_bad_options_are_refused_clearly),
        cmocka_unit_test(test_limits_outside_the_exact_bound_are_erange),
        cmocka_unit_test(test_far_backwards_now_is_erange),
        cmocka_unit_test(test_fixed_window_count_past_2_53_is_erange),
        cmocka_unit_test(test_buckets_fast_and_general_paths_share_states),
        cmocka_unit_test(test_windows_whole_and_sub_second_decide_as_memory),
        cmocka_unit_test(test_sliding_window_weighted_count_is_exact),
        cmocka_unit_test(test_server_time_unix_socket_password_and_db),
        cmocka_unit_test(test_dead_redis_is_estore_then_recovers),
    };
    signal(SIGPIPE, SIG_DFL); /* the store must survive it on its own */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
