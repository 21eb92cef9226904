/*
 * client_api.c - the client-side API of the Databox paper (BRIEF.md,
 * section 4): a client that calls a rate-limited upstream reports each
 * request it sent (POST /v1/increment) and asks how long it must wait
 * before it may send the next one (GET /v1/delay).  It is separate from
 * check_api.c because its questions differ: an increment is a report of
 * something that happened, not a request for permission, and a delay is
 * a query that never consumes.
 *
 * A limit is named three ways (docs/server.md, "Client-side API"): by a
 * rule's descriptor (domain and entries, matched as /v1/check does), by
 * a rule's `name` (id alone), or ad hoc (id, interval, requests and an
 * optional algorithm, stepped_window by default; their table is
 * adhoc.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/adhoc.h"
#include "api/api.h"
#include "http/query.h"
#include "http/respond.h"
#include "rules/rule_daemon.h"

/* Longest id accepted, in bytes. */
#define ID_MAX_BYTES 256

/* What a request names, borrowed from the query buffer or the JSON. */
typedef struct limit_ref {
    const char *id, *domain, *interval, *requests, *algorithm, *hits;
    size_t id_len, domain_len, interval_len, requests_len, algorithm_len,
        hits_len;
    sl_rules_entry entries[SL_RULES_MAX_DEPTH];
    size_t n_entries;
} limit_ref;

/* Sets one named parameter; shared by the query and the JSON body. */
static int ref_set(sv_worker *w, limit_ref *ref, const char *name,
                   const char *val, size_t vlen, sv_api_err *e)
{
    size_t max_entries = w->server->cfg.max_entries;
    if (max_entries > SL_RULES_MAX_DEPTH)
        max_entries = SL_RULES_MAX_DEPTH;
    if (strcmp(name, "key") == 0) {
        if (ref->n_entries == max_entries)
            return sv_api_fail(
                e, 400, "ETOOMANY",
                "key: more than %zu entries (--max-entries, at most "
                "%d)",
                max_entries, SL_RULES_MAX_DEPTH);
        if (vlen == 0)
            return sv_api_fail(e, 400, "EMISSING", "key: must not be empty");
        ref->entries[ref->n_entries++] =
            (sl_rules_entry){.key = val, .key_len = vlen, .value = ""};
        return 0;
    }
    if (strcmp(name, "value") == 0) {
        sl_rules_entry *last =
            ref->n_entries ? &ref->entries[ref->n_entries - 1] : NULL;
        if (last == NULL || last->value_len != 0)
            return sv_api_fail(e, 400, "EINVAL",
                               "value: must follow its key (key=K&value=V)");
        last->value = val;
        last->value_len = vlen;
        return 0;
    }
    static const struct {
        const char *name;
        size_t sptr, lptr;
    } fields[] = {
#define F(x) {#x, offsetof(limit_ref, x), offsetof(limit_ref, x##_len)}
        F(id), F(domain), F(interval), F(requests), F(algorithm), F(hits),
#undef F
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (strcmp(name, fields[i].name) != 0)
            continue;
        const char **p = (const char **)((char *)ref + fields[i].sptr);
        if (*p != NULL)
            return sv_api_fail(e, 400, "EINVAL", "%s: given twice", name);
        *p = val;
        *(size_t *)((char *)ref + fields[i].lptr) = vlen;
        return 0;
    }
    return sv_api_fail(e, 400, "EINVAL", "%.64s: unknown parameter", name);
}

typedef struct query_ctx {
    sv_worker *w;
    limit_ref *ref;
    sv_api_err *e;
} query_ctx;

static int query_param(void *ctx, const char *name, const char *val,
                       size_t vlen)
{
    query_ctx *qc = ctx;
    return ref_set(qc->w, qc->ref, name, val, vlen, qc->e);
}

/* Parses a query string into ref; decoded bytes go to dec (query_len + 1
 * bytes), and ref points into it. */
