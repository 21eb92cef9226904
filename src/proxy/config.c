/*
 * config.c - the proxy's own config (docs/proxy.md, "Config reference"):
 * the object, the upstream, and the two sections of the config file that
 * are structures rather than values, the trusted proxies and the routes
 * with their descriptor actions.  The settings table (src/settings/)
 * reads the file, its scalar keys with their defaults, and hands these
 * sections here as nodes of the rules loader's YAML tree
 * (src/rules/yaml_tree.c), so every error points at file:line:column like
 * a rules error does.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"
#include "rules/rules_internal.h"
#include "core/value.h"

px_config *px_config_new(void)
{
    /* Large (the routes are inline): on the heap. */
    return calloc(1, sizeof(px_config));
}

void px_config_free(px_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->upstream);
    free(cfg->upstream_host);
    free(cfg->upstream_name);
    free(cfg->upstream_ca);
    free(cfg->upstream_cert);
    free(cfg->upstream_key);
    free(cfg->upstream_server_name);
    SSL_CTX_free(cfg->tls); /* connections made from it keep it */
    free(cfg->metrics_path);
    for (size_t i = 0; i < cfg->n_routes; i++) {
        px_route *r = &cfg->routes[i];
        free(r->prefix);
        free(r->key);
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

void px_config_ref(px_config *cfg)
{
    atomic_fetch_add_explicit(&cfg->refs, 1, memory_order_relaxed);
}

void px_config_unref(px_config *cfg)
{
    if (cfg != NULL &&
        atomic_fetch_sub_explicit(&cfg->refs, 1, memory_order_acq_rel) == 1)
        px_config_free(cfg);
}

/* A thread notices a new generation with one atomic load per request and
 * takes the lock only to adopt it (reload.c publishes). */
px_config *px_config_of(sv_worker *w)
{
    px_proxy *px = px_of(w);
    px_worker *pw = px_worker_of(w);
    uint64_t g = atomic_load_explicit(&px->generation, memory_order_acquire);
    if (g == pw->generation)
        return pw->cfg;
    pthread_mutex_lock(&px->lock);
    px_config *cfg = px->current;
    px_config_ref(cfg);
    pw->generation =
        atomic_load_explicit(&px->generation, memory_order_relaxed);
    pthread_mutex_unlock(&px->lock);
    px_config_unref(pw->cfg);
    pw->cfg = cfg;
    return cfg;
}

const px_route *px_route_find(const px_config *cfg, const px_request_view *req)
{
    const px_route *best = NULL;
    for (size_t i = 0; i < cfg->n_routes; i++) {
        const px_route *r = &cfg->routes[i];
        size_t len;
        const char *path = px_route_path(r, req, &len);
        /* A normalized route's prefix is in lower case (route()). */
        if (r->prefix_len <= len && memcmp(r->key, path, r->prefix_len) == 0 &&
            (best == NULL || r->prefix_len > best->prefix_len))
            best = r;
    }
    return best;
}

int px_set_upstream(px_config *cfg, const char *url, char *err, size_t errlen)
{
    const char *p = url;
    int https = strncmp(p, "https://", 8) == 0;
    if (!https && strncmp(p, "http://", 7) != 0) {
        snprintf(err, errlen,
                 "expected http://HOST:PORT or https://HOST:PORT: '%s'", url);
        return -1;
    }
    p += https ? 8 : 7;
    size_t hl = strcspn(p, "/");
    if (p[hl] == '/' && p[hl + 1] != '\0') {
        snprintf(err, errlen,
                 "a path is not supported, only %s://HOST:PORT: '%s'",
                 https ? "https" : "http", url);
        return -1;
    }
    char host[256], port[8];
    int port_number;
    if (sl__value_hostport(p, hl, https ? 443 : 80, host, sizeof(host),
                           &port_number) != 0) {
        snprintf(err, errlen, "bad host: '%s'", url);
        return -1;
    }
    snprintf(port, sizeof(port), "%d", port_number);
    /* Resolved once at start: a proxy that resolves per request needs an
     * asynchronous resolver, and upstreams here are fixed addresses. */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 || ai == NULL) {
        snprintf(err, errlen, "cannot resolve '%s': %s", url, gai_strerror(rc));
        return -1;
    }
    memset(&cfg->upstream_addr, 0, sizeof(cfg->upstream_addr));
    memcpy(&cfg->upstream_addr, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    free(cfg->upstream);
    free(cfg->upstream_host);
    free(cfg->upstream_name);
    cfg->upstream = strdup(url);
    cfg->upstream_host = strndup(p, hl);
    cfg->upstream_name = strdup(host);
    cfg->upstream_https = https;
    if (cfg->upstream == NULL || cfg->upstream_host == NULL ||
        cfg->upstream_name == NULL) {
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

/* The path action's `segments`: how many of the path's, 0 for all. */
static int segments(loader *L, const sl__ynode *n, int *out)
{
    uint64_t v;
    if (want(L, n, SL__Y_SCALAR, "segments"))
        return -1;
    if (sl__value_uint(n->text, n->len, 0, 64, &v) != 0)
        return FAIL(L, n, "segments: expected an integer in 0..64: '%.64s'",
                    n->text);
    *out = (int)v;
    return 0;
}

static int cidr(loader *L, const sl__ynode *n, px_cidr *out)
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
    px_action_kind kind;
    const char *default_key; /* NULL: `key` is required */
} action_kinds[] = {
    {"remote_address", PX_REMOTE_ADDRESS, "remote_address"},
    {"request_header", PX_REQUEST_HEADER, NULL},
    {"path", PX_PATH, "path"},
    {"method", PX_METHOD, "method"},
    {"generic_key", PX_GENERIC_KEY, "generic_key"},
};

/* One action: {KIND: {options}}; `KIND:` alone means no options. */
static int action(loader *L, const sl__ynode *n, px_action *a)
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
        int rc;
        if (strcmp(ok->text, "key") == 0)
            rc = str(L, ov, "key", &a->key);
        else if (strcmp(ok->text, "name") == 0 && a->kind == PX_REQUEST_HEADER)
            rc = str(L, ov, "name", &a->header);
        else if (strcmp(ok->text, "value") == 0 && a->kind == PX_GENERIC_KEY)
            rc = str(L, ov, "value", &a->value);
        else if (strcmp(ok->text, "segments") == 0 && a->kind == PX_PATH)
            rc = segments(L, ov, &a->segments);
        else
            rc = FAIL(L, ok, "%s: unknown option: '%.64s'", k->text, ok->text);
        if (rc)
            return -1;
    }
    if (a->kind == PX_REQUEST_HEADER && (a->header == NULL || a->key == NULL))
        return FAIL(L, n,
                    "request_header: needs `name` (the header) and "
                    "`key` (the descriptor key)");
    if (a->kind == PX_GENERIC_KEY && a->value == NULL)
        return FAIL(L, n, "generic_key: needs `value`");
    if (a->key == NULL &&
        (a->key = strdup(action_kinds[i].default_key)) == NULL)
        return FAIL(L, n, "out of memory");
    return 0;
}

