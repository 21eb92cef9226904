/*
 * prom_text.c - the Prometheus text reader (prom_text.h): samples by
 * name, their labels and values, from bytes a node sent.
 *
 * A unit of its own because two programs read the same format: `sluice
 * advisor` (one counter of a node) and the lab (its proxies' counters and
 * limit in force); each had its own loop over lines, and they disagreed
 * on what a line was.  It is a couple of hundred lines rather than a
 * library: Debian packages no C reader of the text format, and what is
 * read is sluice's own exporter (src/runtime/metrics.c).
 */
#include "adaptive/prom_text.h"

#include <stdlib.h>
#include <string.h>

typedef struct label_span {
    const char *name, *value; /* value: escapes kept */
    size_t name_len, value_len;
} label_span;

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static const char *skip_blanks(const char *p, const char *end)
{
    while (p < end && is_blank(*p))
        p++;
    return p;
}

/* Past a name at p: [a-zA-Z_:][a-zA-Z0-9_:]* for a metric, without the
 * colons for a label (the format's two grammars); p when there is none.
 * By hand rather than isalpha(), which follows the locale. */
static const char *name_end(const char *p, const char *end, int colons)
{
    const char *q = p;
    for (; q < end; q++) {
        char c = *q;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (colons && c == ':') || (q > p && c >= '0' && c <= '9')))
            break;
    }
    return q;
}

/* The byte at v of a checked label value, unescaped into *c; how many
 * bytes of v it took. */
static size_t unescape_at(const char *v, char *c)
{
    if (v[0] != '\\') {
        *c = v[0];
        return 1;
    }
    *c = v[1] == 'n' ? '\n' : v[1];
    return 2;
}

/*
 * At *pp inside a label set ending by eol: 1 with the next label in *l
 * and *pp past it and its ','; 0 at the closing '}' (*pp on it); -1 when
 * malformed.  The one walk over labels, for checking a line and for
 * finding a label in it.
 */
static int next_label(const char **pp, const char *eol, label_span *l)
{
    const char *p = skip_blanks(*pp, eol);
    if (p < eol && *p == '}') {
        *pp = p;
        return 0;
    }
    const char *q = name_end(p, eol, 0);
    if (q == p)
        return -1;
    l->name = p;
    l->name_len = (size_t)(q - p);
    p = skip_blanks(q, eol);
    if (p == eol || *p != '=')
        return -1;
    p = skip_blanks(p + 1, eol);
    if (p == eol || *p != '"')
        return -1;
    l->value = ++p;
    for (; p < eol && *p != '"'; p++)
        if (*p == '\\') {
            if (p + 1 == eol || (p[1] != '\\' && p[1] != '"' && p[1] != 'n'))
                return -1;
            p++;
        }
    if (p == eol)
        return -1;
    l->value_len = (size_t)(p - l->value);
    p = skip_blanks(p + 1, eol);
    if (p < eol && *p == ',')
        p++;
    else if (p == eol || *p != '}')
        return -1;
    *pp = p;
    return 1;
}

/* The labels at p (just past '{') into s, each checked: past the '}',
 * or NULL when malformed. */
static const char *read_labels(const char *p, const char *eol, pt_sample *s)
{
    const char *names[PT_MAX_LABELS];
    size_t lens[PT_MAX_LABELS], n = 0;
    label_span l;
    int rc;
    s->labels = p;
    while ((rc = next_label(&p, eol, &l)) == 1) {
        if (n == PT_MAX_LABELS)
            return NULL;
        for (size_t i = 0; i < n; i++)
            if (lens[i] == l.name_len && memcmp(names[i], l.name, lens[i]) == 0)
                return NULL;
        names[n] = l.name;
        lens[n++] = l.name_len;
    }
    if (rc < 0)
        return NULL;
    s->labels_len = (size_t)(p - s->labels);
    return p + 1;
}

