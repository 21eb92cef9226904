/*
 * settings.c - reads the command line and the config file of `sluice
 * serve` and `sluice proxy` through the settings table (table.c): finds
 * the row of each flag or key, checks the value with value.c's validators
 * and stores it where the row says.  --help is printed from the same rows.
 *
 * Messages keep the two wordings users have met so far.  A setting of
 * `sluice serve` says "bad value", "at most N" or "bad duration" and
 * quotes the value whole, from a flag or a file, of either command; the
 * proxy's own settings say "expected an integer in MIN..MAX", "bad
 * duration (at least 1ms)" or "expected a scalar" and quote at most 64
 * bytes of the value, as the proxy's file always has.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"
#include "core/value.h"

/* --config's caps; the proxy's file holds the routes as well. */
#define SERVE_FILE_BYTES (64 * 1024)
#define SERVE_FILE_DEPTH 4
#define PROXY_FILE_BYTES (256 * 1024)
#define PROXY_FILE_DEPTH 12

/* getopt_long's answer for the table's row i: above any character. */
#define FLAG_VAL(i) (1000 + (int)(i))

/* Where a value comes from. */
typedef struct source {
    const char *where; /* for messages: "--threads", "FILE:LINE:COL: threads" */
    const char *file;  /* the config file, or NULL for a flag */
    int plain;         /* written unquoted: only then is `true` a boolean */
} source;

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return ST_SET_EFILE;
}

/* A copy of a[0..alen) followed by b[0..blen), freed with s; NULL when
 * memory ran out. */
static char *keep(st_settings *s, const char *a, size_t alen, const char *b,
                  size_t blen)
{
    if (s->n_kept == s->cap_kept) {
        size_t cap = s->cap_kept ? 2 * s->cap_kept : 16;
        char **kept = realloc(s->kept, cap * sizeof(*kept));
        if (kept == NULL)
            return NULL;
        s->kept = kept;
        s->cap_kept = cap;
    }
    char *copy = malloc(alen + blen + 1);
    if (copy == NULL)
        return NULL;
    if (alen > 0) /* a may be NULL then */
        memcpy(copy, a, alen);
    memcpy(copy + alen, b, blen);
    copy[alen + blen] = '\0';
    return s->kept[s->n_kept++] = copy;
}

/* Whether row speaks the proxy file's wording (above). */
static int proxy_wording(const st_setting *row)
{
    return !(row->commands & ST_SET_SERVE);
}

static void *field(const st_settings *s, const st_setting *row)
{
    char *base = row->target == ST_SET_SRV ? (char *)s->srv : (char *)s->px;
    return base + row->offset;
}

static int set_number(const st_setting *row, const source *from,
                      const char *text, size_t len, void *to, char *err,
                      size_t errlen)
{
    uint64_t v = 0;
    int rc = 0;
    if (row->zero == NULL || strlen(row->zero) != len ||
        memcmp(row->zero, text, len) != 0)
        rc = sl__value_uint(text, len, row->min, row->max, &v);
    if (rc != 0 && proxy_wording(row))
        return fail(err, errlen,
                    "%s: expected an integer in %" PRIu64 "..%" PRIu64
                    ": '%.64s'",
                    from->where, row->min, row->max, text);
    if (rc == SL_ERANGE && v > row->max)
        return fail(err, errlen, "%s: at most %" PRIu64 ": '%s'", from->where,
                    row->max, text);
    if (rc != 0)
        return fail(err, errlen, "%s: bad value: '%s'", from->where, text);
    if (row->kind == ST_SET_INT)
        *(int *)to = (int)v;
    else
        *(size_t *)to = (size_t)v;
    return 0;
}

static int set_listen(st_settings *s, const st_setting *row, const source *from,
                      const char *text, size_t len, char *err, size_t errlen)
{
    char host[256];
    int port;
    if (sl__value_hostport(text, len, -1, host, sizeof(host), &port) != 0)
        return fail(err, errlen, "%s: expected HOST:PORT: '%s'", from->where,
                    text);
    sv_addr *to = field(s, row);
    if ((to->host = keep(s, host, strlen(host), "", 0)) == NULL)
        return fail(err, errlen, "out of memory");
    to->port = port;
    return 0;
}

