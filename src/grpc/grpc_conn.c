/*
 * grpc_conn.c - the gRPC door of `sluice serve`: a connection accepted on
 * the thread's --grpc-listen socket is an HTTP/2 session (h2.c) on the
 * thread's libuv loop, its methods the Rate Limit Service and the health
 * check.  This file does the connection's I/O and its clock; the session
 * does the protocol.
 *
 * Reads use libuv's own (uv_read_start) into the thread's read buffer:
 * nghttp2 keeps nothing of the bytes it is given, so the buffer is free
 * again when the read callback returns.  Output gathers in an outbox
 * (send.c) and goes out in one write per round; while more than
 * SV_MAX_PENDING_OUTPUT bytes wait for the client to read, the session
 * is neither read nor asked for more (its answers wait inside nghttp2,
 * bounded by the streams it allows), until half of it is written.
 *
 * One timer per connection (deadline.c) serves every timeout: a
 * connection without streams is closed after --idle-timeout (with a
 * GOAWAY), a request must arrive whole within --read-timeout of its
 * HEADERS, a call's grpc-timeout ends it with DEADLINE_EXCEEDED, and on
 * stop a draining connection is closed after --read-timeout whatever is
 * left.
 */
#include <stdlib.h>

#include "grpc/grpc.h"
#include "runtime/deadline.h"
#include "runtime/send.h"

/* Streams a connection may have open at once (SETTINGS_MAX_CONCURRENT_
 * STREAMS); each holds at most one request message of --max-body-bytes. */
#define GR_MAX_STREAMS 100
/* The outbox's buffer is kept between rounds up to this size. */
#define KEEP_OUT (64 * 1024)

typedef struct gr_conn gr_conn;
struct gr_conn {
    uv_tcp_t tcp; /* first: a handle pointer is a conn pointer */
    sv_deadline timer;
    sv_listener *l;
    gr_session *s; /* NULL once closing */
    sv_outbox ob;
    uint64_t idle_at;  /* loop ms: closed then if still without streams */
    uint64_t drain_by; /* on stop: closed then, whatever is left */
    int handles_open;
    int reading;
    int failed; /* the session ended in error: close once written */
    gr_conn *prev, *next;
};

static const gr_method *const methods[] = {&gr_rls_method, &gr_health_method};

static void free_cb(uv_handle_t *h)
{
    gr_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    sv_listener *l = c->l;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sv_buf_release(&c->ob.out);
    sv_unaccept(l->w->server, &c->tcp);
    free(c);
}

static void conn_close(gr_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    /* Calls still out are given up now: their waits could end before
     * the handles are freed. */
    gr_session_free(c->s);
    c->s = NULL;
    uv_close((uv_handle_t *)&c->tcp, free_cb);
    uv_close((uv_handle_t *)&c->timer.timer, free_cb);
}

static void alloc_cb(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    (void)size;
    sv_worker *w = ((gr_conn *)h->data)->l->w;
    *buf = uv_buf_init(w->read_buf, sizeof(w->read_buf));
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void set_reading(gr_conn *c, int on)
{
    if (on == c->reading)
        return;
    c->reading = on;
    if (on ? uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb)
           : uv_read_stop((uv_stream_t *)&c->tcp))
        conn_close(c);
}

static void write_cb(uv_write_t *req, int status);

/* After anything happened: expire what is due, send what the session
 * has (as far as the client keeps up), close when it is over, and set
 * the reads and the timer. */
