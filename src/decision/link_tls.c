/*
 * link_tls.c - one hiredis async connection over TLS (rediss://) on a
 * thread's libuv loop.
 *
 * hiredis 0.14 (Debian 12's) has no TLS: it reads and writes its socket
 * itself.  So a TLS link keeps hiredis for what it is good at, the
 * command queue, the callbacks and the reply parser, and takes over the
 * bytes in hiredis's event hooks, as its libuv adapter would: the socket
 * is polled here, SSL_read's plain text is fed to hiredis's reader and
 * its callbacks run (redisProcessCallbacks), and its output buffer is
 * written with SSL_write.  A failure is handed back to hiredis as a
 * reader error, so that hiredis disconnects as it would on a broken
 * socket: every callback gets no reply, then the disconnect callback.
 *
 * The connection is "connected" for hiredis (the connect callback, the
 * flag) only after the handshake, so that a certificate the store's
 * context refuses is a failed connect, with its reason in errstr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "decision/layer.h"

/* Exported by hiredis 0.14 but not declared in its headers (1.x declares
 * it in async.h): parses what the reader holds and runs the callbacks. */
void redisProcessCallbacks(redisAsyncContext *ac);

typedef struct tls_link {
    uv_poll_t poll;
    redisAsyncContext *ac; /* NULL once hiredis has let go (cleanup) */
    SSL *ssl;
    int events;   /* the poll's */
    int wants;    /* the handshake's: UV_READABLE or UV_WRITABLE */
    int tcp_up;   /* connect(2) done */
    int open;     /* handshake done: hiredis's "connected" */
    int want_out; /* hiredis has bytes to write */
} tls_link;

static void poll_cb(uv_poll_t *p, int status, int events);

static void close_cb(uv_handle_t *h)
{
    tls_link *l = h->data;
    SSL_free(l->ssl);
    free(l);
}

/* The poll's events for the link's state. */
static void repoll(tls_link *l)
{
    int ev;
    if (l->ac == NULL)
        return;
    if (!l->tcp_up)
        ev = UV_WRITABLE;
    else if (!l->open)
        ev = l->wants;
    else /* a write that wants to read is served by reading anyway */
        ev = UV_READABLE | (l->want_out ? UV_WRITABLE : 0);
    if (ev != l->events) {
        l->events = ev;
        uv_poll_start(&l->poll, ev, poll_cb);
    }
}

/* The link is broken: hiredis is told as it tells itself, through an
 * error (here the reader's), and disconnects: callbacks, then the
 * disconnect (or, before the handshake, the connect) callback. */
static void fail(tls_link *l, const char *why)
{
    redisAsyncContext *ac = l->ac;
    redisContext *c = &ac->c;
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof(c->errstr), "%s", why);
    ac->err = c->err;
    ac->errstr = c->errstr;
    if (!l->open && ac->onConnect != NULL)
        ac->onConnect(ac, REDIS_ERR);
    c->reader->err = REDIS_ERR_IO;
    snprintf(c->reader->errstr, sizeof(c->reader->errstr), "%s", why);
    redisProcessCallbacks(ac); /* frees ac: cleanup() runs */
}

/* A session's failure as a message: why, and for a refused certificate,
 * what was wrong with it. */
static void fail_ssl(tls_link *l, int rc, const char *what)
{
    char err[sizeof(l->ac->c.errstr)];
    sl__tls_client_failed(l->ssl, rc, what, err, sizeof(err));
    fail(l, err);
}

/* Writes what hiredis has queued; 0, or -1 when the link failed. */
static int flush(tls_link *l)
{
    sds obuf = l->ac->c.obuf;
    while (sdslen(obuf) > 0) {
        int n = SSL_write(l->ssl, obuf, (int)sdslen(obuf));
        if (n <= 0) {
            int e = SSL_get_error(l->ssl, n);
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                repoll(l);
                return 0;
            }
            fail_ssl(l, n, "tls write");
            return -1;
        }
        sdsrange(obuf, n, -1);
    }
    l->want_out = 0;
    repoll(l);
    return 0;
}

