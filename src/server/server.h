/*
 * server.h - what the files of `sluice serve` share; never installed.
 *
 * The server is a program around libsluice, not part of it: it links the
 * library and libuv, http-parser and jansson, and the library depends on
 * none of them.  Layout: server.c (threads, loops, listening sockets,
 * signals, drain), conn.c (one connection: http-parser, pipelining,
 * timeouts), router.c (routes and error bodies), decide.c (descriptors to
 * one atomic decision), check_api.c (POST /v1/check), lyft_api.c (POST
 * /json), client_api.c (POST /v1/increment, GET /v1/delay), metrics.c
 * (per-thread counters, /metrics), reload.c (rules loading, hot
 * reload, quiescent swap).
 */
#ifndef SL_SERVER_H
#define SL_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <pthread.h>
#include <uv.h>

#include "sluice.h"
#include "sluice_rules.h"

/* Caps on untrusted input and their defaults; each has a flag
 * (docs/server.md, "Caps").  Exceeding one is a defined 4xx. */
#define SL_SRV_MAX_BODY_BYTES (64 * 1024)
#define SL_SRV_MAX_HEADER_BYTES (8 * 1024)
#define SL_SRV_MAX_DESCRIPTORS SL_MAX_ITEMS
#define SL_SRV_MAX_ENTRIES 16
#define SL_SRV_IDLE_TIMEOUT_MS 60000
#define SL_SRV_READ_TIMEOUT_MS 10000
#define SL_SRV_MAX_CONNECTIONS 10000
/* Output queued on one connection before we stop reading its pipelined
 * requests until the client reads: bounds memory per connection. */
#define SL_SRV_MAX_PENDING_OUTPUT (1024 * 1024)
/* Distinct metric series (domain, rule, descriptor) kept per thread;
 * detailed_metric could otherwise grow the map without bound.  Further
 * series are summed into one with rule="_overflow_". */
#define SL_SRV_MAX_SERIES 10000
/* Ad hoc limits of the client-side API (id, interval, requests,
 * algorithm) cached at once; further new ones are refused with 429. */
#define SL_SRV_MAX_ADHOC_LIMITS 10000

typedef struct sl_srv_config {
    const char *rules_path;
    const char *listen_host; /* numeric IPv4 or IPv6 address */
    int listen_port;         /* 0: the kernel picks; printed on start */
    int threads;             /* 0: one per core */
    size_t max_body_bytes;
    size_t max_header_bytes;
    size_t max_descriptors;
    size_t max_entries;
    uint64_t idle_timeout_ms;
    uint64_t read_timeout_ms;
    int max_connections;
    size_t store_bytes; /* memory store cap; 0: library default */
    size_t max_adhoc_limits;
} sl_srv_config;

/* A growable byte buffer (git's strbuf).  Out of memory never aborts:
 * the append is dropped and `failed` set, and whoever sends the buffer
 * answers 503 ENOMEM or closes the connection instead (conn.c). */
typedef struct sl_buf {
    char *data;
    size_t len, cap;
    int failed; /* an append was dropped for want of memory */
} sl_buf;

