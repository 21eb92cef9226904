/*
 * http_client.c - a blocking HTTP/1.1 client: one request per connection
 * under one deadline, the response read by http-parser into a bounded
 * body and the few headers a caller names.
 *
 * It is separate from serve's HTTP code because it is the other side:
 * serve reads requests on libuv's loops, this writes one request and
 * waits for its answer, for tools and for serve's control thread, where
 * a blocking call with a deadline is simpler than a loop of its own.
 *
 * https:// goes through OpenSSL on the same non-blocking socket, the
 * deadline still bounding the handshake, the writes and the reads (a
 * want-read or want-write is a wait on the socket), with the client
 * context of libsluice's Redis TLS (src/store/tls_client.c), so that a
 * server is verified here exactly as a Redis is.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "http/http_client.h"
#include "sluice.h"
#include "store/tls_client.h"

const char *ah_err_name(int err)
{
    switch (err) {
#define AH_NAME(name, value, text)                                             \
    case value:                                                                \
        return #name;
        AH_ERRORS(AH_NAME)
#undef AH_NAME
    }
    return "EUNKNOWN";
}

const char *ah_strerror(int err)
{
    switch (err) {
#define AH_TEXT(name, value, text)                                             \
    case value:                                                                \
        return text;
        AH_ERRORS(AH_TEXT)
#undef AH_TEXT
    }
    return "unknown error";
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* code, with "what failed: detail" in err. */
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void ah_response_init(ah_response *r, const char *const *capture)
{
    memset(r, 0, sizeof(*r));
    r->capture = capture;
}

const char *ah_response_header(const ah_response *r, const char *name)
{
    for (int i = 0; r->capture != NULL && i < AH_MAX_CAPTURE && r->capture[i];
         i++)
        if (strcasecmp(r->capture[i], name) == 0)
            return r->values[i];
    return NULL;
}

void ah_response_release(ah_response *r)
{
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
    r->status = 0;
    for (int i = 0; i < AH_MAX_CAPTURE; i++) {
        free(r->values[i]);
        r->values[i] = NULL;
    }
}

/* ---- the response reader ---- */

/* Appends len bytes to *s (NUL-terminated, *n bytes, room for *cap). */
static int append(char **s, size_t *n, size_t *cap, const char *at, size_t len)
{
    if (*n + len + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *n + len + 1)
            c *= 2;
        char *grown = realloc(*s, c);
        if (grown == NULL)
            return -1;
        *s = grown;
        *cap = c;
    }
    memcpy(*s + *n, at, len);
    *n += len;
    (*s)[*n] = '\0';
    return 0;
}

static int append_str(char **s, const char *at, size_t len)
{
    size_t n = *s ? strlen(*s) : 0, cap = *s ? n + 1 : 0;
    return append(s, &n, &cap, at, len);
}

static int no_memory(ah_parser *p)
{
    p->error = AH_ENOMEM;
    snprintf(p->errmsg, sizeof(p->errmsg), "out of memory");
    return -1;
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
    ah_parser *p = hp->data;
    if (p->in_value) {
        p->in_value = 0;
        p->field_len = 0;
    }
    if (p->field_len != SIZE_MAX && p->field_len + len < sizeof(p->field)) {
        memcpy(p->field + p->field_len, at, len);
        p->field_len += len;
    } else {
        p->field_len = SIZE_MAX; /* too long to be one of the names */
    }
    return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
    ah_parser *p = hp->data;
    ah_response *r = p->out;
    if (!p->in_value) {
        p->in_value = 1;
        p->capturing = -1;
        for (int i = 0; p->field_len != SIZE_MAX && r->capture != NULL &&
                        i < AH_MAX_CAPTURE && r->capture[i];
             i++)
            if (strlen(r->capture[i]) == p->field_len &&
                strncasecmp(r->capture[i], p->field, p->field_len) == 0) {
                p->capturing = i;
                break;
            }
        if (p->capturing >= 0) {
            char **v = &r->values[p->capturing];
            if (append_str(v, *v ? ", " : "", *v ? 2 : 0) != 0)
                return no_memory(p);
        }
    }
    if (p->capturing >= 0 && append_str(&r->values[p->capturing], at, len))
        return no_memory(p);
    return 0;
}

