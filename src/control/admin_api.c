/*
 * api.c - the admin API (admin.h, docs/admin.md): the rules' limits in
 * force, the overrides, their change log, and the writes that set and
 * delete overrides, on serve's control thread.
 *
 * Authentication: `Authorization: Bearer TOKEN`, the token read from
 * --admin-token-file at start and compared in constant time.  Every write
 * needs it; so does every request when the listener is not on loopback
 * (serve refuses to start such a listener without a token).  A peer's
 * failed attempts are limited by sluice's own GCRA on the memory store
 * (AUTH_FAILS per second, a burst of AUTH_BURST), and all peers' together
 * (AUTH_FAILS_ALL, AUTH_BURST_ALL): past either, the peer is answered 429
 * before its token is even looked at, so a token cannot be guessed at
 * the speed of the network, from one address or from many.
 *
 * Writes are optimistic: each override has a version (its ETag); a PUT
 * or DELETE of an existing override must send If-Match with it (428
 * without, 412 when it moved), and If-None-Match: * creates only.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "control/admin.h"
#include "http/http_conn.h"
#include "control/limits.h"
#include "runtime/rules_json.h"
#include "log/log.h"
#include "log/secret.h"
#include "runtime/metrics.h"
#include "http/query.h"
#include "http/respond.h"
#include "api/request.h"
#include "api/status.h"

#define AUTH_FAILS 5 /* failed attempts a second, per peer */
#define AUTH_BURST 10
/* ... and from all peers together: many addresses (a /64, loopback's
 * /8) must not multiply the guesses. */
#define AUTH_FAILS_ALL 20
#define AUTH_BURST_ALL 40
#define MAX_TTL_MS (30LL * 86400 * 1000)
#define DEFAULT_TTL_MS (3600LL * 1000)
#define PREFIX "/admin/v1/overrides/"

static char token[512];
static size_t token_len;
static sl_limit *auth_limit, *auth_limit_all;

int ad_token_load(const char *path, char *err, size_t errlen)
{
    sl_limit_config c = {.algorithm = SL_GCRA,
                         .limit = AUTH_FAILS,
                         .period = SL_NS_PER_SEC,
                         .burst = AUTH_BURST,
                         .id = UINT64_C(0x61646d696e)}; /* "admin" */
    sl_limit_config all = {.algorithm = SL_GCRA,
                           .limit = AUTH_FAILS_ALL,
                           .period = SL_NS_PER_SEC,
                           .burst = AUTH_BURST_ALL,
                           .id = UINT64_C(0x61646d696e616c6c)}; /* adminall */
    if ((auth_limit == NULL &&
         sl_limit_new(&c, &auth_limit, err, errlen) != 0) ||
        (auth_limit_all == NULL &&
         sl_limit_new(&all, &auth_limit_all, err, errlen) != 0))
        return -1;
    if (path == NULL)
        return 0;
    int n = sl__secret_read(path, "--admin-token-file", token, sizeof(token),
                            err, errlen);
    if (n < 0)
        return -1;
    token_len = (size_t)n;
    if (token_len < AD_TOKEN_MIN) {
        snprintf(err, errlen, "%s: the token must be at least %d bytes", path,
                 AD_TOKEN_MIN);
        token_len = 0;
        return -1;
    }
    return 0;
}

/* ---- answers ---- */

static int fail(sv_buf *out, int status, const char *code, const char *msg,
                const char *headers, int keep_alive)
{
    json_t *body =
        json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    sv_respond_json(out, status, headers, body, keep_alive);
    json_decref(body);
    return 0;
}

static int answer(sv_buf *out, int status, json_t *body, const char *headers,
                  int keep_alive)
{
    sv_respond_json(out, status, headers, body, keep_alive);
    json_decref(body);
    return 0;
}

/* ---- authentication ---- */

/* Equal in time that depends on the lengths only. */
static int same_token(const char *a, size_t alen)
{
    unsigned char diff = (unsigned char)(alen != token_len);
    for (size_t i = 0; i < token_len; i++)
        diff |= (unsigned char)(token[i] ^ (i < alen ? a[i] : 0));
    return diff == 0;
}

