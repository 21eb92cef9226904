/*
 * fuzz_proxy.c - libFuzzer target for what `sluice proxy` makes of a
 * request's bytes before deciding it: the request target (origin- or
 * absolute-form) and its normalised path, the header fields gathered in
 * pieces as http-parser hands them over, the hop-by-hop filter, the
 * client address from X-Forwarded-For behind trusted proxies, and the
 * descriptors of a route.  Input: the target up to the first '\n', then
 * "name:value" lines, each split where the input's own bytes say.
 * Invariants: a normalised path (RFC 3986's form, and the loose one
 * routes match by default) starts with '/', has no empty, "." or ".."
 * segment, fits its buffer and normalises to itself (the loose one
 * without '\\' or ';', and when no '%' is left to decode again); no
 * crash, leak or out-of-bounds access.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "proxy/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *url, size_t len)
{
    size_t off, path_len, n, n2;
    if (px_request_target(url, len, &off, &path_len) != 0)
        return;
    if (off > len || path_len > len - off)
        __builtin_trap();
    char *out = malloc(path_len + 2), *again = malloc(path_len + 2);
    for (int loose = 0; loose < 2 && out && again; loose++) {
        if (px_normalize_path(url + off, path_len, loose, out, &n) != 0)
            continue;
        if (n > path_len + 1 || out[0] != '/' || out[n] != '\0' ||
            strstr(out, "//") || strstr(out, "/./") || strstr(out, "/../"))
            __builtin_trap();
        /* Loose: no '\\' or parameters left, and, with no '%' left to
         * decode again, a fixed point too. */
        if (loose && (memchr(out, '\\', n) || memchr(out, ';', n)))
            __builtin_trap();
        if (loose && memchr(out, '%', n))
            continue;
        if (px_normalize_path(out, n, loose, again, &n2) != 0 || n2 != n ||
            memcmp(out, again, n) != 0)
            __builtin_trap();
    }
    free(out);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static px_config cfg; /* large: routes are inline */
    const char *p = (const char *)data, *end = p + size;
    const char *nl = memchr(p, '\n', size);
    size_t url_len = nl ? (size_t)(nl - p) : size;
    check_path(p, url_len);
    /* hygiene.c's checks see the same bytes the parser hands over. */
    if (sv_hygiene_target(p, url_len) == NULL &&
        memchr(p, '\t', url_len) != NULL)
        __builtin_trap();
    p += nl ? url_len + 1 : url_len;

    sv_fields h = {0};
    int bad = 0;
    while (p < end && !bad) {
        const char *line_end = memchr(p, '\n', (size_t)(end - p));
        if (line_end == NULL)
            line_end = end;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        const char *name_end = colon ? colon : line_end;
        /* Names and values in two pieces each, as across two reads. */
        size_t nl1 = (size_t)(name_end - p) / 2;
        if (sv_hygiene_field_name(p, (size_t)(name_end - p)) == NULL &&
            memchr(p, ' ', (size_t)(name_end - p)) != NULL)
            __builtin_trap();
        bad = sv_fields_name(&h, p, nl1, 8192) ||
              sv_fields_name(&h, p + nl1, (size_t)(name_end - p) - nl1, 8192);
        if (!bad && colon) {
            size_t vl = (size_t)(line_end - colon - 1), half = vl / 2;
            bad = sv_fields_value(&h, colon + 1, half, 8192) ||
                  sv_fields_value(&h, colon + 1 + half, vl - half, 8192);
        }
        p = line_end < end ? line_end + 1 : end;
    }

    sv_buf out = {0};
    static const char *const drop[] = {"expect", NULL};
    px_headers_forward(&h, drop, &out);
    sv_buf_release(&out);

    if (cfg.n_trusted == 0) {
        cfg.trusted[0] = (px_cidr){AF_INET, {127, 0, 0, 0}, 8};
        cfg.trusted[1] = (px_cidr){AF_INET6, {0xfd}, 8};
        cfg.n_trusted = 2;
        px_route *r = &cfg.routes[0];
        r->prefix = "/";
        r->prefix_len = 1;
        r->domain = "d";
        r->descriptors[0].actions[0] =
            (px_action){.kind = PX_REMOTE_ADDRESS, .key = "remote_address"};
        r->descriptors[0].actions[1] = (px_action){
            .kind = PX_REQUEST_HEADER, .key = "api_key", .header = "x-api-key"};
        r->descriptors[0].n = 2;
        r->descriptors[1].actions[0] =
            (px_action){.kind = PX_PATH, .key = "path", .segments = 2};
        r->descriptors[1].n = 1;
        r->n_descriptors = 2;
        cfg.n_routes = 1;
    }
    struct sockaddr_storage peer = {0};
    struct sockaddr_in *in = (struct sockaddr_in *)&peer;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(0x7f000001);
    char addr[64];
    px_client_address(&cfg, &peer, "127.0.0.1", &h, addr, sizeof(addr));
    if (memchr(addr, '\0', sizeof(addr)) == NULL)
        __builtin_trap();
    sv_dec_descriptor ds[PX_MAX_DESCRIPTORS];
    sl_rules_entry entries[PX_MAX_DESCRIPTORS * PX_MAX_ACTIONS];
    size_t n = 0;
    px_request_view view = {HTTP_GET, "/a/b/c", 6,    "/a/b/c",
                            "/a/b/c", 6,        addr, &h};
    if (px_descriptors(&cfg.routes[0], &view, ds, entries, &n) == 0 &&
        n > cfg.routes[0].n_descriptors)
        __builtin_trap();
    sv_fields_release(&h);
    return 0;
}
