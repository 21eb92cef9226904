/*
 * rls.c - envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit:
 * a RateLimitRequest's descriptors decided by sv_decide(), exactly as
 * POST /json decides them (same rules, counters and metrics), and the
 * RateLimitResponse envoy's ratelimit filter reads.  The semantics are
 * envoyproxy/ratelimit's: a descriptor's own hits_addend wins (0 checks
 * without counting), else the request's, where 0 means 1; a descriptor's
 * limit override stands for its rules (decide.c, "Overrides"); an
 * unmatched descriptor or unknown domain is OK with no limit, an
 * unlimited one OK with 2^32 - 1 remaining, a limit that refused 0
 * remaining; an empty domain or no descriptors is an error (UNKNOWN, as
 * lyft's server answers).  The answer's headers are sluice's or
 * ratelimit's (--grpc-rate-limit-headers), its dynamic_metadata
 * ratelimit's (--response-dynamic-metadata, dyn_meta.h).
 *
 * On Redis a decision waits: the call's state (the decoded request, the
 * descriptors, the decision state) stays in an rls_call until done()
 * comes, or until the session cancels the call (a reset stream, a closed
 * connection, a passed deadline), which gives the wait up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/grpc.h"
#include "grpc/pb.h"
#include "runtime/decide.h"
#include "runtime/dyn_meta.h"
#include "runtime/metrics.h"
#include "http/respond.h"

typedef struct rls_call {
    gr_call *call;
    gr_mem *mem; /* the session's, this and req.ds came from */
    sv_worker *w;
    uint64_t t0; /* uv_hrtime at the start, for the latency histogram */
    gr_pb_request req;
    sv_dec_descriptor *ds;
    sv_dec_override *limits; /* the descriptors' overrides, by index */
    sv_dec_result res;
    sv_dec_state *dec; /* on Redis, the call's own */
    sd_wait *wait;
    /* While waiting: the rules the matches point into, held until the
     * answer is written (a reload may replace the thread's meanwhile). */
    sv_rules *rules;
} rls_call;

static void rls_free(rls_call *r)
{
    gr_pb_request_release(r->mem, &r->req);
    sv_dec_state_free(r->dec);
    sv_rules_release(r->rules);
    gr_mem_release(r->mem, r);
}