/* 0 when the request may go on; else it is answered (401 or 429). */
static int authorize(sv_worker *w, const sv_http_request *req, int write,
                     sv_buf *out, int keep_alive)
{
    const sv_listener *l = NULL;
    for (int d = 0; d < w->server->cfg.n_doors; d++)
        if (w->doors[d].w == w && w->doors[d].door->control)
            l = &w->doors[d];
    int loopback = l == NULL || strncmp(l->door->addr.host, "127.", 4) == 0 ||
                   strcmp(l->door->addr.host, "::1") == 0;
    const sv_http_header *h = sv_http_header_find(req, "authorization");
    if (!write && loopback && h == NULL)
        return 0; /* reads on loopback need no token */
    sl_decision d;
    const char *peer = req->peer ? req->peer : "";
    sl_store *store = w->server->store;
    /* A look (cost 0) at the peer's failures and at everyone's: none
     * left, and the token is not even compared.  One comes back every
     * 1/AUTH_FAILS s (every 1/AUTH_FAILS_ALL s for everyone's). */
    if (sl_check(store, auth_limit, peer, strlen(peer), 0, sv_now(w), &d) ==
            0 &&
        d.remaining <= 0) {
        fail(out, 429, "ETOOMANY",
             "too many failed attempts from this address: wait",
             "Retry-After: 1\r\n", keep_alive);
        return -1;
    }
    if (sl_check(store, auth_limit_all, "", 0, 0, sv_now(w), &d) == 0 &&
        d.remaining <= 0) {
        fail(out, 429, "ETOOMANY",
             "too many failed attempts from all addresses: wait",
             "Retry-After: 1\r\n", keep_alive);
        return -1;
    }
    if (token_len > 0 && h != NULL && h->value_len > 7 &&
        strncasecmp(h->value, "Bearer ", 7) == 0 &&
        same_token(h->value + 7, h->value_len - 7))
        return 0;
    sl_check(store, auth_limit, peer, strlen(peer), 1, sv_now(w), &d);
    sl_check(store, auth_limit_all, "", 0, 1, sv_now(w), &d);
    fail(out, 401, "EAUTH",
         token_len == 0 ? "no --admin-token-file was given: writes are refused"
         : h == NULL    ? "Authorization: Bearer TOKEN is required"
                        : "bad token",
         "WWW-Authenticate: Bearer realm=\"sluice\"\r\n", keep_alive);
    return -1;
}

/* ---- reads ---- */

static int get_limits(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      sv_buf *out, int keep_alive)
{
    (void)rq;
    if (authorize(w, req, 0, out, keep_alive) != 0)
        return 0;
    return answer(out, 200,
                  json_pack("{s:s,s:o}", "rules_version",
                            sl_rules_version(w->rules->rules), "limits",
                            sv_rules_json(w)),
                  NULL, keep_alive);
}

static int get_overrides(sv_worker *w, const sv_http_request *req, sv_req *rq,
                         sv_buf *out, int keep_alive)
{
    (void)rq;
    if (authorize(w, req, 0, out, keep_alive) != 0)
        return 0;
    json_t *body = sv_limits_overrides(w);
    if (w->server->cfg.advisor_shadow && w->server->cfg.advisor_url != NULL)
        json_object_set_new(body, "shadowed",
                            ad_shadow_json(sv_now(w) / SL_NS_PER_MS));
    return answer(out, 200, body, NULL, keep_alive);
}

/* The decimal after= of the query; 0 when absent. */
static int get_events(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      sv_buf *out, int keep_alive)
{
    (void)rq;
    if (authorize(w, req, 0, out, keep_alive) != 0)
        return 0;
    uint64_t after = 0;
    if (req->query_len > 6 && strncmp(req->query, "after=", 6) == 0) {
        char *end;
        char num[24];
        size_t n = req->query_len - 6 < 23 ? req->query_len - 6 : 23;
        memcpy(num, req->query + 6, n);
        num[n] = '\0';
        after = strtoull(num, &end, 10);
        if (*end != '\0' || !isdigit((unsigned char)num[0]))
            return fail(out, 400, "EINVAL",
                        "after: expected the last sequence number seen", NULL,
                        keep_alive);
    }
    return answer(out, 200, sv_limits_events(w, after), NULL, keep_alive);
}

