/*
 * adaptive.c - what each thread measures for the adaptive controller
 * (proxy.h, px_ad_window; docs/adaptive.md): per rule with `controller:
 * gradient`, the requests it let through and refused, and the upstream's
 * answers to those it let through.  Counters of the thread's own, with
 * relaxed atomics; the control thread (control.c) takes them each second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"
#include "rules/rule_daemon.h"

size_t px_ad_rules(const sl_rules *rules, const sl_rule **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sl_rules_rule_count(rules) && n < max; i++) {
        const sl_rule *r = sl_rules_rule(rules, i);
        if (r->action == SL_RULE_LIMIT &&
            sl__rule_daemon_of(rules, r)->adaptive_controller ==
                SL__CONTROLLER_GRADIENT)
            out[n++] = r;
    }
    return n;
}

/* Linear in microseconds below 64 us; above, 32 buckets per power of
 * two, so a bucket is at most 1/32 of its smallest value wide. */
size_t px_ad_bucket(uint64_t ns)
{
    uint64_t us = ns / 1000;
    if (us < 64)
        return (size_t)us;
    int e = 63 - __builtin_clzll(us);
    size_t b = 64 + (size_t)(e - 6) * 32 + (size_t)((us >> (e - 5)) & 31);
    return b < PX_AD_BUCKETS ? b : PX_AD_BUCKETS - 1;
}

double px_ad_bucket_mid(size_t b)
{
    if (b < 64)
        return ((double)b + 0.5) / 1e6;
    int e = 6 + (int)((b - 64) / 32);
    double width = (double)(1ULL << (e - 5));
    double lower = (double)(32 + (b - 64) % 32) * width;
    return (lower + width / 2) / 1e6;
}

/* The slot of each rule of the thread's rules, made again when they
 * change.  NULL when out of memory (nothing is measured then). */
static const unsigned char *slots(sv_worker *w)
{
    px_worker *pw = px_worker_of(w);
    const sl_rules *rules = w->rules->rules;
    const char *version = sl_rules_version(rules);
    if (pw->ad_rules == rules && strcmp(pw->ad_version, version) == 0)
        return pw->ad_slot;
    size_t n = sl_rules_rule_count(rules);
    unsigned char *map = realloc(pw->ad_slot, n ? n : 1);
    if (map == NULL)
        return NULL;
    pw->ad_slot = map;
    memset(map, PX_AD_NONE, n);
    const sl_rule *ad[PX_AD_MAX];
    size_t k = px_ad_rules(rules, ad, PX_AD_MAX);
    for (size_t i = 0; i < k; i++) {
        map[ad[i]->index] = (unsigned char)i;
        pw->ad_slo_ns[i] =
            (uint64_t)sl__rule_daemon_of(rules, ad[i])->adaptive_slo_p99;
    }
    pw->ad_rules = rules;
    snprintf(pw->ad_version, sizeof(pw->ad_version), "%s", version);
    return map;
}

static px_ad_window *window(sv_worker *w, size_t slot)
{
    return &px_of(w)->ad[(size_t)w->index * PX_AD_MAX + slot];
}

static void add(atomic_uint_fast64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

uint32_t px_ad_admit(sv_worker *w, const px_decision *pd, int go)
{
    uint32_t mask = 0;
    const unsigned char *map = NULL;
    for (size_t i = 0; i < pd->n; i++) {
        const sl_rule *r = pd->status[i].rule;
        if (r == NULL ||
            sl__rule_daemon_of(w->rules->rules, r)->adaptive_controller !=
                SL__CONTROLLER_GRADIENT)
            continue;
        if (map == NULL && (map = slots(w)) == NULL)
            return 0;
        size_t slot = map[r->index];
        if (slot == PX_AD_NONE)
            continue;
        if (pd->status[i].over && !pd->status[i].shadow)
            add(&window(w, slot)->refused);
        else if (go && !(mask & (1u << slot))) {
            add(&window(w, slot)->allowed);
            mask |= 1u << slot;
        }
    }
    return mask;
}

void px_ad_answer(sv_worker *w, uint32_t mask, int status, uint64_t ns,
                  int timed)
{
    size_t b = px_ad_bucket(ns);
    const uint64_t *slo = px_worker_of(w)->ad_slo_ns;
    for (size_t slot = 0; mask != 0; slot++, mask >>= 1) {
        if (!(mask & 1))
            continue;
        px_ad_window *win = window(w, slot);
        if (timed)
            atomic_fetch_add_explicit(&win->hist[b], 1, memory_order_relaxed);
        else
            add(&win->untimed);
        if (status >= 500)
            add(&win->failed);
        else if (timed && slo[slot] > 0 && ns > slo[slot])
            add(&win->late); /* answered, but past the SLO: no goodput */
    }
}
