/*
 * rules_set.c - a loaded rules set as the threads share it, with what
 * answers write of each rule made once, when the set is made, so that no
 * request formats it: the rule's label JSON-escaped (for the 429's
 * message) and as a Structured Field String (for the RateLimit fields).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/buf.h"
#include "runtime/hot.h"
#include "runtime/rules_set.h"

const char *sv_rule_label(const sl_rule *r)
{
    return r->name[0] != '\0' ? r->name : r->path;
}

static void free_effective(sv_effective **e, size_t n)
{
    for (size_t i = 0; e != NULL && i < n; i++) {
        if (e[i] != NULL)
            sl_limit_free(e[i]->limit);
        free(e[i]);
    }
    free(e);
}

static void free_set(sv_rules *r)
{
    size_t n = sl_rules_rule_count(r->rules);
    if (r->base != NULL) {
        free_effective(r->effective, n);
        sv_rules_release(r->base);
        free(r);
        return;
    }
    for (size_t i = 0; r->text != NULL && i < n; i++) {
        free(r->text[i].json);
        free(r->text[i].sf);
    }
    for (size_t i = 0; r->ids != NULL && i < n; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->id_len);
    free(r->id_hash);
    free(r->text);
    sl_rules_free(r->rules);
    free(r);
}

/* Every rule's id (sv_rule_id): 0, or -1 out of memory.  Quadratic in
 * the rules sharing a label only, which are few. */
static int make_ids(sv_rules *r)
{
    size_t n = sl_rules_rule_count(r->rules);
    r->ids = calloc(n ? n : 1, sizeof(*r->ids));
    r->id_len = calloc(n ? n : 1, sizeof(*r->id_len));
    r->id_hash = calloc(n ? n : 1, sizeof(*r->id_hash));
    if (r->ids == NULL || r->id_len == NULL || r->id_hash == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *label = sv_rule_label(sl_rules_rule(r->rules, i));
        size_t same = 1;
        for (size_t j = 0; j < i; j++)
            same +=
                strcmp(sv_rule_label(sl_rules_rule(r->rules, j)), label) == 0;
        sv_buf b = {0};
        if (same == 1)
            sv_buf_addstr(&b, label);
        else
            sv_buf_printf(&b, "%s#%zu", label, same);
        if (b.failed || b.data == NULL)
            return -1;
        r->ids[i] = b.data;
        r->id_len[i] = b.len;
        r->id_hash[i] = sv_hot_hash(b.data, b.len);
    }
    return 0;
}

const char *sv_rule_id(const sv_rules *r, size_t index)
{
    const sv_rules *b = r->base ? r->base : r;
    return b->ids[index];
}

size_t sv_rule_find(const sv_rules *r, const char *id)
{
    const sv_rules *b = r->base ? r->base : r;
    size_t n = sl_rules_rule_count(b->rules);
    for (size_t i = 0; i < n; i++)
        if (strcmp(b->ids[i], id) == 0)
            return i;
    return SIZE_MAX;
}

sv_rules *sv_rules_derive(sv_rules *base, sv_effective **effective)
{
    sv_rules *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        free_effective(effective, sl_rules_rule_count(base->rules));
        return NULL;
    }
    atomic_fetch_add(&base->refs, 1);
    r->base = base;
    r->rules = base->rules;
    r->text = base->text;
    r->ids = base->ids;
    r->id_len = base->id_len;
    r->id_hash = base->id_hash;
    r->effective = effective;
    atomic_init(&r->refs, 1);
    return r;
}

/* A buffer's string in just its bytes: a set may hold many rules. */
static char *shrink(char *data, size_t len)
{
    char *p = data ? realloc(data, len + 1) : NULL;
    return p ? p : data;
}

/* sv_rule_text of every rule: 0, or -1 out of memory. */
static int make_text(sv_rules *r)
{
    size_t n = sl_rules_rule_count(r->rules);
    r->text = calloc(n ? n : 1, sizeof(*r->text));
    if (r->text == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        sv_rule_text *t = &r->text[i];
        const char *label = sv_rule_label(sl_rules_rule(r->rules, i));
        sv_buf json = {0}, sf = {0};
        sv_buf_add(&json, "", 0); /* "" stays a string, not NULL */
        sv_buf_add_json_chars(&json, label, strlen(label));
        sv_buf_add_sf_string(&sf, label);
        t->json = shrink(json.data, json.len);
        t->json_len = json.len;
        t->sf = shrink(sf.data, sf.len);
        t->sf_len = sf.len;
        if (json.failed || sf.failed)
            return -1;
    }
    return 0;
}

sv_rules *sv_rules_new(sl_rules *rules)
{
    sv_rules *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        sl_rules_free(rules);
        return NULL;
    }
    r->rules = rules;
    if (make_text(r) != 0 || make_ids(r) != 0) {
        free_set(r);
        return NULL;
    }
    atomic_init(&r->refs, 1);
    return r;
}

void sv_rules_release(sv_rules *r)
{
    if (r != NULL && atomic_fetch_sub(&r->refs, 1) == 1)
        free_set(r);
}
