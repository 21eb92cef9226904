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
    "  --store memory       where counters live (redis:// is not supported by\n"
    "                       the proxy yet)\n"
    "  and every other flag of `sluice serve` (threads, timeouts, caps).\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n";

/* What reading the config needs and makes: the rules path outlives the
 * YAML tree, so it is copied (and taken from the config's directory
 * when relative); freed after the run. */
typedef struct owned {
    const char *config;
    char *rules;
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
    if (strcmp(flag, "rules") == 0) {
        const char *slash = strrchr(o->config, '/');
        size_t dl = value[0] != '/' && slash ? (size_t)(slash - o->config) + 1
                                              : 0;
        free(o->rules);
        o->rules = malloc(dl + strlen(value) + 1);
        if (o->rules == NULL)
            return -1;
        memcpy(o->rules, o->config, dl);
        strcpy(o->rules + dl, value);
        value = o->rules;
    }
    return sl_serve_setting(flag, where, value, o->scfg);
}

int sl_cmd_proxy(int argc, char **argv)
{
    sl_srv_config scfg;
    static sl_px_config pcfg; /* large: the routes are inline */
    char err[600];
    const char *config = NULL, *upstream = NULL;
    owned o = {NULL, NULL, &scfg};
    int status = 2;

    sl_serve_defaults(&scfg);
    sl_px_config_defaults(&pcfg);
    pcfg.metrics_path = strdup(SL_PX_METRICS_PATH);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            fputs(proxy_usage, stdout);
            status = 0;
            goto out;
        }
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
    }
    o.config = config;
    if (config != NULL && sl_px_config_load(config, &pcfg, other_setting, &o,
                                            err, sizeof(err)) != 0) {
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
        if (strcmp(flag, "config") == 0)
            continue;
        if (strcmp(flag, "upstream") == 0) {
            upstream = value;
            continue;
        }
        char where[48];
        snprintf(where, sizeof(where), "--%s", flag);
        int rc = sl_serve_setting(flag, where, value, &scfg);
        if (rc == -2)
            fprintf(stderr, "sluice proxy: unknown flag: '--%s'\n", flag);
        if (rc != 0)
            goto usage;
    }
    if (upstream != NULL &&
        sl_px_set_upstream(&pcfg, upstream, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice proxy: --upstream: %s\n", err);
        goto out;
    }
    if (pcfg.upstream == NULL || scfg.rules_path == NULL)
        goto usage;
    if (scfg.redis_url != NULL) {
        /* The proxy's decision call is synchronous; waiting on Redis needs
         * the replay of store_redis.c, which its client does not do yet. */
        fprintf(stderr, "sluice proxy: --store redis: not supported yet, the "
                        "proxy decides on the memory store; for limits shared "
                        "through Redis, run sluice serve --store redis behind "
                        "nginx (docs/nginx.md)\n");
        goto out;
    }
    status = sl_proxy_run(&scfg, &pcfg);
    goto out;
usage:
    fputs(proxy_usage, stderr);
out:
    sl_px_config_release(&pcfg);
    free(o.rules);
    return status;
}
