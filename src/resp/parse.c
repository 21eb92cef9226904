/*
 * parse.c - the incremental parser of Redis protocol requests (parse.h).
 *
 * Why our own: hiredis parses replies, not requests, and the servers that
 * speak the protocol (Redis, Valkey, twemproxy) each parse requests
 * themselves; the grammar is small and every length in it is the
 * client's to choose, so each is checked against a cap before anything
 * is kept.  A multibulk is parsed header by header as bytes come, so a
 * command trickled in byte by byte costs linear time; an inline line is
 * parsed once its newline is there.
 */
#include <stdlib.h>
#include <string.h>

#include "resp/parse.h"
#include "http/query.h"

void rp_parser_init(rp_parser *p)
{
    memset(p, 0, sizeof(*p));
    p->argc = p->bulk = -1;
}

void rp_parser_release(rp_parser *p)
{
    free(p->args);
    rp_parser_init(p);
}

void rp_parser_next(rp_parser *p)
{
    p->pos = 0;
    p->argc = p->bulk = -1;
    p->is_inline = 0;
    p->n_args = 0;
    p->err = NULL;
}

static int fail(rp_parser *p, const char *why)
{
    p->err = why;
    return RP_ERROR;
}

static int push(rp_parser *p, size_t off, size_t len)
{
    if (p->n_args == p->cap_args) {
        size_t cap = p->cap_args ? p->cap_args * 2 : 8;
        rp_arg *a = realloc(p->args, cap * sizeof(*a));
        if (a == NULL)
            return -1;
        p->args = a;
        p->cap_args = cap;
    }
    p->args[p->n_args++] = (rp_arg){(uint32_t)off, (uint32_t)len};
    return 0;
}

/* A "<sign><digits>\r\n" header at buf[pos..len) (after its type byte):
 * RP_DONE with *v and *end past its CRLF, RP_MORE, or RP_ERROR when it is
 * not a number or longer than any valid one. */
static int header_number(const char *buf, size_t pos, size_t len, int64_t *v,
                         size_t *end)
{
    const char *nl = memchr(buf + pos, '\r', len - pos);
    if (nl == NULL)
        return len - pos > 24 ? RP_ERROR : RP_MORE;
    size_t n = (size_t)(nl - (buf + pos));
    if ((size_t)(nl - buf) + 1 >= len)
        return n > 24 ? RP_ERROR : RP_MORE;
    if (nl[1] != '\n' || n == 0 || n > 20)
        return RP_ERROR;
    const char *s = buf + pos;
    int neg = s[0] == '-';
    if (neg && n == 1)
        return RP_ERROR;
    int64_t x = 0;
    for (size_t i = neg; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || x > (INT64_MAX - 9) / 10)
            return RP_ERROR;
        x = x * 10 + (s[i] - '0');
    }
    *v = neg ? -x : x;
    *end = (size_t)(nl - buf) + 2;
    return RP_DONE;
}

/* An inline line's words at buf[0..n), unquoted in place as redis-cli
 * and Redis's sdssplitargs() read them: "..." with \n \r \t \b \a \\ \"
 * and \xHH, '...' with \'. */
