/*
 * test_redis_cluster.c - the Redis store on a real Redis Cluster: three
 * masters and three replicas started by the test (redis-server with
 * cluster-enabled, joined by `redis-cli --cluster create`), then
 *
 *   - key slots against the servers' own CLUSTER KEYSLOT;
 *   - limits exact across slots: several threads, each with its own
 *     store, on keys spread over all three masters, every algorithm;
 *   - a multi-item call within one slot is all or nothing, and one across
 *     slots is decided per slot as docs/stores.md says;
 *   - a slot migrated under the store (ASK while it migrates, MOVED once
 *     it has moved): decisions continue, exact;
 *   - a master killed: bounded failures, then decisions again from its
 *     promoted replica;
 *   - and, on a cluster of its own, a master without FUNCTION and FCALL
 *     (Redis 6, mid-upgrade): decisions made, by EVALSHA there.
 *
 * Cluster URLs are checked first and need no server; the pure parsers
 * (slots, redirections, slot maps) are tests/test_redis_proto.c's.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "redis/redis_proto.h"
#include "redisutil.h"

#define MASTERS 3
#define NODES 6 /* each master with one replica */

static tu_redis nodes[NODES];
static char seed_url[128];
static int quick;

/* ---- the pure parts ---- */

static void test_bad_urls(void **state)
{
    const char *bad[] = {"redis-cluster://",
                         "redis-cluster://127.0.0.1",
                         "redis-cluster://127.0.0.1:7000/0",
                         "redis-cluster://127.0.0.1:7000,",
                         "redis-cluster://127.0.0.1:x",
                         "redis-cluster://[::1:7000"};
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sl_redis_options o = {
            .size = sizeof(sl_redis_options), .url = bad[i], .lazy_connect = 1};
        sl_store *s = NULL;
        char err[256] = "";
        assert_int_equal(sl_redis_store_new(&o, &s, err, sizeof(err)),
                         SL_EINVAL);
        assert_non_null(strstr(err, "invalid redis url"));
        assert_null(s);
    }
}

/* ---- the cluster ---- */

static redisReply *admin_cmd(int node, const char *fmt, ...)
{
    va_list ap;
    redisContext *c = tu_redis_admin(&nodes[node]);
    redisReply *r = NULL;
    if (c == NULL)
        return NULL;
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

/* 1 when node reports cluster_state:ok and, for a replica, that it is in
 * sync with its master (a replica never synced is never promoted). */
static int node_ok(int node)
{
    redisReply *r = admin_cmd(node, "CLUSTER INFO");
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok") != NULL;
    if (r)
        freeReplyObject(r);
    r = admin_cmd(node, "INFO replication");
    ok = ok && r != NULL && r->type == REDIS_REPLY_STRING &&
         (strstr(r->str, "role:master") != NULL ||
          strstr(r->str, "master_link_status:up") != NULL);
    if (r)
        freeReplyObject(r);
    return ok;
}

static int wait_cluster_ok(int skip)
{
    for (int i = 0; i < 400; i++) { /* 20 s */
        int all = 1;
        for (int n = 0; n < NODES && all; n++)
            if (n != skip)
                all = node_ok(n);
        if (all)
            return 0;
        tu_sleep_ms(50);
    }
    return -1;
}

/* The node index (into nodes[]) of the master serving slot, asked of
 * node `ask`; -1 if unknown. */
static int master_of(int ask, int slot)
{
    redisReply *r = admin_cmd(ask, "CLUSTER SLOTS");
    int found = -1;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements;
         i++) {
        redisReply *e = r->element[i];
        if (slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            for (int n = 0; n < NODES; n++)
                if (nodes[n].port == e->element[2]->element[1]->integer)
                    found = n;
    }
    if (r)
        freeReplyObject(r);
    return found;
}

static char *node_id(int node)
{
    redisReply *r = admin_cmd(node, "CLUSTER MYID");
    char *id = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    if (r)
        freeReplyObject(r);
    return id;
}

/* Starts n Cluster nodes (their fields set by the caller) and joins them
 * with `redis-cli --cluster create`, each master with `replicas`. */
static int start_cluster(tu_redis *r, int n, int replicas)
{
    char cmd[1024];
    int at;
    for (int i = 0; i < n; i++) {
        r[i].cluster_node_timeout_ms = 1000;
        if (tu_redis_start(&r[i]) != 0) {
            char log[256];
            snprintf(log, sizeof(log), "cat %s/redis.log >&2", r[i].dir);
            fprintf(stderr, "cannot start redis-server (cluster node %d)\n", i);
            if (system(log) != 0)
                fprintf(stderr, "no log\n");
            return -1;
        }
    }
    at = snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
    for (int i = 0; i < n; i++)
        at += snprintf(cmd + at, sizeof(cmd) - (size_t)at, " 127.0.0.1:%d",
                       r[i].port);
    snprintf(cmd + at, sizeof(cmd) - (size_t)at,
             " --cluster-replicas %d --cluster-yes > %s/create.log 2>&1",
             replicas, r[0].dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot create the cluster: %s\n", cmd);
        return -1;
    }
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    quick = getenv("SL_TEST_QUICK") != NULL;
    if (start_cluster(nodes, NODES, 1) != 0 || wait_cluster_ok(-1) != 0)
        return -1;
    snprintf(seed_url, sizeof(seed_url), "redis-cluster://127.0.0.1:%d",
             nodes[0].port);
    return 0;
}

/* Stops start_cluster's nodes and removes their directories. */
static void stop_cluster(tu_redis *r, int n)
{
    char path[256];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/create.log", r[i].dir);
        unlink(path);
        tu_redis_cleanup(&r[i]);
    }
}

