/*
 * test_lease.c - leases (src/decision/lease.c, src/redis/lua/lease.lua)
 * against a real redis-server that the test starts.  Several nodes, each
 * with its own lease table and clock offset, decide a seeded random trace
 * of one hot fixed_window key and some cold ones across many window
 * boundaries, each call decided by Redis a little after the node asked
 * it, on a manual clock: per window and key, what the nodes allow
 * together is never above the limit (zero overshoot); what they refuse
 * of what the exact path would allow is at most the units the other
 * nodes hold plus those lost (the under-admission bound); cold keys ask
 * no lease and are decided exactly.  Then the rules of use: a return into
 * a newer window is ignored and one into its own gives the units back; a
 * clear (the rules changed) gives back every unit; a stale grant is
 * returned, never kept; asks of other algorithms or recordings are
 * refused; the table's invariants hold throughout.
 *
 * The same for a token_bucket and a gcra (lease_bucket.lua): every use
 * the nodes allow, locally or through Redis, replayed at its true time
 * through an exact bucket (the memory store), conforms (zero overshoot);
 * at every refusal by Redis, the exact bucket holds at most the units of
 * the live leases plus those lost (the under-admission bound); returns
 * go back to their holder's field only, and an expired field's units
 * are lost, never minted.
 */
#include "testutil.h"

#include <hiredis/hiredis.h>

#include "decision/layer.h"
#include "internal.h"
#include "redisutil.h"

static tu_redis server;
static redisContext *conn;
static char sha[41];
static const sl__redis_keyspace ks = {
    .prefix = "L:", .extra_ttl_ms = 600000, .max_key_len = 1024};

#define MS SL_NS_PER_MS
#define T0 (INT64_C(1795937800) * SL_NS_PER_SEC) /* wall-clock-sized */

static int group_setup(void **state)
{
    (void)state;
    if (tu_redis_start(&server) != 0 ||
        (conn = tu_redis_admin(&server)) == NULL) {
        fprintf(stderr, "cannot start redis-server\n");
        return -1;
    }
    redisReply *r = redisCommand(conn, "SCRIPT LOAD %s", sl__redis_script);
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        return -1;
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    redisFree(conn);
    tu_redis_cleanup(&server);
    return 0;
}

typedef struct node {
    sd_leases *ls;
    sd_stats stats;
    sl_nanos offset; /* its clock less the true time */
} node;

static void node_init(node *nd, sl_nanos offset)
{
    memset(&nd->stats, 0, sizeof(nd->stats));
    nd->ls = sd_leases_new(64 * 1024, &nd->stats);
    assert_non_null(nd->ls);
    nd->offset = offset;
}

/* Sends what nd has to give back, Redis running it at now; returns the
 * units Redis took. */
static int64_t send_returns(node *nd, sl_nanos now)
{
    sd_lease_return rs[SD_RETURN_BATCH];
    int64_t back = 0;
    size_t n;
    while ((n = sd_leases_take_returns(nd->ls, rs, SD_RETURN_BATCH,
                                       now + nd->offset)) > 0) {
        sd_return_call a;
        assert_int_equal(sd_lease_return_args(&ks, sha, rs, n, now, &a), 0);
        redisReply *r = redisCommandArgv(conn, a.argc, a.argv, a.lens);
        free(a.names);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, n);
        for (size_t i = 0; i < n; i++)
            back += r->element[i]->integer;
        freeReplyObject(r);
    }
    return back;
}

/* The units Redis granted on the last call decide() sent. */
static int64_t last_grant;

/* One request of cost 1 of item on nd at its clock's now, Redis deciding
 * a call at the true time redis_at (>= the node's asking).  Returns
 * whether allowed; *local: answered from a lease. */
static int decide(node *nd, const sl_check_item *item,
                  const sd_lease_terms *terms, sl_nanos now, sl_nanos redis_at,
                  int *local)
{
    const int64_t one = 1;
    sl_decision each;
    sd_check k = {
        .items = item, .costs = &one, .n = 1, .lease = terms, .each = &each};
    *local = sd_leases_answer(nd->ls, &k, now);
    if (*local) {
        assert_int_equal(k.overall.allowed, 1);
        return 1;
    }
    sl__redis_ask asks[1];
    sl__redis_call *call;
    sl__redis_grant g[1];
    char err[256];
    sd_leases_asks(nd->ls, &k, now, asks);
    assert_int_equal(sl__redis_call_new_asking(&ks, item, &one, asks, 1,
                                               redis_at, 0, sha, &call, err,
                                               sizeof(err)),
                     0);
    const char *const *argv;
    const size_t *lens;
    int argc = sl__redis_call_argv(call, &argv, &lens);
    redisReply *r = redisCommandArgv(conn, argc, (const char **)argv, lens);
    assert_non_null(r);
    if (sl__redis_call_read(call, r, &each, &k.overall, err, sizeof(err)) != 0)
        fail_msg("reply: %s", err);
    freeReplyObject(r);
    sl__redis_call_take_grants(call, g);
    last_grant = g[0].units;
    if (asks[0].units == 0)
        expect_eq(g[0].units, 0);
    expect_le(g[0].units, asks[0].units);
    sd_leases_learn(nd->ls, &k, &each, g, now, 0);
    sl__redis_call_free(call);
    return k.overall.allowed;
}

