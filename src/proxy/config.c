/*
 * config.c - the proxy's YAML config: the upstream, timeouts, the queue,
 * trusted proxies and the routes with their descriptor actions
 * (docs/proxy.md, "Config reference").  It is read with the rules
 * loader's YAML tree (src/rules/yaml_tree.c), so every error points at
 * file:line:column like a rules error does.  Keys it does not know are
 * handed to the caller: the server's own settings (rules, listen, ...)
 * live in the same file.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"
#include "rules/rules_internal.h"

/* Largest config file read. */
#define SL_PX_MAX_CONFIG_BYTES (256 * 1024)

sl_px_config *sl_px_config_new(void)
{
    /* Large (the routes are inline): on the heap, zeroed. */
    sl_px_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL)
        return NULL;
    cfg->connect_timeout_ms = SL_PX_CONNECT_TIMEOUT_MS;
    cfg->response_timeout_ms = SL_PX_RESPONSE_TIMEOUT_MS;
    cfg->queue_max = SL_PX_QUEUE_MAX;
    cfg->queue_max_wait_ms = SL_PX_QUEUE_MAX_WAIT_MS;
    cfg->pool_max = SL_PX_POOL_MAX;
    cfg->rate_limit_headers = 1;
    cfg->metrics_path = strdup(SL_PX_METRICS_PATH);
    if (cfg->metrics_path == NULL) {
        free(cfg);
        return NULL;
    }
    return cfg;
}

void sl_px_config_free(sl_px_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->upstream);
    free(cfg->upstream_host);
    free(cfg->metrics_path);
    for (size_t i = 0; i < cfg->n_routes; i++) {
        sl_px_route *r = &cfg->routes[i];
        free(r->prefix);
        free(r->domain);
        for (size_t j = 0; j < r->n_descriptors; j++)
            for (size_t k = 0; k < r->descriptors[j].n; k++) {
                free(r->descriptors[j].actions[k].key);
                free(r->descriptors[j].actions[k].header);
                free(r->descriptors[j].actions[k].value);
            }
    }
    free(cfg);
}

const sl_px_route *sl_px_route_find(const sl_px_config *cfg, const char *path,
                                    size_t len)
{
    const sl_px_route *best = NULL;
    for (size_t i = 0; i < cfg->n_routes; i++) {
        const sl_px_route *r = &cfg->routes[i];
        if (r->prefix_len <= len &&
            memcmp(r->prefix, path, r->prefix_len) == 0 &&
            (best == NULL || r->prefix_len > best->prefix_len))
            best = r;
    }
    return best;
}

