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
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy.h"
#include "http/query.h"

static int in_cidr(const px_cidr *c, int family, const unsigned char *addr)
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

static int trusted(const px_config *cfg, int family, const unsigned char *addr)
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

void px_peer_text(const struct sockaddr_storage *peer, char *out, size_t outlen)
{
    const void *addr =
        peer->ss_family == AF_INET6
            ? (const void *)&((const struct sockaddr_in6 *)peer)->sin6_addr
            : (const void *)&((const struct sockaddr_in *)peer)->sin_addr;
    if (inet_ntop(peer->ss_family == AF_INET6 ? AF_INET6 : AF_INET, addr, out,
                  (socklen_t)outlen) == NULL &&
        outlen > 0)
        out[0] = '\0';
}

/* One X-Forwarded-For field's hops from its right end, as long as they
 * are trusted: each one read becomes the client (family, addr, *hops).
 * 1 when the walk goes on into the field before, 0 when it stopped. */
static int walk_hops(const px_config *cfg, const char *xff, size_t xl,
                     int *family, unsigned char *addr, int *hops)
{
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
            return 0; /* garbage: the last good hop is the client */
        *family = f;
        memcpy(addr, next, 16);
        (*hops)++;
        if (!trusted(cfg, *family, addr))
            return 0;
        end = start > 0 ? start - 1 : 0;
    }
    return 1;
}