static int set_store(st_settings *s, const source *from, const char *text,
                     size_t len, char *err, size_t errlen)
{
    if (strcmp(text, "memory") == 0) {
        s->srv->redis_url = NULL;
        return 0;
    }
    if (strncmp(text, "redis://", 8) == 0 || strncmp(text, "unix:", 5) == 0 ||
        strncmp(text, "redis-cluster://", 16) == 0 ||
        strncmp(text, "rediss://", 9) == 0 ||
        strncmp(text, "rediss-cluster://", 17) == 0 ||
        strncmp(text, "redis-sentinel://", 17) == 0 ||
        strncmp(text, "rediss-sentinel://", 18) == 0) {
        /* The rest is sl_redis_store_new's to check. */
        if ((s->srv->redis_url = keep(s, text, len, "", 0)) == NULL)
            return fail(err, errlen, "out of memory");
        return 0;
    }
    return fail(err, errlen,
                "%s: unknown store: '%s' (memory, redis[s]://..., unix:..., "
                "redis[s]-cluster://... or redis[s]-sentinel://...)",
                from->where, text);
}

static int set_upstream(st_settings *s, const source *from, const char *text,
                        char *err, size_t errlen)
{
    char why[400];
    if (px_set_upstream(s->px, text, why, sizeof(why)) != 0)
        return fail(err, errlen, "%s: %s", from->where, why);
    return 0;
}

/* An owned copy into a px_config's string field, which outlives the
 * settings (a reload's config lives on after they are released). */
static int set_owned(st_settings *s, const st_setting *row, const char *text,
                     char *err, size_t errlen)
{
    char **to = field(s, row);
    char *copy = strdup(text);
    if (copy == NULL)
        return fail(err, errlen, "out of memory");
    free(*to);
    *to = copy;
    return 0;
}

/* Where the config file holds a relative path, it means one from the
 * file's directory, whatever the directory the command runs in. */
static int set_path(st_settings *s, const st_setting *row, const source *from,
                    const char *text, size_t len, char *err, size_t errlen)
{
    const char *slash = from->file ? strrchr(from->file, '/') : NULL;
    size_t dl = slash && text[0] != '/' ? (size_t)(slash - from->file) + 1 : 0;
    const char *path = keep(s, from->file, dl, text, len);
    if (path == NULL)
        return fail(err, errlen, "out of memory");
    if (row->target == ST_SET_PX)
        return set_owned(s, row, path, err, errlen);
    *(const char **)field(s, row) = path;
    return 0;
}

/* A DNS name (letters, digits, '-', '.'; at most 253 bytes) or an IP
 * address: what a certificate can name. */
static int set_host(st_settings *s, const st_setting *row, const source *from,
                    const char *text, size_t len, char *err, size_t errlen)
{
    unsigned char addr[16];
    int ok = len > 0 && len <= 253 && strlen(text) == len;
    for (size_t i = 0; ok && i < len; i++)
        ok =
            isalnum((unsigned char)text[i]) || text[i] == '-' || text[i] == '.';
    if (!ok && inet_pton(AF_INET6, text, addr) != 1)
        return fail(err, errlen,
                    "%s: expected a host name or an address: "
                    "'%.64s'",
                    from->where, text);
    if (row->target == ST_SET_PX)
        return set_owned(s, row, text, err, errlen);
    if ((*(const char **)field(s, row) = keep(s, text, len, "", 0)) == NULL)
        return fail(err, errlen, "out of memory");
    return 0;
}

static int set_url_path(st_settings *s, const st_setting *row,
                        const source *from, const char *text, size_t len,
                        char *err, size_t errlen)
{
    char **to = field(s, row);
    if (len > 0 && text[0] != '/')
        return fail(err, errlen,
                    "%s: must start with '/' (or be empty): '%.64s'",
                    from->where, text);
    char *copy = strdup(text);
    if (copy == NULL)
        return fail(err, errlen, "out of memory");
    free(*to);
    *to = copy;
    return 0;
}

/* Sets row's setting from text[0..len), a NUL at text[len]: 0, or
 * ST_SET_EFILE with "WHERE: what is wrong: 'text'" in err. */
