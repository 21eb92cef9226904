/*
 * test_controller.c - the adaptive controller (src/adaptive/controller.c):
 * each of its rules on hand-made windows, then closed loops against a
 * model upstream (a queue whose latency grows as its load nears
 * capacity, and which fails past it): the limit settles under capacity,
 * does not oscillate under a constant load (reversals per minute and the
 * limit's coefficient of variation, docs/adaptive.md "Stability"),
 * and rises ahead of a seasonal peak.  The recovery after a cut, the
 * relax and the settings: test_controller_recovery.c.
 */
#include <math.h>

#include "controller_util.h"

static void decrease_on_gradient(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 80);
    /* The median doubles while a queue builds (60 of 80 answered, three
     * windows): g = 1.25 * 40 / 80 = 0.625 of min(L, accepted) is 50,
     * and 90% of the 60 answered less the 60 queued over 5 s is 42. */
    ac_signal w = queued(0.080, 80, 0, 60);
    w.n = 0;
    for (int i = 0; i < 2; i++)
        ac_step(&st, &w, &o);
    w.n = 80;
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.overload, 1);
    expect_eq(o.publish, 1);
    expect_eq(o.limit, 42);
    ac_release(&st);
    /* Every request answered: no deeper than 90% of them. */
    warm_up(&st, 0.040, 80);
    w = window(0.080, 80, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 72);
    /* 20% slower is within the buffer: no overload. */
    ac_state st2;
    warm_up(&st2, 0.040, 80);
    w = window(0.048, 80, 0);
    ac_step(&st2, &w, &o);
    expect_eq(o.overload, 0);
    expect_eq(o.action, AC_HOLD);
    ac_release(&st);
    ac_release(&st2);
}

static void decrease_on_slo_and_errors(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 100);
    /* p99 just over the 300 ms SLO with a calm median and no queue
     * building: the upstream's own speed, no cut. */
    ac_signal w = window(0.040, 100, 0);
    w.s99 = 0.31;
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(o.overload, 0);
    /* With a queue building (88 of 100 answered): g = 300 / 310 = 0.9 of
     * the limit, 90, or 90% of the goodput (the last window's 88 answers)
     * less the 12 queued over 5 s, 77; twice the SLO: half. */
    w = queued(0.040, 100, 0, 88);
    w.s99 = 0.31;
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.reason, AC_R_SLO);
    expect_eq(o.limit, 77);
    ac_state st2;
    warm_up(&st2, 0.040, 100);
    w.s99 = 0.6;
    ac_step(&st2, &w, &o);
    expect_eq(o.limit, 50);
    ac_release(&st2);
    /* 3% failures, no queue: 0.9 of min(77 in force, 90 served). */
    w = window(0.040, 90, 0);
    w.errors = 3;
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.reason, AC_R_ERRORS);
    expect_eq(o.limit, 69);
    /* Never under min. */
    for (int i = 0; i < 30; i++)
        ac_step(&st, &w, &o);
    expect_eq(o.limit, 25);
    ac_release(&st);
}

/* While the limit binds its algorithm shapes the arrivals (a fixed
 * window's clumps), and the upstream's median under them is a baseline
 * of its own: the first 3 binding judgements, twice as slow as the free
 * baseline, are held (neither cut nor raised) and teach it; then the
 * same median is calm and the limit rises; 1.6x that median cuts by the
 * gradient on it.  The same median with the limit not binding cuts. */
static void clumps_have_their_own_baseline(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 60);
    double lim = 100;
    for (int i = 0; i < 3; i++) {
        ac_signal w = window(0.080, lim, 300 - lim); /* p99 240 ms */
        ac_step(&st, &w, &o);
        expect_eq(o.action, AC_HOLD);
        expect_eq(o.overload, 0);
    }
    int decreases = 0, increases = 0;
    for (int i = 0; i < 20; i++) {
        ac_signal w = window(0.080, lim, 300 - lim);
        ac_step(&st, &w, &o);
        decreases += o.action == AC_DECREASE;
        increases += o.action == AC_INCREASE;
        lim = (double)o.limit;
    }
    expect_eq(decreases, 0);
    expect_ge(increases, 3);
    /* (A queue building: by the gradient, 0.78, not the 90% floor of
     * what was answered.) */
    ac_signal w = queued(0.128, lim, 300 - lim, 0.9 * lim);
    w.s99 = 0.25;
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, (int64_t)llround(lim * 1.25 * 0.080 / 0.128));
    ac_release(&st);

    warm_up(&st, 0.040, 60); /* not binding: the free baseline judges */
    w = window(0.080, 90, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    ac_release(&st);
}

