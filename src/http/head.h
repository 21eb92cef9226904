/*
 * head.h - a request's head as every HTTP/1.1 server of the daemon reads
 * it (serve's connections and the proxy's clients): http-parser's
 * callbacks for the target and the header fields, written once, which
 * keep them (the fields a server wants: all, or those its filter takes)
 * and check them the same way for both: RFC 9112's rules (hygiene.c),
 * the cap on a head's bytes and fields, exactly one Host field, and
 * Expect: 100-continue.
 */
#ifndef SV_HEAD_H
#define SV_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#include "http/fields.h"
#include "runtime/buf.h"

typedef struct sv_head {
    /* First: the callbacks below find the head from the parser.  Its
     * `data` is the server's, for its own callbacks. */
    http_parser parser;
    sv_buf url;        /* the request target */
    sv_fields fields;  /* the fields kept */
    size_t bytes;      /* of the target and the fields, so far */
    size_t max_bytes;  /* --max-header-bytes */
    int status;        /* once refused: 431 (too large) or 400, with: */
    const char *refusal;
    /* The field being read: its name's length and, while it is short
     * enough to be Host or Expect, its bytes lowercased in one word (a
     * name or value may come in pieces over reads); what it is once its
     * value starts; and an Expect's value's first bytes. */
    uint64_t name_word;
    size_t name_len;
    int kind; /* head.c's FIELD_* */
    char value[12];
    size_t value_len;
    int in_value;
    int hosts;           /* Host fields */
    int expect_continue; /* Expect: 100-continue */
} sv_head;

/* A server's parser of requests, owner in parser.data; keep, when not
 * NULL, says which fields are kept (by name, case as sent). */
void sv_head_init(sv_head *h, void *owner,
                  int (*keep)(const char *name, size_t len));
void sv_head_release(sv_head *h);
/* At on_message_begin: a new request, its head read anew. */
void sv_head_begin(sv_head *h, size_t max_bytes);
/* http-parser's on_url, on_header_field and on_header_value, for a
 * server's settings: 0, or nonzero when the head is refused (status and
 * refusal say why) or memory ran out (url or fields failed). */
int sv_head_on_url(http_parser *p, const char *at, size_t len);
int sv_head_on_field(http_parser *p, const char *at, size_t len);
int sv_head_on_value(http_parser *p, const char *at, size_t len);
/* From the server's on_headers_complete, first: the framing and the
 * Host rule (RFC 9112 3.2: an HTTP/1.1 request has exactly one Host
 * field; two are refused in any version, since a cache or an upstream
 * could read either).  0, or -1 refused. */
int sv_head_complete(sv_head *h);
/* The head's buffers ran out of memory: the request was not kept whole. */
static inline int sv_head_failed(const sv_head *h)
{
    return h->url.failed || h->fields.bytes.failed || h->fields.fields.failed;
}

#endif
