/*
 * load.c - `sluice lab load` (load.h): one libuv loop, a 1 ms timer that
 * sends every arrival due, connections kept per target in idle lists.
 */
#include "lab/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include <http_parser.h>
#include <uv.h>

#include "lab/hist.h"

#define RING 64 /* seconds of results held; > timeout + flush lag */

const char lb_load_csv_header[] =
    "t,class,offered,ok,r429,r503,r5xx,errors,lat_mean_ms,lat_p50_ms,"
    "lat_p99_ms,b_p50_ms,b_p99_ms,overhead_mean_ms,lat_hist,b_hist";

typedef struct cls_stats {
    uint64_t offered, ok, r429, r503, r5xx, errors;
    double overhead_us; /* sum over ok answers with X-Lab-B-Us */
    uint64_t overhead_n;
    lb_hist lat; /* allowed (2xx) requests, from the intended send */
    lb_hist b;   /* their X-Lab-B-Us */
} cls_stats;

typedef struct slot {
    int64_t sec; /* -1: empty */
    cls_stats c[LB_MAX_CLASSES];
} slot;

typedef struct lconn lconn;
struct lconn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    http_parser parser;
    lconn *next, *prev; /* in its target's idle list, or the busy list */
    int target;
    int busy, closing;
    /* The request in flight. */
    int cls;
    int64_t intended_ns; /* from t0 */
    int64_t b_us;        /* -1 until X-Lab-B-Us is read */
    int last, match;     /* header parsing: see on_header_field() */
    char field[16];
    size_t field_len;
    char req[256];
    size_t req_len;
    char rbuf[8192];
};

typedef struct load {
    const lb_load_opts *o;
    uv_loop_t *loop;
    uv_timer_t tick, flush;
    uv_signal_t sigterm, sigint;
    lb_schedule *sched;
    uint64_t t0;
    int group_class[LB_MAX_GROUPS];
    char classes[LB_MAX_CLASSES][LB_CLASS_NAME];
    int n_classes;
    lconn idle[LB_MAX_TARGETS]; /* list heads */
    lconn busy;
    uint32_t conns;
    uint64_t sent, rr;
    slot *ring;
    int64_t flushed_to; /* seconds below are written */
    FILE *out;
    int stopping;
    http_parser_settings settings;
} load;

static load L;

static void list_init(lconn *h)
{
    h->next = h->prev = h;
}

static void list_remove(lconn *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->next = c->prev = c;
}

static void list_push(lconn *h, lconn *c)
{
    c->next = h->next;
    c->prev = h;
    h->next->prev = c;
    h->next = c;
}

static void write_slot(slot *s)
{
    for (int k = 0; k < L.n_classes; k++) {
        cls_stats *c = &s->c[k];
        fprintf(L.out,
                "%lld,%s,%llu,%llu,%llu,%llu,%llu,%llu,%.3f,%.3f,%.3f,%.3f,"
                "%.3f,%.3f,",
                (long long)s->sec, L.classes[k], (unsigned long long)c->offered,
                (unsigned long long)c->ok, (unsigned long long)c->r429,
                (unsigned long long)c->r503, (unsigned long long)c->r5xx,
                (unsigned long long)c->errors, lb_hist_mean(&c->lat) / 1000,
                lb_hist_quantile(&c->lat, 0.5) / 1000,
                lb_hist_quantile(&c->lat, 0.99) / 1000,
                lb_hist_quantile(&c->b, 0.5) / 1000,
                lb_hist_quantile(&c->b, 0.99) / 1000,
                c->overhead_n ? c->overhead_us / (double)c->overhead_n / 1000
                              : 0);
        lb_hist_write(&c->lat, L.out);
        fputc(',', L.out);
        lb_hist_write(&c->b, L.out);
        fputc('\n', L.out);
    }
}

/* Writes every second below `upto` not yet written, in order (empty
 * seconds too, so the file has a row per second and class). */
static void flush_upto(int64_t upto)
{
    int64_t last = (L.o->duration_ns - 1) / 1000000000;
    for (; L.flushed_to < upto && L.flushed_to <= last; L.flushed_to++) {
        slot *s = &L.ring[L.flushed_to % RING];
        if (s->sec != L.flushed_to) {
            memset(s, 0, sizeof(*s));
            s->sec = L.flushed_to;
        }
        write_slot(s);
        s->sec = -1;
    }
}

static cls_stats *stats_for(int cls, int64_t intended_ns)
{
    int64_t sec = intended_ns / 1000000000;
    slot *s = &L.ring[sec % RING];
    if (s->sec != sec) {
        if (s->sec >= 0 && s->sec < sec)
            flush_upto(s->sec + 1);
        memset(s, 0, sizeof(*s));
        s->sec = sec;
    }
    return &s->c[cls];
}

static void on_close(uv_handle_t *h)
{
    free(h->data);
}

