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

/* st is one of lim's own states; tagged: lim is an override, whose
 * states carry its tag (schedule.h, SL__SCHED_CHECKS). */
__attribute__((always_inline)) static inline int
tb_decide(const sl_limit *lim, sl__state *st, const sl__call *call,
          sl_decision *d, sl_nanos *expires, const int tagged)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t burst = lim->cfg.burst, tag = tagged ? (int64_t)lim->tag_bits : 0;
    sl__i128 deficit =
        sl__sched_ahead(lim, st, now, tag); /* (B - tokens) * T */

    sl__decision_init(d, lim);
    d->allowed =
        cost <= burst && deficit <= (sl__i128)(burst - cost) * lim->t_num;
    if (d->allowed && (mode == SL__COMMIT || mode == SL__RECORD)) {
        sl__sched_push(lim, st, now, cost, tag);
        deficit = sl__sched_ahead(lim, st, now, tag);
    } else if (mode == SL__RECORD) {
        deficit = sl__sched_record(lim, st, now, cost, tag);
    }
    sl__sched_report(lim, deficit, d);
    if (!d->allowed)
        d->retry_after =
            cost > burst
                ? -1
                : sl__sched_wait(lim, deficit,
                                 (sl__i128)(burst - cost) * lim->t_num);
    *expires = sl__sched_expires(st, tagged);
    return 0;
}

SL__SCHED_CHECKS(tb_decide, 1)

const sl__algo sl__token_bucket = {
    .id = SL_TOKEN_BUCKET,
    .name = "token_bucket",
    .check = tb_decide_own,
};

const sl__algo sl__token_bucket_override = {
    .id = SL_TOKEN_BUCKET,
    .name = "token_bucket",
    .check = tb_decide_override,
};
