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

/* st is one of lim's own states; tagged: lim is an override, whose
 * states carry its tag (schedule.h, SL__SCHED_CHECKS). */
__attribute__((always_inline)) static inline int
lb_decide(const sl_limit *lim, sl__state *st, const sl__call *call,
          sl_decision *d, sl_nanos *expires, const int tagged)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t burst = lim->cfg.burst, tag = tagged ? (int64_t)lim->tag_bits : 0;
    sl__i128 queued = sl__sched_ahead(lim, st, now, tag); /* level * T */
    sl__i128 room = (sl__i128)(burst - cost) * lim->t_num;

    sl__decision_init(d, lim);
    d->allowed = cost <= burst && queued <= room;
    if (d->allowed) {
        d->delay = sl__ceil_div128(queued, lim->t_den);
        if (mode == SL__COMMIT || mode == SL__RECORD) {
            sl__sched_push(lim, st, now, cost, tag);
            queued = sl__sched_ahead(lim, st, now, tag);
        }
    } else if (mode == SL__RECORD) {
        /* It was sent without queueing: no delay, the queue is full. */
        queued = sl__sched_record(lim, st, now, cost, tag);
    }
    sl__sched_report(lim, queued, d);
    if (!d->allowed)
        d->retry_after = cost > burst ? -1 : sl__sched_wait(lim, queued, room);
    *expires = sl__sched_expires(st, tagged);
    return 0;
}

SL__SCHED_CHECKS(lb_decide, 0)

const sl__algo sl__leaky_bucket = {
    .id = SL_LEAKY_BUCKET,
    .name = "leaky_bucket",
    .check = lb_decide_own,
};

const sl__algo sl__leaky_bucket_override = {
    .id = SL_LEAKY_BUCKET,
    .name = "leaky_bucket",
    .check = lb_decide_override,
};
