/*
 * reply.c - error replies that quote what a client sent (reply.h).
 */
#include "resp/resp_reply.h"

#define QUOTED_MAX 128

void rp_add_quoted(sv_buf *out, const char *arg, size_t len)
{
    char quoted[QUOTED_MAX];
    size_t n = len < QUOTED_MAX ? len : QUOTED_MAX;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)arg[i];
        quoted[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    sv_buf_add(out, quoted, n);
}

void rp_add_error_arg(sv_buf *out, const char *before, const char *arg,
                      size_t len, const char *after)
{
    sv_buf_add(out, "-", 1);
    sv_buf_addstr(out, before);
    rp_add_quoted(out, arg, len);
    sv_buf_addstr(out, after);
    sv_buf_add(out, "\r\n", 2);
}
