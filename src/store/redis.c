/*
 * redis.c - the Redis store: every key's state in a Redis 7 server, each
 * check decided there, atomically, by one call of the Lua script made of
 * the files in src/redis/lua/ (docs/stores.md).
 *
 * This file is the store's blocking driver around the protocol core
 * (src/redis/: calls, replies): one FCALL (EVALSHA on a server without
 * Redis Functions) per check, behind a mutex,
 * sent over the store's one connection (redis_conn.c) or, on a cluster,
 * routed by slot (redis_cluster_sync.c); its options and URL are
 * redis_config.c's.  tests/test_redis.c runs this store and the memory
 * store on the same traces.
 *
 * Failure policy: any failure to reach Redis or to get a well-formed
 * reply is SL_ESTORE, with the reason kept for sl_store_last_error().
 * The connection is then dropped and made again on the next call, so a
 * restarted Redis is picked up without recreating the store; a library or
 * script flushed from the server (restart, FUNCTION FLUSH, SCRIPT FLUSH)
 * is loaded again and the call sent again with EVAL, which also caches
 * the script.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "store/redis_store.h"

enum { ERR_LEN = 256 };

/* One of conn and cluster, made with the store: neither connects before
 * it is first needed (or sl_redis_store_new's connect). */
typedef struct redis_store {
    sl_store base;
    pthread_mutex_t lock; /* serialises calls on the connections */
    sl__redis_config cfg;
    sl__redis_keyspace ks;      /* cfg's, for every call */
    sl__redis_conn *conn;       /* a plain store's one connection */
    sl__redis_cluster *cluster; /* a redis-cluster:// store's routing */
    char errstr[ERR_LEN];       /* the last failure, for sl_store_last_error */
} redis_store;

/* ---- checks ---- */

/* Sends a command where a part belongs: the one connection, or the node
 * of its slot.  NULL (errstr set) when the exchange failed. */
static redisReply *send_to(redis_store *rs, int slot, int argc,
                           const char *const *argv, const size_t *lens)
{
    if (rs->cluster != NULL)
        return sl__redis_cluster_command(rs->cluster, slot, argc, argv, lens,
                                         rs->errstr, sizeof(rs->errstr));
    return sl__redis_conn_command(rs->conn, 0, argc, argv, lens, rs->errstr,
                                  sizeof(rs->errstr));
}

static redisReply *send_part(redis_store *rs, const sl__redis_call *c,
                             size_t part)
{
    const char *const *argv;
    const size_t *lens;
    int argc = sl__redis_call_part_argv(c, part, &argv, &lens);
    return send_to(rs, sl__redis_call_part_slot(c, part), argc, argv, lens);
}

/* The server of a part answered an FCALL "Function not found" (restarted,
 * flushed): the library is loaded there again, for the calls after this
 * one.  Refused, the store calls EVALSHA from now on. */
static void reload_library(redis_store *rs, const sl__redis_call *c,
                           size_t part)
{
    const char *argv[3];
    size_t lens[3];
    int argc = sl__redis_function_load_args(argv, lens);
    redisReply *r =
        send_to(rs, sl__redis_call_part_slot(c, part), argc, argv, lens);

    if (!sl__redis_function_loaded(r)) {
        if (rs->conn != NULL)
            sl__redis_conn_no_functions(rs->conn);
        else
            sl__redis_cluster_no_functions(rs->cluster);
    }
    if (r != NULL)
        freeReplyObject(r);
}

/* One part, one round trip: FCALL (or EVALSHA), or, when the server has
 * lost the library (or the script), the library loaded again and the
 * call sent as EVAL. */
