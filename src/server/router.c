/*
 * router.c - maps (method, path) to a handler, answers the small GET
 * endpoints itself, and formats every response: status line, headers and
 * the JSON error body {"error": {"code", "message"}} whose codes are
 * sl_err_name() names plus the HTTP-specific ones of docs/server.md.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "server.h"

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

static void get_readyz(sl_srv_worker *w, sl_buf *out, int keep_alive)
{
    json_t *body;
    if (w->rules != NULL && w->rules->rules != NULL) {
        /* A node that decides under its failure policy stays ready;
         * the body says whether Redis is decided on. */
        body = json_pack("{s:s,s:s,s:s,s:s}", "status", "ready",
                         "rules_version", sl_rules_version(w->rules->rules),
                         "store", sd_engine_uses_redis(w->server->engine) ? "redis" : "memory",
                         "store_status", sl_metrics_store_status(w->server));
        if (sd_engine_uses_redis(w->server->engine))
            json_object_set_new(body, "nodes_live",
                                json_integer(sd_engine_nodes(w->server->engine)));
        sl_respond_json(out, 200, NULL, body, keep_alive);
    } else {
        body = json_pack("{s:s}", "status", "no rules loaded");
        sl_respond_json(out, 503, NULL, body, keep_alive);
    }
    json_decref(body);
}

static void get_rules(sl_srv_worker *w, sl_buf *out, int keep_alive)
{
    sl_server *s = w->server;
    const sl_rules *r = w->rules->rules;
    json_t *domains = json_array();
    for (size_t i = 0; i < sl_rules_domain_count(r); i++)
        json_array_append_new(domains, json_string(sl_rules_domain_name(r, i)));
    json_t *rules = json_array();
    for (size_t i = 0; i < sl_rules_rule_count(r); i++) {
        const sl_rule *rule = sl_rules_rule(r, i);
        json_array_append_new(
            rules,
            json_pack("{s:s,s:s,s:s,s:I,s:I,s:b}", "domain", rule->domain,
                      "path", rule->path, "name", rule->name,
                      "requests_per_unit", (json_int_t)rule->requests_per_unit,
                      "period_ms", (json_int_t)(rule->period / SL_NS_PER_MS),
                      "shadow_mode", rule->shadow_mode));
    }
    pthread_mutex_lock(&s->reload_lock);
    json_t *err = s->last_error[0] ? json_string(s->last_error) : json_null();
    pthread_mutex_unlock(&s->reload_lock);
    json_t *body = json_pack(
        "{s:s,s:o,s:o,s:o,s:I,s:I}", "version", sl_rules_version(r), "domains",
        domains, "rules", rules, "last_reload_error", err, "reloads_ok",
        (json_int_t)atomic_load_explicit(&s->reloads_ok, memory_order_relaxed),
        "reloads_failed",
        (json_int_t)atomic_load_explicit(&s->reloads_failed,
                                         memory_order_relaxed));
    sl_respond_json(out, 200, NULL, body, keep_alive);
    json_decref(body);
}

static void get_metrics(sl_srv_worker *w, sl_buf *out, int keep_alive)
{
    sl_buf text = {0};
    sl_metrics_render(w->server, &text);
    if (text.failed) {
        sl_buf_release(&text);
        out->failed = 1;
        return;
    }
    sl_respond_body(out, 200, "text/plain; version=0.0.4", NULL,
                    text.data ? text.data : "", text.len, keep_alive);
    sl_buf_release(&text);
}

static void get_healthz(sl_srv_worker *w, sl_buf *out, int keep_alive)
{
    (void)w;
    json_t *body = json_pack("{s:s}", "status", "ok");
    sl_respond_json(out, 200, NULL, body, keep_alive);
    json_decref(body);
}

/* A route's method, when any method is accepted. */
#define ANY_METHOD (-1)

typedef struct route {
    const char *path;
    int method; /* enum http_method, or ANY_METHOD */
    void (*get)(sl_srv_worker *, sl_buf *, int);
    /* Handlers that need the request (a body or a query string) and
     * may wait on the store (SL_SRV_AGAIN). */
    int (*post)(sl_srv_worker *, const sl_http_request *, sl_srv_req *,
                sl_buf *, int);
} route;

static const route routes[] = {
    {"/healthz", HTTP_GET, get_healthz, NULL},
    {"/readyz", HTTP_GET, get_readyz, NULL},
    {"/v1/rules", HTTP_GET, get_rules, NULL},
    {"/metrics", HTTP_GET, get_metrics, NULL},
    {"/v1/check", HTTP_POST, NULL, sl_api_check},
    {"/json", HTTP_POST, NULL, sl_api_lyft},
    {"/v1/increment", HTTP_POST, NULL, sl_api_increment},
    {"/v1/delay", HTTP_GET, NULL, sl_api_delay},
    /* Gateways differ: nginx's auth_request sends GET, others forward
     * the client's method. */
    {"/v1/auth", ANY_METHOD, NULL, sl_api_auth},
};

int sl_route(sl_srv_worker *w, const sl_http_request *req, sl_srv_req *rq,
             sl_buf *out, int *keep_alive)
{
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const route *r = &routes[i];
        if (strlen(r->path) != req->path_len ||
            memcmp(r->path, req->path, req->path_len) != 0)
            continue;
        if (r->method != ANY_METHOD && req->method != r->method) {
            char headers[64], msg[96];
            snprintf(headers, sizeof(headers), "Allow: %s\r\n",
                     http_method_str(r->method));
            snprintf(msg, sizeof(msg), "method not allowed: use %s",
                     http_method_str(r->method));
            json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code",
                                     "EMETHOD", "message", msg);
            sl_respond_json(out, 405, headers, body, *keep_alive);
            json_decref(body);
            return 0;
        }
        if (r->post)
            return r->post(w, req, rq, out, *keep_alive);
        r->get(w, out, *keep_alive);
        return 0;
    }
    sl_respond_error(out, 404, "ENOTFOUND", "no such route", *keep_alive);
    return 0;
}
