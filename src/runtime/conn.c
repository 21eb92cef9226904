/*
 * conn.c - the connection machine (conn.h): one accepted connection's
 * life, written once for every door.
 *
 * Handles: the socket and the deadline timer, and a door's own handle
 * (the proxy's queue timer) when it has one; the connection is freed in
 * the close callback of the last of them, so that no callback ever sees
 * freed memory.  A door's closing() runs when the close begins, since a
 * decision waiting on the store could end before the free.
 *
 * Reading: `want` is the door's wish, `paused` the backpressure of
 * output the client has not read; the socket is read when the one is
 * set and the other is not.  Lingering reads whatever comes and drops
 * it, whatever either says.
 *
 * TLS (tls.h): OpenSSL over two memory BIOs, so that every byte still
 * moves on the thread's loop through its reader and the outbox, with
 * their bounds, and no socket is ever read or written by OpenSSL.  What
 * is read is written to the read BIO, and what SSL_read gives back is
 * handed to the door in the thread's tls_buf; what the door puts in the
 * outbox is written to SSL_write, and the records it makes are sent in
 * its place.  The door opens once the handshake is done (a handshake
 * must be done within --read-timeout), and a first byte that cannot
 * begin a TLS record is plain text, answered in plain text by the door's
 * plaintext_answer.  Decrypted bytes may wait inside OpenSSL while the
 * door does not read; the socket has nothing more to say of them, so
 * turning reading on queues the connection to be read before the loop
 * next polls (sv_conn_tls_resume).
 */
#include <arpa/inet.h>
#include <stdlib.h>

#include <openssl/err.h>

#include "runtime/conn.h"

static void free_cb(uv_handle_t *h)
{
    sv_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    sv_worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        *c->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sv_buf_release(&c->ob.out);
    sv_buf_release(&c->tls_out);
    if (c->tls_todo) /* rare: gone while its bytes waited */
        for (sv_conn **p = &w->tls_todo; *p != NULL; p = &(*p)->tls_next)
            if (*p == c) {
                *p = c->tls_next;
                break;
            }
    SSL_free(c->ssl);
    if (c->opened && c->type->release != NULL)
        c->type->release(c);
    sv_unaccept(w->server, &c->tcp);
    free(c);
    if (w->stopping && sv_worker_quiet(w))
        sv_readers_close(&w->readers);
}

int sv_conn_gone(const sv_conn *c)
{
    return uv_is_closing((const uv_handle_t *)&c->tcp);
}

static int tls_send(sv_conn *c);

/* TLS's close_notify, once, best effort: it goes out with what is
 * written now. */
static void tls_shutdown(sv_conn *c)
{
    if (c->ssl == NULL || !c->tls_open || c->tls_shut)
        return;
    c->tls_shut = 1;
    if (SSL_shutdown(c->ssl) >= 0)
        tls_send(c);
    ERR_clear_error();
}

void sv_conn_close(sv_conn *c)
{
    if (sv_conn_gone(c))
        return;
    tls_shutdown(c);
    c->closing = 1;
    if (c->opened && c->type->closing != NULL)
        c->type->closing(c);
    c->handles_open = c->extra != NULL ? 3 : 2;
    uv_close((uv_handle_t *)&c->tcp, free_cb);
    uv_close((uv_handle_t *)&c->timer.timer, free_cb);
    if (c->extra != NULL)
        uv_close(c->extra, free_cb);
}

/* The socket read or not, as the door wants and the client's reading
 * of its output allows. */
static void apply_reading(sv_conn *c)
{
    int on = c->want && !c->paused;
    if (sv_reader_set(&c->reader, on) != 0) {
        sv_conn_close(c);
        return;
    }
    if (on && c->ssl != NULL && c->tls_open && !c->tls_todo &&
        (SSL_pending(c->ssl) > 0 ||
         BIO_ctrl_pending(SSL_get_rbio(c->ssl)) > 0)) {
        c->tls_todo = 1;
        c->tls_next = c->w->tls_todo;
        c->w->tls_todo = c;
    }
}