/* Binding from the start at 5 ms (the binding baseline 5 ms too), then
 * the upstream 8x slower while the limit still binds: cut. */
static void slower_while_binding(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &base_params), 0);
    double lim = 100;
    for (int i = 0; i < 20; i++) {
        ac_signal w = window(0.005, lim, 160 - lim);
        ac_step(&st, &w, &o);
        expect_cmp(o.action, !=, AC_DECREASE);
        lim = (double)o.limit;
    }
    /* Half as many answers as requests: the cut goes to 90% of that
     * goodput less the queue over 5 s, under the gradient's half. */
    ac_signal w = queued(0.040, lim, 160 - lim, 0.5 * lim);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, (int64_t)llround(0.9 * 0.5 * lim - 0.5 * lim / 5));
    ac_release(&st);
}

/* A median 30% over the baseline (within 1.5x) is marginal: held once,
 * cut when the next judgement says so too, forgotten when it does not. */
static void marginal_overload_needs_two(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 80);
    ac_signal w = window(0.052, 80, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(o.overload, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, (int64_t)llround(80 * 1.25 * 0.040 / 0.052));
    ac_release(&st);

    warm_up(&st, 0.040, 80);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    ac_signal calm = window(0.040, 80, 0);
    ac_step(&st, &calm, &o); /* the next says no */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD); /* marginal again, once: held */
    ac_release(&st);
}

/* A judgement is of the answers of the windows since the last one: it
 * cuts from the busiest one's accepted rate, not from the last window's
 * (a quiet second after a busy few). */
static void cut_from_the_judged_windows(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 80);
    double busy[] = {70, 90, 60};
    for (int i = 0; i < 3; i++) {
        ac_signal w = window(0.040, busy[i], 0);
        w.n = 0; /* gathering answers */
        ac_step(&st, &w, &o);
    }
    ac_signal w = window(0.080, 30, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 56); /* 0.625 * 90, not 0.625 * 30 */
    ac_release(&st);
}

/* Overloaded at 100, then again at 60 (a degrading upstream, a queue
 * building each time): C_safe, the most the forecast and the climb after
 * a cut may raise to, is 90% of the lower rate, not of the first (and
 * the first time, 90% of what came back: 84 of the 90 served). */
static void c_safe_follows_a_degrading_upstream(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 100);
    /* C_safe at most 90% of the capacity shown: the lesser of the last
     * two windows' answers while the queue builds. */
    ac_signal w = queued(0.120, 100, 0, 80);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq((int64_t)llround(st.capacity), 80);
    expect_eq((int64_t)llround(st.c_safe), 72);
    w = queued(0.120, 60, 0, 48);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq((int64_t)llround(st.capacity), 48);
    expect_eq((int64_t)llround(st.c_safe), 43);
    ac_release(&st);
}

/* After a cut for a building queue the queue drains for a while: an
 * overload judged while it drains (more answers back than requests
 * sent), or one less severe than the one cut for within 10 windows,
 * holds; a worse one with the queue building again cuts again. */
static void a_cut_settles_before_the_next(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 100);
    ac_signal w = queued(0.200, 100, 0, 80);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 50);
    w = queued(0.250, 50, 0, 70); /* worse, but draining */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(o.overload, 1);
    expect_eq(o.limit, 50);
    w = queued(0.300, 50, 0, 40); /* worse, and building again */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 25);
    ac_release(&st);

    warm_up(&st, 0.040, 100);
    w = queued(0.200, 100, 0, 80);
    ac_step(&st, &w, &o);
    w = window(0.120, 50, 0); /* better, not draining, within 10 */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(o.overload, 1);
    ac_release(&st);
}