static void conn_close(lconn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    list_remove(c);
    L.conns--;
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void fail(lconn *c)
{
    if (c->busy) {
        c->busy = 0;
        stats_for(c->cls, c->intended_ns)->errors++;
    }
    conn_close(c);
}

static void on_write(uv_write_t *w, int status)
{
    lconn *c = w->data;
    free(w);
    if (status < 0)
        fail(c);
}

static void send_req(lconn *c)
{
    uv_buf_t b = uv_buf_init(c->req, (unsigned)c->req_len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)c->req_len)
        return;
    if (n < 0 && n != UV_EAGAIN) {
        fail(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    uv_write_t *w = malloc(sizeof(*w));
    if (!w) {
        fail(c);
        return;
    }
    w->data = c;
    uv_buf_t rest = uv_buf_init(c->req + done, (unsigned)(c->req_len - done));
    if (uv_write(w, (uv_stream_t *)&c->tcp, &rest, 1, on_write) != 0) {
        free(w);
        fail(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    lconn *c = h->data;
    b->base = c->rbuf;
    b->len = sizeof(c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    lconn *c = s->data;
    if (n < 0) {
        fail(c);
        return;
    }
    size_t used =
        http_parser_execute(&c->parser, &L.settings, b->base, (size_t)n);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (e != HPE_OK && e != HPE_PAUSED) {
        fail(c);
        return;
    }
    (void)used;
}

static void on_connect(uv_connect_t *r, int status)
{
    lconn *c = r->data;
    if (status < 0 || c->closing) {
        fail(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    send_req(c);
}

static lconn *conn_new(int target)
{
    lconn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->target = target;
    c->tcp.data = c;
    c->connect.data = c;
    list_init(c);
    http_parser_init(&c->parser, HTTP_RESPONSE);
    c->parser.data = c;
    uv_tcp_init(L.loop, &c->tcp);
    uv_tcp_nodelay(&c->tcp, 1);
    L.conns++;
    return c;
}

/* Header callbacks come in pieces: a field's pieces, then its value's.
 * `last` is 1 after a field piece, 2 after a value piece. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
    lconn *c = p->data;
    if (c->last == 2)
        c->field_len = 0;
    c->last = 1;
    if (len > sizeof(c->field) - c->field_len) {
        c->field_len = sizeof(c->field); /* too long to be ours */
        return 0;
    }
    memcpy(c->field + c->field_len, at, len);
    c->field_len += len;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    lconn *c = p->data;
    if (c->last == 1)
        c->match =
            c->field_len == 10 && strncasecmp(c->field, "X-Lab-B-Us", 10) == 0;
    c->last = 2;
    for (size_t i = 0; c->match && i < len; i++)
        if (at[i] >= '0' && at[i] <= '9')
            c->b_us = (c->b_us < 0 ? 0 : c->b_us * 10) + (at[i] - '0');
    return 0;
}

static int on_message_complete(http_parser *p)
{
    lconn *c = p->data;
    if (!c->busy)
        return 0;
    c->busy = 0;
    cls_stats *st = stats_for(c->cls, c->intended_ns);
    unsigned status = p->status_code;
    if (status >= 200 && status < 300) {
        int64_t lat_us =
            ((int64_t)(uv_hrtime() - L.t0) - c->intended_ns) / 1000;
        if (lat_us < 0)
            lat_us = 0;
        st->ok++;
        lb_hist_add(&st->lat, (uint64_t)lat_us);
        if (c->b_us >= 0) {
            lb_hist_add(&st->b, (uint64_t)c->b_us);
            st->overhead_us += (double)(lat_us - c->b_us);
            st->overhead_n++;
        }
    } else if (status == 429) {
        st->r429++;
    } else if (status == 503) {
        st->r503++;
    } else if (status >= 500) {
        st->r5xx++;
    } else {
        st->errors++;
    }
    list_remove(c);
    if (!http_should_keep_alive(p) || L.stopping) {
        conn_close(c);
        return 0;
    }
    list_push(&L.idle[c->target], c);
    return 0;
}

/* One arrival: on an idle connection to the next target, or a new one. */
static void fire(int64_t at_ns, uint32_t group, uint32_t client)
{
    int cls = L.group_class[group];
    stats_for(cls, at_ns)->offered++;
    int target = (int)(L.rr++ % L.o->n_targets);
    lconn *c;
    if (L.idle[target].next != &L.idle[target]) {
        c = L.idle[target].next;
        list_remove(c);
    } else {
        if (L.conns >= L.o->max_conns || !(c = conn_new(target))) {
            stats_for(cls, at_ns)->errors++;
            return;
        }
        const char *host = L.o->targets[target];
        const char *colon = strrchr(host, ':');
        char ip[64];
        snprintf(ip, sizeof(ip), "%.*s", (int)(colon - host), host);
        struct sockaddr_in addr;
        uv_ip4_addr(ip, atoi(colon + 1), &addr);
        if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr,
                           on_connect) != 0) {
            c->busy = 1;
            c->cls = cls;
            c->intended_ns = at_ns;
            list_push(&L.busy, c);
            fail(c);
            return;
        }
        c->busy = 2; /* connecting: sent from on_connect */
    }
    int connecting = c->busy == 2;
    c->busy = 1;
    c->cls = cls;
    c->intended_ns = at_ns;
    c->b_us = -1;
    c->field_len = 0;
    c->last = c->match = 0;
    list_push(&L.busy, c);
    c->req_len = (size_t)snprintf(
        c->req, sizeof(c->req),
        "GET %s HTTP/1.1\r\nHost: lab\r\nX-Api-Key: %s-%u-%u\r\n\r\n",
        L.o->path, L.o->groups[group].class_name, group, client);
    L.sent++;
    if (!connecting)
        send_req(c);
}

static void maybe_finish(void)
{
    if (lb_schedule_peek(L.sched) != INT64_MAX && !L.stopping)
        return;
    if (L.busy.next != &L.busy)
        return;
    flush_upto(INT64_MAX);
    uv_stop(L.loop);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    int64_t now = (int64_t)(uv_hrtime() - L.t0);
    int64_t at;
    uint32_t g, cl;
    while (!L.stopping && lb_schedule_peek(L.sched) <= now &&
           lb_schedule_next(L.sched, &at, &g, &cl))
        fire(at, g, cl);
    maybe_finish();
}

/* Once a second: time out requests past the timeout, write the seconds
 * no answer can still come for. */
static void on_flush(uv_timer_t *t)
{
    (void)t;
    int64_t now = (int64_t)(uv_hrtime() - L.t0);
    lconn *c = L.busy.next;
    while (c != &L.busy) {
        lconn *next = c->next;
        if (now - c->intended_ns > L.o->timeout_ns)
            fail(c);
        c = next;
    }
    int64_t done = (now - L.o->timeout_ns) / 1000000000 - 1;
    if (done > 0)
        flush_upto(done);
    maybe_finish();
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    L.stopping = 1;
    lconn *c = L.busy.next;
    while (c != &L.busy) {
        lconn *next = c->next;
        fail(c);
        c = next;
    }
    maybe_finish();
}

/* At the end: the connections' memory goes with their handles. */
static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, h->type == UV_TCP && h->data ? on_close : NULL);
}

/* Room for max_conns sockets: a soft limit of 1024 descriptors would
 * turn an overloaded target's slow answers into A's own errors. */
static void raise_fd_limit(uint32_t max_conns)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_conns + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

int lb_load_run(const lb_load_opts *o)
{
    memset(&L, 0, sizeof(L));
    raise_fd_limit(o->max_conns);
    L.o = o;
    L.loop = uv_default_loop();
    for (size_t g = 0; g < o->n_groups; g++) {
        int k;
        for (k = 0; k < L.n_classes; k++)
            if (strcmp(L.classes[k], o->groups[g].class_name) == 0)
                break;
        if (k == L.n_classes) {
            if (L.n_classes == LB_MAX_CLASSES) {
                fprintf(stderr, "sluice lab load: at most %d classes\n",
                        LB_MAX_CLASSES);
                return -1;
            }
            strcpy(L.classes[L.n_classes++], o->groups[g].class_name);
        }
        L.group_class[g] = k;
    }
    L.sched = lb_schedule_new(o->groups, o->n_groups, o->seed, o->duration_ns);
    L.ring = calloc(RING, sizeof(slot));
    L.out = fopen(o->out, "w");
    if (!L.sched || !L.ring || !L.out) {
        fprintf(stderr, "sluice lab load: %s\n",
                L.out ? "out of memory" : "cannot write the CSV");
        lb_schedule_free(L.sched);
        free(L.ring);
        if (L.out)
            fclose(L.out);
        return -1;
    }
    for (size_t i = 0; i < RING; i++)
        L.ring[i].sec = -1;
    fprintf(L.out, "%s\n", lb_load_csv_header);
    for (size_t i = 0; i < LB_MAX_TARGETS; i++)
        list_init(&L.idle[i]);
    list_init(&L.busy);
    L.settings.on_header_field = on_header_field;
    L.settings.on_header_value = on_header_value;
    L.settings.on_message_complete = on_message_complete;
    L.t0 = o->t0_ns ? o->t0_ns : uv_hrtime();
    uv_timer_init(L.loop, &L.tick);
    uv_timer_start(&L.tick, on_tick, 1, 1);
    uv_timer_init(L.loop, &L.flush);
    uv_timer_start(&L.flush, on_flush, 1000, 1000);
    uv_signal_init(L.loop, &L.sigterm);
    uv_signal_start(&L.sigterm, on_signal, SIGTERM);
    uv_signal_init(L.loop, &L.sigint);
    uv_signal_start(&L.sigint, on_signal, SIGINT);
    uv_run(L.loop, UV_RUN_DEFAULT);
    uv_walk(L.loop, close_any, NULL);
    uv_run(L.loop, UV_RUN_DEFAULT);
    uv_loop_close(L.loop);
    int rc = fclose(L.out) == 0 ? 0 : -1;
    lb_schedule_free(L.sched);
    free(L.ring);
    fprintf(stderr, "sluice lab load: %llu requests sent\n",
            (unsigned long long)L.sent);
    return rc;
}