static int on_headers_complete(http_parser *hp)
{
    ah_parser *p = hp->data;
    if (hp->status_code < 100 || hp->status_code > 599) {
        p->error = AH_EPROTO;
        snprintf(p->errmsg, sizeof(p->errmsg),
                 "malformed response: status %u out of range 100..599",
                 hp->status_code);
        return -1;
    }
    p->out->status = hp->status_code;
    return p->head ? 1 : 0; /* 1: no body follows */
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
    ah_parser *p = hp->data;
    if (append(&p->out->body, &p->out->body_len, &p->body_cap, at, len))
        return no_memory(p);
    return 0;
}

static int on_message_complete(http_parser *hp)
{
    ah_parser *p = hp->data;
    p->complete = 1;
    http_parser_pause(hp, 1); /* bytes after the response are not ours */
    return 0;
}

static const http_parser_settings settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void ah_parser_init(ah_parser *p, ah_response *out, int head_request)
{
    memset(p, 0, sizeof(*p));
    http_parser_init(&p->hp, HTTP_RESPONSE);
    p->hp.data = p;
    p->out = out;
    p->head = head_request;
    p->capturing = -1;
    p->max_bytes = out->max_bytes ? out->max_bytes : AH_MAX_RESPONSE;
}

/* 1 once complete (the body then made non-NULL), else the error met. */
static int outcome(ah_parser *p)
{
    if (p->complete) {
        if (p->out->body == NULL &&
            append(&p->out->body, &p->out->body_len, &p->body_cap, "", 0)) {
            no_memory(p);
            return p->error;
        }
        return 1;
    }
    enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
    if (p->error == 0 && e != HPE_OK) {
        p->error = AH_EPROTO;
        snprintf(p->errmsg, sizeof(p->errmsg), "malformed response: %s",
                 http_errno_description(e));
    }
    return p->error;
}

int ah_parser_feed(ah_parser *p, const char *data, size_t len)
{
    if (p->error || p->complete || len == 0)
        return p->error ? p->error : p->complete;
    if (len > p->max_bytes - p->received) {
        p->error = AH_ETOOBIG;
        snprintf(p->errmsg, sizeof(p->errmsg),
                 "response too large: more than %zu bytes", p->max_bytes);
        return p->error;
    }
    p->received += len;
    http_parser_execute(&p->hp, &settings, data, len);
    return outcome(p);
}

int ah_parser_eof(ah_parser *p)
{
    if (p->error || p->complete)
        return p->error ? p->error : 1;
    /* A zero length tells http-parser the stream ended: a body read to
     * the close is complete, anything else is cut short. */
    http_parser_execute(&p->hp, &settings, "", 0);
    int rc = outcome(p);
    if (rc == 0) {
        p->error = AH_EPROTO;
        snprintf(p->errmsg, sizeof(p->errmsg),
                 "malformed response: cut short after %zu bytes", p->received);
        rc = p->error;
    }
    return rc;
}

int ah_response_parse(const char *data, size_t len, ah_response *out, char *err,
                      size_t errlen)
{
    ah_parser p;
    ah_response_release(out);
    ah_parser_init(&p, out, 0);
    int rc = ah_parser_feed(&p, data, len);
    if (rc == 0)
        rc = ah_parser_eof(&p);
    if (rc < 0) {
        ah_response_release(out);
        return fail(err, errlen, rc, "%s", p.errmsg);
    }
    return 0;
}

/* ---- the request ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out,
 * -1 poll failed (errno). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* The parts of a target: host (no brackets), port, the base path. */
typedef struct target {
    char host[256], port[8], base[256];
    int tls; /* https:// */
} target;

