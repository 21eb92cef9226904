/*
 * limits_write.c - a write of the runtime limits (limits.h): the admin
 * API's and the advisor's sets and deletes, checked against the loaded
 * rules and the override's version, then applied to the table at once
 * (the memory store) or handed to Redis (limits_redis.c), which checks
 * the version against the shared table.  Apart from the table because it
 * is the one way in for every writer, with its answers (the HTTP status
 * and message) written once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/limits_table.h"
#include "redis/redis_proto.h"
#include "runtime/decide.h"

/* How far below a proposal fits_below() looks: a few steps reach a
 * number with a factor in common with the period (a multiple of 10, say),
 * which is what the base's tick needs. */
#define FIT_SEARCH 4096

/* Whether rule's limit overridden to (requests, burst) is one the store
 * decides: on Redis, one whose numbers fit its base's tick (call.c,
 * "Ticks"; a key's state has one time scale, so an override cannot take
 * a coarser one).  Every writer checks here, so that what is set never
 * fails at request time.  0, or -1 with why. */
static int store_fits(const struct sv_limits *lim, const sl_rule *rule,
                      int64_t requests, int64_t burst, char *why, size_t whylen)
{
    sl_limit *check;
    if (sl_limit_override(rule->limit, requests, burst, &check, why, whylen) !=
        0)
        return -1;
    int rc = 0;
    if (sd_engine_uses_redis(lim->s->engine) &&
        sl__redis_limit_fits(check, why, whylen) != 0)
        rc = -1;
    sl_limit_free(check);
    return rc;
}

/* The most requests, at most `requests`, whose override of rule the
 * store decides (store_fits): what the controller and the advisor set,
 * rounded down (the safe side) rather than refused.  0 when none within
 * FIT_SEARCH below, or the rule is gone.  Under lim->lock. */
static int64_t fits_below(const struct sv_limits *lim, const sl_rule *rule,
                          int64_t requests, int64_t burst)
{
    char why[160];
    for (int64_t n = requests; n > 0 && n > requests - FIT_SEARCH; n--)
        if (store_fits(lim, rule, n, burst, why, sizeof(why)) == 0)
            return n;
    return 0;
}

/* Checks op against the loaded rules and makes what it would set: 0, or
 * -1 with op->status and op->err.  Under lim->lock. */
static int prepare(struct sv_limits *lim, sv_limits_op *op, sv_override *out,
                   int64_t t)
{
    memset(out, 0, sizeof(*out));
    if (op->del)
        return 0;
    size_t idx = sv_rule_find(lim->loaded, op->rule);
    if (idx == SIZE_MAX) {
        op->status = 404;
        snprintf(op->err, sizeof(op->err), "no rule with the id '%.200s'",
                 op->rule);
        return -1;
    }
    const sl_rule *rule = sl_rules_rule(lim->loaded->rules, idx);
    if (rule->action != SL_RULE_LIMIT) {
        op->status = 400;
        snprintf(op->err, sizeof(op->err),
                 "rule '%.200s' is %s, not a limit: nothing to override",
                 op->rule,
                 rule->action == SL_RULE_DENY ? "a deny rule" : "unlimited");
        return -1;
    }
    char why[200];
    if (store_fits(lim, rule, op->requests_per_unit, op->burst, why,
                   sizeof(why)) != 0) {
        op->status = 400;
        snprintf(op->err, sizeof(op->err),
                 "rule '%.80s': requests_per_unit %lld, burst %lld: %s",
                 op->rule, (long long)op->requests_per_unit,
                 (long long)op->burst, why);
        return -1;
    }
    out->rule = strdup(op->rule);
    out->reason = strdup(op->reason);
    out->source = op->source;
    out->requests_per_unit = op->requests_per_unit;
    out->burst = op->burst;
    out->created_ms = t;
    out->expires_ms = t + op->ttl_ms;
    out->base = sv_override_base(rule);
    if (out->rule == NULL || out->reason == NULL) {
        sv_override_release(out);
        op->status = 503;
        snprintf(op->err, sizeof(op->err), "out of memory");
        return -1;
    }
    return 0;
}

int sv_limits_write(sv_worker *control, sv_limits_op *op)
{
    struct sv_limits *lim = control->server->limits;
    int64_t t = sv_limits_now_ms(lim->s);
    sv_override e;
    op->status = 0;
    op->err[0] = '\0';
    pthread_mutex_lock(&lim->lock);
    sv_override *there = sv_override_find(lim, op->rule, op->source);
    int rc = prepare(lim, op, &e, t);
    if (rc == 0 && !sd_engine_uses_redis(lim->s->engine) &&
        sv_limits_precondition(op, there ? there->version : 0) != 0) {
        sv_override_release(&e);
        rc = -1;
    }
    if (rc != 0) {
        pthread_mutex_unlock(&lim->lock);
        return 0;
    }
    if (sd_engine_uses_redis(lim->s->engine)) {
        /* Redis checks the precondition against the shared table. */
        pthread_mutex_unlock(&lim->lock);
        return sv_limits_write_redis(lim, op, &e, t);
    }
    op->status = op->del ? 204 : there ? 200 : 201;
    op->now_version = ++lim->version;
    sv_override_apply(lim, op->rule, op->source, op->del ? NULL : &e,
                      lim->version, t, 1);
    sv_limits_publish(lim);
    pthread_mutex_unlock(&lim->lock);
    return 0;
}

