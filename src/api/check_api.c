/*
 * check_api.c - POST /v1/check, sluice's own JSON API: the request names a
 * domain and descriptors (with optional hits), the answer gives the
 * overall verdict and, per descriptor, the limit closest to being
 * exhausted with its remaining quota and timings in milliseconds.
 * Status 200 when OK, 429 when over the limit; rate-limit headers from
 * the descriptor closest to its limit (decide.c).
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

static void add_string(sv_buf *b, const char *s)
{
    sv_buf_add_json_string(b, s, strlen(s));
}

/* The rule of st; its name is escaped once per rules set (text). */
static void limit_json(sv_buf *b, const sv_dec_status *st)
{
    const sl_rule *r = st->rule;
    const char *alg = "none";
    if (r->action == SL_RULE_LIMIT)
        alg = sl_algorithm_name(sl_limit_get_config(r->limit)->algorithm);
    else if (r->action == SL_RULE_UNLIMITED)
        alg = "unlimited";
    else
        alg = "deny";
    sv_buf_addstr(b, "{\"name\":\"");
    sv_buf_add(b, st->text->json, st->text->json_len);
    sv_buf_addstr(b, "\",\"requests\":");
    sv_buf_add_int(b, (long long)r->requests_per_unit);
    sv_buf_addstr(b, ",\"period_ms\":");
    sv_buf_add_int(b, (long long)(r->period / SL_NS_PER_MS));
    sv_buf_addstr(b, ",\"algorithm\":");
    add_string(b, alg);
    sv_buf_addstr(b, ",\"unit\":");
    if (r->unit)
        add_string(b, r->unit);
    else
        sv_buf_addstr(b, "null");
    sv_buf_addstr(b, "}");
}

int sv_api_check(sv_worker *w, const sv_http_request *req, sv_req *rq,
                 sv_buf *out, int keep_alive)
{
    if (rq->step == 0)
        rq->t0 = uv_hrtime();
    int rc = sv_decide_request(w, req, rq, SV_API_CHECK, out, keep_alive);
    if (rc != 0)
        return rc == SV_AGAIN ? rc : 0;
    const sv_dec_result *res = &rq->res;
    sv_buf *b = &w->answer;
    b->len = 0;
    b->failed = 0;
    sv_buf_addstr(b, res->over ? "{\"overall\":\"OVER_LIMIT\",\"descriptors\":["
                               : "{\"overall\":\"OK\",\"descriptors\":[");
    for (size_t i = 0; i < rq->pr.n; i++) {
        const sv_dec_status *st = &res->status[i];
        if (i > 0)
            sv_buf_addstr(b, ",");
        sv_buf_addstr(b, st->over ? "{\"code\":\"OVER_LIMIT\",\"limit\":"
                                  : "{\"code\":\"OK\",\"limit\":");
        if (st->rule == NULL) {
            sv_buf_addstr(b, "null");
        } else {
            limit_json(b, st);
            if (st->rule->action != SL_RULE_UNLIMITED) {
                sv_buf_addstr(b, ",\"remaining\":");
                sv_buf_add_int(b, st->d.remaining < 0 ? 0 : st->d.remaining);
                sv_buf_addstr(b, ",\"reset_after_ms\":");
                sv_buf_add_int(b, sv_ms_up(st->d.reset_after));
                sv_buf_addstr(b, ",\"retry_after_ms\":");
                sv_buf_add_int(b, sv_ms_up(st->d.retry_after));
                if (st->shadow)
                    sv_buf_addstr(b, ",\"shadow_mode\":true");
            }
        }
        sv_buf_addstr(b, "}");
    }
    sv_buf_addstr(b, "]}");
    sv_respond_decision(w, res, out, keep_alive, rq->t0);
    return 0;
}
