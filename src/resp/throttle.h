/*
 * throttle.h - redis-cell's CL.THROTTLE and Redis's GCRA command: their
 * arguments read into one of sluice's limits, and sluice's decision
 * written as their five-integer reply.  No I/O: the connection decides.
 */
#ifndef RP_THROTTLE_H
#define RP_THROTTLE_H

#include <stddef.h>

#include "runtime/buf.h"
#include "sluice.h"

/* A client's argument: bytes and length. */
typedef struct rp_str {
    const char *p;
    size_t len;
} rp_str;

typedef enum rp_throttle_kind {
    RP_CELL, /* CL.THROTTLE key max_burst count period [quantity] */
    RP_GCRA  /* GCRA key max_burst tokens_per_period period [TOKENS n] */
} rp_throttle_kind;

/* A command read: the limit it names (a GCRA with capacity max_burst + 1
 * and emission interval T, as its command defines T) and its cost. */
typedef struct rp_throttle {
    rp_throttle_kind kind;
    sl_limit_config cfg;
    int64_t cost;
} rp_throttle;

/* Reads argv[0..argc) (argv[0] the command's name) into t: 0, or -1 with
 * the error reply's text in err (as its command words it). */
int rp_throttle_read(rp_throttle_kind kind, const rp_str *argv, size_t argc,
                     rp_throttle *t, char *err, size_t errlen);

/* The command's reply to decision d of t: [limited, limit, remaining,
 * retry_after, reset_after], times in seconds rounded up as its command
 * rounds them (docs/resp.md). */
void rp_throttle_reply(const rp_throttle *t, const sl_decision *d, sv_buf *out);

#endif
