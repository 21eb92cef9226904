/*
 * client.c - one client connection of the proxy: http-parser in
 * HTTP_REQUEST mode, paused at every request head until admit.c's verdict
 * is acted on (forward, hold in the queue, 429, error), then resumed so
 * the body streams straight to the upstream.  Paused again when the
 * request is complete: the next pipelined request waits for the response,
 * so responses come out in order.  Bytes read while paused wait in `rest`
 * (reading stops past PX_MAX_PENDING); a side with more than that queued
 * stops the other side's reads.  Answers of the proxy's own ("local")
 * read and drop a small body of known length and go on; any other body
 * closes the connection after the answer (can_keep()).  Those answers
 * wait unsent no more than PX_MAX_PENDING, as forwarded responses do:
 * past it the next request is not parsed until the client reads (held).  A
 * decision that waits on Redis leaves the request in S_DECIDING, nothing
 * forwarded; a client that goes meanwhile (nginx's 499) has its wait cancelled.
 * The connection's life (accept, caps, reading, the outbox, the lingering
 * close) is the connection machine's (runtime/conn.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/routes.h"
#include "http/head.h"
#include "proxy.h"
#include "runtime/conn.h"

enum state {
    S_HEAD,       /* reading a request head (or idle between requests) */
    S_DECIDING,   /* the decision waits on the store (Redis) */
    S_QUEUED,     /* held for its delay */
    S_CONNECTING, /* waiting for an upstream connection */
    S_FORWARD,    /* request streaming and/or response coming back */
    S_LOCAL       /* answered by the proxy; the message is being skipped */
};

enum pause_reason { P_NONE, P_HEAD, P_DONE };

struct px_client {
    sv_conn c; /* first: the machine's connection is ours; its timer is the
                * read timeout of a request, the idle timeout between */
    uv_timer_t delay; /* the queue */
    px_config *cfg; /* a reference: what this request is routed by */
    sv_head head;   /* the request's head: its parser, target, fields */
    enum state state;
    enum pause_reason paused_at;
    sv_buf rest;  /* read but not parsed while the parser is paused */
    sv_buf rate; /* rate-limit header lines for the response */
    struct sockaddr_storage peer;
    char peer_text[INET6_ADDRSTRLEN]; /* peer as text, made at accept */
    const px_route *route;
    size_t target_off; /* where the path starts in url (absolute-form) */
    px_up *up;
    sd_wait *wait;       /* S_DECIDING: cancelled on close */
    px_decision *pd;     /* with Redis: this client's decision inputs */
    uint64_t req_length; /* Content-Length, or ULLONG_MAX */
    uint64_t t_forward;  /* uv_hrtime when the head went upstream */
    uint32_t adaptive;   /* the adaptive rules timing the answer (admit.c) */
    int in_message, keep_alive, expect_continue;
    int req_chunked, req_body, req_done;
    int resp_chunked;
    int unreadable;      /* answered as such: linger before closing */
    int flow_paused;     /* stopped reading: the upstream is behind */
    int driving, again;  /* in parse(); resume() asked meanwhile */
    int metrics_only; /* a client of the metrics listener (--metrics-listen) */
    int held;         /* answers of its own past PX_MAX_PENDING unsent: the next
                       * request waits until the client has read them (written) */
};

static void resume(px_client *c);

static void release(sv_conn *conn)
{
    px_client *c = (px_client *)conn;
    sv_head_release(&c->head);
    sv_buf_release(&c->rest);
    sv_buf_release(&c->rate);
    px_config_unref(c->cfg);
    px_decision_free(c->pd);
}

/* What waits outside the connection is given up now, not when it is
 * freed: the wait may end before then. */
static void closing(sv_conn *conn)
{
    px_client *c = (px_client *)conn;
    if (c->up != NULL) {
        px_upstream_abort(c->up);
        c->up = NULL;
    }
    if (c->state == S_QUEUED)
        px_worker_of(c->c.w)->queued--;
    if (c->wait != NULL) {
        sd_cancel(c->wait);
        px_admit_abandon(c->pd); /* only Redis waits: the client's own */
        c->wait = NULL;
    }
    c->state = S_LOCAL;
}

