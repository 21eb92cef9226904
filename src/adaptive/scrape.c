/*
 * scrape.c - a sluice node's rules (JSON, jansson) and one counter of its
 * Prometheus text, read for `sluice advisor`.
 *
 * The Prometheus reader is a few dozen lines rather than a library:
 * Debian packages no C client for the text format, and the advisor reads
 * one counter of one exporter, sluice's own (src/runtime/metrics.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

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

/* A label value from p (after the opening quote) to its closing quote,
 * unescaped; NULL when malformed or out of memory.  *end: after the
 * quote. */
static char *label_value(const char *p, const char *limit, const char **end)
{
    char *v = malloc((size_t)(limit - p) + 1);
    size_t n = 0;
    if (v == NULL)
        return NULL;
    for (; p < limit && *p != '"'; p++) {
        if (*p == '\\') {
            if (++p == limit)
                break;
            v[n++] = *p == 'n' ? '\n' : *p;
        } else {
            v[n++] = *p;
        }
    }
    if (p == limit) {
        free(v);
        return NULL;
    }
    v[n] = '\0';
    *end = p + 1;
    return v;
}

/* One line of the counter (after its name) into s: 0 or -1. */
static int parse_line(const char *p, const char *eol, as_series *s)
{
    char **slots[3] = {&s->domain, &s->rule, &s->descriptor};
    static const char *const keys[3] = {"domain", "rule", "descriptor"};
    if (p < eol && *p == '{') {
        p++;
        while (p < eol && *p != '}') {
            const char *k = p;
            while (p < eol && *p != '=')
                p++;
            if (p + 1 >= eol || p[1] != '"')
                return -1;
            size_t klen = (size_t)(p - k);
            char *v = label_value(p + 2, eol, &p);
            if (v == NULL)
                return -1;
            int kept = 0;
            for (int i = 0; i < 3; i++)
                if (strlen(keys[i]) == klen && strncmp(k, keys[i], klen) == 0) {
                    free(*slots[i]);
                    *slots[i] = v;
                    kept = 1;
                }
            if (!kept)
                free(v);
            if (p < eol && *p == ',')
                p++;
        }
        if (p == eol)
            return -1;
        p++;
    }
    if (p == eol || (*p != ' ' && *p != '\t'))
        return -1;
    char num[64];
    while (p < eol && (*p == ' ' || *p == '\t'))
        p++;
    size_t n = 0;
    while (p < eol && *p != ' ' && *p != '\t' && n < sizeof(num) - 1)
        num[n++] = *p++;
    num[n] = '\0';
    char *end;
    s->value = strtod(num, &end);
    if (n == 0 || *end != '\0' || !isfinite(s->value))
        return -1;
    for (int i = 0; i < 3; i++)
        if (*slots[i] == NULL && (*slots[i] = calloc(1, 1)) == NULL)
            return -1;
    return 0;
}

int as_metrics_parse(const char *text, size_t len, const char *name,
                     as_metrics *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    size_t cap = 0, line = 0, nlen = strlen(name);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        line++;
        const char *q = p;
        p = eol < end ? eol + 1 : end;
        if ((size_t)(eol - q) <= nlen || strncmp(q, name, nlen) != 0 ||
            (q[nlen] != '{' && q[nlen] != ' ' && q[nlen] != '\t'))
            continue; /* a comment, another metric, a blank line */
        if (out->n == cap) {
            if (cap >= MAX_SERIES) {
                as_metrics_release(out);
                return failf(err, errlen, "too many series", line);
            }
            size_t c = cap ? cap * 2 : 64;
            as_series *grown = realloc(out->series, c * sizeof(*grown));
            if (grown == NULL) {
                as_metrics_release(out);
                return failf(err, errlen, "out of memory", line);
            }
            out->series = grown;
            cap = c;
        }
        as_series *s = &out->series[out->n];
        memset(s, 0, sizeof(*s));
        const char *eq = eol;
        if (eq > q && eq[-1] == '\r')
            eq--;
        if (parse_line(q + nlen, eq, s) != 0) {
            free(s->domain);
            free(s->rule);
            free(s->descriptor);
            as_metrics_release(out);
            return failf(err, errlen, "malformed series", line);
        }
        out->n++;
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
