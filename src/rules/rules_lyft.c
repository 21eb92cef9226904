/*
 * rules_lyft.c - what envoyproxy/ratelimit's reading of a file gives the
 * loader beyond sluice's own: the keys it accepts anywhere, the warnings
 * kept for what it accepts and sluice would not have (a misplaced key, a
 * missing count), a descriptor's `metadata` read as protobuf's Struct
 * reads it, and its metric key for value_to_metric and share_threshold.
 *
 * Apart from rules_build.c, which gives sluice's format its meaning,
 * because these follow another program's reading: where it changes, this
 * file does.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/value.h"
#include "rules_internal.h"

/* ratelimit checks every key of a file against one list, whatever its
 * place (its validateYamlKeys), and ignores a known key where it means
 * nothing. */
static const char *const lyft_keys[] = {"domain",
                                        "key",
                                        "value",
                                        "descriptors",
                                        "rate_limit",
                                        "unit",
                                        "requests_per_unit",
                                        "unlimited",
                                        "shadow_mode",
                                        "quota_mode",
                                        "name",
                                        "replaces",
                                        "detailed_metric",
                                        "value_to_metric",
                                        "share_threshold",
                                        "metadata",
                                        NULL};

int sl__rules_lyft_key(const char *key, size_t len)
{
    for (size_t i = 0; lyft_keys[i] != NULL; i++)
        if (strlen(lyft_keys[i]) == len && memcmp(lyft_keys[i], key, len) == 0)
            return 1;
    return 0;
}

int sl__rules_warn(sl_rules *rules, const char *file, const sl__ynode *at,
                   const char *fmt, ...)
{
    char msg[512], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(line, sizeof(line), "%s:%u:%u: %s", file, at->line, at->col, msg);
    char **w = realloc(rules->warnings,
                       (rules->n_warnings + 1) * sizeof(*rules->warnings));
    if (w == NULL)
        return SL_ENOMEM;
    rules->warnings = w;
    if ((w[rules->n_warnings] = strdup(line)) == NULL)
        return SL_ENOMEM;
    rules->n_warnings++;
    return 0;
}

size_t sl__rules_warning_count(const sl_rules *rules)
{
    return rules->n_warnings;
}

const char *sl__rules_warning(const sl_rules *rules, size_t i)
{
    return i < rules->n_warnings ? rules->warnings[i] : NULL;
}

/* ---- metadata ---- */

/* A JSON number's grammar: what YAML 1.1 and JSON both read as a number
 * and print back alike.  Other YAML numbers (0x1f, 1_000, .5) stay
 * strings: their meaning differs between readers. */
static int json_number(const char *s, size_t len)
{
    size_t i = 0, d;
    if (i < len && s[i] == '-')
        i++;
    for (d = i; i < len && s[i] >= '0' && s[i] <= '9'; i++)
        ;
    if (i == d || (s[d] == '0' && i - d > 1))
        return 0;
    if (i < len && s[i] == '.') {
        for (d = ++i; i < len && s[i] >= '0' && s[i] <= '9'; i++)
            ;
        if (i == d)
            return 0;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        for (d = i; i < len && s[i] >= '0' && s[i] <= '9'; i++)
            ;
        if (i == d)
            return 0;
    }
    return i == len;
}

