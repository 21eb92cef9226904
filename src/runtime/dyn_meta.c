/*
 * dyn_meta.c - envoyproxy/ratelimit's dynamic metadata of an answer
 * (dyn_meta.h): built once as a tree of sl__meta values, then written as
 * JSON for /json or as a google.protobuf.Struct for gRPC, so the two
 * doors say the same.
 *
 * The tree is ratelimit's: {"domain": ..., "descriptors": [{"entries":
 * ["key=value", ...], "limit": "<the override>", "hitsAddend": N}, ...],
 * "hitsAddend": N, "metadata": {...}}, where "metadata" merges the
 * `metadata` of every descriptor whose limit passed (not over, not
 * unlimited), in order: a field already there stays, but two mappings
 * under one name are merged, as ratelimit merges them.  The rules' own
 * metadata nodes are shared, never copied; what is made for the answer
 * is kept in an arena freed once written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rule_daemon.h"
#include "runtime/dyn_meta.h"

typedef struct arena {
    void **made;
    size_t n, cap;
    int failed;
} arena;

static void *arena_alloc(arena *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **m = realloc(a->made, cap * sizeof(*m));
        if (m == NULL) {
            a->failed = 1;
            return NULL;
        }
        a->made = m;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p == NULL)
        a->failed = 1;
    else
        a->made[a->n++] = p;
    return p;
}

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->made[i]);
    free(a->made);
}

static sl__meta *nodes(arena *a, size_t n)
{
    return arena_alloc(a, n * sizeof(sl__meta));
}

static void named(sl__meta *m, const char *name)
{
    m->name = (char *)name; /* only read */
    m->name_len = strlen(name);
}

static int same_name(const sl__meta *a, const sl__meta *b)
{
    return a->name_len == b->name_len &&
           memcmp(a->name, b->name, a->name_len) == 0;
}

/* ratelimit's merge of n structs, in order, into out. */
static void merge(arena *a, const sl__meta *const *src, size_t n,
                  sl__meta *out)
{
    size_t total = 0;
    out->kind = SL__META_STRUCT;
    out->kids = NULL;
    out->n = 0;
    for (size_t i = 0; i < n; i++)
        total += src[i]->n;
    if (total == 0 || (out->kids = nodes(a, total)) == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < src[i]->n; k++) {
            const sl__meta *f = &src[i]->kids[k];
            size_t j = 0;
            while (j < out->n && !same_name(&out->kids[j], f))
                j++;
            if (j < out->n)
                continue; /* merged when first seen */
            sl__meta *dst = &out->kids[out->n++];
            *dst = *f; /* shared with the rules */
            if (f->kind != SL__META_STRUCT)
                continue;
            /* Every struct of this name, from here on. */
            const sl__meta **same = arena_alloc(a, total * sizeof(*same));
            size_t ns = 0;
            if (same == NULL)
                continue;
            for (size_t i2 = i; i2 < n; i2++)
                for (size_t k2 = 0; k2 < src[i2]->n; k2++)
                    if (same_name(&src[i2]->kids[k2], f) &&
                        src[i2]->kids[k2].kind == SL__META_STRUCT)
                        same[ns++] = &src[i2]->kids[k2];
            if (ns > 1) {
                merge(a, same, ns, dst);
                dst->name = f->name;
                dst->name_len = f->name_len;
            }
        }
}

static const char *const unit_names[] = {"UNKNOWN", "SECOND", "MINUTE",
                                         "HOUR",    "DAY",    "MONTH",
                                         "YEAR",    "WEEK"};

