/*
 * respond.c - every answer the daemon writes itself, for serve's routes
 * and the proxy alike: the status line and headers, the JSON error body
 * {"error": {"code", "message"}} whose codes are sl_err_name() names plus
 * the HTTP-specific ones of docs/server.md, the rate-limit headers, and
 * the 429 of a refused request.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/respond.h"

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 409:
        return "Conflict";
    case 412:
        return "Precondition Failed";
    case 415:
        return "Unsupported Media Type";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

void sv_respond_head(sv_buf *out, int status, const char *type, size_t body_len,
                     int keep_alive)
{
    sv_buf_addstr(out, "HTTP/1.1 ");
    sv_buf_add_int(out, status);
    sv_buf_addstr(out, " ");
    sv_buf_addstr(out, reason(status));
    sv_buf_addstr(out, "\r\nContent-Type: ");
    sv_buf_addstr(out, type);
    sv_buf_addstr(out, "\r\nContent-Length: ");
    sv_buf_add_int(out, (long long)body_len);
    sv_buf_addstr(out, keep_alive ? "\r\nConnection: keep-alive\r\n"
                                  : "\r\nConnection: close\r\n");
}

void sv_respond_body(sv_buf *out, int status, const char *type,
                     const char *extra_headers, const char *body,
                     size_t body_len, int keep_alive)
{
    sv_respond_head(out, status, type, body_len, keep_alive);
    if (extra_headers)
        sv_buf_addstr(out, extra_headers);
    sv_buf_add(out, "\r\n", 2);
    sv_buf_add(out, body, body_len);
}

void sv_respond_empty(sv_buf *out, int status, const char *extra_headers,
                      int keep_alive)
{
    /* A 204 carries no Content-Length, and a 304's would be the length
     * of what a 200 would carry (RFC 9110, 8.6). */
    sv_buf_printf(out, "HTTP/1.1 %d %s\r\n%sConnection: %s\r\n%s\r\n", status,
                  reason(status),
                  status == 204 || status == 304 ? "" : "Content-Length: 0\r\n",
                  keep_alive ? "keep-alive" : "close",
                  extra_headers ? extra_headers : "");
}

void sv_respond_json(sv_buf *out, int status, const char *extra_headers,
                     json_t *body, int keep_alive)
{
    /* A NULL body is what jansson gives when it ran out of memory. */
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (text == NULL) {
        sv_respond_enomem(out);
        return;
    }
    /* A trailing newline, counted in Content-Length, so curl output
     * ends a line. */
    sv_buf body_nl = {0};
    sv_buf_addstr(&body_nl, text);
    sv_buf_addstr(&body_nl, "\n");
    if (body_nl.failed)
        out->failed = 1;
    else
        sv_respond_body(out, status, "application/json", extra_headers,
                        body_nl.data, body_nl.len, keep_alive);
    sv_buf_release(&body_nl);
    free(text);
}

