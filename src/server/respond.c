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

#include "server/respond.h"

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
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

void sl_respond_head(sl_buf *out, int status, const char *type, size_t body_len,
                     int keep_alive)
{
    sl_buf_addstr(out, "HTTP/1.1 ");
    sl_buf_add_int(out, status);
    sl_buf_addstr(out, " ");
    sl_buf_addstr(out, reason(status));
    sl_buf_addstr(out, "\r\nContent-Type: ");
    sl_buf_addstr(out, type);
    sl_buf_addstr(out, "\r\nContent-Length: ");
    sl_buf_add_int(out, (long long)body_len);
    sl_buf_addstr(out, keep_alive ? "\r\nConnection: keep-alive\r\n"
                                  : "\r\nConnection: close\r\n");
}

void sl_respond_body(sl_buf *out, int status, const char *type,
                     const char *extra_headers, const char *body,
                     size_t body_len, int keep_alive)
{
    sl_respond_head(out, status, type, body_len, keep_alive);
    if (extra_headers)
        sl_buf_addstr(out, extra_headers);
    sl_buf_add(out, "\r\n", 2);
    sl_buf_add(out, body, body_len);
}

void sl_respond_empty(sl_buf *out, int status, const char *extra_headers,
                      int keep_alive)
{
    /* A 204 carries no Content-Length (RFC 9110, 8.6). */
    sl_buf_printf(out, "HTTP/1.1 %d %s\r\n%sConnection: %s\r\n%s\r\n", status,
                  reason(status), status == 204 ? "" : "Content-Length: 0\r\n",
                  keep_alive ? "keep-alive" : "close",
                  extra_headers ? extra_headers : "");
}

void sl_respond_json(sl_buf *out, int status, const char *extra_headers,
                     json_t *body, int keep_alive)
{
    /* A NULL body is what jansson gives when it ran out of memory. */
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (text == NULL) {
        sl_respond_enomem(out);
        return;
    }
    /* A trailing newline, counted in Content-Length, so curl output
     * ends a line. */
    sl_buf body_nl = {0};
    sl_buf_addstr(&body_nl, text);
    sl_buf_addstr(&body_nl, "\n");
    if (body_nl.failed)
        out->failed = 1;
    else
        sl_respond_body(out, status, "application/json", extra_headers,
                        body_nl.data, body_nl.len, keep_alive);
    sl_buf_release(&body_nl);
    free(text);
}

void sl_respond_error(sl_buf *out, int status, const char *code,
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
    sl_respond_json(out, status, NULL, body, keep_alive);
    json_decref(body);
}

int sl_respond_enomem(sl_buf *out)
{
    static const char text[] =
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\nContent-Length: 54\r\n"
        "Connection: close\r\n\r\n"
        "{\"error\":{\"code\":\"ENOMEM\",\"message\":\"out of memory\"}}\n";
    out->failed = 0;
    sl_buf_add(out, text, sizeof(text) - 1);
    return out->failed ? -1 : 0;
}

int sl_api_fail(sl_api_err *e, int status, const char *code, const char *fmt,
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

void sl_respond_api_err(sl_srv_worker *w, const sl_api_err *e, sl_buf *out,
                        int keep_alive)
{
    if (e->status == 400)
        atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    sl_respond_error(out, e->status, e->code, e->msg, keep_alive);
}

void sl_rate_headers(const sl_dec_result *res, sl_buf *out)
{
    const sl_dec_status *c = res->closest;
    if (c == NULL)
        return;
    const sl_rule *r = c->rule;
    int64_t limit = r->action == SL_RULE_DENY ? 0 : c->d.limit;
    int64_t remaining = c->d.remaining < 0 ? 0 : c->d.remaining;
    long long reset = sl_sec_up(c->d.reset_after);
    sl_buf_addstr(out, "X-RateLimit-Limit: ");
    sl_buf_add_int(out, limit);
    sl_buf_addstr(out, "\r\nX-RateLimit-Remaining: ");
    sl_buf_add_int(out, remaining);
    sl_buf_addstr(out, "\r\nX-RateLimit-Reset: ");
    sl_buf_add_int(out, reset);
    sl_buf_addstr(out, "\r\n");
    if (res->over && c->d.retry_after > 0) {
        sl_buf_addstr(out, "Retry-After: ");
        sl_buf_add_int(out, sl_sec_up(c->d.retry_after));
        sl_buf_addstr(out, "\r\n");
    }
    /* draft-ietf-httpapi-ratelimit-headers-08 and later: a quoted policy
     * name with q (quota), w (window, s); r (remaining), t (reset, s). */
    sl_buf_addstr(out, "RateLimit-Policy: ");
    sl_buf_add(out, c->text->sf, c->text->sf_len);
    sl_buf_addstr(out, ";q=");
    sl_buf_add_int(out, limit);
    sl_buf_addstr(out, ";w=");
    sl_buf_add_int(out, sl_sec_up(r->period));
    sl_buf_addstr(out, "\r\nRateLimit: ");
    sl_buf_add(out, c->text->sf, c->text->sf_len);
    sl_buf_addstr(out, ";r=");
    sl_buf_add_int(out, remaining);
    sl_buf_addstr(out, ";t=");
    sl_buf_add_int(out, reset);
    sl_buf_addstr(out, "\r\n");
}

/* The 429: written straight into `out`, its body's length counted
 * beforehand: a refusal is the cheapest answer to make, and under a flood
 * it is the one made most.  Its message is why (static text) then detail
 * (JSON string characters); retry_ms < 0 is null. */
void sl_respond_429(sl_buf *out, const char *rate_headers, size_t rate_len,
                    const char *why, const char *detail, size_t detail_len,
                    long long retry_ms, int head, int keep_alive)
{
    static const char pre[] = "{\"error\":{\"code\":\"rate_limited\","
                              "\"message\":\"";
    static const char mid[] = "\",\"retry_after_ms\":";
    static const char post[] = "}}\n";
    if (head) {
        sl_respond_empty(out, 429, rate_headers, keep_alive);
        return;
    }
    size_t why_len = strlen(why);
    size_t ms_len = retry_ms >= 0 ? sl_digits((unsigned long long)retry_ms)
                                  : 4; /* null */
    sl_respond_head(out, 429, "application/json",
                    sizeof(pre) - 1 + why_len + detail_len + sizeof(mid) - 1 +
                        ms_len + sizeof(post) - 1,
                    keep_alive);
    sl_buf_add(out, rate_headers, rate_len);
    sl_buf_add(out, "\r\n", 2);
    sl_buf_add(out, pre, sizeof(pre) - 1);
    sl_buf_add(out, why, why_len);
    sl_buf_add(out, detail, detail_len);
    sl_buf_add(out, mid, sizeof(mid) - 1);
    if (retry_ms >= 0)
        sl_buf_add_int(out, retry_ms);
    else
        sl_buf_add(out, "null", 4);
    sl_buf_add(out, post, sizeof(post) - 1);
}

/* The rule's label was JSON-escaped once, when its set was loaded
 * (sl_srv_rule_text). */
void sl_respond_limited(const sl_dec_result *res, const char *rate_headers,
                        size_t rate_len, int head, sl_buf *out,
                        int keep_alive)
{
    const sl_dec_status *c = res->closest;
    sl_respond_429(out, rate_headers, rate_len, "rate limit exceeded: ",
                   c ? c->text->json : "denied", c ? c->text->json_len : 6,
                   c ? sl_ms_up(c->d.retry_after) : -1, head, keep_alive);
}
