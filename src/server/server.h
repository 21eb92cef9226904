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

#include "redis/redis_proto.h"
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

/* --nodes auto: divide by the live nodes counted through Redis (nodes.c). */
#define SL_SRV_NODES_AUTO 0

/* --redis-failure: how a request is decided when Redis cannot decide it. */
enum { SL_SRV_FAIL_LOCAL, SL_SRV_FAIL_OPEN, SL_SRV_FAIL_CLOSED };
#define SL_SRV_N_POLICIES 3
/* Why a call failed (sluice_store_failures_total{reason}). */
enum { SL_SRV_FAIL_TIMEOUT, SL_SRV_FAIL_ERROR, SL_SRV_FAIL_BREAKER };
#define SL_SRV_N_REASONS 3
#define SL_SRV_DEFAULT_REDIS_TIMEOUT_MS 5
#define SL_SRV_DEFAULT_REDIS_BREAKER 3

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
    /* --store redis (store_redis.c). */
    atomic_uint_fast64_t store_failures[SL_SRV_N_REASONS];
    atomic_uint_fast64_t fallbacks[SL_SRV_N_POLICIES];
    atomic_uint_fast64_t breaker_opened, breaker_closed;
    /* Script calls sent to Redis (EVALSHA commands), and the decision
     * calls they carried: more calls than commands is batching. */
    atomic_uint_fast64_t store_commands, store_calls;
    atomic_int store_up; /* this thread's connection is usable */
} sl_srv_stats;

typedef struct sl_srv_op sl_srv_op;
typedef struct sl_srv_redis sl_srv_redis;
typedef struct sl_srv_local sl_srv_local;

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
    sl_srv_redis *redis; /* NULL: the memory store decides */
    sl_srv_op *op;       /* the request being run records its calls here */
    sl_nanos waited_ns;  /* since the first run of the request being run */
    sl_srv_local *local; /* the local policy's divided limits */
    uv_timer_t beat;     /* --nodes auto, thread 0: the heartbeat */
    int beating;
};

struct sl_server {
    sl_srv_config cfg;
    sl_store *store;       /* memory: the store, or Redis's local fallback */
    sl_store *redis_store; /* --store redis: builds calls, never connects */
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
    /* --nodes auto (nodes.c): this node's id, and the live nodes Redis
     * counted last (1 before any count). */
    char node_id[128];
    atomic_int nodes_live;
};

/* server.c: runs until SIGTERM or SIGINT; returns the exit status. */
int sl_server_run(const sl_srv_config *cfg);
sl_nanos sl_srv_now(sl_srv_worker *w);

/* store_redis.c.  Every decision of the front ends goes through
 * sl_srv_check(): as sl_check_costs() (flags 0 or SL_RECORD; each and
 * overall may be NULL) with a message in err on error, plus, with
 * --store redis, SL_SRV_PENDING: the call was recorded, the request will
 * be run again when its result is in (store_redis.c explains).  failure
 * (NULL: every item the default) is each item's rule's store_failure,
 * used only when Redis cannot decide. */
#define SL_SRV_PENDING (-1000)
int sl_srv_check(sl_srv_worker *w, const sl_check_item *items,
                 const int64_t *costs, size_t n, sl_nanos now, unsigned flags,
                 const sl_rule_failure *failure, sl_decision *each,
                 sl_decision *overall, char *err, size_t errlen);
int sl_srv_redis_init(sl_srv_worker *w);  /* on the worker's loop: 0 or -1 */

/* redis_cluster.c: a worker's links to a Redis Cluster's masters, for
 * store_redis.c (which it explains).  Links are hiredis async contexts
 * on the worker's loop; each is NULL when it cannot be made now. */
typedef struct sl_srv_cluster sl_srv_cluster;
struct redisAsyncContext;
/* timeout_ms: how long a link may take to connect (--redis-timeout). */
sl_srv_cluster *sl_srv_cluster_new(uv_loop_t *loop,
                                   const sl__redis_endpoint *ep,
                                   uint64_t timeout_ms);
void sl_srv_cluster_free(sl_srv_cluster *cl); /* NULL: no-op */
/* The link to the master of slot by the map (a refresh if unknown). */
struct redisAsyncContext *sl_srv_cluster_link(sl_srv_cluster *cl, int slot);
/* The link to (host, port), made if new. */
struct redisAsyncContext *sl_srv_cluster_link_to(sl_srv_cluster *cl,
                                                 const char *host, int port);
int sl_srv_cluster_owns(sl_srv_cluster *cl, const struct redisAsyncContext *ac);
/* The host of a link ("" if not one), for a redirection without one. */
const char *sl_srv_cluster_host_of(sl_srv_cluster *cl,
                                   const struct redisAsyncContext *ac);
