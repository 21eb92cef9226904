/*
 * upstream.c - connections to the upstream: a per-thread pool of idle
 * keep-alive connections, connecting with a timeout, and the response
 * side (http-parser in HTTP_RESPONSE mode) handed to the client
 * connection piece by piece.
 *
 * An idle pooled connection keeps reading, so an upstream that closes it
 * is noticed and the connection dropped before it is handed out; the
 * race that remains (a close in flight while a request is written) gives
 * that request a 502, as in nginx without proxy_next_upstream.
 *
 * Timeouts: connect_timeout from the connect; then response_timeout from
 * the request's last byte to the response head, and between reads of the
 * response body.  Before the head: 504; after it, the client connection
 * is closed (its response cannot be completed).
 *
 * An https:// upstream (upstream_tls.c): the handshake is part of
 * connecting (within connect_timeout; a failure is a 502 naming it), and
 * then what is read goes through OpenSSL before the parser, and what is
 * written through it before the socket, on the same reads and writes and
 * with the same pending bytes as plain text.  A pooled connection keeps
 * its session.  Decrypted bytes may wait inside OpenSSL while the client
 * is behind; the socket will say nothing more of them, so resuming reads
 * them on the loop's next turn (tls_later).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* Largest response head accepted from the upstream. */
#define PX_MAX_RESPONSE_HEAD (64 * 1024)

struct px_up {
    uv_tcp_t tcp; /* first: a handle pointer is an upstream pointer */
    sv_deadline timer;
    uv_connect_t connect_req;
    sv_worker *w;
    px_client *client;      /* NULL when idle or failed */
    const px_up_events *ev; /* the client's */
    http_parser parser;
    sv_fields headers;
    sv_buf reason;
    int connected, req_sent, head_seen, keep_alive, informational;
    int in_pool, reading, message_done;
    int handles_open;
    size_t pending;
    px_tls tls;           /* an https:// upstream's; tls.ssl NULL: plain */
    sv_buf wire;          /* its records on their way to the socket */
    uv_timer_t tls_later; /* TLS: reads bytes OpenSSL kept while paused */
    uint64_t generation;  /* of the config it was opened by (reload.c) */
    px_up *prev, *next;   /* the idle pool */
};

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void write_cb(uv_write_t *req, int status);
static void tls_later_cb(uv_timer_t *t);

static void pool_remove(px_up *up)
{
    if (!up->in_pool)
        return;
    px_worker *pw = px_worker_of(up->w);
    if (up->prev)
        up->prev->next = up->next;
    else
        pw->idle = up->next;
    if (up->next)
        up->next->prev = up->prev;
    up->prev = up->next = NULL;
    up->in_pool = 0;
    pw->n_idle--;
}

static void free_cb(uv_handle_t *h)
{
    px_up *up = h->data;
    if (--up->handles_open > 0)
        return;
    sv_fields_release(&up->headers);
    sv_buf_release(&up->reason);
    sv_buf_release(&up->wire);
    px_tls_release(&up->tls);
    free(up);
}

/* TLS's close_notify, best effort: sent if the socket takes it now, and
 * only when nothing else waits to be written before it. */
static void tls_goodbye(px_up *up)
{
    px_tls_shutdown(&up->tls);
    up->wire.len = 0;
    if (up->pending == 0 && px_tls_take(&up->tls, &up->wire) == 0 &&
        up->wire.len > 0) {
        uv_buf_t b = uv_buf_init(up->wire.data, (unsigned)up->wire.len);
        (void)uv_try_write((uv_stream_t *)&up->tcp, &b, 1);
    }
}

static void up_close(px_up *up)
{
    if (uv_is_closing((uv_handle_t *)&up->tcp))
        return;
    pool_remove(up);
    up->client = NULL;
    if (up->tls.ssl != NULL) {
        tls_goodbye(up);
        uv_close((uv_handle_t *)&up->tls_later, free_cb);
    }
    uv_close((uv_handle_t *)&up->tcp, free_cb);
    uv_close((uv_handle_t *)&up->timer.timer, free_cb);
}

/* The request failed before a response began: the client answers. */
static void fail(px_up *up, int status, const char *message)
{
    px_client *c = up->client;
    up_close(up);
    if (c != NULL)
        up->ev->failed(c, status, message);
}

/* The upstream broke: 502 before the response head, else the client's
 * response is cut off. */
