/*
 * lyft_api.c - POST /json, the JSON endpoint of lyft/ratelimit (envoyproxy
 * /ratelimit): envoy's RateLimitRequest in, RateLimitResponse out, both in
 * proto3 JSON (envoy/service/ratelimit/v3/rls.proto), so an existing
 * caller switches by changing a URL.  The request is read as protojson
 * reads it (request.c), with hits_addend and each descriptor's
 * hits_addend and limit override; the answer is written as protojson
 * writes it, leaving out fields of proto3's default value (an empty name,
 * a limitRemaining of 0, an UNKNOWN unit).  As in lyft, an over-limit
 * answer has status 429, a limit that refused says 0 remaining, an
 * unlimited rule's status is OK with a limitRemaining of 2^32 - 1 and no
 * currentLimit, and --response-dynamic-metadata adds its dynamicMetadata
 * (dyn_meta.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "runtime/dyn_meta.h"

/* A proto3 JSON Duration: seconds with 0, 3, 6 or 9 fractional digits. */
static void add_duration(sv_buf *b, sl_nanos ns)
{
    char buf[48];
    if (ns < 0)
        ns = 0;
    long long s = (long long)(ns / SL_NS_PER_SEC);
    long long frac = (long long)(ns % SL_NS_PER_SEC);
    if (frac == 0)
        snprintf(buf, sizeof(buf), "%llds", s);
    else if (frac % 1000000 == 0)
        snprintf(buf, sizeof(buf), "%lld.%03llds", s, frac / 1000000);
    else if (frac % 1000 == 0)
        snprintf(buf, sizeof(buf), "%lld.%06llds", s, frac / 1000);
    else
        snprintf(buf, sizeof(buf), "%lld.%09llds", s, frac);
    sv_buf_add_json_string(b, buf, strlen(buf));
}

/* rls.proto's RateLimit.Unit, SECOND ... YEAR, or nothing (UNKNOWN, the
 * default) for a `period` that is no calendar unit or a unit_multiplier
 * the enum cannot say. */
static void add_unit(sv_buf *b, const sl_rule *r, const char *sep)
{
    char buf[16];
    size_t i = 0;
    if (r->unit == NULL || r->unit_multiplier != 1)
        return;
    for (; r->unit[i] && i + 1 < sizeof(buf); i++)
        buf[i] = (char)toupper((unsigned char)r->unit[i]);
    sv_buf_addstr(b, sep);
    sv_buf_addstr(b, "\"unit\":");
    sv_buf_add_json_string(b, buf, i);
}

/* A status's currentLimit, limitRemaining and durationUntilReset. */
static void add_limit(sv_buf *b, const sv_dec_status *st)
{
    const sl_rule *r = st->rule;
    const char *sep = "";
    sv_buf_addstr(b, ",\"currentLimit\":{");
    if (r->name[0] != '\0') {
        sv_buf_addstr(b, "\"name\":");
        sv_buf_add_json_string(b, r->name, strlen(r->name));
        sep = ",";
    }
    if (r->requests_per_unit > 0) {
        sv_buf_addstr(b, sep);
        sv_buf_addstr(b, "\"requestsPerUnit\":");
        sv_buf_add_int(b, (long long)r->requests_per_unit);
        sep = ",";
    }
    add_unit(b, r, sep);
    sv_buf_addstr(b, "}");
    /* ratelimit's 0 for a limit that refused, whatever a smaller request
     * would have found left (Envoy copies it to x-ratelimit-remaining). */
    if (st->d.remaining > 0 && !st->limited) {
        sv_buf_addstr(b, ",\"limitRemaining\":");
        sv_buf_add_int(b, st->d.remaining > UINT32_MAX ? UINT32_MAX
                                                       : st->d.remaining);
    }
    sv_buf_addstr(b, ",\"durationUntilReset\":");
    add_duration(b, st->d.reset_after);
}

int sv_api_lyft(sv_worker *w, const sv_http_request *req, sv_req *rq,
                sv_buf *out, int keep_alive)
{
    if (rq->step == 0)
        rq->t0 = uv_hrtime();
    int rc = sv_decide_request(w, req, rq, SV_API_LYFT, out, keep_alive);
    if (rc != 0)
        return rc == SV_AGAIN ? rc : 0;
    const sv_dec_result *res = &rq->res;
    sv_buf *b = &w->answer;
    b->len = 0;
    b->failed = 0;
    sv_buf_addstr(b, res->over
                         ? "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":["
                         : "{\"overallCode\":\"OK\",\"statuses\":[");
    for (size_t i = 0; i < rq->pr.n; i++) {
        const sv_dec_status *st = &res->status[i];
        if (i > 0)
            sv_buf_addstr(b, ",");
        sv_buf_addstr(b, st->over ? "{\"code\":\"OVER_LIMIT\""
                                  : "{\"code\":\"OK\"");
        if (st->rule != NULL && st->rule->action == SL_RULE_UNLIMITED)
            sv_buf_addstr(b, ",\"limitRemaining\":4294967295");
        else if (st->rule != NULL)
            add_limit(b, st);
        sv_buf_addstr(b, "}");
    }
    sv_buf_addstr(b, "]");
    if (w->server->cfg.response_dynamic_metadata) {
        sv_dyn_request dq = {rq->pr.domain, rq->pr.domain_len, rq->pr.ds,
                             rq->pr.n, (uint64_t)rq->pr.hits_addend};
        sv_buf_addstr(b, ",\"dynamicMetadata\":");
        sv_dyn_meta_json(b, sv_decide_rules(sv_dec_state_get(w, &rq->dec)),
                         &dq, res);
    }
    sv_buf_addstr(b, "}");
    sv_respond_decision(w, res, out, keep_alive, rq->t0);
    return 0;
}