static int parse_query(sv_worker *w, const char *q, size_t len, char *dec,
                       limit_ref *ref, sv_api_err *e)
{
    query_ctx qc = {w, ref, e};
    char msg[128];
    if (sv_query_parse(q, len, dec, query_param, &qc, msg, sizeof(msg)) == 0)
        return 0;
    if (e->status == 0) /* the query itself, not one of its parameters */
        sv_api_fail(e, 400, "EINVAL", "%s", msg);
    return -1;
}

/* Parses the JSON body of an increment into ref; strings stay owned by
 * root.  Integers (requests, hits) are printed into numbuf. */
static int parse_body(sv_worker *w, json_t *root, limit_ref *ref,
                      char numbuf[2][24], sv_api_err *e)
{
    if (!json_is_object(root))
        return sv_api_fail(e, 400, "ETYPE", "request: expected a JSON object");
    const char *k;
    json_t *v;
    int ni = 0;
    json_object_foreach(root, k, v)
    {
        if (strcmp(k, "entries") == 0) {
            if (!json_is_array(v) || json_array_size(v) == 0)
                return sv_api_fail(e, 400, "ETYPE",
                                   "entries: expected a non-empty array");
            size_t i;
            json_t *en;
            json_array_foreach(v, i, en)
            {
                json_t *ek = json_object_get(en, "key");
                json_t *ev = json_object_get(en, "value");
                if (!json_is_string(ek) || (ev && !json_is_string(ev)))
                    return sv_api_fail(
                        e, 400, "ETYPE",
                        "entries[%zu]: expected {\"key\": string, "
                        "\"value\": string}",
                        i);
                if (ref_set(w, ref, "key", json_string_value(ek),
                            json_string_length(ek), e) != 0)
                    return -1;
                if (ev && json_string_length(ev) > 0 &&
                    ref_set(w, ref, "value", json_string_value(ev),
                            json_string_length(ev), e) != 0)
                    return -1;
            }
            continue;
        }
        if (strcmp(k, "key") == 0 || strcmp(k, "value") == 0)
            return sv_api_fail(e, 400, "EINVAL",
                               "%s: use \"entries\" in a body", k);
        if (json_is_integer(v) &&
            (strcmp(k, "requests") == 0 || strcmp(k, "hits") == 0)) {
            snprintf(numbuf[ni], sizeof(numbuf[ni]), "%lld",
                     (long long)json_integer_value(v));
            if (ref_set(w, ref, k, numbuf[ni], strlen(numbuf[ni]), e) != 0)
                return -1;
            ni++;
            continue;
        }
        if (strcmp(k, "at_ms") == 0)
            return sv_api_fail(
                e, 400, "EINVAL",
                "at_ms: not supported; an increment is recorded at "
                "the server's now");
        if (!json_is_string(v)) {
            /* Unknown names are reported as unknown, not as a type. */
            if (ref_set(w, ref, k, "", 0, e) != 0)
                return -1;
            return sv_api_fail(e, 400, "ETYPE", "%s: expected a string", k);
        }
        if (ref_set(w, ref, k, json_string_value(v), json_string_length(v),
                    e) != 0)
            return -1;
    }
    return 0;
}

/* A limit resolved to store items. */
typedef struct resolved {
    sl_check_item items[SL_MAX_ITEMS];
    size_t n;
    int deny;           /* a deny rule matched: never */
    int unlimited;      /* only unlimited rules matched */
    char *keys;         /* owned: match keys point into it */
    sl_nanos period;    /* for deny and unlimited answers */
    sv_adhoc_limit *adhoc; /* held (sv_adhoc_put): items[0]'s limit is its */
    /* The most hits one increment may report to each item: its rule's
     * max_hits, else its limit's capacity. */
    int64_t max_hits[SL_MAX_ITEMS];
} resolved;

/* What a full limit holds: a bucket's burst, a window's limit (the
 * library sets burst to the limit for those). */
static int64_t capacity(const sl_limit *limit)
{
    return sl_limit_get_config(limit)->burst;
}

