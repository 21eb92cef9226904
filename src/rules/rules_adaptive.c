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
