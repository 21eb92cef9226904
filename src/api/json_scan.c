/*
 * json_scan.c - the decision requests' JSON, read in one pass without a
 * tree (json_scan.h says what is checked and why it is apart from
 * jansson, which the rest of the daemon uses).
 *
 * The scanner is a loop over the text with an explicit stack of the open
 * containers, so a hostile depth costs a counter, not the C stack; it
 * accepts exactly what jansson's json_loadb(JSON_REJECT_DUPLICATES)
 * accepts, except numbers beyond int64 or double, which are valid JSON
 * and which only a field's own range check refuses here (fuzz_json holds
 * the two parsers to that).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_scan.h"

/* jansson's JSON_PARSER_MAX_DEPTH. */
#define MAX_DEPTH 2048
/* Objects up to this many members have their keys compared pairwise;
 * larger ones are sorted, so that a hostile object costs n log n. */
#define PAIRWISE_MAX 16

typedef struct scan {
    sv_json *j;
    const unsigned char *s;
    size_t len, pos;
} scan;

static int fail(scan *sc, size_t at, const char *what)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < sc->len; i++) {
        if (sc->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(sc->j->err, sizeof(sc->j->err), "%s (line %zu, column %zu)", what,
             line, col);
    return -1;
}

static void skip_ws(scan *sc)
{
    while (sc->pos < sc->len) {
        unsigned char c = sc->s[sc->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        sc->pos++;
    }
}

static int push_tok(scan *sc, sv_json_type type, size_t start)
{
    sv_json *j = sc->j;
    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 64;
        sv_json_tok *t = realloc(j->tok, cap * sizeof(*t));
        if (t == NULL)
            return -2;
        j->tok = t;
        j->cap = cap;
    }
    j->tok[j->n] = (sv_json_tok){.start = (uint32_t)start,
                                 .next = (uint32_t)j->n + 1,
                                 .type = (uint8_t)type};
    return (int)j->n++;
}

static int hex4(const unsigned char *p, unsigned *v)
{
    *v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = p[k], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        *v = *v << 4 | d;
    }
    return 0;
}

