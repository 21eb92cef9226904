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
 *
 * S counts time in units of the T it was written under, so a limit whose
 * numbers change (sl_limit_override) must know which T that was: the
 * high bits of w[1] say it.  For a limit whose L fits 31 bits, w[1] is
 * tag << 32 | fraction, tag 0 when the state was written under the base's
 * numbers (L and B) and otherwise the L it was written under (t_den <= L
 * < 2^31, so the fraction fits its 32 bits).  A state written under other
 * numbers is converted when read (sl__sched_adopt, schedule.c), keeping
 * the units it has used.  A base limit writes tag 0, exactly the layout
 * it always had, and takes any w[1] below t_den as its own: one compare
 * more on its path.  Limits with L >= 2^31 cannot be overridden and keep
 * a plain fraction in w[1].
 */
#ifndef SL_SCHEDULE_H
#define SL_SCHEDULE_H

#include "internal.h"

/* Takes a state written under other numbers (an override's, or the
 * base's when lim is an override) into lim's at now; schedule.c. */
void sl__sched_convert(const sl_limit *lim, sl__state *st, sl_nanos now);

/* Makes st one of lim's own states, converting it if it is not: every
 * check starts here.  A base limit's own states have w[1] < t_den; an
 * override (own_span 0) always converts, which also empties a bucket
 * that a smaller burst no longer holds. */
static inline void sl__sched_adopt(const sl_limit *lim, sl__state *st,
                                   sl_nanos now)
{
    if (__builtin_expect((uint64_t)st->w[1] >= lim->own_span, 0))
        sl__sched_convert(lim, st, now);
}

/* A copy of a stored state, made one of lim's own. */
static inline sl__state sl__sched_read(const sl_limit *lim,
                                       const sl__state *stored, sl_nanos now)
{
    sl__state st = *stored;
    sl__sched_adopt(lim, &st, now);
    return st;
}

/* The fraction of one of lim's own states. */
static inline int64_t sl__sched_frac(const sl_limit *lim, const sl__state *st)
{
    return st->w[1] - (int64_t)lim->tag_bits;
}

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
    ahead = (sl__i128)(st->w[0] - now) * lim->t_den + sl__sched_frac(lim, st);
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

    int64_t f = sl__sched_frac(lim, st);
    if (st->w[0] < now || (st->w[0] == now && f == 0)) {
        st->w[0] = now;
        f = 0;
    }
    f += frac;
    if (f >= lim->t_den) {
        f -= lim->t_den;
        whole++;
    }
    st->w[1] = f + (int64_t)lim->tag_bits;
    /* The end of time saturates: S stays at INT64_MAX. */
    if (__builtin_add_overflow(st->w[0], whole, &st->w[0])) {
        st->w[0] = INT64_MAX;
        st->w[1] = (int64_t)lim->tag_bits;
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
        (sl__i128)(st->w[0] - now) * lim->t_den + sl__sched_frac(lim, st) >
            most) {
        st->w[0] = now + (int64_t)(most / lim->t_den);
        st->w[1] = (int64_t)(most % lim->t_den) + (int64_t)lim->tag_bits;
    }
    return sl__sched_ahead(lim, st, now);
}

/* When S is passed, the state is initial again, whatever numbers it was
 * written under. */
static inline sl_nanos sl__sched_expires(const sl_limit *lim,
                                         const sl__state *st)
{
    return sl__sat_add(st->w[0], ((uint64_t)st->w[1] & lim->frac_mask) != 0);
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
