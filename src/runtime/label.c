/*
 * label.c - label values for /metrics from untrusted bytes.  A descriptor
 * value with detailed_metric, a route or a rule name reaches a label
 * verbatim otherwise; Prometheus refuses a whole scrape for one invalid
 * UTF-8 byte, and a 60 KB value makes a 60 KB series in every scrape.
 * It is apart from metrics.c because serve's series, the proxy's and the
 * runtime limits' (limits.c) all write labels.
 */
#include <stdint.h>

#include "runtime/label.h"

/* "…" and the hash's 16 hex digits that end a value cut short. */
#define ELLIPSIS "\xe2\x80\xa6"
#define TAIL (sizeof(ELLIPSIS) - 1 + 16)

/* The length of the valid UTF-8 sequence at p (RFC 3629: no overlongs,
 * no surrogates, nothing past U+10FFFF), or 0 when there is none.  NUL
 * counts as none: series keep their labels as C strings. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/* Writes v's characters (U+FFFD for what is not UTF-8) while they fit in
 * room bytes; returns how many bytes of v were consumed. */
static size_t put_chars(sv_buf *out, const unsigned char *v, size_t len,
                        size_t room)
{
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_len(v + i, len - i);
        const char *c = n ? (const char *)v + i : "\xef\xbf\xbd";
        size_t clen = n ? n : 3;
        if (clen > room)
            break;
        sv_buf_add(out, c, clen);
        room -= clen;
        i += n ? n : 1;
    }
    return i;
}

void sv_label_text(sv_buf *out, const char *v, size_t len)
{
    size_t start = out->len;
    if (put_chars(out, (const unsigned char *)v, len, SV_LABEL_MAX) == len)
        return;
    /* Too long: again, shorter, with the hash of every byte.  A text
     * made here is SV_LABEL_MAX bytes or less, so it comes out as is. */
    if (!out->failed)
        out->len = start;
    put_chars(out, (const unsigned char *)v, len, SV_LABEL_MAX - TAIL);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)v[i]) * 0x100000001b3ULL;
    sv_buf_printf(out, ELLIPSIS "%016llx", (unsigned long long)h);
}

void sv_label_value(sv_buf *out, const char *v, size_t len)
{
    char mem[SV_LABEL_MAX + 8]; /* never grown: sv_label_text fits */
    sv_buf text = {.data = mem, .cap = sizeof(mem)};
    sv_label_text(&text, v, len);
    for (size_t i = 0; i < text.len; i++) {
        char c = text.data[i];
        if (c == '\\' || c == '"')
            sv_buf_add(out, "\\", 1);
        if (c == '\n')
            sv_buf_add(out, "\\n", 2);
        else
            sv_buf_add(out, &c, 1);
    }
}
