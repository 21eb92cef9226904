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
 * reload, quiescent swap), store_redis.c (--store redis: asynchronous
 * calls, circuit breaker, failure policies).
 */
#ifndef SL_SERVER_H
#define SL_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>
#include <pthread.h>
#include <uv.h>

#include "decision/decision.h"
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

typedef struct sl_srv_worker sl_srv_worker;
typedef struct sl_srv_req sl_srv_req;

/* What an accepted connection becomes.  NULL in sl_srv_config means the
 * decision API of conn.c; `sluice proxy` passes its own (src/proxy/), and
 * so shares the threads, listeners, rules reload and drain. */
typedef struct sl_srv_frontend {
    void (*accept)(sl_srv_worker *w);     /* the listener is readable */
    void (*close_idle)(sl_srv_worker *w); /* on stop: close what is idle */
    /* SIGHUP, after the rules, on the main thread: reload the front
     * end's own config (NULL: it has none to reload). */
    void (*reload)(void *ctx);
    void *ctx; /* the front end's own state */
} sl_srv_frontend;

typedef struct sl_srv_config {
    const sl_srv_frontend *frontend; /* NULL: conn.c */
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
    /* --store redis://...: NULL for the memory store (store_redis.c). */
    const char *redis_url;
    uint64_t redis_timeout_ms; /* per call, from sending to the reply */
    int redis_failure;         /* SL_SRV_FAIL_OPEN, _CLOSED, _LOCAL */
    int redis_breaker;         /* consecutive failures that open it */
    int redis_tag_domain;      /* --redis-hash-tag domain: a slot per domain */
    int nodes; /* local policy: the limit divided by this, or NODES_AUTO */
} sl_srv_config;

/* The store's settings are the decision layer's (src/decision/). */
#define SL_SRV_NODES_AUTO SD_NODES_AUTO
#define SL_SRV_FAIL_LOCAL SD_FAIL_LOCAL
#define SL_SRV_FAIL_OPEN SD_FAIL_OPEN
#define SL_SRV_FAIL_CLOSED SD_FAIL_CLOSED
#define SL_SRV_DEFAULT_REDIS_TIMEOUT_MS SD_DEFAULT_REDIS_TIMEOUT_MS
#define SL_SRV_DEFAULT_REDIS_BREAKER SD_DEFAULT_REDIS_BREAKER

/* A growable byte buffer (git's strbuf).  Out of memory never aborts:
 * the append is dropped and `failed` set, and whoever sends the buffer
 * answers 503 ENOMEM or closes the connection instead (conn.c). */
/* send.c: data written on s, at once if the socket takes it (`queued`
 * says some of s's bytes still wait in uv_write requests, which must go
 * first).  What it does not take is copied into an sl_send_req and
 * queued; *left says how much, and cb runs when it is written (the
 * callback frees the request).  0, or -1 when the stream failed or
 * memory ran out (the caller closes the stream). */
typedef struct sl_send_req {
    uv_write_t req;
    void *owner;
    size_t len;   /* bytes this request carries */
    char data[];
} sl_send_req;

int sl_send(uv_stream_t *s, const void *data, size_t len, int queued,
            void *owner, uv_write_cb cb, size_t *left);

/* deadline.c: a timeout moved or cleared often and fired rarely.  The
 * timer is the first member, so a handle pointer is a deadline pointer;
 * its `data` is the owner's.  `expired` runs once the deadline passes
 * (not when the timer merely fires early). */
typedef struct sl_deadline {
    uv_timer_t timer;
    uint64_t at;  /* loop time (ms) it expires; 0: none */
    uint64_t due; /* loop time the timer is armed for */
    uv_timer_cb expired;
} sl_deadline;

void sl_deadline_init(uv_loop_t *loop, sl_deadline *d, uv_timer_cb expired);
void sl_deadline_set(sl_deadline *d, uint64_t timeout_ms);
void sl_deadline_clear(sl_deadline *d);

typedef struct sl_buf {
    char *data;
    size_t len, cap;
    int failed; /* an append was dropped for want of memory */
} sl_buf;

