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
 * numbers is converted when read (sl__sched_converted, schedule.c),
 * keeping the units it has used.  A base limit writes tag 0, exactly the
 * layout it always had, and takes any w[1] below t_den as its own: its
 * check is the code it always was behind one compare (SL__SCHED_CHECKS).
 * Limits with L >= 2^31 cannot be overridden and keep a plain fraction in
 * w[1].
 */
#ifndef SL_SCHEDULE_H
#define SL_SCHEDULE_H

#include "internal.h"

/* Takes a state written under other numbers (an override's, or the
 * base's when lim is an override) into lim's at now; schedule.c. */
void sl__sched_convert(const sl_limit *lim, sl__state *st, sl_nanos now);

typedef int (*sl__sched_check_fn)(const sl_limit *lim, sl__state *st,
                                  const sl__call *call, sl_decision *d,
                                  sl_nanos *expires);

/* Decides on the conversion of a stored state that is not one of lim's
 * own with `check`, which then finds one: the conversion is written to
 * `stored` unless peeking (a PEEK must not keep even that); schedule.c. */
int sl__sched_converted(const sl_limit *lim, sl__state *stored,
                        const sl__call *call, sl_decision *d, sl_nanos *expires,
                        sl__sched_check_fn check);

/*
 * A bucket's two checks from its decide(lim, st, call, d, expires, tagged),
 * which is written for a state that is one of lim's own:
 *
 *   decide_own:      a base's.  Its own states have w[1] < t_den (every
 *                    state it writes); anything else was written under
 *                    other numbers and is converted first.  So its path
 *                    is one compare, then (fast: token_bucket and gcra)
 *                    sl__sched_fast, else decide() with tag 0 compiled
 *                    apart (decide_base), the code it was before
 *                    overrides: inlined, the compare costs more in the
 *                    register allocation than in itself.
 *   decide_override: an override's.  It converts every state it reads
 *                    (own_span is 0), which for one it wrote is the
 *                    identity but also applies its burst's cap to a state
 *                    another burst wrote; then decide() with its tag.
 */
#define SL__SCHED_CHECKS(decide, fast)                                         \
    __attribute__((noinline)) static int decide##_base(                        \
        const sl_limit *lim, sl__state *st, const sl__call *call,              \
        sl_decision *d, sl_nanos *expires)                                     \
    {                                                                          \
        return decide(lim, st, call, d, expires, 0);                           \
    }                                                                          \
    static int decide##_own(const sl_limit *lim, sl__state *st,                \
                            const sl__call *call, sl_decision *d,              \
                            sl_nanos *expires)                                 \
    {                                                                          \
        if (__builtin_expect((uint64_t)st->w[1] >= lim->own_span, 0))          \
            return sl__sched_converted(lim, st, call, d, expires,              \
                                       decide##_base);                         \
        if ((fast) && lim->most_ticks != 0 && call->mode == SL__COMMIT &&      \
            call->cost <= lim->cfg.burst)                                      \
            return sl__sched_fast(lim, st, call, d, expires);                  \
        return decide##_base(lim, st, call, d, expires);                       \
    }                                                                          \
    static int decide##_tagged(const sl_limit *lim, sl__state *st,             \
                               const sl__call *call, sl_decision *d,           \
                               sl_nanos *expires)                              \
    {                                                                          \
        return decide(lim, st, call, d, expires, 1);                           \
    }                                                                          \
    static int decide##_override(const sl_limit *lim, sl__state *st,           \
                                 const sl__call *call, sl_decision *d,         \
                                 sl_nanos *expires)                            \
    {                                                                          \
        return sl__sched_converted(lim, st, call, d, expires,                  \
                                   decide##_tagged);                           \
    }

/*
 * The helpers below take `tag`, the tag bits of lim's own states (above
 * their fraction): a base's check passes the constant 0, so that its code
 * is what it was before overrides; an override's passes lim->tag_bits.
 */

/* (S - now)+ in ticks: how far the schedule runs ahead of now, at most
 * B * T.  More is only seen by a request stamped before the last one
 * admitted (threads read the clock a little out of order); it is judged
 * as if it came at that last admission, never against less than an
 * empty bucket. */
static inline sl__i128 sl__sched_ahead(const sl_limit *lim, const sl__state *st,
                                       sl_nanos now, int64_t tag)
{
    sl__i128 ahead, most = (sl__i128)lim->cfg.burst * lim->t_num;
    if (st->w[0] < now)
        return 0; /* the fraction is < t_den, so S < w[0] + 1 <= now */
    ahead = (sl__i128)(st->w[0] - now) * lim->t_den + (st->w[1] - tag);
    return ahead < most ? ahead : most;
}

/* S = max(S, now) + cost * T.  The caller has checked that the result is
 * at most B * T ahead of now, which limit.c bounds by 2^62 ns. */
static inline void sl__sched_push(const sl_limit *lim, sl__state *st,
                                  sl_nanos now, int64_t cost, int64_t tag)
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

    /* w[1] is tag + fraction throughout. */
    if (st->w[0] < now || (st->w[0] == now && st->w[1] == tag)) {
        st->w[0] = now;
        st->w[1] = tag;
    }
    st->w[1] += frac;
    if (st->w[1] - tag >= lim->t_den) {
        st->w[1] -= lim->t_den;
        whole++;
    }
    /* The end of time saturates: S stays at INT64_MAX. */
    if (__builtin_add_overflow(st->w[0], whole, &st->w[0])) {
        st->w[0] = INT64_MAX;
        st->w[1] = tag;
    }
}