static void handshake(tls_link *l)
{
    int rc = SSL_do_handshake(l->ssl);
    if (rc != 1) {
        int e = SSL_get_error(l->ssl, rc);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            l->wants = e == SSL_ERROR_WANT_READ ? UV_READABLE : UV_WRITABLE;
            repoll(l);
        } else
            fail_ssl(l, rc, "tls handshake");
        return;
    }
    l->open = 1;
    l->ac->c.flags |= REDIS_CONNECTED;
    if (l->ac->onConnect != NULL)
        l->ac->onConnect(l->ac, REDIS_OK);
    if (l->ac != NULL)
        flush(l);
}

/* Reads what the session has, then has hiredis parse it and call back:
 * the replies that came before a failure are answered first. */
static void receive(tls_link *l)
{
    char buf[16384], err[sizeof(l->ac->c.errstr)];
    for (;;) {
        int n = SSL_read(l->ssl, buf, (int)sizeof(buf));
        if (n <= 0) {
            int e = SSL_get_error(l->ssl, n);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                break;
            sl__tls_client_failed(l->ssl, n, "tls read", err, sizeof(err));
            redisProcessCallbacks(l->ac);
            if (l->ac != NULL)
                fail(l, err);
            return;
        }
        if (redisReaderFeed(l->ac->c.reader, buf, (size_t)n) != REDIS_OK) {
            fail(l, "out of memory");
            return;
        }
    }
    redisProcessCallbacks(l->ac);
}

/* The socket's pending error (reading it clears it), or 0. */
static int pending_error(tls_link *l)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(l->ac->c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    return err;
}

/* libuv reports an error on the socket (a reset, a refused connect) as
 * status UV_EBADF and stops the poll: what the socket says is the news,
 * and what was received before it is read first (a TLS alert, replies). */
static void poll_cb(uv_poll_t *p, int status, int events)
{
    tls_link *l = p->data;
    if (l->ac == NULL)
        return;
    if (status < 0) {
        l->events = 0;
        if (l->open)
            receive(l);
        if (l->ac != NULL) {
            int err = pending_error(l);
            fail(l, err != 0 ? strerror(err) : "connection lost");
        }
        return;
    }
    if (!l->tcp_up) {
        int err = pending_error(l);
        if (err != 0) {
            fail(l, strerror(err));
            return;
        }
        l->tcp_up = 1;
    }
    if (!l->open) {
        handshake(l);
        return;
    }
    if (events & UV_READABLE)
        receive(l);
    if (l->ac != NULL && (l->want_out || (events & UV_WRITABLE)))
        flush(l);
}

/* hiredis's hooks.  It asks for reads after every write and to stop
 * reading never (but at the end): reading is always on once open. */
static void add_read(void *priv)
{
    (void)priv;
}

static void del_read(void *priv)
{
    (void)priv;
}

static void add_write(void *priv)
{
    tls_link *l = priv;
    l->want_out = 1;
    repoll(l);
}

static void del_write(void *priv)
{
    (void)priv;
}

static void cleanup(void *priv)
{
    tls_link *l = priv;
    l->ac = NULL;
    uv_close((uv_handle_t *)&l->poll, close_cb);
}

static const sd_link_hooks tls_hooks = {add_read, del_read, add_write,
                                        del_write, cleanup};

int sd_link_tls_attach(redisAsyncContext *ac, uv_loop_t *loop,
                       const sl__tls_client *tls, const char *host)
{
    tls_link *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -1;
    if ((l->ssl = sl__tls_client_session(tls, ac->c.fd, host)) == NULL ||
        sd_link_hook(ac, loop, &l->poll, l, &tls_hooks) != 0) {
        SSL_free(l->ssl);
        free(l);
        return -1;
    }
    l->ac = ac;
    repoll(l);
    return 0;
}

void sd_link_tls_write_now(redisAsyncContext *ac)
{
    tls_link *l = ac->ev.data;
    if (l->open)
        flush(l);
}
