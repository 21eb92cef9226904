/*
 * test_controller_recovery.c - the adaptive controller
 * (src/adaptive/controller.c) when the upstream sheds and afterwards: a
 * shedding upstream's 503s are no drained queue, the limit recovers by
 * bounded additive steps no further than the capacity shown, and relaxes
 * to the rule's number whenever the upstream is healthy and the limit
 * does not bind; and the thresholds' settings, bad ones refused.
 */
#include <math.h>

#include "controller_util.h"

/* A controller of base_params warmed at 100/s, then a window where the
 * upstream sheds half of what it is sent (50 failed, 20 past the SLO):
 * the cut, to 27, with a capacity of 50. */
static void shed_cut(ac_state *st, ac_step_out *o)
{
    warm_up(st, 0.040, 100);
    ac_signal w = window(0.040, 100, 0);
    w.errors = 50;
    w.failed = 50;
    w.late = 20;
    ac_step(st, &w, o);
    expect_eq(o->limit, 27);
    expect_eq(llround(st->capacity), 50);
}

/* An upstream that sheds answers as fast as it is sent to, half of them
 * 503s: its failures are no answers that drained a queue.  The cut goes
 * to 90% of its goodput (100 answered, 50 failed, 20 past the SLO: 30),
 * its capacity is the 50 it answered without failing; while it still
 * sheds the limit stays there, and once nothing fails it climbs to 90%
 * of that capacity by steps of at most 25% a window, and no further
 * until a minute after the cut. */
static void shed_503s_are_no_drained_queue(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    shed_cut(&st, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.reason, AC_R_ERRORS);
    ac_signal w;
    for (int i = 0; i < 5; i++) { /* still shedding: no drained queue */
        w = window(0.040, 27, 73);
        w.n = 0;
        w.failed = 10;
        ac_step(&st, &w, &o);
        expect_eq(o.action, AC_HOLD);
        expect_eq(o.limit, 27);
    }
    double last = 27;
    int steps = 0;
    for (int i = 0; i < 8; i++) { /* nothing fails: drained */
        w = window(0.040, last, 100 - last);
        w.n = 0;
        ac_step(&st, &w, &o);
        expect_le(o.limit, llround(1.25 * last));
        steps += o.action == AC_INCREASE;
        last = (double)o.limit;
    }
    expect_eq(o.limit, 45); /* 90% of the 50 */
    expect_ge(steps, 2);
    for (int i = 0; i < 30; i++) { /* calm, binding: below the capacity */
        w = window(0.040, last, 100 - last);
        ac_step(&st, &w, &o);
        expect_eq(o.limit, 45);
    }
    ac_release(&st);
}

/* shed_503s_are_no_drained_queue's node, with two nodes: its own
 * answers showed a capacity of 50, the nodes' mean is 80 (its requests
 * were a small share of the upstream's queue).  Calm and binding, it
 * climbs past 90% of its own reading (45) to 90% of the mean, 72, by
 * steps of at most 25% a window, and no further (a step too small to
 * publish may leave it at 71). */
static void the_nodes_capacity_pooled(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    ac_signal w;
    shed_cut(&st, &o);
    double last = 27;
    for (int i = 0; i < 40; i++) {
        w = window(0.040, last, 100 - last);
        w.n = i % 4 == 3 ? 100 : 0; /* a judgement every 4 windows */
        w.pooled = 80;
        ac_step(&st, &w, &o);
        expect_le(o.limit, llround(1.25 * last));
        last = (double)o.limit;
    }
    expect_ge(o.limit, 70); /* (alone it stopped at 45) */
    expect_le(o.limit, 72);
    ac_release(&st);
}

/* A controller of base_params warmed at 80/s, then a median twice its
 * baseline with every request answered: cut to 90% of them, 72. */
static void cut_with_no_queue(ac_state *st)
{
    ac_step_out o;
    warm_up(st, 0.040, 80);
    ac_signal w = window(0.080, 80, 0);
    ac_step(st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 72);
}