/* Once the queue a cut was for has drained (as many answers back as
 * requests sent, two windows), the limit goes back to 90% of what the
 * upstream answered while it built, by steps of at most 25% a window,
 * and the answers gathered are dropped; a median still 3x the baseline
 * then, with no queue, is the upstream's own speed (a degraded replica):
 * it becomes the baseline instead of cutting.  Fast again, the old
 * baseline comes back at once, and the limit climbs back to what it
 * served before, 25% a window at most. */
static void a_slower_upstream_is_its_new_baseline(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 100);
    ac_signal w = queued(0.600, 100, 0, 70);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    /* g 0.5 of 100, under 90% of the goodput (70, so 63) less the 30
     * queued over 5 s, 57. */
    expect_eq(o.limit, 50);
    int restored = -1;
    for (int i = 0; i < 10; i++) {
        w = queued(0.120, 50, 0, i < 2 ? 70 : 50); /* drains, then not */
        w.n = 0;
        ac_step(&st, &w, &o);
        if (o.restart) {
            restored = i;
            break;
        }
    }
    /* Two balanced windows, two after the cut: 50 -> 62.5, then the
     * cruise, 90% of the 70 answered while the queue built. */
    expect_eq(restored, 4);
    expect_eq(o.action, AC_INCREASE);
    expect_eq(o.reason, AC_R_DRAINED);
    expect_eq(o.limit, 63);
    w = window(0.120, 63, 0); /* no queue, still 3x slower */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(o.overload, 1);
    expect_eq(o.limit, 63);
    expect_eq(llround(st.baseline * 1000), 120);
    w = window(0.130, 63, 0); /* calm against the new baseline */
    ac_step(&st, &w, &o);
    expect_eq(o.overload, 0);
    expect_eq(o.limit, 63);
    w = window(0.040, 63, 78); /* fast again, demand 141 */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_INCREASE);
    expect_eq(o.reason, AC_R_FAST);
    expect_eq(o.limit, 79); /* toward C_safe before, +25% */
    expect_eq(llround(st.baseline * 1000), 40);
    for (int i = 0; i < 3; i++) { /* binding, between judgements */
        w = window(0.040, (double)o.limit, 141 - (double)o.limit);
        w.n = 0;
        ac_step(&st, &w, &o);
        expect_eq(o.action, AC_INCREASE);
    }
    expect_ge(o.limit, 100);
    ac_release(&st);

    /* With no queue before it, the same slower median is an overload
     * (to 90% of what was answered); if the cut leaves the median within
     * 20% of what it was, it did not help: the upstream is slower. */
    warm_up(&st, 0.040, 100);
    w = window(0.120, 100, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 90);
    w = window(0.110, 90, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(llround(st.baseline * 1000), 110);
    ac_release(&st);
    /* A cut that helped (120 -> 80 ms) settles, the baseline kept. */
    warm_up(&st, 0.040, 100);
    w = window(0.120, 100, 0);
    ac_step(&st, &w, &o);
    w = window(0.080, 90, 0);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_HOLD);
    expect_eq(o.overload, 1);
    expect_eq(llround(st.baseline * 1000), 40);
    ac_release(&st);
}

static void too_few_answers(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 100);
    ac_signal w = window(1.0, 19, 0); /* slow, but 19 answers */
    ac_step(&st, &w, &o);
    expect_eq(o.overload, 0);
    expect_eq(o.action, AC_HOLD);
    ac_release(&st);
}

static void increase_when_binding(void **state)
{
    (void)state;
    ac_state st;
    ac_step_out o;
    warm_up(&st, 0.040, 60);
    /* Binding (refusing 20 of 120) and healthy: +5% a window after three
     * calm windows, at most twice the accepted rate, at most max. */
    int64_t last = 100;
    int increases = 0;
    for (int i = 0; i < 40; i++) {
        ac_signal w = window(0.040, (double)last, 20);
        ac_step(&st, &w, &o);
        if (o.action == AC_INCREASE) {
            increases++;

            expect_eq(o.publish, 1);
            expect_eq(o.limit,
                      (int64_t)llround(fmax(last + 1, last * 1.05)) > 250
                          ? 250
                          : o.limit);
            expect_ge(o.limit, last);
            last = o.limit;
        }
    }
    expect_ge(increases, 15);
    expect_eq(o.limit, 250);
    expect_eq(st.reversals, 0);
    ac_release(&st);
}

