/*
 * sliding_window.c - the sliding window counter (Cloudflare's hybrid):
 * fixed windows of length P as in fixed_window.c, and the count of the
 * previous window weighted by how much of it the rolling window still
 * covers.  With e = t - start of the current window:
 *
 *   estimate = floor(prev * (P - e) / P) + cur;  allowed iff
 *   estimate + c <= L, then cur += c.
 *
 * State: w[0] = k, the current window; w[1] = prev << 32 | cur (limit.c
 * caps L below 2^32, and neither count exceeds L unless recorded past it
 * with SL_RECORD, where it saturates at 2^32 - 1).
 */
#include "narrow.h"

/* The smallest offset e' in [0, P] into a window whose previous window
 * held `prev` at which floor(prev * (P - e') / P) <= room. */
static sl__i128 first_fit(sl__i128 period, int64_t prev, int64_t room)
{
    sl__i128 e;
    if (prev == 0)
        return 0;
    /* prev * (P - e') <= (room + 1) * P - 1 */
    e = period - ((sl__i128)(room + 1) * period - 1) / prev;
    return e < 0 ? 0 : e;
}

__attribute__((always_inline)) static inline int
sw_decide(const sl_limit *lim, sl__state *st, const sl__call *call,
          sl_decision *d, sl_nanos *expires)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t period = lim->cfg.period, limit = lim->cfg.limit;
    int64_t window = now / period, prev = 0, cur = 0, estimate;
    sl__i128 start, offset;

    if (window <= st->w[0]) {
        window = st->w[0];
        prev = (int64_t)((uint64_t)st->w[1] >> 32);
        cur = (int64_t)((uint64_t)st->w[1] & UINT32_MAX);
    } else if (window == st->w[0] + 1) {
        prev = (int64_t)((uint64_t)st->w[1] & UINT32_MAX);
    }
    if (mode != SL__PEEK) {
        /* Roll the stored windows forward even for a refused request, so
         * the key remembers the newest window it has seen and a stale
         * request is judged there (docs/algorithms.md). */
        st->w[0] = window;
        st->w[1] = (int64_t)((uint64_t)prev << 32 | (uint64_t)cur);
    }
    start = (sl__i128)window * period;
    offset = now > start ? now - start : 0;
    estimate = (int64_t)((sl__i128)prev * (period - offset) / period) + cur;

    sl__decision_init(d, lim);
    /* A now before the current window's start (a stamp read out of order)
     * is judged at the start, where the estimate may exceed L: refused,
     * unless it is a query. */
    d->allowed = cost == 0 || cost <= limit - estimate;
    if ((d->allowed && mode == SL__COMMIT) || mode == SL__RECORD) {
        /* Recording past L: the packed count saturates at 2^32 - 1. */
        int64_t add = SL__MIN(cost, (int64_t)UINT32_MAX - cur);
        cur += add;
        estimate += add;
        st->w[1] = (int64_t)((uint64_t)prev << 32 | (uint64_t)cur);
    }
    d->remaining = SL__MAX(0, limit - estimate);
    if (cur > 0)
        d->reset_after = sl__clamp64(start + 2 * (sl__i128)period - now);
    else if (prev > 0)
        d->reset_after = sl__clamp64(start + period - now);
    *expires = d->reset_after > 0 ? sl__sat_add(now, d->reset_after) : 0;

    if (!d->allowed && cost > limit) {
        d->retry_after = -1;
    } else if (!d->allowed) {
        /* The estimate only falls with time: find where it first fits in
         * this window, else in the next (where prev becomes cur), else the
         * one after, where both counts are gone. */
        sl__i128 at = period;
        if (cost <= limit - cur)
            at = first_fit(period, prev, limit - cost - cur);
        if (at >= period) {
            sl__i128 next = first_fit(period, cur, limit - cost);
            at = next < period ? period + next : 2 * (sl__i128)period;
        }
        d->retry_after = sl__clamp64(start + at - now);
    }
    return 0;
}

static int sw_check(const sl_limit *lim, sl__state *st, const sl__call *call,
                    sl_decision *d, sl_nanos *expires)
{
    return sw_decide(lim, st, call, d, expires);
}

/* The new window is the stored one or now's; the previous count is one of
 * the stored counts or 0, and the current one grows by at most the cost
 * from the stored one or 0: so the window below 2^32 and the current
 * count plus the cost below 2^16 mean the new state packs. */
static int sw_check_word(const sl_limit *lim, uint64_t *word,
                         const sl__call *call, sl_decision *d,
                         sl_nanos *expires)
{
    sl__state st;
    sl__narrow_unpack_sliding(*word, &st);
    if (call->now / lim->cfg.period > (int64_t)UINT32_MAX ||
        call->cost > 0xffff - (int64_t)(*word & 0xffff))
        return 1;
    sw_decide(lim, &st, call, d, expires);
    *word = sl__narrow_pack_sliding(&st);
    return 0;
}

const sl__algo sl__sliding_window = {
    .id = SL_SLIDING_WINDOW,
    .name = "sliding_window",
    .check = sw_check,
    .check_word = sw_check_word,
};
