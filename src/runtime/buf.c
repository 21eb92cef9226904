/*
 * buf.c - sv_buf, the growable byte buffer responses are built in (git's
 * strbuf).  The data is always NUL-terminated after len bytes, so it can
 * be handed to printf-style code, but len is what counts: bodies may hold
 * NUL bytes.  Out of memory drops the append and sets `failed`.
 *
 * The decision answers, written once per request, are formatted with
 * sv_buf_add_int and sv_buf_add_json_string rather than printf and a
 * jansson tree: building, dumping and freeing the tree cost more than
 * deciding (docs/benchmarks.md, "sluice serve over HTTP").
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/buf.h"

int sv_buf_reserve(sv_buf *b, size_t len)
{
    if (b->len + len + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + len + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void sv_buf_printf(sv_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(small)) {
        sv_buf_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sv_buf_add(b, big, (size_t)n);
    free(big);
}

size_t sv_digits(unsigned long long u)
{
    size_t n = 1;
    for (; u >= 10; u /= 10)
        n++;
    return n;
}

/* u in decimal, after a '-' if neg: its length counted first, then
 * written in place two digits a step from the end, with no temporary to
 * copy from (a 429 writes eleven numbers). */
static void add_digits(sv_buf *b, int neg, unsigned long long u)
{
    static const char pairs[] = "00010203040506070809"
                                "10111213141516171819"
                                "20212223242526272829"
                                "30313233343536373839"
                                "40414243444546474849"
                                "50515253545556575859"
                                "60616263646566676869"
                                "70717273747576777879"
                                "80818283848586878889"
                                "90919293949596979899";
    size_t n = sv_digits(u) + (neg != 0);
    if (b->cap - b->len <= n && sv_buf_reserve(b, n) != 0)
        return;
    char *p = b->data + b->len + n;
    *p = '\0';
    b->len += n;
    while (u >= 100) {
        p -= 2;
        memcpy(p, pairs + 2 * (u % 100), 2);
        u /= 100;
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, pairs + 2 * u, 2);
    } else
        *--p = (char)('0' + u);
    if (neg)
        *--p = '-';
}

void sv_buf_add_int(sv_buf *b, long long v)
{
    /* Through unsigned, so LLONG_MIN negates without overflow. */
    add_digits(b, v < 0,
               v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);
}

void sv_buf_add_uint(sv_buf *b, unsigned long long v)
{
    add_digits(b, 0, v);
}

/* As jansson's compact dump writes a string (its flags 0): '"', '\\' and
 * the control characters escaped, \b \f \n \r \t by name and the rest as
 * \u00XX; everything else, UTF-8 included, as it is.  The strings given
 * here come from the rules, whose loader accepts only valid UTF-8. */
void sv_buf_add_json_string(sv_buf *b, const char *s, size_t len)
{
    sv_buf_add(b, "\"", 1);
    sv_buf_add_json_chars(b, s, len);
    sv_buf_add(b, "\"", 1);
}

void sv_buf_add_json_chars(sv_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0; /* bytes of s[run..i) still to copy as they are */
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        sv_buf_add(b, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', (char)ch};
        size_t n = 2;
        switch (ch) {
        case '"':
        case '\\':
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            n = 6;
        }
        sv_buf_add(b, esc, n);
    }
    sv_buf_add(b, s + run, len - run);
}

void sv_buf_add_sf_string(sv_buf *out, const char *s)
{
    sv_buf_add(out, "\"", 1);
    for (;;) {
        size_t i = 0; /* s[0..i) go out as they are, in one append */
        while (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
            i++;
        sv_buf_add(out, s, i);
        if (s[i] == '\0')
            break;
        if (s[i] == '"' || s[i] == '\\') {
            char esc[2] = {'\\', s[i]};
            sv_buf_add(out, esc, 2);
        }
        s += i + 1;
    }
    sv_buf_add(out, "\"", 1);
}

void sv_buf_release(sv_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

int sv_buf_read_file(sv_buf *b, const char *path, size_t max_bytes, char *err,
                     size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char chunk[4096];
    size_t n, start = b->len;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 &&
           b->len - start <= max_bytes)
        sv_buf_add(b, chunk, n);
    int bad = ferror(f) || b->failed;
    fclose(f);
    if (bad || b->len - start > max_bytes) {
        if (bad)
            snprintf(err, errlen, "%s: cannot read", path);
        else
            snprintf(err, errlen, "%s: larger than %zu KiB", path,
                     max_bytes / 1024);
        return -1;
    }
    return 0;
}
