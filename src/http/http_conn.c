/*
 * conn.c - one HTTP/1.1 connection: reads, http-parser, pipelining,
 * timeouts, writes.  Requests are decided synchronously as each message
 * completes, so pipelined responses come out in request order by
 * construction; all responses produced by one read are sent in one write
 * (sv_send: at once when the socket takes it, send.c says why).
 *
 * Reads land in the thread's one read buffer (sv_worker.read_buf):
 * http-parser copies what must outlive the read (the URL and the body)
 * into the connection's own buffers before the next read can happen.
 *
 * Timeouts: a request must arrive whole within read_timeout of its first
 * byte (a slow client cannot hold a connection by trickling bytes); an
 * idle keep-alive connection is closed after idle_timeout.  A request
 * only moves the connection's deadline (deadline.c).
 *
 * Waiting on the store (--store redis, src/decision/): a handler whose
 * decision waits on Redis returns SV_AGAIN with its state in the
 * connection's sv_req; the parser is paused, the bytes after the
 * request are copied from the thread's read buffer into the
 * connection's `stash`, and when the wait ends the handler is called
 * again (dispatch), then parsing resumes on the stash.  So
 * pipelined responses stay in request order, and one connection waits on
 * at most one request.  Reading goes on into the stash while the request
 * waits, up to STASH_MAX bytes: stopping and restarting it for every
 * request would cost system calls (epoll_ctl) that the request itself
 * does not need.
 *
 * Output: answers of pipelined requests are built as each request
 * completes, and one read may hold hundreds of requests for large ones
 * (GET /metrics).  Once a connection's unsent answers pass
 * SV_MAX_PENDING_OUTPUT the parser is held (paused, the rest of the read
 * stashed, reading stopped) until the client has read them down to half
 * of it: the same bound as reading stops at between reads.
 *
 * Refused before any handler sees them (400, then the close): what
 * hygiene.c finds against RFC 9112 in the target, a field name or the
 * framing.  After the answer to a request that could not be read (400,
 * 413, 431) the connection lingers: FIN sent, the rest of the request
 * read and dropped until the client closes or SV_LINGER_MS pass, so that
 * no reset destroys the answer.  An Upgrade is answered as HTTP/1.1 and
 * the connection closes.
 *
 * Headers: only Expect, the Sluice-* headers (GET /v1/auth's
 * descriptors) and the admin API's Authorization, If-Match and
 * If-None-Match matter, so only those are kept; every header still counts
 * towards --max-header-bytes.
 *
 * The same connection serves every HTTP listener: the routes it answers
 * by are the listener's (serve's decision API, or the admin API).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "http/head.h"
#include "http/http_conn.h"
#include "http/respond.h"
#include "http/route.h"
#include "runtime/conn.h"

typedef struct hc_conn {
    sv_conn c; /* first: the machine's connection is ours */
    const sv_routes *routes;
    char peer[INET6_ADDRSTRLEN]; /* when routes->peer */
    int peer_loopback;
    /* The request's head (head.h: its parser, target and the fields a
     * handler reads), its body, and the fields' views once it is
     * complete. */
    sv_head head;
    sv_buf body;
    sv_buf hviews;
    int in_message;
    int err_status; /* the body's cap refused: 413 */
    struct sv_req *rq;   /* the request's state across waits: the routes' */
    int waiting;         /* rq waits: parser paused */
    int held; /* answers past SV_MAX_PENDING_OUTPUT: parser paused until
               * the client reads them (go_on) */
    sv_buf stash; /* bytes read after the waiting request */
    int ended;    /* the client's end (or an error) came meanwhile */
} hc_conn;

/* Bytes read ahead of a waiting request before reading stops. */
#define STASH_MAX (64 * 1024)

static void release(sv_conn *conn)
{
    hc_conn *c = (hc_conn *)conn;
    sv_head_release(&c->head);
    sv_buf_release(&c->body);
    sv_buf_release(&c->hviews);
    sv_buf_release(&c->stash);
}

