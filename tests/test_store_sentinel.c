/*
 * test_store_sentinel.c - the library's redis-sentinel:// store against
 * real servers: a master and a replica with a password, and one
 * redis-sentinel (quorum 1) with a password of its own.  Checks exact on
 * the master the Sentinel names; the master killed, Sentinel promotes the
 * replica and the same store goes on exactly where the replica was; a
 * manual failover back (SENTINEL FAILOVER), followed the same way; and a
 * master name the Sentinel does not know, or a wrong Sentinel password,
 * refused with the reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include "redisutil.h"

#define PW "master-secret"
#define SPW "sentinel-secret"

static tu_redis master, replica;
static const char *master_args[] = {"--requirepass", PW, "--masterauth", PW,
                                    "--repl-diskless-sync-delay", "0", NULL};
static const char *replica_args[] = {"--requirepass", PW, "--masterauth", PW,
                                     "--repl-diskless-sync-delay", "0",
                                     "--replicaof", "127.0.0.1", NULL, NULL};
static char replica_of[16];
static pid_t sentinel_pid;
static int sentinel_port;
static char sentinel_dir[64], sentinel_conf[128];
static char url[160];

/* A connection to r that has authenticated. */
static redisContext *admin(const tu_redis *r)
{
    redisContext *c = tu_redis_admin(r);
    if (c == NULL)
        return NULL;
    redisReply *rep = redisCommand(c, "AUTH %s", PW);
    if (rep != NULL)
        freeReplyObject(rep);
    return c;
}

/* A reply's text ("" for none), for polling. */
static int reply_has(redisContext *c, const char *cmd, const char *want)
{
    redisReply *r = c ? redisCommand(c, cmd) : NULL;
    int has = r != NULL && r->str != NULL && strstr(r->str, want) != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return has;
}

static redisContext *sentinel_admin(void)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", sentinel_port, tv);
    if (c == NULL || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisReply *r = redisCommand(c, "AUTH %s", SPW);
    if (r != NULL)
        freeReplyObject(r);
    return c;
}

/* The port Sentinel says the master is on, or 0. */
static int master_port(void)
{
    redisContext *c = sentinel_admin();
    redisReply *r =
        c ? redisCommand(c, "SENTINEL get-master-addr-by-name mymaster") : NULL;
    int port = 0;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        port = atoi(r->element[1]->str);
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    return port;
}

static int group_setup(void **state)
{
    FILE *f;
    (void)state;
    master.extra = master_args;
    if (tu_redis_start(&master) != 0)
        return -1;
    snprintf(replica_of, sizeof(replica_of), "%d", master.port);
    replica_args[8] = replica_of;
    replica.extra = replica_args;
    if (tu_redis_start(&replica) != 0)
        return -1;
    sentinel_port = tu_free_port();
    snprintf(sentinel_dir, sizeof(sentinel_dir), "/tmp/sl_sentinel_XXXXXX");
    if (mkdtemp(sentinel_dir) == NULL)
        return -1;
    snprintf(sentinel_conf, sizeof(sentinel_conf), "%s/sentinel.conf",
             sentinel_dir);
    if ((f = fopen(sentinel_conf, "w")) == NULL)
        return -1;
    fprintf(f,
            "port %d\nbind 127.0.0.1\ndir %s\nrequirepass %s\n"
            "sentinel monitor mymaster 127.0.0.1 %d 1\n"
            "sentinel auth-pass mymaster %s\n"
            "sentinel down-after-milliseconds mymaster 1000\n"
            "sentinel failover-timeout mymaster 4000\n",
            sentinel_port, sentinel_dir, SPW, master.port, PW);
    fclose(f);
    if ((sentinel_pid = fork()) == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("redis-sentinel", "redis-sentinel", sentinel_conf, (char *)NULL);
        _exit(127);
    }
    /* Up, and watching the replica too (Sentinel finds it by INFO). */
    for (int i = 0; i < 300; i++) {
        redisContext *c = sentinel_admin();
        int ok = master_port() == master.port;
        redisReply *r = c ? redisCommand(c, "SENTINEL replicas mymaster") : NULL;
        ok = ok && r != NULL && r->type == REDIS_REPLY_ARRAY &&
             r->elements == 1;
        if (r != NULL)
            freeReplyObject(r);
        if (c != NULL)
            redisFree(c);
        if (ok) {
            snprintf(url, sizeof(url),
                     "redis-sentinel://:" PW "@127.0.0.1:%d/mymaster",
                     sentinel_port);
            return 0;
        }
        tu_sleep_ms(100);
    }
    fprintf(stderr, "redis-sentinel did not come up (scripts/deps.sh "
                    "installs it)\n");
    return -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (sentinel_pid > 0) {
        kill(sentinel_pid, SIGKILL);
        waitpid(sentinel_pid, NULL, 0);
    }
    tu_redis_cleanup(&replica);
    tu_redis_cleanup(&master);
    if (sentinel_dir[0] != '\0') {
        unlink(sentinel_conf); /* Sentinel rewrites it in place */
        rmdir(sentinel_dir);
    }
    return 0;
}

static sl_store *sentinel_store(const char *u, const char *spw, int *rc,
                                char *err, size_t errlen)
{
    sl_redis_options o = {.size = sizeof(o),
                          .url = u,
                          .timeout_ms = 500,
                          .extra_ttl_ms = 600000,
                          .sentinel_password = spw};
    sl_store *st = NULL;
    *rc = sl_redis_store_new(&o, &st, err, errlen);
    return st;
}

static int check(sl_store *st, const sl_limit *lim, const char *k,
                 sl_decision *d)
{
    return sl_check(st, lim, k, strlen(k), 1, INT64_C(1700000000) * SEC, d);
}