static int group_teardown(void **state)
{
    (void)state;
    stop_cluster(nodes, NODES);
    return 0;
}

static sl_store *cluster_store(int timeout_ms)
{
    sl_redis_options o = {.size = sizeof(sl_redis_options),
                          .url = seed_url,
                          .timeout_ms = timeout_ms};
    sl_store *s = NULL;
    char err[256];
    int rc = sl_redis_store_new(&o, &s, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_redis_store_new(%s): %d %s", seed_url, rc, err);
    return s;
}

static sl_limit *make_limit(sl_algorithm alg, int64_t limit)
{
    sl_limit_config cfg = {
        .algorithm = alg, .limit = limit, .period = 3600 * SL_NS_PER_SEC};
    sl_limit *l;
    assert_int_equal(sl_limit_new(&cfg, &l, NULL, 0), 0);
    return l;
}

/* The key name the store gives (limit, key), for CLUSTER KEYSLOT. */
static int slot_of(const char *key)
{
    /* The tag is the key (no '}' in the test's keys). */
    return sl__redis_key_slot(key, strlen(key));
}

static void test_slots_match_the_servers(void **state)
{
    (void)state;
    redisContext *c = tu_redis_admin(&nodes[0]);
    assert_non_null(c);
    unsigned seed = 7;
    for (int i = 0; i < (quick ? 100 : 500); i++) {
        char key[24];
        size_t len = 1 + (size_t)(rand_r(&seed) % 20);
        for (size_t j = 0; j < len; j++)
            key[j] = "ab{}cd:xy"[rand_r(&seed) % 9];
        long long want = tu_redis_int(c, "CLUSTER KEYSLOT %b", key, len);
        assert_int_equal(sl__redis_key_slot(key, len), want);
    }
    redisFree(c);
}

#define KEYS 30
#define THREADS 3

typedef struct worker {
    const sl_limit *limit;
    int rounds;
    int allowed[KEYS];
    int failed;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    sl_store *s = cluster_store(2000);
    sl_nanos now = sl_clock_realtime();
    for (int r = 0; r < w->rounds; r++)
        for (int k = 0; k < KEYS; k++) {
            char key[32];
            sl_decision d;
            snprintf(key, sizeof(key), "user:%d", k);
            if (sl_check(s, w->limit, key, strlen(key), 1, now, &d) != 0)
                w->failed++;
            else
                w->allowed[k] += d.allowed;
        }
    sl_store_free(s);
    return NULL;
}

static void test_exact_across_slots(void **state)
{
    const sl_algorithm algs[] = {
        SL_TOKEN_BUCKET, SL_GCRA,           SL_LEAKY_BUCKET,  SL_FIXED_WINDOW,
        SL_SLIDING_LOG,  SL_SLIDING_WINDOW, SL_STEPPED_WINDOW};
    const int64_t L = 4;
    int on_master[NODES] = {0};
    (void)state;
    /* The keys reach every master. */
    for (int k = 0; k < KEYS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "user:%d", k);
        on_master[master_of(0, slot_of(key))]++;
    }
    int masters = 0;
    for (int n = 0; n < NODES; n++)
        masters += on_master[n] > 0;
    assert_int_equal(masters, MASTERS);
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        if (quick && a % 2 == 1)
            continue;
        sl_limit *lim = make_limit(algs[a], L);
        worker w[THREADS];
        pthread_t th[THREADS];
        for (int t = 0; t < THREADS; t++) {
            w[t] = (worker){.limit = lim, .rounds = (int)L};
            pthread_create(&th[t], NULL, worker_main, &w[t]);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        for (int k = 0; k < KEYS; k++) {
            int allowed = 0, failed = 0;
            for (int t = 0; t < THREADS; t++) {
                allowed += w[t].allowed[k];
                failed += w[t].failed;
            }
            if (failed != 0 || allowed != L)
                fail_msg("%s key user:%d: allowed %d of %d (want %lld), "
                         "%d failures",
                         sl_algorithm_name(algs[a]), k, allowed,
                         THREADS * (int)L, (long long)L, failed);
        }
        sl_limit_free(lim);
    }
}

