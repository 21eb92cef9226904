/*
 * test_holt_winters.c - the advisor's forecasting model
 * (src/adaptive/holt_winters.c) on series with known answers: the first
 * updates computed by hand, a constant, a pure seasonal series with
 * trend, the same with noise, a season whose amplitude changes, and a
 * step.  Each prints the error figures it checks (docs/advisor.md
 * quotes them).
 */
#include <math.h>

#include "adaptive/holt_winters.h"
#include "testutil.h"

static const hw_params defaults = {.alpha = 0.3, .beta = 0.01, .gamma = 0.3};

static hw_model make(size_t season, const hw_params *p)
{
    hw_params q = p ? *p : defaults;
    q.season = season;
    hw_model m;
    assert_int_equal(hw_init(&m, &q), 0);
    return m;
}

#define expect_near(a, b, tol)                                                 \
    do {                                                                       \
        double a_ = (a), b_ = (b);                                             \
        if (!(fabs(a_ - b_) <= (tol)))                                         \
            fail_msg("expected %s = %.9g within %g of %s = %.9g", #a, a_,      \
                     (double)(tol), #b, b_);                                   \
    } while (0)

/* Season 2, all smoothing 0.5, y = 1 3 3 5 | 6 7: every value is a
 * dyadic fraction, so the arithmetic is exact and so are the checks.
 * Start: A1 = 2, A2 = 4, b = 1, T(t) = 2 + (t - 0.5), s = (-0.5, 0.5),
 * level = T(3) = 4.5, residuals all 0. */
static void first_updates_by_hand(void **state)
{
    (void)state;
    hw_params p = {.alpha = 0.5, .beta = 0.5, .gamma = 0.5};
    hw_model m = make(2, &p);
    const double warm[] = {1, 3, 3, 5};
    for (size_t i = 0; i < 4; i++) {
        assert_false(m.ready);
        assert_true(hw_forecast(&m, 1) == 0);
        hw_update(&m, warm[i]);
        hw_check(&m);
    }
    assert_true(m.ready);
    assert_true(m.level == 4.5);
    assert_true(m.trend == 1);
    assert_true(m.seasonal[0] == -0.5 && m.seasonal[1] == 0.5);
    assert_true(m.sigma2 == 0);
    assert_true(hw_forecast(&m, 1) == 5); /* 4.5 + 1 - 0.5 */
    assert_true(hw_forecast(&m, 2) == 7); /* 4.5 + 2 + 0.5 */
    assert_true(hw_forecast(&m, 3) == 7); /* 4.5 + 3 - 0.5 */

    /* y = 6 at slot 0: e = 1, s2 = 0.1, l = .5(6 + .5) + .5(5.5) = 6,
     * b = .5(6 - 4.5) + .5(1) = 1.25, s0 = .5(6 - 6) + .5(-.5) = -.25. */
    hw_update(&m, 6);
    assert_true(m.last_error == 1);
    expect_near(m.sigma2, 0.1, 1e-15);
    assert_true(m.level == 6);
    assert_true(m.trend == 1.25);
    assert_true(m.seasonal[0] == -0.25);
    assert_true(hw_forecast(&m, 1) == 7.75); /* 6 + 1.25 + 0.5 */

    /* y = 7 at slot 1: e = -0.75, s2 = .09 + .05625, l = .5(6.5) +
     * .5(7.25) = 6.875, b = .5(.875) + .5(1.25) = 1.0625, s1 = .5(.125) +
     * .5(.5) = .3125. */
    hw_update(&m, 7);
    assert_true(m.last_error == -0.75);
    expect_near(m.sigma2, 0.14625, 1e-15);
    assert_true(m.level == 6.875);
    assert_true(m.trend == 1.0625);
    assert_true(m.seasonal[1] == 0.3125);
    assert_true(hw_forecast(&m, 1) == 7.6875); /* 6.875 + 1.0625 - .25 */
    assert_true(hw_forecast(&m, 2) == 9.3125); /* 6.875 + 2.125 + .3125 */
    hw_check(&m);

    hw_reset(&m);
    assert_false(m.ready);
    hw_check(&m);
    hw_release(&m);
}

static void bad_parameters(void **state)
{
    (void)state;
    hw_model m;
    hw_params p = defaults;
    p.season = 1;
    assert_int_equal(hw_init(&m, &p), -1);
    p.season = 4;
    p.alpha = 1.5;
    assert_int_equal(hw_init(&m, &p), -1);
    p.alpha = NAN;
    assert_int_equal(hw_init(&m, &p), -1);
    p.alpha = 0.3;
    p.gamma = -0.1;
    assert_int_equal(hw_init(&m, &p), -1);
    p.gamma = 0.3;
    p.damping = 1; /* phi 0: not a trend; --beta 0 is */
    assert_int_equal(hw_init(&m, &p), -1);
    p.damping = -0.1;
    assert_int_equal(hw_init(&m, &p), -1);
}

/* A constant: forecast = the constant, sigma = 0, at every horizon. */
static void constant(void **state)
{
    (void)state;
    hw_model m = make(10, NULL);
    for (int t = 0; t < 100; t++) {
        hw_update(&m, 50);
        if (m.ready)
            for (size_t h = 1; h <= 15; h++)
                expect_near(hw_forecast(&m, h), 50, 1e-9);
    }
    expect_near(hw_sigma(&m), 0, 1e-9);
    hw_check(&m);
    hw_release(&m);
}

static double wave(int t, size_t m, double amplitude)
{
    return 100 + 0.5 * t + amplitude * sin(2 * M_PI * t / (double)m);
}

/* Sine plus trend, no noise: the start decomposes it exactly, so every
 * forecast from the first on is right to rounding. */
static void seasonal_with_trend_exact(void **state)
{
    (void)state;
    const size_t season = 20;
    hw_model m = make(season, NULL);
    double worst = 0;
    for (int t = 0; t < 10 * (int)season; t++) {
        hw_update(&m, wave(t, season, 30));
        if (!m.ready)
            continue;
        for (size_t h = 1; h <= 5; h++)
            worst = fmax(
                worst, fabs(hw_forecast(&m, h) - wave(t + (int)h, season, 30)));
    }
    print_message("sine+trend, exact: worst |error| over h=1..5 = %.3g\n",
                  worst);
    expect_near(worst, 0, 1e-9);
    expect_near(hw_sigma(&m), 0, 1e-6);
    hw_release(&m);
}

/* A deterministic noise in [-5, 5): its sd is 10/sqrt(12) = 2.89. */
static double noise(uint64_t *s)
{
    return (double)(tu_rand(s) % 10000) / 1000.0 - 5;
}

/* Sine plus trend plus noise: after two seasons the forecasts' RMS
 * error stays near the noise's own sd; sigma tracks it. */
static void seasonal_with_trend_noisy(void **state)
{
    (void)state;
    const size_t season = 20;
    hw_model m = make(season, NULL);
    uint64_t seed = 42;
    double *y = malloc(12 * season * sizeof(double));
    assert_non_null(y);
    for (size_t t = 0; t < 12 * season; t++)
        y[t] = wave((int)t, season, 30) + noise(&seed);
    double sq1 = 0, sq5 = 0, sigma_sum = 0;
    int n = 0;
    for (size_t t = 0; t + 5 < 12 * season; t++) {
        hw_update(&m, y[t]);
        if (t < 4 * season) /* scored from the 5th season */
            continue;
        /* against the noiseless truth: how well the model sees the
         * series through the noise */
        double e1 = hw_forecast(&m, 1) - wave((int)t + 1, season, 30);
        double e5 = hw_forecast(&m, 5) - wave((int)t + 5, season, 30);
        sq1 += e1 * e1;
        sq5 += e5 * e5;
        sigma_sum += hw_sigma(&m);
        n++;
    }
    double rms1 = sqrt(sq1 / n), rms5 = sqrt(sq5 / n);
    print_message("sine+trend+noise (sd 2.89): RMS error vs the truth "
                  "h=1 %.2f, h=5 %.2f; mean sigma %.2f\n",
                  rms1, rms5, sigma_sum / n);
    expect_cmp(rms1 * 100, <, 300); /* below 3 */
    expect_cmp(rms5 * 100, <, 400); /* below 4 */
    /* sigma estimates the one-step error against the noisy values:
     * sqrt(noise^2 + model error^2), about 3.4 */
    expect_cmp(sigma_sum / n * 100, >, 250);
    expect_cmp(sigma_sum / n * 100, <, 450);
    free(y);
    hw_release(&m);
}

/* The season's amplitude grows from 30 to 45 after the start: the
 * seasonal terms, at gamma 0.3 once a season, follow within a few
 * seasons. */
static void amplitude_change(void **state)
{
    (void)state;
    const size_t season = 20;
    hw_model m = make(season, NULL);
    double worst_by_season[12] = {0};
    for (int t = 0; t < 12 * (int)season; t++) {
        double amp = t < 2 * (int)season ? 30 : 45;
        hw_update(&m, wave(t, season, amp));
        if (!m.ready || t + 1 >= 12 * (int)season)
            continue;
        double e = fabs(hw_forecast(&m, 1) - wave(t + 1, season, 45));
        size_t k = (size_t)(t + 1) / season;
        worst_by_season[k] = fmax(worst_by_season[k], e);
    }
    print_message("amplitude 30 -> 45: worst |1-step error| by season "
                  "3..12: %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f\n",
                  worst_by_season[2], worst_by_season[3], worst_by_season[4],
                  worst_by_season[5], worst_by_season[6], worst_by_season[7],
                  worst_by_season[8], worst_by_season[9], worst_by_season[10],
                  worst_by_season[11]);
    /* Slow, as additive Holt-Winters is at these smoothing values: the
     * level (alpha 0.3) takes up part of each seasonal surprise, so the
     * error shrinks about 10% a season; it must shrink every season, and
     * by season 12 to under 6 (from 12). */
    for (size_t k = 3; k < 12; k++)
        expect_cmp(worst_by_season[k] * 1000, <, worst_by_season[k - 1] * 1000);
    expect_cmp(worst_by_season[11] * 100, <, 600);
    hw_release(&m);
}

/* A step from 20 to 80 after three seasons: the forecast converges to
 * 80, with the overshoot of the seasonal terms that took up part of the
 * step (each slot's term learns y - level while the level lags). */
static void step_change(void **state)
{
    (void)state;
    const size_t season = 10;
    hw_model m = make(season, NULL);
    for (int t = 0; t < 30; t++)
        hw_update(&m, 20);
    expect_near(hw_forecast(&m, 1), 20, 1e-9);
    int settled = -1;
    for (int t = 30; t < 30 + 100; t++) {
        hw_update(&m, 80);
        int within = 1;
        for (size_t h = 1; h <= 5; h++)
            within &= fabs(hw_forecast(&m, h) - 80) <= 4; /* 5% */
        if (within && settled < 0)
            settled = t - 30 + 1;
        else if (!within)
            settled = -1;
    }
    print_message("step 20 -> 80 (season 10): forecasts h=1..5 within 5%% "
                  "for good after %d updates; 100 updates on: forecast "
                  "%.3f, sigma %.3f\n",
                  settled, hw_forecast(&m, 1), hw_sigma(&m));
    expect_cmp(settled, >, 0);
    expect_cmp(settled, <=, 70);
    expect_near(hw_forecast(&m, 1), 80, 2);
    expect_cmp(hw_sigma(&m) * 100, <, 150); /* from 19 after the step */
    hw_release(&m);
}

/* Demand ramping up through the two seasons of the start, then gone:
 * the start fits the ramp as a trend (b = 2 per step).  Undamped, at
 * beta 0.01, that trend outlives the demand by hundreds of steps and
 * keeps the forecast up (what kept `sluice advisor`'s recommendations
 * up long after a burst, docs/lab.md); damped by 0.1 a step it fades
 * and the forecast comes back to the demand. */
static double after_ramp(double damping, int steps_gone)
{
    const size_t season = 10;
    hw_params p = defaults;
    p.damping = damping;
    hw_model m = make(season, &p);
    for (int t = 0; t < 2 * (int)season; t++)
        hw_update(&m, 2.0 * t);
    expect_near(m.trend, 2, 1e-9);
    for (int t = 0; t < steps_gone; t++)
        hw_update(&m, 0);
    hw_check(&m);
    double worst = -INFINITY;
    for (size_t h = 1; h <= 5; h++)
        worst = fmax(worst, hw_forecast(&m, h));
    hw_release(&m);
    return worst;
}

static void ramp_then_gone(void **state)
{
    (void)state;
    double undamped = after_ramp(0, 30), damped = after_ramp(0.1, 30);
    print_message("ramp 0..38 then 0 for 3 seasons: highest forecast "
                  "h=1..5, undamped %.2f, damping 0.1 %.2f\n",
                  undamped, damped);
    expect_cmp(undamped * 100, >, 500); /* still above 5 */
    expect_cmp(damped * 100, <, 100);   /* back under 1 */
    /* Damped, the h-step forecast's trend is phi + ... + phi^h times b,
     * under phi / (1 - phi) = 9 b whatever the horizon. */
    hw_params p = defaults;
    p.damping = 0.1;
    p.season = 2;
    hw_model m;
    assert_int_equal(hw_init(&m, &p), 0);
    const double warm[] = {1, 3, 3, 5}; /* first_updates_by_hand's start */
    for (size_t i = 0; i < 4; i++)
        hw_update(&m, warm[i]);
    expect_near(hw_forecast(&m, 1), 4.5 + 0.9 - 0.5, 1e-12);
    expect_near(hw_forecast(&m, 2), 4.5 + 0.9 + 0.81 + 0.5, 1e-12);
    expect_cmp(hw_forecast(&m, 1000) * 100, <, (4.5 + 9 + 0.5) * 100 + 1);
    hw_release(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_updates_by_hand),
        cmocka_unit_test(bad_parameters),
        cmocka_unit_test(constant),
        cmocka_unit_test(seasonal_with_trend_exact),
        cmocka_unit_test(seasonal_with_trend_noisy),
        cmocka_unit_test(amplitude_change),
        cmocka_unit_test(step_change),
        cmocka_unit_test(ramp_then_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