/* Three calls of item on nd, at now, now + 1 and now + 2, all answered
 * by Redis (plain: a key asks a lease once it has used 4 units in its
 * span, lease.c's MIN_SEEN, so the next call asks) or all by a lease. */
static void three_calls(node *nd, const sl_check_item *item,
                        const sd_lease_terms *terms, sl_nanos now, int leased)
{
    int local;
    for (int i = 0; i < 3; i++) {
        assert_true(decide(nd, item, terms, now + i, now + i, &local));
        assert_int_equal(local, leased);
    }
}

#define NODES 3
#define COLD 4
#define WINDOWS 64

static void nodes_share_a_window_limit(void **state)
{
    (void)state;
    const sl_nanos P = 200 * MS;
    const int64_t L = 100, cold_l = 3;
    const sd_lease_terms terms = {.share_ppm = 200000, .max = 100 * MS};
    const int64_t cap = L / 5;
    sl_limit *hot = tu_limit(SL_FIXED_WINDOW, L, P, 0);
    sl_limit *cold = tu_limit(SL_FIXED_WINDOW, cold_l, P, 0);
    sl_check_item items[1 + COLD];
    char names[COLD][8];
    items[0] = (sl_check_item){hot, "hot", 3};
    for (int i = 0; i < COLD; i++) {
        snprintf(names[i], sizeof(names[i]), "cold%d", i);
        items[1 + i] = (sl_check_item){cold, names[i], strlen(names[i])};
    }
    node nodes[NODES];
    uint64_t seed = 31;
    for (int i = 0; i < NODES; i++)
        node_init(&nodes[i], tu_range(&seed, -5 * MS, 5 * MS));
    tu_redis_do(conn, "FLUSHALL");

    /* Per window (of the true time, Redis's clock) and key. */
    static int64_t allowed[WINDOWS][1 + COLD], demand[WINDOWS][1 + COLD];
    static uint64_t lost[WINDOWS];
    memset(allowed, 0, sizeof(allowed));
    memset(demand, 0, sizeof(demand));
    memset(lost, 0, sizeof(lost));
    int64_t locals = 0, events = tu_quick() ? 6000 : 20000;
    sl_nanos t = T0 - T0 % P; /* a window's start */
    for (int64_t e = 0; e < events; e++) {
        /* Windows of every load: some asked less than their limit, so
         * that leases live up to their ends with units left. */
        size_t w = (size_t)((t - T0) / P);
        t += tu_range(&seed, 0, (sl_nanos)(1 + w * 7 % 4) * MS);
        if (w >= WINDOWS)
            break;
        /* Each node's sweep, as its timer does every few ms. */
        for (int i = 0; i < NODES; i++) {
            uint64_t before = nodes[i].stats.lease_units_lost;
            sd_leases_sweep(nodes[i].ls, t + nodes[i].offset);
            send_returns(&nodes[i], t);
            lost[w] += nodes[i].stats.lease_units_lost - before;
            assert_int_equal(sd_leases_check(nodes[i].ls), 0);
        }
        node *nd = &nodes[tu_below(&seed, NODES)];
        size_t key =
            tu_below(&seed, 20) == 0 ? 1 + (size_t)tu_below(&seed, COLD) : 0;
        /* Redis decides the call up to 1 ms after it was asked. */
        sl_nanos redis_at = t + tu_range(&seed, 0, MS);
        int local;
        int ok = decide(nd, &items[key], key == 0 ? &terms : NULL,
                        t + nd->offset, redis_at, &local);
        /* A local allow is made at t, a Redis one at redis_at. */
        size_t in = (size_t)(((local ? t : redis_at) - T0) / P);
        if (in >= WINDOWS)
            break;
        demand[in][key]++;
        allowed[in][key] += ok;
        locals += local;
        /* The node waited for Redis: the true time is past its decision. */
        if (!local)
            t = redis_at;
    }
    int64_t full_windows = 0;
    for (size_t w = 0; w + 1 < WINDOWS; w++) {
        expect_le(allowed[w][0], L);
        int64_t exact = demand[w][0] < L ? demand[w][0] : L;
        full_windows += demand[w][0] > L;
        if (allowed[w][0] < exact) {
            /* Refused while the others held leases: at most their units
             * and those lost (counted, never used). */
            if (exact - allowed[w][0] > (NODES - 1) * cap + (int64_t)lost[w])
                fail_msg("window %zu: allowed %lld of %lld demanded: under "
                         "by more than %lld",
                         w, (long long)allowed[w][0], (long long)demand[w][0],
                         (long long)((NODES - 1) * cap + (int64_t)lost[w]));
        }
        for (int c = 1; c <= COLD; c++)
            expect_eq_at(allowed[w][c],
                         demand[w][c] < cold_l ? demand[w][c] : cold_l,
                         "cold key %d, window %zu\n", c, w);
    }
    /* The hot key was decided mostly by the nodes themselves, and its
     * windows were asked for more than their limit. */
    int64_t hot_demand = 0;
    for (size_t w = 0; w < WINDOWS; w++)
        hot_demand += demand[w][0];
    expect_ge(locals, hot_demand / 2);
    expect_ge(full_windows, WINDOWS / 8);
    for (int i = 0; i < NODES; i++)
        sd_leases_free(nodes[i].ls);
    sl_limit_free(hot);
    sl_limit_free(cold);
}

