/*
 * sliding_log.c - the sliding window log: the timestamps (and costs) of
 * accepted requests; the window at t is (t - P, t], so a request exactly P
 * ago no longer counts.  Allowed iff the window's total + c <= L.
 *
 * State: the event log (eventlog.h): w[0] its events (one inline, or a
 * pointer to the heap), w[1] the latest time the key was judged at.
 *
 * Exact at the price of memory: up to L events per key (fewer when costs
 * or equal timestamps merge).  With SL_LOG_REJECTED rejected requests are
 * logged too, as the design chapter describes, so a client that keeps
 * knocking stays limited; the log is then capped at 2L + 16 events, past
 * which attempts merge into the newest event (docs/algorithms.md).
 */
#include "eventlog.h"

static int slog_check(const sl_limit *lim, sl__state *st, const sl__call *call,
                      sl_decision *d, sl_nanos *expires)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t limit = lim->cfg.limit, period = lim->cfg.period;
    int log_rejected = (lim->cfg.flags & SL_LOG_REJECTED) != 0;
    /* A key's time never runs backwards (w[1] is the latest it has been
     * judged at): a request stamped earlier, by a thread that read the
     * clock a little out of order, is judged at that latest time, so it
     * cannot find entries that a later request has already expired. */
    sl_nanos t = SL__MAX(now, st->w[1]);
    uint32_t max_len = (uint32_t)SL__MIN(2 * limit + 16, UINT32_MAX);
    int record;

    int err = sl__elog_advance(st, t, t - period);
    if (err)
        return err;
    sl__decision_init(d, lim);
    d->allowed = cost == 0 || cost <= limit - sl__elog_sum(st);
    /* A rejected attempt is logged under SL_LOG_REJECTED, whether this
     * limit or another limit of the same call rejected it, and always
     * when recorded (SL_RECORD). */
    int keep_rejected = log_rejected || mode == SL__RECORD;
    record = cost > 0 && mode != SL__PEEK &&
             ((d->allowed && mode != SL__REFUSE) ||
              (keep_rejected && (!d->allowed || mode == SL__REFUSE)));
    if (cost > 0 && (mode == SL__PEEK || record)) {
        /* PEEK reserves so that the COMMIT after it cannot fail.  A log
         * at the memory cap refuses to admit more, but still records a
         * rejected attempt, merged into its newest event. */
        err = sl__elog_reserve(st, call->max_heap);
        if (err && (d->allowed || !keep_rejected || sl__elog_sum(st) == 0))
            return err;
        if (err)
            max_len = 0;
    }
    if (record)
        sl__elog_push(st, t, cost, max_len);
    d->remaining = SL__MAX(0, limit - sl__elog_sum(st));
    *expires =
        sl__elog_sum(st) > 0 ? sl__sat_add(sl__elog_newest(st), period) : 0;
    d->reset_after = *expires > 0 ? *expires - now : 0;
    if (!d->allowed)
        d->retry_after =
            cost > limit
                ? -1
                : sl__sat_add(sl__elog_fits_after(st, limit - cost), period) -
                      now;
    return 0;
}

const sl__algo sl__sliding_log = {
    .id = SL_SLIDING_LOG,
    .name = "sliding_log",
    .check = slog_check,
    .heap = 1,
};
