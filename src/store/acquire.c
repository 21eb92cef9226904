/*
 * acquire.c - sl_acquire(): a blocking check for embedding programs.  It
 * is a loop around sl_check() that sleeps each refusal's retry_after, so
 * it adds nothing to the decision path and decides exactly as sl_check()
 * does.  It is the library's one call that reads a clock and sleeps, and
 * both go through an sl_waiter so that tests run it on manual time.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <time.h>

#include "sluice.h"

static sl_nanos default_now(void *ctx)
{
    (void)ctx;
    return sl_clock_realtime();
}

static void default_sleep(void *ctx, sl_nanos ns)
{
    (void)ctx;
    struct timespec ts = {(time_t)(ns / SL_NS_PER_SEC),
                          (long)(ns % SL_NS_PER_SEC)};
    /* A signal cuts the sleep short: the loop then checks early, which
     * is harmless (a refusal sleeps again). */
    nanosleep(&ts, NULL);
}

int sl_acquire(sl_store *store, const sl_limit *limit, const void *key,
               size_t key_len, int64_t cost, sl_nanos max_wait,
               const sl_waiter *w, sl_decision *out)
{
    if (max_wait < 0)
        return SL_EINVAL;
    sl_nanos (*now)(void *) = w && w->now ? w->now : default_now;
    void (*sleep)(void *, sl_nanos) = w && w->sleep ? w->sleep : default_sleep;
    void *ctx = w ? w->ctx : NULL;
    sl_nanos start = now(ctx);
    for (;;) {
        sl_nanos t = now(ctx);
        int rc = sl_check(store, limit, key, key_len, cost, t, out);
        if (rc != 0 || out->allowed || out->retry_after < 0)
            return rc;
        /* A clock set back counts as no time passed. */
        sl_nanos waited = t > start ? t - start : 0;
        if (waited > max_wait || out->retry_after > max_wait - waited)
            return 0;
        sleep(ctx, out->retry_after);
    }
}