/* A crowd of twice the limit on a healthy upstream, unforecast (the
 * forecast on and warmed on a flat demand): each judgement raises the
 * limit by a quarter of the demand it refuses, 100 -> 125 -> 143.75 ...,
 * not by 5%, and the surge does not stop it; once an overload has been
 * seen, 5% steps again. */
static void surge_on_healthy_upstream(void **state)
{
    (void)state;
    ac_params p = base_params;
    p.season = 10;
    p.horizon = 1;
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &p), 0);
    for (int i = 0; i < 30; i++) { /* warm, and three seasons of 60/s */
        ac_signal w = window(0.040, 60, 0);
        ac_step(&st, &w, &o);
    }
    double lim = 100, want[] = {125, 143.75, 157.8125};
    for (int i = 0; i < 3; i++) {
        ac_signal w = window(0.040, lim, 200 - lim); /* demand 200/s */
        ac_step(&st, &w, &o);
        expect_eq(o.action, AC_INCREASE);
        expect_eq(o.limit, (int64_t)llround(want[i]));
        lim = want[i];
    }
    /* An overload, every request answered: a ceiling at 157.8, C_safe
     * 90% of it (142), and a cut to 90% of the judged window's answers
     * (142). */
    ac_signal w = window(0.200, lim, 200 - lim);
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    expect_eq(o.limit, 142);
    lim = (double)o.limit;
    int near = 0;
    for (int i = 0; i < 20 && !near; i++) {
        w = window(0.040, lim, 200 - lim);
        ac_step(&st, &w, &o);
        /* Under C_safe, up to it at once; from there by 5% steps. */
        if (o.action == AC_INCREASE && lim < 142)
            expect_eq(o.limit, 142);
        if (o.action == AC_INCREASE && lim >= 142) {
            expect_eq(o.limit, (int64_t)llround(lim * 1.05));
            near = 1;
        }
        lim = (double)o.limit;
    }
    expect_eq(near, 1);
    ac_release(&st);
}

/* One window of two nodes whose limit in force is the lower of their
 * proposals: node k gets w[k] with that limit in force (w[k].n 0: still
 * gathering answers, not judged); the new limit in force. */
static double two_nodes_step(ac_state node[2], ac_signal w[2], double in_force)
{
    ac_step_out o;
    for (int k = 0; k < 2; k++) {
        w[k].in_force = in_force;
        ac_step(&node[k], &w[k], &o);
    }
    return (double)(node[0].published < node[1].published ? node[0].published
                                                          : node[1].published);
}

/* Two nodes, each with enough answers to judge on every other window (n 0
 * on the others), the limit in force the lower of their proposals: under
 * a surge on a healthy upstream the limit in force rises, each node
 * keeping its proposal between its judgements. */
static void two_nodes_rise_together(void **state)
{
    (void)state;
    ac_state node[2];
    warm_up(&node[0], 0.040, 60);
    warm_up(&node[1], 0.040, 60);
    double in_force = 100;
    for (int t = 0; t < 24; t++) {
        ac_signal w[2];
        for (int k = 0; k < 2; k++) {
            w[k] = window(0.040, in_force, 200 - in_force);
            if (t % 2 != k)
                w[k].n = 0; /* gathering answers: not judged */
        }
        in_force = two_nodes_step(node, w, in_force);
    }
    print_message("two nodes: in force %.0f after 24 windows\n", in_force);
    expect_ge(in_force, 150);
    ac_release(&node[0]);
    ac_release(&node[1]);
}

/* Two nodes judge one overload a windows apart (the limit in force the
 * lower proposal): the second cuts from its own proposal, not from the
 * first's cut, so the limit in force is cut once (0.5 of 100), not twice;
 * then, calm and binding, it is back within a few windows at 90% of the
 * capacity the upstream showed (80 of the 100 answered while its queue
 * built), and stays under it until the probe a minute after the cut. */
