/*
 * redis.c - the Redis store: every key's state in a Redis 7 server, each
 * check decided there, atomically, by one call of the Lua script made of
 * the files in src/store/redis/ (docs/stores.md).
 *
 * This file is the client half: options and URL, the connection (hiredis,
 * synchronous, one per store behind a mutex), the bounds within which the
 * script's double arithmetic is exact, key names, and one EVALSHA per
 * check.  The semantics live in the Lua files, which mirror src/core/ line
 * for line; tests/test_redis.c runs both stores on the same traces.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "internal.h"

/* The Lua script's numbers are doubles: see docs/stores.md for why these
 * bounds make every intermediate an integer below 2^53. */
#define EXACT_BOUND (INT64_C(1) << 52)

enum {
    ITEM_ARGS = 2,   /* per item, as src/store/redis/main.lua reads them */
    CALL_ARGS = 4,   /* now (s, ns), extra TTL, record */
    NUM_LEN = 24,    /* an int64 in decimal, NUL included */
    SPEC_FIELDS = 8, /* algorithm L P B step flags t_num t_den */
    IDENT_HEX = 16,  /* the limit's identity in a key name */
    SHA_LEN = 40,
    ERR_LEN = 256,
};

typedef struct redis_store {
    sl_store base;
    pthread_mutex_t lock; /* serialises calls on the one connection */
    redisContext *ctx;    /* NULL: (re)connect on the next call */
    char sha[SHA_LEN + 1]; /* the script's SHA1 once loaded; "" before */
    /* Options, owned copies. */
    char *host, *unix_path, *user, *password, *prefix;
    int port, db, timeout_ms, use_server_time;
    char tag_delimiter; /* 0: the whole key is the hash tag */
    int64_t extra_ttl_ms;
    /* redis-cluster://: the seed nodes, and the routing (redis_cluster.c)
     * made on the first check; n_seeds 0 for a plain store. */
    char **seed_hosts;
    int *seed_ports;
    size_t n_seeds;
    sl__redis_cluster *cluster;
    char errstr[ERR_LEN]; /* the last failure, for sl_store_last_error */
} redis_store;

