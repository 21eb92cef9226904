/*
 * metrics.c - counters and /metrics in the Prometheus text format.
 *
 * Every thread counts into its own memory: fixed counters are relaxed
 * atomics in a cache-line-aligned struct only that thread writes; the
 * per-rule series live in a per-thread hash map behind a per-thread
 * mutex that only the scraper ever contends for.  A scrape sums all
 * threads.  Series are keyed by (domain, rule label, descriptor); the
 * descriptor's values are part of the key only for detailed_metric rules
 * (as in lyft).  A rule without detailed_metric has one series, always
 * (the rules bound them), which its thread finds by name once per rules
 * set and then by the rule's index.  The per-value series of
 * detailed_metric rules, whose values clients choose, are bounded: at
 * most --max-metric-series of them over all threads (past it a rule's new
 * values count under its descriptor="_overflow_"), each dropped when not
 * counted for --metric-series-idle, by its thread (now and then, as it
 * counts) or by a scrape.  A counter that goes and comes back restarts
 * at 0, which Prometheus's rate() reads as a reset.
 *
 * Descriptors that matched no rule are counted per domain, so that an
 * operator sees which traffic is misrouted: each known domain apart, found
 * the same way (by name, then by the domain's index), and every unknown
 * domain under one series, domain="_unknown_", because the client names
 * the domain and a series per name would grow without bound.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rule_daemon.h"
#include "runtime/label.h"
#include "runtime/metrics.h"
#include "runtime/state_file.h"
#include "runtime/tls.h"

#define SERIES_BUCKETS 1024

struct sv_series {
    sv_series *next;
    uint64_t hash;
    char *domain, *rule, *descriptor; /* owned; descriptor "" if none */
    uint64_t hits, within, over, shadow, near;
    sl_nanos last;  /* wall clock of the last count */
    char expires;   /* a detailed_metric rule's: dropped when idle */
    char per_value; /* counted in sv_server.metric_series */
};

/* Descriptors of one known domain that matched no rule. */
struct sv_unmatched {
    sv_unmatched *next;
    char *domain; /* owned */
    uint64_t n;
};

#define UNKNOWN_DOMAIN "_unknown_"
#define OVERFLOW "_overflow_"

/* Upper bounds of the latency buckets, ns; the last is +Inf. */
static const sl_nanos latency_le[SV_LATENCY_BUCKETS - 1] = {
    1000,   2500,   5000,    10000,    25000,    50000,
    100000, 250000, 1000000, 10000000, 100000000};

static uint64_t fnv(uint64_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return (h ^ 0xff) * 0x100000001b3ULL;
}

/* NULL when out of memory: callers then skip the count or the series,
 * so metrics lose precision rather than the process its life. */
static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void count(sv_series *s, int allowed, int shadow_pass,
                  uint64_t near_hits)
{
    s->hits++;
    s->near += near_hits;
    if (shadow_pass)
        s->shadow++;
    else if (allowed)
        s->within++;
    else
        s->over++;
}

/* The slot of rule's series in w->rule_series, for a rule of the
 * thread's current set without detailed_metric; NULL otherwise (then the
 * series is looked up by name).  sv_metrics_rules_changed() empties the
 * cache when the thread adopts another set: an index means nothing in
 * another set. */
static sv_series **cached(sv_worker *w, const sl_rule *rule, int detailed)
{
    const sl_rules *rules = w->rules ? w->rules->rules : NULL;
    const sl_rule *loaded;
    /* A rule in force under an override is a copy of the loaded one
     * (rules_set.h), sharing its strings: its series is the rule's. */
    if (detailed || rules == NULL ||
        rule->index >= sl_rules_rule_count(rules) ||
        ((loaded = sl_rules_rule(rules, rule->index)) != rule &&
         loaded->path != rule->path))
        return NULL;
    if (w->rule_series == NULL &&
        (w->rule_series = calloc(sl_rules_rule_count(rules),
                                 sizeof(*w->rule_series))) == NULL)
        return NULL;
    return &w->rule_series[rule->index];
}

