/*
 * http_client.h - a small blocking HTTP/1.1 client for sluice's own
 * tools: `sluice limits` (the admin API), serve's advisor poller and
 * `sluice advisor` (scraping /metrics and /v1/rules).
 *
 * One request per connection (`Connection: close`), over TCP or TLS
 * (https://), one deadline over connect, handshake, write and read
 * (poll()-based), and a cap on the bytes of the response.  Hosts are numeric IPv4 or IPv6 addresses or
 * "localhost": nothing is looked up in DNS, whose blocking resolver the
 * deadline could not bound.  The response is read with http-parser
 * (Debian libhttp-parser-dev, as serve reads requests); its parsing is
 * ah_parser, fed bytes without a socket, which the fuzzer drives.
 */
#ifndef SL_ADMIN_HTTP_CLIENT_H
#define SL_ADMIN_HTTP_CLIENT_H

#include <stddef.h>

#include <http_parser.h>

/* The errors of this client: 0 is success (whatever the HTTP status). */
#define AH_ERRORS(X)                                                           \
    X(EINVAL, -1, "invalid argument")                                          \
    X(ENOMEM, -2, "out of memory")                                             \
    X(EADDR, -20, "bad address")                                               \
    X(ECONNECT, -21, "connection failed")                                      \
    X(ETIMEDOUT, -22, "timed out")                                             \
    X(EIO, -23, "connection error")                                            \
    X(EPROTO, -24, "malformed response")                                       \
    X(ETOOBIG, -25, "response too large")

enum {
#define AH_ENUM(name, value, text) AH_##name = value,
    AH_ERRORS(AH_ENUM)
#undef AH_ENUM
};

/* "ETIMEDOUT", or "EUNKNOWN" for a code not in the table. */
const char *ah_err_name(int err);
/* "timed out", or "unknown error". */
const char *ah_strerror(int err);

/* The default cap on a response's bytes, status line and headers
 * included: an error (AH_ETOOBIG) beyond. */
#define AH_MAX_RESPONSE ((size_t)4 << 20)
/* Header names a caller may ask to have captured. */
#define AH_MAX_CAPTURE 8

/*
 * A response.  The caller sets `capture` and `max_bytes` (with
 * ah_response_init()); the client fills in the rest.
 */
typedef struct ah_response {
    /* In: the names of the headers to keep (matched case-insensitively),
     * NULL-terminated, at most AH_MAX_CAPTURE; borrowed, so valid while
     * the response is used. */
    const char *const *capture;
    size_t max_bytes; /* in: 0 for AH_MAX_RESPONSE */

    int status; /* out: the HTTP status */
    /* out: the body, NUL-terminated (so "" when empty, never NULL after
     * success); owned, freed by ah_response_release(). */
    char *body;
    size_t body_len;
    /* out: the value of capture[i], or NULL when the response had none;
     * several of one name are joined with ", " (RFC 9110, 5.3).  Owned. */
    char *values[AH_MAX_CAPTURE];
} ah_response;

/* A response that keeps the headers named in capture (NULL: none). */
void ah_response_init(ah_response *r, const char *const *capture);
/* The captured value of header `name`, or NULL; borrowed from r. */
const char *ah_response_header(const ah_response *r, const char *name);
/* Frees what the client filled in; r may be used again for a request.
 * The capture list and max_bytes stay. */
void ah_response_release(ah_response *r);

/*
 * Sends one request and reads its response into out (released first, so
 * one response serves a series of requests).
 *
 * target: "HOST:PORT", "[V6]:PORT", or "http://HOST[:PORT][/BASE]" (port
 *   80 by default; BASE is put before path), or https:// alike (port
 *   443).  HOST is numeric or
 *   "localhost" (each address tried in turn).
 * method, path: "GET", "/v1/recommendations?rules_version=V".
 * headers: NULL, or a NULL-terminated list of "Name: value" lines, sent
 *   as given after Host (CR or LF in them is AH_EINVAL).
 * body: body_len bytes, or NULL for no body; Content-Length is sent
 *   whenever body is not NULL.
 * timeout_ms: the whole exchange's deadline, > 0.
 * err: errlen bytes for a message naming what failed ("connect
 *   127.0.0.1:9: Connection refused"); may be NULL.
 *
 * 0 with out filled in whatever the status; a negative AH_E… code
 * otherwise (out then holds no body).  Blocking; thread-safe as long as
 * each thread has its own out.  SIGPIPE is never raised (MSG_NOSIGNAL).
 */
int ah_request(const char *target, const char *method, const char *path,
               const char *const *headers, const char *body, size_t body_len,
               int timeout_ms, ah_response *out, char *err, size_t errlen);

/* The same, an https:// target's server verified by tls (its CA, its
 * name, a client certificate: src/store/tls_client.h), borrowed for the
 * call; NULL, as for ah_request(): the system's CAs and the target's
 * host.  A refused certificate is AH_ECONNECT, its reason in err. */
typedef struct sl__tls_client sl__tls_client;
int ah_request_tls(const sl__tls_client *tls, const char *target,
                   const char *method, const char *path,
                   const char *const *headers, const char *body,
                   size_t body_len, int timeout_ms, ah_response *out,
                   char *err, size_t errlen);

/*
 * The response reader on its own: bytes in any pieces, then the end of
 * the stream.  Embedded by the caller; ah_parser_release() frees nothing
 * of out, which keeps what was read.
 */
typedef struct ah_parser {
    http_parser hp;
    ah_response *out;
    size_t received, max_bytes, body_cap;
    int head;         /* a response to HEAD: no body follows */
    int complete;     /* the message has ended */
    int error;        /* the first AH_E… met, then every feed returns it */
    int capturing;    /* index into out->capture, or -1 */
    int in_value;     /* the last callback was a value piece */
    char field[64];   /* the header name so far */
    size_t field_len; /* SIZE_MAX: longer than any wanted */
    char errmsg[128];
} ah_parser;

/* Reads into out (which must be ah_response_init()ed); head_request: the
 * response answers a HEAD request. */
void ah_parser_init(ah_parser *p, ah_response *out, int head_request);
/* 1 when the response is complete, 0 when more is wanted, or a negative
 * AH_E… (then p->errmsg says what).  Bytes after a complete response are
 * ignored. */
int ah_parser_feed(ah_parser *p, const char *data, size_t len);
/* The stream ended: 1 when that completes the response (a body read to
 * the close), else AH_EPROTO ("response cut short"). */
int ah_parser_eof(ah_parser *p);

/* A whole response in one buffer, then the end of the stream: 0 or a
 * negative AH_E…; for tests and the fuzzer. */
int ah_response_parse(const char *data, size_t len, ah_response *out, char *err,
                      size_t errlen);

#endif
