/*
 * reply.h - Redis protocol (RESP2) replies appended to a connection's
 * output buffer.
 */
#ifndef RP_REPLY_H
#define RP_REPLY_H

#include "runtime/buf.h"

static inline void rp_add_int(sv_buf *out, long long v)
{
    sv_buf_add(out, ":", 1);
    sv_buf_add_int(out, v);
    sv_buf_add(out, "\r\n", 2);
}

static inline void rp_add_array(sv_buf *out, long long n)
{
    sv_buf_add(out, "*", 1);
    sv_buf_add_int(out, n);
    sv_buf_add(out, "\r\n", 2);
}

static inline void rp_add_bulk(sv_buf *out, const char *s, size_t len)
{
    sv_buf_add(out, "$", 1);
    sv_buf_add_uint(out, len);
    sv_buf_add(out, "\r\n", 2);
    sv_buf_add(out, s, len);
    sv_buf_add(out, "\r\n", 2);
}

/* A status reply, "+OK": s must hold no CR or LF. */
static inline void rp_add_status(sv_buf *out, const char *s)
{
    sv_buf_add(out, "+", 1);
    sv_buf_addstr(out, s);
    sv_buf_add(out, "\r\n", 2);
}

/* An error reply: "ERR syntax error" is sent as "-ERR syntax error". */
static inline void rp_add_error(sv_buf *out, const char *text)
{
    sv_buf_add(out, "-", 1);
    sv_buf_addstr(out, text);
    sv_buf_add(out, "\r\n", 2);
}

/* A client's bytes inside an error reply: at most 128 of them, control
 * bytes as '?', so that the reply stays one line. */
void rp_add_quoted(sv_buf *out, const char *arg, size_t len);

/* An error reply naming a client's bytes: before, arg quoted, after. */
void rp_add_error_arg(sv_buf *out, const char *before, const char *arg,
                      size_t len, const char *after);

#endif