void sv_metrics_rules_changed(sv_worker *w)
{
    free(w->rule_series);
    w->rule_series = NULL;
    free(w->domain_unmatched);
    w->domain_unmatched = NULL;
}

/* The thread's count for a known domain, found or made, under
 * series_lock; past SV_MAX_SERIES domains, the one of "_overflow_" (the
 * names come from rules files, but reloads may bring ever new ones).
 * NULL when out of memory: the count is lost. */
static sv_unmatched *unmatched_of(sv_worker *w, const char *domain)
{
    for (int pass = 0; pass < 2; pass++) {
        for (sv_unmatched *u = w->unmatched; u != NULL; u = u->next)
            if (strcmp(u->domain, domain) == 0)
                return u;
        if (w->n_unmatched < SV_MAX_SERIES || pass == 1)
            break;
        domain = OVERFLOW;
    }
    sv_unmatched *u = calloc(1, sizeof(*u));
    if (u == NULL || (u->domain = dup_n(domain, strlen(domain))) == NULL) {
        free(u);
        return NULL;
    }
    u->next = w->unmatched;
    w->unmatched = u;
    w->n_unmatched++;
    return u;
}

void sv_metrics_unmatched(sv_worker *w, const sl_rules *rules, size_t domain,
                          uint64_t n)
{
    if (domain == SL_RULES_NO_DOMAIN) {
        atomic_fetch_add_explicit(&w->stats.unmatched_unknown, n,
                                  memory_order_relaxed);
        return;
    }
    /* By index only in the thread's own set: an index means nothing in
     * another (a request that waited across a reload). */
    sv_unmatched **slot = NULL;
    if (w->rules != NULL && w->rules->rules == rules) {
        size_t nd = sl_rules_domain_count(rules);
        if (w->domain_unmatched == NULL)
            w->domain_unmatched =
                calloc(nd ? nd : 1, sizeof(*w->domain_unmatched));
        if (w->domain_unmatched != NULL)
            slot = &w->domain_unmatched[domain];
    }
    pthread_mutex_lock(&w->series_lock);
    sv_unmatched *u =
        slot != NULL && *slot != NULL
            ? *slot
            : unmatched_of(w, sl_rules_domain_name(rules, domain));
    if (u != NULL) {
        u->n += n;
        if (slot != NULL)
            *slot = u;
    }
    pthread_mutex_unlock(&w->series_lock);
}

static void series_free(sv_series *s)
{
    free(s->domain);
    free(s->rule);
    free(s->descriptor);
    free(s);
}

/* Drops w's series that expire and were last counted before `before`;
 * under w->series_lock. */
static void expire_idle(sv_server *srv, sv_worker *w, sl_nanos before)
{
    for (size_t b = 0; w->series != NULL && b < SERIES_BUCKETS; b++)
        for (sv_series **p = &w->series[b], *x; (x = *p) != NULL;) {
            if (!x->expires || x->last >= before) {
                p = &x->next;
                continue;
            }
            *p = x->next;
            if (x->per_value)
                atomic_fetch_sub_explicit(&srv->metric_series, 1,
                                          memory_order_relaxed);
            series_free(x);
        }
}

static sl_nanos idle_ns(const sv_server *s)
{
    return (sl_nanos)s->cfg.metric_series_idle_ms * SL_NS_PER_MS;
}

/* The thread drops its own idle series every quarter of the idle time,
 * so that a series goes within 1.25 times of it without a scrape;
 * under series_lock. */
static void expire_own(sv_worker *w, sl_nanos now)
{
    sl_nanos idle = idle_ns(w->server);
    if (now >= w->series_swept && now - w->series_swept < idle / 4)
        return;
    w->series_swept = now;
    expire_idle(w->server, w, now - idle);
}

/* A place for one more per-value series under --max-metric-series: 1, or
 * 0 when every place is taken. */