static int meta_fill(sl__meta *m, const sl__ynode *n)
{
    int b;
    if (n->kind == SL__Y_SCALAR) {
        if (n->plain &&
            (n->len == 0 || strcmp(n->text, "~") == 0 ||
             strcmp(n->text, "null") == 0 || strcmp(n->text, "Null") == 0 ||
             strcmp(n->text, "NULL") == 0)) {
            m->kind = SL__META_NULL;
        } else if (sl__value_bool(n->text, n->len, n->plain, &b) == 0 &&
                   n->plain) {
            m->kind = SL__META_BOOL;
            m->boolean = b;
        } else if (n->plain && json_number(n->text, n->len)) {
            m->kind = SL__META_NUMBER;
            m->number = strtod(n->text, NULL);
        } else {
            m->kind = SL__META_STRING;
            if ((m->text = malloc(n->len + 1)) == NULL)
                return SL_ENOMEM;
            memcpy(m->text, n->text, n->len + 1);
            m->len = n->len;
        }
        return 0;
    }
    int map = n->kind == SL__Y_MAP;
    size_t count = map ? n->n / 2 : n->n;
    m->kind = map ? SL__META_STRUCT : SL__META_LIST;
    if (count == 0)
        return 0;
    if ((m->kids = calloc(count, sizeof(*m->kids))) == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const sl__ynode *v = map ? n->kids[2 * i + 1] : n->kids[i];
        sl__meta *k = &m->kids[m->n++];
        if (map) {
            const sl__ynode *name = n->kids[2 * i];
            if ((k->name = malloc(name->len + 1)) == NULL)
                return SL_ENOMEM;
            memcpy(k->name, name->text, name->len + 1);
            k->name_len = name->len;
        }
        int rc = meta_fill(k, v);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void meta_release(sl__meta *m)
{
    for (size_t i = 0; i < m->n; i++)
        meta_release(&m->kids[i]);
    free(m->kids);
    free(m->name);
    free(m->text);
}

int sl__meta_from_yaml(const sl__ynode *map, sl__meta **out)
{
    sl__meta *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return SL_ENOMEM;
    int rc = meta_fill(m, map);
    if (rc != 0) {
        sl__meta_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void sl__meta_free(sl__meta *m)
{
    if (m == NULL)
        return;
    meta_release(m);
    free(m);
}

/* ---- a descriptor's keys of ratelimit's newer format ---- */

static const sl__ynode *get(const sl__ynode *m, const char *key)
{
    for (size_t i = 0; i + 1 < m->n; i += 2)
        if (strcmp(m->kids[i]->text, key) == 0)
            return m->kids[i + 1];
    return NULL;
}

static int get_bool(const char *file, const sl__ynode *m, const char *key,
                    int *out, char *errbuf, size_t errlen)
{
    const sl__ynode *n = get(m, key);
    *out = 0;
    if (n == NULL || (n->kind == SL__Y_SCALAR &&
                      sl__value_bool(n->text, n->len, n->plain, out) == 0))
        return 0;
    return sl__rules_error(errbuf, errlen, SL_EINVAL, file, n->line, n->col,
                           "invalid boolean for %s: '%s'", key,
                           n->kind == SL__Y_SCALAR ? n->text : "...");
}

int sl__rules_lyft_descriptor(sl_rules *rules, const char *file,
                              const sl__ynode *d, const sl__ynode *value,
                              sl__rnode *node, int *quota, char *errbuf,
                              size_t errlen)
{
    const sl__ynode *meta = get(d, "metadata");
    int share, rc;
    if ((rc = get_bool(file, d, "share_threshold", &share, errbuf, errlen)) !=
            0 ||
        (rc = get_bool(file, d, "value_to_metric", &node->value_to_metric,
                       errbuf, errlen)) != 0 ||
        (rc = get_bool(file, d, "quota_mode", quota, errbuf, errlen)) != 0)
        return rc;
    if (share && (value == NULL || node->match == SL__V_EXACT)) {
        /* ratelimit refuses the flag where no '*' is in key + "_" + value
         * and takes it otherwise, a '*' in the key included: there it
         * does nothing (its keys match exactly, only a value is a
         * wildcard), and so here, with a warning. */
        const sl__ynode *at = get(d, "share_threshold");
        const sl__ynode *key = get(d, "key");
        int star = key != NULL && key->kind == SL__Y_SCALAR &&
                   memchr(key->text, '*', key->len) != NULL;
        if (!star &&
            (value == NULL || memchr(value->text, '*', value->len) == NULL))
            return sl__rules_error(
                errbuf, errlen, SL_EINVAL, file, at->line, at->col,
                "share_threshold on a value without '*': '%s'",
                value != NULL ? value->text : "");
        if (sl__rules_warn(rules, file, at,
                           "share_threshold has no effect: the value has no "
                           "'*' (the key's is matched exactly): '%s'",
                           value != NULL ? value->text : "") != 0)
            return SL_ENOMEM;
        share = 0;
    }
    if (share) {
        if ((node->shared = malloc(value->len + 1)) == NULL)
            return SL_ENOMEM;
        memcpy(node->shared, value->text, value->len + 1);
        node->shared_len = value->len;
    }
    /* `metadata:` left empty is YAML null: none, as ratelimit reads it. */
    if (meta != NULL && meta->kind == SL__Y_SCALAR && meta->plain &&
        (meta->len == 0 || strcmp(meta->text, "~") == 0 ||
         strcmp(meta->text, "null") == 0))
        meta = NULL;
    if (meta != NULL && meta->kind != SL__Y_MAP)
        return sl__rules_error(errbuf, errlen, SL_EINVAL, file, meta->line,
                               meta->col, "metadata is not a mapping: '%s'",
                               meta->kind == SL__Y_SCALAR ? meta->text
                                                          : "[...]");
    if (meta != NULL && meta->n > 0)
        return sl__meta_from_yaml(meta, &node->meta);
    return 0;
}
