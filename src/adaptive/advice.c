/*
 * advice.c - the advisor protocol's answer read strictly (jansson), and
 * the clamp that bounds how far one answer moves a limit.
 *
 * Separate from the poller that fetches answers so that both halves of
 * the protocol are pure, unit-tested and fuzzed without a socket: the
 * daemon's poller and `sluice advisor`'s tests read answers through the
 * same function.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "adaptive/advice.h"

/* -1, with "field: message" in err. */
static int field_error(char *err, size_t errlen, const char *field,
                       const char *msg)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s: %s", field, msg);
    return -1;
}

/* An integer member in [lo, hi]: 0, 1 when absent and optional, -1. */
static int get_int(json_t *obj, const char *key, const char *field,
                   int optional, int64_t lo, int64_t hi, int64_t *out,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    char msg[96];
    if (v == NULL) {
        if (optional)
            return 1;
        return field_error(err, errlen, field, "missing");
    }
    if (!json_is_integer(v)) {
        snprintf(msg, sizeof(msg), "must be an integer in %lld..%lld",
                 (long long)lo, (long long)hi);
        return field_error(err, errlen, field, msg);
    }
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) {
        snprintf(msg, sizeof(msg), "%lld is out of range %lld..%lld",
                 (long long)i, (long long)lo, (long long)hi);
        return field_error(err, errlen, field, msg);
    }
    *out = i;
    return 0;
}

/* A finite number member (integer or real). */
static int get_number(json_t *obj, const char *key, const char *field,
                      double *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return field_error(err, errlen, field, "missing");
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return field_error(err, errlen, field, "must be a number");
    *out = json_number_value(v);
    return 0;
}

/* A string member of at most max bytes (jansson has already refused
 * invalid UTF-8 and NUL); absent: NULL when optional. */
static int get_string(json_t *obj, const char *key, const char *field,
                      int optional, size_t max, int nonempty, const char **out,
                      size_t *out_len, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    char msg[96];
    *out = NULL;
    *out_len = 0;
    if (v == NULL)
        return optional ? 0 : field_error(err, errlen, field, "missing");
    if (!json_is_string(v))
        return field_error(err, errlen, field, "must be a string");
    size_t n = json_string_length(v);
    if (n > max || (nonempty && n == 0)) {
        snprintf(msg, sizeof(msg), "must be a string of 1..%zu bytes, not %zu",
                 max, n);
        return field_error(err, errlen, field, msg);
    }
    *out = json_string_value(v);
    *out_len = n;
    return 0;
}

static int cmp_id(const void *a, const void *b)
{
    const ad_recommendation *x = *(const ad_recommendation *const *)a;
    const ad_recommendation *y = *(const ad_recommendation *const *)b;
    return strcmp(x->limit, y->limit);
}

/* One recommendation into r, its strings borrowed from the tree. */
static int parse_rec(json_t *v, size_t i, ad_recommendation *r, size_t *strings,
                     char *err, size_t errlen)
{
    char field[64];
    const char *s;
    size_t n;
#define FIELD(name)                                                            \
    (snprintf(field, sizeof(field), "recommendations[%zu]%s", i, name), field)
    if (!json_is_object(v))
        return field_error(err, errlen, FIELD(""), "must be an object");
    if (get_string(v, "limit", FIELD(".limit"), 0, AD_MAX_LIMIT_ID, 1, &s, &n,
                   err, errlen))
        return -1;
    r->limit = s;
    *strings += n + 1;
    if (get_int(v, "requests_per_unit", FIELD(".requests_per_unit"), 0, 0,
                AD_MAX_REQUESTS, &r->requests_per_unit, err, errlen) < 0)
        return -1;
    r->burst = -1;
    if (get_int(v, "burst", FIELD(".burst"), 1, 0, AD_MAX_REQUESTS, &r->burst,
                err, errlen) < 0)
        return -1;
    if (get_string(v, "reason", FIELD(".reason"), 1, AD_MAX_REASON, 0, &s, &n,
                   err, errlen))
        return -1;
    r->reason = s ? s : "";
    *strings += n + 1;
    json_t *f = json_object_get(v, "forecast");
    if (f != NULL) {
        if (!json_is_object(f))
            return field_error(err, errlen, FIELD(".forecast"),
                               "must be an object");
        if (get_int(f, "at_ms", FIELD(".forecast.at_ms"), 0, 0, INT64_MAX,
                    &r->forecast_at_ms, err, errlen) < 0 ||
            get_number(f, "yhat", FIELD(".forecast.yhat"), &r->forecast_yhat,
                       err, errlen) ||
            get_number(f, "upper", FIELD(".forecast.upper"), &r->forecast_upper,
                       err, errlen))
            return -1;
        r->has_forecast = 1;
    }
#undef FIELD
    return 0;
}

