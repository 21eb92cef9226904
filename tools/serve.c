/*
 * serve.c - `sluice serve`: parses the flags into an sl_srv_config and
 * runs the rate-limit decision daemon (src/server/, docs/server.md).
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rules/rules_internal.h"
#include "server/server.h"

/* Largest --config file read. */
#define SL_SRV_MAX_CONFIG_BYTES (64 * 1024)

static const char serve_usage[] =
    "usage: sluice serve --rules PATH [OPTIONS]\n"
    "\n"
    "Serves rate-limit decisions over HTTP/1.1 (docs/server.md).\n"
    "  --rules PATH            rules file or directory (required, here or\n"
    "                          in the config file)\n"
    "  --config FILE           YAML settings: the flags' names with '_'\n"
    "                          (max_body_bytes: 4096); flags override it\n"
    "  --listen HOST:PORT      address to listen on (127.0.0.1:8080);\n"
    "                          port 0 picks a free port, printed on stderr\n"
    "  --threads N             event-loop threads (0: one per core)\n"
    "  --store STORE           where counters live: memory (the default),\n"
    "                          redis://[[user]:pass@]host[:port][/db] or\n"
    "                          unix:/path/redis.sock[?db=N] or\n"
    "                          redis-cluster://host:port[,host:port...]\n"
    "  --redis-timeout D       wait on Redis per call, then fail (5ms)\n"
    "  --redis-failure P       when Redis cannot decide: local (default;\n"
    "                          the embedded store, limits divided by\n"
    "                          --nodes), fail_open, fail_closed (503)\n"
    "  --redis-breaker N       consecutive failures that open the circuit\n"
    "                          breaker (3)\n"
    "  --redis-hash-tag T      Redis Cluster: keys sharing a slot, so a\n"
    "                          request decided atomically: key (default;\n"
    "                          each descriptor's) or domain (all of it)\n"
    "  --nodes N|auto          sluice serve nodes sharing the Redis: the\n"
    "                          local policy's divisor (1); auto counts the\n"
    "                          live ones through Redis\n"
    "  --store-bytes N         memory cap of the store (0: 256 MiB)\n"
    "  --max-body-bytes N      largest request body (65536)\n"
    "  --max-header-bytes N    largest request line plus headers (8192)\n"
    "  --max-descriptors N     descriptors per request (64)\n"
    "  --max-entries N         entries per descriptor (16)\n"
    "  --idle-timeout D        close idle keep-alive connections (60s)\n"
    "  --read-timeout D        a request must arrive within (10s)\n"
    "  --max-connections N     open connections; more are closed (10000)\n"
    "  --max-adhoc-limits N    ad hoc limits of /v1/delay and /v1/increment\n"
    "                          cached at once (10000)\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 failure, 2 usage.\n";

/* The command whose settings these are ("sluice serve", "sluice proxy"),
 * which every message of this file starts with. */
static const char *prog = "sluice serve";

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* Where a value came from, for messages: "--threads" for a flag, or
 * "FILE:LINE:COL: threads" for a key of the --config file. */
static int parse_size(const char *where, const char *text, size_t min,
                      size_t *out)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*text == '\0' || *text == '-' || *end != '\0' || v < min ||
        v > (1ULL << 40)) {
        say("%s: bad value: '%s'\n", where, text);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_ms(const char *where, const char *text, uint64_t *out)
{
    sl_nanos ns;
    if (sl_duration_parse(text, strlen(text), &ns) != 0 || ns < SL_NS_PER_MS) {
        say("%s: bad duration: '%s'\n", where, text);
        return -1;
    }
    *out = (uint64_t)(ns / SL_NS_PER_MS);
    return 0;
}

/* HOST:PORT, or [IPv6]:PORT.  host points into a static copy. */
static int parse_listen(const char *where, const char *text,
                        sl_srv_config *cfg)
{
    static char host[256];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || (size_t)(colon - text) >= sizeof(host))
        goto bad;
    size_t hl = (size_t)(colon - text);
    const char *h = text;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (hl == 0 || colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535)
        goto bad;
    cfg->listen_host = host;
    cfg->listen_port = (int)port;
    return 0;
bad:
    say("%s: expected HOST:PORT: '%s'\n", where,
            text);
    return -1;
}

