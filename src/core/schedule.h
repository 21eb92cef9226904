/*
 * schedule.h - the exact "virtual schedule" arithmetic that token_bucket,
 * gcra and leaky_bucket are phrased in.
 *
 * Each of the three keeps one point in time S: when the bucket is full
 * again (token bucket), the theoretical arrival time (GCRA), when the queue
 * is empty again (leaky bucket).  Admitting cost c moves S to
 * max(S, now) + c * T with T = P / L.  T is rarely a whole number of
 * nanoseconds (1000 per 3 s is 3,000,000.333... ns), so S is kept exactly
 * as a whole number of ns in w[0] plus a numerator over t_den in w[1]:
 * S = w[0] + w[1] / t_den, 0 <= w[1] < t_den.  Amounts of time are handled
 * in "ticks" of 1 / t_den ns, in which T is the whole number t_num and
 * every comparison is exact integer arithmetic.
 *
 * The all-zero state is S = 0: full (empty queue) for every now >= 0.
 */
#ifndef SL_SCHEDULE_H
#define SL_SCHEDULE_H

#include "internal.h"

/* (S - now)+ in ticks: how far the schedule runs ahead of now, at most
 * B * T.  More is only seen by a request stamped before the last one
 * admitted (threads read the clock a little out of order); it is judged
 * as if it came at that last admission, never against less than an
 * empty bucket. */
static inline sl__i128 sl__sched_ahead(const sl_limit *lim, const sl__state *st,
                                       sl_nanos now)
{
    sl__i128 ahead, most = (sl__i128)lim->cfg.burst * lim->t_num;
    if (st->w[0] < now)
        return 0; /* w[1] < t_den, so S < w[0] + 1 <= now */
    ahead = (sl__i128)(st->w[0] - now) * lim->t_den + st->w[1];
    return ahead < most ? ahead : most;
}

/* S = max(S, now) + cost * T.  The caller has checked that the result is
 * at most B * T ahead of now, which limit.c bounds by 2^62 ns. */
static inline void sl__sched_push(const sl_limit *lim, sl__state *st,
                                  sl_nanos now, int64_t cost)
{
    sl__i128 add = (sl__i128)cost * lim->t_num;
    int64_t whole, frac = 0;

    if (lim->t_den == 1) { /* T is a whole number of ns: no fraction */
        whole = (int64_t)add;
    } else if (add <= INT64_MAX) { /* the usual case: 64-bit division */
        whole = (int64_t)add / lim->t_den;
        frac = (int64_t)add % lim->t_den;
    } else {
        whole = (int64_t)(add / lim->t_den);
        frac = (int64_t)(add % lim->t_den);
    }

    if (st->w[0] < now || (st->w[0] == now && st->w[1] == 0)) {
        st->w[0] = now;
        st->w[1] = 0;
    }
    st->w[1] += frac;
    if (st->w[1] >= lim->t_den) {
        st->w[1] -= lim->t_den;
        whole++;
    }
    /* The end of time saturates: S stays at INT64_MAX. */
    if (__builtin_add_overflow(st->w[0], whole, &st->w[0])) {
        st->w[0] = INT64_MAX;
        st->w[1] = 0;
    }
}

/* A recorded request that did not fit (SL__RECORD): S moves as for an
 * admitted one, but never more than B * T ahead of now, so the bucket is
 * left empty rather than in a debt it would take longer than a full
 * period to repay.  Returns the new lead in ticks. */
static inline sl__i128 sl__sched_record(const sl_limit *lim, sl__state *st,
                                        sl_nanos now, int64_t cost)
{
    sl__i128 most = (sl__i128)lim->cfg.burst * lim->t_num;
    sl__sched_push(lim, st, now, cost);
    if (st->w[0] >= now &&
        (sl__i128)(st->w[0] - now) * lim->t_den + st->w[1] > most) {
        st->w[0] = now + (int64_t)(most / lim->t_den);
        st->w[1] = (int64_t)(most % lim->t_den);
    }
    return sl__sched_ahead(lim, st, now);
}

/* When S is passed, the state is initial again. */
static inline sl_nanos sl__sched_expires(const sl__state *st)
{
    return sl__sat_add(st->w[0], st->w[1] > 0);
}

/* The whole units left (B minus the schedule's lead in units, rounded
 * up) and the time until the lead is gone. */
static inline void sl__sched_report(const sl_limit *lim, sl__i128 ahead,
                                    sl_decision *d)
{
    d->remaining = lim->cfg.burst - sl__ceil_div128(ahead, lim->t_num);
    d->reset_after = sl__ceil_div128(ahead, lim->t_den);
}

/* The wait until a lead of `ahead` ticks has shrunk to `allowed` ticks. */
static inline sl_nanos sl__sched_wait(const sl_limit *lim, sl__i128 ahead,
                                      sl__i128 allowed)
{
    return sl__ceil_div128(ahead - allowed, lim->t_den);
}

#endif /* SL_SCHEDULE_H */
