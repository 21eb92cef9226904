/*
 * breaker.c - the circuit breaker of a thread's Redis, as pure state: the
 * connection itself is the breaker (redis_async.c).  After `threshold`
 * consecutive failed commands, or a lost connection, it opens: checks go
 * to the failure policy at once, with no I/O.  After a backoff (50 ms,
 * doubling to 2 s) a new connection's handshake is the half-open probe;
 * its success closes the breaker and resets the backoff.
 */
#include "decision/layer.h"

void sd_breaker_init(sd_breaker *b, int threshold)
{
    *b = (sd_breaker){.state = SD_DOWN,
                      .threshold = threshold > 0 ? threshold : 1,
                      .backoff_ms = SD_BACKOFF_MIN_MS};
}

int sd_breaker_failure(sd_breaker *b)
{
    return b->state == SD_UP && ++b->failures >= b->threshold;
}

void sd_breaker_success(sd_breaker *b)
{
    b->failures = 0;
}

uint64_t sd_breaker_open(sd_breaker *b)
{
    uint64_t wait = b->backoff_ms;
    b->state = SD_DOWN;
    b->failures = 0;
    b->backoff_ms = wait * 2 > SD_BACKOFF_MAX_MS ? SD_BACKOFF_MAX_MS : wait * 2;
    return wait;
}

void sd_breaker_probing(sd_breaker *b)
{
    b->state = SD_CONNECTING;
}

void sd_breaker_close(sd_breaker *b)
{
    b->state = SD_UP;
    b->failures = 0;
    b->backoff_ms = SD_BACKOFF_MIN_MS;
}