void sl_buf_add(sl_buf *b, const void *data, size_t len);
void sl_buf_addstr(sl_buf *b, const char *s);
void sl_buf_printf(sl_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* v in decimal. */
void sl_buf_add_int(sl_buf *b, long long v);
/* s (len bytes of valid UTF-8) as a quoted JSON string, byte for byte
 * what jansson's json_dumps(JSON_COMPACT) writes for it. */
void sl_buf_add_json_string(sl_buf *b, const char *s, size_t len);
void sl_buf_release(sl_buf *b);

/* A loaded rules set shared by the threads.  refs counts the threads
 * (and the reloader) holding it; the last release frees it. */
typedef struct sl_srv_rules {
    sl_rules *rules;
    atomic_int refs;
} sl_srv_rules;

void sl_srv_rules_release(sl_srv_rules *r);

typedef struct sl_srv_worker sl_srv_worker;
typedef struct sl_server sl_server;

/* Per-thread counters, written only by their thread with relaxed atomics
 * and summed at scrape time; aligned so threads never share a line. */
#define SL_SRV_LATENCY_BUCKETS 12
typedef struct sl_srv_stats {
    _Alignas(64) atomic_uint_fast64_t checks_ok;
    atomic_uint_fast64_t checks_over;
    atomic_uint_fast64_t unmatched; /* unknown domain or no rule */
    atomic_uint_fast64_t bad_requests;
    atomic_uint_fast64_t latency_count;
    atomic_uint_fast64_t latency_sum_ns;
    atomic_uint_fast64_t latency[SL_SRV_LATENCY_BUCKETS];
} sl_srv_stats;

typedef struct sl_srv_series sl_srv_series;

/* One event-loop thread. */
struct sl_srv_worker {
    sl_server *server;
    int index;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t wake;   /* reload swap or stop, from the main thread */
    uv_prepare_t tick; /* marks the cached clock stale each iteration */
    pthread_t thread;
    sl_srv_rules *rules; /* this thread's reference; only it reads it */
    atomic_int stopping; /* 1: asked by the main thread; 2: done */
    int now_stale;
    sl_nanos now;             /* wall clock ns, sampled once per iteration */
    void *conns;              /* intrusive list of open connections (conn.c) */
    char read_buf[64 * 1024]; /* every read of this thread's sockets */
    /* The JSON body of the decision being answered: built here, then
     * copied behind its headers once its length is known; kept between
     * requests so that building it allocates nothing. */
    sl_buf answer;
    sl_srv_stats stats;
    pthread_mutex_t series_lock; /* uncontended: scrape vs this thread */
    sl_srv_series **series;      /* hash buckets */
    size_t n_series;
};

struct sl_server {
    sl_srv_config cfg;
    sl_store *store;
    sl_srv_worker *workers;
    int n_workers;
    sl_nanos wall_offset; /* realtime - uv_hrtime at start */
    atomic_int open_conns;
    /* Reload state, guarded by reload_lock. */
    pthread_mutex_t reload_lock;
    sl_srv_rules *current; /* what workers are told to use */
    char last_error[512];  /* "" when the last reload succeeded */
    atomic_uint_fast64_t reloads_ok, reloads_failed;
    struct sl_srv_adhoc *adhoc; /* client_api.c: ad hoc limits */
};

/* server.c: runs until SIGTERM or SIGINT; returns the exit status. */
int sl_server_run(const sl_srv_config *cfg);
sl_nanos sl_srv_now(sl_srv_worker *w);

/* conn.c */
void sl_conn_accept(sl_srv_worker *w);
void sl_conn_close_idle(sl_srv_worker *w); /* on stop */

/* router.c: handles one complete request; appends a full HTTP response
 * (status line, headers, body) to out.  keep_alive as the client asked;
 * set to 0 when the response closes the connection. */
typedef struct sl_http_request {
    int method; /* enum http_method */
    const char *path;
    size_t path_len;
    const char *query; /* after '?', not NUL-terminated; "" if none */
    size_t query_len;
    const char *body;
    size_t body_len;
} sl_http_request;

void sl_route(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
              int *keep_alive);
/* 503 {"error": {"code": "ENOMEM"}} from static text, closing the
 * connection; 0, or -1 when even that could not be appended. */
int sl_respond_enomem(sl_buf *out);
/* An error response {"error": {"code", "message"}} with status. */
void sl_respond_error(sl_buf *out, int status, const char *code,
                      const char *message, int keep_alive);
/* A response with a JSON body; extra_headers ends each line with CRLF. */
void sl_respond_json(sl_buf *out, int status, const char *extra_headers,
                     json_t *body, int keep_alive);
/* The status line and the Content-Type, Content-Length and Connection
 * headers; the caller adds its own headers, the blank line and the body. */
void sl_respond_head(sl_buf *out, int status, const char *type, size_t body_len,
                     int keep_alive);

/* decide.c: one request's descriptors to one decision. */
typedef struct sl_dec_descriptor {
    sl_rules_entry *entries;
    size_t n_entries;
    int64_t hits; /* -1: the request's */
} sl_dec_descriptor;

/* Per-descriptor outcome: the limit closest to its own limit. */
typedef struct sl_dec_status {
    int over;            /* OVER_LIMIT */
    const sl_rule *rule; /* NULL: nothing matched */
    sl_decision d;
    int shadow; /* the reported rule is in shadow mode */
} sl_dec_status;

typedef struct sl_dec_result {
    int over;
    /* The status closest to its limit over all descriptors (for the
     * headers); NULL when nothing limited the request. */
    const sl_dec_status *closest;
    sl_dec_status *status; /* one per descriptor, owned by the caller */
} sl_dec_result;

/* Returns 0, or an SL_E* code with a message in err (errlen bytes). */
int sl_decide(sl_srv_worker *w, const char *domain, size_t domain_len,
              const sl_dec_descriptor *ds, size_t n, int64_t hits,
              sl_dec_result *res, char *err, size_t errlen);
/* Parses one request's JSON descriptors (both APIs share the shape). */
int sl_parse_descriptors(sl_srv_worker *w, json_t *arr, const char *hits_key,
                         sl_dec_descriptor **out, size_t *n_out, int *status,
                         const char **code, char *msg, size_t msglen);
void sl_free_descriptors(sl_dec_descriptor *ds, size_t n);
/* A non-negative integer or numeric string; absent means dflt. */
int sl_parse_hits(json_t *v, int64_t dflt, int64_t *out);

/* The common request shape of both APIs: domain, descriptors, hits. */
typedef struct sl_parsed_request {
    json_t *root; /* owns the strings below */
    const char *domain;
    size_t domain_len;
    int64_t hits;
    sl_dec_descriptor *ds;
    size_t n;
} sl_parsed_request;

/* 0, or -1 with the HTTP status, error code and message set.  Release
 * pr either way. */
int sl_parse_request(sl_srv_worker *w, const sl_http_request *req,
                     const char *hits_key, const char *desc_hits_key,
                     sl_parsed_request *pr, int *status, const char **code,
                     char *msg, size_t msglen);
void sl_parsed_request_release(sl_parsed_request *pr);
/* Both APIs' common path: parses the request, decides it, and returns 0
 * with *pr and *res filled; or answers the error into out and returns -1.
 * hits 0 becomes zero_hits_as (0 for a pure query, 1 for lyft's default).
 * The caller releases pr and frees res->status either way. */
int sl_decide_request(sl_srv_worker *w, const sl_http_request *req,
                      const char *hits_key, const char *desc_hits_key,
                      int64_t zero_hits_as, sl_parsed_request *pr,
                      sl_dec_result *res, sl_buf *out, int keep_alive);
/* Answers a decided request: status 200 or 429, the rate-limit headers,
 * the JSON text in w->answer and a newline, and the latency since t0
 * (uv_hrtime). */
void sl_respond_decision(sl_srv_worker *w, const sl_dec_result *res,
                         sl_buf *out, int keep_alive, uint64_t t0);
/* The HTTP status of an sl_decide() error: 503 for the store, else 400. */
int sl_decide_status(int rc);
/* X-RateLimit-*, Retry-After and the IETF draft's RateLimit-Policy and
 * RateLimit fields from res->closest, each line ending in CRLF. */
void sl_rate_headers(const sl_dec_result *res, sl_buf *out);
/* The rule's name, or its path when unnamed. */
const char *sl_rule_label(const sl_rule *r);

/* check_api.c, lyft_api.c */
void sl_api_check(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                  int keep_alive);
void sl_api_lyft(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                 int keep_alive);

/* client_api.c: POST /v1/increment, GET /v1/delay, and the table of
 * ad hoc limits (init: 0 or -1 when out of memory). */
void sl_api_increment(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                      int keep_alive);
void sl_api_delay(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                  int keep_alive);
int sl_adhoc_init(sl_server *s);
void sl_adhoc_release(sl_server *s);

/* metrics.c */
void sl_metrics_rule(sl_srv_worker *w, const sl_rule *rule,
                     const sl_rules_entry *entries, size_t n_entries,
                     int allowed, int shadow_pass, uint64_t near_hits);
/* lyft's near_limit: of `hits` allowed by d, those past 80% of the limit. */
uint64_t sl_metrics_near_hits(const sl_decision *d, int64_t hits);
void sl_metrics_latency(sl_srv_worker *w, sl_nanos ns);
void sl_metrics_render(sl_server *s, sl_buf *out);
void sl_metrics_release(sl_srv_worker *w);

/* reload.c */
int sl_reload_init(sl_server *s); /* first load; 0 or -1 */
void sl_reload_now(sl_server *s); /* SIGHUP, file change */
void sl_reload_start_watch(sl_server *s, uv_loop_t *loop);
void sl_reload_stop_watch(void);
void sl_reload_adopt(sl_srv_worker *w); /* on the worker: take current */
void sl_reload_release(sl_server *s);

#endif