static int run_part(redis_store *rs, sl__redis_call *c, size_t part)
{
    char msg[ERR_LEN];
    const char *ref;
    redisReply *r;
    int err;

    if (rs->conn != NULL && (err = sl__redis_conn_connect(rs->conn, rs->errstr,
                                                          sizeof(rs->errstr))))
        return err;
    /* The ref is first known after a connect, so it is named only now;
     * before any node of a cluster answered there is none: EVAL. */
    ref = rs->conn != NULL ? sl__redis_conn_script_ref(rs->conn)
                           : sl__redis_cluster_script_ref(rs->cluster);
    sl__redis_call_part_use_sha(c, part, ref[0] ? ref : NULL);
    r = send_part(rs, c, part);
    if (sl__redis_reply_kind(r, NULL) == SL__REDIS_REPLY_READONLY &&
        rs->conn != NULL) {
        /* A failover made the master a replica, which ran nothing: the
         * call goes once more, to the master the Sentinels name now. */
        freeReplyObject(r);
        sl__redis_conn_drop(rs->conn);
        if ((err = sl__redis_conn_connect(rs->conn, rs->errstr,
                                          sizeof(rs->errstr))))
            return err;
        r = send_part(rs, c, part);
    }
    if (sl__redis_reply_kind(r, NULL) == SL__REDIS_REPLY_NOSCRIPT) {
        freeReplyObject(r);
        if (strcmp(ref, sl__redis_function) == 0)
            reload_library(rs, c, part);
        sl__redis_call_part_use_eval(c, part);
        r = send_part(rs, c, part);
    }
    if (r == NULL)
        return SL_ESTORE;
    err = sl__redis_call_read_part(c, part, r, msg, sizeof(msg));
    freeReplyObject(r);
    if (err == 1) { /* NOSCRIPT to an EVAL: a server we cannot use */
        err = SL_ESTORE;
        sl__set_err(msg, sizeof(msg), "redis: NOSCRIPT after EVAL");
    }
    if (err != 0)
        memcpy(rs->errstr, msg, sizeof(rs->errstr));
    return err;
}

/* Parts go in ascending slot order, each decided by itself; any failure
 * ends the call (the parts before it stand: docs/stores.md). */
static int redis_decide(redis_store *rs, const sl_check_item *items,
                        const int64_t *costs, size_t n, sl_nanos now,
                        int record, sl_decision *each)
{
    char msg[ERR_LEN];
    sl__redis_call *c;
    int err;

    /* Checked before any I/O: a limit the script cannot decide is
     * SL_ERANGE whether or not Redis answers. */
    err =
        sl__redis_call_new(&rs->ks, items, costs, n, now,
                           record ? SL_RECORD : 0, NULL, &c, msg, sizeof(msg));
    if (err != 0) {
        memcpy(rs->errstr, msg, sizeof(rs->errstr));
        return err;
    }
    for (size_t p = 0; err == 0 && p < sl__redis_call_parts(c); p++)
        err = run_part(rs, c, p);
    if (err == 0)
        sl__redis_call_result(c, each, NULL);
    sl__redis_call_free(c);
    return err;
}

static int redis_check_multi(sl_store *base, const sl_check_item *items,
                             const int64_t *costs, size_t n, sl_nanos now,
                             int record, sl_decision *each)
{
    redis_store *rs = (redis_store *)base;
    int err;

    pthread_mutex_lock(&rs->lock);
    err = redis_decide(rs, items, costs, n, now, record, each);
    pthread_mutex_unlock(&rs->lock);
    return err;
}

/* n independent checks, in order, as n calls of sl_check() would be. */
static int redis_check_batch(sl_store *base, const sl_limit *limit,
                             const sl_key *keys, size_t n, int64_t cost,
                             sl_nanos now, sl_decision *out)
{
    for (size_t i = 0; i < n; i++) {
        sl_check_item item = {limit, keys[i].data, keys[i].len};
        int err = redis_check_multi(base, &item, &cost, 1, now, 0, &out[i]);
        if (err)
            return err;
    }
    return 0;
}

/* Redis expires keys itself (each key's TTL is its time to initial). */
static size_t redis_sweep(sl_store *base, sl_nanos now, size_t max_slots)
{
    (void)base;
    (void)now;
    (void)max_slots;
    return 0;
}

/* Counting keys would cost a scan of the server: nothing is cheap. */
static void redis_stats(sl_store *base, sl_store_stats *out)
{
    (void)base;
    memset(out, 0, sizeof(*out));
}

static void redis_last_error(sl_store *base, char *buf, size_t len)
{
    redis_store *rs = (redis_store *)base;
    pthread_mutex_lock(&rs->lock);
    snprintf(buf, len, "%s", rs->errstr);
    pthread_mutex_unlock(&rs->lock);
}

