/*
 * h2.c - gRPC over one HTTP/2 connection (h2c, with prior knowledge):
 * nghttp2 frames the connection, this file turns its streams into unary
 * calls.  No socket here: bytes come in through gr_session_recv() and go
 * out through the connection's write callback, so the same code runs
 * under grpc_conn.c's libuv connection and under a fuzz target.
 *
 * A call is one stream: HEADERS (POST, the method's :path, content-type
 * application/grpc, maybe grpc-timeout), then one length-prefixed
 * message (a flag byte, a 4-byte big-endian length, the protobuf bytes)
 * over as many DATA frames as the client likes, then END_STREAM.  The
 * method runs when the request is whole, and answers now or later (a
 * decision that waits on Redis): HEADERS, the answer's message in DATA,
 * then trailers with grpc-status 0.  An error is a "trailers-only"
 * answer, one HEADERS frame with grpc-status and a percent-encoded
 * grpc-message that ends the stream.  A request that is not gRPC at all
 * gets the HTTP status grpc's protocol asks for (415 for another
 * content-type, 405 for another method).
 *
 * Memory is bounded per connection: at most max_streams streams (nghttp2
 * refuses more with REFUSED_STREAM), each holding at most one message of
 * max_message_bytes; header lists are only counted against
 * max_header_bytes, never kept, but for the few fields a call needs.
 * An answer sent before the client ended its side (an error found early)
 * is followed by RST_STREAM(NO_ERROR), so that the client stops sending
 * what would be discarded anyway (RFC 9113, 8.1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "grpc/mem.h"
#include "grpc/session.h"

enum { ST_READING, ST_CALLED, ST_ANSWERED };

/* Longest :path kept to name an unknown method in its error. */
#define PATH_KEPT 96

struct gr_call {
    gr_session *s;
    int32_t id;
    int state;
    const gr_method *method; /* NULL: unknown :path */
    int not_post, not_grpc, too_big, bad_timeout;
    int early; /* answered before the request was whole: counted in early */
    size_t header_bytes;
    char path[PATH_KEPT + 1];
    uint64_t read_by;  /* loop ms the request must be whole by; 0: none */
    uint64_t deadline; /* grpc-timeout, in loop ms; 0: none */
    /* Answered: loop ms its answer must be sent by (set at the first
     * expiry pass after the answer); UINT64_MAX once reset for it. */
    uint64_t write_by;
    /* The request: its 5-byte prefix gathers in head; once it is whole,
     * in holds the prefix and the in_len - 5 bytes of the message that
     * came, in room (in_cap) grown as they come, never by the length the
     * prefix announces (msg_len, at most max_message_bytes): a stranger's
     * prefix alone costs nothing. */
    uint8_t head[5];
    uint8_t *in;
    size_t in_len, in_cap, msg_len;
    uint8_t *out;   /* the answer's prefix and message, once replied */
    size_t out_len; /* of out */
    size_t out_off; /* of out, handed to nghttp2 */
    void *data;     /* the method's */
    gr_call *prev, *next;
};

struct gr_session {
    nghttp2_session *ng;
    gr_mem *mem; /* nghttp2's and the calls' blocks */
    gr_session_config cfg;
    gr_session_io io;
    gr_call *calls;
    size_t n_calls;
    size_t busy; /* of n_calls, not answered yet */
    /* The call last looked up: a request's header fields and its DATA
     * come together, so this spares most of nghttp2's stream lookups. */
    gr_call *last;
    size_t *path_len; /* of cfg.methods[i]->path */
    /* Calls answered before their request was whole: only their answers
     * may need an RST_STREAM after them (on_frame_send). */
    size_t early;
    int inside;   /* in a gr_session_* call: its caller sends afterwards */
    int draining; /* a GOAWAY notice went */
    int goaway;   /* the last GOAWAY went */
    uint64_t now_ms;
};

/* ---- answers ---- */

static void wake(gr_session *s)
{
    if (!s->inside)
        s->io.wake(s->io.owner);
}

/* A header field for nghttp2, which copies it, or (NV_STATIC, both
 * strings literals) keeps pointers to it until it is sent. */
