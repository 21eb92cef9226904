/*
 * controller_util.h - what the adaptive controller's unit tests
 * (test_controller.c, test_controller_recovery.c) share: the parameters
 * of a rule of 100/s, hand-made windows, a warm-up.  Static: each test
 * program includes it once.
 */
#ifndef SL_TEST_CONTROLLER_UTIL_H
#define SL_TEST_CONTROLLER_UTIL_H

#include "adaptive/controller.h"
#include "testutil.h"

static const ac_params base_params = {
    .base = 100, .min = 25, .max = 250, .period_s = 1, .slo_p99_s = 0.3};

/* A window of n answers at median s50 (p99 3x it), no errors. */
static inline ac_signal window(double s50, double accepted, double refused)
{
    return (ac_signal){.n = accepted,
                       .s50 = s50,
                       .s99 = 3 * s50,
                       .accepted = accepted,
                       .answered = accepted,
                       .refused = refused};
}

/* The same, with a queue building in the upstream: fewer answers came
 * back than requests went. */
static inline ac_signal queued(double s50, double accepted, double refused,
                        double answered)
{
    ac_signal w = window(s50, accepted, refused);
    w.answered = answered;
    return w;
}

/* A controller of base_params, warmed: ten healthy windows. */
static inline void warm_up(ac_state *st, double s50, double accepted)
{
    ac_step_out o;
    expect_eq(ac_init(st, &base_params), 0);
    for (int i = 0; i < 10; i++) {
        ac_signal w = window(s50, accepted, 0);
        ac_step(st, &w, &o);
        expect_eq(o.action, AC_HOLD);
        expect_eq(o.publish, 0);
    }
}

#endif
