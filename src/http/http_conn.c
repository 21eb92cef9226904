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
    http_parser parser;
    sv_buf url, body;
    /* The Sluice-* headers: their bytes, their offsets into hbytes (which
     * may move while it grows), and their views once the message is
     * complete. */
    sv_buf hbytes, hrecs, hviews;
    sv_buf field;    /* the name of the header being read */
    int in_value;    /* the last header callback was a value */
    int keep_header; /* the header being read is a Sluice-* one */
    int in_message;
    sv_head head;   /* what every server checks of a head (head.h) */
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

typedef struct kept_header {
    size_t name_off, name_len, value_off, value_len;
} kept_header;

static void release(sv_conn *conn)
{
    hc_conn *c = (hc_conn *)conn;
    sv_buf_release(&c->url);
    sv_buf_release(&c->body);
    sv_buf_release(&c->hbytes);
    sv_buf_release(&c->hrecs);
    sv_buf_release(&c->hviews);
    sv_buf_release(&c->field);
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
        http_parser_pause(&c->parser, 0);
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
    c->url.len = c->body.len = c->hbytes.len = c->hrecs.len = 0;
    c->url.failed = c->body.failed = c->hbytes.failed = c->hrecs.failed = 0;
    c->hviews.failed = c->field.failed = 0;
    c->field.len = 0;
    c->in_value = 0;
    c->err_status = 0;
    sv_head_begin(&c->head, c->c.w->server->cfg.max_header_bytes);
    sv_deadline_set(&c->c.timer, c->c.w->server->cfg.read_timeout_ms);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    hc_conn *c = p->data;
    if (sv_head_url(&c->head, at, len) != 0)
        return -1;
    sv_buf_add(&c->url, at, len);
    return 0;
}

/* Names and values may arrive split over reads: a name is gathered in
 * c->field until its value starts. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
    hc_conn *c = p->data;
    if (sv_head_field(&c->head, at, len) != 0)
        return -1;
    if (c->in_value) {
        c->field.len = 0;
        c->in_value = 0;
    }
    sv_buf_add(&c->field, at, len);
    return 0;
}

#define KEPT_PREFIX "sluice-"

/* The header whose name is in c->field is one a handler reads. */
static int kept_name(const hc_conn *c)
{
    static const char *const names[] = {"authorization", "if-match",
                                        "if-none-match"};
    const char *f = c->field.data;
    size_t len = c->field.len;
    if (len >= sizeof(KEPT_PREFIX) - 1 &&
        strncasecmp(f, KEPT_PREFIX, sizeof(KEPT_PREFIX) - 1) == 0)
        return 1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (len == strlen(names[i]) && strncasecmp(f, names[i], len) == 0)
            return 1;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    hc_conn *c = p->data;
    if (sv_head_value(&c->head, at, len) != 0)
        return -1;
    if (!c->in_value) { /* the first piece of this value */
        c->in_value = 1;
        c->keep_header = kept_name(c);
        if (c->keep_header) {
            kept_header k = {c->hbytes.len, c->field.len, 0, 0};
            sv_buf_add(&c->hbytes, c->field.data, c->field.len);
            k.value_off = c->hbytes.len;
            sv_buf_add(&c->hrecs, &k, sizeof(k));
        }
    }
    if (c->keep_header && !c->hrecs.failed) {
        kept_header *k = (kept_header *)(c->hrecs.data + c->hrecs.len) - 1;
        k->value_len += len;
        sv_buf_add(&c->hbytes, at, len);
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    hc_conn *c = p->data;
    if (sv_head_complete(&c->head, p) != 0)
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
    http_parser *p = &c->parser;
    sv_http_request req = {
        .method = p->method,
        .path = c->url.data ? c->url.data : "",
        .path_len = c->url.len,
        .body = c->body.data ? c->body.data : "",
        .body_len = c->body.len,
    };
    /* The kept headers' views, now that hbytes no longer moves. */
    c->hviews.len = 0;
    for (size_t i = 0; i < c->hrecs.len / sizeof(kept_header); i++) {
        const kept_header *k = (const kept_header *)c->hrecs.data + i;
        sv_http_header h = {c->hbytes.data + k->name_off, k->name_len,
                            c->hbytes.data + k->value_off, k->value_len};
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
    if (c->url.failed || c->body.failed || c->hbytes.failed ||
        c->hrecs.failed || c->hviews.failed || c->field.failed)
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
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Parses n bytes; when a request goes waiting, the rest is stashed. */
static void parse(hc_conn *c, const char *data, size_t n)
{
    size_t done = http_parser_execute(&c->parser, &settings, data, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
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
    } else if (c->parser.upgrade || (e != HPE_OK) || done != n) {
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
    /* Last: it may answer other waiting requests (a service that decides
     * nothing has no decision layer: service.c). */
    if (dec != NULL)
        sd_flush(dec);
}

/* The store's result is in: answer the waiting request, then go on with
 * what the client sent after it. */
static void resume_cb(void *owner)
{
    hc_conn *c = owner;
    c->routes->req->woke(c->rq);
    c->waiting = 0;
    http_parser_pause(&c->parser, 0);
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
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
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