void sv_limits_abandon(sv_limits_op *op)
{
    if (op->done != NULL && op->status == 0)
        op->abandoned = 1; /* freed when its write ends */
    else
        free(op);
}

/* Ends the hold of (rule, source) before its deletion: 1 when the
 * override was this node's alone (then removed, and the set in force
 * published), else 0 (the store's deletion follows). */
static int unhold(struct sv_limits *lim, const char *rule, sv_source source)
{
    pthread_mutex_lock(&lim->lock);
    sv_override *e = sv_override_find(lim, rule, source);
    int alone = e != NULL && e->version == 0;
    if (e != NULL && e->held_ms != 0) {
        e->held_ms = 0;
        if (alone)
            sv_override_apply(lim, rule, source, NULL, 0, 0, 0);
        sv_limits_publish(lim);
    }
    pthread_mutex_unlock(&lim->lock);
    return alone;
}

void sv_limits_hold(sv_worker *control, const char *id, sv_source source,
                    int64_t requests, int64_t ttl_ms)
{
    struct sv_limits *lim = control->server->limits;
    int64_t t = sv_limits_now_ms(control->server);
    pthread_mutex_lock(&lim->lock);
    sv_override *e = sv_override_find(lim, id, source);
    size_t idx = sv_rule_find(lim->loaded, id);
    const sl_rule *rule =
        idx == SIZE_MAX ? NULL : sl_rules_rule(lim->loaded->rules, idx);
    int live = e != NULL && sv_override_until(e) > t;
    int lower =
        requests > 0 && rule != NULL &&
        requests < (live ? e->requests_per_unit : rule->requests_per_unit);
    if (live && !lower) {
        e->held_ms = t + ttl_ms; /* the last agreed limit stands */
        pthread_mutex_unlock(&lim->lock);
        return;
    }
    if (lower && rule->action == SL_RULE_LIMIT)
        requests = fits_below(lim, rule, requests, 0);
    if (!lower || rule->action != SL_RULE_LIMIT || requests == 0) {
        pthread_mutex_unlock(&lim->lock); /* the rule's own number stands */
        return;
    }
    /* A decrease is safe without the others' agreement: this node's
     * proposal, held here (the store's copy, if any, keeps its version). */
    sv_override x = {.rule = strdup(id),
                     .reason = strdup("adaptive controller (held: the store "
                                      "is unavailable)"),
                     .source = source,
                     .requests_per_unit = requests,
                     .created_ms = t,
                     .expires_ms = e != NULL ? e->expires_ms : t,
                     .base = sv_override_base(rule),
                     .held_ms = t + ttl_ms};
    uint64_t version = e != NULL ? e->version : 0;
    if (x.rule == NULL || x.reason == NULL) {
        sv_override_release(&x);
    } else {
        sv_override_apply(lim, id, source, &x, version, t, 0);
        sv_limits_publish(lim);
    }
    pthread_mutex_unlock(&lim->lock);
}

int sv_limits_renew(sv_worker *control, const char *id, sv_source source,
                    int64_t requests, int64_t burst, int64_t ttl_ms,
                    const char *reason)
{
    struct sv_limits *lim = control->server->limits;
    if (requests > 0) {
        pthread_mutex_lock(&lim->lock);
        size_t idx = sv_rule_find(lim->loaded, id);
        const sl_rule *rule =
            idx == SIZE_MAX ? NULL : sl_rules_rule(lim->loaded->rules, idx);
        if (rule != NULL && rule->action == SL_RULE_LIMIT)
            requests = fits_below(lim, rule, requests, burst);
        pthread_mutex_unlock(&lim->lock);
        if (requests == 0)
            return -1; /* none fits: what is in force stands */
    }
    json_t *there = sv_limits_override(control, id, source);
    int64_t t = sv_limits_now_ms(control->server);
    if (requests <= 0 && there != NULL &&
        unhold(control->server->limits, id, source) != 0) {
        json_decref(there); /* it was this node's alone: gone */
        return 1;
    }
    if (requests <= 0 && there == NULL)
        return 0; /* nothing to delete */
    if (requests > 0 && there != NULL &&
        json_integer_value(json_object_get(there, "requests_per_unit")) ==
            requests &&
        json_integer_value(json_object_get(there, "burst")) == burst &&
        json_integer_value(json_object_get(there, "expires_ms")) - t >
            ttl_ms / 2) {
        json_decref(there);
        return 0;
    }
    sv_limits_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        json_decref(there);
        return -1;
    }
    snprintf(op->rule, sizeof(op->rule), "%s", id);
    op->del = requests <= 0;
    op->source = source;
    op->requests_per_unit = requests;
    op->burst = burst;
    op->ttl_ms = ttl_ms;
    snprintf(op->reason, sizeof(op->reason), "%s", reason);
    uint64_t version =
        (uint64_t)json_integer_value(json_object_get(there, "version"));
    op->match = version != 0 ? SV_MATCH_VERSION : SV_MATCH_ABSENT;
    if (version != 0) {
        op->versions[0] = version;
        op->n_versions = 1;
    }
    op->abandoned = 1; /* nobody waits: freed here or when its write ends */
    json_decref(there);
    if (sv_limits_write(control, op) == SV_AGAIN)
        return 1;
    int rc = op->status >= 400 ? -1 : 1;
    free(op);
    return rc;
}
