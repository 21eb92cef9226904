/*
 * test_controller_loop.c - the adaptive controller (src/adaptive/controller.c)
 * in a closed loop with the lab's target B (src/lab/queue.c: 8 servers,
 * exponential service of 40 ms, a FIFO of 200 and 503 past it): two
 * proxies' controllers judging as src/proxy/control.c does (200 answers
 * or 10 windows, or fewer ac_alarm finds alarming; the answers dropped
 * when the controller restarts them), a token bucket at the lower of
 * their proposals shared by both, Poisson arrivals.  B's service turns
 * 3x slower (capacity 67 r/s) for 30 s and then recovers: the lab's s4
 * "degraded B", 1 ms steps, deterministic for a seed.
 *
 * What it asserts, over 10 seeds each: B is protected (no request shed,
 * its p99 under the lab's bound in nearly every second) and the limit
 * follows B's capacity down and back up, so that demand is served as far
 * as B can serve it: with demand under the degraded capacity most of it
 * is served throughout, and after B recovers the limit is back within a
 * judgement or two.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "adaptive/controller.h"
#include "lab/queue.h"
#include "lab/rng.h"
#include "sim_quantile.h"

#define JUDGE_ANSWERS 200
#define JUDGE_WINDOWS 10
#define MAX_REQUESTS 100000
#define MAX_LAT 20000

typedef struct node {
    ac_state st;
    double lat[MAX_LAT]; /* the answers gathered, seconds */
    size_t nlat;
    uint64_t shed, allowed, refused, answered;
    uint64_t shed_window, late; /* this window's sheds, answers past the SLO */
    int windows;
    int64_t published;
} node;

typedef struct loop {
    node nd[2];
    lb_queue *b;
    int64_t sent_at[MAX_REQUESTS];
    unsigned char node_of[MAX_REQUESTS];
    int64_t svc_end[8];
    uint64_t svc_id[8];
    int nsvc;
    double sec_lat[MAX_LAT];
    size_t sec_n;
} loop;

/* One phase's figures: demand and answers summed, B's sheds, and the
 * seconds B's p99 passed the lab's bound (2.2 x its idle p99). */
typedef struct phase {
    double demand, served, shed, late_seconds, seconds;
} phase;

static void answer(loop *l, uint64_t id, int64_t end)
{
    node *n = &l->nd[l->node_of[id % MAX_REQUESTS]];
    double s = (double)(end - l->sent_at[id % MAX_REQUESTS]) / 1e9;
    if (n->nlat < MAX_LAT)
        n->lat[n->nlat++] = s;
    if (l->sec_n < MAX_LAT)
        l->sec_lat[l->sec_n++] = s;
    n->answered++;
    n->late += s > 0.3; /* the SLO of run()'s params */
}

/* Node k's window: its signal (the cluster's rates: its own times two),
 * judged as control.c judges, and its proposal. */
static void window(loop *l, int k)
{
    node *n = &l->nd[k];
    double s50 = 0, s99 = 0;
    ac_signal sig = {.accepted = 2.0 * (double)n->allowed,
                     .refused = 2.0 * (double)n->refused,
                     .answered = 2.0 * (double)(n->answered + n->shed_window),
                     .failed = 2.0 * (double)n->shed_window,
                     .late = 2.0 * (double)n->late};
    n->allowed = n->refused = n->answered = n->late = n->shed_window = 0;
    size_t got = n->nlat;
    if (got > 0)
        s50 = quantile(n->lat, got, 0.5);
    if (++n->windows >= JUDGE_WINDOWS || got >= JUDGE_ANSWERS ||
        ac_alarm(&n->st, (double)got, s50)) {
        s99 = quantile(n->lat, got, 0.99);
        sig.n = (double)got;
        sig.s50 = s50;
        sig.s99 = s99;
        sig.errors = (double)n->shed;
        n->nlat = 0;
        n->shed = 0;
        n->windows = 0;
    }
    sig.in_force =
        (double)(l->nd[0].published < l->nd[1].published ? l->nd[0].published
                                                         : l->nd[1].published);
    ac_step_out o;
    ac_step(&n->st, &sig, &o);
    n->published = o.limit;
    if (o.restart) {
        n->nlat = 0;
        n->shed = 0;
        n->windows = 0;
    }
}

/* demand r/s; B degraded from 120 s to 150 s (two seasons of the
 * forecast before); phases: the 30 s before, the 30 s degraded, the 60 s
 * after. */
