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
#include "narrow.h"

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

/* The schedules' state tags (schedule.h): a base writes tag 0 and takes
 * every w[1] below t_den as its own; an override writes its L and adopts
 * whatever it reads.  Only limits whose base L fits the tag have one. */
static void set_tags(sl_limit *lim)
{
    static const sl__algo *const overrides[] = {
        [SL_TOKEN_BUCKET] = &sl__token_bucket_override,
        [SL_GCRA] = &sl__gcra_override,
        [SL_LEAKY_BUCKET] = &sl__leaky_bucket_override,
    };
    int bucket = is_bucket(lim->cfg.algorithm);
    lim->tag_bits =
        bucket && lim->override ? (uint64_t)lim->cfg.limit << 32 : 0;
    lim->own_span = lim->override ? 0 : (uint64_t)lim->t_den;
    if (bucket && lim->override)
        lim->algo = lim->cfg.limit > 0 ? overrides[lim->cfg.algorithm]
                                       : &sl__sched_stopped;
}

/* The one-word form of the base's states (narrow.h), from lim->base. */
static void set_narrow(sl_limit *lim)
{
    const sl_limit_config *b = &lim->base;
    lim->narrow = SL__NARROW_NONE;
    if (is_bucket(b->algorithm)) {
        int64_t t_den = b->limit / sl__gcd64(b->period, b->limit);
        unsigned bits =
            t_den > 1 ? 64 - __builtin_clzll((uint64_t)t_den - 1) : 0;
        if (bits <= SL__NARROW_MAX_FRAC) {
            lim->narrow = SL__NARROW_SCHEDULE;
            lim->frac_bits = (uint8_t)bits;
        }
        lim->packed_fast =
            lim->narrow == SL__NARROW_SCHEDULE && lim->most_ticks != 0 &&
            (lim->algo == &sl__token_bucket || lim->algo == &sl__gcra);
    } else if (b->algorithm == SL_FIXED_WINDOW) {
        lim->narrow = SL__NARROW_WINDOW;
    } else if (b->algorithm == SL_SLIDING_WINDOW) {
        lim->narrow = SL__NARROW_SLIDING;
    }
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
            c.step = sl__gcd64(c.period, sl_default_step(c.period));
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
    g = sl__gcd64(c.period, c.limit);
    lim->t_num = c.period / g;
    lim->t_den = c.limit / g;
    lim->steps = steps;
    if (is_bucket(c.algorithm) &&
        (sl__i128)c.burst * lim->t_num < ((sl__i128)1 << 62)) {
        lim->most_ticks = c.burst * lim->t_num;
        lim->most_ns = lim->most_ticks / lim->t_den;
    }
    lim->base = c;
    set_tags(lim);
    set_narrow(lim);
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

int sl_limit_override(const sl_limit *base, int64_t limit, int64_t burst,
                      sl_limit **out, char *err, size_t errlen)
{
    const sl_limit_config *root;
    sl_limit_config c;
    sl_limit *lim;
    int rc, bucket;

    if (base == NULL || out == NULL)
        return fail(err, errlen, SL_EINVAL, "no base limit to override");
    root = &base->base;
    bucket = is_bucket(root->algorithm);
    if (limit < 0 || limit > SL_MAX_COUNT)
        return fail(err, errlen, SL_ERANGE,
                    "limit out of range: '%lld' (0 to 2^40)", (long long)limit);
    if (burst < 0 || burst > SL_MAX_COUNT)
        return fail(err, errlen, SL_ERANGE,
                    "burst out of range: '%lld' (0 to 2^40)", (long long)burst);
    if (!bucket && burst != 0 && burst != limit)
        return fail(err, errlen, SL_EINVAL,
                    "burst applies only to token_bucket, gcra and "
                    "leaky_bucket: '%lld'",
                    (long long)burst);
    if (bucket && root->limit > SL__TAG_MAX_LIMIT)
        return fail(err, errlen, SL_EINVAL,
                    "a %s limit over 2^31 - 1 cannot be overridden: '%lld' "
                    "(its state records the limit it was written under in "
                    "31 bits)",
                    algos[root->algorithm]->name, (long long)root->limit);
    if (bucket && limit > SL__TAG_MAX_LIMIT)
        return fail(err, errlen, SL_ERANGE,
                    "limit out of range for an override of %s: '%lld' (0 to "
                    "2^31 - 1)",
                    algos[root->algorithm]->name, (long long)limit);
    if (bucket && limit == 0 && burst != 0)
        return fail(err, errlen, SL_EINVAL,
                    "burst must be 0 with limit 0: '%lld'", (long long)burst);
    if (bucket && burst == 0 && limit > 0) {
        /* base's burst scaled by limit / L_base, rounded up; a base at
         * L = 0 has no burst to scale, so its own base's is. */
        const sl_limit_config *b = base->cfg.limit > 0 ? &base->cfg : root;
        sl__i128 scaled =
            ((sl__i128)b->burst * limit + b->limit - 1) / b->limit;
        if (scaled > SL_MAX_COUNT)
            return fail(err, errlen, SL_ERANGE,
                        "burst out of range: the base's %lld scaled by %lld / "
                        "%lld exceeds 2^40",
                        (long long)b->burst, (long long)limit,
                        (long long)b->limit);
        burst = (int64_t)scaled;
    }

    c = *root;
    c.limit = limit;
    c.burst = bucket ? burst : limit;
    if (limit > 0) {
        if ((rc = sl_limit_new(&c, &lim, err, errlen)) != 0)
            return rc;
    } else {
        /* L = 0 stops the key (sl__sched_stopped; the windows compare
         * their counts with 0).  T is infinite: t_den 0 marks it. */
        if ((lim = calloc(1, sizeof(*lim))) == NULL)
            return fail(err, errlen, SL_ENOMEM, "out of memory");
        lim->cfg = c;
        lim->algo = algos[c.algorithm]; /* a bucket's: set_tags() */
        lim->t_num = 1;
        lim->t_den = 0;
        lim->steps = base->steps;
    }
    lim->ident = base->ident;
    lim->leased = base->leased;
    lim->base = *root;
    lim->override = c.limit != root->limit || c.burst != root->burst;
    set_tags(lim);
    set_narrow(lim);
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

const sl_limit_config *sl_limit_base_config(const sl_limit *limit)
{
    return &limit->base;
}
