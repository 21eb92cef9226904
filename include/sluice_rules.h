/*
 * sluice_rules.h - rate limit rules: YAML files in the lyft/ratelimit
 * format (plus sluice's extensions), loaded into an immutable tree that
 * answers "which limits apply to this request descriptor?".
 *
 * The format, the matching order and every error message are described in
 * docs/rules.md.  A loaded sl_rules is never modified: any number of
 * threads may match against it at once, and a server swaps in a freshly
 * loaded one to reload.  Each limit's identity (and so its state in a
 * store) is derived from its domain, its descriptor path and its
 * parameters, so an unchanged rule keeps its counters across a reload.
 */
#ifndef SLUICE_RULES_H
#define SLUICE_RULES_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_rules sl_rules;

/* Defaults of the caps in sl_rules_options (docs/rules.md, "Caps"). */
#define SL_RULES_MAX_FILE_BYTES (1024 * 1024) /* per file */
#define SL_RULES_MAX_FILES 1024               /* per directory */
#define SL_RULES_MAX_DEPTH 16                 /* descriptor nesting */
#define SL_RULES_MAX_DESCRIPTORS 100000       /* in all files together */
/* Fixed: most limits on one descriptor node, and so most matches that
 * one request descriptor can produce. */
#define SL_RULES_MAX_LIMITS_PER_NODE 8

/* Caps on what a load accepts; a zero field means its default above.
 * Exceeding one is an error naming the cap, never a truncation.  size is
 * the struct's sizeof, as for every options struct (sluice.h, "Options
 * structs"). */
typedef struct sl_rules_options {
    size_t size; /* sizeof(sl_rules_options): SL_RULES_OPTIONS_INIT */
    size_t max_file_bytes;
    size_t max_files;
    size_t max_depth;
    size_t max_descriptors;
} sl_rules_options;

#define SL_RULES_OPTIONS_INIT {.size = sizeof(sl_rules_options)}

/*
 * Loads rules from `path`: one YAML file, or a directory whose *.yaml and
 * *.yml files (not recursive; names starting with '.' skipped) are loaded
 * in strcmp order of their names.  opts may be NULL for the defaults.
 *
 * Returns 0 and sets *out, which the caller frees with sl_rules_free().
 * On error *out is untouched and the return is SL_EINVAL (bad rules, a
 * file that cannot be read, or a refused opts->size), SL_ERANGE (a cap
 * exceeded) or SL_ENOMEM; if errbuf is not NULL, the FIRST error is
 * written there as "file:line:column: message: 'value'" (line and column
 * 1-based; I/O errors are "path: message").  Loading stops at the first
 * error.
 */
SL_EXPORT int sl_rules_load(const char *path, const sl_rules_options *opts,
                            sl_rules **out, char *errbuf, size_t errlen);

/*
 * The same for one file's text held in memory (tests, fuzzing, rules
 * received over the network).  text is (pointer, length), copied as
 * needed; `name` is the file name used in error messages.
 */
SL_EXPORT int sl_rules_load_buffer(const char *name, const char *text,
                                   size_t len, const sl_rules_options *opts,
                                   sl_rules **out, char *errbuf,
                                   size_t errlen);

SL_EXPORT void sl_rules_free(sl_rules *rules); /* NULL is a no-op */

/* What a rule does when it matches. */
typedef enum sl_rule_action {
    SL_RULE_LIMIT = 0, /* check `limit` in the store */
    SL_RULE_UNLIMITED, /* `unlimited: true`: always allowed, no store */
    SL_RULE_DENY       /* `requests_per_unit: 0`: always over the limit */
} sl_rule_action;

/*
 * One resolved limit, as read from the rules.  Every pointer is owned by
 * the sl_rules and valid until sl_rules_free().  The library makes them
 * and a caller reads them through the pointers it hands out, so fields
 * are only ever appended: a program built against an older sluice_rules.h
 * reads the fields it knows.  The format's settings for `sluice serve`
 * and `sluice proxy` (store_failure, adaptive, max_hits, detailed_metric,
 * and envoyproxy/ratelimit's value_to_metric, quota_mode and metadata;
 * docs/rules.md) are read and checked by the loader, but are no fields of
 * sl_rule: a program that matches descriptors and checks limits needs
 * none of them.  share_threshold is no field either: it changes the
 * counter key sl_rules_match() gives.
 */
