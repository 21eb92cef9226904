/*
 * head.c - a request head checked as it is parsed (head.h), written once
 * for serve's connections and the proxy's clients, so that what one
 * server refuses the other refuses too.
 */
#include <string.h>
#include <strings.h>

#include "http/head.h"
#include "http/hygiene.h"

void sv_head_begin(sv_head *h, size_t max_bytes)
{
    *h = (sv_head){.max_bytes = max_bytes};
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

int sv_head_url(sv_head *h, const char *at, size_t len)
{
    const char *why = sv_hygiene_target(at, len);
    return why != NULL ? refuse(h, 400, why) : count(h, len);
}

/* Keeps the first bytes of a piece of a name or value, and counts all. */
static void gather(char *buf, size_t cap, size_t *have, const char *at,
                   size_t len)
{
    if (*have < cap)
        memcpy(buf + *have, at, len < cap - *have ? len : cap - *have);
    *have += len;
}

static int is(const char *buf, size_t len, const char *word)
{
    return len == strlen(word) && strncasecmp(buf, word, len) == 0;
}

/* The value of the field before this one is complete. */
static void end_field(sv_head *h)
{
    if (!h->in_value)
        return;
    if (is(h->name, h->name_len, "expect") &&
        is(h->value, h->value_len, "100-continue"))
        h->expect_continue = 1;
    h->in_value = 0;
    h->name_len = h->value_len = 0;
}

int sv_head_field(sv_head *h, const char *at, size_t len)
{
    const char *why = sv_hygiene_field_name(at, len);
    if (why != NULL)
        return refuse(h, 400, why);
    end_field(h);
    gather(h->name, sizeof(h->name), &h->name_len, at, len);
    return count(h, len);
}

int sv_head_value(sv_head *h, const char *at, size_t len)
{
    if (!h->in_value) { /* the first piece of this field's value */
        h->in_value = 1;
        h->hosts += is(h->name, h->name_len, "host");
    }
    gather(h->value, sizeof(h->value), &h->value_len, at, len);
    return count(h, len);
}

int sv_head_complete(sv_head *h, const http_parser *p)
{
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
