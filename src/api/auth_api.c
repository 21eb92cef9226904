/*
 * auth_api.c - GET /v1/auth, for gateways that ask a sub-service whether
 * a request may pass (nginx's auth_request, examples/nginx/).  The
 * gateway cannot build JSON, so the request's descriptors come as
 * headers, one entry each: "Sluice-Descriptor[-NAME]: key=value", the
 * value taken as it is (no decoding, so no client-chosen bytes can make
 * it fail to parse); entries sent under the same header name form one
 * descriptor, in order.  The domain and hits are query parameters, fixed
 * in the gateway's configuration.
 *
 * The answer is 204 with the rate-limit headers when the request may
 * pass, and 429 with the same headers, Retry-After and a JSON error when
 * it may not: the gateway copies the headers onto its own response.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "api/api.h"
#include "runtime/metrics.h"
#include "http/query.h"
#include "http/respond.h"

#define DESCRIPTOR_HEADER "sluice-descriptor"

typedef struct auth_query {
    const char *domain;
    size_t domain_len;
    int64_t hits;
    int have_hits;
    char msg[128];
} auth_query;

static int auth_param(void *ctx, const char *name, const char *val, size_t vlen)
{
    auth_query *q = ctx;
    if (strcmp(name, "domain") == 0 && q->domain == NULL) {
        q->domain = val;
        q->domain_len = vlen;
    } else if (strcmp(name, "hits") == 0 && !q->have_hits) {
        if (sv_parse_count(val, vlen, &q->hits) != 0) {
            snprintf(q->msg, sizeof(q->msg),
                     "hits: expected a non-negative integer");
            return -1;
        }
        q->have_hits = 1;
    } else {
        snprintf(q->msg, sizeof(q->msg), "%s: %s", name,
                 strcmp(name, "domain") == 0 || strcmp(name, "hits") == 0
                     ? "given twice"
                     : "unknown parameter");
        return -1;
    }
    return 0;
}

/* The header's descriptor name: what follows "Sluice-Descriptor", or
 * NULL for another Sluice-* header. */
static const char *descriptor_suffix(const sv_http_header *h, size_t *len)
{
    size_t n = sizeof(DESCRIPTOR_HEADER) - 1;
    if (h->name_len < n || strncasecmp(h->name, DESCRIPTOR_HEADER, n) != 0 ||
        (h->name_len > n && h->name[n] != '-'))
        return NULL;
    *len = h->name_len - n;
    return h->name + n;
}

/*
 * Groups the Sluice-Descriptor headers into descriptors (by name, case
 * insensitive, in order of first appearance).  ds has room for
 * max_descriptors, entries for n_headers; ds[i].entries points into it,
 * each descriptor's entries contiguous (filled in a second pass).
 */
static int group_headers(sv_worker *w, const sv_http_request *req,
                         sv_dec_descriptor *ds, size_t *n_out,
                         sl_rules_entry *entries, sv_api_err *e)
{
    const sv_config *cfg = &w->server->cfg;
    const char *names[SV_MAX_DESCRIPTORS];
    size_t name_lens[SV_MAX_DESCRIPTORS], counts[SV_MAX_DESCRIPTORS];
    size_t n = 0, max_desc = cfg->max_descriptors;
    if (max_desc > SV_MAX_DESCRIPTORS)
        max_desc = SV_MAX_DESCRIPTORS;

    /* First pass: which descriptor each header belongs to, and counts. */
    for (size_t i = 0; i < req->n_headers; i++) {
        const sv_http_header *h = &req->headers[i];
        size_t sl = 0;
        const char *suffix = descriptor_suffix(h, &sl);
        if (suffix == NULL)
            return sv_api_fail(e, 400, "EINVAL", "%.*s: unknown header",
                               (int)(h->name_len > 64 ? 64 : h->name_len),
                               h->name);
        size_t d = 0;
        while (d < n &&
               (name_lens[d] != sl || strncasecmp(names[d], suffix, sl) != 0))
            d++;
        if (d == n) {
            if (n == max_desc)
                return sv_api_fail(e, 400, "ETOOMANY",
                                   "more than %zu descriptors "
                                   "(--max-descriptors)",
                                   max_desc);
            names[n] = suffix;
            name_lens[n] = sl;
            counts[n++] = 0;
        }
        if (++counts[d] > cfg->max_entries)
            return sv_api_fail(e, 400, "ETOOMANY",
                               "%.*s: more than %zu entries (--max-entries)",
                               (int)(h->name_len > 64 ? 64 : h->name_len),
                               h->name, cfg->max_entries);
    }
    if (n == 0)
        return sv_api_fail(e, 400, "EMISSING",
                           "no Sluice-Descriptor header: each names one "
                           "descriptor entry as key=value");
    size_t off = 0;
    for (size_t d = 0; d < n; d++) {
        ds[d] = (sv_dec_descriptor){entries + off, 0, -1, NULL};
        off += counts[d];
    }

    /* Second pass: each header's entry, in order, into its descriptor. */
    for (size_t i = 0; i < req->n_headers; i++) {
        const sv_http_header *h = &req->headers[i];
        size_t sl = 0, d = 0;
        const char *suffix = descriptor_suffix(h, &sl);
        while (name_lens[d] != sl || strncasecmp(names[d], suffix, sl) != 0)
            d++;
        const char *eq = memchr(h->value, '=', h->value_len);
        if (eq == NULL || eq == h->value)
            return sv_api_fail(e, 400, "EMISSING",
                               "%.*s: expected key=value with a non-empty key",
                               (int)(h->name_len > 64 ? 64 : h->name_len),
                               h->name);
        size_t vlen = h->value_len - (size_t)(eq + 1 - h->value);
        /* Optional whitespace after a field value is not part of it. */
        while (vlen > 0 && (eq[vlen] == ' ' || eq[vlen] == '\t'))
            vlen--;
        ds[d].entries[ds[d].n_entries++] =
            (sl_rules_entry){.key = h->value,
                             .key_len = (size_t)(eq - h->value),
                             .value = eq + 1,
                             .value_len = vlen};
    }
    *n_out = n;
    return 0;
}

