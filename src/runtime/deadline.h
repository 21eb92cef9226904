/*
 * deadline.h - a timeout moved or cleared often and fired rarely.
 */
#ifndef SV_DEADLINE_H
#define SV_DEADLINE_H

#include <stdint.h>
#include <uv.h>

/* deadline.c: a timeout moved or cleared often and fired rarely.  The
 * timer is the first member, so a handle pointer is a deadline pointer;
 * its `data` is the owner's.  `expired` runs once the deadline passes
 * (not when the timer merely fires early). */
typedef struct sv_deadline {
    uv_timer_t timer;
    uint64_t at;  /* loop time (ms) it expires; 0: none */
    uint64_t due; /* loop time the timer is armed for */
    uv_timer_cb expired;
} sv_deadline;

void sv_deadline_init(uv_loop_t *loop, sv_deadline *d, uv_timer_cb expired);
void sv_deadline_set(sv_deadline *d, uint64_t timeout_ms);
void sv_deadline_clear(sv_deadline *d);

#endif
