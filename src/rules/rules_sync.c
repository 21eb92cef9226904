/*
 * rules_sync.c - a rate_limit's `sync:` mapping (docs/rules.md, "sync"):
 * how the nodes sharing a Redis store keep this limit.  `mode: exact`
 * (the default) has every decision made by Redis; `mode: lease` lets a
 * node take leases of the limit's units (src/decision/lease.c), with
 * `lease_share` and `lease_max_ms`.  Apart from rules_build.c, which
 * reads the rest of the rate_limit, because the checks here are about
 * what a lease may prove (docs/stores.md, "Leases"), not about the limit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/value.h"
#include "rules_internal.h"

/* lease_share when not given: a tenth of the limit per lease. */
#define DEFAULT_SHARE_PPM 100000u
/* lease_max_ms when not given, and the most it may be. */
#define DEFAULT_MAX_MS 1000
#define MOST_MAX_MS 3600000

/* "0.1", "1", ".25": a fraction in (0, 1] to parts per million.  0, or
 * -1 for anything else (a sign, an exponent, trailing text). */
static int share_ppm(const sl__ynode *n, uint32_t *out)
{
    char *end;
    if (n->kind != SL__Y_SCALAR || n->len == 0 ||
        strspn(n->text, "0123456789.") != n->len)
        return -1;
    double v = strtod(n->text, &end);
    if (end != n->text + n->len || !(v > 0) || v > 1)
        return -1;
    *out = (uint32_t)(v * 1e6 + 0.5);
    return *out > 0 ? 0 : -1;
}

int sl__rules_sync(const sl__ynode *s, sl_algorithm alg, const char *path,
                   sl__rule_daemon *r, const sl__ynode **bad, char *why,
                   size_t whylen)
{
    const sl__ynode *mode, *share, *max;
    *bad = s;
    if (s->kind != SL__Y_MAP) {
        snprintf(why, whylen, "not a mapping: 'sync'");
        return SL_EINVAL;
    }
    for (size_t i = 0; i + 1 < s->n; i += 2) {
        const char *k = s->kids[i]->text;
        if (strcmp(k, "mode") != 0 && strcmp(k, "lease_share") != 0 &&
            strcmp(k, "lease_max_ms") != 0) {
            *bad = s->kids[i];
            snprintf(why, whylen,
                     "sync: unknown key: '%s' (mode, lease_share, "
                     "lease_max_ms)",
                     k);
            return SL_EINVAL;
        }
    }
    mode = sl__ymap_get(s, "mode");
    share = sl__ymap_get(s, "lease_share");
    max = sl__ymap_get(s, "lease_max_ms");
    if (mode == NULL) {
        snprintf(why, whylen, "sync: missing key: 'mode' (exact or lease)");
        return SL_EINVAL;
    }
    *bad = mode;
    if (mode->kind == SL__Y_SCALAR && strcmp(mode->text, "exact") == 0 &&
        share == NULL && max == NULL)
        return 0;
    if (mode->kind != SL__Y_SCALAR || strcmp(mode->text, "lease") != 0) {
        snprintf(why, whylen,
                 "sync: unknown mode: '%s' (exact, or lease with no other key "
                 "for exact)",
                 mode->kind == SL__Y_SCALAR ? mode->text : "...");
        return SL_EINVAL;
    }
    /* What proves zero overshoot (docs/stores.md, "Leases"): a fixed
     * window's lease is bounded by the end of the window Redis charged it
     * in; a token_bucket's or gcra's by the floor its live leases keep
     * under the bucket on Redis.  The sliding and stepped windows count a
     * unit in windows after its own, so a lease's units would outlive
     * it; a leaky_bucket's queue delays what it admits, which a lease
     * answered at once would not. */
    if (alg != SL_FIXED_WINDOW && alg != SL_TOKEN_BUCKET && alg != SL_GCRA) {
        int windowed = alg == SL_SLIDING_WINDOW || alg == SL_STEPPED_WINDOW ||
                       alg == SL_SLIDING_LOG;
        snprintf(why, whylen,
                 "sync: mode lease needs algorithm fixed_window, token_bucket "
                 "or gcra, not %s: %s %s: '%s'",
                 sl_algorithm_name(alg), sl_algorithm_name(alg),
                 windowed ? "counts a unit in later windows too, which a "
                            "lease's units would outlive"
                          : "delays what it admits, which a lease answered at "
                            "once would not",
                 path);
        return SL_EINVAL;
    }
    r->lease_share_ppm = DEFAULT_SHARE_PPM;
    r->lease_max = (sl_nanos)DEFAULT_MAX_MS * SL_NS_PER_MS;
    if (share != NULL && share_ppm(share, &r->lease_share_ppm) != 0) {
        *bad = share;
        snprintf(why, whylen,
                 "sync: invalid lease_share: '%s' (a fraction of the limit "
                 "above 0, at most 1: 0.1)",
                 share->kind == SL__Y_SCALAR ? share->text : "...");
        return SL_EINVAL;
    }
    uint64_t ms;
    if (max != NULL) {
        if (max->kind != SL__Y_SCALAR ||
            sl__value_uint(max->text, max->len, 1, MOST_MAX_MS, &ms) != 0) {
            *bad = max;
            snprintf(why, whylen,
                     "sync: invalid lease_max_ms: '%s' (whole milliseconds "
                     "from 1 to %d)",
                     max->kind == SL__Y_SCALAR ? max->text : "...",
                     MOST_MAX_MS);
            return SL_EINVAL;
        }
        r->lease_max = (sl_nanos)ms * SL_NS_PER_MS;
    }
    return 0;
}
