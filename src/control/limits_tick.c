/*
 * limits_tick.c - the runtime limits' tick (limits.h): once a second on
 * the control thread it answers the writes Redis left waiting, publishes
 * a generation when an override expires, and with --store redis reads the
 * shared table and purges the long-expired (limits_redis.c).  Apart
 * because it is the one timer of the runtime limits, started and stopped
 * with the control thread's loop.
 */
#include "control/limits_table.h"

#define TICK_MS 1000

static void tick_cb(uv_timer_t *h)
{
    struct sv_limits *lim = h->data;
    int64_t t = sv_limits_now_ms(lim->s);
    sv_limits_time_out(lim, t);
    pthread_mutex_lock(&lim->lock);
    if (t >= lim->next_expiry_ms)
        sv_limits_publish(lim); /* an override expired: its rule is back */
    pthread_mutex_unlock(&lim->lock);
    if (sd_engine_uses_redis(lim->s->engine)) {
        sv_limits_sync(lim);
        sv_limits_purge(lim, t);
    }
}

int sv_limits_start(sv_worker *control)
{
    struct sv_limits *lim = control->server->limits;
    lim->control = control;
    sv_limits_keys(lim);
    uv_timer_init(&control->loop, &lim->tick);
    lim->tick.data = lim;
    uv_timer_start(&lim->tick, tick_cb, 100, TICK_MS);
    lim->ticking = 1;
    return 0;
}

static void tick_closed_cb(uv_handle_t *h)
{
    (void)h;
}

void sv_limits_stop(sv_worker *control)
{
    struct sv_limits *lim = control->server->limits;
    if (lim->ticking) {
        lim->ticking = 0;
        uv_close((uv_handle_t *)&lim->tick, tick_closed_cb);
    }
}