static int split_inline(rp_parser *p, char *buf, size_t n)
{
    size_t i = 0;
    for (;;) {
        while (i < n && (buf[i] == ' ' || buf[i] == '\t'))
            i++;
        if (i == n)
            return RP_DONE;
        if (p->n_args == RP_MAX_ARGS)
            return fail(p, "ERR Protocol error: too many arguments");
        char quote = buf[i] == '"' || buf[i] == '\'' ? buf[i++] : 0;
        size_t start = i, out = i;
        for (;;) {
            if (i == n) {
                if (quote)
                    return fail(p, "ERR Protocol error: unbalanced quotes in "
                                   "request");
                break;
            }
            char ch = buf[i];
            if (!quote && (ch == ' ' || ch == '\t'))
                break;
            if (quote && ch == quote) {
                i++;
                if (i < n && buf[i] != ' ' && buf[i] != '\t')
                    return fail(p, "ERR Protocol error: unbalanced quotes in "
                                   "request");
                break;
            }
            if (quote == '"' && ch == '\\' && i + 1 < n) {
                char e = buf[i + 1];
                int hi, lo;
                i += 2;
                if (e == 'x' && i + 1 < n && (hi = sv_hex_digit(buf[i])) >= 0 &&
                    (lo = sv_hex_digit(buf[i + 1])) >= 0) {
                    ch = (char)(hi * 16 + lo);
                    i += 2;
                } else {
                    ch = e == 'n'   ? '\n'
                         : e == 'r' ? '\r'
                         : e == 't' ? '\t'
                         : e == 'b' ? '\b'
                         : e == 'a' ? '\a'
                                    : e;
                }
            } else if (quote == '\'' && ch == '\\' && i + 1 < n &&
                       buf[i + 1] == '\'') {
                ch = '\'';
                i += 2;
            } else {
                i++;
            }
            buf[out++] = ch;
        }
        if (push(p, start, out - start) != 0)
            return fail(p, "ERR out of memory");
    }
}

static int parse_inline(rp_parser *p, char *buf, size_t len)
{
    char *nl = memchr(buf + p->pos, '\n', len - p->pos);
    if (nl == NULL) {
        p->pos = len;
        return len > RP_MAX_INLINE
                   ? fail(p, "ERR Protocol error: too big inline request")
                   : RP_MORE;
    }
    size_t n = (size_t)(nl - buf);
    if (n > RP_MAX_INLINE)
        return fail(p, "ERR Protocol error: too big inline request");
    p->pos = n + 1;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    return split_inline(p, buf, n);
}

int rp_parse(rp_parser *p, char *buf, size_t len)
{
    int64_t v;
    size_t end;
    int rc;
    if (p->argc < 0 && !p->is_inline) {
        if (len == 0)
            return RP_MORE;
        if (buf[0] != '*') {
            p->is_inline = 1;
            return parse_inline(p, buf, len);
        }
        rc = header_number(buf, 1, len, &v, &end);
        if (rc == RP_MORE)
            return RP_MORE;
        if (rc == RP_ERROR || v > RP_MAX_ARGS)
            return fail(p, "ERR Protocol error: invalid multibulk length");
        p->pos = end;
        if (v <= 0) /* Redis reads *0 and *-1 as no command */
            return RP_DONE;
        p->argc = v;
    }
    if (p->is_inline)
        return parse_inline(p, buf, len);
    while ((int64_t)p->n_args < p->argc) {
        if (p->bulk < 0) {
            if (p->pos >= len)
                return RP_MORE;
            if (buf[p->pos] != '$')
                return fail(p, "ERR Protocol error: expected '$'");
            rc = header_number(buf, p->pos + 1, len, &v, &end);
            if (rc == RP_MORE)
                return RP_MORE;
            if (rc == RP_ERROR || v < 0 || v > RP_MAX_BULK)
                return fail(p, "ERR Protocol error: invalid bulk length");
            if (end + (size_t)v + 2 > RP_MAX_COMMAND)
                return fail(p, "ERR Protocol error: command too long");
            p->bulk = v;
            p->pos = end;
        }
        if (len - p->pos < (size_t)p->bulk + 2)
            return RP_MORE;
        if (buf[p->pos + (size_t)p->bulk] != '\r' ||
            buf[p->pos + (size_t)p->bulk + 1] != '\n')
            return fail(p, "ERR Protocol error: expected CRLF after bulk");
        if (push(p, p->pos, (size_t)p->bulk) != 0)
            return fail(p, "ERR out of memory");
        p->pos += (size_t)p->bulk + 2;
        p->bulk = -1;
    }
    return RP_DONE;
}
