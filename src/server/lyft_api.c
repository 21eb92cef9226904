/*
 * lyft_api.c - POST /json, the JSON endpoint of lyft/ratelimit (envoyproxy
 * /ratelimit): envoy's RateLimitRequest in, RateLimitResponse out, both in
 * proto3 JSON (envoy/service/ratelimit/v3/rls.proto), so an existing
 * caller switches by changing a URL.  As in lyft, hitsAddend 0 means 1,
 * and an over-limit answer has status 429.
 */
#include <ctype.h>
#include <stdlib.h>

#include "server.h"

/* A proto3 JSON Duration: seconds with 0, 3, 6 or 9 fractional digits. */
static json_t *duration_json(sl_nanos ns)
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
    return json_string(buf);
}

/* rls.proto's RateLimit.Unit: SECOND ... YEAR; UNKNOWN for a `period`
 * that is no calendar unit, or a unit_multiplier the enum cannot say. */
static json_t *unit_json(const sl_rule *r)
{
    char buf[16] = "UNKNOWN";
    if (r->unit != NULL && r->unit_multiplier == 1) {
        size_t i = 0;
        for (; r->unit[i] && i + 1 < sizeof(buf); i++)
            buf[i] = (char)toupper((unsigned char)r->unit[i]);
        buf[i] = '\0';
    }
    return json_string(buf);
}

void sl_api_lyft(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                 int keep_alive)
{
    uint64_t t0 = uv_hrtime();
    sl_parsed_request pr;
    sl_dec_result res;
    if (sl_decide_request(w, req, "hitsAddend", NULL, 1, &pr, &res, out,
                          keep_alive) != 0)
        goto done;
    json_t *statuses = json_array();
    for (size_t i = 0; i < pr.n; i++) {
        const sl_dec_status *st = &res.status[i];
        json_t *s = json_pack("{s:s}", "code", st->over ? "OVER_LIMIT" : "OK");
        if (st->rule != NULL && st->rule->action != SL_RULE_UNLIMITED) {
            json_object_set_new(
                s, "currentLimit",
                json_pack("{s:s,s:I,s:o}", "name", st->rule->name,
                          "requestsPerUnit",
                          (json_int_t)st->rule->requests_per_unit, "unit",
                          unit_json(st->rule)));
            json_object_set_new(
                s, "limitRemaining",
                json_integer(st->d.remaining < 0 ? 0 : st->d.remaining));
            json_object_set_new(s, "durationUntilReset",
                                duration_json(st->d.reset_after));
        }
        json_array_append_new(statuses, s);
    }
    json_t *body =
        json_pack("{s:s,s:o}", "overallCode", res.over ? "OVER_LIMIT" : "OK",
                  "statuses", statuses);
    sl_respond_decision(w, &res, body, out, keep_alive, t0);
done:
    free(res.status);
    sl_parsed_request_release(&pr);
}