static int take_place(sv_server *s)
{
    size_t n =
        atomic_fetch_add_explicit(&s->metric_series, 1, memory_order_relaxed);
    if (n < s->cfg.max_metric_series)
        return 1;
    atomic_fetch_sub_explicit(&s->metric_series, 1, memory_order_relaxed);
    return 0;
}

static uint64_t series_hash(const char *domain, const char *rule, const char *d,
                            size_t dlen)
{
    return fnv(fnv(fnv(0xcbf29ce484222325ULL, domain, strlen(domain)), rule,
                   strlen(rule)),
               d, dlen);
}

static sv_series *find(sv_worker *w, uint64_t h, const char *domain,
                       const char *rule, const char *d)
{
    for (sv_series *s = w->series[h % SERIES_BUCKETS]; s != NULL; s = s->next)
        if (s->hash == h && strcmp(s->domain, domain) == 0 &&
            strcmp(s->rule, rule) == 0 && strcmp(s->descriptor, d) == 0)
            return s;
    return NULL;
}

/* The descriptor label of a detailed_metric match: key_value per entry,
 * joined by '.', as label text (label.h: valid UTF-8, at most
 * SV_LABEL_MAX bytes, a long one cut and ended with a hash). */
static void descriptor_text(sv_buf *desc, const sl_rules_entry *entries,
                            size_t n_entries)
{
    sv_buf raw = {0};
    for (size_t i = 0; i < n_entries; i++) {
        if (i > 0)
            sv_buf_add(&raw, ".", 1);
        sv_buf_add(&raw, entries[i].key, entries[i].key_len);
        sv_buf_add(&raw, "_", 1);
        sv_buf_add(&raw, entries[i].value, entries[i].value_len);
    }
    if (raw.failed)
        desc->failed = 1;
    else
        sv_label_text(desc, raw.data ? raw.data : "", raw.len);
    sv_buf_release(&raw);
}

/* The descriptor label of a value_to_metric or share_threshold match:
 * ratelimit's stats key for it, without the domain (rule_daemon.h). */
static void lyft_text(sv_buf *desc, const sl_rules *rules, const sl_rule *rule,
                      int detailed, const sl_rules_entry *entries,
                      size_t n_entries)
{
    char raw[SV_LABEL_MAX * 4];
    size_t len = 0;
    if (sl__rules_metric_text(rules, rule->domain, strlen(rule->domain),
                              entries, n_entries, detailed, raw, sizeof(raw),
                              &len) != 0) {
        /* Longer than any label: cut and hashed by sv_label_text as a
         * long one is, from ratelimit's key as far as it goes. */
        descriptor_text(desc, entries, n_entries);
        return;
    }
    sv_label_text(desc, raw, len);
}

void sv_metrics_rule(sv_worker *w, const sl_rules *rules, const sl_rule *rule,
                     const sl_rules_entry *entries, size_t n_entries,
                     int allowed, int shadow_pass, uint64_t near_hits)
{
    const sl__rule_daemon *dm = sl__rule_daemon_of(rules, rule);
    int lyft = dm->value_to_metric || dm->shared;
    int detailed = dm->detailed_metric || lyft;
    sv_series **slot = cached(w, rule, detailed);
    if (slot != NULL && *slot != NULL) {
        pthread_mutex_lock(&w->series_lock);
        count(*slot, allowed, shadow_pass, near_hits);
        pthread_mutex_unlock(&w->series_lock);
        return;
    }
    sv_buf desc = {0};
    if (lyft)
        lyft_text(&desc, rules, rule, dm->detailed_metric, entries, n_entries);
    else if (detailed)
        descriptor_text(&desc, entries, n_entries);
    const char *label = sv_rule_label(rule);
    const char *d = desc.data ? desc.data : "";
    uint64_t h = series_hash(rule->domain, label, d, desc.len);
    sl_nanos now = sv_now(w);
    int per_value = 0;
    sv_series *s = NULL;
    pthread_mutex_lock(&w->series_lock);
    if (desc.failed ||
        (w->series == NULL &&
         (w->series = calloc(SERIES_BUCKETS, sizeof(*w->series))) == NULL))
        goto out;
    if (detailed)
        expire_own(w, now);
    s = find(w, h, rule->domain, label, d);
    if (s == NULL && detailed &&
        !(per_value = take_place(w->server))) {
        d = OVERFLOW;
        h = series_hash(rule->domain, label, d, strlen(d));
        s = find(w, h, rule->domain, label, d);
    }
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s != NULL) {
            s->domain = dup_n(rule->domain, strlen(rule->domain));
            s->rule = dup_n(label, strlen(label));
            s->descriptor = dup_n(d, strlen(d));
        }
        if (s == NULL || !s->domain || !s->rule || !s->descriptor) {
            if (s != NULL)
                series_free(s);
            if (per_value)
                atomic_fetch_sub_explicit(&w->server->metric_series, 1,
                                          memory_order_relaxed);
            s = NULL;
            goto out;
        }
        s->hash = h;
        s->expires = (char)detailed;
        s->per_value = (char)per_value;
        s->next = w->series[h % SERIES_BUCKETS];
        w->series[h % SERIES_BUCKETS] = s;
    }
    count(s, allowed, shadow_pass, near_hits);
    s->last = now;
    if (slot != NULL)
        *slot = s;