#define NV_FLAGS(n, v, flags)                                                  \
    {                                                                          \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), flags        \
    }
#define NV(n, v) NV_FLAGS(n, v, NGHTTP2_NV_FLAG_NONE)
#define NV_STATIC(n, v)                                                        \
    NV_FLAGS(n, v, NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)

static void answered(gr_call *c)
{
    if (c->state == ST_READING) {
        c->early = 1;
        c->s->early++;
    }
    c->s->busy--;
    c->state = ST_ANSWERED;
    c->read_by = c->deadline = 0;
    gr_mem_release(c->s->mem, c->in);
    c->in = NULL;
}

/* A request that is not gRPC: an HTTP status (a literal) and no body. */
static void http_error(gr_call *c, const char *status)
{
    nghttp2_nv nva[] = {NV_STATIC(":status", status)};
    nghttp2_submit_response(c->s->ng, c->id, nva, 1, NULL);
    answered(c);
    wake(c->s);
}

/* grpc-message is percent-encoded: printable ASCII but '%' as it is. */
static size_t percent_encode(const char *in, char *out, size_t room)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *in && n + 4 <= room; in++) {
        unsigned char ch = (unsigned char)*in;
        if (ch >= 0x20 && ch <= 0x7e && ch != '%')
            out[n++] = (char)ch;
        else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n] = '\0';
    return n;
}

void gr_call_fail(gr_call *c, int code, const char *message)
{
    if (c->state == ST_ANSWERED)
        return;
    char status[12], msg[3 * 256 + 1];
    snprintf(status, sizeof(status), "%d", code);
    percent_encode(message, msg, sizeof(msg));
    nghttp2_nv nva[] = {NV_STATIC(":status", "200"),
                        NV_STATIC("content-type", "application/grpc"),
                        NV("grpc-status", status), NV("grpc-message", msg)};
    nghttp2_submit_response(c->s->ng, c->id, nva, 4, NULL);
    answered(c);
    wake(c->s);
}

uint8_t *gr_call_reply_buf(gr_call *c, size_t len)
{
    gr_mem_release(c->s->mem, c->out);
    c->out_len = 0;
    if (len > UINT32_MAX || (c->out = gr_mem_alloc(c->s->mem, 5 + len)) == NULL)
        return NULL;
    uint8_t *p = c->out;
    p[0] = 0; /* not compressed */
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
    c->out_len = 5 + len;
    return p + 5;
}

