/*
 * prom_text.h - the one reader of Prometheus text (exposition format
 * 0.0.4) in sluice: what `sluice advisor` reads of a node's GET /metrics
 * (adaptive/scrape.c) and what the lab reads of its proxies' (src/lab/).
 *
 * I/O-free and allocation-free: the text is (pointer, length), never
 * assumed NUL-terminated, and a sample's name and labels point into it
 * (borrowed: valid while the text is).  Fuzzed through scrape.c
 * (fuzz/fuzz_advice.c).
 *
 * What a line may be: blank; a comment ('#' first, HELP and TYPE
 * included, skipped unread); or a sample
 *   name [ '{' label="value" { ',' label="value" } [','] '}' ] value [
 * timestamp ] with blanks (spaces, tabs) between the tokens, escapes \\ \" \n
 * in label values and nothing else, at most PT_MAX_LABELS labels, no label
 * twice, a value strtod reads whole (NaN, +Inf and -Inf included) of at
 * most PT_MAX_NUMBER bytes and an integer timestamp, which is skipped.
 * A '\r' before the '\n' is tolerated.  Any other line is malformed.
 */
#ifndef SL_ADAPTIVE_PROM_TEXT_H
#define SL_ADAPTIVE_PROM_TEXT_H

#include <stddef.h>

/* Caps on one line, so that checking it is bounded (the duplicate-label
 * check is quadratic in the labels) and a number is read from a small
 * stack copy. */
#define PT_MAX_LABELS 64
#define PT_MAX_NUMBER 63

typedef struct pt_sample {
    const char *name; /* borrowed, name_len bytes */
    size_t name_len;
    const char *labels; /* borrowed: between the braces, escapes kept */
    size_t labels_len;  /* 0 without labels */
    double value;
    size_t line; /* 1-based, of the sample or of the malformed line */
} pt_sample;

/* A position in the text; caller-embedded, nothing to release. */
typedef struct pt_reader {
    const char *p, *end;
    size_t line;
} pt_reader;

/* A label and the value it must have (unescaped), for pt_find. */
typedef struct pt_matcher {
    const char *label, *value;
} pt_matcher;

/* Reads text (len bytes; borrowed while the reader is used). */
void pt_reader_init(pt_reader *r, const char *text, size_t len);

/*
 * The next sample named `name` (NULL: of any name): 1 with *s filled, 0
 * at the end of the text, -1 for a malformed line (s->line names it).
 * The reader is then past that line, so a lenient caller may go on.
 * With a name, lines of other metrics are skipped unchecked.
 */
int pt_next(pt_reader *r, const char *name, pt_sample *s);

/* The value of `label` in s (a sample of pt_next), escapes kept: 1 with
 * *value and *len (borrowed from the text), or 0 when s has no such
 * label. */
int pt_label(const pt_sample *s, const char *label, const char **value,
             size_t *len);

/* Unescapes a label value of pt_label (len bytes) into out, which has
 * room for len bytes; returns the unescaped length. */
size_t pt_unescape(const char *value, size_t len, char *out);

/* The value of the first sample of `name` whose labels include the n
 * matchers: 1 with *value, 0 when there is none, -1 when a line of that
 * metric before it is malformed. */
int pt_find(const char *text, size_t len, const char *name,
            const pt_matcher *matchers, size_t n, double *value);

#endif