static int parse_target(const char *s, target *t, char *err, size_t errlen)
{
    const char *in = s;
    int url = 0;
    memset(t, 0, sizeof(*t));
    if (strncasecmp(s, "http://", 7) == 0) {
        s += 7;
        url = 1;
    } else if (strncasecmp(s, "https://", 8) == 0) {
        s += 8;
        url = t->tls = 1;
    } else if (strstr(s, "://") != NULL) {
        return fail(err, errlen, AH_EADDR,
                    "bad address: '%s': only http:// and https:// are "
                    "supported",
                    in);
    }
    size_t hostpart = strcspn(s, "/");
    const char *host = s, *end = s + hostpart, *colon;
    size_t host_len;
    if (*s == '[') {
        const char *close = memchr(s, ']', hostpart);
        if (close == NULL)
            return fail(err, errlen, AH_EADDR, "bad address: '%s'", in);
        host = s + 1;
        host_len = (size_t)(close - host);
        colon = close + 1 < end ? close + 1 : NULL;
        if (colon != NULL && *colon != ':')
            return fail(err, errlen, AH_EADDR, "bad address: '%s'", in);
    } else {
        colon = memchr(s, ':', hostpart);
        host_len = colon ? (size_t)(colon - s) : hostpart;
        if (colon != NULL && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
            return fail(err, errlen, AH_EADDR,
                        "bad address: '%s': write an IPv6 address in []", in);
    }
    if (host_len == 0 || host_len >= sizeof(t->host))
        return fail(err, errlen, AH_EADDR, "bad address: '%s': no host", in);
    memcpy(t->host, host, host_len);
    if (colon != NULL) {
        size_t plen = (size_t)(end - colon - 1);
        if (plen == 0 || plen > 5 || strspn(colon + 1, "0123456789") < plen ||
            atoi(colon + 1) > 65535 || atoi(colon + 1) == 0)
            return fail(err, errlen, AH_EADDR, "bad address: '%s': bad port",
                        in);
        memcpy(t->port, colon + 1, plen);
    } else if (url) {
        strcpy(t->port, t->tls ? "443" : "80");
    } else {
        return fail(err, errlen, AH_EADDR, "bad address: '%s': no port", in);
    }
    if (*end != '\0') {
        if (!url)
            return fail(err, errlen, AH_EADDR, "bad address: '%s'", in);
        size_t blen = strlen(end);
        while (blen > 0 && end[blen - 1] == '/')
            blen--; /* "http://h:1/" and "http://h:1" are one base */
        if (blen >= sizeof(t->base) || strcspn(end, " \r\n?#") < blen)
            return fail(err, errlen, AH_EADDR,
                        "bad address: '%s': bad base path", in);
        memcpy(t->base, end, blen);
    }
    return 0;
}

/* The request's bytes, or NULL (rc set). */
static char *format_request(const target *t, const char *method,
                            const char *path, const char *const *headers,
                            const char *body, size_t body_len, size_t *len,
                            int *rc, char *err, size_t errlen)
{
    *rc = AH_EINVAL;
    if (method == NULL || *method == '\0' ||
        strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(method)) {
        fail(err, errlen, AH_EINVAL, "invalid argument: method '%s'",
             method ? method : "(null)");
        return NULL;
    }
    if (path == NULL || path[0] != '/' ||
        strcspn(path, " \r\n") != strlen(path)) {
        fail(err, errlen, AH_EINVAL, "invalid argument: path '%s'",
             path ? path : "(null)");
        return NULL;
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        if (strcspn(headers[i], "\r\n") != strlen(headers[i]) ||
            strchr(headers[i], ':') == NULL) {
            fail(err, errlen, AH_EINVAL, "invalid argument: header '%s'",
                 headers[i]);
            return NULL;
        }
    int v6 = strchr(t->host, ':') != NULL;
    char *s = NULL;
    size_t n = 0, cap = 0;
    char line[1024];
    int bad = 0;
    bad |= append(&s, &n, &cap, method, strlen(method));
    bad |= append(&s, &n, &cap, " ", 1);
    bad |= append(&s, &n, &cap, t->base, strlen(t->base));
    bad |= append(&s, &n, &cap, path, strlen(path));
    snprintf(line, sizeof(line),
             " HTTP/1.1\r\nHost: %s%s%s:%s\r\nConnection: close\r\n"
             "User-Agent: sluice\r\n",
             v6 ? "[" : "", t->host, v6 ? "]" : "", t->port);
    bad |= append(&s, &n, &cap, line, strlen(line));
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        bad |= append(&s, &n, &cap, headers[i], strlen(headers[i]));
        bad |= append(&s, &n, &cap, "\r\n", 2);
    }
    if (body != NULL) {
        snprintf(line, sizeof(line), "Content-Length: %zu\r\n", body_len);
        bad |= append(&s, &n, &cap, line, strlen(line));
    }
    bad |= append(&s, &n, &cap, "\r\n", 2);
    if (body != NULL)
        bad |= append(&s, &n, &cap, body, body_len);
    if (bad) {
        free(s);
        *rc = fail(err, errlen, AH_ENOMEM, "out of memory");
        return NULL;
    }
    *len = n;
    *rc = 0;
    return s;
}

/* A connected socket to one of t's addresses, or a negative AH_E…. */
static int connect_target(const target *t, int64_t deadline, char *err,
                          size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    /* Numeric hosts only, and "localhost" from /etc/hosts: a DNS lookup
     * would block past the deadline. */
    if (strcasecmp(t->host, "localhost") != 0)
        hints.ai_flags |= AI_NUMERICHOST;
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(t->host, t->port, &hints, &ai);
    if (gai != 0)
        return fail(err, errlen, AH_EADDR, "bad address: '%s': %s", t->host,
                    gai_strerror(gai));
    int rc = AH_ECONNECT, fd = -1;
    for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    a->ai_protocol);
        if (fd < 0) {
            rc = fail(err, errlen, AH_ECONNECT, "connect %s:%s: %s", t->host,
                      t->port, strerror(errno));
            continue;
        }
        int e = 0;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            e = errno;
            if (e == EINPROGRESS) {
                int w = wait_fd(fd, POLLOUT, deadline);
                socklen_t elen = sizeof(e);
                if (w == 0) {
                    rc = fail(err, errlen, AH_ETIMEDOUT,
                              "connect %s:%s: timed out", t->host, t->port);
                    close(fd);
                    fd = -1;
                    break;
                }
                if (w < 0)
                    e = errno;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0)
                    e = errno;
            }
        }
        if (e == 0)
            break;
        rc = fail(err, errlen, AH_ECONNECT, "connect %s:%s: %s", t->host,
                  t->port, strerror(e));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd >= 0 ? fd : rc;
}

