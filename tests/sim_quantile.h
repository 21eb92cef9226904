/*
 * sim_quantile.h - what the closed-loop simulations of the adaptive
 * controller (test_controller_loop.c, test_controller_slower.c) share:
 * the q-quantile of a sample, as the proxy takes it (the ceil(q n)-th
 * smallest).  Static: each test program includes it once.
 */
#ifndef SL_TEST_SIM_QUANTILE_H
#define SL_TEST_SIM_QUANTILE_H

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v (n values) in place. */
static double quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    size_t i = (size_t)ceil(q * (double)n);
    return v[i > 0 ? i - 1 : 0];
}

#endif
