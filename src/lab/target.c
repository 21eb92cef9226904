/*
 * target.c - `sluice lab target` (target.h): the queue model on libuv
 * timers behind the daemon's own HTTP server (http/service.c).  A request
 * in the queue or in service is a wait, as a decision on Redis is for
 * serve: its handler returns SV_AGAIN and answers when its service ends,
 * so a connection holds one request at a time and what it pipelines
 * waits behind it, with the daemon's bounds.
 */
#include "lab/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/request.h"
#include "http/respond.h"
#include "http/service.h"
#include "lab/queue.h"

/* A request from its arrival until its service ends; it outlives its
 * connection when the client goes while it is in service, since the
 * model's server stays busy until then. */
typedef struct treq {
    sv_req *rq; /* NULL once answered or given up */
    uint64_t arrived_ns;
    int in_service;
    uv_timer_t timer;
} treq;

typedef struct target {
    sv_http_service *svc;
    uv_signal_t sigterm, sigint;
    lb_queue *q;
    int64_t base_mean_ns;
    uint32_t cap;
} target;

static target T;

static void free_cb(uv_handle_t *h)
{
    free(h->data);
}

static void start_service(treq *r, int64_t service_ns);

static void served_cb(uv_timer_t *t)
{
    treq *r = t->data;
    if (r->rq != NULL)
        r->rq->resume(r->rq->owner); /* the handler answers (queue_answer) */
    uv_close((uv_handle_t *)&r->timer, free_cb);
    uint64_t next;
    int64_t service_ns;
    if (lb_queue_depart(T.q, &next, &service_ns))
        start_service((treq *)(uintptr_t)next, service_ns);
}

/* The timer's whole ms, rounded up: a service is never cut short. */
static void start_service(treq *r, int64_t service_ns)
{
    r->in_service = 1;
    uv_timer_start(&r->timer, served_cb,
                   (uint64_t)((service_ns + 999999) / 1000000), 0);
}

/* The connection lets go of its request: answered, or the client went.
 * One in service ends on its timer; one still queued leaves the queue. */
static void treq_release(void *p)
{
    treq *r = p;
    r->rq = NULL;
    if (!r->in_service) {
        lb_queue_cancel(T.q, (uint64_t)(uintptr_t)r);
        uv_close((uv_handle_t *)&r->timer, free_cb);
    }
}

static void shed(sv_buf *out, int keep_alive)
{
    sv_respond_error(out, 503, "overloaded", "queue full", keep_alive);
}

/* Any path but the lab's own: queued, served, then answered 200 with
 * the time it spent in B. */
static int queue_answer(sv_worker *w, const sv_http_request *req, sv_req *rq,
                        sv_buf *out, int keep_alive)
{
    (void)w;
    (void)req;
    if (rq->step == 1) { /* served */
        const treq *r = rq->api;
        char head[64];
        snprintf(head, sizeof(head), "X-Lab-B-Us: %llu\r\n",
                 (unsigned long long)((uv_hrtime() - r->arrived_ns) / 1000));
        sv_respond_body(out, 200, "text/plain", head, "ok\n", 3, keep_alive);
        return 0;
    }
    treq *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        shed(out, keep_alive);
        return 0;
    }
    r->rq = rq;
    r->arrived_ns = uv_hrtime();
    uv_timer_init(sv_http_service_loop(T.svc), &r->timer);
    r->timer.data = r;
    int64_t service_ns;
    switch (lb_queue_arrive(T.q, (uint64_t)(uintptr_t)r, &service_ns)) {
    case LB_Q_SERVE:
        start_service(r, service_ns);
        break;
    case LB_Q_WAIT:
        break;
    default:
        uv_close((uv_handle_t *)&r->timer, free_cb);
        shed(out, keep_alive);
        return 0;
    }
    rq->api = r;
    rq->api_free = treq_release;
    rq->step = 1;
    return SV_AGAIN;
}