/* One connection: its socket, and TLS over it (NULL: plain text). */
typedef struct chan {
    int fd;
    SSL *ssl;
} chan;

/* After an SSL call returned rc: waits for what OpenSSL wants of the
 * socket.  1 to call again, 0 timed out, -1 failed (not a want). */
static int tls_wait(const chan *c, int rc, int64_t deadline)
{
    int e = SSL_get_error(c->ssl, rc);
    if (e == SSL_ERROR_WANT_READ)
        return wait_fd(c->fd, POLLIN, deadline);
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_fd(c->fd, POLLOUT, deadline);
    return -1;
}

/* A TLS failure after rc, as code with OpenSSL's reason after what. */
static int tls_fail(const chan *c, int rc, int code, const char *what,
                    char *err, size_t errlen)
{
    char why[256];
    if (sl__tls_client_failed(c->ssl, rc, what, why, sizeof(why)) == SL_EINVAL)
        code = AH_ECONNECT; /* a certificate refused: no server here */
    return fail(err, errlen, code, "%s", why);
}

/* The handshake, the server's certificate verified by tls: 0, or a
 * negative AH_E…. */
static int tls_start(chan *c, const sl__tls_client *tls, const target *t,
                     int64_t deadline, char *err, size_t errlen)
{
    if ((c->ssl = sl__tls_client_session(tls, c->fd, t->host)) == NULL)
        return fail(err, errlen, AH_ENOMEM, "out of memory");
    for (;;) {
        ERR_clear_error();
        int rc = SSL_connect(c->ssl);
        if (rc == 1)
            return 0;
        int w = tls_wait(c, rc, deadline);
        if (w == 0)
            return fail(err, errlen, AH_ETIMEDOUT,
                        "tls handshake with %s:%s: timed out", t->host,
                        t->port);
        if (w < 0) {
            char what[300];
            snprintf(what, sizeof(what), "tls handshake with %s:%s", t->host,
                     t->port);
            return tls_fail(c, rc, AH_ECONNECT, what, err, errlen);
        }
    }
}

static int send_all(const chan *c, const char *data, size_t len,
                    int64_t deadline, char *err, size_t errlen)
{
    while (len > 0) {
        ssize_t n;
        int w = 1;
        if (c->ssl != NULL) {
            ERR_clear_error();
            int chunk = len > INT32_MAX ? INT32_MAX : (int)len;
            if ((n = SSL_write(c->ssl, data, chunk)) <= 0 &&
                (w = tls_wait(c, (int)n, deadline)) < 0)
                return tls_fail(c, (int)n, AH_EIO, "write", err, errlen);
        } else {
            n = send(c->fd, data, len, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            w = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
                    ? wait_fd(c->fd, POLLOUT, deadline)
                    : -1;
            if (n <= 0 && w < 0)
                return fail(err, errlen, AH_EIO, "write: %s", strerror(errno));
        }
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (w == 0) {
            return fail(err, errlen, AH_ETIMEDOUT,
                        "write: timed out with %zu bytes unsent", len);
        }
    }
    return 0;
}

/* The server's end of a TLS stream: close_notify, or (as many servers
 * end a Connection: close answer) the socket closed without it; whether
 * the response is whole is the parser's to say. */
static int tls_ended(const chan *c, int rc)
{
    int e = SSL_get_error(c->ssl, rc);
    return e == SSL_ERROR_ZERO_RETURN ||
           (e == SSL_ERROR_SYSCALL && errno == 0) ||
           (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) ==
                                      SSL_R_UNEXPECTED_EOF_WHILE_READING);
}

