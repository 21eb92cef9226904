/*
 * decide.c - from a request's descriptors to one decision, shared by both
 * HTTP APIs: match every descriptor against the rules, apply lyft's
 * `replaces` across them, then decide every enforced limit of the request
 * in ONE store call (sl_srv_check, which is sl_check_costs or an
 * asynchronous Redis call), so a request consumes from all its limits
 * or from none, each its descriptor's own `hits`.  Shadow-mode limits are
 * decided apart (each on its own call) because they must never veto
 * the real ones; unlimited rules never touch the store; deny rules
 * (requests_per_unit: 0) reject.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

const char *sl_rule_label(const sl_rule *r)
{
    return r->name[0] != '\0' ? r->name : r->path;
}

static int bad(int *status, const char **code, const char *c)
{
    *status = 400;
    *code = c;
    return -1;
}

/* hits: absent means `dflt`; otherwise a non-negative integer (proto3
 * JSON also writes integers as strings). */
int sl_parse_hits(json_t *v, int64_t dflt, int64_t *out)
{
    if (v == NULL || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    json_int_t n;
    if (json_is_integer(v))
        n = json_integer_value(v);
    else if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        n = strtoll(s, &end, 10);
        if (*s == '\0' || *end != '\0')
            return -1;
    } else
        return -1;
    if (n < 0 || n > SL_MAX_COUNT)
        return -1;
    *out = n;
    return 0;
}

int sl_parse_descriptors(sl_srv_worker *w, json_t *arr, const char *hits_key,
                         sl_dec_descriptor **out, size_t *n_out, int *status,
                         const char **code, char *msg, size_t msglen)
{
    const sl_srv_config *cfg = &w->server->cfg;
    if (arr == NULL)
        return (snprintf(msg, msglen, "descriptors: missing"),
                bad(status, code, "EMISSING"));
    if (!json_is_array(arr))
        return (snprintf(msg, msglen, "descriptors: expected an array"),
                bad(status, code, "ETYPE"));
    size_t n = json_array_size(arr);
    if (n == 0)
        return (snprintf(msg, msglen, "descriptors: must not be empty"),
                bad(status, code, "EMISSING"));
    if (n > cfg->max_descriptors)
        return (snprintf(msg, msglen,
                         "descriptors: %zu exceeds the cap of %zu "
                         "(--max-descriptors)",
                         n, cfg->max_descriptors),
                bad(status, code, "ETOOMANY"));
    sl_dec_descriptor *ds = calloc(n, sizeof(*ds));
    if (ds == NULL) {
        *status = 503;
        *code = "ENOMEM";
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(arr, i);
        json_t *entries = json_object_get(d, "entries");
        if (!json_is_object(d)) {
            (snprintf(msg, msglen, "descriptors[%zu]: expected an object", i),
             bad(status, code, "ETYPE"));
            goto fail;
        }
        if (hits_key != NULL &&
            sl_parse_hits(json_object_get(d, hits_key), -1, &ds[i].hits) != 0) {
            (snprintf(msg, msglen,
                      "descriptors[%zu].hits: expected a non-negative integer",
                      i),
             bad(status, code, "ETYPE"));
            goto fail;
        } else if (hits_key == NULL)
            ds[i].hits = -1;
        if (!json_is_array(entries) || json_array_size(entries) == 0) {
            (snprintf(msg, msglen,
                      "descriptors[%zu].entries: expected a non-empty "
                      "array",
                      i),
             bad(status, code, entries == NULL ? "EMISSING" : "ETYPE"));
            goto fail;
        }
        size_t ne = json_array_size(entries);
        if (ne > cfg->max_entries) {
            *status = 400;
            *code = "ETOOMANY";
            snprintf(msg, msglen,
                     "descriptors[%zu].entries: %zu exceeds the cap of %zu "
                     "(--max-entries)",
                     i, ne, cfg->max_entries);
            goto fail;
        }
        ds[i].entries = calloc(ne, sizeof(sl_rules_entry));
        if (ds[i].entries == NULL) {
            *status = 503;
            *code = "ENOMEM";
            snprintf(msg, msglen, "out of memory");
            goto fail;
        }
        ds[i].n_entries = ne;
        for (size_t j = 0; j < ne; j++) {
            json_t *e = json_array_get(entries, j);
            json_t *k = json_object_get(e, "key");
            json_t *v = json_object_get(e, "value");
            if (!json_is_string(k) || json_string_length(k) == 0 ||
                (v != NULL && !json_is_string(v))) {
                (snprintf(msg, msglen,
                          "descriptors[%zu].entries[%zu]: expected {\"key\": "
                          "non-empty string, \"value\": string}",
                          i, j),
                 bad(status, code, k == NULL ? "EMISSING" : "ETYPE"));
                goto fail;
            }
            sl_rules_entry *re = &ds[i].entries[j];
            re->key = json_string_value(k);
            re->key_len = json_string_length(k);
            re->value = v ? json_string_value(v) : "";
            re->value_len = v ? json_string_length(v) : 0;
        }
    }
    *out = ds;
    *n_out = n;
    return 0;
fail:
    sl_free_descriptors(ds, n);
    return -1;
}