static int get_metrics(sv_worker *w, const sv_http_request *req, sv_req *rq,
                       sv_buf *out, int keep_alive)
{
    (void)rq;
    if (authorize(w, req, 0, out, keep_alive) != 0)
        return 0;
    sv_buf text = {0};
    sv_metrics_render(w->server, &text);
    if (text.failed)
        out->failed = 1;
    else
        sv_respond_body(out, 200, "text/plain; version=0.0.4", NULL,
                        text.data ? text.data : "", text.len, keep_alive);
    sv_buf_release(&text);
    return 0;
}

/* ---- one override: GET, PUT, DELETE /admin/v1/overrides/{rule} ---- */

/* The rule id after the prefix, percent-decoded (as a query value is, so
 * a literal '+' must be sent as %2B, as `sluice limits` does): 0, or -1. */
static int rule_of(const sv_http_request *req, char *rule, size_t room)
{
    size_t len = req->path_len - strlen(PREFIX);
    if (len == 0 || len >= room)
        return -1;
    long n = sv_url_decode(req->path + strlen(PREFIX), len, rule);
    if (n <= 0 || memchr(rule, '\0', (size_t)n) != NULL)
        return -1;
    rule[n] = '\0';
    return 0;
}

/* ?source=manual|advisor: 0, or -1. */
static int source_of(const sv_http_request *req, sv_source *out)
{
    *out = SV_SOURCE_MANUAL;
    if (req->query_len == 0)
        return 0;
    char q[32];
    if (req->query_len > 7 + 16 || strncmp(req->query, "source=", 7) != 0)
        return -1;
    snprintf(q, sizeof(q), "%.*s", (int)(req->query_len - 7), req->query + 7);
    return sv_source_parse(q, out);
}

/* One entity-tag of If-Match at *p (RFC 9110, 8.8.3: [W/] DQUOTE
 * *etagc DQUOTE), p moved past it: 0 with its version in *v and *named
 * set when it is a strong tag of digits, the only kind an override's
 * version can match (If-Match compares strongly); -1 when malformed.
 * A bare number, which sluice took before, is read as a version too. */
static int entity_tag(const char **p, const char *end, uint64_t *v,
                      int *named)
{
    const char *s = *p;
    int weak = end - s >= 2 && s[0] == 'W' && s[1] == '/';
    if (weak)
        s += 2;
    int quoted = s < end && *s == '"';
    const char *tag = s + quoted, *t = tag;
    while (t < end && (quoted ? *t != '"' : *t != ',' && *t != ' '))
        if ((unsigned char)*t++ < 0x21) /* etagc: no controls, no space */
            return -1;
    if (quoted && t == end)
        return -1;
    size_t len = (size_t)(t - tag);
    *p = t + quoted;
    if (!quoted && weak)
        return -1;
    int digits = len > 0 && len <= 19;
    for (size_t i = 0; i < len; i++)
        digits &= tag[i] >= '0' && tag[i] <= '9';
    if (!quoted && !digits)
        return -1;
    *named = 0;
    if (weak || !digits)
        return 0;
    char num[20];
    memcpy(num, tag, len);
    num[len] = '\0';
    *v = strtoull(num, NULL, 10);
    *named = 1;
    return 0;
}

/* If-Match (*, or a list of entity tags) / If-None-Match *: 0, or -1
 * for a header that is malformed (or both given). */
static int precondition_of(const sv_http_request *req, sv_limits_op *op)
{
    const sv_http_header *m = sv_http_header_find(req, "if-match");
    const sv_http_header *nm = sv_http_header_find(req, "if-none-match");
    op->match = SV_MATCH_NONE;
    if (nm != NULL) {
        if (nm->value_len != 1 || nm->value[0] != '*' || m != NULL)
            return -1;
        op->match = SV_MATCH_ABSENT;
    }
    if (m == NULL)
        return 0;
    const char *p = m->value, *end = m->value + m->value_len;
    if (m->value_len == 1 && *p == '*') {
        op->match = SV_MATCH_EXISTS;
        return 0;
    }
    op->match = SV_MATCH_VERSION;
    op->n_versions = 0;
    for (int tags = 0;; tags++) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        uint64_t v;
        int named;
        if (p == end || tags == SV_MAX_IF_MATCH ||
            entity_tag(&p, end, &v, &named) != 0)
            return -1;
        if (named)
            op->versions[op->n_versions++] = v;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end)
            return 0;
        if (*p++ != ',')
            return -1;
    }
}