/* Room for len more bytes and the NUL: 0, or -1 with `failed` set. */
int sl_buf_reserve(sl_buf *b, size_t len);
/* Inline: responses are built of dozens of short appends, most of a
 * constant length that the compiler turns into a move or two. */
static inline void sl_buf_add(sl_buf *b, const void *data, size_t len)
{
    if (b->cap - b->len <= len && sl_buf_reserve(b, len) != 0)
        return;
    if (len > 0)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}
static inline void sl_buf_addstr(sl_buf *b, const char *s)
{
    sl_buf_add(b, s, strlen(s));
}
void sl_buf_printf(sl_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* v in decimal. */
void sl_buf_add_int(sl_buf *b, long long v);
void sl_buf_add_uint(sl_buf *b, unsigned long long v);
/* How many decimal digits sl_buf_add_uint writes for u. */
size_t sl_digits(unsigned long long u);
/* s (len bytes of valid UTF-8) as a quoted JSON string, byte for byte
 * what jansson's json_dumps(JSON_COMPACT) writes for it. */
void sl_buf_add_json_string(sl_buf *b, const char *s, size_t len);
/* The same without the quotes: to write a string in pieces. */
void sl_buf_add_json_chars(sl_buf *b, const char *s, size_t len);
/* s as a Structured Field String (RFC 8941, 3.3.3): quoted, '"' and '\\'
 * escaped, and bytes outside printable ASCII, which it cannot hold, left
 * out. */
void sl_buf_add_sf_string(sl_buf *b, const char *s);
void sl_buf_release(sl_buf *b);
/* Appends the file at path, refusing one over max_bytes: 0, or -1 with
 * "PATH: cannot open: ...", "PATH: cannot read" or "PATH: larger than N
 * KiB" in err (the config files of serve and proxy). */
int sl_buf_read_file(sl_buf *b, const char *path, size_t max_bytes, char *err,
                     size_t errlen);

/* What answers write of one rule, made once when its set is loaded so
 * that no request formats it: its label (sl_rule_label()) as JSON string
 * characters (no quotes), for the 429's message, and as a Structured
 * Field String (quoted), for the RateLimit fields. */
typedef struct sl_srv_rule_text {
    char *json;
    size_t json_len;
    char *sf;
    size_t sf_len;
} sl_srv_rule_text;

/* A loaded rules set shared by the threads.  refs counts the threads
 * (and the reloader) holding it; the last release frees it. */
typedef struct sl_srv_rules {
    sl_rules *rules;
    sl_srv_rule_text *text; /* [rule->index] */
    atomic_int refs;
} sl_srv_rules;

/* A set of one reference around rules (which it owns from here, freed
 * on failure too), its text made: NULL when out of memory. */
sl_srv_rules *sl_srv_rules_new(sl_rules *rules);
void sl_srv_rules_release(sl_srv_rules *r);

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
    sd_stats store; /* the decision layer's (--store redis) */
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
    /* The series of each rule of `rules` without detailed_metric, by
     * rule->index, once found (metrics.c); only this thread reads it. */
    sl_srv_series **rule_series;
    sd_thread *dec; /* this thread's side of the decision layer */
    /* The rules decision of requests answered at once (the memory
     * store): one per thread; with Redis each connection has its own. */
    struct sl_dec_state *dec_scratch;
};

