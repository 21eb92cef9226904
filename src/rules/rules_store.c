/*
 * rules_store.c - whether a store decides a rule's limits exactly: the
 * Redis store's script keeps a limit's times in ticks of 10^k ns
 * (src/redis/call.c, "Ticks"), and a rule whose numbers, or whose
 * numbers raised to adaptive.max, no tick carries is refused when the
 * rules load (`sluice serve --store redis://`) and warned of by `sluice
 * validate`, never refused at request time.
 */
#include <stdio.h>

#include "redis/redis_proto.h"
#include "rules_internal.h"

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
