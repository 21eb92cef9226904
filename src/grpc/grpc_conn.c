/*
 * grpc_conn.c - the gRPC door of `sluice serve`: a connection accepted on
 * the thread's --grpc-listen socket is an HTTP/2 session (h2.c) on the
 * thread's libuv loop, its methods the Rate Limit Service and the health
 * check.  This file does the connection's I/O and its clock; the session
 * does the protocol.
 *
 * The connection's life (accept, caps, reading, output, close) is the
 * connection machine's (runtime/conn.c).  Reads land in the thread's
 * read buffer: nghttp2 keeps nothing of the bytes it is given, so the
 * buffer is free again when the read callback returns.  Output gathers
 * in the outbox and goes out in one write per round; while more than
 * SV_MAX_PENDING_OUTPUT bytes wait for the client to read, the session
 * is neither read nor asked for more (its answers wait inside nghttp2,
 * bounded by the streams it allows), until half of it is written.
 *
 * One timer per connection (deadline.c) serves every timeout: a
 * connection without streams is closed after --idle-timeout (with a
 * GOAWAY), a request must arrive whole within --read-timeout of its
 * HEADERS, a call's grpc-timeout ends it with DEADLINE_EXCEEDED, an
 * answer the peer does not take within --write-timeout (its window kept
 * shut) has its stream reset, a connection left with nothing but such
 * answers for --idle-timeout is closed, and on stop a draining
 * connection is closed after --read-timeout whatever is left.
 */
#include "grpc/grpc.h"
#include "http/respond.h"
#include "runtime/conn.h"

/* Streams a connection may have open at once (SETTINGS_MAX_CONCURRENT_
 * STREAMS); each holds at most one request message of --max-body-bytes. */
#define GR_MAX_STREAMS 100
/* The outbox's buffer is kept between rounds up to this size. */
#define KEEP_OUT (64 * 1024)

typedef struct gr_conn {
    sv_conn c;     /* first: the machine's connection is ours */
    gr_session *s; /* NULL once closing */
    uint64_t idle_at;  /* loop ms: closed then if still not busy */
    uint64_t drain_by; /* on stop: closed then, whatever is left */
    int failed; /* the session ended in error: close once written */
} gr_conn;

static const gr_method *const methods[] = {&gr_rls_method, &gr_health_method};

/* After anything happened: expire what is due, send what the session
 * has (as far as the client keeps up), close when it is over, and set
 * the reads and the timer. */
static void pump(gr_conn *c)
{
    if (c->s == NULL)
        return;
    const sv_config *cfg = &c->c.w->server->cfg;
    sv_outbox *ob = &c->c.ob;
    uint64_t now = uv_now(c->c.tcp.loop);
    uint64_t at = gr_session_expire(c->s, now);
    if (ob->pending < SV_MAX_PENDING_OUTPUT &&
        gr_session_send(c->s, SV_MAX_PENDING_OUTPUT - ob->pending) != 0)
        c->failed = 1;
    if (sv_conn_flush(&c->c) != 0)
        return;
    if ((c->failed || gr_session_done(c->s)) && ob->writes == 0) {
        sv_conn_close(&c->c);
        return;
    }
    if (ob->pending > SV_MAX_PENDING_OUTPUT || c->failed)
        sv_conn_set_reading(&c->c, 0);
    else if (ob->pending < SV_MAX_PENDING_OUTPUT / 2)
        sv_conn_set_reading(&c->c, 1);
    if (c->s == NULL)
        return; /* the socket failed */
    if (gr_session_busy(c->s) > 0)
        c->idle_at = 0;
    else if (c->idle_at == 0)
        c->idle_at = now + cfg->idle_timeout_ms;
    uint64_t times[] = {c->idle_at, c->drain_by};
    for (int i = 0; i < 2; i++)
        if (times[i] && (at == 0 || times[i] < at))
            at = times[i];
    if (at)
        sv_deadline_set(&c->c.timer, at > now ? at - now : 0);
    else
        sv_deadline_clear(&c->c.timer);
}

static void written(sv_conn *conn)
{
    pump((gr_conn *)conn);
}

