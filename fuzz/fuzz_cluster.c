/*
 * fuzz_cluster.c - libFuzzer target for what a Redis Cluster node sends
 * that sluice parses (src/redis/slots.c, reply.c): MOVED and ASK error
 * strings, alone and as error replies to classify, CLUSTER SLOTS replies,
 * and key names hashed to slots.
 *
 * The first byte picks the parser; the rest is its input.  A CLUSTER
 * SLOTS reply is fed to hiredis's own reader first (as the store and the
 * daemon receive it), so the slot map parser sees every shape of reply a
 * hostile node could send: wrong types, short arrays, huge ranges.
 *
 * hiredis 0.14's reader allocates the element array a multi-bulk header
 * announces ("*999999999") before any element arrives (hiredis 1.0 added
 * a cap, maxelements); that is the client library's, not this parser's,
 * so inputs announcing more than MAX_ANNOUNCED elements are skipped.
 *
 * Checked besides crashes: a slot is always in [0, 16384); a parsed
 * redirection has a slot in range, a port in 1..65535 and a NUL-
 * terminated host; a parsed map has at least one node, and every slot it
 * maps names a node whose port is valid.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 3) {
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
    case 1: {
        redisReader *r;
        void *reply = NULL;
        if (announces_too_many(in, len) || (r = redisReaderCreate()) == NULL)
            return 0;
        if (redisReaderFeed(r, in, len) == REDIS_OK &&
            redisReaderGetReply(r, &reply) == REDIS_OK && reply != NULL) {
            check_map(reply);
            freeReplyObject(reply);
        }
        redisReaderFree(r);
        break;
    }
    default: {
        int slot = sl__redis_key_slot(in, len);
        if (slot < 0 || slot >= SL__REDIS_SLOTS)
            abort();
    }
    }
    return 0;
}