out:
    pthread_mutex_unlock(&w->series_lock);
    sv_buf_release(&desc);
}

/*
 * lyft's near_limit (envoyproxy/ratelimit README, "Statistics": "rule hits
 * over the NearLimit ratio threshold (currently 80%) but under the
 * threshold rate"), counted in hits as lyft does: with U units used after
 * an allowed request of h hits and the threshold T = floor(0.8 L), the
 * request adds min(h, U - T) when U > T.  Integer arithmetic: T = 8L/10.
 * Refused requests add nothing (lyft counts the part of a refused request
 * under the limit; the library consumes none of it).  U = L - remaining,
 * which is negative for a bucket filled past L (burst > L): not near.
 */
uint64_t sv_metrics_near_hits(const sl_decision *d, int64_t hits)
{
    if (!d->allowed || hits <= 0 || d->limit <= 0)
        return 0;
    int64_t used = d->limit - (d->remaining < 0 ? 0 : d->remaining);
    int64_t threshold = d->limit * 8 / 10;
    if (used <= threshold)
        return 0;
    return (uint64_t)(used - threshold < hits ? used - threshold : hits);
}

void sv_metrics_latency(sv_worker *w, sl_nanos ns)
{
    size_t i = 0;
    while (i < SV_LATENCY_BUCKETS - 1 && ns > latency_le[i])
        i++;
    atomic_fetch_add_explicit(&w->stats.latency[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->stats.latency_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->stats.latency_sum_ns, (uint64_t)ns,
                              memory_order_relaxed);
}

void sv_metrics_release(sv_worker *w)
{
    sv_metrics_rules_changed(w);
    for (sv_unmatched *u = w->unmatched, *next; u != NULL; u = next) {
        next = u->next;
        free(u->domain);
        free(u);
    }
    w->unmatched = NULL;
    w->n_unmatched = 0;
    if (w->series == NULL)
        return;
    for (size_t i = 0; i < SERIES_BUCKETS; i++)
        for (sv_series *s = w->series[i], *next; s != NULL; s = next) {
            next = s->next;
            series_free(s);
        }
    free(w->series);
    w->series = NULL;
}

/* A thread counter of server s summed over its threads. */
#define SUM(field) SV_STATS_SUM(s, field)

static int series_cmp(const void *a, const void *b)
{
    const sv_series *x = *(sv_series *const *)a;
    const sv_series *y = *(sv_series *const *)b;
    int c = strcmp(x->domain, y->domain);
    if (c == 0)
        c = strcmp(x->rule, y->rule);
    if (c == 0)
        c = strcmp(x->descriptor, y->descriptor);
    return c;
}

/* The per-rule series of every thread, merged: copies are taken under
 * each thread's lock, then sorted and summed. */
static void render_series(sv_server *s, sv_buf *out)
{
    size_t n = 0, cap = 64;
    sl_nanos idle_since = sd_engine_clock(s->engine) - idle_ns(s);
    sv_series **all = malloc(cap * sizeof(*all));
    if (all == NULL) {
        out->failed = 1;
        return;
    }
    for (int i = 0; i < s->n_workers; i++) {
        sv_worker *w = &s->workers[i];
        pthread_mutex_lock(&w->series_lock);
        expire_idle(s, w, idle_since);
        for (size_t b = 0; w->series && b < SERIES_BUCKETS; b++)
            for (sv_series *x = w->series[b]; x; x = x->next) {
                sv_series **grown = all, *c = NULL;
                if (n == cap) {
                    grown = realloc(all, cap * 2 * sizeof(*all));
                    if (grown != NULL) {
                        all = grown;
                        cap *= 2;
                    }
                }
                if (grown != NULL)
                    c = malloc(sizeof(*c));
                if (c != NULL) {
                    *c = *x;
                    c->domain = dup_n(x->domain, strlen(x->domain));
                    c->rule = dup_n(x->rule, strlen(x->rule));
                    c->descriptor = dup_n(x->descriptor, strlen(x->descriptor));
                }
                if (c == NULL || !c->domain || !c->rule || !c->descriptor) {
                    /* The scrape fails with 503 (src/http/http_conn.c). */
                    if (c != NULL)
                        series_free(c);
                    out->failed = 1;
                    continue;
                }
                all[n++] = c;
            }
        pthread_mutex_unlock(&w->series_lock);
    }
    qsort(all, n, sizeof(*all), series_cmp);
    static const struct {
        const char *name, *help;
        size_t off;
    } fields[] = {
        {"sluice_rule_hits_total", "decisions that matched the rule",
         offsetof(sv_series, hits)},
        {"sluice_rule_within_limit_total", "matches within the limit",
         offsetof(sv_series, within)},
        {"sluice_rule_over_limit_total", "matches over the limit",
         offsetof(sv_series, over)},
        {"sluice_rule_near_limit_total",
         "hits allowed with more than 80% of the limit used (lyft's "
         "near_limit)",
         offsetof(sv_series, near)},
        {"sluice_rule_shadow_mode_total",
         "shadow_mode matches that would have been over the limit",
         offsetof(sv_series, shadow)},
    };
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        sv_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", fields[f].name,
                      fields[f].help, fields[f].name);
        for (size_t i = 0; i < n;) {
            uint64_t v = 0;
            size_t j = i;
            for (; j < n && series_cmp(&all[i], &all[j]) == 0; j++)
                v += *(uint64_t *)((char *)all[j] + fields[f].off);
            sv_buf_printf(out, "%s{domain=\"", fields[f].name);
            sv_label_value(out, all[i]->domain, strlen(all[i]->domain));
            sv_buf_addstr(out, "\",rule=\"");
            sv_label_value(out, all[i]->rule, strlen(all[i]->rule));
            if (all[i]->descriptor[0]) {
                sv_buf_addstr(out, "\",descriptor=\"");
                sv_label_value(out, all[i]->descriptor,
                               strlen(all[i]->descriptor));
            }
            sv_buf_printf(out, "\"} %llu\n", (unsigned long long)v);
            i = j;
        }
    }
    for (size_t i = 0; i < n; i++)
        series_free(all[i]);
    free(all);
}