/* r is in force in rules (an override's copy, or as loaded).  A limit
 * an override stopped (0) holds nothing: then the capacity of the rule as
 * loaded bounds, which the override leaves in place when it goes. */
static int64_t max_hits(const sl_rules *rules, const sl_rule *r)
{
    int64_t most = sl__rule_daemon_of(rules, r)->max_hits;
    if (most > 0)
        return most;
    int64_t c = capacity(r->limit);
    return c > 0 ? c : capacity(sl_rules_rule(rules, r->index)->limit);
}

/* The ad hoc limit ref names, its parameters read (adhoc.h).  0 with
 * *out held for the caller (sv_adhoc_put), or -1 with e set. */
static int adhoc_get(sv_server *s, const limit_ref *ref, sv_adhoc_limit **out,
                     sv_api_err *e)
{
    sl_nanos interval;
    int64_t requests;
    sl_algorithm alg = SL_STEPPED_WINDOW;
    if (ref->interval == NULL)
        return sv_api_fail(e, 400, "EMISSING",
                           "interval: missing (with requests)");
    if (ref->requests == NULL)
        return sv_api_fail(e, 400, "EMISSING",
                           "requests: missing (with interval)");
    int rc = sl_duration_parse(ref->interval, ref->interval_len, &interval);
    if (rc != 0 || interval <= 0)
        return sv_api_fail(
            e, 400, "EINVAL",
            "interval: expected a positive duration like 60s: '%.*s'",
            (int)(ref->interval_len < 64 ? ref->interval_len : 64),
            ref->interval);
    if (sv_parse_count(ref->requests, ref->requests_len, &requests) != 0 ||
        requests < 1)
        return sv_api_fail(
            e, 400, "EINVAL",
            "requests: expected an integer from 1 to 2^40: '%.*s'",
            (int)(ref->requests_len < 64 ? ref->requests_len : 64),
            ref->requests);
    if (ref->algorithm != NULL &&
        sl_algorithm_parse(ref->algorithm, ref->algorithm_len, &alg) != 0)
        return sv_api_fail(
            e, 400, "EINVAL", "algorithm: unknown: '%.*s'",
            (int)(ref->algorithm_len < 64 ? ref->algorithm_len : 64),
            ref->algorithm);
    return sv_adhoc_get(s, ref->id, ref->id_len, interval, requests, alg, out,
                        e);
}

/* Resolves what ref names to store items.  0, or -1 with e set; release
 * res->keys either way. */
