/*
 * respond.h - the daemon's HTTP answers, written once for serve and the
 * proxy: status lines, JSON errors, the 429 of a refused request and the
 * rate-limit headers.
 */
#ifndef SL_SRV_RESPOND_H
#define SL_SRV_RESPOND_H

#include <jansson.h>

#include "server/buf.h"
#include "server/decide.h"

/* 503 {"error": {"code": "ENOMEM"}} from static text, closing the
 * connection; 0, or -1 when even that could not be appended. */
int sl_respond_enomem(sl_buf *out);
/* An error answer under way in an API handler: status, code, message.
 * sl_api_fail() fills it and returns -1; sl_respond_api_err() answers
 * it, counting a 400 as a bad request. */
typedef struct sl_api_err {
    int status;
    const char *code;
    char msg[256];
} sl_api_err;

int sl_api_fail(sl_api_err *e, int status, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
void sl_respond_api_err(sl_srv_worker *w, const sl_api_err *e, sl_buf *out,
                        int keep_alive);
/* An error response {"error": {"code", "message"}} with status. */
void sl_respond_error(sl_buf *out, int status, const char *code,
                      const char *message, int keep_alive);
/* A response with body_len bytes of body of the given type; extra_headers
 * (may be NULL) ends each line with CRLF. */
void sl_respond_body(sl_buf *out, int status, const char *type,
                     const char *extra_headers, const char *body,
                     size_t body_len, int keep_alive);
/* A response without a body (204, or a HEAD's); extra_headers as below. */
void sl_respond_empty(sl_buf *out, int status, const char *extra_headers,
                      int keep_alive);
/* A response with a JSON body; extra_headers ends each line with CRLF. */
void sl_respond_json(sl_buf *out, int status, const char *extra_headers,
                     json_t *body, int keep_alive);
/* The status line and the Content-Type, Content-Length and Connection
 * headers; the caller adds its own headers, the blank line and the body. */
void sl_respond_head(sl_buf *out, int status, const char *type, size_t body_len,
                     int keep_alive);

/* X-RateLimit-*, Retry-After and the IETF draft's RateLimit-Policy and
 * RateLimit fields from res->closest, each line ending in CRLF. */
void sl_rate_headers(const sl_dec_result *res, sl_buf *out);
/* The 429 of a refused request (serve's and the proxy's): the JSON error
 * {"code": "rate_limited", "message": why + detail, "retry_after_ms"}, or
 * no body for a HEAD; rate_headers from sl_rate_headers().
 * sl_respond_limited() says which rule refused it. */
void sl_respond_429(sl_buf *out, const char *rate_headers, size_t rate_len,
                    const char *why, const char *detail, size_t detail_len,
                    long long retry_ms, int head, int keep_alive);
void sl_respond_limited(const sl_dec_result *res, const char *rate_headers,
                        size_t rate_len, int head, sl_buf *out,
                        int keep_alive);

#endif
