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

#include "runtime/metrics.h"
#include "api/json_scan.h"
#include "api/request.h"
#include "http/respond.h"

static int bad(int *status, const char **code, const char *c)
{
    *status = 400;
    *code = c;
    return -1;
}

/* The parse's view of the body: the scanned tokens and the request
 * whose strings it fills. */
typedef struct jreq {
    const sv_json *j;
    sv_parsed_request *pr;
} jreq;

static sv_json_type type_of(const jreq *q, int i)
{
    return i < 0 ? SV_JSON_NULL : (sv_json_type)q->j->tok[i].type;
}

/* A string token's bytes: in the body when unescaped, which the
 * connection keeps until the request is answered; else decoded into the
 * request's own copy, made once, as long as the body (decoding never
 * grows a string). */
static int str_of(jreq *q, int i, const char **s, size_t *len)
{
    sv_parsed_request *pr = q->pr;
    char *out = NULL;
    if (q->j->tok[i].escaped) {
        if (pr->strings == NULL && (pr->strings = malloc(q->j->len)) == NULL)
            return -1;
        out = pr->strings + pr->strings_used;
    }
    *len = sv_json_str(q->j, i, out, s);
    if (out != NULL)
        pr->strings_used += *len;
    return 0;
}

/* A number token's text. */
static const char *raw(const jreq *q, int i, size_t *len)
{
    *len = q->j->tok[i].len;
    return q->j->text + q->j->tok[i].start;
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

/* hits: absent (or null) means `dflt`; otherwise a non-negative
 * integer, as a JSON integer or a decimal string (proto3 JSON writes
 * integers as strings).  0, or -1. */
static int sv_parse_hits(jreq *q, int v, int64_t dflt, int64_t *out)
{
    sv_json_type t = type_of(q, v);
    uint64_t n;
    size_t len;
    const char *s;
    if (t == SV_JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (t == SV_JSON_NUMBER && q->j->tok[v].integral) {
        s = raw(q, v, &len);
    } else if (t == SV_JSON_STRING) {
        if (str_of(q, v, &s, &len) != 0)
            return -1;
        for (size_t k = 0; k < len; k++)
            if (!is_digit(s[k]))
                return -1;
    } else {
        return -1;
    }
    if (number_text(s, len, SL_MAX_COUNT, &n) != 0)
        return -1;
    *out = (int64_t)n;
    return 0;
}

/* A proto3 JSON unsigned integer: a JSON number or a string holding one,
 * integral, in [0, max].  0, or -1. */
static int proto3_uint(jreq *q, int v, uint64_t max, uint64_t *out)
{
    const char *s;
    size_t len;
    if (type_of(q, v) == SV_JSON_NUMBER)
        s = raw(q, v, &len);
    else if (type_of(q, v) != SV_JSON_STRING || str_of(q, v, &s, &len) != 0)
        return -1;
    return number_text(s, len, max, out);
}

/* A proto3 field of obj by its proto name or its JSON name: *v (-1
 * when absent or null, protojson's default) and the name the client
 * wrote; -1 when both names are given (protojson: a duplicate field). */
static int proto3_field(const jreq *q, int obj, const char *proto_name,
                        const char *json_name, int *v, const char **name)
{
    int a = sv_json_get(q->j, obj, proto_name);
    int b = a;
    if (strcmp(proto_name, json_name) != 0)
        b = sv_json_get(q->j, obj, json_name);
    *name = a >= 0 ? proto_name : json_name;
    *v = a >= 0 ? a : b;
    if (type_of(q, *v) == SV_JSON_NULL)
        *v = -1;
    return a >= 0 && b >= 0 && a != b ? -1 : 0;
}

/* The proto3 integer field of obj at `at` ("", "descriptors[0]." ...):
 * *out is its value, or stays as it is when the field is absent or null.
 * Both names at once, or not an integer in [0, max], is a 400 naming the
 * field: -1. */
static int uint_field(jreq *q, int obj, const char *at, const char *proto_name,
                      const char *json_name, uint64_t max, int64_t *out,
                      int *status, const char **code, char *msg, size_t msglen)
{
    int v;
    const char *name;
    uint64_t u;
    if (proto3_field(q, obj, proto_name, json_name, &v, &name) != 0) {
        snprintf(msg, msglen, "%s%s and %s are one field, given twice", at,
                 proto_name, json_name);
        return bad(status, code, "EINVAL");
    }
    if (v < 0)
        return 0;
    if (proto3_uint(q, v, max, &u) != 0) {
        snprintf(msg, msglen, "%s%s: expected an integer from 0 to %llu", at,
                 name, (unsigned long long)max);
        return bad(status, code, "ETYPE");
    }
    *out = (int64_t)u;
    return 0;
}

/* The unit of a lyft override: an enum by its number or its name; 0 when
 * it is neither. */
static int override_unit(jreq *q, int v)
{
    uint64_t u;
    size_t len;
    const char *s;
    if (type_of(q, v) == SV_JSON_NUMBER) {
        s = raw(q, v, &len);
        return q->j->tok[v].integral && number_text(s, len, 99, &u) == 0
                   ? (int)u
                   : 0;
    }
    if (type_of(q, v) != SV_JSON_STRING || str_of(q, v, &s, &len) != 0)
        return 0;
    for (int k = 1; sv_override_unit_name(k); k++)
        if (strlen(sv_override_unit_name(k)) == len &&
            memcmp(s, sv_override_unit_name(k), len) == 0)
            return k;
    return 0;
}

/* lyft's fields of descriptors[i]: hits_addend (a UInt64Value: present,
 * even 0, it is the descriptor's hits) and limit, the override (a
 * RateLimitOverride: requests_per_unit uint32, unit RateLimitUnit).
 * 0, or -1 with the 400 set. */
static int lyft_descriptor(jreq *q, int d, size_t i, sv_dec_descriptor *dd,
                           sv_dec_override *ov, int *status, const char **code,
                           char *msg, size_t msglen)
{
    int v, lim;
    const char *name;
    char at[64];
    snprintf(at, sizeof(at), "descriptors[%zu].", i);
    dd->hits = -1;
    if (uint_field(q, d, at, "hits_addend", "hitsAddend", SL_MAX_COUNT,
                   &dd->hits, status, code, msg, msglen) != 0)
        return -1;
    proto3_field(q, d, "limit", "limit", &lim, &name);
    if (lim < 0)
        return 0;
    if (type_of(q, lim) != SV_JSON_OBJECT)
        return (snprintf(msg, msglen,
                         "descriptors[%zu].limit: expected an object", i),
                bad(status, code, "ETYPE"));
    snprintf(at, sizeof(at), "descriptors[%zu].limit.", i);
    ov->requests_per_unit = 0; /* proto3's default: 0, which refuses */
    if (uint_field(q, lim, at, "requests_per_unit", "requestsPerUnit",
                   UINT32_MAX, &ov->requests_per_unit, status, code, msg,
                   msglen) != 0)
        return -1;
    proto3_field(q, lim, "unit", "unit", &v, &name);
    ov->unit = override_unit(q, v);
    if (sv_override_unit_name(ov->unit) == NULL || ov->unit == 0)
        return (snprintf(msg, msglen,
                         "descriptors[%zu].limit.unit: expected SECOND, "
                         "MINUTE, HOUR, DAY, MONTH, YEAR or WEEK (or 1 to 7)",
                         i),
                bad(status, code, v < 0 ? "EMISSING" : "ETYPE"));
    dd->limit = ov;
    return 0;
}

static int enomem(int *status, const char **code, char *msg, size_t msglen)
{
    *status = 503;
    *code = "ENOMEM";
    snprintf(msg, msglen, "out of memory");
    return -1;
}

/* descriptors[i].entries into ds->entries, which point into the body or
 * the request's strings. */
static int parse_entries(jreq *q, int entries, size_t i, sv_dec_descriptor *ds,
                         size_t max_entries, int *status, const char **code,
                         char *msg, size_t msglen)
{
    const sv_json *j = q->j;
    if (type_of(q, entries) != SV_JSON_ARRAY || j->tok[entries].size == 0)
        return (snprintf(msg, msglen,
                         "descriptors[%zu].entries: expected a non-empty "
                         "array",
                         i),
                bad(status, code, entries < 0 ? "EMISSING" : "ETYPE"));
    size_t ne = j->tok[entries].size;
    if (ne > max_entries) {
        snprintf(msg, msglen,
                 "descriptors[%zu].entries: %zu exceeds the cap of %zu "
                 "(--max-entries)",
                 i, ne, max_entries);
        return bad(status, code, "ETOOMANY");
    }
    if ((ds->entries = calloc(ne, sizeof(sl_rules_entry))) == NULL)
        return enomem(status, code, msg, msglen);
    ds->n_entries = ne;
    int e = entries + 1;
    for (size_t k = 0; k < ne; k++, e = (int)j->tok[e].next) {
        int key = sv_json_get(j, e, "key");
        int value = sv_json_get(j, e, "value");
        sl_rules_entry *re = &ds->entries[k];
        if (type_of(q, key) != SV_JSON_STRING || j->tok[key].len == 0 ||
            (value >= 0 && type_of(q, value) != SV_JSON_STRING)) {
            snprintf(msg, msglen,
                     "descriptors[%zu].entries[%zu]: expected {\"key\": "
                     "non-empty string, \"value\": string}",
                     i, k);
            return bad(status, code, key < 0 ? "EMISSING" : "ETYPE");
        }
        re->value = "";
        if (str_of(q, key, &re->key, &re->key_len) != 0 ||
            (value >= 0 && str_of(q, value, &re->value, &re->value_len) != 0))
            return enomem(status, code, msg, msglen);
    }
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

static int sv_parse_descriptors(sv_worker *w, jreq *q, int arr,
                                sv_request_api api, int *status,
                                const char **code, char *msg, size_t msglen)
{
    const sv_config *cfg = &w->server->cfg;
    sv_parsed_request *pr = q->pr;
    const sv_json *j = q->j;
    if (arr < 0)
        return (snprintf(msg, msglen, "descriptors: missing"),
                bad(status, code, "EMISSING"));
    if (type_of(q, arr) != SV_JSON_ARRAY)
        return (snprintf(msg, msglen, "descriptors: expected an array"),
                bad(status, code, "ETYPE"));
    size_t n = j->tok[arr].size;
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
        (api == SV_API_LYFT && (pr->ov = calloc(n, sizeof(*pr->ov))) == NULL))
        return enomem(status, code, msg, msglen);
    int d = arr + 1;
    for (size_t i = 0; i < n; i++, d = (int)j->tok[d].next) {
        if (type_of(q, d) != SV_JSON_OBJECT)
            return (snprintf(msg, msglen,
                             "descriptors[%zu]: expected an object", i),
                    bad(status, code, "ETYPE"));
        if (api == SV_API_LYFT) {
            if (lyft_descriptor(q, d, i, &ds[i], &pr->ov[i], status, code, msg,
                                msglen) != 0)
                return -1;
        } else if (sv_parse_hits(q, sv_json_get(j, d, "hits"), -1,
                                 &ds[i].hits)) {
            return (snprintf(msg, msglen,
                             "descriptors[%zu].hits: expected a "
                             "non-negative integer",
                             i),
                    bad(status, code, "ETYPE"));
        }
        if (parse_entries(q, sv_json_get(j, d, "entries"), i, &ds[i],
                          cfg->max_entries, status, code, msg, msglen) != 0)
            return -1;
    }
    return 0;
}

static int parse_request(sv_worker *w, const sv_http_request *req,
                         sv_request_api api, sv_parsed_request *pr, int *status,
                         const char **code, char *msg, size_t msglen)
{
    if (w->json == NULL && (w->json = calloc(1, sizeof(sv_json))) == NULL)
        return enomem(status, code, msg, msglen);
    sv_json *j = w->json;
    jreq q = {j, pr};
    memset(pr, 0, sizeof(*pr));
    int rc = sv_json_scan(j, req->body, req->body_len);
    if (rc == -2)
        return enomem(status, code, msg, msglen);
    if (rc != 0) {
        snprintf(msg, msglen, "malformed JSON: %s", j->err);
        return bad(status, code, "EJSON");
    }
    if (type_of(&q, 0) != SV_JSON_OBJECT) {
        snprintf(msg, msglen, "request: expected a JSON object");
        return bad(status, code, "ETYPE");
    }
    int d = sv_json_get(j, 0, "domain");
    if (d < 0 || (type_of(&q, d) == SV_JSON_STRING && j->tok[d].len == 0)) {
        snprintf(msg, msglen, "domain: missing or empty");
        return bad(status, code, "EMISSING");
    }
    if (type_of(&q, d) != SV_JSON_STRING) {
        snprintf(msg, msglen, "domain: expected a string");
        return bad(status, code, "ETYPE");
    }
    if (str_of(&q, d, &pr->domain, &pr->domain_len) != 0)
        return enomem(status, code, msg, msglen);
    if (api == SV_API_LYFT) {
        /* A uint32: lyft counts max(1, hits_addend) for the descriptors
         * without their own. */
        pr->hits = 0;
        if (uint_field(&q, 0, "", "hits_addend", "hitsAddend", UINT32_MAX,
                       &pr->hits, status, code, msg, msglen) != 0)
            return -1;
        pr->hits_addend = pr->hits;
        pr->hits = pr->hits > 0 ? pr->hits : 1;
    } else if (sv_parse_hits(&q, sv_json_get(j, 0, "hits"), 1, &pr->hits)) {
        snprintf(msg, msglen, "hits: expected a non-negative integer");
        return bad(status, code, "ETYPE");
    }
    return sv_parse_descriptors(w, &q, sv_json_get(j, 0, "descriptors"), api,
                                status, code, msg, msglen);
}

static int sv_parse_request(sv_worker *w, const sv_http_request *req,
                            sv_request_api api, sv_parsed_request *pr,
                            int *status, const char **code, char *msg,
                            size_t msglen)
{
    int rc = parse_request(w, req, api, pr, status, code, msg, msglen);
    /* The tokens are kept for the next request, unless a large body
     * grew them: a thread keeps ~80 KiB, not max_body_bytes' worth. */
    if (w->json != NULL && w->json->cap > 4096)
        sv_json_release(w->json);
    if (rc != 0)
        atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    return rc;
}

static void sv_parsed_request_release(sv_parsed_request *pr)
{
    sv_free_descriptors(pr->ds, pr->n);
    free(pr->ov);
    free(pr->strings);
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

static void req_init(sv_req *rq, sd_done_fn resume, void *owner)
{
    rq->resume = resume;
    rq->owner = owner;
}

static void req_woke(sv_req *rq)
{
    rq->wait = NULL; /* it ended */
}

static void req_free(sv_req *rq)
{
    sv_req_close(rq);
    free(rq);
}

const sv_req_type sv_api_req = {
    .size = sizeof(sv_req),
    .init = req_init,
    .woke = req_woke,
    .reset = sv_req_reset,
    .free = req_free,
};

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
