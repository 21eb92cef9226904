/*
 * decide.c - from a request's descriptors to one decision, for every
 * front end: match every descriptor against the rules, apply lyft's
 * `replaces` across them, then decide every enforced limit of the request
 * in ONE atomic check of the decision layer (sd_decide), so a request
 * consumes from all its limits or from none, each its descriptor's own
 * `hits`.  Shadow-mode limits are checks of their own because they must
 * never veto the real ones; unlimited rules never touch the store; deny
 * rules (requests_per_unit: 0) reject.  What a waiting request needs
 * when its checks come back is kept in its sv_dec_state.
 *
 * Overrides.  A descriptor may carry lyft's limit override (envoy's
 * RateLimitDescriptor.limit).  As in envoyproxy/ratelimit, it stands for
 * the descriptor's whole decision once the domain is known, whatever its
 * rules say or whether any matched: none of their shadow_mode, unlimited,
 * requests_per_unit: 0 or replaces applies to it.  It is counted on the
 * descriptor's own counter key, the one its rules count on, and, as
 * ratelimit's fixed-window count does not depend on the limit, on the
 * descriptor's counter: a matched rule of the same limit and period lends
 * it its limit (whatever its algorithm), else a matched fixed_window rule
 * of the same period its state (sl_limit_override() of the rule's limit, so 3
 * calls on a 5/year rule leave 97 of an override of 100/year); with no
 * such rule, every override of one unit shares one fixed window per key,
 * whatever its requests_per_unit (an override of a base fixed window
 * kept apart from every rule's by OVERRIDE_ID).  The override is a rule
 * made for the request (st->ov), so answers, headers and metrics treat it
 * as any rule; it is labelled "_override_".
 *
 * Quota mode (envoyproxy/ratelimit's quota_mode, and --quota-mode for
 * every limit).  A quota limit over its limit makes its descriptor
 * OVER_LIMIT but not, alone, the request: the request is OVER_LIMIT when
 * a limit not in quota mode refuses it, or when every descriptor in quota
 * mode is over (with --quota-mode, every descriptor but the unlimited
 * ones, matched or not, as ratelimit counts them).  So a quota limit is a
 * check of its own, as a shadow limit is, and never vetoes the others;
 * its store errors fail the request as the enforced check's do.
 * --shadow-mode answers every request OK and counts the over-limit ones
 * (sluice_global_shadow_total); the descriptors keep their codes, as in
 * ratelimit.  A refused request consumes nothing of its enforced limits
 * either way (they are decided all or nothing), where ratelimit counts
 * every hit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/decide.h"
#include "runtime/hot.h"
#include "runtime/metrics.h"
#include "rules/rule_daemon.h"

int sv_decide_status(int rc)
{
    return rc == SL_ENOMEM || rc == SL_EFULL || rc == SL_ESTORE ? 503 : 400;
}

/* Overrides' units by RateLimitUnit number: the enum's name, the rules'
 * word for it, its period (a month 30 days, a year 365, as the rules). */
static const struct override_unit {
    const char *name, *word;
    sl_nanos period;
} override_units[] = {
    [1] = {"SECOND", "second", SL_NS_PER_SEC},
    [2] = {"MINUTE", "minute", 60 * SL_NS_PER_SEC},
    [3] = {"HOUR", "hour", 3600 * SL_NS_PER_SEC},
    [4] = {"DAY", "day", 86400 * SL_NS_PER_SEC},
    [5] = {"MONTH", "month", 30 * 86400 * SL_NS_PER_SEC},
    [6] = {"YEAR", "year", 365 * 86400 * SL_NS_PER_SEC},
    [7] = {"WEEK", "week", 7 * 86400 * SL_NS_PER_SEC},
};
#define N_OVERRIDE_UNITS (sizeof(override_units) / sizeof(override_units[0]))

/* An override's own limits are kept apart from every rule's by this id
 * ("override"): state is per (parameters, id, key). */
#define OVERRIDE_ID UINT64_C(0x6f76657272696465)

/* What answers write of every override's rule (rules_set.h). */
static char override_json[] = "_override_", override_sf[] = "\"_override_\"";
static const sv_rule_text override_text = {
    override_json, sizeof(override_json) - 1, override_sf,
    sizeof(override_sf) - 1};

const char *sv_override_unit_name(int unit)
{
    return unit > 0 && (size_t)unit < N_OVERRIDE_UNITS
               ? override_units[unit].name
               : NULL;
}

