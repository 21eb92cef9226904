/*
 * fuzz_advice.c - what an advisor sends the daemon's poller: the HTTP
 * response read by the admin client's reader (src/http/http_client.c)
 * in two reads split at a fuzzer-chosen point, then its body, or the
 * input itself, read by the protocol's parser (src/adaptive/advice.c).
 * What either accepts must keep the documented bounds.
 *
 * `sluice advisor`'s readers of what a node sends (src/adaptive/scrape.c)
 * are fuzzed here too, and under them the Prometheus text reader
 * (src/adaptive/prom_text.c) as the lab uses it as well.  The first byte
 * chooses, modulo 4: 1, the rest is an HTTP response whose body is then
 * parsed as an answer, split after (second byte * length / 256) bytes; 0,
 * the rest is an answer; 2, Prometheus text; 3, a GET /v1/rules body.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive/advice.h"
#include "adaptive/prom_text.h"
#include "http/http_client.h"
#include "adaptive/scrape.h"

static void check_answer(const char *data, size_t len)
{
    ad_advice a;
    char err[256];
    if (ad_advice_parse(data, len, &a, err, sizeof(err)) != 0) {
        if (a.recs != NULL || a.n_recs != 0 || err[0] == '\0')
            abort();
        return;
    }
    if (a.valid_for_ms < AD_MIN_VALID_FOR_MS ||
        a.valid_for_ms > AD_MAX_VALID_FOR_MS || a.computed_at_ms < 0 ||
        a.n_recs > AD_MAX_RECOMMENDATIONS)
        abort();
    for (size_t i = 0; i < a.n_recs; i++) {
        const ad_recommendation *r = &a.recs[i];
        size_t n = strlen(r->limit);
        if (n == 0 || n > AD_MAX_LIMIT_ID ||
            strlen(r->reason) > AD_MAX_REASON || r->requests_per_unit < 0 ||
            r->requests_per_unit > AD_MAX_REQUESTS || r->burst < -1 ||
            r->burst > AD_MAX_REQUESTS)
            abort();
        for (size_t j = 0; j < i; j++)
            if (i < 64 && strcmp(a.recs[j].limit, r->limit) == 0)
                abort(); /* duplicates are refused */
        int64_t c =
            ad_clamp(r->requests_per_unit, r->burst, 0, AD_MAX_REQUESTS);
        if (c < 0 || c > AD_MAX_REQUESTS)
            abort();
    }
    ad_advice_release(&a);
}

static void check_response(const char *data, size_t len, size_t cut)
{
    static const char *const capture[] = {"ETag", "Content-Type", NULL};
    ah_response r;
    ah_response_init(&r, capture);
    r.max_bytes = 1 << 16;
    ah_parser p;
    ah_parser_init(&p, &r, 0);
    int rc = ah_parser_feed(&p, data, cut);
    if (rc == 0)
        rc = ah_parser_feed(&p, data + cut, len - cut);
    if (rc == 0)
        rc = ah_parser_eof(&p);
    if (rc == 1) {
        if (r.body == NULL || r.body_len > len || strlen(r.body) > r.body_len ||
            r.status < 100 || r.status > 599)
            abort();
        for (int i = 0; i < 2; i++)
            if (r.values[i] != NULL && strlen(r.values[i]) > len)
                abort();
        if (r.status == 200)
            check_answer(r.body, r.body_len);
    } else if (rc >= 0 || p.errmsg[0] == '\0') {
        abort();
    }
    ah_response_release(&r);
}

/* Every sample of any name lies in the text, in line order, and a
 * label the reader reports unescapes within its bounds. */
static void check_prom_text(const char *data, size_t len)
{
    pt_reader r;
    pt_sample s;
    size_t line = 0;
    int rc;
    pt_reader_init(&r, data, len);
    while ((rc = pt_next(&r, NULL, &s)) != 0) {
        if (s.line <= line || s.line > len + 1)
            abort();
        line = s.line;
        if (rc < 0)
            continue;
        if (s.name_len == 0 || s.name < data ||
            s.name + s.name_len > data + len ||
            (s.labels != NULL && s.labels + s.labels_len >= data + len))
            abort();
        const char *v;
        size_t vlen;
        char out[64];
        if (pt_label(&s, "rule", &v, &vlen) == 1 &&
            (v < s.labels || v + vlen > s.labels + s.labels_len ||
             (vlen <= sizeof(out) && pt_unescape(v, vlen, out) > vlen)))
            abort();
    }
    static const pt_matcher global[] = {{"rule", "global"},
                                        {"limit", "effective"}};
    double value;
    pt_find(data, len, "sluice_limit_requests_per_unit", global, 2, &value);
}

static void check_scrape(const char *data, size_t len, int rules)
{
    char err[256];
    if (rules) {
        as_rules r;
        if (as_rules_parse(data, len, &r, err, sizeof(err)) != 0) {
            if (r.rules != NULL || r.n != 0)
                abort();
            return;
        }
        for (size_t i = 0; i < r.n; i++)
            if (strncmp(r.rules[i].id, r.rules[i].label,
                        strlen(r.rules[i].label)) != 0 ||
                r.rules[i].requests_per_unit < 0 || r.rules[i].period_ms < 0)
                abort();
        as_rules_release(&r);
        return;
    }
    check_prom_text(data, len);
    as_metrics m;
    if (as_metrics_parse(data, len, "sluice_rule_hits_total", &m, err,
                         sizeof(err)) != 0) {
        if (m.series != NULL || m.n != 0)
            abort();
        return;
    }
    for (size_t i = 0; i < m.n; i++) {
        const as_series *x = &m.series[i];
        if (as_metrics_find(&m, x->domain, x->rule, x->descriptor) != x)
            abort(); /* sorted and unique */
    }
    as_metrics_release(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *rest = (const char *)data + 2;
    size_t len = size - 2;
    switch (data[0] % 4) {
    case 0:
        check_answer(rest, len);
        break;
    case 1:
        check_response(rest, len, (size_t)data[1] * len / 256);
        break;
    default:
        check_scrape(rest, len, data[0] % 4 == 3);
    }
    return 0;
}
