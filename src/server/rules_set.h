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

/* A loaded rules set shared by the threads.  refs counts the threads
 * (and the reloader) holding it; the last release frees it. */
typedef struct sv_rules {
    sl_rules *rules;
    sv_rule_text *text; /* [rule->index] */
    atomic_int refs;
} sv_rules;

/* A set of one reference around rules (which it owns from here, freed
 * on failure too), its text made: NULL when out of memory. */
sv_rules *sv_rules_new(sl_rules *rules);
void sv_rules_release(sv_rules *r);

/* The rule's name, or its path when unnamed. */
const char *sv_rule_label(const sl_rule *r);

#endif