/* A CLUSTER SLOTS reply from host becomes the map: 0 or -1. */
int sl_srv_cluster_set_map(sl_srv_cluster *cl, const redisReply *reply,
                           const char *host);
void sl_srv_cluster_refresh(sl_srv_cluster *cl); /* asynchronous */
/* Where the breaker's next probe connects (seeds and known masters in
 * turn); borrowed. */
const char *sl_srv_cluster_probe_target(sl_srv_cluster *cl, int *port);
/* What store_redis.c sent on a link, and each answer (or NULL reply)
 * it got: a link owing answers for a whole timeout is taken for dead. */
void sl_srv_cluster_sent(sl_srv_cluster *cl,
                         const struct redisAsyncContext *ac);
void sl_srv_cluster_replied(sl_srv_cluster *cl,
                            const struct redisAsyncContext *ac);
/* After calls timed out: drops the links that owe answers for a whole
 * timeout, reads the map again. */
void sl_srv_cluster_timed_out(sl_srv_cluster *cl);
/* Drops every link: their calls in flight get no reply. */
void sl_srv_cluster_close(sl_srv_cluster *cl);
/* sl_srv_redis_write_now on every connected link. */
void sl_srv_cluster_write_now(sl_srv_cluster *cl);
/* store_redis.c, for every hiredis connection of a worker (its own and
 * the cluster's links): attached to the loop with the poll hooks that
 * restart the poll handle only on a change of interest (0 or -1); and
 * the commands it holds written at once rather than at the next poll. */
int sl_srv_redis_attach(struct redisAsyncContext *ac, uv_loop_t *loop);
void sl_srv_redis_write_now(struct redisAsyncContext *ac);
void sl_srv_redis_stop(sl_srv_worker *w); /* drain: close once idle */
/* Writes the calls recorded so far now rather than when the loop next
 * polls: called after each connection's read, from outside any request. */
void sl_srv_redis_flush(sl_srv_worker *w);
const char *sl_srv_fail_name(int reason);
/* The thread's Redis connection for `key` (with a Cluster: its slot's
 * master) while it is usable, else NULL: for commands beside the
 * decisions (nodes.c). */
struct redisAsyncContext *sl_srv_redis_context(sl_srv_worker *w,
                                               const char *key);

/* nodes.c: --nodes auto.  sl_srv_nodes() is the local policy's divisor:
 * --nodes N, or the live nodes last counted (at least 1). */
int sl_srv_nodes(const sl_server *s);
void sl_srv_nodes_init(sl_srv_worker *w); /* on the loop, after redis_init */
void sl_srv_nodes_stop(sl_srv_worker *w);
void sl_srv_op_begin(sl_srv_worker *w, sl_srv_op *op);
int sl_srv_op_end(sl_srv_worker *w, sl_srv_op **opp, void *owner,
                  void (*done_cb)(void *owner));
void sl_srv_op_cancel(sl_srv_op *op);
int sl_srv_local_check(sl_srv_worker *w, const sl_check_item *items,
                       const int64_t *costs, size_t n, sl_nanos now,
                       unsigned flags, sl_decision *each, sl_decision *overall,
                       char *err, size_t errlen);
void sl_srv_local_release(sl_srv_worker *w);

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

void sl_route(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
              int *keep_alive);
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
    int kept; /* owned by the op waiting on Redis: release leaves it */
} sl_parsed_request;

/* 0, or -1 with the HTTP status, error code and message set.  Release
 * pr either way. */
int sl_parse_request(sl_srv_worker *w, const sl_http_request *req,
                     const char *hits_key, const char *desc_hits_key,
                     sl_parsed_request *pr, int *status, const char **code,
                     char *msg, size_t msglen);
void sl_parsed_request_release(sl_parsed_request *pr);
/* A request's parse outlives the run that went pending, so its replay
 * does not parse the body again: sl_srv_op_keep_parsed() gives a fresh
 * parse to the op being recorded (marking it kept), sl_srv_op_parsed()
 * lends the op's kept parse to the replay (1) or returns 0. */
void sl_srv_op_keep_parsed(sl_srv_worker *w, sl_parsed_request *pr);
int sl_srv_op_parsed(sl_srv_worker *w, sl_parsed_request *pr);
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
void sl_api_check(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                  int keep_alive);
void sl_api_lyft(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
                 int keep_alive);

/* auth_api.c: GET /v1/auth (any method), for nginx's auth_request. */
void sl_api_auth(sl_srv_worker *w, const sl_http_request *req, sl_buf *out,
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