struct sv_dec_state {
    /* The request, borrowed from the front end until it is decided. */
    const sv_dec_descriptor *ds;
    size_t n;
    int64_t hits;
    sv_rules *rules; /* matched against */
    int referenced;  /* rules is held by a reference while waiting */
    size_t domain;   /* the request's in rules, or SL_RULES_NO_DOMAIN */
    /* Per descriptor of a request with overrides: the rule made for its
     * override, and the limit made for that rule when no matched rule
     * lent one; freed when the state is next used. */
    struct override {
        sl_rule rule;
        sl_limit *base, *made;
    } * ov;
    size_t n_ov, cap_ov;
    sl_rule_match *m;
    size_t nm, cap_m;
    /* Per match: its item in items[] (an enforced limit) or its check in
     * checks[] (a shadow limit), else SIZE_MAX. */
    size_t *slot, cap_slot;
    char *keys; /* the matches' counter keys */
    size_t cap_keys;
    size_t n_items, unmatched;
    int deny;
    sl_check_item items[SL_MAX_ITEMS];
    int64_t costs[SL_MAX_ITEMS];
    sl__rule_failure failure[SL_MAX_ITEMS];
    sd_lease_terms lease[SL_MAX_ITEMS];
    sl_decision each[SL_MAX_ITEMS];
    /* checks[0]: the enforced items, when there are any; then one per
     * shadow limit, its item and cost in shadow[]. */
    sd_check *checks;
    size_t n_checks, cap_checks;
    struct shadow_item {
        sl_check_item item;
        int64_t cost;
    } * shadow;
    size_t cap_shadow;
    int has_items;
    int quota_all; /* --quota-mode */
};

sv_dec_state *sv_dec_state_get(sv_worker *w, sv_dec_state **own)
{
    sv_dec_state **st = w->server->cfg.redis_url ? own : &w->dec_scratch;
    if (*st == NULL)
        *st = calloc(1, sizeof(**st));
    return *st;
}

static void overrides_release(sv_dec_state *st)
{
    for (size_t i = 0; i < st->n_ov; i++) {
        sl_limit_free(st->ov[i].made);
        sl_limit_free(st->ov[i].base);
        st->ov[i].made = st->ov[i].base = NULL;
    }
    st->n_ov = 0;
}

void sv_dec_state_free(sv_dec_state *st)
{
    if (st == NULL)
        return;
    sv_decide_abandon(st);
    overrides_release(st);
    free(st->ov);
    free(st->m);
    free(st->slot);
    free(st->keys);
    free(st->checks);
    free(st->shadow);
    free(st);
}

/* Room for n elements of size in *p: 0, or -1 out of memory. */
static int grow(void *p, size_t *cap, size_t n, size_t size)
{
    void **pp = p;
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4;
    while (c < n)
        c *= 2;
    void *g = realloc(*pp, c * size);
    if (g == NULL)
        return -1;
    *pp = g;
    *cap = c;
    return 0;
}

/* Each counter key is the domain and the descriptor's entries, each
 * written by sl_rules_match() as a separator, a decimal length and a
 * colon before the bytes: KEY_FIELD bytes of framing at most. */
#define KEY_FIELD 24

static size_t key_room(size_t domain_len, const sv_dec_descriptor *d)
{
    size_t len = domain_len + KEY_FIELD;
    for (size_t j = 0; j < d->n_entries; j++)
        len += d->entries[j].key_len + d->entries[j].value_len + 2 * KEY_FIELD;
    return len;
}

/* Descriptor i carries an override: its k matches, at m with their key
 * built at key (room bytes), give way to one match of the rule made for
 * it (the header comment, "Overrides").  0 or SL_E*. */
