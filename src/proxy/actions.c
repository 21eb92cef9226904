/*
 * actions.c - how a request becomes descriptors, in the spirit of Envoy's
 * rate limit actions: each action of a route's descriptor makes one entry
 * from the client address, a request header, the path, the method or a
 * fixed value.  The client address is the peer's, unless the peer is a
 * trusted proxy: then X-Forwarded-For is walked from its right end past
 * every trusted address, and the first untrusted one is the client (the
 * left part of the header is the client's to write, so it is never
 * believed past an untrusted hop).
 */
#include <arpa/inet.h>
#include <string.h>

#include "proxy.h"

static int in_cidr(const sl_px_cidr *c, int family, const unsigned char *addr)
{
    if (c->family != family)
        return 0;
    int full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(c->addr, addr, (size_t)full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (c->addr[full] & mask) == (addr[full] & mask);
}

static int trusted(const sl_px_config *cfg, int family,
                   const unsigned char *addr)
{
    for (size_t i = 0; i < cfg->n_trusted; i++)
        if (in_cidr(&cfg->trusted[i], family, addr))
            return 1;
    return 0;
}

/* An address as text: AF_INET or AF_INET6 and its 4 or 16 bytes. */
static int parse_addr(const char *s, size_t len, int *family,
                      unsigned char *addr)
{
    char text[INET6_ADDRSTRLEN + 1];
    if (len == 0 || len >= sizeof(text))
        return -1;
    memcpy(text, s, len);
    text[len] = '\0';
    if (inet_pton(AF_INET, text, addr) == 1)
        *family = AF_INET;
    else if (inet_pton(AF_INET6, text, addr) == 1)
        *family = AF_INET6;
    else
        return -1;
    return 0;
}

void sl_px_peer_text(const struct sockaddr_storage *peer, char *out,
                     size_t outlen)
{
    const void *addr = peer->ss_family == AF_INET6
                           ? (const void *)&((const struct sockaddr_in6 *)peer)
                                 ->sin6_addr
                           : (const void *)&((const struct sockaddr_in *)peer)
                                 ->sin_addr;
    if (inet_ntop(peer->ss_family == AF_INET6 ? AF_INET6 : AF_INET, addr, out,
                  (socklen_t)outlen) == NULL && outlen > 0)
        out[0] = '\0';
}

void sl_px_client_address(const sl_px_config *cfg,
                          const struct sockaddr_storage *peer,
                          const sl_px_headers *h, char *out, size_t outlen)
{
    int family = peer->ss_family;
    unsigned char addr[16] = {0};
    if (family == AF_INET)
        memcpy(addr, &((const struct sockaddr_in *)peer)->sin_addr, 4);
    else if (family == AF_INET6)
        memcpy(addr, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
    size_t xl = 0;
    const char *xff = sl_px_headers_find(h, "x-forwarded-for", &xl);
    if (xff != NULL && trusted(cfg, family, addr)) {
        size_t end = xl;
        while (end > 0) {
            size_t start = end;
            while (start > 0 && xff[start - 1] != ',')
                start--;
            size_t a = start, b = end;
            while (a < b && (xff[a] == ' ' || xff[a] == '\t'))
                a++;
            while (b > a && (xff[b - 1] == ' ' || xff[b - 1] == '\t'))
                b--;
            int f;
            unsigned char next[16] = {0};
            if (parse_addr(xff + a, b - a, &f, next) != 0)
                break; /* garbage: the last good hop is the client */
            family = f;
            memcpy(addr, next, sizeof(addr));
            if (!trusted(cfg, family, addr))
                break;
            end = start > 0 ? start - 1 : 0;
        }
    }
    if (inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, addr, out,
                  (socklen_t)outlen) == NULL && outlen > 0)
        out[0] = '\0';
}

/* The first `segments` segments of the path ("/v1/users/7", 2: "/v1/users"). */
static size_t path_prefix(const char *path, size_t len, int segments)
{
    if (segments == 0)
        return len;
    size_t i = 0;
    for (int s = 0; s < segments && i < len; s++) {
        i++; /* the '/' */
        while (i < len && path[i] != '/')
            i++;
    }
    return i;
}

size_t sl_px_descriptors(const sl_px_route *route,
                         const sl_px_request_view *req, sl_dec_descriptor *ds,
                         sl_rules_entry *entries)
{
    size_t n = 0, ne = 0;
    for (size_t i = 0; i < route->n_descriptors; i++) {
        const sl_px_descriptor *d = &route->descriptors[i];
        size_t first = ne;
        int skip = 0;
        for (size_t j = 0; j < d->n && !skip; j++) {
            const sl_px_action *a = &d->actions[j];
            sl_rules_entry *e = &entries[ne];
            e->key = a->key;
            e->key_len = strlen(a->key);
            switch (a->kind) {
            case SL_PX_REMOTE_ADDRESS:
                e->value = req->client_addr;
                e->value_len = strlen(req->client_addr);
                break;
            case SL_PX_REQUEST_HEADER:
                e->value = sl_px_headers_find(req->headers, a->header,
                                              &e->value_len);
                skip = e->value == NULL;
                break;
            case SL_PX_PATH:
                e->value = req->path;
                e->value_len = path_prefix(req->path, req->path_len,
                                           a->segments);
                break;
            case SL_PX_METHOD:
                e->value = http_method_str((enum http_method)req->method);
                e->value_len = strlen(e->value);
                break;
            case SL_PX_GENERIC_KEY:
                e->value = a->value;
                e->value_len = strlen(a->value);
                break;
            }
            ne++;
        }
        if (skip) {
            ne = first;
            continue;
        }
        ds[n++] = (sl_dec_descriptor){entries + first, ne - first, -1};
    }
    return n;
}
