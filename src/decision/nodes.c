/*
 * nodes.c - `--nodes auto`: how many sluice serve daemons share the Redis,
 * counted live, for the local failure policy's divisor (local.c).
 *
 * While its connection is up, thread 0 of every node runs one small
 * script each second on it: it stamps the node's id with Redis's clock in
 * a sorted set, drops the ids not stamped within NODE_TTL_MS, and returns
 * how many are left.  The answer is kept (sd_engine.nodes_live) and is
 * what the fallback divides by when Redis fails: the count seen last
 * before the outage, at least 1.  Redis's clock, not the nodes', so a
 * node whose clock is off is neither dropped early nor kept late.  A
 * stopped node is simply no longer stamped and leaves the count within
 * NODE_TTL_MS; a static --nodes N sends nothing.
 *
 * The count rises at once but falls only when the lower count has held
 * for NODE_TTL_MS more: a Redis restarted without the set (or with it
 * expired while down) first answers 1, and a node that believed itself
 * alone would give its fallback the whole limit, past the overshoot
 * bound (docs/server.md, "Overshoot"); too many nodes only makes the
 * local limits stricter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "decision/layer.h"

#define BEAT_MS 1000
#define NODE_TTL_MS 3000
/* Beside the store's keys (prefix sl:, then 16 hex digits): no clash. */
#define NODES_KEY "sl:nodes"

static const char beat_script[] =
    "local t = redis.call('TIME')\n"
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
    "redis.call('ZADD', KEYS[1], now, ARGV[1])\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return redis.call('ZCARD', KEYS[1])\n";

/* The thread outlives every callback: hiredis calls them all, with
 * NULL, before the connection is freed, within the loop. */
static void beat_reply_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    const redisReply *r = reply;
    sd_thread *th = priv;
    (void)ac;
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < 1)
        return;
    sd_engine *e = th->e;
    int count = r->integer > 10000 ? 10000 : (int)r->integer;
    uint64_t now = uv_now(th->loop);
    if (count < atomic_load_explicit(&e->nodes_live, memory_order_relaxed)) {
        if (th->fewer_since == 0)
            th->fewer_since = now;
        if (now - th->fewer_since < NODE_TTL_MS)
            return; /* not yet: the higher count stands */
    }
    th->fewer_since = 0;
    atomic_store_explicit(&e->nodes_live, count, memory_order_relaxed);
}

static void beat_cb(uv_timer_t *t)
{
    sd_thread *th = t->data;
    redisAsyncContext *ac = sd_redis_context(th, NODES_KEY);
    char ttl[16];
    if (ac == NULL)
        return; /* down: the last count stands */
    snprintf(ttl, sizeof(ttl), "%d", NODE_TTL_MS);
    const char *argv[6] = {"EVAL",    beat_script,    "1",
                           NODES_KEY, th->e->node_id, ttl};
    redisAsyncCommandArgv(ac, beat_reply_cb, th, 6, argv, NULL);
}

int sd_engine_nodes(const sd_engine *e)
{
    if (e->cfg.nodes != SD_NODES_AUTO)
        return e->cfg.nodes;
    return atomic_load_explicit(&e->nodes_live, memory_order_relaxed);
}

void sd_nodes_start(sd_thread *t)
{
    sd_engine *e = t->e;
    if (t->index != 0 || e->cfg.nodes != SD_NODES_AUTO)
        return;
    /* hostname:pid:random, so that ids are unique across hosts and
     * restarts and still say which process they are. */
    char host[64] = "";
    uint64_t rnd = 0;
    gethostname(host, sizeof(host) - 1);
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = (uint64_t)uv_hrtime();
    snprintf(e->node_id, sizeof(e->node_id), "%s:%ld:%016llx", host,
             (long)getpid(), (unsigned long long)rnd);
    uv_timer_init(t->loop, &t->beat);
    t->beat.data = t;
    uv_timer_start(&t->beat, beat_cb, BEAT_MS / 10, BEAT_MS);
    t->beating = 1;
}

void sd_nodes_stop(sd_thread *t)
{
    if (t->beating) {
        t->beating = 0;
        uv_close((uv_handle_t *)&t->beat, NULL);
    }
}