static int override(sv_dec_state *st, const sl_rules *rules, size_t i,
                    sl_rule_match *m, size_t *k, char *key, size_t room,
                    const char *domain, size_t domain_len, char *err,
                    size_t errlen)
{
    const sv_dec_descriptor *d = &st->ds[i];
    const sv_dec_override *o = d->limit;
    struct override *ov = &st->ov[i];
    const sl_limit *lim = NULL;
    size_t klen;
    if (sv_override_unit_name(o->unit) == NULL || o->requests_per_unit < 0 ||
        o->requests_per_unit > SL_MAX_COUNT) {
        snprintf(err, errlen, "descriptors[%zu].limit: not a limit", i);
        return SL_EINVAL;
    }
    const struct override_unit *u = &override_units[o->unit];
    const sl_limit *base = NULL;
    for (size_t j = 0; j < *k && lim == NULL; j++) {
        const sl_rule *r = m[j].rule;
        if (r->action != SL_RULE_LIMIT || r->period != u->period)
            continue;
        if (r->requests_per_unit == o->requests_per_unit)
            lim = r->limit; /* the rule's own limit, whatever algorithm */
        else if (base == NULL &&
                 sl_limit_get_config(r->limit)->algorithm == SL_FIXED_WINDOW)
            base = r->limit;
    }
    if (*k > 0)
        klen = m[0].key_len;
    else if (sl_rules_counter_key(domain, domain_len, d->entries, d->n_entries,
                                  key, room, &klen) != 0) {
        snprintf(err, errlen, "descriptors[%zu]: %s", i,
                 sl_strerror(SL_EKEYLEN));
        return SL_EKEYLEN;
    }
    if (lim == NULL && o->requests_per_unit > 0) {
        /* The base's L is no part of the count: 1 for all. */
        sl_limit_config c = {.algorithm = SL_FIXED_WINDOW,
                             .limit = 1,
                             .period = u->period,
                             .id = OVERRIDE_ID};
        int rc = base != NULL ? 0 : sl_limit_new(&c, &ov->base, NULL, 0);
        if (rc == 0)
            rc = sl_limit_override(base != NULL ? base : ov->base,
                                   o->requests_per_unit, 0, &ov->made, NULL, 0);
        if (rc != 0) {
            snprintf(err, errlen, "descriptors[%zu].limit: %s", i,
                     sl_strerror(rc));
            return rc;
        }
        lim = ov->made;
    }
    ov->rule = (sl_rule){
        .domain = sl_rules_domain_name(rules, st->domain),
        .path = override_json,
        .name = "",
        .action = lim != NULL ? SL_RULE_LIMIT : SL_RULE_DENY,
        .limit = lim,
        .unit = u->word,
        .requests_per_unit = o->requests_per_unit,
        .unit_multiplier = 1,
        .period = u->period,
        .index = SIZE_MAX, /* no rule of the set: override_text */
    };
    m[0] = (sl_rule_match){&ov->rule, key, klen, i};
    *k = 1;
    return 0;
}

