/*
 * headers.c - the hop-by-hop rules for passing a message's header fields
 * on (src/http/fields.c keeps them): the client's request to the
 * upstream, and the upstream's response to the client.
 */
#include <string.h>
#include <strings.h>

#include "proxy.h"

/* Is `name` one of the comma-separated tokens of a Connection value? */
static int listed_in(const char *list, size_t list_len, const char *name,
                     size_t name_len)
{
    size_t i = 0;
    while (i < list_len) {
        while (i < list_len &&
               (list[i] == ' ' || list[i] == '\t' || list[i] == ','))
            i++;
        size_t start = i;
        while (i < list_len && list[i] != ',' && list[i] != ' ' &&
               list[i] != '\t')
            i++;
        if (i - start == name_len &&
            strncasecmp(list + start, name, name_len) == 0)
            return 1;
    }
    return 0;
}

/* The fields a proxy does not pass on as they are, with their lengths
 * so that most names are told apart without comparing bytes. */
#define NAME(s)                                                                \
    {                                                                          \
        s, sizeof(s) - 1                                                       \
    }
static const struct {
    const char *name;
    size_t len;
} hop_by_hop[] = {NAME("connection"),       NAME("keep-alive"),
                  NAME("proxy-connection"), NAME("te"),
                  NAME("trailer"),          NAME("transfer-encoding"),
                  NAME("upgrade"),          NAME("content-length")};
#undef NAME

static int is_hop_by_hop(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(hop_by_hop) / sizeof(hop_by_hop[0]); i++)
        if (hop_by_hop[i].len == len &&
            strncasecmp(name, hop_by_hop[i].name, len) == 0)
            return 1;
    return 0;
}

void px_headers_forward(const sv_fields *h, const char *const *drop,
                        sv_buf *out)
{
    size_t n = sv_fields_count(h);
    /* Every Connection field counts: a message may send several. */
    size_t conn[SV_MAX_FIELDS], n_conn = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        size_t nl, vl;
        sv_fields_get(h, i, &name, &nl, &value, &vl);
        if (sv_field_is(name, nl, "connection"))
            conn[n_conn++] = i;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        size_t nl, vl;
        sv_fields_get(h, i, &name, &nl, &value, &vl);
        int skip = is_hop_by_hop(name, nl);
        for (const char *const *d = drop; d && *d && !skip; d++)
            skip = sv_field_is(name, nl, *d);
        for (size_t j = 0; j < n_conn && !skip; j++) {
            const char *cn, *cv;
            size_t cnl, cvl;
            sv_fields_get(h, conn[j], &cn, &cnl, &cv, &cvl);
            skip = listed_in(cv, cvl, name, nl);
        }
        if (skip)
            continue;
        sv_buf_add(out, name, nl);
        sv_buf_add(out, ": ", 2);
        sv_buf_add(out, value, vl);
        sv_buf_add(out, "\r\n", 2);
    }
}

static void px_add_content_length(sv_buf *b, uint64_t n)
{
    sv_buf_addstr(b, "Content-Length: ");
    sv_buf_add_uint(b, n);
    sv_buf_add(b, "\r\n", 2);
}

void px_request_head(sv_buf *head, int method, const char *target,
                     size_t target_len, const sv_fields *h,
                     const char *upstream_host, const char *peer_text,
                     int64_t length)
{
    static const char *const drop[] = {"expect", "x-forwarded-for",
                                       "x-forwarded-proto", NULL};
    size_t hl, xl;
    /* Origin-form, also for a request sent in absolute-form. */
    sv_buf_addstr(head, http_method_str(method));
    sv_buf_add(head, " ", 1);
    if (target_len == 0 || target[0] != '/')
        sv_buf_addstr(head, "/");
    sv_buf_add(head, target, target_len);
    sv_buf_addstr(head, " HTTP/1.1\r\n");
    px_headers_forward(h, drop, head);
    if (sv_fields_find(h, "host", &hl) == NULL) {
        sv_buf_addstr(head, "Host: ");
        sv_buf_addstr(head, upstream_host);
        sv_buf_add(head, "\r\n", 2);
    }
    /* Every X-Forwarded-For field, in order, is one list (RFC 9110,
     * 5.3): a load balancer appends a field of its own. */
    sv_buf_addstr(head, "X-Forwarded-For: ");
    for (size_t i = 0; i < sv_fields_count(h); i++) {
        const char *n, *v;
        size_t nl;
        sv_fields_get(h, i, &n, &nl, &v, &xl);
        if (xl > 0 && sv_field_is(n, nl, "x-forwarded-for")) {
            sv_buf_add(head, v, xl);
            sv_buf_addstr(head, ", ");
        }
    }
    sv_buf_addstr(head, peer_text);
    sv_buf_addstr(head, "\r\nX-Forwarded-Proto: http\r\n");
    if (length == -1)
        sv_buf_addstr(head, "Transfer-Encoding: chunked\r\n");
    else if (length >= 0)
        px_add_content_length(head, (uint64_t)length);
    sv_buf_addstr(head, "\r\n");
}

int px_response_head(sv_buf *out, int status, const char *reason,
                     size_t reason_len, const sv_fields *h,
                     const http_parser *p, int head_request, int http11,
                     const sv_buf *rate, int *keep_alive)
{
    int no_body =
        head_request || status == 204 || status == 304 || status / 100 == 1;
    int chunked = 0;
    sv_buf_addstr(out, "HTTP/1.1 ");
    sv_buf_add_int(out, status);
    sv_buf_add(out, " ", 1);
    sv_buf_add(out, reason, reason_len);
    sv_buf_addstr(out, "\r\n");
    px_headers_forward(h, NULL, out);
    if (rate != NULL)
        sv_buf_add(out, rate->data, rate->len);
    if (no_body) {
        if (p->content_length != ULLONG_MAX && status != 204)
            px_add_content_length(out, p->content_length);
    } else if ((p->flags & F_CHUNKED) || p->content_length == ULLONG_MAX) {
        /* Unknown length: chunks for an HTTP/1.1 client; an HTTP/1.0
         * client reads to the close. */
        if (http11) {
            chunked = 1;
            sv_buf_addstr(out, "Transfer-Encoding: chunked\r\n");
        } else
            *keep_alive = 0;
    } else
        px_add_content_length(out, p->content_length);
    sv_buf_addstr(out, *keep_alive ? "Connection: keep-alive\r\n\r\n"
                                   : "Connection: close\r\n\r\n");
    return chunked;
}