static void run(loop *l, double demand, int fixed_window, uint64_t seed,
                phase ph[3])
{
    const ac_params p = {.base = 100,
                         .min = 25,
                         .max = 180,
                         .period_s = 1,
                         .slo_p99_s = 0.3,
                         .season = 60,
                         .horizon = 3};
    memset(l, 0, sizeof(*l));
    memset(ph, 0, 3 * sizeof(*ph));
    for (int k = 0; k < 2; k++) {
        expect_eq(ac_init(&l->nd[k].st, &p), 0);
        l->nd[k].published = 100;
    }
    l->b = lb_queue_new(8, 200, 40000000, seed);
    expect_cmp(l->b, !=, NULL);
    lb_rng rng;
    lb_rng_init(&rng, seed, 77);
    double tokens = 20;
    int64_t refilled = 0, next = 0, ms = 1000000;
    uint64_t ids = 0, sec_demand = 0, sec_served = 0, sec_shed = 0;
    for (int64_t t = 0; t < 210 * 1000 * ms; t += ms) {
        if (t == 120000 * ms)
            lb_queue_set_mean(l->b, 120000000);
        if (t == 150000 * ms)
            lb_queue_set_mean(l->b, 40000000);
        for (int i = 0; i < l->nsvc;) { /* B's departures */
            if (l->svc_end[i] > t) {
                i++;
                continue;
            }
            int64_t end = l->svc_end[i], s;
            uint64_t id;
            answer(l, l->svc_id[i], end);
            sec_served++;
            if (lb_queue_depart(l->b, &id, &s)) {
                l->svc_id[i] = id;
                l->svc_end[i] = end + s;
            } else {
                l->nsvc--;
                l->svc_id[i] = l->svc_id[l->nsvc];
                l->svc_end[i] = l->svc_end[l->nsvc];
            }
        }
        double in_force = (double)(l->nd[0].published < l->nd[1].published
                                       ? l->nd[0].published
                                       : l->nd[1].published);
        for (; next <= t;
             next += (int64_t)(-log(lb_rng_unit(&rng)) / demand * 1e9)) {
            uint64_t id = ids++;
            node *n = &l->nd[id & 1];
            if (!fixed_window)
                tokens = fmin(20, tokens + in_force *
                                               (double)(next - refilled) / 1e9);
            else if (next / (1000 * ms) != refilled / (1000 * ms))
                tokens = in_force; /* a second's worth at its start */
            refilled = next;
            sec_demand++;
            if (tokens < 1) {
                n->refused++;
                continue;
            }
            tokens -= 1;
            n->allowed++;
            l->sent_at[id % MAX_REQUESTS] = next;
            l->node_of[id % MAX_REQUESTS] = (unsigned char)(id & 1);
            int64_t s;
            int r = lb_queue_arrive(l->b, id, &s);
            if (r == LB_Q_SERVE) {
                l->svc_id[l->nsvc] = id;
                l->svc_end[l->nsvc++] = next + s;
            } else if (r == LB_Q_SHED) {
                n->shed++;
                n->shed_window++;
                sec_shed++;
            }
        }
        if (t > 0 && t % (1000 * ms) == 0)
            window(l, 0);
        if (t > 500 * ms && t % (1000 * ms) == 500 * ms)
            window(l, 1);
        if (t > 0 && t % (1000 * ms) == 0) {
            int64_t sec = t / (1000 * ms);
            int k = sec <= 120 ? 0 : sec <= 150 ? 1 : 2;
            if (sec > 90) {
                double bound = 2.2 * log(100) * (k == 1 ? 0.120 : 0.040);
                ph[k].demand += (double)sec_demand;
                ph[k].served += (double)sec_served;
                ph[k].shed += (double)sec_shed;
                ph[k].late_seconds +=
                    quantile(l->sec_lat, l->sec_n, 0.99) > bound ||
                    sec_shed > 0;
                ph[k].seconds++;
            }
            l->sec_n = 0;
            sec_demand = sec_served = sec_shed = 0;
        }
    }
    lb_queue_free(l->b);
    for (int k = 0; k < 2; k++)
        ac_release(&l->nd[k].st);
}

/* What a case asks of 10 seeds: the share of demand served before B
 * degrades, while it is slow and in the minute after (at least), B's
 * sheds over the 10 runs and the mean seconds past its bound while slow
 * (at most). */
typedef struct want {
    double before, slow, after, shed, late;
} want;

