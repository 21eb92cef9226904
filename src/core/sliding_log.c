/*
 * sliding_log.c - the sliding window log: the timestamps (and costs) of
 * accepted requests; the window at t is (t - P, t], so a request exactly P
 * ago no longer counts.  Allowed iff the window's total + c <= L.
 *
 * Exact at the price of memory: up to L events per key (fewer when costs
 * or equal timestamps merge).  With SL_LOG_REJECTED rejected requests are
 * logged too, as the design chapter describes, so a client that keeps
 * knocking stays limited; the log is then capped at 2L + 16 events, past
 * which attempts merge into the newest event (docs/algorithms.md).
 */
#include "eventlog.h"

static int slog_check(const sl_limit *lim, sl__state *st, int64_t cost,
                      sl_nanos now, sl__mode mode, sl_decision *d,
                      sl_nanos *expires)
{
    int64_t limit = lim->cfg.limit, period = lim->cfg.period;
    int log_rejected = (lim->cfg.flags & SL_LOG_REJECTED) != 0;
    /* Clocks read a little out of order by threads keep the log sorted. */
    sl_nanos t = SL__MAX(now, sl__elog_newest(st));
    int record;

    sl__elog_expire(st, t - period);
    sl__decision_init(d, lim);
    d->allowed = cost <= limit - sl__elog_sum(st);
    /* A rejected attempt is logged under SL_LOG_REJECTED, whether this
     * limit or another limit of the same call rejected it. */
    record = cost > 0 && mode != SL__PEEK &&
             ((d->allowed && mode == SL__COMMIT) ||
              (log_rejected && (!d->allowed || mode == SL__REFUSE)));
    if (cost > 0 && (mode == SL__PEEK || record)) {
        /* PEEK reserves so that the COMMIT after it cannot fail. */
        int err = sl__elog_reserve(st);
        if (err)
            return err;
    }
    if (record)
        sl__elog_push(st, t, cost,
                      (uint32_t)SL__MIN(2 * limit + 16, UINT32_MAX));
    d->remaining = SL__MAX(0, limit - sl__elog_sum(st));
    *expires = sl__elog_sum(st) > 0 ? sl__sat_add(sl__elog_newest(st), period) : 0;
    d->reset_after = *expires > 0 ? *expires - now : 0;
    if (!d->allowed)
        d->retry_after = cost > limit
                             ? -1
                             : sl__sat_add(sl__elog_fits_after(st, limit - cost),
                                           period) - now;
    return 0;
}

const sl__algo sl__sliding_log = {
    .id = SL_SLIDING_LOG,
    .name = "sliding_log",
    .check = slog_check,
    .heap = 1,
};