/* Checks until one is decided (a failover in progress fails some): its
 * decision's allowed, or -1 after 30 s. */
static int check_through(sl_store *st, const sl_limit *lim, const char *k)
{
    sl_decision d;
    for (int i = 0; i < 150; i++) {
        if (check(st, lim, k, &d) == 0)
            return d.allowed;
        tu_sleep_ms(200);
    }
    return -1;
}

/* The replica has all the master wrote. */
static void expect_synced(const tu_redis *r)
{
    redisContext *c = admin(r);
    assert_non_null(c);
    expect_eq(tu_redis_int(c, "WAIT 1 3000"), 1);
    redisFree(c);
}

static void test_failover_followed_exactly(void **state)
{
    char err[256];
    int rc;
    sl_store *st = sentinel_store(url, SPW, &rc, err, sizeof(err));
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 10, HOUR, 10);
    sl_decision d;
    (void)state;
    if (rc != 0)
        fail_msg("sl_redis_store_new: %s", err);
    for (int i = 0; i < 4; i++) {
        expect_eq(check(st, lim, "f", &d), 0);
        expect_eq(d.allowed, 1);
    }
    expect_synced(&master);

    /* The master killed: Sentinel promotes the replica. */
    tu_redis_stop(&master, SIGKILL);
    expect_eq(check_through(st, lim, "f"), 1); /* the 5th */
    expect_eq(master_port(), replica.port);
    for (int i = 0; i < 5; i++) {
        expect_eq(check(st, lim, "f", &d), 0);
        expect_eq(d.allowed, 1);
    }
    expect_eq(check(st, lim, "f", &d), 0);
    expect_eq(d.allowed, 0); /* 10 in all, across the failover */

    /* The old master back as a replica of the new one, as an operator
     * restarts a failed node (left to itself, Sentinel converts it only
     * after two of its 10 s INFO rounds, which a busy machine stretches
     * past any fair wait), then a manual failover to it: the store's
     * connection to the demoted server is dropped, by Sentinel or at its
     * READONLY, and the next check finds the new one. */
    static const char *back_args[] = {"--requirepass", PW, "--masterauth", PW,
                                      "--repl-diskless-sync-delay", "0",
                                      "--replicaof", "127.0.0.1", NULL, NULL};
    char back_of[16];
    snprintf(back_of, sizeof(back_of), "%d", replica.port);
    back_args[8] = back_of;
    master.extra = back_args;
    assert_int_equal(tu_redis_start(&master), 0);
    int linked = 0;
    for (int i = 0; i < 600 && !linked; i++) {
        /* A new connection each time: Sentinel, turning the server into a
         * replica, kills its clients. */
        redisContext *c = admin(&master);
        linked = reply_has(c, "INFO replication", "master_link_status:up");
        if (c != NULL)
            redisFree(c);
        if (!linked)
            tu_sleep_ms(100);
    }
    expect_eq(linked, 1);
    expect_synced(&replica);
    int ok = 0;
    for (int i = 0; i < 300 && !ok; i++) {
        redisContext *s = sentinel_admin();
        redisReply *r = s ? redisCommand(s, "SENTINEL FAILOVER mymaster") : NULL;
        ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL)
            freeReplyObject(r);
        if (s != NULL)
            redisFree(s);
        if (!ok)
            tu_sleep_ms(100);
    }
    expect_eq(ok, 1);
    for (int i = 0; i < 300 && master_port() != master.port; i++)
        tu_sleep_ms(100);
    expect_eq(master_port(), master.port);
    /* Until Sentinel has made the old master a replica, it still takes
     * writes (Redis's window, docs/stores.md): wait for that first. */
    int demoted = 0;
    for (int i = 0; i < 300 && !demoted; i++) {
        redisContext *r = admin(&replica);
        demoted = reply_has(r, "INFO replication", "master_link_status:up");
        if (r != NULL)
            redisFree(r);
        if (!demoted)
            tu_sleep_ms(100);
    }
    expect_eq(demoted, 1);
    expect_eq(check_through(st, lim, "f"), 0); /* still spent */
    expect_eq(check_through(st, lim, "g"), 1);
    redisContext *c = admin(&master);
    redisReply *keys = redisCommand(c, "KEYS *{g}");
    assert_non_null(keys);
    expect_eq(keys->elements, 1); /* decided on the new master */
    freeReplyObject(keys);
    redisFree(c);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_refusals_say_why(void **state)
{
    char err[256], u[200];
    int rc;
    (void)state;
    snprintf(u, sizeof(u), "redis-sentinel://:" PW "@127.0.0.1:%d/nosuch",
             sentinel_port);
    sl_store_free(sentinel_store(u, SPW, &rc, err, sizeof(err)));
    expect_eq(rc, SL_ESTORE);
    if (strstr(err, "does not know the master 'nosuch'") == NULL)
        fail_msg("'%s'", err);
    sl_store_free(sentinel_store(url, "wrong", &rc, err, sizeof(err)));
    expect_eq(rc, SL_ESTORE);
    if (strstr(err, "WRONGPASS") == NULL)
        fail_msg("'%s'", err);
    snprintf(u, sizeof(u), "redis-sentinel://127.0.0.1:%d/mymaster",
             tu_free_port());
    sl_store_free(sentinel_store(u, NULL, &rc, err, sizeof(err)));
    expect_eq(rc, SL_ESTORE);
    if (strstr(err, "no Sentinel named the master 'mymaster'") == NULL)
        fail_msg("'%s'", err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals_say_why),
        cmocka_unit_test(test_failover_followed_exactly),
    };
    signal(SIGPIPE, SIG_DFL);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
