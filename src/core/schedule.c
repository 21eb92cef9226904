/*
 * schedule.c - a schedule's state carried from one limit's numbers to
 * another's (sl_limit_override), and the schedules stopped at L = 0.
 *
 * Apart from schedule.h because it is off the base limits' path: a base
 * reaches it only for a state an override wrote, an override on every
 * check (SL__SCHED_CHECKS).
 *
 * What is kept is the units used.  A state written under L_old says the
 * bucket lacks m = (S - now) / T_old units (the queue holds m units); under
 * the limit now reading it, that is S' = now + m * T_new, and at most the
 * new capacity B_new * T_new ahead (docs/algorithms.md, "Changing a
 * limit's numbers").  In ticks of 1 / t_den ns, with g = gcd(P, L) so that
 * t_den = L / g and t_num = P / g (P is the same for both):
 *
 *   lead_old = (S - now) t_den_old            (whole ns and fraction)
 *   lead_new = lead_old t_num_new / t_num_old = lead_old g_old / g_new
 *            = ((S_ns - now) L_old + frac g_old) / g_new
 *
 * rounded up to a whole tick.  Every value a decision reports is a
 * ceiling of (lead - a whole number of ticks) over a whole number, so the
 * rounded lead reports exactly what the exact one would, now and at every
 * later time; each conversion costs the client less than one tick
 * (1 / t_den_new ns), never gives it one.  (S_ns - now) < 2^63 and
 * L_old < 2^31 keep the product below 2^94.
 */
#include "schedule.h"

void sl__sched_convert(const sl_limit *lim, sl__state *st, sl_nanos now)
{
    const sl__i128 most = (sl__i128)lim->cfg.burst * lim->t_num;
    uint64_t tag = (uint64_t)st->w[1] >> 32;
    int64_t frac = (int64_t)((uint64_t)st->w[1] & SL__FRAC_MASK);
    int64_t l_old = tag != 0 ? (int64_t)tag : lim->base.limit;
    int64_t g_new = lim->cfg.limit / lim->t_den, g_old, den_old;
    sl__i128 lead;

    if (lim->base.limit > SL__TAG_MAX_LIMIT || l_old > SL__TAG_MAX_LIMIT) {
        /* Not a state of this limit's identity (a hash collision): an
         * empty bucket errs towards limiting. */
        lead = most;
    } else {
        g_old =
            l_old == lim->cfg.limit ? g_new : sl__gcd64(lim->cfg.period, l_old);
        den_old = l_old / g_old;
        if (frac >= den_old) {
            lead = most; /* as above */
        } else if (st->w[0] < now || (st->w[0] == now && frac == 0)) {
            lead = 0; /* full (an empty queue) under any numbers */
        } else {
            sl__i128 x =
                (sl__i128)(st->w[0] - now) * l_old + (sl__i128)frac * g_old;
            lead = (x + g_new - 1) / g_new;
            if (lead > most)
                lead = most;
        }
    }
    st->w[0] = sl__sat_add(now, (int64_t)(lead / lim->t_den));
    st->w[1] = (int64_t)(lead % lim->t_den) + (int64_t)lim->tag_bits;
}

int sl__sched_converted(const sl_limit *lim, sl__state *stored,
                        const sl__call *call, sl_decision *d, sl_nanos *expires,
                        sl__sched_check_fn check)
{
    sl__state copy = *stored;
    int rc;

    sl__sched_convert(lim, &copy, call->now);
    if (call->mode != SL__PEEK) {
        *stored = copy;
        return check(lim, stored, call, d, expires);
    }
    rc = check(lim, &copy, call, d, expires);
    /* What is kept is the state as it was. */
    *expires = sl__sched_expires(stored, lim->base.limit <= SL__TAG_MAX_LIMIT);
    return rc;
}

/*
 * A schedule overridden to L = 0: nothing refills, so nothing with a cost
 * passes (retry_after -1: never under these numbers) and a query finds
 * nothing left.  The state is neither read as units nor written: what the
 * key had used is there, on the numbers it was written under, when the
 * limit is raised again.  A recorded request (SL_RECORD) is therefore not
 * kept either: a bucket of capacity 0 has nothing to take it from.
 */
static int stopped_check(const sl_limit *lim, sl__state *st,
                         const sl__call *call, sl_decision *d,
                         sl_nanos *expires)
{
    sl__decision_init(d, lim);
    d->allowed = call->cost == 0;
    d->retry_after = d->allowed ? 0 : -1;
    *expires = sl__sched_expires(st, 1);
    d->reset_after = *expires > call->now ? *expires - call->now : 0;
    return 0;
}

const sl__algo sl__sched_stopped = {
    .id = SL_TOKEN_BUCKET,
    .name = "stopped schedule",
    .check = stopped_check,
};