/* The length of the UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t avail)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if (avail < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* A string at sc->pos (its opening quote) into a token. */
static int scan_string(scan *sc)
{
    size_t open = sc->pos, i = open + 1;
    int escaped = 0;
    const unsigned char *s = sc->s;
    for (;;) {
        while (i < sc->len && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' &&
               s[i] != '\\')
            i++;
        if (i >= sc->len)
            return fail(sc, i, "unexpected end of input in a string");
        unsigned c = s[i];
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(sc, i, "control character in a string");
        if (c >= 0x80) {
            size_t n = utf8_len(s + i, sc->len - i);
            if (n == 0)
                return fail(sc, i, "invalid UTF-8 in a string");
            i += n;
            continue;
        }
        escaped = 1; /* a backslash */
        if (i + 1 >= sc->len)
            return fail(sc, i, "unexpected end of input in a string");
        c = s[i + 1];
        if (c != 'u') {
            if (strchr("\"\\/bfnrt", (int)c) == NULL || c == 0)
                return fail(sc, i, "invalid escape in a string");
            i += 2;
            continue;
        }
        unsigned v, w;
        if (i + 6 > sc->len || hex4(s + i + 2, &v) != 0)
            return fail(sc, i, "invalid \\u escape in a string");
        if (v == 0)
            return fail(sc, i, "\\u0000 is not allowed in a string");
        if (v >= 0xDC00 && v <= 0xDFFF)
            return fail(sc, i, "invalid Unicode: a lone low surrogate");
        if (v >= 0xD800 && v <= 0xDBFF) {
            if (i + 12 > sc->len || s[i + 6] != '\\' || s[i + 7] != 'u' ||
                hex4(s + i + 8, &w) != 0 || w < 0xDC00 || w > 0xDFFF)
                return fail(sc, i, "invalid Unicode: a lone high surrogate");
            i += 6;
        }
        i += 6;
    }
    int t = push_tok(sc, SV_JSON_STRING, open + 1);
    if (t < 0)
        return t;
    sc->j->tok[t].len = (uint32_t)(i - open - 1);
    sc->j->tok[t].escaped = (uint8_t)escaped;
    sc->pos = i + 1;
    return t;
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* A number or a literal at sc->pos; a delimiter must follow it. */
static int scan_scalar(scan *sc)
{
    const unsigned char *s = sc->s;
    size_t at = sc->pos, i = at;
    sv_json_type type = SV_JSON_NUMBER;
    int integral = 1;
    if (s[i] == 't' || s[i] == 'f' || s[i] == 'n') {
        static const char *const word[] = {"true", "false", "null"};
        int k = s[i] == 't' ? 0 : s[i] == 'f' ? 1 : 2;
        size_t n = strlen(word[k]);
        if (sc->len - i < n || memcmp(s + i, word[k], n) != 0)
            return fail(sc, at, "invalid literal");
        type = (sv_json_type)(SV_JSON_TRUE + k);
        i += n;
    } else {
        i += s[i] == '-';
        if (i >= sc->len || !is_digit(s[i]))
            return fail(sc, at, "invalid number");
        if (s[i++] != '0')
            while (i < sc->len && is_digit(s[i]))
                i++;
        if (i < sc->len && s[i] == '.') {
            integral = 0;
            if (++i >= sc->len || !is_digit(s[i]))
                return fail(sc, at, "invalid number");
            while (i < sc->len && is_digit(s[i]))
                i++;
        }
        if (i < sc->len && (s[i] == 'e' || s[i] == 'E')) {
            integral = 0;
            i++;
            i += i < sc->len && (s[i] == '+' || s[i] == '-');
            if (i >= sc->len || !is_digit(s[i]))
                return fail(sc, at, "invalid number");
            while (i < sc->len && is_digit(s[i]))
                i++;
        }
    }
    if (i < sc->len && (s[i] == 0 || strchr(" \t\r\n,]}", s[i]) == NULL))
        return fail(sc, at,
                    type == SV_JSON_NUMBER ? "invalid number"
                                           : "invalid literal");
    int t = push_tok(sc, type, at);
    if (t < 0)
        return t;
    sc->j->tok[t].len = (uint32_t)(i - at);
    sc->j->tok[t].integral = (uint8_t)integral;
    sc->pos = i;
    return t;
}

typedef struct key_view {
    const char *s;
    size_t len;
} key_view;

static int key_cmp(const void *a, const void *b)
{
    const key_view *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return memcmp(x->s, y->s, x->len);
}

/* jansson's JSON_REJECT_DUPLICATES: no two keys of the object at token
 * obj the same once decoded.  0, -1 (a duplicate) or -2 (memory). */
static int check_keys(const sv_json *j, int obj)
{
    size_t m = j->tok[obj].size, any_escaped = 0;
    if (m < 2)
        return 0;
    key_view small[PAIRWISE_MAX], *kv = small;
    char *scratch = NULL;
    if (m > PAIRWISE_MAX && (kv = malloc(m * sizeof(*kv))) == NULL)
        return -2;
    for (size_t k = 0, t = (size_t)obj + 1; k < m; k++, t = j->tok[t + 1].next)
        any_escaped |= j->tok[t].escaped;
    if (any_escaped && (scratch = malloc(j->tok[obj].len)) == NULL) {
        if (kv != small)
            free(kv);
        return -2;
    }
    char *out = scratch;
    for (size_t k = 0, t = (size_t)obj + 1; k < m;
         k++, t = j->tok[t + 1].next) {
        kv[k].len = sv_json_str(j, (int)t, out, &kv[k].s);
        if (j->tok[t].escaped)
            out += kv[k].len;
    }
    int dup = 0;
    if (m <= PAIRWISE_MAX) {
        for (size_t a = 0; a < m && !dup; a++)
            for (size_t b = a + 1; b < m && !dup; b++)
                dup = key_cmp(&kv[a], &kv[b]) == 0;
    } else {
        qsort(kv, m, sizeof(*kv), key_cmp);
        for (size_t a = 1; a < m && !dup; a++)
            dup = key_cmp(&kv[a - 1], &kv[a]) == 0;
    }
    free(scratch);
    if (kv != small)
        free(kv);
    return dup ? -1 : 0;
}

int sv_json_scan(sv_json *j, const char *text, size_t len)
{
    scan sc = {j, (const unsigned char *)text, len, 0};
    uint32_t stack[MAX_DEPTH];
    size_t depth = 0;
    j->text = text;
    j->len = len;
    j->n = 0;
    j->err[0] = '\0';
    if (len >= UINT32_MAX)
        return fail(&sc, 0, "document too large");
    skip_ws(&sc);
    if (sc.pos >= len || (text[sc.pos] != '{' && text[sc.pos] != '['))
        return fail(&sc, sc.pos, "'[' or '{' expected");
    for (;;) {
        /* A value at sc.pos (the parent's key and colon are read). */
        skip_ws(&sc);
        if (sc.pos >= len)
            return fail(&sc, sc.pos, "unexpected end of input");
        unsigned char c = sc.s[sc.pos];
        int t;
        if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH)
                return fail(&sc, sc.pos, "maximum nesting depth exceeded");
            t = push_tok(&sc, c == '{' ? SV_JSON_OBJECT : SV_JSON_ARRAY,
                         sc.pos);
            if (t < 0)
                return t;
            stack[depth++] = (uint32_t)t;
            sc.pos++;
            skip_ws(&sc);
            if (sc.pos < len && sc.s[sc.pos] == (c == '{' ? '}' : ']'))
                goto close;
            if (c == '[')
                continue;
            goto key;
        }
        if (c == '"')
            t = scan_string(&sc);
        else if (c == '-' || is_digit(c) || c == 't' || c == 'f' || c == 'n')
            t = scan_scalar(&sc);
        else
            return fail(&sc, sc.pos, "unexpected character");
        if (t < 0)
            return t;
    after:
        /* A value is complete: the parent takes it, and a comma or
         * its closing bracket follows. */
        if (depth == 0) {
            skip_ws(&sc);
            if (sc.pos != len)
                return fail(&sc, sc.pos, "end of input expected");
            return 0;
        }
        j->tok[stack[depth - 1]].size++;
        skip_ws(&sc);
        if (sc.pos >= len)
            return fail(&sc, sc.pos, "unexpected end of input");
        int in_object = j->tok[stack[depth - 1]].type == SV_JSON_OBJECT;
        if (sc.s[sc.pos] == (in_object ? '}' : ']'))
            goto close;
        if (sc.s[sc.pos] != ',')
            return fail(&sc, sc.pos,
                        in_object ? "',' or '}' expected"
                                  : "',' or ']' expected");
        sc.pos++;
        if (!in_object)
            continue;
        skip_ws(&sc);
    key:
        if (sc.pos >= len || sc.s[sc.pos] != '"')
            return fail(&sc, sc.pos, "a string key expected");
        if ((t = scan_string(&sc)) < 0)
            return t;
        skip_ws(&sc);
        if (sc.pos >= len || sc.s[sc.pos] != ':')
            return fail(&sc, sc.pos, "':' expected");
        sc.pos++;
        continue;
    close : {
        int o = (int)stack[--depth];
        sc.pos++;
        j->tok[o].len = (uint32_t)(sc.pos - j->tok[o].start);
        j->tok[o].next = (uint32_t)j->n;
        if (j->tok[o].type == SV_JSON_OBJECT) {
            int rc = check_keys(j, o);
            if (rc == -1)
                return fail(&sc, j->tok[o].start, "duplicate object key");
            if (rc < 0)
                return rc;
        }
        goto after;
    }
    }
}

