/*
 * limit.c - validating and normalising a limit's configuration.
 *
 * Everything an algorithm would otherwise recompute per decision (the
 * reduced fraction T = P / L, the stepped window's step count, the limit's
 * identity hash) is computed once here, so the decision path is arithmetic
 * on a handful of integers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const sl__algo *const algos[SL_ALGORITHM_COUNT] = {
    [SL_TOKEN_BUCKET] = &sl__token_bucket,
    [SL_GCRA] = &sl__gcra,
    [SL_LEAKY_BUCKET] = &sl__leaky_bucket,
    [SL_FIXED_WINDOW] = &sl__fixed_window,
    [SL_SLIDING_LOG] = &sl__sliding_log,
    [SL_SLIDING_WINDOW] = &sl__sliding_window,
    [SL_STEPPED_WINDOW] = &sl__stepped_window,
};

const char *sl_algorithm_name(sl_algorithm alg)
{
    if ((unsigned)alg >= SL_ALGORITHM_COUNT)
        return NULL;
    return algos[alg]->name;
}

int sl_algorithm_parse(const char *name, size_t len, sl_algorithm *out)
{
    for (int i = 0; i < SL_ALGORITHM_COUNT; i++) {
        const char *n = algos[i]->name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = (sl_algorithm)i;
            return 0;
        }
    }
    return SL_EINVAL;
}

/* The Databox paper's table: about 100 to 1000 steps per window. */
sl_nanos sl_default_step(sl_nanos period)
{
    if (period <= 10 * SL_NS_PER_SEC)
        return 10 * SL_NS_PER_MS;
    if (period <= 60 * SL_NS_PER_SEC)
        return 100 * SL_NS_PER_MS;
    if (period <= 3600 * SL_NS_PER_SEC)
        return SL_NS_PER_SEC;
    if (period <= 86400 * SL_NS_PER_SEC)
        return 60 * SL_NS_PER_SEC;
    return 3600 * SL_NS_PER_SEC;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

__attribute__((format(printf, 4, 5))) static int
fail(char *errbuf, size_t errlen, int err, const char *fmt, ...)
{
    if (errbuf != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return err;
}

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA || alg == SL_LEAKY_BUCKET;
}

int sl_limit_new(const sl_limit_config *cfg, sl_limit **out, char *errbuf,
                 size_t errlen)
{
    sl_limit_config c = *cfg;
    int64_t g, steps = 0;

    if ((unsigned)c.algorithm >= SL_ALGORITHM_COUNT)
        return fail(errbuf, errlen, SL_EINVAL, "unknown algorithm: '%d'",
                    (int)c.algorithm);
    if (c.limit < 1 || c.limit > SL_MAX_COUNT)
        return fail(errbuf, errlen, SL_ERANGE,
                    "limit out of range: '%lld' (1 to 2^40)",
                    (long long)c.limit);
    if (c.period < 1)
        return fail(errbuf, errlen, SL_ERANGE,
                    "period out of range: '%lld' ns (must be >= 1)",
                    (long long)c.period);
    if (c.burst == 0) {
        c.burst = c.limit;
    } else if (!is_bucket(c.algorithm) && c.burst != c.limit) {
        return fail(errbuf, errlen, SL_EINVAL,
                    "burst applies only to token_bucket, gcra and "
                    "leaky_bucket: '%lld'",
                    (long long)c.burst);
    } else if (c.burst < 1 || c.burst > SL_MAX_COUNT) {
        return fail(errbuf, errlen, SL_ERANGE,
                    "burst out of range: '%lld' (1 to 2^40)",
                    (long long)c.burst);
    }
    /* The buckets keep times up to B * T ahead of now; 2^62 ns is 146
     * years, far beyond any sensible limit, and leaves room to add. */
    if (is_bucket(c.algorithm) &&
        (sl__i128)c.burst * c.period > ((sl__i128)1 << 62) * c.limit)
        return fail(errbuf, errlen, SL_ERANGE,
                    "burst * period / limit exceeds 2^62 ns");
    if (c.algorithm == SL_SLIDING_WINDOW && c.limit > UINT32_MAX)
        return fail(errbuf, errlen, SL_ERANGE,
                    "limit out of range for sliding_window: '%lld' "
                    "(at most 2^32 - 1)",
                    (long long)c.limit);
    if (c.algorithm == SL_STEPPED_WINDOW) {
        if (c.step == 0) {
            /* A period the table's step does not divide gets the largest
             * step that divides both, so the window is whole steps. */
            c.step = gcd64(c.period, sl_default_step(c.period));
        } else if (c.step < 1 || c.step > c.period || c.period % c.step != 0) {
            return fail(errbuf, errlen, SL_EINVAL,
                        "step must divide the period: step '%lld' ns, "
                        "period '%lld' ns",
                        (long long)c.step, (long long)c.period);
        }
        steps = c.period / c.step;
    } else if (c.step != 0) {
        return fail(errbuf, errlen, SL_EINVAL,
                    "step applies only to stepped_window: '%lld'",
                    (long long)c.step);
    }
    if ((c.flags & ~SL_LOG_REJECTED) != 0 ||
        ((c.flags & SL_LOG_REJECTED) && c.algorithm != SL_SLIDING_LOG))
        return fail(errbuf, errlen, SL_EINVAL, "flags not valid for %s: '0x%x'",
                    algos[c.algorithm]->name, c.flags);

    sl_limit *lim = calloc(1, sizeof(*lim));
    if (lim == NULL)
        return fail(errbuf, errlen, SL_ENOMEM, "out of memory");
    lim->cfg = c;
    lim->algo = algos[c.algorithm];
    g = gcd64(c.period, c.limit);
    lim->t_num = c.period / g;
    lim->t_den = c.limit / g;
    lim->steps = steps;
    {
        int64_t words[7] = {
            (int64_t)c.algorithm, c.limit,      c.period, c.burst, c.step,
            (int64_t)c.flags,     (int64_t)c.id};
        /* A fixed key: identities must agree across processes and stores
         * (the store's own seeded hash protects the table). */
        lim->ident =
            sl__siphash13(UINT64_C(0x736c75696365), UINT64_C(0x6c696d6974), 0,
                          words, sizeof(words));
    }
    *out = lim;
    return 0;
}

void sl_limit_free(sl_limit *limit)
{
    free(limit);
}

const sl_limit_config *sl_limit_get_config(const sl_limit *limit)
{
    return &limit->cfg;
}
