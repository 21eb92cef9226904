/*
 * target.c - `sluice lab target` (target.h): one libuv loop, one
 * request at a time per connection (the proxy's upstream connections do
 * not pipeline; bytes of a next request wait in the connection's buffer
 * until the answer is written), a timer per request in service.
 */
#include "lab/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>
#include <uv.h>

#include "lab/queue.h"

#define READ_CAP 16384 /* bytes of requests held per connection */

typedef struct tconn tconn;

/* A request from its head until its answer is written; outlives its
 * connection when the client goes while it is in service. */
typedef struct treq {
    tconn *conn; /* NULL once the client has gone */
    uint64_t arrived_ns;
    int in_service;
    uv_timer_t timer;
} treq;

struct tconn {
    uv_tcp_t tcp;
    http_parser parser;
    char buf[READ_CAP];
    size_t len;     /* bytes in buf not yet parsed */
    treq *req;      /* the request being answered, or NULL */
    char path[256]; /* the request's URL, cut at the cap */
    size_t path_len;
    int closing;
};

typedef struct target {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_signal_t sigterm, sigint;
    lb_queue *q;
    int64_t base_mean_ns;
    uint32_t cap;
    http_parser_settings settings;
} target;

static target T;

static void on_close_conn(uv_handle_t *h)
{
    free(h->data);
}

static void on_close_timer(uv_handle_t *h)
{
    free(h->data);
}

static void conn_close(tconn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->req) {
        treq *r = c->req;
        r->conn = NULL;
        if (!r->in_service) {
            lb_queue_cancel(T.q, (uint64_t)(uintptr_t)r);
            uv_close((uv_handle_t *)&r->timer, on_close_timer);
        }
        c->req = NULL;
    }
    uv_close((uv_handle_t *)&c->tcp, on_close_conn);
}

static void on_write(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void parse_more(tconn *c);

/* Writes an answer (copied) and reads the next request, if any. */
static void answer(tconn *c, const char *data, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n < 0 && n != UV_EAGAIN) {
        conn_close(c);
        return;
    }
    if (n < 0)
        n = 0;
    if ((size_t)n < len) {
        uv_write_t *w = malloc(sizeof(*w) + len - (size_t)n);
        if (!w) {
            conn_close(c);
            return;
        }
        char *copy = (char *)(w + 1);
        memcpy(copy, data + n, len - (size_t)n);
        uv_buf_t rest = uv_buf_init(copy, (unsigned)(len - (size_t)n));
        if (uv_write(w, (uv_stream_t *)&c->tcp, &rest, 1, on_write) != 0) {
            free(w);
            conn_close(c);
            return;
        }
    }
    c->req = NULL;
    if (!http_should_keep_alive(&c->parser)) {
        conn_close(c);
        return;
    }
    http_parser_pause(&c->parser, 0);
    parse_more(c);
}

static void answer_served(treq *r)
{
    char head[160];
    uint64_t us = (uv_hrtime() - r->arrived_ns) / 1000;
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                     "X-Lab-B-Us: %llu\r\n\r\nok\n",
                     (unsigned long long)us);
    answer(r->conn, head, (size_t)n);
}

static void start_service(treq *r, int64_t service_ns);

static void on_served(uv_timer_t *t)
{
    treq *r = t->data;
    if (r->conn)
        answer_served(r);
    uv_close((uv_handle_t *)&r->timer, on_close_timer);
    uint64_t next;
    int64_t service_ns;
    if (lb_queue_depart(T.q, &next, &service_ns))
        start_service((treq *)(uintptr_t)next, service_ns);
}

/* The timer's whole ms, rounded up: a service is never cut short. */
static void start_service(treq *r, int64_t service_ns)
{
    r->in_service = 1;
    uv_timer_start(&r->timer, on_served,
                   (uint64_t)((service_ns + 999999) / 1000000), 0);
}

/* The body is 55 bytes. */
static const char SHED[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 55\r\n"
    "Content-Type: application/json\r\n\r\n"
    "{\"error\":{\"code\":\"overloaded\",\"message\":\"queue full\"}}\n";

static void answer_stats(tconn *c)
{
    lb_queue_stats st;
    lb_queue_stats_get(T.q, &st);
    lb_queue_reset_max(T.q);
    char body[320], msg[480];
    int bn = snprintf(
        body, sizeof(body),
        "{\"queue\":%u,\"max_queue\":%u,\"busy\":%u,"
        "\"arrived\":%llu,\"served\":%llu,\"shed\":%llu,"
        "\"cap\":%u,\"service_mean_us\":%lld}\n",
        st.waiting, st.max_waiting, st.busy, (unsigned long long)st.arrived,
        (unsigned long long)st.served, (unsigned long long)st.shed, T.cap,
        (long long)(lb_queue_mean(T.q) / 1000));
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n%s",
                     bn, body);
    answer(c, msg, (size_t)n);
}

static void answer_text(tconn *c, const char *status, const char *body)
{
    char msg[512];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     status, strlen(body), body);
    answer(c, msg, (size_t)n);
}