/* 1 if node (a master) has the library. */
static int has_library(int node)
{
    redisContext *c = tu_redis_admin(&nodes[node]);
    int has = c != NULL && tu_redis_has_library(c, sl__redis_function);
    if (c)
        redisFree(c);
    return has;
}

/* The blocking cluster store loads the library on every master it talks
 * to, and after a FUNCTION FLUSH on each, loads it again there (the call
 * that met the flush goes again as EVAL) and stays exact. */
static void test_library_on_every_master(void **state)
{
    const int64_t L = 3;
    sl_limit *lim = make_limit(SL_GCRA, L);
    sl_store *s = cluster_store(2000);
    sl_nanos now = sl_clock_realtime();
    int masters[NODES] = {0};
    (void)state;

    for (int round = 0; round < 2 * (int)L; round++) {
        if (round == (int)L) /* half-way: every master loses the library */
            for (int n = 0; n < NODES; n++)
                if (masters[n]) {
                    redisReply *r = admin_cmd(n, "FUNCTION FLUSH");
                    assert_non_null(r);
                    freeReplyObject(r);
                    assert_int_equal(has_library(n), 0);
                }
        for (int k = 0; k < KEYS; k++) {
            char key[32];
            sl_decision d;
            snprintf(key, sizeof(key), "lib:%d", k);
            masters[master_of(0, slot_of(key))] = 1;
            assert_int_equal(sl_check(s, lim, key, strlen(key), 1, now, &d), 0);
            if (d.allowed != (round < (int)L))
                fail_msg("key %s round %d: allowed %d", key, round, d.allowed);
        }
        for (int n = 0; n < NODES; n++)
            if (masters[n] && !has_library(n))
                fail_msg("round %d: master %d has no library", round, n);
    }
    sl_store_free(s);
    sl_limit_free(lim);
}

/* Decides items[0..1] (limits 1 and 5, cost 1 each) twice: the first
 * call is allowed, the second refused by the limit of 1; each[] and
 * *overall are the second's. */
static void twice(sl_store *s, const sl_check_item *items, sl_decision *each,
                  sl_decision *overall)
{
    const int64_t costs[2] = {1, 1};
    sl_nanos now = sl_clock_realtime();
    assert_int_equal(sl_check_costs(s, items, costs, 2, now, 0, each, overall),
                     0);
    assert_true(overall->allowed);
    assert_int_equal(sl_check_costs(s, items, costs, 2, now, 0, each, overall),
                     0);
    assert_false(overall->allowed);
    assert_false(each[0].allowed);
}

