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
#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "http/http_conn.h"
#include "runtime/reader.h"
#include "runtime/deadline.h"
#include "http/hygiene.h"
#include "http/respond.h"
#include "api/router.h"
#include "runtime/send.h"

typedef struct sv_conn sv_conn;
struct sv_conn {
    uv_tcp_t tcp; /* first: a handle pointer is a conn pointer */
    sv_deadline timer;
    sv_worker *w;
    const sv_routes *routes;
    char peer[INET6_ADDRSTRLEN]; /* when routes->peer */
    int peer_loopback;
    http_parser parser;
    sv_buf url, body;
    sv_outbox ob; /* the responses */
    /* The Sluice-* headers: their bytes, their offsets into hbytes (which
     * may move while it grows), and their views once the message is
     * complete. */
    sv_buf hbytes, hrecs, hviews;
    sv_buf field;    /* the name of the header being read */
    int in_value;    /* the last header callback was a value */
    int keep_header; /* the header being read is a Sluice-* one */
    size_t header_bytes;
    int in_message;
    int field_is_expect; /* the header being read is Expect */
    int expect_continue; /* Expect: 100-continue was asked */
    int err_status;      /* a cap our callbacks refused: 413, 431; or 400: */
    const char *refusal; /* what hygiene.c found wrong with the request */
    int closing;         /* no more requests; close after the writes */
    int lingering;       /* 1: after an unreadable request's answer, shut down,
                          * read and drop what still comes, then close (end());
                          * 2: doing so */
    uv_shutdown_t shutdown;
    int paused; /* reading stopped until the client reads */
    sv_reader reader;
    int handles_open; /* close callbacks still to come */
    sv_req rq;        /* the request's state across waits */
    int waiting;      /* rq waits: parser paused */
    int held;         /* answers past SV_MAX_PENDING_OUTPUT: parser paused until
                       * the client reads them (go_on) */
    sv_buf stash;     /* bytes read after the waiting request */
    int ended;        /* the client's end (or an error) came meanwhile */
    sv_conn *prev, *next;
};

/* How long an unreadable request's rest is read and dropped after its
 * answer before the connection closes (the proxy's PX_LINGER_MS). */
#define SV_LINGER_MS 2000

/* Bytes read ahead of a waiting request before reading stops. */
#define STASH_MAX (64 * 1024)

typedef struct kept_header {
    size_t name_off, name_len, value_off, value_len;
} kept_header;

static void conn_free_cb(uv_handle_t *h)
{
    sv_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    sv_worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sv_buf_release(&c->url);
    sv_buf_release(&c->body);
    sv_buf_release(&c->ob.out);
    sv_buf_release(&c->hbytes);
    sv_buf_release(&c->hrecs);
    sv_buf_release(&c->hviews);
    sv_buf_release(&c->field);
    sv_buf_release(&c->stash);
    sv_unaccept(w->server, &c->tcp);
    free(c);
    if (w->stopping && sv_worker_quiet(w))
        sv_readers_close(&w->readers);
}

static void conn_close(sv_conn *c)
{
    if (c->handles_open != 2 || uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    /* Given up now, not when the handles are freed: the wait could end
     * before then. */
    sv_req_close(&c->rq);
    uv_close((uv_handle_t *)&c->tcp, conn_free_cb);
    uv_close((uv_handle_t *)&c->timer.timer, conn_free_cb);
}

static void set_reading(sv_conn *c, int on)
{
    if (sv_reader_set(&c->reader, on) != 0)
        conn_close(c);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)req; /* the read side decides when to close */
    (void)status;
}

/* Done writing.  After an unreadable request the rest of it may still be
 * coming: closing with it unread would send a reset, which can destroy
 * the answer before the client has read it.  So the connection sends its
 * FIN and reads and drops what comes until the client closes or
 * SV_LINGER_MS passes (nginx's lingering close). */
static void end(sv_conn *c)
{
    if (c->lingering == 2)
        return; /* lingering already */
    if (!c->lingering || c->reader.eof || c->ended ||
        uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, shutdown_cb) != 0) {
        conn_close(c);
        return;
    }
    c->lingering = 2;
    sv_deadline_set(&c->timer, SV_LINGER_MS);
    set_reading(c, 1);
}

