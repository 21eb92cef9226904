/*
 * fixed_window.c - one counter per window [k * P, (k + 1) * P), windows
 * aligned to time 0 (the Unix epoch when now is wall-clock time).
 * Allowed iff count + c <= L.
 *
 * State: w[0] = k, the window the count belongs to; w[1] = count.  A now
 * that falls before window k (threads whose clocks were read a little out
 * of order) is counted in window k: time never runs backwards for a key.
 */
#include "narrow.h"

__attribute__((always_inline)) static inline int
fw_decide(const sl_limit *lim, sl__state *st, const sl__call *call,
          sl_decision *d, sl_nanos *expires)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t period = lim->cfg.period, limit = lim->cfg.limit;
    int64_t window = now / period, count = 0;
    sl_nanos end;

    if (window <= st->w[0]) {
        window = st->w[0];
        count = st->w[1];
    }
    end = sl__sat_add(window * period, period);
    sl__decision_init(d, lim);
    /* A query passes even when a recording (SL_RECORD) took count past
     * the limit. */
    d->allowed = cost == 0 || cost <= limit - count;
    if ((d->allowed && mode == SL__COMMIT) || mode == SL__RECORD) {
        count = sl__sat_add(count, cost);
        st->w[0] = window;
        st->w[1] = count;
    }
    d->remaining = SL__MAX(0, limit - count);
    d->reset_after = count > 0 ? end - now : 0;
    if (!d->allowed)
        d->retry_after = cost > limit ? -1 : end - now;
    *expires = count > 0 ? end : 0;
    return 0;
}

static int fw_check(const sl_limit *lim, sl__state *st, const sl__call *call,
                    sl_decision *d, sl_nanos *expires)
{
    return fw_decide(lim, st, call, d, expires);
}

/* The new window is the stored one or now's, and the count grows by at
 * most the cost: both below 2^32 means the new state packs. */
static int fw_check_word(const sl_limit *lim, uint64_t *word,
                         const sl__call *call, sl_decision *d,
                         sl_nanos *expires)
{
    sl__state st;
    sl__narrow_unpack_window(*word, &st);
    if (call->now / lim->cfg.period > (int64_t)UINT32_MAX ||
        call->cost > (int64_t)UINT32_MAX - st.w[1])
        return 1;
    fw_decide(lim, &st, call, d, expires);
    *word = sl__narrow_pack_window(&st);
    return 0;
}

const sl__algo sl__fixed_window = {
    .id = SL_FIXED_WINDOW,
    .name = "fixed_window",
    .check = fw_check,
    .check_word = fw_check_word,
};
