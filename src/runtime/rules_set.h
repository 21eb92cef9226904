/*
 * rules_set.h - a loaded rules set as the daemon's threads share it: the rules,
 * what answers write of each rule, and the references that keep it.
 */
#ifndef SV_RULES_SET_H
#define SV_RULES_SET_H

#include <stdatomic.h>
#include <stddef.h>

#include "sluice_rules.h"

/* What answers write of one rule, made once when its set is loaded so
 * that no request formats it: its label (sv_rule_label()) as JSON string
 * characters (no quotes), for the 429's message, and as a Structured
 * Field String (quoted), for the RateLimit fields. */
typedef struct sv_rule_text {
    char *json;
    size_t json_len;
    char *sf;
    size_t sf_len;
} sv_rule_text;

/* A rule as the runtime limits have it now (limits.c): a copy of the
 * rule with the effective numbers and limit, and where they came from. */
typedef struct sv_effective {
    sl_rule rule;       /* .limit is `limit`, .requests_per_unit the new one */
    sl_limit *limit;    /* sl_limit_override() of the base rule's, owned */
    const char *source; /* "manual", "advisor" (static) */
    int64_t expires_ms;
} sv_effective;

/* A rules set shared by the threads.  refs counts the threads (and the
 * reloader) holding it; the last release frees it.  A set as loaded is a
 * base; the set in force is a generation derived from it with the
 * runtime limits applied (sv_rules_derive()), sharing its rules and text,
 * so that an override changes no rule of the loaded set. */
typedef struct sv_rules {
    sl_rules *rules;
    sv_rule_text *text;    /* [rule->index] */
    char **ids;            /* [rule->index]: the rule's id (sv_rule_id) */
    size_t *id_len;        /* [rule->index]: strlen of its id */
    uint64_t *id_hash;     /* [rule->index]: sv_hot_hash of its id */
    struct sv_rules *base; /* a generation's base (a reference), or NULL */
    /* A generation's rules in force, [rule->index]: NULL where the base
     * rule is; owned. */
    sv_effective **effective;
    atomic_int refs;
} sv_rules;

/* A set of one reference around rules (which it owns from here, freed
 * on failure too), its text made: NULL when out of memory. */
sv_rules *sv_rules_new(sl_rules *rules);
/* A generation of base (which gains a reference) with effective, an
 * array of sl_rules_rule_count() entries it takes (entries may be NULL;
 * the array NULL when none applies): NULL when out of memory, effective
 * freed. */
sv_rules *sv_rules_derive(sv_rules *base, sv_effective **effective);
void sv_rules_release(sv_rules *r);

/* The rule in force for a rule of the set's rules. */
static inline const sl_rule *sv_rules_in_force(const sv_rules *r,
                                               const sl_rule *rule)
{
    const sv_effective *e = r->effective ? r->effective[rule->index] : NULL;
    return e ? &e->rule : rule;
}

/* A rule's id in the admin API and the advisor's protocol: its name, or
 * its path when unnamed; when several rules share that label, the second
 * and later are "label#2", "label#3"... in the rules' order. */
const char *sv_rule_id(const sv_rules *r, size_t index);
/* The index of the rule with that id, or SIZE_MAX. */
size_t sv_rule_find(const sv_rules *r, const char *id);

/* The rule's name, or its path when unnamed. */
const char *sv_rule_label(const sl_rule *r);

#endif