/* Copies the recommendations' strings out of the tree into one block. */
static int own_strings(ad_advice *out, size_t bytes)
{
    char *p = malloc(bytes ? bytes : 1);
    if (p == NULL)
        return -1;
    out->strings_ = p;
    for (size_t i = 0; i < out->n_recs; i++) {
        ad_recommendation *r = &out->recs[i];
        size_t n = strlen(r->limit) + 1;
        memcpy(p, r->limit, n);
        r->limit = p;
        p += n;
        n = strlen(r->reason) + 1;
        memcpy(p, r->reason, n);
        r->reason = p;
        p += n;
    }
    return 0;
}

int ad_advice_parse(const char *json, size_t len, ad_advice *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "invalid JSON: %d:%d: %s", je.line, je.column,
                     je.text);
        return -1;
    }
    int rc = -1;
    const char *s;
    size_t n, strings = 0;
    json_t *recs;
    if (!json_is_object(root)) {
        field_error(err, errlen, "answer", "must be a JSON object");
        goto out;
    }
    if (get_string(root, "protocol", "protocol", 0, 64, 1, &s, &n, err, errlen))
        goto out;
    if (strcmp(s, AD_PROTOCOL) != 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "must be '%s', not '%.64s'", AD_PROTOCOL, s);
        field_error(err, errlen, "protocol", msg);
        goto out;
    }
    if (get_int(root, "computed_at_ms", "computed_at_ms", 0, 0, INT64_MAX,
                &out->computed_at_ms, err, errlen) < 0 ||
        get_int(root, "valid_for_ms", "valid_for_ms", 0, AD_MIN_VALID_FOR_MS,
                AD_MAX_VALID_FOR_MS, &out->valid_for_ms, err, errlen) < 0)
        goto out;
    recs = json_object_get(root, "recommendations");
    if (recs == NULL) {
        field_error(err, errlen, "recommendations", "missing");
        goto out;
    }
    if (!json_is_array(recs)) {
        field_error(err, errlen, "recommendations", "must be an array");
        goto out;
    }
    n = json_array_size(recs);
    if (n > AD_MAX_RECOMMENDATIONS) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%zu entries, more than the %d allowed", n,
                 AD_MAX_RECOMMENDATIONS);
        field_error(err, errlen, "recommendations", msg);
        goto out;
    }
    out->recs = calloc(n ? n : 1, sizeof(*out->recs));
    if (out->recs == NULL) {
        field_error(err, errlen, "answer", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (parse_rec(json_array_get(recs, i), i, &out->recs[i], &strings, err,
                      errlen))
            goto out;
    out->n_recs = n;
    if (n > 1) {
        /* Two answers for one limit would make the result depend on
         * their order: refused. */
        const ad_recommendation **sorted = malloc(n * sizeof(*sorted));
        if (sorted == NULL) {
            field_error(err, errlen, "answer", "out of memory");
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            sorted[i] = &out->recs[i];
        qsort(sorted, n, sizeof(*sorted), cmp_id);
        for (size_t i = 1; i < n; i++)
            if (strcmp(sorted[i - 1]->limit, sorted[i]->limit) == 0) {
                char field[64], msg[AD_MAX_LIMIT_ID + 32];
                size_t a = (size_t)(sorted[i - 1] - out->recs),
                       b = (size_t)(sorted[i] - out->recs);
                snprintf(field, sizeof(field), "recommendations[%zu].limit",
                         a > b ? a : b);
                snprintf(msg, sizeof(msg), "duplicate limit '%s'",
                         sorted[i]->limit);
                field_error(err, errlen, field, msg);
                free(sorted);
                goto out;
            }
        free(sorted);
    }
    if (own_strings(out, strings) != 0) {
        field_error(err, errlen, "answer", "out of memory");
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    if (rc != 0) {
        free(out->recs);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

void ad_advice_release(ad_advice *a)
{
    free(a->recs);
    free(a->strings_);
    memset(a, 0, sizeof(*a));
}

int64_t ad_clamp(int64_t recommended, int64_t effective_now, int64_t min,
                 int64_t max)
{
    int64_t v = recommended < 0 ? 0 : recommended;
    if (effective_now > 0) {
        int64_t lo = effective_now / 2 + effective_now % 2;
        int64_t hi =
            effective_now > INT64_MAX / 2 ? INT64_MAX : effective_now * 2;
        v = v < lo ? lo : v > hi ? hi : v;
    }
    if (v < min)
        v = min;
    if (v > max)
        v = max;
    return v;
}