static void fail(rls_call *r, int bad_request, int code, const char *msg)
{
    gr_call *c = r->call;
    if (bad_request)
        atomic_fetch_add_explicit(&r->w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    rls_free(r);
    gr_call_fail(c, code, msg);
}

/* rls.proto's RateLimit.Unit: SECOND 1 ... DAY 4, MONTH 5, YEAR 6, WEEK
 * 7; UNKNOWN (0) for a `period` or a unit_multiplier, which it cannot
 * say (POST /json says the same). */
static int unit_of(const sl_rule *r)
{
    static const char *const units[] = {"second", "minute", "hour", "day",
                                        "month",  "year",   "week"};
    if (r->unit == NULL || r->unit_multiplier != 1)
        return 0;
    for (int i = 0; i < 7; i++)
        if (strcmp(r->unit, units[i]) == 0)
            return i + 1;
    return 0;
}

static uint32_t clamp_u32(int64_t v)
{
    return v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* ratelimit's remaining of a status: 0 when the limit refused, whatever
 * units a smaller request would have found (its answers' and Envoy's
 * x-ratelimit-remaining). */
static uint32_t remaining_of(const sv_dec_status *s)
{
    return s->limited ? 0 : clamp_u32(s->d.remaining);
}

/* --grpc-rate-limit-headers ratelimit: envoyproxy/ratelimit's three
 * headers of the descriptor closest to its limit (least remaining; an
 * over-limit one not in quota mode first), RateLimit-Reset the seconds to
 * the end of its unit's window, as ratelimit computes it from the wall
 * clock.  Written into text, which the headers point into. */
static size_t ratelimit_headers(const rls_call *r, sl_nanos now, sv_buf *text,
                                gr_pb_header *h)
{
    const sv_dec_status *min = NULL;
    uint32_t least = UINT32_MAX;
    int forced = 0;
    for (size_t i = 0; i < r->req.n; i++) {
        const sv_dec_status *s = &r->res.status[i];
        if (s->rule == NULL || s->rule->action == SL_RULE_UNLIMITED)
            continue;
        uint32_t left = remaining_of(s);
        if (s->over && !s->quota) {
            min = s, least = 0, forced = 1;
        } else if (!forced && left < least) {
            min = s, least = left;
        }
    }
    if (min == NULL)
        return 0;
    sl_nanos p = min->rule->period;
    static const char *const names[] = {"RateLimit-Limit",
                                        "RateLimit-Remaining",
                                        "RateLimit-Reset"};
    const long long values[] = {
        (long long)clamp_u32(min->rule->requests_per_unit), (long long)least,
        sv_sec_up(p - (now >= 0 ? now % p : 0))};
    size_t start[3];
    text->len = 0;
    text->failed = 0;
    for (int i = 0; i < 3; i++) {
        start[i] = text->len;
        sv_buf_add_int(text, values[i]);
    }
    if (text->failed)
        return 0;
    for (int i = 0; i < 3; i++)
        h[i] = (gr_pb_header){
            .key = names[i],
            .key_len = strlen(names[i]),
            .value = text->data + start[i],
            .value_len = (i < 2 ? start[i + 1] : text->len) - start[i]};
    return 3;
}

/* --grpc-rate-limit-headers true: the same fields as the HTTP answers'
 * (sv_rate_headers), split from their "Name: value\r\n" lines into
 * HeaderValues that point into text. */
#define MAX_HEADERS 8
static size_t rate_headers(const sv_dec_result *res, sv_buf *text,
                           gr_pb_header *h)
{
    size_t n = 0;
    text->len = 0;
    text->failed = 0;
    sv_rate_headers(res, text);
    if (text->failed)
        return 0;
    for (char *p = text->data, *end = p + text->len; p < end && n < MAX_HEADERS;
         n++) {
        char *colon = memchr(p, ':', (size_t)(end - p));
        char *eol = memchr(p, '\r', (size_t)(end - p));
        if (colon == NULL || eol == NULL || colon > eol)
            break;
        h[n] = (gr_pb_header){.key = p,
                              .key_len = (size_t)(colon - p),
                              .value = colon + 2,
                              .value_len = (size_t)(eol - colon - 2)};
        p = eol + 2;
    }
    return n;
}

static void answer(rls_call *r)
{
    sv_worker *w = r->w;
    gr_call *c = r->call;
    gr_pb_status st[SV_MAX_DESCRIPTORS];
    gr_pb_header headers[MAX_HEADERS];
    for (size_t i = 0; i < r->req.n; i++) {
        const sv_dec_status *s = &r->res.status[i];
        const sl_rule *rule = s->rule;
        st[i] = (gr_pb_status){.code = s->over ? GR_PB_CODE_OVER_LIMIT
                                               : GR_PB_CODE_OK};
        if (rule != NULL && rule->action == SL_RULE_UNLIMITED)
            st[i].limit_remaining = UINT32_MAX; /* lyft's, for unlimited */
        if (rule == NULL || rule->action == SL_RULE_UNLIMITED)
            continue;
        sl_nanos reset = s->d.reset_after < 0 ? 0 : s->d.reset_after;
        st[i].has_limit = 1;
        st[i].name = rule->name;
        st[i].name_len = strlen(rule->name);
        st[i].requests_per_unit = clamp_u32(rule->requests_per_unit);
        st[i].unit = unit_of(rule);
        st[i].limit_remaining = remaining_of(s);
        st[i].reset_seconds = reset / SL_NS_PER_SEC;
        st[i].reset_nanos = (int32_t)(reset % SL_NS_PER_SEC);
    }
    gr_pb_response resp = {
        .overall_code = r->res.over ? GR_PB_CODE_OVER_LIMIT : GR_PB_CODE_OK,
        .statuses = st,
        .n = r->req.n,
        .headers = headers,
    };
    if (w->server->cfg.grpc_rate_limit_headers == SV_GRPC_HEADERS_SLUICE)
        resp.n_headers = rate_headers(&r->res, &w->answer, headers);
    else if (w->server->cfg.grpc_rate_limit_headers ==
             SV_GRPC_HEADERS_RATELIMIT)
        resp.n_headers =
            ratelimit_headers(r, sv_now(w), &w->answer, headers);
    sv_buf meta = {0};
    if (w->server->cfg.response_dynamic_metadata) {
        sv_dyn_request dq = {r->req.domain, r->req.domain_len, r->ds, r->req.n,
                             r->req.hits_addend};
        sv_dyn_meta_pb(&meta, sv_decide_rules(sv_dec_state_get(w, &r->dec)),
                       &dq, &r->res);
        if (meta.failed) {
            sv_buf_release(&meta);
            fail(r, 0, GR_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        resp.dynamic_metadata = (const uint8_t *)meta.data;
        resp.dynamic_metadata_len = meta.len;
    }
    size_t len = gr_pb_response_size(&resp);
    uint8_t *out = gr_call_reply_buf(c, len);
    if (out == NULL) {
        sv_buf_release(&meta);
        fail(r, 0, GR_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    gr_pb_response_encode(&resp, out);
    sv_buf_release(&meta);
    sv_metrics_latency(w, (sl_nanos)(uv_hrtime() - r->t0));
    rls_free(r);
    gr_call_reply(c);
}

/* sv_decide()'s outcome: the answer, or its error as a gRPC status. */
static void finish(rls_call *r, int rc, const char *err)
{
    if (rc == 0)
        answer(r);
    else
        fail(r, 0,
             sv_decide_status(rc) == 503 ? GR_UNAVAILABLE : GR_INVALID_ARGUMENT,
             err);
}

static void done_cb(void *owner)
{
    rls_call *r = owner;
    char err[256];
    r->wait = NULL;
    gr_call_set_data(r->call, NULL);
    int rc = sv_decide_finish(r->w, r->dec, &r->res, err, sizeof(err));
    finish(r, rc, err);
}

static void rls_start(gr_call *c, const uint8_t *msg, size_t len)
{
    sv_worker *w = gr_call_ctx(c);
    const sv_config *cfg = &w->server->cfg;
    gr_mem *mem = gr_call_mem(c);
    char err[256];
    gr_pb_request req;
    int rc = gr_pb_decode_request(mem, msg, len, cfg->max_descriptors,
                                  cfg->max_entries, &req, err, sizeof(err));
    rls_call *r = NULL;
    if (rc == 0) {
        size_t n = req.n;
        r = gr_mem_calloc(mem, sizeof(*r) + n * (sizeof(sv_dec_descriptor) +
                                                 sizeof(sv_dec_status) +
                                                 sizeof(sv_dec_override)));
        if (r == NULL)
            gr_pb_request_release(mem, &req);
    }
    if (r == NULL) {
        if (rc == 0 || rc == GR_PB_ENOMEM)
            gr_call_fail(c, GR_RESOURCE_EXHAUSTED, "out of memory");
        else {
            atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                      memory_order_relaxed);
            gr_call_fail(
                c, rc == GR_PB_ETOOMANY ? GR_INVALID_ARGUMENT : GR_INTERNAL,
                err);
        }
        return;
    }
    r->call = c;
    r->mem = mem;
    r->w = w;
    r->t0 = uv_hrtime();
    r->req = req;
    r->ds = (sv_dec_descriptor *)(r + 1);
    r->res.status = (sv_dec_status *)(r->ds + req.n);
    r->limits = (sv_dec_override *)(r->res.status + req.n);
    if (req.domain_len == 0) {
        fail(r, 1, GR_UNKNOWN, "domain: missing or empty");
        return;
    }
    if (req.n == 0) {
        fail(r, 1, GR_UNKNOWN, "descriptors: must not be empty");
        return;
    }
    for (size_t i = 0; i < req.n; i++) {
        const gr_pb_descriptor *d = &req.ds[i];
        if (d->n_entries == 0) {
            snprintf(err, sizeof(err),
                     "descriptors[%zu].entries: must not be empty", i);
            fail(r, 1, GR_INVALID_ARGUMENT, err);
            return;
        }
        if (d->has_hits && d->hits > SL_MAX_COUNT) {
            snprintf(err, sizeof(err),
                     "descriptors[%zu].hits_addend: more than %lld", i,
                     (long long)SL_MAX_COUNT);
            fail(r, 1, GR_INVALID_ARGUMENT, err);
            return;
        }
        if (d->has_limit && sv_override_unit_name(d->limit_unit) == NULL) {
            snprintf(err, sizeof(err),
                     "descriptors[%zu].limit.unit: expected SECOND, MINUTE, "
                     "HOUR, DAY, MONTH, YEAR or WEEK (1 to 7)",
                     i);
            fail(r, 1, GR_INVALID_ARGUMENT, err);
            return;
        }
        r->ds[i].entries = d->entries;
        r->ds[i].n_entries = d->n_entries;
        r->ds[i].hits = d->has_hits ? (int64_t)d->hits : -1;
        if (d->has_limit) {
            r->limits[i] =
                (sv_dec_override){d->limit_requests_per_unit, d->limit_unit};
            r->ds[i].limit = &r->limits[i];
        }
    }
    sv_dec_state *st = sv_dec_state_get(w, &r->dec);
    if (st == NULL) {
        fail(r, 0, GR_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    /* lyft: a request's hits_addend of 0 (or none) counts 1. */
    int64_t hits = req.hits_addend > 0 ? (int64_t)req.hits_addend : 1;
    rc = sv_decide(w, st, req.domain, req.domain_len, r->ds, req.n, hits,
                   &r->res, done_cb, r, &r->wait, err, sizeof(err));
    if (rc == SV_AGAIN) {
        r->rules = w->rules;
        atomic_fetch_add_explicit(&r->rules->refs, 1, memory_order_relaxed);
        gr_call_set_data(c, r);
        return;
    }
    finish(r, rc, err);
}

static void rls_cancel(gr_call *c)
{
    rls_call *r = gr_call_data(c);
    if (r == NULL)
        return;
    gr_call_set_data(c, NULL);
    sd_cancel(r->wait);
    sv_decide_abandon(r->dec);
    rls_free(r);
}

const gr_method gr_rls_method = {
    .path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    .start = rls_start,
    .cancel = rls_cancel,
};
