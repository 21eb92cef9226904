/*
 * rules_build.c - one file's YAML tree to domains, descriptor nodes and
 * limits, checking every key and value on the way.
 *
 * The format is envoyproxy/ratelimit's, read as it reads it: it checks
 * keys against one flat list of names valid anywhere, so `unit` misplaced
 * at the descriptor level passes there and is ignored.  Here each mapping
 * knows its own keys: one of ratelimit's elsewhere is accepted and
 * ignored as there, with a warning that points at it (sluice validate
 * prints them); any other unknown key is an error.  Every error is
 * "file:line:column: message: 'value'" at the node it is about.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_internal.h"
#include "core/value.h"

const char *const sl__failure_names[] = {"local", "fail_open", "fail_closed",
                                         NULL};

typedef struct build {
    sl_rules *rules;
    const char *file;
    char *errbuf;
    size_t errlen;
    sl__rdomain *domain;
    /* Identity path of the current node: "klen:key=vlen:value" or
     * "klen:key!" per level, unambiguous whatever the bytes (lyft's
     * "key_value" is not).  Hashed into each limit's id. */
    char *idpath;
    size_t idlen, idcap;
    /* lyft's stats path of the current node: "domain.key_value.key". */
    char *path;
    size_t pathlen, pathcap;
    /* The current descriptor's quota_mode and metadata, for its limits;
     * and how many levels of its path have value_to_metric or
     * share_threshold. */
    int quota;
    const sl__meta *meta;
    int path_vtm, path_shared;
} build;

static int err_at(build *b, const sl__ynode *n, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int err_at(build *b, const sl__ynode *n, int err, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sl__rules_error(b->errbuf, b->errlen, err, b->file, n->line, n->col,
                           "%s", msg);
}

static int oom(build *b)
{
    if (b->errbuf != NULL && b->errlen > 0)
        snprintf(b->errbuf, b->errlen, "%s: out of memory", b->file);
    return SL_ENOMEM;
}

static int buf_append(char **buf, size_t *len, size_t *cap, const void *p,
                      size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1)
            c *= 2;
        char *nb = realloc(*buf, c);
        if (nb == NULL)
            return SL_ENOMEM;
        *buf = nb;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* The value of `key` in mapping m, or NULL. */
static const sl__ynode *get(const sl__ynode *m, const char *key)
{
    for (size_t i = 0; i + 1 < m->n; i += 2)
        if (strcmp(m->kids[i]->text, key) == 0)
            return m->kids[i + 1];
    return NULL;
}

/* Every key of m must be one of the NULL-terminated `allowed`. */
static int check_keys(build *b, const sl__ynode *m, const char *const *allowed)
{
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const sl__ynode *k = m->kids[i];
        size_t a = 0;
        while (allowed[a] != NULL && strcmp(allowed[a], k->text) != 0)
            a++;
        if (allowed[a] == NULL && sl__rules_lyft_key(k->text, k->len)) {
            if (sl__rules_warn(b->rules, b->file, k,
                               "key ignored at this place: '%s'",
                               k->text) != 0)
                return oom(b);
            continue;
        }
        if (allowed[a] == NULL || strlen(k->text) != k->len)
            return err_at(b, k, SL_EINVAL, "unknown key: '%s'", k->text);
    }
    return 0;
}

static int want_kind(build *b, const sl__ynode *n, sl__ykind kind,
                     const char *what)
{
    static const char *const names[] = {"a scalar", "a mapping", "a sequence"};
    if (n->kind == kind)
        return 0;
    return err_at(b, n, SL_EINVAL, "not %s: '%s'", names[kind], what);
}

/* YAML 1.1 booleans, as lyft's yaml.v2 reads them: only unquoted. */
static int get_bool(build *b, const sl__ynode *m, const char *key, int *out)
{
    const sl__ynode *n = get(m, key);
    *out = 0;
    if (n == NULL || (n->kind == SL__Y_SCALAR &&
                      sl__value_bool(n->text, n->len, n->plain, out) == 0))
        return 0;
    return err_at(b, n, SL_EINVAL, "invalid boolean for %s: '%s'", key,
                  n->kind == SL__Y_SCALAR ? n->text : "...");
}

