/*
 * rng.h - the lab's seeded random numbers: SplitMix64 (Steele, Lea and
 * Flood 2014), one 64-bit state, so that each client of the load and
 * the target's service times draw their own reproducible stream from
 * (seed, stream id) without sharing a generator across them.
 */
#ifndef SL_LAB_RNG_H
#define SL_LAB_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct lb_rng {
    uint64_t state;
} lb_rng;

static inline uint64_t lb_rng_next(lb_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A stream of its own for (seed, stream): the pair mixed once, so that
 * neighbouring stream ids do not give overlapping sequences. */
static inline void lb_rng_init(lb_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    (void)lb_rng_next(r);
}

/* Uniform in (0, 1]: never 0, so -log() below is finite. */
static inline double lb_rng_unit(lb_rng *r)
{
    return ((double)(lb_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* An exponential draw of the given mean (ns), rounded to whole ns. */
static inline int64_t lb_rng_exp_ns(lb_rng *r, double mean_ns)
{
    return (int64_t)(-log(lb_rng_unit(r)) * mean_ns + 0.5);
}

#endif
