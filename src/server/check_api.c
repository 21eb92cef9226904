/*
 * check_api.c - POST /v1/check, sluice's own JSON API: the request names a
 * domain and descriptors (with optional hits), the answer gives the
 * overall verdict and, per descriptor, the limit closest to being
 * exhausted with its remaining quota and timings in milliseconds.
 * Status 200 when OK, 429 when over the limit; rate-limit headers from
 * the descriptor closest to its limit (decide.c).
 */
#include <stdlib.h>

#include "server.h"

static json_t *limit_json(const sl_rule *r)
{
    const char *alg = "none";
    if (r->action == SL_RULE_LIMIT)
        alg = sl_algorithm_name(sl_limit_get_config(r->limit)->algorithm);
    else if (r->action == SL_RULE_UNLIMITED)
        alg = "unlimited";
    else
        alg = "deny";
    json_t *j =
        json_pack("{s:s,s:I,s:I,s:s}", "name", sl_rule_label(r), "requests",
                  (json_int_t)r->requests_per_unit, "period_ms",
                  (json_int_t)(r->period / SL_NS_PER_MS), "algorithm", alg);
    json_object_set_new(j, "unit",
                        r->unit ? json_string(r->unit) : json_null());
    return j;
}

static json_int_t ms_up(sl_nanos ns)
{
    if (ns <= 0)
        return ns < 0 ? -1 : 0;
    return (json_int_t)((ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS);
}

void sl_api_check(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                  int keep_alive)
{
    uint64_t t0 = uv_hrtime();
    sl_parsed_request pr;
    sl_dec_result res;
    if (sl_decide_request(w, req, "hits", "hits", 0, &pr, &res, out,
                          keep_alive) != 0)
        goto done;
    json_t *descs = json_array();
    for (size_t i = 0; i < pr.n; i++) {
        const sl_dec_status *st = &res.status[i];
        json_t *d = json_pack("{s:s}", "code", st->over ? "OVER_LIMIT" : "OK");
        if (st->rule == NULL || st->rule->action == SL_RULE_UNLIMITED) {
            json_object_set_new(d, "limit",
                                st->rule ? limit_json(st->rule) : json_null());
        } else {
            json_object_set_new(d, "limit", limit_json(st->rule));
            json_object_set_new(
                d, "remaining",
                json_integer(st->d.remaining < 0 ? 0 : st->d.remaining));
            json_object_set_new(d, "reset_after_ms",
                                json_integer(ms_up(st->d.reset_after)));
            json_object_set_new(d, "retry_after_ms",
                                json_integer(ms_up(st->d.retry_after)));
            if (st->shadow)
                json_object_set_new(d, "shadow_mode", json_true());
        }
        json_array_append_new(descs, d);
    }
    json_t *body =
        json_pack("{s:s,s:o}", "overall", res.over ? "OVER_LIMIT" : "OK",
                  "descriptors", descs);
    sl_respond_decision(w, &res, body, out, keep_alive, t0);
done:
    free(res.status);
    sl_parsed_request_release(&pr);
}
