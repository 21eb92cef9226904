/*
 * controller.h - the adaptive controller of one limit (docs/adaptive.md):
 * once a window (1 s), what the proxy saw of the upstream behind the
 * limit — latency percentiles, errors, the rate it let through, what it
 * refused, what came back and how much of it was goodput — moves the
 * limit: down when the upstream degrades (to its goodput when it is
 * saturated), up by bounded additive steps when it is healthy and the
 * limit binds (no further than the capacity it has shown), back toward
 * the rule's own number when healthy and not binding, and up ahead of a
 * forecast peak (seasonal Holt-Winters), never past the rate the upstream
 * has been seen to serve; never up by more than raise_max in a window.
 *
 * Pure, like holt_winters.h: signals in, a limit out; no clock, no I/O,
 * so `sluice replay --adaptive` turns a recorded trace into the exact
 * sequence of limits.  Floating point is fine here: the output is a
 * requests_per_unit the daemon applies as an integer override.
 */
#ifndef SL_ADMIN_CONTROLLER_H
#define SL_ADMIN_CONTROLLER_H

#include <stddef.h>
#include <stdint.h>

#include "adaptive/holt_winters.h"

typedef struct ac_params {
    int64_t base;     /* the rule's requests_per_unit */
    int64_t min, max; /* rate_limit.adaptive's bounds */
    double period_s;  /* the rule's unit in seconds (1 for "second") */
    double slo_p99_s; /* adaptive.slo_p99; 0: only the gradient and errors */
    /* adaptive.forecast: windows per season of the Holt-Winters
     * feedforward (0: off), and how many windows ahead it looks. */
    size_t season;
    size_t horizon;
    /* The thresholds of docs/adaptive.md, "Settings" (0: the default).
     * An increase is raise_step of the larger of the rule's number and
     * the capacity shown; no window raises the limit by more than
     * raise_max of it; increases stop at capacity_share of the capacity
     * the upstream has shown; failures past error_rate of the answers
     * are an overload; healthy and not binding relax_windows in a row,
     * the limit relaxes toward the rule's number. */
    double raise_step;     /* default 0.05 */
    double raise_max;      /* default 0.25 */
    double capacity_share; /* default 0.9 */
    double error_rate;     /* default 0.02 */
    size_t relax_windows;  /* default 30 */
} ac_params;

/* One window's signals. */
typedef struct ac_signal {
    double n;        /* upstream answers timed in the window */
    double s50, s99; /* their latency percentiles, seconds */
    double errors;   /* of them, failures (5xx, and 502/504 of the proxy) */
    double accepted; /* requests the limit let through, per second */
    double refused;  /* requests the limit refused (429), per second */
    /* Answers that came back from the upstream, per second (the
     * cluster's, like accepted): what it let through and what came back
     * tell whether a queue builds in the upstream or drains. */
    double answered;
    /* Of those answers, per second: failures (5xx, the proxy's 502 and
     * 504, timeouts), which no queue drained; and answers that were no
     * failure but came past slo_p99.  What is left, answered - failed -
     * late, is the goodput: what the upstream served well.  Both 0 in a
     * trace of before they were recorded: every answer was good. */
    double failed;
    double late;
    /* The limit in force (with several nodes, the minimum of their
     * proposals); 0: the controller's own last one. */
    double in_force;
    /* The capacity the live nodes have shown (their ac_state.capacity),
     * their mean, per unit; 0: one node, or none knows one.  A node reads
     * the capacity from its own answers times the nodes, which is the
     * upstream's only when its requests were an even share of the
     * upstream's queue; the mean of the nodes' readings is what the
     * upstream answered them all. */
    double pooled;
} ac_signal;

typedef enum ac_action {
    AC_HOLD,     /* nothing to do, or too little traffic to judge */
    AC_DECREASE, /* the upstream degraded */
    AC_INCREASE, /* healthy and binding */
    AC_RELAX,    /* idle: back toward the rule's number */
    AC_FORECAST  /* raised ahead of a forecast peak */
} ac_action;
const char *ac_action_name(ac_action a);

/* Why the limit moved (docs/adaptive.md, "Reasons"). */
typedef enum ac_reason {
    AC_R_NONE,     /* it did not */
    AC_R_LATENCY,  /* cut: the median past its baseline */
    AC_R_SLO,      /* cut: the p99 past slo_p99 while saturated */
    AC_R_ERRORS,   /* cut: failures past error_rate */
    AC_R_RECOVER,  /* raised: healthy and binding, a bounded step */
    AC_R_SURGE,    /* raised: no overload known, toward the refused demand */
    AC_R_DRAINED,  /* raised: the queue a cut was for has drained */
    AC_R_FAST,     /* raised: a slower upstream is fast again */
    AC_R_IDLE,     /* relaxed: healthy, not binding */
    AC_R_FORECAST, /* raised ahead of a forecast peak */
    AC_R_COUNT
} ac_reason;
const char *ac_reason_name(ac_reason r);