void sv_json_release(sv_json *j)
{
    free(j->tok);
    j->tok = NULL;
    j->n = j->cap = 0;
}

int sv_json_get(const sv_json *j, int obj, const char *name)
{
    if (obj < 0 || j->tok[obj].type != SV_JSON_OBJECT)
        return -1;
    size_t n = strlen(name);
    uint32_t t = (uint32_t)obj + 1;
    for (uint32_t k = 0; k < j->tok[obj].size; k++, t = j->tok[t + 1].next) {
        const sv_json_tok *key = &j->tok[t];
        if (!key->escaped) {
            if (key->len == n && memcmp(j->text + key->start, name, n) == 0)
                return (int)t + 1;
        } else if (key->len >= n) {
            char buf[256];
            const char *s;
            if (key->len <= sizeof(buf) &&
                sv_json_str(j, (int)t, buf, &s) == n && memcmp(s, name, n) == 0)
                return (int)t + 1;
        }
    }
    return -1;
}

static size_t put_utf8(char *o, unsigned v)
{
    if (v < 0x80) {
        o[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        o[0] = (char)(0xC0 | v >> 6);
        o[1] = (char)(0x80 | (v & 0x3F));
        return 2;
    }
    if (v < 0x10000) {
        o[0] = (char)(0xE0 | v >> 12);
        o[1] = (char)(0x80 | (v >> 6 & 0x3F));
        o[2] = (char)(0x80 | (v & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | v >> 18);
    o[1] = (char)(0x80 | (v >> 12 & 0x3F));
    o[2] = (char)(0x80 | (v >> 6 & 0x3F));
    o[3] = (char)(0x80 | (v & 0x3F));
    return 4;
}

size_t sv_json_str(const sv_json *j, int i, char *out, const char **s)
{
    const sv_json_tok *t = &j->tok[i];
    const unsigned char *p = (const unsigned char *)j->text + t->start;
    if (!t->escaped) {
        *s = (const char *)p;
        return t->len;
    }
    /* The scanner has checked every escape: decoding cannot fail, and
     * never grows (\uXXXX, 6 bytes, is at most 3 of UTF-8; a pair, 12,
     * is 4). */
    size_t n = 0;
    for (size_t k = 0; k < t->len;) {
        if (p[k] != '\\') {
            out[n++] = (char)p[k++];
            continue;
        }
        unsigned c = p[k + 1], v, w;
        k += 2;
        switch (c) {
        case 'b':
            out[n++] = '\b';
            break;
        case 'f':
            out[n++] = '\f';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 'r':
            out[n++] = '\r';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case 'u':
            hex4(p + k, &v);
            k += 4;
            if (v >= 0xD800 && v <= 0xDBFF) {
                hex4(p + k + 2, &w);
                k += 6;
                v = 0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00);
            }
            n += put_utf8(out + n, v);
            break;
        default:
            out[n++] = (char)c;
            break; /* " \ / */
        }
    }
    *s = out;
    return n;
}