/* The tree of rq's answer res (the header comment); NULL out of memory. */
static sl__meta *build(arena *a, const sl_rules *rules,
                       const sv_dyn_request *rq, const sv_dec_result *res)
{
    sl__meta *root = nodes(a, 1), *f = nodes(a, 4), *descs = nodes(a, rq->n);
    const sl__meta **passed = arena_alloc(a, rq->n * sizeof(*passed));
    size_t n_passed = 0;
    if (root == NULL || f == NULL || descs == NULL || passed == NULL)
        return NULL;
    root->kind = SL__META_STRUCT;
    root->kids = f;
    named(&f[0], "domain");
    f[0].kind = SL__META_STRING;
    f[0].text = (char *)rq->domain;
    f[0].len = rq->domain_len;
    named(&f[1], "descriptors");
    f[1].kind = SL__META_LIST;
    f[1].kids = descs;
    f[1].n = rq->n;
    root->n = 2;
    for (size_t i = 0; i < rq->n; i++) {
        const sv_dec_descriptor *d = &rq->ds[i];
        sl__meta *df = nodes(a, 3), *es = nodes(a, d->n_entries);
        if (df == NULL || es == NULL)
            return NULL;
        descs[i].kind = SL__META_STRUCT;
        descs[i].kids = df;
        named(&df[0], "entries");
        df[0].kind = SL__META_LIST;
        df[0].kids = es;
        df[0].n = d->n_entries;
        descs[i].n = 1;
        for (size_t k = 0; k < d->n_entries; k++) {
            const sl_rules_entry *e = &d->entries[k];
            char *t = arena_alloc(a, e->key_len + e->value_len + 2);
            if (t == NULL)
                return NULL;
            memcpy(t, e->key, e->key_len);
            t[e->key_len] = '=';
            memcpy(t + e->key_len + 1, e->value, e->value_len);
            es[k].kind = SL__META_STRING;
            es[k].text = t;
            es[k].len = e->key_len + 1 + e->value_len;
        }
        if (d->limit != NULL) {
            /* The override in protobuf's text format, as ratelimit's
             * String() of it (less its varying spaces). */
            char *t = arena_alloc(a, 64);
            int u = d->limit->unit;
            if (t == NULL)
                return NULL;
            sl__meta *l = &df[descs[i].n++];
            named(l, "limit");
            l->kind = SL__META_STRING;
            l->text = t;
            l->len = (size_t)snprintf(
                t, 64, "requests_per_unit:%lld unit:%s",
                (long long)d->limit->requests_per_unit,
                u >= 0 && u < 8 ? unit_names[u] : unit_names[0]);
        }
        if (d->hits >= 0) {
            sl__meta *h = &df[descs[i].n++];
            named(h, "hitsAddend");
            h->kind = SL__META_NUMBER;
            h->number = (double)d->hits;
        }
        const sv_dec_status *s = &res->status[i];
        if (s->rule != NULL && s->rule->action != SL_RULE_UNLIMITED &&
            !s->over) {
            const sl__meta *m = sl__rule_daemon_of(rules, s->rule)->metadata;
            if (m != NULL)
                passed[n_passed++] = m;
        }
    }
    if (rq->hits_addend != 0) {
        named(&f[root->n], "hitsAddend");
        f[root->n].kind = SL__META_NUMBER;
        f[root->n++].number = (double)rq->hits_addend;
    }
    if (n_passed > 0) {
        merge(a, passed, n_passed, &f[root->n]);
        named(&f[root->n++], "metadata");
    }
    return a->failed ? NULL : root;
}

/* ---- JSON ---- */

static void json_value(sv_buf *b, const sl__meta *m)
{
    switch (m->kind) {
    case SL__META_NULL:
        sv_buf_addstr(b, "null");
        break;
    case SL__META_BOOL:
        sv_buf_addstr(b, m->boolean ? "true" : "false");
        break;
    case SL__META_NUMBER:
        /* A whole number as one (protojson writes 3, not 3.0). */
        if (m->number == (double)(long long)m->number &&
            m->number < 9007199254740992.0 && m->number > -9007199254740992.0)
            sv_buf_add_int(b, (long long)m->number);
        else
            sv_buf_printf(b, "%.17g", m->number);
        break;
    case SL__META_STRING:
        sv_buf_add_json_string(b, m->text, m->len);
        break;
    case SL__META_STRUCT:
    case SL__META_LIST:
        sv_buf_addstr(b, m->kind == SL__META_STRUCT ? "{" : "[");
        for (size_t i = 0; i < m->n; i++) {
            if (i > 0)
                sv_buf_addstr(b, ",");
            if (m->kind == SL__META_STRUCT) {
                sv_buf_add_json_string(b, m->kids[i].name, m->kids[i].name_len);
                sv_buf_addstr(b, ":");
            }
            json_value(b, &m->kids[i]);
        }
        sv_buf_addstr(b, m->kind == SL__META_STRUCT ? "}" : "]");
        break;
    }
}