__attribute__((format(printf, 3, 4))) static void
set_err(char *buf, size_t len, const char *fmt, ...)
{
    if (buf != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
}

/* ---- options ---- */

static char *dup_str(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

int sl__parse_int(const char *s, size_t n, long lo, long hi, int *out)
{
    long v = 0;
    if (n == 0 || n > 9)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
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
        set_err(err, errlen, "invalid redis url: socket path must be absolute: '%s'", url);
        return SL_EINVAL;
    }
    if (q != NULL &&
        (strncmp(q, "?db=", 4) != 0 ||
         sl__parse_int(q + 4, strlen(q + 4), 0, 1 << 20, &rs->db))) {
        set_err(err, errlen, "invalid redis url: bad query (only ?db=N): '%s'", url);
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
            set_err(err, errlen, "invalid redis url: unclosed '[': '%s'", url);
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
        set_err(err, errlen, "invalid redis url: bad port: '%s'", url);
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
        set_err(err, errlen, "invalid redis url: bad db number: '%s'", url);
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
        set_err(err, errlen,
                "invalid redis url: a cluster has no database number: '%s'",
                url);
        return SL_EINVAL;
    }
    p = parse_userinfo(rs, p, end, &rc);
    if (rc != 0)
        return rc;
    for (const char *c = p; *c; c++)
        n += *c == ',';
    if (n > SL_REDIS_MAX_NODES) {
        set_err(err, errlen, "invalid redis url: more than %d nodes: '%s'",
                SL_REDIS_MAX_NODES, url);
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
            set_err(err, errlen,
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
    set_err(err, errlen,
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
        set_err(err, errlen, "extra_ttl_ms out of range: '%lld'",
                (long long)o->extra_ttl_ms);
        return SL_EINVAL;
    }
    if (o->tag_delimiter == '{' || o->tag_delimiter == '}') {
        set_err(err, errlen, "tag delimiter may not be '{' or '}'");
        return SL_EINVAL;
    }
    rs->tag_delimiter = o->tag_delimiter;
    if (strpbrk(prefix, "{}") != NULL) {
        set_err(err, errlen,
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
            set_err(err, errlen, "port or db out of range: '%d', '%d'",
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
static redisReply *command(redis_store *rs, int argc, const char **argv,
                           const size_t *lens)
{
    pipe_guard g;
    redisReply *r;

    pipe_guard_on(&g);
    r = redisCommandArgv(rs->ctx, argc, argv, lens);
    pipe_guard_off(&g);
    if (r == NULL) {
        set_err(rs->errstr, sizeof(rs->errstr), "redis: %s",
                rs->ctx->errstr[0] ? rs->ctx->errstr : "connection lost");
        drop_connection(rs);
    }
    return r;
}

/* A setup command that must not fail: 0, or SL_ESTORE with errstr set
 * and the connection dropped. */
static int setup_command(redis_store *rs, int argc, const char **argv,
                         redisReply **keep)
{
    redisReply *r = command(rs, argc, argv, NULL);
    if (r == NULL)
        return SL_ESTORE;
    if (r->type == REDIS_REPLY_ERROR) {
        set_err(rs->errstr, sizeof(rs->errstr), "redis %s: %s", argv[0],
                r->str);
        freeReplyObject(r);
        drop_connection(rs);
        return SL_ESTORE;
    }
    if (keep != NULL)
        *keep = r;
    else
        freeReplyObject(r);
    return 0;
}

static int connect_redis(redis_store *rs)
{
    struct timeval tv = {rs->timeout_ms / 1000,
                         (rs->timeout_ms % 1000) * 1000};
    redisReply *r = NULL;
    char db[NUM_LEN];
    int err;

    rs->ctx = rs->unix_path ? redisConnectUnixWithTimeout(rs->unix_path, tv)
                            : redisConnectWithTimeout(rs->host, rs->port, tv);
    if (rs->ctx == NULL || rs->ctx->err) {
        if (rs->unix_path)
            set_err(rs->errstr, sizeof(rs->errstr),
                    "redis: cannot connect to '%s': %s", rs->unix_path,
                    rs->ctx ? rs->ctx->errstr : "out of memory");
        else
            set_err(rs->errstr, sizeof(rs->errstr),
                    "redis: cannot connect to '%s:%d': %s", rs->host,
                    rs->port, rs->ctx ? rs->ctx->errstr : "out of memory");
        drop_connection(rs);
        return SL_ESTORE;
    }
    if (redisSetTimeout(rs->ctx, tv) != REDIS_OK) {
        set_err(rs->errstr, sizeof(rs->errstr), "redis: cannot set timeout");
        drop_connection(rs);
        return SL_ESTORE;
    }
    if (rs->password != NULL) {
        const char *auth[3] = {"AUTH", rs->user ? rs->user : rs->password,
                               rs->password};
        if ((err = setup_command(rs, rs->user ? 3 : 2, auth, NULL)) != 0)
            return err;
    }
    if (rs->db != 0) {
        const char *sel[2] = {"SELECT", db};
        snprintf(db, sizeof(db), "%d", rs->db);
        if ((err = setup_command(rs, 2, sel, NULL)) != 0)
            return err;
    }
    if (rs->sha[0] == '\0') {
        /* Loaded once for its SHA1; later, after a restart or SCRIPT
         * FLUSH, the NOSCRIPT path sends it again. */
        const char *load[3] = {"SCRIPT", "LOAD", sl__redis_script};
        if ((err = setup_command(rs, 3, load, &r)) != 0)
            return err;
        if (r->type != REDIS_REPLY_STRING || r->len != SHA_LEN) {
            set_err(rs->errstr, sizeof(rs->errstr),
                    "redis SCRIPT LOAD: unexpected reply");
            freeReplyObject(r);
            drop_connection(rs);
            return SL_ESTORE;
        }
        memcpy(rs->sha, r->str, SHA_LEN + 1);
        freeReplyObject(r);
    }
    return 0;
}

/* ---- the nodes of a cluster (redis_cluster.c routes between them) ---- */

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
static redisReply *command_asking(redis_store *rs, int argc, const char **argv,
                                  const size_t *lens)
{
    pipe_guard g;
    void *asked = NULL, *r = NULL;
    int ok;

    pipe_guard_on(&g);
    ok = redisAppendCommand(rs->ctx, "ASKING") == REDIS_OK &&
         redisAppendCommandArgv(rs->ctx, argc, argv, lens) == REDIS_OK &&
         redisGetReply(rs->ctx, &asked) == REDIS_OK &&
         redisGetReply(rs->ctx, &r) == REDIS_OK;
    pipe_guard_off(&g);
    if (asked != NULL)
        freeReplyObject(asked);
    if (!ok) {
        set_err(rs->errstr, sizeof(rs->errstr), "redis: %s",
                rs->ctx->errstr[0] ? rs->ctx->errstr : "connection lost");
        if (r != NULL)
            freeReplyObject(r);
        drop_connection(rs);
        return NULL;
    }
    return r;
}

redisReply *sl__redis_node_command(sl_store *node, int asking, int argc,
                                   const char **argv, const size_t *lens,
                                   char *err, size_t errlen)
{
    redis_store *rs = (redis_store *)node;
    redisReply *r = NULL;

    if (rs->ctx != NULL || connect_redis(rs) == 0)
        r = asking ? command_asking(rs, argc, argv, lens)
                   : command(rs, argc, argv, lens);
    if (r == NULL)
        set_err(err, errlen, "%s", rs->errstr);
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
        set_err(rs->errstr, sizeof(rs->errstr), "out of memory");
        return err;
    }
    return sl__redis_cluster_refresh(rs->cluster, rs->errstr,
                                     sizeof(rs->errstr));
}

/* ---- checks ---- */

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA || alg == SL_LEAKY_BUCKET;
}

/* SL_ERANGE unless every intermediate of the limit's script stays an
 * exact double (docs/stores.md, "Exactness"). */
static int check_bounds(const sl_limit *lim, char *errbuf, size_t errlen)
{
    const sl_limit_config *c = &lim->cfg;
    if (c->period > EXACT_BOUND) {
        set_err(errbuf, errlen,
                "limit out of range for the redis store: period '%lld' ns "
                "(at most 2^52)",
                (long long)c->period);
        return SL_ERANGE;
    }
    if (is_bucket(c->algorithm) &&
        (sl__i128)c->burst * lim->t_num > EXACT_BOUND) {
        set_err(errbuf, errlen,
                "limit out of range for the redis store: burst * period / "
                "gcd(period, limit) = %lld * %lld exceeds 2^52",
                (long long)c->burst, (long long)lim->t_num);
        return SL_ERANGE;
    }
    return 0;
}

/* The key of an item: prefix, the limit's identity, then the caller's key
 * with its hash tag in braces, so that every limit of one client key lands
 * in one slot (docs/stores.md): "{key}", or with a tag delimiter d,
 * "{tag}rest" where tag is the key before its first d and rest the d and
 * what follows.  Names stay distinct: the tag has no d and the rest is
 * empty or starts with one.  Returns the length written to out, which
 * has room for the prefix, IDENT_HEX + 3 bytes and the key. */
static size_t key_name(const redis_store *rs, const sl_check_item *it,
                       char *out)
{
    size_t n = strlen(rs->prefix), tag = it->key_len;
    const char *d;
    memcpy(out, rs->prefix, n);
    for (int i = IDENT_HEX - 1; i >= 0; i--)
        out[n++] = "0123456789abcdef"[(it->limit->ident >> (4 * i)) & 15];
    out[n++] = ':';
    out[n++] = '{';
    if (rs->tag_delimiter != 0 && it->key_len > 0 &&
        (d = memchr(it->key, rs->tag_delimiter, it->key_len)) != NULL)
        tag = (size_t)(d - (const char *)it->key);
    if (tag > 0)
        memcpy(out + n, it->key, tag);
    n += tag;
    out[n++] = '}';
    if (it->key_len > tag)
        memcpy(out + n, (const char *)it->key + tag, it->key_len - tag);
    return n + it->key_len - tag;
}

/* Maps a script's error reply to a code: its first word names it. */
static int reply_error(const redisReply *r, char *err, size_t errlen)
{
    set_err(err, errlen, "redis: %s", r->str);
    if (strncmp(r->str, "ERANGE ", 7) == 0)
        return SL_ERANGE;
    if (strncmp(r->str, "EINVAL ", 7) == 0)
        return SL_EINVAL;
    return SL_ESTORE;
}

/* Reads the script's reply: 5 integers per item, item i's limit being
 * limits[i].  Shared by the store and sl_redis_call_read(). */
static int read_decisions(const redisReply *r, const int64_t *limits, size_t n,
                          sl_decision *each, char *err, size_t errlen)
{
    if (r->type == REDIS_REPLY_ERROR)
        return reply_error(r, err, errlen);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 * n)
        goto bad;
    for (size_t i = 0; i < 5 * n; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            goto bad;
    for (size_t i = 0; i < n; i++) {
        redisReply **e = &r->element[5 * i];
        each[i].allowed = e[0]->integer != 0;
        each[i].limit = limits[i];
        each[i].remaining = e[1]->integer;
        each[i].reset_after = e[2]->integer;
        each[i].retry_after = e[3]->integer;
        each[i].delay = e[4]->integer;
    }
    return 0;
bad:
    set_err(err, errlen, "redis: unexpected reply");
    return SL_ESTORE;
}

/* The arguments of one call, pointing into bufs it owns. */
typedef struct call_args {
    int argc;
    const char *argv[3 + SL_MAX_ITEMS + CALL_ARGS + ITEM_ARGS * SL_MAX_ITEMS];
    size_t lens[3 + SL_MAX_ITEMS + CALL_ARGS + ITEM_ARGS * SL_MAX_ITEMS];
    char nums[(CALL_ARGS + ITEM_ARGS * SL_MAX_ITEMS + 1)][NUM_LEN];
    int nnums;
    /* Each item's limit as one argument: the script reads a limit's
     * fields once per run, not once per item (main.lua's limit_of). */
    char specs[SL_MAX_ITEMS][SPEC_FIELDS * NUM_LEN];
    char *keys; /* malloc'd: every key name */
    size_t n;   /* items */
    int64_t limits[SL_MAX_ITEMS]; /* each item's L, for its decision */
} call_args;

static void push_arg(call_args *a, const char *s, size_t len)
{
    a->argv[a->argc] = s;
    a->lens[a->argc++] = len;
}

/* v in decimal at s: its length.  By hand: snprintf cost as much as the
 * rest of building a call (docs/benchmarks.md, "sluice serve --store
 * redis"). */
static size_t put_num(char *s, int64_t v)
{
    char digits[NUM_LEN];
    size_t i = sizeof(digits), len;
    /* Through unsigned, so INT64_MIN negates without overflow. */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        digits[--i] = '-';
    len = sizeof(digits) - i;
    memcpy(s, digits + i, len);
    return len;
}

static void push_num(call_args *a, int64_t v)
{
    char *s = a->nums[a->nnums++];
    push_arg(a, s, put_num(s, v));
}

/* A limit's fields, space-separated (all >= 0: sl_limit_new). */
static void push_spec(call_args *a, size_t item, const sl_limit *lim)
{
    const int64_t f[SPEC_FIELDS] = {
        lim->cfg.algorithm, lim->cfg.limit,       lim->cfg.period,
        lim->cfg.burst,     lim->cfg.step,        (int64_t)lim->cfg.flags,
        lim->t_num,         lim->t_den};
    char *s = a->specs[item];
    size_t len = 0;
    for (int i = 0; i < SPEC_FIELDS; i++) {
        if (i > 0)
            s[len++] = ' ';
        len += put_num(s + len, f[i]);
    }
    push_arg(a, s, len);
}

/* sha NULL: EVAL with the script's text. */
static int build_call(const redis_store *rs, call_args *a,
                      const sl_check_item *items, const int64_t *costs,
                      size_t n, sl_nanos now, int record, const char *sha)
{
    size_t prefix = strlen(rs->prefix), total = 0, at = 0;

    for (size_t i = 0; i < n; i++)
        total += prefix + IDENT_HEX + 3 + items[i].key_len;
    if ((a->keys = malloc(total ? total : 1)) == NULL)
        return SL_ENOMEM;
    a->argc = a->nnums = 0;
    a->n = n;
    for (size_t i = 0; i < n; i++)
        a->limits[i] = items[i].limit->cfg.limit;
    if (sha != NULL) {
        push_arg(a, "EVALSHA", 7);
        push_arg(a, sha, SHA_LEN);
    } else {
        push_arg(a, "EVAL", 4);
        push_arg(a, sl__redis_script, strlen(sl__redis_script));
    }
    push_num(a, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        size_t len = key_name(rs, &items[i], a->keys + at);
        push_arg(a, a->keys + at, len);
        at += len;
    }
    if (rs->use_server_time) {
        push_arg(a, "", 0);
        push_arg(a, "", 0);
    } else {
        push_num(a, now / SL_NS_PER_SEC);
        push_num(a, now % SL_NS_PER_SEC);
    }
    push_num(a, rs->extra_ttl_ms);
    push_num(a, record != 0);
    for (size_t i = 0; i < n; i++) {
        push_spec(a, i, items[i].limit);
        push_num(a, costs[i]);
    }
    return 0;
}

/* After NOSCRIPT: the same call as EVAL with the script's text. */
static void use_eval(call_args *a)
{
    a->argv[0] = "EVAL";
    a->lens[0] = 4;
    a->argv[1] = sl__redis_script;
    a->lens[1] = strlen(sl__redis_script);
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* A call: one part per slot of its items' keys (one in all on a plain
 * store), each a script call of its own.  Shared by the store and the
 * asynchronous interface (sl_redis_call_*). */
typedef struct call_part {
    call_args a;
    int slot;                     /* -1 on a plain store */
    size_t item_of[SL_MAX_ITEMS]; /* the call's index of the part's item j */
} call_part;

struct sl_redis_call {
    size_t n, n_parts;
    call_part *parts[SL_MAX_ITEMS];
    sl_decision each[SL_MAX_ITEMS]; /* filled by each part's reply */
};

/* Each item's slot; keys that share a hash tag share a slot. */
static int item_slots(const redis_store *rs, const sl_check_item *items,
                      size_t n, int *slot)
{
    size_t prefix = strlen(rs->prefix);
    for (size_t i = 0; i < n; i++) {
        char *name = malloc(prefix + IDENT_HEX + 3 + items[i].key_len);
        if (name == NULL)
            return SL_ENOMEM;
        slot[i] = sl_redis_key_slot(name, key_name(rs, &items[i], name));
        free(name);
    }
    return 0;
}

/* Validates the items against the script's bounds and builds the call's
 * parts, in ascending slot order. */
static int prepare_call(const redis_store *rs, sl_redis_call *c,
                        const sl_check_item *items, const int64_t *costs,
                        size_t n, sl_nanos now, int record, const char *sha,
                        char *errbuf, size_t errlen)
{
    int slot[SL_MAX_ITEMS], err = 0;

    for (size_t i = 0; i < n && !err; i++) {
        err = check_bounds(items[i].limit, errbuf, errlen);
        /* The same limit and key twice: one key, decided twice. */
        for (size_t j = 0; j < i && !err; j++)
            if (items[j].limit->ident == items[i].limit->ident &&
                items[j].key_len == items[i].key_len &&
                (items[i].key_len == 0 ||
                 memcmp(items[j].key, items[i].key, items[i].key_len) == 0)) {
                set_err(errbuf, errlen,
                        "the same limit and key twice in one call");
                err = SL_EINVAL;
            }
    }
    if (err)
        return err;
    c->n = n;
    c->n_parts = 0;
    if (rs->n_seeds == 0)
        memset(slot, 0xff, sizeof(slot)); /* -1: one part */
    else if ((err = item_slots(rs, items, n, slot)) != 0)
        return err;
    for (size_t done = 0; done < n;) {
        /* The next part: the smallest slot not yet taken. */
        int next = INT32_MAX;
        sl_check_item sub[SL_MAX_ITEMS];
        int64_t sub_costs[SL_MAX_ITEMS];
        call_part *p;
        for (size_t i = 0; i < n; i++)
            if (slot[i] != INT32_MAX && slot[i] < next)
                next = slot[i];
        if ((p = malloc(sizeof(*p))) == NULL)
            return SL_ENOMEM;
        p->a.keys = NULL;
        p->a.n = 0;
        p->slot = next;
        c->parts[c->n_parts++] = p;
        for (size_t i = 0; i < n; i++)
            if (slot[i] == next) {
                p->item_of[p->a.n] = i;
                sub[p->a.n] = items[i];
                sub_costs[p->a.n++] = costs[i];
                slot[i] = INT32_MAX;
                done++;
            }
        if ((err = build_call(rs, &p->a, sub, sub_costs, p->a.n, now, record,
                              sha)) != 0)
            return err;
    }
    return 0;
}

static void free_call(sl_redis_call *c)
{
    for (size_t p = 0; c != NULL && p < c->n_parts; p++) {
        free(c->parts[p]->a.keys);
        free(c->parts[p]);
    }
    free(c);
}

static int read_part(sl_redis_call *c, size_t part, const redisReply *r,
                     char *err, size_t errlen)
{
    const call_part *p = c->parts[part];
    sl_decision got[SL_MAX_ITEMS];
    int rc;

    if (is_noscript(r))
        return 1;
    if ((rc = read_decisions(r, p->a.limits, p->a.n, got, err, errlen)) != 0)
        return rc;
    for (size_t j = 0; j < p->a.n; j++)
        c->each[p->item_of[j]] = got[j];
    return 0;
}

/* Sends a part's command where it belongs: the one connection, or the
 * node of its slot.  NULL (errstr set) when the exchange failed. */
static redisReply *send_part(redis_store *rs, call_part *p)
{
    if (rs->cluster != NULL)
        return sl__redis_cluster_command(rs->cluster, p->slot, p->a.argc,
                                         p->a.argv, p->a.lens, rs->errstr,
                                         sizeof(rs->errstr));
    return command(rs, p->a.argc, p->a.argv, p->a.lens);
}

/* One part, one round trip: EVALSHA, or EVAL when the server has lost
 * the script. */
static int run_part(redis_store *rs, sl_redis_call *c, size_t part)
{
    call_part *p = c->parts[part];
    redisReply *r;
    int err;

    if (rs->cluster == NULL && rs->ctx == NULL && (err = connect_redis(rs)))
        return err;
    if (rs->cluster != NULL && rs->sha[0] == '\0')
        memcpy(rs->sha, sl__redis_cluster_sha(rs->cluster), SHA_LEN + 1);
    if (rs->sha[0] != '\0') {
        /* The SHA is first known here, after a connect: set it now. */
        p->a.argv[1] = rs->sha;
        p->a.lens[1] = SHA_LEN;
    } else {
        use_eval(&p->a); /* no node reached yet: no SHA to name */
    }
    r = send_part(rs, p);
    if (r != NULL && is_noscript(r)) {
        freeReplyObject(r);
        use_eval(&p->a);
        r = send_part(rs, p);
    }
    if (r == NULL)
        return SL_ESTORE;
    err = read_part(c, part, r, rs->errstr, sizeof(rs->errstr));
    freeReplyObject(r);
    return err;
}

/* Parts go in ascending slot order, each decided by itself; any failure
 * ends the call (the parts before it stand: docs/stores.md). */
static int redis_decide(redis_store *rs, const sl_check_item *items,
                        const int64_t *costs, size_t n, sl_nanos now,
                        int record, sl_decision *each)
{
    sl_redis_call *c;
    int err;

    if (rs->n_seeds > 0 && rs->cluster == NULL &&
        (err = sl__redis_cluster_new(
             &rs->base, (const char *const *)rs->seed_hosts, rs->seed_ports,
             rs->n_seeds, &rs->cluster)) != 0)
        return err;
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return SL_ENOMEM;
    /* Before the first connect the SHA is unknown: run_part sets it. */
    err = prepare_call(rs, c, items, costs, n, now, record, rs->sha, rs->errstr,
                       sizeof(rs->errstr));
    for (size_t p = 0; err == 0 && p < c->n_parts; p++)
        err = run_part(rs, c, p);
    if (err == 0)
        memcpy(each, c->each, n * sizeof(*each));
    free_call(c);
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
        set_err(errbuf, errlen, "options and out are required");
        return SL_EINVAL;
    }
    if ((rs = calloc(1, sizeof(*rs))) == NULL) {
        set_err(errbuf, errlen, "out of memory");
        return SL_ENOMEM;
    }
    rs->base.type = &redis_type;
    pthread_mutex_init(&rs->lock, NULL);
    err = set_options(rs, opts, errbuf, errlen);
    if (err == SL_ENOMEM)
        set_err(errbuf, errlen, "out of memory");
    if (err == 0 && !opts->lazy_connect && rs->n_seeds > 0)
        err = connect_cluster(rs);
    else if (err == 0 && !opts->lazy_connect)
        err = connect_redis(rs);
    if (err != 0 && err != SL_EINVAL && err != SL_ENOMEM)
        set_err(errbuf, errlen, "%s", rs->errstr);
    if (err != 0) {
        redis_destroy(&rs->base);
        return err;
    }
    *out = &rs->base;
    return 0;
}

/* ---- the asynchronous interface (sluice.h, "Redis from an event loop") ----
 *
 * The same arguments and the same reply decoding as the store's own
 * calls, for a caller that owns its connections: nothing here does I/O. */

const char *sl_redis_script(void)
{
    return sl__redis_script;
}

int sl_redis_store_endpoint(sl_store *store, sl_redis_endpoint *out)
{
    if (store == NULL || store->type != &redis_type || out == NULL)
        return SL_EINVAL;
    const redis_store *rs = (const redis_store *)store;
    *out = (sl_redis_endpoint){
        rs->host,       rs->port,    rs->unix_path,
        rs->db,         rs->user,    rs->password,
        rs->timeout_ms, rs->n_seeds, (const char *const *)rs->seed_hosts,
        rs->seed_ports};
    return 0;
}

int sl_redis_call_new(sl_store *store, const sl_check_item *items,
                      const int64_t *costs, size_t n, sl_nanos now,
                      unsigned flags, const char *sha, sl_redis_call **out,
                      char *errbuf, size_t errlen)
{
    sl_redis_call *c;
    int err;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (store == NULL || store->type != &redis_type || out == NULL ||
        (flags & ~SL_RECORD) != 0 || (sha != NULL && strlen(sha) != SHA_LEN)) {
        set_err(errbuf, errlen, "invalid argument");
        return SL_EINVAL;
    }
    if ((err = sl__check_input(store, items, n, costs, now)) != 0) {
        set_err(errbuf, errlen, "%s", sl_strerror(err));
        return err;
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        set_err(errbuf, errlen, "out of memory");
        return SL_ENOMEM;
    }
    err = prepare_call((const redis_store *)store, c, items, costs, n, now,
                       (flags & SL_RECORD) != 0, sha, errbuf, errlen);
    if (err != 0) {
        if (err == SL_ENOMEM)
            set_err(errbuf, errlen, "out of memory");
        sl_redis_call_free(c);
        return err;
    }
    *out = c;
    return 0;
}

size_t sl_redis_call_parts(const sl_redis_call *call)
{
    return call->n_parts;
}

int sl_redis_call_part_slot(const sl_redis_call *call, size_t part)
{
    return call->parts[part]->slot;
}

int sl_redis_call_part_argv(const sl_redis_call *call, size_t part,
                            const char *const **argv, const size_t **lens)
{
    const call_args *a = &call->parts[part]->a;
    *argv = a->argv;
    *lens = a->lens;
    return a->argc;
}

void sl_redis_call_part_use_eval(sl_redis_call *call, size_t part)
{
    use_eval(&call->parts[part]->a);
}

int sl_redis_call_read_part(sl_redis_call *call, size_t part, const void *reply,
                            char *errbuf, size_t errlen)
{
    set_err(errbuf, errlen, "%s", "");
    if (reply == NULL) {
        set_err(errbuf, errlen, "redis: no reply");
        return SL_ESTORE;
    }
    return read_part(call, part, reply, errbuf, errlen);
}

void sl_redis_call_result(const sl_redis_call *call, sl_decision *each,
                          sl_decision *overall)
{
    if (overall != NULL)
        sl_decisions_combine(call->each, call->n, overall);
    for (size_t i = 0; each != NULL && i < call->n; i++)
        each[i] = call->each[i];
}

int sl_redis_call_argv(const sl_redis_call *call, const char *const **argv,
                       const size_t **lens)
{
    return sl_redis_call_part_argv(call, 0, argv, lens);
}

void sl_redis_call_use_eval(sl_redis_call *call)
{
    use_eval(&call->parts[0]->a);
}

int sl_redis_call_read(const sl_redis_call *call, const void *reply,
                       sl_decision *each, sl_decision *overall, char *errbuf,
                       size_t errlen)
{
    /* A one-part call: its reply's decisions are the result. */
    sl_redis_call *c = (sl_redis_call *)call;
    int err;
    if (call->n_parts != 1) {
        set_err(errbuf, errlen,
                "a call of %zu parts (Redis Cluster): read "
                "each with sl_redis_call_read_part",
                call->n_parts);
        return SL_EINVAL;
    }
    err = sl_redis_call_read_part(c, 0, reply, errbuf, errlen);
    if (err == 0)
        sl_redis_call_result(call, each, overall);
    return err;
}

void sl_redis_call_free(sl_redis_call *call)
{
    free_call(call);
}

/* ---- batches: several calls in one script call (main.lua, 'B') ---- */

static size_t resp_len(size_t len)
{
    size_t digits = 1;
    for (size_t v = len; v >= 10; v /= 10)
        digits++;
    return 1 + digits + 2 + len + 2; /* $<len>\r\n<bytes>\r\n */
}

static char *resp_put(char *o, char kind, const char *s, size_t len)
{
    char digits[NUM_LEN];
    size_t i = sizeof(digits);
    size_t v = len;
    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    *o++ = kind;
    memcpy(o, digits + i, sizeof(digits) - i);
    o += sizeof(digits) - i;
    *o++ = '\r';
    *o++ = '\n';
    if (kind == '$') {
        memcpy(o, s, len);
        o += len;
        *o++ = '\r';
        *o++ = '\n';
    }
    return o;
}

/* The batch's arguments come from each call's own: its number of keys
 * (argv[2]), its keys, and its CALL_ARGS and item arguments, so a call
 * in a batch is the very call that would have been sent alone. */
int sl_redis_batch_format(sl_redis_call *const *calls, size_t n,
                          const char *sha, char **out, size_t *out_len)
{
    const char *head[2] = {sha ? "EVALSHA" : "EVAL",
                           sha ? sha : sl__redis_script};
    char total_keys[NUM_LEN], count[NUM_LEN];
    size_t keys = 0, args = 0, len = 0;
    char *buf, *o;

    if (n == 0 || out == NULL || out_len == NULL ||
        (sha != NULL && strlen(sha) != SHA_LEN))
        return SL_EINVAL;
    for (size_t c = 0; c < n; c++) {
        if (calls[c] == NULL || calls[c]->n_parts != 1)
            return SL_EINVAL;
        const call_args *a = &calls[c]->parts[0]->a;
        keys += a->n;
        for (int i = 2; i < a->argc; i++) /* its numkeys, keys and ARGV */
            len += resp_len(a->lens[i]);
        args += (size_t)a->argc - 2;
    }
    snprintf(total_keys, sizeof(total_keys), "%zu", keys);
    snprintf(count, sizeof(count), "%zu", n);
    args += 5; /* EVALSHA sha numkeys 'B' count */
    len += resp_len(strlen(head[0])) + resp_len(strlen(head[1])) +
           resp_len(strlen(total_keys)) + resp_len(1) + resp_len(strlen(count)) +
           resp_len(args) - args - 2; /* *<args>\r\n */
    if ((buf = o = malloc(len)) == NULL)
        return SL_ENOMEM;
    o = resp_put(o, '*', NULL, args);
    o = resp_put(o, '$', head[0], strlen(head[0]));
    o = resp_put(o, '$', head[1], strlen(head[1]));
    o = resp_put(o, '$', total_keys, strlen(total_keys));
    for (size_t c = 0; c < n; c++) {
        const call_args *a = &calls[c]->parts[0]->a;
        for (size_t k = 0; k < a->n; k++)
            o = resp_put(o, '$', a->argv[3 + k], a->lens[3 + k]);
    }
    o = resp_put(o, '$', "B", 1);
    o = resp_put(o, '$', count, strlen(count));
    for (size_t c = 0; c < n; c++) {
        const call_args *a = &calls[c]->parts[0]->a;
        o = resp_put(o, '$', a->argv[2], a->lens[2]);
        for (int i = 3 + (int)a->n; i < a->argc; i++)
            o = resp_put(o, '$', a->argv[i], a->lens[i]);
    }
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
}

const void *sl_redis_batch_reply(const void *reply, size_t n, size_t i)
{
    const redisReply *r = reply;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == n &&
        i < n)
        return r->element[i];
    return reply; /* an error (NOSCRIPT...), or a shape read will refuse */
}