static void two_nodes_cut_once_and_recover(void **state)
{
    (void)state;
    ac_state node[2];
    warm_up(&node[0], 0.040, 60);
    warm_up(&node[1], 0.040, 60);
    double in_force = 100;
    for (int k = 0; k < 2; k++) { /* node k judges window k: slow */
        ac_signal w[2];
        for (int j = 0; j < 2; j++) {
            w[j] = queued(j == k ? 0.100 : 0.040, 100, 0, 80);
            if (j != k)
                w[j].n = 0;
        }
        in_force = two_nodes_step(node, w, in_force);
    }
    expect_eq((int64_t)in_force, 50); /* 0.5 * min(100, 100), once */
    int windows = 0;
    while (in_force < 72 && windows < 40) {
        ac_signal w[2] = {window(0.040, in_force, 200 - in_force),
                          window(0.040, in_force, 200 - in_force)};
        in_force = two_nodes_step(node, w, in_force);
        windows++;
    }
    print_message("cut once to 50, back at %.0f in %d windows\n", in_force,
                  windows);
    expect_le(windows, 6);
    for (int t = windows; t < 50; t++) {
        ac_signal w[2] = {window(0.040, in_force, 200 - in_force),
                          window(0.040, in_force, 200 - in_force)};
        in_force = two_nodes_step(node, w, in_force);
    }
    expect_eq(in_force, 72);
    ac_release(&node[0]);
    ac_release(&node[1]);
}

/* The model upstream: capacity 200/s, service 40 ms, many servers: the
 * median stays near the service time until the load nears capacity and
 * then grows sharply (1 + load^8 / (1 - load), the shape of an M/M/c
 * queue's wait with c = 8), the p99 4.6x the median, and load past
 * capacity fails. */
typedef struct plant {
    double capacity, service;
} plant;

static ac_signal plant_window(const plant *pl, double demand, double limit)
{
    double acc = fmin(demand, limit);
    double load = fmin(acc / pl->capacity, 0.98);
    double s50 = pl->service * (1 + pow(load, 8) / (1 - load));
    double failed = acc > pl->capacity ? acc - pl->capacity : 0;
    return (ac_signal){.n = acc,
                       .s50 = s50,
                       .s99 = 4.6 * s50,
                       .errors = failed,
                       .accepted = acc,
                       .answered = acc,
                       .refused = demand - acc};
}

/* A constant demand above what the upstream serves well: the limit
 * settles under capacity and stays: at most 2 reversals a minute, and a
 * coefficient of variation of at most 0.10 after the first minute. */
static void steady_overload_is_stable(void **state)
{
    (void)state;
    plant pl = {200, 0.040};
    ac_params p = base_params;
    p.slo_p99_s = 0; /* the gradient alone */
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &p), 0);
    double limit = 100, sum = 0, sum2 = 0, max_seen = 0;
    int n = 0;
    /* Warm at 60/s, then 300/s for 10 minutes. */
    for (int t = 0; t < 10 * 60 + 10; t++) {
        ac_signal w = plant_window(&pl, t < 10 ? 60 : 300, limit);
        ac_step(&st, &w, &o);
        limit = (double)o.limit;
        if (t == 70)
            st.reversals = 0; /* count from the second minute */
        if (t >= 70) {
            sum += limit;
            sum2 += limit * limit;
            n++;
            max_seen = fmax(max_seen, limit);
        }
    }
    double mean = sum / n, sd = sqrt(fmax(0, sum2 / n - mean * mean));
    print_message("steady: mean limit %.1f, cv %.3f, max %.0f, reversals "
                  "%llu in 9 minutes\n",
                  mean, sd / mean, max_seen, (unsigned long long)st.reversals);
    expect_le(st.reversals, 2 * 9);
    expect_le(sd / mean * 1000, 100);
    expect_le(max_seen, 200);   /* never past capacity */
    expect_ge(mean, 0.4 * 200); /* and not starved */
    ac_release(&st);
}

/* A degraded upstream (service 3x slower) cuts the limit; recovered, the
 * limit comes back up while demand binds. */