/* Given up now, not when the connection is freed: the wait could end
 * before then. */
static void closing(sv_conn *conn)
{
    hc_conn *c = (hc_conn *)conn;
    if (c->rq != NULL)
        c->routes->req->free(c->rq);
    c->rq = NULL;
}

/* On stop: idle connections close now; one in the middle of a request or
 * with a response still being written finishes it, then closes. */
static int idle(sv_conn *conn)
{
    hc_conn *c = (hc_conn *)conn;
    return !c->in_message && c->c.ob.writes == 0 && !c->waiting;
}

static void parse(hc_conn *c, const char *data, size_t n);

/* Held answers drained below half the cap: parse on what was stashed,
 * as often as the client keeps up, then read again. */
static void go_on(hc_conn *c)
{
    if (!c->held)
        return;
    while (c->held && !c->waiting && !c->c.closing &&
           c->c.ob.pending < SV_MAX_PENDING_OUTPUT / 2) {
        c->held = 0;
        http_parser_pause(&c->head.parser, 0);
        sv_buf stash = c->stash;
        c->stash = (sv_buf){0};
        if (stash.len > 0)
            parse(c, stash.data, stash.len);
        sv_buf_release(&stash);
        sv_conn_flush(&c->c);
    }
    if (c->held || c->waiting || c->c.closing)
        return;
    if (c->ended) {
        c->c.closing = 1; /* the client is done: so is the connection */
        sv_conn_flush(&c->c);
    } else { /* read once the client has read enough (conn.c) */
        sv_conn_set_reading(&c->c, 1);
    }
}

static void timeout(sv_conn *conn)
{
    hc_conn *c = (hc_conn *)conn;
    if (c->in_message) {
        sv_respond_error(&c->c.ob.out, 408, "ETIMEOUT",
                         "request not received within the read timeout", 0);
        c->c.closing = 1;
        sv_conn_set_reading(&c->c, 0);
        sv_conn_flush(&c->c);
    } else {
        sv_conn_close(&c->c);
    }
}

static int on_message_begin(http_parser *p)
{
    hc_conn *c = p->data;
    c->in_message = 1;
    c->body.len = 0;
    c->body.failed = c->hviews.failed = 0;
    c->err_status = 0;
    sv_head_begin(&c->head, c->c.w->server->cfg.max_header_bytes);
    sv_deadline_set(&c->c.timer, c->c.w->server->cfg.read_timeout_ms);
    return 0;
}

/* The fields a handler reads, the only ones kept: the Sluice-* ones (GET
 * /v1/auth's descriptors), and the admin API's Authorization, If-Match
 * and If-None-Match.  Every field still counts towards the head's cap.
 * Told apart by their first letter, since most fields are none of them. */
static int kept(const char *name, size_t len)
{
#define NAMED(s) (len == sizeof(s) - 1 && strncasecmp(name, s, len) == 0)
    if (len == 0)
        return 0;
    switch (name[0] | 0x20) {
    case 's':
        return len >= 7 && strncasecmp(name, "sluice-", 7) == 0;
    case 'a':
        return NAMED("authorization");
    case 'i':
        return NAMED("if-match") || NAMED("if-none-match");
    default:
        return 0;
    }
#undef NAMED
}