static void pump(gr_conn *c)
{
    if (c->s == NULL)
        return;
    const sv_config *cfg = &c->l->w->server->cfg;
    uint64_t now = uv_now(c->tcp.loop);
    uint64_t at = gr_session_expire(c->s, now);
    if (c->ob.pending < SV_MAX_PENDING_OUTPUT &&
        gr_session_send(c->s, SV_MAX_PENDING_OUTPUT - c->ob.pending) != 0)
        c->failed = 1;
    if (c->ob.out.len > 0 && sv_outbox_flush(&c->ob, (uv_stream_t *)&c->tcp, c,
                                             write_cb, KEEP_OUT) != 0) {
        conn_close(c);
        return;
    }
    if ((c->failed || gr_session_done(c->s)) && c->ob.writes == 0) {
        conn_close(c);
        return;
    }
    if (c->ob.pending > SV_MAX_PENDING_OUTPUT || c->failed)
        set_reading(c, 0);
    else if (c->ob.pending < SV_MAX_PENDING_OUTPUT / 2)
        set_reading(c, 1);
    if (c->s == NULL)
        return; /* the socket failed */
    if (gr_session_streams(c->s) > 0)
        c->idle_at = 0;
    else if (c->idle_at == 0)
        c->idle_at = now + cfg->idle_timeout_ms;
    uint64_t times[] = {c->idle_at, c->drain_by};
    for (int i = 0; i < 2; i++)
        if (times[i] && (at == 0 || times[i] < at))
            at = times[i];
    if (at)
        sv_deadline_set(&c->timer, at > now ? at - now : 0);
    else
        sv_deadline_clear(&c->timer);
}

static void write_cb(uv_write_t *req, int status)
{
    gr_conn *c = ((sv_send_req *)req)->owner;
    sv_outbox_written(&c->ob, req);
    if (status < 0)
        conn_close(c);
    else
        pump(c);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    gr_conn *c = stream->data;
    if (nread == 0 || c->s == NULL)
        return;
    if (nread < 0) {
        conn_close(c); /* its calls are given up */
        return;
    }
    if (gr_session_recv(c->s, (const uint8_t *)buf->base, (size_t)nread,
                        uv_now(stream->loop)) != 0)
        c->failed = 1; /* what nghttp2 queued (a GOAWAY) goes first */
    sv_worker *w = c->l->w;
    pump(c);
    /* Last: it may answer other waiting calls. */
    sd_flush(w->dec);
}

static void timer_cb(uv_timer_t *t)
{
    gr_conn *c = t->data;
    uint64_t now = uv_now(t->loop);
    if (c->s == NULL)
        return;
    if (c->drain_by && now >= c->drain_by) {
        conn_close(c);
        return;
    }
    if (c->idle_at && now >= c->idle_at && gr_session_streams(c->s) == 0)
        gr_session_drain(c->s); /* a GOAWAY, then the close */
    pump(c);
}

static int conn_write(void *owner, const uint8_t *data, size_t len)
{
    gr_conn *c = owner;
    sv_buf_add(&c->ob.out, data, len);
    return c->ob.out.failed ? -1 : 0;
}

static void conn_wake(void *owner)
{
    pump(owner);
}

void gr_accept(sv_listener *l)
{
    sv_worker *w = l->w;
    sv_server *srv = w->server;
    gr_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->l = l;
    uv_tcp_init(&w->loop, &c->tcp);
    sv_deadline_init(&w->loop, &c->timer, timer_cb);
    c->tcp.data = c->timer.timer.data = c;
    c->handles_open = 2;
    c->next = l->conns;
    if (c->next)
        c->next->prev = c;
    l->conns = c;
    if (sv_accept(srv, (uv_stream_t *)&l->tcp, &c->tcp) != 0) {
        conn_close(c); /* over --max-connections: a prompt close */
        return;
    }
    gr_session_config sc = {
        .methods = methods,
        .n_methods = 2,
        .ctx = w,
        .max_message_bytes = srv->cfg.max_body_bytes,
        .max_header_bytes = srv->cfg.max_header_bytes,
        .max_streams = GR_MAX_STREAMS,
        .read_timeout_ms = srv->cfg.read_timeout_ms,
    };
    gr_session_io io = {conn_write, conn_wake, c};
    if ((c->s = gr_session_new(&sc, &io)) == NULL) {
        conn_close(c);
        return;
    }
    pump(c); /* the SETTINGS, and the reads */
}

void gr_close_idle(sv_listener *l)
{
    uint64_t now = uv_now(&l->w->loop);
    for (gr_conn *c = l->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->s == NULL)
            continue;
        c->drain_by = now + l->w->server->cfg.read_timeout_ms;
        gr_session_drain(c->s);
        pump(c);
    }
}