/* One row of sluice_unmatched_descriptors_total while it is rendered. */
typedef struct unmatched_row {
    char *domain;
    uint64_t n;
} unmatched_row;

static int row_cmp(const void *a, const void *b)
{
    return strcmp(((const unmatched_row *)a)->domain,
                  ((const unmatched_row *)b)->domain);
}

/* Appends a row (a copy of domain): 0, or -1 out of memory. */
static int add_row(unmatched_row **rows, size_t *n, size_t *cap,
                   const char *domain, uint64_t count)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        unmatched_row *g = realloc(*rows, c * sizeof(*g));
        if (g == NULL)
            return -1;
        *rows = g;
        *cap = c;
    }
    if (((*rows)[*n].domain = dup_n(domain, strlen(domain))) == NULL)
        return -1;
    (*rows)[(*n)++].n = count;
    return 0;
}

/* sluice_unmatched_descriptors_total by domain: every domain of the
 * current rules set (0 until one of its descriptors matches nothing),
 * those counted under earlier sets, and "_unknown_" for all the rest. */
static void render_unmatched(sv_server *s, sv_buf *out)
{
    unmatched_row *rows = NULL;
    size_t n = 0, cap = 0;
    int failed =
        add_row(&rows, &n, &cap, UNKNOWN_DOMAIN, SUM(unmatched_unknown)) != 0;
    pthread_mutex_lock(&s->reload_lock);
    sv_rules *cur = s->current;
    if (cur != NULL)
        atomic_fetch_add(&cur->refs, 1);
    pthread_mutex_unlock(&s->reload_lock);
    for (size_t d = 0; cur != NULL && d < sl_rules_domain_count(cur->rules);
         d++)
        failed |= add_row(&rows, &n, &cap, sl_rules_domain_name(cur->rules, d),
                          0) != 0;
    sv_rules_release(cur);
    for (int i = 0; i < s->n_workers; i++) {
        sv_worker *w = &s->workers[i];
        pthread_mutex_lock(&w->series_lock);
        for (sv_unmatched *u = w->unmatched; u != NULL; u = u->next)
            failed |= add_row(&rows, &n, &cap, u->domain, u->n) != 0;
        pthread_mutex_unlock(&w->series_lock);
    }
    if (failed)
        out->failed = 1; /* the scrape fails with 503 (src/http/http_conn.c) */
    qsort(rows, n, sizeof(*rows), row_cmp);
    sv_buf_addstr(out, "# HELP sluice_unmatched_descriptors_total descriptors "
                       "of an unknown domain or matching no rule (allowed), "
                       "by domain; every unknown domain counts under "
                       "\"" UNKNOWN_DOMAIN "\"\n"
                       "# TYPE sluice_unmatched_descriptors_total counter\n");
    for (size_t i = 0; i < n;) {
        uint64_t v = 0;
        size_t j = i;
        for (; j < n && strcmp(rows[i].domain, rows[j].domain) == 0; j++)
            v += rows[j].n;
        sv_buf_addstr(out, "sluice_unmatched_descriptors_total{domain=\"");
        sv_label_value(out, rows[i].domain, strlen(rows[i].domain));
        sv_buf_printf(out, "\"} %llu\n", (unsigned long long)v);
        i = j;
    }
    for (size_t i = 0; i < n; i++)
        free(rows[i].domain);
    free(rows);
}

