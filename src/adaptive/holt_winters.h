/*
 * holt_winters.h - additive seasonal Holt-Winters forecasting of one
 * series (docs/advisor.md, "The model"), for `sluice advisor`.
 *
 * Pure: observations in, forecasts out; no clock, no I/O.  Floating
 * point is fine here: a forecast only recommends a limit, which the
 * daemon then applies as an integer, clamped (advice.h); decisions stay
 * exact.
 */
#ifndef SL_ADMIN_HOLT_WINTERS_H
#define SL_ADMIN_HOLT_WINTERS_H

#include <stddef.h>

typedef struct hw_params {
    double alpha, beta, gamma; /* smoothing of level, trend, season: 0..1 */
    /* The trend's loss per step, 1 - phi, in [0, 1): 0 (the default) an
     * undamped trend; above, a trend fitted to a passing ramp fades
     * instead of outliving it (Gardner and McKenzie's damped trend). */
    double damping;
    size_t season; /* m: observations per season, >= 2 */
} hw_params;

/*
 * The state.  Invariants (hw_check): season and warm hold m and 2m
 * doubles; n_warm <= 2m; ready == (n_warm == 2m); sigma2 >= 0; while
 * ready, seasonal[(t) % m] is the latest estimate for the slot of
 * observation t, and t_next is the index of the next observation.
 */
typedef struct hw_model {
    hw_params p;
    int ready;     /* two seasons seen: forecasts are available */
    size_t n_warm; /* observations kept for the start, < 2m until ready */
    double *warm;  /* the first 2m observations; owned */
    double level, trend;
    double *seasonal; /* m entries; owned */
    double sigma2;    /* smoothed squared one-step error */
    double last_error;
    size_t t_next; /* observations seen */
} hw_model;

/* 0, or -1 for parameters out of range (alpha, beta, gamma in [0, 1],
 * damping in [0, 1), season >= 2) or out of memory.  hw_release() frees. */
int hw_init(hw_model *m, const hw_params *p);
void hw_release(hw_model *m);
/* Back to no observations, keeping the parameters. */
void hw_reset(hw_model *m);

/*
 * One observation y (finite).  Before 2m observations it is only kept;
 * the 2m-th starts the model (hw_model's docs in docs/advisor.md: level,
 * trend and season from the two seasons' means); each later one updates
 * it, with phi = 1 - damping:
 *   e  = y - (l + phi b + s[t mod m])        (the one-step error)
 *   s2 = 0.9 s2 + 0.1 e^2
 *   l' = alpha (y - s[t mod m]) + (1 - alpha) (l + phi b)
 *   b' = beta (l' - l) + (1 - beta) phi b
 *   s[t mod m] = gamma (y - l') + (1 - gamma) s[t mod m]
 */
void hw_update(hw_model *m, double y);

/* The forecast h >= 1 observations after the last: l + (phi + ... +
 * phi^h) b + s[(t+h) mod m] (l + h b + ... undamped); 0 until ready. */
double hw_forecast(const hw_model *m, size_t h);
/* sqrt(sigma2): the one-step error's smoothed size. */
double hw_sigma(const hw_model *m);

/* Asserts the invariants (abort() on a broken one); for tests. */
void hw_check(const hw_model *m);

#endif
