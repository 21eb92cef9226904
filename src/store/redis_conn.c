/*
 * redis_conn.c - one blocking connection to one Redis server (hiredis,
 * synchronous): connect, the protocol core's handshake one command at a
 * time, commands (after ASKING, for a cluster's ASK), and how calls name
 * the script that the handshake loaded (FCALL or EVALSHA).  The plain
 * store has one; a cluster store has one per node it has talked to
 * (redis_cluster_sync.c); a Sentinel's is told how to ask where the
 * master is before each connect (sl__redis_conn_locate_with).
 *
 * Any failure drops the connection, so that the next command makes it
 * again: a restarted server is picked up without recreating the store.
 *
 * With TLS (tls_client.h) hiredis still formats the commands and parses
 * the replies, but the bytes go through the session: hiredis 0.14 reads
 * and writes its socket itself and knows nothing of TLS, so this file
 * moves its output buffer into SSL_write and SSL_read's bytes into its
 * reader.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "store/redis_store.h"

struct sl__redis_conn {
    sl__redis_endpoint ep;
    redisContext *ctx; /* NULL: connect before the next command */
    SSL *ssl;          /* TLS over ctx's socket; NULL: plain */
    sl__redis_locate_fn locate; /* NULL: ep's host and port */
    char located[256];          /* locate's host: ep.host points here */
    int failure;       /* the last exchange's: SL_ESTORE, or SL_EINVAL for a
                          certificate refused (tls_client.h) */
    unsigned with;     /* the handshake's optional commands */
    /* The script's SHA1, "" before the first SCRIPT LOAD, and whether the
     * server took the library (FCALL): both outlive the connection, as a
     * server that lost them answers NOSCRIPT or "Function not found". */
    char sha[SL__REDIS_SHA_LEN + 1];
    int fcall;
};

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

int sl__redis_conn_new(const sl__redis_endpoint *ep, unsigned with,
                       sl__redis_conn **out)
{
    sl__redis_conn *conn = calloc(1, sizeof(*conn));
    if (conn == NULL)
        return SL_ENOMEM;
    conn->ep = *ep;
    conn->with = with;
    conn->failure = SL_ESTORE;
    *out = conn;
    return 0;
}

void sl__redis_conn_drop(sl__redis_conn *conn)
{
    SSL_free(conn->ssl);
    conn->ssl = NULL;
    if (conn->ctx != NULL) {
        redisFree(conn->ctx);
        conn->ctx = NULL;
    }
}

void sl__redis_conn_free(sl__redis_conn *conn)
{
    if (conn == NULL)
        return;
    sl__redis_conn_drop(conn);
    free(conn);
}

void sl__redis_conn_locate_with(sl__redis_conn *conn, sl__redis_locate_fn fn)
{
    conn->locate = fn;
}

int sl__redis_conn_failure(const sl__redis_conn *conn)
{
    return conn->failure;
}

const char *sl__redis_conn_script_ref(const sl__redis_conn *conn)
{
    return conn->fcall ? sl__redis_function : conn->sha;
}

void sl__redis_conn_no_functions(sl__redis_conn *conn)
{
    conn->fcall = 0;
}

/* NULL, the connection dropped and err set, when the exchange failed. */
static redisReply *failed(sl__redis_conn *conn, char *err, size_t errlen)
{
    if (err[0] == '\0')
        sl__set_err(err, errlen, "redis: %s",
                    conn->ctx->errstr[0] ? conn->ctx->errstr
                                         : "connection lost");
    sl__redis_conn_drop(conn);
    return NULL;
}

/* The session's failure in err (hiredis knows nothing of it). */
static int tls_failed(sl__redis_conn *conn, int rc, char *err, size_t errlen)
{
    char what[300];
    snprintf(what, sizeof(what), "redis: tls to '%s:%d'", conn->ep.host,
             conn->ep.port);
    return conn->failure =
               sl__tls_client_failed(conn->ssl, rc, what, err, errlen);
}

/* hiredis's output buffer written through the session. */
static int tls_flush(sl__redis_conn *conn, char *err, size_t errlen)
{
    redisContext *c = conn->ctx;
    while (sdslen(c->obuf) > 0) {
        int n = SSL_write(conn->ssl, c->obuf, (int)sdslen(c->obuf));
        if (n <= 0) {
            tls_failed(conn, n, err, errlen);
            return -1;
        }
        sdsrange(c->obuf, n, -1);
    }
    return 0;
}

/* The next reply: what the commands appended are sent first.  REDIS_OK
 * with *reply, or REDIS_ERR with err set (TLS) or ctx->errstr. */
static int get_reply(sl__redis_conn *conn, void **reply, char *err,
                     size_t errlen)
{
    char buf[16384];
    if (conn->ssl == NULL)
        return redisGetReply(conn->ctx, reply);
    if (tls_flush(conn, err, errlen) != 0)
        return REDIS_ERR;
    for (;;) {
        int n;
        if (redisGetReplyFromReader(conn->ctx, reply) != REDIS_OK)
            return REDIS_ERR;
        if (*reply != NULL)
            return REDIS_OK;
        if ((n = SSL_read(conn->ssl, buf, (int)sizeof(buf))) <= 0) {
            tls_failed(conn, n, err, errlen);
            return REDIS_ERR;
        }
        if (redisReaderFeed(conn->ctx->reader, buf, (size_t)n) != REDIS_OK)
            return REDIS_ERR;
    }
}

