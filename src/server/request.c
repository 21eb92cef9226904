/*
 * request.c - the JSON decision requests of POST /v1/check and /json:
 * their parse (domain, descriptors, hits, with a 400 naming what is
 * wrong), their state while the decision waits on the store, and their
 * answer.
 *
 * /json's body is envoy's RateLimitRequest in proto3 JSON, read as
 * protojson reads it: a field by its proto name or its lowerCamelCase
 * JSON name (not both), null as the field's default, integers as JSON
 * numbers or decimal strings (2.0 and "1e2" are integers too), an enum
 * by its name or its number.  Unknown fields are ignored, as they are on
 * /v1/check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"
#include "server/request.h"
#include "server/respond.h"

static int bad(int *status, const char **code, const char *c)
{
    *status = 400;
    *code = c;
    return -1;
}

/* hits: absent means `dflt`; otherwise a non-negative integer (proto3
 * JSON also writes integers as strings). */
static int sv_parse_hits(json_t *v, int64_t dflt, int64_t *out)
{
    if (v == NULL || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    json_int_t n;
    if (json_is_integer(v))
        n = json_integer_value(v);
    else if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        n = strtoll(s, &end, 10);
        if (*s == '\0' || *end != '\0')
            return -1;
    } else
        return -1;
    if (n < 0 || n > SL_MAX_COUNT)
        return -1;
    *out = n;
    return 0;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The text of a JSON number, as protojson reads an integer from a
 * string: the whole text one number, integral once its exponent is
 * applied, in [0, max].  0, or -1. */
static int number_text(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    size_t i = 0, int_at, int_len, frac_at, frac_len = 0;
    int neg = len > 0 && s[0] == '-';
    int64_t exp = 0;
    i += (size_t)neg;
    int_at = i;
    if (i == len || !is_digit(s[i]))
        return -1;
    if (s[i++] != '0') /* JSON: no leading zeros */
        while (i < len && is_digit(s[i]))
            i++;
    int_len = i - int_at;
    frac_at = i + 1;
    if (i < len && s[i] == '.') {
        for (i++; i < len && is_digit(s[i]); i++)
            frac_len++;
        if (frac_len == 0)
            return -1;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        int eneg = ++i < len && s[i] == '-';
        i += i < len && (s[i] == '-' || s[i] == '+');
        if (i == len || !is_digit(s[i]))
            return -1;
        for (; i < len && is_digit(s[i]); i++)
            if (exp < 100000) /* far past any max's digits */
                exp = exp * 10 + (s[i] - '0');
        exp = eneg ? -exp : exp;
    }
    if (i != len)
        return -1;
    /* The digits before the point, once the exponent has moved it, are
     * the value; those after it must all be 0.  A zero value stays zero
     * however far the point goes, so the loop stops with the digits. */
    int64_t point = (int64_t)int_len + exp, all = (int64_t)(int_len + frac_len);
    uint64_t v = 0;
    for (int64_t k = 0; k < all || (k < point && v != 0); k++) {
        int d = k >= all               ? 0
                : k < (int64_t)int_len ? s[int_at + (size_t)k] - '0'
                                       : s[frac_at + (size_t)k - int_len] - '0';
        if (k >= point) {
            if (d != 0)
                return -1;
        } else if (v > (max - (uint64_t)d) / 10) {
            return -1;
        } else {
            v = v * 10 + (uint64_t)d;
        }
    }
    if (neg && v != 0)
        return -1;
    *out = v;
    return 0;
}

/* A proto3 JSON unsigned integer: a JSON number or a string holding one,
 * integral, in [0, max] (max is at most 2^40, so a double holds it
 * exactly).  0, or -1. */
static int proto3_uint(json_t *v, uint64_t max, uint64_t *out)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || (uint64_t)n > max)
            return -1;
        *out = (uint64_t)n;
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0 && d <= (double)max) || d != (double)(uint64_t)d)
            return -1;
        *out = (uint64_t)d;
        return 0;
    }
    if (json_is_string(v))
        return number_text(json_string_value(v), json_string_length(v), max,
                           out);
    return -1;
}

/* A proto3 field of obj by its proto name or its JSON name: *v (NULL
 * when absent or null, protojson's default) and the name the client
 * wrote; -1 when both names are given (protojson: a duplicate field). */