static void on_read(sv_conn *conn, ssize_t nread, const char *data)
{
    gr_conn *c = (gr_conn *)conn;
    if (nread == 0 || c->s == NULL)
        return;
    if (nread < 0) {
        sv_conn_close(conn); /* its calls are given up */
        return;
    }
    sd_thread *dec = conn->w->dec;
    if (gr_session_recv(c->s, (const uint8_t *)data, (size_t)nread,
                        uv_now(conn->tcp.loop)) != 0)
        c->failed = 1; /* what nghttp2 queued (a GOAWAY) goes first */
    pump(c);
    /* Last: it may answer other waiting calls. */
    sd_flush(dec);
}

static void timeout(sv_conn *conn)
{
    gr_conn *c = (gr_conn *)conn;
    uint64_t now = uv_now(conn->tcp.loop);
    if (c->s == NULL)
        return;
    if (c->drain_by && now >= c->drain_by) {
        sv_conn_close(conn);
        return;
    }
    if (c->idle_at && now >= c->idle_at) {
        /* Streams left now only hold answers the peer never took (their
         * resets wait behind them too): nothing graceful can reach it. */
        if (gr_session_streams(c->s) > 0) {
            sv_conn_close(conn);
            return;
        }
        gr_session_drain(c->s); /* a GOAWAY, then the close */
    }
    pump(c);
}

static int conn_write(void *owner, const uint8_t *data, size_t len)
{
    gr_conn *c = owner;
    sv_buf_add(&c->c.ob.out, data, len);
    return c->c.ob.out.failed ? -1 : 0;
}

static void conn_wake(void *owner)
{
    pump(owner);
}

/* Calls still out are given up now: their waits could end before the
 * handles are freed. */
static void on_closing(sv_conn *conn)
{
    gr_conn *c = (gr_conn *)conn;
    gr_session_free(c->s);
    c->s = NULL;
}

static int on_open(sv_conn *conn, void *arg)
{
    (void)arg;
    gr_conn *c = (gr_conn *)conn;
    sv_worker *w = conn->w;
    const sv_config *cfg = &w->server->cfg;
    gr_session_config sc = {
        .methods = methods,
        .n_methods = 2,
        .ctx = w,
        .max_message_bytes = cfg->max_body_bytes,
        .max_header_bytes = cfg->max_header_bytes,
        .max_streams = GR_MAX_STREAMS,
        .read_timeout_ms = cfg->read_timeout_ms,
        .write_timeout_ms = cfg->write_timeout_ms,
    };
    gr_session_io io = {conn_write, conn_wake, c};
    if ((c->s = gr_session_new(&sc, &io)) == NULL)
        return -1;
    pump(c); /* the SETTINGS, and the reads */
    return 0;
}

/* gRPC over TLS is HTTP/2 chosen in ALPN, and nothing else. */
static const sv_tls_alpn alpn_h2 = {(const unsigned char *)"\x02h2", 3, 1};

/* The session weighs its own output (pump), and drains on stop. */
static const sv_conn_type gr_conn_type = {
    .size = sizeof(gr_conn),
    .keep_out = KEEP_OUT,
    .open = on_open,
    .read = on_read,
    .timeout = timeout,
    .written = written,
    .closing = on_closing,
    .alpn = &alpn_h2,
    .plaintext_answer = sv_http_plaintext_answer,
};

void gr_accept(sv_listener *l)
{
    sv_conn_accept(l->w, (uv_stream_t *)&l->tcp, &l->conns, &gr_conn_type,
                   NULL);
}

void gr_close_idle(sv_listener *l)
{
    uint64_t now = uv_now(&l->w->loop);
    for (sv_conn *conn = l->conns, *next; conn != NULL; conn = next) {
        next = conn->next;
        gr_conn *c = (gr_conn *)conn;
        if (!conn->opened) { /* still in its TLS handshake */
            sv_conn_close(conn);
            continue;
        }
        if (c->s == NULL)
            continue;
        c->drain_by = now + l->w->server->cfg.read_timeout_ms;
        gr_session_drain(c->s);
        pump(c);
    }
    if (sv_worker_quiet(l->w))
        sv_readers_close(&l->w->readers);
}