/* The key's count in Redis, from its state "s n count"; -1: none. */
static long long count_of(const sl_check_item *item)
{
    char name[256];
    size_t len = sl__redis_key_name(&ks, item->limit->ident, item->key,
                                    item->key_len, name);
    redisReply *r = redisCommand(conn, "GET %b", name, len);
    long long s, n, c = -1;
    assert_non_null(r);
    if (r->type == REDIS_REPLY_STRING &&
        sscanf(r->str, "%lld %lld %lld", &s, &n, &c) != 3)
        c = -1;
    freeReplyObject(r);
    return c;
}

static void returns_only_into_their_window(void **state)
{
    (void)state;
    const sl_nanos P = SL_NS_PER_SEC;
    const sd_lease_terms terms = {.share_ppm = 500000, .max = P};
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 100, P, 0);
    sl_check_item it = {lim, "late", 4};
    node a, b;
    int local;
    node_init(&a, 0);
    node_init(&b, 0);
    tu_redis_do(conn, "FLUSHALL");
    sl_nanos t = T0 - T0 % P + 100 * MS;
    /* The first three calls ask nothing, the fourth a lease (the key's
     * rate is high), which Redis counts at once. */
    three_calls(&a, &it, &terms, t, 0);
    assert_true(decide(&a, &it, &terms, t + MS, t + MS, &local) && !local);
    long long granted = (long long)a.stats.lease_units_granted;
    expect_ge(granted, 2);
    expect_le(granted, 50); /* lease_share of the limit */
    expect_eq(count_of(&it), 4 + granted);
    assert_true(decide(&a, &it, &terms, t + 2 * MS, t + 2 * MS, &local) &&
                local);
    /* The rules changed: what a holds goes back into its window. */
    sd_leases_clear(a.ls);
    assert_int_equal(sd_leases_check(a.ls), 0);
    expect_eq(send_returns(&a, t + 3 * MS), granted - 1);
    expect_eq(count_of(&it), 5);
    assert_true(decide(&a, &it, &terms, t + 3 * MS, t + 3 * MS, &local) &&
                !local);

    /* b takes a lease in this window... */
    three_calls(&b, &it, &terms, t + 4 * MS, 0);
    assert_true(decide(&b, &it, &terms, t + 5 * MS, t + 5 * MS, &local));
    expect_ge(b.stats.lease_units_granted, 1);
    /* ...which ends; a is charged in the next one, and b's units come
     * back too late: the new window's count stays. */
    sl_nanos t2 = t - 100 * MS + P;
    assert_true(decide(&a, &it, &terms, t2, t2, &local) && !local);
    expect_eq(count_of(&it), 1);
    sd_leases_clear(b.ls);
    expect_eq(send_returns(&b, t2), 0);
    expect_eq(count_of(&it), 1);
    /* Nor may b use them now: the lease expired with its window. */
    assert_true(decide(&b, &it, &terms, t2 + MS, t2 + MS, &local) && !local);
    sd_leases_free(a.ls);
    sd_leases_free(b.ls);
    sl_limit_free(lim);
}