static void answer_stats(sv_worker *w, sv_buf *out, int keep_alive)
{
    (void)w;
    lb_queue_stats st;
    lb_queue_stats_get(T.q, &st);
    lb_queue_reset_max(T.q);
    char body[320];
    int n = snprintf(
        body, sizeof(body),
        "{\"queue\":%u,\"max_queue\":%u,\"busy\":%u,"
        "\"arrived\":%llu,\"served\":%llu,\"shed\":%llu,"
        "\"cap\":%u,\"service_mean_us\":%lld}\n",
        st.waiting, st.max_waiting, st.busy, (unsigned long long)st.arrived,
        (unsigned long long)st.served, (unsigned long long)st.shed, T.cap,
        (long long)(lb_queue_mean(T.q) / 1000));
    sv_respond_body(out, 200, "application/json", NULL, body, (size_t)n,
                    keep_alive);
}

static int set_factor(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      sv_buf *out, int keep_alive)
{
    (void)w;
    (void)rq;
    char q[64], *end = NULL;
    double f = 0;
    if (req->query_len > 7 && req->query_len < sizeof(q) &&
        strncmp(req->query, "factor=", 7) == 0) {
        memcpy(q, req->query + 7, req->query_len - 7);
        q[req->query_len - 7] = '\0';
        f = strtod(q, &end);
    }
    if (!(f > 0 && f <= 1000) || end == NULL || *end != '\0') {
        sv_respond_error(out, 400, "bad_factor", "want ?factor=F, 0 < F <= 1000",
                         keep_alive);
        return 0;
    }
    lb_queue_set_mean(T.q, (int64_t)((double)T.base_mean_ns * f));
    sv_respond_body(out, 200, "application/json", NULL, "{\"ok\":true}\n", 12,
                    keep_alive);
    return 0;
}

static const sv_route_entry entries[] = {
    {"/lab/stats", SV_ANY_METHOD, answer_stats, NULL},
    {"/lab/service", SV_ANY_METHOD, NULL, set_factor},
    {"/", SV_ANY_METHOD, NULL, queue_answer},
};

static const sv_routes routes = {entries, sizeof(entries) / sizeof(entries[0]),
                                 0, &sv_api_req};

static void signal_cb(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    uv_close((uv_handle_t *)&T.sigterm, NULL);
    uv_close((uv_handle_t *)&T.sigint, NULL);
    sv_http_service_stop(T.svc);
}

int lb_target_run(const lb_target_opts *o)
{
    memset(&T, 0, sizeof(T));
    T.base_mean_ns = o->mean_service_ns;
    T.cap = o->cap;
    T.q = lb_queue_new(o->servers, o->cap, o->mean_service_ns, o->seed);
    if (!T.q) {
        fprintf(stderr, "sluice lab target: out of memory\n");
        return -1;
    }
    struct sockaddr_in addr;
    char err[128];
    int rc = uv_ip4_addr(o->host, o->port, &addr);
    /* Caps for a load generator's connections on loopback: as many as
     * it opens, requests of the lab's own size. */
    sv_http_service_opts so = {.routes = &routes,
                               .max_connections = 65536,
                               .max_header_bytes = 8192,
                               .max_body_bytes = 65536,
                               .idle_timeout_ms = 60000,
                               .read_timeout_ms = 10000};
    if (rc != 0)
        snprintf(err, sizeof(err), "%s", uv_strerror(rc));
    else
        T.svc = sv_http_service_new((const struct sockaddr *)&addr, &so, err,
                                    sizeof(err));
    if (T.svc == NULL) {
        fprintf(stderr, "sluice lab target: listen %s:%d: %s\n", o->host,
                o->port, err);
        lb_queue_free(T.q);
        return -1;
    }
    fprintf(stderr, "sluice lab target: listening on %s:%d\n", o->host,
            sv_http_service_port(T.svc));
    uv_loop_t *loop = sv_http_service_loop(T.svc);
    uv_signal_init(loop, &T.sigterm);
    uv_signal_start(&T.sigterm, signal_cb, SIGTERM);
    uv_signal_init(loop, &T.sigint);
    uv_signal_start(&T.sigint, signal_cb, SIGINT);
    sv_http_service_run(T.svc);
    sv_http_service_free(T.svc);
    lb_queue_free(T.q);
    return 0;
}