static int parse_request(sl_srv_worker *w, const sl_http_request *req,
                         const char *hits_key, const char *desc_hits_key,
                         sl_parsed_request *pr, int *status, const char **code,
                         char *msg, size_t msglen)
{
    json_error_t je;
    memset(pr, 0, sizeof(*pr));
    pr->root =
        json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (pr->root == NULL) {
        snprintf(msg, msglen, "malformed JSON: %s (line %d, column %d)",
                 je.text, je.line, je.column);
        return bad(status, code, "EJSON");
    }
    if (!json_is_object(pr->root)) {
        snprintf(msg, msglen, "request: expected a JSON object");
        return bad(status, code, "ETYPE");
    }
    json_t *d = json_object_get(pr->root, "domain");
    if (d == NULL || (json_is_string(d) && json_string_length(d) == 0)) {
        snprintf(msg, msglen, "domain: missing or empty");
        return bad(status, code, "EMISSING");
    }
    if (!json_is_string(d)) {
        snprintf(msg, msglen, "domain: expected a string");
        return bad(status, code, "ETYPE");
    }
    pr->domain = json_string_value(d);
    pr->domain_len = json_string_length(d);
    if (sl_parse_hits(json_object_get(pr->root, hits_key), 1, &pr->hits)) {
        snprintf(msg, msglen, "%s: expected a non-negative integer", hits_key);
        return bad(status, code, "ETYPE");
    }
    if (sl_parse_descriptors(w, json_object_get(pr->root, "descriptors"),
                             desc_hits_key, &pr->ds, &pr->n, status, code, msg,
                             msglen) != 0)
        return -1;
    return 0;
}

int sl_parse_request(sl_srv_worker *w, const sl_http_request *req,
                     const char *hits_key, const char *desc_hits_key,
                     sl_parsed_request *pr, int *status, const char **code,
                     char *msg, size_t msglen)
{
    if (sl_srv_op_parsed(w, pr))
        return 0;
    int rc = parse_request(w, req, hits_key, desc_hits_key, pr, status, code,
                           msg, msglen);
    if (rc != 0)
        atomic_fetch_add_explicit(&w->stats.bad_requests, 1,
                                  memory_order_relaxed);
    return rc;
}

void sl_parsed_request_release(sl_parsed_request *pr)
{
    if (pr->kept)
        return;
    sl_free_descriptors(pr->ds, pr->n);
    json_decref(pr->root);
}