/* With nothing left to write: done with the connection? */
static int finished(sv_conn *c)
{
    return c->closing || (c->w->stopping && !c->in_message);
}

static void go_on(sv_conn *c);

static void write_cb(uv_write_t *req, int status)
{
    sv_conn *c = ((sv_send_req *)req)->owner;
    sv_outbox_written(&c->ob, req);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->ob.writes == 0 && finished(c)) {
        end(c);
        return;
    }
    go_on(c);
    if (c->paused && !c->waiting && !c->held &&
        c->ob.pending < SV_MAX_PENDING_OUTPUT / 2) {
        c->paused = 0;
        set_reading(c, 1);
    }
}

static void flush(sv_conn *c)
{
    if (c->ob.out.len == 0) {
        if (c->closing && c->ob.writes == 0)
            end(c);
        return;
    }
    /* The buffer is kept for the next response. */
    if (sv_outbox_flush(&c->ob, (uv_stream_t *)&c->tcp, c, write_cb,
                        SIZE_MAX) != 0) {
        conn_close(c);
        return;
    }
    if (c->ob.writes == 0) {
        if (finished(c))
            end(c);
        return;
    }
    if (!c->closing && c->ob.pending > SV_MAX_PENDING_OUTPUT) {
        c->paused = 1;
        set_reading(c, 0);
    }
}

static void parse(sv_conn *c, const char *data, size_t n);

/* Held answers drained below half the cap: parse on what was stashed,
 * as often as the client keeps up, then read again. */
static void go_on(sv_conn *c)
{
    if (!c->held)
        return;
    while (c->held && !c->waiting && !c->closing &&
           c->ob.pending < SV_MAX_PENDING_OUTPUT / 2) {
        c->held = 0;
        http_parser_pause(&c->parser, 0);
        sv_buf stash = c->stash;
        c->stash = (sv_buf){0};
        if (stash.len > 0)
            parse(c, stash.data, stash.len);
        sv_buf_release(&stash);
        flush(c);
    }
    if (c->held || c->waiting || c->closing)
        return;
    if (c->ended) {
        c->closing = 1; /* the client is done: so is the connection */
        flush(c);
    } else if (!c->paused) {
        set_reading(c, 1);
    }
}

static void timer_cb(uv_timer_t *t)
{
    sv_conn *c = t->data;
    if (c->lingering == 2) {
        conn_close(c); /* lingered long enough */
    } else if (c->in_message) {
        sv_respond_error(&c->ob.out, 408, "ETIMEOUT",
                         "request not received within the read timeout", 0);
        c->closing = 1;
        set_reading(c, 0);
        flush(c);
    } else {
        conn_close(c);
    }
}

static int on_message_begin(http_parser *p)
{
    sv_conn *c = p->data;
    c->in_message = 1;
    c->url.len = c->body.len = c->hbytes.len = c->hrecs.len = 0;
    c->url.failed = c->body.failed = c->hbytes.failed = c->hrecs.failed = 0;
    c->hviews.failed = c->field.failed = 0;
    c->field.len = 0;
    c->in_value = 0;
    c->header_bytes = 0;
    c->field_is_expect = c->expect_continue = 0;
    c->refusal = NULL;
    sv_deadline_set(&c->timer, c->w->server->cfg.read_timeout_ms);
    return 0;
}

static int count_header(sv_conn *c, size_t len)
{
    c->header_bytes += len;
    if (c->header_bytes > c->w->server->cfg.max_header_bytes) {
        c->err_status = 431;
        return -1;
    }
    return 0;
}

/* A request hygiene.c refuses: 400 naming why. */
static int refuse(sv_conn *c, const char *why)
{
    c->err_status = 400;
    c->refusal = why;
    return -1;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    sv_conn *c = p->data;
    const char *why = sv_hygiene_target(at, len);
    if (why != NULL)
        return refuse(c, why);
    if (count_header(c, len))
        return -1;
    sv_buf_add(&c->url, at, len);
    return 0;
}