/* After a cut with no queue (a ceiling, no capacity known), calm and
 * binding, the limit climbs by additive steps of 5% of the rule's
 * number, 5 a window, not 5% of a limit that was cut; once it serves
 * calmly the rate that overloaded it (80), that overload said nothing of
 * its capacity and the surge's quarter steps go on, 25% a window at most. */
static void additive_recovery(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    ac_signal w;
    cut_with_no_queue(&st);
    double last = 72;
    int64_t want[] = {72, 72, 72, 72, 72, 77, 82};
    for (size_t i = 0; i < 14; i++) {
        w = window(0.040, last, 150 - last);
        ac_step(&st, &w, &o);
        if (i < sizeof(want) / sizeof(want[0]))
            expect_eq_at(o.limit, want[i], "window %zu", i);
        if (i == 5 || i == 6)
            expect_eq(o.reason, AC_R_RECOVER);
        expect_le(o.limit, llround(1.25 * last));
        last = (double)o.limit;
    }
    expect_ge(o.limit, 140);
    ac_release(&st);
}

/* Steps w until the controller relaxes, most windows at most: how many
 * it took, or -1. */
static int until_relax(ac_state *st, ac_signal w, int most, ac_step_out *o)
{
    for (int i = 1; i <= most; i++) {
        ac_step(st, &w, o);
        if (o->action == AC_RELAX)
            return i;
    }
    return -1;
}

static void relax_when_idle(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    ac_signal w = window(0.040, 10, 0);
    w.n = 25;
    cut_with_no_queue(&st);
    /* 10 per second against 72: idle; 30 windows later back toward 100,
     * 25% a window at most. */
    expect_eq(until_relax(&st, w, 40, &o), 30);
    expect_eq(o.reason, AC_R_IDLE);
    expect_eq(o.limit, 90);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_RELAX);
    expect_eq(o.limit, 100);
    ac_release(&st);
}

/* Healthy and not binding, the limit relaxes to the rule's number
 * whatever the demand against it: 60/s under a limit of 61 (not under
 * half of it) is idle too; a window that binds, or an upstream shedding,
 * starts the count again. */
static void relax_whatever_the_demand(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 80);
    ac_signal w = window(0.080, 68, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 61);
    int relaxed_at = -1;
    for (int i = 1; i <= 40 && relaxed_at < 0; i++) {
        w = window(0.040, 60, 0);
        if (i == 10) { /* binds once */
            w.refused = 5;
        }
        if (i == 20) { /* sheds: answered, but failures */
            w.failed = 10;
        }
        ac_step(&st, &w, &o);
        if (o.action == AC_RELAX)
            relaxed_at = i;
    }
    expect_eq(relaxed_at, -1); /* the count began again at window 20 */
    /* 30 after the two windows the shed is seen in */
    expect_eq(until_relax(&st, window(0.040, 60, 0), 30, &o), 11);
    expect_eq(o.action, AC_RELAX);
    expect_eq(o.limit, 83); /* 66 (the binding window raised it) + 25% */
    ac_release(&st);
}

/* The traffic stops right after a cut: no judgement comes to say the
 * upstream is well again, and none is needed; 30 windows with no traffic
 * at all relax the limit as any healthy ones would. */
static void relax_with_no_traffic(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    cut_with_no_queue(&st);
    expect_eq(until_relax(&st, (ac_signal){0}, 40, &o), 30);
    ac_release(&st);
}

/* Idle after the limit rose past the rule's number (to its max, 112):
 * down by 5% a window to exactly the rule's number, the last step of
 * under 2% published too (it was not: 112 -> 106 -> 101 stayed at 101,
 * an override for good). */
