/*
 * head.c - a request's head read and checked as it is parsed (head.h),
 * written once for serve's connections and the proxy's clients, so that
 * what one server keeps and refuses the other does too.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http/head.h"
#include "http/hygiene.h"

void sv_head_init(sv_head *h, void *owner,
                  int (*keep)(const char *name, size_t len))
{
    *h = (sv_head){0};
    http_parser_init(&h->parser, HTTP_REQUEST);
    h->parser.data = owner;
    h->fields.keep = keep;
}

void sv_head_release(sv_head *h)
{
    sv_buf_release(&h->url);
    sv_fields_release(&h->fields);
}

void sv_head_begin(sv_head *h, size_t max_bytes)
{
    h->url.len = 0;
    h->url.failed = 0;
    sv_fields_reset(&h->fields);
    h->bytes = 0;
    h->max_bytes = max_bytes;
    h->status = 0;
    h->refusal = NULL;
    h->name_word = 0;
    h->name_len = h->value_len = 0;
    h->kind = h->in_value = h->hosts = h->expect_continue = 0;
}

static int refuse(sv_head *h, int status, const char *why)
{
    h->status = status;
    h->refusal = why;
    return -1;
}

static int count(sv_head *h, size_t len)
{
    h->bytes += len;
    return h->bytes > h->max_bytes ? refuse(h, 431, NULL) : 0;
}

int sv_head_on_url(http_parser *p, const char *at, size_t len)
{
    sv_head *h = (sv_head *)p;
    const char *why = sv_hygiene_target(at, len);
    if (why != NULL)
        return refuse(h, 400, why);
    if (count(h, len) != 0)
        return -1;
    sv_buf_add(&h->url, at, len);
    return h->url.failed ? -1 : 0;
}

/* What a field is, known when its value starts: only Host and Expect
 * matter here. */
enum { FIELD_OTHER, FIELD_HOST, FIELD_EXPECT };

/* A name of at most 8 bytes as one word, each byte lowercased (| 0x20,
 * exact for the letters the names below are made of). */
#define WORD4(a, b, c, d)                                                      \
    ((uint64_t)(a) | (uint64_t)(b) << 8 | (uint64_t)(c) << 16 |              \
     (uint64_t)(d) << 24)
#define HOST_WORD WORD4('h', 'o', 's', 't')
#define EXPECT_WORD                                                            \
    (WORD4('e', 'x', 'p', 'e') | (uint64_t)'c' << 32 | (uint64_t)'t' << 40)
#define EXPECT_LEN 6

/* The value of the field before this one is complete. */
static void end_field(sv_head *h)
{
    if (h->kind == FIELD_EXPECT && h->value_len == sizeof(h->value) &&
        strncasecmp(h->value, "100-continue", sizeof(h->value)) == 0)
        h->expect_continue = 1;
    h->in_value = 0;
    h->kind = FIELD_OTHER;
    h->name_word = 0;
    h->name_len = h->value_len = 0;
}

int sv_head_on_field(http_parser *p, const char *at, size_t len)
{
    sv_head *h = (sv_head *)p;
    const char *why = sv_hygiene_field_name(at, len);
    if (why != NULL)
        return refuse(h, 400, why);
    if (h->in_value)
        end_field(h);
    /* A name longer than Expect's is neither: its bytes are not kept. */
    if (h->name_len + len <= EXPECT_LEN)
        for (size_t i = 0; i < len; i++)
            h->name_word |= (uint64_t)((unsigned char)at[i] | 0x20)
                            << (8 * (h->name_len + i));
    h->name_len += len;
    if (count(h, len) != 0)
        return -1;
    /* The cap on bytes is counted above; the store's is the fields'. */
    return sv_fields_name(&h->fields, at, len, SIZE_MAX) != 0
               ? refuse(h, 431, NULL)
               : 0;
}

int sv_head_on_value(http_parser *p, const char *at, size_t len)
{
    sv_head *h = (sv_head *)p;
    if (!h->in_value) { /* the first piece of this field's value */
        h->in_value = 1;
        h->kind = h->name_len == 4 && h->name_word == HOST_WORD ? FIELD_HOST
                  : h->name_len == EXPECT_LEN && h->name_word == EXPECT_WORD
                      ? FIELD_EXPECT
                      : FIELD_OTHER;
        h->hosts += h->kind == FIELD_HOST;
    }
    if (h->kind == FIELD_EXPECT) { /* its first bytes, and its length */
        if (h->value_len < sizeof(h->value))
            memcpy(h->value + h->value_len, at,
                   len < sizeof(h->value) - h->value_len
                       ? len
                       : sizeof(h->value) - h->value_len);
        h->value_len += len;
    }
    if (count(h, len) != 0)
        return -1;
    return sv_fields_value(&h->fields, at, len, SIZE_MAX) != 0
               ? refuse(h, 431, NULL)
               : 0;
}

int sv_head_complete(sv_head *h)
{
    const http_parser *p = &h->parser;
    if (h->in_value)
        end_field(h);
    const char *why = sv_hygiene_framing(p);
    if (why != NULL)
        return refuse(h, 400, why);
    if (h->hosts > 1)
        return refuse(h, 400, "more than one Host header field");
    if (h->hosts == 0 && p->http_major == 1 && p->http_minor >= 1)
        return refuse(h, 400, "an HTTP/1.1 request without a Host header field");
    if (p->http_major != 1 || p->http_minor < 1)
        h->expect_continue = 0; /* only HTTP/1.1 clients wait for it */
    return 0;
}