/* A route's `match`: how its prefix is compared (px_match). */
static int match(loader *L, const sl__ynode *n, px_match *out)
{
    static const char *const names[] = {"normalized", "case_sensitive",
                                        "rfc3986"};
    if (want(L, n, SL__Y_SCALAR, "match"))
        return -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(n->text, names[i]) == 0) {
            *out = (px_match)i;
            return 0;
        }
    return FAIL(L, n,
                "match: expected normalized, case_sensitive or rfc3986: "
                "'%.64s'",
                n->text);
}

static int route(loader *L, const sl__ynode *n, px_route *r)
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
        else if (strcmp(k->text, "match") == 0)
            rc = match(L, v, &r->match);
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
    /* A normalised path holds none of these: such a prefix would never
     * match, silently. */
    if (r->match != PX_MATCH_RFC3986 && strpbrk(r->prefix, ";\\%") != NULL)
        return FAIL(L, n,
                    "prefix: ';', '\\' or '%%' never match a normalized "
                    "path (match: rfc3986 compares them): '%s'",
                    r->prefix);
    if ((r->key = strdup(r->prefix)) == NULL)
        return FAIL(L, n, "out of memory");
    for (size_t i = 0; r->match == PX_MATCH_NORMALIZED && i < r->prefix_len;
         i++)
        r->key[i] = (char)tolower((unsigned char)r->key[i]);
    if (descs != NULL && descs->n > PX_MAX_DESCRIPTORS)
        return FAIL(L, descs, "descriptors: more than %d", PX_MAX_DESCRIPTORS);
    for (size_t i = 0; descs && i < descs->n; i++) {
        const sl__ynode *d = descs->kids[i];
        if (want(L, d, SL__Y_SEQ, "descriptor (a sequence of actions)"))
            return -1;
        if (d->n == 0 || d->n > PX_MAX_ACTIONS)
            return FAIL(L, d, "descriptor: expected 1..%d actions",
                        PX_MAX_ACTIONS);
        px_descriptor *pd = &r->descriptors[r->n_descriptors++];
        /* Counted before it is read: a failed action's strings are
         * freed with the config. */
        for (size_t j = 0; j < d->n; j++)
            if (action(L, d->kids[j], &pd->actions[pd->n++]))
                return -1;
    }
    return 0;
}

int px_read_trusted(px_config *cfg, const char *file, const sl__ynode *v,
                    char *err, size_t errlen)
{
    loader L = {file, err, errlen};
    if (want(&L, v, SL__Y_SEQ, "trusted_proxies"))
        return -1;
    if (v->n > PX_MAX_TRUSTED)
        return FAIL(&L, v, "trusted_proxies: more than %d", PX_MAX_TRUSTED);
    cfg->n_trusted = 0;
    for (size_t i = 0; i < v->n; i++)
        if (cidr(&L, v->kids[i], &cfg->trusted[cfg->n_trusted++]))
            return -1;
    return 0;
}

int px_read_routes(px_config *cfg, const char *file, const sl__ynode *v,
                   char *err, size_t errlen)
{
    loader L = {file, err, errlen};
    if (want(&L, v, SL__Y_SEQ, "routes"))
        return -1;
    if (v->n > PX_MAX_ROUTES)
        return FAIL(&L, v, "routes: more than %d", PX_MAX_ROUTES);
    for (size_t i = 0; i < v->n; i++) {
        if (route(&L, v->kids[i], &cfg->routes[cfg->n_routes++]))
            return -1;
        for (size_t j = 0; j + 1 < cfg->n_routes; j++)
            if (strcmp(cfg->routes[j].prefix,
                       cfg->routes[cfg->n_routes - 1].prefix) == 0)
                return FAIL(&L, v->kids[i], "route: duplicate prefix: '%s'",
                            cfg->routes[j].prefix);
    }
    return 0;
}