static int resolve(sv_worker *w, const limit_ref *ref, resolved *res,
                   sv_api_err *e)
{
    const sl_rules *rules = w->rules->rules;
    memset(res, 0, sizeof(*res));
    if (ref->id != NULL && ref->id_len == 0)
        return sv_api_fail(e, 400, "EMISSING", "id: must not be empty");
    if (ref->id != NULL && ref->id_len > ID_MAX_BYTES)
        return sv_api_fail(e, 400, "EKEYLEN", "id: longer than %d bytes",
                           ID_MAX_BYTES);
    if (ref->domain != NULL && ref->domain_len == 0)
        return sv_api_fail(e, 400, "EMISSING", "domain: must not be empty");
    int adhoc = ref->interval || ref->requests || ref->algorithm;
    if (ref->id == NULL && adhoc)
        return sv_api_fail(
            e, 400, "EMISSING",
            "id: required with interval, requests and algorithm");
    if (ref->id == NULL && ref->domain == NULL)
        return sv_api_fail(e, 400, "EMISSING", "id or domain: one is required");
    if (ref->id != NULL && ref->n_entries > 0)
        return sv_api_fail(
            e, 400, "EINVAL",
            "id: name a limit by id or by domain and key, not both");

    if (ref->id != NULL && adhoc) {
        if (ref->domain != NULL)
            return sv_api_fail(
                e, 400, "EINVAL",
                "domain: an ad hoc limit (interval, requests) has "
                "no domain");
        if (adhoc_get(w->server, ref, &res->adhoc, e) != 0)
            return -1;
        res->items[0].limit = sv_adhoc_limit_of(res->adhoc);
        res->max_hits[0] = capacity(res->items[0].limit);
        res->items[0].key = ref->id;
        res->items[0].key_len = ref->id_len;
        res->n = 1;
        res->period = sl_limit_get_config(res->items[0].limit)->period;
        return 0;
    }

    if (ref->id != NULL) {
        /* A rule by name (within domain, if given): one counter for
         * everyone who names it, under a key no descriptor match makes
         * (those start with a decimal length). */
        for (size_t i = 0; i < sl_rules_rule_count(rules); i++) {
            const sl_rule *r = sl_rules_rule(rules, i);
            if (strlen(r->name) != ref->id_len ||
                memcmp(r->name, ref->id, ref->id_len) != 0 ||
                (ref->domain != NULL &&
                 (strlen(r->domain) != ref->domain_len ||
                  memcmp(r->domain, ref->domain, ref->domain_len) != 0)))
                continue;
            res->period = r->period;
            if (r->action == SL_RULE_DENY)
                res->deny = 1;
            else if (r->action == SL_RULE_UNLIMITED)
                res->unlimited = 1;
            else {
                res->keys = malloc(ref->id_len + 4);
                if (res->keys == NULL)
                    return sv_api_fail(e, 503, "ENOMEM", "out of memory");
                memcpy(res->keys, "\001id:", 4);
                memcpy(res->keys + 4, ref->id, ref->id_len);
                res->items[0] =
                    (sl_check_item){r->limit, res->keys, ref->id_len + 4};
                res->max_hits[0] = max_hits(rules, r);
                res->n = 1;
            }
            return 0;
        }
        return sv_api_fail(
            e, 404, "ENOLIMIT",
            "id: no rule named '%.*s'; give interval and requests "
            "for an ad hoc limit",
            (int)(ref->id_len < 64 ? ref->id_len : 64), ref->id);
    }

    if (ref->n_entries == 0)
        return sv_api_fail(e, 400, "EMISSING",
                           "key: at least one entry is required "
                           "with domain");
    /* As decide.c: each entry may add a decimal length and a separator. */
    size_t len = ref->domain_len + 24;
    for (size_t j = 0; j < ref->n_entries; j++)
        len += ref->entries[j].key_len + ref->entries[j].value_len + 48;
    res->keys = malloc(len);
    if (res->keys == NULL)
        return sv_api_fail(e, 503, "ENOMEM", "out of memory");
    sl_rule_match m[SL_RULES_MAX_LIMITS_PER_NODE];
    size_t nm = 0;
    int rc = sl_rules_match(rules, ref->domain, ref->domain_len, ref->entries,
                            ref->n_entries, 0, m, SL_RULES_MAX_LIMITS_PER_NODE,
                            &nm, res->keys, len);
    if (rc != 0)
        return sv_api_fail(e, 400, sl_err_name(rc), "key: %s", sl_strerror(rc));
    sl_rules_drop_replaced(m, &nm);
    int matched = 0;
    for (size_t i = 0; i < nm; i++) {
        const sl_rule *r = m[i].rule;
        if (r->shadow_mode)
            continue; /* shadow rules never hold a client back */
        matched = 1;
        if (r->period > res->period)
            res->period = r->period;
        if (r->action == SL_RULE_DENY)
            res->deny = 1;
        else if (r->action == SL_RULE_LIMIT) {
            res->max_hits[res->n] = max_hits(rules, r);
            res->items[res->n++] =
                (sl_check_item){r->limit, m[i].key, m[i].key_len};
        }
    }
    if (!matched)
        return sv_api_fail(e, 404, "ENOLIMIT", "domain, key: no rule matches");
    res->unlimited = res->n == 0 && !res->deny;
    return 0;
}

