/*
 * redis_batch.c - several calls as one script call (main.lua's 'B'
 * mode), for a caller with many calls waiting at once.  A batch is made
 * of the calls' own commands, rearranged: every call's keys go first (a
 * script's keys must all be named before its other arguments), then 'B',
 * the number of calls, the calls' distinct (now_s, now_n, head) triples
 * once each, and which triple each call has.  So a call in a batch is
 * the very call that would have been sent alone, and the script decides
 * it by the same code; what calls share (mostly all of it: one limit,
 * cost 1, the server's clock) is sent and made into Lua strings once per
 * batch instead of once per call (docs/benchmarks.md, "Redis's
 * instructions per decision").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "redis/redis_proto.h"

enum {
    /* FCALL name (or EVALSHA sha) numkeys 'B' count triples map */
    HEAD_ARGS = 7,
    TRIPLE = 3, /* a call's now_s, now_n and head */
};

/* A call's command: FCALL name (or EVALSHA sha) numkeys key... now_s
 * now_n head; its numkeys. */
typedef struct cmd {
    int argc;
    const char *const *argv;
    const size_t *lens;
    int keys;
} cmd;

static int get_cmd(const sl__redis_call *call, cmd *c)
{
    if (call == NULL || sl__redis_call_parts(call) != 1)
        return -1;
    c->argc = sl__redis_call_part_argv(call, 0, &c->argv, &c->lens);
    if (sl__parse_int(c->argv[2], c->lens[2], 1, SL_MAX_ITEMS, &c->keys) != 0 ||
        c->argc != 3 + c->keys + TRIPLE)
        return -1;
    return 0;
}

/* Whether two calls' triples are the same bytes. */
static int same_triple(const cmd *a, const cmd *b)
{
    for (int j = 0; j < TRIPLE; j++) {
        size_t la = a->lens[3 + a->keys + j];
        if (la != b->lens[3 + b->keys + j] ||
            memcmp(a->argv[3 + a->keys + j], b->argv[3 + b->keys + j], la) != 0)
            return 0;
    }
    return 1;
}

static void put(const char **argv, size_t *lens, size_t *at, const char *s,
                size_t len)
{
    argv[*at] = s;
    lens[(*at)++] = len;
}

int sl__redis_batch_format(sl__redis_call *const *calls, size_t n,
                           const char *sha, char **out, size_t *out_len)
{
    const char *script, *head;
    char total_keys[24], count[24], ntriples[24];
    /* map[i]: the index of call i's triple; first[t]: a call of triple t */
    unsigned char map[SL__REDIS_MAX_BATCH];
    size_t first[SL__REDIS_MAX_BATCH], triples = 0;
    size_t args = HEAD_ARGS, keys = 0, k = 0, a, script_len;
    const char **argv;
    size_t *lens;
    cmd c, d;

    if (n == 0 || n > SL__REDIS_MAX_BATCH || out == NULL || out_len == NULL ||
        !sl__redis_script_ref_ok(sha))
        return SL_EINVAL;
    head = sl__redis_script_command(sha, &script, &script_len);
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        if (get_cmd(calls[i], &c) != 0)
            return SL_EINVAL;
        keys += (size_t)c.keys;
        /* Mostly one triple: the search ends at the first. */
        while (t < triples &&
               (get_cmd(calls[first[t]], &d), !same_triple(&c, &d)))
            t++;
        if (t == triples) {
            first[triples++] = i;
            args += TRIPLE;
        }
        map[i] = (unsigned char)t;
    }
    args += keys;
    if ((argv = malloc(args * (sizeof(*argv) + sizeof(*lens)))) == NULL)
        return SL_ENOMEM;
    lens = (size_t *)(argv + args);
    snprintf(total_keys, sizeof(total_keys), "%zu", keys);
    snprintf(count, sizeof(count), "%zu", n);
    snprintf(ntriples, sizeof(ntriples), "%zu", triples);
    /* The keys go at k, from 3; the other arguments at a, after them. */
    put(argv, lens, &k, head, strlen(head));
    put(argv, lens, &k, script, script_len);
    put(argv, lens, &k, total_keys, strlen(total_keys));
    for (size_t i = 0; i < n; i++) {
        get_cmd(calls[i], &c);
        for (int j = 3; j < 3 + c.keys; j++)
            put(argv, lens, &k, c.argv[j], c.lens[j]);
    }
    a = k;
    put(argv, lens, &a, "B", 1);
    put(argv, lens, &a, count, strlen(count));
    put(argv, lens, &a, ntriples, strlen(ntriples));
    for (size_t t = 0; t < triples; t++) {
        get_cmd(calls[first[t]], &c);
        for (int j = 0; j < TRIPLE; j++)
            put(argv, lens, &a, c.argv[3 + c.keys + j], c.lens[3 + c.keys + j]);
    }
    /* One triple: no map (the script needs none). */
    put(argv, lens, &a, (const char *)map, triples == 1 ? 0 : n);
    *out_len = sl__redis_resp_len((int)args, lens);
    if ((*out = malloc(*out_len)) != NULL)
        sl__redis_resp_write(*out, (int)args, argv, lens);
    free(argv);
    return *out != NULL ? 0 : SL_ENOMEM;
}

const redisReply *sl__redis_batch_reply(const redisReply *reply, size_t n,
                                        size_t i)
{
    if (reply != NULL && reply->type == REDIS_REPLY_ARRAY &&
        reply->elements == n && i < n)
        return reply->element[i];
    return reply; /* an error (NOSCRIPT...), or a shape read will refuse */
}
