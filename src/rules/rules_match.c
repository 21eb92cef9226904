/*
 * rules_match.c - which rules apply to a request descriptor, the key of
 * their counters, and lyft's `replaces` across a request's descriptors.
 *
 * The decision path of the server: no allocation, no locks (the rules are
 * immutable), work proportional to the descriptor's entries times the
 * descriptors configured at each level (a glob value adds time linear in
 * its pattern and the request's value).
 */
#define _GNU_SOURCE /* memmem, memrchr */
#include <string.h>

#include "rules_internal.h"

static int eq(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/*
 * Whether the value v matches the glob pattern p, where each '*' stands
 * for any run of bytes (none included) and every other byte for itself.
 * The stars cut p into segments: the first must start v, the last must
 * end it, and each one between is found at its leftmost place after the
 * one before.  Leftmost is never wrong: whatever a later place leaves to
 * match, an earlier one leaves more of.  So there is no backtracking, and
 * with memmem (glibc's two-way search) the time is linear in p and v:
 * an attacker's long value costs one pass, not a product of lengths.
 */
static int glob_match(const char *p, size_t plen, const char *v, size_t vlen)
{
    if (v == NULL)
        v = ""; /* (NULL, 0): no arithmetic on a null pointer */
    const char *first = memchr(p, '*', plen), *last = memrchr(p, '*', plen);
    size_t head = (size_t)(first - p), tail = plen - (size_t)(last - p) - 1;
    if (head + tail > vlen || (head > 0 && memcmp(p, v, head) != 0) ||
        (tail > 0 && memcmp(last + 1, v + vlen - tail, tail) != 0))
        return 0;
    const char *at = v + head, *end = v + vlen - tail;
    for (const char *seg = first + 1; seg < last;) {
        const char *star = memchr(seg, '*', (size_t)(last - seg) + 1);
        size_t n = (size_t)(star - seg);
        if (n > 0) {
            const char *found = memmem(at, (size_t)(end - at), seg, n);
            if (found == NULL)
                return 0;
            at = found + n;
        }
        seg = star + 1;
    }
    return 1;
}

/* A prefix or glob node's value against the request's. */
static int wild_match(const sl__rnode *n, const sl_rules_entry *e)
{
    if (n->match == SL__V_GLOB)
        return glob_match(n->value, n->value_len, e->value, e->value_len);
    return e->value_len >= n->value_len &&
           (n->value_len == 0 || memcmp(n->value, e->value, n->value_len) == 0);
}

/*
 * lyft's order at one level: the exact key and value, then the first
 * wildcard (in file order) that matches the value, then the key alone.
 * Prefixes (lyft's) and globs (ours) are wildcards alike, so an exact
 * value is never matched by a glob it also fits.  lyft compares
 * "key_value" strings, so a key containing '_' could match a neighbour's
 * prefix; here key and value are compared apart, which is what its
 * configs mean.
 */
static const sl__rnode *find(const sl__rnode *level, const sl_rules_entry *e)
{
    const sl__rnode *wild = NULL, *bare = NULL;
    for (size_t i = 0; i < level->n_kids; i++) {
        const sl__rnode *n = &level->kids[i];
        if (!eq(n->key, n->key_len, e->key, e->key_len))
            continue;
        if (n->value == NULL) {
            if (bare == NULL)
                bare = n;
        } else if (n->match == SL__V_EXACT) {
            if (eq(n->value, n->value_len, e->value, e->value_len))
                return n;
        } else if (wild == NULL && wild_match(n, e)) {
            wild = n;
        }
    }
    return wild != NULL ? wild : bare;
}

size_t sl_rules_domain_find(const sl_rules *rules, const char *name, size_t len)
{
    size_t lo = 0, hi = rules->n_domains;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sl__rdomain *d = &rules->domains[mid];
        size_t n = d->name_len < len ? d->name_len : len;
        int c = n ? memcmp(d->name, name, n) : 0;
        if (c == 0)
            c = (d->name_len > len) - (d->name_len < len);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SL_RULES_NO_DOMAIN;
}

/* Appends "len:bytes" to the key; 0 or -1 when it does not fit. */
static int put(char *buf, size_t cap, size_t *len, char sep, const char *s,
               size_t n)
{
    /* The framing is written by hand, not by snprintf: this runs for
     * every entry of every request the server decides, and printf's
     * format machinery cost more than the rest of the match.  The digits
     * go straight into the key, their count known first, not through a
     * buffer and a second copy. */
    size_t digits = 1;
    for (size_t v = n; v >= 10; v /= 10)
        digits++;
    size_t plen = (sep != 0) + digits + 1;
    if (*len + plen + n > cap)
        return -1;
    char *p = buf + *len;
    if (sep)
        *p++ = sep;
    size_t v = n;
    for (char *d = p + digits; d > p; v /= 10)
        *--d = (char)('0' + v % 10);
    p[digits] = ':';
    if (n > 0)
        memcpy(p + digits + 1, s, n);
    *len += plen + n;
    return 0;
}

int sl_rules_counter_key(const char *domain, size_t domain_len,
                         const sl_rules_entry *entries, size_t n_entries,
                         char *keybuf, size_t keybuf_len, size_t *key_len)
{
    /* "len:domain" then ",len:key=len:value" per entry: unambiguous
     * whatever bytes keys and values hold. */
    size_t klen = 0;
    if (put(keybuf, keybuf_len, &klen, 0, domain, domain_len) != 0)
        return SL_EKEYLEN;
    for (size_t i = 0; i < n_entries; i++)
        if (put(keybuf, keybuf_len, &klen, ',', entries[i].key,
                entries[i].key_len) != 0 ||
            put(keybuf, keybuf_len, &klen, '=', entries[i].value,
                entries[i].value_len) != 0)
            return SL_EKEYLEN;
    *key_len = klen;
    return 0;
}

int sl_rules_match(const sl_rules *rules, const char *domain, size_t domain_len,
                   const sl_rules_entry *entries, size_t n_entries,
                   size_t descriptor, sl_rule_match *out, size_t max_out,
                   size_t *n_out, char *keybuf, size_t keybuf_len)
{
    const sl__rnode *level, *hit = NULL;
    size_t klen = 0, d;

    *n_out = 0;
    if (n_entries == 0 || max_out < SL_RULES_MAX_LIMITS_PER_NODE)
        return SL_EINVAL;
    if ((d = sl_rules_domain_find(rules, domain, domain_len)) ==
        SL_RULES_NO_DOMAIN)
        return 0;
    level = &rules->domains[d].root;
    /* The counter key is written on the way down: a level matched by a
     * share_threshold wildcard writes its pattern, not the value, so
     * that every value it matches counts on one counter (ratelimit's
     * cache key does the same).  The rest is sl_rules_counter_key()'s. */
    if (put(keybuf, keybuf_len, &klen, 0, domain, domain_len) != 0)
        return SL_EKEYLEN;
    for (size_t i = 0; i < n_entries; i++) {
        const sl__rnode *n = find(level, &entries[i]);
        if (n == NULL)
            return 0;
        if (i == n_entries - 1)
            hit = n;
        else if (n->n_kids == 0)
            return 0; /* the request is deeper than the rules */
        level = n;
        int shared = n->shared != NULL && n->value != NULL &&
                     (n->match != SL__V_EXACT);
        if (put(keybuf, keybuf_len, &klen, ',', entries[i].key,
                entries[i].key_len) != 0 ||
            put(keybuf, keybuf_len, &klen, '=',
                shared ? n->shared : entries[i].value,
                shared ? n->shared_len : entries[i].value_len) != 0)
            return SL_EKEYLEN;
    }
    if (hit->n_rules == 0)
        return 0;

    for (size_t i = 0; i < hit->n_rules; i++) {
        out[i].rule = &hit->rules[i];
        out[i].key = keybuf;
        out[i].key_len = klen;
        out[i].descriptor = descriptor;
    }
    *n_out = hit->n_rules;
    return 0;
}

/* Appends n bytes to buf: 0, or -1 when they do not fit. */
static int add(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n > cap)
        return -1;
    if (n > 0)
        memcpy(buf + *len, s, n);
    *len += n;
    return 0;
}

