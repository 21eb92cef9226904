/*
 * fuzz_advice.c - what an advisor sends the daemon's poller: the HTTP
 * response read by the admin client's reader (src/admin/http_client.c)
 * in two reads split at a fuzzer-chosen point, then its body, or the
 * input itself, read by the protocol's parser (src/admin/advice.c).
 * What either accepts must keep the documented bounds.
 *
 * The first byte chooses: bit 0 set, the rest is an HTTP response whose
 * body is then parsed as an answer, split after (second byte * length /
 * 256) bytes; clear, the rest is an answer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin/advice.h"
#include "admin/http_client.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *rest = (const char *)data + 2;
    size_t len = size - 2;
    if (data[0] & 1)
        check_response(rest, len, (size_t)data[1] * len / 256);
    else
        check_answer(rest, len);
    return 0;
}