static int set(st_settings *s, const st_setting *row, const source *from,
               const char *text, size_t len, char *err, size_t errlen)
{
    char words[96];
    sl_nanos ns;
    int i;
    switch (row->kind) {
    case ST_SET_PATH:
        return set_path(s, row, from, text, len, err, errlen);
    case ST_SET_INT:
    case ST_SET_SIZE:
        return set_number(row, from, text, len, field(s, row), err, errlen);
    case ST_SET_MS:
        if (row->zero != NULL && strlen(row->zero) == len &&
            memcmp(row->zero, text, len) == 0) {
            *(uint64_t *)field(s, row) = 0;
            return 0;
        }
        if (sl__value_duration(text, len, SL_NS_PER_MS, &ns) == 0) {
            *(uint64_t *)field(s, row) = (uint64_t)(ns / SL_NS_PER_MS);
            return 0;
        }
        if (proxy_wording(row))
            return fail(err, errlen, "%s: bad duration (at least 1ms): '%.64s'",
                        from->where, text);
        return fail(err, errlen, "%s: bad duration: '%s'", from->where, text);
    case ST_SET_BOOL:
        if (sl__value_bool(text, len, from->plain, field(s, row)) == 0)
            return 0;
        return fail(err, errlen, "%s: expected true or false: '%.64s'",
                    from->where, text);
    case ST_SET_ENUM:
        if ((i = sl__value_enum(text, len, row->names, 0)) >= 0) {
            *(int *)field(s, row) = i;
            return 0;
        }
        /* An enum that grew from a boolean (false, true, more) still
         * reads every word a boolean reads: yes, on, ... */
        if (strcmp(row->names[0], "false") == 0 && row->names[1] != NULL &&
            strcmp(row->names[1], "true") == 0 &&
            sl__value_bool(text, len, from->plain, &i) == 0) {
            *(int *)field(s, row) = i;
            return 0;
        }
        sl__value_enum_list(row->names, words, sizeof(words));
        return fail(err, errlen, "%s: expected %s: '%s'", from->where, words,
                    text);
    case ST_SET_LISTEN:
        return set_listen(s, row, from, text, len, err, errlen);
    case ST_SET_STORE:
        return set_store(s, from, text, len, err, errlen);
    case ST_SET_UPSTREAM:
        return set_upstream(s, from, text, err, errlen);
    case ST_SET_HOST:
        return set_host(s, row, from, text, len, err, errlen);
    case ST_SET_URL_PATH:
        return set_url_path(s, row, from, text, len, err, errlen);
    case ST_SET_HTTP_URL:
        if (!(len > 7 && strncmp(text, "http://", 7) == 0) &&
            !(len > 8 && strncmp(text, "https://", 8) == 0))
            return fail(err, errlen,
                        "%s: expected http://HOST:PORT or https://HOST:PORT: "
                        "'%.64s'",
                        from->where, text);
        if ((*(const char **)field(s, row) = keep(s, text, len, "", 0)) == NULL)
            return fail(err, errlen, "out of memory");
        return 0;
    case ST_SET_SECTION:
    case ST_SET_CONFIG:
    case ST_SET_HELP:
        break; /* their readers handle them: no text sets them */
    }
    return fail(err, errlen, "%s: not a value", from->where);
}

int st_settings_init(st_settings *s, unsigned command, sv_config *srv,
                     px_config *px, char *err, size_t errlen)
{
    const source from = {.where = "default", .plain = 1};
    *s = (st_settings){.command = command, .srv = srv, .px = px};
    *srv = (sv_config){0};
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *row = &st_settings_table[i];
        if ((row->commands & command) && row->def != NULL &&
            set(s, row, &from, row->def, strlen(row->def), err, errlen) != 0)
            return ST_SET_EFILE;
    }
    return 0;
}

void st_settings_release(st_settings *s)
{
    for (size_t i = 0; i < s->n_kept; i++)
        free(s->kept[i]);
    free(s->kept);
    s->kept = NULL;
    s->n_kept = s->cap_kept = 0;
}

/* The command's row of a config key, or NULL. */
static const st_setting *find_key(unsigned command, const char *key, size_t len)
{
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *row = &st_settings_table[i];
        if (row->key != NULL && (row->commands & command) &&
            strlen(row->key) == len && memcmp(row->key, key, len) == 0)
            return row;
    }
    return NULL;
}

/* Whether key is a mapping of nested keys of the command ("timeouts"). */
static int is_group(unsigned command, const char *key, size_t len)
{
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *row = &st_settings_table[i];
        if (row->key != NULL && (row->commands & command) &&
            strncmp(row->key, key, len) == 0 && row->key[len] == '.')
            return 1;
    }
    return 0;
}