int sl_px_set_upstream(sl_px_config *cfg, const char *url, char *err,
                       size_t errlen)
{
    const char *p = url;
    if (strncmp(p, "http://", 7) != 0) {
        snprintf(err, errlen, "upstream: expected http://HOST:PORT: '%s'", url);
        return -1;
    }
    p += 7;
    size_t hl = strcspn(p, "/");
    if (p[hl] == '/' && p[hl + 1] != '\0') {
        snprintf(err, errlen,
                 "upstream: a path is not supported, only http://HOST:PORT: "
                 "'%s'",
                 url);
        return -1;
    }
    char hostport[300], host[256];
    if (hl == 0 || hl >= sizeof(hostport)) {
        snprintf(err, errlen, "upstream: bad host: '%s'", url);
        return -1;
    }
    memcpy(hostport, p, hl);
    hostport[hl] = '\0';
    const char *colon = strrchr(hostport, ':');
    const char *port = colon ? colon + 1 : "80";
    size_t n = colon ? (size_t)(colon - hostport) : hl;
    const char *h = hostport;
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(host) || *port == '\0') {
        snprintf(err, errlen, "upstream: bad host: '%s'", url);
        return -1;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    /* Resolved once at start: a proxy that resolves per request needs an
     * asynchronous resolver, and upstreams here are fixed addresses. */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 || ai == NULL) {
        snprintf(err, errlen, "upstream: cannot resolve '%s': %s", url,
                 gai_strerror(rc));
        return -1;
    }
    memset(&cfg->upstream_addr, 0, sizeof(cfg->upstream_addr));
    memcpy(&cfg->upstream_addr, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    free(cfg->upstream);
    free(cfg->upstream_host);
    cfg->upstream = strdup(url);
    cfg->upstream_host = strdup(hostport);
    if (cfg->upstream == NULL || cfg->upstream_host == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

typedef struct loader {
    const char *file;
    char *err;
    size_t errlen;
} loader;

#define FAIL(L, node, ...)                                                     \
    (sl__rules_error((L)->err, (L)->errlen, SL_EINVAL, (L)->file,              \
                     (node)->line, (node)->col, __VA_ARGS__),                  \
     -1)

static int want(loader *L, const sl__ynode *n, sl__ykind kind, const char *what)
{
    if (n->kind == kind)
        return 0;
    return FAIL(L, n, "%s: expected a %s", what,
                kind == SL__Y_MAP   ? "mapping"
                : kind == SL__Y_SEQ ? "sequence"
                                    : "scalar");
}

static int str(loader *L, const sl__ynode *n, const char *what, char **out)
{
    if (want(L, n, SL__Y_SCALAR, what))
        return -1;
    if (n->len == 0 || strlen(n->text) != n->len)
        return FAIL(L, n,
                    "%s: expected a non-empty string without NULs: "
                    "'%.64s'",
                    what, n->text);
    free(*out);
    *out = strdup(n->text);
    return *out ? 0 : FAIL(L, n, "out of memory");
}

static int ms(loader *L, const sl__ynode *n, const char *what, uint64_t *out)
{
    sl_nanos ns;
    if (want(L, n, SL__Y_SCALAR, what))
        return -1;
    if (sl_duration_parse(n->text, n->len, &ns) != 0 || ns < SL_NS_PER_MS)
        return FAIL(L, n, "%s: bad duration (at least 1ms): '%.64s'", what,
                    n->text);
    *out = (uint64_t)(ns / SL_NS_PER_MS);
    return 0;
}

static int count(loader *L, const sl__ynode *n, const char *what, size_t min,
                 size_t max, size_t *out)
{
    char *end;
    if (want(L, n, SL__Y_SCALAR, what))
        return -1;
    unsigned long long v = strtoull(n->text, &end, 10);
    if (n->len == 0 || n->text[0] == '-' || *end != '\0' || v < min || v > max)
        return FAIL(L, n, "%s: expected an integer in %zu..%zu: '%.64s'", what,
                    min, max, n->text);
    *out = (size_t)v;
    return 0;
}

static int boolean(loader *L, const sl__ynode *n, const char *what, int *out)
{
    if (want(L, n, SL__Y_SCALAR, what))
        return -1;
    if (n->plain && strcmp(n->text, "true") == 0)
        *out = 1;
    else if (n->plain && strcmp(n->text, "false") == 0)
        *out = 0;
    else
        return FAIL(L, n, "%s: expected true or false: '%.64s'", what, n->text);
    return 0;
}

static int cidr(loader *L, const sl__ynode *n, sl_px_cidr *out)
{
    char addr[64];
    if (want(L, n, SL__Y_SCALAR, "trusted_proxies"))
        return -1;
    const char *slash = strchr(n->text, '/');
    size_t al = slash ? (size_t)(slash - n->text) : n->len;
    if (al >= sizeof(addr))
        goto bad;
    memcpy(addr, n->text, al);
    addr[al] = '\0';
    if (inet_pton(AF_INET, addr, out->addr) == 1)
        out->family = AF_INET;
    else if (inet_pton(AF_INET6, addr, out->addr) == 1)
        out->family = AF_INET6;
    else
        goto bad;
    int max = out->family == AF_INET ? 32 : 128;
    out->bits = max;
    if (slash) {
        char *end;
        long b = strtol(slash + 1, &end, 10);
        if (slash[1] == '\0' || *end != '\0' || b < 0 || b > max)
            goto bad;
        out->bits = (int)b;
    }
    return 0;
bad:
    return FAIL(L, n,
                "trusted_proxies: expected ADDRESS or ADDRESS/BITS: "
                "'%.64s'",
                n->text);
}

static const struct {
    const char *name;
    sl_px_action_kind kind;
    const char *default_key; /* NULL: `key` is required */
} action_kinds[] = {
    {"remote_address", SL_PX_REMOTE_ADDRESS, "remote_address"},
    {"request_header", SL_PX_REQUEST_HEADER, NULL},
    {"path", SL_PX_PATH, "path"},
    {"method", SL_PX_METHOD, "method"},
    {"generic_key", SL_PX_GENERIC_KEY, "generic_key"},
};

/* One action: {KIND: {options}}; `KIND:` alone means no options. */
static int action(loader *L, const sl__ynode *n, sl_px_action *a)
{
    if (want(L, n, SL__Y_MAP, "action"))
        return -1;
    if (n->n != 2)
        return FAIL(L, n, "action: expected one key, the action's kind");
    const sl__ynode *k = n->kids[0], *opts = n->kids[1];
    size_t i = 0, nk = sizeof(action_kinds) / sizeof(action_kinds[0]);
    while (i < nk && strcmp(action_kinds[i].name, k->text) != 0)
        i++;
    if (i == nk)
        return FAIL(L, k,
                    "action: unknown kind (remote_address, request_header, "
                    "path, method, generic_key): '%.64s'",
                    k->text);
    a->kind = action_kinds[i].kind;
    if (opts->kind == SL__Y_SCALAR && opts->len == 0 && opts->plain)
        opts = NULL;
    else if (want(L, opts, SL__Y_MAP, k->text))
        return -1;
    for (size_t j = 0; opts && j < opts->n; j += 2) {
        const sl__ynode *ok = opts->kids[j], *ov = opts->kids[j + 1];
        size_t segs;
        int rc;
        if (strcmp(ok->text, "key") == 0)
            rc = str(L, ov, "key", &a->key);
        else if (strcmp(ok->text, "name") == 0 &&
                 a->kind == SL_PX_REQUEST_HEADER)
            rc = str(L, ov, "name", &a->header);
        else if (strcmp(ok->text, "value") == 0 && a->kind == SL_PX_GENERIC_KEY)
            rc = str(L, ov, "value", &a->value);
        else if (strcmp(ok->text, "segments") == 0 && a->kind == SL_PX_PATH) {
            rc = count(L, ov, "segments", 0, 64, &segs);
            a->segments = (int)segs;
        } else
            rc = FAIL(L, ok, "%s: unknown option: '%.64s'", k->text, ok->text);
        if (rc)
            return -1;
    }
    if (a->kind == SL_PX_REQUEST_HEADER &&
        (a->header == NULL || a->key == NULL))
        return FAIL(L, n,
                    "request_header: needs `name` (the header) and "
                    "`key` (the descriptor key)");
    if (a->kind == SL_PX_GENERIC_KEY && a->value == NULL)
        return FAIL(L, n, "generic_key: needs `value`");
    if (a->key == NULL &&
        (a->key = strdup(action_kinds[i].default_key)) == NULL)
        return FAIL(L, n, "out of memory");
    return 0;
}

static int route(loader *L, const sl__ynode *n, sl_px_route *r)
{
    const sl__ynode *descs = NULL;
    if (want(L, n, SL__Y_MAP, "route"))
        return -1;
    for (size_t i = 0; i < n->n; i += 2) {
        const sl__ynode *k = n->kids[i], *v = n->kids[i + 1];
        int rc;
        if (strcmp(k->text, "prefix") == 0) {
            rc = str(L, v, "prefix", &r->prefix);
            if (rc == 0 && r->prefix[0] != '/')
                rc =
                    FAIL(L, v, "prefix: must start with '/': '%.64s'", v->text);
        } else if (strcmp(k->text, "domain") == 0)
            rc = str(L, v, "domain", &r->domain);
        else if (strcmp(k->text, "descriptors") == 0)
            rc = want(L, v, SL__Y_SEQ, "descriptors"), descs = v;
        else
            rc = FAIL(L, k, "route: unknown key: '%.64s'", k->text);
        if (rc)
            return -1;
    }
    if (r->prefix == NULL || r->domain == NULL)
        return FAIL(L, n, "route: needs `prefix` and `domain`");
    r->prefix_len = strlen(r->prefix);
    if (descs != NULL && descs->n > SL_PX_MAX_DESCRIPTORS)
        return FAIL(L, descs, "descriptors: more than %d",
                    SL_PX_MAX_DESCRIPTORS);
    for (size_t i = 0; descs && i < descs->n; i++) {
        const sl__ynode *d = descs->kids[i];
        if (want(L, d, SL__Y_SEQ, "descriptor (a sequence of actions)"))
            return -1;
        if (d->n == 0 || d->n > SL_PX_MAX_ACTIONS)
            return FAIL(L, d, "descriptor: expected 1..%d actions",
                        SL_PX_MAX_ACTIONS);
        sl_px_descriptor *pd = &r->descriptors[r->n_descriptors++];
        /* Counted before it is read: a failed action's strings are
         * freed with the config. */
        for (size_t j = 0; j < d->n; j++)
            if (action(L, d->kids[j], &pd->actions[pd->n++]))
                return -1;
    }
    return 0;
}

static int top(loader *L, const sl__ynode *k, const sl__ynode *v,
               sl_px_config *cfg, sl_px_other_cb other, void *ctx)
{
    if (strcmp(k->text, "upstream") == 0) {
        char msg[400];
        if (want(L, v, SL__Y_SCALAR, "upstream"))
            return -1;
        if (sl_px_set_upstream(cfg, v->text, msg, sizeof(msg)) != 0)
            return FAIL(L, v, "%s", msg);
        return 0;
    }
    if (strcmp(k->text, "rate_limit_headers") == 0)
        return boolean(L, v, "rate_limit_headers", &cfg->rate_limit_headers);
    if (strcmp(k->text, "metrics_path") == 0) {
        if (want(L, v, SL__Y_SCALAR, "metrics_path"))
            return -1;
        if (v->len > 0 && v->text[0] != '/')
            return FAIL(L, v,
                        "metrics_path: must start with '/' (or be "
                        "empty): '%.64s'",
                        v->text);
        free(cfg->metrics_path);
        cfg->metrics_path = strdup(v->text);
        return cfg->metrics_path ? 0 : FAIL(L, v, "out of memory");
    }
    if (strcmp(k->text, "upstream_pool") == 0)
        return count(L, v, "upstream_pool", 0, 100000, &cfg->pool_max);
    if (strcmp(k->text, "timeouts") == 0 || strcmp(k->text, "queue") == 0) {
        int q = k->text[0] == 'q';
        if (want(L, v, SL__Y_MAP, k->text))
            return -1;
        for (size_t i = 0; i < v->n; i += 2) {
            const sl__ynode *kk = v->kids[i], *vv = v->kids[i + 1];
            int rc;
            if (!q && strcmp(kk->text, "connect") == 0)
                rc = ms(L, vv, "connect", &cfg->connect_timeout_ms);
            else if (!q && strcmp(kk->text, "response") == 0)
                rc = ms(L, vv, "response", &cfg->response_timeout_ms);
            else if (q && strcmp(kk->text, "max_requests") == 0)
                rc = count(L, vv, "max_requests", 0, 1000000, &cfg->queue_max);
            else if (q && strcmp(kk->text, "max_wait") == 0)
                rc = ms(L, vv, "max_wait", &cfg->queue_max_wait_ms);
            else
                rc = FAIL(L, kk, "%s: unknown key: '%.64s'", k->text, kk->text);
            if (rc)
                return -1;
        }
        return 0;
    }
    if (strcmp(k->text, "trusted_proxies") == 0) {
        if (want(L, v, SL__Y_SEQ, "trusted_proxies"))
            return -1;
        if (v->n > SL_PX_MAX_TRUSTED)
            return FAIL(L, v, "trusted_proxies: more than %d",
                        SL_PX_MAX_TRUSTED);
        cfg->n_trusted = 0;
        for (size_t i = 0; i < v->n; i++)
            if (cidr(L, v->kids[i], &cfg->trusted[cfg->n_trusted++]))
                return -1;
        return 0;
    }
    if (strcmp(k->text, "routes") == 0) {
        if (want(L, v, SL__Y_SEQ, "routes"))
            return -1;
        if (v->n > SL_PX_MAX_ROUTES)
            return FAIL(L, v, "routes: more than %d", SL_PX_MAX_ROUTES);
        for (size_t i = 0; i < v->n; i++) {
            if (route(L, v->kids[i], &cfg->routes[cfg->n_routes++]))
                return -1;
            for (size_t j = 0; j + 1 < cfg->n_routes; j++)
                if (strcmp(cfg->routes[j].prefix,
                           cfg->routes[cfg->n_routes - 1].prefix) == 0)
                    return FAIL(L, v->kids[i], "route: duplicate prefix: '%s'",
                                cfg->routes[j].prefix);
        }
        return 0;
    }
    char where[600];
    snprintf(where, sizeof(where), "%s:%u:%u: %s", L->file, v->line, v->col,
             k->text);
    if (v->kind != SL__Y_SCALAR || strlen(v->text) != v->len)
        return FAIL(L, v, "%s: expected a single value", k->text);
    int rc = other ? other(ctx, k->text, where, v->text) : -2;
    if (rc == -2)
        return FAIL(L, k, "unknown key: '%.64s'", k->text);
    if (rc != 0) {
        /* The setting printed its own message, naming `where`. */
        if (L->errlen > 0)
            L->err[0] = '\0';
        return -1;
    }
    return 0;
}

int sl_px_config_load(const char *path, sl_px_config *cfg, sl_px_other_cb other,
                      void *ctx, char *err, size_t errlen)
{
    loader L = {path, err, errlen};
    sl_buf text = {0};
    if (sl_buf_read_file(&text, path, SL_PX_MAX_CONFIG_BYTES, err, errlen)) {
        sl_buf_release(&text);
        return -1;
    }
    sl__ynode *root = NULL;
    int rc = sl__yaml_parse(path, text.data ? text.data : "", text.len, 12,
                            &root, err, errlen);
    sl_buf_release(&text);
    if (rc != 0)
        return -1;
    rc = 0;
    if (root != NULL && root->kind != SL__Y_MAP)
        rc = FAIL(&L, root, "expected a mapping of settings");
    for (size_t i = 0; rc == 0 && root && i < root->n; i += 2)
        rc = top(&L, root->kids[i], root->kids[i + 1], cfg, other, ctx);
    sl__ynode_free(root);
    return rc;
}