enum {
    RULES = 1,
    LISTEN,
    THREADS,
    STORE,
    STORE_BYTES,
    BODY,
    HEADER,
    DESCS,
    ENTRIES,
    IDLE,
    READ,
    CONNS,
    ADHOC,
    CONFIG,
    REDIS_TIMEOUT,
    REDIS_FAILURE,
    REDIS_BREAKER,
    REDIS_HASH_TAG,
    NODES,
    HELP
};

static const struct option opts[] = {
    {"rules", required_argument, NULL, RULES},
    {"listen", required_argument, NULL, LISTEN},
    {"threads", required_argument, NULL, THREADS},
    {"store", required_argument, NULL, STORE},
    {"store-bytes", required_argument, NULL, STORE_BYTES},
    {"max-body-bytes", required_argument, NULL, BODY},
    {"max-header-bytes", required_argument, NULL, HEADER},
    {"max-descriptors", required_argument, NULL, DESCS},
    {"max-entries", required_argument, NULL, ENTRIES},
    {"idle-timeout", required_argument, NULL, IDLE},
    {"read-timeout", required_argument, NULL, READ},
    {"max-connections", required_argument, NULL, CONNS},
    {"max-adhoc-limits", required_argument, NULL, ADHOC},
    {"config", required_argument, NULL, CONFIG},
    {"redis-timeout", required_argument, NULL, REDIS_TIMEOUT},
    {"redis-failure", required_argument, NULL, REDIS_FAILURE},
    {"redis-breaker", required_argument, NULL, REDIS_BREAKER},
    {"redis-hash-tag", required_argument, NULL, REDIS_HASH_TAG},
    {"nodes", required_argument, NULL, NODES},
    {"help", no_argument, NULL, HELP},
    {NULL, 0, NULL, 0},
};

/* Applies one setting, from a flag or the config file.  0 or -1 (the
 * message is printed). */