static int proto3_field(json_t *obj, const char *proto_name,
                        const char *json_name, json_t **v, const char **name)
{
    json_t *a = json_object_get(obj, proto_name);
    json_t *b = json_object_get(obj, json_name);
    *name = a != NULL ? proto_name : json_name;
    *v = a != NULL ? a : b;
    if (*v != NULL && json_is_null(*v))
        *v = NULL;
    return a != NULL && b != NULL && a != b ? -1 : 0;
}

/* The proto3 integer field of obj at `at` ("", "descriptors[0]." ...):
 * *out is its value, or stays as it is when the field is absent or null.
 * Both names at once, or not an integer in [0, max], is a 400 naming the
 * field: -1. */
static int uint_field(json_t *obj, const char *at, const char *proto_name,
                      const char *json_name, uint64_t max, int64_t *out,
                      int *status, const char **code, char *msg, size_t msglen)
{
    json_t *v;
    const char *name;
    uint64_t u;
    if (proto3_field(obj, proto_name, json_name, &v, &name) != 0) {
        snprintf(msg, msglen, "%s%s and %s are one field, given twice", at,
                 proto_name, json_name);
        return bad(status, code, "EINVAL");
    }
    if (v == NULL)
        return 0;
    if (proto3_uint(v, max, &u) != 0) {
        snprintf(msg, msglen, "%s%s: expected an integer from 0 to %llu", at,
                 name, (unsigned long long)max);
        return bad(status, code, "ETYPE");
    }
    *out = (int64_t)u;
    return 0;
}

/* lyft's fields of descriptors[i]: hits_addend (a UInt64Value: present,
 * even 0, it is the descriptor's hits) and limit, the override (a
 * RateLimitOverride: requests_per_unit uint32, unit RateLimitUnit).
 * 0, or -1 with the 400 set. */
static int lyft_descriptor(json_t *d, size_t i, sv_dec_descriptor *dd,
                           sv_dec_override *ov, int *status, const char **code,
                           char *msg, size_t msglen)
{
    json_t *v, *lim;
    const char *name;
    char at[64];
    snprintf(at, sizeof(at), "descriptors[%zu].", i);
    dd->hits = -1;
    if (uint_field(d, at, "hits_addend", "hitsAddend", SL_MAX_COUNT, &dd->hits,
                   status, code, msg, msglen) != 0)
        return -1;
    proto3_field(d, "limit", "limit", &lim, &name);
    if (lim == NULL)
        return 0;
    if (!json_is_object(lim))
        return (snprintf(msg, msglen,
                         "descriptors[%zu].limit: expected an object", i),
                bad(status, code, "ETYPE"));
    snprintf(at, sizeof(at), "descriptors[%zu].limit.", i);
    ov->requests_per_unit = 0; /* proto3's default: 0, which refuses */
    if (uint_field(lim, at, "requests_per_unit", "requestsPerUnit", UINT32_MAX,
                   &ov->requests_per_unit, status, code, msg, msglen) != 0)
        return -1;
    ov->unit = 0;
    proto3_field(lim, "unit", "unit", &v, &name);
    if (json_is_integer(v) && json_integer_value(v) > 0 &&
        json_integer_value(v) < 100)
        ov->unit = (int)json_integer_value(v);
    for (int k = 1; json_is_string(v) && sv_override_unit_name(k); k++)
        if (strcmp(json_string_value(v), sv_override_unit_name(k)) == 0)
            ov->unit = k;
    if (sv_override_unit_name(ov->unit) == NULL)
        return (snprintf(msg, msglen,
                         "descriptors[%zu].limit.unit: expected SECOND, "
                         "MINUTE, HOUR, DAY, MONTH, YEAR or WEEK (or 1 to 7)",
                         i),
                bad(status, code, v == NULL ? "EMISSING" : "ETYPE"));
    dd->limit = ov;
    return 0;
}