void sv_respond_error(sv_buf *out, int status, const char *code,
                      const char *message, int keep_alive)
{
    /* Messages may quote request bytes (jansson's "near '...'"): keep
     * them printable ASCII so the body is always valid JSON text. */
    char clean[512];
    size_t i = 0;
    for (; message[i] != '\0' && i + 1 < sizeof(clean); i++) {
        unsigned char ch = (unsigned char)message[i];
        clean[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    clean[i] = '\0';
    json_t *body =
        json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", clean);
    sv_respond_json(out, status, NULL, body, keep_alive);
    json_decref(body);
}

void sv_respond_unreadable(sv_buf *out, int cap_status,
                           const char *parser_error)
{
    if (cap_status == 413)
        sv_respond_error(out, 413, "ETOOLARGE",
                         "request body exceeds the cap (--max-body-bytes)", 0);
    else if (cap_status == 431)
        sv_respond_error(out, 431, "EHEADERS",
                         "request line and headers exceed the cap "
                         "(--max-header-bytes)",
                         0);
    else
        sv_respond_error(out, 400, "EHTTP", parser_error, 0);
}

int sv_respond_enomem(sv_buf *out)
{
    static const char text[] =
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\nContent-Length: 54\r\n"
        "Connection: close\r\n\r\n"
        "{\"error\":{\"code\":\"ENOMEM\",\"message\":\"out of memory\"}}\n";
    out->failed = 0;
    sv_buf_add(out, text, sizeof(text) - 1);
    return out->failed ? -1 : 0;
}

int sv_api_fail(sv_api_err *e, int status, const char *code, const char *fmt,
                ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    e->status = status;
    e->code = code;
    return -1;
}

void sv_respond_api_err(sv_worker *w, const sv_api_err *e, sv_buf *out,
                        int keep_alive)
{
    if (e->status == 400)
        atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    sv_respond_error(out, e->status, e->code, e->msg, keep_alive);
}

void sv_rate_headers(const sv_dec_result *res, sv_buf *out)
{
    const sv_dec_status *c = res->closest;
    if (c == NULL)
        return;
    const sl_rule *r = c->rule;
    int64_t limit = r->action == SL_RULE_DENY ? 0 : c->d.limit;
    int64_t remaining = c->d.remaining < 0 ? 0 : c->d.remaining;
    long long reset = sv_sec_up(c->d.reset_after);
    sv_buf_addstr(out, "X-RateLimit-Limit: ");
    sv_buf_add_int(out, limit);
    sv_buf_addstr(out, "\r\nX-RateLimit-Remaining: ");
    sv_buf_add_int(out, remaining);
    sv_buf_addstr(out, "\r\nX-RateLimit-Reset: ");
    sv_buf_add_int(out, reset);
    sv_buf_addstr(out, "\r\n");
    if (res->over && c->d.retry_after > 0) {
        sv_buf_addstr(out, "Retry-After: ");
        sv_buf_add_int(out, sv_sec_up(c->d.retry_after));
        sv_buf_addstr(out, "\r\n");
    }
    /* draft-ietf-httpapi-ratelimit-headers-08 and later: a quoted policy
     * name with q (quota), w (window, s); r (remaining), t (reset, s). */
    sv_buf_addstr(out, "RateLimit-Policy: ");
    sv_buf_add(out, c->text->sf, c->text->sf_len);
    sv_buf_addstr(out, ";q=");
    sv_buf_add_int(out, limit);
    sv_buf_addstr(out, ";w=");
    sv_buf_add_int(out, sv_sec_up(r->period));
    sv_buf_addstr(out, "\r\nRateLimit: ");
    sv_buf_add(out, c->text->sf, c->text->sf_len);
    sv_buf_addstr(out, ";r=");
    sv_buf_add_int(out, remaining);
    sv_buf_addstr(out, ";t=");
    sv_buf_add_int(out, reset);
    sv_buf_addstr(out, "\r\n");
}

/* The 429: written straight into `out`, its body's length counted
 * beforehand: a refusal is the cheapest answer to make, and under a flood
 * it is the one made most.  Its message is why (static text) then detail
 * (JSON string characters); retry_ms < 0 is null. */
void sv_respond_429(sv_buf *out, const char *rate_headers, size_t rate_len,
                    const char *why, size_t why_len, const char *detail,
                    size_t detail_len, long long retry_ms, int head,
                    int keep_alive)
{
    static const char pre[] = "{\"error\":{\"code\":\"rate_limited\","
                              "\"message\":\"";
    static const char mid[] = "\",\"retry_after_ms\":";
    static const char post[] = "}}\n";
    if (head) {
        sv_respond_empty(out, 429, rate_headers, keep_alive);
        return;
    }
    size_t ms_len =
        retry_ms >= 0 ? sv_digits((unsigned long long)retry_ms) : 4; /* null */
    sv_respond_head(out, 429, "application/json",
                    sizeof(pre) - 1 + why_len + detail_len + sizeof(mid) - 1 +
                        ms_len + sizeof(post) - 1,
                    keep_alive);
    sv_buf_add(out, rate_headers, rate_len);
    sv_buf_add(out, "\r\n", 2);
    sv_buf_add(out, pre, sizeof(pre) - 1);
    sv_buf_add(out, why, why_len);
    sv_buf_add(out, detail, detail_len);
    sv_buf_add(out, mid, sizeof(mid) - 1);
    if (retry_ms >= 0)
        sv_buf_add_int(out, retry_ms);
    else
        sv_buf_add(out, "null", 4);
    sv_buf_add(out, post, sizeof(post) - 1);
}

/* The rule's label was JSON-escaped once, when its set was loaded
 * (sv_rule_text). */
void sv_respond_limited(const sv_dec_result *res, const char *rate_headers,
                        size_t rate_len, int head, sv_buf *out, int keep_alive)
{
    static const char why[] = "rate limit exceeded: ";
    const sv_dec_status *c = res->closest;
    sv_respond_429(out, rate_headers, rate_len, why, sizeof(why) - 1,
                   c ? c->text->json : "denied", c ? c->text->json_len : 6,
                   c ? sv_ms_up(c->d.retry_after) : -1, head, keep_alive);
}

#define PLAINTEXT_BODY                                                         \
    "{\"error\":{\"code\":\"ETLS\",\"message\":\"plain HTTP sent to a TLS "    \
    "port: use https\"}}\n"

const char sv_http_plaintext_answer[] =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
    "Content-Length: 79\r\nConnection: close\r\n\r\n" PLAINTEXT_BODY;

_Static_assert(sizeof(PLAINTEXT_BODY) - 1 == 79,
               "sv_http_plaintext_answer's Content-Length");

const sv_tls_alpn sv_http_alpn = {(const unsigned char *)"\x08http/1.1", 9,
                                  0};