typedef struct sl_rule {
    const char *domain;
    /* lyft's stats key: domain, then key or key_value per level, joined
     * by '.' ("messaging.message_type_marketing.to_number"). */
    const char *path;
    const char *name;            /* rate_limit.name; "" when unnamed */
    sl_rule_action action;
    const sl_limit *limit;       /* SL_RULE_LIMIT only; else NULL */
    const char *unit;            /* "second" ... "year"; NULL if `period` */
    int64_t requests_per_unit;   /* as written; 0 for unlimited */
    int64_t unit_multiplier;     /* 1 unless given */
    sl_nanos period;             /* unit * multiplier, or `period` */
    int shadow_mode;             /* decide and count, but always allow */
    const char *const *replaces; /* names this rule replaces */
    size_t n_replaces;
    /* This rule's i in sl_rules_rule(rules, i): a caller keeps data of its
     * own per rule (say, text made once) in an array of
     * sl_rules_rule_count() elements. */
    size_t index;
} sl_rule;

/* One entry of a request descriptor: (pointer, length) byte strings. */
typedef struct sl_rules_entry {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} sl_rules_entry;

/* A rule that applies to a request descriptor, with the store key of its
 * counter. */
typedef struct sl_rule_match {
    const sl_rule *rule;
    /* Counter key: the domain and the request's own entries (so a
     * key-only or wildcard rule counts each distinct value apart).
     * Points into the caller's key buffer; not NUL-terminated. */
    const char *key;
    size_t key_len;
    size_t descriptor; /* index of the request descriptor; the caller's */
} sl_rule_match;

/*
 * Finds the rules that apply to one request descriptor of `domain`
 * (lyft's order at each level: exact value, then the first wildcard
 * value in file order, then key only; rules apply only at the node of the
 * descriptor's last entry).  A level matched by a share_threshold
 * wildcard is keyed by its pattern, not the request's value.  Writes up to SL_RULES_MAX_LIMITS_PER_NODE
 * matches to out (max_out must be at least that) and their number to
 * *n_out (0 for an unknown domain or no match); the counter key is built
 * in keybuf.  Every match's `descriptor` is set to `descriptor`.
 * Returns 0, SL_EINVAL (no entries, or max_out too small) or SL_EKEYLEN
 * (the key does not fit keybuf; *n_out is 0).
 */
SL_EXPORT int sl_rules_match(const sl_rules *rules, const char *domain,
                             size_t domain_len, const sl_rules_entry *entries,
                             size_t n_entries, size_t descriptor,
                             sl_rule_match *out, size_t max_out,
                             size_t *n_out, char *keybuf, size_t keybuf_len);

/*
 * The counter key sl_rules_match() gives the matches of a descriptor of
 * `domain` (the same bytes, whether or not a rule matches it), for a
 * caller that counts a descriptor on a limit of its own, such as a
 * request's limit override, in the rules' counter.  Written to keybuf,
 * its length to *key_len.  Returns 0, or SL_EKEYLEN when it does not fit.
 */
SL_EXPORT int sl_rules_counter_key(const char *domain, size_t domain_len,
                                   const sl_rules_entry *entries,
                                   size_t n_entries, char *keybuf,
                                   size_t keybuf_len, size_t *key_len);

/* Most matches sl_rules_drop_replaced() takes at once. */
#define SL_RULES_MAX_MATCHES 512

/*
 * lyft's `replaces` across all the descriptors of one request: the names
 * listed in the `replaces` of every match are collected, then each match
 * whose rule has one of those names is dropped, unless it is unlimited.
 * Compacts m[0 .. *n) in place, keeping the order, and updates *n.
 * Returns 0, or SL_EINVAL (nothing changed) for *n > SL_RULES_MAX_MATCHES.
 */
SL_EXPORT int sl_rules_drop_replaced(sl_rule_match *m, size_t *n);

/* A hash of the loaded files' names and contents: 16 hex digits. */
SL_EXPORT const char *sl_rules_version(const sl_rules *rules);
SL_EXPORT size_t sl_rules_domain_count(const sl_rules *rules);
/* Domains are listed sorted by name; i < sl_rules_domain_count(). */
SL_EXPORT const char *sl_rules_domain_name(const sl_rules *rules, size_t i);
/* The i of a domain (name, length) in that order, or SL_RULES_NO_DOMAIN
 * when no file defines it; a binary search. */
#define SL_RULES_NO_DOMAIN SIZE_MAX
SL_EXPORT size_t sl_rules_domain_find(const sl_rules *rules, const char *name,
                                      size_t len);
/* All rules in load order: file by file, in file order within one. */
SL_EXPORT size_t sl_rules_rule_count(const sl_rules *rules);
SL_EXPORT const sl_rule *sl_rules_rule(const sl_rules *rules, size_t i);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_RULES_H */