int sl_decide_request(sl_srv_worker *w, const sl_http_request *req,
                      const char *hits_key, const char *desc_hits_key,
                      int64_t zero_hits_as, sl_parsed_request *pr,
                      sl_dec_result *res, sl_buf *out, int keep_alive)
{
    int status, rc;
    const char *code;
    char msg[256];

    memset(res, 0, sizeof(*res));
    if (sl_parse_request(w, req, hits_key, desc_hits_key, pr, &status, &code,
                         msg, sizeof(msg)) != 0) {
        sl_respond_error(out, status, code, msg, keep_alive);
        return -1;
    }
    if (pr->hits == 0)
        pr->hits = zero_hits_as;
    res->status = calloc(pr->n, sizeof(sl_dec_status));
    if (res->status == NULL) {
        sl_respond_error(out, 503, "ENOMEM", "out of memory", keep_alive);
        return -1;
    }
    rc = sl_decide(w, pr->domain, pr->domain_len, pr->ds, pr->n, pr->hits, res,
                   msg, sizeof(msg));
    if (rc == SL_SRV_PENDING) {
        /* No answer to build (conn.c would drop it); the replay reuses
         * this parse. */
        sl_srv_op_keep_parsed(w, pr);
        return -1;
    }
    if (rc != 0) {
        sl_respond_error(out, sl_decide_status(rc), sl_err_name(rc), msg,
                         keep_alive);
        return -1;
    }
    return 0;
}

void sl_respond_decision(sl_srv_worker *w, const sl_dec_result *res,
                         sl_buf *out, int keep_alive, uint64_t t0)
{
    const sl_buf *body = &w->answer;
    if (body->failed) {
        out->failed = 1; /* conn.c answers 503 ENOMEM instead */
        return;
    }
    /* A trailing newline, counted in Content-Length, so curl output
     * ends a line. */
    sl_respond_head(out, res->over ? 429 : 200, "application/json",
                    body->len + 1, keep_alive);
    sl_rate_headers(res, out);
    sl_buf_add(out, "\r\n", 2);
    sl_buf_add(out, body->data, body->len);
    sl_buf_add(out, "\n", 1);
    sl_metrics_latency(w, (sl_nanos)(uv_hrtime() - t0));
}

int sl_decide_status(int rc)
{
    return rc == SL_ENOMEM || rc == SL_EFULL || rc == SL_ESTORE ||
                   rc == SL_SRV_PENDING
               ? 503
               : 400;
}