/* The listeners of other protocols (--resp-listen...), by name. */
static void render_doors(sv_server *s, sv_buf *out)
{
    if (s->cfg.n_doors == 0)
        return;
    sv_buf_addstr(out, "# HELP sluice_protocol_requests_total commands or "
                       "calls answered on a protocol's listener, and those "
                       "answered with an error\n"
                       "# TYPE sluice_protocol_requests_total counter\n");
    for (int d = 0; d < s->cfg.n_doors; d++)
        sv_buf_printf(out,
                      "sluice_protocol_requests_total{protocol=\"%s\","
                      "result=\"ok\"} %llu\n"
                      "sluice_protocol_requests_total{protocol=\"%s\","
                      "result=\"error\"} %llu\n",
                      s->cfg.doors[d].name, (unsigned long long)SUM(door_ok[d]),
                      s->cfg.doors[d].name,
                      (unsigned long long)SUM(door_errors[d]));
}

void sv_metrics_render(sv_server *s, sv_buf *out)
{
    sv_buf_printf(out,
                  "# HELP sluice_checks_total requests decided, by result\n"
                  "# TYPE sluice_checks_total counter\n"
                  "sluice_checks_total{result=\"ok\"} %llu\n"
                  "sluice_checks_total{result=\"over_limit\"} %llu\n",
                  (unsigned long long)SUM(checks_ok),
                  (unsigned long long)SUM(checks_over));
    sv_buf_printf(out,
                  "# HELP sluice_global_shadow_total requests over the limit "
                  "answered OK by --shadow-mode\n"
                  "# TYPE sluice_global_shadow_total counter\n"
                  "sluice_global_shadow_total %llu\n",
                  (unsigned long long)SUM(global_shadow));
    render_unmatched(s, out);
    sv_buf_printf(out,
                  "# HELP sluice_bad_requests_total check requests refused "
                  "with a 4xx for their body\n"
                  "# TYPE sluice_bad_requests_total counter\n"
                  "sluice_bad_requests_total %llu\n",
                  (unsigned long long)SUM(bad_requests));
    render_series(s, out);
    sv_buf_addstr(out, "# HELP sluice_decision_duration_seconds time from "
                       "request body to response\n"
                       "# TYPE sluice_decision_duration_seconds histogram\n");
    uint64_t cum = 0;
    for (int b = 0; b < SV_LATENCY_BUCKETS; b++) {
        cum += SUM(latency[b]);
        if (b < SV_LATENCY_BUCKETS - 1)
            sv_buf_printf(out,
                          "sluice_decision_duration_seconds_bucket{le=\"%g\"} "
                          "%llu\n",
                          (double)latency_le[b] / 1e9, (unsigned long long)cum);
        else
            sv_buf_printf(out,
                          "sluice_decision_duration_seconds_bucket{le=\"+Inf\"}"
                          " %llu\n",
                          (unsigned long long)cum);
    }
    sv_buf_printf(out,
                  "sluice_decision_duration_seconds_sum %.9f\n"
                  "sluice_decision_duration_seconds_count %llu\n",
                  (double)SUM(latency_sum_ns) / 1e9,
                  (unsigned long long)SUM(latency_count));
    sv_buf_printf(out,
                  "# HELP sluice_rules_reloads_total rules reloads, by result\n"
                  "# TYPE sluice_rules_reloads_total counter\n"
                  "sluice_rules_reloads_total{result=\"ok\"} %llu\n"
                  "sluice_rules_reloads_total{result=\"failed\"} %llu\n",
                  (unsigned long long)atomic_load(&s->reloads_ok),
                  (unsigned long long)atomic_load(&s->reloads_failed));
    sv_buf_printf(out,
                  "# HELP sluice_open_connections open client connections\n"
                  "# TYPE sluice_open_connections gauge\n"
                  "sluice_open_connections %d\n",
                  atomic_load(&s->open_conns));
    sv_metrics_store(s, out);
    sv_buf_printf(
        out,
        "# HELP sluice_connections_closed_at_accept_total connections closed "
        "as soon as accepted, by the cap they were over\n"
        "# TYPE sluice_connections_closed_at_accept_total counter\n"
        "sluice_connections_closed_at_accept_total{cap=\"max_connections\"} "
        "%llu\n"
        "sluice_connections_closed_at_accept_total{cap=\"per_address\"} "
        "%llu\n"
        "# HELP sluice_metric_series per-value series of detailed_metric "
        "rules, all threads (at most --max-metric-series)\n"
        "# TYPE sluice_metric_series gauge\n"
        "sluice_metric_series %zu\n",
        (unsigned long long)atomic_load(&s->closed_over_max),
        (unsigned long long)atomic_load(&s->closed_per_address),
        atomic_load(&s->metric_series));
    render_doors(s, out);
    sv_state_metrics(s, out);
    if (s->cfg.plane != NULL)
        s->cfg.plane->metrics(s, out);
    sv_tls_metrics(s->tls_at, 1 + s->cfg.n_doors, out);
    if (s->cfg.control_metrics != NULL)
        s->cfg.control_metrics(s, out);
}
