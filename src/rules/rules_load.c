/*
 * rules_load.c - reading rules files and directories, the caps on what is
 * read, the content version, freeing and listing.
 *
 * Kept apart from rules_build.c so that the file system (sizes, directory
 * order, I/O errors) stays out of the code that gives the YAML a meaning,
 * and sl_rules_load_buffer() shares everything but the reading.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rules_internal.h"

static void node_release(sl__rnode *n)
{
    for (size_t i = 0; i < n->n_rules; i++) {
        sl_rule *r = &n->rules[i];
        sl_limit_free((sl_limit *)r->limit);
        free((char *)r->path);
        free((char *)r->name);
        for (size_t k = 0; k < r->n_replaces; k++)
            free((char *)r->replaces[k]);
        free((void *)r->replaces);
    }
    free(n->rules);
    for (size_t i = 0; i < n->n_kids; i++)
        node_release(&n->kids[i]);
    free(n->kids);
    free(n->key);
    free(n->value);
    free(n->shared);
    sl__meta_free(n->meta);
}

void sl_rules_free(sl_rules *rules)
{
    if (rules == NULL)
        return;
    for (size_t i = 0; i < rules->n_domains; i++) {
        node_release(&rules->domains[i].root);
        free(rules->domains[i].name);
        free(rules->domains[i].file);
    }
    free(rules->domains);
    free(rules->all);
    free(rules->daemon);
    for (size_t i = 0; i < rules->n_warnings; i++)
        free(rules->warnings[i]);
    free(rules->warnings);
    free(rules);
}

/* A new, empty sl_rules with the caller's options: 0, or SL_EINVAL (a
 * refused opts->size, said in errbuf) or SL_ENOMEM. */
static int rules_new(const sl_rules_options *opts, sl_rules **out, char *errbuf,
                     size_t errlen)
{
    sl_rules_options o = {0};
    sl_rules *r;
    /* The end of sl_rules_options' first layout: max_descriptors. */
    if (opts != NULL &&
        sl__options_copy(&o, sizeof(o),
                         offsetof(sl_rules_options, max_descriptors) +
                             sizeof(o.max_descriptors),
                         opts, "sl_rules_options", errbuf, errlen) != 0)
        return SL_EINVAL;
    if ((r = calloc(1, sizeof(*r))) == NULL)
        return SL_ENOMEM;
    r->opts = o;
    if (r->opts.max_file_bytes == 0)
        r->opts.max_file_bytes = SL_RULES_MAX_FILE_BYTES;
    if (r->opts.max_files == 0)
        r->opts.max_files = SL_RULES_MAX_FILES;
    if (r->opts.max_depth == 0)
        r->opts.max_depth = SL_RULES_MAX_DEPTH;
    if (r->opts.max_descriptors == 0)
        r->opts.max_descriptors = SL_RULES_MAX_DESCRIPTORS;
    *out = r;
    return 0;
}

/* One file's text: hashed into the version, parsed, built. */
static int add_text(sl_rules *rules, const char *name, const char *text,
                    size_t len, char *errbuf, size_t errlen)
{
    sl__ynode *root = NULL;
    int rc;

    if (len > rules->opts.max_file_bytes)
        return sl__rules_error(errbuf, errlen, SL_ERANGE, name, 1, 1,
                               "file too large: '%zu' bytes (at most %zu)",
                               len, rules->opts.max_file_bytes);
    rules->hash = sl__siphash13(rules->hash, len, 0, name, strlen(name));
    rules->hash = sl__siphash13(rules->hash, 0, len, text, len);
    /* A rules file nests about three YAML containers per descriptor
     * level (sequence, mapping, rate_limit); a few more for the rest. */
    rc = sl__yaml_parse(name, text, len, rules->opts.max_depth * 3 + 8,
                        &root, errbuf, errlen);
    if (rc == 0)
        rc = sl__rules_add_tree(rules, name, root, errbuf, errlen);
    sl__ynode_free(root);
    return rc;
}

static int cmp_domain(const void *a, const void *b)
{
    const sl__rdomain *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c != 0 ? c : (x->name_len > y->name_len) - (x->name_len <
                                                       y->name_len);
}

static void finish(sl_rules *rules)
{
    qsort(rules->domains, rules->n_domains, sizeof(*rules->domains),
          cmp_domain);
    /* Sorting moved the domains, not their rules: every sl_rule still
     * points at its domain's name, which did not move. */
    snprintf(rules->version, sizeof(rules->version), "%016llx",
             (unsigned long long)rules->hash);
}

