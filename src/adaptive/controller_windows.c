/*
 * controller_windows.c - the adaptive controller's windows (docs/
 * adaptive.md, "The controller"): the sums of the windows since the last
 * judgement, whether the upstream's queue builds, drains or is gone, the
 * capacity it shows while a queue drains, and what a judgement's windows
 * say of it.  Apart from the steps (controller.c), which decide on it.
 */
#include <math.h>
#include <string.h>

#include "adaptive/controller_windows.h"

/* A window that drains a queue measures the upstream's capacity when its
 * queue lasted the whole window: this share of its answers or more came
 * past the SLO (half of them did in a window at a quarter of the
 * upstream's capacity that drained a short burst's queue in part of it). */
#define DRAIN_LATE 0.8

/* The windows' sums start afresh: at each judgement, and when the next
 * one is to be of what is sent from now on. */
void ac__sums_restart(ac_state *st)
{
    st->acc_sum = st->ref_sum = st->acc_max = 0;
    st->sent_sum = st->back_sum = st->fail_sum = 0;
    st->late_sum = 0;
    st->judged = 0;
}

/* Counts the window and adds it to the sums of the windows since the last
 * judgement. */
void ac__windows_add(ac_state *st, const ac_signal *sig, double acc)
{
    const ac_params *p = &st->p;
    st->windows++;
    st->calm++; /* windows since the last overload */
    /* The windows since the last judgement: its answers came from them,
     * so their rates, not the last window's alone, are what the upstream
     * was given, and the busiest is the one its latency speaks of (a
     * judgement that falls in a quiet second after a burst must not cut
     * to that second's rate, nor to an average with it). */
    st->acc_sum += acc;
    st->ref_sum += sig->refused * p->period_s;
    st->acc_max = fmax(st->acc_max, acc);
    st->judged++;
    st->sent_sum += sig->accepted;
    st->back_sum += sig->answered;
    st->fail_sum += sig->failed;
    st->late_sum += sig->late;
}

/* 1 when the last two windows saw a queue neither building nor draining
 * (within twice the share: two windows of a node's own share, scaled to
 * the cluster's, are noisier than a judgement's) and the upstream shed
 * nothing to speak of (a full queue that sheds answers as fast as it is
 * sent to, with 503s: that is no drained queue); keeps this window's
 * rates for the next. */
int ac__queue_balanced(ac_state *st, const ac_signal *sig)
{
    double sent2 = sig->accepted + st->last_sent;
    double back2 = sig->answered + st->last_back;
    double failed2 = sig->failed + st->last_failed;
    int balanced = fabs(sent2 - back2) <= 2 * QUEUE_SHARE * sent2 + QUEUE_MIN &&
                   failed2 <= st->p.error_rate * back2;
    /* A queue that drains slowly (a limit just under what the upstream
     * serves) is no balance: most of what comes back is past the SLO. */
    double ok = fmax(0, sig->answered - sig->failed);
    if (ok > 0 && sig->late > 0.5 * ok)
        balanced = 0;
    /* Full: sent more than came back, or shed. */
    st->full[1] = st->full[0];
    st->full[0] = sig->accepted - sig->answered >
                      QUEUE_SHARE * sig->accepted + QUEUE_MIN ||
                  sig->failed > st->p.error_rate * sig->answered + QUEUE_MIN;
    st->last_sent = sig->accepted;
    st->last_back = sig->answered;
    st->last_ok = fmax(0, sig->answered - sig->failed);
    st->last_good = fmax(0, sig->answered - sig->failed - sig->late);
    st->last_failed = sig->failed;
    return balanced;
}

/* While the queue a cut was for drains (more answers back than requests
 * sent, DRAIN_LATE of them past the SLO: the queue lasted the window),
 * the upstream works at full speed: what it answers without failing in
 * such a window is its capacity, more surely than in the window of the
 * cut (part of which may have been before the upstream slowed).  Their
 * mean since the cut is the capacity, and the cruise follows. */
void ac__drain_capacity(ac_state *st, const ac_signal *sig)
{
    const ac_params *p = &st->p;
    double ok = fmax(0, sig->answered - sig->failed);
    if (st->cruise <= 0 || ok <= sig->accepted + QUEUE_SHARE * ok + QUEUE_MIN ||
        sig->late <= DRAIN_LATE * ok)
        return;
    st->drained_sum += ok * p->period_s;
    st->drained_n++;
    st->capacity = st->drained_sum / (double)st->drained_n;
    st->cruise = p->capacity_share * st->capacity;
    st->c_safe = fmin(st->c_safe, st->cruise);
}

/* What the windows since the last judgement say, and their sums start
 * afresh: the rates sent and served, whether a queue builds in the
 * upstream or drains, and the hard signals (the SLO, failures). */
void ac__judge_windows(ac_state *st, const ac_signal *sig, ac__judgement *j)
{
    const ac_params *p = &st->p;
    j->s50 = sig->s50;
    j->err = sig->errors / sig->n;
    j->served = st->acc_max;
    j->mean_acc = st->acc_sum / (double)st->judged;
    j->windows = (double)st->judged;
    j->bound = st->ref_sum > 0 &&
               st->ref_sum >= BINDING_SHARE * (st->acc_sum + st->ref_sum);
    /* What went to the upstream and what came back, in requests
     * (the windows are of a second), and the rate it answered at. */
    j->growth = st->sent_sum - st->back_sum;
    j->building = j->growth > QUEUE_SHARE * st->sent_sum + QUEUE_MIN;
    j->draining = -j->growth > QUEUE_SHARE * st->back_sum + QUEUE_MIN;
    /* An upstream that sheds (its 503s, timeouts) is saturated even when
     * it answers as fast as it is sent to: its failures are no answers
     * that drained a queue. */
    j->failing = st->fail_sum > p->error_rate * st->sent_sum + QUEUE_MIN;
    /* Most of its answers past the SLO, a queue is there, even one that
     * builds too slowly for the counts to show. */
    j->queued = st->late_sum > 0.5 * fmax(0, st->back_sum - st->fail_sum);
    j->saturated = j->building || j->failing || j->queued;
    j->any_late = st->late_sum > 0;
    /* Saturated, the upstream answers as fast as it can: what it
     * answered without failing in the last window is what it can serve
     * (the windows before may have been before the queue).  Its
     * goodput, what it answered well, falls as its queue deepens. */
    j->ok_mean =
        fmax(0, st->back_sum - st->fail_sum) / (double)st->judged * p->period_s;
    j->ok_now = st->last_ok * p->period_s;
    j->full_now = st->full[0] && st->full[1];
    j->good = st->last_good * p->period_s;
    ac__sums_restart(st);
    j->warm = st->warm >= WARM_WINDOWS;
    /* A p99 past the SLO while the upstream is not saturated is its
     * own speed, which a lower limit does not change. */
    j->late = p->slo_p99_s > 0 && sig->s99 > p->slo_p99_s && j->saturated;
    j->breach = j->late || j->err > p->error_rate;
}