/* Two keys in different slots, decided together. */
static void test_multi_items(void **state)
{
    sl_store *s = cluster_store(2000);
    sl_limit *one = make_limit(SL_FIXED_WINDOW, 1);
    sl_limit *five = make_limit(SL_FIXED_WINDOW, 5);
    sl_decision each[2], overall;
    (void)state;

    /* One client key: one slot, all or nothing as on one Redis. */
    sl_check_item same[2] = {{one, "multi:u", 7}, {five, "multi:u", 7}};
    twice(s, same, each, &overall);
    assert_int_equal(each[1].remaining, 4); /* the refusal consumed nothing */

    /* Two client keys in two slots: each slot decided on its own; the
     * request is refused, and the slot that allowed keeps its count. */
    assert_int_not_equal(slot_of("multi:a"), slot_of("multi:b"));
    sl_check_item split[2] = {{one, "multi:a", 7}, {five, "multi:b", 7}};
    twice(s, split, each, &overall);
    assert_true(each[1].allowed);
    assert_int_equal(each[1].remaining, 3);
    assert_int_equal(overall.remaining, 0);
    sl_limit_free(one);
    sl_limit_free(five);
    sl_store_free(s);
}

/* tag_delimiter: keys with one tag share a slot, so a call over them is
 * one atomic part again. */
static void test_tag_delimiter(void **state)
{
    sl_redis_options o = {.size = sizeof(sl_redis_options),
                          .url = seed_url,
                          .tag_delimiter = '/'};
    sl_store *s = NULL;
    char err[256];
    sl_limit *one = make_limit(SL_FIXED_WINDOW, 1);
    sl_limit *five = make_limit(SL_FIXED_WINDOW, 5);
    sl_decision each[2], overall;
    (void)state;
    assert_int_equal(sl_redis_store_new(&o, &s, err, sizeof(err)), 0);
    /* Without the option these two keys are in two slots. */
    assert_int_not_equal(slot_of("tenant-a/x"), slot_of("tenant-a/y"));
    sl_check_item items[2] = {{one, "tenant-a/x", 10},
                              {five, "tenant-a/y", 10}};
    twice(s, items, each, &overall);
    assert_int_equal(each[1].remaining, 4); /* atomic: nothing consumed */
    /* Both keys are in the tag's slot, under "{tenant-a}/...". */
    int slot = slot_of("tenant-a");
    redisReply *r =
        admin_cmd(master_of(0, slot), "CLUSTER COUNTKEYSINSLOT %d", slot);
    assert_non_null(r);
    assert_int_equal(r->integer, 2);
    freeReplyObject(r);
    sl_store_free(s);

    o.tag_delimiter = '{';
    assert_int_equal(sl_redis_store_new(&o, &s, err, sizeof(err)), SL_EINVAL);
    sl_limit_free(one);
    sl_limit_free(five);
}

/* redis:// naming a Cluster node: refused when it connects (SL_EINVAL,
 * "use redis-cluster://"), not a store whose every call is MOVED. */
static void test_plain_url_at_a_node(void **state)
{
    char url[64], err[256];
    sl_store *s = NULL;
    (void)state;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", nodes[0].port);
    sl_redis_options o = {
        .size = sizeof(sl_redis_options), .url = url, .timeout_ms = 2000};
    assert_int_equal(sl_redis_store_new(&o, &s, err, sizeof(err)), SL_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "use redis-cluster://"));
}

/* Moves slot from its master to another, the way redis-cli --cluster
 * reshard does, with a check of key between each step. */
