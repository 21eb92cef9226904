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

#include "server/api.h"

static void add_string(sl_buf *b, const char *s)
{
    sl_buf_add_json_string(b, s, strlen(s));
}

/* The rule of st; its name is escaped once per rules set (text). */
static void limit_json(sl_buf *b, const sl_dec_status *st)
{
    const sl_rule *r = st->rule;
    const char *alg = "none";
    if (r->action == SL_RULE_LIMIT)
        alg = sl_algorithm_name(sl_limit_get_config(r->limit)->algorithm);
    else if (r->action == SL_RULE_UNLIMITED)
        alg = "unlimited";
    else
        alg = "deny";
    sl_buf_addstr(b, "{\"name\":\"");
    sl_buf_add(b, st->text->json, st->text->json_len);
    sl_buf_addstr(b, "\",\"requests\":");
    sl_buf_add_int(b, (long long)r->requests_per_unit);
    sl_buf_addstr(b, ",\"period_ms\":");
    sl_buf_add_int(b, (long long)(r->period / SL_NS_PER_MS));
    sl_buf_addstr(b, ",\"algorithm\":");
    add_string(b, alg);
    sl_buf_addstr(b, ",\"unit\":");
    if (r->unit)
        add_string(b, r->unit);
    else
        sl_buf_addstr(b, "null");
    sl_buf_addstr(b, "}");
}

int sl_api_check(sl_srv_worker *w, const sl_http_request *req,
                 sl_srv_req *rq, sl_buf *out, int keep_alive)
{
    if (rq->step == 0)
        rq->t0 = uv_hrtime();
    int rc = sl_decide_request(w, req, rq, "hits", "hits", 0, out, keep_alive);
    if (rc != 0)
        return rc == SL_SRV_AGAIN ? rc : 0;
    const sl_dec_result *res = &rq->res;
    sl_buf *b = &w->answer;
    b->len = 0;
    b->failed = 0;
    sl_buf_addstr(b, res->over ? "{\"overall\":\"OVER_LIMIT\",\"descriptors\":["
                              : "{\"overall\":\"OK\",\"descriptors\":[");
    for (size_t i = 0; i < rq->pr.n; i++) {
        const sl_dec_status *st = &res->status[i];
        if (i > 0)
            sl_buf_addstr(b, ",");
        sl_buf_addstr(b, st->over ? "{\"code\":\"OVER_LIMIT\",\"limit\":"
                                  : "{\"code\":\"OK\",\"limit\":");
        if (st->rule == NULL) {
            sl_buf_addstr(b, "null");
        } else {
            limit_json(b, st);
            if (st->rule->action != SL_RULE_UNLIMITED) {
                sl_buf_addstr(b, ",\"remaining\":");
                sl_buf_add_int(b, st->d.remaining < 0 ? 0 : st->d.remaining);
                sl_buf_addstr(b, ",\"reset_after_ms\":");
                sl_buf_add_int(b, sl_ms_up(st->d.reset_after));
                sl_buf_addstr(b, ",\"retry_after_ms\":");
                sl_buf_add_int(b, sl_ms_up(st->d.retry_after));
                if (st->shadow)
                    sl_buf_addstr(b, ",\"shadow_mode\":true");
            }
        }
        sl_buf_addstr(b, "}");
    }
    sl_buf_addstr(b, "]}");
    sl_respond_decision(w, res, out, keep_alive, rq->t0);
    return 0;
}
