/*
 * decision.c - what a request that must pass several limits is told.
 * Every store combines per-limit decisions the same way, so it lives here.
 */
#include "internal.h"

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
