/*
 * limits.c - the runtime limits (limits.h): the table of overrides
 * (limits_table.h), its lifecycle, the generation of the rules set that
 * applies it, and a write's precondition against it.  An override as a
 * value, the table's stores, the tick and the views are files of their
 * own (limits_*.c); this one is what they all change.
 *
 * Applying.  A change, a reload or an expiry derives a new generation of
 * the loaded set: each overridden rule becomes a copy with the effective
 * numbers and an sl_limit_override() of its limit, which shares the
 * rule's counters, so no client gains or loses what it used.  The new
 * generation is published as the rules are (rules_reload.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/limits_table.h"
#include "log/log.h"

/* ---- the table ---- */

int64_t sv_limits_now_ms(const sv_server *s)
{
    return sd_engine_clock(s->engine) / SL_NS_PER_MS;
}

uint64_t sv_override_base(const sl_rule *r)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int64_t words[8] = {r->action, r->requests_per_unit, r->period, 0, 0, 0, 0,
                        0};
    if (r->limit != NULL) {
        const sl_limit_config *c = sl_limit_get_config(r->limit);
        words[3] = c->algorithm;
        words[4] = c->limit;
        words[5] = c->burst;
        words[6] = c->step;
        words[7] = (int64_t)c->flags;
    }
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        h = (h ^ (uint64_t)words[i]) * 0x100000001b3ULL;
    return h;
}

sv_override *sv_override_find(struct sv_limits *lim, const char *rule,
                              sv_source source)
{
    for (size_t i = 0; i < lim->n; i++)
        if (lim->e[i].source == source && strcmp(lim->e[i].rule, rule) == 0)
            return &lim->e[i];
    return NULL;
}

static void log_add(struct sv_limits *lim, json_t *ev)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (text == NULL)
        return;
    free(lim->log[lim->log_next]);
    lim->log[lim->log_next] = text;
    lim->log_next = (lim->log_next + 1) % SV_LOG_EVENTS;
}

void sv_override_apply(struct sv_limits *lim, const char *rule,
                       sv_source source, sv_override *e, uint64_t version,
                       int64_t t, int log)
{
    sv_override *old = sv_override_find(lim, rule, source);
    if (log)
        log_add(lim, sv_override_event(e ? "set" : "delete", e, old, rule,
                                       source, t, version));
    if (e == NULL) {
        if (old != NULL) {
            sv_override_release(old);
            *old = lim->e[--lim->n];
        }
        return;
    }
    e->version = version;
    if (old != NULL) {
        sv_override_release(old);
        *old = *e;
        return;
    }
    if (lim->n == lim->cap) {
        size_t cap = lim->cap ? lim->cap * 2 : 16;
        sv_override *g = realloc(lim->e, cap * sizeof(*g));
        if (g == NULL) {
            sv_override_release(e);
            return;
        }
        lim->e = g;
        lim->cap = cap;
    }
    lim->e[lim->n++] = *e;
}

const char *sv_override_state(struct sv_limits *lim, const sv_override *e,
                              int64_t t)
{
    if (sv_override_until(e) <= t)
        return "expired";
    size_t idx = sv_rule_find(lim->loaded, e->rule);
    if (idx == SIZE_MAX)
        return "unknown";
    const sl_rule *rule = sl_rules_rule(lim->loaded->rules, idx);
    if (rule->action != SL_RULE_LIMIT || sv_override_base(rule) != e->base)
        return "stale";
    for (int k = 0; e->source != SV_SOURCE_MANUAL && k < SV_N_SOURCES; k++) {
        /* Shadowed by a manual one, or by a lower one of the other
         * automatic source (the lower wins; a tie, the advisor). */
        const sv_override *o = sv_override_find(lim, e->rule, (sv_source)k);
        if (o == NULL || o == e || sv_override_until(o) <= t ||
            sv_override_base(rule) != o->base)
            continue;
        if (o->source == SV_SOURCE_MANUAL ||
            o->requests_per_unit < e->requests_per_unit ||
            (o->requests_per_unit == e->requests_per_unit &&
             o->source == SV_SOURCE_ADVISOR))
            return "shadowed";
    }
    return "active";
}

/* ---- applying: a generation of the loaded set ---- */

/* Every thread adopts the set in force between two requests.  (At start
 * there are no threads yet: n_workers is 0 until they run.) */
static void wake_all(sv_server *s)
{
    for (int i = 0; i < s->n_workers; i++)
        uv_async_send(&s->workers[i].wake);
}

/* The generation of lim->loaded with the table as at t: NULL when out of
 * memory.  Under lim->lock. */
