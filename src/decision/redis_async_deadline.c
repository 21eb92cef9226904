/*
 * redis_async_deadline.c - how long a thread's Redis may make a wait wait,
 * and what happens when that time is up: the automatic timeout from the
 * round trips seen (redis_state.h, AUTO_K), the timer on the earliest
 * deadline, the calls that miss it failed ("timeout") and counted against
 * the breaker while the server is silent, and the end of a wait's round.
 * Apart from sending because it is about time, not bytes: it runs once a
 * wait, and the policy is one place to read.
 */
#include "decision/redis_state.h"

uint64_t sd__redis_timeout_for(const sd_redis *r, size_t items)
{
    uint64_t fixed = r->t->e->cfg.redis_timeout_ms, p99 = 1, seen = 0;
    if (fixed != 0)
        return fixed;
    for (int b = 0; b < LAT_BUCKETS; b++) {
        seen += r->lat[b];
        p99 = UINT64_C(1) << b;
        if (seen * 100 >= (uint64_t)r->lat_n * 99)
            break;
    }
    uint64_t t = AUTO_K * p99;
    t = t < AUTO_FLOOR_MS ? AUTO_FLOOR_MS : t > AUTO_CAP_MS ? AUTO_CAP_MS : t;
    return t + (items * AUTO_ITEM_US + 999) / 1000;
}

void sd__redis_round_end(sd_wait *w)
{
    sd_redis *r = w->t->redis;
    sd_wait_dequeue(&r->waits, w);
    if (w->owner != NULL) {
        /* The owner's reference ends with its answer. */
        w->round_done(w);
        w->owner = NULL;
        sd_wait_unref(w);
    }
    sd__redis_arm_timeout(r);
    sd__redis_maybe_teardown(r);
}

static void timeout_cb(uv_timer_t *timer)
{
    sd_redis *r = timer->data;
    uint64_t now = uv_now(r->t->loop);
    int any_timed_out = 0;
    while (r->waits.head != NULL && r->waits.head->deadline <= now) {
        sd_wait *w = r->waits.head;
        int timed_out = 0;
        for (size_t i = 0; i < w->n_calls; i++) {
            sd_call *c = &w->calls[i];
            if (c->sent && !c->done) {
                sd_call_fail(c, SD_FAIL_TIMEOUT);
                timed_out = 1;
            }
        }
        w->awaiting = 0;
        /* A timeout counts against the breaker only when the server has
         * said nothing since the wait was sent, and at most once per
         * timeout: a slow Redis that answers (a large request, a busy
         * moment) is not a dead one and keeps deciding, and the waits
         * that one stall times out together are one failure, so the
         * breaker opens after --redis-breaker whole timeouts of silence
         * (docs/server.md, "Circuit breaker"). */
        if (timed_out && r->last_reply_ms < w->sent_ms &&
            now >= r->last_silence_ms + (w->deadline - w->sent_ms)) {
            r->last_silence_ms = now;
            if (sd_breaker_failure(&r->br))
                r->fail_conn(r, "timeouts");
        }
        any_timed_out |= timed_out;
        sd__redis_round_end(w); /* dequeues it */
    }
    if (any_timed_out && r->cluster != NULL && r->br.state == SD_UP)
        sd_cluster_timed_out(r->cluster);
    sd__redis_arm_timeout(r);
}

void sd__redis_arm_timeout(sd_redis *r)
{
    if (r->br.state == SD_STOPPED)
        return;
    if (r->waits.head == NULL) {
        uv_timer_stop(&r->timeout);
        return;
    }
    uint64_t now = uv_now(r->t->loop);
    uint64_t due = r->waits.head->deadline;
    uv_timer_start(&r->timeout, timeout_cb, due > now ? due - now : 0, 0);
}

void sd_redis_forget(sd_thread *t, sd_wait *w)
{
    sd_redis *r = t->redis;
    sd_wait_dequeue(&r->waits, w);
    sd__redis_arm_timeout(r);
    sd__redis_maybe_teardown(r);
}