void sv_conn_set_reading(sv_conn *c, int on)
{
    c->want = on;
    if (c->lingering != 2 && !sv_conn_gone(c))
        apply_reading(c);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)req; /* the read side decides when to close */
    (void)status;
}

/* Everything is written: close, or linger first. */
static void end(sv_conn *c)
{
    if (c->lingering == 2)
        return; /* lingering already */
    tls_shutdown(c);
    if (!c->lingering || c->reader.eof ||
        uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, shutdown_cb) != 0) {
        sv_conn_close(c);
        return;
    }
    c->lingering = 2;
    sv_deadline_set(&c->timer, SV_LINGER_MS);
    if (sv_reader_set(&c->reader, 1) != 0)
        sv_conn_close(c);
}

/* With nothing left to write: done with the connection?  On stop, one
 * that has no request in hand is. */
static int finished(sv_conn *c)
{
    return c->closing ||
           (c->w->stopping && c->type->idle != NULL && c->type->idle(c));
}

void sv_conn_finish(sv_conn *c, int linger)
{
    if (sv_conn_gone(c))
        return;
    c->closing = 1;
    c->lingering |= linger;
    if (c->lingering != 2)
        sv_conn_set_reading(c, 0);
    if (c->ob.writes == 0 && c->ob.out.len == 0)
        end(c);
}

static void write_cb(uv_write_t *req, int status)
{
    sv_conn *c = ((sv_send_req *)req)->owner;
    sv_outbox_written(&c->ob, req);
    if (sv_conn_gone(c))
        return;
    if (status < 0) {
        sv_conn_close(c);
        return;
    }
    if (c->ob.writes == 0 && finished(c)) {
        end(c);
        return;
    }
    if (c->type->written != NULL) {
        c->type->written(c);
        if (sv_conn_gone(c))
            return;
    }
    if (c->paused && c->ob.pending < c->type->max_pending / 2) {
        c->paused = 0;
        apply_reading(c);
    }
}

/* Sends the records OpenSSL has made: the outbox sends them as it sends
 * plain text (its `out` swapped for tls_out meanwhile), so writes,
 * pending bytes and backpressure count what goes on the wire.  0, or -1
 * when the socket failed (the caller closes). */
static int tls_send(sv_conn *c)
{
    BIO *wbio = SSL_get_wbio(c->ssl);
    if (BIO_ctrl_pending(wbio) == 0)
        return 0;
    sv_buf plain = c->ob.out;
    c->ob.out = c->tls_out;
    char chunk[16 * 1024];
    int n;
    while ((n = BIO_read(wbio, chunk, sizeof(chunk))) > 0)
        sv_buf_add(&c->ob.out, chunk, (size_t)n);
    int rc = c->ob.out.failed ||
                     sv_outbox_flush(&c->ob, (uv_stream_t *)&c->tcp, c,
                                     write_cb, c->type->keep_out) != 0
                 ? -1
                 : 0;
    c->tls_out = c->ob.out;
    c->ob.out = plain;
    return rc;
}

/* The door's plain text into records, and the records sent: 0, or -1
 * (the caller closes). */
static int tls_write(sv_conn *c)
{
    if (!c->tls_open)
        return 0; /* sent once the handshake is done */
    if (c->ob.out.len > 0) {
        if (SSL_write(c->ssl, c->ob.out.data, (int)c->ob.out.len) <= 0) {
            ERR_clear_error();
            return -1;
        }
        c->ob.out.len = 0;
        if (c->ob.out.cap > c->type->keep_out)
            sv_buf_release(&c->ob.out);
    }
    return tls_send(c);
}

int sv_conn_flush(sv_conn *c)
{
    if (sv_conn_gone(c))
        return -1;
    if (c->ssl != NULL ? tls_write(c) != 0
                       : c->ob.out.len > 0 &&
                             sv_outbox_flush(&c->ob, (uv_stream_t *)&c->tcp,
                                             c, write_cb,
                                             c->type->keep_out) != 0) {
        sv_conn_close(c);
        return -1;
    }
    if (c->ob.writes == 0) {
        if (finished(c))
            end(c);
        return sv_conn_gone(c) ? -1 : 0;
    }
    if (c->type->max_pending > 0 && !c->closing && !c->paused &&
        c->ob.pending > c->type->max_pending) {
        c->paused = 1;
        apply_reading(c);
    }
    return 0;
}

