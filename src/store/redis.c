/*
 * redis.c - the Redis store: every key's state in a Redis 7 server, each
 * check decided there, atomically, by one call of the Lua script made of
 * the files in src/store/redis/ (docs/stores.md).
 *
 * This file is the blocking driver around the protocol core (src/redis/:
 * calls, replies, the handshake): options and URL, the connection
 * (hiredis, synchronous, one per store behind a mutex), and one EVALSHA
 * per check, sent to the one server or, on a cluster, routed by
 * redis_cluster_sync.c.  tests/test_redis.c runs this store and the
 * memory store on the same traces.
 *
 * Failure policy: any failure to reach Redis or to get a well-formed
 * reply is SL_ESTORE, with the reason kept for sl_store_last_error().
 * The connection is then dropped and made again on the next call, so a
 * restarted Redis is picked up without recreating the store; a script
 * flushed from the server (restart, SCRIPT FLUSH) is sent again with EVAL,
 * which also caches it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "internal.h"
#include "redis/redis_proto.h"

enum { ERR_LEN = 256 };

typedef struct redis_store {
    sl_store base;
    pthread_mutex_t lock; /* serialises calls on the one connection */
    redisContext *ctx;    /* NULL: (re)connect on the next call */
    char sha[SL__REDIS_SHA_LEN + 1]; /* the script's SHA1; "" before */
    /* Options, owned copies. */
    char *host, *unix_path, *user, *password, *prefix;
    int port, db, timeout_ms, use_server_time;
    char tag_delimiter; /* 0: the whole key is the hash tag */
    int64_t extra_ttl_ms;
    /* redis-cluster://: the seed nodes, and the routing
     * (redis_cluster_sync.c) made on the first check; n_seeds 0 for a
     * plain store. */
    char **seed_hosts;
    int *seed_ports;
    size_t n_seeds;
    sl__redis_cluster *cluster;
    char errstr[ERR_LEN]; /* the last failure, for sl_store_last_error */
} redis_store;

/* ---- options ---- */