/* What follows a sample's name, from p to eol, into s: 0 or -1. */
static int read_sample(const char *p, const char *eol, pt_sample *s)
{
    const char *brace = skip_blanks(p, eol);
    if (brace < eol && *brace == '{' &&
        (p = read_labels(brace + 1, eol, s)) == NULL)
        return -1;
    if (p == eol || !is_blank(*p))
        return -1;
    p = skip_blanks(p, eol);
    /* The number's bytes are checked before strtod, which would skip
     * leading white space and read "nan(...)". */
    char num[PT_MAX_NUMBER + 1];
    size_t n = 0;
    for (; p < eol && !is_blank(*p); p++, n++) {
        char c = *p;
        if (n == PT_MAX_NUMBER ||
            !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.'))
            return -1;
        num[n] = c;
    }
    num[n] = '\0';
    char *end;
    s->value = strtod(num, &end);
    if (n == 0 || end != num + n)
        return -1;
    p = skip_blanks(p, eol);
    if (p == eol)
        return 0;
    if (*p == '-')
        p++;
    const char *digits = p;
    while (p < eol && *p >= '0' && *p <= '9')
        p++;
    return p > digits && skip_blanks(p, eol) == eol ? 0 : -1;
}

void pt_reader_init(pt_reader *r, const char *text, size_t len)
{
    r->p = text;
    r->end = text + len;
    r->line = 0;
}

int pt_next(pt_reader *r, const char *name, pt_sample *s)
{
    size_t want = name != NULL ? strlen(name) : 0;
    while (r->p < r->end) {
        const char *p = r->p, *eol = memchr(p, '\n', (size_t)(r->end - p));
        if (eol == NULL)
            eol = r->end;
        r->p = eol < r->end ? eol + 1 : r->end;
        r->line++;
        if (eol > p && eol[-1] == '\r')
            eol--;
        p = skip_blanks(p, eol);
        if (p == eol || *p == '#')
            continue;
        const char *q = name_end(p, eol, 1);
        if (name != NULL &&
            ((size_t)(q - p) != want || memcmp(p, name, want) != 0))
            continue;
        memset(s, 0, sizeof(*s));
        s->name = p;
        s->name_len = (size_t)(q - p);
        s->line = r->line;
        return q > p && read_sample(q, eol, s) == 0 ? 1 : -1;
    }
    return 0;
}

int pt_label(const pt_sample *s, const char *label, const char **value,
             size_t *len)
{
    if (s->labels == NULL)
        return 0;
    /* Checked by pt_next: the walk stops at the '}' after the labels. */
    const char *p = s->labels, *eol = s->labels + s->labels_len + 1;
    size_t want = strlen(label);
    label_span l;
    while (next_label(&p, eol, &l) == 1)
        if (l.name_len == want && memcmp(l.name, label, want) == 0) {
            *value = l.value;
            *len = l.value_len;
            return 1;
        }
    return 0;
}

size_t pt_unescape(const char *value, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;)
        i += unescape_at(value + i, &out[n++]);
    return n;
}

/* Whether s has `label` with the unescaped value `want`. */
static int label_is(const pt_sample *s, const char *label, const char *want)
{
    const char *v;
    size_t len, k = 0;
    if (!pt_label(s, label, &v, &len))
        return 0;
    for (size_t i = 0; i < len; k++) {
        char c;
        i += unescape_at(v + i, &c);
        if (want[k] == '\0' || want[k] != c)
            return 0;
    }
    return want[k] == '\0';
}

int pt_find(const char *text, size_t len, const char *name,
            const pt_matcher *matchers, size_t n, double *value)
{
    pt_reader r;
    pt_sample s;
    int rc;
    pt_reader_init(&r, text, len);
    while ((rc = pt_next(&r, name, &s)) == 1) {
        size_t i = 0;
        while (i < n && label_is(&s, matchers[i].label, matchers[i].value))
            i++;
        if (i == n) {
            *value = s.value;
            return 1;
        }
    }
    return rc;
}
