/*
 * rules_adaptive.c - the adaptive controller's thresholds in a rule's
 * `adaptive:` mapping (docs/adaptive.md, "Settings"): percentages and a
 * duration, each within bounds that ac_init (src/adaptive/controller.c)
 * accepts, so that what `sluice validate` passes never fails when the
 * proxy starts the controller.  Apart from rules_build.c, which reads the
 * rest of the mapping, because these are the controller's alone.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/value.h"
#include "redis/redis_proto.h"
#include "rules_internal.h"

/* key, the field of sl__rule_daemon, and the bounds in percent. */
static const struct {
    const char *key;
    size_t field;
    double lo, hi;
} shares[] = {
    {"raise_step", offsetof(sl__rule_daemon, adaptive_raise_step), 0.1, 50},
    {"raise_max", offsetof(sl__rule_daemon, adaptive_raise_max), 1, 100},
    {"capacity_share", offsetof(sl__rule_daemon, adaptive_capacity_share), 50,
     100},
    {"error_rate", offsetof(sl__rule_daemon, adaptive_error_rate), 0.1, 50},
};

/* relax_after: whole seconds (the controller's windows), 1s to 1h. */
#define RELAX_MAX_S 3600

int sl__rules_adaptive_tuning(const sl__ynode *a, sl__rule_daemon *r,
                              const sl__ynode **bad, char *why, size_t whylen)
{
    for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++) {
        const sl__ynode *n = sl__ymap_get(a, shares[i].key);
        double *out = (double *)(void *)((char *)r + shares[i].field);
        if (n == NULL)
            continue;
        if (n->kind != SL__Y_SCALAR ||
            sl__value_percent(n->text, n->len, shares[i].lo, shares[i].hi,
                              out) != 0) {
            *bad = n;
            snprintf(why, whylen,
                     "adaptive: invalid %s: '%s' (a percentage from %g%% to "
                     "%g%%)",
                     shares[i].key, n->kind == SL__Y_SCALAR ? n->text : "...",
                     shares[i].lo, shares[i].hi);
            return SL_EINVAL;
        }
    }
    const sl__ynode *n = sl__ymap_get(a, "relax_after");
    sl_nanos ns = 0;
    if (n == NULL)
        return 0;
    if (n->kind != SL__Y_SCALAR ||
        sl__value_duration(n->text, n->len, SL_NS_PER_SEC, &ns) != 0 ||
        ns % SL_NS_PER_SEC != 0 || ns > RELAX_MAX_S * SL_NS_PER_SEC) {
        *bad = n;
        snprintf(why, whylen,
                 "adaptive: invalid relax_after: '%s' (whole seconds from 1s "
                 "to 1h: the controller's windows are of 1s)",
                 n->kind == SL__Y_SCALAR ? n->text : "...");
        return SL_EINVAL;
    }
    r->adaptive_relax_after = ns;
    return 0;
}

int sl__rule_redis_fits(const sl_rules *rules, const sl_rule *r, char *why,
                        size_t whylen)
{
    if (r->action != SL_RULE_LIMIT)
        return 0;
    if (sl__redis_limit_fits(r->limit, why, whylen) != 0)
        return -1;
    /* The advisor may raise the limit up to adaptive.max, its burst
     * scaled alike (sl_limit_override, burst 0); a number below it that
     * the base's tick cannot carry is rounded down where it is set
     * (src/control/limits_write.c), but a max that none near it fits
     * would be a bound the rule never reaches. */
    int64_t max = sl__rule_daemon_of(rules, r)->adaptive_max;
    if (max <= 0)
        return 0;
    sl_limit *at;
    char inner[200];
    if (sl_limit_override(r->limit, max, 0, &at, inner, sizeof(inner)) != 0) {
        snprintf(why, whylen, "adaptive max %lld: %s", (long long)max, inner);
        return -1;
    }
    int rc = sl__redis_limit_fits(at, inner, sizeof(inner));
    sl_limit_free(at);
    if (rc != 0) {
        snprintf(why, whylen,
                 "adaptive max %lld (its burst scaled) does not fit the "
                 "tick of the rule's own numbers: %s",
                 (long long)max, inner);
        return -1;
    }
    return 0;
}
