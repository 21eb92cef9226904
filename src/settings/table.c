/*
 * table.c - the settings of `sluice serve` and `sluice proxy`, a row each
 * (settings.h), in the order --help lists them.  A flag's config key is
 * its name with '_' for '-'; the keys without a flag are the proxy file's
 * own (docs/proxy.md, "Config reference"), a '.' in one naming a key of a
 * nested mapping.  Defaults are written as a user would write them and
 * read at start by the same code as the user's values, so a default can
 * never be out of its own bounds.
 */
#include <stddef.h>

#include "log/log.h"
#include "settings.h"

#define SERVE ST_SET_SERVE
#define PROXY ST_SET_PROXY
#define BOTH (ST_SET_SERVE | ST_SET_PROXY)
#define SRV(field) .target = ST_SET_SRV, .offset = offsetof(sv_config, field)
#define PX(field) .target = ST_SET_PX, .offset = offsetof(px_config, field)

/* An ENUM row stores the index of its word. */
_Static_assert(SD_FAIL_LOCAL == 0 && SD_FAIL_OPEN == 1 && SD_FAIL_CLOSED == 2,
               "--redis-failure's values in sl__failure_names' order");
static const char *const hash_tags[] = {"key", "domain", NULL};
static const char *const advisor_modes[] = {"on", "shadow", NULL};
/* "true" was the flag's boolean: sluice's set, as before. */
_Static_assert(SV_GRPC_HEADERS_SLUICE == 1 && SV_GRPC_HEADERS_RATELIMIT == 2,
               "--grpc-rate-limit-headers' words in sv_config's order");
const char *const sv_grpc_header_sets[] = {"false", "true", "ratelimit",
                                           NULL};

/* A listener's own certificate (--grpc-tls-cert, grpc_tls_cert...): three
 * rows, named after its --grpc-listen, each needing the pair whole. */
