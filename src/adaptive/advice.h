/*
 * advice.h - the advisor protocol, sluice-advisor/1 (docs/advisor.md):
 * the strict parser of an advisor's answer to
 * GET /v1/recommendations, and the clamping rule by which the daemon
 * turns a recommended limit into the one it applies.
 *
 * Pure: no I/O, no clock.  The answer is untrusted input (an advisor is
 * another process, maybe another host), so every field is checked for
 * its type and range and every error names the field.
 */
#ifndef SL_ADMIN_ADVICE_H
#define SL_ADMIN_ADVICE_H

#include <stddef.h>
#include <stdint.h>

#define AD_PROTOCOL "sluice-advisor/1"

/* The caps and ranges of an answer (docs/advisor.md, "Validation"). */
#define AD_MAX_RECOMMENDATIONS 10000
#define AD_MAX_LIMIT_ID 512 /* bytes of a limit id */
#define AD_MAX_REASON 512   /* bytes of a reason */
#define AD_MAX_REQUESTS ((int64_t)1 << 40)
#define AD_MIN_VALID_FOR_MS 1000     /* 1 s */
#define AD_MAX_VALID_FOR_MS 86400000 /* 1 day */

/* One recommendation.  Strings are owned by the ad_advice. */
typedef struct ad_recommendation {
    const char *limit;         /* the rule id (docs/advisor.md, "Rule ids") */
    int64_t requests_per_unit; /* 0 .. AD_MAX_REQUESTS */
    int64_t burst;             /* 0 .. AD_MAX_REQUESTS; -1 when not given */
    const char *reason;        /* "" when not given */
    int has_forecast;          /* the optional "forecast" object was given */
    int64_t forecast_at_ms;
    double forecast_yhat, forecast_upper; /* finite */
} ad_recommendation;

/* An answer.  Embedded by the caller: ad_advice_release() frees what
 * ad_advice_parse() filled in. */
typedef struct ad_advice {
    int64_t computed_at_ms; /* >= 0, Unix ms */
    int64_t valid_for_ms;   /* AD_MIN_VALID_FOR_MS .. AD_MAX_VALID_FOR_MS */
    ad_recommendation *recs;
    size_t n_recs;  /* at most AD_MAX_RECOMMENDATIONS; ids unique */
    char *strings_; /* private: the one allocation every string lives in */
} ad_advice;

/*
 * Parses an answer: len bytes of JSON (not NUL-terminated), one object.
 * 0 with out filled in (out need not be initialised, and is overwritten
 * without being released), or -1 with out empty and a message in err
 * naming the field ("recommendations[2].burst: must be an integer >= 0")
 * or, for JSON syntax, the line and column.  Unknown keys are ignored, so
 * that later versions of the protocol may add fields; duplicate keys and
 * duplicate limit ids are errors.
 */
int ad_advice_parse(const char *json, size_t len, ad_advice *out, char *err,
                    size_t errlen);
void ad_advice_release(ad_advice *a);

/*
 * The limit the daemon applies for a recommendation: recommended moved
 * at most a factor of 2 from the limit in force, then clamped to the
 * configured bounds:
 *
 *   step = clamp(recommended, ceil(effective_now / 2), 2 * effective_now)
 *   result = clamp(step, min, max)
 *
 * ceil, so that a step never takes more than half away and a limit of 1
 * stays 1 by the step rule; 2 * effective_now saturates at INT64_MAX.
 * The configured bounds win over the step rule (a limit outside
 * [min, max], say after the bounds changed, moves into them at once).
 * effective_now <= 0 (no limit known) skips the step rule; a negative
 * recommended is taken as 0; min > max is the caller's error, and max
 * wins.
 */
int64_t ad_clamp(int64_t recommended, int64_t effective_now, int64_t min,
                 int64_t max);

#endif