/* The units item's next call at now asks (sd_leases_asks alone). */
static int64_t asks_at(node *nd, const sl_check_item *item,
                       const sd_lease_terms *terms, sl_nanos now)
{
    const int64_t one = 1;
    sd_check k = {.items = item, .costs = &one, .n = 1, .lease = terms};
    sl__redis_ask asks[1];
    sd_leases_asks(nd->ls, &k, now, asks);
    return asks[0].units;
}

/* A key asks a lease once its rate is told: 4 units seen in a span of at
 * most two lease lifetimes, whose rate would use at least 4 more. */
static void a_lease_is_asked_on_a_rate(void **state)
{
    (void)state;
    const sl_nanos P = SL_NS_PER_SEC;
    const sd_lease_terms terms = {.share_ppm = 100000, .max = 100 * MS};
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 1000, P, 0);
    sl_check_item cold = {lim, "cold", 4}, gap = {lim, "gap", 3},
                  hot = {lim, "hot", 3}, slow = {lim, "slow", 4};
    node a;
    node_init(&a, 0);
    sl_nanos t = T0;
    /* Two requests a moment apart are no rate: a cold key's pair. */
    expect_eq(asks_at(&a, &cold, &terms, t), 0);
    expect_eq(asks_at(&a, &cold, &terms, t + 1), 0);
    /* Three, then a pause longer than two lifetimes: measured afresh. */
    for (int i = 0; i < 3; i++)
        expect_eq(asks_at(&a, &gap, &terms, t + i), 0);
    expect_eq(asks_at(&a, &gap, &terms, t + 201 * MS), 0);
    expect_eq(asks_at(&a, &gap, &terms, t + 201 * MS + 1), 0);
    /* Four within 1 ms: 4 per ms for 100 ms, capped at a tenth of 1000. */
    for (int i = 0; i < 3; i++)
        expect_eq(asks_at(&a, &hot, &terms, t + i * MS / 3), 0);
    expect_eq(asks_at(&a, &hot, &terms, t + MS), 100);
    /* Then one ask at a time: the next waits for its reply. */
    expect_eq(asks_at(&a, &hot, &terms, t + 2 * MS), 0);
    /* Four in 190 ms would use 4 x 100/190 - 1 = 1 more in a lifetime:
     * not worth a lease.  The span goes on (the rate is told better the
     * longer it is): the tenth unit, at 196 ms, asks 10 x 100/196 - 1. */
    for (int i = 0; i < 3; i++)
        expect_eq(asks_at(&a, &slow, &terms, t + i * 60 * MS), 0);
    for (int ms = 190; ms < 196; ms++)
        expect_eq(asks_at(&a, &slow, &terms, t + ms * MS), 0);
    expect_eq(asks_at(&a, &slow, &terms, t + 196 * MS), 4);
    sd_leases_free(a.ls);
    sl_limit_free(lim);
}