static int apply(int opt, const char *where, const char *val,
                 sl_srv_config *cfg)
{
    size_t v;
    int bad = 0;
    switch (opt) {
    case RULES: cfg->rules_path = val; break;
    case LISTEN: return parse_listen(where, val, cfg);
    case THREADS:
        bad = parse_size(where, val, 0, &v);
        if (!bad && v > 1024) {
            say("%s: at most 1024: '%s'\n", where,
                    val);
            bad = 1;
        }
        if (!bad)
            cfg->threads = (int)v;
        break;
    case STORE:
        if (strcmp(val, "memory") == 0) {
            cfg->redis_url = NULL;
        } else if (strncmp(val, "redis://", 8) == 0 ||
                   strncmp(val, "unix:", 5) == 0 ||
                   strncmp(val, "redis-cluster://", 16) == 0) {
            cfg->redis_url = val; /* checked by sl_redis_store_new */
        } else if (strncmp(val, "rediss://", 9) == 0) {
            /* hiredis 0.14, Debian 12's, has no TLS (docs/stores.md). */
            say("%s: rediss:// (TLS) is not supported: '%s'; reach a "
                "remote Redis through a TLS tunnel on loopback or a unix "
                "socket\n",
                where, val);
            bad = 1;
        } else {
            say("%s: unknown store: '%s' (memory, "
                    "redis://..., unix:... or redis-cluster://...)\n",
                    where, val);
            bad = 1;
        }
        break;
    case REDIS_TIMEOUT:
        return parse_ms(where, val, &cfg->redis_timeout_ms);
    case REDIS_FAILURE:
        if (strcmp(val, "local") == 0)
            cfg->redis_failure = SL_SRV_FAIL_LOCAL;
        else if (strcmp(val, "fail_open") == 0)
            cfg->redis_failure = SL_SRV_FAIL_OPEN;
        else if (strcmp(val, "fail_closed") == 0)
            cfg->redis_failure = SL_SRV_FAIL_CLOSED;
        else {
            say("%s: expected local, fail_open or "
                    "fail_closed: '%s'\n",
                    where, val);
            bad = 1;
        }
        break;
    case REDIS_HASH_TAG:
        if (strcmp(val, "key") == 0 || strcmp(val, "domain") == 0) {
            cfg->redis_tag_domain = val[0] == 'd';
        } else {
            say("%s: expected key or domain: '%s'\n",
                    where, val);
            bad = 1;
        }
        break;
    case REDIS_BREAKER:
    case NODES:
        if (opt == NODES && strcmp(val, "auto") == 0) {
            cfg->nodes = SL_SRV_NODES_AUTO;
            break;
        }
        bad = parse_size(where, val, 1, &v);
        if (!bad && v > 10000) {
            say("%s: at most 10000: '%s'\n", where,
                    val);
            bad = 1;
        }
        if (!bad)
            *(opt == NODES ? &cfg->nodes : &cfg->redis_breaker) = (int)v;
        break;
    case STORE_BYTES: return parse_size(where, val, 0, &cfg->store_bytes);
    case BODY: return parse_size(where, val, 1, &cfg->max_body_bytes);
    case HEADER: return parse_size(where, val, 64, &cfg->max_header_bytes);
    case DESCS:
        bad = parse_size(where, val, 1, &cfg->max_descriptors);
        if (!bad && cfg->max_descriptors > SL_MAX_ITEMS) {
            say("%s: at most %d: '%s'\n", where,
                    SL_MAX_ITEMS, val);
            bad = 1;
        }
        break;
    case ENTRIES:
        bad = parse_size(where, val, 1, &cfg->max_entries);
        if (!bad && cfg->max_entries > SL_RULES_MAX_DEPTH * 64) {
            say("%s: at most %d: '%s'\n", where,
                    SL_RULES_MAX_DEPTH * 64, val);
            bad = 1;
        }
        break;
    case IDLE: return parse_ms(where, val, &cfg->idle_timeout_ms);
    case READ: return parse_ms(where, val, &cfg->read_timeout_ms);
    case CONNS:
        bad = parse_size(where, val, 1, &v);
        if (!bad && v > 1000000) {
            say("%s: at most 1000000: '%s'\n", where,
                    val);
            bad = 1;
        }
        if (!bad)
            cfg->max_connections = (int)v;
        break;
    case ADHOC: return parse_size(where, val, 0, &cfg->max_adhoc_limits);
    default: bad = 1; break;
    }
    return bad ? -1 : 0;
}

/*
 * The --config file: one YAML mapping whose keys are the long flags with
 * '_' for '-' (max_body_bytes) and whose values are scalars as the flags
 * take them.  A relative `rules` path is taken from the file's directory.
 * Flags given on the command line override the file.  Returns 0, or -1
 * after printing FILE:LINE:COL: message.  *tree keeps the strings cfg
 * points to; the caller frees it after the server has stopped.
 */