/* A recorded request that did not fit (SL__RECORD): S moves as for an
 * admitted one, but never more than B * T ahead of now, so the bucket is
 * left empty rather than in a debt it would take longer than a full
 * period to repay.  Returns the new lead in ticks. */
static inline sl__i128 sl__sched_record(const sl_limit *lim, sl__state *st,
                                        sl_nanos now, int64_t cost, int64_t tag)
{
    sl__i128 most = (sl__i128)lim->cfg.burst * lim->t_num;
    sl__sched_push(lim, st, now, cost, tag);
    if (st->w[0] >= now &&
        (sl__i128)(st->w[0] - now) * lim->t_den + (st->w[1] - tag) > most) {
        st->w[0] = now + (int64_t)(most / lim->t_den);
        st->w[1] = (int64_t)(most % lim->t_den) + tag;
    }
    return sl__sched_ahead(lim, st, now, tag);
}

/* When S is passed, the state is initial again.  `tagged` for a state
 * that may carry a tag (an override's, or a limit that may read one):
 * the fraction is then w[1]'s low 32 bits; a base's own state's fraction
 * is all of w[1]. */
static inline sl_nanos sl__sched_expires(const sl__state *st, int tagged)
{
    return sl__sat_add(st->w[0], tagged
                                     ? ((uint64_t)st->w[1] & SL__FRAC_MASK) != 0
                                     : st->w[1] > 0);
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

/* Ceiling of n over d, both non-negative, d > 0 (d = 1, T a whole number
 * of ns, is common and needs no division). */
static inline int64_t sl__ceil_div64(int64_t n, int64_t d)
{
    if (d == 1)
        return n;
    return (int64_t)((uint64_t)n / (uint64_t)d +
                     ((uint64_t)n % (uint64_t)d != 0));
}

/*
 * The common decision of token_bucket and gcra, which admit and report
 * exactly alike (gcra.c): a COMMIT of cost <= B on a base limit's own
 * state, for a limit whose capacity B * T in ticks is below 2^62
 * (lim->most_ticks, 0 if not; limit.c), SL__SCHED_CHECKS checks.  Every
 * quantity then fits in 64 bits: the lead is at most most_ticks, cost *
 * t_num at most as much, their sum below 2^63, and a lead of more than
 * most_ns whole ns is capped before it is multiplied.  The results are
 * those of the 128-bit path (decide_base) to the unit.  Returns 0.
 */
static inline int sl__sched_fast(const sl_limit *lim, sl__state *st,
                                 const sl__call *call, sl_decision *d,
                                 sl_nanos *expires)
{
    int64_t most = lim->most_ticks, burst = lim->cfg.burst, cost = call->cost;
    sl_nanos now = call->now;
    int64_t ahead, want;
    if (st->w[0] < now)
        ahead = 0;
    else if (st->w[0] - now > lim->most_ns)
        ahead = most;
    else if ((ahead = (st->w[0] - now) * lim->t_den + st->w[1]) > most)
        ahead = most;
    want = ahead + cost * lim->t_num;
    d->allowed = want <= most;
    d->limit = lim->cfg.limit;
    d->delay = 0;
    if (d->allowed) {
        /* sl__sched_push in 64 bits: cost * T <= most, and S ends at most
         * most_ticks ahead of now <= 2^62, so nothing overflows. */
        int64_t add = cost * lim->t_num, whole = add, frac = 0;
        if (lim->t_den != 1) {
            whole = add / lim->t_den;
            frac = add % lim->t_den;
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
        st->w[0] += whole;
        ahead = want;
        d->retry_after = 0;
    } else {
        d->retry_after = sl__ceil_div64(want - most, lim->t_den);
    }
    d->remaining = burst - sl__ceil_div64(ahead, lim->t_num);
    d->reset_after = sl__ceil_div64(ahead, lim->t_den);
    *expires = sl__sat_add(st->w[0], st->w[1] > 0);
    return 0;
}

#endif /* SL_SCHEDULE_H */