int sl__rules_metric_text(const sl_rules *rules, const char *domain,
                          size_t domain_len, const sl_rules_entry *entries,
                          size_t n_entries, int detailed, char *buf,
                          size_t cap, size_t *len)
{
    size_t d = sl_rules_domain_find(rules, domain, domain_len), l = 0;
    const sl__rnode *level;
    if (d == SL_RULES_NO_DOMAIN)
        return SL_EKEYLEN;
    /* With a share_threshold level on the path, ratelimit writes the
     * detailed key of an empty value as the key alone ("key", not the
     * "key_" of its plain detailed key). */
    int shared_path = 0;
    level = &rules->domains[d].root;
    for (size_t i = 0; i < n_entries && level != NULL; i++) {
        level = find(level, &entries[i]);
        shared_path |= level != NULL && level->shared != NULL;
    }
    level = &rules->domains[d].root;
    for (size_t i = 0; i < n_entries; i++) {
        const sl_rules_entry *e = &entries[i];
        const sl__rnode *n = level != NULL ? find(level, e) : NULL;
        const char *v = NULL;
        size_t vlen = 0;
        if (n == NULL) {
            /* Deeper than the rules: ratelimit writes the key alone. */
        } else if (n->shared != NULL && n->match != SL__V_EXACT) {
            v = n->shared, vlen = n->shared_len;
        } else if (detailed || n->value_to_metric ||
                   (n->value != NULL && n->match == SL__V_EXACT)) {
            v = e->value, vlen = e->value_len;
        } else if (n->value != NULL) {
            /* A wildcard without the flags: its pattern. */
            v = n->value, vlen = n->value_len;
        }
        if ((i > 0 && add(buf, cap, &l, ".", 1) != 0) ||
            add(buf, cap, &l, e->key, e->key_len) != 0)
            return SL_EKEYLEN;
        if ((v != NULL && (vlen > 0 || (detailed && !shared_path))) &&
            (add(buf, cap, &l, "_", 1) != 0 || add(buf, cap, &l, v, vlen) ||
             (n != NULL && n->match == SL__V_PREFIX && v == n->value &&
              add(buf, cap, &l, "*", 1) != 0)))
            return SL_EKEYLEN;
        level = n;
    }
    *len = l;
    return 0;
}

static int replaced(const sl_rule_match *m, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < m[i].rule->n_replaces; k++)
            if (strcmp(m[i].rule->replaces[k], name) == 0)
                return 1;
    return 0;
}

int sl_rules_drop_replaced(sl_rule_match *m, size_t *n)
{
    /* Two passes, as lyft: every name any match replaces is collected
     * over the whole request first, so the order of descriptors does not
     * matter.  Quadratic, over a request's few matches. */
    unsigned char drop[SL_RULES_MAX_MATCHES];
    size_t kept = 0;
    if (*n > SL_RULES_MAX_MATCHES)
        return SL_EINVAL;
    for (size_t i = 0; i < *n; i++) {
        const sl_rule *r = m[i].rule;
        drop[i] = r->name[0] != '\0' && r->action != SL_RULE_UNLIMITED &&
                  replaced(m, *n, r->name);
    }
    for (size_t i = 0; i < *n; i++)
        if (!drop[i])
            m[kept++] = m[i];
    *n = kept;
    return 0;
}