static void broken(px_up *up, const char *message)
{
    px_client *c = up->client;
    if (c != NULL && !up->head_seen) {
        fail(up, 502, message);
        return;
    }
    up_close(up);
    if (c != NULL)
        up->ev->broken(c);
}

/* Reads land in the thread's one read buffer, as conn.c's do: whatever
 * must outlive the callback is copied out by then. */
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    sv_worker *w = ((px_up *)h)->w;
    *buf = uv_buf_init(w->read_buf, sizeof(w->read_buf));
}

void px_upstream_pause(px_up *up, int paused)
{
    if (uv_is_closing((uv_handle_t *)&up->tcp) || up->reading == !paused)
        return;
    up->reading = !paused;
    if (paused) {
        uv_read_stop((uv_stream_t *)&up->tcp);
        return;
    }
    uv_read_start((uv_stream_t *)&up->tcp, alloc_cb, read_cb);
    /* Not read here: the caller may be in the middle of the response. */
    if (up->tls.ssl != NULL && up->tls.open && px_tls_buffered(&up->tls))
        uv_timer_start(&up->tls_later, tls_later_cb, 0, 0);
}

size_t px_upstream_pending(const px_up *up)
{
    return up->pending;
}

static void timer_cb(uv_timer_t *t)
{
    px_up *up = t->data;
    if (!up->connected)
        fail(up, 504, "upstream connect timeout");
    else if (up->tls.ssl != NULL && !up->tls.open)
        fail(up, 504, "upstream TLS handshake timeout");
    else if (!up->head_seen)
        fail(up, 504, "upstream response timeout");
    else
        broken(up, "upstream response timeout");
}

static int on_message_begin(http_parser *p)
{
    px_up *up = p->data;
    sv_fields_reset(&up->headers);
    up->reason.len = 0;
    up->reason.failed = 0;
    return 0;
}

static int on_status(http_parser *p, const char *at, size_t len)
{
    px_up *up = p->data;
    sv_buf_add(&up->reason, at, len);
    return up->reason.len > 256 || up->reason.failed ? -1 : 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    px_up *up = p->data;
    if (up->head_seen)
        return 0; /* trailers are not passed on */
    return sv_fields_name(&up->headers, at, len, PX_MAX_RESPONSE_HEAD);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    px_up *up = p->data;
    if (up->head_seen)
        return 0;
    return sv_fields_value(&up->headers, at, len, PX_MAX_RESPONSE_HEAD);
}

