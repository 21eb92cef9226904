/*
 * holt_winters.c - additive seasonal Holt-Winters (Winters 1960; the
 * formulas of docs/advisor.md, "The model"), one series per model.
 *
 * The start is the classical decomposition of the first two seasons:
 * with A1, A2 their means, the trend is b = (A2 - A1) / m, the trend line
 * through A1 at the middle of the first season is T(t) = A1 + b (t -
 * (m - 1) / 2), each slot's seasonal term is the mean over both seasons
 * of y - T, and the level is T at the last of the 2m observations.  The
 * error estimate starts as the mean squared residual of that fit, so
 * that sigma means something from the first forecast on.  (Starting
 * after one season cannot tell trend from season; a longer start delays
 * every forecast.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive/holt_winters.h"

int hw_init(hw_model *m, const hw_params *p)
{
    memset(m, 0, sizeof(*m));
    if (!(p->alpha >= 0 && p->alpha <= 1) || !(p->beta >= 0 && p->beta <= 1) ||
        !(p->gamma >= 0 && p->gamma <= 1) ||
        !(p->damping >= 0 && p->damping < 1) || p->season < 2 ||
        p->season > ((size_t)1 << 24))
        return -1;
    m->p = *p;
    m->warm = calloc(2 * p->season, sizeof(double));
    m->seasonal = calloc(p->season, sizeof(double));
    if (m->warm == NULL || m->seasonal == NULL) {
        hw_release(m);
        return -1;
    }
    return 0;
}

void hw_release(hw_model *m)
{
    free(m->warm);
    free(m->seasonal);
    memset(m, 0, sizeof(*m));
}

void hw_reset(hw_model *m)
{
    size_t s = m->p.season;
    memset(m->warm, 0, 2 * s * sizeof(double));
    memset(m->seasonal, 0, s * sizeof(double));
    m->ready = 0;
    m->n_warm = 0;
    m->level = m->trend = m->sigma2 = m->last_error = 0;
    m->t_next = 0;
}

static void start(hw_model *m)
{
    size_t s = m->p.season;
    double a1 = 0, a2 = 0, mid = (double)(s - 1) / 2;
    for (size_t i = 0; i < s; i++) {
        a1 += m->warm[i];
        a2 += m->warm[s + i];
    }
    a1 /= (double)s;
    a2 /= (double)s;
    double b = (a2 - a1) / (double)s;
    for (size_t j = 0; j < s; j++)
        m->seasonal[j] =
            ((m->warm[j] - (a1 + b * ((double)j - mid))) +
             (m->warm[s + j] - (a1 + b * ((double)(s + j) - mid)))) /
            2;
    double sq = 0;
    for (size_t t = 0; t < 2 * s; t++) {
        double r =
            m->warm[t] - (a1 + b * ((double)t - mid)) - m->seasonal[t % s];
        sq += r * r;
    }
    m->sigma2 = sq / (double)(2 * s);
    m->trend = b;
    m->level = a1 + b * ((double)(2 * s - 1) - mid);
    m->ready = 1;
}

void hw_update(hw_model *m, double y)
{
    size_t s = m->p.season;
    if (!m->ready) {
        m->warm[m->n_warm++] = y;
        m->t_next++;
        if (m->n_warm == 2 * s)
            start(m);
        return;
    }
    double a = m->p.alpha, b = m->p.beta, g = m->p.gamma;
    double trend = (1 - m->p.damping) * m->trend; /* phi b */
    double *slot = &m->seasonal[m->t_next % s];
    double e = y - (m->level + trend + *slot);
    m->last_error = e;
    m->sigma2 = 0.9 * m->sigma2 + 0.1 * e * e;
    double level = a * (y - *slot) + (1 - a) * (m->level + trend);
    m->trend = b * (level - m->level) + (1 - b) * trend;
    m->level = level;
    *slot = g * (y - level) + (1 - g) * *slot;
    m->t_next++;
}

double hw_forecast(const hw_model *m, size_t h)
{
    if (!m->ready)
        return 0;
    /* t_next - 1 is the last observation; t_next - 1 + h the one asked.
     * The trend's steps: h, or phi + ... + phi^h when damped. */
    double phi = 1 - m->p.damping, steps = (double)h;
    if (m->p.damping > 0)
        steps = phi * (1 - pow(phi, (double)h)) / m->p.damping;
    return m->level + steps * m->trend +
           m->seasonal[(m->t_next - 1 + h) % m->p.season];
}

double hw_sigma(const hw_model *m)
{
    return sqrt(m->sigma2);
}

void hw_check(const hw_model *m)
{
    size_t s = m->p.season;
    if (m->warm == NULL || m->seasonal == NULL || s < 2 || m->n_warm > 2 * s ||
        m->ready != (m->n_warm == 2 * s) || !(m->sigma2 >= 0) ||
        (!m->ready && m->t_next != m->n_warm) ||
        (m->ready && m->t_next < 2 * s))
        abort();
}
