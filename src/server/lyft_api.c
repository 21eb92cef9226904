/*
 * lyft_api.c - POST /json, the JSON endpoint of lyft/ratelimit (envoyproxy
 * /ratelimit): envoy's RateLimitRequest in, RateLimitResponse out, both in
 * proto3 JSON (envoy/service/ratelimit/v3/rls.proto), so an existing
 * caller switches by changing a URL.  As in lyft, hitsAddend 0 means 1,
 * and an over-limit answer has status 429.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

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

/* rls.proto's RateLimit.Unit: SECOND ... YEAR; UNKNOWN for a `period`
 * that is no calendar unit, or a unit_multiplier the enum cannot say. */
static void add_unit(sv_buf *b, const sl_rule *r)
{
    char buf[16] = "UNKNOWN";
    if (r->unit != NULL && r->unit_multiplier == 1) {
        size_t i = 0;
        for (; r->unit[i] && i + 1 < sizeof(buf); i++)
            buf[i] = (char)toupper((unsigned char)r->unit[i]);
        buf[i] = '\0';
    }
    sv_buf_add_json_string(b, buf, strlen(buf));
}

int sv_api_lyft(sv_worker *w, const sv_http_request *req, sv_req *rq,
                sv_buf *out, int keep_alive)
{
    if (rq->step == 0)
        rq->t0 = uv_hrtime();
    int rc =
        sv_decide_request(w, req, rq, "hitsAddend", NULL, 1, out, keep_alive);
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
        if (st->rule != NULL && st->rule->action != SL_RULE_UNLIMITED) {
            sv_buf_addstr(b, ",\"currentLimit\":{\"name\":");
            sv_buf_add_json_string(b, st->rule->name, strlen(st->rule->name));
            sv_buf_addstr(b, ",\"requestsPerUnit\":");
            sv_buf_add_int(b, (long long)st->rule->requests_per_unit);
            sv_buf_addstr(b, ",\"unit\":");
            add_unit(b, st->rule);
            sv_buf_addstr(b, "},\"limitRemaining\":");
            sv_buf_add_int(b, st->d.remaining < 0 ? 0 : st->d.remaining);
            sv_buf_addstr(b, ",\"durationUntilReset\":");
            add_duration(b, st->d.reset_after);
        }
        sv_buf_addstr(b, "}");
    }
    sv_buf_addstr(b, "]}");
    sv_respond_decision(w, res, out, keep_alive, rq->t0);
    return 0;
}
