/*
 * resp.c - a command in RESP, the bytes a Redis client writes: a
 * multi-bulk of binary-safe bulk strings.  Written by hand, into the
 * caller's buffer, because hiredis's own formatting (one sdscatfmt per
 * argument) cost more than building the call, and
 * a length function first lets a caller size one buffer and reuse it.
 */
#include <string.h>

#include "redis/redis_proto.h"

static size_t digits(size_t v)
{
    size_t n = 1;
    for (; v >= 10; v /= 10)
        n++;
    return n;
}

/* kind, v in decimal, CRLF: a header ("*3\r\n", "$5\r\n"). */
static char *put_header(char *o, char kind, size_t v)
{
    size_t n = digits(v);
    *o++ = kind;
    for (size_t i = n; i > 0; i--, v /= 10)
        o[i - 1] = (char)('0' + v % 10);
    o += n;
    *o++ = '\r';
    *o++ = '\n';
    return o;
}

size_t sl__redis_resp_len(int argc, const size_t *lens)
{
    size_t len = 1 + digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++)
        len += 1 + digits(lens[i]) + 2 + lens[i] + 2;
    return len;
}

size_t sl__redis_resp_write(char *out, int argc, const char *const *argv,
                            const size_t *lens)
{
    char *o = put_header(out, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        o = put_header(o, '$', lens[i]);
        memcpy(o, argv[i], lens[i]);
        o += lens[i];
        *o++ = '\r';
        *o++ = '\n';
    }
    return (size_t)(o - out);
}