int sl_rules_load_buffer(const char *name, const char *text, size_t len,
                         const sl_rules_options *opts, sl_rules **out,
                         char *errbuf, size_t errlen)
{
    sl_rules *rules;
    int rc = rules_new(opts, &rules, errbuf, errlen);
    if (rc != 0)
        return rc;
    rc = add_text(rules, name, text, len, errbuf, errlen);
    if (rc != 0) {
        sl_rules_free(rules);
        return rc;
    }
    finish(rules);
    *out = rules;
    return 0;
}

static int io_error(char *errbuf, size_t errlen, const char *path,
                    const char *what)
{
    if (errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s: %s: %s", path, what, strerror(errno));
    return SL_EINVAL;
}

static int load_file(sl_rules *rules, const char *path, char *errbuf,
                     size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *text;
    size_t len = 0, cap = rules->opts.max_file_bytes + 1;
    int rc;

    if (f == NULL)
        return io_error(errbuf, errlen, path, "cannot open");
    /* Read at most one byte past the cap: enough to know it is exceeded
     * without trusting a size that may change under us. */
    text = malloc(cap);
    if (text == NULL) {
        fclose(f);
        return SL_ENOMEM;
    }
    len = fread(text, 1, cap, f);
    if (ferror(f)) {
        rc = io_error(errbuf, errlen, path, "cannot read");
    } else {
        rc = add_text(rules, path, text, len, errbuf, errlen);
    }
    fclose(f);
    free(text);
    return rc;
}

static int is_rules_name(const char *n)
{
    size_t len = strlen(n);
    if (n[0] == '.')
        return 0;
    return (len > 5 && strcmp(n + len - 5, ".yaml") == 0) ||
           (len > 4 && strcmp(n + len - 4, ".yml") == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_dir(sl_rules *rules, const char *path, char *errbuf,
                    size_t errlen)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    if (dir == NULL)
        return io_error(errbuf, errlen, path, "cannot open directory");
    while ((e = readdir(dir)) != NULL) {
        if (!is_rules_name(e->d_name))
            continue;
        if (n == rules->opts.max_files) {
            if (errbuf != NULL && errlen > 0)
                snprintf(errbuf, errlen,
                         "%s: too many rules files: more than %zu", path,
                         rules->opts.max_files);
            rc = SL_ERANGE;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof(*nn));
            if (nn == NULL) {
                rc = SL_ENOMEM;
                break;
            }
            names = nn;
        }
        size_t plen = strlen(path), elen = strlen(e->d_name);
        char *full = malloc(plen + elen + 2);
        if (full == NULL) {
            rc = SL_ENOMEM;
            break;
        }
        memcpy(full, path, plen);
        /* "dir/" and "dir" give the same names in messages. */
        if (plen > 0 && path[plen - 1] == '/')
            plen--;
        full[plen] = '/';
        memcpy(full + plen + 1, e->d_name, elen + 1);
        names[n++] = full;
    }
    closedir(dir);
    if (rc == 0) {
        qsort(names, n, sizeof(*names), cmp_str);
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = load_file(rules, names[i], errbuf, errlen);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int sl_rules_load(const char *path, const sl_rules_options *opts,
                  sl_rules **out, char *errbuf, size_t errlen)
{
    struct stat st;
    sl_rules *rules;
    int rc;

    if (stat(path, &st) != 0)
        return io_error(errbuf, errlen, path, "cannot open");
    if ((rc = rules_new(opts, &rules, errbuf, errlen)) != 0)
        return rc;
    if (S_ISDIR(st.st_mode))
        rc = load_dir(rules, path, errbuf, errlen);
    else
        rc = load_file(rules, path, errbuf, errlen);
    if (rc == SL_ENOMEM && errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s: out of memory", path);
    if (rc != 0) {
        sl_rules_free(rules);
        return rc;
    }
    finish(rules);
    *out = rules;
    return 0;
}

const char *sl_rules_version(const sl_rules *rules)
{
    return rules->version;
}

size_t sl_rules_domain_count(const sl_rules *rules)
{
    return rules->n_domains;
}

const char *sl_rules_domain_name(const sl_rules *rules, size_t i)
{
    return i < rules->n_domains ? rules->domains[i].name : NULL;
}

size_t sl_rules_rule_count(const sl_rules *rules)
{
    return rules->n_rules;
}

const sl_rule *sl_rules_rule(const sl_rules *rules, size_t i)
{
    return i < rules->n_rules ? rules->all[i] : NULL;
}

const sl__rule_daemon *sl__rule_daemon_of(const sl_rules *rules,
                                          const sl_rule *r)
{
    static const sl__rule_daemon none;
    return r->index < rules->n_rules ? &rules->daemon[r->index] : &none;
}
