/*
 * relay.c - the delay relay (relay.h).  Each accepted connection is a
 * pair of TCP handles; each direction a FIFO of chunks with the time
 * each may go, and one timer for the head.  A chunk's due time is the
 * later of (read + delay) and the previous chunk's, which keeps order.
 */
#include "lab/relay.h"

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

typedef struct chunk {
    struct chunk *next;
    uint64_t due_ms;
    size_t len;
    char data[];
} chunk;

typedef struct pair pair;

/* One direction: read from `from`, written to `to` once due. */
typedef struct way {
    pair *p;
    uv_tcp_t *from, *to;
    chunk *head, *tail;
    uint64_t last_due;
    uv_timer_t timer;
} way;

struct pair {
    lb_relay *r;
    uv_tcp_t down, up; /* the client's side, Redis's side */
    uv_connect_t connect;
    way to_up, to_down;
    int closing, open_handles;
};

struct lb_relay {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop;
    pthread_t thread;
    int upstream_port;
    atomic_uint delay_ms;
};

static void free_chunks(way *w)
{
    while (w->head) {
        chunk *c = w->head;
        w->head = c->next;
        free(c);
    }
}

/* Every handle of a pair has one of its ways as data. */
static void on_pair_close(uv_handle_t *h)
{
    pair *p = ((way *)h->data)->p;
    if (--p->open_handles == 0) {
        free_chunks(&p->to_up);
        free_chunks(&p->to_down);
        free(p);
    }
}

static void pair_close(pair *p)
{
    if (p->closing)
        return;
    p->closing = 1;
    uv_close((uv_handle_t *)&p->down, on_pair_close);
    uv_close((uv_handle_t *)&p->up, on_pair_close);
    uv_close((uv_handle_t *)&p->to_up.timer, on_pair_close);
    uv_close((uv_handle_t *)&p->to_down.timer, on_pair_close);
}

static void on_written(uv_write_t *w, int status)
{
    pair *p = w->data;
    free(w);
    if (status < 0)
        pair_close(p);
}

static void on_due(uv_timer_t *t);

/* Sends every chunk that is due, then arms the timer for the next. */
static void pump(way *w)
{
    lb_relay *r = w->p->r;
    uint64_t now = uv_now(&r->loop);
    while (w->head && w->head->due_ms <= now && !w->p->closing) {
        chunk *c = w->head;
        w->head = c->next;
        if (!w->head)
            w->tail = NULL;
        uv_write_t *req = malloc(sizeof(*req) + c->len);
        if (!req) {
            free(c);
            pair_close(w->p);
            return;
        }
        memcpy(req + 1, c->data, c->len);
        uv_buf_t b = uv_buf_init((char *)(req + 1), (unsigned)c->len);
        free(c);
        req->data = w->p;
        if (uv_write(req, (uv_stream_t *)w->to, &b, 1, on_written) != 0) {
            free(req);
            pair_close(w->p);
            return;
        }
    }
    if (w->head && !w->p->closing)
        uv_timer_start(&w->timer, on_due, w->head->due_ms - now, 0);
}

static void on_due(uv_timer_t *t)
{
    pump(t->data);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    chunk *c = malloc(sizeof(*c) + suggested);
    b->base = c ? c->data : NULL;
    b->len = c ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    way *w = s->data;
    chunk *c = b->base ? (chunk *)(b->base - offsetof(chunk, data)) : NULL;
    if (n <= 0) {
        free(c);
        if (n < 0)
            pair_close(w->p);
        return;
    }
    lb_relay *r = w->p->r;
    uint64_t due = uv_now(&r->loop) + atomic_load(&r->delay_ms);
    if (due < w->last_due)
        due = w->last_due;
    w->last_due = due;
    c->next = NULL;
    c->due_ms = due;
    c->len = (size_t)n;
    if (w->tail)
        w->tail->next = c;
    else
        w->head = c;
    w->tail = c;
    pump(w);
}