static int read_key(st_settings *s, const char *path, const char *group,
                    const sl__ynode *k, const sl__ynode *v, char *err,
                    size_t errlen);

static int read_group(st_settings *s, const char *path, const sl__ynode *k,
                      const sl__ynode *v, char *err, size_t errlen)
{
    if (v->kind != SL__Y_MAP)
        return fail(err, errlen, "%s:%u:%u: %s: expected a mapping", path,
                    v->line, v->col, k->text);
    for (size_t i = 0; i + 1 < v->n; i += 2)
        if (read_key(s, path, k->text, v->kids[i], v->kids[i + 1], err,
                     errlen) != 0)
            return ST_SET_EFILE;
    return 0;
}

/* One key of the file, or of its mapping `group`, with its value. */
static int read_key(st_settings *s, const char *path, const char *group,
                    const sl__ynode *k, const sl__ynode *v, char *err,
                    size_t errlen)
{
    char key[64], where[600];
    const st_setting *row = NULL;
    int n = snprintf(key, sizeof(key), "%s%s%s", group ? group : "",
                     group ? "." : "", k->text);
    /* The table's '.' is the file's nesting, never a key's own. */
    if (strlen(k->text) == k->len && strchr(k->text, '.') == NULL && n > 0 &&
        (size_t)n < sizeof(key))
        row = find_key(s->command, key, (size_t)n);
    if (row == NULL && group == NULL && strlen(k->text) == k->len &&
        is_group(s->command, k->text, k->len))
        return read_group(s, path, k, v, err, errlen);
    if (row == NULL && group != NULL)
        return fail(err, errlen, "%s:%u:%u: %s: unknown key: '%.64s'", path,
                    k->line, k->col, group, k->text);
    if (row == NULL)
        return fail(err, errlen, "%s:%u:%u: unknown key: '%.64s'", path,
                    k->line, k->col, k->text);
    if (row->kind == ST_SET_SECTION)
        return row->section(s->px, path, v, err, errlen) ? ST_SET_EFILE : 0;
    snprintf(where, sizeof(where), "%s:%u:%u: %s", path, v->line, v->col,
             k->text);
    if (v->kind != SL__Y_SCALAR && proxy_wording(row))
        return fail(err, errlen, "%s: expected a scalar", where);
    if (v->kind != SL__Y_SCALAR || strlen(v->text) != v->len)
        return fail(err, errlen, "%s: expected a single value", where);
    const source from = {where, path, v->plain};
    return set(s, row, &from, v->text, v->len, err, errlen);
}

/* The YAML config file at path: 0, or ST_SET_EFILE with
 * "FILE:LINE:COL: message" in err. */
static int read_file(st_settings *s, const char *path, char *err, size_t errlen)
{
    int proxy = s->command == ST_SET_PROXY;
    sv_buf text = {0};
    sl__ynode *root = NULL;
    if (sv_buf_read_file(&text, path,
                         proxy ? PROXY_FILE_BYTES : SERVE_FILE_BYTES, err,
                         errlen) != 0) {
        sv_buf_release(&text);
        return ST_SET_EFILE;
    }
    int rc = sl__yaml_parse(path, text.data ? text.data : "", text.len,
                            proxy ? PROXY_FILE_DEPTH : SERVE_FILE_DEPTH, &root,
                            err, errlen);
    sv_buf_release(&text);
    if (rc != 0)
        return ST_SET_EFILE;
    /* An empty file (root NULL) sets nothing. */
    if (root != NULL && root->kind != SL__Y_MAP)
        rc = fail(err, errlen, "%s:%u:%u: expected a mapping of settings", path,
                  root->line, root->col);
    for (size_t i = 0; rc == 0 && root != NULL && i + 1 < root->n; i += 2)
        rc = read_key(s, path, NULL, root->kids[i], root->kids[i + 1], err,
                      errlen);
    sl__ynode_free(root);
    return rc;
}