/* One command on the connection. */
static redisReply *command(sl__redis_conn *conn, int argc,
                           const char *const *argv, const size_t *lens,
                           char *err, size_t errlen)
{
    pipe_guard g;
    void *r = NULL;
    int ok;

    err[0] = '\0';
    conn->failure = SL_ESTORE;
    pipe_guard_on(&g);
    /* hiredis 0.14 takes argv without const; it only reads it. */
    ok = redisAppendCommandArgv(conn->ctx, argc, (const char **)argv, lens) ==
             REDIS_OK &&
         get_reply(conn, &r, err, errlen) == REDIS_OK;
    pipe_guard_off(&g);
    return ok ? r : failed(conn, err, errlen);
}

/* ASKING and the command, pipelined: the target of an ASK serves the
 * command only right after ASKING on the same connection. */
static redisReply *command_asking(sl__redis_conn *conn, int argc,
                                  const char *const *argv, const size_t *lens,
                                  char *err, size_t errlen)
{
    pipe_guard g;
    void *asked = NULL, *r = NULL;
    int ok;

    err[0] = '\0';
    conn->failure = SL_ESTORE;
    pipe_guard_on(&g);
    ok = redisAppendCommand(conn->ctx, "ASKING") == REDIS_OK &&
         redisAppendCommandArgv(conn->ctx, argc, (const char **)argv, lens) ==
             REDIS_OK &&
         get_reply(conn, &asked, err, errlen) == REDIS_OK &&
         get_reply(conn, &r, err, errlen) == REDIS_OK;
    pipe_guard_off(&g);
    if (asked != NULL)
        freeReplyObject(asked);
    if (!ok) {
        if (r != NULL)
            freeReplyObject(r);
        return failed(conn, err, errlen);
    }
    return r;
}

/* The session's handshake on the connected socket: 0, or SL_ESTORE or
 * SL_EINVAL (the server's certificate refused) with err set. */
static int tls_handshake(sl__redis_conn *conn, char *err, size_t errlen)
{
    pipe_guard g;
    int rc;

    if ((conn->ssl = sl__tls_client_session(conn->ep.tls, conn->ctx->fd,
                                           conn->ep.host)) == NULL) {
        sl__set_err(err, errlen, "redis: out of memory");
        return SL_ESTORE;
    }
    pipe_guard_on(&g);
    rc = SSL_connect(conn->ssl);
    pipe_guard_off(&g);
    return rc == 1 ? 0 : tls_failed(conn, rc, err, errlen);
}

int sl__redis_conn_connect(sl__redis_conn *conn, char *err, size_t errlen)
{
    const sl__redis_endpoint *ep = &conn->ep;
    struct timeval tv = {ep->timeout_ms / 1000, (ep->timeout_ms % 1000) * 1000};
    sl__redis_handshake hs;

    if (conn->ctx != NULL)
        return 0;
    if (conn->locate != NULL) {
        int rc = conn->locate(ep, conn->located, sizeof(conn->located),
                              &conn->ep.port, err, errlen);
        if (rc != 0)
            return rc;
        conn->ep.host = conn->located;
    }
    conn->ctx = ep->unix_path ? redisConnectUnixWithTimeout(ep->unix_path, tv)
                              : redisConnectWithTimeout(ep->host, ep->port, tv);
    if (conn->ctx == NULL || conn->ctx->err) {
        const char *why = conn->ctx ? conn->ctx->errstr : "out of memory";
        if (ep->unix_path)
            sl__set_err(err, errlen, "redis: cannot connect to '%s': %s",
                        ep->unix_path, why);
        else
            sl__set_err(err, errlen, "redis: cannot connect to '%s:%d': %s",
                        ep->host, ep->port, why);
        sl__redis_conn_drop(conn);
        return SL_ESTORE;
    }
    if (redisSetTimeout(conn->ctx, tv) != REDIS_OK) {
        sl__set_err(err, errlen, "redis: cannot set timeout");
        sl__redis_conn_drop(conn);
        return SL_ESTORE;
    }
    if (ep->tls != NULL) {
        int rc = tls_handshake(conn, err, errlen);
        if (rc != 0) {
            sl__redis_conn_drop(conn);
            return rc;
        }
    }
    /* The script and the library are loaded once, for the SHA1 and to
     * know whether FCALL is served; later, after a restart or a flush,
     * the NOSCRIPT path (redis.c) loads the library again. */
    sl__redis_handshake_init(
        &hs, ep,
        (conn->with & SL__REDIS_CONN_BARE)
            ? 0
            : conn->with |
                  (conn->locate != NULL ? SL__REDIS_WITH_ROLE_CHECK : 0) |
                  (conn->sha[0] ? 0
                                : SL__REDIS_WITH_SCRIPT_LOAD |
                                      SL__REDIS_WITH_FUNCTION_LOAD));
    for (size_t i = 0; i < hs.n; i++) {
        int kind = hs.cmd[i].kind;
        redisReply *r = command(conn, hs.cmd[i].argc, hs.cmd[i].argv,
                                hs.cmd[i].lens, err, errlen);
        int rc = r == NULL ? conn->failure
                           : sl__redis_handshake_check(kind, r, conn->sha, err,
                                                       errlen);
        if (r != NULL)
            freeReplyObject(r);
        if (kind == SL__REDIS_CMD_FUNCTION_LOAD && rc >= 0) {
            conn->fcall = rc == 0; /* 1: refused, EVALSHA it is */
            rc = 0;
        }
        if (rc != 0) {
            sl__redis_conn_drop(conn);
            return rc;
        }
    }
    return 0;
}

redisReply *sl__redis_conn_command(sl__redis_conn *conn, int asking, int argc,
                                   const char *const *argv, const size_t *lens,
                                   char *err, size_t errlen)
{
    int rc = sl__redis_conn_connect(conn, err, errlen);
    if (rc != 0) {
        conn->failure = rc;
        return NULL;
    }
    return asking ? command_asking(conn, argc, argv, lens, err, errlen)
                  : command(conn, argc, argv, lens, err, errlen);
}