/* The answer's DATA, then its trailers. */
static ssize_t read_answer(nghttp2_session *ng, int32_t id, uint8_t *buf,
                           size_t length, uint32_t *flags,
                           nghttp2_data_source *source, void *user)
{
    (void)user;
    gr_call *c = source->ptr;
    size_t n = c->out_len - c->out_off;
    if (n > length)
        n = length;
    memcpy(buf, c->out + c->out_off, n);
    c->out_off += n;
    if (c->out_off == c->out_len) {
        nghttp2_nv trailers[] = {NV_STATIC("grpc-status", "0")};
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (nghttp2_submit_trailer(ng, id, trailers, 1) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        gr_mem_release(c->s->mem, c->out);
        c->out = NULL;
    }
    return (ssize_t)n;
}

void gr_call_reply(gr_call *c)
{
    nghttp2_nv nva[] = {NV_STATIC(":status", "200"),
                        NV_STATIC("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = c, .read_callback = read_answer};
    c->out_off = 0;
    answered(c);
    if (nghttp2_submit_response(c->s->ng, c->id, nva, 2, &prd) != 0) {
        gr_mem_release(c->s->mem, c->out);
        c->out = NULL;
    }
    wake(c->s);
}

void *gr_call_ctx(const gr_call *c)
{
    return c->s->cfg.ctx;
}

void gr_call_set_data(gr_call *c, void *data)
{
    c->data = data;
}

void *gr_call_data(const gr_call *c)
{
    return c->data;
}

gr_mem *gr_call_mem(const gr_call *c)
{
    return c->s->mem;
}

/* ---- requests ---- */

static gr_call *call_of(gr_session *s, int32_t id)
{
    if (s->last == NULL || s->last->id != id)
        s->last = nghttp2_session_get_stream_user_data(s->ng, id);
    return s->last;
}

/* grpc-timeout: at most 8 digits and a unit (H, M, S, m, u, n), as loop
 * ms rounded up.  0, or -1 when malformed. */
static int parse_timeout(const uint8_t *v, size_t len, uint64_t *ms)
{
    uint64_t n = 0;
    if (len < 2 || len > 9)
        return -1;
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    switch (v[len - 1]) {
    case 'H':
        *ms = n * 3600000;
        return 0;
    case 'M':
        *ms = n * 60000;
        return 0;
    case 'S':
        *ms = n * 1000;
        return 0;
    case 'm':
        *ms = n;
        return 0;
    case 'u':
        *ms = (n + 999) / 1000;
        return 0;
    case 'n':
        *ms = (n + 999999) / 1000000;
        return 0;
    default:
        return -1;
    }
}

/* a (alen bytes) is the string literal lit: a length the compiler
 * knows, so that the comparison is a few moves, not a call. */
#define IS(a, alen, lit)                                                       \
    ((alen) == sizeof(lit) - 1 && memcmp(a, lit, sizeof(lit) - 1) == 0)

/* content-type application/grpc, or application/grpc+proto and the like. */
static int grpc_type(const uint8_t *v, size_t len)
{
    static const char t[] = "application/grpc";
    size_t n = sizeof(t) - 1;
    return len >= n && memcmp(v, t, n) == 0 &&
           (len == n || v[n] == '+' || v[n] == ';');
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame,
                            void *user)
{
    gr_session *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS ||
        frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    gr_call *c = gr_mem_calloc(s->mem, sizeof(*c));
    if (c == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    c->s = s;
    c->id = frame->hd.stream_id;
    c->state = ST_READING;
    c->not_grpc = 1; /* until a content-type says otherwise */
    c->read_by = s->now_ms + s->cfg.read_timeout_ms;
    c->next = s->calls;
    if (c->next)
        c->next->prev = c;
    s->calls = c;
    s->n_calls++;
    s->busy++;
    s->last = c;
    nghttp2_session_set_stream_user_data(ng, c->id, c);
    return 0;
}

/* :path names the method: by the lengths known since gr_session_new(). */
__attribute__((noinline)) static int
path_field(gr_session *s, gr_call *c, const uint8_t *value, size_t valuelen)
{
    size_t keep = valuelen < PATH_KEPT ? valuelen : PATH_KEPT;
    memcpy(c->path, value, keep);
    c->path[keep] = '\0';
    c->method = NULL;
    for (size_t i = 0; i < s->cfg.n_methods; i++)
        if (valuelen == s->path_len[i] &&
            memcmp(value, s->cfg.methods[i]->path, valuelen) == 0) {
            c->method = s->cfg.methods[i];
            break;
        }
    return 0;
}

__attribute__((noinline)) static int
timeout_field(gr_session *s, gr_call *c, const uint8_t *value, size_t valuelen)
{
    uint64_t ms;
    if (parse_timeout(value, valuelen, &ms) != 0)
        c->bad_timeout = 1;
    else
        c->deadline = s->now_ms + ms;
    return 0;
}

/* A header field of call c's request.  Most fields of a request are
 * none of the four read, and pass here with no call made, so that
 * on_header() saves no registers for them: the rarer work is in
 * functions of its own (not inlined), reached by tail calls. */
static inline int header_field(gr_session *s, gr_call *c,
                               const nghttp2_frame *frame, const uint8_t *name,
                               size_t namelen, const uint8_t *value,
                               size_t valuelen)
{
    if (c == NULL || c->state != ST_READING)
        return 0;
    /* As SETTINGS_MAX_HEADER_LIST_SIZE counts (RFC 9113, 6.5.2). */
    c->header_bytes += namelen + valuelen + 32;
    if (c->header_bytes > s->cfg.max_header_bytes)
        c->too_big = 1;
    if (c->too_big || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* Told apart by their names' lengths first. */
    switch (namelen) {
    case sizeof(":path") - 1:
        if (IS(name, namelen, ":path"))
            return path_field(s, c, value, valuelen);
        break;
    case sizeof(":method") - 1:
        if (IS(name, namelen, ":method"))
            c->not_post = !IS(value, valuelen, "POST");
        break;
    case sizeof("content-type") - 1:
        if (IS(name, namelen, "content-type"))
            c->not_grpc = !grpc_type(value, valuelen);
        else if (IS(name, namelen, "grpc-timeout"))
            return timeout_field(s, c, value, valuelen);
        break;
    }
    return 0;
}

/* A field of another stream than the call last looked up's. */
__attribute__((noinline)) static int
other_stream_field(gr_session *s, const nghttp2_frame *frame,
                   const uint8_t *name, size_t namelen, const uint8_t *value,
                   size_t valuelen)
{
    gr_call *c = call_of(s, frame->hd.stream_id);
    return header_field(s, c, frame, name, namelen, value, valuelen);
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user)
{
    (void)ng;
    (void)flags;
    gr_session *s = user;
    if (s->last == NULL || s->last->id != frame->hd.stream_id)
        return other_stream_field(s, frame, name, namelen, value, valuelen);
    return header_field(s, s->last, frame, name, namelen, value, valuelen);
}

/* The request's headers are in: is it a call we can run? */
static void headers_done(gr_call *c)
{
    char msg[PATH_KEPT + 64];
    if (c->too_big)
        gr_call_fail(c, GR_RESOURCE_EXHAUSTED,
                     "request headers larger than --max-header-bytes");
    else if (c->not_post)
        http_error(c, "405");
    else if (c->not_grpc)
        http_error(c, "415");
    else if (c->bad_timeout)
        gr_call_fail(c, GR_INTERNAL, "malformed grpc-timeout");
    else if (c->method == NULL) {
        snprintf(msg, sizeof(msg), "unknown method: %s", c->path);
        gr_call_fail(c, GR_UNIMPLEMENTED, msg);
    }
}

/* The message's 5-byte prefix is whole, and arrived bytes follow it in
 * this DATA frame: 0 with room made for the prefix and them, or -1 with
 * the call answered with why it cannot be one unary request of at most
 * the cap. */
static int message_begins(gr_call *c, size_t arrived)
{
    const uint8_t *p = c->head;
    uint64_t len = (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 |
                   (uint64_t)p[3] << 8 | p[4];
    if (p[0] == 1)
        gr_call_fail(c, GR_UNIMPLEMENTED,
                     "compressed messages are not supported "
                     "(grpc-accept-encoding: identity)");
    else if (p[0] != 0)
        gr_call_fail(c, GR_INTERNAL, "malformed message prefix");
    else if (len > c->s->cfg.max_message_bytes)
        gr_call_fail(c, GR_RESOURCE_EXHAUSTED,
                     "request message larger than the cap "
                     "(--max-body-bytes)");
    else {
        c->msg_len = (size_t)len;
        c->in_cap = 5 + (arrived < c->msg_len ? arrived : c->msg_len);
        if ((c->in = gr_mem_alloc(c->s->mem, c->in_cap)) != NULL) {
            memcpy(c->in, p, 5);
            return 0;
        }
        gr_call_fail(c, GR_RESOURCE_EXHAUSTED, "out of memory");
    }
    return -1;
}

/* Room in c->in for len more bytes of the message (which fit in it):
 * doubled, up to the message's own length, so that a message split in
 * many frames is copied O(log n) times. */
static int message_room(gr_call *c, size_t len)
{
    if (c->in_len + len <= c->in_cap)
        return 0;
    size_t cap = c->in_cap * 2;
    if (cap < c->in_len + len)
        cap = c->in_len + len;
    if (cap > 5 + c->msg_len)
        cap = 5 + c->msg_len;
    uint8_t *in = gr_mem_realloc(c->s->mem, c->in, cap);
    if (in == NULL) {
        gr_call_fail(c, GR_RESOURCE_EXHAUSTED, "out of memory");
        return -1;
    }
    c->in = in;
    c->in_cap = cap;
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id,
                   const uint8_t *data, size_t len, void *user)
{
    (void)ng;
    (void)flags;
    gr_call *c = call_of(user, id);
    if (c == NULL || c->state != ST_READING)
        return 0; /* answered already: the rest is discarded */
    if (c->in_len == 0 && len >= 5) { /* usual: the prefix in one piece */
        memcpy(c->head, data, 5);
        c->in_len = 5;
        data += 5;
        len -= 5;
    }
    for (; len > 0 && c->in_len < 5; len--)
        c->head[c->in_len++] = *data++;
    if (c->in_len < 5 || (c->in == NULL && message_begins(c, len) != 0))
        return 0;
    if (len > 5 + c->msg_len - c->in_len) {
        gr_call_fail(c, GR_INTERNAL,
                     "more than one request message for a unary method");
        return 0;
    }
    if (len == 0)
        return 0;
    if (message_room(c, len) != 0)
        return 0;
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
    return 0;
}

/* The client ended its side: run the call. */
static void end_stream(gr_call *c)
{
    if (c->state != ST_READING)
        return;
    if (c->in == NULL || c->in_len != 5 + c->msg_len) {
        gr_call_fail(c, GR_INTERNAL,
                     c->in_len == 0 ? "no request message"
                                    : "request message cut short");
        return;
    }
    c->state = ST_CALLED;
    c->read_by = 0;
    c->method->start(c, c->in + 5, c->msg_len);
}

static void final_goaway(gr_session *s)
{
    s->goaway = 1;
    nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(s->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame,
                         void *user)
{
    (void)ng;
    gr_session *s = user;
    if (frame->hd.type == NGHTTP2_PING) {
        /* The client answered the drain's PING: it has seen the notice,
         * so the last stream it started is known. */
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && s->draining && !s->goaway)
            final_goaway(s);
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    gr_call *c = call_of(s, frame->hd.stream_id);
    if (c == NULL)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS &&
        frame->headers.cat == NGHTTP2_HCAT_REQUEST && c->state == ST_READING)
        headers_done(c);
    else if (frame->hd.type == NGHTTP2_HEADERS && c->too_big)
        gr_call_fail(c, GR_RESOURCE_EXHAUSTED,
                     "request trailers larger than --max-header-bytes");
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        end_stream(c);
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame,
                         void *user)
{
    gr_session *s = user;
    int32_t id = frame->hd.stream_id;
    if (s->early == 0) /* every answer sent came after its request */
        return 0;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        !nghttp2_session_get_stream_remote_close(ng, id))
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
    return 0;
}

static void call_free(gr_session *s, gr_call *c)
{
    if (c->state == ST_CALLED)
        c->method->cancel(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_calls--;
    s->busy -= c->state != ST_ANSWERED;
    s->early -= (size_t)c->early;
    if (s->last == c)
        s->last = NULL;
    gr_mem_release(s->mem, c->in);
    gr_mem_release(s->mem, c->out);
    gr_mem_release(s->mem, c);
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error,
                           void *user)
{
    (void)error;
    (void)ng;
    /* The stream goes with this (no_closed_streams): no need to unset
     * its user data. */
    gr_call *c = call_of(user, id);
    if (c != NULL)
        call_free(user, c);
    return 0;
}

/* ---- the session ---- */

gr_session *gr_session_new(const gr_session_config *cfg,
                           const gr_session_io *io)
{
    gr_session *s = calloc(1, sizeof(*s));
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    if (s == NULL || (s->mem = gr_mem_new(GR_MEM_KEEP)) == NULL ||
        nghttp2_session_callbacks_new(&cb) != 0 ||
        nghttp2_option_new(&opt) != 0)
        goto fail;
    s->cfg = *cfg;
    s->io = *io;
    if ((s->path_len = calloc(cfg->n_methods + 1, sizeof(size_t))) == NULL)
        goto fail;
    for (size_t i = 0; i < cfg->n_methods; i++)
        s->path_len[i] = strlen(cfg->methods[i]->path);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    /* Closed streams are forgotten at once: nothing here uses priorities. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    /* nghttp2's HTTP checks of every header field are for servers that
     * pass headers on: this one reads four fields, each checked where it
     * is read (on_header), and answers nothing else of the request. */
    nghttp2_option_set_no_http_messaging(opt, 1);
    if (nghttp2_session_server_new3(&s->ng, cb, s, opt,
                                    gr_mem_nghttp2(s->mem)) != 0)
        goto fail;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
         cfg->max_header_bytes > UINT32_MAX ? UINT32_MAX
                                            : (uint32_t)cfg->max_header_bytes},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, 4) != 0)
        goto fail;
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return s;
fail:
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (s != NULL) {
        nghttp2_session_del(s->ng);
        gr_mem_free(s->mem);
        free(s->path_len);
    }
    free(s);
    return NULL;
}

void gr_session_free(gr_session *s)
{
    if (s == NULL)
        return;
    /* nghttp2_session_del() calls no callback: the calls go here. */
    s->inside = 1;
    while (s->calls != NULL)
        call_free(s, s->calls);
    nghttp2_session_del(s->ng);
    gr_mem_free(s->mem);
    free(s->path_len);
    free(s);
}

int gr_session_recv(gr_session *s, const uint8_t *data, size_t len,
                    uint64_t now_ms)
{
    s->now_ms = now_ms;
    s->inside = 1;
    ssize_t n = nghttp2_session_mem_recv(s->ng, data, len);
    s->inside = 0;
    return n < 0 ? -1 : 0;
}

int gr_session_send(gr_session *s, size_t max_bytes)
{
    size_t sent = 0;
    int rc = 0;
    s->inside = 1;
    while (sent < max_bytes) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(s->ng, &data);
        if (n < 0 || (n > 0 && s->io.write(s->io.owner, data, (size_t)n))) {
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        sent += (size_t)n;
    }
    s->inside = 0;
    return rc;
}

int gr_session_done(gr_session *s)
{
    return !nghttp2_session_want_read(s->ng) &&
           !nghttp2_session_want_write(s->ng);
}

size_t gr_session_streams(const gr_session *s)
{
    return s->n_calls;
}

size_t gr_session_busy(const gr_session *s)
{
    return s->busy;
}

void gr_session_drain(gr_session *s)
{
    if (s->draining)
        return;
    s->draining = 1;
    if (s->n_calls == 0) {
        final_goaway(s);
        return;
    }
    nghttp2_submit_shutdown_notice(s->ng);
    nghttp2_submit_ping(s->ng, NGHTTP2_FLAG_NONE, NULL);
}

uint64_t gr_session_expire(gr_session *s, uint64_t now_ms)
{
    uint64_t next = 0;
    s->now_ms = now_ms;
    s->inside = 1;
    for (gr_call *c = s->calls; c != NULL; c = c->next) {
        if (c->state == ST_ANSWERED) {
            if (s->cfg.write_timeout_ms == 0 || c->write_by == UINT64_MAX)
                continue;
            if (c->write_by == 0)
                c->write_by = now_ms + s->cfg.write_timeout_ms;
            else if (now_ms >= c->write_by) {
                /* Not flow-controlled: it goes even into a closed window,
                 * and the stream closes (on_stream_close frees it). */
                nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, c->id,
                                          NGHTTP2_CANCEL);
                c->write_by = UINT64_MAX;
                continue;
            }
            if (next == 0 || c->write_by < next)
                next = c->write_by;
            continue;
        }
        if (c->deadline && now_ms >= c->deadline) {
            if (c->state == ST_CALLED)
                c->method->cancel(c);
            gr_call_fail(c, GR_DEADLINE_EXCEEDED, "deadline exceeded");
            continue;
        }
        if (c->read_by && now_ms >= c->read_by) {
            gr_call_fail(c, GR_DEADLINE_EXCEEDED,
                         "request not received within the read timeout "
                         "(--read-timeout)");
            continue;
        }
        uint64_t at = c->read_by;
        if (c->deadline && (at == 0 || c->deadline < at))
            at = c->deadline;
        if (at && (next == 0 || at < next))
            next = at;
    }
    s->inside = 0;
    return next;
}