static void stale_grants_and_bad_asks(void **state)
{
    (void)state;
    const sl_nanos P = SL_NS_PER_SEC;
    const sd_lease_terms terms = {.share_ppm = 500000, .max = P};
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 100, P, 0);
    sl_limit *tb = tu_limit(SL_TOKEN_BUCKET, 100, P, 0);
    sl_check_item it = {lim, "stale", 5}, bucket = {tb, "b", 1};
    const int64_t one = 1;
    const sl__redis_ask ask = {.units = 10};
    sl_decision d = {
        .allowed = 1, .limit = 100, .remaining = 50, .reset_after = P / 2};
    sd_check k = {.items = &it, .costs = &one, .n = 1, .lease = &terms};
    node a;
    sl__redis_call *call = NULL;
    char err[128];
    node_init(&a, 0);
    tu_redis_do(conn, "FLUSHALL");
    sl_nanos t = T0 - T0 % P;
    int local;
    assert_true(decide(&a, &it, &terms, t, t, &local));
    /* A grant to a call asked before the rules changed: given back. */
    sl__redis_grant g = {.units = 7, .window_s = t / SL_NS_PER_SEC};
    sd_leases_learn(a.ls, &k, &d, &g, t, 1);
    expect_eq(a.stats.lease_grants, 0);
    sd_lease_return r;
    expect_eq(sd_leases_take_returns(a.ls, &r, 1, t), 1);
    expect_eq(r.units, 7);
    /* Only a fixed_window's committed calls may ask. */
    expect_eq(sl__redis_call_new_asking(&ks, &bucket, &one, &ask, 1, t, 0, sha,
                                        &call, err, sizeof(err)),
              SL_EINVAL);
    expect_eq(sl__redis_call_new_asking(&ks, &it, &one, &ask, 1, t, SL_RECORD,
                                        sha, &call, err, sizeof(err)),
              SL_EINVAL);
    assert_null(call);
    /* A bucket's one-integer reply (fast.lua) reads as no grant. */
    {
        const char *const *argv;
        const size_t *lens;
        sl__redis_grant none;
        sl_decision bd;
        memset(&none, 0xff, sizeof(none));
        assert_int_equal(sl__redis_call_new_asking(&ks, &bucket, &one, NULL, 1,
                                                   t, 0, sha, &call, err,
                                                   sizeof(err)),
                         0);
        int argc = sl__redis_call_argv(call, &argv, &lens);
        redisReply *rep =
            redisCommandArgv(conn, argc, (const char **)argv, lens);
        assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
        assert_int_equal(
            sl__redis_call_read(call, rep, &bd, NULL, err, sizeof(err)), 0);
        freeReplyObject(rep);
        sl__redis_call_take_grants(call, &none);
        expect_eq(none.units, 0);
        sl__redis_call_free(call);
        call = NULL;
    }
    /* A recording, a query and an item without terms ask nothing. */
    sl__redis_ask asks[1] = {{.units = -1}};
    int64_t zero = 0;
    sd_check rec = k;
    rec.flags = SL_RECORD;
    sd_leases_asks(a.ls, &rec, t, asks);
    expect_eq(asks[0].units, 0);
    sd_check query = k;
    query.costs = &zero;
    sd_leases_asks(a.ls, &query, t, asks);
    expect_eq(asks[0].units, 0);
    assert_false(sd_leases_answer(a.ls, &query, t));
    sd_leases_free(a.ls);
    sl_limit_free(lim);
    sl_limit_free(tb);
}

/* The name of the hash of item's bucket leases (lease_bucket.lua): its
 * key's with '+' after the identity. */
static size_t lease_hash_of(const sl_check_item *item, char *name)
{
    size_t len = sl__redis_key_name(&ks, item->limit->ident, item->key,
                                    item->key_len, name);
    name[sl__redis_key_ident_at(&ks) - 1] = '+';
    return len;
}

/* The units of the fields of item's lease hash, live or expired (those
 * the next decision prunes). */
static int64_t leased_units(const sl_check_item *item)
{
    char name[256];
    size_t len = lease_hash_of(item, name);
    redisReply *r = redisCommand(conn, "HVALS %b", name, len);
    int64_t units = 0;
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++)
        units += strtoll(r->element[i]->str, NULL, 10);
    freeReplyObject(r);
    return units;
}

static uint64_t lost_of(const node *nodes, int n)
{
    uint64_t lost = 0;
    for (int i = 0; i < n; i++)
        lost += nodes[i].stats.lease_units_lost;
    return lost;
}

/* What a cost-0 query of item reports at now. */
static int64_t remaining_at(const sl_check_item *item, sl_nanos now)
{
    const int64_t zero = 0;
    sl__redis_call *call;
    sl_decision d;
    char err[128];
    const char *const *argv;
    const size_t *lens;
    assert_int_equal(sl__redis_call_new(&ks, item, &zero, 1, now, 0, sha, &call,
                                        err, sizeof(err)),
                     0);
    int argc = sl__redis_call_argv(call, &argv, &lens);
    redisReply *r = redisCommandArgv(conn, argc, (const char **)argv, lens);
    /* A leased bucket never takes fast.lua's one-integer reply. */
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(sl__redis_call_read(call, r, &d, NULL, err, sizeof(err)),
                     0);
    freeReplyObject(r);
    sl__redis_call_free(call);
    return d.remaining;
}