static void written(sv_conn *conn)
{
    px_client *c = (px_client *)conn;
    if (c->up != NULL && c->c.ob.pending < PX_MAX_PENDING / 2)
        px_upstream_pause(c->up, 0);
    if (c->held && c->c.ob.pending < PX_MAX_PENDING / 2) {
        c->held = 0;
        resume(c);
    }
}

/* Output is gathered in the outbox and sent by sv_conn_flush() in one
 * write: a response head goes out with the first piece of its body. */
static int queue(px_client *c, const char *data, size_t len)
{
    if (sv_conn_gone(&c->c))
        return -1;
    sv_buf_add(&c->c.ob.out, data, len);
    if (c->c.ob.out.failed) {
        sv_conn_close(&c->c);
        return -1;
    }
    return 0;
}

static int send_bytes(px_client *c, const char *data, size_t len)
{
    return queue(c, data, len) == 0 ? sv_conn_flush(&c->c) : -1;
}

static int send_buf(px_client *c, sv_buf *b)
{
    int rc = b->failed ? -1 : send_bytes(c, b->data, b->len);
    if (b->failed)
        sv_conn_close(&c->c);
    sv_buf_release(b);
    return rc;
}

static size_t up_pending(const px_client *c)
{
    return c->c.ob.pending;
}

static int up_method(const px_client *c)
{
    return c->head.parser.method;
}

/* Whether the connection can go on after a request answered here: a
 * body not yet read is skipped when it is small and of known length (and
 * the client is not waiting for a 100 Continue it will not get);
 * otherwise the connection closes after the answer. */
static int can_keep(const px_client *c)
{
    if (!c->keep_alive)
        return 0;
    if (!c->req_body || c->req_done)
        return 1;
    return !c->expect_continue && c->req_length != ULLONG_MAX &&
           c->req_length <= PX_DISCARD_MAX;
}

/* A request answered here: `out` holds the whole response, whose
 * Connection field said keep_alive (from can_keep()); or it is c->c.ob.out,
 * where the response was written directly (after anything queued). */
static void answer_local(px_client *c, sv_buf *out, int keep_alive)
{
    int had_up = c->up != NULL;
    if (c->up != NULL) {
        px_upstream_abort(c->up);
        c->up = NULL;
    }
    if (out == &c->c.ob.out) {
        if (c->c.ob.out.failed) {
            sv_conn_close(&c->c);
            return;
        }
        if (sv_conn_flush(&c->c) != 0)
            return;
    } else if (send_buf(c, out) != 0)
        return;
    if (!keep_alive || had_up || !can_keep(c)) {
        /* A body (or an unreadable request) still on its way: linger
         * rather than reset it. */
        sv_conn_finish(&c->c, c->unreadable || (c->req_body && !c->req_done));
        return;
    }
    c->state = c->req_done ? S_HEAD : S_LOCAL;
    if (c->state == S_LOCAL) /* the rest of the body, skipped */
        sv_deadline_set(&c->c.timer, c->c.w->server->cfg.read_timeout_ms);
    /* The same bound as a forwarded response's: pipelined requests for
     * large answers (metrics) must not pile them up unread. */
    if (c->c.ob.pending > PX_MAX_PENDING) {
        c->held = 1;
        return;
    }
    resume(c);
}

static void answer_error(px_client *c, int status, const char *code,
                         const char *message)
{
    sv_buf out = {0};
    int keep = can_keep(c);
    sv_respond_error(&out, status, code, message, keep);
    answer_local(c, &out, keep);
}