void sl_free_descriptors(sl_dec_descriptor *ds, size_t n)
{
    if (ds == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(ds[i].entries);
    free(ds);
}

/* Orders statuses: over the limit first, then limited before unlimited,
 * then least remaining.  Returns nonzero when a is closer than b. */
static int closer(const sl_dec_status *a, const sl_dec_status *b)
{
    if (b->rule == NULL)
        return a->rule != NULL;
    if (a->rule == NULL)
        return 0;
    if (a->over != b->over)
        return a->over;
    int al = a->rule->action != SL_RULE_UNLIMITED;
    int bl = b->rule->action != SL_RULE_UNLIMITED;
    if (al != bl)
        return al;
    return a->d.remaining < b->d.remaining;
}

int sl_decide(sl_srv_worker *w, const char *domain, size_t domain_len,
              const sl_dec_descriptor *ds, size_t n, int64_t hits,
              sl_dec_result *res, char *err, size_t errlen)
{
    const sl_rules *rules = w->rules->rules;
    sl_nanos now = sl_srv_now(w);
    sl_rule_match m[SL_RULES_MAX_MATCHES];
    size_t nm = 0, keys_len = 0;
    uint64_t unmatched = 0;
    int rc = 0;

    /* Each counter key is the domain and the descriptor's entries, each
     * written by sl_rules_match() as a separator, a decimal length and a
     * colon before the bytes: KEY_FIELD bytes of framing at most. */
#define KEY_FIELD 24
    for (size_t i = 0; i < n; i++) {
        keys_len += domain_len + KEY_FIELD;
        for (size_t j = 0; j < ds[i].n_entries; j++)
            keys_len += ds[i].entries[j].key_len + ds[i].entries[j].value_len +
                        2 * KEY_FIELD;
    }
    /* On the stack unless the descriptors are large: nothing keeps a
     * key past this call (a Redis call copies its keys). */
    char small[1024];
    char *keys = keys_len + 1 <= sizeof(small) ? small : malloc(keys_len + 1);
    if (keys == NULL) {
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = domain_len + KEY_FIELD, k = 0;
        for (size_t j = 0; j < ds[i].n_entries; j++)
            len += ds[i].entries[j].key_len + ds[i].entries[j].value_len +
                   2 * KEY_FIELD;
        rc = sl_rules_match(rules, domain, domain_len, ds[i].entries,
                            ds[i].n_entries, i, m + nm,
                            SL_RULES_MAX_LIMITS_PER_NODE, &k, keys + off, len);
        if (rc != 0) {
            snprintf(err, errlen, "descriptors[%zu]: %s", i, sl_strerror(rc));
            goto out;
        }
        if (k == 0)
            unmatched++;
        nm += k;
        off += len;
    }
    sl_rules_drop_replaced(m, &nm);

    sl_check_item items[SL_MAX_ITEMS];
    int64_t costs[SL_MAX_ITEMS];
    sl_rule_failure failure[SL_MAX_ITEMS];
    size_t item_of[SL_RULES_MAX_MATCHES]; /* match -> item, or SIZE_MAX */
    size_t n_items = 0;
    int deny = 0;
    for (size_t i = 0; i < nm; i++) {
        const sl_rule *r = m[i].rule;
        int64_t h =
            ds[m[i].descriptor].hits >= 0 ? ds[m[i].descriptor].hits : hits;
        item_of[i] = SIZE_MAX;
        if (r->shadow_mode)
            continue;
        if (r->action == SL_RULE_DENY)
            deny = 1;
        if (r->action != SL_RULE_LIMIT)
            continue;
        if (n_items == SL_MAX_ITEMS) {
            rc = SL_ERANGE;
            snprintf(err, errlen,
                     "more than %d limits matched; one request decides at "
                     "most %d at once",
                     SL_MAX_ITEMS, SL_MAX_ITEMS);
            goto out;
        }
        item_of[i] = n_items;
        failure[n_items] = r->store_failure;
        costs[n_items] = deny ? 0 : h; /* a denied request consumes nothing */
        items[n_items++] = (sl_check_item){r->limit, m[i].key, m[i].key_len};
    }
    /* A deny matched after some limits: those are queries too. */
    for (size_t i = 0; deny && i < n_items; i++)
        costs[i] = 0;

    sl_decision each[SL_MAX_ITEMS], overall = {.allowed = 1};
    if (n_items > 0) {
        rc = sl_srv_check(w, items, costs, n_items, now, 0, failure, each,
                          &overall, err, errlen);
        if (rc != 0 && rc != SL_SRV_PENDING)
            goto out;
    }
    /* Shadow limits are decided apart, each on its own, because they must
     * never veto the real ones; a failure lets the request pass.  With
     * --store redis they are sent with the real call, in one round trip. */
    sl_decision shadow[SL_RULES_MAX_MATCHES];
    for (size_t i = 0; i < nm; i++) {
        const sl_rule *r = m[i].rule;
        if (r->action != SL_RULE_LIMIT || item_of[i] != SIZE_MAX)
            continue;
        const sl_dec_descriptor *dd = &ds[m[i].descriptor];
        int64_t h = dd->hits >= 0 ? dd->hits : hits;
        sl_check_item it = {r->limit, m[i].key, m[i].key_len};
        char serr[128];
        int src = sl_srv_check(w, &it, &h, 1, now, 0, &r->store_failure, NULL,
                               &shadow[i], serr, sizeof(serr));
        if (src == SL_SRV_PENDING)
            rc = SL_SRV_PENDING;
        else if (src != 0)
            shadow[i] = (sl_decision){.allowed = 1};
    }
    if (rc == SL_SRV_PENDING)
        goto out; /* nothing counted: the request runs again */
    res->over = deny || !overall.allowed;
    if (unmatched > 0)
        atomic_fetch_add_explicit(&w->stats.unmatched, unmatched,
                                  memory_order_relaxed);

    for (size_t i = 0; i < n; i++)
        res->status[i] = (sl_dec_status){0};
    res->closest = NULL;
    for (size_t i = 0; i < nm; i++) {
        const sl_rule *r = m[i].rule;
        const sl_dec_descriptor *dd = &ds[m[i].descriptor];
        sl_dec_status st = {.rule = r,
                            .text = &w->rules->text[r->index],
                            .shadow = r->shadow_mode};
        int shadow_pass = 0;
        uint64_t near = 0;
        int64_t h = dd->hits >= 0 ? dd->hits : hits;
        switch (r->action) {
        case SL_RULE_UNLIMITED:
            st.d = (sl_decision){.allowed = 1, .remaining = INT64_MAX};
            break;
        case SL_RULE_DENY:
            st.d = (sl_decision){.allowed = 0, .retry_after = -1};
            st.over = !r->shadow_mode;
            shadow_pass = r->shadow_mode;
            break;
        case SL_RULE_LIMIT:
            if (item_of[i] != SIZE_MAX) {
                st.d = each[item_of[i]];
                st.over = !st.d.allowed;
                /* A refused request consumed from no item. */
                near = res->over ? 0 : sl_metrics_near_hits(&st.d, h);
            } else {
                st.d = shadow[i];
                near = sl_metrics_near_hits(&st.d, h);
                shadow_pass = !st.d.allowed;
                st.d.allowed = 1;
                st.d.retry_after = 0;
            }
            break;
        }
        sl_metrics_rule(w, r, dd->entries, dd->n_entries, !st.over, shadow_pass,
                        near);
        sl_dec_status *slot = &res->status[m[i].descriptor];
        if (closer(&st, slot))
            *slot = st;
    }
    for (size_t i = 0; i < n; i++)
        if (res->status[i].rule != NULL &&
            res->status[i].rule->action != SL_RULE_UNLIMITED &&
            (res->closest == NULL || closer(&res->status[i], res->closest)))
            res->closest = &res->status[i];
    atomic_fetch_add_explicit(res->over ? &w->stats.checks_over
                                        : &w->stats.checks_ok,
                              1, memory_order_relaxed);
out:
    if (keys != small)
        free(keys);
    return rc;
}

/* Whole seconds, rounded up: a client that waits this long is safe. */
static long long ceil_sec(sl_nanos ns)
{
    if (ns <= 0)
        return 0;
    return (long long)((ns + SL_NS_PER_SEC - 1) / SL_NS_PER_SEC);
}

void sl_rate_headers(const sl_dec_result *res, sl_buf *out)
{
    const sl_dec_status *c = res->closest;
    if (c == NULL)
        return;
    const sl_rule *r = c->rule;
    int64_t limit = r->action == SL_RULE_DENY ? 0 : c->d.limit;
    int64_t remaining = c->d.remaining < 0 ? 0 : c->d.remaining;
    long long reset = ceil_sec(c->d.reset_after);
    sl_buf_addstr(out, "X-RateLimit-Limit: ");
    sl_buf_add_int(out, limit);
    sl_buf_addstr(out, "\r\nX-RateLimit-Remaining: ");
    sl_buf_add_int(out, remaining);
    sl_buf_addstr(out, "\r\nX-RateLimit-Reset: ");
    sl_buf_add_int(out, reset);
    sl_buf_addstr(out, "\r\n");
    if (res->over && c->d.retry_after > 0) {
        sl_buf_addstr(out, "Retry-After: ");
        sl_buf_add_int(out, ceil_sec(c->d.retry_after));
        sl_buf_addstr(out, "\r\n");
    }
    /* draft-ietf-httpapi-ratelimit-headers-08 and later: a quoted policy
     * name with q (quota), w (window, s); r (remaining), t (reset, s). */
    sl_buf_addstr(out, "RateLimit-Policy: ");
    sl_buf_add(out, c->text->sf, c->text->sf_len);
    sl_buf_addstr(out, ";q=");
    sl_buf_add_int(out, limit);
    sl_buf_addstr(out, ";w=");
    sl_buf_add_int(out, ceil_sec(r->period));
    sl_buf_addstr(out, "\r\nRateLimit: ");
    sl_buf_add(out, c->text->sf, c->text->sf_len);
    sl_buf_addstr(out, ";r=");
    sl_buf_add_int(out, remaining);
    sl_buf_addstr(out, ";t=");
    sl_buf_add_int(out, reset);
    sl_buf_addstr(out, "\r\n");
}