/* Three nodes share a hot bucket key under load that comes and goes. */
static void nodes_share_a_bucket(sl_algorithm alg)
{
    const int64_t L = 2000, B = 100; /* T = 0.5 ms */
    const sd_lease_terms terms = {.share_ppm = 250000, .max = 50 * MS};
    sl_limit *lim = tu_limit(alg, L, SL_NS_PER_SEC, B);
    lim->leased = 1; /* as the rules set it for sync: {mode: lease} */
    sl_check_item item = {lim, "hot", 3};
    sl_store *exact = tu_store();
    node nodes[NODES];
    uint64_t seed = 57;
    /* Units of the leases that ended (expired, or the used ones of those
     * returned) since the key was last full on Redis with none leased:
     * they may weigh on Redis's bucket and not on the exact one. */
    int64_t ended = 0, most_ended = 0;
    for (int i = 0; i < NODES; i++)
        node_init(&nodes[i], tu_range(&seed, -5 * MS, 5 * MS));
    tu_redis_do(conn, "FLUSHALL");
    int64_t locals = 0, allowed = 0, refused = 0,
            events = tu_quick() ? 6000 : 20000;
    sl_nanos t = T0;
    for (int64_t e = 0; e < events; e++) {
        /* Bursts above the rate, then below it, then idle. */
        static const sl_nanos gaps[] = {400 * 1000, 3 * MS, 60 * MS};
        t += tu_range(&seed, 0, gaps[e / 400 % 3]);
        for (int i = 0; i < NODES; i++) {
            /* A sweep's returns go before the next check is asked. */
            int64_t held = leased_units(&item);
            sd_leases_sweep(nodes[i].ls, t - 1000 + nodes[i].offset);
            int64_t back = send_returns(&nodes[i], t - 1000);
            ended += held - leased_units(&item) - back;
            assert_int_equal(sd_leases_check(nodes[i].ls), 0);
        }
        int64_t out = leased_units(&item);
        if (out == 0 && remaining_at(&item, t) == B)
            ended = 0;
        most_ended = ended > most_ended ? ended : most_ended;
        node *nd = &nodes[tu_below(&seed, NODES)];
        sl_nanos redis_at = t + tu_range(&seed, 0, MS);
        int local;
        last_grant = 0;
        int ok = decide(nd, &item, &terms, t + nd->offset, redis_at, &local);
        sl_nanos at = local ? t : redis_at;
        if (!local) /* the fields the call found expired */
            ended += out + last_grant - leased_units(&item);
        if (ok) {
            /* Zero overshoot: the use conforms to the exact bucket. */
            sl_decision d = tu_check(exact, lim, "hot", 1, at);
            if (!d.allowed)
                fail_msg("event %lld: a use at %lld ns (%s) overshoots the "
                         "exact bucket",
                         (long long)e, (long long)(at - T0),
                         local ? "local" : "redis");
            allowed++;
        } else {
            /* Refused while the exact bucket had more than the leases
             * live and ended: under-admission past its bound. */
            sl_decision q = tu_check(exact, lim, "hot", 0, at);
            if (q.remaining > out + ended)
                fail_msg("event %lld: refused with %lld in the exact bucket, "
                         "more than the %lld leased and %lld ended",
                         (long long)e, (long long)q.remaining, (long long)out,
                         (long long)ended);
            refused++;
        }
        locals += local;
        if (!local)
            t = redis_at;
    }
    /* A good share decided by the nodes, and the bucket often empty. */
    expect_ge(locals, allowed / 4);
    expect_ge(refused, events / 100);
    print_message("%s: %lld allowed (%lld locally), %lld refused, %llu units "
                  "lost, at most %lld ended at once\n",
                  sl_algorithm_name(alg), (long long)allowed, (long long)locals,
                  (long long)refused, (unsigned long long)lost_of(nodes, NODES),
                  (long long)most_ended);
    for (int i = 0; i < NODES; i++)
        sd_leases_free(nodes[i].ls);
    sl_store_free(exact);
    sl_limit_free(lim);
}

static void nodes_share_a_token_bucket(void **state)
{
    (void)state;
    nodes_share_a_bucket(SL_TOKEN_BUCKET);
}

static void nodes_share_a_gcra(void **state)
{
    (void)state;
    nodes_share_a_bucket(SL_GCRA);
}