/* A whole decimal number in [lo, SL_MAX_COUNT]. */
static int get_count(build *b, const sl__ynode *n, const char *key, int64_t lo,
                     int64_t *out)
{
    uint64_t v;
    if (n->kind == SL__Y_SCALAR &&
        sl__value_uint(n->text, n->len, (uint64_t)lo, SL_MAX_COUNT, &v) == 0) {
        *out = (int64_t)v;
        return 0;
    }
    return err_at(b, n, SL_EINVAL,
                  "invalid %s: '%s' (a whole number from %lld to 2^40)", key,
                  n->kind == SL__Y_SCALAR ? n->text : "...", (long long)lo);
}

/* lyft's units, case-insensitive as lyft upper-cases them.  week, month
 * and year are newer lyft units; month is 30 days and year 365, as there. */
static const char *const unit_names[] = {"second", "minute", "hour", "day",
                                         "week",   "month",  "year", NULL};
static const sl_nanos unit_ns[] = {
    SL_NS_PER_SEC,              /* second */
    60 * SL_NS_PER_SEC,         /* minute */
    3600 * SL_NS_PER_SEC,       /* hour */
    86400 * SL_NS_PER_SEC,      /* day */
    7 * 86400 * SL_NS_PER_SEC,  /* week */
    30 * 86400 * SL_NS_PER_SEC, /* month */
    365 * 86400 * SL_NS_PER_SEC /* year */
};
_Static_assert(sizeof(unit_ns) / sizeof(unit_ns[0]) + 1 ==
                   sizeof(unit_names) / sizeof(unit_names[0]),
               "one length per unit");

/* Rules of one node are compared after normalisation: two equal limits
 * on one node would share their counters, so one of them is a mistake. */
static int same_limit(const sl_rule *a, const sl_rule *b)
{
    if (a->action != b->action)
        return 0;
    if (a->action != SL_RULE_LIMIT)
        return 1;
    const sl_limit_config *x = sl_limit_get_config(a->limit);
    const sl_limit_config *y = sl_limit_get_config(b->limit);
    return x->algorithm == y->algorithm && x->limit == y->limit &&
           x->period == y->period && x->burst == y->burst && x->step == y->step;
}

static int add_to_all(build *b, sl_rule *r, const sl__rule_daemon *d)
{
    sl_rules *rs = b->rules;
    if (rs->n_rules == rs->cap_rules) {
        size_t cap = rs->cap_rules ? rs->cap_rules * 2 : 16;
        const sl_rule **a = realloc(rs->all, cap * sizeof(*a));
        if (a == NULL)
            return SL_ENOMEM;
        rs->all = a;
        sl__rule_daemon *da = realloc(rs->daemon, cap * sizeof(*da));
        if (da == NULL)
            return SL_ENOMEM;
        rs->daemon = da;
        rs->cap_rules = cap;
    }
    r->index = rs->n_rules;
    rs->daemon[rs->n_rules] = *d;
    rs->all[rs->n_rules++] = r;
    return 0;
}

/* A duration of the adaptive mapping, at least 1 ms. */
static int get_adaptive_duration(build *b, const sl__ynode *a, const char *key,
                                 sl_nanos *out)
{
    const sl__ynode *n = get(a, key);
    int rc;
    if (n == NULL)
        return 0;
    if ((rc = want_kind(b, n, SL__Y_SCALAR, key)) != 0)
        return rc;
    if (sl__value_duration(n->text, n->len, SL_NS_PER_MS, out) != 0)
        return err_at(b, n, SL_EINVAL,
                      "adaptive: invalid %s: '%s' (a duration of at least "
                      "1ms: 300ms, 1s, 1d)",
                      key, n->text);
    return 0;
}

/* The controller's thresholds (rules_adaptive.c). */
static int get_adaptive_tuning(build *b, const sl__ynode *a, sl__rule_daemon *r)
{
    const sl__ynode *bad = NULL;
    char why[256];
    if (sl__rules_adaptive_tuning(a, r, &bad, why, sizeof(why)) != 0)
        return err_at(b, bad, SL_EINVAL, "%s", why);
    return 0;
}

