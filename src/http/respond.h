/*
 * respond.h - the daemon's HTTP answers, written once for serve and the
 * proxy: status lines, JSON errors, the 429 of a refused request and the
 * rate-limit headers.
 */
#ifndef SV_RESPOND_H
#define SV_RESPOND_H

#include <jansson.h>

#include "runtime/buf.h"
#include "runtime/decide.h"
#include "runtime/tls.h"

/* The answer to a request that could not be read, closing the
 * connection: 413 or 431 when a cap refused it (cap_status), else 400
 * with the parser's description. */
void sv_respond_unreadable(sv_buf *out, int cap_status,
                           const char *parser_error);
/* 503 {"error": {"code": "ENOMEM"}} from static text, closing the
 * connection; 0, or -1 when even that could not be appended. */
int sv_respond_enomem(sv_buf *out);
/* An error answer under way in an API handler: status, code, message.
 * sv_api_fail() fills it and returns -1; sv_respond_api_err() answers
 * it, counting a 400 as a bad request. */
typedef struct sv_api_err {
    int status;
    const char *code;
    char msg[256];
} sv_api_err;

int sv_api_fail(sv_api_err *e, int status, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
void sv_respond_api_err(sv_worker *w, const sv_api_err *e, sv_buf *out,
                        int keep_alive);
/* An error response {"error": {"code", "message"}} with status. */
void sv_respond_error(sv_buf *out, int status, const char *code,
                      const char *message, int keep_alive);
/* A response with body_len bytes of body of the given type; extra_headers
 * (may be NULL) ends each line with CRLF. */
void sv_respond_body(sv_buf *out, int status, const char *type,
                     const char *extra_headers, const char *body,
                     size_t body_len, int keep_alive);
/* A response without a body (204, or a HEAD's); extra_headers as below. */
void sv_respond_empty(sv_buf *out, int status, const char *extra_headers,
                      int keep_alive);
/* A response with a JSON body; extra_headers ends each line with CRLF. */
void sv_respond_json(sv_buf *out, int status, const char *extra_headers,
                     json_t *body, int keep_alive);
/* The status line and the Content-Type, Content-Length and Connection
 * headers; the caller adds its own headers, the blank line and the body. */
void sv_respond_head(sv_buf *out, int status, const char *type, size_t body_len,
                     int keep_alive);

/* X-RateLimit-*, Retry-After and the IETF draft's RateLimit-Policy and
 * RateLimit fields from res->closest, each line ending in CRLF. */
void sv_rate_headers(const sv_dec_result *res, sv_buf *out);
/* The 429 of a refused request (serve's and the proxy's): the JSON error
 * {"code": "rate_limited", "message": why + detail, "retry_after_ms"}, or
 * no body for a HEAD; rate_headers from sv_rate_headers().
 * sv_respond_limited() says which rule refused it. */
void sv_respond_429(sv_buf *out, const char *rate_headers, size_t rate_len,
                    const char *why, size_t why_len, const char *detail,
                    size_t detail_len, long long retry_ms, int head,
                    int keep_alive);
void sv_respond_limited(const sv_dec_result *res, const char *rate_headers,
                        size_t rate_len, int head, sv_buf *out, int keep_alive);

/* Under TLS: the answer to plain HTTP sent to a TLS listener, and what
 * an HTTP/1.1 listener says in ALPN. */
extern const char sv_http_plaintext_answer[];
extern const sv_tls_alpn sv_http_alpn;

#endif