static void timer_cb(uv_timer_t *t)
{
    sv_conn *c = t->data;
    if (c->lingering == 2) {
        sv_conn_close(c); /* lingered long enough */
    } else if (c->ssl != NULL && !c->tls_open) {
        sv_tls_count(c->tls, SV_TLS_TIMEOUT);
        sv_conn_close(c);
    } else {
        c->type->timeout(c);
    }
}

/* The door opens: at once, or after the handshake under TLS.  0, or -1
 * when it refused (the connection is closed). */
static int open_door(sv_conn *c)
{
    c->opened = 1;
    if (c->type->open != NULL && c->type->open(c, c->open_arg) != 0) {
        sv_conn_close(c);
        return -1;
    }
    return sv_conn_gone(c) ? -1 : 0;
}

/* A handshake failed: the alert goes, then the connection. */
static void tls_failed(sv_conn *c, int result)
{
    sv_tls_count(c->tls, result);
    ERR_clear_error();
    if (tls_send(c) != 0) {
        sv_conn_close(c);
        return;
    }
    sv_conn_finish(c, 0);
}

/* Moves what the read BIO holds through OpenSSL: the handshake, then the
 * door's plain text, as long as the door reads. */
static void tls_pump(sv_conn *c)
{
    SSL *ssl = c->ssl;
    if (!c->tls_open) {
        int rc = SSL_do_handshake(ssl);
        if (rc != 1) {
            int e = SSL_get_error(ssl, rc);
            if (e == SSL_ERROR_WANT_READ) {
                if (tls_send(c) != 0)
                    sv_conn_close(c);
                return;
            }
            tls_failed(c, e == SSL_ERROR_SSL ? sv_tls_failure(ssl)
                                             : SV_TLS_ERROR);
            return;
        }
        c->tls_open = 1;
        sv_tls_count(c->tls, SV_TLS_OK);
        sv_deadline_set(&c->timer, c->w->server->cfg.idle_timeout_ms);
        if (tls_send(c) != 0 || open_door(c) != 0) {
            sv_conn_close(c);
            return;
        }
        if (sv_conn_flush(c) != 0) /* what the door wrote on opening */
            return;
    }
    char *buf = c->w->tls_buf;
    BIO *rbio = SSL_get_rbio(ssl);
    while (c->want && !c->paused && !sv_conn_gone(c) && c->lingering != 2) {
        /* Nothing left to decrypt: an SSL_read would only say so, and
         * OpenSSL 3.0 takes a few thousand instructions to. */
        if (SSL_pending(ssl) == 0 && BIO_ctrl_pending(rbio) == 0)
            break;
        int n = SSL_read(ssl, buf, (int)sizeof(c->w->tls_buf));
        if (n > 0) {
            c->type->read(c, n, buf);
            continue;
        }
        int e = SSL_get_error(ssl, n);
        if (e == SSL_ERROR_WANT_READ)
            break;
        ERR_clear_error();
        if (e == SSL_ERROR_ZERO_RETURN) { /* the client's close_notify */
            c->reader.eof = 1;
            c->type->read(c, UV_EOF, NULL);
        } else {
            sv_conn_close(c); /* a bad record: nothing more can be read */
        }
        return;
    }
    if (!sv_conn_gone(c) && tls_send(c) != 0)
        sv_conn_close(c);
}

