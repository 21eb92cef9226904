/*
 * scrape.h - what `sluice advisor` reads from a sluice node: the rules
 * (GET /v1/rules) with their advisor ids, and one counter's series from
 * the Prometheus text of GET /metrics.
 *
 * Pure parsers of untrusted bytes, fuzzed with the protocol's
 * (fuzz/fuzz_advice.c).
 */
#ifndef SL_ADMIN_SCRAPE_H
#define SL_ADMIN_SCRAPE_H

#include <stddef.h>
#include <stdint.h>

/* A rule as GET /v1/rules lists it, with its id (docs/advisor.md, "Rule
 * ids"). */
typedef struct as_rule {
    char *id;     /* owned: label, or label#k for the k-th of a label */
    char *domain; /* owned */
    char *label;  /* owned: name, or path when unnamed (the metrics' rule) */
    int64_t requests_per_unit; /* 0: unlimited or deny */
    int64_t period_ms;
} as_rule;

typedef struct as_rules {
    char *version; /* owned */
    as_rule *rules;
    size_t n;
} as_rules;

/* 0, or -1 with a message in err; out is then empty.  At most 100000
 * rules. */
int as_rules_parse(const char *json, size_t len, as_rules *out, char *err,
                   size_t errlen);
void as_rules_release(as_rules *r);

/* One series of a counter: its domain, rule and descriptor labels ("" when
 * absent) and value. */
typedef struct as_series {
    char *domain, *rule, *descriptor; /* owned */
    double value;
} as_series;

typedef struct as_metrics {
    as_series *series; /* sorted by (domain, rule, descriptor), unique */
    size_t n;
} as_metrics;

/*
 * The series of counter `name` in Prometheus text, read by prom_text.h:
 * comment lines and other metrics skipped, label values unescaped.  0,
 * or -1 with err ("line 12: malformed series") for a line of that
 * counter that prom_text.h calls malformed or whose value is not finite,
 * a series twice, more than 100000 series or out of memory.
 */
int as_metrics_parse(const char *text, size_t len, const char *name,
                     as_metrics *out, char *err, size_t errlen);
void as_metrics_release(as_metrics *m);
/* The series (domain, rule, descriptor) in m, or NULL. */
const as_series *as_metrics_find(const as_metrics *m, const char *domain,
                                 const char *rule, const char *descriptor);

#endif