static void bucket_returns_and_expiry(void **state)
{
    (void)state;
    const sl_nanos T = 10 * MS; /* L = 100 per s */
    const sd_lease_terms terms = {.share_ppm = 500000, .max = 100 * MS};
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 100, SL_NS_PER_SEC, 20);
    lim->leased = 1;
    sl_check_item it = {lim, "tb", 2};
    node a, b;
    int local;
    node_init(&a, 0);
    node_init(&b, 0);
    tu_redis_do(conn, "FLUSHALL");
    sl_nanos t = T0;
    /* Plain calls first, then one that asks (the key is hot). */
    three_calls(&a, &it, &terms, t, 0);
    assert_true(decide(&a, &it, &terms, t + 100, t + 100, &local) && !local);
    int64_t g = (int64_t)a.stats.lease_units_granted;
    expect_ge(g, 4);
    expect_le(g, 10); /* lease_share of the burst */
    expect_eq(leased_units(&it), g);
    expect_eq(remaining_at(&it, t + 200), 20 - 4 - g);
    assert_true(decide(&a, &it, &terms, t + 300, t + 300, &local) && local);
    /* Later the bucket has refilled, but the floor keeps the units
     * leased out of it: at most B - out (the 4 plain units refilled). */
    expect_eq(remaining_at(&it, t + 5 * T), 20 - g);
    /* a gives back its g - 1 unused units: its field goes, the bucket
     * gets them; the one it used stays charged as if used now. */
    sd_leases_clear(a.ls);
    expect_eq(send_returns(&a, t + 5 * T), g - 1);
    expect_eq(leased_units(&it), 0);
    expect_eq(remaining_at(&it, t + 5 * T), 19);
    expect_eq(remaining_at(&it, t + 6 * T), 20);
    /* A late return (its field is gone) and a foreign one take nothing. */
    sd_lease_return late = {.units = g,
                            .window_s = 20,
                            .window_ns = SD_LEASE_NO_WINDOW,
                            .limit = 100,
                            .period = SL_NS_PER_SEC,
                            .ident = lim->ident,
                            .holder = 12345,
                            .key_len = 2};
    memcpy(late.key, "tb", 2);
    sd_return_call args;
    assert_int_equal(
        sd_lease_return_args(&ks, sha, &late, 1, t + 21 * T, &args), 0);
    redisReply *r = redisCommandArgv(conn, args.argc, args.argv, args.lens);
    free(args.names);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    expect_eq(r->element[0]->integer, 0);
    freeReplyObject(r);

    /* b takes a lease, uses one unit of it, and is never heard of again
     * (killed): its field expires with its lease's life, its units lost;
     * until then they stay out of the bucket. */
    sl_nanos t2 = t + 40 * T;
    three_calls(&b, &it, &terms, t2, 0);
    assert_true(decide(&b, &it, &terms, t2 + 100, t2 + 100, &local) && !local);
    int64_t gb = (int64_t)b.stats.lease_units_granted;
    expect_ge(gb, 4);
    assert_true(decide(&b, &it, &terms, t2 + 200, t2 + 200, &local) && local);
    expect_eq(remaining_at(&it, t2 + 50 * MS), 20 - gb);
    /* Past Redis's expiry (100 ms on): the field is pruned, and the floor
     * it held at its expiry stands, then the bucket refills. */
    expect_eq(remaining_at(&it, t2 + 101 * MS), 20 - gb + 0);
    expect_eq(leased_units(&it), 0);
    expect_eq(remaining_at(&it, t2 + 101 * MS + (gb + 2) * T), 20);
    /* b's lease ended before Redis's field did: it neither uses nor
     * returns it. */
    sd_leases_sweep(b.ls, t2 + 100 * MS);
    expect_eq(b.stats.lease_units_lost, (uint64_t)(gb - 1));
    expect_eq(send_returns(&b, t2 + 100 * MS), 0);
    sd_leases_free(a.ls);
    sd_leases_free(b.ls);
    sl_limit_free(lim);
}

/* A call of item on nd at now that asks a lease, run by Redis, whose
 * reply is not learnt (it came after a timeout, or its client left):
 * what it was granted, in g, and its copies for giving it back. */
static sd_lease_backs *ask_unlearnt(node *nd, const sl_check_item *item,
                                    const sd_lease_terms *terms, sl_nanos now,
                                    sl__redis_grant *g)
{
    const int64_t one = 1;
    sd_check k = {.items = item, .costs = &one, .n = 1, .lease = terms};
    sl__redis_ask asks[1];
    sl__redis_call *call;
    char err[256];
    const char *const *argv;
    const size_t *lens;
    sd_leases_asks(nd->ls, &k, now, asks);
    assert_true(asks[0].units > 0);
    sd_lease_backs *backs = sd_leases_backs_new(nd->ls, &k, asks, now);
    assert_non_null(backs);
    assert_int_equal(sl__redis_call_new_asking(&ks, item, &one, asks, 1, now,
                                               0, sha, &call, err,
                                               sizeof(err)),
                     0);
    int argc = sl__redis_call_argv(call, &argv, &lens);
    redisReply *r = redisCommandArgv(conn, argc, (const char **)argv, lens);
    assert_int_equal(sl__redis_call_read_part(call, 0, r, err, sizeof(err)), 0);
    freeReplyObject(r);
    sl__redis_call_take_grants(call, g);
    expect_ge(g[0].units, 1);
    sl__redis_grant again;
    sl__redis_call_take_grants(call, &again);
    expect_eq(again.units, 0); /* taken once */
    sl__redis_call_free(call);
    return backs;
}

