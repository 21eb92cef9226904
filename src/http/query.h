/*
 * query.h - query strings: their parameters, percent-decoded.
 */
#ifndef SV_QUERY_H
#define SV_QUERY_H

#include <stddef.h>
#include <stdint.h>

/* query.c: a query string's parameters, percent-decoded into dec (room
 * for len + 1 bytes), handed one by one to cb (NUL-terminated name; value
 * as (pointer, length), also NUL-terminated).  0; -1 with a message in err
 * for bad encoding or a name over 31 bytes; or cb's non-zero return. */
typedef int (*sv_query_cb)(void *ctx, const char *name, const char *value,
                           size_t value_len);
int sv_query_parse(const char *q, size_t len, char *dec, sv_query_cb cb,
                   void *ctx, char *err, size_t errlen);
/* A hexadecimal digit's value, or -1. */
int sv_hex_digit(char c);
/* Percent-decodes src (and '+' as a space) into dst, which has room for
 * len bytes (decoding never grows): the decoded length, or -1 for a bad
 * %XX. */
long sv_url_decode(const char *src, size_t len, char *dst);
/* A decimal integer in 0..SL_MAX_COUNT: 0, or -1. */
int sv_parse_count(const char *s, size_t len, int64_t *out);

#endif