/* Bytes from a TLS client. */
static void tls_read(sv_conn *c, ssize_t nread, const char *data)
{
    if (nread < 0) {
        if (c->tls_open)
            c->type->read(c, nread, NULL);
        else
            sv_conn_close(c); /* gone before the handshake was done */
        return;
    }
    if (nread == 0)
        return;
    if (!c->tls_open && BIO_ctrl_pending(SSL_get_rbio(c->ssl)) == 0 &&
        SSL_in_before(c->ssl) && (unsigned char)data[0] != 0x16) {
        /* Not a handshake record: plain text, answered so. */
        sv_tls_count(c->tls, SV_TLS_PLAINTEXT);
        SSL_free(c->ssl);
        c->ssl = NULL;
        if (c->type->plaintext_answer != NULL)
            sv_buf_addstr(&c->ob.out, c->type->plaintext_answer);
        sv_conn_finish(c, 1);
        sv_conn_flush(c);
        return;
    }
    if (BIO_write(SSL_get_rbio(c->ssl), data, (int)nread) != (int)nread) {
        sv_conn_close(c);
        return;
    }
    tls_pump(c);
}

void sv_conn_tls_resume(sv_worker *w)
{
    while (w->tls_todo != NULL) {
        sv_conn *c = w->tls_todo;
        w->tls_todo = c->tls_next;
        c->tls_todo = 0;
        if (!sv_conn_gone(c))
            tls_pump(c);
    }
}

static void read_cb(sv_reader *r, ssize_t nread, const char *data)
{
    sv_conn *c = (sv_conn *)((char *)r - offsetof(sv_conn, reader));
    if (nread < 0)
        r->eof = 1;
    if (c->lingering == 2) { /* the answer is out: drop what comes */
        if (nread < 0)
            sv_conn_close(c);
        return;
    }
    if (c->ssl != NULL)
        tls_read(c, nread, data);
    else
        c->type->read(c, nread, data);
}

/* The TLS of the listener a client came to: the HTTP listener's, or a
 * door's (a door's listener begins with its socket, and points at its
 * door among cfg.doors). */
static sv_tls_listener *listener_tls(sv_worker *w, uv_stream_t *listener)
{
    sv_server *s = w->server;
    if (listener == (uv_stream_t *)&w->listener)
        return &s->tls_at[0];
    return &s->tls_at[1 + (((sv_listener *)listener)->door - s->cfg.doors)];
}

sv_conn *sv_conn_accept(sv_worker *w, uv_stream_t *listener, sv_conn **list,
                        const sv_conn_type *t, void *arg)
{
    sv_conn *c = calloc(1, t->size);
    if (c == NULL)
        return NULL;
    c->w = w;
    c->type = t;
    c->list = list;
    uv_tcp_init(&w->loop, &c->tcp);
    sv_deadline_init(&w->loop, &c->timer, timer_cb);
    c->tcp.data = c->timer.timer.data = c;
    c->next = *list;
    if (c->next)
        c->next->prev = c;
    *list = c;
    if (sv_accept(w->server, listener, &c->tcp) != 0) {
        sv_conn_close(c); /* over a cap: a prompt close */
        return NULL;
    }
    sv_deadline_set(&c->timer, w->server->cfg.idle_timeout_ms);
    c->want = 1;
    if (sv_reader_start(&w->readers, &c->reader, &c->tcp, read_cb) != 0) {
        sv_conn_close(c);
        return NULL;
    }
    c->open_arg = arg;
    c->tls = listener_tls(w, listener);
    if (c->tls->tls != NULL) { /* the door opens after the handshake */
        if ((c->ssl = sv_tls_session(c->tls->tls, t->alpn)) == NULL) {
            sv_conn_close(c);
            return NULL;
        }
        sv_deadline_set(&c->timer, w->server->cfg.read_timeout_ms);
        return c;
    }
    return open_door(c) == 0 ? c : NULL;
}

void sv_conn_close_idle(sv_worker *w, sv_conn **list)
{
    for (sv_conn *c = *list, *next; c != NULL; c = next) {
        next = c->next;
        if (c->type->idle != NULL && c->type->idle(c))
            sv_conn_close(c);
    }
    if (sv_worker_quiet(w))
        sv_readers_close(&w->readers);
}

int sv_conn_peer(sv_conn *c, char *buf, size_t len, int *loopback)
{
    struct sockaddr_storage ss;
    int n = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) != 0)
        return -1;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)len);
        *loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)len);
        *loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
        return 0;
    }
    return -1;
}
