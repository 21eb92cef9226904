/*
 * redis_state.h - what the parts of a thread's Redis share: the state of
 * its connection (struct sd_redis) and the calls they make in each other.
 * redis_async.c keeps the connection and its breaker, redis_async_send.c
 * sends the calls and reads their replies, redis_async_deadline.c times
 * the waits; each calls only the ones after it, and reaches the
 * connection's reactions through the struct.  Only those three include
 * it; the rest of the layer sees the sd_redis_* functions of layer.h.
 */
#ifndef SD_REDIS_STATE_H
#define SD_REDIS_STATE_H

#include "decision/layer.h"

/* --redis-timeout auto: AUTO_K times the p99 of the thread's recent
 * round trips, within [AUTO_FLOOR_MS, AUTO_CAP_MS], plus AUTO_ITEM_US per
 * item of the request (a 64-descriptor check runs 64 times the script's
 * work).  The floor keeps a scheduling hiccup of a loaded 2-core machine
 * (a few ms) from failing calls that Redis answers; the factor lets a
 * Redis that is slow but answering go on deciding; the cap bounds what a
 * request may wait on a Redis that does not answer.  Round trips are
 * counted in LAT_BUCKETS power-of-two buckets of ms, halved every
 * LAT_DECAY samples so that the p99 follows the last few thousand. */
#define AUTO_K 4
#define AUTO_FLOOR_MS 50
#define AUTO_CAP_MS 1000
#define AUTO_ITEM_US 100
#define LAT_BUCKETS 12
#define LAT_DECAY 2048

struct sd_redis {
    sd_thread *t;
    redisAsyncContext *ac; /* the one connection; with a cluster, the probe */
    sd_cluster *cluster;   /* redis-cluster://: the links; else NULL */
    /* redis-sentinel://: the question to the Sentinels in flight, the one
     * to ask first (the last that answered), and the master they named. */
    sd_sentinel *sentinel;
    size_t sentinel_first;
    char master[256];
    sd_breaker br;
    char sha[41];       /* the script's SHA1, from the probe's SCRIPT LOAD */
    int fcall;          /* the server took the library: calls are FCALLs */
    uv_timer_t retry;   /* DOWN: reconnect; CONNECTING: probe timeout */
    uv_timer_t timeout; /* the oldest wait's deadline */
    sd_wait_queue waits;
    int stopping, handles;
    char *cmd; /* the command being sent, in RESP */
    size_t cmd_cap;
    /* One connection (not a cluster): script calls written to it and not
     * yet answered, and the parts held meanwhile for the next batch. */
    int in_flight;
    sd_held held;
    sd_held later;          /* parts answered TRYAGAIN, to be sent again */
    uv_timer_t later_timer; /* the earliest of later's resend_at */
    int moved_said; /* a plain store's server answered MOVED: said once */
    /* Replies seen: when the last came (any reply, on any link: the
     * server is alive), and the round trips' histogram (bucket b: under
     * 2^b ms) for the automatic timeout. */
    uint64_t last_reply_ms;
    uint64_t last_silence_ms; /* when a timeout last counted (breaker) */
    uint32_t lat[LAT_BUCKETS], lat_n;
    /* The connection's own reactions (redis_async.c), reached from the
     * parts below it — sending and deadlines — without their calling up
     * into it: open the breaker (drop the connection, schedule the next
     * attempt), and free the connection and its timers (r goes when they
     * are closed). */
    void (*fail_conn)(sd_redis *r, const char *why);
    void (*free_conn)(sd_redis *r);
};

/* A reply came for what was sent at sent_ms.  Inline: it runs for every
 * reply, on the reply path of redis_async_send.c. */
static inline void sd__redis_saw_reply(sd_redis *r, uint64_t sent_ms)
{
    uint64_t now = uv_now(r->t->loop), rtt = now - sent_ms;
    int b = 0;
    while (b < LAT_BUCKETS - 1 && rtt >= (UINT64_C(1) << b))
        b++;
    r->last_reply_ms = now;
    r->lat[b]++;
    if (++r->lat_n >= LAT_DECAY) {
        r->lat_n = 0;
        for (int i = 0; i < LAT_BUCKETS; i++) {
            r->lat[i] /= 2;
            r->lat_n += r->lat[i];
        }
    }
}

/* A stopping thread's Redis goes once its last wait has ended. */
static inline void sd__redis_maybe_teardown(sd_redis *r)
{
    if (r->stopping && r->waits.head == NULL && r->br.state != SD_STOPPED)
        r->free_conn(r);
}

/* ---- redis_async_send.c ---- */

/* Sends the held parts while fewer than SD_MAX_IN_FLIGHT script calls are
 * out.  Only from outside any request (a part that cannot be sent fails
 * here, which may answer its request). */
void sd__redis_send_held(sd_redis *r);
/* Every held part, or every part waiting out a TRYAGAIN, fails (the
 * connection is gone): their checks are decided by the policy.  Only from
 * outside any request. */
void sd__redis_fail_held(sd_redis *r);
void sd__redis_fail_later(sd_redis *r);

/* ---- redis_async_deadline.c ---- */

/* How long a wait of `items` items may take: --redis-timeout, or the
 * automatic timeout (AUTO_K above). */
uint64_t sd__redis_timeout_for(const sd_redis *r, size_t items);
/* The timer follows the earliest deadline of the queued waits. */
void sd__redis_arm_timeout(sd_redis *r);
/* Every call of the wait has its reply or failed (or the deadline
 * passed): engine.c answers its owner. */
void sd__redis_round_end(sd_wait *w);

#endif