static void set_factor(tconn *c)
{
    const char *q = memchr(c->path, '?', c->path_len);
    char *end;
    double f = q && strncmp(q, "?factor=", 8) == 0 ? strtod(q + 8, &end) : 0;
    if (!(f > 0 && f <= 1000) || end != c->path + c->path_len) {
        answer_text(c, "400 Bad Request",
                    "{\"error\":{\"code\":\"bad_factor\",\"message\":"
                    "\"want ?factor=F, 0 < F <= 1000\"}}\n");
        return;
    }
    lb_queue_set_mean(T.q, (int64_t)((double)T.base_mean_ns * f));
    answer_text(c, "200 OK", "{\"ok\":true}\n");
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    tconn *c = p->data;
    size_t room = sizeof(c->path) - 1 - c->path_len;
    if (len > room)
        len = room;
    memcpy(c->path + c->path_len, at, len);
    c->path_len += len;
    c->path[c->path_len] = '\0';
    return 0;
}

static int on_message_begin(http_parser *p)
{
    tconn *c = p->data;
    c->path_len = 0;
    c->path[0] = '\0';
    return 0;
}

static int path_is(const tconn *c, const char *p)
{
    size_t n = strlen(p);
    return c->path_len >= n && memcmp(c->path, p, n) == 0 &&
           (c->path_len == n || c->path[n] == '?');
}

/* The message is whole: the parser pauses until it is answered
 * (parse_more() dispatches it). */
static int on_message_complete(http_parser *p)
{
    http_parser_pause(p, 1);
    return 0;
}

static void dispatch(tconn *c)
{
    if (path_is(c, "/lab/stats")) {
        answer_stats(c);
        return;
    }
    if (path_is(c, "/lab/service")) {
        set_factor(c);
        return;
    }
    treq *r = calloc(1, sizeof(*r));
    if (!r) {
        answer(c, SHED, sizeof(SHED) - 1);
        return;
    }
    r->conn = c;
    r->arrived_ns = uv_hrtime();
    uv_timer_init(T.loop, &r->timer);
    r->timer.data = r;
    c->req = r;
    int64_t service_ns;
    switch (lb_queue_arrive(T.q, (uint64_t)(uintptr_t)r, &service_ns)) {
    case LB_Q_SERVE:
        start_service(r, service_ns);
        break;
    case LB_Q_WAIT:
        break;
    default:
        uv_close((uv_handle_t *)&r->timer, on_close_timer);
        c->req = NULL;
        answer(c, SHED, sizeof(SHED) - 1);
    }
}

/* Parses what is buffered until a request is whole (then answers it) or
 * the bytes run out. */
static void parse_more(tconn *c)
{
    while (c->len > 0 && !c->req && !c->closing) {
        size_t used =
            http_parser_execute(&c->parser, &T.settings, c->buf, c->len);
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e != HPE_OK && e != HPE_PAUSED) {
            conn_close(c);
            return;
        }
        memmove(c->buf, c->buf + used, c->len - used);
        c->len -= used;
        if (e == HPE_PAUSED) {
            c->req = NULL;
            dispatch(c);
        }
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    tconn *c = h->data;
    b->base = c->buf + c->len;
    b->len = READ_CAP - c->len;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)b;
    tconn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    if (c->len == READ_CAP && c->req) {
        conn_close(c); /* a client pipelining past the cap */
        return;
    }
    parse_more(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    tconn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    uv_tcp_init(T.loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, on_close_conn);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    (void)s;
    uv_stop(T.loop);
}

/* At the end: connections and requests go with their handles. */
static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, h->data ? on_close_conn : NULL);
}

int lb_target_run(const lb_target_opts *o)
{
    memset(&T, 0, sizeof(T));
    T.loop = uv_default_loop();
    T.base_mean_ns = o->mean_service_ns;
    T.cap = o->cap;
    T.q = lb_queue_new(o->servers, o->cap, o->mean_service_ns, o->seed);
    if (!T.q) {
        fprintf(stderr, "sluice lab target: out of memory\n");
        return -1;
    }
    T.settings.on_message_begin = on_message_begin;
    T.settings.on_url = on_url;
    T.settings.on_message_complete = on_message_complete;
    struct sockaddr_in addr;
    int rc = uv_ip4_addr(o->host, o->port, &addr);
    uv_tcp_init(T.loop, &T.listener);
    if (rc == 0)
        rc = uv_tcp_bind(&T.listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&T.listener, 1024, on_connection);
    if (rc != 0) {
        fprintf(stderr, "sluice lab target: listen %s:%d: %s\n", o->host,
                o->port, uv_strerror(rc));
        lb_queue_free(T.q);
        return -1;
    }
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    uv_tcp_getsockname(&T.listener, (struct sockaddr *)&bound, &blen);
    fprintf(stderr, "sluice lab target: listening on %s:%d\n", o->host,
            ntohs(((struct sockaddr_in *)&bound)->sin_port));
    uv_signal_init(T.loop, &T.sigterm);
    uv_signal_start(&T.sigterm, on_signal, SIGTERM);
    uv_signal_init(T.loop, &T.sigint);
    uv_signal_start(&T.sigint, on_signal, SIGINT);
    uv_run(T.loop, UV_RUN_DEFAULT);
    uv_walk(T.loop, close_any, NULL);
    uv_run(T.loop, UV_RUN_DEFAULT);
    uv_loop_close(T.loop);
    lb_queue_free(T.q);
    return 0;
}
