/*
 * proxy.c - `sluice proxy`: the flags and the config file into an
 * sl_srv_config (the server's settings, shared with `sluice serve`) and an
 * sl_px_config (the proxy's own), then the reverse proxy of src/proxy/
 * (docs/proxy.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "proxy/proxy.h"

static const char proxy_usage[] =
    "usage: sluice proxy --rules PATH --upstream http://HOST:PORT\n"
    "                    [--config FILE] [--listen HOST:PORT] [OPTIONS]\n"
    "\n"
    "A rate-limiting HTTP/1.1 reverse proxy (docs/proxy.md).\n"
    "  --config FILE        YAML proxy config: routes and their descriptor\n"
    "                       actions, upstream, timeouts, queue, trusted\n"
    "                       proxies, and any flag below with '_' for '-';\n"
    "                       flags override it\n"
    "  --upstream URL       where requests go: http://HOST:PORT\n"
    "  --rules PATH         rules file or directory\n"
    "  --listen HOST:PORT   address to listen on (127.0.0.1:8080)\n"
    "  --store STORE        where counters live: memory (the default) or\n"
    "                       redis://... / unix:... shared by several proxies,\n"
    "                       with --redis-timeout, --redis-failure,\n"
    "                       --redis-breaker and --nodes as in sluice serve\n"
    "  and every other flag of `sluice serve` (threads, timeouts, caps).\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n";

/* What reading the config needs and makes: the server's settings keep
 * pointers to their values (the store URL, the rules path), which must
 * outlive the YAML tree, so every value is copied (a relative rules path
 * taken from the config's directory) and the copies freed after the
 * run. */
#define MAX_SETTINGS 64

typedef struct owned {
    const char *config;
    char *values[MAX_SETTINGS];
    size_t n_values;
    sl_srv_config *scfg;
} owned;

static int other_setting(void *ctx, const char *key, const char *where,
                         const char *value)
{
    owned *o = ctx;
    char flag[40];
    size_t i = 0;
    if (strchr(key, '-') != NULL || strlen(key) >= sizeof(flag))
        return -2;
    for (; key[i]; i++)
        flag[i] = key[i] == '_' ? '-' : key[i];
    flag[i] = '\0';
    const char *slash = strrchr(o->config, '/');
    size_t dl = strcmp(flag, "rules") == 0 && value[0] != '/' && slash
                    ? (size_t)(slash - o->config) + 1
                    : 0;
    /* Duplicate keys are refused by the loader: MAX_SETTINGS is never
     * reached by a valid file. */
    char *copy =
        o->n_values < MAX_SETTINGS ? malloc(dl + strlen(value) + 1) : NULL;
    if (copy == NULL) {
        fprintf(stderr, "sluice proxy: %s: out of memory\n", where);
        return -1;
    }
    memcpy(copy, o->config, dl);
    strcpy(copy + dl, value);
    o->values[o->n_values++] = copy;
    return sl_serve_setting(flag, where, copy, o->scfg);
}

static void owned_release(owned *o)
{
    for (size_t i = 0; i < o->n_values; i++)
        free(o->values[i]);
    o->n_values = 0;
}

/* Where the proxy config comes from, at start and on each reload: the
 * config file, then --upstream over it. */
typedef struct source {
    const char *config;   /* NULL: flags only */
    const char *upstream; /* --upstream, or NULL */
} source;

/* A new proxy config from src; the file's server settings go to o's
 * sl_srv_config.  0 with *out, or -1 with a message in err. */
static int load(const source *src, owned *o, sl_px_config **out, char *err,
                size_t errlen)
{
    char msg[512];
    sl_px_config *cfg = sl_px_config_new();
    if (cfg == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (src->config != NULL &&
        sl_px_config_load(src->config, cfg, other_setting, o, err, errlen) != 0)
        goto fail;
    if (src->upstream != NULL &&
        sl_px_set_upstream(cfg, src->upstream, msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "--upstream: %s", msg);
        goto fail;
    }
    if (cfg->upstream == NULL) {
        snprintf(err, errlen, "no upstream (--upstream or `upstream:`)");
        goto fail;
    }
    *out = cfg;
    return 0;
fail:
    sl_px_config_free(cfg);
    return -1;
}

/* SIGHUP: the file again.  Its server settings are checked (a bad one
 * fails the reload) but not applied: the threads, listener and store
 * are made once, at start. */
static int reload(void *ctx, sl_px_config **out, char *err, size_t errlen)
{
    sl_srv_config unused;
    sl_serve_defaults(&unused, "sluice proxy");
    owned o = {.config = ((const source *)ctx)->config, .scfg = &unused};
    int rc = load(ctx, &o, out, err, errlen);
    owned_release(&o);
    return rc;
}

/* The value of --NAME VALUE or --NAME=VALUE, the last one given. */
static const char *flag_value(int argc, char **argv, const char *name)
{
    const char *value = NULL;
    size_t nl = strlen(name);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, nl) != 0)
            continue;
        if (a[2 + nl] == '=')
            value = a + 3 + nl;
        else if (a[2 + nl] == '\0' && i + 1 < argc)
            value = argv[++i];
    }
    return value;
}

int sl_cmd_proxy(int argc, char **argv)
{
    sl_srv_config scfg;
    sl_px_config *pcfg = NULL;
    char err[600];
    source src = {flag_value(argc, argv, "config"),
                  flag_value(argc, argv, "upstream")};
    owned o = {.config = src.config, .scfg = &scfg};
    int status = 2;

    sl_serve_defaults(&scfg, "sluice proxy");
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0) {
            fputs(proxy_usage, stdout);
            return 0;
        }
    /* The file first: every flag overrides it. */
    if (load(&src, &o, &pcfg, err, sizeof(err)) != 0) {
        if (err[0] != '\0') /* "": a setting said what was wrong */
            fprintf(stderr, "sluice proxy: %s\n", err);
        goto out;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value;
        char flag[40];
        if (strncmp(a, "--", 2) != 0)
            goto usage;
        const char *eq = strchr(a, '=');
        size_t fl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (fl >= sizeof(flag))
            goto usage;
        memcpy(flag, a + 2, fl);
        flag[fl] = '\0';
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else
            goto usage;
        if (strcmp(flag, "config") == 0 || strcmp(flag, "upstream") == 0)
            continue;
        char where[48];
        snprintf(where, sizeof(where), "--%s", flag);
        int rc = sl_serve_setting(flag, where, value, &scfg);
        if (rc == -2)
            fprintf(stderr, "sluice proxy: unknown flag: '--%s'\n", flag);
        if (rc != 0)
            goto usage;
    }
    if (scfg.rules_path == NULL)
        goto usage;
    status = sl_proxy_run(&scfg, pcfg, src.config ? reload : NULL, &src);
    pcfg = NULL; /* the run took it */
    goto out;
usage:
    fputs(proxy_usage, stderr);
out:
    sl_px_config_free(pcfg);
    owned_release(&o);
    return status;
}