void px_client_address(const px_config *cfg,
                       const struct sockaddr_storage *peer,
                       const char *peer_text, const sv_fields *h, char *out,
                       size_t outlen)
{
    int hops = 0;
    int family = peer->ss_family;
    unsigned char addr[16] = {0};
    if (family == AF_INET)
        memcpy(addr, &((const struct sockaddr_in *)peer)->sin_addr, 4);
    else if (family == AF_INET6)
        memcpy(addr, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
    /* Several X-Forwarded-For fields are one list, in order (RFC 9110,
     * 5.3): walked from the last field's right end. */
    int more = trusted(cfg, family, addr);
    for (size_t i = sv_fields_count(h); more && i-- > 0;) {
        const char *n, *v;
        size_t nl, vl;
        sv_fields_get(h, i, &n, &nl, &v, &vl);
        if (nl == 15 && strncasecmp(n, "x-forwarded-for", 15) == 0)
            more = walk_hops(cfg, v, vl, &family, addr, &hops);
    }
    size_t pl = strlen(peer_text);
    if (hops == 0 && pl < outlen) /* the peer, formatted once per connection */
        memcpy(out, peer_text, pl + 1);
    else if (inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, addr, out,
                       (socklen_t)outlen) == NULL &&
             outlen > 0)
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

const char *px_route_path(const px_route *route, const px_request_view *req,
                          size_t *len)
{
    *len = route->match == PX_MATCH_RFC3986 ? req->path_len : req->loose_len;
    return route->match == PX_MATCH_RFC3986          ? req->path
           : route->match == PX_MATCH_CASE_SENSITIVE ? req->loose
                                                     : req->lower;
}

int px_descriptors(const px_route *route, const px_request_view *req,
                   sv_dec_descriptor *ds, sl_rules_entry *entries,
                   size_t *n_out)
{
    size_t n = 0, ne = 0;
    for (size_t i = 0; i < route->n_descriptors; i++) {
        const px_descriptor *d = &route->descriptors[i];
        size_t first = ne;
        int skip = 0;
        for (size_t j = 0; j < d->n && !skip; j++) {
            const px_action *a = &d->actions[j];
            sl_rules_entry *e = &entries[ne];
            e->key = a->key;
            e->key_len = strlen(a->key);
            switch (a->kind) {
            case PX_REMOTE_ADDRESS:
                e->value = req->client_addr;
                e->value_len = strlen(req->client_addr);
                break;
            case PX_REQUEST_HEADER:
                e->value =
                    sv_fields_find(req->headers, a->header, &e->value_len);
                skip = e->value == NULL;
                if (!skip &&
                    sv_fields_occurrences(req->headers, a->header) > 1)
                    return -1;
                break;
            case PX_PATH:
                /* The path as the route matched it. */
                e->value = px_route_path(route, req, &e->value_len);
                e->value_len = path_prefix(e->value, e->value_len, a->segments);
                break;
            case PX_METHOD:
                e->value = http_method_str((enum http_method)req->method);
                e->value_len = strlen(e->value);
                break;
            case PX_GENERIC_KEY:
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
        ds[n++] = (sv_dec_descriptor){entries + first, ne - first, -1, NULL};
    }
    *n_out = n;
    return 0;
}

int px_request_target(const char *url, size_t len, size_t *off,
                      size_t *path_len)
{
    if (len > 0 && url[0] == '/') {
        *off = 0;
    } else {
        /* absolute-form (RFC 9112, 3.2.2): the path is what counts. */
        struct http_parser_url u;
        http_parser_url_init(&u);
        if (len == 0 || http_parser_parse_url(url, len, 0, &u) != 0 ||
            !(u.field_set & (1 << UF_HOST)))
            return -1;
        if (!(u.field_set & (1 << UF_PATH))) {
            *off = len;
            *path_len = 0;
            return 0;
        }
        *off = u.field_data[UF_PATH].off;
    }
    const char *q = memchr(url + *off, '?', len - *off);
    *path_len = q ? (size_t)(q - url) - *off : len - *off;
    return 0;
}

int px_normalize_path(const char *path, size_t len, int loose, char *out,
                      size_t *out_len)
{
    /* Percent-decoding: of unreserved characters (RFC 3986, 6.2.2.2),
     * others staying encoded with upper-case digits; or, loose, of every
     * escape (%2F is '/', %3B ';'), once.  Into `small` unless the path
     * is long. */
    char small[256];
    char *dec = len < sizeof(small) ? small : malloc(len + 1);
    size_t n = 0;
    if (dec == NULL)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)path[i];
        if (c == '%') {
            int hi = i + 2 < len ? sv_hex_digit(path[i + 1]) : -1;
            int lo = i + 2 < len ? sv_hex_digit(path[i + 2]) : -1;
            int v = hi * 16 + lo;
            if (hi < 0 || lo < 0 || (loose && v == 0)) {
                if (dec != small)
                    free(dec);
                return -1;
            }
            if (loose || isalnum(v) || v == '-' || v == '.' || v == '_' ||
                v == '~') {
                dec[n++] = (char)v;
            } else {
                dec[n++] = '%';
                dec[n++] = "0123456789ABCDEF"[hi];
                dec[n++] = "0123456789ABCDEF"[lo];
            }
            i += 2;
        } else {
            dec[n++] = (char)c;
        }
    }
    /* Loose: a '\' is a '/' (as IIS and some frameworks take it). */
    for (size_t i = 0; loose && i < n; i++)
        if (dec[i] == '\\')
            dec[i] = '/';
    /* Segments (RFC 3986, 5.2.4): empty and "." dropped, ".." climbs;
     * climbing above the root is refused.  Loose, a segment ends at its
     * first ';' (its parameters, "/api;x=1/" as Tomcat reads it).  A path
     * that ends in a directory keeps its trailing '/' (a prefix "/api/"
     * must match). */
    size_t o = 0, i = 0;
    int dir = 1;
    while (i < n) {
        while (i < n && dec[i] == '/')
            i++;
        size_t start = i;
        while (i < n && dec[i] != '/')
            i++;
        size_t seg = i - start;
        const char *semi = loose ? memchr(dec + start, ';', seg) : NULL;
        if (semi != NULL)
            seg = (size_t)(semi - (dec + start));
        dir = i < n || seg == 0;
        if (seg == 0 || (seg == 1 && dec[start] == '.')) {
            dir = 1;
            continue;
        }
        if (seg == 2 && dec[start] == '.' && dec[start + 1] == '.') {
            if (o == 0) {
                if (dec != small)
                    free(dec);
                return -1;
            }
            while (o > 0 && out[o - 1] != '/')
                o--;
            o--; /* the '/' before the segment */
            dir = 1;
            continue;
        }
        out[o++] = '/';
        memcpy(out + o, dec + start, seg);
        o += seg;
    }
    if (dir || o == 0)
        out[o++] = '/';
    out[o] = '\0';
    *out_len = o;
    if (dec != small)
        free(dec);
    return 0;
}
