/*
 * buf.h - a growable byte buffer (git's strbuf): what the daemon builds
 * every answer and keeps every request in, with the number and string
 * encodings of its answers.
 */
#ifndef SV_BUF_H
#define SV_BUF_H

#include <stddef.h>
#include <string.h>

/* A growable byte buffer (git's strbuf).  Out of memory never aborts:
 * the append is dropped and `failed` set, and whoever sends the buffer
 * answers 503 ENOMEM or closes the connection instead (conn.c). */
typedef struct sv_buf {
    char *data;
    size_t len, cap;
    int failed; /* an append was dropped for want of memory */
} sv_buf;

/* Room for len more bytes and the NUL: 0, or -1 with `failed` set. */
int sv_buf_reserve(sv_buf *b, size_t len);
/* Inline: responses are built of dozens of short appends, most of a
 * constant length that the compiler turns into a move or two. */
static inline void sv_buf_add(sv_buf *b, const void *data, size_t len)
{
    if (b->cap - b->len <= len && sv_buf_reserve(b, len) != 0)
        return;
    if (len > 0)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}
static inline void sv_buf_addstr(sv_buf *b, const char *s)
{
    sv_buf_add(b, s, strlen(s));
}
void sv_buf_printf(sv_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* v in decimal. */
void sv_buf_add_int(sv_buf *b, long long v);
void sv_buf_add_uint(sv_buf *b, unsigned long long v);
/* How many decimal digits sv_buf_add_uint writes for u. */
size_t sv_digits(unsigned long long u);
/* s (len bytes of valid UTF-8) as a quoted JSON string, byte for byte
 * what jansson's json_dumps(JSON_COMPACT) writes for it. */
void sv_buf_add_json_string(sv_buf *b, const char *s, size_t len);
/* The same without the quotes: to write a string in pieces. */
void sv_buf_add_json_chars(sv_buf *b, const char *s, size_t len);
/* s as a Structured Field String (RFC 8941, 3.3.3): quoted, '"' and '\\'
 * escaped, and bytes outside printable ASCII, which it cannot hold, left
 * out. */
void sv_buf_add_sf_string(sv_buf *b, const char *s);
void sv_buf_release(sv_buf *b);
/* Appends the file at path, refusing one over max_bytes: 0, or -1 with
 * "PATH: cannot open: ...", "PATH: cannot read" or "PATH: larger than N
 * KiB" in err (the config files of serve and proxy). */
int sv_buf_read_file(sv_buf *b, const char *path, size_t max_bytes, char *err,
                     size_t errlen);

#endif
