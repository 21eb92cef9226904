/*
 * rules_internal.h - what the files of src/rules/ share: the YAML node
 * tree (yaml_tree.c), the descriptor tree of loaded rules (rules_build.c
 * fills it, rules_match.c walks it), and the sl_rules object itself.
 */
#ifndef SL_RULES_INTERNAL_H
#define SL_RULES_INTERNAL_H

#include <stddef.h>

#include "internal.h"
#include "rule_daemon.h"
#include "sluice_rules.h"

/* ---- the YAML tree ---- */

typedef enum sl__ykind { SL__Y_SCALAR, SL__Y_MAP, SL__Y_SEQ } sl__ykind;

/*
 * One YAML node with its position (1-based line and column of its first
 * character).  A mapping holds 2n children, key then value; keys are
 * scalars and unique (yaml_tree.c rejects anything else).  A scalar's
 * text is NUL-terminated and may also contain NULs (len is authoritative).
 */
typedef struct sl__ynode {
    sl__ykind kind;
    int plain;               /* scalar: unquoted (so `true` is a boolean) */
    unsigned line, col;
    char *text;
    size_t len;
    struct sl__ynode **kids;
    size_t n, cap;
} sl__ynode;

/*
 * Parses one YAML document into a tree.  Deeper nesting than max_depth
 * containers, aliases, several documents and duplicate mapping keys are
 * errors.  Returns 0 and *out (freed with sl__ynode_free), or SL_EINVAL /
 * SL_ERANGE / SL_ENOMEM with "name:line:col: message" in errbuf.  An empty
 * document gives *out = NULL.
 */
int sl__yaml_parse(const char *name, const char *text, size_t len,
                   size_t max_depth, sl__ynode **out, char *errbuf,
                   size_t errlen);
void sl__ynode_free(sl__ynode *n);
/* The value of key in the mapping m, or NULL. */
const sl__ynode *sl__ymap_get(const sl__ynode *m, const char *key);

/* ---- loaded rules ---- */

/* How a configured value matches a request's value (rules_match.c). */
typedef enum sl__vmatch {
    SL__V_EXACT,  /* no '*': the same bytes */
    SL__V_PREFIX, /* one '*', the last byte: lyft's wildcard, a prefix */
    SL__V_GLOB    /* any other '*' (extension): each '*' any run of bytes */
} sl__vmatch;

/*
 * One descriptor of the configuration.  Children are kept in file order,
 * which decides among wildcards (prefixes and globs alike).  value ==
 * NULL means key only; a prefix node keeps its value without the
 * trailing '*' (the prefix to match), a glob node the whole pattern.
 */
typedef struct sl__rnode {
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
    sl__vmatch match;
    /* share_threshold: every value this wildcard matches counts on one
     * counter, keyed by the pattern (with its '*'), shared[0..shared_len). */
    char *shared;
    size_t shared_len;
    int value_to_metric; /* this level's value in the metric key */
    sl__meta *meta;      /* this level's metadata, or NULL */
    sl_rule *rules;
    size_t n_rules;
    struct sl__rnode *kids;
    size_t n_kids;
} sl__rnode;

typedef struct sl__rdomain {
    char *name;
    size_t name_len;
    char *file;       /* where it was defined, for duplicate errors */
    unsigned line, col;
    sl__rnode root;   /* key and value unused */
} sl__rdomain;

struct sl_rules {
    sl__rdomain *domains; /* sorted by name once loading is done */
    size_t n_domains;
    const sl_rule **all;  /* every rule, for listing */
    sl__rule_daemon *daemon; /* [rule->index], as long as `all` */
    size_t n_rules, cap_rules;
    size_t n_descriptors;
    char **warnings; /* sl__rules_warning() */
    size_t n_warnings;
    sl_rules_options opts;
    uint64_t hash;        /* running hash of names and contents */
    char version[17];
};

/* Adds one file's parsed tree to rules (rules_build.c). */
int sl__rules_add_tree(sl_rules *rules, const char *file,
                       const sl__ynode *root, char *errbuf, size_t errlen);

/* ---- envoyproxy/ratelimit's format as it reads it (rules_lyft.c) ---- */

/* Whether key is one of the keys ratelimit accepts anywhere in a file. */
int sl__rules_lyft_key(const char *key, size_t len);

/* Adds "file:line:col: message" to rules' warnings: 0, or SL_ENOMEM. */
int sl__rules_warn(sl_rules *rules, const char *file, const sl__ynode *at,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A metadata mapping read as a Struct (*out, freed with sl__meta_free):
 * 0 or SL_ENOMEM. */
int sl__meta_from_yaml(const sl__ynode *map, sl__meta **out);
void sl__meta_free(sl__meta *m); /* NULL: no-op */

/* A descriptor's share_threshold, value_to_metric, quota_mode (to
 * *quota) and metadata, into node (whose match is set; value is the
 * descriptor's value node or NULL).  0, SL_ENOMEM or SL_EINVAL with
 * "file:line:col: message" in errbuf. */
int sl__rules_lyft_descriptor(sl_rules *rules, const char *file,
                              const sl__ynode *d, const sl__ynode *value,
                              sl__rnode *node, int *quota, char *errbuf,
                              size_t errlen);

/* The adaptive controller's thresholds of an `adaptive:` mapping a
 * (rules_adaptive.c): raise_step, raise_max, capacity_share, error_rate
 * and relax_after into r.  0, or SL_EINVAL with *bad the node at fault
 * and the message in why. */
int sl__rules_adaptive_tuning(const sl__ynode *a, sl__rule_daemon *r,
                              const sl__ynode **bad, char *why, size_t whylen);

/* A rate_limit's `sync:` mapping s (rules_sync.c) for a limit of
 * algorithm alg at path: its lease settings into r.  0, or SL_EINVAL
 * with *bad the node at fault and the message in why. */
int sl__rules_sync(const sl__ynode *s, sl_algorithm alg, const char *path,
                   sl__rule_daemon *r, const sl__ynode **bad, char *why,
                   size_t whylen);

/* Formats "file:line:col: message" into errbuf and returns err. */
int sl__rules_error(char *errbuf, size_t errlen, int err, const char *file,
                    unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

#endif /* SL_RULES_INTERNAL_H */