/* The PUT body into op: 0, or -1 with msg. */
static int read_body(const sv_http_request *req, sv_limits_op *op, char *msg,
                     size_t msglen)
{
    json_error_t jerr;
    json_t *b =
        json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(b)) {
        snprintf(msg, msglen, "body: expected a JSON object%s%s", b ? "" : ": ",
                 b ? "" : jerr.text);
        json_decref(b);
        return -1;
    }
    const char *key;
    json_t *v;
    op->burst = 0;
    op->ttl_ms = DEFAULT_TTL_MS;
    op->requests_per_unit = -1;
    json_object_foreach(b, key, v)
    {
        if (strcmp(key, "requests_per_unit") == 0 ||
            strcmp(key, "burst") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > SL_MAX_COUNT) {
                snprintf(msg, msglen, "%s: expected an integer from 0 to 2^40",
                         key);
                goto bad;
            }
            *(key[0] == 'r' ? &op->requests_per_unit : &op->burst) =
                json_integer_value(v);
        } else if (strcmp(key, "ttl") == 0) {
            sl_nanos ns;
            if (!json_is_string(v) ||
                sl_duration_parse(json_string_value(v), json_string_length(v),
                                  &ns) != 0 ||
                ns < SL_NS_PER_SEC || ns / SL_NS_PER_MS > MAX_TTL_MS) {
                snprintf(msg, msglen,
                         "ttl: expected a duration from 1s to 30d, like "
                         "\"10m\"");
                goto bad;
            }
            op->ttl_ms = ns / SL_NS_PER_MS;
        } else if (strcmp(key, "reason") == 0) {
            if (!json_is_string(v) ||
                json_string_length(v) >= sizeof(op->reason)) {
                snprintf(msg, msglen,
                         "reason: expected a string of at most "
                         "255 bytes");
                goto bad;
            }
            snprintf(op->reason, sizeof(op->reason), "%s",
                     json_string_value(v));
        } else {
            snprintf(msg, msglen,
                     "%.64s: unknown field (requests_per_unit, burst, ttl, "
                     "reason)",
                     key);
            goto bad;
        }
    }
    if (op->requests_per_unit < 0) {
        snprintf(msg, msglen, "requests_per_unit: missing");
        goto bad;
    }
    json_decref(b);
    return 0;
bad:
    json_decref(b);
    return -1;
}

static void op_free(void *api)
{
    sv_limits_abandon(api);
}

/* The written override's answer: its JSON and ETag, or 204. */
static int written(sv_worker *w, sv_limits_op *op, sv_buf *out, int keep_alive)
{
    if (op->status >= 400) {
        const char *code = op->status == 404   ? "ENOTFOUND"
                           : op->status == 412 ? "EPRECONDITION"
                           : op->status == 428 ? "EPRECONDITION_REQUIRED"
                           : op->status == 503 ? "ESTORE"
                                               : "EINVAL";
        char headers[64] = "";
        if (op->now_version)
            snprintf(headers, sizeof(headers), "ETag: \"%llu\"\r\n",
                     (unsigned long long)op->now_version);
        return fail(out, op->status, code, op->err, headers, keep_alive);
    }
    if (op->status == 204) {
        sv_respond_empty(out, 204, NULL, keep_alive);
        return 0;
    }
    char headers[64];
    snprintf(headers, sizeof(headers), "ETag: \"%llu\"\r\n",
             (unsigned long long)op->now_version);
    json_t *j = sv_limits_override(w, op->rule, op->source);
    return answer(out, op->status, j ? j : json_object(), headers, keep_alive);
}

