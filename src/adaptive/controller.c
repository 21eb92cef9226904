/*
 * controller.c - the adaptive controller of one limit: the rules of
 * docs/adaptive.md, "The controller", one window at a time.  It is a
 * gradient controller on the upstream's median latency (Netflix's
 * Gradient2, Envoy's adaptive concurrency) with an absolute latency SLO
 * and an error rate as hard signals (AIMD), acting on a rate limit rather
 * than a concurrency, and on the accepted rate rather than the limit
 * (Aperture), so that a limit far above the traffic is not cut by a
 * fraction that changes nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive/controller.h"
#include "adaptive/controller_windows.h"

/* An overload: the median 25% over the baseline (Envoy's buffer), the
 * p99 over the SLO, or more than 2% of answers failures. */
#define GRADIENT_BUFFER 1.25
/* A median within 1.5x the baseline (a gradient of 0.83 or more) is a
 * marginal overload: two judgements in a row cut. */
#define MARGINAL 1.5
/* The binding baseline is the mean of this many binding judgements. */
#define BOUND_WARM 3
/* Fewer answers than this in a window say nothing about the upstream. */
#define MIN_SAMPLES 20
/* A median past 4x the baseline in 50 answers is no sampling error (of
 * 50, the median's relative error is 20%) nor a limit's clumps (the
 * lab's fixed window doubles it): ac_alarm judges it at once. */
#define ALARM_ANSWERS 50
#define ALARM_FACTOR 4.0
/* An increase needs this many windows since the last overload (and a
 * calm judgement) and this many since the last decrease; a limit binds when it
 * refuses 1% of its requests. */
#define CALM_WINDOWS 3
#define DECREASE_HOLD 5
/* A cut takes this long to show (the upstream's queue drains): until
 * then only a worse overload cuts again. */
#define SETTLE_WINDOWS 10
/* Near the last overload's limit, an increase waits this long after a
 * decrease (one probe a minute: at most two reversals a minute under a
 * steady load), and the ceiling is forgotten after this long calm (the
 * upstream may have grown). */
#define PROBE_WINDOWS 60
#define CEILING_NEAR 0.95
#define CEILING_FORGET 300
/* The settings' defaults (docs/adaptive.md, "Settings"). */
#define RAISE_STEP 0.05
#define RAISE_MAX 0.25
#define CAPACITY_SHARE 0.9
#define ERROR_RATE 0.02
#define RELAX_WINDOWS 30
/* At min this long: the baseline is taken afresh (Envoy PR #10647: a
 * baseline that crept up holds the limit at min for good). */
#define AT_MIN_WINDOWS 5
/* Demand past the forecast by 4 sigma for 2 windows is not forecast
 * demand: the forecast waits (a surge, an abuser's or a crowd's, must not
 * teach it to raise the limit ahead of the next); increases, which follow
 * the upstream's health, go on. */
#define ANOMALY_SIGMAS 4.0
#define ANOMALY_WINDOWS 2

const char *ac_action_name(ac_action a)
{
    switch (a) {
    case AC_DECREASE:
        return "decrease";
    case AC_INCREASE:
        return "increase";
    case AC_RELAX:
        return "relax";
    case AC_FORECAST:
        return "forecast";
    default:
        return "hold";
    }
}

