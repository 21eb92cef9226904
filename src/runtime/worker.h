/*
 * worker.h - the daemon's process as its files share it: the settings, the
 * caps on untrusted input, the process (sv_server) and its event-loop
 * threads (sv_worker), their counters and clock.  server.c runs them.
 */
#ifndef SV_WORKER_H
#define SV_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "decision/decision.h"
#include "runtime/buf.h"
#include "runtime/reader.h"
#include "runtime/rules_set.h"
#include "runtime/tls.h"
#include "sluice.h"

/* The caps on untrusted input have flags, whose defaults and bounds are
 * in the settings table (src/settings/table.c; docs/server.md, "Flags").
 * Exceeding one is a defined 4xx.  --max-descriptors is at most this. */
#define SV_MAX_DESCRIPTORS SL_MAX_ITEMS
/* Output queued on one connection before we stop reading its pipelined
 * requests until the client reads: bounds memory per connection. */
#define SV_MAX_PENDING_OUTPUT (1024 * 1024)
/* Known domains whose unmatched descriptors a thread counts apart; the
 * names come from rules files, but reloads may bring ever new ones.
 * Further domains count under domain="_overflow_" (metrics.c). */
#define SV_MAX_SERIES 10000

typedef struct sv_worker sv_worker;
typedef struct sv_server sv_server;

/* What an accepted connection of the main listener becomes: serve's
 * decision API (src/api/frontend.c), or `sluice proxy`'s client
 * (src/proxy/), which so shares the threads, listeners, rules reload and
 * drain. */
typedef struct sv_frontend {
    void (*accept)(sv_worker *w);     /* the listener is readable */
    void (*close_idle)(sv_worker *w); /* on stop: close what is idle */
    /* SIGHUP, after the rules, on the main thread: reload the front
     * end's own config (NULL: it has none to reload). */
    void (*reload)(void *ctx);
    void *ctx; /* the front end's own state */
    /* Its process-wide state, made before the threads (0, or -1) and
     * released after them; and a thread's own, released when the thread
     * is (each may be NULL). */
    int (*init)(sv_server *s);
    void (*release)(sv_server *s);
    void (*thread_release)(sv_worker *w);
} sv_frontend;

/* The runtime limits (src/control/): the rules set in force is the
 * loaded one with the overrides applied.  The command installs them
 * (sv_config.plane); the runtime calls them at these points. */
typedef struct sv_plane {
    int (*init)(sv_server *s); /* before the rules load: 0, or -1 */
    void (*release)(sv_server *s);
    /* On the control thread: start (0, or -1) and stop its work. */
    int (*start)(sv_worker *control);
    void (*stop)(sv_worker *control);
    /* A rules set was loaded (at start and on reload; the main thread):
     * publish it with the overrides applied.  Takes the reference. */
    void (*loaded)(sv_server *s, sv_rules *loaded);
    /* Its series for /metrics. */
    void (*metrics)(sv_server *s, sv_buf *out);
} sv_plane;

/* A listening address. */
typedef struct sv_addr {
    const char *host; /* numeric IPv4 or IPv6 address; NULL: not listening */
    int port;         /* 0: the kernel picks; printed on start */
} sv_addr;

typedef struct sv_listener sv_listener;

/* A protocol served on a listener of its own beside the HTTP one (the
 * Redis protocol, gRPC), deciding against the same rules and store; the
 * command that runs the server says which (tools/cmd_serve.c). */
typedef struct sv_door {
    /* "resp": in the start message, the TLS series' label, and its own
     * certificate's flags (--resp-tls-cert) */
    const char *name;
    sv_addr addr;
    int control; /* served by the control thread alone (the admin API) */
    void (*accept)(sv_listener *l);     /* l is readable */
    void (*close_idle)(sv_listener *l); /* on stop: close what is idle */
    sv_tls_files tls; /* its own certificate; cert NULL: the shared one */
} sv_door;

#define SV_MAX_DOORS 4