static int on_headers_complete(http_parser *p)
{
    px_up *up = p->data;
    if (up->client == NULL)
        return -1;
    if (p->status_code / 100 == 1) {
        /* 100 Continue and other interim answers: the client was
         * answered by the proxy already; a 101 was never asked for. */
        if (p->status_code == 101)
            return -1;
        up->informational = 1;
        return 0;
    }
    up->head_seen = 1;
    up->keep_alive = http_should_keep_alive(p);
    if (up->ev->head(up->client, p->status_code,
                     up->reason.data ? up->reason.data : "", up->reason.len,
                     &up->headers, p) != 0)
        return -1;
    return up->ev->method(up->client) == HTTP_HEAD ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    px_up *up = p->data;
    if (up->client == NULL || up->ev->body(up->client, at, len) != 0)
        return -1;
    if (up->ev->pending(up->client) > PX_MAX_PENDING)
        px_upstream_pause(up, 1);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    px_up *up = p->data;
    if (up->informational) {
        up->informational = 0;
        return 0;
    }
    up->message_done = 1;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_status = on_status,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* The response is complete: the client goes on, the connection back to
 * the pool when both sides allow it. */
static void finish(px_up *up, int extra_bytes)
{
    px_client *c = up->client;
    const px_config *cfg = px_config_of(up->w);
    px_worker *pw = px_worker_of(up->w);
    /* One opened by an older config may lead to an older upstream. */
    int reusable = up->keep_alive && up->req_sent && !extra_bytes &&
                   !up->w->stopping && pw->n_idle < cfg->pool_max &&
                   up->generation == pw->generation;
    up->client = NULL;
    sv_deadline_clear(&up->timer);
    if (reusable) {
        http_parser_init(&up->parser, HTTP_RESPONSE);
        up->parser.data = up;
        up->req_sent = up->head_seen = up->message_done = 0;
        up->in_pool = 1;
        up->prev = NULL;
        up->next = pw->idle;
        if (up->next)
            up->next->prev = up;
        pw->idle = up;
        pw->n_idle++;
        px_upstream_pause(up, 0);
    } else {
        up_close(up);
    }
    up->ev->done(c, reusable);
}

/* What the upstream said, as plain text (nread < 0: it ended). */
static void deliver(px_up *up, ssize_t nread, const char *data)
{
    if (up->client == NULL) {
        /* Idle in the pool: a close (or stray bytes) ends it. */
        if (nread != 0)
            up_close(up);
        return;
    }
    if (nread == 0) {
        return;
    }
    if (up->req_sent)
        sv_deadline_set(&up->timer, px_config_of(up->w)->response_timeout_ms);
    size_t done = 0, len = nread > 0 ? (size_t)nread : 0;
    /* At EOF, a length of 0 ends a body read to the close. */
    done = http_parser_execute(&up->parser, &settings, nread > 0 ? data : NULL,
                               len);
    if (uv_is_closing((uv_handle_t *)&up->tcp))
        return;
    if (up->message_done) {
        /* Bytes after the response, in this read or kept by OpenSSL:
         * the connection cannot be trusted with another request. */
        finish(up, done < len || nread < 0 ||
                       (up->tls.ssl != NULL && px_tls_buffered(&up->tls)));
        return;
    }
    if (nread < 0) {
        broken(up, "upstream closed the connection");
        return;
    }
    if (HTTP_PARSER_ERRNO(&up->parser) != HPE_OK || done != len)
        broken(up, "upstream sent a malformed response");
}

/* Sends the records OpenSSL has made, as px_upstream_write sends plain
 * text: 0, or -1 when the socket failed (the caller ends the
 * connection). */
static int tls_send(px_up *up)
{
    size_t left;
    int rc = 0;
    up->wire.len = 0;
    if (px_tls_take(&up->tls, &up->wire) != 0)
        return -1;
    if (up->wire.len > 0) {
        rc = sv_send((uv_stream_t *)&up->tcp, up->wire.data, up->wire.len,
                     up->pending > 0, up, write_cb, &left);
        if (rc == 0)
            up->pending += left;
    }
    if (up->wire.cap > PX_KEEP_OUT)
        sv_buf_release(&up->wire); /* a body's records: not kept */
    return rc;
}

/* The handshake is done: counted, and the client told. */
static void tls_opened(px_up *up)
{
    px_count_tls(up->w,
                 px_tls_resumed(&up->tls) ? PX_TLS_HS_RESUMED : PX_TLS_HS_NEW);
    sv_deadline_clear(&up->timer);
    up->ev->ready(up->client, up);
}

/* Moves what OpenSSL was fed: the handshake, then the response, as long
 * as the client keeps up (reading). */
static void tls_pump(px_up *up)
{
    char msg[200];
    if (!up->tls.open) {
        int rc = px_tls_handshake(&up->tls, msg, sizeof(msg));
        if (rc < 0) {
            px_count_tls(up->w, PX_TLS_HS_FAILED);
            tls_send(up); /* the alert, best effort */
            fail(up, 502, msg);
            return;
        }
        if (tls_send(up) != 0) {
            broken(up, "upstream write failed");
            return;
        }
        if (rc == 0)
            return;
        tls_opened(up);
        if (uv_is_closing((uv_handle_t *)&up->tcp))
            return;
    }
    char *buf = up->w->read_buf;
    while (up->reading && !uv_is_closing((uv_handle_t *)&up->tcp)) {
        int n = px_tls_read(&up->tls, buf, sizeof(up->w->read_buf), msg,
                            sizeof(msg));
        if (n == 0)
            break;
        if (n == PX_TLS_FAILED) {
            broken(up, msg);
            return;
        }
        deliver(up, n == PX_TLS_CLOSED ? UV_EOF : n, buf);
        if (n == PX_TLS_CLOSED)
            return;
    }
    /* Reading may have answered the upstream (a key update). */
    if (!uv_is_closing((uv_handle_t *)&up->tcp) && tls_send(up) != 0)
        broken(up, "upstream write failed");
}

static void tls_later_cb(uv_timer_t *t)
{
    px_up *up = t->data;
    if (!uv_is_closing((uv_handle_t *)&up->tcp))
        tls_pump(up);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    px_up *up = (px_up *)s;
    if (up->tls.ssl == NULL) {
        deliver(up, nread, buf->base);
        return;
    }
    if (nread < 0) {
        if (up->tls.open)
            deliver(up, nread, NULL); /* closed without a close_notify */
        else
            fail(up, 502, "upstream TLS: closed during the handshake");
        return;
    }
    if (nread == 0)
        return;
    if (px_tls_feed(&up->tls, buf->base, (size_t)nread) != 0) {
        broken(up, "out of memory");
        return;
    }
    tls_pump(up);
}

static void write_cb(uv_write_t *req, int status)
{
    sv_send_req *wr = (sv_send_req *)req;
    px_up *up = wr->owner;
    up->pending -= wr->len;
    free(wr);
    if (uv_is_closing((uv_handle_t *)&up->tcp))
        return;
    if (status < 0) {
        broken(up, "upstream write failed");
        return;
    }
    if (up->client != NULL && up->pending < PX_MAX_PENDING / 2)
        up->ev->drained(up->client);
}

/* One sv_send (send.c); bytes queued before are still in up->pending. */
int px_upstream_write(px_up *up, const void *data, size_t len)
{
    size_t left;
    if (up->tls.ssl != NULL) {
        if (uv_is_closing((uv_handle_t *)&up->tcp) ||
            px_tls_write(&up->tls, data, len) != 0)
            return -1;
        return tls_send(up);
    }
    if (uv_is_closing((uv_handle_t *)&up->tcp) ||
        sv_send((uv_stream_t *)&up->tcp, data, len, up->pending > 0, up,
                write_cb, &left) != 0)
        return -1;
    up->pending += left;
    return 0;
}

void px_upstream_request_sent(px_up *up)
{
    up->req_sent = 1;
    if (!up->head_seen)
        sv_deadline_set(&up->timer, px_config_of(up->w)->response_timeout_ms);
}

void px_upstream_abort(px_up *up)
{
    up_close(up);
}

static void connect_cb(uv_connect_t *req, int status)
{
    px_up *up = req->data;
    if (status == UV_ECANCELED || uv_is_closing((uv_handle_t *)&up->tcp))
        return;
    if (status < 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "upstream connect failed: %s",
                 uv_strerror(status));
        fail(up, 502, msg);
        return;
    }
    up->connected = 1;
    uv_tcp_nodelay(&up->tcp, 1);
    px_upstream_pause(up, 0);
    if (up->tls.ssl != NULL) {
        tls_pump(up); /* the ClientHello; connect_timeout still runs */
        return;
    }
    sv_deadline_clear(&up->timer);
    up->ev->ready(up->client, up);
}

