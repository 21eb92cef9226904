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
 */
#include <arpa/inet.h>
#include <stdlib.h>

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

void sv_conn_close(sv_conn *c)
{
    if (sv_conn_gone(c))
        return;
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
    if (sv_reader_set(&c->reader, c->want && !c->paused) != 0)
        sv_conn_close(c);
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

int sv_conn_flush(sv_conn *c)
{
    if (sv_conn_gone(c))
        return -1;
    if (c->ob.out.len > 0 &&
        sv_outbox_flush(&c->ob, (uv_stream_t *)&c->tcp, c, write_cb,
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
    if (c->lingering == 2)
        sv_conn_close(c); /* lingered long enough */
    else
        c->type->timeout(c);
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
    c->type->read(c, nread, data);
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
    c->opened = 1;
    if (t->open != NULL && t->open(c, arg) != 0) {
        sv_conn_close(c);
        return NULL;
    }
    return sv_conn_gone(c) ? NULL : c;
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