/* A door on one thread: its listening socket and its connections. */
struct sv_listener {
    uv_tcp_t tcp; /* first: the handle's pointer is the listener's */
    sv_worker *w; /* NULL: the door is not served on this thread */
    const sv_door *door;
    struct sv_conn *conns; /* its open connections (conn.h) */
};

/* --grpc-rate-limit-headers' words, in sv_config's order. */
enum {
    SV_GRPC_HEADERS_OFF = 0,
    SV_GRPC_HEADERS_SLUICE = 1,   /* "true": the HTTP answers' set */
    SV_GRPC_HEADERS_RATELIMIT = 2 /* envoyproxy/ratelimit's three */
};
extern const char *const sv_grpc_header_sets[];

typedef struct sv_config {
    const sv_frontend *frontend; /* what the main listener serves */
    const sv_plane *plane;       /* the runtime limits */
    const char *rules_path;
    sv_addr listen;              /* the HTTP listener (or the proxy's) */
    sv_addr resp_listen;         /* --resp-listen; host NULL: off */
    sv_addr grpc_listen;         /* --grpc-listen; host NULL: off */
    /* Which headers gRPC answers carry: SV_GRPC_HEADERS_*. */
    int grpc_rate_limit_headers;
    /* envoyproxy/ratelimit's global settings (docs/server.md): every
     * answer OK; every limit in quota mode; answers with its dynamic
     * metadata. */
    int shadow_mode, quota_mode, response_dynamic_metadata;
    sv_addr admin_listen;        /* --admin-listen; host NULL: off */
    sv_addr metrics_listen;      /* --metrics-listen; host NULL: off */
    int public_metrics; /* serve: GET /metrics on the HTTP listener too */
    int public_status;  /* serve: GET /status[.json] there too */
    const char *admin_token_file;
    /* --tls-cert, --tls-key, --tls-client-ca: TLS on every listener
     * without files of its own (tls.h); cert NULL: none. */
    sv_tls_files tls;
    /* --resp-tls-cert and so on: a listener's own files, which replace
     * the shared ones there (tls_listeners.c); cert NULL: none. */
    sv_tls_files resp_tls, grpc_tls, admin_tls, metrics_tls;
    const char *advisor_url;      /* --advisor; NULL: none */
    const char *advisor_ca;       /* --advisor-ca; NULL: the system's */
    const char *advisor_token_file; /* --advisor-token-file; NULL: none */
    uint64_t advisor_interval_ms; /* --advisor-interval */
    uint64_t advisor_timeout_ms;  /* --advisor-timeout */
    int advisor_shadow;           /* --advisor-mode shadow: only record */
    sv_door doors[SV_MAX_DOORS];
    int n_doors;
    /* Run a control thread beside the threads that serve clients: it
     * serves the control doors and keeps the runtime limits (limits.c)
     * in step, off the request path; control_start and control_stop
     * (may be NULL) start and stop the command's own work there. */
    int control;
    int (*control_start)(sv_worker *control);
    void (*control_stop)(sv_worker *control);
    void (*control_metrics)(sv_server *s, sv_buf *out); /* its series */
    const char *adaptive_trace; /* proxy --adaptive-trace; NULL: none */
    int threads;                /* 0: one per core */
    size_t max_body_bytes;
    size_t max_header_bytes;
    size_t max_descriptors;
    size_t max_entries;
    uint64_t idle_timeout_ms;
    uint64_t read_timeout_ms;
    uint64_t write_timeout_ms; /* gRPC: an answer's stream reset past it */
    int max_connections;
    size_t max_connections_per_address; /* 0: no cap */
    /* Descriptors each thread may hold beyond its clients' and its own
     * (the proxy's idle upstream connections): RLIMIT_NOFILE at start. */
    size_t fds_per_thread;
    size_t store_bytes; /* memory store cap; 0: library default */
    size_t resp_store_bytes; /* CL.THROTTLE's and GCRA's store (sd_check) */
    /* --state-file: the memory store saved and loaded (state_file.c);
     * NULL: none.  --state-required: a bad file stops the start. */
    const char *state_file;
    uint64_t state_save_interval_ms;
    int state_required;
    size_t max_adhoc_limits;
    size_t max_metric_series;       /* per-value series, all threads */
    uint64_t metric_series_idle_ms; /* a per-value series unused goes */
    /* --store redis://...: NULL for the memory store (src/decision/). */
    const char *redis_url;
    sd_redis_tls redis_tls;    /* --redis-tls-*: rediss:// */
    const char *redis_sentinel_password_file;
    uint64_t redis_timeout_ms; /* per call, from sending to the reply */
    int redis_failure;         /* SD_FAIL_OPEN, _CLOSED, _LOCAL */
    int redis_breaker;         /* consecutive failures that open it */
    size_t negative_cache_bytes; /* all threads' negative caches; 0: none */
    size_t lease_bytes;          /* all threads' leases; 0: none */
    int redis_tag_domain;      /* --redis-hash-tag domain: a slot per domain */
    int nodes; /* local policy: the limit divided by this, or NODES_AUTO */
    int log_json, log_level; /* --log-format json, --log-level (log/log.h) */
} sv_config;