struct sl_server {
    sl_srv_config cfg;
    sd_engine *engine; /* the stores */
    sl_store *store;   /* the memory store (the engine's) */
    sl_srv_worker *workers;
    int n_workers;
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
/* A request header, (pointer, length) each.  Only headers whose name
 * starts with "Sluice-" are kept (conn.c): the others cost nothing. */
typedef struct sl_http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sl_http_header;

typedef struct sl_http_request {
    int method; /* enum http_method */
    const char *path;
    size_t path_len;
    const char *query; /* after '?', not NUL-terminated; "" if none */
    size_t query_len;
    const char *body;
    size_t body_len;
    const sl_http_header *headers; /* the Sluice-* headers, in order */
    size_t n_headers;
} sl_http_request;

/* Answers the request into out: 0, or SL_SRV_AGAIN (nothing answered). */
int sl_route(sl_srv_worker *w, const sl_http_request *req, sl_srv_req *rq,
             sl_buf *out, int *keep_alive);
/* 503 {"error": {"code": "ENOMEM"}} from static text, closing the
 * connection; 0, or -1 when even that could not be appended. */
int sl_respond_enomem(sl_buf *out);
/* An error answer under way in an API handler: status, code, message.
 * sl_api_fail() fills it and returns -1; sl_respond_api_err() answers
 * it, counting a 400 as a bad request. */
typedef struct sl_api_err {
    int status;
    const char *code;
    char msg[256];
} sl_api_err;

int sl_api_fail(sl_api_err *e, int status, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
void sl_respond_api_err(sl_srv_worker *w, const sl_api_err *e, sl_buf *out,
                        int keep_alive);
/* An error response {"error": {"code", "message"}} with status. */
void sl_respond_error(sl_buf *out, int status, const char *code,
                      const char *message, int keep_alive);
/* A response with body_len bytes of body of the given type; extra_headers
 * (may be NULL) ends each line with CRLF. */
void sl_respond_body(sl_buf *out, int status, const char *type,
                     const char *extra_headers, const char *body,
                     size_t body_len, int keep_alive);
/* A response without a body (204, or a HEAD's); extra_headers as below. */
void sl_respond_empty(sl_buf *out, int status, const char *extra_headers,
                      int keep_alive);
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
    const sl_srv_rule_text *text; /* the rule's; NULL with it */
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

/* A request's rules decision while it waits on the store: the matches,
 * their counter keys and the checks sent.  Each connection on Redis owns
 * one, kept between requests; on the memory store the thread's one
 * serves every request, which is answered at once. */
typedef struct sl_dec_state sl_dec_state;

/* The state for a request: the thread's on the memory store, else *own,
 * made on first use.  NULL when out of memory. */
sl_dec_state *sl_dec_state_get(sl_srv_worker *w, sl_dec_state **own);
void sl_dec_state_free(sl_dec_state *st); /* NULL: no-op */

/*
 * Decides one request's descriptors: every enforced limit in ONE atomic
 * check, shadow limits apart.  Returns 0 with res filled; SL_SRV_AGAIN,
 * with *wait set, when it waits on the store (done(owner) runs once
 * later, then sl_decide_finish() fills res; ds must stay valid until
 * then); or an SL_E* code with a message in err.
 */
int sl_decide(sl_srv_worker *w, sl_dec_state *st, const char *domain,
              size_t domain_len, const sl_dec_descriptor *ds, size_t n,
              int64_t hits, sl_dec_result *res, sd_done_fn done, void *owner,
              sd_wait **wait, char *err, size_t errlen);
int sl_decide_finish(sl_srv_worker *w, sl_dec_state *st, sl_dec_result *res,
                     char *err, size_t errlen);
/* The request was given up while waiting (sd_cancel() its wait first). */
void sl_decide_abandon(sl_dec_state *st);
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
/* A request's state across waits on the store (nginx's "again"): owned
 * by its connection, reset once the request is answered.  A handler
 * that returns SL_SRV_AGAIN has set `wait` and keeps what it needs here;
 * it runs again, with the same request, when `resume(owner)` is called. */
#define SL_SRV_AGAIN SD_AGAIN

struct sl_srv_req {
    int step;     /* 0: a new request; a handler counts its rounds */
    uint64_t t0;  /* uv_hrtime when it was first handled */
    sd_wait *wait; /* the round it waits on, or NULL */
    sd_done_fn resume;
    void *owner;
    sl_dec_state *dec; /* the connection's, kept between requests */
    sl_parsed_request pr; /* POST /v1/check and /json */
    sl_dec_result res;
    void *api; /* another handler's own state, freed by api_free */
    void (*api_free)(void *api);
};

/* The request is answered: what it kept is released. */
void sl_srv_req_reset(sl_srv_req *rq);
/* The connection is going: its waiting request is given up, and its
 * state freed. */
void sl_srv_req_close(sl_srv_req *rq);

/* Both APIs' common path: parses the request into rq->pr and decides
 * it into rq->res.  0 when decided; SL_SRV_AGAIN when it waits (call it
 * again when rq->resume runs); or -1 with the error answered into out.
 * hits 0 becomes zero_hits_as (0 for a pure query, 1 for lyft's
 * default). */
int sl_decide_request(sl_srv_worker *w, const sl_http_request *req,
                      sl_srv_req *rq, const char *hits_key,
                      const char *desc_hits_key, int64_t zero_hits_as,
                      sl_buf *out, int keep_alive);
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
/* auth_api.c: the 429 of a refused request (also the proxy's): the JSON
 * error {"code": "rate_limited", "message", "retry_after_ms"}, or no body
 * for a HEAD; rate_headers from sl_rate_headers(). */
void sl_respond_limited(const sl_dec_result *res, const char *rate_headers,
                        size_t rate_len, int head, sl_buf *out,
                        int keep_alive);
/* The rule's name, or its path when unnamed. */
const char *sl_rule_label(const sl_rule *r);

/* query.c: a query string's parameters, percent-decoded into dec (room
 * for len + 1 bytes), handed one by one to cb (NUL-terminated name; value
 * as (pointer, length), also NUL-terminated).  0; -1 with a message in err
 * for bad encoding or a name over 31 bytes; or cb's non-zero return. */
typedef int (*sl_query_cb)(void *ctx, const char *name, const char *value,
                           size_t value_len);
int sl_query_parse(const char *q, size_t len, char *dec, sl_query_cb cb,
                   void *ctx, char *err, size_t errlen);
/* A decimal integer in 0..SL_MAX_COUNT: 0, or -1. */
int sl_parse_count(const char *s, size_t len, int64_t *out);

/* check_api.c, lyft_api.c */
int sl_api_check(sl_srv_worker *w, const sl_http_request *req,
                 sl_srv_req *rq, sl_buf *out, int keep_alive);
int sl_api_lyft(sl_srv_worker *w, const sl_http_request *req,
                sl_srv_req *rq, sl_buf *out, int keep_alive);

/* auth_api.c: GET /v1/auth (any method), for nginx's auth_request. */
int sl_api_auth(sl_srv_worker *w, const sl_http_request *req,
                sl_srv_req *rq, sl_buf *out, int keep_alive);

/* client_api.c: POST /v1/increment, GET /v1/delay, and the table of
 * ad hoc limits (init: 0 or -1 when out of memory). */
int sl_api_increment(sl_srv_worker *w, const sl_http_request *req,
                     sl_srv_req *rq, sl_buf *out, int keep_alive);
int sl_api_delay(sl_srv_worker *w, const sl_http_request *req,
                 sl_srv_req *rq, sl_buf *out, int keep_alive);
int sl_adhoc_init(sl_server *s);
void sl_adhoc_release(sl_server *s);

/* metrics.c */
void sl_metrics_rule(sl_srv_worker *w, const sl_rule *rule,
                     const sl_rules_entry *entries, size_t n_entries,
                     int allowed, int shadow_pass, uint64_t near_hits);
/* The thread adopted another rules set: forget what was cached of the
 * old one's rules. */
void sl_metrics_rules_changed(sl_srv_worker *w);
/* lyft's near_limit: of `hits` allowed by d, those past 80% of the limit. */
uint64_t sl_metrics_near_hits(const sl_decision *d, int64_t hits);
void sl_metrics_latency(sl_srv_worker *w, sl_nanos ns);
void sl_metrics_render(sl_server *s, sl_buf *out);
/* "up", "down" (no thread can reach Redis) or "degraded" (some can);
 * always "up" for the memory store. */
const char *sl_metrics_store_status(sl_server *s);
void sl_metrics_release(sl_srv_worker *w);

/* reload.c */
int sl_reload_init(sl_server *s); /* first load; 0 or -1 */
void sl_reload_now(sl_server *s); /* SIGHUP, file change */
void sl_reload_start_watch(sl_server *s, uv_loop_t *loop);
void sl_reload_stop_watch(void);
void sl_reload_adopt(sl_srv_worker *w); /* on the worker: take current */
void sl_reload_release(sl_server *s);

#endif