static int load_config(const char *path, sl_srv_config *cfg,
                       sl__ynode **tree, char **rules_buf)
{
    char err[512];
    sl_buf text = {0};
    if (sl_buf_read_file(&text, path, SL_SRV_MAX_CONFIG_BYTES, err,
                         sizeof(err))) {
        say("%s\n", err);
        sl_buf_release(&text);
        return -1;
    }
    int rc = sl__yaml_parse(path, text.data ? text.data : "", text.len, 4,
                            tree, err, sizeof(err));
    sl_buf_release(&text);
    if (rc != 0) {
        say("%s\n", err);
        return -1;
    }
    const sl__ynode *root = *tree;
    if (root == NULL)
        return 0; /* an empty file sets nothing */
    if (root->kind != SL__Y_MAP) {
        say("%s:%u:%u: expected a mapping of "
                        "settings\n",
                path, root->line, root->col);
        return -1;
    }
    for (size_t i = 0; i + 1 < root->n; i += 2) {
        const sl__ynode *k = root->kids[i], *v = root->kids[i + 1];
        char flag[32];
        size_t j = 0;
        for (; j < k->len && j + 1 < sizeof(flag); j++)
            flag[j] = k->text[j] == '_' ? '-' : k->text[j];
        flag[j] = '\0';
        int opt = 0;
        for (const struct option *o = opts; o->name && k->len < sizeof(flag);
             o++)
            if (strcmp(o->name, flag) == 0 && strchr(k->text, '-') == NULL)
                opt = o->val;
        if (opt == 0 || opt == CONFIG || opt == HELP) {
            say("%s:%u:%u: unknown key: '%.64s'\n",
                    path, k->line, k->col, k->text);
            return -1;
        }
        char where[600];
        snprintf(where, sizeof(where), "%s:%u:%u: %s", path, v->line, v->col,
                 k->text);
        if (v->kind != SL__Y_SCALAR || strlen(v->text) != v->len) {
            say("%s: expected a single value\n",
                    where);
            return -1;
        }
        const char *val = v->text;
        if (opt == RULES && val[0] != '/' && strrchr(path, '/') != NULL) {
            size_t dl = (size_t)(strrchr(path, '/') - path) + 1;
            free(*rules_buf);
            *rules_buf = malloc(dl + v->len + 1);
            if (*rules_buf == NULL) {
                say("out of memory\n");
                return -1;
            }
            memcpy(*rules_buf, path, dl);
            memcpy(*rules_buf + dl, val, v->len + 1);
            val = *rules_buf;
        }
        if (apply(opt, where, val, cfg) != 0)
            return -1;
    }
    return 0;
}

void sl_serve_defaults(sl_srv_config *cfg, const char *command)
{
    prog = command;
    *cfg = (sl_srv_config){
        .listen_host = "127.0.0.1",
        .listen_port = 8080,
        .max_body_bytes = SL_SRV_MAX_BODY_BYTES,
        .max_header_bytes = SL_SRV_MAX_HEADER_BYTES,
        .max_descriptors = SL_SRV_MAX_DESCRIPTORS,
        .max_entries = SL_SRV_MAX_ENTRIES,
        .idle_timeout_ms = SL_SRV_IDLE_TIMEOUT_MS,
        .read_timeout_ms = SL_SRV_READ_TIMEOUT_MS,
        .max_connections = SL_SRV_MAX_CONNECTIONS,
        .max_adhoc_limits = SL_SRV_MAX_ADHOC_LIMITS,
        .redis_timeout_ms = SL_SRV_DEFAULT_REDIS_TIMEOUT_MS,
        .redis_failure = SL_SRV_FAIL_LOCAL,
        .redis_breaker = SL_SRV_DEFAULT_REDIS_BREAKER,
        .nodes = 1,
    };
}

int sl_serve_setting(const char *flag, const char *where, const char *value,
                     sl_srv_config *cfg)
{
    for (const struct option *o = opts; o->name; o++)
        if (strcmp(o->name, flag) == 0 && o->val != CONFIG && o->val != HELP)
            return apply(o->val, where, value, cfg);
    return -2;
}

int sl_cmd_serve(int argc, char **argv)
{
    sl_srv_config cfg;
    sl_serve_defaults(&cfg, "sluice serve");
    /* Two passes: --config first, so that every flag overrides it. */
    const char *config = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
        if (c == CONFIG)
            config = optarg;
    opterr = 1;
    sl__ynode *tree = NULL;
    char *rules_buf = NULL;
    int status = 2;
    if (config != NULL && load_config(config, &cfg, &tree, &rules_buf) != 0)
        goto out;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char where[32];
        if (c == HELP) {
            fputs(serve_usage, stdout);
            status = 0;
            goto out;
        }
        if (c == CONFIG)
            continue;
        for (const struct option *o = opts; o->name; o++)
            if (o->val == c)
                snprintf(where, sizeof(where), "--%s", o->name);
        if (c == '?' || apply(c, where, optarg, &cfg) != 0) {
            fputs(serve_usage, stderr);
            goto out;
        }
    }
    if (cfg.rules_path == NULL || optind != argc) {
        fputs(serve_usage, stderr);
        goto out;
    }
    status = sl_server_run(&cfg);
out:
    sl__ynode_free(tree);
    free(rules_buf);
    return status;
}