static void degrade_and_recover(void **state)
{
    (void)state;
    plant pl = {200, 0.040};
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &base_params), 0);
    double limit = 100;
    for (int t = 0; t < 10; t++) {
        ac_signal w = plant_window(&pl, 60, limit);
        ac_step(&st, &w, &o);
    }
    pl.capacity = 200.0 / 3;
    pl.service = 0.120;
    double lowest = limit;
    for (int t = 0; t < 30; t++) {
        ac_signal w = plant_window(&pl, 120, limit);
        ac_step(&st, &w, &o);
        limit = (double)o.limit;
        lowest = fmin(lowest, limit);
    }
    expect_le(lowest, 200.0 / 3); /* under the degraded capacity */
    pl.capacity = 200;
    pl.service = 0.040;
    int back = -1;
    for (int t = 0; t < 600; t++) {
        ac_signal w = plant_window(&pl, 120, limit);
        ac_step(&st, &w, &o);
        limit = (double)o.limit;
        if (back < 0 && limit >= 100)
            back = t + 1;
    }
    print_message("degraded: lowest %.0f; recovered: back at 100 in %d "
                  "windows\n",
                  lowest, back);
    expect_ge(limit, 100); /* back to at least the rule's number */
    /* Calm at the rates that overloaded it degraded, the ceiling of the
     * degradation is forgotten: quarter steps, not 5% ones. */
    expect_ge(back, 1);
    expect_le(back, 20);
    ac_release(&st);
}

/* A daily-like season of 60 windows with a peak of 180/s for 10: after
 * two seasons the limit is raised before the peak starts, up to what
 * the upstream has proven it serves, and no further. */
static void forecast_raises_before_peak(void **state)
{
    (void)state;
    plant pl = {400, 0.020};
    ac_params p = base_params;
    p.season = 60;
    p.horizon = 5;
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &p), 0);
    double limit = 100;
    int raised_early = 0;
    for (int t = 0; t < 5 * 60; t++) {
        int phase = t % 60;
        double demand = phase >= 40 && phase < 50 ? 180 : 60;
        ac_signal w = plant_window(&pl, demand, limit);
        ac_step(&st, &w, &o);
        limit = (double)o.limit;
        if (t >= 3 * 60 && phase >= 36 && phase < 40 && limit > 110)
            raised_early++;
        expect_le(limit, 250);
    }
    expect_ge(raised_early, 1);
    ac_release(&st);
}

/* The same season, and an overload in the fourth peak: the cut holds
 * for 5 windows; the forecast, which still sees the peak ahead, does not
 * put it back at once (C_safe is 90% of the peak's rate, over the cut). */
static void forecast_waits_after_a_cut(void **state)
{
    (void)state;
    plant pl = {400, 0.020};
    ac_params p = base_params;
    p.season = 60;
    p.horizon = 5;
    ac_state st;
    ac_step_out o;
    expect_eq(ac_init(&st, &p), 0);
    double limit = 100;
    for (int t = 0; t < 3 * 60 + 42; t++) {
        int phase = t % 60;
        double demand = phase >= 40 && phase < 50 ? 180 : 60;
        ac_signal w = plant_window(&pl, demand, limit);
        ac_step(&st, &w, &o);
        limit = (double)o.limit;
    }
    ac_signal w = plant_window(&pl, 180, limit);
    w.s50 = 0.100; /* 5x the service time: cut */
    ac_step(&st, &w, &o);
    expect_eq(o.action, AC_DECREASE);
    double cut = (double)o.limit;
    for (int t = 0; t < 5; t++) {
        w = plant_window(&pl, 180, cut);
        ac_step(&st, &w, &o);
        expect_cmp(o.action, !=, AC_FORECAST);
        expect_le(o.limit, cut);
    }
    ac_release(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decrease_on_gradient),
        cmocka_unit_test(decrease_on_slo_and_errors),
        cmocka_unit_test(clumps_have_their_own_baseline),
        cmocka_unit_test(slower_while_binding),
        cmocka_unit_test(marginal_overload_needs_two),
        cmocka_unit_test(cut_from_the_judged_windows),
        cmocka_unit_test(c_safe_follows_a_degrading_upstream),
        cmocka_unit_test(a_cut_settles_before_the_next),
        cmocka_unit_test(a_slower_upstream_is_its_new_baseline),
        cmocka_unit_test(too_few_answers),
        cmocka_unit_test(increase_when_binding),
        cmocka_unit_test(surge_on_healthy_upstream),
        cmocka_unit_test(two_nodes_rise_together),
        cmocka_unit_test(two_nodes_cut_once_and_recover),
        cmocka_unit_test(steady_overload_is_stable),
        cmocka_unit_test(degrade_and_recover),
        cmocka_unit_test(forecast_raises_before_peak),
        cmocka_unit_test(forecast_waits_after_a_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
