/*
 * parse.h - Redis protocol requests, parsed incrementally: a command's
 * arguments from a multibulk (`*2\r\n$4\r\nPING\r\n...`) or an inline line
 * (`PING hello\r\n`), with caps on every length a client chooses.  No I/O:
 * the caller hands it the bytes it has and gets a command, a wish for more,
 * or an error (the connection is then closed, as Redis does).
 */
#ifndef RP_PARSE_H
#define RP_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* The caps (docs/resp.md, "Limits").  A command that exceeds one is a
 * protocol error: the error reply, then the connection closes. */
#define RP_MAX_ARGS 1024            /* arguments of one command */
#define RP_MAX_BULK (64 * 1024)     /* bytes of one argument */
#define RP_MAX_INLINE (64 * 1024)   /* bytes of one inline line */
#define RP_MAX_COMMAND (256 * 1024) /* bytes of one whole command */

enum { RP_DONE, RP_MORE, RP_ERROR };

/* One argument: its bytes at buf + off (buf as rp_parse() was given it). */
typedef struct rp_arg {
    uint32_t off, len;
} rp_arg;

/*
 * The parse of the command at the start of a buffer.  Between calls that
 * return RP_MORE the buffer may move and grow (it is the connection's),
 * but the bytes already examined must stay as they were: state is kept
 * as offsets from the command's start.
 */
typedef struct rp_parser {
    size_t pos;    /* bytes of the command examined */
    int64_t argc;  /* multibulk: the count; -1: not known yet */
    int64_t bulk;  /* the next argument's length; -1: its header unread */
    int is_inline; /* an inline command */
    rp_arg *args;  /* argc of them once RP_DONE; owned, kept for reuse */
    size_t n_args, cap_args;
    const char *err; /* RP_ERROR: the reply's text (static) */
} rp_parser;

void rp_parser_init(rp_parser *p);
void rp_parser_release(rp_parser *p);

/*
 * Goes on parsing the command that starts at buf[0], len bytes being
 * available.  RP_DONE: the command is p->args[0..n_args) and took p->pos
 * bytes (n_args may be 0: an empty inline line, which Redis ignores);
 * call rp_parser_next() before the next one.  RP_MORE: the bytes end
 * inside it.  RP_ERROR: p->err says why.  An inline command's arguments
 * are unquoted in place, so buf is written to.
 */
int rp_parse(rp_parser *p, char *buf, size_t len);
void rp_parser_next(rp_parser *p);

#endif
