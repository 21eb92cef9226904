/*
 * deadline.c - a timeout that moves on every request but rarely touches
 * the timer: setting a deadline later than the one the timer is armed for
 * only writes a number, and clearing it only writes a zero.  When the
 * timer fires early (the deadline moved or was cleared) it re-arms itself
 * for what is left, or stays quiet.  uv_timer_start and uv_timer_stop
 * each rebalance the loop's timer heap, several times per request.
 */
#include "runtime/deadline.h"

static void fire(uv_timer_t *t)
{
    sv_deadline *d = (sv_deadline *)t;
    if (d->at == 0)
        return;
    uint64_t now = uv_now(t->loop);
    if (now < d->at) {
        d->due = d->at;
        uv_timer_start(t, fire, d->at - now, 0);
        return;
    }
    d->at = 0;
    d->expired(t);
}

void sv_deadline_init(uv_loop_t *loop, sv_deadline *d, uv_timer_cb expired)
{
    uv_timer_init(loop, &d->timer);
    d->at = d->due = 0;
    d->expired = expired;
}

void sv_deadline_set(sv_deadline *d, uint64_t timeout_ms)
{
    d->at = uv_now(d->timer.loop) + timeout_ms;
    if (!uv_is_active((uv_handle_t *)&d->timer) || d->at < d->due) {
        d->due = d->at;
        uv_timer_start(&d->timer, fire, timeout_ms, 0);
    }
}

void sv_deadline_clear(sv_deadline *d)
{
    d->at = 0;
}
