/*
 * controller_windows.h - inside the adaptive controller (controller.c,
 * controller_windows.c; not an API): a window as the controller's steps
 * see it, what a judgement found, and the functions that gather the
 * windows since the last judgement and say what they show of the
 * upstream (its queue, its failures, its capacity).
 */
#ifndef SL_ADAPTIVE_CONTROLLER_WINDOWS_H
#define SL_ADAPTIVE_CONTROLLER_WINDOWS_H

#include "adaptive/controller.h"

/* The baseline is the mean of the first windows, then a slow average of
 * healthy windows (Gradient2's ExpAvgMeasurement(600, 10)). */
#define WARM_WINDOWS 10
#define BASELINE_ALPHA (2.0 / 601.0)
/* A queue builds in the upstream when more went to it than came back,
 * by over 5% of what went and 5 requests (the requests in flight at
 * either end of the windows judged differ by a few); it drains when
 * more came back by as much.  A cut for a saturated upstream goes to
 * capacity_share of its goodput, less the queue spread over DRAIN_S
 * seconds. */
#define QUEUE_SHARE 0.05
#define QUEUE_MIN 5
#define DRAIN_S 5.0
#define BINDING_SHARE 0.01

/* One window as the steps see it (its rates per unit, like the limit). */
typedef struct ac__window {
    double lim;      /* the limit in force (the controller's own when none) */
    double acc;      /* accepted */
    double demand;   /* accepted and refused */
    double answered; /* answers that came back, per second */
    int binding;     /* the limit refused 1% of the window's requests */
    int balanced;    /* the last two windows: no queue building or draining */
} ac__window;

/* What one judgement found, step by step (docs/adaptive.md, "The
 * controller"): the later steps decide on what the earlier found. */
typedef struct ac__judgement {
    double s50, err;
    double served;   /* the busiest window's accepted since the last one */
    double mean_acc; /* their mean */
    double windows;  /* how many windows it is of */
    int bound;       /* the limit refused 1% of their requests */
    double growth;   /* what went to the upstream less what came back */
    int building, draining;
    int failing;    /* failures past error_rate of what was sent */
    int queued;     /* most answers past the SLO */
    int any_late;   /* some answers past the SLO */
    int saturated;  /* building, failing or queued: it serves all it can */
    int full_now;   /* the last two windows too: sent more than came back,
                       or shed (one alone may be a burst's) */
    double ok_now;  /* what it answered without failing in the last
                       window, per unit */
    double ok_mean; /* the same, the judged windows' mean */
    double good;    /* its goodput in the last window, per unit */
    int warm;       /* the free baseline is learnt */
    int late;       /* the p99 past the SLO while saturated */
    int breach;     /* late, or failures past error_rate */
    double *b;      /* the baseline of the judgement's regime */
    int learning;   /* the binding baseline is being learnt */
    int steady;     /* not saturated, no queue draining */
    int slow, marginal, over, settling, slower;
    /* slower, after a cut with no queue building that did not help
     * (not after a queue drained): the overload was for no load. */
    int no_load;
} ac__judgement;

void ac__sums_restart(ac_state *st);
void ac__windows_add(ac_state *st, const ac_signal *sig, double acc);
int ac__queue_balanced(ac_state *st, const ac_signal *sig);
void ac__drain_capacity(ac_state *st, const ac_signal *sig);
void ac__judge_windows(ac_state *st, const ac_signal *sig, ac__judgement *j);

#endif