static int read_response(const chan *c, ah_parser *p, int64_t deadline,
                         char *err, size_t errlen)
{
    char buf[16384];
    for (;;) {
        ssize_t n;
        int w = 1;
        if (c->ssl != NULL) {
            ERR_clear_error();
            errno = 0;
            int r = SSL_read(c->ssl, buf, (int)sizeof(buf));
            n = r;
            if (r <= 0 && tls_ended(c, r))
                n = 0;
            else if (r <= 0 && (w = tls_wait(c, r, deadline)) < 0)
                return tls_fail(c, r, AH_EIO, "read", err, errlen);
            else if (r <= 0)
                n = -1;
        } else {
            n = recv(c->fd, buf, sizeof(buf), 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                w = wait_fd(c->fd, POLLIN, deadline);
            else if (n < 0)
                w = -1;
            if (w < 0)
                return fail(err, errlen, AH_EIO, "read: %s", strerror(errno));
        }
        if (n < 0 && w == 0)
            return fail(err, errlen, AH_ETIMEDOUT,
                        "read: timed out after %zu bytes", p->received);
        if (n < 0)
            continue;
        int rc = n > 0 ? ah_parser_feed(p, buf, (size_t)n) : ah_parser_eof(p);
        if (rc < 0)
            return fail(err, errlen, rc, "%s", p->errmsg);
        if (rc == 1)
            return 0;
    }
}

int ah_request(const char *target_s, const char *method, const char *path,
               const char *const *headers, const char *body, size_t body_len,
               int timeout_ms, ah_response *out, char *err, size_t errlen)
{
    return ah_request_tls(NULL, target_s, method, path, headers, body, body_len,
                          timeout_ms, out, err, errlen);
}

int ah_request_tls(const sl__tls_client *tls, const char *target_s,
                   const char *method, const char *path,
                   const char *const *headers, const char *body,
                   size_t body_len, int timeout_ms, ah_response *out, char *err,
                   size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    ah_response_release(out);
    if (target_s == NULL || timeout_ms <= 0)
        return fail(err, errlen, AH_EINVAL, "invalid argument: %s",
                    target_s == NULL ? "no target" : "timeout must be > 0");
    int64_t deadline = now_ms() + timeout_ms;
    target t;
    int rc = parse_target(target_s, &t, err, errlen);
    if (rc != 0)
        return rc;
    sl__tls_client *own = NULL;
    if (t.tls && tls == NULL) {
        /* No settings given: the system's CAs, and the host's name. */
        sl__tls_client_files f = {.label = "tls"};
        char why[256];
        if (sl__tls_client_new(&f, &own, why, sizeof(why)) != 0)
            return fail(err, errlen, AH_EINVAL, "%s", why);
        tls = own;
    }
    size_t len = 0;
    char *req = format_request(&t, method, path, headers, body, body_len, &len,
                               &rc, err, errlen);
    chan c = {.fd =
                  req != NULL ? connect_target(&t, deadline, err, errlen) : -1};
    if (req != NULL && c.fd < 0)
        rc = c.fd;
    if (c.fd >= 0 && t.tls)
        rc = tls_start(&c, tls, &t, deadline, err, errlen);
    if (c.fd >= 0 && rc == 0)
        rc = send_all(&c, req, len, deadline, err, errlen);
    free(req);
    if (c.fd >= 0 && rc == 0) {
        ah_parser p;
        ah_parser_init(&p, out, strcmp(method, "HEAD") == 0);
        rc = read_response(&c, &p, deadline, err, errlen);
    }
    if (c.ssl != NULL && rc == 0)
        SSL_shutdown(c.ssl); /* our close_notify, best effort */
    SSL_free(c.ssl);
    ERR_clear_error();
    if (c.fd >= 0)
        close(c.fd);
    sl__tls_client_free(own);
    if (rc != 0)
        ah_response_release(out);
    return rc;
}