static void relax_from_above_reaches_the_base(void **state)
{
    (void)state;
    ac_params p = base_params;
    p.max = 112;
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &p), 0);
    int64_t in_force = 100;
    for (int i = 0; i < 60; i++) {
        ac_signal w = window(0.040, (double)in_force, i < 10 ? 0 : 60);
        w.in_force = (double)in_force;
        ac_step(&st, &w, &o);
        in_force = o.limit;
    }
    expect_eq(in_force, 112);
    int64_t published[4];
    int n = 0;
    for (int i = 1; i <= 40; i++) {
        ac_signal w = window(0.040, 5, 0);
        w.n = 25;
        w.in_force = (double)in_force;
        ac_step(&st, &w, &o);
        if (o.publish && n < 4)
            published[n++] = o.limit;
        in_force = o.limit;
    }
    expect_eq(n, 3);
    expect_eq(published[0], 106);
    expect_eq(published[1], 101);
    expect_eq(published[2], 100);
    expect_eq(o.limit, 100);
    ac_release(&st);
}

/* Every answer 8x slower (5 -> 40 ms), nothing queued, far within the
 * SLO: one cut on the gradient, to 90% of what was answered; the next
 * judgement finds the median where it was (the cut did not help), so
 * the slower speed is the upstream's own and becomes the baseline, and
 * with demand above the limit it climbs back to it: the ceiling of a
 * cut that was for no load is forgotten. */
static void slower_without_a_queue_is_its_own_speed(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.005, 100);
    ac_signal w = window(0.040, 100, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.reason, AC_R_LATENCY);
    expect_eq(o.limit, 90);
    double last = 90;
    int cuts = 0, raised_at = -1;
    for (int i = 0; i < 20; i++) {
        w = window(0.040, last, 180 - last);
        ac_step(&st, &w, &o);
        cuts += o.action == AC_DECREASE;
        if (o.action == AC_INCREASE && raised_at < 0)
            raised_at = i;
        expect_le(o.limit, llround(1.25 * last));
        expect_ge(o.limit, 90);
        last = (double)o.limit;
    }
    expect_eq(cuts, 0);
    expect_eq(llround(st.baseline * 1000), 40);
    expect_ge(raised_at, 0);
    expect_le(raised_at, 8);
    expect_ge(o.limit, 175); /* the demand, 180, met */
    ac_release(&st);
}

static void bad_params(void **state)
{
    (void)state;
    ac_state st;
    ac_params p = base_params;
    p.min = 0;
    expect_eq(ac_init(&st, &p), -1);
    p = base_params;
    p.max = 10;
    expect_eq(ac_init(&st, &p), -1);
    p = base_params;
    p.season = 10;
    p.horizon = 0;
    expect_eq(ac_init(&st, &p), -1);
    /* The thresholds: shares in (0, 1], 0 the default (the pointers are
     * into p, set afresh from base_params each time). */
    double *shares[] = {&p.raise_step, &p.raise_max, &p.capacity_share,
                        &p.error_rate};
    for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++) {
        p = base_params;
        *shares[i] = -0.1;
        expect_eq(ac_init(&st, &p), -1);
        *shares[i] = 1.5;
        expect_eq(ac_init(&st, &p), -1);
    }
    p = base_params;
    p.relax_windows = 2000000;
    expect_eq(ac_init(&st, &p), -1);
    p = base_params;
    p.base = 1000; /* clamped to max */
    expect_eq(ac_init(&st, &p), 0);
    expect_eq(st.published, 250);
    /* The defaults of docs/adaptive.md, "Settings". */
    expect_eq(llround(st.p.raise_step * 100), 5);
    expect_eq(llround(st.p.raise_max * 100), 25);
    expect_eq(llround(st.p.capacity_share * 100), 90);
    expect_eq(llround(st.p.error_rate * 100), 2);
    expect_eq(st.p.relax_windows, 30);
    ac_release(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shed_503s_are_no_drained_queue),
        cmocka_unit_test(the_nodes_capacity_pooled),
        cmocka_unit_test(additive_recovery),
        cmocka_unit_test(relax_when_idle),
        cmocka_unit_test(relax_whatever_the_demand),
        cmocka_unit_test(relax_with_no_traffic),
        cmocka_unit_test(relax_from_above_reaches_the_base),
        cmocka_unit_test(slower_without_a_queue_is_its_own_speed),
        cmocka_unit_test(bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