static void test_migration(void **state)
{
    const char *key = "migrating-user";
    const int64_t L = 10;
    sl_store *s = cluster_store(2000);
    sl_limit *lim = make_limit(SL_SLIDING_LOG, L);
    sl_nanos now = sl_clock_realtime();
    int slot = slot_of(key), allowed = 0;
    int from = master_of(0, slot), to = -1;
    char name[128];
    (void)state;
    assert_true(from >= 0);
    for (int n = 0; n < NODES; n++) /* another master */
        if (n != from && master_of(0, slot) >= 0 && to < 0) {
            for (int sl = 0; sl < SL__REDIS_SLOTS; sl += 64)
                if (master_of(0, sl) == n) {
                    to = n;
                    break;
                }
        }
    assert_true(to >= 0);
    char *from_id = node_id(from), *to_id = node_id(to);
    assert_non_null(from_id);
    assert_non_null(to_id);

#define CHECK()                                                                \
    do {                                                                       \
        sl_decision d;                                                         \
        char err[256];                                                         \
        int rc = sl_check(s, lim, key, strlen(key), 1, now, &d);               \
        sl_store_last_error(s, err, sizeof(err));                              \
        if (rc != 0)                                                           \
            fail_msg("check failed: %d %s", rc, err);                          \
        allowed += d.allowed;                                                  \
    } while (0)

    CHECK();
    CHECK();
    redisReply *r;
    r = admin_cmd(to, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = admin_cmd(from, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    CHECK(); /* the key is still on `from`: served there */
    /* Move the key: `from` now answers ASK for it. */
    r = admin_cmd(from, "CLUSTER GETKEYSINSLOT %d 100", slot);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 1);
    snprintf(name, sizeof(name), "%s", r->element[0]->str);
    freeReplyObject(r);
    r = admin_cmd(from, "MIGRATE 127.0.0.1 %d %s 0 5000", nodes[to].port, name);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    CHECK(); /* ASK, then ASKING on `to` */
    CHECK();
    /* The slot is `to`'s: `from` answers MOVED.  The target first, as
     * redis-cli --cluster reshard does. */
    for (int i = -1; i < NODES; i++) {
        r = admin_cmd(i < 0 ? to : i, "CLUSTER SETSLOT %d NODE %s", slot,
                      to_id);
        if (r)
            freeReplyObject(r);
    }
    for (int i = 0; i < (int)L; i++)
        CHECK();
#undef CHECK
    assert_int_equal(allowed, L); /* 15 checks, exactly L allowed */
    assert_int_equal(master_of(from, slot), to);
    /* The checks after the MIGRATE really went through ASK. */
    r = admin_cmd(to, "INFO commandstats");
    assert_non_null(r);
    assert_non_null(strstr(r->str, "cmdstat_asking:calls="));
    freeReplyObject(r);
    free(from_id);
    free(to_id);
    sl_limit_free(lim);
    sl_store_free(s);
}

/* Kills the master of a key's slot: checks fail (bounded by the timeout),
 * then its replica is promoted and decisions come back. */
static void test_failover(void **state)
{
    const char *key = "failover-user";
    sl_store *s = cluster_store(300);
    sl_limit *lim = make_limit(SL_GCRA, 100);
    sl_nanos now = sl_clock_realtime();
    sl_decision d;
    int slot = slot_of(key), victim = master_of(0, slot), back = 0;
    (void)state;
    assert_int_equal(sl_check(s, lim, key, strlen(key), 1, now, &d), 0);
    tu_redis_stop(&nodes[victim], SIGKILL);
    int ask = victim == 0 ? 1 : 0;           /* a live node to ask */
    for (int i = 0; i < 300 && !back; i++) { /* 15 s */
        sl_nanos t0 = sl_clock_monotonic();
        int rc = sl_check(s, lim, key, strlen(key), 1, now, &d);
        sl_nanos took = sl_clock_monotonic() - t0;
        /* A refused connection fails at once; a map read tries a few
         * nodes, each bounded by the timeout. */
        if (took > 3 * SL_NS_PER_SEC)
            fail_msg("a check took %lld ms", (long long)(took / 1000000));
        if (rc == 0) {
            back = 1;
        } else {
            char err[256];
            sl_store_last_error(s, err, sizeof(err));
            if (getenv("SL_TEST_VERBOSE"))
                fprintf(stderr, "failover: %s\n", err);
            assert_int_equal(rc, SL_ESTORE);
        }
        tu_sleep_ms(50);
    }
    assert_true(back);
    assert_true(d.allowed);
    assert_int_not_equal(master_of(ask, slot), victim);
    sl_limit_free(lim);
    sl_store_free(s);
}

/* ---- a cluster mid-upgrade ---- */

/* Three masters, no replicas; the second without FUNCTION and FCALL, as
 * Redis 6 in a cluster being upgraded to 7. */
static tu_redis mixed[MASTERS];

static int mixed_setup(void **state)
{
    (void)state;
    mixed[1].no_functions = 1;
    if (start_cluster(mixed, MASTERS, 0) != 0)
        return -1;
    for (int i = 0; i < 400; i++) { /* 20 s */
        int ok = 0;
        for (int n = 0; n < MASTERS; n++) {
            redisContext *c = tu_redis_admin(&mixed[n]);
            redisReply *r = c ? redisCommand(c, "CLUSTER INFO") : NULL;
            ok += r != NULL && r->type == REDIS_REPLY_STRING &&
                  strstr(r->str, "cluster_state:ok") != NULL;
            if (r)
                freeReplyObject(r);
            if (c)
                redisFree(c);
        }
        if (ok == MASTERS)
            return 0;
        tu_sleep_ms(50);
    }
    return -1;
}

static int mixed_teardown(void **state)
{
    (void)state;
    stop_cluster(mixed, MASTERS);
    return 0;
}

/* The seed took the library, so calls go as FCALL; the Redis-6 master
 * answers "unknown command", and the call goes again as EVAL, the store
 * calling by EVALSHA from then on: every decision made, exact. */
static void test_a_master_without_functions(void **state)
{
    const int64_t L = 3;
    sl_redis_options o = {
        .size = sizeof(sl_redis_options), .url = NULL, .timeout_ms = 2000};
    char url[64], err[256];
    sl_store *s = NULL;
    sl_limit *lim = make_limit(SL_GCRA, L);
    sl_nanos now = sl_clock_realtime();
    (void)state;
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d", mixed[0].port);
    o.url = url;
    assert_int_equal(sl_redis_store_new(&o, &s, err, sizeof(err)), 0);
    for (int round = 0; round < 2 * (int)L; round++)
        for (int k = 0; k < KEYS; k++) {
            char key[32];
            sl_decision d;
            snprintf(key, sizeof(key), "up:%d", k);
            int rc = sl_check(s, lim, key, strlen(key), 1, now, &d);
            if (rc != 0 || d.allowed != (round < (int)L))
                fail_msg("key %s round %d: rc %d allowed %d", key, round, rc,
                         rc == 0 ? d.allowed : -1);
        }
    redisContext *c = tu_redis_admin(&mixed[1]);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "INFO commandstats");
    assert_true(r != NULL && r->type == REDIS_REPLY_STRING);
    if (strstr(r->str, "cmdstat_evalsha:") == NULL ||
        strstr(r->str, "cmdstat_fcall") != NULL)
        fail_msg("the Redis-6 master was not called by EVALSHA: %s", r->str);
    freeReplyObject(r);
    redisFree(c);
    sl_store_free(s);
    sl_limit_free(lim);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_bad_urls),
    };
    const struct CMUnitTest live[] = {
        cmocka_unit_test(test_slots_match_the_servers),
        cmocka_unit_test(test_exact_across_slots),
        cmocka_unit_test(test_library_on_every_master),
        cmocka_unit_test(test_multi_items),
        cmocka_unit_test(test_tag_delimiter),
        cmocka_unit_test(test_plain_url_at_a_node),
        cmocka_unit_test(test_migration),
        cmocka_unit_test(test_failover),
    };
    const struct CMUnitTest upgrade[] = {
        cmocka_unit_test(test_a_master_without_functions),
    };
    int failed = cmocka_run_group_tests(pure, NULL, NULL);
    failed += cmocka_run_group_tests(live, group_setup, group_teardown);
    return failed +
           cmocka_run_group_tests(upgrade, mixed_setup, mixed_teardown);
}
