/*
 * decision.c - what every decision call shares, whoever decides it: the
 * input it accepts, and what a request that must pass several limits is
 * told.  The stores and the Redis protocol core (src/redis/call.c) check
 * and combine alike, so it lives below both.
 */
#include "internal.h"

int sl__check_input(size_t max_key_len, const sl_check_item *items, size_t n,
                    const int64_t *costs, sl_nanos now)
{
    if (items == NULL || costs == NULL || n == 0 || n > SL_MAX_ITEMS ||
        now < 0 || now > SL_MAX_TIME)
        return SL_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (costs[i] < 0 || costs[i] > SL_MAX_COUNT)
            return SL_ECOST;
    for (size_t i = 0; i < n; i++) {
        if (items[i].limit == NULL ||
            (items[i].key == NULL && items[i].key_len != 0))
            return SL_EINVAL;
        if (items[i].key_len > max_key_len)
            return SL_EKEYLEN;
    }
    return 0;
}

void sl_decisions_combine(const sl_decision *each, size_t n,
                          sl_decision *overall)
{
    sl_decision o = each[0];

    o.allowed = 1;
    for (size_t i = 0; i < n; i++) {
        const sl_decision *d = &each[i];
        o.allowed &= d->allowed;
        /* The limit closest to exhaustion speaks for the request, as the
         * rate-limit headers must describe a single policy. */
        if (d->remaining < o.remaining) {
            o.remaining = d->remaining;
            o.limit = d->limit;
        }
        o.reset_after = SL__MAX(o.reset_after, d->reset_after);
        o.delay = SL__MAX(o.delay, d->delay);
        /* Absent arrivals every algorithm's allowance only grows with time,
         * so the request passes all limits at the latest of their times. */
        if (o.retry_after >= 0)
            o.retry_after = d->retry_after < 0
                                ? -1
                                : SL__MAX(o.retry_after, d->retry_after);
    }
    if (o.allowed)
        o.retry_after = 0;
    else
        o.delay = 0;
    overall[0] = o;
}