/* Matches every descriptor, applies lyft's `replaces`: 0 or SL_E*. */
static int match(sv_dec_state *st, const sv_rules *set, const char *domain,
                 size_t domain_len, char *err, size_t errlen)
{
    const sl_rules *rules = set->rules;
    size_t keys_len = 1, off = 0, n_ov = 0;
    for (size_t i = 0; i < st->n; i++) {
        keys_len += key_room(domain_len, &st->ds[i]);
        n_ov += st->ds[i].limit != NULL;
    }
    size_t max_m = st->n * SL_RULES_MAX_LIMITS_PER_NODE;
    overrides_release(st);
    if (grow(&st->keys, &st->cap_keys, keys_len, 1) != 0 ||
        grow(&st->m, &st->cap_m, max_m, sizeof(*st->m)) != 0 ||
        (n_ov > 0 && grow(&st->ov, &st->cap_ov, st->n, sizeof(*st->ov)))) {
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    for (size_t i = 0; n_ov > 0 && i < st->n; i++)
        st->ov[i].made = st->ov[i].base = NULL;
    st->n_ov = n_ov > 0 ? st->n : 0;
    st->domain = sl_rules_domain_find(rules, domain, domain_len);
    st->nm = st->unmatched = 0;
    for (size_t i = 0; i < st->n; i++) {
        const sv_dec_descriptor *d = &st->ds[i];
        size_t len = key_room(domain_len, d), k = 0;
        int rc =
            sl_rules_match(rules, domain, domain_len, d->entries, d->n_entries,
                           i, st->m + st->nm, SL_RULES_MAX_LIMITS_PER_NODE, &k,
                           st->keys + off, len);
        for (size_t j = 0; rc == 0 && j < k; j++) /* runtime limits */
            st->m[st->nm + j].rule =
                sv_rules_in_force(set, st->m[st->nm + j].rule);
        if (rc == 0 && d->limit != NULL && st->domain != SL_RULES_NO_DOMAIN)
            rc = override(st, rules, i, st->m + st->nm, &k, st->keys + off, len,
                          domain, domain_len, err, errlen);
        else if (rc != 0)
            snprintf(err, errlen, "descriptors[%zu]: %s", i, sl_strerror(rc));
        if (rc != 0)
            return rc;
        if (k == 0)
            st->unmatched++;
        st->nm += k;
        off += len;
    }
    sl_rules_drop_replaced(st->m, &st->nm);
    if (grow(&st->slot, &st->cap_slot, st->nm, sizeof(*st->slot)) != 0) {
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    return 0;
}

static int64_t hits_of(const sv_dec_state *st, const sl_rule_match *m)
{
    int64_t h = st->ds[m->descriptor].hits;
    return h >= 0 ? h : st->hits;
}

static void check_init(sd_check *c, const sl_check_item *items,
                       const int64_t *costs, size_t n,
                       const sl__rule_failure *failure, sl_decision *each)
{
    c->items = items;
    c->costs = costs;
    c->n = n;
    c->flags = 0;
    c->failure = failure;
    c->lease = NULL;
    c->each = each;
    c->command = 0;
}

/* A rule's policy when Redis cannot decide.  The outage guard
 * (docs/adaptive.md): a rule whose limit follows its upstream
 * (`controller: gradient`) is never let open; it is decided locally, at
 * its share of the limit in force, as `local` divides it. */
static sl__rule_failure failure_of(const sl__rule_daemon *d,
                                   int redis_failure)
{
    if (d->adaptive_controller == SL__CONTROLLER_GRADIENT &&
        (d->store_failure == SL__RULE_FAILURE_OPEN ||
         (d->store_failure == SL__RULE_FAILURE_DEFAULT &&
          redis_failure == SD_FAIL_OPEN)))
        return SL__RULE_FAILURE_LOCAL;
    return d->store_failure;
}

/* Whether r is in quota mode (the header comment, "Quota mode"). */
static int quota_of(const sv_dec_state *st, const sl_rule *r)
{
    return st->quota_all || sl__rule_daemon_of(st->rules->rules, r)->quota_mode;
}

/* A limit decided apart from the enforced ones: shadow or quota. */
static int apart(const sv_dec_state *st, const sl_rule *r)
{
    return r->shadow_mode || quota_of(st, r);
}

/* The checks: every enforced limit in one, all or nothing; each shadow
 * or quota limit alone, because it must never veto the real ones.  Unlimited
 * rules never touch the store; a deny rule makes the others queries (a
 * denied request consumes nothing).  0 or SL_E*. */
static int build_checks(sv_dec_state *st, int redis_failure, char *err,
                        size_t errlen)
{
    size_t n_shadow = 0;
    st->n_items = 0;
    st->deny = 0;
    for (size_t i = 0; i < st->nm; i++) {
        const sl_rule *r = st->m[i].rule;
        st->slot[i] = SIZE_MAX;
        if (apart(st, r)) {
            n_shadow += r->action == SL_RULE_LIMIT;
            continue;
        }
        if (r->action == SL_RULE_DENY)
            st->deny = 1;
        if (r->action != SL_RULE_LIMIT)
            continue;
        /* A descriptor repeated (the same limit and counter key) is one
         * item charged for both, as envoyproxy/ratelimit counts both; the
         * store would refuse the same key twice in one call. */
        size_t same = SIZE_MAX;
        for (size_t k = 0; k < st->n_items && same == SIZE_MAX; k++)
            if (st->items[k].limit == r->limit &&
                st->items[k].key_len == st->m[i].key_len &&
                memcmp(st->items[k].key, st->m[i].key, st->m[i].key_len) == 0)
                same = k;
        if (same != SIZE_MAX) {
            st->slot[i] = same;
            st->costs[same] += hits_of(st, &st->m[i]);
            continue;
        }
        if (st->n_items == SL_MAX_ITEMS) {
            snprintf(err, errlen,
                     "more than %d limits matched; one request decides at "
                     "most %d at once",
                     SL_MAX_ITEMS, SL_MAX_ITEMS);
            return SL_ERANGE;
        }
        size_t k = st->n_items++;
        st->slot[i] = k;
        const sl__rule_daemon *d = sl__rule_daemon_of(st->rules->rules, r);
        st->failure[k] = failure_of(d, redis_failure);
        st->lease[k] = (sd_lease_terms){d->lease_share_ppm, d->lease_max};
        st->costs[k] = hits_of(st, &st->m[i]);
        st->items[k] =
            (sl_check_item){r->limit, st->m[i].key, st->m[i].key_len};
    }
    for (size_t k = 0; st->deny && k < st->n_items; k++)
        st->costs[k] = 0;
    st->has_items = st->n_items > 0;
    st->n_checks = (size_t)st->has_items + n_shadow;
    if (grow(&st->checks, &st->cap_checks, st->n_checks, sizeof(sd_check)) ||
        grow(&st->shadow, &st->cap_shadow, n_shadow, sizeof(*st->shadow))) {
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    /* Field by field: a compound literal would clear each check's error
     * text, which only an error writes. */
    if (st->has_items) {
        check_init(&st->checks[0], st->items, st->costs, st->n_items,
                   st->failure, st->each);
        st->checks[0].lease = st->lease;
    }
    size_t c = (size_t)st->has_items, j = 0;
    for (size_t i = 0; i < st->nm; i++) {
        const sl_rule *r = st->m[i].rule;
        if (!apart(st, r) || r->action != SL_RULE_LIMIT)
            continue;
        struct shadow_item *sh = &st->shadow[j];
        sh->item = (sl_check_item){r->limit, st->m[i].key, st->m[i].key_len};
        sh->cost = hits_of(st, &st->m[i]);
        check_init(&st->checks[c], &sh->item, &sh->cost, 1,
                   &sl__rule_daemon_of(st->rules->rules, r)->store_failure,
                   NULL);
        st->slot[i] = c++;
        j++;
    }
    return 0;
}

int sv_decide(sv_worker *w, sv_dec_state *st, const char *domain,
              size_t domain_len, const sv_dec_descriptor *ds, size_t n,
              int64_t hits, sv_dec_result *res, sd_done_fn done, void *owner,
              sd_wait **wait, char *err, size_t errlen)
{
    sv_decide_abandon(st); /* the last request's set, answered by now */
    st->ds = ds;
    st->n = n;
    st->hits = hits;
    st->rules = w->rules;
    st->quota_all = w->server->cfg.quota_mode;
    int rc = match(st, w->rules, domain, domain_len, err, errlen);
    if (rc == 0)
        rc = build_checks(st, w->server->cfg.redis_failure, err, errlen);
    if (rc != 0)
        return rc;
    if (st->n_checks > 0 &&
        sd_decide(w->dec, st->checks, st->n_checks, sv_now(w), done, owner,
                  wait) == SD_AGAIN) {
        /* The matches name rules of this set: it stays until answered. */
        atomic_fetch_add_explicit(&st->rules->refs, 1, memory_order_relaxed);
        st->referenced = 1;
        return SV_AGAIN;
    }
    return sv_decide_finish(w, st, res, err, errlen);
}

const sl_rules *sv_decide_rules(const sv_dec_state *st)
{
    return st->rules->rules;
}

void sv_decide_abandon(sv_dec_state *st)
{
    if (st == NULL)
        return;
    if (st->referenced)
        sv_rules_release(st->rules);
    st->referenced = 0;
    st->rules = NULL;
}

/* Orders statuses: over the limit first, then limited before unlimited,
 * then least remaining.  Returns nonzero when a is closer than b. */
static int closer(const sv_dec_status *a, const sv_dec_status *b)
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

/* A match's status: its decision, whether it refused, and its metrics. */
static sv_dec_status status_of(sv_worker *w, const sv_dec_state *st,
                               const sl_rule_match *m, size_t slot, int over)
{
    const sl_rule *r = m->rule;
    const sv_dec_descriptor *dd = &st->ds[m->descriptor];
    sv_dec_status s = {.rule = r,
                       .text = r->index == SIZE_MAX
                                   ? &override_text
                                   : &st->rules->text[r->index],
                       .shadow = r->shadow_mode,
                       .quota = quota_of(st, r)};
    int shadow_pass = 0;
    uint64_t near = 0;
    int64_t h = hits_of(st, m);
    switch (r->action) {
    case SL_RULE_UNLIMITED:
        s.d = (sl_decision){.allowed = 1, .remaining = INT64_MAX};
        break;
    case SL_RULE_DENY:
        s.d = (sl_decision){.allowed = 0, .retry_after = -1};
        s.over = !r->shadow_mode;
        shadow_pass = r->shadow_mode;
        break;
    case SL_RULE_LIMIT:
        if (!r->shadow_mode && s.quota) {
            /* Its own check; an error failed the request already. */
            s.d = st->checks[slot].overall;
            s.over = !s.d.allowed;
            near = sv_metrics_near_hits(&s.d, h);
        } else if (!r->shadow_mode) {
            s.d = st->each[slot];
            s.over = !s.d.allowed;
            /* A refused request consumed from no item. */
            near = over ? 0 : sv_metrics_near_hits(&s.d, h);
        } else {
            const sd_check *c = &st->checks[slot];
            /* A shadow limit that could not be decided lets it pass. */
            s.d = c->rc == 0 ? c->overall : (sl_decision){.allowed = 1};
            near = sv_metrics_near_hits(&s.d, h);
            shadow_pass = !s.d.allowed;
            s.d.allowed = 1;
            s.d.retry_after = 0;
        }
        break;
    }
    s.limited = s.over || shadow_pass;
    sv_metrics_rule(w, st->rules->rules, r, dd->entries, dd->n_entries,
                    !s.over, shadow_pass, near);
    if (r->index == SIZE_MAX) {
        static const char ov[] = "(request's limit)";
        sv_hot_count(w, ov, sizeof(ov) - 1, sv_hot_hash(ov, sizeof(ov) - 1),
                     m->key, m->key_len, s.over || shadow_pass);
    } else
        sv_hot_count(w, st->rules->ids[r->index], st->rules->id_len[r->index],
                     st->rules->id_hash[r->index], m->key, m->key_len,
                     s.over || shadow_pass);
    return s;
}

/* Whether the request is OVER_LIMIT given its statuses and whether its
 * enforced limits refused it (the header comment, "Quota mode"). */
static int overall_over(const sv_dec_state *st, const sv_dec_result *res,
                        int enforced_over)
{
    size_t quota = 0, quota_over = 0;
    for (size_t i = 0; i < st->n; i++) {
        const sv_dec_status *s = &res->status[i];
        if (s->rule == NULL) {
            quota += (size_t)st->quota_all;
        } else if (s->rule->action != SL_RULE_UNLIMITED && s->quota) {
            quota++;
            quota_over += (size_t)s->over;
        } else if (s->over) {
            enforced_over = 1;
        }
    }
    return enforced_over || (quota > 0 && quota_over == quota);
}

/* The first error of the enforced check or of a quota limit's. */
static int check_error(const sv_dec_state *st, char *err, size_t errlen)
{
    for (size_t i = 0; i < st->n_checks; i++) {
        const sd_check *c = &st->checks[i];
        int quota = 0;
        /* slot[] is a check's index only for a match decided apart. */
        for (size_t k = 0; i > 0 && k < st->nm && !quota; k++) {
            const sl_rule *r = st->m[k].rule;
            quota = st->slot[k] == i && r->action == SL_RULE_LIMIT &&
                    !r->shadow_mode && quota_of(st, r);
        }
        if ((i == 0 && st->has_items) || quota) {
            if (c->rc != 0) {
                snprintf(err, errlen, "%s", c->err);
                return c->rc;
            }
        }
    }
    return 0;
}

int sv_decide_finish(sv_worker *w, sv_dec_state *st, sv_dec_result *res,
                     char *err, size_t errlen)
{
    int rc = check_error(st, err, errlen);
    if (rc != 0)
        goto out;
    int enforced_over =
        st->deny || (st->has_items && !st->checks[0].overall.allowed);
    res->over = enforced_over;
    if (st->unmatched > 0)
        sv_metrics_unmatched(w, st->rules->rules, st->domain, st->unmatched);
    for (size_t i = 0; i < st->n; i++)
        res->status[i] = (sv_dec_status){0};
    res->closest = NULL;
    for (size_t i = 0; i < st->nm; i++) {
        sv_dec_status s =
            status_of(w, st, &st->m[i], st->slot[i], enforced_over);
        sv_dec_status *slot = &res->status[st->m[i].descriptor];
        if (closer(&s, slot))
            *slot = s;
    }
    for (size_t i = 0; i < st->n; i++)
        if (res->status[i].rule != NULL &&
            res->status[i].rule->action != SL_RULE_UNLIMITED &&
            (res->closest == NULL || closer(&res->status[i], res->closest)))
            res->closest = &res->status[i];
    res->over = overall_over(st, res, enforced_over);
    if (res->over && w->server->cfg.shadow_mode) {
        res->over = 0;
        atomic_fetch_add_explicit(&w->stats.global_shadow, 1,
                                  memory_order_relaxed);
    }
    atomic_fetch_add_explicit(res->over ? &w->stats.checks_over
                                        : &w->stats.checks_ok,
                              1, memory_order_relaxed);
out:
    /* A waiting request's set stays referenced until the state is next
     * used or freed, not released here: the front end's answer still
     * reads the rules of res (names, numbers), and the thread may have
     * adopted a newer set meanwhile, leaving this reference the last. */
    return rc;
}