/* rate_limit.adaptive (docs/rules.md): the bounds within which the
 * runtime limits may move this limit, {min: N, max: N}, 1 <= min <= max;
 * and, for `sluice proxy`'s controller (docs/adaptive.md), `controller:
 * gradient` with its latency SLO and seasonal forecast. */
static int get_adaptive(build *b, const sl__ynode *a, sl__rule_daemon *r)
{
    static const char *const keys[] = {"min",
                                       "max",
                                       "controller",
                                       "slo_p99",
                                       "forecast_season",
                                       "forecast_horizon",
                                       "raise_step",
                                       "raise_max",
                                       "capacity_share",
                                       "error_rate",
                                       "relax_after",
                                       NULL};
    const sl__ynode *min, *max, *ctl;
    int rc;
    if ((rc = want_kind(b, a, SL__Y_MAP, "adaptive")) != 0 ||
        (rc = check_keys(b, a, keys)) != 0)
        return rc;
    min = get(a, "min");
    max = get(a, "max");
    if (min == NULL || max == NULL)
        return err_at(b, a, SL_EINVAL,
                      "adaptive: both min and max are required");
    if ((rc = get_count(b, min, "min", 1, &r->adaptive_min)) != 0 ||
        (rc = get_count(b, max, "max", 1, &r->adaptive_max)) != 0)
        return rc;
    if (r->adaptive_min > r->adaptive_max)
        return err_at(b, min, SL_EINVAL, "adaptive: min %lld is above max %lld",
                      (long long)r->adaptive_min, (long long)r->adaptive_max);
    if ((ctl = get(a, "controller")) != NULL) {
        if ((rc = want_kind(b, ctl, SL__Y_SCALAR, "controller")) != 0)
            return rc;
        if (strcmp(ctl->text, "gradient") == 0)
            r->adaptive_controller = SL__CONTROLLER_GRADIENT;
        else if (strcmp(ctl->text, "off") != 0)
            return err_at(b, ctl, SL_EINVAL,
                          "adaptive: unknown controller: '%s' (gradient or "
                          "off)",
                          ctl->text);
    }
    r->adaptive_horizon = 5 * SL_NS_PER_SEC;
    if ((rc = get_adaptive_duration(b, a, "slo_p99", &r->adaptive_slo_p99)) !=
            0 ||
        (rc = get_adaptive_duration(b, a, "forecast_season",
                                    &r->adaptive_season)) != 0 ||
        (rc = get_adaptive_duration(b, a, "forecast_horizon",
                                    &r->adaptive_horizon)) != 0 ||
        (rc = get_adaptive_tuning(b, a, r)) != 0)
        return rc;
    if (r->adaptive_season > 0 && r->adaptive_season < 2 * SL_NS_PER_SEC)
        return err_at(b, get(a, "forecast_season"), SL_EINVAL,
                      "adaptive: forecast_season must be at least 2s "
                      "(two 1s windows)");
    return 0;
}

