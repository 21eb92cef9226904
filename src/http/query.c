/*
 * query.c - query strings (application/x-www-form-urlencoded) and the
 * decimal counts in them, shared by the GET endpoints: /v1/delay names a
 * limit in its query, /v1/auth its domain and hits.
 */
#include <stdio.h>
#include <string.h>

#include "http/query.h"
#include "core/value.h"

int sv_parse_count(const char *s, size_t len, int64_t *out)
{
    uint64_t u;
    if (sl__value_uint(s, len, 0, SL_MAX_COUNT, &u) != 0)
        return -1;
    *out = (int64_t)u;
    return 0;
}

int sv_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long sv_url_decode(const char *src, size_t len, char *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '+')
            dst[o++] = ' ';
        else if (src[i] == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = sv_hex_digit(src[i + 1]), lo = sv_hex_digit(src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            dst[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else
            dst[o++] = src[i];
    }
    return (long)o;
}

int sv_query_parse(const char *q, size_t len, char *dec, sv_query_cb cb,
                   void *ctx, char *err, size_t errlen)
{
    size_t pos = 0, o = 0;
    while (pos < len) {
        const char *amp = memchr(q + pos, '&', len - pos);
        size_t end = amp ? (size_t)(amp - q) : len;
        if (end == pos) {
            pos++;
            continue;
        }
        const char *eq = memchr(q + pos, '=', end - pos);
        size_t nend = eq ? (size_t)(eq - q) : end;
        char name[32];
        if (nend - pos >= sizeof(name)) {
            snprintf(err, errlen, "%.31s...: unknown parameter", q + pos);
            return -1;
        }
        long nl = sv_url_decode(q + pos, nend - pos, name);
        if (nl < 0) {
            snprintf(err, errlen, "query: bad percent-encoding");
            return -1;
        }
        name[nl] = '\0';
        size_t vstart = eq ? nend + 1 : end;
        long vl = sv_url_decode(q + vstart, end - vstart, dec + o);
        if (vl < 0) {
            snprintf(err, errlen, "%s: bad percent-encoding", name);
            return -1;
        }
        dec[o + (size_t)vl] = '\0';
        int rc = cb(ctx, name, dec + o, (size_t)vl);
        if (rc != 0)
            return rc;
        o += (size_t)vl + 1;
        pos = end + 1;
    }
    return 0;
}