static void on_up_connect(uv_connect_t *req, int status)
{
    pair *p = req->data;
    if (status < 0 || p->closing) {
        pair_close(p);
        return;
    }
    uv_read_start((uv_stream_t *)&p->down, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&p->up, on_alloc, on_read);
}

static void way_init(pair *p, way *w, uv_tcp_t *from, uv_tcp_t *to)
{
    w->p = p;
    w->from = from;
    w->to = to;
    from->data = w;
    uv_timer_init(&p->r->loop, &w->timer);
    w->timer.data = w;
}

static void on_accept(uv_stream_t *server, int status)
{
    lb_relay *r = server->data;
    if (status < 0)
        return;
    pair *p = calloc(1, sizeof(*p));
    if (!p)
        return;
    p->r = r;
    uv_tcp_init(&r->loop, &p->down);
    uv_tcp_init(&r->loop, &p->up);
    way_init(p, &p->to_up, &p->down, &p->up);
    way_init(p, &p->to_down, &p->up, &p->down);
    p->open_handles = 4;
    /* The close callbacks find the pair through each handle's data. */
    p->down.data = &p->to_up;
    p->up.data = &p->to_down;
    if (uv_accept(server, (uv_stream_t *)&p->down) != 0) {
        pair_close(p);
        return;
    }
    uv_tcp_nodelay(&p->down, 1);
    uv_tcp_nodelay(&p->up, 1);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", r->upstream_port, &addr);
    p->connect.data = p;
    if (uv_tcp_connect(&p->connect, &p->up, (const struct sockaddr *)&addr,
                       on_up_connect) != 0)
        pair_close(p);
}

/* Pairs close whole; the listener and the async alone. */
static void close_all(uv_handle_t *h, void *arg)
{
    lb_relay *r = arg;
    if (uv_is_closing(h))
        return;
    if (h->type == UV_TCP && h != (uv_handle_t *)&r->listener) {
        pair_close(((way *)h->data)->p);
        return;
    }
    if (h->type != UV_TIMER)
        uv_close(h, NULL);
}

static void on_stop(uv_async_t *a)
{
    uv_walk(a->loop, close_all, a->data);
}

static void *relay_main(void *arg)
{
    lb_relay *r = arg;
    uv_run(&r->loop, UV_RUN_DEFAULT);
    return NULL;
}

lb_relay *lb_relay_start(int *port, int upstream_port)
{
    lb_relay *r = calloc(1, sizeof(*r));
    if (!r || uv_loop_init(&r->loop) != 0) {
        free(r);
        fprintf(stderr, "sluice lab: relay: out of memory\n");
        return NULL;
    }
    r->upstream_port = upstream_port;
    atomic_init(&r->delay_ms, 0);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", *port, &addr);
    uv_tcp_init(&r->loop, &r->listener);
    r->listener.data = r;
    int rc = uv_tcp_bind(&r->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&r->listener, 128, on_accept);
    struct sockaddr_in bound;
    int blen = sizeof(bound);
    if (rc == 0)
        rc = uv_tcp_getsockname(&r->listener, (struct sockaddr *)&bound, &blen);
    if (rc == 0)
        rc = uv_async_init(&r->loop, &r->stop, on_stop);
    r->stop.data = r;
    if (rc == 0)
        rc = pthread_create(&r->thread, NULL, relay_main, r) ? UV_ENOMEM : 0;
    if (rc != 0) {
        fprintf(stderr, "sluice lab: relay: %s\n", uv_strerror(rc));
        uv_close((uv_handle_t *)&r->listener, NULL);
        uv_run(&r->loop, UV_RUN_DEFAULT);
        uv_loop_close(&r->loop);
        free(r);
        return NULL;
    }
    *port = ntohs(bound.sin_port);
    return r;
}

void lb_relay_set_delay_ms(lb_relay *r, unsigned ms)
{
    atomic_store(&r->delay_ms, ms);
}

void lb_relay_stop(lb_relay *r)
{
    if (!r)
        return;
    uv_async_send(&r->stop);
    pthread_join(r->thread, NULL);
    uv_loop_close(&r->loop);
    free(r);
}