void px_upstream_open(sv_worker *w, px_client *c, const px_up_events *ev)
{
    const px_config *cfg = px_config_of(w);
    px_worker *pw = px_worker_of(w);
    if (pw->pool_generation != pw->generation) {
        /* A new config: idle connections may lead to the old upstream,
         * and its TLS session was verified under the old settings. */
        px_upstream_close_idle(w);
        px_tls_forget(pw);
        pw->pool_generation = pw->generation;
    }
    px_up *up = pw->idle;
    if (up != NULL) {
        pool_remove(up);
        up->client = c;
        up->ev = ev;
        ev->ready(c, up);
        return;
    }
    up = calloc(1, sizeof(*up));
    if (up == NULL) {
        ev->failed(c, 502, "out of memory");
        return;
    }
    up->w = w;
    up->client = c;
    up->ev = ev;
    up->generation = pw->generation;
    if (cfg->tls != NULL &&
        px_tls_start(&up->tls, cfg, pw, up->generation) != 0) {
        free(up);
        ev->failed(c, 502, "out of memory");
        return;
    }
    uv_tcp_init(&w->loop, &up->tcp);
    sv_deadline_init(&w->loop, &up->timer, timer_cb);
    up->tcp.data = up->timer.timer.data = up->connect_req.data = up;
    up->handles_open = 2;
    if (up->tls.ssl != NULL) {
        uv_timer_init(&w->loop, &up->tls_later);
        up->tls_later.data = up;
        up->handles_open = 3;
    }
    http_parser_init(&up->parser, HTTP_RESPONSE);
    up->parser.data = up;
    sv_deadline_set(&up->timer, cfg->connect_timeout_ms);
    int rc = uv_tcp_connect(&up->connect_req, &up->tcp,
                            (const struct sockaddr *)&cfg->upstream_addr,
                            connect_cb);
    if (rc != 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "upstream connect failed: %s",
                 uv_strerror(rc));
        fail(up, 502, msg);
    }
}

void px_upstream_close_idle(sv_worker *w)
{
    px_worker *pw = px_worker_of(w);
    while (pw->idle != NULL)
        up_close(pw->idle);
}