static int one_override(sv_worker *w, const sv_http_request *req, sv_req *rq,
                        sv_buf *out, int keep_alive)
{
    if (rq->step == 1) { /* a write came back from Redis */
        sv_limits_op *op = rq->api;
        rq->api = NULL;
        rq->api_free = NULL;
        written(w, op, out, keep_alive);
        free(op);
        return 0;
    }
    int write = req->method != HTTP_GET;
    if (req->method != HTTP_GET && req->method != HTTP_PUT &&
        req->method != HTTP_DELETE)
        return fail(out, 405, "EMETHOD", "method not allowed: GET, PUT, DELETE",
                    "Allow: GET, PUT, DELETE\r\n", keep_alive);
    if (authorize(w, req, write, out, keep_alive) != 0)
        return 0;
    sv_limits_op *op = calloc(1, sizeof(*op));
    char msg[256];
    if (op == NULL)
        return fail(out, 503, "ENOMEM", "out of memory", NULL, keep_alive);
    if (rule_of(req, op->rule, sizeof(op->rule)) != 0 ||
        source_of(req, &op->source) != 0) {
        free(op);
        return fail(out, 400, "EINVAL",
                    "expected /admin/v1/overrides/RULE_ID[?source=manual|"
                    "advisor], the id percent-encoded",
                    NULL, keep_alive);
    }
    if (!write) {
        json_t *j = sv_limits_override(w, op->rule, op->source);
        free(op);
        if (j == NULL)
            return fail(out, 404, "ENOTFOUND", "no such override", NULL,
                        keep_alive);
        char headers[64];
        snprintf(headers, sizeof(headers), "ETag: \"%lld\"\r\n",
                 (long long)json_integer_value(json_object_get(j, "version")));
        return answer(out, 200, j, headers, keep_alive);
    }
    op->del = req->method == HTTP_DELETE;
    if (precondition_of(req, op) != 0) {
        free(op);
        return fail(out, 400, "EINVAL",
                    "If-Match: expected * or at most 8 entity tags "
                    "(\"12\", W/\"12\"); If-None-Match: expected *, "
                    "and not both",
                    NULL, keep_alive);
    }
    if (!op->del && read_body(req, op, msg, sizeof(msg)) != 0) {
        free(op);
        return fail(out, 400, "EINVAL", msg, NULL, keep_alive);
    }
    op->done = rq->resume;
    op->owner = rq->owner;
    if (sv_limits_write(w, op) == SV_AGAIN) {
        rq->api = op;
        rq->api_free = op_free;
        rq->step = 1;
        return SV_AGAIN;
    }
    written(w, op, out, keep_alive);
    free(op);
    return 0;
}

/* The live status page (api/status.c), a read like the others. */
static int get_status(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      sv_buf *out, int keep_alive)
{
    (void)rq;
    if (authorize(w, req, 0, out, keep_alive) == 0)
        sv_status_page(w, out, keep_alive);
    return 0;
}

static int get_status_json(sv_worker *w, const sv_http_request *req, sv_req *rq,
                           sv_buf *out, int keep_alive)
{
    (void)rq;
    if (authorize(w, req, 0, out, keep_alive) == 0)
        sv_status_json_get(w, out, keep_alive);
    return 0;
}

static void get_healthz(sv_worker *w, sv_buf *out, int keep_alive)
{
    (void)w;
    answer(out, 200, json_pack("{s:s}", "status", "ok"), NULL, keep_alive);
}

static const sv_route_entry admin_routes[] = {
    {"/healthz", HTTP_GET, get_healthz, NULL},
    {"/metrics", HTTP_GET, NULL, get_metrics},
    {"/admin/v1/limits", HTTP_GET, NULL, get_limits},
    {"/admin/v1/overrides", HTTP_GET, NULL, get_overrides},
    {"/admin/v1/events", HTTP_GET, NULL, get_events},
    {"/status", HTTP_GET, NULL, get_status},
    {"/status.json", HTTP_GET, NULL, get_status_json},
    {PREFIX, SV_ANY_METHOD, NULL, one_override},
};

static const sv_routes routes = {
    admin_routes, sizeof(admin_routes) / sizeof(admin_routes[0]), 1,
    &sv_api_req};

void ad_accept(sv_listener *l)
{
    sv_http_accept(l->w, (uv_stream_t *)&l->tcp, &routes);
}

void ad_close_idle(sv_listener *l)
{
    sv_http_close_idle(l->w);
}