static void redis_destroy(sl_store *base)
{
    redis_store *rs = (redis_store *)base;
    sl__redis_conn_free(rs->conn);
    sl__redis_cluster_free(rs->cluster);
    sl__redis_config_release(&rs->cfg);
    pthread_mutex_destroy(&rs->lock);
    free(rs);
}

static const sl__store_type redis_type = {
    .check_multi = redis_check_multi,
    .check_batch = redis_check_batch,
    .sweep = redis_sweep,
    .stats = redis_stats,
    .destroy = redis_destroy,
    .last_error = redis_last_error,
};

/* The store's connection or cluster routing, without I/O: 0 or SL_ENOMEM
 * (errstr set). */
static int make_connections(redis_store *rs)
{
    sl__redis_endpoint ep;
    int err;

    sl__redis_config_endpoint(&rs->cfg, &ep);
    err =
        rs->cfg.n_seeds > 0
            ? sl__redis_cluster_new(&ep, &rs->cluster)
            : sl__redis_conn_new(&ep, SL__REDIS_WITH_CLUSTER_CHECK, &rs->conn);
    if (err != 0)
        sl__set_err(rs->errstr, sizeof(rs->errstr), "out of memory");
    else if (ep.n_sentinels > 0) /* the master, asked before each connect */
        sl__redis_conn_locate_with(rs->conn, sl__redis_sentinel_resolve);
    return err;
}

/* A store made connected: to its one server, or, on a cluster, the slot
 * map is read at once.  0, or an error with errstr set. */
static int connect_now(redis_store *rs)
{
    if (rs->cluster != NULL)
        return sl__redis_cluster_refresh(rs->cluster, rs->errstr,
                                         sizeof(rs->errstr));
    return sl__redis_conn_connect(rs->conn, rs->errstr, sizeof(rs->errstr));
}

int sl_redis_store_new(const sl_redis_options *opts, sl_store **out,
                       char *errbuf, size_t errlen)
{
    sl_redis_options o;
    redis_store *rs;
    int err;

    if (opts == NULL || out == NULL) {
        sl__set_err(errbuf, errlen, "options and out are required");
        return SL_EINVAL;
    }
    /* The end of sl_redis_options' first layout: lazy_connect. */
    if (sl__options_copy(&o, sizeof(o),
                         offsetof(sl_redis_options, lazy_connect) +
                             sizeof(o.lazy_connect),
                         opts, "sl_redis_options", errbuf, errlen) != 0)
        return SL_EINVAL;
    if ((rs = calloc(1, sizeof(*rs))) == NULL) {
        sl__set_err(errbuf, errlen, "out of memory");
        return SL_ENOMEM;
    }
    rs->base.type = &redis_type;
    pthread_mutex_init(&rs->lock, NULL);
    /* The options' own errors are SL_EINVAL with their message in errbuf;
     * any other failure's message is in errstr. */
    err = sl__redis_config_init(&rs->cfg, &o, errbuf, errlen);
    if (err == SL_ENOMEM)
        sl__set_err(rs->errstr, sizeof(rs->errstr), "out of memory");
    if (err == 0) {
        rs->base.max_key_len = rs->cfg.max_key_len;
        sl__redis_config_keyspace(&rs->cfg, &rs->ks);
        err = make_connections(rs);
    }
    if (err == 0 && !o.lazy_connect &&
        (err = connect_now(rs)) == SL_EINVAL) /* a Cluster node */
        sl__set_err(errbuf, errlen, "%s", rs->errstr);
    if (err != 0 && err != SL_EINVAL)
        sl__set_err(errbuf, errlen, "%s", rs->errstr);
    if (err != 0) {
        redis_destroy(&rs->base);
        return err;
    }
    *out = &rs->base;
    return 0;
}

int sl__redis_store_endpoint(sl_store *store, sl__redis_endpoint *out)
{
    if (store == NULL || store->type != &redis_type || out == NULL)
        return SL_EINVAL;
    sl__redis_config_endpoint(&((const redis_store *)store)->cfg, out);
    return 0;
}

int sl__redis_store_keyspace(sl_store *store, sl__redis_keyspace *out)
{
    if (store == NULL || store->type != &redis_type || out == NULL)
        return SL_EINVAL;
    *out = ((const redis_store *)store)->ks;
    return 0;
}
