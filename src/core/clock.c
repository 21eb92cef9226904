/*
 * clock.c - the two clocks a caller may want.  The decision path never
 * calls these: a server reads the clock once per loop tick and passes the
 * value down, which keeps cache misses of many decisions overlapping.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "sluice.h"

static sl_nanos read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (sl_nanos)ts.tv_sec * SL_NS_PER_SEC + ts.tv_nsec;
}

sl_nanos sl_clock_realtime(void)
{
    return read_clock(CLOCK_REALTIME);
}

sl_nanos sl_clock_monotonic(void)
{
    return read_clock(CLOCK_MONOTONIC);
}