/* What a request keeps while it waits on the store: the decoded query
 * (domain points into it), the descriptors and their entries. */
typedef struct auth_state {
    auth_query q;
    sv_dec_descriptor ds[SV_MAX_DESCRIPTORS];
    size_t n;
    sl_rules_entry *entries;
    char dec[]; /* the query, percent-decoded */
} auth_state;

static void auth_state_free(void *p)
{
    auth_state *a = p;
    if (a != NULL)
        free(a->entries);
    free(a);
}

/* Parses and decides: 0, SV_AGAIN, or -1 with the error in e. */
static int auth_decide(sv_worker *w, const sv_http_request *req, sv_req *rq,
                       sv_api_err *e)
{
    auth_state *a = malloc(sizeof(*a) + req->query_len + 1);
    if (a == NULL)
        return sv_api_fail(e, 503, "ENOMEM", "out of memory");
    rq->api = a;
    rq->api_free = auth_state_free;
    a->q = (auth_query){.hits = 1};
    a->n = 0;
    a->entries =
        malloc((req->n_headers ? req->n_headers : 1) * sizeof(*a->entries));
    if (a->entries == NULL)
        return sv_api_fail(e, 503, "ENOMEM", "out of memory");
    if (sv_query_parse(req->query, req->query_len, a->dec, auth_param, &a->q,
                       a->q.msg, sizeof(a->q.msg)) != 0)
        return sv_api_fail(e, 400, "EINVAL", "%s", a->q.msg);
    if (a->q.domain == NULL || a->q.domain_len == 0)
        return sv_api_fail(e, 400, "EMISSING",
                           "domain: missing; give it in the query "
                           "(/v1/auth?domain=D)");
    if (group_headers(w, req, a->ds, &a->n, a->entries, e) != 0)
        return -1;
    rq->res.status = calloc(a->n, sizeof(sv_dec_status));
    sv_dec_state *st = sv_dec_state_get(w, &rq->dec);
    if (rq->res.status == NULL || st == NULL)
        return sv_api_fail(e, 503, "ENOMEM", "out of memory");
    /* hits=0 asks without consuming, as in POST /v1/check. */
    int rc = sv_decide(w, st, a->q.domain, a->q.domain_len, a->ds, a->n,
                       a->q.hits, &rq->res, rq->resume, rq->owner, &rq->wait,
                       e->msg, sizeof(e->msg));
    if (rc == SV_AGAIN)
        return rc;
    if (rc != 0) {
        e->status = sv_decide_status(rc);
        e->code = sl_err_name(rc);
        return -1;
    }
    return 0;
}

int sv_api_auth(sv_worker *w, const sv_http_request *req, sv_req *rq,
                sv_buf *out, int keep_alive)
{
    sv_api_err e = {0};
    if (rq->step == 0) {
        rq->t0 = uv_hrtime();
        if (auth_decide(w, req, rq, &e) == SV_AGAIN) {
            rq->step = 1;
            return SV_AGAIN;
        }
    } else {
        int rc = sv_decide_finish(w, rq->dec, &rq->res, e.msg, sizeof(e.msg));
        if (rc != 0) {
            e.status = sv_decide_status(rc);
            e.code = sl_err_name(rc);
        }
    }
    if (e.status != 0) {
        sv_respond_api_err(w, &e, out, keep_alive);
        return 0;
    }
    const sv_dec_result *res = &rq->res;
    sv_buf headers = {0};
    sv_rate_headers(res, &headers);
    if (!res->over) {
        sv_respond_empty(out, 204, headers.data, keep_alive);
    } else {
        sv_respond_limited(res, headers.data, headers.len,
                           req->method == HTTP_HEAD, out, keep_alive);
    }
    if (headers.failed)
        out->failed = 1;
    sv_buf_release(&headers);
    sv_metrics_latency(w, (sl_nanos)(uv_hrtime() - rq->t0));
    return 0;
}