static sv_rules *derive(struct sv_limits *lim, int64_t t)
{
    sv_rules *loaded = lim->loaded;
    size_t n = sl_rules_rule_count(loaded->rules);
    sv_effective **eff = NULL;
    lim->next_expiry_ms = INT64_MAX;
    for (size_t i = 0; i < lim->n; i++) {
        const sv_override *e = &lim->e[i];
        size_t idx = sv_rule_find(loaded, e->rule);
        if (sv_override_until(e) <= t || idx == SIZE_MAX)
            continue;
        const sl_rule *rule = sl_rules_rule(loaded->rules, idx);
        if (rule->action != SL_RULE_LIMIT || sv_override_base(rule) != e->base)
            continue; /* stale */
        if (eff == NULL && (eff = calloc(n, sizeof(*eff))) == NULL)
            return NULL;
        if (eff[idx] != NULL) {
            /* manual > min(advisor, controller) */
            int64_t had = eff[idx]->rule.requests_per_unit;
            if (strcmp(eff[idx]->source, "manual") == 0 ||
                (e->source != SV_SOURCE_MANUAL &&
                 (had < e->requests_per_unit ||
                  (had == e->requests_per_unit &&
                   strcmp(eff[idx]->source, "advisor") == 0))))
                continue; /* a tie goes to the advisor, as in sv_override_state
                           */
            sl_limit_free(eff[idx]->limit);
            free(eff[idx]);
            eff[idx] = NULL;
        }
        sv_effective *x = calloc(1, sizeof(*x));
        if (x == NULL || sl_limit_override(rule->limit, e->requests_per_unit,
                                           e->burst, &x->limit, NULL, 0) != 0) {
            free(x);
            continue; /* checked when set: a rule's numbers changed */
        }
        x->rule = *rule;
        x->rule.limit = x->limit;
        x->rule.requests_per_unit = e->requests_per_unit;
        x->source = sv_source_name(e->source);
        x->expires_ms = sv_override_until(e);
        eff[idx] = x;
        if (x->expires_ms < lim->next_expiry_ms)
            lim->next_expiry_ms = x->expires_ms;
    }
    return sv_rules_derive(loaded, eff);
}

void sv_limits_publish(struct sv_limits *lim)
{
    sv_server *s = lim->s;
    if (lim->loaded == NULL)
        return;
    sv_rules *gen = derive(lim, sv_limits_now_ms(s));
    if (gen == NULL) {
        sl__log(SL__LOG_ERROR, NULL,
                "runtime limits: out of memory; the last "
                "limits stay in force");
        return;
    }
    pthread_mutex_lock(&s->reload_lock);
    sv_rules *old = s->current;
    s->current = gen;
    pthread_mutex_unlock(&s->reload_lock);
    sv_rules_release(old);
    wake_all(s);
}

void sv_limits_loaded(sv_server *s, sv_rules *loaded)
{
    struct sv_limits *lim = s->limits;
    pthread_mutex_lock(&lim->lock);
    sv_rules *old = lim->loaded;
    lim->loaded = loaded;
    sv_limits_publish(lim);
    pthread_mutex_unlock(&lim->lock);
    sv_rules_release(old);
}

/* ---- the lifecycle ---- */

int sv_limits_init(sv_server *s)
{
    struct sv_limits *lim = calloc(1, sizeof(*lim));
    if (lim == NULL)
        return -1;
    lim->s = s;
    lim->next_expiry_ms = INT64_MAX;
    pthread_mutex_init(&lim->lock, NULL);
    s->limits = lim;
    return 0;
}

void sv_limits_release(sv_server *s)
{
    struct sv_limits *lim = s->limits;
    if (lim == NULL)
        return;
    for (size_t i = 0; i < lim->n; i++)
        sv_override_release(&lim->e[i]);
    free(lim->e);
    for (size_t i = 0; i < SV_LOG_EVENTS; i++)
        free(lim->log[i]);
    json_decref(lim->redis_log);
    sv_rules_release(lim->loaded);
    pthread_mutex_destroy(&lim->lock);
    free(lim);
    s->limits = NULL;
}

static int names_version(const sv_limits_op *op, uint64_t there)
{
    for (size_t i = 0; i < op->n_versions; i++)
        if (op->versions[i] == there)
            return 1;
    return 0;
}

int sv_limits_precondition(sv_limits_op *op, uint64_t there)
{
    op->now_version = there;
    if ((op->match == SV_MATCH_VERSION && (there == 0 ||
                                           !names_version(op, there))) ||
        (op->match == SV_MATCH_EXISTS && there == 0)) {
        op->status = 412;
        if (there == 0)
            snprintf(op->err, sizeof(op->err),
                     "no such override (If-Match names one)");
        else
            snprintf(op->err, sizeof(op->err),
                     "the override is at version %" PRIu64
                     ", which If-Match does not name: read it again",
                     there);
        return -1;
    }
    if (op->match == SV_MATCH_ABSENT && there != 0) {
        op->status = 412;
        snprintf(op->err, sizeof(op->err),
                 "the override exists (version %" PRIu64 ")", there);
        return -1;
    }
    if (op->match == SV_MATCH_NONE && there != 0) {
        op->status = 428;
        snprintf(op->err, sizeof(op->err),
                 "the override exists (version %" PRIu64
                 "): send If-Match with its version",
                 there);
        return -1;
    }
    if (op->del && there == 0) {
        op->status = 404;
        snprintf(op->err, sizeof(op->err), "no such override");
        return -1;
    }
    return 0;
}

void sv_limits_op_end(sv_limits_op *op)
{
    if (op->abandoned)
        free(op);
    else
        op->done(op->owner);
}

const sv_plane sv_limits_plane = {
    .init = sv_limits_init,
    .release = sv_limits_release,
    .start = sv_limits_start,
    .stop = sv_limits_stop,
    .loaded = sv_limits_loaded,
    .metrics = sv_limits_metrics,
};
