/*
 * serve.c - `sluice serve`: parses the flags into an sl_srv_config and
 * runs the rate-limit decision daemon (src/server/, docs/server.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server/server.h"

static const char serve_usage[] =
    "usage: sluice serve --rules PATH [OPTIONS]\n"
    "\n"
    "Serves rate-limit decisions over HTTP/1.1 (docs/server.md).\n"
    "  --rules PATH            rules file or directory (required)\n"
    "  --listen HOST:PORT      address to listen on (127.0.0.1:8080);\n"
    "                          port 0 picks a free port, printed on stderr\n"
    "  --threads N             event-loop threads (0: one per core)\n"
    "  --store memory          where counters live (only 'memory' so far)\n"
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

static int parse_size(const char *flag, const char *text, size_t min,
                      size_t *out)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*text == '\0' || *text == '-' || *end != '\0' || v < min ||
        v > (1ULL << 40)) {
        fprintf(stderr, "sluice serve: %s: bad value: '%s'\n", flag, text);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_ms(const char *flag, const char *text, uint64_t *out)
{
    sl_nanos ns;
    if (sl_duration_parse(text, strlen(text), &ns) != 0 || ns < SL_NS_PER_MS) {
        fprintf(stderr, "sluice serve: %s: bad duration: '%s'\n", flag, text);
        return -1;
    }
    *out = (uint64_t)(ns / SL_NS_PER_MS);
    return 0;
}

/* HOST:PORT, or [IPv6]:PORT.  host points into a static copy. */
static int parse_listen(const char *text, sl_srv_config *cfg)
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
    fprintf(stderr, "sluice serve: --listen: expected HOST:PORT: '%s'\n", text);
    return -1;
}

int sl_cmd_serve(int argc, char **argv)
{
    sl_srv_config cfg = {
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
    };
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
        {"help", no_argument, NULL, HELP},
        {NULL, 0, NULL, 0},
    };
    size_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case RULES: cfg.rules_path = optarg; break;
        case LISTEN: bad = parse_listen(optarg, &cfg); break;
        case THREADS:
            bad = parse_size("--threads", optarg, 0, &v) || v > 1024;
            cfg.threads = (int)v;
            break;
        case STORE:
            if (strcmp(optarg, "memory") != 0) {
                fprintf(stderr,
                        "sluice serve: --store: unknown store: '%s'"
                        " (only 'memory')\n",
                        optarg);
                bad = 1;
            }
            break;
        case STORE_BYTES:
            bad = parse_size("--store-bytes", optarg, 0, &cfg.store_bytes);
            break;
        case BODY:
            bad =
                parse_size("--max-body-bytes", optarg, 1, &cfg.max_body_bytes);
            break;
        case HEADER:
            bad = parse_size("--max-header-bytes", optarg, 64,
                             &cfg.max_header_bytes);
            break;
        case DESCS:
            bad = parse_size("--max-descriptors", optarg, 1,
                             &cfg.max_descriptors);
            if (!bad && cfg.max_descriptors > SL_MAX_ITEMS) {
                fprintf(stderr, "sluice serve: --max-descriptors: at most %d\n",
                        SL_MAX_ITEMS);
                bad = 1;
            }
            break;
        case ENTRIES:
            bad = parse_size("--max-entries", optarg, 1, &cfg.max_entries) ||
                  cfg.max_entries > SL_RULES_MAX_DEPTH * 64;
            break;
        case IDLE:
            bad = parse_ms("--idle-timeout", optarg, &cfg.idle_timeout_ms);
            break;
        case READ:
            bad = parse_ms("--read-timeout", optarg, &cfg.read_timeout_ms);
            break;
        case CONNS:
            bad = parse_size("--max-connections", optarg, 1, &v) || v > 1000000;
            cfg.max_connections = (int)v;
            break;
        case ADHOC:
            bad = parse_size("--max-adhoc-limits", optarg, 0,
                             &cfg.max_adhoc_limits);
            break;
        case HELP: fputs(serve_usage, stdout); return 0;
        default: bad = 1; break;
        }
        if (bad) {
            fputs(serve_usage, stderr);
            return 2;
        }
    }
    if (cfg.rules_path == NULL || optind != argc) {
        fputs(serve_usage, stderr);
        return 2;
    }
    return sl_server_run(&cfg);
}
