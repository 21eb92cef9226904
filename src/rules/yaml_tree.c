/*
 * yaml_tree.c - libyaml's event stream to a small tree of nodes that keep
 * their line and column.
 *
 * Separate from the rules' meaning so that rules_build.c can walk a plain
 * tree and point every error at the node it is about.  The tree is the
 * subset of YAML rules files need: mappings with unique scalar keys,
 * sequences and scalars.  Aliases are refused (an alias bomb would turn a
 * small file into a huge tree), and so is a second document (lyft reads
 * only the first, which would silently ignore the rest).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "rules_internal.h"

int sl__rules_error(char *errbuf, size_t errlen, int err, const char *file,
                    unsigned line, unsigned col, const char *fmt, ...)
{
    if (errbuf != NULL && errlen > 0) {
        va_list ap;
        int n = snprintf(errbuf, errlen, "%s:%u:%u: ", file, line, col);
        if (n >= 0 && (size_t)n < errlen) {
            va_start(ap, fmt);
            vsnprintf(errbuf + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return err;
}

void sl__ynode_free(sl__ynode *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->n; i++)
        sl__ynode_free(n->kids[i]);
    free(n->kids);
    free(n->text);
    free(n);
}

static sl__ynode *node_new(sl__ykind kind, const yaml_mark_t *mark)
{
    sl__ynode *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->kind = kind;
    n->line = (unsigned)mark->line + 1;
    n->col = (unsigned)mark->column + 1;
    return n;
}

static int node_push(sl__ynode *parent, sl__ynode *kid)
{
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 4;
        sl__ynode **k = realloc(parent->kids, cap * sizeof(*k));
        if (k == NULL)
            return SL_ENOMEM;
        parent->kids = k;
        parent->cap = cap;
    }
    parent->kids[parent->n++] = kid;
    return 0;
}

/* A key is added to a mapping: it must be a scalar not already there.
 * Quadratic in the keys of one mapping, which rules files keep to a
 * handful (a descriptor has at most six). */
static int check_key(const char *name, const sl__ynode *map,
                     const sl__ynode *key, char *errbuf, size_t errlen)
{
    if (key->kind != SL__Y_SCALAR)
        return sl__rules_error(errbuf, errlen, SL_EINVAL, name, key->line,
                               key->col, "mapping key is not a scalar");
    for (size_t i = 0; i + 1 < map->n; i += 2) {
        const sl__ynode *k = map->kids[i];
        if (k->len == key->len && memcmp(k->text, key->text, k->len) == 0)
            return sl__rules_error(errbuf, errlen, SL_EINVAL, name,
                                   key->line, key->col,
                                   "duplicate key: '%s'", key->text);
    }
    return 0;
}

int sl__yaml_parse(const char *name, const char *text, size_t len,
                   size_t max_depth, sl__ynode **out, char *errbuf,
                   size_t errlen)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    sl__ynode **stack = NULL; /* open containers, outermost first */
    size_t depth = 0;
    sl__ynode *root = NULL;
    int docs = 0, done = 0, rc = 0;

    *out = NULL;
    if (!yaml_parser_initialize(&parser))
        return sl__rules_error(errbuf, errlen, SL_ENOMEM, name, 1, 1,
                               "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    stack = calloc(max_depth + 1, sizeof(*stack));
    if (stack == NULL) {
        yaml_parser_delete(&parser);
        return sl__rules_error(errbuf, errlen, SL_ENOMEM, name, 1, 1,
                               "out of memory");
    }

    while (!done && rc == 0) {
        sl__ynode *n = NULL;
        if (!yaml_parser_parse(&parser, &ev)) {
            const char *problem = parser.problem ? parser.problem : "error";
            if (parser.error == YAML_MEMORY_ERROR)
                rc = sl__rules_error(errbuf, errlen, SL_ENOMEM, name, 1, 1,
                                     "out of memory");
            else
                rc = sl__rules_error(
                    errbuf, errlen, SL_EINVAL, name,
                    (unsigned)parser.problem_mark.line + 1,
                    (unsigned)parser.problem_mark.column + 1,
                    "invalid yaml: %s%s%s", problem,
                    parser.context ? " " : "",
                    parser.context ? parser.context : "");
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rc = sl__rules_error(errbuf, errlen, SL_EINVAL, name,
                                     (unsigned)ev.start_mark.line + 1,
                                     (unsigned)ev.start_mark.column + 1,
                                     "more than one yaml document");
            break;
        case YAML_ALIAS_EVENT:
            rc = sl__rules_error(errbuf, errlen, SL_EINVAL, name,
                                 (unsigned)ev.start_mark.line + 1,
                                 (unsigned)ev.start_mark.column + 1,
                                 "yaml aliases are not supported: '*%s'",
                                 (const char *)ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT:
            n = node_new(SL__Y_SCALAR, &ev.start_mark);
            if (n != NULL) {
                n->len = ev.data.scalar.length;
                n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                n->text = malloc(n->len + 1);
                if (n->text == NULL) {
                    sl__ynode_free(n);
                    n = NULL;
                } else {
                    memcpy(n->text, ev.data.scalar.value, n->len);
                    n->text[n->len] = '\0';
                }
            }
            break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (depth == max_depth) {
                rc = sl__rules_error(errbuf, errlen, SL_ERANGE, name,
                                     (unsigned)ev.start_mark.line + 1,
                                     (unsigned)ev.start_mark.column + 1,
                                     "yaml nested too deep: '%zu' levels "
                                     "(at most %zu)",
                                     depth + 1, max_depth);
                break;
            }
            n = node_new(ev.type == YAML_MAPPING_START_EVENT ? SL__Y_MAP
                                                             : SL__Y_SEQ,
                         &ev.start_mark);
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
        if (rc == 0 && (ev.type == YAML_SCALAR_EVENT ||
                        ev.type == YAML_MAPPING_START_EVENT ||
                        ev.type == YAML_SEQUENCE_START_EVENT)) {
            if (n == NULL) {
                rc = sl__rules_error(errbuf, errlen, SL_ENOMEM, name, 1, 1,
                                     "out of memory");
            } else if (depth == 0) {
                root = n;
            } else {
                sl__ynode *parent = stack[depth - 1];
                /* Even positions of a mapping are keys. */
                if (parent->kind == SL__Y_MAP && parent->n % 2 == 0)
                    rc = check_key(name, parent, n, errbuf, errlen);
                if (rc == 0)
                    rc = node_push(parent, n);
                if (rc == SL_ENOMEM)
                    sl__rules_error(errbuf, errlen, SL_ENOMEM, name, 1, 1,
                                    "out of memory");
                if (rc != 0)
                    sl__ynode_free(n);
            }
            if (rc == 0 && n->kind != SL__Y_SCALAR)
                stack[depth++] = n;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    free(stack);
    if (rc != 0) {
        sl__ynode_free(root);
        return rc;
    }
    *out = root;
    return 0;
}

const sl__ynode *sl__ymap_get(const sl__ynode *m, const char *key)
{
    for (size_t i = 0; i + 1 < m->n; i += 2)
        if (strcmp(m->kids[i]->text, key) == 0)
            return m->kids[i + 1];
    return NULL;
}
