/*
 * head.h - a request head as http-parser hands it over, checked the same
 * way by every HTTP/1.1 server of the daemon (serve's connections and
 * the proxy's clients): RFC 9112's rules (hygiene.c), the cap on a
 * head's bytes, exactly one Host field, and Expect: 100-continue.  The
 * server keeps what it wants of the fields itself; this reads them.
 */
#ifndef SV_HEAD_H
#define SV_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

typedef struct sv_head {
    size_t bytes;     /* of the target and the fields, so far */
    size_t max_bytes; /* --max-header-bytes */
    int status;       /* once refused: 431 (too large) or 400, with: */
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

/* At on_message_begin. */
void sv_head_begin(sv_head *h, size_t max_bytes);
/* From the parser's callbacks: 0, or -1 when the head is refused
 * (h->status and h->refusal say why; the callback returns nonzero). */
int sv_head_url(sv_head *h, const char *at, size_t len);
int sv_head_field(sv_head *h, const char *at, size_t len);
int sv_head_value(sv_head *h, const char *at, size_t len);
/* At on_headers_complete: the framing and the Host rule (RFC 9112 3.2:
 * an HTTP/1.1 request has exactly one Host field; two are refused in
 * any version, since a cache or an upstream could read either). */
int sv_head_complete(sv_head *h, const http_parser *p);

#endif
