/*
 * headers.c - the header fields of one HTTP message as http-parser hands
 * them over (a name or value may come in several pieces, split across
 * reads), and the hop-by-hop rules for passing them on.  Both directions
 * use it: the client's request and the upstream's response.
 *
 * Fields are kept as offsets into one byte buffer, which may move while
 * it grows; views are made only when asked for.
 */
#include <string.h>
#include <strings.h>

#include "proxy.h"

void sl_px_headers_reset(sl_px_headers *h)
{
    h->bytes.len = h->fields.len = 0;
    h->bytes.failed = h->fields.failed = 0;
    h->in_value = 0;
    h->total = 0;
}

void sl_px_headers_release(sl_px_headers *h)
{
    sl_buf_release(&h->bytes);
    sl_buf_release(&h->fields);
}

size_t sl_px_headers_count(const sl_px_headers *h)
{
    return h->fields.len / sizeof(sl_px_field);
}

static sl_px_field *last(sl_px_headers *h)
{
    return (sl_px_field *)(h->fields.data + h->fields.len) - 1;
}

static int count(sl_px_headers *h, size_t len, size_t max_bytes)
{
    h->total += len;
    return h->total > max_bytes || h->bytes.failed || h->fields.failed ? -1
                                                                       : 0;
}

int sl_px_headers_field(sl_px_headers *h, const char *at, size_t len,
                        size_t max_bytes)
{
    if (h->in_value || h->fields.len == 0) {
        if (sl_px_headers_count(h) == SL_PX_MAX_HEADERS)
            return -1;
        sl_px_field f = {h->bytes.len, 0, 0, 0};
        sl_buf_add(&h->fields, &f, sizeof(f));
        h->in_value = 0;
        if (h->fields.failed)
            return -1;
    }
    sl_buf_add(&h->bytes, at, len);
    last(h)->name_len += len;
    return count(h, len, max_bytes);
}

int sl_px_headers_value(sl_px_headers *h, const char *at, size_t len,
                        size_t max_bytes)
{
    if (h->fields.len == 0)
        return -1;
    if (!h->in_value) {
        h->in_value = 1;
        last(h)->value_off = h->bytes.len;
    }
    sl_buf_add(&h->bytes, at, len);
    last(h)->value_len += len;
    return count(h, len, max_bytes);
}

void sl_px_headers_get(const sl_px_headers *h, size_t i, const char **name,
                       size_t *name_len, const char **value, size_t *value_len)
{
    const sl_px_field *f = (const sl_px_field *)h->fields.data + i;
    *name = h->bytes.data + f->name_off;
    *name_len = f->name_len;
    *value = f->value_len ? h->bytes.data + f->value_off : "";
    *value_len = f->value_len;
}

static int name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

const char *sl_px_headers_find(const sl_px_headers *h, const char *name,
                               size_t *value_len)
{
    for (size_t i = 0; i < sl_px_headers_count(h); i++) {
        const char *n, *v;
        size_t nl, vl;
        sl_px_headers_get(h, i, &n, &nl, &v, &vl);
        if (name_is(n, nl, name)) {
            *value_len = vl;
            return v;
        }
    }
    return NULL;
}

size_t sl_px_headers_occurrences(const sl_px_headers *h, const char *name)
{
    size_t count = 0;
    for (size_t i = 0; i < sl_px_headers_count(h); i++) {
        const char *n, *v;
        size_t nl, vl;
        sl_px_headers_get(h, i, &n, &nl, &v, &vl);
        count += name_is(n, nl, name);
    }
    return count;
}

/* Is `name` one of the comma-separated tokens of a Connection value? */
static int listed_in(const char *list, size_t list_len, const char *name,
                     size_t name_len)
{
    size_t i = 0;
    while (i < list_len) {
        while (i < list_len && (list[i] == ' ' || list[i] == '\t' ||
                                list[i] == ','))
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
#define NAME(s) {s, sizeof(s) - 1}
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

void sl_px_headers_forward(const sl_px_headers *h, const char *const *drop,
                           sl_buf *out)
{
    size_t n = sl_px_headers_count(h);
    /* Every Connection field counts: a message may send several. */
    size_t conn[SL_PX_MAX_HEADERS], n_conn = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        size_t nl, vl;
        sl_px_headers_get(h, i, &name, &nl, &value, &vl);
        if (name_is(name, nl, "connection"))
            conn[n_conn++] = i;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        size_t nl, vl;
        sl_px_headers_get(h, i, &name, &nl, &value, &vl);
        int skip = is_hop_by_hop(name, nl);
        for (const char *const *d = drop; d && *d && !skip; d++)
            skip = name_is(name, nl, *d);
        for (size_t j = 0; j < n_conn && !skip; j++) {
            const char *cn, *cv;
            size_t cnl, cvl;
            sl_px_headers_get(h, conn[j], &cn, &cnl, &cv, &cvl);
            skip = listed_in(cv, cvl, name, nl);
        }
        if (skip)
            continue;
        sl_buf_add(out, name, nl);
        sl_buf_add(out, ": ", 2);
        sl_buf_add(out, value, vl);
        sl_buf_add(out, "\r\n", 2);
    }
}

void sl_px_add_content_length(sl_buf *b, uint64_t n)
{
    sl_buf_addstr(b, "Content-Length: ");
    sl_buf_add_uint(b, n);
    sl_buf_add(b, "\r\n", 2);
}

void sl_px_request_head(sl_buf *head, int method, const char *target,
                        size_t target_len, const sl_px_headers *h,
                        const char *upstream_host, const char *peer_text,
                        int64_t length)
{
    static const char *const drop[] = {"expect", "x-forwarded-for",
                                       "x-forwarded-proto", NULL};
    size_t hl, xl;
    /* Origin-form, also for a request sent in absolute-form. */
    sl_buf_addstr(head, http_method_str(method));
    sl_buf_add(head, " ", 1);
    if (target_len == 0 || target[0] != '/')
        sl_buf_addstr(head, "/");
    sl_buf_add(head, target, target_len);
    sl_buf_addstr(head, " HTTP/1.1\r\n");
    sl_px_headers_forward(h, drop, head);
    if (sl_px_headers_find(h, "host", &hl) == NULL) {
        sl_buf_addstr(head, "Host: ");
        sl_buf_addstr(head, upstream_host);
        sl_buf_add(head, "\r\n", 2);
    }
    const char *xff = sl_px_headers_find(h, "x-forwarded-for", &xl);
    sl_buf_addstr(head, "X-Forwarded-For: ");
    if (xff != NULL && xl > 0) {
        sl_buf_add(head, xff, xl);
        sl_buf_addstr(head, ", ");
    }
    sl_buf_addstr(head, peer_text);
    sl_buf_addstr(head, "\r\nX-Forwarded-Proto: http\r\n");
    if (length == -1)
        sl_buf_addstr(head, "Transfer-Encoding: chunked\r\n");
    else if (length >= 0)
        sl_px_add_content_length(head, (uint64_t)length);
    sl_buf_addstr(head, "\r\n");
}
