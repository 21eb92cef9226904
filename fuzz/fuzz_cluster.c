/*
 * fuzz_cluster.c - libFuzzer target for what a Redis node sends that
 * sluice parses (src/redis/slots.c, reply.c, call.c): MOVED and ASK error
 * strings, alone and as error replies to classify, CLUSTER SLOTS replies,
 * the replies to a decision call, a Sentinel's answer and a ROLE reply
 * (src/redis/sentinel.c, handshake.c), and key names hashed to slots; and
 * what a client's key becomes as a key name (src/redis/call.c).
 *
 * The first byte picks the parser; the rest is its input.  A CLUSTER
 * SLOTS reply or a decision call's reply is fed to hiredis's own reader
 * first (as the store and the daemon receive it), so the parser sees every
 * shape of reply a hostile node could send: wrong types, short arrays,
 * huge ranges, integers no decision reports.
 *
 * hiredis 0.14's reader allocates the element array a multi-bulk header
 * announces ("*999999999") before any element arrives (hiredis 1.0 added
 * a cap, maxelements); that is the client library's, not this parser's,
 * so inputs announcing more than MAX_ANNOUNCED elements are skipped.
 *
 * Checked besides crashes: a slot is always in [0, 16384); a parsed
 * redirection has a slot in range, a port in 1..65535 and a NUL-
 * terminated host; a parsed map has at least one node, and every slot it
 * maps names a node whose port is valid; a decision read from a reply,
 * each item's and the call's, is one a store could make (allowed 0 or 1,
 * the item's limit, 0 <= remaining <= 2^40, reset and delay >= 0, retry
 * >= -1, 0 when allowed for a bucket's one-integer reply); a client's
 * key, whatever its bytes, is the whole hash tag of its key name: the
 * first '}' after the first '{' is the name's last byte (no value can
 * choose its slot).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/redis_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ANNOUNCED 100000

/* Does any "*N" in the input announce more than MAX_ANNOUNCED elements? */
static int announces_too_many(const char *in, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        long n = 0;
        if (in[i] != '*')
            continue;
        for (size_t j = i + 1; j < len && in[j] >= '0' && in[j] <= '9'; j++)
            if ((n = n * 10 + (in[j] - '0')) > MAX_ANNOUNCED)
                return 1;
    }
    return 0;
}

static void check_map(const redisReply *reply)
{
    sl__redis_slot_map *m;
    if (sl__redis_slot_map_new(reply, "default", &m) != 0)
        return;
    size_t n = sl__redis_slot_map_nodes(m);
    if (n == 0 || n > SL__REDIS_MAX_NODES)
        abort();
    for (int s = 0; s < SL__REDIS_SLOTS; s++) {
        int node = sl__redis_slot_map_node(m, s), port;
        if (node < -1 || node >= (int)n)
            abort();
        if (node >= 0) {
            const char *host = sl__redis_slot_map_host(m, (size_t)node, &port);
            if (host == NULL || port < 1 || port > 65535)
                abort();
        }
    }
    sl__redis_slot_map_free(m);
}

/* The key name of a one-item call for key: its tag must be all of it. */
static void check_key_name(const char *key, size_t len)
{
    static sl_limit *lim;
    const sl_limit_config cfg = {
        .algorithm = SL_FIXED_WINDOW, .limit = 10, .period = SL_NS_PER_SEC};
    const sl__redis_keyspace ks = {.prefix = "sl:",
                                   .use_server_time = 1,
                                   .cluster = 1,
                                   .max_key_len = SIZE_MAX};
    sl_check_item it = {NULL, key, len};
    int64_t cost = 1;
    const char *const *argv;
    const size_t *lens;
    sl__redis_call *c;
    if (lim == NULL && sl_limit_new(&cfg, &lim, NULL, 0) != 0)
        return;
    it.limit = lim;
    if (sl__redis_call_new(&ks, &it, &cost, 1, 0, 0, NULL, &c, NULL, 0) != 0)
        return;
    sl__redis_call_part_argv(c, 0, &argv, &lens);
    const char *name = argv[3], *open = memchr(name, '{', lens[3]);
    size_t from = open ? (size_t)(open - name) + 1 : lens[3];
    const char *close = memchr(name + from, '}', lens[3] - from);
    if (open == NULL || close != name + lens[3] - 1)
        abort();
    sl__redis_call_free(c);
}

static void check_decision(const sl_decision *d, int64_t limit)
{
    if ((d->allowed != 0 && d->allowed != 1) || d->limit != limit ||
        d->remaining < 0 || d->remaining > SL_MAX_COUNT || d->reset_after < 0 ||
        d->retry_after < -1 || d->delay < 0)
        abort();
}

