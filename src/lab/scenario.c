/*
 * scenario.c - the lab's scenarios and variants (scenario.h), the
 * figures of ../shared/ADAPTIVE.md section 4.
 */
#include "lab/scenario.h"

#include <math.h>
#include <string.h>

#include "adaptive/prom_text.h"

const char lb_default_algorithms[] = "fixed_window,sliding_window,token_bucket";

#define LEGIT "legit,20,poisson,3" /* 60 r/s, well under the limit */
#define ABUSERS "abuser,2,constant,150"

const lb_scenario lb_scenarios[] = {
    {.id = "s1",
     .title = "steady load",
     .duration_s = 120,
     .groups = {LEGIT},
     .phases = {{"steady", 0, 120}},
     .n_phases = 1},
    /* A crowd every 60 s from t=30 for 10 s, alternately 2x (35 clients
     * x 4/s + the 60 r/s) and 3x (60 x 4/s + 60) the global limit. */
    {.id = "s2",
     .title = "bursts of 2x and 3x the limit",
     .duration_s = 300,
     .groups = {LEGIT, "crowd,35,poisson,4", "crowd,60,poisson,4"},
     .windows = {NULL, "30-40,150-160,270-280", "90-100,210-220"},
     .phases = {{"base", 0, 30},
                {"burst", 30, 40},
                {"base", 40, 90},
                {"burst", 90, 100},
                {"base", 100, 150},
                {"burst", 150, 160},
                {"base", 160, 210},
                {"burst", 210, 220},
                {"base", 220, 270},
                {"burst", 270, 280},
                {"base", 280, 300}},
     .n_phases = 11},
    {.id = "s3",
     .title = "abusive clients",
     .duration_s = 120,
     .groups = {LEGIT, ABUSERS},
     .phases = {{"abuse", 0, 120}},
     .n_phases = 1},
    {.id = "s4",
     .title = "Redis paused, stopped and slowed; B degraded",
     .duration_s = 270,
     .groups = {LEGIT, ABUSERS},
     .faults = {{60, LB_FAULT_PAUSE, 0},
                {90, LB_FAULT_RESUME, 0},
                {120, LB_FAULT_KILL, 0},
                {150, LB_FAULT_RESTART, 0},
                {150, LB_FAULT_DELAY, 2},
                {180, LB_FAULT_DELAY, 10},
                {210, LB_FAULT_DELAY, 0},
                {210, LB_FAULT_B_SLOW, 3},
                {240, LB_FAULT_B_SLOW, 1}},
     .n_faults = 9,
     .phases = {{"before", 0, 60},
                {"redis_paused", 60, 90},
                {"after_pause", 90, 120},
                {"redis_stopped", 120, 150},
                {"redis_2ms", 150, 180},
                {"redis_10ms", 180, 210},
                {"b_degraded", 210, 240},
                {"after", 240, 270}},
     .n_phases = 8},
};
const size_t lb_n_scenarios = sizeof(lb_scenarios) / sizeof(lb_scenarios[0]);

const lb_scenario *lb_scenario_find(const char *id)
{
    for (size_t i = 0; i < lb_n_scenarios; i++)
        if (strcmp(lb_scenarios[i].id, id) == 0)
            return &lb_scenarios[i];
    return NULL;
}

/* ---- the variants' rules ---- */

static int has_burst(const char *algorithm)
{
    return strcmp(algorithm, "token_bucket") == 0 ||
           strcmp(algorithm, "gcra") == 0 ||
           strcmp(algorithm, "leaky_bucket") == 0;
}

/* The rules, with `adaptive` (NULL: none) on the global rule. */
static int rules(FILE *f, const char *algorithm, const char *adaptive)
{
    char burst[32] = "", key_burst[32] = "";
    if (has_burst(algorithm)) {
        snprintf(burst, sizeof(burst), ", burst: %d", LB_BURST);
        snprintf(key_burst, sizeof(key_burst), ", burst: %d", LB_KEY_BURST);
    }
    return fprintf(f,
                   "# sluice lab: the limits under test (docs/lab.md)\n"
                   "domain: lab\n"
                   "descriptors:\n"
                   "  - key: generic_key\n"
                   "    value: global\n"
                   "    rate_limit: {name: global, algorithm: %s, unit: "
                   "second, requests_per_unit: %d%s%s}\n"
                   "  - key: api_key\n"
                   "    rate_limit: {name: per_key, algorithm: %s, unit: "
                   "second, requests_per_unit: %d%s}\n",
                   algorithm, LB_GLOBAL_LIMIT, burst, adaptive ? adaptive : "",
                   algorithm, LB_KEY_LIMIT, key_burst) < 0
               ? -1
               : 0;
}

/* static: the rules as written, the same limit all the time. */
static int static_rules(FILE *f, const char *algorithm, double scale)
{
    (void)scale;
    return rules(f, algorithm, NULL);
}

static double static_limit(const char *metrics, size_t len)
{
    (void)metrics;
    (void)len;
    return LB_GLOBAL_LIMIT;
}

/* adaptive: the proxies' controller moves the global limit within
 * [min, max] from B's latency as they see it, with a seasonal forecast
 * whose season is s2's burst period. */
static int adaptive_rules(FILE *f, const char *algorithm, double scale)
{
    char block[192];
    snprintf(block, sizeof(block),
             ",\n      adaptive: {min: %d, max: %d, controller: gradient, "
             "slo_p99: %dms, forecast_season: %lds, forecast_horizon: 3s}",
             LB_ADAPTIVE_MIN, LB_ADAPTIVE_MAX, LB_SLO_MS,
             lround(LB_BURST_PERIOD_S * scale) > 1
                 ? lround(LB_BURST_PERIOD_S * scale)
                 : 2L);
    return rules(f, algorithm, block);
}

/* advisor: no controller; sluice advisor's recommendations, polled by
 * the proxies, within the same bounds. */
static int advisor_rules(FILE *f, const char *algorithm, double scale)
{
    (void)scale;
    char block[128];
    snprintf(block, sizeof(block),
             ",\n      adaptive: {min: %d, max: %d, controller: off}",
             LB_ADAPTIVE_MIN, LB_ADAPTIVE_MAX);
    return rules(f, algorithm, block);
}

/* The global rule's limit in force as a proxy's metrics (len bytes) give
 * it: sluice_limit_requests_per_unit{domain="lab",rule="global",
 * limit="effective",source=...}; -1 when not there. */
static double metrics_limit(const char *metrics, size_t len)
{
    static const pt_matcher global[] = {{"rule", "global"},
                                        {"limit", "effective"}};
    double limit;
    return pt_find(metrics, len, "sluice_limit_requests_per_unit", global, 2,
                   &limit) == 1
               ? limit
               : -1;
}

static const char *const no_flags[] = {NULL};

const lb_variant lb_variants[] = {
    {"static", static_rules, no_flags, static_limit, 0, 0, NULL},
    /* Quick: steady (stability), bursts (fewer refusals than static),
     * faults (the degraded B only a moving limit protects). */
    {"adaptive", adaptive_rules, no_flags, metrics_limit, 0, 1, "s1,s2,s4"},
    /* Quick: steady (it must not raise the limit for nothing), bursts
     * (the forecast's case). */
    {"advisor", advisor_rules, no_flags, metrics_limit, 1, 0, "s1,s2"},
};
const size_t lb_n_variants = sizeof(lb_variants) / sizeof(lb_variants[0]);

const lb_variant *lb_variant_find(const char *name)
{
    for (size_t i = 0; i < lb_n_variants; i++)
        if (strcmp(lb_variants[i].name, name) == 0)
            return &lb_variants[i];
    return NULL;
}
