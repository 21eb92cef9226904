/*
 * gcra.c - the generic cell rate algorithm, as redis-cell implements it.
 *
 * One theoretical arrival time TAT per key; emission interval T = P / L,
 * tolerance B * T.  A request of cost c computes new = max(TAT, t) + c * T
 * and is allowed iff new - t <= B * T, then TAT = new.
 *
 * It admits exactly what token_bucket admits (TAT is the token bucket's
 * "full again" time), which tests/test_equivalence.c checks on long random
 * traces; it is kept as its own algorithm because users ask for it by name.
 * redis-cell's max_burst is B - 1 in these terms.
 */
#include "schedule.h"

/* st is one of lim's own states; tagged: lim is an override, whose
 * states carry its tag (schedule.h, SL__SCHED_CHECKS). */
__attribute__((always_inline)) static inline int
gcra_decide(const sl_limit *lim, sl__state *st, const sl__call *call,
            sl_decision *d, sl_nanos *expires, const int tagged)
{
    int64_t cost = call->cost;
    sl_nanos now = call->now;
    sl__mode mode = call->mode;
    int64_t tag = tagged ? (int64_t)lim->tag_bits : 0;
    sl__i128 tolerance = (sl__i128)lim->cfg.burst * lim->t_num;
    sl__i128 tat_ahead = sl__sched_ahead(lim, st, now, tag);
    sl__i128 new_ahead = tat_ahead + (sl__i128)cost * lim->t_num;

    sl__decision_init(d, lim);
    d->allowed = new_ahead <= tolerance;
    if (d->allowed && (mode == SL__COMMIT || mode == SL__RECORD)) {
        sl__sched_push(lim, st, now, cost, tag);
        tat_ahead = new_ahead;
    } else if (mode == SL__RECORD) {
        tat_ahead = sl__sched_record(lim, st, now, cost, tag);
        new_ahead = tat_ahead + (sl__i128)cost * lim->t_num;
    }
    sl__sched_report(lim, tat_ahead, d);
    if (!d->allowed)
        d->retry_after = cost > lim->cfg.burst
                             ? -1
                             : sl__sched_wait(lim, new_ahead, tolerance);
    *expires = sl__sched_expires(st, tagged);
    return 0;
}

SL__SCHED_CHECKS(gcra_decide, 1)

const sl__algo sl__gcra = {
    .id = SL_GCRA,
    .name = "gcra",
    .check = gcra_decide_own,
};

const sl__algo sl__gcra_override = {
    .id = SL_GCRA,
    .name = "gcra",
    .check = gcra_decide_override,
};