/* What a request keeps across its rounds on the store. */
typedef struct client_state {
    enum { RECORD, RECORDED, QUERY, QUERIED, ASKED } phase;
    sv_rules *rules;        /* held: the resolved limits may be its */
    struct sv_adhoc *adhoc; /* the table res.adhoc is held from */
    json_t *root;           /* an increment's body: ref points into it */
    char numbuf[2][24];
    limit_ref ref;
    resolved res;
    int64_t hits;
    int counted, over;
    sl_nanos now;    /* of the delay's answer */
    size_t n_checks; /* the round's */
    sd_check checks[SL_MAX_ITEMS];
    int64_t costs[SL_MAX_ITEMS];
    sl_decision each[SL_MAX_ITEMS];
    sl_decision q[SL_MAX_ITEMS]; /* each item's cost-0 query */
    size_t asked[SL_MAX_ITEMS];  /* the item of each cost-1 check */
    char dec[];                  /* the query string, decoded */
} client_state;

static const int64_t cost_zero = 0, cost_one = 1;

static void client_state_free(void *p)
{
    client_state *cs = p;
    if (cs == NULL)
        return;
    sv_rules_release(cs->rules);
    json_decref(cs->root);
    free(cs->res.keys);
    sv_adhoc_put(cs->adhoc, cs->res.adhoc);
    free(cs);
}

static client_state *client_state_new(sv_worker *w, sv_req *rq, size_t dec_len)
{
    client_state *cs = malloc(sizeof(*cs) + dec_len);
    if (cs == NULL)
        return NULL;
    memset(cs, 0, offsetof(client_state, checks));
    cs->rules = w->rules;
    cs->adhoc = w->server->adhoc;
    atomic_fetch_add_explicit(&cs->rules->refs, 1, memory_order_relaxed);
    rq->api = cs;
    rq->api_free = client_state_free;
    return cs;
}

/* Decides the round's checks: 0, or SV_AGAIN. */
static int round_trip(sv_worker *w, sv_req *rq, client_state *cs)
{
    if (cs->n_checks == 0)
        return 0;
    return sd_decide(w->dec, cs->checks, cs->n_checks, sv_now(w), rq->resume,
                     rq->owner, &rq->wait);
}

/* The first failed check of the round: -1 with e set, else 0. */
static int round_failed(const client_state *cs, sv_api_err *e)
{
    for (size_t i = 0; i < cs->n_checks; i++) {
        int rc = cs->checks[i].rc;
        if (rc != 0)
            return sv_api_fail(e, sv_decide_status(rc), sl_err_name(rc),
                               "store: %s", sl_strerror(rc));
    }
    return 0;
}

static sd_check item_check(const sl_check_item *it, const int64_t *cost)
{
    return (sd_check){.items = it, .costs = cost, .n = 1};
}

/*
 * The rounds of a request, from where it stands: an increment records
 * its hits first; then the delay: how long until a request of cost 1 may
 * be sent.
 *
 * The library has no "peek at cost 1".  So each item is asked with cost
 * 0 first, a pure query that returns remaining; remaining >= 1 means a
 * cost-1 request passes now (remaining is whole units, so it is >= 1
 * exactly when one unit is available) and the delay is 0.  Only when
 * remaining is 0 is a cost-1 check made: it is refused, which consumes
 * nothing, and its retry_after is the wait.  Should that check pass
 * after all, it consumed one unit; it is then reported as delay 0 and
 * remaining 0, which is what the client would see after sending.  Over
 * several items the longest wait and the least remaining speak.
 *
 * Returns 0 when every round is done, SV_AGAIN, or -1 with e set.
 */