void sv_dyn_meta_json(sv_buf *b, const sl_rules *rules,
                      const sv_dyn_request *rq, const sv_dec_result *res)
{
    arena a = {0};
    const sl__meta *root = build(&a, rules, rq, res);
    if (root == NULL)
        b->failed = 1;
    else
        json_value(b, root);
    arena_free(&a);
}

/* ---- google.protobuf.Struct ---- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

static void pb_varint(sv_buf *b, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;
    do {
        buf[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    sv_buf_add(b, buf, n);
}

static void pb_tag(sv_buf *b, int field, int wt)
{
    pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wt);
}

static void pb_bytes(sv_buf *b, int field, const void *p, size_t len)
{
    pb_tag(b, field, WT_LEN);
    pb_varint(b, len);
    sv_buf_add(b, p, len);
}

static void pb_value(sv_buf *b, const sl__meta *m);

/* A Struct's fields (Struct.fields, 1: map entries of key 1, Value 2),
 * or a ListValue's values (1), as the message's bytes. */
static void pb_fields(sv_buf *b, const sl__meta *m)
{
    for (size_t i = 0; i < m->n; i++) {
        sv_buf v = {0}, entry = {0};
        pb_value(&v, &m->kids[i]);
        if (m->kind == SL__META_STRUCT) {
            pb_bytes(&entry, 1, m->kids[i].name, m->kids[i].name_len);
            pb_bytes(&entry, 2, v.data, v.len);
            pb_bytes(b, 1, entry.data, entry.len);
        } else {
            pb_bytes(b, 1, v.data, v.len);
        }
        b->failed |= v.failed | entry.failed;
        sv_buf_release(&v);
        sv_buf_release(&entry);
    }
}

/* A google.protobuf.Value's bytes: null_value 1, number_value 2,
 * string_value 3, bool_value 4, struct_value 5, list_value 6. */
static void pb_value(sv_buf *b, const sl__meta *m)
{
    switch (m->kind) {
    case SL__META_NULL:
        pb_tag(b, 1, WT_VARINT);
        pb_varint(b, 0);
        break;
    case SL__META_NUMBER: {
        uint64_t bits;
        uint8_t le[8];
        memcpy(&bits, &m->number, sizeof(bits));
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(bits >> (8 * i));
        pb_tag(b, 2, WT_I64);
        sv_buf_add(b, le, sizeof(le));
        break;
    }
    case SL__META_STRING:
        pb_bytes(b, 3, m->text != NULL ? m->text : "", m->len);
        break;
    case SL__META_BOOL:
        pb_tag(b, 4, WT_VARINT);
        pb_varint(b, (uint64_t)(m->boolean != 0));
        break;
    case SL__META_STRUCT:
    case SL__META_LIST: {
        sv_buf inner = {0};
        pb_fields(&inner, m);
        pb_bytes(b, m->kind == SL__META_STRUCT ? 5 : 6,
                 inner.data != NULL ? inner.data : "", inner.len);
        b->failed |= inner.failed;
        sv_buf_release(&inner);
        break;
    }
    }
}

void sv_dyn_meta_pb(sv_buf *b, const sl_rules *rules, const sv_dyn_request *rq,
                    const sv_dec_result *res)
{
    arena a = {0};
    const sl__meta *root = build(&a, rules, rq, res);
    if (root == NULL)
        b->failed = 1;
    else
        pb_fields(b, root);
    arena_free(&a);
}