static int build_limit(build *b, const sl__ynode *rl, sl__rnode *node,
                       int shadow, int detailed)
{
    /* One key a line would take 15. */
    /* clang-format off */
    static const char *const keys[] = {
        "unit",     "requests_per_unit", "unlimited", "name",
        "replaces", "algorithm",         "burst",     "unit_multiplier",
        "period",   "step",              "store_failure", "adaptive",
        "max_hits", "sync",              NULL};
    /* clang-format on */
    const sl__ynode *unit, *rpu, *name, *repl, *alg, *burst, *mult, *period,
        *step, *failure, *adaptive, *max_hits, *sync;
    sl_rule *r = &node->rules[node->n_rules];
    sl__rule_daemon d = {.detailed_metric = detailed,
                         .quota_mode = b->quota,
                         .value_to_metric = b->path_vtm > 0,
                         .shared = b->path_shared > 0,
                         .metadata = b->meta};
    sl_limit_config cfg = {.algorithm = SL_FIXED_WINDOW};
    int unlimited, rc;
    char listed[96]; /* an enumeration's words, for a message */

    if ((rc = want_kind(b, rl, SL__Y_MAP, "rate_limit")) != 0 ||
        (rc = check_keys(b, rl, keys)) != 0 ||
        (rc = get_bool(b, rl, "unlimited", &unlimited)) != 0)
        return rc;
    unit = get(rl, "unit");
    rpu = get(rl, "requests_per_unit");
    name = get(rl, "name");
    repl = get(rl, "replaces");
    alg = get(rl, "algorithm");
    burst = get(rl, "burst");
    mult = get(rl, "unit_multiplier");
    period = get(rl, "period");
    step = get(rl, "step");
    failure = get(rl, "store_failure");
    adaptive = get(rl, "adaptive");
    max_hits = get(rl, "max_hits");
    sync = get(rl, "sync");

    memset(r, 0, sizeof(*r));
    r->domain = b->domain->name;
    r->shadow_mode = shadow;
    r->unit_multiplier = 1;
    r->path = dup_n(b->path, b->pathlen);
    r->name = dup_n("", 0);
    if (r->path == NULL || r->name == NULL)
        return oom(b);
    node->n_rules++; /* owned by the node from here: freed on error too */

    if (failure != NULL) {
        if ((rc = want_kind(b, failure, SL__Y_SCALAR, "store_failure")) != 0)
            return rc;
        int i =
            sl__value_enum(failure->text, failure->len, sl__failure_names, 0);
        if (i < 0) {
            sl__value_enum_list(sl__failure_names, listed, sizeof(listed));
            return err_at(b, failure, SL_EINVAL,
                          "invalid store_failure: '%s' (%s)", failure->text,
                          listed);
        }
        d.store_failure = (sl__rule_failure)(SL__RULE_FAILURE_LOCAL + i);
    }

    if (adaptive != NULL && (rc = get_adaptive(b, adaptive, &d)) != 0)
        return rc;
    if (max_hits != NULL &&
        (rc = get_count(b, max_hits, "max_hits", 1, &d.max_hits)) != 0)
        return rc;
    if (name != NULL) {
        if ((rc = want_kind(b, name, SL__Y_SCALAR, "name")) != 0)
            return rc;
        free((char *)r->name);
        if ((r->name = dup_n(name->text, name->len)) == NULL)
            return oom(b);
    }
    if (repl != NULL) {
        if ((rc = want_kind(b, repl, SL__Y_SEQ, "replaces")) != 0)
            return rc;
        char **names = calloc(repl->n + 1, sizeof(*names));
        if (names == NULL)
            return oom(b);
        r->replaces = (const char *const *)names;
        for (size_t i = 0; i < repl->n; i++) {
            static const char *const rkeys[] = {"name", NULL};
            const sl__ynode *e = repl->kids[i], *en;
            if ((rc = want_kind(b, e, SL__Y_MAP, "replaces")) != 0 ||
                (rc = check_keys(b, e, rkeys)) != 0)
                return rc;
            en = get(e, "name");
            if (en == NULL)
                return err_at(b, e, SL_EINVAL, "missing key: 'name'");
            if ((rc = want_kind(b, en, SL__Y_SCALAR, "name")) != 0)
                return rc;
            if (en->len == 0)
                return err_at(b, en, SL_EINVAL, "empty name in replaces: ''");
            if (strcmp(en->text, r->name) == 0)
                return err_at(b, en, SL_EINVAL,
                              "rate_limit replaces its own name: '%s'",
                              en->text);
            if ((names[i] = dup_n(en->text, en->len)) == NULL)
                return oom(b);
            r->n_replaces++;
        }
    }

    if (unlimited) {
        /* ratelimit refuses a unit with unlimited and ignores a count (a
         * warning here); our extensions would be as contradictory as a
         * unit, so they are refused. */
        const sl__ynode *extra = unit     ? unit
                                 : alg    ? alg
                                 : burst  ? burst
                                 : mult   ? mult
                                 : period ? period
                                 : step   ? step
                                          : sync;
        if (extra != NULL) {
            for (size_t i = 0; i + 1 < rl->n; i += 2)
                if (rl->kids[i + 1] == extra)
                    return err_at(b, rl->kids[i], SL_EINVAL,
                                  "unlimited rate_limit with a limit: '%s'",
                                  rl->kids[i]->text);
        }
        if (rpu != NULL &&
            sl__rules_warn(b->rules, b->file, rpu,
                           "requests_per_unit ignored: the rate_limit is "
                           "unlimited: '%s'",
                           rpu->kind == SL__Y_SCALAR ? rpu->text : "...") != 0)
            return oom(b);
        if (b->quota && sl__rules_warn(b->rules, b->file, rl,
                                       "quota_mode has no effect on an "
                                       "unlimited rate_limit: '%s'",
                                       b->path) != 0)
            return oom(b);
        r->action = SL_RULE_UNLIMITED;
        return add_to_all(b, r, &d);
    }

    /* ratelimit reads a missing requests_per_unit as 0: every request
     * over the limit.  A likely mistake, said as a warning. */
    if (rpu == NULL &&
        sl__rules_warn(b->rules, b->file, rl,
                       "missing requests_per_unit: every request is over "
                       "the limit (read as 0): '%s'",
                       b->path) != 0)
        return oom(b);
    if (rpu != NULL && (rc = get_count(b, rpu, "requests_per_unit", 0,
                                       &r->requests_per_unit)) != 0)
        return rc;
    if (period != NULL) {
        if (unit != NULL || mult != NULL)
            return err_at(b, unit ? unit : mult, SL_EINVAL,
                          "period excludes unit and unit_multiplier: '%s'",
                          unit ? unit->text : mult->text);
        if ((rc = want_kind(b, period, SL__Y_SCALAR, "period")) != 0)
            return rc;
        if (sl__value_duration(period->text, period->len, 1, &r->period) != 0)
            return err_at(b, period, SL_EINVAL,
                          "invalid period: '%s' (a duration such as 30s, "
                          "5m, 1h)",
                          period->text);
    } else {
        if (unit == NULL)
            return err_at(b, rl, SL_EINVAL,
                          "missing key: 'unit' (or 'period')");
        if ((rc = want_kind(b, unit, SL__Y_SCALAR, "unit")) != 0)
            return rc;
        int u = sl__value_enum(unit->text, unit->len, unit_names, 1);
        if (u < 0) {
            sl__value_enum_list(unit_names, listed, sizeof(listed));
            return err_at(b, unit, SL_EINVAL, "invalid unit: '%s' (%s)",
                          unit->text, listed);
        }
        r->unit = unit_names[u];
        if (mult != NULL && (rc = get_count(b, mult, "unit_multiplier", 1,
                                            &r->unit_multiplier)) != 0)
            return rc;
        if (__builtin_mul_overflow(unit_ns[u], r->unit_multiplier, &r->period))
            return err_at(b, mult, SL_ERANGE, "unit_multiplier too large: '%s'",
                          mult->text);
    }
    if (alg != NULL) {
        if ((rc = want_kind(b, alg, SL__Y_SCALAR, "algorithm")) != 0)
            return rc;
        if (sl_algorithm_parse(alg->text, alg->len, &cfg.algorithm) != 0)
            return err_at(b, alg, SL_EINVAL, "unknown algorithm: '%s'",
                          alg->text);
    }
    if (burst != NULL &&
        (rc = get_count(b, burst, "burst", 1, &cfg.burst)) != 0)
        return rc;
    if (step != NULL) {
        if ((rc = want_kind(b, step, SL__Y_SCALAR, "step")) != 0)
            return rc;
        if (sl__value_duration(step->text, step->len, 1, &cfg.step) != 0)
            return err_at(b, step, SL_EINVAL,
                          "invalid step: '%s' (a duration such as 100ms)",
                          step->text);
    }

    if (sync != NULL) {
        const sl__ynode *bad;
        char why[320];
        if (sl__rules_sync(sync, cfg.algorithm, b->path, &d, &bad, why,
                           sizeof(why)) != 0)
            return err_at(b, bad, SL_EINVAL, "%s", why);
    }

    if (r->requests_per_unit == 0) {
        /* lyft's way to block a value outright (its README's example 3).
         * No sl_limit exists for 0 requests, and none is needed. */
        r->action = SL_RULE_DENY;
    } else {
        char why[256] = "";
        const sl__ynode *at = rl;
        cfg.limit = r->requests_per_unit;
        cfg.period = r->period;
        cfg.id =
            sl__siphash13(UINT64_C(0x72756c6573), 0, 0, b->idpath, b->idlen);
        rc = sl_limit_new(&cfg, (sl_limit **)&r->limit, why, sizeof(why));
        if (rc == SL_ENOMEM)
            return oom(b);
        if (rc != 0) {
            /* Point at the field sl_limit_new complains about. */
            if (strncmp(why, "burst *", 7) == 0)
                at = burst;
            else if (strncmp(why, "burst", 5) == 0)
                at = burst;
            else if (strncmp(why, "step", 4) == 0)
                at = step;
            else if (strncmp(why, "limit", 5) == 0)
                at = rpu;
            if (at == NULL)
                at = rl;
            return err_at(b, at, rc, "invalid rate_limit: %s", why);
        }
        /* On Redis, every call of a leased bucket applies its leases'
         * floor (lease_bucket.lua), whatever asks it. */
        ((sl_limit *)r->limit)->leased = d.lease_share_ppm > 0;
        r->action = SL_RULE_LIMIT;
    }
    for (size_t i = 0; i + 1 < node->n_rules; i++)
        if (same_limit(&node->rules[i], r))
            return err_at(b, rl, SL_EINVAL,
                          "duplicate limit on one descriptor: '%s'", b->path);
    return add_to_all(b, r, &d);
}