static int run_rounds(sv_worker *w, sv_req *rq, client_state *cs, sv_api_err *e)
{
    for (;;) {
        switch (cs->phase) {
        case RECORD:
            cs->phase = RECORDED;
            cs->n_checks = 0;
            if (cs->res.n > 0 && !cs->res.deny) {
                for (size_t i = 0; i < cs->res.n; i++)
                    cs->costs[i] = cs->hits;
                cs->checks[0] = (sd_check){.items = cs->res.items,
                                           .costs = cs->costs,
                                           .n = cs->res.n,
                                           .flags = SL_RECORD,
                                           .each = cs->each};
                cs->n_checks = 1;
            }
            if (round_trip(w, rq, cs) == SV_AGAIN)
                return SV_AGAIN;
            break;
        case RECORDED:
            if (round_failed(cs, e) != 0)
                return -1;
            cs->counted = cs->n_checks > 0;
            cs->over =
                cs->res.deny || (cs->counted && !cs->checks[0].overall.allowed);
            cs->phase = QUERY;
            break;
        case QUERY:
            cs->now = sv_now(w);
            for (size_t i = 0; i < cs->res.n; i++)
                cs->checks[i] = item_check(&cs->res.items[i], &cost_zero);
            cs->n_checks = cs->res.n;
            cs->phase = QUERIED;
            if (round_trip(w, rq, cs) == SV_AGAIN)
                return SV_AGAIN;
            break;
        case QUERIED: {
            size_t k = 0;
            if (round_failed(cs, e) != 0)
                return -1;
            for (size_t i = 0; i < cs->res.n; i++) {
                cs->q[i] = cs->checks[i].overall;
                if (cs->q[i].remaining < 1)
                    cs->asked[k++] = i;
            }
            for (size_t j = 0; j < k; j++)
                cs->checks[j] =
                    item_check(&cs->res.items[cs->asked[j]], &cost_one);
            cs->n_checks = k;
            cs->phase = ASKED;
            if (round_trip(w, rq, cs) == SV_AGAIN)
                return SV_AGAIN;
            break;
        }
        case ASKED:
            return round_failed(cs, e);
        }
    }
}

/* The delay answer's fields, from the rounds' results, into body. */
static void delay_json(const client_state *cs, json_t *body)
{
    const resolved *res = &cs->res;
    sl_nanos delay = res->deny ? -1 : 0;
    int64_t remaining = res->deny ? 0 : INT64_MAX, limit = 0;
    sl_nanos period = res->period;
    for (size_t j = 0; j < cs->n_checks; j++) {
        const sl_decision *one = &cs->checks[j].overall;
        if (one->allowed)
            continue;
        if (one->retry_after < 0)
            delay = -1;
        else if (delay >= 0 && one->retry_after > delay)
            delay = one->retry_after;
    }
    for (size_t i = 0; i < res->n; i++) {
        const sl_decision *q = &cs->q[i];
        if (q->remaining < remaining) {
            remaining = q->remaining < 0 ? 0 : q->remaining;
            limit = q->limit;
            period = sl_limit_get_config(res->items[i].limit)->period;
        }
    }
    json_object_set_new(body, "delay_ms", json_integer(sv_ms_up(delay)));
    json_object_set_new(body, "next_free_ms",
                        delay < 0 ? json_null()
                                  : json_integer(sv_ms_up(cs->now + delay)));
    if (res->unlimited) {
        json_object_set_new(body, "remaining", json_null());
        json_object_set_new(body, "limit", json_null());
    } else {
        json_object_set_new(body, "remaining", json_integer(remaining));
        json_object_set_new(body, "limit", json_integer(limit));
    }
    json_object_set_new(body, "period_ms",
                        json_integer((json_int_t)(period / SL_NS_PER_MS)));
}

/* Runs the rounds and answers: the request's first step made cs. */
static int client_answer(sv_worker *w, sv_req *rq, client_state *cs,
                         int increment, sv_buf *out, int keep_alive)
{
    sv_api_err e = {0};
    int rc = run_rounds(w, rq, cs, &e);
    if (rc == SV_AGAIN) {
        rq->step = 1;
        return rc;
    }
    if (rc != 0) {
        sv_respond_api_err(w, &e, out, keep_alive);
        return 0;
    }
    json_t *body = increment ? json_pack("{s:b,s:b}", "counted", cs->counted,
                                         "over_limit", cs->over)
                             : json_object();
    if (body == NULL) {
        sv_respond_error(out, 503, "ENOMEM", "out of memory", keep_alive);
        return 0;
    }
    delay_json(cs, body);
    sv_respond_json(out, 200, NULL, body, keep_alive);
    json_decref(body);
    return 0;
}

