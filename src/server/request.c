/*
 * request.c - the JSON decision requests of POST /v1/check and /json:
 * their parse (domain, descriptors, hits, with a 400 naming what is
 * wrong), their state while the decision waits on the store, and their
 * answer.
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

static void sv_free_descriptors(sv_dec_descriptor *ds, size_t n)
{
    if (ds == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(ds[i].entries);
    free(ds);
}

static int sv_parse_descriptors(sv_worker *w, json_t *arr, const char *hits_key,
                                sv_dec_descriptor **out, size_t *n_out,
                                int *status, const char **code, char *msg,
                                size_t msglen)
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
    sv_dec_descriptor *ds = calloc(n, sizeof(*ds));
    if (ds == NULL) {
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
            goto fail;
        }
        if (hits_key != NULL &&
            sv_parse_hits(json_object_get(d, hits_key), -1, &ds[i].hits) != 0) {
            (snprintf(msg, msglen,
                      "descriptors[%zu].hits: expected a non-negative integer",
                      i),
             bad(status, code, "ETYPE"));
            goto fail;
        } else if (hits_key == NULL)
            ds[i].hits = -1;
        if (!json_is_array(entries) || json_array_size(entries) == 0) {
            (snprintf(msg, msglen,
                      "descriptors[%zu].entries: expected a non-empty "
                      "array",
                      i),
             bad(status, code, entries == NULL ? "EMISSING" : "ETYPE"));
            goto fail;
        }
        size_t ne = json_array_size(entries);
        if (ne > cfg->max_entries) {
            *status = 400;
            *code = "ETOOMANY";
            snprintf(msg, msglen,
                     "descriptors[%zu].entries: %zu exceeds the cap of %zu "
                     "(--max-entries)",
                     i, ne, cfg->max_entries);
            goto fail;
        }
        ds[i].entries = calloc(ne, sizeof(sl_rules_entry));
        if (ds[i].entries == NULL) {
            *status = 503;
            *code = "ENOMEM";
            snprintf(msg, msglen, "out of memory");
            goto fail;
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
                goto fail;
            }
            sl_rules_entry *re = &ds[i].entries[j];
            re->key = json_string_value(k);
            re->key_len = json_string_length(k);
            re->value = v ? json_string_value(v) : "";
            re->value_len = v ? json_string_length(v) : 0;
        }
    }
    *out = ds;
    *n_out = n;
    return 0;
fail:
    sv_free_descriptors(ds, n);
    return -1;
}

static int parse_request(sv_worker *w, const sv_http_request *req,
                         const char *hits_key, const char *desc_hits_key,
                         sv_parsed_request *pr, int *status, const char **code,
                         char *msg, size_t msglen)
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
    if (sv_parse_hits(json_object_get(pr->root, hits_key), 1, &pr->hits)) {
        snprintf(msg, msglen, "%s: expected a non-negative integer", hits_key);
        return bad(status, code, "ETYPE");
    }
    if (sv_parse_descriptors(w, json_object_get(pr->root, "descriptors"),
                             desc_hits_key, &pr->ds, &pr->n, status, code, msg,
                             msglen) != 0)
        return -1;
    return 0;
}

static int sv_parse_request(sv_worker *w, const sv_http_request *req,
                            const char *hits_key, const char *desc_hits_key,
                            sv_parsed_request *pr, int *status,
                            const char **code, char *msg, size_t msglen)
{
    int rc = parse_request(w, req, hits_key, desc_hits_key, pr, status, code,
                           msg, msglen);
    if (rc != 0)
        atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    return rc;
}

static void sv_parsed_request_release(sv_parsed_request *pr)
{
    sv_free_descriptors(pr->ds, pr->n);
    json_decref(pr->root);
    memset(pr, 0, sizeof(*pr));
}

int sv_decide_request(sv_worker *w, const sv_http_request *req, sv_req *rq,
                      const char *hits_key, const char *desc_hits_key,
                      int64_t zero_hits_as, sv_buf *out, int keep_alive)
{
    sv_parsed_request *pr = &rq->pr;
    sv_dec_result *res = &rq->res;
    int status, rc;
    const char *code;
    char msg[256];

    if (rq->step == 0) {
        if (sv_parse_request(w, req, hits_key, desc_hits_key, pr, &status,
                             &code, msg, sizeof(msg)) != 0) {
            sv_respond_error(out, status, code, msg, keep_alive);
            return -1;
        }
        if (pr->hits == 0)
            pr->hits = zero_hits_as;
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
