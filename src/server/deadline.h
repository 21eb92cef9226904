/*
 * deadline.h - a timeout moved or cleared often and fired rarely.
 */
#ifndef SL_SRV_DEADLINE_H
#define SL_SRV_DEADLINE_H

#include <stdint.h>
#include <uv.h>

/* deadline.c: a timeout moved or cleared often and fired rarely.  The
 * timer is the first member, so a handle pointer is a deadline pointer;
 * its `data` is the owner's.  `expired` runs once the deadline passes
 * (not when the timer merely fires early). */
typedef struct sl_deadline {
    uv_timer_t timer;
    uint64_t at;  /* loop time (ms) it expires; 0: none */
    uint64_t due; /* loop time the timer is armed for */
    uv_timer_cb expired;
} sl_deadline;

void sl_deadline_init(uv_loop_t *loop, sl_deadline *d, uv_timer_cb expired);
void sl_deadline_set(sl_deadline *d, uint64_t timeout_ms);
void sl_deadline_clear(sl_deadline *d);

#endif