static int build_descriptors(build *b, const sl__ynode *seq, sl__rnode *parent,
                             size_t depth);

static int build_descriptor(build *b, const sl__ynode *d, sl__rnode *parent,
                            size_t depth)
{
    static const char *const keys[] = {
        "key",         "value",           "rate_limit",      "descriptors",
        "shadow_mode", "detailed_metric", "share_threshold", "value_to_metric",
        "quota_mode",  "metadata",        NULL};
    sl__rnode *node = &parent->kids[parent->n_kids];
    const sl__ynode *key, *value, *rl, *kids;
    size_t idlen = b->idlen, pathlen = b->pathlen;
    int path_vtm = b->path_vtm, path_shared = b->path_shared;
    int shadow, detailed, rc;
    char num[48];

    if ((rc = want_kind(b, d, SL__Y_MAP, "descriptors")) != 0 ||
        (rc = check_keys(b, d, keys)) != 0)
        return rc;
    if (++b->rules->n_descriptors > b->rules->opts.max_descriptors)
        return err_at(b, d, SL_ERANGE,
                      "too many descriptors: '%zu' (at most %zu)",
                      b->rules->n_descriptors, b->rules->opts.max_descriptors);
    key = get(d, "key");
    value = get(d, "value");
    if (key == NULL)
        return err_at(b, d, SL_EINVAL, "missing key: 'key'");
    if ((rc = want_kind(b, key, SL__Y_SCALAR, "key")) != 0)
        return rc;
    if (key->len == 0)
        return err_at(b, key, SL_EINVAL, "empty descriptor key: ''");
    if (value != NULL && (rc = want_kind(b, value, SL__Y_SCALAR, "value")))
        return rc;
    /* lyft treats an empty value as no value. */
    if (value != NULL && value->len == 0)
        value = NULL;

    memset(node, 0, sizeof(*node));
    node->key = dup_n(key->text, key->len);
    node->key_len = key->len;
    if (node->key == NULL)
        return oom(b);
    parent->n_kids++;
    if (value != NULL) {
        /* A '*' at the end is a prefix (a wildcard's fast path); a '*'
         * anywhere else makes a glob, as ratelimit matches it. */
        const char *star = memchr(value->text, '*', value->len);
        node->match = star == NULL                           ? SL__V_EXACT
                      : star == value->text + value->len - 1 ? SL__V_PREFIX
                                                             : SL__V_GLOB;
        node->value_len = value->len - (node->match == SL__V_PREFIX);
        if ((node->value = dup_n(value->text, node->value_len)) == NULL)
            return oom(b);
    }

    /* lyft rejects two descriptors with the same key and value at one
     * level ("duplicate descriptor composite key"). */
    for (size_t i = 0; i + 1 < parent->n_kids; i++) {
        const sl__rnode *o = &parent->kids[i];
        if (o->key_len == node->key_len &&
            memcmp(o->key, node->key, o->key_len) == 0 &&
            (o->value == NULL) == (node->value == NULL) &&
            o->match == node->match && o->value_len == node->value_len &&
            (o->value == NULL ||
             memcmp(o->value, node->value, o->value_len) == 0))
            return err_at(b, d, SL_EINVAL, "duplicate descriptor: '%s.%s%s%s'",
                          b->path, key->text, value ? "_" : "",
                          value ? value->text : "");
    }

    snprintf(num, sizeof(num), "%zu:", key->len);
    rc = buf_append(&b->idpath, &b->idlen, &b->idcap, num, strlen(num));
    rc = rc ? rc
            : buf_append(&b->idpath, &b->idlen, &b->idcap, key->text, key->len);
    if (value != NULL) {
        snprintf(num, sizeof(num), "=%zu:", value->len);
        rc =
            rc ? rc
               : buf_append(&b->idpath, &b->idlen, &b->idcap, num, strlen(num));
        rc = rc ? rc
                : buf_append(&b->idpath, &b->idlen, &b->idcap, value->text,
                             value->len);
    } else {
        rc = rc ? rc : buf_append(&b->idpath, &b->idlen, &b->idcap, "!", 1);
    }
    rc = rc ? rc : buf_append(&b->path, &b->pathlen, &b->pathcap, ".", 1);
    rc = rc ? rc
            : buf_append(&b->path, &b->pathlen, &b->pathcap, key->text,
                         key->len);
    if (value != NULL) {
        rc = rc ? rc : buf_append(&b->path, &b->pathlen, &b->pathcap, "_", 1);
        rc = rc ? rc
                : buf_append(&b->path, &b->pathlen, &b->pathcap, value->text,
                             value->len);
    }
    if (rc != 0)
        return oom(b);

    if ((rc = get_bool(b, d, "shadow_mode", &shadow)) != 0 ||
        (rc = get_bool(b, d, "detailed_metric", &detailed)) != 0)
        return rc;
    rc = sl__rules_lyft_descriptor(b->rules, b->file, d, value, node, &b->quota,
                                   b->errbuf, b->errlen);
    if (rc == SL_ENOMEM)
        return oom(b);
    if (rc != 0)
        return rc;
    b->meta = node->meta;
    b->path_vtm += node->value_to_metric;
    b->path_shared += node->shared != NULL;
    rl = get(d, "rate_limit");
    if (rl != NULL) {
        /* Our extension: a sequence of rate_limit mappings puts several
         * limits on one descriptor (burst and sustained, say). */
        const sl__ynode *const *list = &rl;
        size_t n = 1;
        if (rl->kind == SL__Y_SEQ) {
            list = (const sl__ynode *const *)rl->kids;
            n = rl->n;
            if (n == 0)
                return err_at(b, rl, SL_EINVAL, "empty rate_limit list");
            if (n > SL_RULES_MAX_LIMITS_PER_NODE)
                return err_at(b, rl, SL_ERANGE,
                              "too many limits on one descriptor: '%zu' "
                              "(at most %d)",
                              n, SL_RULES_MAX_LIMITS_PER_NODE);
        } else if (rl->kind != SL__Y_MAP) {
            return err_at(b, rl, SL_EINVAL, "not a mapping: 'rate_limit'");
        }
        node->rules = calloc(n, sizeof(*node->rules));
        if (node->rules == NULL)
            return oom(b);
        for (size_t i = 0; i < n; i++)
            if ((rc = build_limit(b, list[i], node, shadow, detailed)) != 0)
                return rc;
    }
    kids = get(d, "descriptors");
    if (kids != NULL) {
        if (depth + 1 > b->rules->opts.max_depth)
            return err_at(b, kids, SL_ERANGE,
                          "descriptors nested too deep: '%zu' levels (at "
                          "most %zu)",
                          depth + 1, b->rules->opts.max_depth);
        if ((rc = build_descriptors(b, kids, node, depth + 1)) != 0)
            return rc;
    }
    b->idlen = idlen;
    b->pathlen = pathlen;
    b->path_vtm = path_vtm;
    b->path_shared = path_shared;
    b->path[pathlen] = '\0';
    return 0;
}