int sv_api_delay(sv_worker *w, const sv_http_request *req, sv_req *rq,
                 sv_buf *out, int keep_alive)
{
    client_state *cs = rq->api;
    sv_api_err e = {0};
    if (rq->step > 0)
        return client_answer(w, rq, cs, 0, out, keep_alive);
    if ((cs = client_state_new(w, rq, req->query_len + 1)) == NULL) {
        sv_api_fail(&e, 503, "ENOMEM", "out of memory");
        goto fail;
    }
    if (parse_query(w, req->query, req->query_len, cs->dec, &cs->ref, &e) != 0)
        goto fail;
    if (cs->ref.hits != NULL) {
        sv_api_fail(
            &e, 400, "EINVAL",
            "hits: not a parameter of /v1/delay (it answers for one request)");
        goto fail;
    }
    if (resolve(w, &cs->ref, &cs->res, &e) != 0)
        goto fail;
    cs->phase = QUERY;
    return client_answer(w, rq, cs, 0, out, keep_alive);
fail:
    sv_respond_api_err(w, &e, out, keep_alive);
    return 0;
}

/* An increment's hits past what a full limit holds would be recorded
 * (they count even over the limit) and leave a window 2^40 over its
 * limit, every later request refused until that count has gone from
 * what the window weighs, however little the client sends.  Refused
 * with 400 ERANGE instead, naming the bound: -1, or 0. */
static int check_hits(const resolved *res, int64_t hits, sv_api_err *e)
{
    for (size_t i = 0; i < res->n; i++)
        if (hits > res->max_hits[i])
            return sv_api_fail(e, 400, "ERANGE",
                               "hits: %lld is more than %lld, the most one "
                               "increment may report to this limit (its "
                               "capacity, or the rule's max_hits)",
                               (long long)hits, (long long)res->max_hits[i]);
    return 0;
}

/*
 * An increment records `hits` requests sent now.  They have been sent
 * whatever the limit says, so they are recorded even past the limit
 * (SL_RECORD), as the Databox paper counts every request: "over_limit"
 * says they did not fit, and the delay that follows includes them.
 * Several matched limits are recorded in one check.  A deny rule records
 * nothing ("counted": false).
 */
int sv_api_increment(sv_worker *w, const sv_http_request *req, sv_req *rq,
                     sv_buf *out, int keep_alive)
{
    client_state *cs = rq->api;
    sv_api_err e = {0};
    json_error_t je;
    if (rq->step > 0)
        return client_answer(w, rq, cs, 1, out, keep_alive);
    if ((cs = client_state_new(w, rq, 0)) == NULL) {
        sv_api_fail(&e, 503, "ENOMEM", "out of memory");
        goto fail;
    }
    cs->root =
        json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (cs->root == NULL) {
        sv_api_fail(&e, 400, "EJSON", "malformed JSON: %s (line %d, column %d)",
                    je.text, je.line, je.column);
        goto fail;
    }
    if (parse_body(w, cs->root, &cs->ref, cs->numbuf, &e) != 0)
        goto fail;
    cs->hits = 1;
    if (cs->ref.hits != NULL &&
        sv_parse_count(cs->ref.hits, cs->ref.hits_len, &cs->hits) != 0) {
        sv_api_fail(&e, 400, "ETYPE", "hits: expected a non-negative integer");
        goto fail;
    }
    if (resolve(w, &cs->ref, &cs->res, &e) != 0 ||
        check_hits(&cs->res, cs->hits, &e) != 0)
        goto fail;
    cs->phase = RECORD;
    return client_answer(w, rq, cs, 1, out, keep_alive);
fail:
    sv_respond_api_err(w, &e, out, keep_alive);
    return 0;
}
