/*
 * stepped_window.c - the Databox paper's sliding window of step counters.
 *
 * Time is cut into steps of length k (P a whole number n of steps); a
 * request adds its cost to the counter of the step holding it, and the
 * window at t is the n steps ending with that step: [(s - n + 1) k,
 * (s + 1) k) for s = floor(t / k).  Allowed iff the window's sum + c <= L.
 * A fixed window is the case n = 1; smaller steps smooth the edge.
 *
 * "Next free time": the paper moves t forward one step at a time until the
 * sum fits.  retry_after gives the same answer in one pass over the step
 * counters, and gives the start of that step rather than t + j k (both lie
 * in the same step; the start is the smallest wait).
 *
 * State: the non-empty step counters, an event log whose times are step
 * numbers (eventlog.h): at most min(n, L) events per key, the first
 * inline in w[0]; w[1] is the latest step the key was judged in.
 */
#include "eventlog.h"

static int sw_step_check(const sl_limit *lim, sl__state *st,
                         const sl__call *call, sl_decision *d,
                         sl_nanos *expires)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t limit = lim->cfg.limit, step = lim->cfg.step, n = lim->steps;
    /* As in sliding_log.c, a key's time never runs backwards: w[1] is
     * the latest step it has been judged in. */
    int64_t s = SL__MAX(now / step, st->w[1]);

    int err = sl__elog_advance(st, s, s - n);
    if (err)
        return err;
    sl__decision_init(d, lim);
    /* A query passes even when a recording took the sum past the limit. */
    d->allowed = cost == 0 || cost <= limit - sl__elog_sum(st);
    /* PEEK reserves whether or not the cost fits, so that a RECORD after
     * it cannot fail either. */
    if (cost > 0 && (d->allowed || mode == SL__PEEK || mode == SL__RECORD) &&
        mode != SL__REFUSE) {
        err = sl__elog_reserve(st, call->max_heap);
        if (err)
            return err;
        if (mode == SL__COMMIT || mode == SL__RECORD)
            sl__elog_push(st, s, cost, UINT32_MAX);
    }
    d->remaining = SL__MAX(0, limit - sl__elog_sum(st));
    *expires = sl__elog_sum(st) > 0
                   ? sl__clamp64(((sl__i128)sl__elog_newest(st) + n) * step)
                   : 0;
    d->reset_after = *expires > 0 ? *expires - now : 0;
    if (!d->allowed && cost > limit)
        d->retry_after = -1;
    else if (!d->allowed)
        d->retry_after = sl__clamp64(
            ((sl__i128)sl__elog_fits_after(st, limit - cost) + n) * step - now);
    return 0;
}

const sl__algo sl__stepped_window = {
    .id = SL_STEPPED_WINDOW,
    .name = "stepped_window",
    .check = sw_step_check,
    .heap = 1,
};