static void grants_not_learnt_go_back(void **state)
{
    (void)state;
    const sd_lease_terms terms = {.share_ppm = 500000, .max = 100 * MS};
    sl_limit *fw = tu_limit(SL_FIXED_WINDOW, 100, SL_NS_PER_SEC, 0);
    sl_limit *tb = tu_limit(SL_TOKEN_BUCKET, 100, SL_NS_PER_SEC, 40);
    tb->leased = 1;
    sl_check_item wi = {fw, "fw", 2}, bi = {tb, "tb", 2};
    sl__redis_grant g;
    sd_lease_backs *backs;
    node a;
    int local;
    node_init(&a, 0);
    tu_redis_do(conn, "FLUSHALL");
    sl_nanos t = T0;

    /* A window's: its units go back into their window, and the key may
     * ask again without waiting out the ask (it is answered). */
    three_calls(&a, &wi, &terms, t, 0);
    backs = ask_unlearnt(&a, &wi, &terms, t + 100, &g);
    expect_eq(count_of(&wi), 4 + g.units);
    sd_leases_give_back_late(a.ls, backs, &g);
    free(backs);
    expect_eq(send_returns(&a, t + 200), g.units);
    expect_eq(count_of(&wi), 4); /* the calls' own units */
    three_calls(&a, &wi, &terms, t + 300, 0);
    assert_true(decide(&a, &wi, &terms, t + 400, t + 400, &local) && !local);
    expect_ge(last_grant, 1);

    /* A bucket's, with no lease of its key held: back to the bucket. */
    three_calls(&a, &bi, &terms, t, 0);
    backs = ask_unlearnt(&a, &bi, &terms, t + 100, &g);
    expect_eq(leased_units(&bi), g.units);
    sd_leases_give_back_late(a.ls, backs, &g);
    free(backs);
    expect_eq(send_returns(&a, t + 200), g.units);
    expect_eq(leased_units(&bi), 0);
    expect_eq(remaining_at(&bi, t + 200), 36);

    /* A lease of the key held: a return would drop the holder's whole
     * field, the held lease's units with it; so the late grant is lost,
     * and the field keeps both. */
    sl_nanos t2 = t + 300;
    three_calls(&a, &bi, &terms, t2, 0);
    assert_true(decide(&a, &bi, &terms, t2 + 100, t2 + 100, &local) && !local);
    int64_t held = last_grant;
    expect_ge(held, 3);
    three_calls(&a, &bi, &terms, t2 + 150, 1);
    uint64_t lost = a.stats.lease_units_lost;
    backs = ask_unlearnt(&a, &bi, &terms, t2 + 200, &g);
    sd_leases_give_back_late(a.ls, backs, &g);
    free(backs);
    expect_eq(a.stats.lease_units_lost, lost + (uint64_t)g.units);
    expect_eq(send_returns(&a, t2 + 300), 0);
    expect_eq(leased_units(&bi), held + g.units);

    /* Asked before a bucket's return was sent: that return may have
     * dropped the field the grant is in; lost as well.  (b, of its own
     * holder: its lease goes back shortly before its expiry.) */
    node b;
    node_init(&b, 0);
    sl_check_item b2 = {tb, "t2", 2};
    sl_nanos t3 = t + SL_NS_PER_SEC;
    three_calls(&b, &b2, &terms, t3, 0);
    assert_true(decide(&b, &b2, &terms, t3 + 100, t3 + 100, &local) && !local);
    held = last_grant;
    expect_ge(held, 4);
    three_calls(&b, &b2, &terms, t3 + 150, 1);
    backs = ask_unlearnt(&b, &b2, &terms, t3 + 200, &g);
    sd_leases_sweep(b.ls, t3 + 85 * MS);
    expect_eq(send_returns(&b, t3 + 85 * MS), held - 3);
    sd_leases_give_back_late(b.ls, backs, &g);
    free(backs);
    expect_eq(b.stats.lease_units_lost, (uint64_t)g.units);
    expect_eq(send_returns(&b, t3 + 86 * MS), 0);
    sd_leases_free(b.ls);
    sd_leases_free(a.ls);
    sl_limit_free(fw);
    sl_limit_free(tb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nodes_share_a_window_limit),
        cmocka_unit_test(returns_only_into_their_window),
        cmocka_unit_test(a_lease_is_asked_on_a_rate),
        cmocka_unit_test(stale_grants_and_bad_asks),
        cmocka_unit_test(nodes_share_a_token_bucket),
        cmocka_unit_test(nodes_share_a_gcra),
        cmocka_unit_test(bucket_returns_and_expiry),
        cmocka_unit_test(grants_not_learnt_go_back),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
