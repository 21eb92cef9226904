/*
 * leaky_bucket.c - the leaking bucket as a queue (the design chapter's
 * FIFO, Shopify's limiter): B units of queued work drained at L per P.
 *
 *   level(t) = max(0, level - (t - t_last) * L / P);  allowed iff
 *   level(t) + c <= B; the request then waits delay = level(t) * P / L,
 *   the time for the work ahead of it to drain, and level += c.
 *
 * The state is the time E at which the queue will be empty, so
 * level(t) = (E - t)+ / T (schedule.h).  A caller that waits `delay`
 * before processing sends its output at exactly the drain rate.  Admission
 * is the token bucket's (level = B - tokens); the delay is what differs.
 */
#include "schedule.h"

static int lb_check(const sl_limit *lim, sl__state *stored,
                    const sl__call *call, sl_decision *d, sl_nanos *expires)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    /* Decided on a copy, written back unless peeking: a state written
     * under other numbers is converted (schedule.h), and a PEEK must not
     * keep even that. */
    sl__state cur = sl__sched_read(lim, stored, now), *st = &cur;
    int64_t burst = lim->cfg.burst;
    sl__i128 queued = sl__sched_ahead(lim, st, now); /* level * T */
    sl__i128 room = (sl__i128)(burst - cost) * lim->t_num;

    sl__decision_init(d, lim);
    d->allowed = cost <= burst && queued <= room;
    if (d->allowed) {
        d->delay = sl__ceil_div128(queued, lim->t_den);
        if (mode == SL__COMMIT || mode == SL__RECORD) {
            sl__sched_push(lim, st, now, cost);
            queued = sl__sched_ahead(lim, st, now);
        }
    } else if (mode == SL__RECORD) {
        /* It was sent without queueing: no delay, the queue is full. */
        queued = sl__sched_record(lim, st, now, cost);
    }
    sl__sched_report(lim, queued, d);
    if (!d->allowed)
        d->retry_after = cost > burst ? -1 : sl__sched_wait(lim, queued, room);
    if (mode != SL__PEEK)
        *stored = cur;
    *expires = sl__sched_expires(lim, stored);
    return 0;
}

const sl__algo sl__leaky_bucket = {
    .id = SL_LEAKY_BUCKET,
    .name = "leaky_bucket",
    .check = lb_check,
};