/* reply read as the answer to a one-item token_bucket call (which takes
 * fast.lua's one integer too) and to a three-item call. */
static void check_decision_reply(const redisReply *reply)
{
    static sl_limit *lim[3];
    static const sl_limit_config cfg[3] = {
        {.algorithm = SL_TOKEN_BUCKET, .limit = 10, .period = SL_NS_PER_SEC},
        {.algorithm = SL_FIXED_WINDOW, .limit = 7, .period = SL_NS_PER_SEC},
        {.algorithm = SL_GCRA, .limit = 3, .period = SL_NS_PER_SEC},
    };
    const sl__redis_keyspace ks = {
        .prefix = "sl:", .use_server_time = 1, .max_key_len = SIZE_MAX};
    for (int i = 0; i < 3; i++)
        if (lim[i] == NULL && sl_limit_new(&cfg[i], &lim[i], NULL, 0) != 0)
            return;
    sl_check_item items[3] = {
        {lim[0], "a", 1}, {lim[1], "b", 1}, {lim[2], "c", 1}};
    int64_t costs[3] = {1, 2, 1};
    for (size_t n = 1; n <= 3; n += 2) {
        sl__redis_call *c;
        sl_decision each[3], overall;
        char err[128];
        if (sl__redis_call_new(&ks, items, costs, n, 0, 0, NULL, &c, err,
                               sizeof(err)) != 0)
            return;
        if (sl__redis_call_read(c, reply, each, &overall, err, sizeof(err)) ==
            0) {
            for (size_t i = 0; i < n; i++)
                check_decision(&each[i], cfg[i].limit);
            check_decision(&overall, overall.limit);
            if (n == 1 && reply->type == REDIS_REPLY_INTEGER &&
                each[0].allowed && each[0].retry_after != 0)
                abort();
        }
        sl__redis_call_free(c);
    }
}

/* reply read as a Sentinel's answer to get-master-addr-by-name, and as
 * a server's to ROLE: an address is a NUL-terminated host that fits and
 * a port in 1..65535. */
static void check_sentinel(const redisReply *reply)
{
    const sl__redis_endpoint ep = {.master_name = "mymaster"};
    char host[16], err[128];
    int port = 0;
    if (sl__redis_sentinel_master(&ep, reply, host, sizeof(host), &port, err,
                                  sizeof(err)) == 0 &&
        (strnlen(host, sizeof(host)) == sizeof(host) || host[0] == '\0' ||
         port < 1 || port > 65535))
        abort();
    (void)sl__redis_handshake_check(SL__REDIS_CMD_ROLE, reply, NULL, err,
                                    sizeof(err));
    (void)sl__redis_reply_kind(reply, NULL);
}

/* The input through hiredis's reader, as a node's reply arrives; a
 * whole reply goes to check. */
static void read_reply(const char *in, size_t len,
                       void (*check)(const redisReply *))
{
    redisReader *r;
    void *reply = NULL;
    if (announces_too_many(in, len) || (r = redisReaderCreate()) == NULL)
        return;
    if (redisReaderFeed(r, in, len) == REDIS_OK &&
        redisReaderGetReply(r, &reply) == REDIS_OK && reply != NULL) {
        check(reply);
        freeReplyObject(reply);
    }
    redisReaderFree(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 5) {
    case 0: {
        sl__redis_redirect rd;
        int parsed = sl__redis_redirect_parse(in, len, &rd) == 0;
        if (parsed &&
            (rd.slot < 0 || rd.slot >= SL__REDIS_SLOTS || rd.port < 1 ||
             rd.port > 65535 || strlen(rd.host) >= sizeof(rd.host)))
            abort();
        /* The same bytes as an error reply: a redirection exactly when
         * they parse as one. */
        redisReply err = {.type = REDIS_REPLY_ERROR, .len = len};
        if ((err.str = malloc(len + 1)) == NULL)
            return 0;
        memcpy(err.str, in, len);
        err.str[len] = '\0';
        int kind = sl__redis_reply_kind(&err, &rd);
        free(err.str);
        if ((kind == SL__REDIS_REPLY_MOVED || kind == SL__REDIS_REPLY_ASK) !=
            parsed)
            abort();
        break;
    }
    case 1:
        read_reply(in, len, check_map);
        break;
    case 3:
        read_reply(in, len, check_decision_reply);
        break;
    case 4:
        read_reply(in, len, check_sentinel);
        break;
    default: {
        int slot = sl__redis_key_slot(in, len);
        if (slot < 0 || slot >= SL__REDIS_SLOTS)
            abort();
        check_key_name(in, len);
    }
    }
    return 0;
}