/* Per-thread counters, written only by their thread with relaxed atomics
 * and summed at scrape time; aligned so threads never share a line. */
#define SV_LATENCY_BUCKETS 12
typedef struct sv_stats {
    _Alignas(64) atomic_uint_fast64_t checks_ok;
    atomic_uint_fast64_t checks_over;
    /* Over-limit requests answered OK by --shadow-mode (in checks_ok). */
    atomic_uint_fast64_t global_shadow;
    /* Descriptors of an unknown domain; those of a known domain that
     * match no rule are counted per domain (metrics.c). */
    atomic_uint_fast64_t unmatched_unknown;
    atomic_uint_fast64_t bad_requests;
    atomic_uint_fast64_t latency_count;
    atomic_uint_fast64_t latency_sum_ns;
    atomic_uint_fast64_t latency[SV_LATENCY_BUCKETS];
    sd_stats store; /* the decision layer's (--store redis) */
    /* Each door's commands (or calls) answered, and those answered
     * with an error: sluice_protocol_requests_total (metrics.c). */
    atomic_uint_fast64_t door_ok[SV_MAX_DOORS];
    atomic_uint_fast64_t door_errors[SV_MAX_DOORS];
} sv_stats;

typedef struct sv_series sv_series;
typedef struct sv_unmatched sv_unmatched;

/* One event-loop thread. */
struct sv_worker {
    sv_server *server;
    int index;
    int control; /* the control thread: no client-facing listener */
    uv_loop_t loop;
    uv_tcp_t listener;
    sv_listener doors[SV_MAX_DOORS]; /* cfg.doors' on this thread */
    uv_async_t wake;   /* reload swap or stop, from the main thread */
    uv_prepare_t tick; /* marks the cached clock stale each iteration */
    pthread_t thread;
    sv_rules *rules;     /* this thread's reference; only it reads it */
    atomic_int stopping; /* 1: asked by the main thread; 2: done */
    int now_stale;
    sl_nanos now;             /* wall clock ns, sampled once per iteration */
    struct sv_conn *conns;    /* open connections of the HTTP listeners */
    char read_buf[64 * 1024]; /* every read of this thread's sockets */
    char tls_buf[16 * 1024];  /* what TLS decrypts of them (conn.c) */
    struct sv_conn *tls_todo; /* decrypted bytes waiting for a door (conn.c) */
    sv_readers readers;       /* the proxy's clients (reader.c) */
    /* The JSON body of the decision being answered: built here, then
     * copied behind its headers once its length is known; kept between
     * requests so that building it allocates nothing. */
    sv_buf answer;
    /* The tokens of the decision request being read (src/api/request.c),
     * made at the first and kept between requests like `answer`; the
     * front end's thread_release frees them. */
    struct sv_json *json;
    sv_stats stats;
    pthread_mutex_t series_lock; /* uncontended: scrape vs this thread */
    sv_series **series;          /* hash buckets */
    sl_nanos series_swept;       /* when it last dropped idle series */
    /* The series of each rule of `rules` without detailed_metric, by
     * rule->index, once found (metrics.c); only this thread reads it. */
    sv_series **rule_series;
    /* Descriptors of each known domain that matched nothing, under
     * series_lock, and each domain's of `rules` by its index once found
     * (metrics.c); the list holds no more than SV_MAX_SERIES domains. */
    sv_unmatched *unmatched;
    size_t n_unmatched;
    sv_unmatched **domain_unmatched;
    sd_thread *dec; /* this thread's side of the decision layer */
    /* The rules decision of requests answered at once (the memory
     * store): one per thread; with Redis each connection has its own. */
    struct sv_dec_state *dec_scratch;
    struct sv_hot *hot; /* the status page's last minute (hot.h) */
};