static char *dup_str(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

/* "unix:/path[?db=N]" (also "unix:///path"). */
static int parse_unix_url(redis_store *rs, const char *p, char *err,
                          size_t errlen, const char *url)
{
    const char *q = strchr(p, '?');
    size_t n = q ? (size_t)(q - p) : strlen(p);

    if (strncmp(p, "//", 2) == 0) {
        p += 2;
        n -= 2;
    }
    if (n == 0 || p[0] != '/') {
        sl__set_err(err, errlen,
                    "invalid redis url: socket path must be absolute: '%s'",
                    url);
        return SL_EINVAL;
    }
    if (q != NULL &&
        (strncmp(q, "?db=", 4) != 0 ||
         sl__parse_int(q + 4, strlen(q + 4), 0, 1 << 20, &rs->db))) {
        sl__set_err(err, errlen,
                    "invalid redis url: bad query (only ?db=N): '%s'", url);
        return SL_EINVAL;
    }
    rs->unix_path = strndup(p, n);
    return rs->unix_path ? 0 : SL_ENOMEM;
}

/* "[[user]:password@]": sets user and password; returns what follows. */
static const char *parse_userinfo(redis_store *rs, const char *p,
                                  const char *end, int *err)
{
    const char *at = memchr(p, '@', (size_t)(end - p));
    *err = 0;
    if (at == NULL)
        return p;
    const char *c = memchr(p, ':', (size_t)(at - p));
    if (c != NULL) {
        if (c > p && (rs->user = strndup(p, (size_t)(c - p))) == NULL)
            *err = SL_ENOMEM;
        else if ((rs->password = strndup(c + 1, (size_t)(at - c - 1))) == NULL)
            *err = SL_ENOMEM;
    } else if (at > p && (rs->user = strndup(p, (size_t)(at - p))) == NULL) {
        *err = SL_ENOMEM;
    }
    return at + 1;
}

/* "host[:port]" or "[ipv6][:port]" spanning [host, end): *out (NULL when
 * empty) and *port (left as it is when absent). */
static int parse_host_port(const char *host, const char *end, char **out,
                           int *port, char *err, size_t errlen, const char *url)
{
    const char *host_end, *colon;

    *out = NULL;
    if (*host == '[') { /* [ipv6]:port */
        const char *close = memchr(host, ']', (size_t)(end - host));
        if (close == NULL) {
            sl__set_err(err, errlen, "invalid redis url: unclosed '[': '%s'",
                        url);
            return SL_EINVAL;
        }
        *out = strndup(host + 1, (size_t)(close - host - 1));
        host_end = close + 1;
        colon = host_end < end && *host_end == ':' ? host_end : NULL;
    } else {
        colon = memchr(host, ':', (size_t)(end - host));
        host_end = colon ? colon : end;
        if (host_end > host)
            *out = strndup(host, (size_t)(host_end - host));
    }
    if (host_end > host && *out == NULL)
        return SL_ENOMEM;
    if ((colon == NULL && host_end != end) ||
        (colon != NULL &&
         sl__parse_int(colon + 1, (size_t)(end - colon - 1), 1, 65535, port))) {
        sl__set_err(err, errlen, "invalid redis url: bad port: '%s'", url);
        return SL_EINVAL;
    }
    return 0;
}

/* "redis://[[user]:password@]host[:port][/db]". */
static int parse_tcp_url(redis_store *rs, const char *p, char *err,
                         size_t errlen, const char *url)
{
    const char *end = p + strcspn(p, "/");
    int rc;
    const char *host = parse_userinfo(rs, p, end, &rc);

    if (rc != 0 || (rc = parse_host_port(host, end, &rs->host, &rs->port, err,
                                         errlen, url)) != 0)
        return rc;
    if (*end == '/' && end[1] != '\0' &&
        sl__parse_int(end + 1, strlen(end + 1), 0, 1 << 20, &rs->db)) {
        sl__set_err(err, errlen, "invalid redis url: bad db number: '%s'", url);
        return SL_EINVAL;
    }
    return 0;
}

/* "redis-cluster://[[user]:password@]host:port[,host:port...]": the
 * seed nodes, each with its port (a cluster has no default one).  No /db:
 * a cluster has only database 0. */
static int parse_cluster_url(redis_store *rs, const char *p, char *err,
                             size_t errlen, const char *url)
{
    const char *end = p + strlen(p);
    size_t n = 1;
    int rc;

    if (memchr(p, '/', (size_t)(end - p)) != NULL) {
        sl__set_err(err, errlen,
                    "invalid redis url: a cluster has no database number: '%s'",
                    url);
        return SL_EINVAL;
    }
    p = parse_userinfo(rs, p, end, &rc);
    if (rc != 0)
        return rc;
    for (const char *c = p; *c; c++)
        n += *c == ',';
    if (n > SL__REDIS_MAX_NODES) {
        sl__set_err(err, errlen, "invalid redis url: more than %d nodes: '%s'",
                    SL__REDIS_MAX_NODES, url);
        return SL_EINVAL;
    }
    if ((rs->seed_hosts = calloc(n, sizeof(char *))) == NULL ||
        (rs->seed_ports = calloc(n, sizeof(int))) == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *seed_end = p + strcspn(p, ",");
        rs->n_seeds++;
        if ((rc = parse_host_port(p, seed_end, &rs->seed_hosts[i],
                                  &rs->seed_ports[i], err, errlen, url)) != 0)
            return rc;
        if (rs->seed_hosts[i] == NULL || rs->seed_ports[i] == 0) {
            sl__set_err(err, errlen,
                        "invalid redis url: each cluster node needs host:port: "
                        "'%s'",
                        url);
            return SL_EINVAL;
        }
        p = seed_end + 1;
    }
    /* The first seed is also the endpoint a plain caller would use. */
    rs->port = rs->seed_ports[0];
    return (rs->host = strdup(rs->seed_hosts[0])) ? 0 : SL_ENOMEM;
}

static int parse_url(redis_store *rs, const char *url, char *err,
                     size_t errlen)
{
    if (strncmp(url, "redis://", 8) == 0)
        return parse_tcp_url(rs, url + 8, err, errlen, url);
    if (strncmp(url, "unix:", 5) == 0)
        return parse_unix_url(rs, url + 5, err, errlen, url);
    if (strncmp(url, "redis-cluster://", 16) == 0)
        return parse_cluster_url(rs, url + 16, err, errlen, url);
    sl__set_err(err, errlen,
                "invalid redis url: expected redis://host:port[/db], "
                "unix:/path or redis-cluster://host:port[,host:port...]: '%s'",
                url);
    return SL_EINVAL;
}

static int set_options(redis_store *rs, const sl_redis_options *o, char *err,
                       size_t errlen)
{
    const char *prefix = o->key_prefix ? o->key_prefix : "sl:";
    int rc;

    rs->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 1000;
    rs->use_server_time = o->use_server_time != 0;
    rs->extra_ttl_ms = o->extra_ttl_ms;
    rs->base.max_key_len = o->max_key_len ? o->max_key_len : 4096;
    if (o->extra_ttl_ms < 0 || o->extra_ttl_ms > (INT64_C(1) << 40)) {
        sl__set_err(err, errlen, "extra_ttl_ms out of range: '%lld'",
                    (long long)o->extra_ttl_ms);
        return SL_EINVAL;
    }
    if (o->tag_delimiter == '{' || o->tag_delimiter == '}') {
        sl__set_err(err, errlen, "tag delimiter may not be '{' or '}'");
        return SL_EINVAL;
    }
    rs->tag_delimiter = o->tag_delimiter;
    if (strpbrk(prefix, "{}") != NULL) {
        sl__set_err(
            err, errlen,
            "key prefix may not contain '{' or '}' (the hash tag): '%s'",
            prefix);
        return SL_EINVAL;
    }
    if ((rs->prefix = strdup(prefix)) == NULL)
        return SL_ENOMEM;
    if (o->url != NULL) {
        if ((rc = parse_url(rs, o->url, err, errlen)) != 0)
            return rc;
    } else {
        if (o->port < 0 || o->port > 65535 || o->db < 0) {
            sl__set_err(err, errlen, "port or db out of range: '%d', '%d'",
                        o->port, o->db);
            return SL_EINVAL;
        }
        rs->port = o->port;
        rs->db = o->db;
        if ((o->host && !(rs->host = dup_str(o->host))) ||
            (o->unix_path && !(rs->unix_path = dup_str(o->unix_path))) ||
            (o->user && !(rs->user = dup_str(o->user))) ||
            (o->password && !(rs->password = dup_str(o->password))))
            return SL_ENOMEM;
    }
    if (rs->host == NULL && rs->unix_path == NULL &&
        (rs->host = strdup("127.0.0.1")) == NULL)
        return SL_ENOMEM;
    if (rs->port == 0)
        rs->port = 6379;
    return 0;
}

/* ---- the connection ---- */

/*
 * Writing to a connection the server has closed raises SIGPIPE, which
 * would kill the caller's process; a library may not change the signal's
 * disposition for the whole process.  So SIGPIPE is blocked in this thread
 * around each exchange, and one it raised is consumed before unblocking
 * (the technique libcurl and OpenSSL's s_client use).
 */
typedef struct pipe_guard {
    sigset_t old;
    int was_pending;
} pipe_guard;

static void pipe_guard_on(pipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void pipe_guard_off(pipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static void drop_connection(redis_store *rs)
{
    if (rs->ctx != NULL) {
        redisFree(rs->ctx);
        rs->ctx = NULL;
    }
}

/* Runs one command; NULL (and the connection dropped, errstr set) when
 * the exchange itself failed.  An error reply is returned as a reply. */
static redisReply *command(redis_store *rs, int argc, const char *const *argv,
                           const size_t *lens)
{
    pipe_guard g;
    redisReply *r;

    pipe_guard_on(&g);
    /* hiredis 0.14 takes argv without const; it only reads it. */
    r = redisCommandArgv(rs->ctx, argc, (const char **)argv, lens);
    pipe_guard_off(&g);
    if (r == NULL) {
        sl__set_err(rs->errstr, sizeof(rs->errstr), "redis: %s",
                    rs->ctx->errstr[0] ? rs->ctx->errstr : "connection lost");
        drop_connection(rs);
    }
    return r;
}

static void endpoint_of(const redis_store *rs, sl__redis_endpoint *out)
{
    *out = (sl__redis_endpoint){
        rs->host,       rs->port,    rs->unix_path,
        rs->db,         rs->user,    rs->password,
        rs->timeout_ms, rs->n_seeds, (const char *const *)rs->seed_hosts,
        rs->seed_ports};
}

/* Connects and says the handshake, one command at a time: 0, or
 * SL_ESTORE with errstr set and the connection dropped. */
static int connect_redis(redis_store *rs)
{
    struct timeval tv = {rs->timeout_ms / 1000,
                         (rs->timeout_ms % 1000) * 1000};
    sl__redis_endpoint ep;
    sl__redis_handshake hs;

    rs->ctx = rs->unix_path ? redisConnectUnixWithTimeout(rs->unix_path, tv)
                            : redisConnectWithTimeout(rs->host, rs->port, tv);
    if (rs->ctx == NULL || rs->ctx->err) {
        if (rs->unix_path)
            sl__set_err(rs->errstr, sizeof(rs->errstr),
                        "redis: cannot connect to '%s': %s", rs->unix_path,
                        rs->ctx ? rs->ctx->errstr : "out of memory");
        else
            sl__set_err(rs->errstr, sizeof(rs->errstr),
                        "redis: cannot connect to '%s:%d': %s", rs->host,
                        rs->port, rs->ctx ? rs->ctx->errstr : "out of memory");
        drop_connection(rs);
        return SL_ESTORE;
    }
    if (redisSetTimeout(rs->ctx, tv) != REDIS_OK) {
        sl__set_err(rs->errstr, sizeof(rs->errstr),
                    "redis: cannot set timeout");
        drop_connection(rs);
        return SL_ESTORE;
    }
    /* The script is loaded once, for its SHA1; later, after a restart or
     * SCRIPT FLUSH, the NOSCRIPT path sends it again. */
    endpoint_of(rs, &ep);
    sl__redis_handshake_init(&hs, &ep,
                             rs->sha[0] ? 0 : SL__REDIS_WITH_SCRIPT_LOAD);
    for (size_t i = 0; i < hs.n; i++) {
        redisReply *r =
            command(rs, hs.cmd[i].argc, hs.cmd[i].argv, hs.cmd[i].lens);
        int err = r == NULL ? SL_ESTORE
                            : sl__redis_handshake_check(hs.cmd[i].kind, r,
                                                        rs->sha, rs->errstr,
                                                        sizeof(rs->errstr));
        if (r != NULL)
            freeReplyObject(r);
        if (err != 0) {
            drop_connection(rs);
            return err;
        }
    }
    return 0;
}

/* ---- the nodes of a cluster (redis_cluster_sync.c routes) ---- */

int sl__redis_node_new(sl_store *cluster_store, const char *host, int port,
                       sl_store **out)
{
    const redis_store *parent = (const redis_store *)cluster_store;
    redis_store *rs = calloc(1, sizeof(*rs));

    if (rs == NULL)
        return SL_ENOMEM;
    rs->base = parent->base;
    pthread_mutex_init(&rs->lock, NULL);
    rs->port = port;
    rs->timeout_ms = parent->timeout_ms;
    if ((rs->host = strdup(host)) == NULL ||
        (rs->prefix = strdup(parent->prefix)) == NULL ||
        (parent->user && !(rs->user = strdup(parent->user))) ||
        (parent->password && !(rs->password = strdup(parent->password)))) {
        sl_store_free(&rs->base);
        return SL_ENOMEM;
    }
    *out = &rs->base;
    return 0;
}

/* ASKING and the command, pipelined: the target of an ASK serves the
 * command only right after ASKING on the same connection. */
static redisReply *command_asking(redis_store *rs, int argc,
                                  const char *const *argv, const size_t *lens)
{
    pipe_guard g;
    void *asked = NULL, *r = NULL;
    int ok;

    pipe_guard_on(&g);
    ok = redisAppendCommand(rs->ctx, "ASKING") == REDIS_OK &&
         redisAppendCommandArgv(rs->ctx, argc, (const char **)argv, lens) ==
             REDIS_OK &&
         redisGetReply(rs->ctx, &asked) == REDIS_OK &&
         redisGetReply(rs->ctx, &r) == REDIS_OK;
    pipe_guard_off(&g);
    if (asked != NULL)
        freeReplyObject(asked);
    if (!ok) {
        sl__set_err(rs->errstr, sizeof(rs->errstr), "redis: %s",
                    rs->ctx->errstr[0] ? rs->ctx->errstr : "connection lost");
        if (r != NULL)
            freeReplyObject(r);
        drop_connection(rs);
        return NULL;
    }
    return r;
}

redisReply *sl__redis_node_command(sl_store *node, int asking, int argc,
                                   const char *const *argv, const size_t *lens,
                                   char *err, size_t errlen)
{
    redis_store *rs = (redis_store *)node;
    redisReply *r = NULL;

    if (rs->ctx != NULL || connect_redis(rs) == 0)
        r = asking ? command_asking(rs, argc, argv, lens)
                   : command(rs, argc, argv, lens);
    if (r == NULL)
        sl__set_err(err, errlen, "%s", rs->errstr);
    return r;
}

const char *sl__redis_node_sha(sl_store *node)
{
    return ((redis_store *)node)->sha;
}

/* A store made connected: the cluster's slot map is read at once. */
static int connect_cluster(redis_store *rs)
{
    int err =
        sl__redis_cluster_new(&rs->base, (const char *const *)rs->seed_hosts,
                              rs->seed_ports, rs->n_seeds, &rs->cluster);
    if (err != 0) {
        sl__set_err(rs->errstr, sizeof(rs->errstr), "out of memory");
        return err;
    }
    return sl__redis_cluster_refresh(rs->cluster, rs->errstr,
                                     sizeof(rs->errstr));
}

/* ---- checks ---- */

/* Sends a part's command where it belongs: the one connection, or the
 * node of its slot.  NULL (errstr set) when the exchange failed. */
static redisReply *send_part(redis_store *rs, const sl__redis_call *c,
                             size_t part)
{
    const char *const *argv;
    const size_t *lens;
    int argc = sl__redis_call_part_argv(c, part, &argv, &lens);

    if (rs->cluster != NULL)
        return sl__redis_cluster_command(
            rs->cluster, sl__redis_call_part_slot(c, part), argc, argv, lens,
            rs->errstr, sizeof(rs->errstr));
    return command(rs, argc, argv, lens);
}

/* One part, one round trip: EVALSHA, or EVAL when the server has lost
 * the script. */
static int run_part(redis_store *rs, sl__redis_call *c, size_t part)
{
    char msg[ERR_LEN];
    redisReply *r;
    int err;

    if (rs->cluster == NULL && rs->ctx == NULL && (err = connect_redis(rs)))
        return err;
    if (rs->cluster != NULL && rs->sha[0] == '\0')
        memcpy(rs->sha, sl__redis_cluster_sha(rs->cluster), sizeof(rs->sha));
    /* The SHA is first known after a connect, so it is named only now;
     * before any node answered there is none: EVAL. */
    sl__redis_call_part_use_sha(c, part, rs->sha[0] ? rs->sha : NULL);
    r = send_part(rs, c, part);
    if (sl__redis_reply_kind(r, NULL) == SL__REDIS_REPLY_NOSCRIPT) {
        freeReplyObject(r);
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

    if (rs->n_seeds > 0 && rs->cluster == NULL &&
        (err = sl__redis_cluster_new(
             &rs->base, (const char *const *)rs->seed_hosts, rs->seed_ports,
             rs->n_seeds, &rs->cluster)) != 0)
        return err;
    /* Checked before any I/O: a limit the script cannot decide is
     * SL_ERANGE whether or not Redis answers. */
    err =
        sl__redis_call_new(&rs->base, items, costs, n, now,
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
    drop_connection(rs);
    sl__redis_cluster_free(rs->cluster);
    for (size_t i = 0; i < rs->n_seeds; i++)
        free(rs->seed_hosts[i]);
    free(rs->seed_hosts);
    free(rs->seed_ports);
    pthread_mutex_destroy(&rs->lock);
    free(rs->host);
    free(rs->unix_path);
    free(rs->user);
    free(rs->password);
    free(rs->prefix);
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

int sl_redis_store_new(const sl_redis_options *opts, sl_store **out,
                       char *errbuf, size_t errlen)
{
    redis_store *rs;
    int err;

    if (opts == NULL || out == NULL) {
        sl__set_err(errbuf, errlen, "options and out are required");
        return SL_EINVAL;
    }
    if ((rs = calloc(1, sizeof(*rs))) == NULL) {
        sl__set_err(errbuf, errlen, "out of memory");
        return SL_ENOMEM;
    }
    rs->base.type = &redis_type;
    pthread_mutex_init(&rs->lock, NULL);
    err = set_options(rs, opts, errbuf, errlen);
    if (err == SL_ENOMEM)
        sl__set_err(errbuf, errlen, "out of memory");
    if (err == 0 && !opts->lazy_connect && rs->n_seeds > 0)
        err = connect_cluster(rs);
    else if (err == 0 && !opts->lazy_connect)
        err = connect_redis(rs);
    if (err != 0 && err != SL_EINVAL && err != SL_ENOMEM)
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
    endpoint_of((const redis_store *)store, out);
    return 0;
}

int sl__redis_store_keyspace(sl_store *store, sl__redis_keyspace *out)
{
    if (store == NULL || store->type != &redis_type || out == NULL)
        return SL_EINVAL;
    const redis_store *rs = (const redis_store *)store;
    *out =
        (sl__redis_keyspace){rs->prefix, rs->tag_delimiter, rs->use_server_time,
                             rs->extra_ttl_ms, rs->n_seeds > 0};
    return 0;
}