/* Acts on one answer of getopt_long. */
static int apply_flag(st_settings *s, int c, char **argv, char *err,
                      size_t errlen)
{
    char where[48];
    if (c == ':') {
        fail(err, errlen, "missing value: '--%s'",
             st_settings_table[optopt - FLAG_VAL(0)].flag);
        return ST_SET_EUSAGE;
    }
    if (c == '?') {
        const char *arg = argv[optind - 1];
        if (optopt >= FLAG_VAL(0)) /* --help=x */
            fail(err, errlen, "--%s: takes no value",
                 st_settings_table[optopt - FLAG_VAL(0)].flag);
        else if (optopt != 0)
            fail(err, errlen, "unknown flag: '-%c'", optopt);
        else
            fail(err, errlen, "unknown flag: '%.*s'", (int)strcspn(arg, "="),
                 arg);
        return ST_SET_EUSAGE;
    }
    const st_setting *row = &st_settings_table[c - FLAG_VAL(0)];
    if (row->kind == ST_SET_HELP)
        return ST_SET_HELP_ASKED;
    if (row->kind == ST_SET_CONFIG)
        return 0;
    snprintf(where, sizeof(where), "--%s", row->flag);
    const source from = {.where = where, .plain = 1};
    if (set(s, row, &from, optarg, strlen(optarg), err, errlen))
        return ST_SET_EUSAGE;
    return 0;
}

/* The rows of the command whose setting is set without the one it
 * needs (a certificate without its key): ST_SET_EFILE with "--a needs
 * --b", or 0.  Checked once all is read, a flag and a key being one. */
static int check_needs(const st_settings *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *row = &st_settings_table[i];
        if (row->needs == NULL || !(row->commands & s->command) ||
            *(const char **)field(s, row) == NULL)
            continue;
        for (size_t j = 0; j < st_settings_count; j++) {
            const st_setting *need = &st_settings_table[j];
            if (need->flag != NULL && (need->commands & s->command) &&
                strcmp(need->flag, row->needs) == 0 &&
                *(const char **)field(s, need) == NULL)
                return fail(err, errlen, "--%s needs --%s", row->flag,
                            row->needs);
        }
    }
    return 0;
}

int st_settings_args(st_settings *s, int argc, char **argv, char *err,
                     size_t errlen)
{
    struct option *opts = calloc(st_settings_count + 1, sizeof(*opts));
    size_t n = 0;
    int c, rc = 0;
    if (opts == NULL)
        return fail(err, errlen, "out of memory");
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *row = &st_settings_table[i];
        if (row->flag != NULL && (row->commands & s->command))
            opts[n++] = (struct option){
                row->flag,
                row->kind == ST_SET_HELP ? no_argument : required_argument,
                NULL, FLAG_VAL(i)};
    }
    if (errlen > 0)
        err[0] = '\0';
    /* Two scans: --config's file first, so that every flag overrides it.
     * optind 0 makes glibc's getopt start afresh, as a second scan (or a
     * proxy reload) needs. */
    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1)
        if (c >= FLAG_VAL(0) &&
            st_settings_table[c - FLAG_VAL(0)].kind == ST_SET_CONFIG)
            s->config = optarg;
    if (s->config != NULL)
        rc = read_file(s, s->config, err, errlen);
    optind = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", opts, NULL)) != -1)
        rc = apply_flag(s, c, argv, err, errlen);
    if (rc == 0 && optind != argc)
        rc = ST_SET_EUSAGE; /* an argument that is no flag's */
    if (rc == 0)
        rc = check_needs(s, err, errlen);
    free(opts);
    return rc;
}

void st_settings_help(unsigned command, FILE *out)
{
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *row = &st_settings_table[i];
        char head[48];
        if (row->flag == NULL || row->help == NULL ||
            !(row->commands & command))
            continue;
        snprintf(head, sizeof(head), "--%s %s", row->flag, row->arg);
        /* A flag too long for the column has its help on the next line. */
        if (strlen(head) < 24)
            fprintf(out, "  %-24s", head);
        else
            fprintf(out, "  %s\n%26s", head, "");
        for (const char *line = row->help;; line++) {
            size_t n = strcspn(line, "\n");
            fprintf(out, "%.*s\n", (int)n, line);
            line += n;
            if (*line == '\0')
                break;
            fprintf(out, "%26s", "");
        }
    }
}

int st_settings_outcome(int rc, const char *err, const char *prog,
                        void (*usage)(FILE *to))
{
    if (rc == 0)
        return -1;
    if (rc == ST_SET_HELP_ASKED) {
        usage(stdout);
        return 0;
    }
    if (err[0] != '\0')
        fprintf(stderr, "%s: %s\n", prog, err);
    if (rc == ST_SET_EUSAGE)
        usage(stderr);
    return 2;
}