static void timeout(sv_conn *conn)
{
    px_client *c = (px_client *)conn;
    if (c->c.lingering) {
        sv_conn_close(&c->c);
    } else if (c->state == S_HEAD && c->in_message) {
        c->keep_alive = 0;
        answer_error(c, 408, "ETIMEOUT",
                     "request not received within the read timeout");
    } else if (c->state == S_HEAD || c->state == S_FORWARD ||
               c->state == S_LOCAL) {
        /* Idle, or a body that stopped arriving. */
        sv_conn_close(&c->c);
    }
}

static int on_message_begin(http_parser *p)
{
    px_client *c = p->data;
    /* Each request is routed by the config current when it begins. */
    px_config *cfg = px_config_of(c->c.w);
    if (cfg != c->cfg) {
        px_config_ref(cfg);
        px_config_unref(c->cfg);
        c->cfg = cfg;
    }
    c->in_message = 1;
    sv_head_begin(&c->head, c->c.w->server->cfg.max_header_bytes);
    c->req_done = c->req_body = c->req_chunked = 0;
    c->expect_continue = 0;
    c->route = NULL;
    c->rate.len = 0;
    sv_deadline_set(&c->c.timer, c->c.w->server->cfg.read_timeout_ms);
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    px_client *c = p->data;
    /* Before anything of the request goes on: http-parser refuses such
     * a head itself only after this callback has paused it. */
    if (sv_head_complete(&c->head) != 0)
        return -1;
    c->req_chunked = (p->flags & F_CHUNKED) != 0;
    c->req_length = p->content_length;
    c->req_body = c->req_chunked ||
                  (p->content_length != ULLONG_MAX && p->content_length > 0);
    c->keep_alive = http_should_keep_alive(p) && !c->c.w->stopping;
    c->expect_continue = c->head.expect_continue;
    sv_deadline_clear(&c->c.timer);
    c->paused_at = P_HEAD;
    http_parser_pause(p, 1);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    px_client *c = p->data;
    if (c->state != S_FORWARD || c->up == NULL)
        return 0; /* a local answer's body is skipped */
    char size[24];
    int rc = 0;
    if (c->req_chunked) {
        int n = snprintf(size, sizeof(size), "%zx\r\n", len);
        rc = px_upstream_write(c->up, size, (size_t)n);
    }
    if (rc == 0)
        rc = px_upstream_write(c->up, at, len);
    if (rc == 0 && c->req_chunked)
        rc = px_upstream_write(c->up, "\r\n", 2);
    if (rc != 0) {
        sv_conn_close(&c->c);
        return -1;
    }
    if (px_upstream_pending(c->up) > PX_MAX_PENDING) {
        c->flow_paused = 1;
        sv_conn_set_reading(&c->c, 0);
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    px_client *c = p->data;
    c->in_message = 0;
    c->req_done = 1;
    if (c->state == S_FORWARD && c->up != NULL) {
        if (c->req_chunked && px_upstream_write(c->up, "0\r\n\r\n", 5)) {
            sv_conn_close(&c->c);
            return -1;
        }
        px_upstream_request_sent(c->up);
        /* From here the upstream's response timeout runs, not ours. */
        sv_deadline_clear(&c->c.timer);
        /* The next pipelined request waits for this response. */
        c->paused_at = P_DONE;
        http_parser_pause(p, 1);
    } else if (c->state == S_LOCAL) {
        c->state = S_HEAD;
        sv_deadline_set(&c->c.timer, c->c.w->server->cfg.idle_timeout_ms);
    }
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = sv_head_on_url,
    .on_header_field = sv_head_on_field,
    .on_header_value = sv_head_on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void decide(px_client *c);

/* Feeds bytes to the parser and acts on why it stopped. */
static void parse(px_client *c, const char *data, size_t len)
{
    size_t done = http_parser_execute(&c->head.parser, &settings, data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->head.parser);
    if (sv_conn_gone(&c->c))
        return;
    if (e == HPE_PAUSED) {
        /* Reading goes on into `rest` while a request is decided or
         * answered (no epoll change per request), up to a cap. */
        int kept =
            sv_reader_keep(&c->rest, data + done, len - done, PX_MAX_PENDING);
        if (kept < 0) {
            sv_conn_close(&c->c);
            return;
        }
        if (kept > 0)
            sv_conn_set_reading(&c->c, 0);
        enum pause_reason why = c->paused_at;
        c->paused_at = P_NONE;
        if (why == P_HEAD)
            decide(c);
        return;
    }
    if (e != HPE_OK || done != len) {
        sv_buf out = {0};
        sv_respond_unreadable(&out,
                              c->head.status,
                              c->head.refusal ? c->head.refusal
                                         : http_errno_description(e));
        if (c->state == S_FORWARD || c->state == S_QUEUED ||
            c->state == S_CONNECTING) {
            sv_conn_close(&c->c); /* a body broke after the head went on */
            sv_buf_release(&out);
            return;
        }
        px_count(c->c.w, c->route, PX_REJECTED);
        c->req_done = 1;
        /* The rest of the head (or body) may still be coming: a close
         * with it unread would reset the answer away. */
        c->unreadable = 1;
        answer_local(c, &out, 0);
    }
}

/* Parses what was kept while paused, then reads again.  Called from
 * inside a parse (an answer given at once, a pooled upstream ready at
 * once) it only asks the outer call to go round again: pipelined
 * requests answered locally must not recurse once per request. */
static void resume(px_client *c)
{
    if (c->driving) {
        c->again = 1;
        return;
    }
    c->driving = 1;
    do {
        c->again = 0;
        if (sv_conn_gone(&c->c) || c->c.closing)
            break;
        http_parser_pause(&c->head.parser, 0);
        sv_buf kept = c->rest;
        c->rest = (sv_buf){0};
        if (kept.len > 0)
            parse(c, kept.data, kept.len);
        sv_buf_release(&kept);
    } while (c->again);
    c->driving = 0;
    if (c->c.reader.eof && c->rest.len == 0 && c->state == S_HEAD &&
        !c->in_message && !c->held && !c->c.closing &&
        !sv_conn_gone(&c->c)) {
        /* The client sent all before its held answers were read: they
         * are, and nothing is left to parse. */
        c->c.closing = 1;
        if (c->c.ob.writes == 0)
            sv_conn_close(&c->c);
        return;
    }
    if (!sv_conn_gone(&c->c) && !c->c.closing &&
        !c->flow_paused && c->rest.len <= PX_MAX_PENDING)
        sv_conn_set_reading(&c->c, 1);
}

static void on_read(sv_conn *conn, ssize_t nread, const char *data)
{
    px_client *c = (px_client *)conn;
    if (c->c.lingering) { /* the answer goes out: drop what comes */
        if (nread < 0)
            sv_conn_close(&c->c);
        return;
    }
    if (nread < 0) {
        if (c->state == S_DECIDING) {
            sv_conn_close(&c->c); /* nothing was forwarded: drop it all */
        } else if (HTTP_PARSER_ERRNO(&c->head.parser) == HPE_PAUSED) {
            /* The client is done sending (or gone): finish the request
             * in hand, then close. */
            c->keep_alive = 0;
            sv_conn_set_reading(&c->c, 0);
        } else if (c->state == S_HEAD && !c->in_message && c->c.ob.writes > 0)
            c->c.closing = 1; /* send what is queued, then close */
        else
            sv_conn_close(&c->c);
        return;
    }
    if (nread > 0 && c->state == S_FORWARD && !c->req_done)
        sv_deadline_set(&c->c.timer, c->c.w->server->cfg.read_timeout_ms);
    if (nread > 0 && HTTP_PARSER_ERRNO(&c->head.parser) == HPE_PAUSED) {
        int kept =
            sv_reader_keep(&c->rest, data, (size_t)nread, PX_MAX_PENDING);
        if (kept < 0)
            sv_conn_close(&c->c);
        else if (kept > 0)
            sv_conn_set_reading(&c->c, 0);
        return;
    }
    if (nread > 0) {
        c->driving = 1;
        parse(c, data, (size_t)nread);
        c->driving = 0;
    }
    if (c->again)
        resume(c);
}

static void up_drained(px_client *c)
{
    if (c->flow_paused) {
        c->flow_paused = 0;
        if (c->state == S_FORWARD && !c->req_done)
            sv_conn_set_reading(&c->c, 1);
    }
}

static void up_failed(px_client *c, int status, const char *message)
{
    c->up = NULL;
    px_ad_answer(c->c.w, c->adaptive, status, 0, 0);
    c->adaptive = 0;
    px_count(c->c.w, c->route,
             status == 504 ? PX_GATEWAY_TIMEOUT : PX_BAD_GATEWAY);
    answer_error(c, status, status == 504 ? "gateway_timeout" : "bad_gateway",
                 message);
}

static void up_ready(px_client *c, px_up *up)
{
    c->up = up;
    c->state = S_FORWARD;
    sv_buf head = {0};
    const char *url = c->head.url.data ? c->head.url.data : "";
    px_request_head(&head, c->head.parser.method, url + c->target_off,
                    c->head.url.len - c->target_off, &c->head.fields,
                    c->cfg->upstream_host, c->peer_text,
                    c->req_chunked                ? -1
                    : c->req_length != ULLONG_MAX ? (int64_t)c->req_length
                                                  : -2);
    if (head.failed || px_upstream_write(up, head.data, head.len) != 0) {
        sv_buf_release(&head);
        if (c->up != NULL)
            up_failed(c, 502, "upstream write failed");
        return;
    }
    sv_buf_release(&head);
    c->t_forward = uv_hrtime();
    px_count(c->c.w, c->route, PX_FORWARDED);
    if (c->expect_continue && c->req_body &&
        send_bytes(c, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 0)
        return;
    sv_deadline_set(&c->c.timer, c->c.w->server->cfg.read_timeout_ms);
    resume(c);
}

static int up_head(px_client *c, int status, const char *reason,
                   size_t reason_len, const sv_fields *h, http_parser *p)
{
    uint64_t took = uv_hrtime() - c->t_forward;
    px_count_response(c->c.w, c->route, status, took);
    px_ad_answer(c->c.w, c->adaptive, status, took, 1);
    c->adaptive = 0;
    if (c->c.w->stopping)
        c->keep_alive = 0;
    sv_buf out = {0};
    c->resp_chunked = px_response_head(
        &out, status, reason, reason_len, h, p, c->head.parser.method == HTTP_HEAD,
        c->head.parser.http_major == 1 && c->head.parser.http_minor >= 1,
        c->cfg->rate_limit_headers ? &c->rate : NULL, &c->keep_alive);
    int rc = out.failed ? -1 : queue(c, out.data, out.len);
    if (out.failed)
        sv_conn_close(&c->c);
    sv_buf_release(&out);
    return rc;
}

static int up_body(px_client *c, const char *at, size_t len)
{
    char size[24];
    if (c->resp_chunked) {
        int n = snprintf(size, sizeof(size), "%zx\r\n", len);
        if (queue(c, size, (size_t)n) != 0)
            return -1;
    }
    if (queue(c, at, len) != 0 || (c->resp_chunked && queue(c, "\r\n", 2) != 0))
        return -1;
    return sv_conn_flush(&c->c);
}

static void up_done(px_client *c, int reusable)
{
    (void)reusable;
    c->up = NULL;
    if ((c->resp_chunked && queue(c, "0\r\n\r\n", 5) != 0) || sv_conn_flush(&c->c) != 0)
        return;
    if (!c->keep_alive || !c->req_done || c->c.w->stopping) {
        sv_conn_finish(&c->c, 0);
        return;
    }
    c->state = S_HEAD;
    sv_deadline_set(&c->c.timer, c->c.w->server->cfg.idle_timeout_ms);
    resume(c);
}

static void up_broken(px_client *c)
{
    c->up = NULL;
    sv_conn_close(&c->c);
}

/* What the upstream connection tells this client. */
static const px_up_events up_events = {
    up_ready, up_failed, up_method,  up_head,    up_body,
    up_done,  up_broken, up_drained, up_pending,
};

static void forward(px_client *c)
{
    c->state = S_CONNECTING;
    px_upstream_open(c->c.w, c, &up_events);
}

static void delay_cb(uv_timer_t *t)
{
    px_client *c = t->data;
    px_worker_of(c->c.w)->queued--;
    forward(c);
}

/* "/metrics" of the proxy: the server's series and the proxy's. */
static void answer_metrics(px_client *c)
{
    sv_buf out = {0};
    int keep = px_metrics_answer(c->c.w, c->keep_alive, &out);
    answer_local(c, &out, keep);
}

static void answer_rules(px_client *c)
{
    sv_buf out = {0};
    int keep = c->keep_alive;
    sv_rules_answer(c->c.w, &out, keep);
    answer_local(c, &out, keep);
}

/* Acts on the request's verdict (admit.c). */
static void act(px_client *c, const px_decision *pd, const px_verdict *v)
{
    if (v->decided)
        sv_rate_headers(&v->res, &c->rate);
    c->adaptive = v->what == PX_GO || v->what == PX_HOLD ? pd->adaptive : 0;
    switch (v->what) {
    case PX_WAIT:
        c->state = S_DECIDING;
        break;
    case PX_GO:
        forward(c);
        break;
    case PX_HOLD:
        px_worker_of(c->c.w)->queued++;
        c->state = S_QUEUED;
        uv_timer_start(&c->delay, delay_cb, v->delay_ms, 0);
        break;
    case PX_LIMIT: {
        int keep = can_keep(c);
        px_answer_429(pd, v, c->head.parser.method == HTTP_HEAD, keep, &c->rate,
                      &c->c.ob.out);
        answer_local(c, &c->c.ob.out, keep);
        break;
    }
    case PX_REFUSE:
        answer_error(c, v->status, v->code, v->msg);
        break;
    }
}

static void decided_cb(void *owner)
{
    px_client *c = owner;
    px_verdict v;
    c->wait = NULL;
    c->state = S_HEAD;
    px_admit_finish(c->c.w, c->pd, &v); /* only Redis waits: the client's own */
    act(c, c->pd, &v);
}

/* The one place a request is decided: its target checked and normalised,
 * then admitted (admit.c) and acted on, at once or, when the decision
 * waits on Redis, from decided_cb.  Everything the descriptors point to
 * (the url, the headers, the decision's path and address) stays as it
 * was while the request waits. */
static void decide(px_client *c)
{
    const px_config *cfg = c->cfg;
    const char *url = c->head.url.data ? c->head.url.data : "";
    size_t raw_len, path_len = 0, loose_len = 0;
    px_decision *pd = px_decision_get(c->c.w, &c->pd, c->head.url.len + 2);
    px_verdict v;
    if (c->head.parser.upgrade) {
        /* Upgrade and CONNECT would need the connection spliced through;
         * say so rather than pass a half-working tunnel.  What follows
         * may be the other protocol already: the connection ends. */
        c->keep_alive = 0;
        answer_error(c, 501, "upgrade_refused",
                     "protocol upgrades and CONNECT are not proxied");
        px_count(c->c.w, NULL, PX_REJECTED);
    } else if (pd == NULL) {
        answer_error(c, 503, "ENOMEM", "out of memory");
    } else if (px_request_target(url, c->head.url.len, &c->target_off, &raw_len) !=
                   0 ||
               px_normalize_path(url + c->target_off, raw_len, 0, pd->path,
                                 &path_len) != 0 ||
               px_normalize_path(url + c->target_off, raw_len, 1, pd->loose,
                                 &loose_len) != 0) {
        answer_error(c, 400, "EHTTP",
                     "bad request target (bad encoding, %00, or '..' above "
                     "the root)");
        px_count(c->c.w, NULL, PX_REJECTED);
    } else if (c->metrics_only) {
        /* The metrics listener: GET /metrics and /v1/rules (what sluice
         * advisor scrapes), nothing forwarded. */
        if (c->head.parser.method == HTTP_GET && strcmp(pd->path, "/metrics") == 0)
            answer_metrics(c);
        else if (c->head.parser.method == HTTP_GET &&
                 strcmp(pd->path, "/v1/rules") == 0)
            answer_rules(c);
        else
            answer_error(c, 404, "ENOTFOUND",
                         "the metrics listener answers GET /metrics and "
                         "/v1/rules only");
    } else if (cfg->metrics_path && cfg->metrics_path[0] != '\0' &&
               c->head.parser.method == HTTP_GET &&
               strcmp(cfg->metrics_path, pd->path) == 0) {
        answer_metrics(c);
    } else {
        px_client_address(cfg, &c->peer, c->peer_text, &c->head.fields,
                          pd->client_addr, sizeof(pd->client_addr));
        for (size_t i = 0; i <= loose_len; i++)
            pd->lower[i] = (char)tolower((unsigned char)pd->loose[i]);
        px_request_view view = {c->head.parser.method, pd->path,   path_len,
                                pd->loose,        pd->lower,  loose_len,
                                pd->client_addr,  &c->head.fields};
        px_admit(c->c.w, cfg, pd, &view, decided_cb, c, &c->wait, &v);
        c->route = pd->route;
        act(c, pd, &v);
    }
}

/* A client of the proxy's listener, or (arg not NULL) of the metrics
 * listener's. */
static int on_open(sv_conn *conn, void *arg)
{
    px_client *c = (px_client *)conn;
    sv_worker *w = conn->w;
    c->cfg = px_config_of(w);
    px_config_ref(c->cfg);
    c->metrics_only = arg != NULL;
    uv_timer_init(&w->loop, &c->delay);
    c->delay.data = c;
    conn->extra = (uv_handle_t *)&c->delay;
    int len = sizeof(c->peer);
    if (uv_tcp_getpeername(&conn->tcp, (struct sockaddr *)&c->peer, &len) != 0)
        return -1;
    px_peer_text(&c->peer, c->peer_text, sizeof(c->peer_text));
    sv_head_init(&c->head, c, NULL);
    return 0;
}

/* The proxy weighs its output against the upstream's (PX_MAX_PENDING)
 * itself, and closes its idle clients on stop (px_close_idle). */
static const sv_conn_type px_client_type = {
    .size = sizeof(px_client),
    .keep_out = PX_KEEP_OUT,
    .open = on_open,
    .read = on_read,
    .timeout = timeout,
    .written = written,
    .closing = closing,
    .release = release,
    .alpn = &sv_http_alpn,
    .plaintext_answer = sv_http_plaintext_answer,
};

void px_client_accept(sv_worker *w)
{
    sv_conn_accept(w, (uv_stream_t *)&w->listener, &w->conns, &px_client_type,
                   NULL);
}

void px_metrics_accept(sv_listener *l)
{
    static int metrics_only = 1;
    sv_conn_accept(l->w, (uv_stream_t *)&l->tcp, &l->w->conns,
                   &px_client_type, &metrics_only);
}

void px_metrics_close_idle(sv_listener *l)
{
    (void)l; /* its clients are the proxy's: px_close_idle closes them */
}

void px_close_idle(sv_worker *w)
{
    for (sv_conn *conn = w->conns, *next; conn != NULL; conn = next) {
        next = conn->next;
        px_client *c = (px_client *)conn;
        if (c->state == S_HEAD && !c->in_message && conn->ob.writes == 0)
            sv_conn_close(conn);
        else
            c->keep_alive = 0;
    }
    if (sv_worker_quiet(w))
        sv_readers_close(&w->readers);
    px_upstream_close_idle(w);
}