/* Names and values may arrive split over reads: a name is gathered in
 * c->field until its value starts.  Expect's name and value are short
 * enough that a split one is merely not recognised (the client then
 * sends the body after its own timeout, as RFC 9110 allows). */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
    sv_conn *c = p->data;
    const char *why = sv_hygiene_field_name(at, len);
    if (why != NULL)
        return refuse(c, why);
    if (c->in_value) {
        c->field.len = 0;
        c->in_value = 0;
    }
    sv_buf_add(&c->field, at, len);
    c->field_is_expect = len == 6 && strncasecmp(at, "expect", 6) == 0;
    return count_header(c, len);
}

#define KEPT_PREFIX "sluice-"

/* The header whose name is in c->field is one a handler reads. */
static int kept_name(const sv_conn *c)
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
    sv_conn *c = p->data;
    if (c->field_is_expect && len == 12 &&
        strncasecmp(at, "100-continue", 12) == 0)
        c->expect_continue = 1;
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
    return count_header(c, len);
}

static int on_headers_complete(http_parser *p)
{
    sv_conn *c = p->data;
    const char *why = sv_hygiene_framing(p);
    if (why != NULL)
        return refuse(c, why);
    if (p->content_length != ULLONG_MAX &&
        p->content_length > c->w->server->cfg.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    if (c->expect_continue && p->http_major == 1 && p->http_minor >= 1) {
        /* Let a client that waits for it send the body now, rather than
         * after its own timeout.  Responses already queued go first. */
        sv_buf_addstr(&c->ob.out, "HTTP/1.1 100 Continue\r\n\r\n");
        flush(c);
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    sv_conn *c = p->data;
    if (c->body.len + len > c->w->server->cfg.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    sv_buf_add(&c->body, at, len);
    return 0;
}

static void resume_cb(void *owner);

/* Runs the complete request (again, after a wait); returns 1 when it
 * waits on the store. */
static int dispatch(sv_conn *c)
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
        http_should_keep_alive(p) && !c->w->stopping && !p->upgrade;
    size_t mark = c->ob.out.len; /* earlier pipelined responses stay */
    if (c->url.failed || c->body.failed || c->hbytes.failed ||
        c->hrecs.failed || c->hviews.failed || c->field.failed)
        c->ob.out.failed = 1; /* the request itself was not kept whole */
    else {
        if (sv_route(c->routes, c->w, &req, &c->rq, &c->ob.out, &keep_alive) ==
            SV_AGAIN) {
            c->waiting = 1;
            http_parser_pause(p, 1);
            return 1;
        }
        sv_req_reset(&c->rq);
    }
    if (c->ob.out.failed) {
        /* Out of memory somewhere in this response: replace what was
         * built of it with a static 503 ENOMEM and close; if even that
         * cannot be appended, send what came before and close. */
        c->ob.out.len = mark;
        if (c->ob.out.data != NULL)
            c->ob.out.data[mark] = '\0';
        sv_respond_enomem(&c->ob.out);
        c->ob.out.len = c->ob.out.failed ? mark : c->ob.out.len;
        c->ob.out.failed = 0;
        keep_alive = 0;
    }
    c->in_message = 0;
    sv_deadline_set(&c->timer, c->w->server->cfg.idle_timeout_ms);
    if (!keep_alive) {
        c->closing = 1;
        http_parser_pause(p, 1);
    } else if (c->ob.out.len + c->ob.pending > SV_MAX_PENDING_OUTPUT) {
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
static void parse(sv_conn *c, const char *data, size_t n)
{
    size_t done = http_parser_execute(&c->parser, &settings, data, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (c->closing) {
        /* Paused after a response that closes: ignore what follows. */
    } else if (c->waiting || c->held) {
        /* What follows the waiting (or held) request (resume_cb and
         * go_on took the stash out before parsing it, so it holds
         * nothing now). */
        int kept = sv_reader_keep(&c->stash, data + done, n - done, STASH_MAX);
        if (kept < 0)
            c->closing = 1;
        else if (kept > 0)
            set_reading(c, 0);
    } else if (c->parser.upgrade || (e != HPE_OK) || done != n) {
        sv_respond_unreadable(&c->ob.out, c->err_status,
                              c->refusal ? c->refusal
                                         : http_errno_description(e));
        c->closing = 1;
        c->lingering = 1;
    }
    if (c->closing)
        set_reading(c, 0);
}

static void read_cb(sv_reader *r, ssize_t nread, const char *data)
{
    sv_conn *c = (sv_conn *)((char *)r - offsetof(sv_conn, reader));
    if (c->lingering == 2) { /* the answer is out: drop what comes */
        if (nread < 0)
            conn_close(c);
        return;
    }
    if ((c->waiting || c->held) && !c->closing) {
        /* Kept for after the answer.  An end of stream or an error
         * waits too: the waiting request is answered first. */
        int kept = nread > 0 ? sv_reader_keep(&c->stash, data, (size_t)nread,
                                              STASH_MAX)
                             : 0;
        c->ended |= nread < 0;
        if (kept < 0)
            c->closing = 1;
        if (nread < 0 || kept != 0)
            set_reading(c, 0);
        return;
    }
    if (nread <= 0 || c->closing) {
        if (nread < 0 && !c->closing) {
            c->closing = 1;
            flush(c);
        }
        return;
    }
    parse(c, data, (size_t)nread);
    flush(c);
    go_on(c);
    /* Last: it may answer other waiting requests. */
    sd_flush(c->w->dec);
}

/* The store's result is in: answer the waiting request, then go on with
 * what the client sent after it. */
static void resume_cb(void *owner)
{
    sv_conn *c = owner;
    c->rq.wait = NULL; /* it ended */
    c->waiting = 0;
    http_parser_pause(&c->parser, 0);
    if (dispatch(c) == 0 && !c->closing) {
        if (c->stash.len > 0) {
            sv_buf stash = c->stash;
            c->stash = (sv_buf){0};
            parse(c, stash.data, stash.len);
            sv_buf_release(&stash);
        }
        if (!c->waiting && !c->held && !c->closing && c->ended)
            c->closing = 1; /* the client is done: so is the connection */
        else if (!c->waiting && !c->held && !c->closing && !c->paused)
            set_reading(c, 1);
    }
    flush(c);
    go_on(c);
}

/* The client's address, for routes that read it. */
static void read_peer(sv_conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, c->peer, sizeof(c->peer));
        c->peer_loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, c->peer, sizeof(c->peer));
        c->peer_loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
    }
}

void sv_conn_accept(sv_worker *w, uv_stream_t *listener,
                    const sv_routes *routes)
{
    sv_server *srv = w->server;
    sv_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->w = w;
    c->routes = routes;
    uv_tcp_init(&w->loop, &c->tcp);
    sv_deadline_init(&w->loop, &c->timer, timer_cb);
    c->tcp.data = c->timer.timer.data = c;
    c->rq.resume = resume_cb;
    c->rq.owner = c;
    c->handles_open = 2;
    c->next = w->conns;
    if (c->next)
        c->next->prev = c;
    w->conns = c;
    if (sv_accept(srv, listener, &c->tcp) != 0) {
        conn_close(c);
        return;
    }
    if (routes->peer)
        read_peer(c);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    sv_deadline_set(&c->timer, srv->cfg.idle_timeout_ms);
    if (sv_reader_start(&w->readers, &c->reader, &c->tcp, read_cb) != 0)
        conn_close(c);
}

/* On stop: idle connections close now; one in the middle of a request or
 * with a response still being written finishes it, then closes. */
void sv_conn_close_idle(sv_worker *w)
{
    for (sv_conn *c = w->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (!c->in_message && c->ob.writes == 0 && !c->waiting)
            conn_close(c);
    }
    if (sv_worker_quiet(w))
        sv_readers_close(&w->readers);
}

void sv_metrics_accept(sv_listener *l)
{
    sv_conn_accept(l->w, (uv_stream_t *)&l->tcp, &sv_metrics_routes);
}

void sv_metrics_close_idle(sv_listener *l)
{
    sv_conn_close_idle(l->w);
}
