/*
 * fuzz_resp.c - the Redis protocol front end's untrusted input: request
 * bytes split into reads at fuzzer-chosen points and parsed as
 * src/resp/resp_conn.c does (a command cut by a read kept and parsed on), each
 * command's arguments checked to lie inside it, and CL.THROTTLE and GCRA
 * read from them: what the reader accepts must make a valid limit, and
 * its reply must be built for any decision.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "resp/parse.h"
#include "resp/throttle.h"
#include "runtime/buf.h"

static void run(const rp_parser *p, const char *cmd)
{
    rp_str argv[RP_MAX_ARGS];
    size_t argc = p->n_args;
    for (size_t i = 0; i < argc; i++) {
        if ((size_t)p->args[i].off + p->args[i].len > p->pos)
            abort(); /* an argument outside its command */
        argv[i] = (rp_str){cmd + p->args[i].off, p->args[i].len};
    }
    if (argc == 0)
        return;
    rp_throttle_kind kind;
    if (argv[0].len == 11 && strncasecmp(argv[0].p, "cl.throttle", 11) == 0)
        kind = RP_CELL;
    else if (argv[0].len == 4 && strncasecmp(argv[0].p, "gcra", 4) == 0)
        kind = RP_GCRA;
    else
        return;
    rp_throttle t;
    char err[256];
    if (rp_throttle_read(kind, argv, argc, &t, err, sizeof(err)) != 0) {
        if (strchr(err, '\r') || strchr(err, '\n'))
            abort(); /* an error reply must stay one line */
        return;
    }
    sl_limit *lim;
    if (sl_limit_new(&t.cfg, &lim, err, sizeof(err)) != 0) {
        fprintf(stderr, "accepted arguments made no limit: %s\n", err);
        abort();
    }
    sl_decision d = {.allowed = (int)(t.cost & 1),
                     .limit = t.cfg.burst,
                     .remaining = 0,
                     .reset_after = t.cfg.period,
                     .retry_after = t.cost > t.cfg.burst ? -1 : t.cfg.period};
    sv_buf out = {0};
    rp_throttle_reply(&t, &d, &out);
    sv_buf_release(&out);
    sl_limit_free(lim);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rp_parser p;
    sv_buf in = {0};
    size_t at = 0;
    rp_parser_init(&p);
    while (at < size) {
        /* A read of 1..64 bytes, its size from the byte before it. */
        size_t n = 1 + data[at++] % 64;
        if (n > size - at)
            n = size - at;
        sv_buf_add(&in, data + at, n);
        at += n;
        size_t off = 0;
        int rc = RP_DONE;
        while (off < in.len) {
            rc = rp_parse(&p, in.data + off, in.len - off);
            if (rc != RP_DONE)
                break;
            if (p.pos == 0 || p.pos > in.len - off)
                abort(); /* a command must use bytes, and only its own */
            run(&p, in.data + off);
            off += p.pos;
            rp_parser_next(&p);
        }
        if (rc == RP_ERROR)
            break;
        memmove(in.data, in.data + off, in.len - off);
        in.len -= off;
        if (in.len > RP_MAX_COMMAND + 64)
            abort(); /* a partial command past every cap */
    }
    sv_buf_release(&in);
    rp_parser_release(&p);
    return 0;
}
