/*
 * token_bucket.c - a bucket of B tokens refilled continuously at L per P,
 * starting full; a request takes c tokens or is rejected.
 *
 *   tokens(t) = min(B, tokens + (t - t_last) * L / P);  allowed iff
 *   tokens(t) >= c, then tokens -= c.
 *
 * The state is the time F at which the bucket will be full again, so that
 * tokens(t) = B - (F - t)+ / T with T = P / L (schedule.h).  This is the
 * formula above with the refill folded into F, one word instead of two,
 * and no token count that could drift.
 */
#include "schedule.h"

static int tb_check(const sl_limit *lim, sl__state *stored,
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
    sl__i128 deficit = sl__sched_ahead(lim, st, now); /* (B - tokens) * T */

    sl__decision_init(d, lim);
    d->allowed =
        cost <= burst && deficit <= (sl__i128)(burst - cost) * lim->t_num;
    if (d->allowed && (mode == SL__COMMIT || mode == SL__RECORD)) {
        sl__sched_push(lim, st, now, cost);
        deficit = sl__sched_ahead(lim, st, now);
    } else if (mode == SL__RECORD) {
        deficit = sl__sched_record(lim, st, now, cost);
    }
    sl__sched_report(lim, deficit, d);
    if (!d->allowed)
        d->retry_after =
            cost > burst
                ? -1
                : sl__sched_wait(lim, deficit,
                                 (sl__i128)(burst - cost) * lim->t_num);
    if (mode != SL__PEEK)
        *stored = cur;
    *expires = sl__sched_expires(lim, stored);
    return 0;
}

const sl__algo sl__token_bucket = {
    .id = SL_TOKEN_BUCKET,
    .name = "token_bucket",
    .check = tb_check,
};
