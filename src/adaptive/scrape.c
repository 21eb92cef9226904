/*
 * scrape.c - a sluice node's rules (JSON, jansson) and one counter of its
 * Prometheus text (read by prom_text.c), for `sluice advisor`.
 *
 * Separate from the reader: this is what the advisor makes of a node's
 * answers (rule ids, a counter's series by domain, rule and descriptor),
 * the reader only what the format says.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "adaptive/prom_text.h"
#include "adaptive/scrape.h"

#define MAX_RULES 100000
#define MAX_SERIES 100000

static int failf(char *err, size_t errlen, const char *msg, size_t line)
{
    if (err != NULL && errlen > 0) {
        if (line > 0)
            snprintf(err, errlen, "line %zu: %s", line, msg);
        else
            snprintf(err, errlen, "%s", msg);
    }
    return -1;
}

void as_rules_release(as_rules *r)
{
    for (size_t i = 0; r->rules != NULL && i < r->n; i++) {
        free(r->rules[i].id);
        free(r->rules[i].domain);
        free(r->rules[i].label);
    }
    free(r->rules);
    free(r->version);
    memset(r, 0, sizeof(*r));
}

int as_rules_parse(const char *json, size_t len, as_rules *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je), *rules;
    char msg[256];
    if (root == NULL) {
        snprintf(msg, sizeof(msg), "invalid JSON: %d:%d: %s", je.line,
                 je.column, je.text);
        return failf(err, errlen, msg, 0);
    }
    int rc = -1;
    const char *version = json_string_value(json_object_get(root, "version"));
    rules = json_object_get(root, "rules");
    if (version == NULL || !json_is_array(rules) ||
        json_array_size(rules) > MAX_RULES) {
        failf(err, errlen, "rules: not sluice's GET /v1/rules", 0);
        goto out;
    }
    size_t n = json_array_size(rules);
    out->version = strdup(version);
    out->rules = calloc(n ? n : 1, sizeof(*out->rules));
    if (out->version == NULL || out->rules == NULL) {
        failf(err, errlen, "out of memory", 0);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rules, i);
        const char *domain = json_string_value(json_object_get(r, "domain"));
        const char *path = json_string_value(json_object_get(r, "path"));
        const char *name = json_string_value(json_object_get(r, "name"));
        /* The rule's own number, not the one in force: the advisor's
         * own recommendation in force read as a new base restarted the
         * rule's model at each one applied (the lab's advisor variant,
         * docs/lab.md).  Nodes of before have requests_per_unit only. */
        json_t *rpu = json_object_get(r, "base_requests_per_unit");
        if (!json_is_integer(rpu))
            rpu = json_object_get(r, "requests_per_unit");
        json_t *period = json_object_get(r, "period_ms");
        if (domain == NULL || path == NULL || name == NULL ||
            !json_is_integer(rpu) || !json_is_integer(period) ||
            json_integer_value(rpu) < 0 || json_integer_value(period) < 0) {
            snprintf(msg, sizeof(msg),
                     "rules[%zu]: not a rule of GET /v1/rules", i);
            failf(err, errlen, msg, 0);
            goto out;
        }
        as_rule *a = &out->rules[i];
        out->n = i + 1;
        a->domain = strdup(domain);
        a->label = strdup(name[0] ? name : path);
        a->requests_per_unit = json_integer_value(rpu);
        a->period_ms = json_integer_value(period);
        /* The k-th rule of a label is label#k (k >= 2), in list order. */
        size_t k = 1;
        for (size_t j = 0; a->label != NULL && j < i; j++)
            k += out->rules[j].label != NULL &&
                 strcmp(out->rules[j].label, a->label) == 0;
        if (a->label != NULL) {
            size_t idlen = strlen(a->label) + 24;
            a->id = malloc(idlen);
            if (a->id != NULL && k == 1)
                snprintf(a->id, idlen, "%s", a->label);
            else if (a->id != NULL)
                snprintf(a->id, idlen, "%s#%zu", a->label, k);
        }
        if (a->domain == NULL || a->label == NULL || a->id == NULL) {
            failf(err, errlen, "out of memory", 0);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    if (rc != 0)
        as_rules_release(out);
    return rc;
}

void as_metrics_release(as_metrics *m)
{
    for (size_t i = 0; m->series != NULL && i < m->n; i++) {
        free(m->series[i].domain);
        free(m->series[i].rule);
        free(m->series[i].descriptor);
    }
    free(m->series);
    memset(m, 0, sizeof(*m));
}

static int cmp_key(const char *d1, const char *r1, const char *x1,
                   const char *d2, const char *r2, const char *x2)
{
    int c = strcmp(d1, d2);
    if (c == 0)
        c = strcmp(r1, r2);
    if (c == 0)
        c = strcmp(x1, x2);
    return c;
}

static int cmp_series(const void *a, const void *b)
{
    const as_series *x = a, *y = b;
    return cmp_key(x->domain, x->rule, x->descriptor, y->domain, y->rule,
                   y->descriptor);
}

const as_series *as_metrics_find(const as_metrics *m, const char *domain,
                                 const char *rule, const char *descriptor)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const as_series *s = &m->series[mid];
        int c = cmp_key(domain, rule, descriptor, s->domain, s->rule,
                        s->descriptor);
        if (c == 0)
            return s;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The label `name` of s, unescaped, in a new string ("" when s has no
 * such label); NULL when out of memory. */
static char *label_copy(const pt_sample *s, const char *name)
{
    const char *v = "";
    size_t len = 0;
    pt_label(s, name, &v, &len);
    char *copy = malloc(len + 1);
    if (copy != NULL)
        copy[pt_unescape(v, len, copy)] = '\0';
    return copy;
}

int as_metrics_parse(const char *text, size_t len, const char *name,
                     as_metrics *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    size_t cap = 0;
    pt_reader r;
    pt_sample s;
    int rc;
    pt_reader_init(&r, text, len);
    while ((rc = pt_next(&r, name, &s)) != 0) {
        /* A counter is a finite number: NaN or Inf is a broken node. */
        if (rc < 0 || !isfinite(s.value)) {
            as_metrics_release(out);
            return failf(err, errlen, "malformed series", s.line);
        }
        if (out->n == cap) {
            if (cap >= MAX_SERIES) {
                as_metrics_release(out);
                return failf(err, errlen, "too many series", s.line);
            }
            size_t c = cap ? cap * 2 : 64;
            as_series *grown = realloc(out->series, c * sizeof(*grown));
            if (grown == NULL) {
                as_metrics_release(out);
                return failf(err, errlen, "out of memory", s.line);
            }
            out->series = grown;
            cap = c;
        }
        as_series *x = &out->series[out->n++];
        x->domain = label_copy(&s, "domain");
        x->rule = label_copy(&s, "rule");
        x->descriptor = label_copy(&s, "descriptor");
        x->value = s.value;
        if (x->domain == NULL || x->rule == NULL || x->descriptor == NULL) {
            as_metrics_release(out);
            return failf(err, errlen, "out of memory", s.line);
        }
    }
    if (out->n > 1)
        qsort(out->series, out->n, sizeof(*out->series), cmp_series);
    for (size_t i = 1; i < out->n; i++)
        if (cmp_series(&out->series[i - 1], &out->series[i]) == 0) {
            as_metrics_release(out);
            return failf(err, errlen, "duplicate series", 0);
        }
    return 0;
}