static void sv_free_descriptors(sv_dec_descriptor *ds, size_t n)
{
    if (ds == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(ds[i].entries);
    free(ds);
}

static int sv_parse_descriptors(sv_worker *w, json_t *arr, sv_request_api api,
                                sv_parsed_request *pr, int *status,
                                const char **code, char *msg, size_t msglen)
{
    const sv_config *cfg = &w->server->cfg;
    if (arr == NULL)
        return (snprintf(msg, msglen, "descriptors: missing"),
                bad(status, code, "EMISSING"));
    if (!json_is_array(arr))
        return (snprintf(msg, msglen, "descriptors: expected an array"),
                bad(status, code, "ETYPE"));
    size_t n = json_array_size(arr);
    if (n == 0)
        return (snprintf(msg, msglen, "descriptors: must not be empty"),
                bad(status, code, "EMISSING"));
    if (n > cfg->max_descriptors)
        return (snprintf(msg, msglen,
                         "descriptors: %zu exceeds the cap of %zu "
                         "(--max-descriptors)",
                         n, cfg->max_descriptors),
                bad(status, code, "ETOOMANY"));
    sv_dec_descriptor *ds = pr->ds = calloc(n, sizeof(*ds));
    pr->n = n;
    if (ds == NULL ||
        (api == SV_API_LYFT && (pr->ov = calloc(n, sizeof(*pr->ov))) == NULL)) {
        *status = 503;
        *code = "ENOMEM";
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(arr, i);
        json_t *entries = json_object_get(d, "entries");
        if (!json_is_object(d)) {
            (snprintf(msg, msglen, "descriptors[%zu]: expected an object", i),
             bad(status, code, "ETYPE"));
            return -1;
        }
        if (api == SV_API_LYFT) {
            if (lyft_descriptor(d, i, &ds[i], &pr->ov[i], status, code, msg,
                                msglen) != 0)
                return -1;
        } else if (sv_parse_hits(json_object_get(d, "hits"), -1, &ds[i].hits)) {
            (snprintf(msg, msglen,
                      "descriptors[%zu].hits: expected a non-negative integer",
                      i),
             bad(status, code, "ETYPE"));
            return -1;
        }
        if (!json_is_array(entries) || json_array_size(entries) == 0) {
            (snprintf(msg, msglen,
                      "descriptors[%zu].entries: expected a non-empty "
                      "array",
                      i),
             bad(status, code, entries == NULL ? "EMISSING" : "ETYPE"));
            return -1;
        }
        size_t ne = json_array_size(entries);
        if (ne > cfg->max_entries) {
            *status = 400;
            *code = "ETOOMANY";
            snprintf(msg, msglen,
                     "descriptors[%zu].entries: %zu exceeds the cap of %zu "
                     "(--max-entries)",
                     i, ne, cfg->max_entries);
            return -1;
        }
        ds[i].entries = calloc(ne, sizeof(sl_rules_entry));
        if (ds[i].entries == NULL) {
            *status = 503;
            *code = "ENOMEM";
            snprintf(msg, msglen, "out of memory");
            return -1;
        }
        ds[i].n_entries = ne;
        for (size_t j = 0; j < ne; j++) {
            json_t *e = json_array_get(entries, j);
            json_t *k = json_object_get(e, "key");
            json_t *v = json_object_get(e, "value");
            if (!json_is_string(k) || json_string_length(k) == 0 ||
                (v != NULL && !json_is_string(v))) {
                (snprintf(msg, msglen,
                          "descriptors[%zu].entries[%zu]: expected {\"key\": "
                          "non-empty string, \"value\": string}",
                          i, j),
                 bad(status, code, k == NULL ? "EMISSING" : "ETYPE"));
                return -1;
            }
            sl_rules_entry *re = &ds[i].entries[j];
            re->key = json_string_value(k);
            re->key_len = json_string_length(k);
            re->value = v ? json_string_value(v) : "";
            re->value_len = v ? json_string_length(v) : 0;
        }
    }
    return 0;
}

static int parse_request(sv_worker *w, const sv_http_request *req,
                         sv_request_api api, sv_parsed_request *pr, int *status,
                         const char **code, char *msg, size_t msglen)
{
    json_error_t je;
    memset(pr, 0, sizeof(*pr));
    pr->root =
        json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (pr->root == NULL) {
        snprintf(msg, msglen, "malformed JSON: %s (line %d, column %d)",
                 je.text, je.line, je.column);
        return bad(status, code, "EJSON");
    }
    if (!json_is_object(pr->root)) {
        snprintf(msg, msglen, "request: expected a JSON object");
        return bad(status, code, "ETYPE");
    }
    json_t *d = json_object_get(pr->root, "domain");
    if (d == NULL || (json_is_string(d) && json_string_length(d) == 0)) {
        snprintf(msg, msglen, "domain: missing or empty");
        return bad(status, code, "EMISSING");
    }
    if (!json_is_string(d)) {
        snprintf(msg, msglen, "domain: expected a string");
        return bad(status, code, "ETYPE");
    }
    pr->domain = json_string_value(d);
    pr->domain_len = json_string_length(d);
    if (api == SV_API_LYFT) {
        /* A uint32: lyft counts max(1, hits_addend) for the descriptors
         * without their own. */
        pr->hits = 0;
        if (uint_field(pr->root, "", "hits_addend", "hitsAddend", UINT32_MAX,
                       &pr->hits, status, code, msg, msglen) != 0)
            return -1;
        pr->hits = pr->hits > 0 ? pr->hits : 1;
    } else if (sv_parse_hits(json_object_get(pr->root, "hits"), 1, &pr->hits)) {
        snprintf(msg, msglen, "hits: expected a non-negative integer");
        return bad(status, code, "ETYPE");
    }
    return sv_parse_descriptors(w, json_object_get(pr->root, "descriptors"),
                                api, pr, status, code, msg, msglen);
}

static int sv_parse_request(sv_worker *w, const sv_http_request *req,
                            sv_request_api api, sv_parsed_request *pr,
                            int *status, const char **code, char *msg,
                            size_t msglen)
{
    int rc = parse_request(w, req, api, pr, status, code, msg, msglen);
    if (rc != 0)
        atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    return rc;
}

static void sv_parsed_request_release(sv_parsed_request *pr)
{
    sv_free_descriptors(pr->ds, pr->n);
    free(pr->ov);
    json_decref(pr->root);
    memset(pr, 0, sizeof(*pr));
}

int sv_decide_request(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      sv_request_api api, sv_buf *out, int keep_alive)
{
    sv_parsed_request *pr = &rq->pr;
    sv_dec_result *res = &rq->res;
    int status, rc;
    const char *code;
    char msg[256];

    if (rq->step == 0) {
        if (sv_parse_request(w, req, api, pr, &status, &code, msg,
                             sizeof(msg)) != 0) {
            sv_respond_error(out, status, code, msg, keep_alive);
            return -1;
        }
        res->status = calloc(pr->n, sizeof(sv_dec_status));
        sv_dec_state *st = sv_dec_state_get(w, &rq->dec);
        if (res->status == NULL || st == NULL) {
            sv_respond_error(out, 503, "ENOMEM", "out of memory", keep_alive);
            return -1;
        }
        rc = sv_decide(w, st, pr->domain, pr->domain_len, pr->ds, pr->n,
                       pr->hits, res, rq->resume, rq->owner, &rq->wait, msg,
                       sizeof(msg));
        if (rc == SV_AGAIN) {
            rq->step = 1;
            return SV_AGAIN;
        }
    } else {
        rc = sv_decide_finish(w, rq->dec, res, msg, sizeof(msg));
    }
    if (rc != 0) {
        sv_respond_error(out, sv_decide_status(rc), sl_err_name(rc), msg,
                         keep_alive);
        return -1;
    }
    return 0;
}

void sv_req_reset(sv_req *rq)
{
    sv_parsed_request_release(&rq->pr);
    free(rq->res.status);
    rq->res = (sv_dec_result){0};
    if (rq->api_free != NULL)
        rq->api_free(rq->api);
    rq->api = NULL;
    rq->api_free = NULL;
    rq->wait = NULL;
    rq->step = 0;
}

void sv_req_close(sv_req *rq)
{
    if (rq->wait != NULL) {
        sd_cancel(rq->wait);
        sv_decide_abandon(rq->dec);
    }
    sv_req_reset(rq);
    sv_dec_state_free(rq->dec);
    rq->dec = NULL;
}

void sv_respond_decision(sv_worker *w, const sv_dec_result *res, sv_buf *out,
                         int keep_alive, uint64_t t0)
{
    const sv_buf *body = &w->answer;
    if (body->failed) {
        out->failed = 1; /* conn.c answers 503 ENOMEM instead */
        return;
    }
    /* A trailing newline, counted in Content-Length, so curl output
     * ends a line. */
    sv_respond_head(out, res->over ? 429 : 200, "application/json",
                    body->len + 1, keep_alive);
    sv_rate_headers(res, out);
    sv_buf_add(out, "\r\n", 2);
    sv_buf_add(out, body->data, body->len);
    sv_buf_add(out, "\n", 1);
    sv_metrics_latency(w, (sl_nanos)(uv_hrtime() - t0));
}