struct sv_server {
    sv_config cfg;
    sd_engine *engine;        /* the stores */
    sl_store *store;          /* the memory store (the engine's) */
    sv_worker *workers;       /* the client-facing ones, then the control one */
    int n_workers;            /* all of them */
    int n_public;             /* those with the client-facing listeners */
    struct sv_limits *limits; /* limits.c: the runtime limits */
    atomic_int open_conns;
    struct sv_peers *peers; /* --max-connections-per-address; NULL: off */
    /* The shared context (--tls-cert; NULL: none), and each listener's
     * TLS: the HTTP listener's first, then cfg.doors' (tls_listeners.c). */
    sv_tls *tls;
    sv_tls_listener tls_at[1 + SV_MAX_DOORS];
    /* Connections closed as soon as accepted, by the cap they were over
     * (sv_accept): sluice_connections_closed_at_accept_total. */
    atomic_uint_fast64_t closed_over_max, closed_per_address;
    atomic_size_t metric_series; /* per-value series, all threads' */
    atomic_int draining;         /* SIGTERM came: health checks say so */
    /* Reload state, guarded by reload_lock. */
    pthread_mutex_t reload_lock;
    sv_rules *current;    /* what workers are told to use */
    char last_error[512]; /* "" when the last reload succeeded */
    atomic_uint_fast64_t reloads_ok, reloads_failed;
    struct sv_adhoc *adhoc; /* client_api.c: ad hoc limits */
    struct sv_state *state; /* state_file.c: --state-file; NULL: none */
};

/* server.c: accepts a client of listener onto tcp (initialised on w's
 * loop by the caller) and counts it in open_conns: 0, or -1 when the
 * accept failed or the client is over --max-connections or
 * --max-connections-per-address (the caller closes tcp at once, so the
 * client sees a prompt close rather than a hang in the backlog, and
 * uncounts it with sv_unaccept when tcp is freed, as always). */
int sv_accept(sv_server *s, uv_stream_t *listener, uv_tcp_t *tcp);
/* server.c: uncounts what sv_accept counted, once tcp is closed. */
void sv_unaccept(sv_server *s, const uv_tcp_t *tcp);

/* server.c: runs until SIGTERM or SIGINT; returns the exit status. */
int sv_server_run(const sv_config *cfg);

/* No connection of any of w's listeners is left: once stopping, its
 * readers can close. */
static inline int sv_worker_quiet(const sv_worker *w)
{
    if (w->conns != NULL)
        return 0;
    for (int d = 0; d < w->server->cfg.n_doors; d++)
        if (w->doors[d].w != NULL && w->doors[d].conns != NULL)
            return 0;
    return 1;
}

/* The clock is read at most once per loop iteration: a prepare handle
 * (run just before the loop polls, server.c) marks the sample stale, and
 * the first decision after the poll reads it once. */
static inline sl_nanos sv_now(sv_worker *w)
{
    if (w->now_stale) {
        w->now = sd_engine_clock(w->server->engine);
        w->now_stale = 0;
    }
    return w->now;
}

#endif