#define LISTENER_TLS(l, cmds)                                                  \
    {.flag = #l "-tls-cert", .key = #l "_tls_cert", .arg = "PATH",           \
     .commands = cmds, .kind = ST_SET_PATH, SRV(l##_tls.cert),               \
     .needs = #l "-tls-key",                                                 \
     .help = "--" #l "-listen's own PEM certificate chain,\n"                \
             "in place of --tls-cert's and --tls-client-ca's"},              \
    {.flag = #l "-tls-key", .key = #l "_tls_key", .arg = "PATH",             \
     .commands = cmds, .kind = ST_SET_PATH, SRV(l##_tls.key),                \
     .needs = #l "-tls-cert", .help = "its PEM private key"},                \
    {.flag = #l "-tls-client-ca", .key = #l "_tls_client_ca", .arg = "PATH", \
     .commands = cmds, .kind = ST_SET_PATH, SRV(l##_tls.client_ca),          \
     .needs = #l "-tls-cert", .help = "mutual TLS on that listener alone"}

/* A row is one record, its fields read across. */
/* clang-format off */
const st_setting st_settings_table[] = {
    {.flag = "rules", .key = "rules", .arg = "PATH", .commands = BOTH,
     .kind = ST_SET_PATH, SRV(rules_path),
     .help = "rules file or directory (required, here or\n"
             "in the config file)"},
    {.flag = "config", .arg = "FILE", .commands = SERVE, .kind = ST_SET_CONFIG,
     .help = "YAML settings: the flags' names with '_'\n"
             "(max_body_bytes: 4096); flags override it"},
    {.flag = "config", .arg = "FILE", .commands = PROXY, .kind = ST_SET_CONFIG,
     .help = "YAML proxy config: routes and their descriptor\n"
             "actions, upstream, timeouts, queue, trusted\n"
             "proxies, and any flag below with '_' for '-';\n"
             "flags override it"},
    {.flag = "upstream", .key = "upstream", .arg = "URL", .commands = PROXY,
     .kind = ST_SET_UPSTREAM,
     .help = "where requests go: http://HOST:PORT, or\n"
             "https://HOST:PORT (TLS, the certificate verified)"},
    {.flag = "upstream-ca", .key = "upstream_ca", .arg = "PATH",
     .commands = PROXY, .kind = ST_SET_PATH, PX(upstream_ca),
     .help = "PEM CA certificates an https:// upstream's\n"
             "certificate must chain to (default: the\n"
             "system's store)"},
    {.flag = "upstream-server-name", .key = "upstream_server_name",
     .arg = "NAME", .commands = PROXY, .kind = ST_SET_HOST,
     PX(upstream_server_name),
     .help = "the name sent (SNI) and checked in the\n"
             "upstream's certificate (default: the URL's host)"},
    {.flag = "upstream-cert", .key = "upstream_cert", .arg = "PATH",
     .commands = PROXY, .kind = ST_SET_PATH, PX(upstream_cert),
     .help = "PEM client certificate chain presented to an\n"
             "https:// upstream that asks for one"},
    {.flag = "upstream-key", .key = "upstream_key", .arg = "PATH",
     .commands = PROXY, .kind = ST_SET_PATH, PX(upstream_key),
     .help = "its PEM private key"},
    {.flag = "upstream-insecure", .key = "upstream_insecure", .arg = "BOOL",
     .commands = PROXY, .kind = ST_SET_BOOL, PX(upstream_insecure),
     .def = "false",
     .help = "true: do not verify the upstream's certificate\n"
             "(a warning in the log; false)"},
    {.flag = "listen", .key = "listen", .arg = "HOST:PORT", .commands = BOTH,
     .kind = ST_SET_LISTEN, SRV(listen), .def = "127.0.0.1:8080",
     .help = "address to listen on (127.0.0.1:8080);\n"
             "port 0 picks a free port, printed on stderr"},
    {.flag = "resp-listen", .key = "resp_listen", .arg = "HOST:PORT",
     .commands = SERVE, .kind = ST_SET_LISTEN, SRV(resp_listen),
     .help = "also answer the Redis protocol there: CL.THROTTLE,\n"
             "GCRA, SLUICE.CHECK (docs/resp.md); off by default"},
    {.flag = "grpc-listen", .key = "grpc_listen", .arg = "HOST:PORT",
     .commands = SERVE, .kind = ST_SET_LISTEN, SRV(grpc_listen),
     .help = "also serve envoy's Rate Limit Service over gRPC\n"
             "(h2c) here; off by default (docs/server.md)"},
    {.flag = "grpc-rate-limit-headers", .key = "grpc_rate_limit_headers",
     .arg = "H", .commands = SERVE, .kind = ST_SET_ENUM,
     SRV(grpc_rate_limit_headers), .names = sv_grpc_header_sets,
     .def = "false",
     .help = "headers in gRPC answers' response_headers_to_add:\n"
             "false (default), true (sluice's set, as HTTP\n"
             "answers), ratelimit (RateLimit-Limit, -Remaining,\n"
             "-Reset as envoyproxy/ratelimit sends them)"},
    /* envoyproxy/ratelimit's global settings, by its names (SHADOW_MODE,
     * QUOTA_MODE, RESPONSE_DYNAMIC_METADATA; docs/server.md). */
    {.flag = "shadow-mode", .key = "shadow_mode", .arg = "BOOL",
     .commands = SERVE, .kind = ST_SET_BOOL, SRV(shadow_mode), .def = "false",
     .help = "every answer OK, the over-limit ones counted\n"
             "(ratelimit's SHADOW_MODE; false)"},
    {.flag = "quota-mode", .key = "quota_mode", .arg = "BOOL",
     .commands = SERVE, .kind = ST_SET_BOOL, SRV(quota_mode), .def = "false",
     .help = "every limit in quota mode: a request is over\n"
             "only when all its descriptors are (ratelimit's\n"
             "QUOTA_MODE; false)"},
    {.flag = "response-dynamic-metadata", .key = "response_dynamic_metadata",
     .arg = "BOOL", .commands = SERVE, .kind = ST_SET_BOOL,
     SRV(response_dynamic_metadata), .def = "false",
     .help = "answers carry ratelimit's dynamic metadata\n"
             "(the request, the rules' metadata; false)"},
    {.flag = "admin-listen", .key = "admin_listen", .arg = "HOST:PORT",
     .commands = BOTH, .kind = ST_SET_LISTEN, SRV(admin_listen),
     .help = "the admin API there (docs/admin.md): the\n"
             "limits in force, overrides; off by default"},
    {.flag = "tls-cert", .key = "tls_cert", .arg = "PATH", .commands = BOTH,
     .kind = ST_SET_PATH, SRV(tls.cert), .needs = "tls-key",
     .help = "PEM certificate chain: TLS (1.2, 1.3) on every\n"
             "listener without its own, reloaded with the\n"
             "rules (SIGHUP)"},
    {.flag = "tls-key", .key = "tls_key", .arg = "PATH", .commands = BOTH,
     .kind = ST_SET_PATH, SRV(tls.key), .needs = "tls-cert",
     .help = "its PEM private key (mode 0600)"},
    {.flag = "tls-client-ca", .key = "tls_client_ca", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(tls.client_ca),
     .needs = "tls-cert",
     .help = "PEM CA certificates: clients must present a\n"
             "certificate they sign (mutual TLS)"},
    LISTENER_TLS(resp, SERVE),
    LISTENER_TLS(grpc, SERVE),
    LISTENER_TLS(admin, BOTH),
    LISTENER_TLS(metrics, BOTH),
    {.flag = "admin-token-file", .key = "admin_token_file", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(admin_token_file),
     .help = "the admin API's bearer token (its first line);\n"
             "needed for writes and off loopback"},
    {.flag = "metrics-listen", .key = "metrics_listen", .arg = "HOST:PORT",
     .commands = SERVE, .kind = ST_SET_LISTEN, SRV(metrics_listen),
     .help = "answer GET /metrics (and /v1/rules, /healthz,\n"
             "/readyz, /status) there; off by default"},
    {.flag = "public-metrics", .key = "public_metrics", .arg = "BOOL",
     .commands = SERVE, .kind = ST_SET_BOOL, SRV(public_metrics),
     .def = "false",
     .help = "also answer GET /metrics on --listen, to anyone\n"
             "(false: they name clients)"},
    {.flag = "public-status", .key = "public_status", .arg = "BOOL",
     .commands = SERVE, .kind = ST_SET_BOOL, SRV(public_status),
     .def = "false",
     .help = "also answer GET /status and /status.json on\n"
             "--listen, to anyone (false: its hot keys name\n"
             "clients; it is on --metrics-listen)"},
    {.flag = "metrics-listen", .key = "metrics_listen", .arg = "HOST:PORT",
     .commands = PROXY, .kind = ST_SET_LISTEN, SRV(metrics_listen),
     .help = "answer GET /metrics there (docs/proxy.md); off\n"
             "by default, as metrics_path on the proxy's own\n"
             "listener is"},
    {.flag = "adaptive-trace", .key = "adaptive_trace", .arg = "PATH",
     .commands = PROXY, .kind = ST_SET_PATH, SRV(adaptive_trace),
     .help = "append each 1 s window's signals of every\n"
             "`controller: gradient` rule there, for `sluice\n"
             "replay --adaptive` (docs/adaptive.md)"},
    {.flag = "advisor", .key = "advisor", .arg = "URL", .commands = BOTH,
     .kind = ST_SET_HTTP_URL, SRV(advisor_url),
     .help = "poll an advisor for recommended limits\n"
             "(docs/advisor.md): http[s]://HOST:PORT"},
    {.flag = "advisor-ca", .key = "advisor_ca", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(advisor_ca),
     .help = "https advisor: PEM CA certificates its\n"
             "certificate must chain to (default: the system's)"},
    {.flag = "advisor-token-file", .key = "advisor_token_file",
     .arg = "PATH", .commands = BOTH, .kind = ST_SET_PATH,
     SRV(advisor_token_file),
     .help = "send the file's first line to the advisor as\n"
             "a bearer token (Authorization: Bearer)"},
    {.flag = "advisor-interval", .key = "advisor_interval", .arg = "D",
     .commands = BOTH, .kind = ST_SET_MS, SRV(advisor_interval_ms),
     .def = "10s", .help = "how often the advisor is polled (10s)"},
    {.flag = "advisor-timeout", .key = "advisor_timeout", .arg = "D",
     .commands = BOTH, .kind = ST_SET_MS, SRV(advisor_timeout_ms),
     .def = "2s", .help = "how long a poll may take (2s)"},
    {.flag = "advisor-mode", .key = "advisor_mode", .arg = "M",
     .commands = BOTH, .kind = ST_SET_ENUM, SRV(advisor_shadow),
     .names = advisor_modes, .def = "on",
     .help = "on: apply its recommendations; shadow: only\n"
             "record them"},
    {.flag = "threads", .key = "threads", .arg = "N", .commands = BOTH,
     .kind = ST_SET_INT, SRV(threads), .max = 1024, .def = "0",
     .help = "event-loop threads (0: one per core)"},
    {.flag = "store", .key = "store", .arg = "STORE", .commands = BOTH,
     .kind = ST_SET_STORE, .def = "memory",
     .help = "where counters live: memory (the default),\n"
             "redis://[[user]:pass@]host[:port][/db] or\n"
             "unix:/path/redis.sock[?db=N] or\n"
             "redis-cluster://host:port[,host:port...] or\n"
             "redis-sentinel://host:port[,...]/MASTER;\n"
             "rediss://, rediss-cluster://, rediss-sentinel://\n"
             "with TLS"},
    {.flag = "redis-sentinel-password-file",
     .key = "redis_sentinel_password_file", .arg = "PATH", .commands = BOTH,
     .kind = ST_SET_PATH, SRV(redis_sentinel_password_file),
     .help = "redis-sentinel: the Sentinels' own AUTH\n"
             "password (the file's first line)"},
    {.flag = "redis-tls-ca", .key = "redis_tls_ca", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(redis_tls.ca),
     .help = "rediss: PEM CA certificates the servers'\n"
             "must chain to (default: the system's)"},
    {.flag = "redis-tls-cert", .key = "redis_tls_cert", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(redis_tls.cert),
     .help = "rediss: a client certificate (PEM chain)"},
    {.flag = "redis-tls-key", .key = "redis_tls_key", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(redis_tls.key),
     .help = "rediss: its PEM private key"},
    {.flag = "redis-tls-server-name", .key = "redis_tls_server_name",
     .arg = "NAME", .commands = BOTH, .kind = ST_SET_HOST,
     SRV(redis_tls.server_name),
     .help = "rediss: the name the servers' certificates\n"
             "must have, sent as SNI (default: the host)"},
    {.flag = "redis-tls-insecure", .key = "redis_tls_insecure", .arg = "BOOL",
     .commands = BOTH, .kind = ST_SET_BOOL, SRV(redis_tls.insecure),
     .def = "false",
     .help = "rediss: verify nothing (false; for tests\n"
             "only, logged)"},
    {.flag = "redis-timeout", .key = "redis_timeout", .arg = "D|auto",
     .commands = BOTH, .kind = ST_SET_MS, SRV(redis_timeout_ms),
     .zero = "auto", .def = "auto",
     .help = "wait on Redis per call, then fail; auto\n"
             "(default): 4 x p99 round trip, 50ms..1s"},
    {.flag = "redis-failure", .key = "redis_failure", .arg = "P",
     .commands = BOTH, .kind = ST_SET_ENUM, SRV(redis_failure),
     .names = sl__failure_names, .def = "local",
     .help = "when Redis cannot decide: local (default;\n"
             "the embedded store, limits divided by\n"
             "--nodes), fail_open, fail_closed (503)"},
    {.flag = "redis-breaker", .key = "redis_breaker", .arg = "N",
     .commands = BOTH, .kind = ST_SET_INT, SRV(redis_breaker), .min = 1,
     .max = 10000, .def = "3",
     .help = "consecutive failures that open the circuit\n"
             "breaker (3)"},
    {.flag = "redis-hash-tag", .key = "redis_hash_tag", .arg = "T",
     .commands = BOTH, .kind = ST_SET_ENUM, SRV(redis_tag_domain),
     .names = hash_tags, .def = "key",
     .help = "Redis Cluster: keys sharing a slot, so a\n"
             "request decided atomically: key (default;\n"
             "each descriptor's) or domain (all of it)"},
    {.flag = "nodes", .key = "nodes", .arg = "N|auto", .commands = BOTH,
     .kind = ST_SET_INT, SRV(nodes), .min = 1, .max = 10000, .zero = "auto",
     .def = "auto",
     .help = "sluice serve nodes sharing the Redis: the\n"
             "local policy's divisor; auto (default)\n"
             "counts the live ones through Redis"},
    {.flag = "negative-cache-bytes", .key = "negative_cache_bytes",
     .arg = "N", .commands = BOTH, .kind = ST_SET_SIZE,
     SRV(negative_cache_bytes), .max = SL_MAX_COUNT, .def = "4194304",
     .help = "--store redis: memory of the refusals answered\n"
             "without Redis until they may pass, all threads\n"
             "(4194304; 0: ask Redis every time)"},
    {.flag = "lease-bytes", .key = "lease_bytes", .arg = "N",
     .commands = BOTH, .kind = ST_SET_SIZE, SRV(lease_bytes),
     .max = SL_MAX_COUNT, .def = "4194304",
     .help = "--store redis: memory of the leases of rules\n"
             "with sync: {mode: lease}, all threads\n"
             "(4194304; 0: no leases, every decision exact)"},
    {.flag = "store-bytes", .key = "store_bytes", .arg = "N", .commands = BOTH,
     .kind = ST_SET_SIZE, SRV(store_bytes), .max = SL_MAX_COUNT, .def = "0",
     .help = "memory cap of the store (0: 256 MiB)"},
    {.flag = "resp-store-bytes", .key = "resp_store_bytes", .arg = "N",
     .commands = SERVE, .kind = ST_SET_SIZE, SRV(resp_store_bytes),
     .min = 1, .max = SL_MAX_COUNT, .def = "33554432",
     .help = "memory cap of the state of CL.THROTTLE and GCRA\n"
             "keys, kept apart from the rules' (33554432)"},
    {.flag = "state-file", .key = "state_file", .arg = "PATH",
     .commands = BOTH, .kind = ST_SET_PATH, SRV(state_file),
     .help = "keep the memory store's counters across\n"
             "restarts: loaded at start, saved every\n"
             "--state-save-interval, on SIGUSR1 and on exit"},
    {.flag = "state-save-interval", .key = "state_save_interval", .arg = "D",
     .commands = BOTH, .kind = ST_SET_MS, SRV(state_save_interval_ms),
     .def = "30s", .help = "how often --state-file is saved (30s)"},
    {.flag = "state-required", .key = "state_required", .arg = "BOOL",
     .commands = BOTH, .kind = ST_SET_BOOL, SRV(state_required),
     .def = "false",
     .help = "a --state-file that exists but cannot be used\n"
             "stops the start, instead of starting empty\n"
             "(false)"},
    {.flag = "max-body-bytes", .key = "max_body_bytes", .arg = "N",
     .commands = BOTH, .kind = ST_SET_SIZE, SRV(max_body_bytes), .min = 1,
     .max = SL_MAX_COUNT, .def = "65536",
     .help = "largest request body (65536)"},
    {.flag = "max-header-bytes", .key = "max_header_bytes", .arg = "N",
     .commands = BOTH, .kind = ST_SET_SIZE, SRV(max_header_bytes), .min = 64,
     .max = SL_MAX_COUNT, .def = "8192",
     .help = "largest request line plus headers (8192)"},
    {.flag = "max-descriptors", .key = "max_descriptors", .arg = "N",
     .commands = BOTH, .kind = ST_SET_SIZE, SRV(max_descriptors), .min = 1,
     .max = SV_MAX_DESCRIPTORS, .def = "64",
     .help = "descriptors per request (64)"},
    {.flag = "max-entries", .key = "max_entries", .arg = "N", .commands = BOTH,
     .kind = ST_SET_SIZE, SRV(max_entries), .min = 1,
     .max = SL_RULES_MAX_DEPTH * 64, .def = "16",
     .help = "entries per descriptor (16)"},
    {.flag = "idle-timeout", .key = "idle_timeout", .arg = "D",
     .commands = BOTH, .kind = ST_SET_MS, SRV(idle_timeout_ms), .def = "60s",
     .help = "close idle keep-alive connections (60s)"},
    {.flag = "read-timeout", .key = "read_timeout", .arg = "D",
     .commands = BOTH, .kind = ST_SET_MS, SRV(read_timeout_ms), .def = "10s",
     .help = "a request must arrive within (10s)"},
    {.flag = "write-timeout", .key = "write_timeout", .arg = "D",
     .commands = SERVE, .kind = ST_SET_MS, SRV(write_timeout_ms),
     .def = "10s",
     .help = "an answer the client does not take within D is\n"
             "given up: its gRPC stream is reset (10s)"},
    {.flag = "max-connections", .key = "max_connections", .arg = "N",
     .commands = BOTH, .kind = ST_SET_INT, SRV(max_connections), .min = 1,
     .max = 1000000, .def = "10000",
     .help = "open connections; more are closed (10000)"},
    {.flag = "max-connections-per-address",
     .key = "max_connections_per_address", .arg = "N", .commands = BOTH,
     .kind = ST_SET_SIZE, SRV(max_connections_per_address), .max = 1000000,
     .def = "0",
     .help = "open connections from one client address; more\n"
             "are closed (0: no cap, the default)"},
    {.flag = "max-adhoc-limits", .key = "max_adhoc_limits", .arg = "N",
     .commands = BOTH, .kind = ST_SET_SIZE, SRV(max_adhoc_limits),
     .max = SL_MAX_COUNT, .def = "10000",
     .help = "ad hoc limits of /v1/delay and /v1/increment\n"
             "cached at once (10000)"},
    {.flag = "max-metric-series", .key = "max_metric_series", .arg = "N",
     .commands = BOTH, .kind = ST_SET_SIZE, SRV(max_metric_series),
     .max = SL_MAX_COUNT, .def = "10000",
     .help = "per-value series of detailed_metric rules in\n"
             "/metrics, all threads; past it a rule's new\n"
             "values count as descriptor=\"_overflow_\" (10000)"},
    {.flag = "metric-series-idle", .key = "metric_series_idle", .arg = "D",
     .commands = BOTH, .kind = ST_SET_MS, SRV(metric_series_idle_ms),
     .def = "10m",
     .help = "a per-value series not counted for this long\n"
             "leaves /metrics (10m)"},
    {.flag = "log-format", .key = "log_format", .arg = "F", .commands = BOTH,
     .kind = ST_SET_ENUM, SRV(log_json), .names = sl__log_format_names,
     .def = "text", .help = "the log: text (default), or json: an object\n"
             "per line (docs/operations.md)"},
    {.flag = "log-level", .key = "log_level", .arg = "L", .commands = BOTH,
     .kind = ST_SET_ENUM, SRV(log_level), .names = sl__log_level_names,
     .def = "info", .help = "the least logged: debug, info, warn, error"},
    {.key = "upstream_pool", .commands = PROXY, .kind = ST_SET_SIZE,
     PX(pool_max), .max = 100000, .def = "64"},
    {.key = "timeouts.connect", .commands = PROXY, .kind = ST_SET_MS,
     PX(connect_timeout_ms), .def = "1s"},
    {.key = "timeouts.response", .commands = PROXY, .kind = ST_SET_MS,
     PX(response_timeout_ms), .def = "30s"},
    {.key = "queue.max_requests", .commands = PROXY, .kind = ST_SET_SIZE,
     PX(queue_max), .max = 1000000, .def = "1000"},
    {.key = "queue.max_wait", .commands = PROXY, .kind = ST_SET_MS,
     PX(queue_max_wait_ms), .def = "5s"},
    {.key = "rate_limit_headers", .commands = PROXY, .kind = ST_SET_BOOL,
     PX(rate_limit_headers), .def = "true"},
    {.key = "metrics_path", .commands = PROXY, .kind = ST_SET_URL_PATH,
     PX(metrics_path)},
    {.key = "trusted_proxies", .commands = PROXY, .kind = ST_SET_SECTION,
     .section = px_read_trusted},
    {.key = "routes", .commands = PROXY, .kind = ST_SET_SECTION,
     .section = px_read_routes},
    {.flag = "help", .commands = BOTH, .kind = ST_SET_HELP},
};
/* clang-format on */

const size_t st_settings_count =
    sizeof(st_settings_table) / sizeof(st_settings_table[0]);