static int on_headers_complete(http_parser *p)
{
    hc_conn *c = p->data;
    if (sv_head_complete(&c->head) != 0)
        return -1;
    if (p->content_length != ULLONG_MAX &&
        p->content_length > c->c.w->server->cfg.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    if (c->head.expect_continue) {
        /* Let a client that waits for it send the body now, rather than
         * after its own timeout.  Responses already queued go first. */
        sv_buf_addstr(&c->c.ob.out, "HTTP/1.1 100 Continue\r\n\r\n");
        sv_conn_flush(&c->c);
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    hc_conn *c = p->data;
    if (c->body.len + len > c->c.w->server->cfg.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    sv_buf_add(&c->body, at, len);
    return 0;
}

static void resume_cb(void *owner);

/* Runs the complete request (again, after a wait); returns 1 when it
 * waits on the store. */
static int dispatch(hc_conn *c)
{
    http_parser *p = &c->head.parser;
    const sv_buf *url = &c->head.url;
    sv_http_request req = {
        .method = p->method,
        .path = url->data ? url->data : "",
        .path_len = url->len,
        .body = c->body.data ? c->body.data : "",
        .body_len = c->body.len,
    };
    /* The kept fields' views, now that their bytes no longer move. */
    c->hviews.len = 0;
    for (size_t i = 0; i < sv_fields_count(&c->head.fields); i++) {
        sv_http_header h;
        sv_fields_get(&c->head.fields, i, &h.name, &h.name_len, &h.value,
                      &h.value_len);
        sv_buf_add(&c->hviews, &h, sizeof(h));
    }
    req.headers = (const sv_http_header *)c->hviews.data;
    req.n_headers = c->hviews.len / sizeof(sv_http_header);
    req.peer = c->peer;
    req.peer_loopback = c->peer_loopback;
    const char *q = memchr(req.path, '?', req.path_len);
    req.query = "";
    if (q != NULL) {
        req.query = q + 1;
        req.query_len = req.path_len - (size_t)(q - req.path) - 1;
        req.path_len = (size_t)(q - req.path);
    }
    /* An Upgrade is not taken (RFC 9110 7.8 lets a server ignore it): the
     * request is answered as HTTP/1.1, once, and the connection ends,
     * since what follows may be the other protocol already. */
    int keep_alive =
        http_should_keep_alive(p) && !c->c.w->stopping && !p->upgrade;
    size_t mark = c->c.ob.out.len; /* earlier pipelined responses stay */
    if (sv_head_failed(&c->head) || c->body.failed || c->hviews.failed)
        c->c.ob.out.failed = 1; /* the request itself was not kept whole */
    else {
        if (sv_route(c->routes, c->c.w, &req, c->rq, &c->c.ob.out, &keep_alive) ==
            SV_AGAIN) {
            c->waiting = 1;
            http_parser_pause(p, 1);
            return 1;
        }
        c->routes->req->reset(c->rq);
    }
    if (c->c.ob.out.failed) {
        /* Out of memory somewhere in this response: replace what was
         * built of it with a static 503 ENOMEM and close; if even that
         * cannot be appended, send what came before and close. */
        c->c.ob.out.len = mark;
        if (c->c.ob.out.data != NULL)
            c->c.ob.out.data[mark] = '\0';
        sv_respond_enomem(&c->c.ob.out);
        c->c.ob.out.len = c->c.ob.out.failed ? mark : c->c.ob.out.len;
        c->c.ob.out.failed = 0;
        keep_alive = 0;
    }
    c->in_message = 0;
    sv_deadline_set(&c->c.timer, c->c.w->server->cfg.idle_timeout_ms);
    if (!keep_alive) {
        c->c.closing = 1;
        http_parser_pause(p, 1);
    } else if (c->c.ob.out.len + c->c.ob.pending > SV_MAX_PENDING_OUTPUT) {
        c->held = 1;
        http_parser_pause(p, 1);
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    dispatch(p->data);
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

/* Parses n bytes; when a request goes waiting, the rest is stashed. */
static void parse(hc_conn *c, const char *data, size_t n)
{
    size_t done = http_parser_execute(&c->head.parser, &settings, data, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->head.parser);
    if (c->c.closing) {
        /* Paused after a response that closes: ignore what follows. */
    } else if (c->waiting || c->held) {
        /* What follows the waiting (or held) request (resume_cb and
         * go_on took the stash out before parsing it, so it holds
         * nothing now). */
        int kept = sv_reader_keep(&c->stash, data + done, n - done, STASH_MAX);
        if (kept < 0)
            c->c.closing = 1;
        else if (kept > 0)
            sv_conn_set_reading(&c->c, 0);
    } else if (c->head.parser.upgrade || (e != HPE_OK) || done != n) {
        sv_respond_unreadable(&c->c.ob.out,
                              c->err_status ? c->err_status : c->head.status,
                              c->head.refusal ? c->head.refusal
                                              : http_errno_description(e));
        c->c.closing = 1;
        c->c.lingering = 1;
    }
    if (c->c.closing)
        sv_conn_set_reading(&c->c, 0);
}

static void on_read(sv_conn *conn, ssize_t nread, const char *data)
{
    hc_conn *c = (hc_conn *)conn;
    if ((c->waiting || c->held) && !c->c.closing) {
        /* Kept for after the answer.  An end of stream or an error
         * waits too: the waiting request is answered first. */
        int kept = nread > 0 ? sv_reader_keep(&c->stash, data, (size_t)nread,
                                              STASH_MAX)
                             : 0;
        c->ended |= nread < 0;
        if (kept < 0)
            c->c.closing = 1;
        if (nread < 0 || kept != 0)
            sv_conn_set_reading(&c->c, 0);
        return;
    }
    if (nread <= 0 || c->c.closing) {
        if (nread < 0 && !c->c.closing) {
            c->c.closing = 1;
            sv_conn_flush(&c->c);
        }
        return;
    }
    sd_thread *dec = c->c.w->dec;
    parse(c, data, (size_t)nread);
    if (sv_conn_flush(&c->c) == 0)
        go_on(c);
    /* Last: it may answer other waiting requests. */
    sd_flush(dec);
}

/* The store's result is in: answer the waiting request, then go on with
 * what the client sent after it. */
static void resume_cb(void *owner)
{
    hc_conn *c = owner;
    c->routes->req->woke(c->rq);
    c->waiting = 0;
    http_parser_pause(&c->head.parser, 0);
    if (dispatch(c) == 0 && !c->c.closing) {
        if (c->stash.len > 0) {
            sv_buf stash = c->stash;
            c->stash = (sv_buf){0};
            parse(c, stash.data, stash.len);
            sv_buf_release(&stash);
        }
        if (!c->waiting && !c->held && !c->c.closing && c->ended)
            c->c.closing = 1; /* the client is done: so is the connection */
        else if (!c->waiting && !c->held && !c->c.closing)
            sv_conn_set_reading(&c->c, 1);
    }
    sv_conn_flush(&c->c);
    go_on(c);
}

static void written(sv_conn *conn)
{
    go_on((hc_conn *)conn);
}

static int on_open(sv_conn *conn, void *arg)
{
    hc_conn *c = (hc_conn *)conn;
    c->routes = arg;
    if (c->routes->peer)
        sv_conn_peer(conn, c->peer, sizeof(c->peer), &c->peer_loopback);
    sv_head_init(&c->head, c, kept);
    if ((c->rq = calloc(1, c->routes->req->size)) == NULL)
        return -1;
    c->routes->req->init(c->rq, resume_cb, c);
    return 0;
}

static const sv_conn_type hc_conn_type = {
    .size = sizeof(hc_conn),
    .max_pending = SV_MAX_PENDING_OUTPUT,
    .keep_out = SIZE_MAX, /* the buffer is kept for the next response */
    .open = on_open,
    .read = on_read,
    .timeout = timeout,
    .written = written,
    .closing = closing,
    .release = release,
    .idle = idle,
    .alpn = &sv_http_alpn,
    .plaintext_answer = sv_http_plaintext_answer,
};

void sv_http_accept(sv_worker *w, uv_stream_t *listener,
                    const sv_routes *routes)
{
    sv_conn_accept(w, listener, &w->conns, &hc_conn_type, (void *)routes);
}

void sv_http_close_idle(sv_worker *w)
{
    sv_conn_close_idle(w, &w->conns);
}