static void ten_seeds(double demand, int fixed_window, const want *w)
{
    loop *l = malloc(sizeof(*l));
    expect_cmp(l, !=, NULL);
    phase sum[3] = {0};
    for (uint64_t seed = 1; seed <= 10; seed++) {
        phase ph[3];
        run(l, demand, fixed_window, seed, ph);
        for (int k = 0; k < 3; k++) {
            sum[k].demand += ph[k].demand;
            sum[k].served += ph[k].served;
            sum[k].shed += ph[k].shed;
            sum[k].late_seconds += ph[k].late_seconds;
        }
    }
    double served[3], late[3], shed = 0;
    for (int k = 0; k < 3; k++) {
        served[k] = 100 * sum[k].served / sum[k].demand;
        late[k] = sum[k].late_seconds / 10;
        shed += sum[k].shed;
    }
    print_message("demand %.0f/s%s: served %.1f%% before, %.1f%% degraded, "
                  "%.1f%% after; B shed %.0f; seconds past B's bound %.1f / "
                  "%.1f / %.1f\n",
                  demand, fixed_window ? " (fixed window)" : "", served[0],
                  served[1], served[2], shed, late[0], late[1], late[2]);
    free(l);
    /* (In tenths: expect_cmp compares integers.) */
    expect_ge(10 * served[0], 10 * w->before);
    expect_ge(10 * served[1], 10 * w->slow);
    expect_ge(10 * served[2], 10 * w->after);
    expect_le(shed, w->shed);
    expect_le(10 * late[1], 10 * w->late);
}

/* (The cases over B's degraded capacity serve 5-6 points less while B is
 * slow than a controller that cut from all of B's answers did, by
 * design: degraded, B's own p99 at idle, 550 ms, is past the 300 ms SLO,
 * so about 8% of its answers are not goodput even without a queue, and
 * the cut goes to 90% of its goodput.  B spends as many or fewer seconds
 * past its bound in exchange: 1.0 against 1.5 at 82/s, 4.0 against 5.8
 * at 130/s.  In the minute after at 130/s, 87% against 90%: the limit
 * climbs back 25% a window at most.) */

/* Demand (60/s) under B's degraded capacity (67/s), B at 90% of it: a
 * cut no deeper than 90% of what B answered serves most of it.  (The
 * sixth session's controller, which cut by the gradient alone: 73% served
 * while B was slow, 91% in the minute after.) */
static void demand_under_the_degraded_capacity(void **state)
{
    (void)state;
    ten_seeds(60, 0, &(want){.before = 99, .slow = 80, .after = 94, .late = 1});
}

/* Demand (82/s, the lab's s4) over B's degraded capacity: the queue the
 * overload built drains, the limit goes back to what B answered, and B's
 * slower speed becomes the baseline instead of a cut to min; after B
 * recovers the limit is back at once.  (Before: 61% served while B was
 * slow, 82% in the minute after, 3.1 seconds past B's bound.) */
static void demand_over_the_degraded_capacity(void **state)
{
    (void)state;
    ten_seeds(82, 0, &(want){.before = 99, .slow = 60, .after = 88, .late = 3});
}

/* Demand (130/s) twice B's degraded capacity: the queue builds faster
 * than 200 answers come, and B's FIFO of 200 overflows unless the
 * controller judges the first answers that are far too slow at once
 * (ac_alarm).  (Before: 410 requests shed in 10 runs, 12.7 seconds past
 * B's bound.) */
static void a_fast_overload_is_judged_early(void **state)
{
    (void)state;
    ten_seeds(
        130, 0,
        &(want){.before = 95, .slow = 40, .after = 80, .shed = 20, .late = 7});
}

/* The lab's s4 demand through a fixed window, which lets each second's
 * requests in at its start: B's median under the clumps is twice its
 * median under the bucket's smooth flow, the alarm fires on it while B is
 * slow, and a cut while the queue drains must not lose the rate to go
 * back to.  (Before: 59% served while B was slow, 64% in the minute
 * after.) */
static void clumps_of_a_fixed_window(void **state)
{
    (void)state;
    ten_seeds(82, 1, &(want){.before = 99, .slow = 58, .after = 84, .late = 3});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demand_under_the_degraded_capacity),
        cmocka_unit_test(demand_over_the_degraded_capacity),
        cmocka_unit_test(a_fast_overload_is_judged_early),
        cmocka_unit_test(clumps_of_a_fixed_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
