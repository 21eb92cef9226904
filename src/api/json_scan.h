/*
 * json_scan.h - a validating JSON scanner for the decision requests'
 * hot path: one pass over the body checks it is strict RFC 8259 JSON
 * (as jansson checks it: UTF-8, escapes, surrogates, no \u0000, one
 * top-level object or array, at most 2048 levels deep, no key twice in an
 * object) and records a flat array of tokens that point into the text.
 * Nothing is allocated per value and no string is copied until asked
 * for, which is what makes a POST /v1/check cost a third of the
 * instructions it cost through jansson's tree (docs/benchmarks.md).
 */
#ifndef SV_JSON_SCAN_H
#define SV_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef enum sv_json_type {
    SV_JSON_OBJECT,
    SV_JSON_ARRAY,
    SV_JSON_STRING,
    SV_JSON_NUMBER,
    SV_JSON_TRUE,
    SV_JSON_FALSE,
    SV_JSON_NULL
} sv_json_type;

/* A value in document order: an object's members follow it as key,
 * value, key, value ... each value with its own subtree. */
typedef struct sv_json_tok {
    uint32_t start; /* a string's first byte after the quote; else its first */
    uint32_t len;   /* a string's raw bytes without quotes; a container's all */
    uint32_t next;  /* the token after this one's subtree */
    uint32_t size;  /* an object's members, an array's elements */
    uint8_t type;   /* sv_json_type */
    uint8_t escaped;  /* a string with a backslash in it */
    uint8_t integral; /* a number with neither fraction nor exponent */
} sv_json_tok;

/* The tokens are the scanner's, reused from one document to the next
 * (a worker keeps one); `text` is borrowed and must outlive every use of
 * the tokens. */
typedef struct sv_json {
    const char *text;
    size_t len;
    sv_json_tok *tok;
    size_t n, cap;
    char err[128]; /* after a failed sv_json_scan: "what (line L, column C)" */
} sv_json;

/* Scans text[0, len) into j's tokens; the root is token 0.  0, or -1 with
 * j->err set (and -2 when out of memory). */
int sv_json_scan(sv_json *j, const char *text, size_t len);
/* Frees the tokens. */
void sv_json_release(sv_json *j);

/* The value of member `name` of object token obj, or -1 when absent. */
int sv_json_get(const sv_json *j, int obj, const char *name);
/* A string token's bytes: unescaped ones are pointed at in the text;
 * escaped ones are decoded into out, which has room for tok->len bytes,
 * and *s points there.  Returns the length. */
size_t sv_json_str(const sv_json *j, int i, char *out, const char **s);

#endif