typedef struct ac_state {
    ac_params p;
    double limit;      /* the limit the controller holds, per unit */
    int64_t published; /* the last one published */
    double baseline;   /* b: the upstream's healthy median latency, s */
    size_t warm;       /* windows averaged into the baseline so far */
    /* The healthy median while the limit binds (its clumps), and the
     * binding judgements averaged into it so far. */
    double baseline_bound;
    size_t warm_bound;
    double c_safe;  /* the rate the upstream has served healthily */
    int overloaded; /* the last judged window was an overload */
    int suspect;    /* it was a marginal one, not yet cut for */
    int held;       /* it was slow, not cut for: no raise */
    int rising;     /* the last judgement raised: a step a window since */
    size_t calm;    /* windows since the last overload */
    /* Per unit, over the windows since the last judgement: accepted and
     * refused summed, and the most accepted in one. */
    double acc_sum, ref_sum, acc_max;
    /* Per second, over the same windows: accepted and answered summed,
     * and how many windows. */
    double sent_sum, back_sum;
    double fail_sum; /* their failures summed */
    double late_sum; /* their answers past slo_p99 summed */
    size_t judged;
    /* After a cut for a saturated upstream, capacity_share of its
     * capacity: the limit to go back to once the queue has drained; 0:
     * none. */
    double cruise;
    /* The last window, per second: accepted, answered, answered without
     * failing, its goodput (nor past slo_p99), and its failures. */
    double last_sent, last_back, last_ok, last_good, last_failed;
    int full[2]; /* the last windows were sent more than came back, or shed */
    /* The upstream's capacity shown, per unit: what it answered without
     * failing while saturated (a queue building, or shedding), raised by
     * what it serves calmly; 0: not known.  Increases stop at
     * capacity_share of it.  capacity_before: the one before the
     * upstream was found slower. */
    double capacity;
    double capacity_before;
    double pooled; /* the last signal's: the nodes' capacities, their mean */
    /* What the upstream answered in the windows a queue drained through
     * since the last cut for one, summed, and how many. */
    double drained_sum;
    size_t drained_n;
    /* The limit went back to cruise: the next judgement (of answers
     * after it) tells a slower upstream from a queue. */
    int after_drain;
    int after_cut; /* the last judgement cut with no queue building */
    /* The baseline before the upstream was found slower, to go back to
     * when it is fast again (0: none), and C_safe before the overload
     * that began it. */
    double baseline_before;
    double c_safe_before;
    int calm_since_cut;    /* a calm judgement since the last decrease */
    size_t since_decrease; /* windows since the last decrease */
    /* The limit in force when the upstream last overloaded: increases
     * past 95% of it wait PROBE windows after a decrease, so that a
     * steady overload point is probed twice a minute at most. */
    double ceiling;
    double over_rate; /* the busiest window's rate at the last overload */
    double cut_s50, cut_s99; /* the latencies of the last decrease */
    size_t at_min;           /* windows at min in a row */
    size_t idle;             /* windows in a row not binding and under half */
    size_t anomalies;        /* windows in a row of demand past the forecast */
    int last_sign;           /* of the last published change: -1, 0, 1 */
    uint64_t reversals;      /* published changes against the one before */
    uint64_t windows;
    hw_model hw;
    double last_gradient;
} ac_state;

/* The result of one window. */
typedef struct ac_step_out {
    ac_action action;
    int publish;   /* the change is large enough to publish */
    int64_t limit; /* the limit to publish (when publish) */
    int overload;
    double gradient;  /* 1.25 b / s50, clamped to [0.5, 1]; 1 when calm */
    ac_reason reason; /* why the limit moved (AC_R_NONE on a hold) */
    /* The answers gathered toward the next judgement are dropped: it is
     * to be of the requests sent from now on (the limit went back up
     * after a queue drained, and what the queue did to latency says
     * nothing of the upstream at the new limit). */
    int restart;
} ac_step_out;

/* 0, or -1 when the parameters are out of range (1 <= min <= base <= max
 * is not required: base is clamped into [min, max]) or out of memory.
 * ac_release() frees. */
int ac_init(ac_state *st, const ac_params *p);
void ac_release(ac_state *st);
void ac_step(ac_state *st, const ac_signal *sig, ac_step_out *out);

/* 1 when n answers of median s50 (seconds), fewer than a judgement is
 * usually of, already say the upstream is overloaded beyond doubt (a
 * median many times the baseline): judge them now, before the queue
 * that is building grows further. */
int ac_alarm(const ac_state *st, double n, double s50);

#endif