const char *ac_reason_name(ac_reason r)
{
    static const char *const names[AC_R_COUNT] = {
        "none",  "latency", "slo",  "errors", "recover",
        "surge", "drained", "fast", "idle",   "forecast"};
    return r < AC_R_COUNT ? names[r] : "none";
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* A setting: its default when 0, and 0 < v <= hi, else -1. */
static double setting(double v, double dflt, double hi)
{
    if (v == 0)
        return dflt;
    return v > 0 && v <= hi ? v : -1;
}

int ac_init(ac_state *st, const ac_params *p)
{
    memset(st, 0, sizeof(*st));
    if (p->min < 1 || p->max < p->min || p->base < 1 || !(p->period_s > 0) ||
        !(p->slo_p99_s >= 0) || (p->season > 0 && p->horizon < 1))
        return -1;
    st->p = *p;
    st->p.raise_step = setting(p->raise_step, RAISE_STEP, 1);
    st->p.raise_max = setting(p->raise_max, RAISE_MAX, 1);
    st->p.capacity_share = setting(p->capacity_share, CAPACITY_SHARE, 1);
    st->p.error_rate = setting(p->error_rate, ERROR_RATE, 1);
    if (st->p.raise_step < 0 || st->p.raise_max < 0 ||
        st->p.capacity_share < 0 || st->p.error_rate < 0 ||
        p->relax_windows > 1000000)
        return -1;
    if (p->relax_windows == 0)
        st->p.relax_windows = RELAX_WINDOWS;
    st->p.base =
        (int64_t)clamp((double)p->base, (double)p->min, (double)p->max);
    st->limit = (double)st->p.base;
    st->published = st->p.base;
    st->c_safe = (double)st->p.base;
    st->since_decrease = DECREASE_HOLD;
    st->calm_since_cut = 1;
    st->last_gradient = 1;
    if (p->season > 0) {
        /* ADAPTIVE.md's parameters: level 0.3, trend 0.01, season 0.3. */
        hw_params hp = {
            .alpha = 0.3, .beta = 0.01, .gamma = 0.3, .season = p->season};
        if (hw_init(&st->hw, &hp) != 0)
            return -1;
    }
    return 0;
}

void ac_release(ac_state *st)
{
    if (st->p.season > 0)
        hw_release(&st->hw);
}

/* Adds x to the mean *m of *n values: how both baselines are learnt. */
static void mean_in(double *m, size_t *n, double x)
{
    *m = (*m * (double)*n + x) / (double)(*n + 1);
    (*n)++;
}

int ac_alarm(const ac_state *st, double n, double s50)
{
    double b = fmax(st->baseline, st->baseline_bound);
    return st->warm >= WARM_WINDOWS && n >= ALARM_ANSWERS &&
           s50 > ALARM_FACTOR * b;
}

/* Feeds this window's demand to the forecast: 1 when it was an anomaly
 * (far above what was forecast for it). */
static int forecast_update(ac_state *st, double demand)
{
    int anomaly = 0;
    if (st->hw.ready)
        anomaly = demand >
                  hw_forecast(&st->hw, 1) + ANOMALY_SIGMAS * hw_sigma(&st->hw);
    hw_update(&st->hw, demand);
    return anomaly;
}

/* Which baseline the median is judged against: the free one, or while
 * the limit binds, the binding one (taken, or being learnt). */
static void judge_baseline(ac_state *st, ac__judgement *j)
{
    /* While the limit binds, its algorithm, not the clients, shapes
     * what reaches the upstream (a fixed window lets a second's worth
     * in at its start), and the upstream's healthy median is that of
     * the limit's clumps: a baseline of its own.  When the first
     * binding judgement is within the free baseline's buffer the
     * algorithm clumps nothing the median sees, and the free baseline
     * is taken; else it is learnt from the first binding judgements,
     * at the limit they found (held meanwhile: not raised, and not
     * cut for a median slower than the free baseline). */
    j->b = &st->baseline;
    j->learning = 0;
    j->steady = !j->saturated && !j->draining; /* (a queue's, not clumps') */
    if (j->bound && j->warm) {
        if (st->warm_bound == 0 && !j->breach && j->steady &&
            j->s50 <= GRADIENT_BUFFER * st->baseline) {
            st->baseline_bound = st->baseline;
            st->warm_bound = BOUND_WARM;
        }
        if (st->warm_bound >= BOUND_WARM)
            j->b = &st->baseline_bound;
        else
            j->learning = j->steady;
    }
}

/* Whether the upstream is overloaded: slow (past the baseline's buffer),
 * marginally so, overloaded, settling after a cut, or found slower. */
static void judge_overload(const ac_state *st, const ac_signal *sig,
                           ac__judgement *j)
{
    j->slow = j->warm && j->s50 > GRADIENT_BUFFER * *j->b;
    /* A median just past the buffer is within what a judgement's
     * sampling error can put there: it cuts when the next judgement
     * says so too. */
    j->marginal = j->slow && !j->breach && j->s50 <= MARGINAL * *j->b;
    j->over =
        j->breach || (j->slow && !j->learning && (!j->marginal || st->suspect));
    /* Soon after a cut, the answers judged are still those of the
     * requests queued before it: an overload less severe than the one
     * cut for is that cut taking effect, and cutting again for it
     * would compound (the lab's degraded B: 114 -> 55 -> 31 -> 28
     * while its queue drained).  Failures past 2% always cut. */
    j->settling = j->over && st->since_decrease < SETTLE_WINDOWS &&
                  j->err <= st->p.error_rate &&
                  (j->draining || (st->cruise > 0 && !j->saturated) ||
                   (j->s50 < st->cut_s50 && sig->s99 < st->cut_s99));
    /* The first judgement after a queue drained and the limit went
     * back to cruise, or after a cut with no queue building that left
     * the median within 20% of what it was: still slower than its
     * baseline with no queue building or draining, the upstream itself is
     * slower (a degraded replica).  That is its baseline now: cutting for
     * it would refuse traffic without making it any faster. */
    j->slower =
        j->slow && j->steady && j->err <= st->p.error_rate &&
        (st->after_drain || (st->after_cut && j->s50 > 0.8 * st->cut_s50));
    j->no_load = j->slower && !st->after_drain;
}

/* The upstream found slower: its median is the baseline now (the one
 * before kept, for when it is fast again), and nothing is slow. */
static void take_slower(ac_state *st, ac__judgement *j)
{
    if (st->baseline_before <= 0)
        st->baseline_before = st->baseline;
    st->baseline = st->baseline_bound = j->s50;
    st->warm_bound = BOUND_WARM;
    j->slow = j->learning = j->marginal = 0;
    /* A cut with no queue building that left the median where it was
     * was for no load: the rate it was judged at says nothing of the
     * capacity, and a ceiling kept from it would hold the limit under
     * the demand of an upstream that serves it within the SLO. */
    if (j->no_load) {
        st->ceiling = 0;
        st->c_safe = fmax(st->c_safe, st->c_safe_before);
    }
}

/* What the next judgements need of this one: a marginal overload waiting
 * for its confirmation, a hold (no raise), and the baselines learnt in
 * the warm-up and while the limit binds. */
static void keep_judgement(ac_state *st, const ac__judgement *j)
{
    st->suspect = j->marginal && !j->learning && !j->over;
    st->held = (j->slow || j->learning || j->settling) && !j->over;
    /* (Not from a queue's latency: one building, draining, or that a
     * cut is draining, is no healthy median.) */
    if (!j->warm && !j->over && j->steady && st->cruise <= 0)
        mean_in(&st->baseline, &st->warm, j->s50);
    if (j->learning && !j->breach)
        mean_in(&st->baseline_bound, &st->warm_bound, j->s50);
}

/* The cut's gradient: the median's (1.25 b / s50, in [0.5, 1]), the
 * SLO's and the failures', whichever cuts most. */
static double cut_gradient(const ac_params *p, const ac_signal *sig,
                           const ac__judgement *j)
{
    double g = 1;
    if (j->slow && j->s50 > 0)
        g = clamp(GRADIENT_BUFFER * *j->b / j->s50, 0.5, 1);
    /* Past the SLO, by how far past it; failures, by 10%. */
    if (j->late)
        g = fmin(g, clamp(p->slo_p99_s / sig->s99, 0.5, 0.9));
    if (j->err > p->error_rate)
        g = fmin(g, 0.9);
    return g;
}

/* An overload: the limit is cut (by the gradient, from what the upstream
 * was given; saturated, to its goodput less what drains its queue),
 * C_safe, the capacity and the ceiling are taken from it.  Returns the
 * new limit. */
static double cut(ac_state *st, const ac_signal *sig, const ac__judgement *j,
                  ac_step_out *out)
{
    const ac_params *p = &st->p;
    double served = j->served, answered = j->ok_now;
    double g = cut_gradient(p, sig, j);
    out->gradient = g;
    /* From the node's own proposal, not the limit in force: the
     * nodes judge one overload a few windows apart, and each
     * cutting (and taking as its ceiling) what another had
     * already cut would compound. */
    double own = st->limit; /* at least min: ac_init set it */
    if (!st->overloaded) {
        if (st->baseline_before <= 0) {
            st->c_safe_before = st->c_safe;
            st->capacity_before = st->capacity;
        }
        st->c_safe = 0.9 * served; /* what it served, less 10% */
        st->ceiling = own;
    } else {
        /* Overloaded again: an upstream that degraded serves less
         * at every judgement, and a C_safe of what it served
         * before would have the forecast raise the limit back
         * into the overload after each cut. */
        st->c_safe = fmin(st->c_safe, 0.9 * served);
    }
    st->over_rate = served;
    double from = served < own ? served : own;
    double drain = fmax(j->growth, 0) * p->period_s / DRAIN_S;
    double next = g * from;
    if (j->saturated) {
        /* Saturated (a queue building, or shedding), the upstream
         * serves all it can: what it answered without failing is its
         * capacity, and the limit goes back to its share once the queue
         * has drained (the cruise).  The cut is to its goodput, what it
         * served well: the deeper its queue, the less of it comes back
         * within the SLO, and the deeper the cut; less what drains the
         * queue in DRAIN_S. */
        if (j->full_now || st->capacity <= 0)
            st->capacity = j->ok_now;
        st->drained_sum = 0;
        st->drained_n = 0;
        st->cruise = p->capacity_share * st->capacity;
        next = fmin(next, p->capacity_share * j->good - drain);
        st->c_safe = fmin(st->c_safe, st->cruise);
        out->reason = j->err > p->error_rate ? AC_R_ERRORS
                      : j->late              ? AC_R_SLO
                                             : AC_R_LATENCY;
    } else {
        /* No cut goes deeper than 90% of what it answered, less what
         * drains a queue that built in DRAIN_S (a median far past the
         * baseline with every request answered is no reason to refuse
         * half of them). */
        double q = fmin(0.9 * answered, 0.9 * from) - drain;
        out->reason = j->err > p->error_rate ? AC_R_ERRORS : AC_R_LATENCY;
        next = fmax(next, q);
        st->after_cut = 1;
    }
    st->calm_since_cut = 0;
    st->rising = 0;
    st->cut_s50 = j->s50;
    st->cut_s99 = sig->s99;
    out->action = AC_DECREASE;
    st->calm = 0;
    st->since_decrease = 0;
    return next;
}

/* Fast again after it was found slower: its old baseline back, the
 * ceiling and capacity of its slow days forgotten (the capacity it
 * showed before back), and the limit back toward what it served before
 * (as far as the demand goes; the raise is bounded in ac_step).  Returns
 * that limit, or 0. */
static double fast_again(ac_state *st, const ac__judgement *j,
                         const ac__window *w)
{
    double back = 0;
    if (!st->held && st->baseline_before > 0 &&
        j->s50 <= GRADIENT_BUFFER * st->baseline_before) {
        st->baseline = st->baseline_bound = st->baseline_before;
        st->baseline_before = 0;
        st->ceiling = 0;
        st->c_safe = fmax(st->c_safe, st->c_safe_before);
        st->capacity = st->capacity_before;
        st->capacity_before = 0;
        back = fmin(st->c_safe, fmax(w->demand, w->lim));
    }
    return back;
}

/* What a calm judgement teaches: the ceiling forgotten, C_safe up to
 * the rate served calmly, the baseline following the median. */
static void learn_calm(ac_state *st, const ac__judgement *j)
{
    double *b = j->b;
    double s50 = j->s50;
    /* Calm at a rate that once overloaded it, the upstream has
     * recovered from a degradation: that overload said nothing of
     * its capacity, and the limit climbs back by quarter steps,
     * not by 5% ones toward a ceiling. */
    if (st->calm >= CEILING_FORGET || (!st->held && j->served >= st->over_rate))
        st->ceiling = 0;
    /* The capacity shown grows with what is served well; after as long
     * calm it is forgotten (the upstream may have grown). */
    if (st->calm >= CEILING_FORGET)
        st->capacity = 0;
    else if (!st->held && st->capacity > 0)
        st->capacity = fmax(st->capacity, j->ok_mean);
    /* As fast as before the overload (its median within the buffer of
     * the baseline, none of its answers late) when it was not found
     * slower: the capacity shown since was of its slow days, and the
     * one before it stands again. */
    if (!st->held && st->baseline_before <= 0 && j->warm && !j->slow &&
        !j->any_late && st->capacity_before > st->capacity) {
        st->capacity = st->capacity_before;
        st->capacity_before = 0;
    }
    /* (The mean of the windows judged: their busiest, with
     * several nodes each scaling its own share, runs ahead of
     * what the upstream was given.) */
    if (!st->held && j->mean_acc > st->c_safe)
        st->c_safe = j->mean_acc;
    /* The binding baseline only falls: binding, the limit is
     * raised until the median rises, and a baseline that
     * followed would creep up with each raise. */
    if (j->warm && !st->held &&
        (b == &st->baseline || s50 < st->baseline_bound)) {
        *b += BASELINE_ALPHA * (s50 - *b);
        if (*b > 2 * s50)
            *b *= 0.9;
    }
}

/* Healthy and binding: the limit goes up (by raise_step of the larger
 * of the limit, the rule's number and the capacity shown, or with no
 * overload known a quarter of what it refuses), no further than
 * capacity_share of the capacity shown, not before the baseline is
 * warm, nor soon after a cut near the ceiling.  Returns the new limit
 * (next when none). */
static double increase(const ac_state *st, int warm, double windows,
                       const ac__window *w, double next, ac_step_out *out)
{
    const ac_params *p = &st->p;
    double lim = w->lim, demand = w->demand, acc = w->acc;
    /* Not before the baseline is warm: until then a slower
     * upstream is not seen as one, and a limit raised on an
     * unknown baseline would take it as its healthy speed. */
    if (warm && !st->held && st->calm >= CALM_WINDOWS && w->binding &&
        st->since_decrease >= DECREASE_HOLD) {
        /* 5% of the limit; a quarter of the demand it refuses
         * when that is more, while no overload is remembered (no
         * ceiling), so that a burst of twice the limit is met in a
         * few judgements, not a few dozen, and after one up to
         * C_safe, the rate the upstream served calmly, so that a
         * cut does not hold the limit under it for minutes.  Near
         * a known edge the small steps find it without
         * overshooting. */
        /* (A step a window: a judgement is of one or more.) */
        double unit = fmax(lim, fmax((double)p->base, st->capacity));
        double step = fmax(1, p->raise_step * unit * windows);
        double quarter = 0.25 * (demand - lim);
        out->reason = AC_R_RECOVER;
        if (st->ceiling <= 0 && st->capacity <= 0 && quarter > step) {
            step = quarter;
            out->reason = AC_R_SURGE;
        } else if (st->ceiling > 0 && lim < st->c_safe) {
            step = fmax(step, fmin(quarter, st->c_safe - lim));
        }
        double up = lim + step;
        up = fmin(up, fmax(2 * acc, lim)); /* no faster than 2x use */
        up = fmin(up, (double)p->max);
        /* Below the capacity the upstream has shown (past it, the
         * queue it had builds again), save a probe PROBE_WINDOWS after a
         * decrease: a calm judgement past it raises the capacity.  With
         * several nodes, the larger of this node's reading and the
         * nodes' mean: a node whose requests were a small share of the
         * queue reads it low, and the nodes agree on the least proposal. */
        if (st->capacity > 0 && st->since_decrease < PROBE_WINDOWS)
            up = fmin(up, fmax(lim, p->capacity_share *
                                        fmax(st->capacity, st->pooled)));
        if (up > CEILING_NEAR * st->ceiling && st->ceiling > 0 &&
            st->since_decrease < PROBE_WINDOWS)
            up = fmax(lim, fmin(up, CEILING_NEAR * st->ceiling));
        if (up >= lim + 1) { /* (less, a cap holds it: no increase) */
            next = up;
            out->action = AC_INCREASE;
        } else {
            out->reason = AC_R_NONE;
        }
    }
    return next;
}

/* No overload: fast again, what calm teaches, an increase.  Returns the
 * new limit (next when none). */
static double calm_judgement(ac_state *st, const ac__judgement *j,
                             const ac__window *w, double next, ac_step_out *out)
{
    if (!st->held)
        st->calm_since_cut = 1;
    double back = fast_again(st, j, w);
    learn_calm(st, j);
    next = increase(st, j->warm, j->windows, w, next, out);
    st->rising = out->action == AC_INCREASE;
    if (back > next) {
        next = back;
        out->action = AC_INCREASE;
        out->reason = AC_R_FAST;
        st->rising = 1;
    }
    return next;
}

/* At min this long, the baseline is taken afresh from the median (the
 * one before kept, for when it is fast again). */
static void rebase_at_min(ac_state *st, const ac__judgement *j, double next)
{
    const ac_params *p = &st->p;
    if (next <= (double)p->min && ++st->at_min >= AT_MIN_WINDOWS && j->warm &&
        j->steady && st->cruise <= 0) {
        if (st->baseline_before <= 0)
            st->baseline_before = st->baseline;
        *j->b = j->s50;
        st->at_min = 0;
    } else if (next > (double)p->min) {
        st->at_min = 0;
    }
}

/* A judgement (a window of MIN_SAMPLES answers or more): what the
 * upstream did, and the limit that follows.  Returns the new limit. */
static double judge(ac_state *st, const ac_signal *sig, const ac__window *w,
                    double next, ac_step_out *out)
{
    ac__judgement j;
    ac__judge_windows(st, sig, &j);
    judge_baseline(st, &j);
    judge_overload(st, sig, &j);
    st->after_drain = st->after_cut = 0;
    /* The overload is reported as judged; settling or slower, it is not
     * cut for. */
    out->overload = j.over;
    if (j.settling || j.slower)
        j.over = 0;
    if (j.slower)
        take_slower(st, &j);
    keep_judgement(st, &j);
    if (j.over)
        next = cut(st, sig, &j, out);
    else
        next = calm_judgement(st, &j, w, next, out);
    st->overloaded = j.over || j.settling;
    rebase_at_min(st, &j, next);
    return next;
}

/* No window raises the limit by more than raise_max of it (nor by less
 * than one request): a recovery, a drained queue, a relax from below
 * the rule's number all climb, none jumps. */
static double bounded_raise(const ac_state *st, double next)
{
    /* (From the lower of the limit held and the one published: the
     * two differ by what was too small to publish.) */
    double from = fmin(st->limit, (double)st->published);
    double most = fmax(from * (1 + st->p.raise_max), from + 1);
    return fmin(next, most);
}

/* The queue a cut was for has drained (what went and what came back
 * match again, nothing shed): back to capacity_share of what the
 * upstream answered while saturated, by bounded steps, a window at a
 * time while the queue stays drained.  Returns the new limit (next when
 * none). */
static double cruise_back(ac_state *st, int balanced, double next,
                          ac_step_out *out)
{
    if (st->cruise > 0 && out->action != AC_DECREASE &&
        st->since_decrease >= 2 && balanced) {
        if (st->cruise > next) {
            next = st->cruise;
            out->action = AC_INCREASE;
            out->reason = AC_R_DRAINED;
            double reach = bounded_raise(st, next);
            if (reach < next)
                return reach; /* the rest in the next windows */
        }
        st->cruise = 0;
        st->after_drain = 1;
        /* The next judgement is of what is sent from now on: the
         * proxy's answers and the windows' sums start afresh. */
        out->restart = 1;
        ac__sums_restart(st);
    }
    return next;
}

/* Healthy and not binding: back toward the rule's own number, whatever
 * the demand is against the limit (a cut the demand does not reach
 * protects nothing, and little traffic is no reason to keep one).
 * Healthy: no overload, hold or settling at the last judgement (or no
 * traffic at all), and no queue building or shedding in the window.  Returns
 * the new limit (next when none). */
static double idle_relax(ac_state *st, const ac__window *w, double next,
                         ac_step_out *out)
{
    const ac_params *p = &st->p;
    double lim = w->lim;
    /* (A window with no traffic at all is no sign of trouble: with none,
     * no judgement would ever clear the last one's.) */
    int quiet = w->acc <= 0 && w->answered <= 0;
    int healthy = w->balanced &&
                  (quiet || (!st->overloaded && !st->held && !st->suspect));
    st->idle = !w->binding && healthy ? st->idle + 1 : 0;
    if (out->action == AC_HOLD && st->idle >= p->relax_windows &&
        lim != (double)p->base) {
        next = lim > (double)p->base ? fmax((double)p->base, 0.95 * lim)
                                     : (double)p->base;
        out->action = AC_RELAX;
        out->reason = AC_R_IDLE;
    }
    return next;
}

/* Ahead of a forecast peak: up to the forecast's upper bound, never
 * past what the upstream has served without overload, and not while
 * a cut holds or a marginal overload waits for its confirmation (in
 * the lab's bursts the forecast put each cut back the next window).
 * Returns the new limit (next when none). */
static double forecast_raise(ac_state *st, double lim, double next,
                             ac_step_out *out)
{
    const ac_params *p = &st->p;
    if (p->season > 0 && st->hw.ready && !out->overload && !st->held &&
        st->calm_since_cut && st->baseline_before <= 0 &&
        st->since_decrease >= DECREASE_HOLD && out->action != AC_DECREASE &&
        st->anomalies < ANOMALY_WINDOWS) {
        double u = hw_forecast(&st->hw, p->horizon) + 2 * hw_sigma(&st->hw);
        double want = fmin(1.1 * u, st->c_safe);
        if (1.1 * u > lim && want > next) {
            next = want;
            out->action = AC_FORECAST;
            out->reason = AC_R_FORECAST;
        }
    }
    return next;
}

/* The limit held is published when it moved 2% or more from the last
 * one published, counting reversals. */
static void publish(ac_state *st, double next, ac_step_out *out)
{
    const ac_params *p = &st->p;
    int64_t rounded = (int64_t)llround(next);
    int64_t delta = rounded - st->published;
    double need = fmax(1, 0.02 * (double)st->published);
    /* Changes under 2% are not published (no flapping by a request or
     * two), save the last step back to the rule's own number: else a
     * relax from above it by 0.95 a window stops one short, for good
     * (112 -> 106 -> 101, then 100 is 1% away). */
    if ((double)llabs(delta) >= need || (delta != 0 && rounded == p->base)) {
        int sign = delta > 0 ? 1 : -1;
        if (st->last_sign != 0 && sign != st->last_sign)
            st->reversals++;
        st->last_sign = sign;
        st->published = rounded;
        out->publish = 1;
    }
    out->limit = st->published;
}

/* One window: its sums; with MIN_SAMPLES answers, a judgement; then the
 * cruise back after a drained queue, the idle relax and the forecast,
 * each on the limit the step before left; the limit clamped into [min,
 * max], held, and published past 2%. */
void ac_step(ac_state *st, const ac_signal *sig, ac_step_out *out)
{
    const ac_params *p = &st->p;
    ac__window w;
    st->pooled = sig->pooled;
    w.lim = sig->in_force > 0 ? sig->in_force : st->limit;
    w.acc = sig->accepted * p->period_s; /* per unit, like the limit */
    w.demand = (sig->accepted + sig->refused) * p->period_s;
    w.answered = sig->answered;
    double total = sig->accepted + sig->refused;
    w.binding = sig->refused > 0 && sig->refused >= BINDING_SHARE * total;
    /* Holding, a node keeps its own proposal, not the limit in force:
     * with several nodes the lowest proposal is in force, and a node that
     * fell back to it on every window between its judgements would undo
     * each increase before the other nodes had made theirs (in the lab's
     * bursts, two proxies judging a few windows apart never rose). */
    double next = st->limit;
    memset(out, 0, sizeof(*out));
    out->action = AC_HOLD;
    out->gradient = 1;
    ac__windows_add(st, sig, w.acc);
    w.balanced = ac__queue_balanced(st, sig);
    ac__drain_capacity(st, sig);
    if (p->season > 0) {
        st->anomalies = forecast_update(st, w.demand) ? st->anomalies + 1 : 0;
    }
    if (sig->n >= MIN_SAMPLES)
        next = judge(st, sig, &w, next, out);
    else if (st->rising && w.balanced)
        /* Between judgements a recovery goes on a step a window while
         * the limit binds and no queue builds: one judgement's worth at
         * once would be a jump. */
        next = increase(st, 1, 1, &w, next, out);
    next = cruise_back(st, w.balanced, next, out);
    next = idle_relax(st, &w, next, out);
    next = forecast_raise(st, w.lim, next, out);
    next = bounded_raise(st, next);
    next = clamp(next, (double)p->min, (double)p->max);
    st->limit = next;
    if (out->action != AC_DECREASE)
        st->since_decrease++;
    if (out->action == AC_HOLD)
        out->reason = AC_R_NONE;
    st->last_gradient = out->gradient;
    publish(st, next, out);
}