static int build_descriptors(build *b, const sl__ynode *seq, sl__rnode *parent,
                             size_t depth)
{
    int rc;
    /* `descriptors:` left empty is YAML null, as lyft reads it: none. */
    if (seq->kind == SL__Y_SCALAR && seq->plain &&
        (seq->len == 0 || strcmp(seq->text, "~") == 0 ||
         strcmp(seq->text, "null") == 0))
        return 0;
    if ((rc = want_kind(b, seq, SL__Y_SEQ, "descriptors")) != 0)
        return rc;
    parent->kids = calloc(seq->n ? seq->n : 1, sizeof(*parent->kids));
    if (parent->kids == NULL)
        return oom(b);
    for (size_t i = 0; i < seq->n; i++)
        if ((rc = build_descriptor(b, seq->kids[i], parent, depth)) != 0)
            return rc;
    return 0;
}

int sl__rules_add_tree(sl_rules *rules, const char *file, const sl__ynode *root,
                       char *errbuf, size_t errlen)
{
    static const char *const keys[] = {"domain", "descriptors", NULL};
    build b = {
        .rules = rules, .file = file, .errbuf = errbuf, .errlen = errlen};
    const sl__ynode *dom, *descs;
    sl__rdomain *d;
    int rc;

    if (root == NULL)
        return sl__rules_error(errbuf, errlen, SL_EINVAL, file, 1, 1,
                               "missing key: 'domain'");
    if ((rc = want_kind(&b, root, SL__Y_MAP, "rules file")) != 0 ||
        (rc = check_keys(&b, root, keys)) != 0)
        return rc;
    dom = get(root, "domain");
    if (dom == NULL)
        return err_at(&b, root, SL_EINVAL, "missing key: 'domain'");
    if ((rc = want_kind(&b, dom, SL__Y_SCALAR, "domain")) != 0)
        return rc;
    if (dom->len == 0)
        return err_at(&b, dom, SL_EINVAL, "empty domain: ''");
    for (size_t i = 0; i < rules->n_domains; i++) {
        const sl__rdomain *o = &rules->domains[i];
        if (o->name_len == dom->len &&
            memcmp(o->name, dom->text, dom->len) == 0)
            return err_at(&b, dom, SL_EINVAL,
                          "duplicate domain: '%s' (first in %s:%u:%u)",
                          dom->text, o->file, o->line, o->col);
    }

    d = realloc(rules->domains, (rules->n_domains + 1) * sizeof(*d));
    if (d == NULL)
        return oom(&b);
    rules->domains = d;
    d = &rules->domains[rules->n_domains];
    memset(d, 0, sizeof(*d));
    d->name = dup_n(dom->text, dom->len);
    d->file = dup_n(file, strlen(file));
    d->name_len = dom->len;
    d->line = dom->line;
    d->col = dom->col;
    rules->n_domains++;
    if (d->name == NULL || d->file == NULL)
        return oom(&b);
    b.domain = d;

    /* The identity path starts with the domain: equal descriptors in two
     * domains are different limits. */
    {
        char num[32];
        snprintf(num, sizeof(num), "%zu:", dom->len);
        rc = buf_append(&b.idpath, &b.idlen, &b.idcap, num, strlen(num));
        rc =
            rc ? rc
               : buf_append(&b.idpath, &b.idlen, &b.idcap, dom->text, dom->len);
        rc = rc ? rc
                : buf_append(&b.path, &b.pathlen, &b.pathcap, dom->text,
                             dom->len);
        if (rc != 0) {
            rc = oom(&b);
            goto out;
        }
    }
    descs = get(root, "descriptors");
    rc = descs != NULL ? build_descriptors(&b, descs, &d->root, 1) : 0;
out:
    free(b.idpath);
    free(b.path);
    return rc;
}
